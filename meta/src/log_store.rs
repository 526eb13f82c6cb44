//! Durable raft log storage on local disk.
//!
//! Layout under `<data>/raft/`:
//! - `log`: a sequence of records `u32 LE length | u32 LE crc32(payload) | payload`, payload =
//!   rkyv bytes of one [`WEntry`]. Appends are handed to a log-writer thread which writes every
//!   queued append, does one `fdatasync` for the group, and only then tells openraft the I/O
//!   completed (`LogFlushed::log_io_completed`); the raft thread never waits on the disk for
//!   appends, and appends that pile up meanwhile share one fdatasync. A torn or corrupt tail (bad length, short record, crc
//!   mismatch, undecodable payload, index gap) is cut off on open.
//! - `hardstate`: vote, committed log id and last purged log id, one checked file (see
//!   [`crate::wire`]) replaced atomically (temp file, fsync, rename, fsync of the directory),
//!   also by the writer thread, after the appends queued before it; `save_vote` and
//!   `save_committed` both return only once it is on disk (on open, a committed index past the
//!   surviving log is lowered to it).
//!
//! Purge writes the new `last_purged` to `hardstate` first, then rewrites `log` without the
//! purged entries (temp file + rename), so a crash in between only leaves dead entries that the
//! next open skips.
//!
//! All entries are also kept in memory: the metadata log is small and compacted after each
//! snapshot.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::fs::{File, OpenOptions};
use std::ops::RangeBounds;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use openraft::storage::{LogFlushed, RaftLogStorage};
use openraft::{
    AnyError, LogId, LogState, OptionalSend, RaftLogReader, StorageError, StorageIOError,
};
use rkyv::{Archive, Deserialize, Serialize};

use crate::error::MetaError;
use crate::wire::{self, Entry, Vote, WEntry, WLogId, WVote};
use crate::TypeConfig;

pub const LOG_FILE: &str = "log";
pub const HARD_STATE_FILE: &str = "hardstate";
pub const HARD_STATE_MAGIC: &[u8; 8] = b"RLMHARD1";
pub const HARD_STATE_VERSION: u32 = 1;
pub const LOG_RECORD_HEADER_BYTES: usize = 8;
/// Largest single encoded log entry.
pub const MAX_LOG_ENTRY_BYTES: usize = 16 * 1024 * 1024;
/// Most queued appends the log writer groups under one fdatasync.
pub const MAX_GROUP_COMMIT_APPENDS: usize = 1_024;

enum Job {
    Write {
        file: Arc<File>,
        offset: u64,
        buf: Vec<u8>,
        done: LogFlushed<TypeConfig>,
    },
    /// Persist this hard state (atomic file replace); consecutive ones coalesce. Answered, if
    /// asked, once it is on disk.
    HardState(HardState, Option<flume::Sender<Result<(), String>>>),
    /// Answered once every job queued before it is on disk (or failed).
    Barrier(flume::Sender<Result<(), String>>),
}

#[derive(Default)]
struct Group {
    files: Vec<Arc<File>>,
    waiting: Vec<LogFlushed<TypeConfig>>,
    hard: Option<HardState>,
    hard_waiting: Vec<flume::Sender<Result<(), String>>>,
}

/// The log-writer thread: group commit of appends, then the (coalesced) hard state.
fn writer_loop(rx: flume::Receiver<Job>, dir: PathBuf) {
    let path = dir.join(LOG_FILE);
    // After a failed write or sync the on-disk log no longer matches memory: every later
    // completion fails too (openraft stops on a storage error).
    let mut failed: Option<String> = None;
    let mut g = Group::default();
    let flush = |g: &mut Group, failed: &mut Option<String>| {
        if failed.is_none() {
            for f in g.files.iter() {
                if let Err(e) = f.sync_data() {
                    *failed = Some(format!("fdatasync {}: {e}", path.display()));
                    tracing::error!(error = %e, "raft log fdatasync failed");
                    break;
                }
            }
        }
        g.files.clear();
        for done in g.waiting.drain(..) {
            done.log_io_completed(match failed {
                None => Ok(()),
                Some(f) => Err(std::io::Error::other(f.clone())),
            });
        }
        if let Some(h) = g.hard.take() {
            if failed.is_none() {
                if let Err(e) = save_hard(&dir, &h) {
                    tracing::error!(error = %e, "raft hard state write failed");
                    *failed = Some(e.to_string());
                }
            }
        }
        for w in g.hard_waiting.drain(..) {
            let _ = w.send(failed.clone().map_or(Ok(()), Err));
        }
    };
    while let Ok(first) = rx.recv() {
        let jobs = std::iter::once(first).chain(rx.try_iter().take(MAX_GROUP_COMMIT_APPENDS));
        for job in jobs {
            match job {
                Job::Write {
                    file,
                    offset,
                    buf,
                    done,
                } => {
                    if g.hard.is_some() {
                        // Keep the order: hard state queued before this append goes first.
                        flush(&mut g, &mut failed);
                    }
                    if failed.is_none() {
                        if let Err(e) = file.write_all_at(&buf, offset) {
                            failed = Some(format!("write {}: {e}", path.display()));
                            tracing::error!(error = %e, "raft log write failed");
                        }
                    }
                    if !g.files.iter().any(|f| Arc::ptr_eq(f, &file)) {
                        g.files.push(file);
                    }
                    g.waiting.push(done);
                }
                Job::HardState(h, reply) => {
                    g.hard = Some(h);
                    g.hard_waiting.extend(reply);
                }
                Job::Barrier(tx) => {
                    flush(&mut g, &mut failed);
                    let _ = tx.send(failed.clone().map_or(Ok(()), Err));
                }
            }
        }
        flush(&mut g, &mut failed);
    }
}

fn save_hard(dir: &Path, hard: &HardState) -> Result<(), MetaError> {
    let payload = wire::encode(hard)?;
    let img = wire::checked_file_bytes(HARD_STATE_MAGIC, HARD_STATE_VERSION, &payload);
    wire::write_atomic(dir, HARD_STATE_FILE, &img)
}

#[derive(Archive, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
struct HardState {
    vote: Option<WVote>,
    committed: Option<WLogId>,
    last_purged: Option<WLogId>,
}

/// What opening the log found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogRecovery {
    pub entries: usize,
    /// Bytes cut off the tail because they were torn or corrupt.
    pub truncated_bytes: u64,
    /// Whether the persisted committed index pointed past the surviving log and was lowered.
    pub committed_lowered: bool,
}

struct LogInner {
    dir: PathBuf,
    file: Arc<File>,
    end: u64,
    /// index -> (file offset of the record, entry)
    entries: BTreeMap<u64, (u64, Entry)>,
    hard: HardState,
}

/// The raft log store. Cheap to clone (the reader openraft asks for is a clone).
#[derive(Clone)]
pub struct LogStore {
    inner: Arc<Mutex<LogInner>>,
    writer: flume::Sender<Job>,
    _writer_thread: Arc<WriterThread>,
}

/// Joins the log-writer thread when the last [`LogStore`] clone goes away, so that everything
/// queued is on disk before the store is considered closed.
struct WriterThread(Mutex<Option<std::thread::JoinHandle<()>>>);

impl Drop for WriterThread {
    fn drop(&mut self) {
        let h = self.0.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(h) = h {
            let _ = h.join();
        }
    }
}

fn encode_record(e: &Entry) -> Result<Vec<u8>, MetaError> {
    let payload = wire::encode(&WEntry::from(e))?;
    if payload.len() > MAX_LOG_ENTRY_BYTES {
        return Err(MetaError::Protocol {
            context: format!(
                "log entry {} is {} bytes, over MAX_LOG_ENTRY_BYTES",
                e.log_id,
                payload.len()
            ),
        });
    }
    let mut rec = Vec::with_capacity(LOG_RECORD_HEADER_BYTES + payload.len());
    rec.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    rec.extend_from_slice(&crc32fast::hash(&payload).to_le_bytes());
    rec.extend_from_slice(&payload);
    Ok(rec)
}

fn io_err(verb: &str, path: &Path, e: std::io::Error) -> MetaError {
    MetaError::io(format!("{verb} {}", path.display()), e)
}

fn write_err(e: MetaError) -> StorageError<u64> {
    StorageIOError::write_logs(AnyError::new(&e)).into()
}

impl LogInner {
    /// Synchronous hard-state write; only while the writer thread is idle (open, or after a
    /// barrier).
    fn save_hard(&self) -> Result<(), MetaError> {
        save_hard(&self.dir, &self.hard)
    }

    fn last_log_id(&self) -> Option<LogId<u64>> {
        self.entries
            .values()
            .next_back()
            .map(|(_, e)| e.log_id)
            .or_else(|| wire::from_wlog(&self.hard.last_purged))
    }

    /// Puts `entries` in memory and returns the bytes to write at `self.end` (before the
    /// call); the caller writes and syncs them.
    fn stage(&mut self, entries: Vec<Entry>) -> Result<(u64, Vec<u8>), MetaError> {
        let mut buf = Vec::new();
        let mut placed = Vec::with_capacity(entries.len());
        let mut expect = self.last_log_id().map(|l| l.index + 1);
        for e in entries {
            if let Some(x) = expect {
                assert_eq!(
                    e.log_id.index, x,
                    "raft log append must be contiguous (expected index {x})"
                );
            }
            expect = Some(e.log_id.index + 1);
            let off = self.end + buf.len() as u64;
            buf.extend_from_slice(&encode_record(&e)?);
            placed.push((off, e));
        }
        let at = self.end;
        self.end += buf.len() as u64;
        for (off, e) in placed {
            self.entries.insert(e.log_id.index, (off, e));
        }
        Ok((at, buf))
    }

    /// Synchronous append (write + fdatasync), used where no writer thread is involved.
    #[cfg(test)]
    fn append_sync(&mut self, entries: Vec<Entry>) -> Result<(), MetaError> {
        let (at, buf) = self.stage(entries)?;
        let path = self.dir.join(LOG_FILE);
        self.file
            .write_all_at(&buf, at)
            .and_then(|_| self.file.sync_data())
            .map_err(|e| io_err("append to", &path, e))
    }

    fn truncate(&mut self, index: u64) -> Result<(), MetaError> {
        let Some((&first, &(off, _))) = self.entries.range(index..).next() else {
            return Ok(());
        };
        assert!(first >= index);
        let path = self.dir.join(LOG_FILE);
        self.file
            .set_len(off)
            .map_err(|e| io_err("truncate", &path, e))?;
        self.file
            .sync_data()
            .map_err(|e| io_err("fdatasync", &path, e))?;
        self.end = off;
        self.entries.split_off(&index);
        Ok(())
    }

    fn purge(&mut self, log_id: LogId<u64>) -> Result<(), MetaError> {
        if let Some(p) = &self.hard.last_purged {
            if p.index >= log_id.index {
                return Ok(());
            }
        }
        self.hard.last_purged = Some((&log_id).into());
        self.save_hard()?;
        let keep = self.entries.split_off(&(log_id.index + 1));
        // Rewrite the log file with only the kept entries.
        let tmp = self.dir.join(format!("{LOG_FILE}.tmp"));
        let mut buf = Vec::new();
        let mut entries = BTreeMap::new();
        for (idx, (_, e)) in keep {
            let off = buf.len() as u64;
            buf.extend_from_slice(&encode_record(&e)?);
            entries.insert(idx, (off, e));
        }
        std::fs::write(&tmp, &buf).map_err(|e| io_err("write", &tmp, e))?;
        File::open(&tmp)
            .and_then(|f| f.sync_all())
            .map_err(|e| io_err("fsync", &tmp, e))?;
        let path = self.dir.join(LOG_FILE);
        std::fs::rename(&tmp, &path).map_err(|e| io_err("rename onto", &path, e))?;
        wire::sync_dir(&self.dir)?;
        self.file = Arc::new(
            OpenOptions::new()
                .read(true)
                .write(true)
                .open(&path)
                .map_err(|e| io_err("open", &path, e))?,
        );
        self.end = buf.len() as u64;
        self.entries = entries;
        Ok(())
    }
}

/// What the recovery scan of the raft log file found.
pub struct LogScan {
    /// Entries by index, with the byte offset of their record.
    pub entries: BTreeMap<u64, (u64, Entry)>,
    /// Bytes from the start that hold whole, valid, consecutive records.
    pub valid_len: usize,
    /// Why the scan stopped before the end, if it did.
    pub damage: Option<String>,
}

/// Reads `u32 len | u32 crc32 | rkyv(entry)` records from the start of `bytes` until the end or
/// the first torn, oversized, corrupt or out-of-sequence record. Entries at or below
/// `purged_idx` are skipped (left by a crash between the hard-state write and the rewrite).
/// Pure: the fuzz target `raft_log` drives it with arbitrary bytes.
pub fn scan_log_records(bytes: &[u8], purged_idx: Option<u64>) -> LogScan {
    let mut entries = BTreeMap::new();
    let mut off = 0usize;
    let mut expect: Option<u64> = purged_idx.map(|i| i + 1);
    let damage: Option<String> = loop {
        let rest = &bytes[off..];
        if rest.is_empty() {
            break None;
        }
        if rest.len() < LOG_RECORD_HEADER_BYTES {
            break Some(format!("torn header ({} bytes)", rest.len()));
        }
        let len = u32::from_le_bytes(rest[0..4].try_into().expect("4 bytes")) as usize;
        let crc = u32::from_le_bytes(rest[4..8].try_into().expect("4 bytes"));
        if len == 0 || len > MAX_LOG_ENTRY_BYTES {
            break Some(format!("bad record length {len}"));
        }
        if rest.len() < LOG_RECORD_HEADER_BYTES + len {
            break Some(format!("torn record: {len} bytes announced"));
        }
        let payload = &rest[LOG_RECORD_HEADER_BYTES..LOG_RECORD_HEADER_BYTES + len];
        if crc32fast::hash(payload) != crc {
            break Some("crc mismatch".to_string());
        }
        let w = match wire::decode::<WEntry>(payload, "log entry") {
            Ok(w) => w,
            Err(e) => break Some(e.to_string()),
        };
        let idx = w.log_id.index;
        if purged_idx.is_some_and(|p| idx <= p) {
            off += LOG_RECORD_HEADER_BYTES + len;
            continue;
        }
        if let Some(x) = expect {
            if idx != x {
                break Some(format!("index {idx} where {x} was expected"));
            }
        }
        expect = Some(idx + 1);
        entries.insert(idx, (off as u64, Entry::from(w)));
        off += LOG_RECORD_HEADER_BYTES + len;
    };
    LogScan {
        entries,
        valid_len: off,
        damage,
    }
}

impl LogStore {
    /// Opens (or creates) the log in `dir`, cutting off a corrupt tail.
    pub fn open(dir: &Path) -> Result<(LogStore, LogRecovery), MetaError> {
        std::fs::create_dir_all(dir).map_err(|e| io_err("create dir", dir, e))?;
        for leftover in [format!("{LOG_FILE}.tmp"), format!("{HARD_STATE_FILE}.tmp")] {
            let p = dir.join(leftover);
            match std::fs::remove_file(&p) {
                Ok(()) => tracing::warn!(path = %p.display(), "removed leftover temp file"),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(io_err("remove", &p, e)),
            }
        }
        let hard = match wire::read_checked_file(
            &dir.join(HARD_STATE_FILE),
            HARD_STATE_MAGIC,
            HARD_STATE_VERSION,
        )? {
            Some(payload) => wire::decode::<HardState>(&payload, "raft hard state")?,
            None => HardState::default(),
        };
        let path = dir.join(LOG_FILE);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| io_err("open", &path, e))?;
        let bytes = std::fs::read(&path).map_err(|e| io_err("read", &path, e))?;

        let purged_idx = hard.last_purged.map(|l| l.index);
        let LogScan {
            entries,
            valid_len: off,
            damage,
        } = scan_log_records(&bytes, purged_idx);
        let mut rec = LogRecovery {
            entries: entries.len(),
            ..Default::default()
        };
        if let Some(why) = damage {
            rec.truncated_bytes = (bytes.len() - off) as u64;
            tracing::warn!(
                path = %path.display(),
                offset = off,
                truncated_bytes = rec.truncated_bytes,
                reason = %why,
                "raft log: corrupt tail, truncating"
            );
            file.set_len(off as u64)
                .and_then(|_| file.sync_data())
                .map_err(|e| io_err("truncate", &path, e))?;
        }
        let mut inner = LogInner {
            dir: dir.to_path_buf(),
            file: Arc::new(file),
            end: off as u64,
            entries,
            hard,
        };
        // Never claim more committed than the surviving log holds.
        let last = inner.last_log_id();
        if let Some(c) = inner.hard.committed {
            if last.is_none_or(|l| l.index < c.index) {
                tracing::warn!(
                    committed = c.index,
                    last = ?last,
                    "raft log: committed index beyond surviving log, lowering it"
                );
                inner.hard.committed = wire::to_wlog(&last);
                inner.save_hard()?;
                rec.committed_lowered = true;
            }
        }
        tracing::info!(dir = %dir.display(), entries = rec.entries, "raft log opened");
        let (tx, rx) = flume::unbounded();
        let dir_owned = dir.to_path_buf();
        let handle = std::thread::Builder::new()
            .name("ringlog-meta-log".into())
            .spawn(move || writer_loop(rx, dir_owned))
            .map_err(|e| MetaError::io("spawning the raft log writer", e))?;
        Ok((
            LogStore {
                inner: Arc::new(Mutex::new(inner)),
                writer: tx,
                _writer_thread: Arc::new(WriterThread(Mutex::new(Some(handle)))),
            },
            rec,
        ))
    }

    /// Waits until every append queued so far is on disk.
    fn barrier(&self) -> Result<(), MetaError> {
        let (tx, rx) = flume::bounded(1);
        let stopped = || MetaError::Raft {
            context: "raft log writer thread is gone".into(),
        };
        self.writer.send(Job::Barrier(tx)).map_err(|_| stopped())?;
        rx.recv()
            .map_err(|_| stopped())?
            .map_err(|context| MetaError::Corrupt { context })
    }

    /// Queues `hard` for the writer thread (after every append queued before it) and waits
    /// until it is on disk.
    async fn save_hard_and_wait(&self, hard: HardState) -> Result<(), String> {
        let (tx, rx) = flume::bounded(1);
        let gone = || "raft log writer thread is gone".to_string();
        self.writer
            .send(Job::HardState(hard, Some(tx)))
            .map_err(|_| gone())?;
        // Awaited, not blocking: the rest of the meta thread (state machine worker, proposer,
        // client replies) keeps running meanwhile.
        rx.recv_async().await.map_err(|_| gone())?
    }

    fn lock(&self) -> MutexGuard<'_, LogInner> {
        // A poisoned lock means a panic while holding it; the data is still consistent
        // enough to read, and the panic itself is already reported.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// True if nothing was ever written (first start of an empty data dir).
    pub fn is_pristine(&self) -> bool {
        let g = self.lock();
        g.entries.is_empty() && g.hard == HardState::default()
    }

    pub fn last_log_index(&self) -> Option<u64> {
        self.lock().last_log_id().map(|l| l.index)
    }
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError<u64>> {
        let g = self.lock();
        Ok(g.entries
            .range(range)
            .map(|(_, (_, e))| e.clone())
            .collect())
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError<u64>> {
        let g = self.lock();
        Ok(LogState {
            last_purged_log_id: wire::from_wlog(&g.hard.last_purged),
            last_log_id: g.last_log_id(),
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote) -> Result<(), StorageError<u64>> {
        // The vote must be on disk before this returns.
        let hard = {
            let mut g = self.lock();
            g.hard.vote = Some(vote.into());
            g.hard.clone()
        };
        self.save_hard_and_wait(hard).await.map_err(|context| {
            let e = MetaError::Raft { context };
            StorageIOError::write_vote(AnyError::new(&e)).into()
        })
    }

    async fn read_vote(&mut self) -> Result<Option<Vote>, StorageError<u64>> {
        Ok(self.lock().hard.vote.as_ref().map(Vote::from))
    }

    async fn save_committed(
        &mut self,
        committed: Option<LogId<u64>>,
    ) -> Result<(), StorageError<u64>> {
        // Durable before this returns, like the vote (same file, same atomic replace). openraft
        // calls this once per commit step, not per client write: with group commit (see
        // `node::propose_loop`) one hard-state write covers a whole proposal, and hard-state jobs
        // that queue up meanwhile coalesce in the writer thread.
        let hard = {
            let mut g = self.lock();
            let w = wire::to_wlog(&committed);
            if g.hard.committed == w {
                return Ok(());
            }
            g.hard.committed = w;
            g.hard.clone()
        };
        self.save_hard_and_wait(hard)
            .await
            .map_err(|context| write_err(MetaError::Raft { context }))
    }

    async fn read_committed(&mut self) -> Result<Option<LogId<u64>>, StorageError<u64>> {
        Ok(wire::from_wlog(&self.lock().hard.committed))
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<TypeConfig>,
    ) -> Result<(), StorageError<u64>>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let entries: Vec<Entry> = entries.into_iter().collect();
        let staged = {
            let mut g = self.lock();
            g.stage(entries)
                .map(|(offset, buf)| (g.file.clone(), offset, buf))
        };
        match staged {
            Ok((file, offset, buf)) => {
                let job = Job::Write {
                    file,
                    offset,
                    buf,
                    done: callback,
                };
                self.writer.send(job).map_err(|_| {
                    write_err(MetaError::Raft {
                        context: "raft log writer thread is gone".into(),
                    })
                })
            }
            Err(e) => {
                tracing::error!(error = %e, "raft log append failed");
                callback.log_io_completed(Err(std::io::Error::other(e.to_string())));
                Err(write_err(e))
            }
        }
    }

    async fn truncate(&mut self, log_id: LogId<u64>) -> Result<(), StorageError<u64>> {
        tracing::debug!(%log_id, "raft log truncate");
        self.barrier().map_err(write_err)?;
        self.lock().truncate(log_id.index).map_err(write_err)
    }

    async fn purge(&mut self, log_id: LogId<u64>) -> Result<(), StorageError<u64>> {
        tracing::debug!(%log_id, "raft log purge");
        self.barrier().map_err(write_err)?;
        self.lock().purge(log_id).map_err(write_err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openraft::{CommittedLeaderId, EntryPayload};

    fn entry(i: u64) -> Entry {
        Entry {
            log_id: LogId::new(CommittedLeaderId::new(1, 1), i),
            payload: EntryPayload::Normal(crate::state::Proposal {
                commands: vec![crate::state::Command::DeleteTopic {
                    name: format!("t{i}"),
                }],
            }),
        }
    }

    #[test]
    fn append_truncate_purge_reopen() {
        let dir = tempfile::tempdir().unwrap();
        {
            let (s, _) = LogStore::open(dir.path()).unwrap();
            let mut g = s.lock();
            g.append_sync((0..10).map(entry).collect()).unwrap();
            g.truncate(8).unwrap();
            g.append_sync(vec![entry(8)]).unwrap();
            g.purge(LogId::new(CommittedLeaderId::new(1, 1), 3))
                .unwrap();
        }
        let (s, rec) = LogStore::open(dir.path()).unwrap();
        assert_eq!(rec.truncated_bytes, 0);
        let g = s.lock();
        assert_eq!(
            g.entries.keys().copied().collect::<Vec<_>>(),
            vec![4, 5, 6, 7, 8]
        );
        assert_eq!(g.hard.last_purged.unwrap().index, 3);
    }

    /// `save_vote` and `save_committed` return only once the hard state is on disk: a crash
    /// right after them (here: reading the file while the store is still open) finds both.
    #[test]
    fn vote_and_committed_are_on_disk_when_saved() {
        let dir = tempfile::tempdir().unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let (mut s, _) = LogStore::open(dir.path()).unwrap();
        s.lock().append_sync((0..5).map(entry).collect()).unwrap();
        let on_disk = || {
            let payload = wire::read_checked_file(
                &dir.path().join(HARD_STATE_FILE),
                HARD_STATE_MAGIC,
                HARD_STATE_VERSION,
            )
            .unwrap()
            .unwrap();
            wire::decode::<HardState>(&payload, "hard state").unwrap()
        };
        let vote = Vote::new_committed(1, 1);
        rt.block_on(s.save_vote(&vote)).unwrap();
        assert_eq!(on_disk().vote.as_ref().map(Vote::from), Some(vote));
        for i in [2, 4] {
            let c = LogId::new(CommittedLeaderId::new(1, 1), i);
            rt.block_on(s.save_committed(Some(c))).unwrap();
            let h = on_disk();
            assert_eq!(wire::from_wlog(&h.committed), Some(c));
            assert_eq!(h.vote.as_ref().map(Vote::from), Some(vote));
        }
        drop(s);
        let (mut s, rec) = LogStore::open(dir.path()).unwrap();
        assert!(!rec.committed_lowered);
        let c = rt.block_on(s.read_committed()).unwrap();
        assert_eq!(c.map(|c| c.index), Some(4));
    }

    #[test]
    fn corrupt_tail_is_cut() {
        let dir = tempfile::tempdir().unwrap();
        {
            let (s, _) = LogStore::open(dir.path()).unwrap();
            s.lock().append_sync((0..5).map(entry).collect()).unwrap();
        }
        let path = dir.path().join(LOG_FILE);
        let mut bytes = std::fs::read(&path).unwrap();
        let n = bytes.len();
        bytes[n - 3] ^= 0xff;
        bytes.extend_from_slice(&[0u8; 5]);
        std::fs::write(&path, &bytes).unwrap();
        let (s, rec) = LogStore::open(dir.path()).unwrap();
        assert!(rec.truncated_bytes > 0);
        assert_eq!(s.last_log_index(), Some(3));
        // Appending after the cut continues cleanly.
        s.lock().append_sync(vec![entry(4)]).unwrap();
        drop(s);
        let (s, rec) = LogStore::open(dir.path()).unwrap();
        assert_eq!(rec.truncated_bytes, 0);
        assert_eq!(s.last_log_index(), Some(4));
    }
}
