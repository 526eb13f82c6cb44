//! The broker's note of clients asking for topics that do not exist while it creates none
//! (`--auto-create-topics` off, the default): such a client only sees UNKNOWN_TOPIC_OR_PARTITION
//! and retries, so the broker log says who asked, for what, and the fix, once per topic per
//! `UNKNOWN_TOPIC_LOG_INTERVAL_MS` on each core. What it remembers is bounded
//! (`MAX_UNKNOWN_TOPICS_REMEMBERED`), per core (a thread of its own: no shared state).

use std::cell::RefCell;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// One line per topic per this interval on a core.
pub const UNKNOWN_TOPIC_LOG_INTERVAL_MS: u64 = 60_000;
/// Topics whose last line a core remembers; past it the oldest half is forgotten (a client
/// asking for ever new names gets a line for each, never more memory).
pub const MAX_UNKNOWN_TOPICS_REMEMBERED: usize = 1_024;

/// When each topic was last logged.
#[derive(Default)]
pub struct UnknownTopicLog {
    last_logged: HashMap<String, Instant>,
}

impl UnknownTopicLog {
    /// Whether a request for `topic` at `now` is to be logged (and, if so, notes it).
    pub fn due(&mut self, topic: &str, now: Instant) -> bool {
        let interval = Duration::from_millis(UNKNOWN_TOPIC_LOG_INTERVAL_MS);
        if let Some(at) = self.last_logged.get(topic) {
            if now.duration_since(*at) < interval {
                return false;
            }
        }
        if self.last_logged.len() >= MAX_UNKNOWN_TOPICS_REMEMBERED
            && !self.last_logged.contains_key(topic)
        {
            self.forget_oldest_half();
        }
        self.last_logged.insert(topic.to_string(), now);
        debug_assert!(self.last_logged.len() <= MAX_UNKNOWN_TOPICS_REMEMBERED);
        true
    }

    fn forget_oldest_half(&mut self) {
        let mut times: Vec<Instant> = self.last_logged.values().copied().collect();
        times.sort_unstable();
        let cut = times[times.len() / 2];
        self.last_logged.retain(|_, at| *at > cut);
    }
}

thread_local! {
    static LOG: RefCell<UnknownTopicLog> = RefCell::new(UnknownTopicLog::default());
}

/// Logs (rate-limited) that `client_id` asked for `topics`, which do not exist and are not
/// created.
pub fn note(client_id: &str, topics: &[String]) {
    let now = Instant::now();
    for topic in topics {
        if LOG.with(|l| l.borrow_mut().due(topic, now)) {
            tracing::warn!(
                client_id = %client_id,
                topic = %topic,
                "a client asked for topic '{topic}', which does not exist, and this broker \
                 creates topics only when asked (it answers UNKNOWN_TOPIC_OR_PARTITION): create \
                 it (`ringlog topic create {topic}`, or kafka-topics --create), or start the \
                 broker with --auto-create-topics (once per topic per {} s)",
                UNKNOWN_TOPIC_LOG_INTERVAL_MS / 1000
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn once_per_topic_per_interval_and_bounded() {
        let mut log = UnknownTopicLog::default();
        let t0 = Instant::now();
        assert!(log.due("a", t0));
        assert!(!log.due("a", t0 + Duration::from_secs(59)));
        assert!(log.due("b", t0 + Duration::from_secs(1)));
        assert!(log.due(
            "a",
            t0 + Duration::from_millis(UNKNOWN_TOPIC_LOG_INTERVAL_MS)
        ));
        for i in 0..3 * MAX_UNKNOWN_TOPICS_REMEMBERED {
            assert!(log.due(&format!("t{i}"), t0 + Duration::from_millis(i as u64)));
            assert!(log.last_logged.len() <= MAX_UNKNOWN_TOPICS_REMEMBERED);
        }
    }
}
