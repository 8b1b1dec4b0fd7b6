//! Hot reload against the service as it starts: an edit made after the config was loaded, and
//! before the writer role's reload thread starts watching, is applied (it was once taken for
//! what is in force and never applied).

use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edit_made_while_the_service_starts_is_applied() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.yaml");
    let text = format!(
        "store:\n  path: {}\nchannels:\n  - {{name: log, type: log}}\nrules:\n  classes:\n    config_drift:\n      enabled: true\n",
        dir.path().join("reload.db").display()
    );
    std::fs::write(&path, &text).unwrap();
    let (config, watched) = drift_sentinel::reload::Watched::load(path.clone()).unwrap();
    // The edit lands after the load, before the service (and so its reload thread) starts.
    std::fs::write(&path, text.replace("enabled: true", "enabled: false")).unwrap();
    let server = drift_sentinel::app::start(config, Some(watched), "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let client = reqwest::Client::new();
    let url = format!("http://{}/metrics", server.addr);
    let reloads = || async {
        let body = client.get(&url).send().await.unwrap().text().await.unwrap();
        body.lines()
            .find_map(|line| line.strip_prefix("drift_sentinel_config_reloads_total "))
            .map(|value| value.trim().to_string())
    };
    let mut seen = None;
    // The thread polls every second: a few polls.
    for _ in 0..100 {
        seen = reloads().await;
        if seen.as_deref() == Some("1") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    server.shutdown.cancel();
    let _ = tokio::time::timeout(Duration::from_secs(10), server.done).await;
    assert_eq!(
        seen.as_deref(),
        Some("1"),
        "the edit made while starting was not applied"
    );
}
