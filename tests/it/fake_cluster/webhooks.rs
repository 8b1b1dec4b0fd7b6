//! Knative's validating webhooks, for the edits drills could try that a real cluster refuses
//! (so a catalog that only passes against the fake is caught here): Serving's scale bounds
//! (`autoscaling.knative.dev/min-scale` above a non-zero `max-scale`, knative/serving
//! `pkg/apis/autoscaling/annotation_validation.go`) and a ConfigMap's `_example` block once it
//! carries `knative.dev/example-checksum` (knative/pkg `configmap/example.go`). A denial is the
//! API server's `400` for a webhook that denied without a code (`ToStatusErr`).

use serde_json::Value;

/// Why Knative's webhooks deny `object` (as `current` becomes it), if they do.
pub(super) fn denied(current: Option<&Value>, object: &Value) -> Option<String> {
    let kind = object["kind"].as_str().unwrap_or_default();
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    if kind == "Service" && api_version.starts_with("serving.knative.dev/") {
        let annotations = &object["spec"]["template"]["metadata"]["annotations"];
        let scale = |key: &str| {
            annotations
                .get(format!("autoscaling.knative.dev/{key}"))
                .and_then(Value::as_str)
                .and_then(|text| text.parse::<i64>().ok())
        };
        if let (Some(min), Some(max)) = (scale("min-scale"), scale("max-scale")) {
            if max != 0 && min > max {
                return Some(format!(
                    "admission webhook \"validation.webhook.serving.knative.dev\" denied the \
                     request: validation failed: max-scale={max} is less than min-scale={min}: \
                     spec.template.metadata.annotations[autoscaling.knative.dev/max-scale]"
                ));
            }
        }
    }
    if kind == "ConfigMap" && api_version == "v1" {
        let checksummed = object["metadata"]["annotations"]
            .get("knative.dev/example-checksum")
            .is_some();
        let example = |object: &Value| object["data"].get("_example").cloned();
        if checksummed && current.is_some_and(|current| example(current) != example(object)) {
            return Some(
                "admission webhook \"config.webhook.serving.knative.dev\" denied the request: \
                 validation failed: the update modifies a key in \"_example\" which is probably \
                 not what you want. Instead, copy the respective setting to the top-level of the \
                 ConfigMap, directly below \"data\""
                    .to_string(),
            );
        }
    }
    None
}
