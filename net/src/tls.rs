//! TLS listeners (issue #19): one rustls server configuration (ring's primitives, TLS 1.2 and
//! 1.3) made at start from PEM files and shared by every core; each connection's TLS state
//! lives in its own task on the core that accepted it (`conn::serve_admitted`).

use std::path::Path;
use std::sync::Arc;

use futures_rustls::rustls::{self, ServerConfig};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// The server configuration of a TLS listener: the certificate chain in `cert` (PEM, the
/// leaf first) and its private key in `key` (PEM: PKCS#8, PKCS#1 or SEC1). Errors name the
/// file and what is wrong with it.
pub fn server_config(cert: &Path, key: &Path) -> Result<Arc<ServerConfig>, String> {
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
    let config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS protocol versions: {e}"))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| format!("--tls-cert/--tls-key do not make a TLS identity: {e}"))?;
    Ok(Arc::new(config))
}
