//! Fan-out in the broker (seed 000): the traits the `fanout` cursors need, implemented with
//! this core's partitions and the cross-core primitive, and the per-core reconciler that runs
//! one cursor per (parent partition owned here × child).

use std::collections::HashMap;
use std::rc::Rc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use engine::log::DueRead;
use engine::{Durability, LogError, PartitionLog};
use fanout::cursor::{ChildSink, Clock, Cursor, CursorStats, ParentLog, ReadError};
use fanout::offset_file::{self, Start};

use crate::core::CoreState;

/// The parent partition's log, read on its owner core.
pub struct LocalParent(pub Rc<PartitionLog>);

impl ParentLog for LocalParent {
    fn high_watermark(&self) -> u64 {
        self.0.high_watermark()
    }

    async fn read_due(
        &self,
        from: u64,
        max_bytes: usize,
        due_by_commit_ms: i64,
    ) -> Result<DueRead, ReadError> {
        self.0
            .read_due(from, max_bytes, due_by_commit_ms)
            .await
            .map_err(|e| match e {
                LogError::OffsetOutOfRange {
                    log_start,
                    requested,
                    ..
                } if requested < log_start => ReadError::OutOfRange { log_start },
                other => ReadError::Other(other.to_string()),
            })
    }

    async fn wait_for_data_after(&self, offset: u64, timeout: Duration) -> bool {
        self.0
            .wait_for_data_after(offset, Instant::now() + timeout)
            .await
    }

    async fn commit_time_of(&self, offset: u64) -> Option<i64> {
        self.0.commit_time_of(offset).await.ok().flatten()
    }
}

/// The child topic: each batch is appended durably on the child partition's owner core.
pub struct CoreChild {
    pub state: Rc<CoreState>,
    pub child: String,
}

impl ChildSink for CoreChild {
    fn partitions(&self) -> Result<u32, String> {
        self.state
            .meta
            .borrow()
            .topic(&self.child)
            .map(|t| t.partitions)
            .ok_or_else(|| format!("child topic {} does not exist", self.child))
    }

    async fn commit(&self, partition: u32, batch: Vec<u8>) -> Result<(), String> {
        let core = self
            .state
            .owner_core(&self.child, partition)
            .ok_or_else(|| format!("{}/{partition} has no owner on this node", self.child))?;
        let child = self.child.clone();
        let append = move |s: Rc<CoreState>| async move {
            let part = s
                .partition(&child, partition)
                .ok_or_else(|| format!("{child}/{partition} is not open on core {}", s.core))?;
            part.log
                .append(&batch, Durability::Sync)
                .await
                .map(|_| ())
                .map_err(|e| e.to_string())
        };
        if core == self.state.core {
            append(self.state.clone()).await
        } else {
            self.state
                .shards
                .invoke_on(core, append)
                .await
                .map_err(|e| e.to_string())?
        }
    }
}

pub struct GlommioClock;

impl Clock for GlommioClock {
    fn now_ms(&self) -> i64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0)
    }

    async fn sleep(&self, d: Duration) {
        glommio::timer::sleep(d).await
    }
}

/// (parent, parent partition, child, epoch)
type CursorKey = (String, u32, String, String);

/// The cursors running on one core, with their stats for metrics.
#[derive(Default)]
pub struct Cursors {
    running: HashMap<CursorKey, (glommio::task::JoinHandle<()>, Rc<CursorStats>, u64)>,
}

impl Cursors {
    /// (parent, partition, child, delay_ms, stats) of every running cursor.
    pub fn stats(&self) -> Vec<(String, u32, String, u64, Rc<CursorStats>)> {
        self.running
            .iter()
            .map(|((p, i, c, _), (_, s, d))| (p.clone(), *i, c.clone(), *d, s.clone()))
            .collect()
    }
}

/// Starts and stops this core's cursors every `fanout::RECONCILE_INTERVAL`.
pub async fn reconcile_loop(state: Rc<CoreState>) {
    let mut pass: u64 = 0;
    loop {
        reconcile(&state, pass).await;
        pass += 1;
        glommio::timer::sleep(fanout::RECONCILE_INTERVAL).await;
    }
}

async fn reconcile(state: &Rc<CoreState>, pass: u64) {
    // Desired: links × parent partitions open on this core.
    let desired: HashMap<CursorKey, (u64, u64)> = {
        let m = state.meta.borrow();
        let parts = state.partitions.borrow();
        let mut d = HashMap::new();
        for link in m.fanout_links.links.values() {
            for (p, attach) in link.attach_offsets.iter().enumerate() {
                if parts.contains_key(&(link.parent.clone(), p as u32)) {
                    d.insert(
                        (
                            link.parent.clone(),
                            p as u32,
                            link.child.clone(),
                            link.epoch.clone(),
                        ),
                        (*attach, link.delay_ms),
                    );
                }
            }
        }
        d
    };
    let stale: Vec<CursorKey> = state
        .cursors
        .borrow()
        .running
        .keys()
        .filter(|k| !desired.contains_key(*k))
        .cloned()
        .collect();
    for k in stale {
        if let Some((task, _, _)) = state.cursors.borrow_mut().running.remove(&k) {
            task.cancel();
            tracing::info!(parent = %k.0, partition = k.1, child = %k.2, "fan-out cursor stopped");
        }
    }
    for (key, (attach, delay_ms)) in desired {
        if state.cursors.borrow().running.contains_key(&key) {
            continue;
        }
        let (parent, p, child, epoch) = key.clone();
        let Some(part) = state.partition(&parent, p) else {
            continue;
        };
        let dir = part.log.dir().to_path_buf();
        let start = match offset_file::decide_start(
            &offset_file::load(&dir, &child),
            &epoch,
            attach,
        ) {
            Start::Resume(n) | Start::Fresh(n) => n,
            Start::AnchorNeedsConfirmation(n) => {
                // Overwriting another epoch's file is the only destructive step: the raft
                // leader must confirm that this epoch is current (seed 000).
                match state.ctx.meta.ensure_linearizable().await {
                    Ok(_) => {
                        let current = state
                            .meta
                            .borrow()
                            .fanout_links
                            .of_child(&child)
                            .map(|l| l.epoch.clone());
                        if current.as_deref() != Some(epoch.as_str()) {
                            continue;
                        }
                        n
                    }
                    Err(e) => {
                        tracing::info!(%parent, partition = p, %child, error = %e, "epoch not confirmed; cursor deferred");
                        continue;
                    }
                }
            }
        };
        let cursor = Cursor::new(
            LocalParent(part.log.clone()),
            CoreChild {
                state: state.clone(),
                child: child.clone(),
            },
            GlommioClock,
            dir,
            child.clone(),
            epoch,
            delay_ms,
            start,
        );
        let stats = cursor.stats();
        let task = glommio::spawn_local(cursor.run()).detach();
        tracing::info!(%parent, partition = p, %child, start, delay_ms, core = state.core, "fan-out cursor started");
        state
            .cursors
            .borrow_mut()
            .running
            .insert(key, (task, stats, delay_ms));
    }
    if pass.is_multiple_of(fanout::ORPHAN_SWEEP_EVERY_PASSES) {
        sweep_orphans(state).await;
    }
}

/// Deletes cursor files of children no longer linked to a parent partition of this core, once
/// the raft leader confirms the metadata (a stale replica must not delete a live cursor's file).
async fn sweep_orphans(state: &Rc<CoreState>) {
    let candidates: Vec<(std::path::PathBuf, String)> = {
        let m = state.meta.borrow();
        let parts = state.partitions.borrow();
        parts
            .values()
            .flat_map(|p| {
                let dir = p.log.dir().to_path_buf();
                offset_file::children_with_files(&dir)
                    .unwrap_or_default()
                    .into_iter()
                    .filter(|c| {
                        m.fanout_links
                            .of_child(c)
                            .is_none_or(|l| l.parent != p.topic)
                    })
                    .map(move |c| (dir.clone(), c))
            })
            .collect()
    };
    if candidates.is_empty() || state.ctx.meta.ensure_linearizable().await.is_err() {
        return;
    }
    for (dir, child) in candidates {
        if let Err(e) = offset_file::remove(&dir, &child) {
            tracing::warn!(dir = %dir.display(), %child, error = %e, "sweeping orphan cursor file");
        }
    }
}
