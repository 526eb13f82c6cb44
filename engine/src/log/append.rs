//! Admission in arrival order and the synchronous part of an append.

use std::rc::Rc;

use super::{AppendInfo, Durability, LogError, PartitionLog};
use crate::batch::{self, BatchError, BatchHeader};
use crate::config::TimestampType;
use crate::io::SegmentFile;
use crate::recovery_marker::RecoveryMarker;

/// An append's place in the arrival order of its partition. Batches go into the log in the
/// order `append` was called (a connection's pipelined produce requests keep their order),
/// whatever waits (a roll, backpressure) some of them meet on the way. A ticket dropped
/// without appending (an error, a cancelled caller) lets the next one in.
pub(super) struct Ticket<'a> {
    log: &'a PartitionLog,
    n: u64,
    used: bool,
}

impl<'a> Ticket<'a> {
    /// `log`'s next ticket in admission order.
    fn take(log: &'a PartitionLog) -> Self {
        let mut st = log.st.borrow_mut();
        st.next_ticket += 1;
        Ticket {
            log,
            n: st.next_ticket - 1,
            used: false,
        }
    }
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        if self.used {
            return;
        }
        let mut st = self.log.st.borrow_mut();
        if st.admit_ticket == self.n {
            st.advance_admission();
        } else {
            st.abandoned_tickets.insert(self.n);
        }
        st.notify();
    }
}

/// What an append writes into a batch's header.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Stamp {
    /// The leader's append: base offset, leader epoch (and LogAppendTime) set here.
    Leader,
    /// A follower's copy: the bytes as the leader stored them.
    AsStored,
}

/// Why `append_admitted` did not append: the log refused, or the caller's `admit` check did.
#[derive(Debug)]
pub enum AdmitError<R> {
    Log(LogError),
    Refused(R),
}

impl<R> From<LogError> for AdmitError<R> {
    fn from(e: LogError) -> Self {
        AdmitError::Log(e)
    }
}

pub(super) enum AppendStep {
    Wait(u64),
    Roll,
    Drain(u64),
    /// Preallocate these files to these sizes before admitting the batch.
    Reserve(Vec<(Rc<SegmentFile>, u64)>),
    /// Write the "not clean" recovery marker before the first append after a clean open.
    MarkDirty,
    /// A stored batch starts past the log end (a follower's copy of a cleaned leader's log)
    /// and a roll is due: the log end moves up to it first, so the next segment starts there.
    SkipAndRoll(u64),
    /// A stored batch starts past the log end in the active segment: write the recovery
    /// marker that lets its offsets jump first.
    MarkOffsetJumps,
    Ready,
}

impl PartitionLog {
    /// Appends one Kafka RecordBatch v2 as the producer sent it. Validates it, assigns its base
    /// offset and commit time, and with `Durability::Sync` completes only after the fdatasync
    /// that covers it.
    pub async fn append(
        self: &Rc<Self>,
        batch: &[u8],
        durability: Durability,
    ) -> Result<AppendInfo, LogError> {
        let valid =
            crate::record_check::ValidBatch::new(batch, self.batch_rules()).map_err(|source| {
                LogError::InvalidBatch {
                    dir: self.dir_name(),
                    source,
                }
            })?;
        self.append_valid(valid, durability).await
    }

    /// `append` for a batch the caller already validated.
    pub async fn append_valid(
        self: &Rc<Self>,
        valid: crate::record_check::ValidBatch<'_>,
        durability: Durability,
    ) -> Result<AppendInfo, LogError> {
        let admit_all = |_base: u64| Ok::<(), std::convert::Infallible>(());
        self.append_admitted(valid, durability, admit_all)
            .await
            .map_err(|e| match e {
                AdmitError::Log(e) => e,
                AdmitError::Refused(never) => match never {},
            })
    }

    /// `append_valid` with a last check at admission: when the batch's turn in the arrival
    /// order comes and everything it waited for (a roll, backpressure, space) is done, `admit`
    /// is called with the base offset the batch is about to get, and the batch goes into the
    /// log in the same step, with no await in between, or not at all if `admit` refuses. So
    /// state that must change with the log (idempotent-producer sequences) is checked against
    /// every earlier batch and recorded only for a batch that is in the log.
    pub async fn append_admitted<R>(
        self: &Rc<Self>,
        valid: crate::record_check::ValidBatch<'_>,
        durability: Durability,
        admit: impl FnOnce(u64) -> Result<(), R>,
    ) -> Result<AppendInfo, AdmitError<R>> {
        let (batch, h) = (valid.bytes(), *valid.header());
        // `ValidBatch::new` checked the size against the limit its caller had; the config may
        // have changed since (an altered topic), so the log checks its own.
        let max_bytes = self.max_batch_bytes();
        if batch.len() > max_bytes {
            return Err(AdmitError::Log(LogError::InvalidBatch {
                dir: self.dir_name(),
                source: BatchError::TooLarge {
                    len: batch.len(),
                    max_bytes,
                },
            }));
        }
        let mut ticket = Ticket::take(self);
        self.wait_turn(&h, ticket.n, false).await?;
        // No await from here to `append_now`: what `admit` saw is what the batch follows.
        admit(self.log_end_offset()).map_err(AdmitError::Refused)?;
        let info = self.append_now(batch, &h, ticket.n, Stamp::Leader);
        ticket.used = true;
        match durability {
            Durability::Sync => self.sync_to(info.last_offset + 1).await?,
            Durability::Buffered => self.schedule_flush(),
        }
        Ok(info)
    }

    /// Appends stored batches as another replica's log holds them (issue #18): `bytes` is
    /// whole batches, each validated as stored (`batch::validate_stored`) and starting at this
    /// log's end offset; their base offsets, leader epochs and timestamps stay as the leader
    /// wrote them. `before_each(base, batch)` runs before each batch is admitted (a follower
    /// records a new leader epoch there); an error stops the append. Returns the log end
    /// offset after them; nothing waits for their fdatasync (the caller does, `sync_to`).
    pub async fn append_stored<E: From<LogError>>(
        self: &Rc<Self>,
        bytes: &[u8],
        mut before_each: impl AsyncFnMut(&BatchHeader, &[u8]) -> Result<(), E>,
    ) -> Result<u64, E> {
        let mut rest = bytes;
        while !rest.is_empty() {
            let bad = |source| LogError::InvalidBatch {
                dir: self.dir_name(),
                source,
            };
            let len = batch::declared_size(rest)
                .filter(|&n| n > 0 && n as usize <= rest.len())
                .ok_or_else(|| {
                    bad(BatchError::InvalidRecords(format!(
                        "a replicated batch is cut short ({} bytes left)",
                        rest.len()
                    )))
                })? as usize;
            let (one, tail) = rest.split_at(len);
            rest = tail;
            let h = batch::validate_stored(one).map_err(bad)?;
            // A batch may start past the log end: the leader's cleaner took the ones between.
            let end = self.log_end_offset();
            if h.base_offset < 0 || (h.base_offset as u64) < end {
                return Err(bad(BatchError::InvalidRecords(format!(
                    "a replicated batch starts at offset {}, before the log end {end}",
                    h.base_offset
                )))
                .into());
            }
            before_each(&h, one).await?;
            self.append_stored_one(one, &h).await?;
        }
        Ok(self.log_end_offset())
    }

    async fn append_stored_one(
        self: &Rc<Self>,
        batch: &[u8],
        h: &BatchHeader,
    ) -> Result<(), LogError> {
        let mut ticket = Ticket::take(self);
        self.wait_turn(h, ticket.n, true).await?;
        if self.log_end_offset() > h.base_offset as u64 {
            // Another append went in while this one waited: not this replica's log any more.
            return Err(LogError::InvalidBatch {
                dir: self.dir_name(),
                source: BatchError::InvalidRecords(format!(
                    "a replicated batch at {} no longer follows the log end {}",
                    h.base_offset,
                    self.log_end_offset()
                )),
            });
        }
        self.append_now(batch, h, ticket.n, Stamp::AsStored);
        ticket.used = true;
        self.schedule_flush();
        Ok(())
    }

    /// Waits until batch `h` with admission ticket `ticket` may go into the log: its turn
    /// in the arrival order, and everything it needs first (a roll, a drain under
    /// backpressure, preallocated space, the "not clean" marker). A `stored` batch keeps its
    /// offsets (`append_stored`), which may start past the log end.
    async fn wait_turn(
        self: &Rc<Self>,
        h: &BatchHeader,
        ticket: u64,
        stored: bool,
    ) -> Result<(), LogError> {
        loop {
            match self.append_step(h, ticket, stored)? {
                AppendStep::Wait(gen) => self.wait_change(gen).await,
                AppendStep::Roll => self.roll().await?,
                AppendStep::SkipAndRoll(to) => {
                    {
                        let mut st = self.st.borrow_mut();
                        assert!(to >= st.next_offset, "the log end never moves back");
                        // Nothing lies between: the leader's cleaner took those offsets.
                        st.next_offset = to;
                    }
                    self.roll().await?
                }
                AppendStep::MarkOffsetJumps => self.mark_offset_jumps().await?,
                AppendStep::Drain(target) => self.sync_to(target).await?,
                AppendStep::Reserve(files) => self.reserve(files).await?,
                AppendStep::MarkDirty => self.mark_dirty().await?,
                AppendStep::Ready => return Ok(()),
            }
        }
    }

    pub(super) fn append_step(
        &self,
        h: &BatchHeader,
        ticket: u64,
        stored: bool,
    ) -> Result<AppendStep, LogError> {
        let st = self.st.borrow();
        self.check_usable(&st)?;
        if st.rolling || st.admit_ticket != ticket {
            return Ok(AppendStep::Wait(st.change_gen));
        }
        let Some(a) = st.active.as_ref() else {
            // A roll could not create the next segment (no disk space): try again.
            return Ok(AppendStep::Roll);
        };
        if !st.marked_dirty {
            return Ok(AppendStep::MarkDirty);
        }
        let commit = self.core.now_ms().max(st.last_commit_time_ms);
        let len = h.size_bytes as u64;
        let non_empty = !a.entries.is_empty();
        let too_big = non_empty && a.log.len() + len > self.config.borrow().segment_bytes;
        let too_old = a.first_commit_time_ms.is_some_and(|first| {
            self.config
                .borrow()
                .roll_due(first, commit, a.roll_jitter_ms)
        });
        // Where the batch goes: a stored one keeps its base offset, past the end if the
        // leader's cleaner took the batches between.
        let base = if stored {
            (h.base_offset.max(0) as u64).max(st.next_offset)
        } else {
            st.next_offset
        };
        let jumps = base > st.next_offset;
        let offsets_full = base + h.offset_count() - a.base_offset > u32::MAX as u64;
        if too_big || too_old || offsets_full {
            return Ok(if jumps {
                AppendStep::SkipAndRoll(base)
            } else {
                AppendStep::Roll
            });
        }
        if a.log.unflushed_bytes() + len > self.config.borrow().max_unflushed_bytes {
            return Ok(AppendStep::Drain(st.next_offset));
        }
        let reserve: Vec<(Rc<SegmentFile>, u64)> = [
            (&a.log, len),
            (&a.index, crate::index::OFFSET_ENTRY_BYTES as u64),
            (&a.time_index, crate::index::TIME_ENTRY_BYTES as u64),
        ]
        .into_iter()
        .filter_map(|(ap, extra)| {
            ap.reservation_needed(extra)
                .map(|to| (ap.file().clone(), to))
        })
        .collect();
        if !reserve.is_empty() {
            return Ok(AppendStep::Reserve(reserve));
        }
        if jumps && !st.active_offset_jumps {
            return Ok(AppendStep::MarkOffsetJumps);
        }
        Ok(AppendStep::Ready)
    }

    /// Writes the recovery marker that lets the active segment's offsets jump, before the
    /// first batch that starts past the log end goes in (a follower's copy of a cleaned
    /// leader's log): recovery takes a jump in the last segment for damage otherwise, and
    /// would cut the log there. A failure refuses the batch; nothing was written.
    pub(super) async fn mark_offset_jumps(&self) -> Result<(), LogError> {
        let base = {
            let st = self.st.borrow();
            match st.active.as_ref() {
                Some(a) if !st.active_offset_jumps => a.base_offset,
                _ => return Ok(()),
            }
        };
        RecoveryMarker {
            clean: false,
            recovery_base: base,
            offset_jumps: true,
        }
        .store(&self.dir)
        .await
        .map_err(|e| self.io_err(e))?;
        let mut st = self.st.borrow_mut();
        // A roll meanwhile wrote its own marker (no jumps) for a new segment: ask again.
        if st.active.as_ref().is_some_and(|a| a.base_offset == base) {
            st.marked_dirty = true;
            st.active_offset_jumps = true;
        }
        Ok(())
    }

    /// Writes the "not clean" recovery marker (recovery scans from the active segment) before
    /// the first append after a clean open. A failure refuses the batch; nothing was written.
    pub(super) async fn mark_dirty(&self) -> Result<(), LogError> {
        let base = {
            let st = self.st.borrow();
            if st.marked_dirty {
                return Ok(());
            }
            match st.active.as_ref() {
                Some(a) => a.base_offset,
                None => return Ok(()),
            }
        };
        let offset_jumps = self.st.borrow().active_offset_jumps;
        RecoveryMarker {
            clean: false,
            recovery_base: base,
            offset_jumps,
        }
        .store(&self.dir)
        .await
        .map_err(|e| self.io_err(e))?;
        self.st.borrow_mut().marked_dirty = true;
        Ok(())
    }

    /// Preallocates the active segment's files for the next batch. A refusal (a full disk)
    /// wrote nothing: the batch is refused with `NoSpace` and the log stays usable.
    pub(super) async fn reserve(&self, files: Vec<(Rc<SegmentFile>, u64)>) -> Result<(), LogError> {
        for (file, to) in files {
            if let Err(e) = file.preallocate(to).await {
                tracing::warn!(dir = %self.dir.display(), error = %e, "preallocation refused; batch not stored");
                return Err(LogError::NoSpace {
                    dir: self.dir_name(),
                    cause: e.to_string(),
                });
            }
            let mut st = self.st.borrow_mut();
            if let Some(a) = st.active.as_mut() {
                for ap in [&mut a.log, &mut a.index, &mut a.time_index] {
                    if Rc::ptr_eq(ap.file(), &file) {
                        ap.reserved(to);
                    }
                }
            }
        }
        Ok(())
    }

    /// The synchronous part of an append: offsets, commit time, bytes into the tail, index.
    pub(super) fn append_now(
        &self,
        batch: &[u8],
        h: &BatchHeader,
        ticket: u64,
        stamp: Stamp,
    ) -> AppendInfo {
        let mut st = self.st.borrow_mut();
        assert_eq!(
            st.admit_ticket, ticket,
            "batches enter the log in arrival order"
        );
        assert!(!st.rolling, "no append while the segment set changes");
        // A stored batch keeps its offsets: past the log end only where the recovery marker
        // lets the active segment's offsets jump.
        let base = if stamp == Stamp::AsStored {
            let base = h.base_offset as u64;
            assert!(
                base == st.next_offset || (base > st.next_offset && st.active_offset_jumps),
                "a stored batch at {base} follows the log end {}",
                st.next_offset
            );
            base
        } else {
            st.next_offset
        };
        let commit = self.core.now_ms().max(st.last_commit_time_ms);
        assert!(
            commit >= st.last_commit_time_ms,
            "commit time never decreases"
        );
        st.last_commit_time_ms = commit;
        let epoch = st.leader_epoch;
        let a = st
            .active
            .as_mut()
            .expect("append_step saw an active segment");
        let position = a.log.len();
        let rel = base - a.base_offset;
        assert!(
            rel + h.offset_count() <= u32::MAX as u64
                && position + batch.len() as u64 <= u32::MAX as u64
        );
        let log_append_time = stamp == Stamp::Leader
            && self.config.borrow().timestamp_type == TimestampType::LogAppendTime;
        let max_ts = if stamp == Stamp::AsStored {
            a.log.append(batch);
            if let Some(t) = &a.tail {
                t.push(position, &[batch]);
            }
            h.max_timestamp
        } else if log_append_time {
            let mut owned = batch.to_vec();
            batch::set_base_offset(&mut owned, base as i64);
            batch::set_leader_epoch(&mut owned, epoch);
            batch::stamp_log_append_time(&mut owned, commit);
            a.log.append(&owned);
            if let Some(t) = &a.tail {
                t.push(position, &[&owned]);
            }
            commit
        } else {
            let mut head = [0u8; batch::MAGIC_POS];
            head.copy_from_slice(&batch[..batch::MAGIC_POS]);
            batch::set_base_offset(&mut head, base as i64);
            batch::set_leader_epoch(&mut head, epoch);
            a.log.append(&head);
            a.log.append(&batch[batch::MAGIC_POS..]);
            if let Some(t) = &a.tail {
                t.push(position, &[&head, &batch[batch::MAGIC_POS..]]);
            }
            h.max_timestamp
        };
        a.push_batch(
            rel as u32,
            position as u32,
            commit,
            max_ts,
            batch.len() as u64,
            self.config.borrow().index_interval_bytes,
        );
        assert!(h.offset_count() >= 1, "a batch holds at least one offset");
        st.next_offset = base + h.offset_count();
        st.advance_admission();
        if st.next_ticket > st.admit_ticket {
            // Appends queued behind this one (they met a roll or backpressure) go next.
            st.notify();
        }
        st.stats.appends += 1;
        st.stats.bytes_appended += batch.len() as u64;
        AppendInfo {
            base_offset: base,
            last_offset: st.next_offset - 1,
            commit_time_ms: commit,
            log_append_time_ms: log_append_time.then_some(commit),
        }
    }
}
