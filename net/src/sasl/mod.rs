//! SASL authentication of Kafka connections (issue #19, first part): a listener whose
//! protocol is SASL_PLAINTEXT or SASL_SSL takes SaslHandshake v1 and SaslAuthenticate v0–v2 with the
//! mechanisms PLAIN and SCRAM-SHA-256/512, both checked against the SCRAM credentials in the
//! metastore (`MetaState::scram_users`; PLAIN derives the salted password and compares, as
//! Redpanda does, so one user store serves both). Until a connection is authenticated it may
//! send only ApiVersions, SaslHandshake and SaslAuthenticate: any other frame closes it before
//! its body is decoded (`Auth::admits`). A failed authentication is answered
//! SASL_AUTHENTICATION_FAILED and the connection closes.

pub mod scram;

use kafka_protocol::messages::{
    ApiKey, SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest,
    SaslHandshakeResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use meta::ScramMechanism;

use crate::core::CoreState;

/// The mechanisms a SASL listener offers, in the order SaslHandshake lists them.
pub const MECHANISMS: &[Mechanism] = &[
    Mechanism::Scram(ScramMechanism::Sha512),
    Mechanism::Scram(ScramMechanism::Sha256),
    Mechanism::Plain,
];
/// The longest SASL/PLAIN message read.
const MAX_PLAIN_MESSAGE_BYTES: usize = 1_024;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mechanism {
    Plain,
    Scram(ScramMechanism),
}

impl Mechanism {
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Plain => "PLAIN",
            Mechanism::Scram(m) => m.sasl_name(),
        }
    }
    fn from_name(name: &str) -> Option<Self> {
        MECHANISMS.iter().copied().find(|m| m.name() == name)
    }
}

pub use crate::config::SecurityProtocol;

/// Where one connection's authentication stands.
pub enum Auth {
    /// A PLAINTEXT listener: everything is admitted (the principal is ANONYMOUS).
    Open,
    /// Waiting for SaslHandshake.
    Handshake,
    /// The mechanism is chosen; waiting for its first SaslAuthenticate.
    Chosen(Mechanism),
    /// SCRAM: the server-first message went out; waiting for the client-final one.
    ScramFinal(Box<scram::ServerFirst>),
    /// Authenticated.
    Done { principal: String },
}

/// The principal of a PLAINTEXT connection, as Kafka names it.
pub const ANONYMOUS: &str = "User:ANONYMOUS";

impl Auth {
    pub fn new(protocol: SecurityProtocol) -> Auth {
        match protocol {
            SecurityProtocol::Plaintext | SecurityProtocol::Ssl => Auth::Open,
            SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl => Auth::Handshake,
        }
    }

    /// Whether a frame of API `key` may be decoded now.
    pub fn admits(&self, key: i16) -> bool {
        matches!(self, Auth::Open | Auth::Done { .. })
            || key == ApiKey::ApiVersions as i16
            || key == ApiKey::SaslHandshake as i16
            || key == ApiKey::SaslAuthenticate as i16
    }

    /// Whether the connection's listener authenticates its clients (SASL).
    pub fn authenticates(&self) -> bool {
        !matches!(self, Auth::Open)
    }

    /// The connection's principal once known (`User:NAME`).
    pub fn principal(&self) -> Option<&str> {
        match self {
            Auth::Open => Some(ANONYMOUS),
            Auth::Done { principal } => Some(principal),
            _ => None,
        }
    }
}

fn str_bytes(s: impl Into<String>) -> StrBytes {
    StrBytes::from_string(s.into())
}

/// SaslHandshake: chooses the mechanism. `true`: close the connection after the answer.
pub fn handshake(auth: &mut Auth, req: &SaslHandshakeRequest) -> (SaslHandshakeResponse, bool) {
    let offered: Vec<StrBytes> = MECHANISMS.iter().map(|m| str_bytes(m.name())).collect();
    let resp = SaslHandshakeResponse::default().with_mechanisms(offered);
    match auth {
        Auth::Handshake => match Mechanism::from_name(&req.mechanism) {
            Some(m) => {
                *auth = Auth::Chosen(m);
                (resp, false)
            }
            None => (
                resp.with_error_code(ResponseError::UnsupportedSaslMechanism.code()),
                true,
            ),
        },
        Auth::Open => (
            resp.with_error_code(ResponseError::IllegalSaslState.code()),
            false,
        ),
        _ => (
            resp.with_error_code(ResponseError::IllegalSaslState.code()),
            true,
        ),
    }
}

/// SaslAuthenticate: one step of the chosen mechanism. `true`: close after the answer.
pub async fn authenticate(
    state: &CoreState,
    auth: &mut Auth,
    req: &SaslAuthenticateRequest,
    peer: &str,
) -> (SaslAuthenticateResponse, bool) {
    let step = std::mem::replace(auth, Auth::Handshake);
    let result: Result<(Auth, Vec<u8>), String> = match step {
        Auth::Chosen(Mechanism::Plain) => plain(state, &req.auth_bytes).await.map(|user| {
            (
                Auth::Done {
                    principal: format!("User:{user}"),
                },
                Vec::new(),
            )
        }),
        Auth::Chosen(Mechanism::Scram(m)) => scram_first(state, m, &req.auth_bytes).map(|s| {
            let msg = s.message().to_vec();
            (Auth::ScramFinal(Box::new(s)), msg)
        }),
        Auth::ScramFinal(s) => s.finish(&req.auth_bytes).map(|(user, msg)| {
            (
                Auth::Done {
                    principal: format!("User:{user}"),
                },
                msg,
            )
        }),
        other => {
            *auth = other;
            let illegal = !matches!(auth, Auth::Open);
            return (
                SaslAuthenticateResponse::default()
                    .with_error_code(ResponseError::IllegalSaslState.code())
                    .with_error_message(Some(str_bytes(
                        "SaslAuthenticate without a SaslHandshake choosing a mechanism",
                    ))),
                illegal,
            );
        }
    };
    match result {
        Ok((next, bytes)) => {
            if let Auth::Done { principal } = &next {
                tracing::debug!(%peer, %principal, "SASL authenticated");
            }
            *auth = next;
            (
                SaslAuthenticateResponse::default().with_auth_bytes(bytes.into()),
                false,
            )
        }
        Err(why) => {
            tracing::info!(%peer, %why, "SASL authentication failed");
            (
                SaslAuthenticateResponse::default()
                    .with_error_code(ResponseError::SaslAuthenticationFailed.code())
                    .with_error_message(Some(str_bytes(format!("Authentication failed: {why}")))),
                true,
            )
        }
    }
}

/// SASL/PLAIN (`authzid NUL user NUL password`) against the SCRAM store: the user's
/// strongest credential, its salted password derived on the blocking pool (PBKDF2 is
/// thousands of HMACs).
async fn plain(state: &CoreState, msg: &[u8]) -> Result<String, String> {
    if msg.len() > MAX_PLAIN_MESSAGE_BYTES {
        return Err(format!("a PLAIN message of {} bytes", msg.len()));
    }
    let mut parts = msg.split(|b| *b == 0);
    let (Some(authzid), Some(user), Some(password), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err("malformed PLAIN message".into());
    };
    let user = std::str::from_utf8(user)
        .map_err(|_| "the user name is not UTF-8")?
        .to_string();
    if !authzid.is_empty() && authzid != user.as_bytes() {
        return Err("the authorization id differs from the user".into());
    }
    let found = {
        let m = state.meta.borrow();
        m.scram_users.get(&user).and_then(|u| {
            [ScramMechanism::Sha512, ScramMechanism::Sha256]
                .into_iter()
                .find_map(|mech| u.get(mech).map(|c| (mech, c.clone())))
        })
    };
    let Some((mech, cred)) = found else {
        return Err("invalid credentials".into());
    };
    let password = password.to_vec();
    let ok = glommio::executor()
        .spawn_blocking(move || scram::password_matches(mech, &cred, &password))
        .await;
    if ok {
        Ok(user)
    } else {
        Err("invalid credentials".into())
    }
}

fn scram_first(
    state: &CoreState,
    mech: ScramMechanism,
    msg: &[u8],
) -> Result<scram::ServerFirst, String> {
    let first = scram::ClientFirst::parse(msg)?;
    let cred = state
        .meta
        .borrow()
        .scram_users
        .get(&first.user)
        .and_then(|u| u.get(mech).cloned())
        .ok_or("invalid credentials")?;
    Ok(scram::ServerFirst::start(
        mech,
        first,
        cred,
        &scram::server_nonce(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_handshake_passes_before_authentication() {
        let a = Auth::new(SecurityProtocol::SaslPlaintext);
        assert!(a.admits(ApiKey::ApiVersions as i16));
        assert!(a.admits(ApiKey::SaslHandshake as i16));
        assert!(a.admits(ApiKey::SaslAuthenticate as i16));
        assert!(!a.admits(ApiKey::Metadata as i16));
        assert!(!a.admits(ApiKey::Produce as i16));
        assert!(!a.admits(crate::node_rpc::NODE_RPC_API_KEY));
        assert!(Auth::new(SecurityProtocol::Plaintext).admits(ApiKey::Produce as i16));
    }

    #[test]
    fn the_handshake_chooses_an_offered_mechanism() {
        let mut a = Auth::new(SecurityProtocol::SaslPlaintext);
        let req = SaslHandshakeRequest::default().with_mechanism(str_bytes("GSSAPI"));
        let (resp, close) = handshake(&mut a, &req);
        assert_eq!(
            resp.error_code,
            ResponseError::UnsupportedSaslMechanism.code()
        );
        assert!(close);
        assert_eq!(resp.mechanisms.len(), MECHANISMS.len());
        let mut a = Auth::new(SecurityProtocol::SaslPlaintext);
        let req = SaslHandshakeRequest::default().with_mechanism(str_bytes("SCRAM-SHA-512"));
        let (resp, close) = handshake(&mut a, &req);
        assert_eq!((resp.error_code, close), (0, false));
        assert!(matches!(
            a,
            Auth::Chosen(Mechanism::Scram(ScramMechanism::Sha512))
        ));
        assert_eq!(
            SecurityProtocol::parse("sasl_ssl"),
            Ok(SecurityProtocol::SaslSsl)
        );
        assert!(SecurityProtocol::parse("TLS")
            .unwrap_err()
            .contains("not a security protocol"));
    }
}
