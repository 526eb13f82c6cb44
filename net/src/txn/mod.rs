//! Transaction coordination on one core (KIP-98): the transactional ids this core coordinates
//! and the internal `__transaction_state` log that makes their state durable.
//!
//! A transactional id belongs to partition `crc32c(id) % P` of `__transaction_state` and is
//! served by the core that owns that partition, like a group and `__consumer_offsets`. Every
//! state change is appended there (fdatasync'd) before it is answered. Records (our own layout,
//! big-endian, in ordinary v2 batches; the newest record of an id wins on replay):
//! key   `version i16 = 0 | transactional id str16`
//! value `version i16 = 0 | producer id i64 | epoch i16 | timeout ms i32 | status i8 |
//!        started ms i64 | updated ms i64 | partition count i32 | (topic str16 | partition i32)*`
//!
//! The ordering the coordinator enforces (why Jepsen's aborted reads and torn transactions do
//! not happen here) is in ARCHITECTURE.md, "Transactions".

use std::collections::{BTreeSet, HashMap};

use bytes::{Buf, BufMut, Bytes, BytesMut};

use crate::coordinator::CoordinatorState;
use crate::group::{get_str16, put_str16};

pub const TXN_STATE_TOPIC: &str = "__transaction_state";
/// Kafka's `transaction.max.timeout.ms` default (`transaction-max-timeout-ms`): the longest
/// `transaction.timeout.ms` a producer may ask for (INVALID_TRANSACTION_TIMEOUT past it).
pub const DEFAULT_TRANSACTION_MAX_TIMEOUT_MS: u64 = 900_000;
/// Kafka's `transactional.id.expiration.ms` default (`transactional-id-expiration-ms`, 7 days).
pub const DEFAULT_TRANSACTIONAL_ID_EXPIRATION_MS: u64 = 604_800_000;
/// Longest transactional id accepted (INVALID_REQUEST past it).
pub const MAX_TRANSACTIONAL_ID_BYTES: usize = 1_024;
/// Transactional ids one core coordinates; a new one past it is refused
/// (COORDINATOR_NOT_AVAILABLE, with a logged reason).
pub const MAX_TRANSACTIONAL_IDS_PER_CORE: usize = 100_000;
/// Partitions one transaction may span (INVALID_REQUEST past it): the coordinator's record
/// and every marker round are bounded by it.
pub const MAX_PARTITIONS_PER_TRANSACTION: usize = 10_000;
/// How often each core looks for timed-out transactions and unfinished commits or aborts.
pub const TXN_TICK_MS: u64 = 100;
/// The coordinator epoch written into markers (one node: the coordinator never moves).
pub const COORDINATOR_EPOCH: i32 = 0;
const RECORD_VERSION: i16 = 0;

/// Where a transactional id is, as Kafka's `TransactionState` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxnStatus {
    /// No transaction open (after InitProducerId, or a completed one's partitions cleared).
    Empty,
    Ongoing,
    PrepareCommit,
    PrepareAbort,
    CompleteCommit,
    CompleteAbort,
}

impl TxnStatus {
    fn code(self) -> i8 {
        match self {
            Self::Empty => 0,
            Self::Ongoing => 1,
            Self::PrepareCommit => 2,
            Self::PrepareAbort => 3,
            Self::CompleteCommit => 4,
            Self::CompleteAbort => 5,
        }
    }

    fn from_code(c: i8) -> Option<Self> {
        Some(match c {
            0 => Self::Empty,
            1 => Self::Ongoing,
            2 => Self::PrepareCommit,
            3 => Self::PrepareAbort,
            4 => Self::CompleteCommit,
            5 => Self::CompleteAbort,
            _ => return None,
        })
    }

    /// The name DescribeTransactions and ListTransactions give (Kafka's spelling).
    pub fn name(self) -> &'static str {
        match self {
            Self::Empty => "Empty",
            Self::Ongoing => "Ongoing",
            Self::PrepareCommit => "PrepareCommit",
            Self::PrepareAbort => "PrepareAbort",
            Self::CompleteCommit => "CompleteCommit",
            Self::CompleteAbort => "CompleteAbort",
        }
    }

    /// A decision is durable and its markers may not all be written yet.
    pub fn is_prepared(self) -> bool {
        matches!(self, Self::PrepareCommit | Self::PrepareAbort)
    }
}

/// One transactional id's durable state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnMeta {
    pub producer_id: i64,
    pub epoch: i16,
    pub timeout_ms: i32,
    pub status: TxnStatus,
    /// The partitions of the open (or preparing) transaction, `__consumer_offsets` ones
    /// included (AddOffsetsToTxn).
    pub partitions: BTreeSet<(String, u32)>,
    /// Wall-clock ms the open transaction started (its timeout counts from here).
    pub started_ms: i64,
    pub updated_ms: i64,
}

/// One transactional id on its coordinator core.
pub struct TxnEntry {
    pub meta: TxnMeta,
    /// Partition of `__transaction_state` holding this id's records.
    pub partition: u32,
    /// A change is being written (or markers sent): other requests for this id get
    /// CONCURRENT_TRANSACTIONS until it is done, so transitions never interleave.
    pub busy: bool,
}

pub type Txns = HashMap<String, TxnEntry>;

/// The partition of `__transaction_state` that holds `transactional_id`.
pub fn txn_partition(transactional_id: &str, partitions: u32) -> u32 {
    assert!(partitions > 0);
    crc32c::crc32c(transactional_id.as_bytes()) % partitions
}

pub fn encode_key(transactional_id: &str) -> Bytes {
    let mut b = BytesMut::with_capacity(4 + transactional_id.len());
    b.put_i16(RECORD_VERSION);
    put_str16(&mut b, Some(transactional_id));
    b.freeze()
}

pub fn encode_value(m: &TxnMeta) -> Bytes {
    let mut b = BytesMut::with_capacity(48 + m.partitions.len() * 16);
    b.put_i16(RECORD_VERSION);
    b.put_i64(m.producer_id);
    b.put_i16(m.epoch);
    b.put_i32(m.timeout_ms);
    b.put_i8(m.status.code());
    b.put_i64(m.started_ms);
    b.put_i64(m.updated_ms);
    b.put_i32(m.partitions.len() as i32);
    for (t, p) in &m.partitions {
        put_str16(&mut b, Some(t));
        b.put_i32(*p as i32);
    }
    b.freeze()
}

pub fn decode_key(mut b: Bytes) -> Option<String> {
    if b.remaining() < 2 || b.get_i16() != RECORD_VERSION {
        return None;
    }
    get_str16(&mut b)?
}

pub fn decode_value(mut b: Bytes) -> Option<TxnMeta> {
    if b.remaining() < 2 + 8 + 2 + 4 + 1 + 8 + 8 + 4 || b.get_i16() != RECORD_VERSION {
        return None;
    }
    let producer_id = b.get_i64();
    let epoch = b.get_i16();
    let timeout_ms = b.get_i32();
    let status = TxnStatus::from_code(b.get_i8())?;
    let started_ms = b.get_i64();
    let updated_ms = b.get_i64();
    let count = b.get_i32();
    if count < 0 || count as usize > MAX_PARTITIONS_PER_TRANSACTION {
        return None;
    }
    let mut partitions = BTreeSet::new();
    for _ in 0..count {
        let topic = get_str16(&mut b)??;
        if b.remaining() < 4 {
            return None;
        }
        let p = b.get_i32();
        if p < 0 {
            return None;
        }
        partitions.insert((topic, p as u32));
    }
    Some(TxnMeta {
        producer_id,
        epoch,
        timeout_ms,
        status,
        partitions,
        started_ms,
        updated_ms,
    })
}

impl CoordinatorState for Txns {
    const TOPIC: &'static str = TXN_STATE_TOPIC;
    const WHAT: &'static str = "transaction state";
    type ReplayArgs = ();

    fn apply_record(
        &mut self,
        _: (),
        partition: u32,
        _header: &engine::batch::BatchHeader,
        key: Option<Bytes>,
        value: Option<Bytes>,
    ) -> bool {
        let Some(id) = key.and_then(decode_key) else {
            return false;
        };
        match value.and_then(decode_value) {
            Some(meta) => {
                self.insert(
                    id,
                    TxnEntry {
                        meta,
                        partition,
                        busy: false,
                    },
                );
            }
            None => {
                self.remove(&id);
            }
        }
        true
    }

    fn unload(&mut self, partition: u32) {
        self.retain(|_, t| t.partition != partition);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_through_a_batch_and_the_newest_wins() {
        let mut m = TxnMeta {
            producer_id: 9,
            epoch: 3,
            timeout_ms: 60_000,
            status: TxnStatus::Ongoing,
            partitions: [("t".to_string(), 0), ("t".to_string(), 2)]
                .into_iter()
                .collect(),
            started_ms: 5,
            updated_ms: 6,
        };
        let first = encode_value(&m);
        m.status = TxnStatus::PrepareCommit;
        let rec = |v: Bytes| engine::batch_encode::NewRecord {
            key: Some(encode_key("tx")),
            value: Some(v),
            timestamp_ms: 1,
            ..Default::default()
        };
        let batch = engine::batch_encode::encode_uncompressed([rec(first), rec(encode_value(&m))]);
        let mut txns = Txns::new();
        assert_eq!(
            crate::coordinator::replay_batches(&mut txns, (), &batch, 1),
            2
        );
        assert_eq!(txns["tx"].meta, m);
        assert_eq!(txns["tx"].partition, 1);
        assert!(txn_partition("tx", 3) < 3);
        assert!(decode_value(Bytes::from_static(b"\0\0")).is_none());
    }
}
