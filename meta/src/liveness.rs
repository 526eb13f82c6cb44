//! Broker liveness (issue #17): which registered brokers missed their session. The metastore
//! leader runs [`crate::node`]'s fence loop over a [`LivenessTracker`]: it sees every applied
//! registration and heartbeat (as a subscriber of the state machine) and proposes
//! `FenceBroker` for a broker silent longer than the session timeout. The state machine's
//! breaker ([`crate::state::max_fenced_brokers`]) refuses a fence that would fence a quorum.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::state::{BrokerRegistration, Change};

/// The broker registry, by node id (`MetaState::brokers`).
pub type Brokers = BTreeMap<u64, BrokerRegistration>;

/// When each registered broker was last heard of, on this node's clock (not replicated).
#[derive(Debug, Default)]
pub struct LivenessTracker {
    /// node id -> (incarnation, last registration or heartbeat applied here).
    seen: BTreeMap<u64, (u64, Instant)>,
}

impl LivenessTracker {
    /// Every broker of `brokers` counts as heard of at `now` (a grace of one session).
    pub fn new(brokers: &Brokers, now: Instant) -> Self {
        let mut t = Self::default();
        t.reset(brokers, now);
        t
    }

    /// Forgets what was seen: every broker of `brokers` counts as heard of at `now`. Called
    /// when this node becomes the leader (it may have been cut off before) and after a
    /// snapshot replaced the state.
    pub fn reset(&mut self, brokers: &Brokers, now: Instant) {
        self.seen = brokers
            .values()
            .map(|b| (b.node_id, (b.incarnation, now)))
            .collect();
    }

    /// Records an applied change.
    pub fn observe(&mut self, change: &Change, now: Instant) {
        match change {
            Change::BrokerRegistered { broker } => {
                self.seen.insert(broker.node_id, (broker.incarnation, now));
            }
            Change::BrokerHeartbeat {
                node_id,
                incarnation,
                ..
            } => {
                self.seen.insert(*node_id, (*incarnation, now));
            }
            Change::SnapshotInstalled { state } => self.reset(&state.brokers, now),
            Change::Batch(changes) => {
                for c in changes {
                    self.observe(c, now);
                }
            }
            _ => {}
        }
    }

    /// The unfenced brokers of `brokers` not heard of for longer than `session_timeout`, with
    /// their incarnations, oldest silence first.
    pub fn due_fences(
        &self,
        brokers: &Brokers,
        now: Instant,
        session_timeout: Duration,
    ) -> Vec<(u64, u64)> {
        let mut due: Vec<(Instant, u64, u64)> = brokers
            .values()
            .filter(|b| !b.fenced)
            .filter_map(|b| {
                let seen = match self.seen.get(&b.node_id) {
                    Some((inc, at)) if *inc == b.incarnation => *at,
                    // Registered under an incarnation not seen here yet: counts from now on.
                    _ => return None,
                };
                (now.saturating_duration_since(seen) > session_timeout).then_some((
                    seen,
                    b.node_id,
                    b.incarnation,
                ))
            })
            .collect();
        due.sort();
        due.into_iter().map(|(_, id, inc)| (id, inc)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::{Command, MetaState};

    fn register(s: &mut MetaState, node_id: u64, incarnation: u64) -> Change {
        s.apply(&Command::RegisterBroker {
            broker: Box::new(BrokerRegistration {
                node_id,
                host: "127.0.0.1".into(),
                port: 9092 + node_id as u16,
                core_ports: vec![],
                cores: 2,
                rack: None,
                incarnation,
                fenced: false,
            }),
        })
        .unwrap()
    }

    #[test]
    fn a_silent_broker_is_due_and_the_breaker_keeps_a_quorum() {
        let t0 = Instant::now();
        let timeout = Duration::from_secs(9);
        let mut s = MetaState::default();
        let mut t = LivenessTracker::new(&s.brokers, t0);
        for id in 1..=3 {
            let c = register(&mut s, id, 100 + id);
            t.observe(&c, t0);
        }
        assert!(t.due_fences(&s.brokers, t0 + timeout, timeout).is_empty());
        // Nodes 1 and 2 heartbeat; 3 is silent.
        let later = t0 + Duration::from_secs(5);
        for id in 1..=2 {
            let c = s
                .apply(&Command::BrokerHeartbeat {
                    node_id: id,
                    incarnation: 100 + id,
                })
                .unwrap();
            t.observe(&c, later);
        }
        let at = t0 + Duration::from_secs(10);
        assert_eq!(t.due_fences(&s.brokers, at, timeout), vec![(3, 103)]);
        s.apply(&Command::FenceBroker {
            node_id: 3,
            incarnation: 103,
        })
        .unwrap();
        assert!(s.brokers[&3].fenced);
        assert!(
            t.due_fences(&s.brokers, at, timeout).is_empty(),
            "fenced already"
        );
        // The breaker: with one of three fenced, a second fence would fence a quorum.
        let e = s
            .apply(&Command::FenceBroker {
                node_id: 2,
                incarnation: 102,
            })
            .unwrap_err();
        assert!(e.to_string().contains("quorum"), "{e}");
        // A stale incarnation is refused; the right one unfences.
        assert!(s
            .apply(&Command::BrokerHeartbeat {
                node_id: 3,
                incarnation: 1
            })
            .is_err());
        let c = s
            .apply(&Command::BrokerHeartbeat {
                node_id: 3,
                incarnation: 103,
            })
            .unwrap();
        assert_eq!(
            c,
            Change::BrokerHeartbeat {
                node_id: 3,
                incarnation: 103,
                unfenced: true
            }
        );
        assert!(!s.brokers[&3].fenced);
        // A re-registration (a restart) is a new incarnation; the old one's fence is refused.
        register(&mut s, 3, 999);
        assert!(s
            .apply(&Command::FenceBroker {
                node_id: 3,
                incarnation: 103
            })
            .is_err());
    }

    #[test]
    fn one_broker_alone_is_never_fenced() {
        let mut s = MetaState::default();
        register(&mut s, 1, 7);
        assert!(s
            .apply(&Command::FenceBroker {
                node_id: 1,
                incarnation: 7
            })
            .is_err());
        assert_eq!(crate::state::max_fenced_brokers(1), 0);
        assert_eq!(crate::state::max_fenced_brokers(3), 1);
        assert_eq!(crate::state::max_fenced_brokers(5), 2);
    }
}
