"""All of Knative through the real binary: ApiServerSource events for Triggers, Brokers,
PingSources, KIngresses and the operator's CRs, sent by the CloudEvents SDK (binary mode), make
the drifts fire that the engine tests predict, visible in the API and the metrics.

Objects are the real Eventing captures (tests/fixtures/knative/eventing) and the derived states
(tests/fixtures/knative/derived, shapes and strings from Knative's sources). Graces are set to 0s
so nothing waits; resourceVersions are renumbered in sending order (one cluster's versions)."""

import copy
import json
import urllib.request

from cloudevents.core.bindings.http import to_binary_event
from cloudevents.core.v1.event import CloudEvent

from conftest import FIXTURES, Sentinel, attributes, load_yaml_fixture

RV = [20_000_000]

CONFIG = """
rules:
  classes:
    not_ready: {grace: 0s}
    event_delivery_broken: {grace: 0s}
    operator_upgrade_stuck: {grace: 0s}
    pipeline_broken: {grace: 0s}
    scale_unreachable: {grace: 0s}
"""


def fresh(obj):
    """A copy with the next resourceVersion."""
    copy_ = copy.deepcopy(obj)
    RV[0] += 1
    copy_["metadata"]["resourceVersion"] = str(RV[0])
    return copy_


def derived(name):
    return fresh(load_yaml_fixture(f"derived/{name}"))


def captured(relative, name):
    text = (FIXTURES / relative).read_text()
    listing = json.loads(text) if relative.endswith(".json") else load_yaml_fixture(relative)
    return fresh(next(item for item in listing["items"] if item["metadata"]["name"] == name))


def send(sentinel, event_id, verb, obj):
    message = to_binary_event(CloudEvent(attributes(event_id, verb, obj), obj))
    status, _, body = sentinel.post(dict(message.headers), message.body)
    assert status == 202, (status, body, sentinel.logs()[-2000:])


def get(sentinel, path):
    with urllib.request.urlopen(sentinel.url + path, timeout=10) as response:
        return json.loads(response.read())


def firing(sentinel):
    items = get(sentinel, "/api/v1/drifts?state=firing&limit=100")["items"]
    return {(item["class"], item["kind"], item["name"]): item for item in items}


def set_condition(obj, kind, status, reason, message):
    for condition in obj["status"]["conditions"]:
        if condition["type"] == kind:
            condition.update({"status": status, "reason": reason, "message": message})


def test_eventing_networking_and_operator_drifts_fire_through_the_binary(workdir):
    sentinel = Sentinel(workdir, CONFIG).start()
    try:
        # A user Trigger loses its subscriber (the Service was renamed).
        trigger = captured("eventing/redhat-developer-vscode-knative__test-eventingTree-trigger.json",
                           "example-trigger0")
        send(sentinel, "t1", "add", trigger)
        lost = fresh(trigger)
        message = 'failed to get object josh/aaa: services.serving.knative.dev "aaa" not found'
        set_condition(lost, "SubscriberResolved", "False", "Unable to get the Subscriber's URI", message)
        set_condition(lost, "Ready", "False", "Unable to get the Subscriber's URI", message)
        send(sentinel, "t2", "update", lost)

        # A Broker whose trigger channel is not ready.
        broker = captured("eventing/redhat-developer-vscode-knative__test-eventingTree-broker__BrokerList.json",
                          "example-broker1")
        send(sentinel, "b1", "add", broker)
        broken = fresh(broker)
        set_condition(broken, "TriggerChannelReady", "False", "NoAddress", "Channel does not have an address.")
        set_condition(broken, "Ready", "False", "NoAddress", "Channel does not have an address.")
        send(sentinel, "b2", "update", broken)

        # A PingSource whose sink disappears.
        send(sentinel, "p1", "add", derived("pingsource-ready.yaml"))
        send(sentinel, "p2", "update", derived("pingsource-sink-not-found.yaml"))

        # A KIngress whose load balancer never becomes ready.
        send(sentinel, "i1", "add", derived("ingress-load-balancer-not-ready.yaml"))

        # The operator asked to skip a minor version.
        send(sentinel, "o1", "add", derived("knativeserving-upgrade-not-eligible.yaml"))

        # drift-sentinel's own Trigger (k8s/'s names) loses its subscriber.
        send(sentinel, "s1", "add", derived("trigger-ready.yaml"))
        send(sentinel, "s2", "update", derived("trigger-subscriber-unresolved.yaml"))

        found = firing(sentinel)
        expected = {
            ("event_delivery_broken", "Trigger", "example-trigger0"),
            ("not_ready", "Broker", "example-broker1"),
            ("event_delivery_broken", "PingSource", "test-ping-source"),
            ("not_ready", "Ingress", "hello"),
            ("operator_upgrade_stuck", "KnativeServing", "knative-serving"),
            ("pipeline_broken", "Trigger", "drift-sentinel"),
        }
        names = {key for key in found if key[0] != "manual_edit"}
        assert names == expected, (sorted(found), sentinel.logs()[-3000:])
        trigger_drift = found[("event_delivery_broken", "Trigger", "example-trigger0")]
        assert trigger_drift["severity"] == "critical"
        assert trigger_drift["evidence"]["summary"].endswith("; subscriber Service josh/aaa")
        assert found[("not_ready", "Broker", "example-broker1")]["evidence"]["facts"]["reason"] == "NoAddress"
        own = found[("pipeline_broken", "Trigger", "drift-sentinel")]
        assert "drift-sentinel's own event path is broken" in own["evidence"]["summary"]
        # The own path's readiness is exported per part.
        ready = 'drift_sentinel_pipeline_ready{cluster="default",part="trigger"}'
        assert sentinel.metric(ready) == 0.0, sentinel.metric("drift_sentinel_pipeline_ready")
        assert "Drift state changed" in sentinel.logs()
    finally:
        assert sentinel.stop() == 0


def test_benign_eventing_and_networking_churn_fires_nothing(workdir):
    sentinel = Sentinel(workdir, CONFIG.replace("0s", "60s")).start()
    try:
        # A Broker's startup as its controller writes it, a Trigger after it.
        send(sentinel, "b1", "add", derived("broker-created.yaml"))
        send(sentinel, "b2", "update", derived("broker-startup.yaml"))
        send(sentinel, "b3", "update", derived("broker-ready.yaml"))
        send(sentinel, "t1", "add", derived("trigger-ready.yaml"))
        # A PodAutoscaler scaling up and to zero, its ServerlessService following.
        send(sentinel, "s1", "add", derived("serverlessservice-proxy-ready.yaml"))
        send(sentinel, "a1", "add", derived("podautoscaler-active.yaml"))
        send(sentinel, "a2", "update", derived("podautoscaler-scaling-up.yaml"))
        send(sentinel, "a3", "update", derived("podautoscaler-active.yaml"))
        send(sentinel, "s2", "update", derived("serverlessservice-proxy-scaled-to-zero.yaml"))
        send(sentinel, "a4", "update", derived("podautoscaler-scaled-to-zero.yaml"))
        # A KIngress re-reconciled.
        send(sentinel, "i1", "add", derived("ingress-ready.yaml"))
        send(sentinel, "i2", "update", derived("ingress-load-balancer-not-ready.yaml"))
        send(sentinel, "i3", "update", derived("ingress-ready.yaml"))
        assert firing(sentinel) == {}
        pending = get(sentinel, "/api/v1/drifts?limit=100")["items"]
        assert pending == [], pending
        assert sentinel.metric('drift_sentinel_pipeline_ready{cluster="default",part="broker"}') == 1.0
        assert sentinel.metric('drift_sentinel_pipeline_ready{cluster="default",part="trigger"}') == 1.0
    finally:
        assert sentinel.stop() == 0


def test_the_readme_demo_makes_its_four_drifts_fire(workdir):
    """examples/demo.py, as the README's quick start runs it (graces at 0s so it need not wait
    two minutes): every drift it promises fires, from Serving, Eventing and a ConfigMap."""
    import subprocess
    import sys
    from conftest import ROOT

    config = CONFIG + "    traffic_drift: {grace: 0s}\n"
    sentinel = Sentinel(workdir, config).start()
    try:
        result = subprocess.run([sys.executable, str(ROOT / "examples" / "demo.py"), "--url", sentinel.url],
                                capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stdout + result.stderr
        for line in ("[warning] manual_edit: Service/a-serverless-example/example was edited by kubectl-edit",
                     "[critical] traffic_drift: Service/a-serverless-example/example",
                     "[critical] event_delivery_broken: Trigger/josh/example-trigger0 cannot deliver events",
                     "[warning] config_drift: ConfigMap/knative-eventing/config-features"):
            assert line in result.stdout, result.stdout
        # A second run (newer resourceVersions) is not taken for a replay.
        again = subprocess.run([sys.executable, str(ROOT / "examples" / "demo.py"), "--url", sentinel.url,
                                "--no-wait"], capture_output=True, text=True, timeout=60)
        assert again.returncode == 0 and "HTTP 202" in again.stdout, again.stdout + again.stderr
    finally:
        assert sentinel.stop() == 0
