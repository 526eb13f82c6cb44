//! The table's own checks: one row per guarded kind, every served kind guarded or listed as
//! unguarded, and docs/security.md showing the table as it is.

use std::collections::HashSet;

use kafka_protocol::messages::ApiKey;

use super::{Acl, Resource, Row, Scope, TABLE};
use crate::acl;
use crate::api::served_apis;

/// The request kinds served without an ACL: the handshake and authentication, the versions
/// a client asks for first, and the cluster's description (its endpoints, as Metadata's).
pub const UNGUARDED: &[ApiKey] = &[
    ApiKey::ApiVersions,
    ApiKey::SaslHandshake,
    ApiKey::SaslAuthenticate,
    ApiKey::DescribeCluster,
    // Client telemetry, unchecked as on Kafka (served, not advertised: `UNADVERTISED_APIS`).
    ApiKey::GetTelemetrySubscriptions,
    ApiKey::PushTelemetry,
];

/// The environment variable that makes [`docs_show_the_table`] write the table into the doc.
const UPDATE_DOC: &str = "RINGLOG_UPDATE_ACL_DOC";
const DOC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/security.md");
const DOC_START: &str =
    "<!-- acl-table:start (generated from net/src/api/authz: see its tests) -->";
const DOC_END: &str = "<!-- acl-table:end -->";
/// The doc's table is inside a list item.
const DOC_INDENT: &str = "  ";

fn op_name(op: i8) -> &'static str {
    match op {
        acl::OP_READ => "READ",
        acl::OP_WRITE => "WRITE",
        acl::OP_CREATE => "CREATE",
        acl::OP_DELETE => "DELETE",
        acl::OP_ALTER => "ALTER",
        acl::OP_DESCRIBE => "DESCRIBE",
        acl::OP_CLUSTER_ACTION => "CLUSTER_ACTION",
        acl::OP_DESCRIBE_CONFIGS => "DESCRIBE_CONFIGS",
        acl::OP_ALTER_CONFIGS => "ALTER_CONFIGS",
        acl::OP_IDEMPOTENT_WRITE => "IDEMPOTENT_WRITE",
        other => panic!("no name for ACL operation {other}"),
    }
}

fn acl_label(on: Acl) -> &'static str {
    match on {
        Acl::Topic => "topic",
        Acl::Group => "group",
        Acl::TransactionalId => "transactional id",
        Acl::Cluster => "cluster",
    }
}

fn resource_label(resource: Resource) -> &'static str {
    match resource {
        Resource::Config => "topic for a topic's config, the cluster for a broker's",
        Resource::CoordinatorKey => "group, or transactional id for a transaction key",
        plain => acl_label(plain.acl()),
    }
}

fn scope_label(scope: Scope) -> &'static str {
    match scope {
        Scope::Whole => "the whole request",
        Scope::PerItem => "each item (the rest is served)",
        Scope::Filtered => "hidden from the answer",
    }
}

/// The ACL a row names, in words.
fn acl_words(row: &Row) -> String {
    let mut words = format!(
        "{} on the {}",
        op_name(row.op),
        resource_label(row.resource)
    );
    if let Some(op) = row.unless_cluster {
        words += &format!(" (or {} on the cluster)", op_name(op));
    }
    if let Some((on, op)) = row.also {
        words += &format!(", and {} on the {}", op_name(op), acl_label(on));
    }
    words
}

/// [`TABLE`] as a Markdown table, as docs/security.md shows it.
pub fn acl_table_markdown() -> String {
    let mut out = String::from("| API | ACL | Refused for |\n| --- | --- | --- |\n");
    for row in TABLE {
        let key = format!("{:?}", row.key);
        let refused = scope_label(row.scope);
        out += &format!("| {key} | {} | {refused} |\n", acl_words(row));
    }
    out
}

#[test]
fn the_table_has_one_row_per_guarded_kind() {
    let mut seen = HashSet::new();
    for row in TABLE {
        assert!(seen.insert(row.key), "{:?} has two rows", row.key);
    }
}

#[test]
fn every_served_kind_is_in_the_table_or_unguarded() {
    let served: HashSet<ApiKey> = served_apis().map(|&(key, _, _)| key).collect();
    for key in &served {
        let guarded = super::row(*key).is_some();
        let unguarded = UNGUARDED.contains(key);
        assert!(
            guarded != unguarded,
            "{key:?}: give it a row in TABLE, or list it in UNGUARDED (not both)"
        );
    }
    for key in TABLE.iter().map(|r| r.key).chain(UNGUARDED.iter().copied()) {
        assert!(
            served.contains(&key),
            "{key:?} is not served (SUPPORTED_APIS, UNADVERTISED_APIS)"
        );
    }
}

#[test]
fn only_rows_that_check_items_one_by_one_have_a_cluster_stand_in() {
    for row in TABLE.iter().filter(|r| r.unless_cluster.is_some()) {
        assert_ne!(row.scope, Scope::Whole, "{:?}", row.key);
    }
}

#[test]
fn docs_show_the_table() {
    let doc = std::fs::read_to_string(DOC).expect("docs/security.md");
    let (before, rest) = doc.split_once(DOC_START).expect("the table's start marker");
    let (shown, after) = rest.split_once(DOC_END).expect("the table's end marker");
    let generated = acl_table_markdown();
    let indented: String = generated
        .lines()
        .map(|l| format!("{DOC_INDENT}{l}\n"))
        .collect();
    let wanted = format!("\n{indented}{DOC_INDENT}");
    if std::env::var_os(UPDATE_DOC).is_some() {
        std::fs::write(DOC, format!("{before}{DOC_START}{wanted}{DOC_END}{after}")).unwrap();
        return;
    }
    assert!(
        shown == wanted,
        "docs/security.md's ACL table differs from authz's TABLE; regenerate it with \
         `{UPDATE_DOC}=1 cargo nextest run -p ringlog-net docs_show_the_table`. \
         The table:\n{generated}"
    );
}
