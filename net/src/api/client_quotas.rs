//! DescribeClientQuotas and AlterClientQuotas (KIP-546): the client quotas of the metastore
//! (`MetaState::client_quotas`), what `kafka-configs --entity-type users|clients` manages and
//! `crate::quota` enforces. Allowed by DESCRIBE_CONFIGS and ALTER_CONFIGS on the cluster
//! (`api::authz`).

use std::collections::BTreeMap;
use std::rc::Rc;

use kafka_protocol::messages::{
    alter_client_quotas_request, alter_client_quotas_response, describe_client_quotas_response,
    AlterClientQuotasRequest, AlterClientQuotasResponse, DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
};
use kafka_protocol::protocol::StrBytes;
use meta::{ClientQuota, Command, QuotaAlteration, QuotaEntity, QuotaPart, QUOTA_KEYS};

use super::str_bytes;
use crate::codes::INVALID_REQUEST;
use crate::core::CoreState;

const USER: &str = "user";
const CLIENT_ID: &str = "client-id";

/// Match types of a DescribeClientQuotas component.
const MATCH_EXACT: i8 = 0;
const MATCH_DEFAULT: i8 = 1;
const MATCH_ANY: i8 = 2;

/// The entity an AlterClientQuotas entry names, or why it is refused.
fn entity_of(parts: &[(StrBytes, Option<StrBytes>)]) -> Result<QuotaEntity, String> {
    let mut entity = QuotaEntity {
        user: QuotaPart::Absent,
        client_id: QuotaPart::Absent,
    };
    for (kind, name) in parts {
        let slot = match kind.as_str() {
            USER => &mut entity.user,
            CLIENT_ID => &mut entity.client_id,
            "ip" => return Err("ip quotas (connection rates) are not supported".into()),
            other => {
                return Err(format!(
                    "unknown entity type '{other}' (known: {USER}, {CLIENT_ID})"
                ))
            }
        };
        if *slot != QuotaPart::Absent {
            return Err(format!("entity type '{kind}' named twice"));
        }
        *slot = match name {
            None => QuotaPart::Default,
            Some(n) => QuotaPart::Named(n.to_string()),
        };
    }
    if parts.is_empty() {
        return Err("an entity names a user, a client id or both".into());
    }
    Ok(entity)
}

/// An entity as the wire names it: (type, name; none for the default), user first.
fn parts_of(entity: &QuotaEntity) -> Vec<(&'static str, Option<String>)> {
    [(USER, &entity.user), (CLIENT_ID, &entity.client_id)]
        .into_iter()
        .filter_map(|(kind, part)| match part {
            QuotaPart::Absent => None,
            QuotaPart::Default => Some((kind, None)),
            QuotaPart::Named(n) => Some((kind, Some(n.clone()))),
        })
        .collect()
}

/// An AlterClientQuotas entry's entity as its answer names it.
pub(super) fn response_entity(
    entity: &[alter_client_quotas_request::EntityData],
) -> Vec<alter_client_quotas_response::EntityData> {
    entity
        .iter()
        .map(|p| {
            alter_client_quotas_response::EntityData::default()
                .with_entity_type(p.entity_type.clone())
                .with_entity_name(p.entity_name.clone())
        })
        .collect()
}

pub async fn alter(
    state: &Rc<CoreState>,
    req: AlterClientQuotasRequest,
) -> AlterClientQuotasResponse {
    let mut entries = Vec::with_capacity(req.entries.len());
    for e in &req.entries {
        let parts: Vec<(StrBytes, Option<StrBytes>)> = e
            .entity
            .iter()
            .map(|p| (p.entity_type.clone(), p.entity_name.clone()))
            .collect();
        let checked = entity_of(&parts).and_then(|entity| {
            let mut set = BTreeMap::new();
            let mut remove = Vec::new();
            for op in &e.ops {
                if !QUOTA_KEYS.contains(&op.key.as_str()) {
                    return Err(format!(
                        "unknown quota key '{}' (known: {QUOTA_KEYS:?})",
                        op.key
                    ));
                }
                if op.remove {
                    remove.push(op.key.to_string());
                } else if !(op.value.is_finite() && op.value > 0.0) {
                    return Err(format!(
                        "{} = {}: a quota is a finite number above 0",
                        op.key, op.value
                    ));
                } else {
                    set.insert(op.key.to_string(), op.value.to_bits());
                }
            }
            Ok(QuotaAlteration {
                entity,
                set,
                remove,
            })
        });
        let result = match checked {
            Err(msg) => Err((INVALID_REQUEST, msg)),
            Ok(_) if req.validate_only => Ok(()),
            Ok(alter) => {
                let what = format!("{:?}", alter.entity);
                let written = super::admin::write(
                    state,
                    Command::AlterClientQuota {
                        alter: Box::new(alter),
                    },
                )
                .await;
                if written.is_ok() {
                    tracing::info!(entity = what, "client quota altered");
                }
                written
            }
        };
        let entry = alter_client_quotas_response::EntryData::default()
            .with_entity(response_entity(&e.entity));
        entries.push(match result {
            Ok(()) => entry,
            Err((code, msg)) => entry
                .with_error_code(code)
                .with_error_message(Some(str_bytes(msg))),
        });
    }
    AlterClientQuotasResponse::default().with_entries(entries)
}

/// Whether `quota` matches every component (and, `strict`, has no other part).
fn matches(quota: &ClientQuota, components: &[(String, i8, Option<String>)], strict: bool) -> bool {
    let part = |kind: &str| match kind {
        USER => &quota.entity.user,
        _ => &quota.entity.client_id,
    };
    let each = components
        .iter()
        .all(|(kind, match_type, name)| match (part(kind), *match_type) {
            (QuotaPart::Absent, _) => false,
            (_, MATCH_ANY) => true,
            (QuotaPart::Default, MATCH_DEFAULT) => true,
            (QuotaPart::Named(n), MATCH_EXACT) => name.as_deref() == Some(n.as_str()),
            _ => false,
        });
    let parts = [USER, CLIENT_ID]
        .iter()
        .filter(|k| *part(k) != QuotaPart::Absent)
        .count();
    each && (!strict || parts == components.len())
}

pub fn describe(
    state: &CoreState,
    req: DescribeClientQuotasRequest,
) -> DescribeClientQuotasResponse {
    let refuse = |msg: String| {
        DescribeClientQuotasResponse::default()
            .with_error_code(INVALID_REQUEST)
            .with_error_message(Some(str_bytes(msg)))
    };
    let mut components: Vec<(String, i8, Option<String>)> = Vec::new();
    for c in &req.components {
        let kind = c.entity_type.to_string();
        if kind != USER && kind != CLIENT_ID {
            return refuse(format!(
                "unknown entity type '{kind}' (known: {USER}, {CLIENT_ID})"
            ));
        }
        if components.iter().any(|(k, _, _)| *k == kind) {
            return refuse(format!("entity type '{kind}' named twice"));
        }
        match c.match_type {
            MATCH_EXACT if c._match.is_none() => {
                return refuse(format!("an exact match of '{kind}' names the entity"))
            }
            MATCH_EXACT | MATCH_DEFAULT | MATCH_ANY => {}
            other => return refuse(format!("unknown match type {other}")),
        }
        components.push((kind, c.match_type, c._match.as_ref().map(|m| m.to_string())));
    }
    let m = state.meta.borrow();
    let entries = m
        .client_quotas
        .iter()
        .filter(|q| matches(q, &components, req.strict))
        .map(|q| {
            describe_client_quotas_response::EntryData::default()
                .with_entity(
                    parts_of(&q.entity)
                        .into_iter()
                        .map(|(kind, name)| {
                            describe_client_quotas_response::EntityData::default()
                                .with_entity_type(str_bytes(kind))
                                .with_entity_name(name.map(str_bytes))
                        })
                        .collect(),
                )
                .with_values(
                    q.values
                        .iter()
                        .map(|(k, v)| {
                            describe_client_quotas_response::ValueData::default()
                                .with_key(str_bytes(k.clone()))
                                .with_value(f64::from_bits(*v))
                        })
                        .collect(),
                )
        })
        .collect();
    DescribeClientQuotasResponse::default().with_entries(Some(entries))
}
