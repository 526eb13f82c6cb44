//! Bytes: rkyv encoding helpers, the mirror types of openraft's structs (which carry no rkyv
//! derives), the RPC messages, the frame format and checksummed files.
//!
//! Frame (TCP, both directions): `u32 LE payload length | u32 LE crc32(payload) | payload`,
//! payload = rkyv bytes of [`Request`] or [`Response`].
//!
//! Checked file (hard state, snapshot): `8-byte magic | u32 LE version | u32 LE crc32(payload) |
//! u64 LE payload length | payload`.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::path::Path;

use openraft::{BasicNode, CommittedLeaderId, EntryPayload, LogId, Membership, StoredMembership};
use rkyv::api::high::{HighSerializer, HighValidator};
use rkyv::bytecheck::CheckBytes;
use rkyv::de::Pool;
use rkyv::rancor::{self, Strategy};
use rkyv::ser::allocator::ArenaHandle;
use rkyv::util::AlignedVec;
use rkyv::{Archive, Deserialize, Serialize};

use crate::error::MetaError;
use crate::state::{ApplyOutcome, Command, MetaState, Proposal, Refusal};
use crate::TypeConfig;

/// Largest frame payload accepted on the wire.
pub const MAX_FRAME_BYTES: usize = 64 * 1024 * 1024;
/// Frame header: length + crc.
pub const FRAME_HEADER_BYTES: usize = 8;
/// Checked file header: magic + version + crc + length.
pub const FILE_HEADER_BYTES: usize = 24;
/// Largest checked file (snapshot) accepted.
pub const MAX_CHECKED_FILE_BYTES: u64 = 1024 * 1024 * 1024;

pub type Entry = openraft::Entry<TypeConfig>;
pub type Vote = openraft::Vote<u64>;

pub fn encode<T>(v: &T) -> Result<AlignedVec, MetaError>
where
    T: for<'a> Serialize<HighSerializer<AlignedVec, ArenaHandle<'a>, rancor::Error>>,
{
    rkyv::to_bytes::<rancor::Error>(v).map_err(|e| MetaError::Protocol {
        context: format!("rkyv encode: {e}"),
    })
}

pub fn decode<T>(bytes: &[u8], what: &str) -> Result<T, MetaError>
where
    T: Archive,
    T::Archived: for<'a> CheckBytes<HighValidator<'a, rancor::Error>>
        + Deserialize<T, Strategy<Pool, rancor::Error>>,
{
    // rkyv needs aligned input; copy into an aligned buffer.
    let mut aligned = AlignedVec::<16>::with_capacity(bytes.len());
    aligned.extend_from_slice(bytes);
    rkyv::from_bytes::<T, rancor::Error>(&aligned).map_err(|e| MetaError::Corrupt {
        context: format!("rkyv decode of {what}: {e}"),
    })
}

// ---------------------------------------------------------------- mirrors of openraft types

#[derive(Archive, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub struct WLogId {
    pub term: u64,
    pub node_id: u64,
    pub index: u64,
}

impl From<&LogId<u64>> for WLogId {
    fn from(l: &LogId<u64>) -> Self {
        WLogId {
            term: l.leader_id.term,
            node_id: l.leader_id.node_id,
            index: l.index,
        }
    }
}
impl From<&WLogId> for LogId<u64> {
    fn from(w: &WLogId) -> Self {
        LogId::new(CommittedLeaderId::new(w.term, w.node_id), w.index)
    }
}
pub fn to_wlog(l: &Option<LogId<u64>>) -> Option<WLogId> {
    l.as_ref().map(WLogId::from)
}
pub fn from_wlog(l: &Option<WLogId>) -> Option<LogId<u64>> {
    l.as_ref().map(LogId::from)
}

#[derive(Archive, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub struct WVote {
    pub term: u64,
    pub node_id: u64,
    pub committed: bool,
}
impl From<&Vote> for WVote {
    fn from(v: &Vote) -> Self {
        WVote {
            term: v.leader_id.term,
            node_id: v.leader_id.node_id,
            committed: v.committed,
        }
    }
}
impl From<&WVote> for Vote {
    fn from(w: &WVote) -> Self {
        if w.committed {
            Vote::new_committed(w.term, w.node_id)
        } else {
            Vote::new(w.term, w.node_id)
        }
    }
}

#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct WMembership {
    pub configs: Vec<Vec<u64>>,
    pub nodes: Vec<(u64, String)>,
}
impl From<&Membership<u64, BasicNode>> for WMembership {
    fn from(m: &Membership<u64, BasicNode>) -> Self {
        WMembership {
            configs: m
                .get_joint_config()
                .iter()
                .map(|c| c.iter().copied().collect())
                .collect(),
            nodes: m.nodes().map(|(id, n)| (*id, n.addr.clone())).collect(),
        }
    }
}
impl From<&WMembership> for Membership<u64, BasicNode> {
    fn from(w: &WMembership) -> Self {
        let configs: Vec<BTreeSet<u64>> = w
            .configs
            .iter()
            .map(|c| c.iter().copied().collect())
            .collect();
        let nodes: BTreeMap<u64, BasicNode> = w
            .nodes
            .iter()
            .map(|(id, a)| (*id, BasicNode::new(a)))
            .collect();
        Membership::new(configs, nodes)
    }
}

#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct WStoredMembership {
    pub log_id: Option<WLogId>,
    pub membership: WMembership,
}
impl From<&StoredMembership<u64, BasicNode>> for WStoredMembership {
    fn from(m: &StoredMembership<u64, BasicNode>) -> Self {
        WStoredMembership {
            log_id: to_wlog(m.log_id()),
            membership: m.membership().into(),
        }
    }
}
impl From<&WStoredMembership> for StoredMembership<u64, BasicNode> {
    fn from(w: &WStoredMembership) -> Self {
        StoredMembership::new(from_wlog(&w.log_id), (&w.membership).into())
    }
}

#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub enum WPayload {
    Blank,
    /// A proposal of exactly one command (the only form before group commit; kept so that logs
    /// and RPCs of either form decode).
    Normal(Command),
    Membership(WMembership),
    /// A proposal of several commands (group commit). Appended last: the tags of the other
    /// variants are unchanged.
    Batch(Vec<Command>),
}

#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct WEntry {
    pub log_id: WLogId,
    pub payload: WPayload,
}
impl From<&Entry> for WEntry {
    fn from(e: &Entry) -> Self {
        WEntry {
            log_id: (&e.log_id).into(),
            payload: match &e.payload {
                EntryPayload::Blank => WPayload::Blank,
                EntryPayload::Normal(p) => match p.commands.as_slice() {
                    [one] => WPayload::Normal(one.clone()),
                    many => WPayload::Batch(many.to_vec()),
                },
                EntryPayload::Membership(m) => WPayload::Membership(m.into()),
            },
        }
    }
}
impl From<WEntry> for Entry {
    fn from(w: WEntry) -> Self {
        Entry {
            log_id: (&w.log_id).into(),
            payload: match w.payload {
                WPayload::Blank => EntryPayload::Blank,
                WPayload::Normal(c) => EntryPayload::Normal(Proposal { commands: vec![c] }),
                WPayload::Batch(commands) => EntryPayload::Normal(Proposal { commands }),
                WPayload::Membership(m) => EntryPayload::Membership((&m).into()),
            },
        }
    }
}

#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct WSnapshotMeta {
    pub last_log_id: Option<WLogId>,
    pub last_membership: WStoredMembership,
    pub snapshot_id: String,
}
impl From<&openraft::SnapshotMeta<u64, BasicNode>> for WSnapshotMeta {
    fn from(m: &openraft::SnapshotMeta<u64, BasicNode>) -> Self {
        WSnapshotMeta {
            last_log_id: to_wlog(&m.last_log_id),
            last_membership: (&m.last_membership).into(),
            snapshot_id: m.snapshot_id.clone(),
        }
    }
}
impl From<&WSnapshotMeta> for openraft::SnapshotMeta<u64, BasicNode> {
    fn from(w: &WSnapshotMeta) -> Self {
        openraft::SnapshotMeta {
            last_log_id: from_wlog(&w.last_log_id),
            last_membership: (&w.last_membership).into(),
            snapshot_id: w.snapshot_id.clone(),
        }
    }
}

// ---------------------------------------------------------------- RPC messages

#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub enum Request {
    AppendEntries {
        vote: WVote,
        prev_log_id: Option<WLogId>,
        entries: Vec<WEntry>,
        leader_commit: Option<WLogId>,
    },
    Vote {
        vote: WVote,
        last_log_id: Option<WLogId>,
    },
    InstallSnapshot {
        vote: WVote,
        meta: WSnapshotMeta,
        offset: u64,
        data: Vec<u8>,
        done: bool,
    },
    Client(ClientRequest),
}

#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub enum ClientRequest {
    /// Propose a command. `forwarded` is set by a follower forwarding to the leader (one hop).
    Write {
        cmd: Command,
        forwarded: bool,
    },
    /// This node's local applied state (may be stale on a follower).
    GetState,
    /// Leader-confirmed read: answered by the leader once a quorum confirms it; a follower
    /// forwards it (one hop, `forwarded` set).
    LinearizableRead {
        forwarded: bool,
    },
    Status,
    /// Add a node as learner, wait for it to catch up, then promote it to voter.
    AddNode {
        node_id: u64,
        addr: String,
        forwarded: bool,
    },
    /// Answered once this node's users (a broker's cores) applied every change up to `index`
    /// (`crate::node::AppliedWatermark`), or with an error after `timeout_ms`.
    WaitApplied {
        index: u64,
        timeout_ms: u64,
    },
    /// The index a leader confirmed with a quorum (read-index protocol); a follower forwards
    /// it (one hop, `forwarded` set).
    ReadIndex {
        forwarded: bool,
    },
}

#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub enum WAppendResponse {
    Success,
    PartialSuccess(Option<WLogId>),
    Conflict,
    HigherVote(WVote),
}

#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub enum RaftErrorKind {
    Fatal,
    SnapshotMismatch,
    Other,
}

/// `Client` holds a whole [`MetaState`] (`ClientResponse::State`) and is far larger than the
/// other variants; it stays inline, because boxing it would change the archived layout every
/// node of a cluster reads. A response lives for one exchange.
#[allow(clippy::large_enum_variant)]
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub enum Response {
    AppendEntries(WAppendResponse),
    Vote {
        vote: WVote,
        vote_granted: bool,
        last_log_id: Option<WLogId>,
    },
    InstallSnapshot {
        vote: WVote,
    },
    RaftError {
        kind: RaftErrorKind,
        message: String,
    },
    Client(ClientResponse),
}

/// Status of one node, as reported to clients.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct NodeStatus {
    pub node_id: u64,
    /// "Leader", "Follower", "Candidate", "Learner" or "Shutdown".
    pub server_state: String,
    pub current_term: u64,
    pub current_leader: Option<u64>,
    pub last_log_index: Option<u64>,
    pub last_applied_index: Option<u64>,
    pub snapshot_index: Option<u64>,
    pub purged_index: Option<u64>,
    pub voters: Vec<u64>,
    pub learners: Vec<u64>,
    pub nodes: Vec<(u64, String)>,
}

#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub enum ClientResponse {
    Written(ApplyOutcome),
    State {
        applied_index: u64,
        state: MetaState,
    },
    Status(NodeStatus),
    NodeAdded,
    Applied,
    ReadIndex(u64),
    Error(WireError),
}

/// A [`MetaError`] as it travels to a client.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub enum WireError {
    Refused(Refusal),
    NotController {
        leader_id: Option<u64>,
        leader_addr: Option<String>,
    },
    Unconfirmed {
        reason: String,
    },
    Other {
        message: String,
    },
}

impl From<&MetaError> for WireError {
    fn from(e: &MetaError) -> Self {
        match e {
            MetaError::Refused(r) => WireError::Refused(r.clone()),
            MetaError::NotController {
                leader_id,
                leader_addr,
            } => WireError::NotController {
                leader_id: *leader_id,
                leader_addr: leader_addr.clone(),
            },
            MetaError::Unconfirmed { reason } => WireError::Unconfirmed {
                reason: reason.clone(),
            },
            other => WireError::Other {
                message: other.to_string(),
            },
        }
    }
}
impl From<WireError> for MetaError {
    fn from(e: WireError) -> Self {
        match e {
            WireError::Refused(r) => MetaError::Refused(r),
            WireError::NotController {
                leader_id,
                leader_addr,
            } => MetaError::NotController {
                leader_id,
                leader_addr,
            },
            WireError::Unconfirmed { reason } => MetaError::Unconfirmed { reason },
            WireError::Other { message } => MetaError::Remote { message },
        }
    }
}

// ---------------------------------------------------------------- frames

/// Builds a complete frame (header + payload) for `payload`.
pub fn frame(payload: &[u8]) -> Result<Vec<u8>, MetaError> {
    if payload.len() > MAX_FRAME_BYTES {
        return Err(MetaError::Protocol {
            context: format!(
                "frame of {} bytes over MAX_FRAME_BYTES {MAX_FRAME_BYTES}",
                payload.len()
            ),
        });
    }
    let mut out = Vec::with_capacity(FRAME_HEADER_BYTES + payload.len());
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(payload).to_le_bytes());
    out.extend_from_slice(payload);
    Ok(out)
}

/// Parses a frame header; returns (payload length, crc).
pub fn parse_frame_header(h: &[u8; FRAME_HEADER_BYTES]) -> Result<(usize, u32), MetaError> {
    let len = u32::from_le_bytes(h[0..4].try_into().expect("4 bytes")) as usize;
    let crc = u32::from_le_bytes(h[4..8].try_into().expect("4 bytes"));
    if len > MAX_FRAME_BYTES {
        return Err(MetaError::Protocol {
            context: format!("frame length {len} over MAX_FRAME_BYTES {MAX_FRAME_BYTES}"),
        });
    }
    Ok((len, crc))
}

pub fn check_frame_crc(payload: &[u8], crc: u32) -> Result<(), MetaError> {
    let got = crc32fast::hash(payload);
    if got != crc {
        return Err(MetaError::Protocol {
            context: format!("frame crc mismatch: header {crc:#010x}, payload {got:#010x}"),
        });
    }
    Ok(())
}

/// Blocking frame write (clients).
pub fn write_frame_blocking(w: &mut impl Write, payload: &[u8]) -> Result<(), MetaError> {
    let f = frame(payload)?;
    w.write_all(&f)
        .and_then(|_| w.flush())
        .map_err(|e| MetaError::io("writing frame", e))
}

/// Blocking frame read (clients).
pub fn read_frame_blocking(r: &mut impl Read) -> Result<Vec<u8>, MetaError> {
    let mut h = [0u8; FRAME_HEADER_BYTES];
    r.read_exact(&mut h)
        .map_err(|e| MetaError::io("reading frame header", e))?;
    let (len, crc) = parse_frame_header(&h)?;
    let mut payload = vec![0u8; len];
    r.read_exact(&mut payload)
        .map_err(|e| MetaError::io("reading frame payload", e))?;
    check_frame_crc(&payload, crc)?;
    Ok(payload)
}

/// Async frame write (tokio).
pub async fn write_frame<W: tokio::io::AsyncWrite + Unpin>(
    w: &mut W,
    payload: &[u8],
) -> Result<(), MetaError> {
    use tokio::io::AsyncWriteExt;
    let f = frame(payload)?;
    w.write_all(&f)
        .await
        .map_err(|e| MetaError::io("writing frame", e))?;
    w.flush()
        .await
        .map_err(|e| MetaError::io("flushing frame", e))
}

/// Async frame read (tokio). `Ok(None)` on a clean EOF before a header.
pub async fn read_frame<R: tokio::io::AsyncRead + Unpin>(
    r: &mut R,
) -> Result<Option<Vec<u8>>, MetaError> {
    use tokio::io::AsyncReadExt;
    let mut h = [0u8; FRAME_HEADER_BYTES];
    match r.read_exact(&mut h).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(MetaError::io("reading frame header", e)),
    }
    let (len, crc) = parse_frame_header(&h)?;
    let mut payload = vec![0u8; len];
    r.read_exact(&mut payload)
        .await
        .map_err(|e| MetaError::io("reading frame payload", e))?;
    check_frame_crc(&payload, crc)?;
    Ok(Some(payload))
}

// ---------------------------------------------------------------- checked files

/// Encodes a checked file image.
pub fn checked_file_bytes(magic: &[u8; 8], version: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(FILE_HEADER_BYTES + payload.len());
    out.extend_from_slice(magic);
    out.extend_from_slice(&version.to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(payload).to_le_bytes());
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    out.extend_from_slice(payload);
    out
}

/// Validates a checked file image and returns its payload.
pub fn checked_file_payload<'a>(
    bytes: &'a [u8],
    magic: &[u8; 8],
    version: u32,
    what: &str,
) -> Result<&'a [u8], MetaError> {
    let corrupt = |why: String| MetaError::Corrupt {
        context: format!("{what}: {why}"),
    };
    if bytes.len() < FILE_HEADER_BYTES {
        return Err(corrupt(format!(
            "{} bytes, shorter than header",
            bytes.len()
        )));
    }
    if &bytes[0..8] != magic {
        return Err(corrupt("bad magic".into()));
    }
    let v = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes"));
    if v != version {
        return Err(corrupt(format!("version {v}, expected {version}")));
    }
    let crc = u32::from_le_bytes(bytes[12..16].try_into().expect("4 bytes"));
    let len = u64::from_le_bytes(bytes[16..24].try_into().expect("8 bytes"));
    if len != (bytes.len() - FILE_HEADER_BYTES) as u64 {
        return Err(corrupt(format!(
            "length {len} but {} payload bytes",
            bytes.len() - FILE_HEADER_BYTES
        )));
    }
    let payload = &bytes[FILE_HEADER_BYTES..];
    if crc32fast::hash(payload) != crc {
        return Err(corrupt("crc mismatch".into()));
    }
    Ok(payload)
}

/// Writes `bytes` to `dir/name` atomically: temp file, fsync, rename, fsync of the directory.
pub fn write_atomic(dir: &Path, name: &str, bytes: &[u8]) -> Result<(), MetaError> {
    let tmp = dir.join(format!("{name}.tmp"));
    let dst = dir.join(name);
    let ctx = |what: &str| format!("{what} {}", tmp.display());
    let mut f = std::fs::File::create(&tmp).map_err(|e| MetaError::io(ctx("create"), e))?;
    f.write_all(bytes)
        .map_err(|e| MetaError::io(ctx("write"), e))?;
    f.sync_all().map_err(|e| MetaError::io(ctx("fsync"), e))?;
    drop(f);
    std::fs::rename(&tmp, &dst).map_err(|e| MetaError::io(ctx("rename"), e))?;
    sync_dir(dir)
}

pub fn sync_dir(dir: &Path) -> Result<(), MetaError> {
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| MetaError::io(format!("fsync dir {}", dir.display()), e))
}

/// Reads a checked file; `Ok(None)` if it does not exist.
pub fn read_checked_file(
    path: &Path,
    magic: &[u8; 8],
    version: u32,
) -> Result<Option<Vec<u8>>, MetaError> {
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(MetaError::io(format!("stat {}", path.display()), e)),
    };
    if meta.len() > MAX_CHECKED_FILE_BYTES {
        return Err(MetaError::Corrupt {
            context: format!(
                "{} is {} bytes, over MAX_CHECKED_FILE_BYTES",
                path.display(),
                meta.len()
            ),
        });
    }
    let bytes =
        std::fs::read(path).map_err(|e| MetaError::io(format!("read {}", path.display()), e))?;
    let payload = checked_file_payload(&bytes, magic, version, &path.display().to_string())?;
    Ok(Some(payload.to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `WPayload` before `Batch` was added, to check that log records written then still decode.
    #[derive(Archive, Serialize, Deserialize)]
    enum WPayloadV0 {
        #[allow(dead_code)]
        Blank,
        Normal(Command),
        #[allow(dead_code)]
        Membership(WMembership),
    }
    #[derive(Archive, Serialize, Deserialize)]
    struct WEntryV0 {
        log_id: WLogId,
        payload: WPayloadV0,
    }

    #[test]
    fn log_entries_of_one_and_many_commands_roundtrip_and_old_records_decode() {
        let cmd = |i: u32| Command::DeleteTopic {
            name: format!("t{i}"),
        };
        let log_id = WLogId {
            term: 2,
            node_id: 1,
            index: 7,
        };
        let old = encode(&WEntryV0 {
            log_id,
            payload: WPayloadV0::Normal(cmd(0)),
        })
        .unwrap();
        let got = Entry::from(decode::<WEntry>(&old, "old entry").unwrap());
        assert_eq!(got.log_id.index, 7);
        match got.payload {
            EntryPayload::Normal(p) => assert_eq!(p.commands, vec![cmd(0)]),
            other => panic!("decoded as {other:?}"),
        }
        for n in [1, 2, 50] {
            let e = Entry {
                log_id: (&log_id).into(),
                payload: EntryPayload::Normal(Proposal {
                    commands: (0..n).map(cmd).collect(),
                }),
            };
            let w = WEntry::from(&e);
            assert_eq!(matches!(w.payload, WPayload::Normal(_)), n == 1);
            let back = Entry::from(decode::<WEntry>(&encode(&w).unwrap(), "entry").unwrap());
            assert_eq!(back, e);
        }
    }

    #[test]
    fn frame_roundtrip_and_corruption() {
        let req = Request::Client(ClientRequest::GetState);
        let bytes = encode(&req).unwrap();
        let f = frame(&bytes).unwrap();
        let got = read_frame_blocking(&mut &f[..]).unwrap();
        assert_eq!(decode::<Request>(&got, "req").unwrap(), req);
        let mut bad = f.clone();
        let last = bad.len() - 1;
        bad[last] ^= 0xff;
        assert!(matches!(
            read_frame_blocking(&mut &bad[..]),
            Err(MetaError::Protocol { .. })
        ));
        let mut huge = f.clone();
        huge[0..4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(read_frame_blocking(&mut &huge[..]).is_err());
        // Garbage that passes the crc must still be a typed error, not a panic.
        let junk = vec![0xabu8; 37];
        let f = frame(&junk).unwrap();
        let p = read_frame_blocking(&mut &f[..]).unwrap();
        assert!(decode::<Request>(&p, "junk").is_err());
    }

    #[test]
    fn checked_file_detects_damage() {
        let img = checked_file_bytes(b"RLMTEST1", 1, b"hello");
        assert_eq!(
            checked_file_payload(&img, b"RLMTEST1", 1, "t").unwrap(),
            b"hello"
        );
        for i in 0..img.len() {
            let mut bad = img.clone();
            bad[i] ^= 0x01;
            assert!(checked_file_payload(&bad, b"RLMTEST1", 1, "t").is_err());
        }
        assert!(checked_file_payload(&img[..10], b"RLMTEST1", 1, "t").is_err());
    }
}
