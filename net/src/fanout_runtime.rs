//! Fan-out in the broker (seed 000): the traits the `fanout` cursors need, implemented with
//! this core's partitions and the cross-core primitive, and the per-core reconciler that runs
//! one cursor per (parent partition owned here × child).

use std::collections::HashMap;
use std::rc::Rc;
use std::time::{Duration, Instant};

use engine::log::DueRead;
use engine::record_check::ValidBatch;
use engine::txn::AbortedTxn;
use engine::{Durability, LogError, Partition};
use fanout::cursor::{ChildSink, Clock, Cursor, CursorError, ParentLog, ReadError};
use fanout::offset_file::{self, CursorFile, Start, Stored};

use crate::core::CoreState;
use crate::cursor_registry::CursorKey;
use crate::route;

/// The parent partition, read on its owner core below its last stable offset (transaction
/// state is the `Partition`'s, not the log's); it also keeps the cursor's offset file.
pub struct LocalParent(pub Rc<Partition>);

impl ParentLog for LocalParent {
    fn high_watermark(&self) -> u64 {
        self.0.log().high_watermark()
    }

    fn last_stable_offset(&self) -> u64 {
        self.0.last_stable_offset()
    }

    fn aborted_transactions(&self, from: u64, to: u64) -> Vec<AbortedTxn> {
        self.0.aborted_transactions(from, to)
    }

    async fn read_due(
        &self,
        from: u64,
        max_bytes: usize,
        due_by_commit_ms: i64,
    ) -> Result<DueRead, ReadError> {
        self.0
            .log()
            .read_due(from, max_bytes, due_by_commit_ms)
            .await
            .map_err(|e| match e {
                LogError::OffsetOutOfRange {
                    log_start,
                    requested,
                    ..
                } if requested < log_start => ReadError::OutOfRange { log_start },
                other => ReadError::Log(other),
            })
    }

    async fn wait_for_data_after(&self, offset: u64, timeout: Duration) -> bool {
        self.0
            .log()
            .wait_for_data_after(offset, Instant::now() + timeout)
            .await
    }

    async fn commit_time_of(&self, offset: u64) -> Option<i64> {
        self.0.log().commit_time_of(offset).await.ok().flatten()
    }

    async fn store_position(&self, child: &str, file: &CursorFile) -> std::io::Result<()> {
        self.0.store_cursor_file(child, file.encode()).await
    }
}

/// The child topic: each batch is appended durably on the child partition's owner core.
pub struct CoreChild {
    pub state: Rc<CoreState>,
    pub child: String,
}

impl ChildSink for CoreChild {
    fn partitions(&self) -> Result<u32, CursorError> {
        self.state
            .meta
            .borrow()
            .topic(&self.child)
            .map(|t| t.partitions)
            .ok_or_else(|| CursorError::NoChild {
                child: self.child.clone(),
            })
    }

    async fn commit(&self, partition: u32, batch: Vec<u8>) -> Result<(), CursorError> {
        let not_served = || CursorError::ChildNotServed {
            child: self.child.clone(),
            partition,
        };
        let owner = self
            .state
            .meta
            .borrow()
            .assignment(&self.child, partition)
            .ok_or_else(not_served)?;
        if owner.node_id != self.state.node_id() {
            // Another node owns the child partition: one node RPC per commit (seed 000). A
            // dead owner stalls this bucket; the cursor retries, never another partition.
            let req = crate::node_rpc::NodeRequest::AppendChild {
                topic: self.child.clone(),
                partition,
                batch,
            };
            // A replicated child answers once its in-sync replicas have the batch: within
            // the request timeout, which the call outlasts.
            let timeout_ms =
                self.state.ctx.config.request_timeout_ms + crate::node_rpc::NODE_RPC_TIMEOUT_MS;
            return match crate::node_rpc::call_within(
                &self.state,
                owner.node_id,
                owner.core_index,
                &req,
                timeout_ms,
            )
            .await
            {
                Ok(crate::node_rpc::NodeResponse::Appended) => Ok(()),
                Ok(crate::node_rpc::NodeResponse::NotServed) => Err(not_served()),
                Ok(
                    other @ (crate::node_rpc::NodeResponse::HighWatermark(_)
                    | crate::node_rpc::NodeResponse::Done
                    | crate::node_rpc::NodeResponse::Code { .. }
                    | crate::node_rpc::NodeResponse::Moved { .. }
                    | crate::node_rpc::NodeResponse::MarkerWritten { .. }
                    | crate::node_rpc::NodeResponse::ReplicaRecords { .. }
                    | crate::node_rpc::NodeResponse::EpochEnd { .. }
                    | crate::node_rpc::NodeResponse::NotLeader { .. }
                    | crate::node_rpc::NodeResponse::Diverging { .. }
                    | crate::node_rpc::NodeResponse::BelowLogStart { .. }
                    | crate::node_rpc::NodeResponse::ReplicaBatch { .. }),
                ) => Err(CursorError::ChildRemote {
                    partition,
                    node_id: owner.node_id,
                    reason: format!("answered an append with {other:?}"),
                }),
                Ok(crate::node_rpc::NodeResponse::Failed { reason }) => {
                    Err(CursorError::ChildRemote {
                        partition,
                        node_id: owner.node_id,
                        reason,
                    })
                }
                Err(e) => Err(CursorError::ChildRemote {
                    partition,
                    node_id: owner.node_id,
                    reason: e.to_string(),
                }),
            };
        }
        match append_child_here(&self.state, &self.child, partition, batch).await {
            Ok(true) => Ok(()),
            Ok(false) => Err(not_served()),
            Err(AppendHereError::Log(source)) => {
                Err(CursorError::ChildAppend { partition, source })
            }
            Err(AppendHereError::CoreGone(source)) => {
                Err(CursorError::ChildCoreGone { partition, source })
            }
            Err(AppendHereError::NotReplicated(reason)) => {
                Err(CursorError::ChildNotReplicated { partition, reason })
            }
        }
    }
}

/// Serves another node's call (`crate::node_rpc`; both calls serve fan-out) on this core:
/// the answer's rkyv bytes. A body that does not validate is answered `Failed`.
/// Answers another node's fan-out call (`AppendChild`, `HighWatermark`).
pub async fn serve_node_request(
    state: &Rc<CoreState>,
    req: crate::node_rpc::NodeRequest,
) -> crate::node_rpc::NodeResponse {
    use crate::node_rpc::{NodeRequest, NodeResponse};
    match req {
        NodeRequest::AppendChild {
            topic,
            partition,
            batch,
        } => match append_child_here(state, &topic, partition, batch).await {
            Ok(true) => NodeResponse::Appended,
            Ok(false) => NodeResponse::NotServed,
            Err(e) => NodeResponse::Failed {
                reason: e.to_string(),
            },
        },
        NodeRequest::HighWatermark { topic, partition } => {
            match high_watermark_here(state, &topic, partition).await {
                Some(hwm) => NodeResponse::HighWatermark(hwm),
                None => NodeResponse::NotServed,
            }
        }
        other => NodeResponse::Failed {
            reason: format!("not a fan-out call: {other:?}"),
        },
    }
}

/// The high watermark of `topic`/`partition` on the core of this node that owns it; `None`
/// when no core here serves it.
pub async fn high_watermark_here(
    state: &Rc<CoreState>,
    topic: &str,
    partition: u32,
) -> Option<u64> {
    let core = state.owner_core(topic, partition)?;
    let topic = topic.to_string();
    let hwm = move |s: Rc<CoreState>| async move {
        crate::opening::partition(&s, &topic, partition)
            .await
            .map(|x| x.log().high_watermark())
    };
    route::on_core(state, core, hwm).await.ok().flatten()
}

/// Why [`append_child_here`] failed.
#[derive(Debug, thiserror::Error)]
pub enum AppendHereError {
    #[error(transparent)]
    Log(#[from] engine::PartitionError),
    #[error(transparent)]
    CoreGone(#[from] route::CoreGone),
    /// A replicated child's in-sync replicas did not take the batch (acks=all semantics).
    #[error("{0}")]
    NotReplicated(String),
}

/// Appends a fan-out batch durably to `child`/`partition` on the core of this node that owns
/// it (a local cursor, or a node RPC from the parent's node); `Ok(false)` when no core here
/// serves it. A replicated child is written as an acks=all produce: only on its leader, only
/// while its ISR holds `min.insync.replicas` (checked before the append, so a refused commit
/// writes nothing), and the commit counts once every in-sync replica has the batch durably,
/// so the cursor never advances past records a failover of the child could lose.
pub async fn append_child_here(
    state: &Rc<CoreState>,
    child: &str,
    partition: u32,
    batch: Vec<u8>,
) -> Result<bool, AppendHereError> {
    let Some(core) = state.owner_core(child, partition) else {
        return Ok(false);
    };
    let child = child.to_string();
    let append = move |s: Rc<CoreState>| async move {
        if !s.leads(&child, partition) {
            return Ok(false);
        }
        let key = (child, partition);
        if let Some(why) = crate::replica::check_min_insync(&s, &key) {
            return Err(AppendHereError::NotReplicated(why));
        }
        let Some(part) = crate::opening::partition(&s, &key.0, partition).await else {
            return Ok(false);
        };
        let valid = ValidBatch::new(&batch, part.log().batch_rules()).map_err(|source| {
            engine::PartitionError::from(LogError::InvalidBatch {
                dir: part.dir().display().to_string(),
                source,
            })
        })?;
        let stored = part.produce(valid, Durability::Sync).await?;
        crate::replica::replicate_own_write(&s, &key, &part, stored.last_offset)
            .await
            .map_err(|(_, why)| AppendHereError::NotReplicated(why))?;
        Ok(true)
    };
    route::on_core(state, core, append).await?
}

/// The core's clock (the one commit times come from, so the delay gate compares like with
/// like) and glommio's timer.
pub struct GlommioClock(pub Rc<dyn engine::clock::Clock>);

impl Clock for GlommioClock {
    fn now_ms(&self) -> i64 {
        self.0.now_ms()
    }

    async fn sleep(&self, d: Duration) {
        glommio::timer::sleep(d).await
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
    // Desired: links × parent partitions this core serves (open, or not opened since start:
    // a cursor opens its parent).
    let desired: HashMap<CursorKey, (u64, u64)> = {
        let m = state.meta.borrow();
        let parts = state.data.partitions.borrow();
        let mut d = HashMap::new();
        for link in m.fanout_links.links.values() {
            for (p, attach) in link.attach_offsets.iter().enumerate() {
                let key = (link.parent.clone(), p as u32);
                // A replicated parent's cursor runs on its leader only.
                let here = parts.contains_key(&key) || state.data.openings.is_unopened(&key);
                if here && state.leads(&key.0, key.1) {
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
        .data
        .cursors
        .borrow()
        .running
        .keys()
        .filter(|k| !desired.contains_key(*k))
        .cloned()
        .collect();
    for k in stale {
        if let Some((task, _, _)) = state.data.cursors.borrow_mut().running.remove(&k) {
            task.cancel();
            tracing::info!(parent = %k.0, partition = k.1, child = %k.2, "fan-out cursor stopped");
        }
    }
    for (key, (attach, delay_ms)) in desired {
        if state.data.cursors.borrow().running.contains_key(&key) {
            continue;
        }
        let (parent, p, child, epoch) = key.clone();
        let Some(part) = crate::opening::partition(state, &parent, p).await else {
            continue;
        };
        let stored = Stored::from_load(part.load_cursor_file(&child).await);
        let start = match offset_file::decide_start(&stored, &epoch, attach) {
            Start::Resume(n) | Start::Fresh(n) => n,
            Start::AnchorNeedsConfirmation(n) => {
                // Overwriting another epoch's file is the only destructive step: the raft
                // leader must confirm that this epoch is current (seed 000).
                match confirm_current(state).await {
                    Ok(()) => {
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
        // Loading the file (and confirming the epoch) awaited: the partition may have been
        // closed, or closed and reopened, meanwhile; the next pass starts it afresh.
        if !state
            .partition_if_open(&parent, p)
            .is_some_and(|now| Rc::ptr_eq(&now, &part))
        {
            continue;
        }
        let cursor = Cursor::new(
            LocalParent(part.partition.clone()),
            CoreChild {
                state: state.clone(),
                child: child.clone(),
            },
            GlommioClock(state.data.storage.clock()),
            child.clone(),
            epoch,
            delay_ms,
            start,
        );
        let stats = cursor.stats();
        let task = glommio::spawn_local(cursor.run()).detach();
        tracing::info!(%parent, partition = p, %child, start, delay_ms, core = state.core, "fan-out cursor started");
        state
            .data
            .cursors
            .borrow_mut()
            .running
            .insert(key, (task, stats, delay_ms));
    }
    if pass.is_multiple_of(fanout::ORPHAN_SWEEP_EVERY_PASSES) {
        sweep_orphans(state).await;
    }
}

/// The longest a destructive fan-out step waits for this core to apply what the metastore
/// leader confirmed; past it the step defers to the next pass.
const CONFIRMED_APPLY_TIMEOUT_MS: u64 = 5_000;

/// Makes this core's copy of the metadata at least as new as a state the metastore leader
/// confirmed with a quorum (read index, then wait until this core applied it), so that a stale
/// copy never decides a destructive step (seed 000: a stale replica fabricated an epoch
/// mismatch). An error means: defer, never act.
async fn confirm_current(state: &Rc<CoreState>) -> Result<(), String> {
    let index = state
        .ctx
        .meta
        .ensure_linearizable()
        .await
        .map_err(|e| e.to_string())?;
    let wait = state.wait_applied(index);
    let limit = Duration::from_millis(CONFIRMED_APPLY_TIMEOUT_MS);
    glommio::timer::timeout(limit, async {
        wait.await;
        Ok(())
    })
    .await
    .map_err(|_| {
        format!(
            "this core had not applied the confirmed index {index} within {CONFIRMED_APPLY_TIMEOUT_MS} ms (applied {})",
            state.applied_index()
        )
    })
}

/// Deletes cursor files of children no longer linked to a parent partition of this core, once
/// the raft leader confirms the metadata (a stale replica must not delete a live cursor's file).
async fn sweep_orphans(state: &Rc<CoreState>) {
    let parts: Vec<_> = state.data.partitions.borrow().values().cloned().collect();
    let mut candidates = Vec::new();
    for p in parts {
        let children = p.cursor_files().await.unwrap_or_default();
        let m = state.meta.borrow();
        for c in children {
            if m.fanout_links
                .of_child(&c)
                .is_none_or(|l| l.parent != p.topic)
            {
                candidates.push((p.clone(), c));
            }
        }
    }
    if candidates.is_empty() {
        return;
    }
    if let Err(e) = confirm_current(state).await {
        tracing::info!(files = candidates.len(), error = %e, "orphan cursor files kept until the metastore leader confirms");
        return;
    }
    // Judged again on the confirmed copy: a link made meanwhile keeps its file.
    let m = state.meta.borrow().fanout_links.clone();
    candidates.retain(|(p, c)| m.of_child(c).is_none_or(|l| l.parent != p.topic));
    for (p, child) in candidates {
        if let Err(e) = p.remove_cursor_file(&child).await {
            tracing::warn!(dir = %p.dir().display(), %child, error = %e, "sweeping orphan cursor file");
        }
    }
}
