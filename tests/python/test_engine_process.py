"""The drift engine through the real binary: `replay`, and rules hot reload (ConfigMap symlink swap)."""

import copy
import json
import os
import subprocess
from pathlib import Path

from cloudevents.core.bindings.http import to_binary_event
from cloudevents.core.v1.event import CloudEvent

from conftest import Sentinel, attributes, binary, load_yaml_fixture, swap_config, wait_for

RV = [9_000_000]


def config_autoscaler():
    obj = load_yaml_fixture("configmaps/knative-serving__config-core-configmaps__config-autoscaler.yaml")
    obj["metadata"]["uid"] = "cm-autoscaler-uid"
    obj["metadata"]["resourceVersion"] = "1000"
    obj["metadata"]["managedFields"] = [{
        "manager": "kubectl-client-side-apply", "operation": "Update", "apiVersion": "v1",
        "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {".": {}, "f:_example": {}}},
        "time": "2023-10-01T00:00:00Z"}]
    return obj


def edited(obj, key, value, when):
    copy_ = copy.deepcopy(obj)
    copy_["data"][key] = value
    RV[0] += 1
    copy_["metadata"]["resourceVersion"] = str(RV[0])
    copy_["metadata"]["managedFields"].append({
        "manager": "kubectl-edit", "operation": "Update", "apiVersion": "v1", "fieldsType": "FieldsV1",
        "fieldsV1": {"f:data": {f"f:{key}": {}}}, "time": when})
    return copy_


def structured(event_id, verb, obj, when):
    attrs = attributes(event_id, verb, obj)
    attrs["time"] = when
    event = dict(attrs)
    event["data"] = obj
    return event


def test_replay_prints_each_transition_deterministically(tmp_path):
    base = config_autoscaler()
    changed = edited(base, "min-scale", "1", "2023-10-09T22:00:00Z")
    events = [structured("r1", "add", base, "2023-10-09T21:00:00Z"),
              structured("r2", "update", changed, "2023-10-09T22:00:00Z"),
              structured("r2", "update", changed, "2023-10-09T22:00:05Z")]  # a redelivery
    path = tmp_path / "events.jsonl"
    path.write_text("\n".join(json.dumps(event) for event in events) + "\n")
    run = lambda: subprocess.run([binary(), "replay", "--format", "json", str(path)],
                                 capture_output=True, text=True, timeout=60)
    first, second = run(), run()
    assert first.returncode == 0, first.stderr
    assert first.stdout == second.stdout, "replay is deterministic"
    lines = [json.loads(line) for line in first.stdout.splitlines()]
    assert [(line["state"], line["class"]) for line in lines] == [("pending", "config_drift"), ("firing", "config_drift")]
    fired = lines[1]
    assert fired["object"] == "ConfigMap/knative-serving/config-autoscaler"
    assert fired["actor"]["manager"] == "kubectl-edit"
    assert fired["at"] == "2023-10-09T22:00:00.000Z"
    assert "min-scale added (1)" in fired["summary"]
    text = subprocess.run([binary(), "replay", str(path)], capture_output=True, text=True, timeout=60)
    assert "FIRING" in text.stdout and "fix: kubectl -n knative-serving patch configmaps" in text.stdout


def test_replay_reports_bad_input_with_its_location(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"specversion": "1.0"}\nnot json\n')
    result = subprocess.run([binary(), "replay", str(path)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert f"{path}:2: not JSON" in result.stderr
    path.write_text('{"specversion": "1.0", "source": "/s", "type": "t"}\n')
    result = subprocess.run([binary(), "replay", str(path)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert f"{path}:1: invalid CloudEvent JSON" in result.stderr, result.stderr




def test_rules_hot_reload_through_configmap_symlink_swaps(workdir):
    volume = workdir / "volume"
    volume.mkdir()
    sentinel = Sentinel(workdir)
    base_text = (
        f"store:\n  path: {workdir / 'sentinel.db'}\n"
        "channels:\n  - {name: log, type: log}\n"
        "rules:\n  classes:\n    config_drift:\n      enabled: {enabled}\n"
    )
    swap_config(volume, base_text.replace("{enabled}", "false"), 1)
    sentinel.config_path = volume / "config.yaml"
    sentinel.start()
    try:
        base = config_autoscaler()
        post = lambda event_id, verb, obj: sentinel.post(*_binary(event_id, verb, obj))
        assert post("h1", "add", base)[0] == 202
        first = edited(base, "min-scale", "1", "2023-10-09T22:00:00Z")
        assert post("h2", "update", first)[0] == 202
        transitions = 'drift_sentinel_drift_transitions_total{class="config_drift",state="firing"}'
        assert sentinel.metric(transitions) == 0.0, "disabled class finds nothing"

        swap_config(volume, base_text.replace("{enabled}", "true"), 2)
        assert wait_for(lambda: sentinel.metric("drift_sentinel_config_reloads_total") >= 1.0), sentinel.logs()
        second = edited(first, "max-scale", "5", "2023-10-09T22:05:00Z")
        assert post("h3", "update", second)[0] == 202
        assert sentinel.metric(transitions) == 1.0, "the reloaded rules are in force"

        # An invalid edit keeps the rules in force and says why.
        swap_config(volume, base_text.replace("{enabled}", "maybe"), 3)
        assert wait_for(lambda: sentinel.metric("drift_sentinel_config_reload_errors_total") >= 1.0)
        assert "Config reload rejected" in sentinel.logs()
        assert "rules.classes.config_drift.enabled" in sentinel.logs()
        third = edited(second, "stable-window", "30s", "2023-10-09T22:10:00Z")
        assert post("h4", "update", third)[0] == 202
        with open(sentinel.log_path) as log:
            assert any("Drift state changed" in line for line in log)
        # A second swap after the first works too (the file watch is on the directory).
        swap_config(volume, base_text.replace("{enabled}", "false"), 4)
        assert wait_for(lambda: sentinel.metric("drift_sentinel_config_reloads_total") >= 2.0)
    finally:
        assert sentinel.stop() == 0


def _binary(event_id, verb, obj):
    message = to_binary_event(CloudEvent(attributes(event_id, verb, obj), obj))
    return dict(message.headers), message.body


def test_hot_reload_says_when_an_edit_needs_a_restart(workdir):
    """Hot reload applies `rules:` only; an edit to another section is logged and counted as
    needing a restart, every time the file changes while it differs from what is in force."""
    volume = workdir / "volume"
    volume.mkdir()
    sentinel = Sentinel(workdir)
    text = (
        f"store:\n  path: {workdir / 'sentinel.db'}\n"
        "server:\n  drainTimeout: 5s\n"
        "channels:\n  - {name: log, type: log}\n"
        "rules:\n  classes:\n    config_drift:\n      enabled: true\n"
    )
    swap_config(volume, text, 1)
    sentinel.config_path = volume / "config.yaml"
    sentinel.start()
    try:
        restarts = "drift_sentinel_config_restart_required_total"
        # Only rules changed: applied, nothing to restart.
        swap_config(volume, text.replace("enabled: true", "enabled: false"), 2)
        assert wait_for(lambda: sentinel.metric("drift_sentinel_config_reloads_total") >= 1.0), sentinel.logs()
        assert sentinel.metric(restarts) == 0.0
        # A new channel and a server setting: the rules still apply, the rest waits for a restart.
        edited = text.replace("enabled: true", "enabled: false").replace(
            "  - {name: log, type: log}\n", "  - {name: log, type: log}\n  - {name: audit, type: log}\n"
        ).replace("drainTimeout: 5s", "drainTimeout: 9s")
        swap_config(volume, edited, 3)
        assert wait_for(lambda: sentinel.metric(restarts) >= 1.0), sentinel.logs()
        assert sentinel.metric("drift_sentinel_config_reloads_total") == 2.0
        lines = [json.loads(line) for line in sentinel.logs().splitlines() if "need a restart" in line]
        assert lines, sentinel.logs()
        assert lines[-1]["level"] == "WARN" and lines[-1]["sections"] == "channels, server", lines[-1]
        # Back to what is in force: nothing left to restart for.
        swap_config(volume, text, 4)
        assert wait_for(lambda: sentinel.metric("drift_sentinel_config_reloads_total") >= 3.0)
        assert sentinel.metric(restarts) == 1.0
    finally:
        assert sentinel.stop() == 0
