//! Property tests: duplicates never change findings; decoding never panics.

use std::sync::Arc;

use drift_core::classify::Rules;
use drift_core::decode::ClusterNames;
use drift_sentinel::replay::{replay, Recorded};
use proptest::prelude::*;
use serde_json::{json, Value};

use crate::scenario::*;

/// A recorded history with drifts of several classes: a hand edit of traffic, a stuck
/// generation, a config edit, and their fixes.
fn history() -> Vec<Value> {
    let mut objects: Vec<(Value, &str, &str)> = Vec::new();
    let service = service();
    objects.push((service.clone(), "add", "2023-10-09T21:40:00Z"));
    objects.push((revision(), "add", "2023-10-09T21:40:01Z"));
    objects.push((deployment(), "add", "2023-10-09T21:40:02Z"));
    let edited = changed(&service, |s| {
        s["spec"]["traffic"] = json!([{"latestRevision": true, "percent": 80}, {"revisionName": "knative-webapp-00000", "percent": 20}]);
        s["metadata"]["generation"] = json!(2);
        written_by(
            s,
            "kubectl-edit",
            "Update",
            json!({"f:spec": {"f:traffic": {}}}),
            "2023-10-09T21:41:00Z",
        );
    });
    objects.push((edited.clone(), "update", "2023-10-09T21:41:00Z"));
    let config = config_autoscaler();
    objects.push((config.clone(), "add", "2023-10-09T21:41:30Z"));
    let config_edit = changed(&config, |c| {
        c["data"]["max-scale"] = json!("3");
        written_by(
            c,
            "kubectl-edit",
            "Update",
            json!({"f:data": {"f:max-scale": {}}}),
            "2023-10-09T21:42:00Z",
        );
    });
    objects.push((config_edit, "update", "2023-10-09T21:42:00Z"));
    let caught_up = changed(&edited, |s| s["status"]["observedGeneration"] = json!(2));
    objects.push((caught_up.clone(), "update", "2023-10-09T21:52:00Z"));
    let reverted = changed(&caught_up, |s| {
        s["spec"]["traffic"] = service["spec"]["traffic"].clone();
        written_by(
            s,
            "argocd-controller",
            "Apply",
            json!({"f:spec": {"f:traffic": {}}}),
            "2023-10-09T21:55:00Z",
        );
    });
    objects.push((reverted, "update", "2023-10-09T21:55:00Z"));
    let deleted_deployment = changed(&deployment(), |_| {});
    objects.push((deleted_deployment, "delete", "2023-10-09T21:56:00Z"));
    objects
        .into_iter()
        .enumerate()
        .map(|(index, (object, verb, time))| {
            let mut event = crate::support::structured_event(&format!("h{index}"), verb, &object);
            event["time"] = json!(time);
            event
        })
        .collect()
}

fn run(events: &[Value]) -> Vec<String> {
    let recorded: Vec<Recorded> = events
        .iter()
        .enumerate()
        .map(|(index, event)| Recorded {
            origin: format!("e{index}"),
            event: event.clone(),
        })
        .collect();
    let clusters = ClusterNames {
        default: "prod".into(),
        by_source: Default::default(),
    };
    replay(&recorded, Arc::new(Rules::default()), &clusters, 3_600_000)
        .expect("history replays")
        .iter()
        .map(|transition| {
            format!(
                "{} {} {} {}/{}",
                transition.at,
                transition.drift.state.as_str(),
                transition.drift.class,
                transition.drift.kind,
                transition.drift.name
            )
        })
        .collect()
}

#[test]
fn the_history_has_findings_to_protect() {
    let lines = run(&history());
    let firing: Vec<&String> = lines
        .iter()
        .filter(|line| line.contains(" firing "))
        .collect();
    assert!(firing.len() >= 4, "{lines:#?}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn any_interleaving_of_duplicates_gives_the_same_findings(
        duplicates in proptest::collection::vec((0usize..9, 0usize..9), 0..20)
    ) {
        let original = history();
        let expected = run(&original);
        // Each duplicate (a Broker redelivery) re-sends event `which` somewhere after it was first sent.
        let mut sequence: Vec<Value> = original.clone();
        for (which, offset) in duplicates {
            let first = sequence.iter().position(|event| event["id"] == original[which]["id"]).unwrap();
            let position = (first + 1 + offset).min(sequence.len());
            sequence.insert(position, original[which].clone());
        }
        prop_assert_eq!(run(&sequence), expected);
    }

    #[test]
    fn decoding_arbitrary_bytes_never_panics(body in proptest::collection::vec(any::<u8>(), 0..512), mode in 0u8..3) {
        let mut headers = http::HeaderMap::new();
        match mode {
            0 => { headers.insert("content-type", http::HeaderValue::from_static("application/cloudevents+json")); }
            1 => { headers.insert("content-type", http::HeaderValue::from_static("application/cloudevents-batch+json")); }
            _ => {
                for (name, value) in [("ce-specversion", "1.0"), ("ce-id", "1"), ("ce-source", "/s"), ("ce-type", "dev.knative.apiserver.resource.update")] {
                    headers.insert(name, http::HeaderValue::from_static(value));
                }
            }
        }
        let clusters = ClusterNames { default: "d".into(), by_source: Default::default() };
        let _ = drift_core::decode::decode_request(&headers, &body, &clusters);
    }

    #[test]
    fn decoding_objects_with_wrong_types_never_panics(field in 0usize..8, value in prop_oneof![
        Just(json!(null)), Just(json!(1)), Just(json!("x")), Just(json!([1, 2])), Just(json!({"a": {"b": []}})), Just(json!(true))
    ]) {
        let mut object = revision();
        let paths = ["/metadata/labels", "/metadata/annotations", "/metadata/ownerReferences", "/metadata/managedFields",
                     "/metadata/generation", "/spec", "/status", "/metadata/uid"];
        if let Some(slot) = object.pointer_mut(paths[field]) {
            *slot = value;
        }
        let event = crate::support::structured_event("p", "update", &object);
        let mut headers = http::HeaderMap::new();
        headers.insert("content-type", http::HeaderValue::from_static("application/cloudevents+json"));
        let clusters = ClusterNames { default: "d".into(), by_source: Default::default() };
        if let Ok(decoded) = drift_core::decode::decode_request(&headers, &serde_json::to_vec(&event).unwrap(), &clusters) {
            // Whatever decodes must also go through the engine without a panic.
            let mut engine = drift_core::classify::Engine::new(Arc::new(Rules::default()));
            for item in &decoded {
                if let drift_core::decode::Decoded::ApiServer(event) = item {
                    engine.apply(event, 0);
                    engine.tick(10_000_000);
                }
            }
        }
    }
}
