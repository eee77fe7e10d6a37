//! Throwaway TLS material for test servers, made with the openssl CLI.

use std::process::Command;

use crate::require_binary;

/// Writes `ca.pem`/`ca.key` (a CA) and `server.pem`/`server.key` (for
/// 127.0.0.1 and localhost, signed by it) into `dir`.
pub fn make_certificates(dir: &std::path::Path) {
    require_binary("openssl");
    let run = |args: &[&str]| {
        let out = Command::new("openssl")
            .current_dir(dir)
            .args(args)
            .output()
            .expect("run openssl");
        assert!(
            out.status.success(),
            "openssl {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    let mut ca = vec![
        "req",
        "-x509",
        "-days",
        "2",
        "-subj",
        "/CN=lockward test CA",
    ];
    ca.extend_from_slice(&ec);
    ca.extend_from_slice(&["-keyout", "ca.key", "-out", "ca.pem"]);
    ca.extend_from_slice(&["-addext", "basicConstraints=critical,CA:TRUE"]);
    ca.extend_from_slice(&["-addext", "keyUsage=critical,keyCertSign,cRLSign"]);
    run(&ca);
    let mut csr = vec!["req", "-subj", "/CN=127.0.0.1"];
    csr.extend_from_slice(&ec);
    csr.extend_from_slice(&["-keyout", "server.key", "-out", "server.csr"]);
    run(&csr);
    std::fs::write(
        dir.join("ext.cnf"),
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n",
    )
    .expect("write ext.cnf");
    run(&[
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-days",
        "2",
        "-out",
        "server.pem",
        "-extfile",
        "ext.cnf",
    ]);
}

/// Copies the CA and the server certificate [`make_certificates`] made in
/// `from` into `to`, for a server that shares them.
pub fn copy_certificates(from: &std::path::Path, to: &std::path::Path) {
    for file in ["ca.pem", "server.pem", "server.key"] {
        std::fs::copy(from.join(file), to.join(file))
            .unwrap_or_else(|e| panic!("copy {file} from {}: {e}", from.display()));
    }
}
