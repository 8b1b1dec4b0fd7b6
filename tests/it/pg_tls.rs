//! The PostgreSQL store over TLS (rustls on ring, no OpenSSL in the binary): a real server with
//! `ssl=on` and a certificate from a private CA made here with the `openssl` command. The store
//! connects with `sslmode=require` and `store.caFile`, verifies the certificate and its host
//! name, and refuses a server it cannot verify.

use std::path::Path;
use std::process::Command;

use drift_store::postgres::{open, Target};
use drift_store::{Batch, EventKey};

use crate::pg::PgServer;

/// Runs `openssl` with `args` in `dir`; panics with its output when it fails.
fn openssl(dir: &Path, args: &[&str]) {
    let output = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("the openssl command (Debian's openssl package) runs");
    assert!(
        output.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// A CA, and a server certificate it signed for `localhost` only.
fn certificates(dir: &Path) {
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=drift-sentinel test CA",
            "-keyout",
            "ca.key",
            "-out",
            "ca.crt",
        ],
    );
    openssl(
        dir,
        &[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            "/CN=localhost",
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
        ],
    );
    std::fs::write(dir.join("san.ext"), "subjectAltName=DNS:localhost\n").unwrap();
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            "san.ext",
            "-out",
            "server.crt",
        ],
    );
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn the_store_speaks_tls_to_a_server_it_can_verify_and_refuses_one_it_cannot() {
    let certs = tempfile::tempdir().unwrap();
    certificates(certs.path());
    let port = free_port();
    let server = PgServer::start_tls(
        port,
        &certs.path().join("server.crt"),
        &certs.path().join("server.key"),
    );
    let name = PgServer::name_of(&server.database()).to_string();
    let ca = certs.path().join("ca.crt");
    let url =
        |host: &str, mode: &str| format!("postgres://postgres@{host}:{port}/{name}?sslmode={mode}");

    // Verified: the private CA from store.caFile, the name in the certificate.
    let target = Target::new(&url("localhost", "require"), None, Some(&ca)).unwrap();
    let mut opened = open(&target).unwrap();
    opened
        .writer
        .commit(&Batch {
            events: vec![(
                EventKey {
                    sent_at: 1_000,
                    source: "tls".into(),
                    id: "1".into(),
                },
                1_000,
            )],
            ..Batch::default()
        })
        .unwrap();
    // The server says the store's connections are encrypted.
    let encrypted = server.psql(
        &name,
        &format!(
            "SELECT count(*) FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid)
             WHERE s.ssl AND a.datname = '{name}' AND a.application_name = 'drift-sentinel'"
        ),
    );
    assert!(encrypted.parse::<u32>().unwrap() >= 3, "{encrypted}");
    let plain = server.psql(
        &name,
        &format!(
            "SELECT count(*) FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid)
             WHERE NOT s.ssl AND a.datname = '{name}' AND a.application_name = 'drift-sentinel'"
        ),
    );
    assert_eq!(plain, "0");
    drop(opened);

    // Not verifiable: the CA is not trusted without store.caFile ...
    let error = open(&Target::new(&url("localhost", "require"), None, None).unwrap())
        .err()
        .expect("an unknown CA is refused")
        .to_string();
    assert!(error.to_lowercase().contains("certificate"), "{error}");
    // ... and a host name the certificate does not name is refused even with it.
    let error = open(&Target::new(&url("127.0.0.1", "require"), None, Some(&ca)).unwrap())
        .err()
        .expect("a name mismatch is refused")
        .to_string();
    assert!(error.to_lowercase().contains("certificate"), "{error}");
    // The errors name neither a password nor the URL.
    assert!(!error.contains("postgres://"), "{error}");
}
