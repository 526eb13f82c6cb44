//! Certificates for the TLS tests, made with `openssl`: a test CA, a server certificate and
//! client certificates it signed.

use std::time::Duration;

use super::run_ok;

/// A test CA and a server certificate it signed for 127.0.0.1 and localhost (openssl):
/// (ca.pem, server.pem, server.key) in `dir`.
pub fn make_certs(dir: &std::path::Path) -> (String, String, String) {
    let p = |n: &str| dir.join(n).display().to_string();
    std::fs::write(
        dir.join("ext.cnf"),
        "subjectAltName=IP:127.0.0.1,DNS:localhost\n",
    )
    .unwrap();
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    for args in [
        [
            &["req", "-x509"][..],
            &ec,
            &[
                "-keyout",
                &p("ca.key"),
                "-out",
                &p("ca.pem"),
                "-days",
                "2",
                "-subj",
                "/CN=ringlog-test-ca",
            ],
        ]
        .concat(),
        [
            &["req"][..],
            &ec,
            &[
                "-keyout",
                &p("server.key"),
                "-out",
                &p("server.csr"),
                "-subj",
                "/CN=localhost",
            ],
        ]
        .concat(),
        vec![
            "x509",
            "-req",
            "-in",
            &p("server.csr"),
            "-CA",
            &p("ca.pem"),
            "-CAkey",
            &p("ca.key"),
            "-CAcreateserial",
            "-out",
            &p("server.pem"),
            "-days",
            "2",
            "-extfile",
            &p("ext.cnf"),
        ],
    ] {
        let mut c = std::process::Command::new("openssl");
        c.args(&args);
        run_ok(c, None, Duration::from_secs(60));
    }
    (p("ca.pem"), p("server.pem"), p("server.key"))
}

/// A client certificate of the test CA for `cn` (its subject `O=ringlog, OU=eng, CN=cn`):
/// `dir/cn.pem` and `dir/cn.key`.
pub fn make_client_cert(dir: &std::path::Path, cn: &str) {
    let p = |n: &str| dir.join(n).display().to_string();
    let subj = format!("/O=ringlog/OU=eng/CN={cn}");
    // An X.509 v3 certificate (webpki takes no v1) for client authentication.
    std::fs::write(dir.join("client.cnf"), "extendedKeyUsage=clientAuth\n").unwrap();
    for args in [
        vec![
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            &p(&format!("{cn}.key")),
            "-out",
            &p(&format!("{cn}.csr")),
            "-subj",
            &subj,
        ],
        vec![
            "x509",
            "-req",
            "-in",
            &p(&format!("{cn}.csr")),
            "-CA",
            &p("ca.pem"),
            "-CAkey",
            &p("ca.key"),
            "-CAcreateserial",
            "-out",
            &p(&format!("{cn}.pem")),
            "-days",
            "2",
            "-extfile",
            &p("client.cnf"),
        ],
    ] {
        let mut c = std::process::Command::new("openssl");
        c.args(&args);
        run_ok(c, None, Duration::from_secs(60));
    }
}
