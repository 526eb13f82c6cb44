//! SASL authentication of Kafka connections (issue #19, first part): a listener whose
//! protocol is SASL_PLAINTEXT or SASL_SSL takes SaslHandshake v1 and SaslAuthenticate v0–v2 with the
//! mechanisms PLAIN and SCRAM-SHA-256/512, both checked against the SCRAM credentials in the
//! metastore (`MetaState::scram_users`; PLAIN derives the salted password and compares, as
//! Redpanda does, so one user store serves both). Until a connection is authenticated it may
//! send only ApiVersions, SaslHandshake and SaslAuthenticate: any other frame closes it before
//! its body is decoded (`Auth::admits`). A failed authentication is answered
//! SASL_AUTHENTICATION_FAILED and the connection closes.
//!
//! OAUTHBEARER (`crate::oauth`) is offered when the broker is configured for it. Re-authentication
//! (KIP-368): with `connections-max-reauth-ms`, or an OAUTHBEARER token that expires, the
//! SaslAuthenticate answer gives the session's lifetime; the client authenticates again on
//! the same connection before it ends (as the same principal), and a connection whose
//! session ended may send nothing but the SASL requests: anything else closes it.

pub mod scram;

use crate::oauth;

use std::time::{Duration, Instant};

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
    OAuthBearer,
}

impl Mechanism {
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Plain => "PLAIN",
            Mechanism::Scram(m) => m.sasl_name(),
            Mechanism::OAuthBearer => "OAUTHBEARER",
        }
    }
}

/// The mechanisms this broker offers: [`MECHANISMS`], and OAUTHBEARER when configured.
pub fn offered(cfg: &crate::config::BrokerConfig) -> Vec<Mechanism> {
    let mut m = MECHANISMS.to_vec();
    if cfg.oauth.is_some() {
        m.push(Mechanism::OAuthBearer);
    }
    m
}

pub use crate::config::SecurityProtocol;

/// Where one connection's authentication stands.
pub enum Auth {
    /// A PLAINTEXT listener (or SSL without a client certificate): everything is admitted
    /// (the principal is ANONYMOUS).
    Open,
    /// An SSL listener whose client presented a certificate its client CA signed: the
    /// principal is the certificate's subject, mapped (`crate::tls::principal_of`).
    Certified { principal: String },
    /// Waiting for SaslHandshake.
    Handshake,
    /// The mechanism is chosen; waiting for its first SaslAuthenticate.
    Chosen(Mechanism),
    /// SCRAM: the server-first message went out; waiting for the client-final one.
    ScramFinal(Box<scram::ServerFirst>),
    /// Authenticated, until `expires_at` if the session has a lifetime (KIP-368).
    Done {
        principal: String,
        expires_at: Option<Instant>,
    },
}

pub use crate::acl::ANONYMOUS;

impl Auth {
    /// `certified`: the principal of the client's TLS certificate, if it showed one.
    pub fn new(protocol: SecurityProtocol, certified: Option<String>) -> Auth {
        match (protocol, certified) {
            (SecurityProtocol::Ssl, Some(principal)) => Auth::Certified { principal },
            (SecurityProtocol::Plaintext | SecurityProtocol::Ssl, _) => Auth::Open,
            (SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl, _) => Auth::Handshake,
        }
    }

    /// Whether a frame of API `key` may be decoded now.
    pub fn admits(&self, key: i16) -> bool {
        matches!(
            self,
            Auth::Open | Auth::Certified { .. } | Auth::Done { .. }
        ) || key == ApiKey::ApiVersions as i16
            || key == ApiKey::SaslHandshake as i16
            || key == ApiKey::SaslAuthenticate as i16
    }

    /// Whether the client of a SASL listener has not authenticated yet (a re-authentication,
    /// KIP-368, starts from an authenticated session and does not count).
    pub fn awaits_authentication(&self) -> bool {
        matches!(
            self,
            Auth::Handshake | Auth::Chosen(_) | Auth::ScramFinal(_)
        )
    }

    /// Whether the connection's listener authenticates its clients (SASL).
    pub fn authenticates(&self) -> bool {
        !matches!(self, Auth::Open)
    }

    /// The connection's principal once known (`User:NAME`).
    pub fn principal(&self) -> Option<&str> {
        match self {
            Auth::Open => Some(ANONYMOUS),
            Auth::Certified { principal } | Auth::Done { principal, .. } => Some(principal),
            _ => None,
        }
    }

    /// Whether the authenticated session ended (the client did not re-authenticate in
    /// time): only the SASL requests may come now. Reads the clock only for a session with a
    /// lifetime.
    pub fn expired(&self) -> bool {
        matches!(self, Auth::Done { expires_at: Some(at), .. } if *at <= Instant::now())
    }
}

fn str_bytes(s: impl Into<String>) -> StrBytes {
    StrBytes::from_string(s.into())
}

/// SaslHandshake: chooses the mechanism (again, from an authenticated session: KIP-368
/// re-authentication). `true`: close the connection after the answer.
pub fn handshake(
    cfg: &crate::config::BrokerConfig,
    auth: &mut Auth,
    req: &SaslHandshakeRequest,
) -> (SaslHandshakeResponse, bool) {
    let mechanisms = offered(cfg);
    let names: Vec<StrBytes> = mechanisms.iter().map(|m| str_bytes(m.name())).collect();
    let resp = SaslHandshakeResponse::default().with_mechanisms(names);
    match auth {
        Auth::Handshake | Auth::Done { .. } => match mechanisms
            .into_iter()
            .find(|m| m.name() == req.mechanism.as_str())
        {
            Some(m) => {
                *auth = Auth::Chosen(m);
                (resp, false)
            }
            None => (
                resp.with_error_code(ResponseError::UnsupportedSaslMechanism.code()),
                true,
            ),
        },
        // A listener without SASL offers no mechanism (as Kafka answers there).
        Auth::Open | Auth::Certified { .. } => (
            SaslHandshakeResponse::default()
                .with_error_code(ResponseError::IllegalSaslState.code()),
            false,
        ),
        _ => (
            resp.with_error_code(ResponseError::IllegalSaslState.code()),
            true,
        ),
    }
}

/// SaslAuthenticate: one step of the chosen mechanism. `true`: close after the answer.
/// `reauth_of`: the principal of the connection's first authentication, which a
/// re-authentication must keep.
pub async fn authenticate(
    state: &CoreState,
    auth: &mut Auth,
    reauth_of: Option<&str>,
    req: &SaslAuthenticateRequest,
    peer: &str,
) -> (SaslAuthenticateResponse, bool) {
    let cfg = &state.ctx.config;
    let now = Instant::now();
    // The session's lifetime (KIP-368): the broker's bound, and a token's own expiry.
    let session = |token_ms: Option<u64>| -> Option<u64> {
        let broker = (cfg.connections_max_reauth_ms > 0).then_some(cfg.connections_max_reauth_ms);
        match (broker, token_ms) {
            (Some(b), Some(t)) => Some(b.min(t)),
            (b, t) => b.or(t),
        }
    };
    let done = |user: &str, lifetime_ms: Option<u64>| Auth::Done {
        principal: format!("User:{user}"),
        expires_at: lifetime_ms.map(|ms| now + Duration::from_millis(ms)),
    };
    let step = std::mem::replace(auth, Auth::Handshake);
    let result: Result<(Auth, Vec<u8>), String> = match step {
        Auth::Chosen(Mechanism::Plain) => plain(state, &req.auth_bytes)
            .await
            .map(|user| (done(&user, session(None)), Vec::new())),
        Auth::Chosen(Mechanism::OAuthBearer) => bearer(cfg, &req.auth_bytes).map(|v| {
            let left_ms = v.expires_at_secs.saturating_mul(1000) - engine::clock::system_now_ms();
            let left_ms = u64::try_from(left_ms).unwrap_or(0);
            (done(&v.subject, session(Some(left_ms))), Vec::new())
        }),
        Auth::Chosen(Mechanism::Scram(m)) => scram_first(state, m, &req.auth_bytes).map(|s| {
            let msg = s.message().to_vec();
            (Auth::ScramFinal(Box::new(s)), msg)
        }),
        Auth::ScramFinal(s) => s
            .finish(&req.auth_bytes)
            .map(|(user, msg)| (done(&user, session(None)), msg)),
        other => {
            *auth = other;
            let illegal = !matches!(auth, Auth::Open | Auth::Certified { .. });
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
    let result = result.and_then(|(next, bytes)| match (&next, reauth_of) {
        (Auth::Done { principal, .. }, Some(was)) if principal != was => Err(format!(
            "re-authentication as {principal}, not {was} (KIP-368 keeps the principal)"
        )),
        (Auth::Done { principal, .. }, Some(_)) => {
            tracing::info!(%peer, %principal, "SASL re-authenticated");
            Ok((next, bytes))
        }
        _ => Ok((next, bytes)),
    });
    match result {
        Ok((next, bytes)) => {
            let mut resp = SaslAuthenticateResponse::default().with_auth_bytes(bytes.into());
            if let Auth::Done {
                principal,
                expires_at,
            } = &next
            {
                let lifetime_ms = expires_at.map_or(0, |at| (at - now).as_millis() as i64);
                tracing::debug!(%peer, %principal, lifetime_ms, "SASL authenticated");
                resp = resp.with_session_lifetime_ms(lifetime_ms);
            }
            *auth = next;
            (resp, false)
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

/// SASL/OAUTHBEARER: the client's token, validated (`oauth`).
fn bearer(cfg: &crate::config::BrokerConfig, msg: &[u8]) -> Result<oauth::Validated, String> {
    let oauth = cfg.oauth.as_ref().ok_or("OAUTHBEARER is not configured")?;
    let token = oauth::token_of(msg)?;
    oauth::validate(oauth, token, engine::clock::system_now_ms() / 1000)
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
        let a = Auth::new(SecurityProtocol::SaslPlaintext, None);
        assert!(a.admits(ApiKey::ApiVersions as i16));
        assert!(a.admits(ApiKey::SaslHandshake as i16));
        assert!(a.admits(ApiKey::SaslAuthenticate as i16));
        assert!(!a.admits(ApiKey::Metadata as i16));
        assert!(!a.admits(ApiKey::Produce as i16));
        assert!(!a.admits(crate::node_rpc::NODE_RPC_API_KEY));
        assert!(Auth::new(SecurityProtocol::Plaintext, None).admits(ApiKey::Produce as i16));
    }

    #[test]
    fn the_handshake_chooses_an_offered_mechanism() {
        let mut a = Auth::new(SecurityProtocol::SaslPlaintext, None);
        let req = SaslHandshakeRequest::default().with_mechanism(str_bytes("GSSAPI"));
        let cfg = crate::config::BrokerConfig::new(
            "/nonexistent".into(),
            "127.0.0.1:9092".parse().unwrap(),
            vec![0],
        );
        let (resp, close) = handshake(&cfg, &mut a, &req);
        assert_eq!(
            resp.error_code,
            ResponseError::UnsupportedSaslMechanism.code()
        );
        assert!(close);
        assert_eq!(resp.mechanisms.len(), MECHANISMS.len());
        let mut a = Auth::new(SecurityProtocol::SaslPlaintext, None);
        let req = SaslHandshakeRequest::default().with_mechanism(str_bytes("SCRAM-SHA-512"));
        let (resp, close) = handshake(&cfg, &mut a, &req);
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
