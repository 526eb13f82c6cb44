//! The cut reader (seed 003, "The cut reader"): assigns every partition of
//! `__barrier_state`, seeks each to its start, and polls to the end; keeps every cut it
//! decoded, so a later call polls only what arrived since the previous one. A partial cut is
//! never returned (its missing partitions never get a marker: a task waiting for one would
//! wait forever).
//!
//! Give the reader a consumer of its own: assigning replaces the assignment of the consumer it
//! drives, which would revoke the partitions of a subscribed group runner.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};

use crate::{cut_of, BarrierCut, BarrierFormatError, TopicPartition, BARRIER_STATE_TOPIC};

/// How long one catch-up with the end of `__barrier_state` may take by default.
pub const DEFAULT_CUT_POLL_TIMEOUT_MS: u64 = 10_000;
/// One poll of the consumer inside a catch-up.
const POLL_STEP_MS: u64 = 100;

#[derive(Debug, thiserror::Error)]
pub enum CutReaderError {
    #[error("reading {BARRIER_STATE_TOPIC}: {0}")]
    Kafka(#[from] KafkaError),
    #[error("{BARRIER_STATE_TOPIC}/{partition} at offset {offset}: {source}")]
    Format {
        partition: i32,
        offset: i64,
        source: BarrierFormatError,
    },
    #[error("{BARRIER_STATE_TOPIC} not read to its end within {waited_ms} ms ({behind} partitions behind; last error: {last_error}); raise the cut poll timeout")]
    Timeout {
        waited_ms: u64,
        behind: usize,
        last_error: String,
    },
}

pub struct CutReader {
    consumer: BaseConsumer,
    partitions: i32,
    /// The next offset to read of each partition.
    next: Vec<i64>,
    /// group → epoch → cut (partial ones too: they are skipped, never returned). A cut
    /// leaves when the broker tombstones it (past the group's `retained_cuts`), so the map is
    /// bounded by what the broker retains.
    cuts: BTreeMap<String, BTreeMap<i64, BarrierCut>>,
    /// group → epoch → the target partitions of an injection under way (its injection-start
    /// record, gone with the tombstone published beside its cut): a marker of that epoch may
    /// land in each of them any moment. At most one per group on a KFC-4 broker.
    injections: BTreeMap<String, BTreeMap<i64, Vec<TopicPartition>>>,
    poll_timeout: Duration,
}

impl CutReader {
    /// A reader over `consumer` (its own) of `__barrier_state`'s `partition_count`
    /// partitions, each read from its start.
    pub fn new(consumer: BaseConsumer, partition_count: i32) -> Result<Self, CutReaderError> {
        let mut tpl = TopicPartitionList::new();
        for p in 0..partition_count {
            tpl.add_partition_offset(BARRIER_STATE_TOPIC, p, Offset::Beginning)?;
        }
        consumer.assign(&tpl)?;
        Ok(Self {
            consumer,
            partitions: partition_count,
            next: vec![0; partition_count.max(0) as usize],
            cuts: BTreeMap::new(),
            injections: BTreeMap::new(),
            poll_timeout: Duration::from_millis(DEFAULT_CUT_POLL_TIMEOUT_MS),
        })
    }

    /// How long one catch-up may take (`WithCutPollTimeout`).
    pub fn with_poll_timeout(mut self, timeout: Duration) -> Self {
        self.poll_timeout = timeout;
        self
    }

    /// The newest complete cut of `group`, after reading what arrived since the last call.
    pub fn latest_complete_cut(
        &mut self,
        group: &str,
    ) -> Result<Option<BarrierCut>, CutReaderError> {
        self.poll_to_end()?;
        Ok(self
            .cuts
            .get(group)
            .and_then(|c| c.values().rev().find(|c| c.is_complete()))
            .cloned())
    }

    /// The complete cuts of `group` with an epoch above `epoch`, oldest first.
    pub fn complete_cuts_after(
        &mut self,
        group: &str,
        epoch: i64,
    ) -> Result<Vec<BarrierCut>, CutReaderError> {
        self.poll_to_end()?;
        Ok(self
            .cuts
            .get(group)
            .map(|c| {
                c.range(epoch.saturating_add(1)..)
                    .map(|(_, c)| c)
                    .filter(|c| c.is_complete())
                    .cloned()
                    .collect()
            })
            .unwrap_or_default())
    }

    /// The partition of `__barrier_state` that holds `group`'s records (Kafka's
    /// `toPositive(murmur2(group)) % partitions`).
    pub fn state_partition(&self, group: &str) -> i32 {
        (kfc4::murmur2(group.as_bytes()) & 0x7fff_ffff) % self.partitions.max(1)
    }

    /// Every cut of `group` the reader holds with an epoch of at least `epoch`, partial ones
    /// too, oldest first (no poll).
    pub(crate) fn known_cuts_from(
        &self,
        group: &str,
        epoch: i64,
    ) -> impl Iterator<Item = &BarrierCut> + '_ {
        self.cuts
            .get(group)
            .into_iter()
            .flat_map(move |c| c.range(epoch..).map(|(_, c)| c))
    }

    /// The target partitions of `group`'s injections under way (no poll).
    pub(crate) fn injections_in_progress(
        &self,
        group: &str,
    ) -> impl Iterator<Item = &Vec<TopicPartition>> + '_ {
        self.injections
            .get(group)
            .into_iter()
            .flat_map(|i| i.values())
    }

    /// Reads what arrived since the last call, and at least up to `fresh_end` (a partition
    /// and a high watermark the caller asked the broker for just now: the cached ones lag
    /// by up to one fetch).
    pub(crate) fn catch_up(&mut self, fresh_end: Option<(i32, i64)>) -> Result<(), CutReaderError> {
        self.poll_to(fresh_end)
    }

    fn poll_to_end(&mut self) -> Result<(), CutReaderError> {
        self.poll_to(None)
    }

    /// Polls until every partition is read up to the high watermark it had when the call
    /// began (`fresh_end`'s for its partition when it is higher).
    fn poll_to(&mut self, fresh_end: Option<(i32, i64)>) -> Result<(), CutReaderError> {
        let started = Instant::now();
        let mut ends = Vec::with_capacity(self.next.len());
        for p in 0..self.partitions {
            if let Some((fp, high)) = fresh_end.filter(|(fp, _)| *fp == p) {
                debug_assert_eq!(fp, p);
                ends.push(high);
                continue;
            }
            // The high watermark the consumer's last fetch brought (no request), else
            // asked for: a query waits behind the consumer's own long-poll on the same
            // connection. A cut published since that fetch arrives at the next call.
            let high = match self.cached_high_watermark(p) {
                Some(high) => high,
                None => self.query_high_watermark(p, started)?,
            };
            ends.push(high);
        }
        let behind = |next: &[i64]| next.iter().zip(&ends).filter(|(n, e)| n < e).count();
        // A consumption error (a broker restarting) is retried until the timeout.
        let mut last_error = String::from("none");
        while behind(&self.next) > 0 {
            if started.elapsed() > self.poll_timeout {
                return Err(CutReaderError::Timeout {
                    waited_ms: self.poll_timeout.as_millis() as u64,
                    behind: behind(&self.next),
                    last_error,
                });
            }
            let Some(msg) = self.consumer.poll(Duration::from_millis(POLL_STEP_MS)) else {
                self.catch_up_positions()?;
                continue;
            };
            let msg = match msg {
                Ok(m) => m,
                Err(e) => {
                    last_error = e.to_string();
                    continue;
                }
            };
            let (p, offset) = (msg.partition(), msg.offset());
            if let Some(n) = usize::try_from(p).ok().and_then(|i| self.next.get_mut(i)) {
                *n = (*n).max(offset + 1);
            }
            let Some(key) = msg.key() else { continue };
            let record = kfc4::decode_record(key, msg.payload()).map_err(|source| {
                CutReaderError::Format {
                    partition: p,
                    offset,
                    source,
                }
            })?;
            self.apply(record);
        }
        Ok(())
    }

    fn apply(&mut self, record: kfc4::StateRecord) {
        match record {
            kfc4::StateRecord::Cut {
                group,
                epoch,
                cut: Some(cut),
            } => {
                let cut = cut_of(group, cut);
                self.cuts
                    .entry(cut.group.clone())
                    .or_default()
                    .insert(epoch, cut);
            }
            kfc4::StateRecord::Cut {
                group,
                epoch,
                cut: None,
            } => {
                if let Some(c) = self.cuts.get_mut(&group) {
                    c.remove(&epoch);
                }
            }
            kfc4::StateRecord::InjectionStart {
                group,
                epoch,
                value: Some(start),
            } => {
                let targets = start
                    .targets
                    .into_iter()
                    .flat_map(|(t, count)| (0..count.max(0)).map(move |p| (t.clone(), p)))
                    .collect();
                self.injections
                    .entry(group)
                    .or_default()
                    .insert(epoch, targets);
            }
            kfc4::StateRecord::InjectionStart {
                group,
                epoch,
                value: None,
            } => {
                if let Some(i) = self.injections.get_mut(&group) {
                    i.remove(&epoch);
                }
            }
            // A deleted group: nothing of it can be aligned on any more.
            kfc4::StateRecord::Group { group, value: None } => {
                self.injections.remove(&group);
            }
            kfc4::StateRecord::Group { .. } => {}
        }
    }

    /// `p`'s high watermark as the consumer's last fetch response gave it (librdkafka's
    /// `rd_kafka_get_watermark_offsets`, which sends nothing); None before any fetch.
    fn cached_high_watermark(&self, p: i32) -> Option<i64> {
        let topic = std::ffi::CString::new(BARRIER_STATE_TOPIC).expect("no NUL in the name");
        let (mut low, mut high) = (-1i64, -1i64);
        // SAFETY: the client pointer lives as long as `self.consumer`; the topic is a valid
        // C string for the call; `low` and `high` are valid for writes.
        let err = unsafe {
            rdkafka::bindings::rd_kafka_get_watermark_offsets(
                self.consumer.client().native_ptr(),
                topic.as_ptr(),
                p,
                &mut low,
                &mut high,
            )
        };
        (err == rdkafka::bindings::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR && high >= 0)
            .then_some(high)
    }

    /// Asks the broker for `p`'s high watermark, retried until the poll timeout.
    fn query_high_watermark(&self, p: i32, started: Instant) -> Result<i64, CutReaderError> {
        loop {
            match self
                .consumer
                .fetch_watermarks(BARRIER_STATE_TOPIC, p, self.poll_timeout)
            {
                Ok((_, high)) => return Ok(high),
                Err(_) if started.elapsed() < self.poll_timeout => {
                    std::thread::sleep(Duration::from_millis(POLL_STEP_MS));
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// The consumer's positions, for partitions whose last offsets handed no record out
    /// (removed by compaction).
    fn catch_up_positions(&mut self) -> Result<(), CutReaderError> {
        for e in self.consumer.position()?.elements() {
            if let (Offset::Offset(o), Ok(i)) = (e.offset(), usize::try_from(e.partition())) {
                if let Some(n) = self.next.get_mut(i) {
                    *n = (*n).max(o);
                }
            }
        }
        Ok(())
    }
}
