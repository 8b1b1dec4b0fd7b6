//! Unit tests of `relay`.

use super::*;

#[test]
fn backoff_grows_caps_and_jitters() {
    let limits = Limits {
        max_attempts: 10,
        max_age: Duration::from_secs(3600),
        min_backoff: Duration::from_secs(2),
        max_backoff: Duration::from_secs(60),
    };
    let first = backoff(&limits, 0, "row");
    assert!(first >= Duration::from_secs(1) && first <= Duration::from_secs(2));
    let later = backoff(&limits, 10, "row");
    assert!(later >= Duration::from_secs(30) && later <= Duration::from_secs(60));
    assert_eq!(backoff(&limits, 3, "row"), backoff(&limits, 3, "row"));
}
