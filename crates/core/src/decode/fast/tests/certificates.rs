//! The fast path and the level-by-level one keep a certificate's expiry alike.

use serde_json::Value;

use super::super::parse;
use crate::decode::object::parse_general;
use crate::decode::raw::scan;

/// A certificate's expiry and why its renewal fails are kept by both paths
/// (`certificate_expiring`): the cert-manager Certificate of `tests/fixtures/certificates/`
/// (the documentation's spec with the status of cert-manager issue #7895, plus the two
/// failure fields the CRD's status has).
#[test]
fn both_paths_keep_a_certificates_expiry() {
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/certificates");
    let read = |name: &str| -> Value {
        serde_saphyr::from_str(&std::fs::read_to_string(dir.join(name)).unwrap()).unwrap()
    };
    let mut object = read(
        "cert-manager-website__docs-usage-certificate__Certificate-example-com-spec-only.yaml",
    );
    let mut status = read("cert-manager-issue-7895__Certificate-status-expired-still-Ready.yaml");
    status["failedIssuanceAttempts"] = 2.into();
    status["lastFailureTime"] = "2025-07-03T14:50:04Z".into();
    object["status"] = status;
    object["metadata"]["uid"] = "u-cm".into();
    object["metadata"]["resourceVersion"] = "3".into();
    let text = object.to_string();
    let scanned = scan(&text).unwrap();
    let fast = parse(&text, scanned).expect("the common shape goes the fast way");
    assert_eq!(fast, parse_general(&text, scanned).unwrap());
    for key in [
        "notAfter",
        "failedIssuanceAttempts",
        "lastFailureTime",
        "conditions",
    ] {
        assert_eq!(fast.status[key], object["status"][key], "{key}");
    }
    // What no class reads stays out of the state.
    assert!(fast.status.get("renewalTime").is_none());
}
