//! The openraft state machine: applies entries to [`MetaState`], fans applied changes out to
//! subscribers, builds and installs snapshots.
//!
//! Snapshot file `<data>/raft/snapshot`: a checked file (magic `RLMSNAP1`, version, crc32,
//! length; see [`crate::wire`]) whose payload is the rkyv bytes of the snapshot meta (last log
//! id, membership, id) and the whole [`MetaState`]. The same bytes are what is sent to a
//! follower in InstallSnapshot, so the checksum covers the transfer too.

use std::collections::BTreeMap;
use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use openraft::storage::RaftStateMachine;
use openraft::{
    AnyError, BasicNode, EntryPayload, LogId, OptionalSend, RaftSnapshotBuilder, Snapshot,
    SnapshotMeta, StorageError, StorageIOError, StoredMembership,
};
use rkyv::{Archive, Deserialize, Serialize};

use crate::error::MetaError;
use crate::state::{AppliedChange, ApplyOutcome, BrokerRegistration, Change, MetaState};
use crate::wire::{self, Entry, WSnapshotMeta};
use crate::TypeConfig;

pub const SNAPSHOT_FILE: &str = "snapshot";
pub const SNAPSHOT_MAGIC: &[u8; 8] = b"RLMSNAP1";
/// 2: the state's fan-out section holds links (`STATE_VERSION` 2); 3: the broker registry
/// (`STATE_VERSION` 3); 4: SCRAM credentials (`STATE_VERSION` 4); 5: client quotas
/// (`STATE_VERSION` 5); 6: barrier group definitions (`STATE_VERSION` 6); 7: replicated
/// partitions (`STATE_VERSION` 7); 8: reassignments of replicated partitions
/// (`STATE_VERSION` 8). Versions 1 to 7 are still read.
pub const SNAPSHOT_VERSION: u32 = 8;

#[derive(Archive, Serialize, Deserialize, Clone, Debug)]
struct SnapshotBody {
    meta: WSnapshotMeta,
    state: MetaState,
}

/// A snapshot body of an older layout: the version its header and state must say, its
/// state's version, and the body in the current layout.
trait OldBody {
    const VERSION: u32;
    fn state_version(&self) -> u32;
    fn into_current(self) -> SnapshotBody;
}

/// A state layout: its version, and its way to the current one (an older layout takes its one
/// step to the next version, one up, as checked when the step compiles, and goes on from
/// there; the current layout is where the chain ends).
trait Layout {
    const VERSION: u32;
    fn into_current(self) -> MetaState;
}

impl Layout for MetaState {
    const VERSION: u32 = crate::state::STATE_VERSION;

    fn into_current(self) -> MetaState {
        self
    }
}

/// Declares an older snapshot layout, frozen as the last build of that version wrote it (state
/// versions 3 and 4 each gained fields under one number while ringlog was being built; the
/// snapshots of those in-between builds are not read), and its one step to
/// the next version (`-> $next`). Module `$v` holds `VERSION`, a `MetaState` of the version
/// field and the fields listed in their stored order, and a `SnapshotBody`.
///
/// The step, `MetaState::into_next`, starts from the next layout's empty state and carries
/// each field by its mark: `keep` as it is, `with(f)` through `f`; a `drop` field (a section
/// whose type changed while it was empty) stays as the next layout's default has it, as does
/// every field the next layout adds. Adding a version freezes the current layout as one more
/// `old_layout!` whose step leads to `crate::state::MetaState`, and points the step before
/// it at that frozen layout: no older step changes.
macro_rules! old_layout {
    (@field keep, $next:ident, $old:ident, $f:ident) => {
        $next.$f = $old.$f;
    };
    (@field drop, $next:ident, $old:ident, $f:ident) => {
        let _ = $old.$f;
    };
    (@field with($conv:path), $next:ident, $old:ident, $f:ident) => {
        $next.$f = $conv($old.$f);
    };
    ($(#[$doc:meta])* $v:ident = $version:literal -> $next_layout:path {
        $($field:ident: $ty:ty => $how:ident $(($conv:path))?),* $(,)?
    } $($extra:item)*) => {
        $(#[$doc])*
        mod $v {
            #[allow(unused_imports)]
            use std::collections::BTreeMap;

            use rkyv::{Archive, Deserialize, Serialize};

            #[allow(unused_imports)]
            use crate::state::*;
            use crate::wire::WSnapshotMeta;

            pub(super) const VERSION: u32 = $version;

            $($extra)*

            #[derive(Archive, Serialize, Deserialize, Clone, Debug)]
            pub(super) struct MetaState {
                pub(super) version: u32,
                $(pub(super) $field: $ty),*
            }

            impl Default for MetaState {
                fn default() -> Self {
                    MetaState {
                        version: VERSION,
                        $($field: Default::default()),*
                    }
                }
            }

            impl MetaState {
                /// This version's one step: the same state in the next version's layout.
                pub(super) fn into_next(self) -> $next_layout {
                    let mut next = <$next_layout>::default();
                    let old = self;
                    $(old_layout!(@field $how $(($conv))?, next, old, $field);)*
                    next
                }
            }

            impl super::Layout for MetaState {
                const VERSION: u32 = VERSION;

                fn into_current(self) -> crate::state::MetaState {
                    super::Layout::into_current(self.into_next())
                }
            }

            const _: () = assert!(
                <$next_layout as super::Layout>::VERSION == VERSION + 1,
                "a step skips or repeats a version"
            );

            #[derive(Archive, Serialize, Deserialize, Clone, Debug)]
            pub(super) struct SnapshotBody {
                pub(super) meta: WSnapshotMeta,
                pub(super) state: MetaState,
            }

            impl super::OldBody for SnapshotBody {
                const VERSION: u32 = VERSION;

                fn state_version(&self) -> u32 {
                    self.state.version
                }

                fn into_current(self) -> super::SnapshotBody {
                    super::SnapshotBody {
                        meta: self.meta,
                        state: super::Layout::into_current(self.state),
                    }
                }
            }
        }
    };
}

old_layout! {
    /// Snapshot version 1: topics and their assignments, the fan-out and barrier sections
    /// empty. Its step: the fan-out section starts empty in its version 2 form.
    v1 = 1 -> super::v2::MetaState {
        topics: BTreeMap<String, TopicMeta> => keep,
        assignments: BTreeMap<String, Vec<Assignment>> => keep,
        fanout_links: FanoutLinks => drop,
        barrier_groups: BarrierSectionV1 => keep,
    }

    /// The fan-out section of version 1: versioned and empty.
    #[derive(Archive, Serialize, Deserialize, Clone, Debug)]
    pub(super) struct FanoutLinks {
        pub(super) section_version: u32,
    }

    impl Default for FanoutLinks {
        fn default() -> Self {
            FanoutLinks { section_version: 1 }
        }
    }
}

old_layout! {
    /// Snapshot version 2: fan-out links. Its step: the broker registry starts empty (every
    /// node registers again at its start).
    v2 = 2 -> super::v3::MetaState {
        topics: BTreeMap<String, TopicMeta> => keep,
        assignments: BTreeMap<String, Vec<Assignment>> => keep,
        fanout_links: FanoutLinks => keep,
        barrier_groups: BarrierSectionV1 => keep,
    }
}

old_layout! {
    /// Snapshot version 3: the broker registry, the cluster id and the producer-id blocks.
    /// Its step: no SCRAM users, listeners or ACLs yet.
    v3 = 3 -> super::v4::MetaState {
        topics: BTreeMap<String, TopicMeta> => keep,
        assignments: BTreeMap<String, Vec<Assignment>> => keep,
        fanout_links: FanoutLinks => keep,
        barrier_groups: BarrierSectionV1 => keep,
        brokers: BTreeMap<u64, BrokerRegistration> => keep,
        cluster_id: Option<String> => keep,
        producer_id_blocks: u64 => keep,
    }
}

old_layout! {
    /// Snapshot version 4: SCRAM users, listeners and ACLs. Its step: no client quotas yet.
    v4 = 4 -> super::v5::MetaState {
        topics: BTreeMap<String, TopicMeta> => keep,
        assignments: BTreeMap<String, Vec<Assignment>> => keep,
        fanout_links: FanoutLinks => keep,
        barrier_groups: BarrierSectionV1 => keep,
        brokers: BTreeMap<u64, BrokerRegistration> => keep,
        cluster_id: Option<String> => keep,
        producer_id_blocks: u64 => keep,
        scram_users: BTreeMap<String, UserCredentials> => keep,
        broker_listeners: BTreeMap<u64, Vec<ListenerEndpoint>> => keep,
        acls: Vec<AclBinding> => keep,
    }
}

old_layout! {
    /// Snapshot version 5: client quotas. Its step: the barrier section of version 1, always
    /// empty, becomes the empty section of barrier groups.
    v5 = 5 -> super::v6::MetaState {
        topics: BTreeMap<String, TopicMeta> => keep,
        assignments: BTreeMap<String, Vec<Assignment>> => keep,
        fanout_links: FanoutLinks => keep,
        barrier_groups: BarrierSectionV1 => drop,
        brokers: BTreeMap<u64, BrokerRegistration> => keep,
        cluster_id: Option<String> => keep,
        producer_id_blocks: u64 => keep,
        scram_users: BTreeMap<String, UserCredentials> => keep,
        broker_listeners: BTreeMap<u64, Vec<ListenerEndpoint>> => keep,
        acls: Vec<AclBinding> => keep,
        client_quotas: Vec<ClientQuota> => keep,
    }
}

old_layout! {
    /// Snapshot version 6: barrier groups. Its step: no replicated partitions yet.
    v6 = 6 -> super::v7::MetaState {
        topics: BTreeMap<String, TopicMeta> => keep,
        assignments: BTreeMap<String, Vec<Assignment>> => keep,
        fanout_links: FanoutLinks => keep,
        barrier_groups: BarrierGroups => keep,
        brokers: BTreeMap<u64, BrokerRegistration> => keep,
        cluster_id: Option<String> => keep,
        producer_id_blocks: u64 => keep,
        scram_users: BTreeMap<String, UserCredentials> => keep,
        broker_listeners: BTreeMap<u64, Vec<ListenerEndpoint>> => keep,
        acls: Vec<AclBinding> => keep,
        client_quotas: Vec<ClientQuota> => keep,
    }
}

old_layout! {
    /// Snapshot version 7: replicated partitions. Its step: none has a reassignment under
    /// way.
    v7 = 7 -> crate::state::MetaState {
        topics: BTreeMap<String, TopicMeta> => keep,
        assignments: BTreeMap<String, Vec<Assignment>> => keep,
        fanout_links: FanoutLinks => keep,
        barrier_groups: BarrierGroups => keep,
        brokers: BTreeMap<u64, BrokerRegistration> => keep,
        cluster_id: Option<String> => keep,
        producer_id_blocks: u64 => keep,
        scram_users: BTreeMap<String, UserCredentials> => keep,
        broker_listeners: BTreeMap<u64, Vec<ListenerEndpoint>> => keep,
        acls: Vec<AclBinding> => keep,
        client_quotas: Vec<ClientQuota> => keep,
        replicas: BTreeMap<String, Vec<PartitionReplicas>> => with(without_reassignments),
    }

    #[derive(Archive, Serialize, Deserialize, Clone, Debug)]
    pub(super) struct PartitionReplicas {
        pub(super) replicas: Vec<Assignment>,
        pub(super) isr: Vec<u64>,
        pub(super) leader: Option<u64>,
        pub(super) leader_epoch: i32,
        pub(super) partition_epoch: i32,
    }

    /// Version 7's replicated partitions, none with a reassignment under way.
    fn without_reassignments(
        replicas: BTreeMap<String, Vec<PartitionReplicas>>,
    ) -> BTreeMap<String, Vec<crate::state::PartitionReplicas>> {
        replicas
            .into_iter()
            .map(|(name, parts)| {
                let parts = parts
                    .into_iter()
                    .map(|r| crate::state::PartitionReplicas {
                        replicas: r.replicas,
                        isr: r.isr,
                        leader: r.leader,
                        leader_epoch: r.leader_epoch,
                        partition_epoch: r.partition_epoch,
                        adding: Vec::new(),
                        removing: Vec::new(),
                    })
                    .collect();
                (name, parts)
            })
            .collect()
    }
}

/// Reads a snapshot of an older version in its layout `B` (whose header and state must both
/// say `B::VERSION`) and migrates it to the current body.
fn decode_old_snapshot<B>(bytes: &[u8], what: &str) -> Result<SnapshotBody, MetaError>
where
    B: Archive + OldBody,
    B::Archived: for<'a> rkyv::bytecheck::CheckBytes<rkyv::api::high::HighValidator<'a, rkyv::rancor::Error>>
        + Deserialize<B, rkyv::rancor::Strategy<rkyv::de::Pool, rkyv::rancor::Error>>,
{
    let version = B::VERSION;
    let payload = wire::checked_file_payload(bytes, SNAPSHOT_MAGIC, version, what)?;
    let old = wire::decode::<B>(payload, what)?;
    let found = old.state_version();
    if found != version {
        return Err(MetaError::Corrupt {
            context: format!("{what}: state version {found} in a v{version} snapshot"),
        });
    }
    Ok(old.into_current())
}

pub(crate) struct SmInner {
    dir: PathBuf,
    pub(crate) state: MetaState,
    pub(crate) last_applied: Option<LogId<u64>>,
    pub(crate) last_membership: StoredMembership<u64, BasicNode>,
    subscribers: Vec<flume::Sender<AppliedChange>>,
    current: Option<(SnapshotMeta<u64, BasicNode>, Vec<u8>)>,
    snapshot_seq: u64,
}

/// The state machine store; clones share the same state.
#[derive(Clone)]
pub struct StateMachineStore {
    inner: Arc<Mutex<SmInner>>,
}

/// Checks a snapshot file's bytes as a start does (magic, version, crc, rkyv validation, state
/// invariants). The fuzz target `meta_snapshot` drives it with arbitrary bytes.
pub fn check_snapshot_bytes(bytes: &[u8]) -> Result<(), MetaError> {
    decode_snapshot(bytes, "snapshot").map(|_| ())
}

fn decode_snapshot(bytes: &[u8], what: &str) -> Result<SnapshotBody, MetaError> {
    // The header's version picks the layout; `checked_file_payload` checks the rest.
    let header_version = bytes
        .get(8..12)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
    let body = match header_version {
        Some(v1::VERSION) => decode_old_snapshot::<v1::SnapshotBody>(bytes, what)?,
        Some(v2::VERSION) => decode_old_snapshot::<v2::SnapshotBody>(bytes, what)?,
        Some(v3::VERSION) => decode_old_snapshot::<v3::SnapshotBody>(bytes, what)?,
        Some(v4::VERSION) => decode_old_snapshot::<v4::SnapshotBody>(bytes, what)?,
        Some(v5::VERSION) => decode_old_snapshot::<v5::SnapshotBody>(bytes, what)?,
        Some(v6::VERSION) => decode_old_snapshot::<v6::SnapshotBody>(bytes, what)?,
        Some(v7::VERSION) => decode_old_snapshot::<v7::SnapshotBody>(bytes, what)?,
        _ => {
            let payload =
                wire::checked_file_payload(bytes, SNAPSHOT_MAGIC, SNAPSHOT_VERSION, what)?;
            let body = wire::decode::<SnapshotBody>(payload, what)?;
            if body.state.version != crate::state::STATE_VERSION {
                return Err(MetaError::Corrupt {
                    context: format!("{what}: state version {}", body.state.version),
                });
            }
            body
        }
    };
    body.state
        .check_invariants()
        .map_err(|e| MetaError::Corrupt {
            context: format!("{what}: {e}"),
        })?;
    Ok(body)
}

impl SmInner {
    fn notify(&mut self, change: AppliedChange) {
        // Unbounded channels: the meta thread never blocks on a slow core. A subscriber that
        // went away is dropped.
        self.subscribers.retain(|s| s.send(change.clone()).is_ok());
    }

    fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, MetaError> {
        self.snapshot_seq += 1;
        let snapshot_id = match &self.last_applied {
            Some(l) => format!("{}-{}-{}", l.leader_id.term, l.index, self.snapshot_seq),
            None => format!("none-{}", self.snapshot_seq),
        };
        let meta = SnapshotMeta {
            last_log_id: self.last_applied,
            last_membership: self.last_membership.clone(),
            snapshot_id,
        };
        let body = SnapshotBody {
            meta: (&meta).into(),
            state: self.state.clone(),
        };
        let payload = wire::encode(&body)?;
        let img = wire::checked_file_bytes(SNAPSHOT_MAGIC, SNAPSHOT_VERSION, &payload);
        wire::write_atomic(&self.dir, SNAPSHOT_FILE, &img)?;
        tracing::info!(snapshot = %meta.snapshot_id, bytes = img.len(), "snapshot built");
        self.current = Some((meta.clone(), img.clone()));
        Ok(Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(img)),
        })
    }
}

impl StateMachineStore {
    /// Opens the state machine in `dir`, restoring the last snapshot if there is one.
    pub fn open(dir: &Path) -> Result<StateMachineStore, MetaError> {
        std::fs::create_dir_all(dir)
            .map_err(|e| MetaError::io(format!("create dir {}", dir.display()), e))?;
        let path = dir.join(SNAPSHOT_FILE);
        let mut inner = SmInner {
            dir: dir.to_path_buf(),
            state: MetaState::default(),
            last_applied: None,
            last_membership: StoredMembership::default(),
            subscribers: Vec::new(),
            current: None,
            snapshot_seq: 0,
        };
        let _ = std::fs::remove_file(dir.join(format!("{SNAPSHOT_FILE}.tmp")));
        match std::fs::read(&path) {
            Ok(bytes) => {
                let body = decode_snapshot(&bytes, &path.display().to_string())?;
                let meta: SnapshotMeta<u64, BasicNode> = (&body.meta).into();
                inner.state = body.state;
                inner.last_applied = meta.last_log_id;
                inner.last_membership = meta.last_membership.clone();
                tracing::info!(snapshot = %meta.snapshot_id, "restored state from snapshot");
                inner.current = Some((meta, bytes));
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(MetaError::io(format!("read {}", path.display()), e)),
        }
        Ok(StateMachineStore {
            inner: Arc::new(Mutex::new(inner)),
        })
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, SmInner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn has_snapshot(&self) -> bool {
        self.lock().current.is_some()
    }

    /// A copy of the current state plus a receiver of every change applied after it, in order.
    pub fn subscribe(&self) -> (u64, MetaState, flume::Receiver<AppliedChange>) {
        let mut g = self.lock();
        let (tx, rx) = flume::unbounded();
        g.subscribers.push(tx);
        (
            g.last_applied.map(|l| l.index).unwrap_or(0),
            g.state.clone(),
            rx,
        )
    }

    /// The last applied log index.
    pub fn read_index(&self) -> u64 {
        self.lock().last_applied.map(|l| l.index).unwrap_or(0)
    }

    /// A copy of the broker registry alone (cheaper than [`Self::read`] for a large state).
    pub fn brokers(&self) -> BTreeMap<u64, BrokerRegistration> {
        self.lock().state.brokers.clone()
    }

    /// (last applied index, copy of the state).
    pub fn read(&self) -> (u64, MetaState) {
        let g = self.lock();
        (
            g.last_applied.map(|l| l.index).unwrap_or(0),
            g.state.clone(),
        )
    }
}

impl RaftSnapshotBuilder<TypeConfig> for StateMachineStore {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError<u64>> {
        self.lock()
            .build_snapshot()
            .map_err(|e| StorageIOError::write_snapshot(None, AnyError::new(&e)).into())
    }
}

impl RaftStateMachine<TypeConfig> for StateMachineStore {
    type SnapshotBuilder = StateMachineStore;

    async fn applied_state(
        &mut self,
    ) -> Result<(Option<LogId<u64>>, StoredMembership<u64, BasicNode>), StorageError<u64>> {
        let g = self.lock();
        Ok((g.last_applied, g.last_membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<Vec<ApplyOutcome>>, StorageError<u64>>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut g = self.lock();
        let mut out = Vec::new();
        for e in entries {
            if let Some(l) = g.last_applied {
                assert!(
                    e.log_id.index > l.index,
                    "apply out of order: {} after {}",
                    e.log_id,
                    l
                );
            }
            g.last_applied = Some(e.log_id);
            let outcomes = match e.payload {
                EntryPayload::Blank => vec![ApplyOutcome::NoOp],
                EntryPayload::Membership(m) => {
                    g.last_membership = StoredMembership::new(Some(e.log_id), m);
                    vec![ApplyOutcome::NoOp]
                }
                EntryPayload::Normal(p) => {
                    let log_index = e.log_id.index;
                    let mut changes = Vec::new();
                    let outcomes = p
                        .commands
                        .iter()
                        .map(|cmd| match g.state.apply(cmd) {
                            Ok(change) => {
                                changes.push(change.clone());
                                ApplyOutcome::Applied(AppliedChange { log_index, change })
                            }
                            Err(r) => {
                                tracing::debug!(log_index, refusal = %r, "command refused");
                                ApplyOutcome::Refused(r)
                            }
                        })
                        .collect();
                    // One notification per log entry, so that subscribers see strictly
                    // increasing indexes and "applied up to N" means all of entry N.
                    let change = match changes.len() {
                        0 => None,
                        1 => changes.pop(),
                        _ => Some(Change::Batch(changes)),
                    };
                    if let Some(change) = change {
                        g.notify(AppliedChange { log_index, change });
                    }
                    outcomes
                }
            };
            out.push(outcomes);
        }
        Ok(out)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn begin_receiving_snapshot(
        &mut self,
    ) -> Result<Box<Cursor<Vec<u8>>>, StorageError<u64>> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<u64, BasicNode>,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError<u64>> {
        let bytes = snapshot.into_inner();
        let err = |e: MetaError| -> StorageError<u64> {
            StorageIOError::write_snapshot(Some(meta.signature()), AnyError::new(&e)).into()
        };
        let body = decode_snapshot(&bytes, "received snapshot").map_err(err)?;
        let got: SnapshotMeta<u64, BasicNode> = (&body.meta).into();
        if got.last_log_id != meta.last_log_id {
            return Err(err(MetaError::Corrupt {
                context: format!(
                    "received snapshot covers {:?}, announced {:?}",
                    got.last_log_id, meta.last_log_id
                ),
            }));
        }
        let mut g = self.lock();
        let dir = g.dir.clone();
        wire::write_atomic(&dir, SNAPSHOT_FILE, &bytes).map_err(err)?;
        g.state = body.state;
        g.last_applied = meta.last_log_id;
        g.last_membership = meta.last_membership.clone();
        g.current = Some((meta.clone(), bytes));
        let change = AppliedChange {
            log_index: meta.last_log_id.map(|l| l.index).unwrap_or(0),
            change: Change::SnapshotInstalled {
                state: Box::new(g.state.clone()),
            },
        };
        g.notify(change);
        tracing::info!(snapshot = %meta.snapshot_id, "installed snapshot from leader");
        Ok(())
    }

    async fn get_current_snapshot(
        &mut self,
    ) -> Result<Option<Snapshot<TypeConfig>>, StorageError<u64>> {
        let g = self.lock();
        Ok(g.current.as_ref().map(|(meta, bytes)| Snapshot {
            meta: meta.clone(),
            snapshot: Box::new(Cursor::new(bytes.clone())),
        }))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::path::PathBuf;

    use super::*;
    use crate::state::{
        AclBinding, Assignment, BarrierSectionV1, ClientQuota, Command, ListenerEndpoint,
        NewReplicatedTopic, QuotaEntity, QuotaPart, ScramCredential, UserCredentials,
    };

    fn node(node_id: u64) -> Assignment {
        Assignment {
            node_id,
            core_index: 0,
        }
    }

    fn create_topic(name: &str, partitions: u32, id: u8) -> Command {
        Command::CreateTopic {
            name: name.into(),
            partitions,
            configs: BTreeMap::new(),
            assignments: vec![node(1); partitions as usize],
            incarnation_id: format!("{id:016x}"),
            topic_id: [id; 16],
        }
    }

    /// What a snapshot of state version `version` holds in the fixture: each version adds
    /// to the one before it the section that version introduced, so a migration that loses
    /// any section fails. Fixed ids throughout: the bytes are the same at every run.
    fn fixture_state(version: u32) -> MetaState {
        let mut s = MetaState::default();
        let apply = |s: &mut MetaState, c: Command| s.apply(&c).unwrap();
        apply(&mut s, create_topic("orders", 2, 1));
        if version >= 2 {
            apply(&mut s, create_topic("orders.audit", 2, 2));
            apply(
                &mut s,
                Command::AttachChild {
                    parent: "orders".into(),
                    child: "orders.audit".into(),
                    delay_ms: 1_000,
                    epoch: "00000000000000aa".into(),
                    attach_offsets: vec![0, 7],
                },
            );
        }
        if version >= 3 {
            for node_id in 1..=3 {
                let registration = BrokerRegistration {
                    node_id,
                    host: format!("10.0.0.{node_id}"),
                    port: 9092,
                    core_ports: vec![9100, 9101],
                    cores: 2,
                    rack: Some("r1".into()),
                    incarnation: 40 + node_id,
                    fenced: node_id == 2,
                };
                s.brokers.insert(node_id, registration);
            }
            s.cluster_id = Some("c-1".into());
            s.producer_id_blocks = 3;
        }
        if version >= 4 {
            let credential = ScramCredential {
                salt: vec![1; 16],
                stored_key: vec![2; 32],
                server_key: vec![3; 32],
                iterations: 4096,
            };
            s.scram_users.insert(
                "alice".into(),
                UserCredentials {
                    sha256: Some(credential),
                    sha512: None,
                },
            );
            let listener = ListenerEndpoint {
                name: "SASL".into(),
                host: "10.0.0.1".into(),
                port: 9093,
            };
            s.broker_listeners.insert(1, vec![listener]);
            s.acls.push(AclBinding {
                resource_type: 2,
                resource_name: "orders".into(),
                pattern_type: 3,
                principal: "User:alice".into(),
                host: "*".into(),
                operation: 3,
                permission: 3,
            });
        }
        if version >= 5 {
            s.client_quotas.push(ClientQuota {
                entity: QuotaEntity {
                    user: QuotaPart::Absent,
                    client_id: QuotaPart::Named("slow".into()),
                },
                values: [("producer_byte_rate".to_string(), 1048576f64.to_bits())].into(),
            });
        }
        if version >= 6 {
            apply(
                &mut s,
                Command::define_barrier_group("g", ["orders"], 5_000, 10),
            );
        }
        if version >= 7 {
            let topic = NewReplicatedTopic {
                name: "r".into(),
                partitions: 2,
                configs: BTreeMap::new(),
                replicas: vec![vec![node(1), node(2)], vec![node(2), node(1)]],
                incarnation_id: "0123456789abcdef".into(),
                topic_id: [3; 16],
            };
            apply(
                &mut s,
                Command::CreateReplicatedTopic {
                    topic: Box::new(topic),
                },
            );
        }
        if version >= 8 {
            apply(
                &mut s,
                Command::ReassignReplicas {
                    name: "r".into(),
                    partition: 1,
                    target: Some(vec![node(3), node(1)]),
                },
            );
            assert!(s.replicas["r"][1].reassigning());
        }
        s
    }

    fn fixture_meta() -> WSnapshotMeta {
        WSnapshotMeta {
            last_log_id: None,
            last_membership: (&StoredMembership::<u64, BasicNode>::default()).into(),
            snapshot_id: "fixture".into(),
        }
    }

    /// `state` (a [`fixture_state`]) as a snapshot file of `version`, written in that
    /// version's layout.
    fn image_in_layout(version: u32, s: &MetaState) -> Vec<u8> {
        let v7_replicas = || -> BTreeMap<String, Vec<v7::PartitionReplicas>> {
            let strip = |r: &crate::state::PartitionReplicas| {
                assert!(!r.reassigning(), "version 7 has no reassignments");
                v7::PartitionReplicas {
                    replicas: r.replicas.clone(),
                    isr: r.isr.clone(),
                    leader: r.leader,
                    leader_epoch: r.leader_epoch,
                    partition_epoch: r.partition_epoch,
                }
            };
            let parts = |(name, parts): (&String, &Vec<_>)| {
                (name.clone(), parts.iter().map(strip).collect())
            };
            s.replicas.iter().map(parts).collect()
        };
        // One layout's body: its version, the listed fields copied from `s`, then the
        // ones written out.
        macro_rules! body {
            ($v:ident { $($f:ident),* } $(, $g:ident: $e:expr)*) => {
                wire::encode(&$v::SnapshotBody {
                    meta: fixture_meta(),
                    state: $v::MetaState {
                        version,
                        $($f: s.$f.clone(),)*
                        $($g: $e,)*
                    },
                })
            };
        }
        let payload = match version {
            1 => body!(v1 { topics, assignments },
                fanout_links: v1::FanoutLinks::default(),
                barrier_groups: BarrierSectionV1::default()),
            2 => body!(v2 { topics, assignments, fanout_links },
                barrier_groups: BarrierSectionV1::default()),
            3 => body!(v3 { topics, assignments, fanout_links, brokers, cluster_id,
                producer_id_blocks }, barrier_groups: BarrierSectionV1::default()),
            4 => body!(v4 { topics, assignments, fanout_links, brokers, cluster_id,
                producer_id_blocks, scram_users, broker_listeners, acls },
                barrier_groups: BarrierSectionV1::default()),
            5 => body!(v5 { topics, assignments, fanout_links, brokers, cluster_id,
                producer_id_blocks, scram_users, broker_listeners, acls, client_quotas },
                barrier_groups: BarrierSectionV1::default()),
            6 => body!(v6 {
                topics,
                assignments,
                fanout_links,
                barrier_groups,
                brokers,
                cluster_id,
                producer_id_blocks,
                scram_users,
                broker_listeners,
                acls,
                client_quotas
            }),
            7 => body!(v7 { topics, assignments, fanout_links, barrier_groups, brokers,
                cluster_id, producer_id_blocks, scram_users, broker_listeners, acls,
                client_quotas }, replicas: v7_replicas()),
            SNAPSHOT_VERSION => wire::encode(&SnapshotBody {
                meta: fixture_meta(),
                state: s.clone(),
            }),
            _ => panic!("no layout for snapshot version {version}"),
        };
        wire::checked_file_bytes(SNAPSHOT_MAGIC, version, &payload.unwrap())
    }

    fn fixture_path(version: u32) -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/snapshots")
            .join(format!("v{version}.snapshot"))
    }

    /// A snapshot file of every version ringlog has written is stored in
    /// `meta/tests/snapshots/`. Each must still be exactly what its layout writes (an old
    /// layout, or the current state's, edited in place fails here: add a version instead),
    /// and must read back as its fixture state, migrated to the current version.
    /// `RINGLOG_WRITE_SNAPSHOT_FIXTURES=1` writes the files that are missing, never an
    /// existing one: after adding a version, it stores that version's fixture.
    #[test]
    fn stored_snapshots_of_every_version_are_read() {
        let write = std::env::var_os("RINGLOG_WRITE_SNAPSHOT_FIXTURES").is_some();
        for version in 1..=SNAPSHOT_VERSION {
            let expected = fixture_state(version);
            let image = image_in_layout(version, &expected);
            let path = fixture_path(version);
            if write && !path.exists() {
                std::fs::write(&path, &image).unwrap();
            }
            let stored = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            assert!(
                stored == image,
                "snapshot version {version}: its layout no longer writes {}",
                path.display()
            );
            let body = decode_snapshot(&stored, "fixture").unwrap();
            assert_eq!(body.state, expected, "snapshot version {version}");
            assert_eq!(body.state.version, crate::state::STATE_VERSION);
            assert_eq!(body.meta.snapshot_id, "fixture");
        }
    }
}
