//! DescribeUserScramCredentials and AlterUserScramCredentials (KIP-554): the SCRAM users of
//! the metastore (`MetaState::scram_users`), what `kafka-configs --entity-type users` and
//! `ringlog user` manage. The client sends the salted password (never the password); the
//! metastore keeps only the stored and server keys derived from it.

use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

use kafka_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
use kafka_protocol::messages::describe_user_scram_credentials_response::{
    CredentialInfo, DescribeUserScramCredentialsResult,
};
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse,
};
use kafka_protocol::ResponseError;
use meta::{Command, ScramMechanism};

use super::str_bytes;
use crate::core::CoreState;
use crate::sasl::scram;

const RESOURCE_NOT_FOUND: i16 = ResponseError::ResourceNotFound.code();
const DUPLICATE_RESOURCE: i16 = ResponseError::DuplicateResource.code();
const UNACCEPTABLE_CREDENTIAL: i16 = ResponseError::UnacceptableCredential.code();
const UNSUPPORTED_SASL_MECHANISM: i16 = ResponseError::UnsupportedSaslMechanism.code();

pub fn describe(
    state: &CoreState,
    req: DescribeUserScramCredentialsRequest,
) -> DescribeUserScramCredentialsResponse {
    let m = state.meta.borrow();
    // None or none named: every user (as Kafka answers; the admin client sends an empty list).
    let users: Vec<String> = match &req.users {
        Some(named) if !named.is_empty() => named.iter().map(|u| u.name.to_string()).collect(),
        _ => m.scram_users.keys().cloned().collect(),
    };
    let mut seen = BTreeSet::new();
    let results = users
        .into_iter()
        .map(|user| {
            let r =
                DescribeUserScramCredentialsResult::default().with_user(str_bytes(user.clone()));
            if !seen.insert(user.clone()) {
                return r
                    .with_error_code(DUPLICATE_RESOURCE)
                    .with_error_message(Some(str_bytes(format!("user {user} named twice"))));
            }
            match m.scram_users.get(&user) {
                None => r
                    .with_error_code(RESOURCE_NOT_FOUND)
                    .with_error_message(Some(str_bytes(format!(
                        "user {user} has no SCRAM credential"
                    )))),
                Some(creds) => r.with_credential_infos(
                    [ScramMechanism::Sha256, ScramMechanism::Sha512]
                        .into_iter()
                        .filter_map(|mech| {
                            creds.get(mech).map(|c| {
                                CredentialInfo::default()
                                    .with_mechanism(mech.kafka_code())
                                    .with_iterations(c.iterations as i32)
                            })
                        })
                        .collect(),
                ),
            }
        })
        .collect();
    DescribeUserScramCredentialsResponse::default().with_results(results)
}

/// One change a request asks for.
enum Op {
    Delete(ScramMechanism),
    Upsert(Command),
}

pub async fn alter(
    state: &Rc<CoreState>,
    req: AlterUserScramCredentialsRequest,
) -> AlterUserScramCredentialsResponse {
    // Per user: its changes, or the first refusal.
    let mut per_user: BTreeMap<String, Result<Vec<Op>, (i16, String)>> = BTreeMap::new();
    let mut named: BTreeSet<(String, i8)> = BTreeSet::new();
    let mut note = |user: &str, mech: i8, op: Result<Op, (i16, String)>| {
        let entry = per_user.entry(user.to_string()).or_insert(Ok(Vec::new()));
        let op = if named.insert((user.to_string(), mech)) {
            op
        } else {
            Err((
                DUPLICATE_RESOURCE,
                format!("user {user}: mechanism {mech} is changed twice in one request"),
            ))
        };
        match (entry.as_mut(), op) {
            (Ok(ops), Ok(op)) => ops.push(op),
            (Ok(_), Err(refused)) => *entry = Err(refused),
            (Err(_), _) => {}
        }
    };
    let mechanism = |code: i8| {
        ScramMechanism::from_kafka_code(code).ok_or((
            UNSUPPORTED_SASL_MECHANISM,
            format!("mechanism {code} is not SCRAM-SHA-256 (1) or SCRAM-SHA-512 (2)"),
        ))
    };
    for d in &req.deletions {
        let user = d.name.to_string();
        note(&user, d.mechanism, mechanism(d.mechanism).map(Op::Delete));
    }
    for u in &req.upsertions {
        let user = u.name.to_string();
        let op = mechanism(u.mechanism).and_then(|mech| {
            let iterations = u32::try_from(u.iterations).unwrap_or(0);
            if !(scram::MIN_ITERATIONS..=scram::MAX_ITERATIONS).contains(&iterations) {
                return Err((
                    UNACCEPTABLE_CREDENTIAL,
                    format!(
                        "{} iterations: must be {} to {}",
                        u.iterations,
                        scram::MIN_ITERATIONS,
                        scram::MAX_ITERATIONS
                    ),
                ));
            }
            if user.is_empty() || u.salt.is_empty() || u.salted_password.is_empty() {
                return Err((
                    UNACCEPTABLE_CREDENTIAL,
                    "the user name, salt and salted password must not be empty".into(),
                ));
            }
            let cred =
                scram::credential_of_salted(mech, &u.salted_password, u.salt.to_vec(), iterations);
            Ok(Op::Upsert(Command::UpsertScramCredential {
                user: user.clone(),
                mechanism: mech,
                credential: Box::new(cred),
            }))
        });
        note(&user, u.mechanism, op);
    }
    let mut results = Vec::with_capacity(per_user.len());
    for (user, ops) in per_user {
        let outcome = match ops {
            Err(refused) => Err(refused),
            Ok(ops) => {
                let mut done = Ok(());
                for op in ops {
                    let cmd = match op {
                        Op::Upsert(cmd) => cmd,
                        Op::Delete(mech) => Command::DeleteScramCredential {
                            user: user.clone(),
                            mechanism: mech,
                        },
                    };
                    if let Err(refused) = super::admin::write(state, cmd).await {
                        done = Err(refused);
                        break;
                    }
                }
                done
            }
        };
        let r = AlterUserScramCredentialsResult::default().with_user(str_bytes(user.clone()));
        results.push(match outcome {
            Ok(()) => {
                tracing::info!(%user, "SCRAM credentials changed");
                r
            }
            Err((code, msg)) => r
                .with_error_code(code)
                .with_error_message(Some(str_bytes(msg))),
        });
    }
    AlterUserScramCredentialsResponse::default().with_results(results)
}
