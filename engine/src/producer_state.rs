//! Idempotent-producer state of one partition: per producer id, its epoch and the last few
//! batches' sequence ranges (Kafka keeps 5), so a retried batch is acknowledged with its first
//! offset instead of being appended twice, and a gap in sequences is refused.

use std::collections::{HashMap, VecDeque};

use crate::batch::BatchHeader;
use crate::log::{LogError, PartitionLog, ReadEnd};
use crate::txn::{TxnRebuild, TxnState};

/// Batches remembered per producer (Kafka's `max.in.flight.requests.per.connection` limit for
/// idempotence is 5).
pub const PRODUCER_BATCHES_REMEMBERED: usize = 5;
/// Producers remembered per partition before the least recently used is forgotten.
pub const MAX_PRODUCERS_PER_PARTITION: usize = 10_000;
const _: () = assert!(
    crate::txn::MAX_ONGOING_TXNS_PER_PARTITION <= MAX_PRODUCERS_PER_PARTITION,
    "every producer with an open transaction fits in the producers remembered"
);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct BatchSeq {
    first_seq: i32,
    last_seq: i32,
    base_offset: u64,
    last_offset: u64,
}

#[derive(Debug, Default)]
struct ProducerEntry {
    epoch: i16,
    batches: VecDeque<BatchSeq>,
    last_used: u64,
    /// Known only from a transaction marker (no batch of this producer seen at this epoch):
    /// its next batch is taken at any sequence, as a producer seen for the first time.
    any_seq: bool,
    /// The newest batch's max timestamp (DescribeProducers' last timestamp); -1 if none.
    last_timestamp_ms: i64,
}

/// One producer as a partition remembers it (DescribeProducers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerSnapshot {
    pub producer_id: i64,
    pub epoch: i16,
    /// The newest batch's last sequence; -1 if only a marker is known.
    pub last_sequence: i32,
    /// The newest batch's max timestamp; -1 if none.
    pub last_timestamp_ms: i64,
}

/// What to do with an incoming batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeqCheck {
    /// Not idempotent (no producer id) or the next sequence: append it.
    Append,
    /// A retry of a batch already in the log at these offsets.
    Duplicate {
        base_offset: u64,
        last_offset: u64,
    },
    OutOfOrder {
        expected: i32,
        got: i32,
    },
    FencedEpoch {
        current: i16,
        got: i16,
    },
}

#[derive(Debug, Default)]
pub struct ProducerStates {
    producers: HashMap<i64, ProducerEntry>,
    tick: u64,
}

fn is_idempotent(h: &BatchHeader) -> bool {
    h.producer_id >= 0 && h.base_sequence >= 0
}

fn last_seq(h: &BatchHeader) -> i32 {
    // Sequences wrap at i32::MAX, as in Kafka.
    ((h.base_sequence as i64 + h.last_offset_delta as i64) % (i32::MAX as i64 + 1)) as i32
}

impl ProducerStates {
    pub fn check(&self, h: &BatchHeader) -> SeqCheck {
        if !is_idempotent(h) {
            return SeqCheck::Append;
        }
        let Some(p) = self.producers.get(&h.producer_id) else {
            // First batch of this producer that this partition sees: accept from any sequence
            // (the producer may have written to this partition before its state was trimmed).
            return SeqCheck::Append;
        };
        if h.producer_epoch < p.epoch {
            return SeqCheck::FencedEpoch {
                current: p.epoch,
                got: h.producer_epoch,
            };
        }
        if h.producer_epoch > p.epoch {
            // A bumped epoch restarts sequences at 0.
            return if h.base_sequence == 0 {
                SeqCheck::Append
            } else {
                SeqCheck::OutOfOrder {
                    expected: 0,
                    got: h.base_sequence,
                }
            };
        }
        if p.any_seq && p.batches.is_empty() {
            return SeqCheck::Append;
        }
        if let Some(b) = p
            .batches
            .iter()
            .find(|b| b.first_seq == h.base_sequence && b.last_seq == last_seq(h))
        {
            return SeqCheck::Duplicate {
                base_offset: b.base_offset,
                last_offset: b.last_offset,
            };
        }
        let expected = p.batches.back().map_or(0, |b| {
            if b.last_seq == i32::MAX {
                0
            } else {
                b.last_seq + 1
            }
        });
        if h.base_sequence == expected {
            SeqCheck::Append
        } else {
            SeqCheck::OutOfOrder {
                expected,
                got: h.base_sequence,
            }
        }
    }

    /// Base offset of every known producer's newest batch: the cleaner keeps those batches
    /// (emptied if need be) so a producer's sequence survives compaction.
    pub fn last_batch_offsets(&self) -> std::collections::HashSet<u64> {
        self.producers
            .values()
            .filter_map(|p| p.batches.back().map(|b| b.base_offset))
            .collect()
    }

    /// Every producer this partition remembers, by producer id.
    pub fn snapshot(&self) -> Vec<ProducerSnapshot> {
        let mut out: Vec<ProducerSnapshot> = self
            .producers
            .iter()
            .map(|(pid, p)| ProducerSnapshot {
                producer_id: *pid,
                epoch: p.epoch,
                last_sequence: p.batches.back().map_or(-1, |b| b.last_seq),
                last_timestamp_ms: if p.batches.is_empty() {
                    -1
                } else {
                    p.last_timestamp_ms
                },
            })
            .collect();
        out.sort_by_key(|p| p.producer_id);
        out
    }

    /// The epoch this partition knows for producer `pid`, if it remembers the producer.
    pub fn epoch_of(&self, pid: i64) -> Option<i16> {
        self.producers.get(&pid).map(|p| p.epoch)
    }

    /// The entry of `pid` (made room for, created if new), marked used now.
    fn entry(&mut self, pid: i64) -> &mut ProducerEntry {
        self.tick += 1;
        let tick = self.tick;
        if !self.producers.contains_key(&pid) && self.producers.len() >= MAX_PRODUCERS_PER_PARTITION
        {
            let oldest = self
                .producers
                .iter()
                .min_by_key(|(_, p)| p.last_used)
                .map(|(id, _)| *id)
                .expect("not empty");
            self.producers.remove(&oldest);
        }
        let p = self.producers.entry(pid).or_insert_with(|| ProducerEntry {
            epoch: -1,
            any_seq: true,
            ..Default::default()
        });
        p.last_used = tick;
        p
    }

    /// Records a transaction marker of producer `pid` at `epoch` (admitted, or found on
    /// rebuild): a newer epoch becomes the producer's and restarts its sequences at 0 (the
    /// coordinator bumped it, fencing the old producer); the same epoch changes nothing (a
    /// producer keeps its sequence across transactions). An older one is refused before.
    pub fn record_marker(&mut self, pid: i64, epoch: i16) {
        if pid < 0 {
            return;
        }
        let p = self.entry(pid);
        if epoch > p.epoch {
            // A producer first known here through this marker takes any sequence next.
            p.any_seq = p.epoch < 0 && p.batches.is_empty();
            p.epoch = epoch;
            p.batches.clear();
        }
    }

    /// Records an appended batch (or one found in the log on rebuild).
    pub fn record(&mut self, h: &BatchHeader, base_offset: u64) {
        if !is_idempotent(h) {
            return;
        }
        let p = self.entry(h.producer_id);
        p.any_seq = false;
        p.last_timestamp_ms = h.max_timestamp;
        if h.producer_epoch != p.epoch {
            p.epoch = h.producer_epoch;
            p.batches.clear();
        }
        p.batches.push_back(BatchSeq {
            first_seq: h.base_sequence,
            last_seq: last_seq(h),
            base_offset,
            last_offset: base_offset + h.last_offset_delta as u64,
        });
        while p.batches.len() > PRODUCER_BATCHES_REMEMBERED {
            p.batches.pop_front();
        }
    }
}

/// How far back (in offsets) a partition's producer state is rebuilt from its log on open.
pub const PRODUCER_STATE_REBUILD_OFFSETS: u64 = 200_000;
/// Bytes read per step while rebuilding producer state.
const REBUILD_READ_BYTES: usize = 1 << 20;

/// Rebuilds idempotent-producer state and transaction state (open transactions, producers'
/// epochs from markers, aborted transactions in the window) from the last
/// `PRODUCER_STATE_REBUILD_OFFSETS` of a log, in one pass.
pub async fn rebuild(log: &PartitionLog) -> Result<(ProducerStates, TxnState), LogError> {
    let mut states = ProducerStates::default();
    // Every batch the log holds durably, also those above a replicated partition's high
    // watermark (a new leader's state covers what the earlier leaders wrote).
    let from = log
        .durable_end()
        .saturating_sub(PRODUCER_STATE_REBUILD_OFFSETS);
    let mut txn = TxnRebuild::new(from.max(log.log_start_offset()));
    log.for_each_batch(
        from,
        u64::MAX,
        REBUILD_READ_BYTES,
        ReadEnd::Durable,
        |h, bytes| {
            if let Some((pid, epoch)) = txn.batch(h, bytes) {
                states.record_marker(pid, epoch);
            } else if !h.is_control() {
                states.record(h, h.base_offset as u64)
            }
        },
    )
    .await?;
    Ok((states, txn.finish()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(pid: i64, epoch: i16, seq: i32, n: i32) -> BatchHeader {
        BatchHeader {
            base_offset: 0,
            size_bytes: 100,
            attributes: 0,
            last_offset_delta: n - 1,
            base_timestamp: 0,
            max_timestamp: 0,
            producer_id: pid,
            producer_epoch: epoch,
            base_sequence: seq,
            records_count: n,
        }
    }

    #[test]
    fn sequences_duplicates_gaps_and_epochs() {
        let duplicate = |base_offset, last_offset| SeqCheck::Duplicate {
            base_offset,
            last_offset,
        };
        let out_of_order = |expected, got| SeqCheck::OutOfOrder { expected, got };
        let mut s = ProducerStates::default();
        assert_eq!(s.check(&h(-1, -1, -1, 3)), SeqCheck::Append);
        assert_eq!(s.check(&h(7, 0, 0, 3)), SeqCheck::Append);
        s.record(&h(7, 0, 0, 3), 10);
        assert_eq!(s.check(&h(7, 0, 0, 3)), duplicate(10, 12));
        assert_eq!(s.check(&h(7, 0, 3, 2)), SeqCheck::Append);
        assert_eq!(s.check(&h(7, 0, 5, 1)), out_of_order(3, 5));
        assert_eq!(s.check(&h(7, 1, 0, 1)), SeqCheck::Append);
        s.record(&h(7, 1, 0, 1), 20);
        assert_eq!(
            s.check(&h(7, 0, 3, 1)),
            SeqCheck::FencedEpoch { current: 1, got: 0 }
        );
    }
}
