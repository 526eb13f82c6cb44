//! Alignment (seed 003, "Alignment"): which fetched records run in a round, which wait for
//! the barrier, and when the barrier fires. Pure bookkeeping over offsets, apart from any
//! Kafka client, so that every rule is unit-tested on its own.
//!
//! - The pending cut is the oldest complete cut above the epoch last committed. A record of a
//!   partition of the cut at or above that partition's cut offset waits (the marker takes the
//!   cut offset and reaches no consumer, so "before the cut" is "offset below the cut
//!   offset").
//! - An injection under way (its injection-start record read, its cut not yet published)
//!   fences each target at its frozen offset: its marker will be at or above it, so nothing
//!   from there on may run before the cut is known.
//! - The barrier fires when every aligned partition (the owned ones of the cut, or every one
//!   of the cut while the runner owns none) reached its cut offset: a record at or above the
//!   offset just below the cut was seen, the known markers skipped, or the consumer reports
//!   a position at or past it.
//! - Waiting records are bounded by `max_held_bytes`: past it, a partition's records are
//!   dropped from the first one that does not fit and fetched again from there once it may
//!   run (the runner pauses a partition while it has records waiting: back-pressure).
//! - A revoked partition leaves the pending cut, with everything it had waiting.
//! - The offset committed at a barrier is the highest of the cut offset, the processed
//!   position and the offset committed before: a cut behind the commit never rewinds it.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

use crate::{BarrierCut, Record, TopicPartition};

/// Where a partition's processing stands.
#[derive(Debug, Default, Clone)]
struct PartitionState {
    /// The offset after the last record run (or the position the task's state was restored
    /// at): the point its state is at.
    processed: Option<i64>,
    /// The offset after the highest record seen (run, waiting or dropped at the bound).
    seen: Option<i64>,
    /// The offset last committed (or the position the runner started the partition at).
    committed: Option<i64>,
    /// Records waiting for the barrier, in offset order.
    held: VecDeque<Record>,
    /// Records from this offset on were dropped at the bound: fetch again from here.
    refetch_from: Option<i64>,
}

/// What [`Aligner::offer`] did with a record.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Offered {
    /// Run it now.
    Run(Record),
    /// It waits for the barrier (or for the injection under way to publish its cut).
    Held,
    /// Not the runner's (a revoked partition), or past the bound: fetched again later.
    Dropped,
}

/// A barrier that fired: the cut, the aligned partitions and what to commit for each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Fired {
    pub cut: BarrierCut,
    /// Aligned partition → the offset to commit.
    pub commits: BTreeMap<TopicPartition, i64>,
    /// The tasks (partition numbers) to snapshot.
    pub tasks: BTreeSet<i32>,
}

#[derive(Debug)]
pub(crate) struct Aligner {
    max_held_bytes: usize,
    held_bytes: usize,
    pending: Option<BarrierCut>,
    fences: HashMap<TopicPartition, i64>,
    /// Marker offsets of the cuts known (complete or partial) per owned partition: offsets
    /// no record can take.
    markers: HashMap<TopicPartition, BTreeSet<i64>>,
    partitions: BTreeMap<TopicPartition, PartitionState>,
}

impl Aligner {
    pub fn new(max_held_bytes: usize) -> Self {
        Self {
            max_held_bytes,
            held_bytes: 0,
            pending: None,
            fences: HashMap::new(),
            markers: HashMap::new(),
            partitions: BTreeMap::new(),
        }
    }

    pub fn pending(&self) -> Option<&BarrierCut> {
        self.pending.as_ref()
    }

    pub fn owns(&self, tp: &TopicPartition) -> bool {
        self.partitions.contains_key(tp)
    }

    pub fn owned(&self) -> impl Iterator<Item = &TopicPartition> {
        self.partitions.keys()
    }

    pub fn held_bytes(&self) -> usize {
        self.held_bytes
    }

    /// The partitions that have records waiting or dropped (the runner keeps them paused).
    pub fn waiting(&self) -> BTreeSet<TopicPartition> {
        self.partitions
            .iter()
            .filter(|(_, s)| !s.held.is_empty() || s.refetch_from.is_some())
            .map(|(tp, _)| tp.clone())
            .collect()
    }

    /// Sets the cut to align on (None: none pending), the frozen offsets of the injections
    /// under way, and the marker offsets of every cut known.
    pub fn set_cuts<'a>(
        &mut self,
        pending: Option<BarrierCut>,
        fences: impl IntoIterator<Item = (&'a TopicPartition, i64)>,
        markers: impl IntoIterator<Item = (&'a TopicPartition, i64)>,
    ) {
        self.pending = pending;
        self.fences.clear();
        for (tp, o) in fences {
            if self.owns(tp) {
                let f = self.fences.entry(tp.clone()).or_insert(o);
                *f = (*f).min(o);
            }
        }
        self.markers.clear();
        for (tp, o) in markers {
            if self.owns(tp) {
                self.markers.entry(tp.clone()).or_default().insert(o);
            }
        }
    }

    /// Takes partitions on, each at the position its state is at (its committed offset, a
    /// restored cut's offset or a rebalance snapshot's position; None when unknown: the first
    /// record tells).
    pub fn assign(&mut self, tps: impl IntoIterator<Item = (TopicPartition, Option<i64>)>) {
        for (tp, at) in tps {
            self.partitions.insert(
                tp,
                PartitionState {
                    processed: at,
                    seen: at,
                    committed: at,
                    ..PartitionState::default()
                },
            );
        }
    }

    /// Drops revoked partitions, with their waiting records; they leave the pending cut.
    /// Returns each one's processed position (where its task's state is).
    pub fn revoke<'a>(
        &mut self,
        tps: impl IntoIterator<Item = &'a TopicPartition>,
    ) -> BTreeMap<TopicPartition, Option<i64>> {
        let mut out = BTreeMap::new();
        for tp in tps {
            if let Some(s) = self.partitions.remove(tp) {
                self.held_bytes -= s.held.iter().map(Record::size_bytes).sum::<usize>();
                out.insert(tp.clone(), s.processed);
            }
            self.fences.remove(tp);
            self.markers.remove(tp);
        }
        out
    }

    /// Puts partition `tp` back at `at` (a transaction rolled back, or a restore): what it
    /// had waiting is dropped (the runner seeks it to `at`).
    pub fn reset(&mut self, tp: &TopicPartition, at: Option<i64>) {
        if let Some(s) = self.partitions.get_mut(tp) {
            self.held_bytes -= s.held.iter().map(Record::size_bytes).sum::<usize>();
            *s = PartitionState {
                processed: at,
                seen: at,
                committed: at,
                ..PartitionState::default()
            };
        }
    }

    /// Forgets what `tp` had seen past its processed position (a failed round: the records
    /// not run are fetched again from `at`); its state and commit stay.
    pub fn rewind(&mut self, tp: &TopicPartition, at: Option<i64>) {
        if let Some(s) = self.partitions.get_mut(tp) {
            self.held_bytes -= s.held.drain(..).map(|r| r.size_bytes()).sum::<usize>();
            s.refetch_from = None;
            s.seen = at;
            s.processed = s.processed.or(at);
        }
    }

    /// The offset `tp`'s last commit left it at, when its state stands elsewhere (a
    /// rebalance snapshot's positions).
    pub fn set_committed(&mut self, tp: &TopicPartition, committed: Option<i64>) {
        if let Some(s) = self.partitions.get_mut(tp) {
            s.committed = committed;
        }
    }

    pub fn committed(&self, tp: &TopicPartition) -> Option<i64> {
        self.partitions.get(tp).and_then(|s| s.committed)
    }

    pub fn processed(&self, tp: &TopicPartition) -> Option<i64> {
        self.partitions.get(tp).and_then(|s| s.processed)
    }

    /// Records that the commit of the partitions reached `offsets`.
    pub fn committed_at<'a>(
        &mut self,
        offsets: impl IntoIterator<Item = (&'a TopicPartition, i64)>,
    ) {
        for (tp, o) in offsets {
            if let Some(s) = self.partitions.get_mut(tp) {
                s.committed = Some(s.committed.map_or(o, |c| c.max(o)));
            }
        }
    }

    /// The first offset of `tp` that may not run now.
    fn limit(&self, tp: &TopicPartition) -> i64 {
        let cut = self
            .pending
            .as_ref()
            .and_then(|c| c.offsets.get(tp).copied())
            .unwrap_or(i64::MAX);
        cut.min(self.fences.get(tp).copied().unwrap_or(i64::MAX))
    }

    /// Decides what happens to one fetched record.
    pub fn offer(&mut self, record: Record) -> Offered {
        let tp = (record.topic.clone(), record.partition);
        let limit = self.limit(&tp);
        let Some(s) = self.partitions.get_mut(&tp) else {
            return Offered::Dropped;
        };
        // Seen already (run, waiting, or dropped at the bound and to be fetched again): the
        // consumer hands a partition out again from its committed offset when a rebalance
        // revokes and re-assigns it within one poll.
        if s.seen.is_some_and(|seen| record.offset < seen) {
            return Offered::Dropped;
        }
        s.seen = Some(record.offset + 1);
        if s.committed.is_none() {
            // The partition started where its first record is.
            s.committed = Some(record.offset);
        }
        if s.refetch_from.is_some() {
            return Offered::Dropped;
        }
        if s.held.is_empty() && record.offset < limit {
            s.processed = Some(record.offset + 1);
            return Offered::Run(record);
        }
        let size = record.size_bytes();
        if self.held_bytes + size > self.max_held_bytes {
            s.refetch_from = Some(record.offset);
            return Offered::Dropped;
        }
        self.held_bytes += size;
        s.held.push_back(record);
        Offered::Held
    }

    /// The waiting records that may run now (after the cut or a fence moved), in offset order
    /// per partition, and the partitions to fetch again from an offset (their waiting records
    /// all ran, and some were dropped at the bound).
    pub fn release(&mut self) -> (Vec<Record>, Vec<(TopicPartition, i64)>) {
        let limits: HashMap<TopicPartition, i64> = self
            .partitions
            .keys()
            .map(|tp| (tp.clone(), self.limit(tp)))
            .collect();
        let (mut run, mut refetch) = (Vec::new(), Vec::new());
        for (tp, s) in self.partitions.iter_mut() {
            let limit = limits[tp];
            while s.held.front().is_some_and(|r| r.offset < limit) {
                let r = s.held.pop_front().expect("a front record");
                self.held_bytes -= r.size_bytes();
                s.processed = Some(r.offset + 1);
                run.push(r);
            }
            if s.held.is_empty() {
                if let Some(from) = s.refetch_from.take() {
                    // Handed out again from `from`: not seen yet. `from` is at or past the
                    // cut it waited for, so reaching it stays true.
                    s.seen = Some(from);
                    refetch.push((tp.clone(), from));
                }
            }
        }
        (run, refetch)
    }

    /// Whether `tp` reached offset `cut`: every record below it was seen (the known markers
    /// skipped), or the consumer's position is at or past it.
    fn reached(&self, tp: &TopicPartition, cut: i64, position: Option<i64>) -> bool {
        if position.is_some_and(|p| p >= cut) {
            return true;
        }
        let Some(s) = self.partitions.get(tp) else {
            return false;
        };
        let Some(mut at) = s.seen.max(s.processed) else {
            return false;
        };
        if let Some(markers) = self.markers.get(tp) {
            while at < cut && markers.contains(&at) {
                at += 1;
            }
        }
        at >= cut
    }

    /// The aligned partitions of the pending cut: the owned ones, or every one while the
    /// runner owns none.
    fn aligned(&self) -> Vec<TopicPartition> {
        let Some(cut) = &self.pending else {
            return Vec::new();
        };
        if self.partitions.is_empty() {
            return cut.offsets.keys().cloned().collect();
        }
        cut.offsets
            .keys()
            .filter(|tp| self.owns(tp))
            .cloned()
            .collect()
    }

    /// Fires the barrier when every aligned partition reached its cut offset (`position`: the
    /// consumer's next offset of a partition, where a [`crate::PositionReader`] tells it).
    /// The pending cut is then done: the caller snapshots `tasks`, commits and moves on.
    pub fn try_fire(&mut self, position: impl Fn(&TopicPartition) -> Option<i64>) -> Option<Fired> {
        let cut = self.pending.as_ref()?;
        let aligned = self.aligned();
        let all_reached = aligned
            .iter()
            .all(|tp| self.reached(tp, cut.offsets[tp], position(tp)));
        if !all_reached || self.partitions.is_empty() {
            return None;
        }
        let cut = self.pending.take().expect("a pending cut");
        let mut commits = BTreeMap::new();
        let mut tasks = BTreeSet::new();
        for tp in aligned {
            let s = &self.partitions[&tp];
            let at = cut.offsets[&tp]
                .max(s.processed.unwrap_or(0))
                .max(s.committed.unwrap_or(0));
            commits.insert(tp.clone(), at);
            tasks.insert(tp.1);
        }
        Some(Fired {
            cut,
            commits,
            tasks,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CutStatus;

    fn tp(t: &str, p: i32) -> TopicPartition {
        (t.to_string(), p)
    }

    fn rec(t: &str, p: i32, offset: i64) -> Record {
        Record {
            topic: t.into(),
            partition: p,
            offset,
            timestamp_ms: None,
            key: None,
            value: Some(vec![0; 10]),
        }
    }

    fn cut(epoch: i64, offsets: &[(&str, i32, i64)]) -> BarrierCut {
        BarrierCut {
            group: "g".into(),
            epoch,
            triggered_at_ms: 0,
            completed_at_ms: 0,
            status: CutStatus::Complete,
            offsets: offsets.iter().map(|(t, p, o)| (tp(t, *p), *o)).collect(),
            missing: Vec::new(),
        }
    }

    fn run_offsets(a: &mut Aligner, records: impl IntoIterator<Item = Record>) -> Vec<i64> {
        records
            .into_iter()
            .filter_map(|r| match a.offer(r) {
                Offered::Run(r) => Some(r.offset),
                _ => None,
            })
            .collect()
    }

    fn no_position(_: &TopicPartition) -> Option<i64> {
        None
    }

    #[test]
    fn a_slow_partition_holds_the_barrier_and_the_fast_ones_wait_within_the_bound() {
        let size = rec("a", 0, 0).size_bytes();
        let mut a = Aligner::new(3 * size);
        a.assign([(tp("a", 0), Some(0)), (tp("b", 0), Some(0))]);
        let c = cut(1, &[("a", 0, 5), ("b", 0, 5)]);
        a.set_cuts(Some(c.clone()), [], c.offsets.iter().map(|(t, o)| (t, *o)));
        // a/0 runs below its cut (offset 5 is the marker), then waits: 3 fit, 2 are dropped.
        assert_eq!(
            run_offsets(&mut a, (0..5).map(|o| rec("a", 0, o))),
            [0, 1, 2, 3, 4]
        );
        assert!(run_offsets(&mut a, (6..11).map(|o| rec("a", 0, o))).is_empty());
        assert_eq!(a.held_bytes(), 3 * size);
        assert_eq!(a.waiting(), BTreeSet::from([tp("a", 0)]));
        // b/0 is slow: two records only; the barrier does not fire.
        assert_eq!(run_offsets(&mut a, (0..2).map(|o| rec("b", 0, o))), [0, 1]);
        assert_eq!(a.try_fire(no_position), None);
        // b/0 reaches its cut: the barrier fires, committing the cut offsets.
        assert_eq!(
            run_offsets(&mut a, (2..5).map(|o| rec("b", 0, o))),
            [2, 3, 4]
        );
        let fired = a.try_fire(no_position).expect("the barrier fires");
        assert_eq!(fired.cut.epoch, 1);
        assert_eq!(fired.commits, c.offsets);
        assert_eq!(fired.tasks, BTreeSet::from([0]));
        // With no cut pending the waiting records run, and a/0 is fetched again from 9.
        a.set_cuts(None, [], []);
        let (run, refetch) = a.release();
        assert_eq!(run.iter().map(|r| r.offset).collect::<Vec<_>>(), [6, 7, 8]);
        assert_eq!(refetch, [(tp("a", 0), 9)]);
        assert_eq!(a.held_bytes(), 0);
        assert!(a.waiting().is_empty());
        assert_eq!(
            run_offsets(&mut a, (9..11).map(|o| rec("a", 0, o))),
            [9, 10]
        );
    }

    #[test]
    fn records_handed_out_again_after_a_reassignment_run_once() {
        let mut a = Aligner::new(1 << 20);
        a.assign([(tp("a", 0), Some(10))]);
        let c = cut(1, &[("a", 0, 15)]);
        a.set_cuts(Some(c.clone()), [], c.offsets.iter().map(|(t, o)| (t, *o)));
        assert_eq!(
            run_offsets(&mut a, (10..17).map(|o| rec("a", 0, o))),
            [10, 11, 12, 13, 14]
        );
        // The consumer starts over at the committed offset 10: nothing runs or waits twice.
        assert!(run_offsets(&mut a, (10..17).map(|o| rec("a", 0, o))).is_empty());
        assert_eq!(a.held_bytes(), 2 * rec("a", 0, 0).size_bytes());
        assert_eq!(
            run_offsets(&mut a, [rec("a", 0, 17)]),
            Vec::<i64>::new(),
            "waits"
        );
    }

    #[test]
    fn a_rewound_partition_runs_again_what_it_had_not_run() {
        let mut a = Aligner::new(1 << 20);
        a.assign([(tp("a", 0), Some(0))]);
        let c = cut(1, &[("a", 0, 2)]);
        a.set_cuts(Some(c.clone()), [], c.offsets.iter().map(|(t, o)| (t, *o)));
        assert_eq!(run_offsets(&mut a, (0..4).map(|o| rec("a", 0, o))), [0, 1]);
        a.rewind(&tp("a", 0), a.processed(&tp("a", 0)));
        assert_eq!(a.held_bytes(), 0);
        // Fetched again from 2: the record at 3 waits again (it is past the cut).
        assert!(run_offsets(&mut a, [rec("a", 0, 3)]).is_empty());
        assert_eq!(a.held_bytes(), rec("a", 0, 3).size_bytes());
    }

    #[test]
    fn a_rebalance_mid_cut_drops_the_lost_partition_from_the_pending_cut() {
        let mut a = Aligner::new(1 << 20);
        a.assign([(tp("a", 0), Some(0)), (tp("a", 1), Some(0))]);
        let c = cut(3, &[("a", 0, 2), ("a", 1, 100)]);
        a.set_cuts(Some(c.clone()), [], c.offsets.iter().map(|(t, o)| (t, *o)));
        assert_eq!(run_offsets(&mut a, (0..4).map(|o| rec("a", 0, o))), [0, 1]);
        assert_eq!(a.try_fire(no_position), None, "a/1 is far from its cut");
        // a/1 goes to another runner: it no longer holds the barrier.
        let revoked = a.revoke([&tp("a", 1)]);
        assert_eq!(revoked, BTreeMap::from([(tp("a", 1), Some(0))]));
        let fired = a.try_fire(no_position).expect("fires without a/1");
        assert_eq!(fired.commits, BTreeMap::from([(tp("a", 0), 2)]));
        // A record of the revoked partition polled before the rebalance is not run.
        assert_eq!(a.offer(rec("a", 1, 0)), Offered::Dropped);
    }

    #[test]
    fn a_cut_behind_the_commit_fires_at_once_and_never_rewinds_it() {
        let mut a = Aligner::new(1 << 20);
        // The partition starts at its committed offset 50; the cut is at 20.
        a.assign([(tp("a", 0), Some(50))]);
        let c = cut(2, &[("a", 0, 20)]);
        a.set_cuts(Some(c.clone()), [], c.offsets.iter().map(|(t, o)| (t, *o)));
        let fired = a.try_fire(no_position).expect("already past the cut");
        assert_eq!(fired.commits, BTreeMap::from([(tp("a", 0), 50)]));
        // Records from 50 on run (no cut pending any more).
        a.set_cuts(None, [], []);
        assert_eq!(
            run_offsets(&mut a, (50..52).map(|o| rec("a", 0, o))),
            [50, 51]
        );
    }

    #[test]
    fn an_injection_under_way_fences_its_targets_until_its_cut_is_published() {
        let mut a = Aligner::new(1 << 20);
        a.assign([(tp("a", 0), Some(0))]);
        let fence = (tp("a", 0), 3);
        a.set_cuts(None, [(&fence.0, fence.1)], []);
        assert_eq!(
            run_offsets(&mut a, (0..6).map(|o| rec("a", 0, o))),
            [0, 1, 2]
        );
        // The cut is published: the marker took offset 4; offset 3 runs, 5 waits.
        let c = cut(1, &[("a", 0, 4)]);
        a.set_cuts(Some(c.clone()), [], c.offsets.iter().map(|(t, o)| (t, *o)));
        let (run, refetch) = a.release();
        assert_eq!(run.iter().map(|r| r.offset).collect::<Vec<_>>(), [3]);
        assert!(refetch.is_empty());
        assert!(a.try_fire(no_position).is_some());
    }

    #[test]
    fn an_idle_partition_reaches_its_cut_over_known_markers_or_by_its_position() {
        let mut a = Aligner::new(1 << 20);
        // Committed at cut 1's marker (offset 10); cut 2's marker is right after it (11).
        a.assign([(tp("a", 0), Some(10)), (tp("b", 0), Some(0))]);
        let c2 = cut(2, &[("a", 0, 11), ("b", 0, 7)]);
        let markers = [(tp("a", 0), 10), (tp("a", 0), 11), (tp("b", 0), 7)];
        a.set_cuts(Some(c2.clone()), [], markers.iter().map(|(t, o)| (t, *o)));
        // b/0 saw nothing: only its position (past its marker) lets the barrier fire.
        assert_eq!(a.try_fire(no_position), None);
        let fired = a
            .try_fire(|tp| (tp.0 == "b").then_some(8))
            .expect("fires by position");
        assert_eq!(fired.commits, c2.offsets);
    }

    #[test]
    fn a_runner_that_owns_nothing_yet_aligns_on_every_partition_of_the_cut() {
        let mut a = Aligner::new(1 << 20);
        let c = cut(1, &[("a", 0, 0)]);
        a.set_cuts(Some(c), [], []);
        assert_eq!(a.aligned(), [tp("a", 0)]);
        assert_eq!(
            a.try_fire(|_| Some(5)),
            None,
            "nothing owned, nothing to commit"
        );
    }
}
