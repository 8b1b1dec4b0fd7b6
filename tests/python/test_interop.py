"""Interop: the Python CloudEvents SDK (a client this project did not write) talks to the real binary."""

import copy
import json

from cloudevents.core.bindings.http import to_binary_event, to_structured_event
from cloudevents.core.v1.event import CloudEvent

from conftest import Sentinel, attributes, revision_object


def send(sentinel, message):
    return sentinel.post(dict(message.headers), message.body)


def assert_accepted(status, headers, body):
    assert status == 202, (status, body)
    assert body == b"", "a 2xx must have an empty body"
    assert not [name for name in headers if name.lower().startswith("ce-")], headers


def test_binary_mode_event_from_python_sdk_is_accepted(sentinel):
    event = CloudEvent(attributes("py-binary-1", "add", revision_object(), cluster="prod"), revision_object())
    message = to_binary_event(event)
    assert any(key.lower() == "ce-specversion" for key in message.headers)
    assert_accepted(*send(sentinel, message))
    assert sentinel.metric('drift_sentinel_events_total{outcome="applied"}') == 1.0


def test_structured_mode_event_from_python_sdk_is_accepted(sentinel):
    event = CloudEvent(attributes("py-structured-1", "update", revision_object()), revision_object())
    message = to_structured_event(event)
    content_type = {k.lower(): v for k, v in message.headers.items()}["content-type"]
    assert content_type.startswith("application/cloudevents+json")
    assert_accepted(*send(sentinel, message))
    assert sentinel.metric('drift_sentinel_events_total{outcome="applied"}') == 1.0


def test_redelivery_takes_effect_once_even_across_a_restart(workdir):
    sentinel = Sentinel(workdir).start()
    event = CloudEvent(attributes("py-dup-1", "add", revision_object()), revision_object())
    assert_accepted(*send(sentinel, to_binary_event(event)))
    assert_accepted(*send(sentinel, to_binary_event(event)))
    assert sentinel.metric('drift_sentinel_events_total{outcome="duplicate"}') == 1.0
    assert sentinel.stop() == 0, sentinel.logs()
    # The (source, id) key is durable: after a restart the Broker's retry is still a duplicate.
    restarted = Sentinel(workdir).start()
    try:
        assert_accepted(*send(restarted, to_structured_event(event)))
        assert restarted.metric('drift_sentinel_events_total{outcome="duplicate"}') == 1.0
        assert restarted.metric('drift_sentinel_events_total{outcome="applied"}') == 0.0
    finally:
        restarted.stop()


def test_out_of_order_update_from_python_sdk_is_stale(sentinel):
    newer = revision_object()
    newer["metadata"]["resourceVersion"] = "7749790"
    older = copy.deepcopy(newer)
    older["metadata"]["resourceVersion"] = "7749789"
    assert_accepted(*send(sentinel, to_binary_event(CloudEvent(attributes("n", "update", newer), newer))))
    assert_accepted(*send(sentinel, to_binary_event(CloudEvent(attributes("o", "update", older), older))))
    assert sentinel.metric('drift_sentinel_events_total{outcome="stale"}') == 1.0


def test_invalid_object_is_400_with_useful_message(sentinel):
    broken = revision_object()
    del broken["metadata"]["uid"]
    status, _, body = send(sentinel, to_binary_event(CloudEvent(attributes("bad", "add", broken), broken)))
    assert status == 400
    error = json.loads(body)
    assert error["code"] == "invalid_object"
    assert "data.metadata.uid" in error["message"]
    assert len(body) < 768


def test_sigterm_drains_and_exits_cleanly(workdir):
    sentinel = Sentinel(workdir).start()
    assert sentinel.stop() == 0
    logs = sentinel.logs()
    assert "Shutting down" in logs and "Stopped." in logs


def test_logs_are_json_with_event_fields(sentinel):
    event = CloudEvent(attributes("py-log-1", "add", revision_object(), cluster="prod"), revision_object())
    assert_accepted(*send(sentinel, to_binary_event(event)))
    sentinel.stop()
    lines = [json.loads(line) for line in sentinel.logs().splitlines() if line.startswith("{")]
    processed = [line for line in lines if line.get("ce_id") == "py-log-1"]
    assert processed, "an event log line carries ce_id"
    line = processed[0]
    for key, value in {"ce_type": "dev.knative.apiserver.resource.add", "cluster": "prod", "kind": "Revision",
                       "namespace": "myapp", "name": "knative-webapp-00001"}.items():
        assert line[key] == value, (key, line)
