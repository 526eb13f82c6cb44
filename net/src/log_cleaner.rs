//! Each core's log cleaner (`cleanup.policy=compact`): one task, in a task queue of its own
//! with a small share of the core (`CLEANER_TASK_QUEUE_SHARES`), so produce and fetch run
//! first whenever both have work. Each round it takes the due partition with the highest
//! dirty ratio and runs one pass (`engine::Partition::clean`); when none is due it sleeps
//! `log-cleaner-backoff-ms`; a partition whose pass failed rests `CLEANER_FAILED_RETRY_MS`. I/O is capped by `log-cleaner-io-max-bytes-per-second`.

use std::collections::HashMap;
use std::rc::Rc;
use std::time::{Duration, Instant};

use engine::cleaner::Throttle;

use crate::core::{CoreState, OwnedPartition};
use crate::metrics::CoreMetrics;

/// Share of a core the cleaner's task queue gets against the default queue's 1000 when both
/// are busy.
pub const CLEANER_TASK_QUEUE_SHARES: usize = 100;

/// Starts the cleaner of this core in its own task queue.
pub fn spawn(state: Rc<CoreState>) {
    let queue = glommio::executor().create_task_queue(
        glommio::Shares::Static(CLEANER_TASK_QUEUE_SHARES),
        glommio::Latency::NotImportant,
        "log-cleaner",
    );
    match glommio::spawn_local_into(cleaner_loop(state.clone()), queue) {
        Ok(task) => {
            task.detach();
        }
        Err(e) => {
            tracing::warn!(core = state.core, error = %e, "cannot create the cleaner's task queue; the cleaner runs in the default queue");
            glommio::spawn_local(cleaner_loop(state)).detach();
        }
    }
}

/// A partition whose pass failed (or could do nothing) waits this long before it is taken
/// again, so one broken log does not keep the others of its core from being cleaned.
pub const CLEANER_FAILED_RETRY_MS: u64 = 60_000;

/// Partitions waiting out a failed pass, until when. At most one entry per partition of the
/// core; an entry goes when its time has passed.
type Resting = HashMap<(String, u32), Instant>;

/// The partition to clean now: the due one with the highest dirty ratio, among those not
/// resting after a failed pass.
fn pick(state: &CoreState, now_ms: i64, resting: &mut Resting) -> Option<Rc<OwnedPartition>> {
    let now = Instant::now();
    resting.retain(|_, until| *until > now);
    let parts: Vec<Rc<OwnedPartition>> = state.data.partitions.borrow().values().cloned().collect();
    parts
        .into_iter()
        .filter(|p| !resting.contains_key(&(p.topic.clone(), p.index)))
        .filter_map(|p| {
            let info = p.log().dirty_info(now_ms)?;
            info.due.map(|_| (info.dirty_ratio, p))
        })
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, p)| p)
}

async fn cleaner_loop(state: Rc<CoreState>) {
    let cfg = &state.ctx.config;
    let backoff = Duration::from_millis(cfg.log_cleaner_backoff_ms.max(1));
    let throttle = Throttle::new(cfg.log_cleaner_io_max_bytes_per_second);
    let mut resting = Resting::new();
    let rest = Duration::from_millis(CLEANER_FAILED_RETRY_MS);
    loop {
        let now = state.data.storage.clock().now_ms();
        let Some(p) = pick(&state, now, &mut resting) else {
            glommio::timer::sleep(backoff).await;
            continue;
        };
        match p
            .clean(now, cfg.log_cleaner_dedupe_buffer_bytes, &throttle)
            .await
        {
            Ok(Some(s)) => {
                let m = &state.metrics;
                CoreMetrics::add(&m.cleaner_passes, 1);
                CoreMetrics::add(&m.cleaner_bytes_read, s.bytes_read);
                CoreMetrics::add(&m.cleaner_bytes_written, s.bytes_written);
                CoreMetrics::add(&m.cleaner_records_removed, s.records_removed);
                if s.abandoned {
                    glommio::timer::sleep(backoff).await;
                }
            }
            // Due but nothing could be done (the map cannot hold one batch): try later.
            Ok(None) => {
                resting.insert((p.topic.clone(), p.index), Instant::now() + rest);
            }
            Err(e) => {
                tracing::warn!(topic = %p.topic, partition = p.index, error = %e, retry_ms = CLEANER_FAILED_RETRY_MS, "cleaner pass failed; the partition is retried later, the others go on");
                resting.insert((p.topic.clone(), p.index), Instant::now() + rest);
            }
        }
    }
}
