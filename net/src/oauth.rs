//! SASL/OAUTHBEARER (RFC 7628, Kafka's KIP-255 and KIP-768 validation): the client sends a
//! JSON Web Token; the broker checks it against the keys of a configured JWKS file (RS256
//! and ES256 signatures, verified by `ring`) or, when unsecured tokens are allowed (tests and
//! development, as Kafka's unsecured validator), takes an `alg: none` token as it is. The
//! token's `sub` claim is the principal (`User:<sub>`); its `exp` bounds the session
//! (KIP-368: the client re-authenticates before it).

use std::path::Path;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use ring::signature::{self, UnparsedPublicKey};

/// The longest OAUTHBEARER client message (and so token) read, in bytes.
pub const MAX_OAUTH_MESSAGE_BYTES: usize = 16 * 1024;
/// The most keys a JWKS file may hold.
pub const MAX_JWKS_KEYS: usize = 64;
/// The largest JWKS file read, in bytes.
pub const MAX_JWKS_FILE_BYTES: u64 = 1024 * 1024;
/// How far the broker's clock and a token issuer's may disagree, in seconds (`exp`, `nbf`).
pub const OAUTH_CLOCK_SKEW_SECS: i64 = 30;

/// How OAUTHBEARER tokens are validated (`--oauth-jwks-file`, `--oauth-allow-unsecured-tokens`,
/// `--oauth-audience`, `--oauth-issuer`).
#[derive(Debug, Default)]
pub struct OAuthConfig {
    pub keys: Vec<Jwk>,
    /// `alg: none` tokens are accepted (no signature: anyone can claim any principal).
    pub allow_unsecured: bool,
    /// When set, the token's `aud` must name it.
    pub audience: Option<String>,
    /// When set, the token's `iss` must be it.
    pub issuer: Option<String>,
}

/// One public key of the JWKS file.
#[derive(Debug)]
pub struct Jwk {
    pub kid: Option<String>,
    key: JwkKey,
}

#[derive(Debug)]
enum JwkKey {
    /// RS256: modulus and exponent, big-endian.
    Rsa { n: Vec<u8>, e: Vec<u8> },
    /// ES256: the uncompressed P-256 point (0x04 || x || y).
    EcP256 { point: Vec<u8> },
}

fn b64(field: &str, s: &str) -> Result<Vec<u8>, String> {
    URL_SAFE_NO_PAD
        .decode(s.trim_end_matches('='))
        .map_err(|e| format!("{field} is not base64url: {e}"))
}

/// Reads the JWKS file at `path` (`{"keys": [...]}`; RSA and P-256 EC keys, others skipped).
pub fn load_jwks(path: &Path) -> Result<Vec<Jwk>, String> {
    let what = path.display();
    let len = std::fs::metadata(path)
        .map_err(|e| format!("cannot read the JWKS file {what}: {e}"))?
        .len();
    if len > MAX_JWKS_FILE_BYTES {
        return Err(format!(
            "the JWKS file {what} is {len} bytes, over {MAX_JWKS_FILE_BYTES}"
        ));
    }
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read the JWKS file {what}: {e}"))?;
    let doc: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("the JWKS file {what}: {e}"))?;
    let keys = doc
        .get("keys")
        .and_then(|k| k.as_array())
        .ok_or_else(|| format!("the JWKS file {what} has no \"keys\" array"))?;
    if keys.len() > MAX_JWKS_KEYS {
        return Err(format!(
            "the JWKS file {what} holds {} keys, over {MAX_JWKS_KEYS}",
            keys.len()
        ));
    }
    let mut out = Vec::new();
    for k in keys {
        let field = |name: &str| k.get(name).and_then(|v| v.as_str());
        let kid = field("kid").map(str::to_string);
        let key = match (field("kty"), field("crv")) {
            (Some("RSA"), _) => JwkKey::Rsa {
                n: b64("n", field("n").ok_or("an RSA key without n")?)?,
                e: b64("e", field("e").ok_or("an RSA key without e")?)?,
            },
            (Some("EC"), Some("P-256")) => {
                let x = b64("x", field("x").ok_or("an EC key without x")?)?;
                let y = b64("y", field("y").ok_or("an EC key without y")?)?;
                if x.len() != 32 || y.len() != 32 {
                    return Err(format!(
                        "the JWKS file {what}: a P-256 key of the wrong size"
                    ));
                }
                let mut point = vec![4u8];
                point.extend_from_slice(&x);
                point.extend_from_slice(&y);
                JwkKey::EcP256 { point }
            }
            (kty, crv) => {
                tracing::warn!(?kid, ?kty, ?crv, "JWKS key of an unsupported type skipped");
                continue;
            }
        };
        out.push(Jwk { kid, key });
    }
    if out.is_empty() {
        return Err(format!("the JWKS file {what} holds no RSA or P-256 key"));
    }
    Ok(out)
}

/// The token of an OAUTHBEARER client message (`n,[a=authzid],` `\x01auth=Bearer TOKEN\x01`
/// ... `\x01\x01`).
pub fn token_of(msg: &[u8]) -> Result<&str, String> {
    if msg.len() > MAX_OAUTH_MESSAGE_BYTES {
        return Err(format!("an OAUTHBEARER message of {} bytes", msg.len()));
    }
    let text = std::str::from_utf8(msg).map_err(|_| "the OAUTHBEARER message is not UTF-8")?;
    let (gs2, rest) = text
        .split_once('\x01')
        .ok_or("malformed OAUTHBEARER message")?;
    if !gs2.starts_with("n,") && !gs2.starts_with("y,") {
        return Err("malformed OAUTHBEARER GS2 header".into());
    }
    rest.split('\x01')
        .find_map(|kv| kv.strip_prefix("auth="))
        .and_then(|a| {
            a.strip_prefix("Bearer ")
                .or_else(|| a.strip_prefix("bearer "))
        })
        .map(str::trim)
        .ok_or_else(|| "no auth=Bearer token in the OAUTHBEARER message".into())
}

/// A validated token: its principal's name (`sub`) and expiry (seconds since the epoch).
#[derive(Debug, PartialEq, Eq)]
pub struct Validated {
    pub subject: String,
    pub expires_at_secs: i64,
}

/// Checks `token` as of `now_secs` (seconds since the epoch).
pub fn validate(cfg: &OAuthConfig, token: &str, now_secs: i64) -> Result<Validated, String> {
    let mut parts = token.split('.');
    let (Some(h), Some(p), Some(sig), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err("the token is not a JWS compact token (header.payload.signature)".into());
    };
    let json = |name: &str, s: &str| -> Result<serde_json::Value, String> {
        serde_json::from_slice(&b64(name, s)?).map_err(|e| format!("the token {name}: {e}"))
    };
    let header = json("header", h)?;
    let claims = json("payload", p)?;
    let alg = header.get("alg").and_then(|a| a.as_str()).unwrap_or("");
    let kid = header.get("kid").and_then(|k| k.as_str());
    let signed = &token[..h.len() + 1 + p.len()];
    match alg {
        "none" if cfg.allow_unsecured && sig.is_empty() => {}
        "none" => return Err("an unsecured (alg none) token, and they are not allowed".into()),
        "RS256" | "ES256" => {
            let sig = b64("signature", sig)?;
            let candidates = cfg.keys.iter().filter(|k| {
                let right_type = matches!(
                    (&k.key, alg),
                    (JwkKey::Rsa { .. }, "RS256") | (JwkKey::EcP256 { .. }, "ES256")
                );
                right_type && (kid.is_none() || k.kid.as_deref() == kid)
            });
            let mut any = false;
            let mut ok = false;
            for k in candidates {
                any = true;
                ok |= match &k.key {
                    JwkKey::Rsa { n, e } => signature::RsaPublicKeyComponents { n, e }
                        .verify(
                            &signature::RSA_PKCS1_2048_8192_SHA256,
                            signed.as_bytes(),
                            &sig,
                        )
                        .is_ok(),
                    JwkKey::EcP256 { point } => {
                        UnparsedPublicKey::new(&signature::ECDSA_P256_SHA256_FIXED, point)
                            .verify(signed.as_bytes(), &sig)
                            .is_ok()
                    }
                };
            }
            if !any {
                return Err(format!("no {alg} key with kid {kid:?} in the JWKS file"));
            }
            if !ok {
                return Err("the token's signature does not verify".into());
            }
        }
        other => {
            return Err(format!(
                "unsupported token algorithm '{other}' (RS256, ES256)"
            ))
        }
    }
    let subject = claims
        .get("sub")
        .and_then(|s| s.as_str())
        .filter(|s| !s.is_empty())
        .ok_or("the token has no sub claim")?
        .to_string();
    let exp = claims
        .get("exp")
        .and_then(|e| e.as_f64())
        .ok_or("the token has no exp claim")? as i64;
    if exp + OAUTH_CLOCK_SKEW_SECS <= now_secs {
        return Err(format!("the token expired at {exp} (now {now_secs})"));
    }
    if let Some(nbf) = claims.get("nbf").and_then(|n| n.as_f64()) {
        if nbf as i64 > now_secs + OAUTH_CLOCK_SKEW_SECS {
            return Err(format!("the token is not valid before {nbf}"));
        }
    }
    if let Some(want) = &cfg.issuer {
        if claims.get("iss").and_then(|i| i.as_str()) != Some(want.as_str()) {
            return Err(format!("the token's issuer is not '{want}'"));
        }
    }
    if let Some(want) = &cfg.audience {
        let aud = claims.get("aud");
        let names = match aud {
            Some(serde_json::Value::String(s)) => s == want,
            Some(serde_json::Value::Array(a)) => a.iter().any(|v| v.as_str() == Some(want)),
            _ => false,
        };
        if !names {
            return Err(format!("the token's audience does not name '{want}'"));
        }
    }
    Ok(Validated {
        subject,
        expires_at_secs: exp,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unsecured(claims: &str) -> String {
        format!(
            "{}.{}.",
            URL_SAFE_NO_PAD.encode(r#"{"alg":"none"}"#),
            URL_SAFE_NO_PAD.encode(claims)
        )
    }

    #[test]
    fn unsecured_tokens_only_when_allowed_and_unexpired() {
        let open = OAuthConfig {
            allow_unsecured: true,
            ..OAuthConfig::default()
        };
        let t = unsecured(r#"{"sub":"alice","exp":2000,"iat":1000}"#);
        assert_eq!(
            validate(&open, &t, 1500),
            Ok(Validated {
                subject: "alice".into(),
                expires_at_secs: 2000
            })
        );
        assert!(validate(&open, &t, 2100).unwrap_err().contains("expired"));
        assert!(validate(&OAuthConfig::default(), &t, 1500)
            .unwrap_err()
            .contains("not allowed"));
        let no_sub = unsecured(r#"{"exp":2000}"#);
        assert!(validate(&open, &no_sub, 1500).unwrap_err().contains("sub"));
        let aud = OAuthConfig {
            allow_unsecured: true,
            audience: Some("ringlog".into()),
            ..OAuthConfig::default()
        };
        assert!(validate(&aud, &t, 1500).unwrap_err().contains("audience"));
        let with_aud = unsecured(r#"{"sub":"a","exp":2000,"aud":["x","ringlog"]}"#);
        assert!(validate(&aud, &with_aud, 1500).is_ok());
        // A forged signature on an unsecured header is no signature at all.
        assert!(validate(&open, &format!("{t}AAAA"), 1500).is_err());
        for garbage in ["", "a.b", "a.b.c.d", "!!.??.", "e30.e30."] {
            assert!(validate(&open, garbage, 1500).is_err(), "{garbage}");
        }
    }

    #[test]
    fn the_client_message_carries_the_token() {
        assert_eq!(
            token_of(b"n,,\x01auth=Bearer abc.def.\x01\x01"),
            Ok("abc.def.")
        );
        assert_eq!(
            token_of(b"n,a=alice,\x01host=h\x01auth=Bearer t\x01\x01"),
            Ok("t")
        );
        assert!(token_of(b"n,,\x01\x01").is_err());
        assert!(token_of(b"garbage").is_err());
        assert!(token_of(&vec![b'x'; MAX_OAUTH_MESSAGE_BYTES + 1]).is_err());
    }
}
