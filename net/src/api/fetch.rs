//! Fetch: read stored batches from each partition's owner core; long-poll until `min_bytes`
//! are there or `max_wait_ms` passes, woken by appends (no polling). Topics by name (v≤12) or
//! by topic ID (v13+). A partition with no records carries an empty records field, never null.
//! A partition is read on its leader only, at the client's `current_leader_epoch` (fenced
//! otherwise, `replica::check_leader_epoch`); a `last_fetched_epoch` that ended before the
//! fetch offset on this leader answers its diverging epoch instead of records (KIP-320).

use std::collections::HashSet;
use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use engine::join::{first_of, join_all};
use engine::LogError;
use kafka_protocol::messages::fetch_response::{
    AbortedTransaction, EpochEndOffset, FetchableTopicResponse, PartitionData,
};
use kafka_protocol::messages::{FetchRequest, FetchResponse, ProducerId, TopicName};

use super::str_bytes;
use crate::codes;
use crate::config::MAX_FETCH_WAIT_MS;
use crate::core::CoreState;
use crate::route::Scatter;

#[derive(Clone)]
struct ReadItem {
    topic: String,
    partition: u32,
    offset: i64,
    max_bytes: usize,
    /// `isolation_level` 1: only below the last stable offset, with the aborted transactions.
    read_committed: bool,
    /// The client's idea of the leader epoch (v9+, KIP-320; -1: none): fenced when stale.
    current_leader_epoch: i32,
    /// The epoch of the last batch the client read (v12+; -1: none): a fetch offset past
    /// where that epoch ends on this leader answers a diverging epoch instead of records.
    last_fetched_epoch: i32,
}

/// How often a read_committed long-poll looks again while the data past its offset is not
/// stable yet (an open transaction holds the last stable offset back; nothing wakes on it).
const UNSTABLE_POLL_MS: u64 = 10;

/// A partition's answer with `code` and no offsets (-1), as Kafka answers an error (an
/// OFFSET_OUT_OF_RANGE too); no aborted transactions (null: read_committed answers set them).
fn partition_error(index: i32, code: i16) -> PartitionData {
    PartitionData::default()
        .with_partition_index(index)
        .with_error_code(code)
        .with_high_watermark(-1)
        .with_last_stable_offset(-1)
        .with_log_start_offset(-1)
        .with_aborted_transactions(None)
        .with_records(Some(Bytes::new()))
}

pub async fn handle(state: &Rc<CoreState>, version: i16, req: FetchRequest) -> FetchResponse {
    let wait_ms = (req.max_wait_ms.max(0) as u64).min(MAX_FETCH_WAIT_MS);
    let deadline = Instant::now() + Duration::from_millis(wait_ms);
    let min_bytes = req.min_bytes.max(0) as usize;
    let max_bytes = response_cap_bytes(&req, &state.ctx.config);
    let read_committed = req.isolation_level == 1;

    let mut topics: Vec<FetchableTopicResponse> = Vec::with_capacity(req.topics.len());
    let mut scatter: Scatter<ReadItem> = Scatter::default();
    // A partition named twice is read once: the later copies answer empty.
    let mut seen: HashSet<(String, i32)> = HashSet::new();
    for (t, ft) in req.topics.into_iter().enumerate() {
        let name: Option<String> = if version >= 13 {
            state.topic_name_by_id(ft.topic_id)
        } else {
            Some(ft.topic.0.to_string())
        };
        let mut parts = Vec::with_capacity(ft.partitions.len());
        for (p, fp) in ft.partitions.into_iter().enumerate() {
            let owner = name
                .as_ref()
                .filter(|_| fp.partition >= 0)
                .and_then(|n| state.owner_core(n, fp.partition as u32));
            match (&name, owner) {
                (None, _) => parts.push(partition_error(fp.partition, codes::UNKNOWN_TOPIC_ID)),
                (Some(n), None) => parts.push(partition_error(
                    fp.partition,
                    super::not_owned(state, n, fp.partition),
                )),
                (Some(n), Some(_)) if !seen.insert((n.clone(), fp.partition)) => {
                    parts.push(partition_error(fp.partition, codes::NONE));
                }
                (Some(n), Some(core)) => {
                    parts.push(partition_error(fp.partition, codes::NONE));
                    scatter.push(
                        core,
                        (t, p),
                        ReadItem {
                            topic: n.clone(),
                            partition: fp.partition as u32,
                            offset: fp.fetch_offset,
                            max_bytes: (fp.partition_max_bytes.max(0) as usize).min(max_bytes),
                            read_committed,
                            current_leader_epoch: fp.current_leader_epoch,
                            last_fetched_epoch: fp.last_fetched_epoch,
                        },
                    );
                }
            }
        }
        let mut resp = FetchableTopicResponse::default().with_partitions(parts);
        if version >= 13 {
            resp.topic_id = ft.topic_id;
        } else {
            resp.topic = TopicName(str_bytes(name.unwrap_or_default()));
        }
        topics.push(resp);
    }

    loop {
        let results = scatter
            .gather(state, move |s, items| read_local(s, items, max_bytes))
            .await;
        let mut total = 0usize;
        let mut errors = false;
        for ((t, p), r) in results {
            let index = topics[t].partitions[p].partition_index;
            let data = r.unwrap_or_else(|_| partition_error(index, codes::NOT_LEADER_OR_FOLLOWER));
            total += data.records.as_ref().map_or(0, |r| r.len());
            errors |= data.error_code != codes::NONE;
            topics[t].partitions[p] = data;
        }
        if scatter.is_empty() || total >= min_bytes || errors || Instant::now() >= deadline {
            break;
        }
        scatter
            .first(state, move |s, items| wait_local(s, items, deadline))
            .await;
    }

    // The response's max_bytes: whole partitions in request order; the first non-empty one is
    // always included (as Kafka does), later ones are emptied once the limit is passed.
    let mut used = 0usize;
    for topic in &mut topics {
        for data in &mut topic.partitions {
            let len = data.records.as_ref().map_or(0, |r| r.len());
            if used > 0 && used + len > max_bytes {
                data.records = Some(Bytes::new());
                data.aborted_transactions = read_committed.then(Vec::new);
            } else {
                used += len;
            }
            if read_committed && data.aborted_transactions.is_none() {
                data.aborted_transactions = Some(Vec::new());
            }
        }
    }
    FetchResponse::default().with_responses(topics)
}

/// Reads this core's partitions of a request, at most `budget_bytes` in all (the first
/// non-empty partition may exceed it by its first batch, as Kafka allows): nothing is read that
/// the response could not carry. When the partitions' own limits add up to no more than the
/// budget (the usual case) they are read concurrently; otherwise one after another, each
/// within what is left.
async fn read_local(
    state: Rc<CoreState>,
    items: Vec<ReadItem>,
    budget_bytes: usize,
) -> Vec<PartitionData> {
    let asked: usize = items
        .iter()
        .map(|i| i.max_bytes.max(1))
        .fold(0, usize::saturating_add);
    if asked <= budget_bytes {
        let reads = items.into_iter().map(|item| {
            let state = state.clone();
            async move {
                let limit = item.max_bytes.max(1);
                read_one(&state, &item, limit).await.0
            }
        });
        return join_all(reads).await;
    }
    let mut used = 0usize;
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        let limit = if used == 0 {
            item.max_bytes.max(1)
        } else {
            item.max_bytes.min(budget_bytes.saturating_sub(used))
        };
        let (data, read) = read_one(&state, &item, limit).await;
        used += read;
        out.push(data);
    }
    out
}

/// One partition's answer, reading at most `limit` bytes (none when `limit` is 0 after
/// something was read); returns the bytes read.
#[tracing::instrument(
    target = "ringlog::trace",
    name = "fetch_partition",
    level = "trace",
    skip_all,
    fields(topic = %item.topic, partition = item.partition, offset = item.offset, core = state.core)
)]
async fn read_one(state: &Rc<CoreState>, item: &ReadItem, limit: usize) -> (PartitionData, usize) {
    let index = item.partition as i32;
    if let Err(code) = crate::replica::check_leader_epoch(
        state,
        &item.topic,
        item.partition,
        item.current_leader_epoch,
    ) {
        return (partition_error(index, code), 0);
    }
    let Some(part) = crate::opening::partition(state, &item.topic, item.partition).await else {
        return (partition_error(index, codes::NOT_LEADER_OR_FOLLOWER), 0);
    };
    let log = part.log();
    let hwm = log.high_watermark() as i64;
    let lso = part.last_stable_offset();
    let start = log.log_start_offset() as i64;
    let base = partition_error(index, codes::NONE)
        .with_high_watermark(hwm)
        .with_last_stable_offset(lso as i64)
        .with_log_start_offset(start);
    if item.offset < 0 {
        return (partition_error(index, codes::OFFSET_OUT_OF_RANGE), 0);
    }
    if item.last_fetched_epoch >= 0 {
        match part.leader_epoch_end(item.last_fetched_epoch) {
            // The client read records of an epoch this log does not hold that far (or at
            // all): it truncates to the end given and fetches again (KIP-320, KIP-595).
            Some((epoch, end)) if epoch < item.last_fetched_epoch || (end as i64) < item.offset => {
                let diverging = EpochEndOffset::default()
                    .with_epoch(epoch)
                    .with_end_offset(end as i64);
                return (base.with_diverging_epoch(diverging), 0);
            }
            Some(_) => {}
            None => return (partition_error(index, codes::OFFSET_OUT_OF_RANGE), 0),
        }
    }
    if limit == 0 {
        return (base, 0);
    }
    if item.read_committed && lso <= item.offset.max(0) as u64 {
        // Nothing stable past the offset: no read (the long-poll looks again).
        return (base.with_aborted_transactions(Some(Vec::new())), 0);
    }
    match log.read(item.offset as u64, limit).await {
        Ok(mut bytes) => {
            let mut base = base;
            if item.read_committed {
                // Whole batches below the last stable offset, and the aborted transactions
                // among them, for the client to drop.
                bytes.truncate(engine::batch::bytes_below(&bytes, lso));
                let aborted = part
                    .aborted_transactions(item.offset as u64, lso)
                    .into_iter()
                    .map(|a| {
                        AbortedTransaction::default()
                            .with_producer_id(ProducerId(a.producer_id))
                            .with_first_offset(a.first_offset as i64)
                    })
                    .collect();
                base.aborted_transactions = Some(aborted);
            }
            let m = &state.metrics;
            let records = count_records(&bytes);
            crate::metrics::CoreMetrics::add(&m.records_out, records);
            crate::metrics::CoreMetrics::add(&m.record_bytes_out, bytes.len() as u64);
            part.traffic.fetched(records, bytes.len() as u64);
            let n = bytes.len();
            (base.with_records(Some(Bytes::from(bytes))), n)
        }
        Err(e @ LogError::OffsetOutOfRange { .. }) => {
            tracing::debug!(error = %e, "fetch out of range");
            (partition_error(index, codes::OFFSET_OUT_OF_RANGE), 0)
        }
        Err(e) => {
            tracing::warn!(topic = %item.topic, partition = index, error = %e, "fetch failed");
            (base.with_error_code(codes::for_log_error(&e)), 0)
        }
    }
}

/// What a fetch does about its session (`crate::fetch_session`), decided before its ACLs are
/// checked: an incremental fetch names every partition of its session from then on, so each is
/// checked on every fetch.
pub struct SessionStep {
    plan: crate::fetch_session::Plan,
    /// The partitions a full fetch that may open a session asked for, as sent.
    asked: Vec<kafka_protocol::messages::fetch_request::FetchTopic>,
    privileged: bool,
}

/// Runs `f` on the sessions of the core that holds session `id` (this core's for a new one).
async fn with_sessions<R: Send + 'static>(
    state: &Rc<CoreState>,
    id: i32,
    f: impl FnOnce(&mut crate::fetch_session::FetchSessions) -> R + Send + 'static,
) -> Result<R, crate::route::CoreGone> {
    let home = crate::fetch_session::home_core(id, state.core, state.ctx.config.cores());
    crate::route::on_core(state, home, move |s| async move {
        f(&mut s.admission.fetch_sessions.borrow_mut())
    })
    .await
}

/// Plans `req`'s session on its home core and, for an incremental fetch, makes it name all
/// the session's partitions.
pub async fn begin_session(
    state: &Rc<CoreState>,
    version: i16,
    req: &mut FetchRequest,
) -> SessionStep {
    use crate::fetch_session::{Plan, FINAL_EPOCH, NO_SESSION};
    let replica = if version >= 15 {
        req.replica_state.replica_id.0
    } else {
        req.replica_id.0
    };
    let privileged = replica >= 0;
    // A fetch without a session (librdkafka's, every follower's) has nothing to plan: it
    // stays on this core with its request untouched.
    if (req.session_id, req.session_epoch) == (NO_SESSION, FINAL_EPOCH) {
        return SessionStep {
            plan: Plan::Full { open: false },
            asked: Vec::new(),
            privileged,
        };
    }
    let mut moved = std::mem::take(req);
    let planned = with_sessions(state, moved.session_id, move |c| {
        let plan = c.plan(version, &mut moved, Instant::now());
        (plan, moved)
    })
    .await;
    let plan = match planned {
        Ok((plan, back)) => {
            *req = back;
            plan
        }
        // The session's core is shutting down: so is the node.
        Err(_) => Plan::Refused(codes::FETCH_SESSION_ID_NOT_FOUND),
    };
    let asked = match plan {
        Plan::Full { open: true } => req.topics.clone(),
        _ => Vec::new(),
    };
    SessionStep {
        plan,
        asked,
        privileged,
    }
}

impl SessionStep {
    /// The whole answer when the session refuses the fetch (an unknown session, a wrong
    /// epoch): the error, no partitions, no session.
    pub fn refusal(&self) -> Option<FetchResponse> {
        match self.plan {
            crate::fetch_session::Plan::Refused(code) => Some(
                FetchResponse::default()
                    .with_error_code(code)
                    .with_session_id(crate::fetch_session::NO_SESSION),
            ),
            _ => None,
        }
    }

    /// After the answer is made: opens the session a full fetch asked for (on this core), or
    /// keeps only the changed partitions of an incremental one (on its home core); sets the
    /// answer's session id.
    pub async fn finish(self, state: &Rc<CoreState>, version: i16, resp: &mut FetchResponse) {
        use crate::fetch_session::{Plan, NO_SESSION};
        resp.session_id = match self.plan {
            Plan::Full { open: true } if resp.error_code == codes::NONE => state
                .admission
                .fetch_sessions
                .borrow_mut()
                .open(version, &self.asked, self.privileged, resp, Instant::now()),
            Plan::Incremental { id } => {
                let mut moved = std::mem::take(resp);
                let answered = with_sessions(state, id, move |c| {
                    c.answer(id, &mut moved);
                    moved
                })
                .await;
                // A core shutting down: the whole answer is sent (a client accepts any of
                // its session's partitions).
                if let Ok(answered) = answered {
                    *resp = answered;
                }
                id
            }
            _ => NO_SESSION,
        };
    }
}

/// The largest response a Fetch may produce: the request's `max_bytes`, capped by the broker's
/// `fetch-max-bytes` (≤ 0 means the cap). The connection reserves this much for the response.
pub fn response_cap_bytes(req: &FetchRequest, cfg: &crate::config::BrokerConfig) -> usize {
    if req.max_bytes > 0 {
        (req.max_bytes as usize).min(cfg.fetch_max_bytes)
    } else {
        cfg.fetch_max_bytes
    }
}

/// Records in stored batches.
fn count_records(b: &[u8]) -> u64 {
    engine::batch::stored_batches(b)
        .map(|(h, _)| h.records_count.max(0) as u64)
        .sum()
}

/// Returns when any of the partitions (on this core) has data past its fetch offset, or at
/// the deadline.
async fn wait_local(state: Rc<CoreState>, items: Vec<ReadItem>, deadline: Instant) {
    let logs: Vec<(Rc<engine::PartitionLog>, u64, bool)> = items
        .iter()
        .filter_map(|i| {
            state.partition_if_open(&i.topic, i.partition).map(|part| {
                let off = i.offset.max(0) as u64;
                // Durable data past the offset that is not stable yet: look again shortly.
                let unstable = i.read_committed
                    && part.last_stable_offset() <= off
                    && part.log().high_watermark() > off;
                (part.log().clone(), off, unstable)
            })
        })
        .collect();
    if logs.is_empty() {
        return;
    }
    first_of(logs.iter().map(|(log, off, unstable)| async move {
        if *unstable {
            let left = deadline.saturating_duration_since(Instant::now());
            glommio::timer::sleep(left.min(Duration::from_millis(UNSTABLE_POLL_MS))).await;
        } else {
            log.wait_for_data_after(*off, deadline).await;
        }
    }))
    .await;
}
