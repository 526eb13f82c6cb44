//! ACL enforcement at the API boundary (`crate::acl`), driven by one table.
//!
//! [`TABLE`] has one row per guarded request kind: the resource its ACL is on, the
//! operation, and the scope of a refusal:
//! - [`Scope::Whole`]: a refused request gets the API's authorization error and its handler
//!   never runs ([`refuse_whole`]);
//! - [`Scope::PerItem`]: the items (topics, groups, transactional ids, config resources) the
//!   principal may not use are taken out of the request ([`take_refused`]), the handler runs
//!   on the rest, and they are added back to the response with their authorization error
//!   ([`restore_refused`]);
//! - [`Scope::Filtered`]: the answer lists only what the principal may describe (ListGroups,
//!   ListTransactions; Metadata through [`filter_metadata`], which refuses a topic named
//!   instead of hiding it; DescribeTopicPartitions through [`TopicAccess`], in its handler,
//!   which does the same before it pages its answer).
//!
//! The engine here does the checks a row names, through a [`Gate`] made from the row. Each
//! kind's own request and response shapes (which names it asks for, what its refusal looks
//! like, how its refused items come back) stand together in `shapes`, one `Shape` each.
//! The request kinds served without any ACL are listed in the tests (`UNGUARDED`), which
//! hold every kind the broker serves to one of the two.

mod shapes;

use std::rc::Rc;

use kafka_protocol::messages::{ApiKey, MetadataResponse, RequestKind, ResponseKind, TopicName};

use crate::acl::{self, Subject};
use crate::core::CoreState;

use shapes::Shape;

/// Whether `who` may do `op` on `rtype`/`name` (this core's copy of the ACLs).
pub fn may(state: &CoreState, who: &Subject, op: i8, rtype: i8, name: &str) -> bool {
    acl::allowed(
        &state.meta.borrow(),
        &state.ctx.config.acl,
        who,
        op,
        rtype,
        name,
    )
}

/// Whether everything is allowed to `who` without looking (no ACL at all, and the no-ACL
/// rule opens resources to it): the common case, kept free of per-item work.
fn all_open(state: &CoreState, who: &Subject) -> bool {
    let cfg = &state.ctx.config.acl;
    cfg.authorizer == acl::Authorizer::None
        || (state.meta.borrow().acls.is_empty()
            && (!who.authenticated || cfg.allow_everyone_if_no_acl_found))
}

pub(crate) fn on_cluster(state: &CoreState, who: &Subject, op: i8) -> bool {
    may(
        state,
        who,
        op,
        acl::RESOURCE_CLUSTER,
        acl::CLUSTER_RESOURCE_NAME,
    )
}

/// One of Kafka's four ACL resource types, as a check names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Acl {
    Topic,
    Group,
    TransactionalId,
    Cluster,
}

impl Acl {
    /// Kafka's ACL resource type.
    const fn resource_type(self) -> i8 {
        match self {
            Acl::Topic => acl::RESOURCE_TOPIC,
            Acl::Group => acl::RESOURCE_GROUP,
            Acl::TransactionalId => acl::RESOURCE_TRANSACTIONAL_ID,
            Acl::Cluster => acl::RESOURCE_CLUSTER,
        }
    }

    /// The error code of a refusal on this resource.
    const fn code(self) -> i16 {
        match self {
            Acl::Topic => acl::TOPIC_AUTHORIZATION_FAILED,
            Acl::Group => acl::GROUP_AUTHORIZATION_FAILED,
            Acl::TransactionalId => acl::TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
            Acl::Cluster => acl::CLUSTER_AUTHORIZATION_FAILED,
        }
    }
}

/// What a row's ACL is on: one ACL resource, or one that each item's type picks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resource {
    Topic,
    Group,
    TransactionalId,
    Cluster,
    /// A DescribeConfigs/(Incremental)AlterConfigs resource: a topic's config is checked on
    /// the topic, any other (a broker's) on the cluster.
    Config,
    /// A FindCoordinator key: a group, or a transactional id for a transaction key.
    CoordinatorKey,
}

/// Kafka's config resource type of a topic (DescribeConfigs, (Incremental)AlterConfigs).
const CONFIG_RESOURCE_TOPIC: i8 = 2;

impl Resource {
    /// The ACL resource the row's check is on: for the two an item's type picks, the one
    /// an item of any other type is checked on (a broker's config, a group key).
    const fn acl(self) -> Acl {
        match self {
            Resource::Topic => Acl::Topic,
            Resource::Group | Resource::CoordinatorKey => Acl::Group,
            Resource::TransactionalId => Acl::TransactionalId,
            Resource::Cluster | Resource::Config => Acl::Cluster,
        }
    }

    /// The ACL resource an item of type `item_type` (a config resource type, a coordinator
    /// key type) is checked on.
    const fn acl_for(self, item_type: i8) -> Acl {
        match self {
            Resource::Config if item_type == CONFIG_RESOURCE_TOPIC => Acl::Topic,
            Resource::CoordinatorKey if item_type == super::group::KEY_TYPE_TRANSACTION => {
                Acl::TransactionalId
            }
            _ => self.acl(),
        }
    }
}

/// How far a refusal reaches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// The request is answered with the authorization error; its handler never runs.
    Whole,
    /// The refused items are taken out before the handler and come back refused.
    PerItem,
    /// The answer lists only the items the principal may use.
    Filtered,
}

/// The ACL of one guarded request kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Row {
    pub key: ApiKey,
    pub resource: Resource,
    /// The ACL operation (`acl::OP_*`).
    pub op: i8,
    pub scope: Scope,
    /// A second ACL the request needs as well.
    pub also: Option<(Acl, i8)>,
    /// An operation on the cluster that stands in for the row's check on every item.
    pub unless_cluster: Option<i8>,
}

impl Row {
    const fn new(key: ApiKey, resource: Resource, op: i8, scope: Scope) -> Row {
        Row {
            key,
            resource,
            op,
            scope,
            also: None,
            unless_cluster: None,
        }
    }

    const fn also(self, on: Acl, op: i8) -> Row {
        Row {
            also: Some((on, op)),
            ..self
        }
    }

    const fn unless_cluster(self, op: i8) -> Row {
        Row {
            unless_cluster: Some(op),
            ..self
        }
    }
}

/// Makes [`TABLE`] from its rows, and the dispatch from a request to its kind's `Shape`
/// (so a row without a shape, or a shape without a row, does not build).
macro_rules! guards {
    ($($kind:ident: $resource:ident, $op:ident, $scope:ident
        $(, also($also:ident, $also_op:ident))? $(, unless_cluster($unless_op:ident))?;)*) => {
        /// The ACL of every guarded request kind: the resource, the operation, the scope of a
        /// refusal, and where a kind needs it a second ACL (`also`) or a cluster operation
        /// that stands in for the per-item check (`unless_cluster`).
        pub const TABLE: &[Row] = &[$(
            Row::new(ApiKey::$kind, Resource::$resource, acl::$op, Scope::$scope)
                $(.also(Acl::$also, acl::$also_op))?
                $(.unless_cluster(acl::$unless_op))?,
        )*];

        /// The guarded kind of `req`.
        fn key_of(req: &RequestKind) -> Option<ApiKey> {
            match req {
                $(RequestKind::$kind(_) => Some(ApiKey::$kind),)*
                _ => None,
            }
        }

        /// The answer refusing `req` whole, if `gate` refuses it.
        fn refusal(gate: &Gate, version: i16, req: &RequestKind) -> Option<ResponseKind> {
            match req {
                $(RequestKind::$kind(r) => r.refuse(gate, version).map(ResponseKind::$kind),)*
                _ => None,
            }
        }

        /// Takes the items `gate` refuses out of `req`; what comes back puts them back.
        fn take(gate: &Gate, req: &mut RequestKind) -> Option<Restore> {
            match req {
                $(RequestKind::$kind(r) => r.take(gate).map(|put| -> Restore {
                    Box::new(move |gate, resp| {
                        if let ResponseKind::$kind(resp) = resp {
                            put(gate, resp);
                        }
                    })
                }),)*
                _ => None,
            }
        }
    };
}

guards! {
    // request kind:              resource,        operation,           scope
    Produce:                      Topic,           OP_WRITE,            PerItem;
    Fetch:                        Topic,           OP_READ,             PerItem;
    ListOffsets:                  Topic,           OP_DESCRIBE,         PerItem;
    OffsetForLeaderEpoch:         Topic,           OP_DESCRIBE,         PerItem;
    Metadata:                     Topic,           OP_DESCRIBE,         Filtered;
    DescribeTopicPartitions:      Topic,           OP_DESCRIBE,         Filtered;
    CreateTopics:                 Topic,           OP_CREATE,           PerItem,
                                                                        unless_cluster(OP_CREATE);
    DeleteTopics:                 Topic,           OP_DELETE,           PerItem;
    DeleteRecords:                Topic,           OP_DELETE,           PerItem;
    CreatePartitions:             Topic,           OP_ALTER,            PerItem;
    DescribeProducers:            Topic,           OP_READ,             PerItem;
    DescribeConfigs:              Config,          OP_DESCRIBE_CONFIGS, PerItem;
    IncrementalAlterConfigs:      Config,          OP_ALTER_CONFIGS,    PerItem;
    AlterConfigs:                 Config,          OP_ALTER_CONFIGS,    PerItem;
    FindCoordinator:              CoordinatorKey,  OP_DESCRIBE,         Whole;
    JoinGroup:                    Group,           OP_READ,             Whole;
    SyncGroup:                    Group,           OP_READ,             Whole;
    Heartbeat:                    Group,           OP_READ,             Whole;
    LeaveGroup:                   Group,           OP_READ,             Whole;
    OffsetCommit:                 Group,           OP_READ,             Whole;
    OffsetFetch:                  Group,           OP_DESCRIBE,         Whole;
    ListGroups:                   Group,           OP_DESCRIBE,         Filtered,
                                                                        unless_cluster(OP_DESCRIBE);
    DescribeGroups:               Group,           OP_DESCRIBE,         PerItem;
    DeleteGroups:                 Group,           OP_DELETE,           PerItem;
    OffsetDelete:                 Group,           OP_DELETE,           Whole;
    ConsumerGroupHeartbeat:       Group,           OP_READ,             Whole;
    ConsumerGroupDescribe:        Group,           OP_DESCRIBE,         PerItem;
    InitProducerId:               TransactionalId, OP_WRITE,            Whole;
    AddPartitionsToTxn:           TransactionalId, OP_WRITE,            Whole,
                                                                        also(Topic, OP_WRITE);
    AddOffsetsToTxn:              TransactionalId, OP_WRITE,            Whole,
                                                                        also(Group, OP_READ);
    EndTxn:                       TransactionalId, OP_WRITE,            Whole;
    TxnOffsetCommit:              Group,           OP_READ,             Whole;
    DescribeTransactions:         TransactionalId, OP_DESCRIBE,         PerItem;
    ListTransactions:             TransactionalId, OP_DESCRIBE,         Filtered;
    WriteTxnMarkers:              Cluster,         OP_CLUSTER_ACTION,   Whole;
    CreateAcls:                   Cluster,         OP_ALTER,            Whole;
    DeleteAcls:                   Cluster,         OP_ALTER,            Whole;
    DescribeAcls:                 Cluster,         OP_DESCRIBE,         Whole;
    AlterUserScramCredentials:    Cluster,         OP_ALTER,            Whole;
    DescribeUserScramCredentials: Cluster,         OP_DESCRIBE,         Whole;
    AlterClientQuotas:            Cluster,         OP_ALTER_CONFIGS,    Whole;
    DescribeClientQuotas:         Cluster,         OP_DESCRIBE_CONFIGS, Whole;
    DescribeLogDirs:              Cluster,         OP_DESCRIBE,         Whole;
    DescribeQuorum:               Cluster,         OP_DESCRIBE,         Whole;
    UpdateFeatures:               Cluster,         OP_ALTER,            Whole;
    ElectLeaders:                 Cluster,         OP_ALTER,            Whole;
    AlterPartitionReassignments:  Cluster,         OP_ALTER,            Whole;
    ListPartitionReassignments:   Cluster,         OP_DESCRIBE,         Whole;
    AlterReplicaLogDirs:          Cluster,         OP_ALTER,            Whole;
}

/// The row of `key`, if that kind is guarded.
pub fn row(key: ApiKey) -> Option<&'static Row> {
    TABLE.iter().find(|r| r.key == key)
}

/// The checks of one row for one principal: what a kind's `Shape` asks.
pub(super) struct Gate<'a> {
    state: &'a CoreState,
    who: &'a Subject,
    row: &'static Row,
    /// Whether `who` holds the row's `unless_cluster` operation (every item passes).
    bypass: bool,
}

impl<'a> Gate<'a> {
    fn new(state: &'a CoreState, who: &'a Subject, row: &'static Row) -> Gate<'a> {
        let bypass = row
            .unless_cluster
            .is_some_and(|op| on_cluster(state, who, op));
        Gate::with_bypass(state, who, row, bypass)
    }

    fn with_bypass(
        state: &'a CoreState,
        who: &'a Subject,
        row: &'static Row,
        bypass: bool,
    ) -> Gate<'a> {
        Gate {
            state,
            who,
            row,
            bypass,
        }
    }

    /// The gate of `req`'s row when its scope is one `scope` admits; `None` when everything
    /// is open to `who` or the kind is not guarded so.
    fn of(
        state: &'a CoreState,
        who: &'a Subject,
        req: &RequestKind,
        scope: impl Fn(Scope) -> bool,
    ) -> Option<Gate<'a>> {
        if all_open(state, who) {
            return None;
        }
        let row = row(key_of(req)?)?;
        scope(row.scope).then(|| Gate::new(state, who, row))
    }

    fn may(&self, on: Acl, op: i8, name: &str) -> bool {
        match on {
            Acl::Cluster => on_cluster(self.state, self.who, op),
            _ => may(self.state, self.who, op, on.resource_type(), name),
        }
    }

    /// Whether the row's ACL allows the item `name` (the cluster's name for the cluster).
    pub(super) fn allows(&self, name: &str) -> bool {
        self.bypass || self.may(self.row.resource.acl(), self.row.op, name)
    }

    /// The error code of the row's refusal.
    pub(super) fn code(&self) -> i16 {
        self.row.resource.acl().code()
    }

    /// The row's error code when its ACL refuses `name`; `None` when allowed.
    pub(super) fn refusal(&self, name: &str) -> Option<i16> {
        (!self.allows(name)).then(|| self.code())
    }

    /// The refusal code of the item `name` of type `item_type` (a config resource type, a
    /// coordinator key type) for the row's operation; `None` when allowed.
    pub(super) fn refusal_of(&self, item_type: i8, name: &str) -> Option<i16> {
        let on = self.row.resource.acl_for(item_type);
        (!self.may(on, self.row.op, name)).then_some(on.code())
    }

    /// The refusal code of the row's second ACL (`also`) on `name`; `None` when allowed.
    pub(super) fn also_refusal(&self, name: &str) -> Option<i16> {
        let (on, op) = self.row.also?;
        (!self.may(on, op, name)).then_some(on.code())
    }

    /// Whether the row's `unless_cluster` operation lets every item pass.
    pub(super) fn bypassed(&self) -> bool {
        self.bypass
    }

    /// The name of a topic a request names by `name`, or by `id` when the name is empty.
    pub(super) fn topic_name(&self, name: &TopicName, id: &uuid::Uuid) -> String {
        if name.is_empty() {
            self.state
                .meta
                .topic_ids
                .borrow()
                .get(id)
                .cloned()
                .unwrap_or_default()
        } else {
            name.to_string()
        }
    }
}

/// Puts a kind's refused items back into its response (or filters the response), with the
/// gate they were refused by.
type Restore = Box<dyn FnOnce(&Gate<'_>, &mut ResponseKind)>;

/// What [`take_refused`] took out of a request, for [`restore_refused`].
#[derive(Default)]
pub struct Refused(Option<Taken>);

struct Taken {
    row: &'static Row,
    who: Rc<Subject>,
    bypass: bool,
    restore: Restore,
}

/// The response that refuses a whole request for lack of an ACL, if `req` is refused so.
pub fn refuse_whole(
    state: &CoreState,
    who: &Subject,
    version: i16,
    req: &RequestKind,
) -> Option<ResponseKind> {
    let gate = Gate::of(state, who, req, |s| s == Scope::Whole)?;
    refusal(&gate, version, req)
}

/// Takes the items `who` may not use out of `req`.
pub fn take_refused(state: &CoreState, who: &Rc<Subject>, req: &mut RequestKind) -> Refused {
    let Some(gate) = Gate::of(state, who, req, |s| s != Scope::Whole) else {
        return Refused::default();
    };
    Refused(take(&gate, req).map(|restore| Taken {
        row: gate.row,
        who: who.clone(),
        bypass: gate.bypass,
        restore,
    }))
}

/// Adds the refused items back to `resp` with their authorization error (or filters it).
pub fn restore_refused(state: &CoreState, refused: Refused, resp: &mut ResponseKind) {
    if let Some(t) = refused.0 {
        (t.restore)(&Gate::with_bypass(state, &t.who, t.row, t.bypass), resp);
    }
}

/// Kafka's operations on a topic (`AclEntry.supportedOperations(TOPIC)`): those a topic's
/// authorized operations (KIP-430) are drawn from.
const TOPIC_OPERATIONS: [i8; 8] = [
    acl::OP_READ,
    acl::OP_WRITE,
    acl::OP_CREATE,
    acl::OP_DELETE,
    acl::OP_ALTER,
    acl::OP_DESCRIBE,
    acl::OP_DESCRIBE_CONFIGS,
    acl::OP_ALTER_CONFIGS,
];

/// The topic ACLs of `who` for a handler that checks them as it goes (DescribeTopicPartitions,
/// whose pages are counted after the topics it may not describe are set aside): its kind's
/// row on each topic, and the operations a topic's answer lists.
pub struct TopicAccess<'a> {
    state: &'a CoreState,
    who: &'a Subject,
    /// Whether everything is open to `who` (no check needed).
    open: bool,
    /// The row's gate (`None` for a kind without a row: every topic is refused).
    gate: Option<Gate<'a>>,
}

impl<'a> TopicAccess<'a> {
    /// The access of `who` by the row of `key` (a kind guarded on topics).
    pub fn new(state: &'a CoreState, who: &'a Subject, key: ApiKey) -> TopicAccess<'a> {
        TopicAccess {
            state,
            who,
            open: all_open(state, who),
            gate: row(key).map(|r| Gate::new(state, who, r)),
        }
    }

    /// Whether the row's ACL allows `topic`.
    pub fn allows(&self, topic: &str) -> bool {
        self.open || self.gate.as_ref().is_some_and(|g| g.allows(topic))
    }

    /// The error code of a topic the row's ACL refuses.
    pub fn refusal_code(&self) -> i16 {
        Acl::Topic.code()
    }

    /// The operations `who` may do on `topic`, as Kafka's `AuthHelper.authorizedOperations`
    /// answers them (KIP-430's bit field: bit `op` set for each operation allowed).
    pub fn operations(&self, topic: &str) -> i32 {
        TOPIC_OPERATIONS
            .iter()
            .filter(|&&op| self.open || may(self.state, self.who, op, acl::RESOURCE_TOPIC, topic))
            .fold(0, |bits, &op| bits | (1 << op))
    }
}

/// Metadata for `who`: topics it may not describe are hidden when it asked for all, and
/// refused (TOPIC_AUTHORIZATION_FAILED, no partitions) when it named them.
pub fn filter_metadata(
    state: &Rc<CoreState>,
    who: &Subject,
    asked_for_all: bool,
    resp: &mut MetadataResponse,
) {
    if all_open(state, who) {
        return;
    }
    if let Some(row) = row(ApiKey::Metadata) {
        shapes::filter_metadata(&Gate::new(state, who, row), asked_for_all, resp);
    }
}

/// Each topic of a Metadata answer `who` may describe with the operations it may do on it, as
/// Kafka answers `include_topic_authorized_operations` (the refused ones keep none).
pub fn add_topic_operations(state: &CoreState, who: &Subject, resp: &mut MetadataResponse) {
    let access = TopicAccess::new(state, who, ApiKey::Metadata);
    for t in &mut resp.topics {
        match &t.name {
            Some(name) if t.error_code != access.refusal_code() => {
                t.topic_authorized_operations = access.operations(name);
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests;
