//! SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677, Kafka's KIP-84), the server side:
//! the credential a password becomes (`credential`), and one authentication's two steps
//! (`ServerFirst::start`, then `ServerFirst::finish`). The primitives (HMAC, SHA-2, PBKDF2,
//! constant-time comparison) come from RustCrypto; only the message syntax is ours.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use hmac::{Hmac, Mac};
use meta::{ScramCredential, ScramMechanism};
use sha2::{Digest, Sha256, Sha512};
use subtle::ConstantTimeEq;

/// Kafka's bounds on a SCRAM credential's iteration count.
pub const MIN_ITERATIONS: u32 = 4_096;
pub const MAX_ITERATIONS: u32 = 16_384;
/// The longest client message a SCRAM step reads.
pub const MAX_SCRAM_MESSAGE_BYTES: usize = 4_096;
/// Random bytes in a server nonce (before base64).
const SERVER_NONCE_BYTES: usize = 24;

fn hmac(mech: ScramMechanism, key: &[u8], msg: &[u8]) -> Vec<u8> {
    match mech {
        ScramMechanism::Sha256 => {
            let mut m = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key length");
            m.update(msg);
            m.finalize().into_bytes().to_vec()
        }
        ScramMechanism::Sha512 => {
            let mut m = Hmac::<Sha512>::new_from_slice(key).expect("HMAC takes any key length");
            m.update(msg);
            m.finalize().into_bytes().to_vec()
        }
    }
}

fn hash(mech: ScramMechanism, msg: &[u8]) -> Vec<u8> {
    match mech {
        ScramMechanism::Sha256 => Sha256::digest(msg).to_vec(),
        ScramMechanism::Sha512 => Sha512::digest(msg).to_vec(),
    }
}

/// `Hi(password, salt, iterations)`: the salted password.
pub fn salted_password(
    mech: ScramMechanism,
    password: &[u8],
    salt: &[u8],
    iterations: u32,
) -> Vec<u8> {
    match mech {
        ScramMechanism::Sha256 => {
            let mut out = [0u8; 32];
            pbkdf2::pbkdf2_hmac::<Sha256>(password, salt, iterations, &mut out);
            out.to_vec()
        }
        ScramMechanism::Sha512 => {
            let mut out = [0u8; 64];
            pbkdf2::pbkdf2_hmac::<Sha512>(password, salt, iterations, &mut out);
            out.to_vec()
        }
    }
}

/// The stored credential of a salted password (what AlterUserScramCredentials carries).
pub fn credential_of_salted(
    mech: ScramMechanism,
    salted: &[u8],
    salt: Vec<u8>,
    iterations: u32,
) -> ScramCredential {
    let client_key = hmac(mech, salted, b"Client Key");
    ScramCredential {
        salt,
        stored_key: hash(mech, &client_key),
        server_key: hmac(mech, salted, b"Server Key"),
        iterations,
    }
}

/// Whether `password` is the one `cred` was made from (SASL/PLAIN against the SCRAM store).
pub fn password_matches(mech: ScramMechanism, cred: &ScramCredential, password: &[u8]) -> bool {
    let salted = salted_password(mech, password, &cred.salt, cred.iterations);
    let stored = hash(mech, &hmac(mech, &salted, b"Client Key"));
    bool::from(stored.ct_eq(&cred.stored_key))
}

/// A SASL name (`=2C` for ',', `=3D` for '='), decoded; `None` if malformed.
fn sasl_name(s: &str) -> Option<String> {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(at) = rest.find('=') {
        out.push_str(&rest[..at]);
        match rest.get(at..at + 3) {
            Some("=2C") => out.push(','),
            Some("=3D") => out.push('='),
            _ => return None,
        }
        rest = &rest[at + 3..];
    }
    out.push_str(rest);
    (!out.is_empty()).then_some(out)
}

/// An attribute `k=value` of a SCRAM message.
fn attr(part: Option<&str>, k: char) -> Result<&str, String> {
    let p = part.ok_or_else(|| format!("missing the {k}= attribute"))?;
    p.strip_prefix(k)
        .and_then(|r| r.strip_prefix('='))
        .ok_or_else(|| format!("expected {k}=, found {p:?}"))
}

/// The client-first message, parsed: its user and nonce.
#[derive(Debug, PartialEq, Eq)]
pub struct ClientFirst {
    pub user: String,
    nonce: String,
    /// `client-first-message-bare` (for the AuthMessage).
    bare: String,
    /// The GS2 header (for the channel binding check).
    gs2_header: String,
}

impl ClientFirst {
    pub fn parse(msg: &[u8]) -> Result<ClientFirst, String> {
        if msg.len() > MAX_SCRAM_MESSAGE_BYTES {
            return Err(format!("client-first message of {} bytes", msg.len()));
        }
        let s = std::str::from_utf8(msg).map_err(|_| "client-first message is not UTF-8")?;
        // gs2-header: "n" or "y" (no channel binding), then the authzid, then the bare part.
        let mut it = s.splitn(3, ',');
        let cb = it.next().unwrap_or("");
        if cb != "n" && cb != "y" {
            return Err(format!(
                "channel binding {cb:?} is not supported (want n or y)"
            ));
        }
        let authzid = it.next().ok_or("missing authzid")?;
        let bare = it.next().ok_or("missing client-first-message-bare")?;
        let mut parts = bare.split(',');
        let user = sasl_name(attr(parts.next(), 'n')?).ok_or("malformed user name")?;
        let nonce = attr(parts.next(), 'r')?;
        if nonce.is_empty()
            || !nonce
                .bytes()
                .all(|b| (0x21..=0x7e).contains(&b) && b != b',')
        {
            return Err("malformed client nonce".into());
        }
        if !authzid.is_empty() {
            let z = authzid
                .strip_prefix("a=")
                .and_then(sasl_name)
                .ok_or("malformed authzid")?;
            if z != user {
                return Err(format!("authzid {z:?} differs from the user {user:?}"));
            }
        }
        Ok(ClientFirst {
            user,
            nonce: nonce.to_string(),
            bare: bare.to_string(),
            gs2_header: format!("{cb},{authzid},"),
        })
    }
}

/// The server's state between its first message and the client's final one.
pub struct ServerFirst {
    mech: ScramMechanism,
    user: String,
    cred: ScramCredential,
    client_first_bare: String,
    gs2_header: String,
    nonce: String,
    message: String,
}

impl ServerFirst {
    /// Answers `first` for the user's credential `cred` with the server-first message;
    /// `server_nonce` is fresh randomness (base64 of it joins the client's nonce).
    pub fn start(
        mech: ScramMechanism,
        first: ClientFirst,
        cred: ScramCredential,
        server_nonce: &[u8; SERVER_NONCE_BYTES],
    ) -> ServerFirst {
        Self::with_nonce_suffix(mech, first, cred, &B64.encode(server_nonce))
    }

    /// `start` with the text the server's nonce adds to the client's given as is.
    fn with_nonce_suffix(
        mech: ScramMechanism,
        first: ClientFirst,
        cred: ScramCredential,
        suffix: &str,
    ) -> ServerFirst {
        let nonce = format!("{}{suffix}", first.nonce);
        let message = format!(
            "r={nonce},s={},i={}",
            B64.encode(&cred.salt),
            cred.iterations
        );
        ServerFirst {
            mech,
            user: first.user,
            cred,
            client_first_bare: first.bare,
            gs2_header: first.gs2_header,
            nonce,
            message,
        }
    }

    pub fn message(&self) -> &[u8] {
        self.message.as_bytes()
    }

    /// Checks the client-final message; returns the user and the server-final message.
    pub fn finish(self, msg: &[u8]) -> Result<(String, Vec<u8>), String> {
        if msg.len() > MAX_SCRAM_MESSAGE_BYTES {
            return Err(format!("client-final message of {} bytes", msg.len()));
        }
        let s = std::str::from_utf8(msg).map_err(|_| "client-final message is not UTF-8")?;
        let (without_proof, proof) = s
            .rsplit_once(",p=")
            .ok_or("client-final message without a proof")?;
        let mut parts = without_proof.split(',');
        let binding = B64
            .decode(attr(parts.next(), 'c')?)
            .map_err(|_| "channel binding is not base64")?;
        if binding != self.gs2_header.as_bytes() {
            return Err("channel binding differs from the client-first message's".into());
        }
        if attr(parts.next(), 'r')? != self.nonce {
            return Err("nonce differs from the server's".into());
        }
        let proof = B64.decode(proof).map_err(|_| "proof is not base64")?;
        let auth_message = format!(
            "{},{},{without_proof}",
            self.client_first_bare, self.message
        );
        let client_signature = hmac(self.mech, &self.cred.stored_key, auth_message.as_bytes());
        if proof.len() != client_signature.len() {
            return Err("authentication failed: invalid credentials".into());
        }
        let client_key: Vec<u8> = proof
            .iter()
            .zip(&client_signature)
            .map(|(a, b)| a ^ b)
            .collect();
        if !bool::from(hash(self.mech, &client_key).ct_eq(&self.cred.stored_key)) {
            return Err("authentication failed: invalid credentials".into());
        }
        let server_signature = hmac(self.mech, &self.cred.server_key, auth_message.as_bytes());
        Ok((
            self.user,
            format!("v={}", B64.encode(server_signature)).into_bytes(),
        ))
    }
}

/// Fresh randomness for a server nonce.
pub fn server_nonce() -> [u8; SERVER_NONCE_BYTES] {
    let mut out = [0u8; SERVER_NONCE_BYTES];
    for chunk in out.chunks_mut(8) {
        let r = meta::state::random_u64().to_le_bytes();
        chunk.copy_from_slice(&r[..chunk.len()]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 7677's SCRAM-SHA-256 exchange, verbatim.
    #[test]
    fn rfc7677_exchange() {
        let mech = ScramMechanism::Sha256;
        let salt = B64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
        let cred = credential_of_salted(
            mech,
            &salted_password(mech, b"pencil", &salt, 4096),
            salt,
            4096,
        );
        let first = ClientFirst::parse(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO").unwrap();
        assert_eq!(first.user, "user");
        // The RFC's server nonce suffix, as our base64 of some bytes would not give it: given
        // as is instead of through `start`.
        let server =
            ServerFirst::with_nonce_suffix(mech, first, cred, "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0");
        assert_eq!(
            std::str::from_utf8(server.message()).unwrap(),
            "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
        );
        let (user, last) = server
            .finish(b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
            .unwrap();
        assert_eq!(user, "user");
        assert_eq!(
            String::from_utf8(last).unwrap(),
            "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
        );
    }

    #[test]
    fn wrong_proofs_nonces_and_names_are_refused() {
        let mech = ScramMechanism::Sha512;
        let salt = b"salt-of-alice".to_vec();
        let cred = credential_of_salted(
            mech,
            &salted_password(mech, b"secret", &salt, 4096),
            salt,
            4096,
        );
        assert!(password_matches(mech, &cred, b"secret"));
        assert!(!password_matches(mech, &cred, b"Secret"));
        let first = ClientFirst::parse(b"n,,n=al=3Dice=2C,r=abc").unwrap();
        assert_eq!(first.user, "al=ice,");
        let s = ServerFirst::start(mech, first, cred, &[7; SERVER_NONCE_BYTES]);
        let nonce = s.nonce.clone();
        let bad_proof = format!("c=biws,r={nonce},p={}", B64.encode([0u8; 64]));
        assert!(s
            .finish(bad_proof.as_bytes())
            .unwrap_err()
            .contains("invalid credentials"));
        for bad in [
            &b"p,,n=a,r=x"[..],
            b"n,,n=a",
            b"n,,n=a=ZZ,r=x",
            b"n,a=b,n=a,r=x",
            b"\xff",
        ] {
            assert!(ClientFirst::parse(bad).is_err(), "{bad:?}");
        }
    }
}
