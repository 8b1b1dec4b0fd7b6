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
    let (fast, status) = parse(&text, scanned, None).expect("the common shape goes the fast way");
    let mut general = parse_general(&text, scanned).unwrap();
    let general_status = std::mem::take(&mut general.status);
    assert_eq!(fast, general);
    // The fast path's status is a tree borrowed from the text; both keep the same text.
    let status: Value = serde_json::from_str(&status.unwrap().to_string()).unwrap();
    assert_eq!(status, general_status);
    for key in [
        "notAfter",
        "failedIssuanceAttempts",
        "lastFailureTime",
        "conditions",
    ] {
        assert_eq!(status[key], object["status"][key], "{key}");
    }
    // What no class reads stays out of the state.
    assert!(status.get("renewalTime").is_none());
    let kept = crate::decode::parse_object_text(&text).unwrap().kept_status;
    assert!(kept.text().contains(r#""notAfter":"#), "{}", kept.text());
    assert!(!kept.text().contains("renewalTime"), "{}", kept.text());
}
