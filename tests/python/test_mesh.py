"""The mesh under Knative through the real binary (issue 32): net-istio's VirtualService edited by
hand and written back, a PeerAuthentication weakened and restored, a Knative namespace losing its
sidecar injection, a Revision template opting out of the sidecar, and a team's own Istio objects
left alone. Events are sent by the CloudEvents SDK (binary mode), as a Broker would.

Objects: Istio's and net-istio's own files (tests/fixtures/istio/, verbatim) and net-istio's
VirtualService written from its source (tests/fixtures/istio/derived/, see the README); each is
also checked against its CRD schema (tests/fixtures/knative-crds/)."""

import copy
import json
import urllib.request

import pytest
from cloudevents.core.bindings.http import to_binary_event
from cloudevents.core.v1.event import CloudEvent

from conftest import ROOT, Sentinel, attributes, load_yaml_fixture, safe_load, safe_load_all
from knative_schema import load_crds, object_validator, violations

ISTIO = ROOT / "tests" / "fixtures" / "istio"
RV = [30_000_000]
EDIT_TIME = "2026-12-01T10:00:00Z"


def fresh(obj):
    copy_ = copy.deepcopy(obj)
    RV[0] += 1
    copy_["metadata"]["resourceVersion"] = str(RV[0])
    return copy_


def istio_fixture(name, index=0):
    docs = [doc for doc in safe_load_all((ISTIO / name).read_text()) if doc]
    return docs[index]


def identified(obj, uid, namespace=None, created="2026-11-01T00:00:00Z"):
    """A fixture (a manifest) as the API server returns it: uid, times, a namespace."""
    obj = copy.deepcopy(obj)
    meta = obj["metadata"]
    meta["uid"] = uid
    meta.setdefault("creationTimestamp", created)
    if namespace is not None:
        meta["namespace"] = namespace
    # Made by a GitOps tool (trusted), which owns what the manifest sets.
    meta.setdefault("managedFields", [{
        "manager": "argocd-controller", "operation": "Apply",
        "apiVersion": obj["apiVersion"], "time": created, "fieldsType": "FieldsV1",
        "fieldsV1": owned_fields(obj.get("spec", {}), "f:spec")}])
    return fresh(obj)


def owned_fields(value, key):
    """The fieldsV1 trie of a manager that set every field of `value` under `key`."""
    if isinstance(value, dict) and value:
        return {key: {".": {}, **{k: v for name, sub in value.items()
                                  for k, v in owned_fields(sub, f"f:{name}").items()}}}
    return {key: {}}


def without(trie, taken):
    """`trie` minus the leaves of `taken`: a field another manager changed changes hands."""
    result = {}
    for key, sub in trie.items():
        if key in taken and taken[key] == {}:
            continue
        if key in taken and isinstance(sub, dict) and sub:
            rest = without(sub, taken[key])
            if rest and rest != {".": {}}:
                result[key] = rest
            continue
        result[key] = sub
    return result


def by_manager(obj, manager, fields, when=EDIT_TIME):
    """`obj` after a write by `manager` of `fields`: the API server moves their ownership."""
    obj = fresh(obj)
    entries = []
    for entry in obj["metadata"].get("managedFields", []):
        if entry["manager"] == manager:
            continue
        entry = dict(entry, fieldsV1=without(entry["fieldsV1"], fields))
        if entry["fieldsV1"]:
            entries.append(entry)
    entries.append({"manager": manager, "operation": "Update", "apiVersion": obj["apiVersion"],
                    "time": when, "fieldsType": "FieldsV1", "fieldsV1": fields})
    obj["metadata"]["managedFields"] = entries
    return obj


def send(sentinel, event_id, verb, obj):
    if obj["kind"] == "Namespace":
        # As the adapter sends a cluster-scoped object: an empty namespace segment and extension.
        meta = obj["metadata"]
        attrs = attributes(event_id, verb, {**obj, "metadata": {**meta, "namespace": ""}})
        assert attrs["subject"] == f"/apis/v1/namespaces//namespaces/{meta['name']}"
        assert attrs["namespace"] == ""
    else:
        attrs = attributes(event_id, verb, obj)
    message = to_binary_event(CloudEvent(attrs, obj))
    status, _, body = sentinel.post(dict(message.headers), message.body)
    assert status == 202, (status, body, sentinel.logs()[-2000:])


def drifts(sentinel, state=None):
    query = "?limit=100" + (f"&state={state}" if state else "")
    with urllib.request.urlopen(sentinel.url + "/api/v1/drifts" + query, timeout=10) as response:
        items = json.loads(response.read())["items"]
    return {(item["class"], item["kind"], item["name"]): item for item in items}


def detail(sentinel, drift_id):
    """A drift's evidence, as the API shows it."""
    with urllib.request.urlopen(f"{sentinel.url}/api/v1/drifts/{drift_id}", timeout=10) as response:
        return json.loads(response.read())["drift"]["evidence"]


@pytest.fixture
def mesh_sentinel(workdir):
    instance = Sentinel(workdir).start()
    yield instance
    instance.stop()


def test_the_objects_used_here_match_their_crd_schemas():
    crds = load_crds()
    objects = [safe_load((ISTIO / "derived" / "virtualservice-hello-ingress.yaml").read_text())]
    for path in sorted(ISTIO.glob("*.yaml")):
        objects += [doc for doc in safe_load_all(path.read_text())
                    if doc and doc["kind"] in ("VirtualService", "DestinationRule", "Gateway", "PeerAuthentication")]
    # Istio's test data writes port keys as integers; the API server's JSON has strings.
    for obj in objects:
        if "portLevelMtls" in obj.get("spec", {}):
            obj["spec"]["portLevelMtls"] = {str(k): v for k, v in obj["spec"]["portLevelMtls"].items()}
    checked = 0
    for obj in objects:
        validator = object_validator(crds, obj["apiVersion"], obj["kind"], closed=True,
                                     metadata={"type": "object"})
        assert validator is not None, (obj["apiVersion"], obj["kind"])
        assert violations(validator, obj, "fixture") == []
        checked += 1
    assert checked >= 10
    broken = copy.deepcopy(objects[0])
    broken["spec"]["http"][0]["route"][0]["weight"] = "ninety"
    validator = object_validator(crds, broken["apiVersion"], broken["kind"], closed=True, metadata={"type": "object"})
    assert violations(validator, broken, "broken")


def test_a_hand_edit_of_net_istios_virtual_service_fires_and_the_controller_writing_it_back_resolves(mesh_sentinel):
    send(mesh_sentinel, "vs-0", "add", fresh(load_yaml_fixture("derived/ingress-ready.yaml")))
    vs = fresh(safe_load((ISTIO / "derived" / "virtualservice-hello-ingress.yaml").read_text()))
    send(mesh_sentinel, "vs-1", "add", vs)
    edited = copy.deepcopy(vs)
    routes = edited["spec"]["http"][0]["route"]
    routes[0]["weight"], routes[1]["weight"] = 0, 100
    edited = by_manager(edited, "kubectl-edit", {"f:spec": {"f:http": {}}})
    send(mesh_sentinel, "vs-2", "update", edited)
    firing = drifts(mesh_sentinel, "firing")
    drift = firing[("manual_edit", "VirtualService", "hello-ingress")]
    assert drift["severity"] == "critical"
    full = detail(mesh_sentinel, drift["id"])
    actor = full["actor"]
    assert actor["manager"] == "kubectl-edit"
    # The annotation copied from the Service names whoever changed the Service, not this edit.
    assert actor.get("user") in (None, ""), actor
    paths = [change["path"] for change in full["changes"]]
    assert any(path.startswith("/spec/http/0/route") for path in paths), paths
    assert "managed by Knative" in full["summary"]
    # Under its Service (through the KIngress and Route labels), not loose in the namespace.
    assert drift["owner"].get("service") == "hello", drift["owner"]
    # net-istio reconciles it back: its `controller` owns the list again, with the old weights.
    restored = by_manager(vs, "controller", vs["metadata"]["managedFields"][0]["fieldsV1"],
                          when="2026-12-01T10:00:05Z")
    restored["metadata"]["managedFields"] = [e for e in restored["metadata"]["managedFields"]
                                             if e["manager"] != "kubectl-edit"]
    send(mesh_sentinel, "vs-3", "update", restored)
    assert ("manual_edit", "VirtualService", "hello-ingress") not in drifts(mesh_sentinel, "firing")
    resolved = drifts(mesh_sentinel, "resolved")
    assert ("manual_edit", "VirtualService", "hello-ingress") in resolved


def test_a_failing_kingress_shows_the_split_its_virtual_service_sends(workdir):
    sentinel = Sentinel(workdir, "rules:\n  classes:\n    not_ready: {grace: 0s}\n").start()
    try:
        vs = fresh(safe_load((ISTIO / "derived" / "virtualservice-hello-ingress.yaml").read_text()))
        send(sentinel, "c-1", "add", vs)
        ingress = fresh(load_yaml_fixture("derived/ingress-load-balancer-not-ready.yaml"))
        send(sentinel, "c-2", "add", ingress)
        drift = drifts(sentinel, "firing")[("not_ready", "Ingress", "hello")]
        chain = json.loads(detail(sentinel, drift["id"])["facts"]["conditionChain"])
        assert chain[0]["kind"] == "Ingress" and chain[0]["status"] != "True"
        assert chain[1] == {"kind": "VirtualService", "namespace": "default", "name": "hello-ingress",
                            "condition": "", "status": "", "reason": "",
                            "message": "sends hello-00001 90%, hello-00002 10%"}
        with urllib.request.urlopen(f"{sentinel.url}/ui/drifts/{drift['id']}", timeout=10) as response:
            page = response.read().decode()
        assert "<strong>VirtualService</strong> default/hello-ingress" in page
        assert "sends hello-00001 90%, hello-00002 10%" in page
    finally:
        sentinel.stop()


def test_peer_authentication_weakened_fires_critical_and_restored_resolves(mesh_sentinel):
    strict = identified(istio_fixture("istio-istio__pilot-serviceregistry-ambient-testdata__peer-authn-strict-in.yaml"),
                        "pa-strict-uid", namespace="knativetutorial")
    send(mesh_sentinel, "pa-1", "add", strict)
    assert drifts(mesh_sentinel) == {}, "first sight is the reference"
    permissive = copy.deepcopy(strict)
    permissive["spec"]["mtls"]["mode"] = "PERMISSIVE"
    permissive = by_manager(permissive, "kubectl-edit", {"f:spec": {"f:mtls": {"f:mode": {}}}})
    send(mesh_sentinel, "pa-2", "update", permissive)
    drift = drifts(mesh_sentinel, "firing")[("mesh_security_drift", "PeerAuthentication", "strict-mtls")]
    assert drift["severity"] == "critical"
    full = detail(mesh_sentinel, drift["id"])
    assert full["summary"] == ("PeerAuthentication/knativetutorial/strict-mtls weakens mTLS for namespace "
                               "knativetutorial: every port STRICT → PERMISSIVE (against the mode first seen)")
    assert full["actor"]["manager"] == "kubectl-edit"
    back = copy.deepcopy(permissive)
    back["spec"]["mtls"]["mode"] = "STRICT"
    send(mesh_sentinel, "pa-3", "update", by_manager(back, "kubectl-edit", {"f:spec": {"f:mtls": {"f:mode": {}}}},
                                                      when="2026-12-01T10:05:00Z"))
    assert ("mesh_security_drift", "PeerAuthentication", "strict-mtls") in drifts(mesh_sentinel, "resolved")
    assert not drifts(mesh_sentinel, "firing")


def test_deleting_a_strict_namespace_policy_under_a_permissive_mesh_fires(mesh_sentinel):
    levels = "istio-istio__pilot-serviceregistry-ambient-testdata__peer-authn-permissive-root-strict-namespace-permissive-workload-in.yaml"
    mesh = identified(istio_fixture(levels, 0), "pa-mesh-uid", created="2026-10-01T00:00:00Z")
    namespace = identified(istio_fixture(levels, 1), "pa-ns-uid")
    workload = identified(istio_fixture(levels, 2), "pa-wl-uid")
    for number, obj in enumerate([mesh, namespace, workload]):
        send(mesh_sentinel, f"lv-{number}", "add", obj)
    # The workload policy inherits STRICT except on its port 9090: removing the port override
    # is a strengthening, quiet.
    stronger = copy.deepcopy(workload)
    del stronger["spec"]["portLevelMtls"]
    send(mesh_sentinel, "lv-3", "update", by_manager(stronger, "kubectl-edit", {"f:spec": {}}))
    assert drifts(mesh_sentinel) == {}
    send(mesh_sentinel, "lv-4", "delete", fresh(namespace))
    drift = drifts(mesh_sentinel, "firing")[("mesh_security_drift", "PeerAuthentication", namespace["metadata"]["name"])]
    assert drift["evidence"]["summary"] == ("PeerAuthentication/foo/default-foo was deleted, weakening mTLS for "
                                           "namespace foo: every port STRICT → PERMISSIVE (against the mode first seen)")
    recreated = identified(istio_fixture(levels, 1), "pa-ns-uid-2", created="2026-12-01T11:00:00Z")
    send(mesh_sentinel, "lv-5", "add", recreated)
    assert not drifts(mesh_sentinel, "firing")


def test_a_knative_namespace_losing_injection_and_a_template_opting_out_fire(mesh_sentinel):
    service = fresh(load_yaml_fixture("serving/openshift-labs-learn-katacoda__serverless-05-knative-client__ksvc-greeter.yaml"))
    send(mesh_sentinel, "ns-0", "add", service)
    labelled = {"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": "knativetutorial", "uid": "ns-uid", "resourceVersion": "1",
                             "creationTimestamp": "2026-11-01T00:00:00Z",
                             "labels": {"istio-injection": "enabled", "kubernetes.io/metadata.name": "knativetutorial"},
                             "managedFields": [{"manager": "kubectl-client-side-apply", "operation": "Update",
                                                "apiVersion": "v1", "time": "2026-11-01T00:00:00Z",
                                                "fieldsType": "FieldsV1",
                                                "fieldsV1": {"f:metadata": {"f:labels": {"f:istio-injection": {}}}}}]},
                "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}
    labelled = fresh(labelled)
    send(mesh_sentinel, "ns-1", "add", labelled)
    # Another namespace without Knative in it is not this class's business.
    other = copy.deepcopy(labelled)
    other["metadata"].update(name="plain", uid="ns-plain-uid")
    send(mesh_sentinel, "ns-2", "add", fresh(other))
    unlabelled = copy.deepcopy(other)
    del unlabelled["metadata"]["labels"]["istio-injection"]
    send(mesh_sentinel, "ns-3", "update", by_manager(unlabelled, "kubectl-label", {"f:metadata": {}}))
    assert drifts(mesh_sentinel) == {}
    removed = copy.deepcopy(labelled)
    del removed["metadata"]["labels"]["istio-injection"]
    send(mesh_sentinel, "ns-4", "update", by_manager(removed, "kubectl-label", {"f:metadata": {}}))
    drift = drifts(mesh_sentinel, "firing")[("mesh_security_drift", "Namespace", "knativetutorial")]
    assert drift["severity"] == "critical"
    assert "istio-injection=enabled → no injection label" in drift["evidence"]["summary"]
    full = detail(mesh_sentinel, drift["id"])
    assert "kubectl label namespace knativetutorial istio-injection=enabled" in full["hint"]
    # The template's label wins over the annotation: opting out by label fires.
    opted_out = copy.deepcopy(service)
    opted_out["spec"]["template"]["metadata"]["labels"] = {"sidecar.istio.io/inject": "false"}
    opted_out["spec"]["template"]["metadata"]["annotations"] = {"sidecar.istio.io/inject": "true"}
    send(mesh_sentinel, "svc-1", "update", by_manager(opted_out, "kubectl-edit", {"f:spec": {"f:template": {}}}))
    drift = drifts(mesh_sentinel, "firing")[("mesh_security_drift", "Service", "greeter")]
    assert "namespace default → sidecar.istio.io/inject=false (label)" in drift["evidence"]["summary"]
    # Only the deprecated annotation, saying false: still out (no label to overrule it).
    annotation_only = copy.deepcopy(service)
    annotation_only["spec"]["template"]["metadata"]["annotations"] = {"sidecar.istio.io/inject": "false"}
    send(mesh_sentinel, "svc-2", "update", by_manager(annotation_only, "kubectl-edit", {"f:spec": {"f:template": {}}}))
    assert ("mesh_security_drift", "Service", "greeter") in drifts(mesh_sentinel, "firing")
    send(mesh_sentinel, "svc-3", "update", by_manager(service, "kubectl-edit", {"f:spec": {"f:template": {}}}))
    assert ("mesh_security_drift", "Service", "greeter") in drifts(mesh_sentinel, "resolved")


def test_a_teams_own_istio_objects_without_a_knative_owner_or_baseline_are_quiet(mesh_sentinel):
    rule = identified(istio_fixture("istio-istio__samples-bookinfo-networking__destination-rule-reviews.yaml"),
                      "dr-uid", namespace="bookinfo")
    send(mesh_sentinel, "dr-1", "add", rule)
    changed = copy.deepcopy(rule)
    changed["spec"]["trafficPolicy"]["loadBalancer"]["simple"] = "ROUND_ROBIN"
    send(mesh_sentinel, "dr-2", "update", by_manager(changed, "kubectl-edit", {"f:spec": {"f:trafficPolicy": {}}}))
    gateway = identified(istio_fixture("knative-extensions-net-istio__config-202-gateway__Gateway-knative-ingress-gateway.yaml"),
                         "gw-uid")
    send(mesh_sentinel, "gw-1", "add", gateway)
    edited = copy.deepcopy(gateway)
    edited["spec"]["servers"][0]["hosts"] = ["example.com"]
    send(mesh_sentinel, "gw-2", "update", by_manager(edited, "kubectl-edit", {"f:spec": {"f:servers": {}}}))
    weighted = identified(istio_fixture("istio-istio__tests-testdata-config__rule-weighted-route.yaml", 2),
                          "vs-user-uid", namespace="default")
    send(mesh_sentinel, "wr-1", "add", weighted)
    reweighted = copy.deepcopy(weighted)
    reweighted["spec"]["http"][0]["route"][0]["weight"] = 5
    send(mesh_sentinel, "wr-2", "update", by_manager(reweighted, "kubectl-edit", {"f:spec": {"f:http": {}}}))
    assert drifts(mesh_sentinel) == {}
    assert mesh_sentinel.metric("drift_sentinel_events_total{outcome=\"applied\"}") >= 6
