//! The security state: SCRAM credentials, ACL bindings and client quotas.

use std::collections::BTreeMap;

use rkyv::{Archive, Deserialize, Serialize};

use super::*;

/// A SCRAM mechanism (KIP-84) with Kafka's wire numbers.
#[derive(Archive, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScramMechanism {
    /// SCRAM-SHA-256 (Kafka's mechanism 1).
    Sha256,
    /// SCRAM-SHA-512 (Kafka's mechanism 2).
    Sha512,
}

impl ScramMechanism {
    pub fn kafka_code(self) -> i8 {
        match self {
            ScramMechanism::Sha256 => 1,
            ScramMechanism::Sha512 => 2,
        }
    }
    pub fn from_kafka_code(code: i8) -> Option<Self> {
        match code {
            1 => Some(ScramMechanism::Sha256),
            2 => Some(ScramMechanism::Sha512),
            _ => None,
        }
    }
    pub fn sasl_name(self) -> &'static str {
        match self {
            ScramMechanism::Sha256 => "SCRAM-SHA-256",
            ScramMechanism::Sha512 => "SCRAM-SHA-512",
        }
    }
}

/// A user's SCRAM credential for one mechanism, salted (RFC 5802): never the password.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct ScramCredential {
    pub salt: Vec<u8>,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
    pub iterations: u32,
}

/// One user's SCRAM credentials (issue #19), by mechanism.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
pub struct UserCredentials {
    pub sha256: Option<ScramCredential>,
    pub sha512: Option<ScramCredential>,
}

impl UserCredentials {
    pub fn get(&self, m: ScramMechanism) -> Option<&ScramCredential> {
        match m {
            ScramMechanism::Sha256 => self.sha256.as_ref(),
            ScramMechanism::Sha512 => self.sha512.as_ref(),
        }
    }
    pub(super) fn slot(&mut self, m: ScramMechanism) -> &mut Option<ScramCredential> {
        match m {
            ScramMechanism::Sha256 => &mut self.sha256,
            ScramMechanism::Sha512 => &mut self.sha512,
        }
    }
    pub(super) fn is_empty(&self) -> bool {
        self.sha256.is_none() && self.sha512.is_none()
    }
}

/// One ACL (Kafka's ACL binding, KIP-140), with Kafka's wire codes: resource type (2 topic,
/// 3 group, 4 cluster, 5 transactional id), pattern type (3 literal, 4 prefixed), operation
/// (2 all, 3 read, ...), permission (2 deny, 3 allow). Checked when created
/// (`net::acl`); the metastore keeps each binding once.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct AclBinding {
    pub resource_type: i8,
    pub resource_name: String,
    pub pattern_type: i8,
    pub principal: String,
    pub host: String,
    pub operation: i8,
    pub permission: i8,
}

/// The most ACLs the metastore holds.
pub const MAX_ACLS: usize = 100_000;
/// The longest resource name, principal or host of an ACL, in bytes.
pub const MAX_ACL_FIELD_BYTES: usize = 1_024;

/// The most SCRAM users the metastore holds.
pub const MAX_SCRAM_USERS: usize = 10_000;
/// The longest SCRAM user name, salt and key, in bytes.
pub const MAX_SCRAM_USER_BYTES: usize = 256;
pub const MAX_SCRAM_FIELD_BYTES: usize = 256;

/// One part of a client-quota entity (KIP-546): absent, the default (`<default>`, a null
/// name on the wire), or a name.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum QuotaPart {
    Absent,
    Default,
    Named(String),
}

/// What a client quota applies to: a user, a client id, or both (Kafka's entity types
/// `user` and `client-id`; at least one part is not absent).
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct QuotaEntity {
    pub user: QuotaPart,
    pub client_id: QuotaPart,
}

/// The quota keys ringlog enforces (Kafka's names): bytes per second a producer sends,
/// bytes per second a consumer fetches, and percent of one core spent on a client's requests.
pub const QUOTA_KEYS: &[&str] = &[
    "producer_byte_rate",
    "consumer_byte_rate",
    "request_percentage",
];

/// One entity's quotas: key (one of [`QUOTA_KEYS`]) -> value, as `f64::to_bits` (the state
/// stays `Eq`).
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct ClientQuota {
    pub entity: QuotaEntity,
    pub values: BTreeMap<String, u64>,
}

impl ClientQuota {
    /// The value of `key`, if set.
    pub fn value(&self, key: &str) -> Option<f64> {
        self.values.get(key).map(|b| f64::from_bits(*b))
    }
}

/// The most client-quota entities the metastore holds.
pub const MAX_CLIENT_QUOTAS: usize = 10_000;
/// The longest user or client id a quota names, in bytes.
pub const MAX_QUOTA_NAME_BYTES: usize = 1_024;

impl MetaState {
    /// Puts `quota` in its place in the sorted `client_quotas` (no values: takes its entity
    /// out).
    pub(super) fn set_client_quota(&mut self, quota: &ClientQuota) {
        let at = self
            .client_quotas
            .binary_search_by(|q| q.entity.cmp(&quota.entity));
        match at {
            Ok(i) if quota.values.is_empty() => {
                self.client_quotas.remove(i);
            }
            Ok(i) => self.client_quotas[i] = quota.clone(),
            Err(_) if quota.values.is_empty() => {}
            Err(i) => self.client_quotas.insert(i, quota.clone()),
        }
    }

    /// The quotas of `alter.entity` after `alter`, checked (names, keys, finite positive
    /// values, [`MAX_CLIENT_QUOTAS`]).
    pub(super) fn altered_quota(&self, alter: &QuotaAlteration) -> Result<ClientQuota, Refusal> {
        let bad = |reason: String| Err(Refusal::InvalidQuota { reason });
        let e = &alter.entity;
        if e.user == QuotaPart::Absent && e.client_id == QuotaPart::Absent {
            return bad("an entity names a user, a client id or both".into());
        }
        for p in [&e.user, &e.client_id] {
            if let QuotaPart::Named(n) = p {
                if n.is_empty() || n.len() > MAX_QUOTA_NAME_BYTES {
                    return bad(format!("a name is 1 to {MAX_QUOTA_NAME_BYTES} bytes"));
                }
            }
        }
        for k in alter.set.keys().chain(alter.remove.iter()) {
            if !QUOTA_KEYS.contains(&k.as_str()) {
                return bad(format!("unknown quota key '{k}' (known: {QUOTA_KEYS:?})"));
            }
        }
        if let Some((k, v)) = alter
            .set
            .iter()
            .find(|(_, v)| !(f64::from_bits(**v).is_finite() && f64::from_bits(**v) > 0.0))
        {
            return bad(format!(
                "'{k}' = {}: a quota is a finite number above 0",
                f64::from_bits(*v)
            ));
        }
        let existing = self
            .client_quotas
            .binary_search_by(|q| q.entity.cmp(e))
            .ok()
            .map(|i| &self.client_quotas[i]);
        let mut values = existing.map(|q| q.values.clone()).unwrap_or_default();
        for k in &alter.remove {
            values.remove(k);
        }
        values.extend(alter.set.iter().map(|(k, v)| (k.clone(), *v)));
        if existing.is_none() && !values.is_empty() && self.client_quotas.len() >= MAX_CLIENT_QUOTAS
        {
            return bad(format!(
                "the metastore holds {MAX_CLIENT_QUOTAS} quota entities at most"
            ));
        }
        Ok(ClientQuota {
            entity: e.clone(),
            values,
        })
    }
}
