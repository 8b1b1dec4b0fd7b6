"""The public JSON contract: what the real binary sends to a webhook, what its API answers, and the
README's example, validated against the JSON Schema files in docs/schemas/ with the `jsonschema`
library (not this project's code)."""

import copy
import json
import re
import shutil
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from jsonschema import Draft202012Validator
from referencing import Registry, Resource

from conftest import ROOT, Sentinel, wait_for
from test_delivery_process import RV, config_map, post

SCHEMAS = ROOT / "docs" / "schemas"


def schemas():
    webhook = json.loads((SCHEMAS / "webhook-v1.schema.json").read_text())
    drift = json.loads((SCHEMAS / "api-drift-v1.schema.json").read_text())
    registry = Registry().with_resources(
        [(schema["$id"], Resource.from_contents(schema)) for schema in (webhook, drift)]
    )
    validator = lambda schema: Draft202012Validator(
        schema, registry=registry, format_checker=Draft202012Validator.FORMAT_CHECKER
    )
    evidence = {"$ref": drift["$id"] + "#/$defs/evidence"}
    return validator(webhook), validator(drift), validator(evidence)


def test_formats_are_checked():
    # Without the format packages, jsonschema silently skips `date-time` and `uri`.
    webhook, _, _ = schemas()
    body = {"type": "drift.digest", "timestamp": "2026-13-99T00:00:00Z", "notificationId": "n",
            "omitted": 0, "data": []}
    assert errors(webhook, body)


def errors(validator, instance):
    return [f"{list(error.absolute_path)}: {error.message}" for error in validator.iter_errors(instance)]


class Receiver:
    """A receiver that keeps every JSON body it is sent (a webhook, or a binary-mode CloudEvent's
    data) with its headers."""

    def __init__(self):
        self.bodies = []
        self.headers = []
        received, headers = self.bodies, self.headers

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                length = int(self.headers.get("content-length", "0"))
                received.append(json.loads(self.rfile.read(length)))
                headers.append(dict(self.headers))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.server.shutdown()


def edit_many(obj: dict, changes: dict, manager="kubectl-edit") -> dict:
    """One hand edit that adds, changes and removes ConfigMap keys (None removes)."""
    out = copy.deepcopy(obj)
    for key, value in changes.items():
        if value is None:
            out["data"].pop(key, None)
        else:
            out["data"][key] = value
    RV[0] += 1
    out["metadata"]["resourceVersion"] = str(RV[0])
    out["metadata"]["managedFields"].append({
        "manager": manager, "operation": "Update", "apiVersion": "v1", "fieldsType": "FieldsV1",
        "fieldsV1": {"f:data": {f"f:{key}": {} for key in changes}}, "time": "2026-11-29T10:00:00Z"})
    return out


def get(sentinel, path):
    with urllib.request.urlopen(sentinel.url + path, timeout=10) as response:
        return json.loads(response.read())


def test_the_webhook_body_and_the_api_follow_their_schemas(workdir):
    webhook, api_drift, api_evidence = schemas()
    receiver = Receiver()
    events = Receiver()
    sentinel = Sentinel(workdir, extra_config=(
        f"  - {{name: hook, type: webhook, url: '{receiver.url}'}}\n"
        f"  - {{name: broker, type: cloudevents, url: '{events.url}'}}\n"
        "routes:\n  - channels: [hook, broker]\n    groupWait: 0s\n    groupInterval: 0s\n"
        "publicUrl: https://drift.example.com\n"))
    sentinel.start()
    try:
        base = config_map("config-autoscaler")
        base["data"]["scale-to-zero-grace-period"] = "30s"
        base["data"]["stable-window"] = "60s"
        post(sentinel, "c-1", "add", base)
        edited = edit_many(base, {"max-scale": "7", "stable-window": "90s",
                                  "scale-to-zero-grace-period": None})
        post(sentinel, "c-2", "update", edited)
        fired = wait_for(lambda: [b for b in receiver.bodies if b["type"] == "drift.firing"], timeout=20)
        assert fired, sentinel.logs()
        body = fired[0]
        assert errors(webhook, body) == []
        drift = body["data"][0]
        ops = {entry["path"]: entry["op"] for entry in drift["diff"]}
        assert ops == {"/data/max-scale": "add", "/data/stable-window": "replace",
                       "/data/scale-to-zero-grace-period": "remove"}, drift["diff"]
        added = next(entry for entry in drift["diff"] if entry["op"] == "add")
        assert added["before"] is None and added["after"] == "7"
        assert drift["url"] == f"https://drift.example.com/ui/drifts/{drift['id']}"

        reverted = edit_many(edited, {"max-scale": None, "stable-window": "60s",
                                      "scale-to-zero-grace-period": "30s"})
        post(sentinel, "c-3", "update", reverted)
        resolved = wait_for(lambda: [b for b in receiver.bodies if b["type"] == "drift.resolved"], timeout=20)
        assert resolved, sentinel.logs()
        assert errors(webhook, resolved[0]) == []

        # The cloudevents channel's data is one drift of the same contract.
        assert wait_for(lambda: len(events.bodies) >= 2, timeout=20), sentinel.logs()
        for data, headers in zip(events.bodies, events.headers):
            assert headers.get("ce-type") in ("dev.driftsentinel.drift.firing",
                                              "dev.driftsentinel.drift.resolved")
            envelope = {"type": "drift.digest", "timestamp": data["lastSeen"],
                        "notificationId": headers["ce-id"], "omitted": 0, "data": [data]}
            assert errors(webhook, envelope) == []

        listed = get(sentinel, "/api/v1/drifts")["items"]
        assert listed
        for item in listed:
            assert errors(api_drift, item) == []
        detail = get(sentinel, f"/api/v1/drifts/{drift['id']}")
        assert errors(api_drift, detail["drift"]) == []
        assert [change["op"] for change in detail["drift"]["evidence"]["changes"]]
        for entry in detail["history"]:
            assert entry["evidence"] is None or errors(api_evidence, entry["evidence"]) == []
    finally:
        sentinel.stop()
        receiver.stop()
        events.stop()


def test_drifts_stored_by_the_previous_layout_follow_the_api_schema(workdir):
    # A store written by the binary before the restructure (tests/fixtures/store/), served by
    # this one: its drifts and their history answer in today's contract.
    _, api_drift, api_evidence = schemas()
    shutil.copy(ROOT / "tests" / "fixtures" / "store" / "layout-e062af0.db", workdir / "sentinel.db")
    sentinel = Sentinel(workdir).start()
    try:
        listed = get(sentinel, "/api/v1/drifts?limit=10")["items"]
        assert {item["id"] for item in listed} == {"7352a014a81b2783", "37ba1d9623d247c7"}
        for item in listed:
            assert errors(api_drift, item) == []
            detail = get(sentinel, f"/api/v1/drifts/{item['id']}")
            assert detail["history"]
            for entry in detail["history"]:
                assert entry["evidence"] is None or errors(api_evidence, entry["evidence"]) == []
        resolved = get(sentinel, "/api/v1/drifts/37ba1d9623d247c7")["drift"]
        assert resolved["evidence"]["changes"][0]["op"] == "add"
    finally:
        sentinel.stop()


def test_the_readme_example_follows_the_schema():
    webhook, _, _ = schemas()
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Webhook JSON", 1)[1]
    example = section.split("```jsonc", 1)[1].split("```", 1)[0]
    # JSONC: drop `// comment` tails (a URL's `//` follows a colon, not whitespace).
    text = re.sub(r"\s+//[^\n]*", "", example)
    body = json.loads(text)
    assert errors(webhook, body) == []
    # The schema is strict: a field it does not name is an error (the contract changes on purpose).
    body["data"][0]["surprise"] = 1
    assert errors(webhook, body)
