"""Fleet drift (`fleet.groups`, issue 18) through the real binary: two clusters' ApiServerSource
events (the `cluster` extension, as each cluster's source sets it) of Knative's own
config-autoscaler ConfigMap (tests/fixtures/knative/configmaps, its `app.kubernetes.io/version`
label included) go into one service. One key set differently fires `fleet_divergence` after the
group's grace naming both clusters and values, and resolves when aligned; a rollout reaching both
clusters within grace stays silent; `GET /api/v1/fleet` shows the group, its members and the
per-cluster values, and is validated against docs/schemas/api-fleet-v1.schema.json."""

import copy
import json
import time
import urllib.parse
import urllib.request

from cloudevents.core.bindings.http import to_binary_event
from cloudevents.core.v1.event import CloudEvent
from jsonschema import Draft202012Validator

from conftest import Sentinel, attributes, load_yaml_fixture, wait_for
from test_contract import SCHEMAS, schemas

FLEET_SCHEMA = json.loads((SCHEMAS / "api-fleet-v1.schema.json").read_text())
KEY = "container-concurrency-target-default"
GRACE_SECONDS = 3
FLEET_CONFIG = f"""\
fleet:
  groups:
    - name: prod
      clusters: ["prod-*"]
      compare:
        - {{apiVersion: v1, kind: ConfigMap, namespace: knative-serving, name: "config-*"}}
      severity: critical
      grace: {GRACE_SECONDS}s
"""
RV = [70_000_000]
EVENT = [0]


def autoscaler(cluster: str) -> dict:
    """The shipped config-autoscaler as `cluster` holds it (its own uid there)."""
    obj = load_yaml_fixture("configmaps/knative-serving__config-core-configmaps__config-autoscaler.yaml")
    obj["metadata"]["uid"] = f"{cluster}-config-autoscaler"
    RV[0] += 1
    obj["metadata"]["resourceVersion"] = str(RV[0])
    obj["metadata"]["managedFields"] = [{
        "manager": "kubectl-client-side-apply", "operation": "Update", "apiVersion": "v1",
        "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {".": {}, "f:_example": {}}},
        "time": "2026-11-01T00:00:00Z"}]
    return obj


def network(cluster: str) -> dict:
    """The shipped config-network as `cluster` holds it."""
    obj = load_yaml_fixture("configmaps/knative-serving__vendor-knative-networking__config-network.yaml")
    obj["metadata"]["uid"] = f"{cluster}-config-network"
    RV[0] += 1
    obj["metadata"]["resourceVersion"] = str(RV[0])
    return obj


def with_key(obj: dict, value: str) -> dict:
    """The ConfigMap after `kubectl apply` set KEY (a key its `_example` documents)."""
    out = copy.deepcopy(obj)
    out["data"][KEY] = value
    RV[0] += 1
    out["metadata"]["resourceVersion"] = str(RV[0])
    return out


def post(sentinel: Sentinel, cluster: str, verb: str, obj: dict):
    EVENT[0] += 1
    event = CloudEvent(attributes(f"fleet-{EVENT[0]}", verb, obj, cluster=cluster), obj)
    message = to_binary_event(event)
    status, _, body = sentinel.post(dict(message.headers), message.body)
    assert status == 202, body


def api(sentinel: Sentinel, path: str, **query):
    url = sentinel.url + path + ("?" + urllib.parse.urlencode(query) if query else "")
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.loads(response.read())


def fleet_drifts(sentinel: Sentinel, state: str) -> list:
    return api(sentinel, "/api/v1/drifts", **{"class": "fleet_divergence", "state": state})["items"]


def transitions(sentinel: Sentinel, state: str) -> float:
    return sentinel.metric(
        f'drift_sentinel_drift_transitions_total{{class="fleet_divergence",state="{state}"}}')


def start(workdir) -> Sentinel:
    sentinel = Sentinel(workdir, extra_config=FLEET_CONFIG)
    return sentinel.start()


def test_a_key_set_differently_fires_after_grace_naming_both_clusters_and_resolves_when_aligned(workdir):
    sentinel = start(workdir)
    try:
        eu, us = with_key(autoscaler("prod-eu"), "100"), with_key(autoscaler("prod-us"), "100")
        post(sentinel, "prod-eu", "add", eu)
        post(sentinel, "prod-us", "add", us)
        us = with_key(us, "50")
        post(sentinel, "prod-us", "update", us)
        firing = wait_for(lambda: fleet_drifts(sentinel, "firing"), timeout=GRACE_SECONDS + 20)
        assert len(firing) == 1, firing
        drift = firing[0]
        _, drift_validator, _ = schemas()
        drift_validator.validate(drift)
        assert drift["cluster"] == "fleet:prod" and drift["rule"] == "prod"
        assert drift["uid"] == "ConfigMap/knative-serving/config-autoscaler"
        assert (drift["kind"], drift["namespace"], drift["name"]) == ("ConfigMap", "knative-serving", "config-autoscaler")
        assert drift["severity"] == "critical"
        assert drift["evidence"]["summary"] == (
            "ConfigMap/knative-serving/config-autoscaler differs across fleet group prod: "
            f'/data/{KEY} is "100" in prod-eu; "50" in prod-us')
        values = json.loads(drift["evidence"]["facts"]["values"])
        assert values == [{"path": f"/data/{KEY}", "values": {"prod-eu": "100", "prod-us": "50"}}]
        assert "kubectl --context prod-us -n knative-serving patch configmap config-autoscaler" in drift["evidence"]["hint"]

        view = api(sentinel, "/api/v1/fleet")
        Draft202012Validator(FLEET_SCHEMA, format_checker=Draft202012Validator.FORMAT_CHECKER).validate(view)
        (group,) = view["groups"]
        assert group["name"] == "prod" and group["clusters"] == ["prod-*"]
        assert [member["cluster"] for member in group["members"]] == ["prod-eu", "prod-us"]
        assert all(member["lastEvent"] for member in group["members"])
        assert group["divergent"] == 1
        (compared,) = group["objects"]
        assert compared["key"] == "ConfigMap/knative-serving/config-autoscaler"
        assert compared["divergent"] and compared["drift"] == {"id": drift["id"], "state": "firing"}
        row = compared["rows"][0]
        # Two members, two values: no majority, both cells highlighted.
        assert row == {"path": f"/data/{KEY}", "differs": True, "values": {"prod-eu": "100", "prod-us": "50"},
                       "highlighted": ["prod-eu", "prod-us"]}
        assert compared["notReported"] == [] and group["truncated"] == 0
        version = [r for r in compared["rows"] if r["path"] == "/metadata/labels/app.kubernetes.io~1version"]
        assert version == [{"path": "/metadata/labels/app.kubernetes.io~1version", "differs": False,
                            "values": {"prod-eu": "devel", "prod-us": "devel"}, "highlighted": []}]

        # Aligned: prod-us takes prod-eu's value.
        post(sentinel, "prod-us", "update", with_key(us, "100"))
        resolved = wait_for(lambda: [d for d in fleet_drifts(sentinel, "resolved") if d["id"] == drift["id"]])
        assert resolved and resolved[0]["resolution"] == "every member holds the same desired state"
        assert fleet_drifts(sentinel, "open") == []
        assert api(sentinel, "/api/v1/fleet")["groups"][0]["divergent"] == 0
    finally:
        sentinel.stop()


def test_a_rollout_reaching_both_clusters_within_grace_stays_silent(workdir):
    sentinel = start(workdir)
    try:
        eu, us = autoscaler("prod-eu"), autoscaler("prod-us")
        post(sentinel, "prod-eu", "add", eu)
        post(sentinel, "prod-us", "add", us)
        # The rollout: prod-eu first, then prod-us, well within the group's grace.
        post(sentinel, "prod-eu", "update", with_key(eu, "90"))
        assert wait_for(lambda: transitions(sentinel, "pending") == 1)
        post(sentinel, "prod-us", "update", with_key(us, "90"))
        assert wait_for(lambda: transitions(sentinel, "resolved") == 1)
        # Past the grace: nothing fired, nothing is open, nothing was written.
        time.sleep(GRACE_SECONDS + 1)
        assert transitions(sentinel, "firing") == 0
        assert fleet_drifts(sentinel, "open") == [] and fleet_drifts(sentinel, "resolved") == []
        compared = api(sentinel, "/api/v1/fleet")["groups"][0]["objects"][0]
        assert not compared["divergent"] and compared["drift"] is None
    finally:
        sentinel.stop()


def test_an_object_a_cluster_never_reported_is_not_reported_not_missing(workdir):
    """Each cluster sends an update of a different ConfigMap: neither is known to be missing
    anywhere, so nothing opens; the view and the page say `not reported`; ?group= narrows both."""
    sentinel = start(workdir)
    try:
        post(sentinel, "prod-eu", "update", autoscaler("prod-eu"))
        post(sentinel, "prod-us", "update", network("prod-us"))
        assert wait_for(lambda: len(api(sentinel, "/api/v1/fleet")["groups"][0]["objects"]) == 2)
        time.sleep(GRACE_SECONDS + 1)
        assert transitions(sentinel, "pending") == 0 and transitions(sentinel, "firing") == 0
        view = api(sentinel, "/api/v1/fleet", group="prod")
        Draft202012Validator(FLEET_SCHEMA, format_checker=Draft202012Validator.FORMAT_CHECKER).validate(view)
        (group,) = view["groups"]
        assert group["divergent"] == 0
        by_key = {o["key"]: o for o in group["objects"]}
        autoscaler_view = by_key["ConfigMap/knative-serving/config-autoscaler"]
        assert autoscaler_view["notReported"] == ["prod-us"] and not autoscaler_view["divergent"]
        assert all(set(row["values"]) == {"prod-eu"} and row["highlighted"] == [] for row in autoscaler_view["rows"])
        assert by_key["ConfigMap/knative-serving/config-network"]["notReported"] == ["prod-eu"]
        assert api(sentinel, "/api/v1/fleet", group="nope") == {"groups": []}
        with urllib.request.urlopen(sentinel.url + "/ui/fleet?group=prod", timeout=5) as response:
            page = response.read().decode()
        assert '<td data-cluster="prod-us" class="unreported"><em>not reported</em></td>' in page
        assert 'class="diff"' not in page
    finally:
        sentinel.stop()
