//! ACLs (issue #19): Kafka's authorizer model over the ACLs in the metastore
//! (`MetaState::acls`). A request's principal (`User:NAME` after SASL, `User:ANONYMOUS` on a
//! listener without it) may do an operation on a resource when an ALLOW binding for it (or
//! an operation implying it) matches and no DENY binding does; superusers may do everything.
//! A resource no binding names at all is open to everyone on a listener without
//! authentication, and on an authenticated listener only with
//! `allow-everyone-if-no-acl-found` (default false there, as in Kafka with an authorizer).
//! Bindings name resources literally (`*` for all) or by prefix, principals exactly or
//! `User:*`, hosts exactly or `*`.

use kafka_protocol::ResponseError;
use meta::{AclBinding, MetaState};

pub const RESOURCE_ANY: i8 = 1;
pub const RESOURCE_TOPIC: i8 = 2;
pub const RESOURCE_GROUP: i8 = 3;
pub const RESOURCE_CLUSTER: i8 = 4;
pub const RESOURCE_TRANSACTIONAL_ID: i8 = 5;

pub const PATTERN_ANY: i8 = 1;
pub const PATTERN_MATCH: i8 = 2;
pub const PATTERN_LITERAL: i8 = 3;
pub const PATTERN_PREFIXED: i8 = 4;

pub const OP_ANY: i8 = 1;
pub const OP_ALL: i8 = 2;
pub const OP_READ: i8 = 3;
pub const OP_WRITE: i8 = 4;
pub const OP_CREATE: i8 = 5;
pub const OP_DELETE: i8 = 6;
pub const OP_ALTER: i8 = 7;
pub const OP_DESCRIBE: i8 = 8;
pub const OP_CLUSTER_ACTION: i8 = 9;
pub const OP_DESCRIBE_CONFIGS: i8 = 10;
pub const OP_ALTER_CONFIGS: i8 = 11;
pub const OP_IDEMPOTENT_WRITE: i8 = 12;

pub const PERMISSION_ANY: i8 = 1;
pub const PERMISSION_DENY: i8 = 2;
pub const PERMISSION_ALLOW: i8 = 3;

/// The one cluster resource's name.
pub const CLUSTER_RESOURCE_NAME: &str = "kafka-cluster";

pub const TOPIC_AUTHORIZATION_FAILED: i16 = ResponseError::TopicAuthorizationFailed.code();
pub const GROUP_AUTHORIZATION_FAILED: i16 = ResponseError::GroupAuthorizationFailed.code();
pub const CLUSTER_AUTHORIZATION_FAILED: i16 = ResponseError::ClusterAuthorizationFailed.code();
pub const TRANSACTIONAL_ID_AUTHORIZATION_FAILED: i16 =
    ResponseError::TransactionalIdAuthorizationFailed.code();

/// The principal of a connection without authentication, as Kafka names it.
pub const ANONYMOUS: &str = "User:ANONYMOUS";

/// Who asks: the connection's principal and host, and whether its listener authenticates.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Subject {
    pub principal: String,
    pub host: String,
    pub authenticated: bool,
}

impl Subject {
    /// A request's subject before its connection set it (the fuzz decoder's requests).
    pub fn anonymous() -> std::rc::Rc<Subject> {
        thread_local! {
            static ANON: std::rc::Rc<Subject> = std::rc::Rc::new(Subject {
                principal: ANONYMOUS.to_string(),
                host: String::new(),
                authenticated: false,
            });
        }
        ANON.with(std::rc::Rc::clone)
    }
}

/// Which authorizer the broker runs (`--authorizer`): whether ACLs are enforced at all.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Authorizer {
    /// The ACLs of the metastore are enforced (the rules at the top of this module).
    #[default]
    Acls,
    /// No authorizer, as Kafka without `authorizer.class.name`: every principal may do
    /// everything, and the ACL APIs answer SECURITY_DISABLED.
    None,
}

impl Authorizer {
    /// `acls` or `none`, as `--authorizer` takes it.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "acls" => Some(Self::Acls),
            "none" => Some(Self::None),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Acls => "acls",
            Self::None => "none",
        }
    }
}

/// What the ACL APIs answer, in Kafka's words, when the broker runs without an authorizer.
pub const NO_AUTHORIZER_MESSAGE: &str = "No Authorizer is configured.";
pub const SECURITY_DISABLED: i16 = ResponseError::SecurityDisabled.code();

/// The authorizer's settings.
#[derive(Clone, Debug, Default)]
pub struct AclConfig {
    /// Whether ACLs are enforced (`--authorizer`).
    pub authorizer: Authorizer,
    /// Principals that may do everything (`super-users`, e.g. `User:admin`).
    pub super_users: Vec<String>,
    /// Whether a resource no ACL names is open on authenticated listeners too.
    pub allow_everyone_if_no_acl_found: bool,
}

fn resource_matches(b: &AclBinding, name: &str) -> bool {
    match b.pattern_type {
        PATTERN_LITERAL => b.resource_name == name || b.resource_name == "*",
        PATTERN_PREFIXED => name.starts_with(b.resource_name.as_str()),
        _ => false,
    }
}

/// Whether an ALLOW for `granted` allows `wanted` (ALL allows all; READ, WRITE, DELETE and
/// ALTER allow DESCRIBE; ALTER_CONFIGS allows DESCRIBE_CONFIGS).
fn implies(granted: i8, wanted: i8) -> bool {
    granted == wanted
        || granted == OP_ALL
        || (wanted == OP_DESCRIBE && matches!(granted, OP_READ | OP_WRITE | OP_DELETE | OP_ALTER))
        || (wanted == OP_DESCRIBE_CONFIGS && granted == OP_ALTER_CONFIGS)
}

/// Whether `who` may do `op` on resource `rtype`/`name`.
pub fn allowed(
    m: &MetaState,
    cfg: &AclConfig,
    who: &Subject,
    op: i8,
    rtype: i8,
    name: &str,
) -> bool {
    if cfg.authorizer == Authorizer::None || cfg.super_users.contains(&who.principal) {
        return true;
    }
    let mut named = false;
    let mut allow = false;
    for b in m
        .acls
        .iter()
        .filter(|b| b.resource_type == rtype && resource_matches(b, name))
    {
        named = true;
        let principal = b.principal == who.principal || b.principal == "User:*";
        let host = b.host == "*" || b.host == who.host;
        if !(principal && host) {
            continue;
        }
        match b.permission {
            PERMISSION_DENY if b.operation == op || b.operation == OP_ALL => return false,
            PERMISSION_ALLOW if implies(b.operation, op) => allow = true,
            _ => {}
        }
    }
    allow || (!named && (!who.authenticated || cfg.allow_everyone_if_no_acl_found))
}

/// `Err((INVALID_REQUEST, why))` unless `ok`.
fn require(ok: bool, why: impl FnOnce() -> String) -> Result<(), (i16, String)> {
    if ok {
        Ok(())
    } else {
        Err((ResponseError::InvalidRequest.code(), why()))
    }
}

/// A binding a client asks to create, checked: Kafka's codes, nothing ANY or MATCH, a
/// principal of the form `TYPE:NAME`. `Err` is (INVALID_REQUEST, why).
pub fn binding_of(
    resource_type: i8,
    resource_name: &str,
    pattern_type: i8,
    principal: &str,
    host: &str,
    operation: i8,
    permission: i8,
) -> Result<AclBinding, (i16, String)> {
    require(
        (RESOURCE_TOPIC..=RESOURCE_TRANSACTIONAL_ID).contains(&resource_type),
        || {
            format!("resource type {resource_type}: want topic (2), group (3), cluster (4) or transactional id (5)")
        },
    )?;
    require(
        matches!(pattern_type, PATTERN_LITERAL | PATTERN_PREFIXED),
        || format!("pattern type {pattern_type}: want literal (3) or prefixed (4)"),
    )?;
    require(!resource_name.is_empty(), || {
        "an empty resource name".into()
    })?;
    require(
        resource_type != RESOURCE_CLUSTER || resource_name == CLUSTER_RESOURCE_NAME,
        || format!("the cluster resource is named {CLUSTER_RESOURCE_NAME}"),
    )?;
    require(
        principal
            .split_once(':')
            .is_some_and(|(t, n)| !t.is_empty() && !n.is_empty()),
        || format!("principal {principal:?}: want TYPE:NAME, e.g. User:alice"),
    )?;
    require(!host.is_empty(), || "an empty host (use * for any)".into())?;
    require((OP_ALL..=OP_IDEMPOTENT_WRITE).contains(&operation), || {
        format!("operation {operation} is not one of Kafka's (2..=12)")
    })?;
    require(
        matches!(permission, PERMISSION_DENY | PERMISSION_ALLOW),
        || format!("permission {permission}: want deny (2) or allow (3)"),
    )?;
    Ok(AclBinding {
        resource_type,
        resource_name: resource_name.to_string(),
        pattern_type,
        principal: principal.to_string(),
        host: host.to_string(),
        operation,
        permission,
    })
}

/// A DescribeAcls / DeleteAcls filter.
pub struct Filter {
    pub resource_type: i8,
    pub resource_name: Option<String>,
    pub pattern_type: i8,
    pub principal: Option<String>,
    pub host: Option<String>,
    pub operation: i8,
    pub permission: i8,
}

impl Filter {
    /// Whether binding `b` is one the filter selects (Kafka's AclBindingFilter.matches;
    /// MATCH selects the literal, wildcard and prefixed bindings that apply to the name).
    pub fn matches(&self, b: &AclBinding) -> bool {
        let any_or = |f: i8, v: i8, any: i8| f == any || f == v;
        let name = match (&self.resource_name, self.pattern_type) {
            (None, _) => true,
            (Some(n), PATTERN_MATCH) => resource_matches(b, n),
            (Some(n), _) => *n == b.resource_name,
        };
        let pattern = matches!(self.pattern_type, PATTERN_ANY | PATTERN_MATCH)
            || self.pattern_type == b.pattern_type;
        any_or(self.resource_type, b.resource_type, RESOURCE_ANY)
            && name
            && pattern
            && self.principal.as_ref().is_none_or(|p| *p == b.principal)
            && self.host.as_ref().is_none_or(|h| *h == b.host)
            && any_or(self.operation, b.operation, OP_ANY)
            && any_or(self.permission, b.permission, PERMISSION_ANY)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A binding on topics `name` (pattern `pt`) for principal `who`, from any host.
    fn topic_acl(name: &str, pt: i8, who: &str, op: i8, perm: i8) -> AclBinding {
        binding_of(RESOURCE_TOPIC, name, pt, who, "*", op, perm).unwrap()
    }

    fn sasl(user: &str) -> Subject {
        Subject {
            principal: format!("User:{user}"),
            host: "127.0.0.1".into(),
            authenticated: true,
        }
    }

    #[test]
    fn allow_deny_prefixes_implications_and_the_no_acl_rule() {
        let mut m = MetaState {
            acls: vec![
                topic_acl(
                    "orders",
                    PATTERN_LITERAL,
                    "User:alice",
                    OP_READ,
                    PERMISSION_ALLOW,
                ),
                topic_acl(
                    "pay-",
                    PATTERN_PREFIXED,
                    "User:bob",
                    OP_ALL,
                    PERMISSION_ALLOW,
                ),
                topic_acl(
                    "pay-secret",
                    PATTERN_LITERAL,
                    "User:bob",
                    OP_READ,
                    PERMISSION_DENY,
                ),
            ],
            ..MetaState::default()
        };
        m.acls.sort();
        let cfg = AclConfig::default();
        let topic = |cfg: &AclConfig, who: &Subject, op, name| {
            allowed(&m, cfg, who, op, RESOURCE_TOPIC, name)
        };
        let t = |who: &Subject, op, name| topic(&cfg, who, op, name);
        assert!(t(&sasl("alice"), OP_READ, "orders"));
        assert!(
            t(&sasl("alice"), OP_DESCRIBE, "orders"),
            "READ implies DESCRIBE"
        );
        assert!(!t(&sasl("alice"), OP_WRITE, "orders"));
        assert!(
            !t(&sasl("carol"), OP_READ, "orders"),
            "named: others are refused"
        );
        assert!(t(&sasl("bob"), OP_WRITE, "pay-in"), "a prefixed ALL");
        assert!(!t(&sasl("bob"), OP_READ, "pay-secret"), "deny wins");
        assert!(t(&sasl("bob"), OP_WRITE, "pay-secret"));
        assert!(
            !t(&sasl("alice"), OP_READ, "unnamed"),
            "authenticated: closed by default"
        );
        let anon = Subject {
            principal: ANONYMOUS.into(),
            host: "127.0.0.1".into(),
            authenticated: false,
        };
        assert!(t(&anon, OP_WRITE, "unnamed"), "no authentication: open");
        assert!(!t(&anon, OP_READ, "orders"), "but a named resource is not");
        let open = AclConfig {
            allow_everyone_if_no_acl_found: true,
            ..AclConfig::default()
        };
        assert!(topic(&open, &sasl("alice"), OP_READ, "unnamed"));
        let root = AclConfig {
            super_users: vec!["User:root".into()],
            ..AclConfig::default()
        };
        assert!(topic(&root, &sasl("root"), OP_READ, "pay-secret"));
        let none = AclConfig {
            authorizer: Authorizer::None,
            ..AclConfig::default()
        };
        assert!(
            topic(&none, &sasl("bob"), OP_READ, "pay-secret"),
            "no authorizer: a DENY is not enforced"
        );
        assert!(topic(&none, &anon, OP_READ, "orders"));
        assert_eq!(Authorizer::parse("none"), Some(Authorizer::None));
        assert_eq!(
            Authorizer::parse(Authorizer::Acls.name()),
            Some(Authorizer::Acls)
        );
        assert_eq!(Authorizer::parse("kafka"), None);
    }

    #[test]
    fn bad_bindings_say_why_and_filters_match_like_kafkas() {
        let why = |b: Result<AclBinding, (i16, String)>| b.unwrap_err().1;
        assert!(why(binding_of(9, "t", 3, "User:a", "*", 3, 3)).contains("resource type"));
        assert!(why(binding_of(2, "t", 1, "User:a", "*", 3, 3)).contains("pattern type"));
        assert!(why(binding_of(2, "t", 3, "alice", "*", 3, 3)).contains("TYPE:NAME"));
        assert!(why(binding_of(4, "x", 3, "User:a", "*", 7, 3)).contains("kafka-cluster"));
        let b = topic_acl(
            "pay-",
            PATTERN_PREFIXED,
            "User:bob",
            OP_ALL,
            PERMISSION_ALLOW,
        );
        let f = |name: Option<&str>, pt| Filter {
            resource_type: RESOURCE_ANY,
            resource_name: name.map(str::to_string),
            pattern_type: pt,
            principal: None,
            host: None,
            operation: OP_ANY,
            permission: PERMISSION_ANY,
        };
        assert!(f(None, PATTERN_ANY).matches(&b));
        assert!(f(Some("pay-in"), PATTERN_MATCH).matches(&b));
        assert!(!f(Some("pay-in"), PATTERN_ANY).matches(&b));
        assert!(f(Some("pay-"), PATTERN_PREFIXED).matches(&b));
        assert!(!f(Some("pay-"), PATTERN_LITERAL).matches(&b));
    }
}
