//! TLS listeners (issue #19): one rustls server configuration (ring's primitives, TLS 1.2 and
//! 1.3) made at start from PEM files and shared by every core; each connection's TLS state
//! lives in its own task on the core that accepted it (`conn::serve_admitted`).
//!
//! Client certificates (Kafka's `ssl.client.auth`): with a client CA the listener asks for
//! (or requires) a certificate that CA signed; the certificate's subject, in RFC 2253 form as
//! Kafka writes it (`CN=alice,OU=eng,O=org`), mapped by the `ssl.principal.mapping.rules`
//! given (`RULE:pattern/replacement/[LU]`, `DEFAULT`), is the connection's principal on an SSL
//! listener (`User:<mapped>`).

use std::path::Path;
use std::sync::Arc;

use futures_rustls::rustls::{self, ServerConfig};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// The server configuration of a TLS listener: the certificate chain in `cert` (PEM, the
/// leaf first) and its private key in `key` (PEM: PKCS#8, PKCS#1 or SEC1). Errors name the
/// file and what is wrong with it.
/// Whether an SSL listener asks its clients for a certificate (Kafka's `ssl.client.auth`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientAuth {
    /// A client without a certificate is refused.
    Required,
    /// A client may present one (else its principal is ANONYMOUS).
    Requested,
}

pub fn server_config(
    cert: &Path,
    key: &Path,
    client_ca: Option<(&Path, ClientAuth)>,
) -> Result<Arc<ServerConfig>, String> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .map_err(|e| format!("--tls-cert {}: {e}", cert.display()))?
        .collect::<Result<_, _>>()
        .map_err(|e| format!("--tls-cert {}: {e}", cert.display()))?;
    if certs.is_empty() {
        return Err(format!(
            "--tls-cert {}: no PEM certificate in it",
            cert.display()
        ));
    }
    let key = PrivateKeyDer::from_pem_file(key)
        .map_err(|e| format!("--tls-key {}: {e}", key.display()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS protocol versions: {e}"))?;
    let builder = match client_ca {
        None => builder.with_no_client_auth(),
        Some((ca, auth)) => {
            let mut roots = rustls::RootCertStore::empty();
            for c in CertificateDer::pem_file_iter(ca)
                .map_err(|e| format!("--tls-client-ca {}: {e}", ca.display()))?
            {
                let c = c.map_err(|e| format!("--tls-client-ca {}: {e}", ca.display()))?;
                roots
                    .add(c)
                    .map_err(|e| format!("--tls-client-ca {}: {e}", ca.display()))?;
            }
            if roots.is_empty() {
                return Err(format!(
                    "--tls-client-ca {}: no PEM certificate in it",
                    ca.display()
                ));
            }
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                Arc::new(roots),
                provider,
            );
            let verifier = match auth {
                ClientAuth::Required => verifier,
                ClientAuth::Requested => verifier.allow_unauthenticated(),
            };
            let verifier = verifier
                .build()
                .map_err(|e| format!("--tls-client-ca {}: {e}", ca.display()))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let config = builder
        .with_single_cert(certs, key)
        .map_err(|e| format!("--tls-cert/--tls-key do not make a TLS identity: {e}"))?;
    Ok(Arc::new(config))
}

/// The most bytes of a certificate read for its subject.
const MAX_CERT_BYTES: usize = 64 * 1024;

/// One DER element: (tag, contents, the rest after it).
fn der(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (first as usize, rest)
    } else {
        let n = (first & 0x7f) as usize;
        if n == 0 || n > 3 || rest.len() < n {
            return None;
        }
        let len = rest[..n].iter().fold(0usize, |a, b| (a << 8) | *b as usize);
        (len, &rest[n..])
    };
    (rest.len() >= len).then(|| (tag, &rest[..len], &rest[len..]))
}

/// An OID's dotted form.
fn oid(bytes: &[u8]) -> String {
    let mut parts: Vec<u64> = Vec::new();
    let mut v = 0u64;
    for b in bytes {
        v = (v << 7) | (b & 0x7f) as u64;
        if b & 0x80 == 0 {
            if parts.is_empty() {
                // The first subidentifier holds the first two arcs: 40 * a + b, a at most 2.
                let first = (v / 40).min(2);
                parts.push(first);
                parts.push(v - first * 40);
            } else {
                parts.push(v);
            }
            v = 0;
        }
    }
    parts
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(".")
}

/// An attribute value as RFC 2253 writes it: known string types as text (special characters
/// escaped), anything else as `#` and its DER in hex.
fn attribute_value(tag: u8, whole: &[u8], content: &[u8]) -> String {
    let text = match tag {
        0x0c | 0x13 | 0x16 | 0x14 => std::str::from_utf8(content).ok().map(str::to_string),
        0x1e => {
            let units: Vec<u16> = content
                .chunks_exact(2)
                .map(|c| u16::from_be_bytes([c[0], c[1]]))
                .collect();
            String::from_utf16(&units).ok()
        }
        _ => None,
    };
    match text {
        Some(t) => {
            let mut out = String::with_capacity(t.len());
            for (i, ch) in t.chars().enumerate() {
                let special = matches!(ch, ',' | '+' | '"' | '\\' | '<' | '>' | ';' | '=')
                    || (i == 0 && (ch == '#' || ch == ' '))
                    || (i == t.chars().count() - 1 && ch == ' ');
                if special {
                    out.push('\\');
                }
                out.push(ch);
            }
            out
        }
        None => format!(
            "#{}",
            whole.iter().map(|b| format!("{b:02x}")).collect::<String>()
        ),
    }
}

/// The subject of a DER certificate in RFC 2253 form (as Java's `X500Principal.getName()`
/// writes it, Kafka's default SSL principal): the last RDN first.
pub fn subject_dn(cert: &[u8]) -> Option<String> {
    if cert.len() > MAX_CERT_BYTES {
        return None;
    }
    let (0x30, cert, _) = der(cert)? else {
        return None;
    };
    let (0x30, mut tbs, _) = der(cert)? else {
        return None;
    };
    // [0] version (optional), serial, signature algorithm, issuer, validity, subject.
    if tbs.first() == Some(&0xa0) {
        tbs = der(tbs)?.2;
    }
    for _ in 0..4 {
        tbs = der(tbs)?.2;
    }
    let (0x30, mut name, _) = der(tbs)? else {
        return None;
    };
    let mut rdns = Vec::new();
    while !name.is_empty() {
        let (tag, mut set, rest) = der(name)?;
        if tag != 0x31 {
            return None;
        }
        name = rest;
        let mut parts = Vec::new();
        while !set.is_empty() {
            let (0x30, atv, rest) = der(set)? else {
                return None;
            };
            set = rest;
            let (0x06, id, value) = der(atv)? else {
                return None;
            };
            let (tag, content, _) = der(value)?;
            let key = match oid(id).as_str() {
                "2.5.4.3" => "CN".to_string(),
                "2.5.4.7" => "L".to_string(),
                "2.5.4.8" => "ST".to_string(),
                "2.5.4.10" => "O".to_string(),
                "2.5.4.11" => "OU".to_string(),
                "2.5.4.6" => "C".to_string(),
                "2.5.4.9" => "STREET".to_string(),
                "0.9.2342.19200300.100.1.25" => "DC".to_string(),
                "0.9.2342.19200300.100.1.1" => "UID".to_string(),
                other => other.to_string(),
            };
            parts.push(format!("{key}={}", attribute_value(tag, value, content)));
        }
        rdns.push(parts.join("+"));
    }
    rdns.reverse();
    Some(rdns.join(","))
}

/// One of Kafka's `ssl.principal.mapping.rules`: `DEFAULT` (the whole name) or
/// `RULE:pattern/replacement/` with an optional `L` or `U` (lower or upper case).
#[derive(Clone, Debug)]
pub enum PrincipalRule {
    Default,
    Rule {
        pattern: regex::Regex,
        replacement: String,
        case: Option<char>,
    },
}

impl PrincipalRule {
    pub fn parse(rule: &str) -> Result<PrincipalRule, String> {
        let rule = rule.trim();
        if rule == "DEFAULT" {
            return Ok(PrincipalRule::Default);
        }
        let bad = || {
            format!(
                "ssl principal mapping rule {rule:?}: expected DEFAULT or RULE:pattern/replacement/[LU]"
            )
        };
        let body = rule.strip_prefix("RULE:").ok_or_else(bad)?;
        let (body, case) = match body.chars().last() {
            Some(c @ ('L' | 'U')) => (&body[..body.len() - 1], Some(c)),
            _ => (body, None),
        };
        let body = body.strip_suffix('/').ok_or_else(bad)?;
        let (pattern, replacement) = body.rsplit_once('/').ok_or_else(bad)?;
        let pattern = regex::Regex::new(pattern).map_err(|e| format!("{}: {e}", bad()))?;
        Ok(PrincipalRule::Rule {
            pattern,
            replacement: replacement.to_string(),
            case,
        })
    }

    /// The principal name for `dn`, if this rule matches it.
    fn apply(&self, dn: &str) -> Option<String> {
        match self {
            PrincipalRule::Default => Some(dn.to_string()),
            PrincipalRule::Rule {
                pattern,
                replacement,
                case,
            } => {
                let caps = pattern.captures(dn)?;
                if caps.get(0).map(|m| m.as_str()) != Some(dn) {
                    return None;
                }
                let mut out = String::new();
                caps.expand(replacement, &mut out);
                Some(match case {
                    Some('L') => out.to_lowercase(),
                    Some('U') => out.to_uppercase(),
                    _ => out,
                })
            }
        }
    }
}

/// The principal name of a client certificate's subject `dn`: the first rule that matches
/// (none given: `DEFAULT`; none matches: the whole name, as Kafka's DEFAULT).
pub fn principal_of(rules: &[PrincipalRule], dn: &str) -> String {
    rules
        .iter()
        .find_map(|r| r.apply(dn))
        .unwrap_or_else(|| dn.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mapping_rules_as_kafka_writes_them() {
        let rules = [
            PrincipalRule::parse(r"RULE:^CN=([^,]*),OU=eng,.*$/$1/L").unwrap(),
            PrincipalRule::parse("DEFAULT").unwrap(),
        ];
        assert_eq!(principal_of(&rules, "CN=Alice,OU=eng,O=x"), "alice");
        assert_eq!(
            principal_of(&rules, "CN=bob,OU=ops,O=x"),
            "CN=bob,OU=ops,O=x"
        );
        assert!(PrincipalRule::parse("RULE:nope").is_err());
        assert!(PrincipalRule::parse("RULE:(/x/").is_err());
    }

    #[test]
    fn truncated_or_garbage_certificates_have_no_subject() {
        for bad in [
            &b""[..],
            b"\x30",
            b"\x30\x05\x30\x03\x02\x01\x01",
            &[0x30, 0x84, 1, 2, 3, 4],
        ] {
            assert_eq!(subject_dn(bad), None);
        }
    }
}
