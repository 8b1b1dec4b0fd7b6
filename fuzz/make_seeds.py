#!/usr/bin/env python3
"""Writes the committed seed corpus (fuzz/seeds/<target>/) from the repository's real fixtures.

Seeds are small, valid-looking inputs that get the fuzzer past the first parse quickly, plus a
few hostile shapes (deep nesting, invalid UTF-8, wrong types). Re-run after changing a harness's
input format: `target/pyenv/bin/python fuzz/make_seeds.py` (needs PyYAML).
"""

import copy
import json
import shutil
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "knative"
SEEDS = ROOT / "fuzz" / "seeds"


def fixture(relative):
    return yaml.safe_load((FIXTURES / relative).read_text())


def write(target, name, data):
    directory = SEEDS / target
    directory.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    (directory / name).write_bytes(data)


def compact(value):
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


revision = fixture("serving/rguske-github-io__knative-serving-unwrapped__revision-knative-webapp-00001.yaml")
service = fixture("serving/openshift-labs-learn-katacoda__serverless-05-knative-client__ksvc-greeter.yaml")
config_map = fixture("configmaps/knative-serving__config-core-configmaps__config-autoscaler.yaml")
config_map["metadata"].setdefault("uid", "uid-config-autoscaler")
config_map["metadata"].setdefault("resourceVersion", "100")
config_map["metadata"]["managedFields"] = [{
    "manager": "kubectl-client-side-apply", "operation": "Update", "apiVersion": "v1",
    "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {".": {}, "f:_example": {}}},
    "time": "2026-11-01T00:00:00Z"}]
config_map["data"] = {"_example": "# docs", "max-scale": "3"}
edited = copy.deepcopy(config_map)
edited["data"]["max-scale"] = "7"
edited["metadata"]["resourceVersion"] = "101"
edited["metadata"]["managedFields"].append({
    "manager": "kubectl-edit", "operation": "Update", "apiVersion": "v1", "fieldsType": "FieldsV1",
    "fieldsV1": {"f:data": {"f:max-scale": {}}}, "time": "2026-11-29T10:00:00Z"})
secret = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
          "metadata": {"name": "s", "namespace": "n", "uid": "uid-s", "resourceVersion": "5",
                       "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{\"data\":{}}"}},
          "data": {"token": "c2VjcmV0"}, "stringData": {"password": "hunter2"}}


def event(event_id, verb, obj, **extra):
    meta = obj["metadata"]
    out = {"specversion": "1.0", "id": event_id, "source": "https://10.96.0.1:443",
           "type": f"dev.knative.apiserver.resource.{verb}", "time": "2026-11-29T10:00:00Z",
           "datacontenttype": "application/json", "kind": obj["kind"], "name": meta["name"],
           "namespace": meta.get("namespace", ""), "data": obj}
    out.update(extra)
    return out


def binary(ev, body=None):
    lines = []
    for key, value in ev.items():
        if key in ("data", "datacontenttype"):
            continue
        lines.append(f"ce-{key}: {value}")
    lines.append("content-type: application/json")
    head = "\n".join(lines).encode()
    return b"\x00" + head + b"\n\n" + (body if body is not None else compact(ev["data"]).encode())


def main():
    shutil.rmtree(SEEDS, ignore_errors=True)

    # decode_request: first byte = mode (0 binary, 1 structured, 2 batch).
    write("decode_request", "binary-revision-update", binary(event("1", "update", revision, cluster="prod%20eu")))
    write("decode_request", "binary-secret-add", binary(event("2", "add", secret)))
    write("decode_request", "binary-invalid-utf8-header", binary(event("3", "add", revision, cluster="\xff\xfe")).replace(b"\xc3\xbf\xc3\xbe", b"\xff\xfe"))
    write("decode_request", "binary-not-json", binary(event("4", "add", revision), body=b"not json"))
    write("decode_request", "binary-ref-mode", binary(dict(event("5", "add", revision), type="dev.knative.apiserver.ref.add"),
                                                      body=b'{"kind":"Revision","name":"r","namespace":"n","apiVersion":"serving.knative.dev/v1"}'))
    write("decode_request", "structured-service-add", b"\x01" + compact(event("6", "add", service)).encode())
    write("decode_request", "structured-time-extension-types", b"\x01" + compact(
        event("7", "update", revision, time="9999-12-31T23:59:59.999999999+14:00", flag=True, count=-9223372036854775808)).encode())
    write("decode_request", "batch-config-edit", b"\x02" + compact([event("8", "add", config_map), event("9", "update", edited)]).encode())
    write("decode_request", "batch-secret-edit", b"\x02" + compact([
        event("10", "add", secret),
        event("11", "update", dict(secret, data={"token": "b3RoZXI="}, metadata=dict(secret["metadata"], resourceVersion="6",
              managedFields=[{"manager": "kubectl-edit", "operation": "Update", "fieldsV1": {"f:data": {"f:token": {}}}, "time": "2026-11-29T10:00:00Z"}])))]).encode())
    write("decode_request", "batch-delete", b"\x02" + compact([event("12", "add", service), event("13", "delete", service)]).encode())
    write("decode_request", "structured-deep-nesting", b"\x01" + b'{"specversion":"1.0","id":"d","source":"/s","type":"t","data":' + b"[" * 5000 + b"]" * 5000 + b"}")
    write("decode_request", "structured-wrong-types", b"\x01" + compact(dict(event("14", "add", revision), id=7, source=[], specversion=1.0)).encode())

    # parse_object: any JSON.
    write("parse_object", "revision", compact(revision))
    write("parse_object", "service", compact(service))
    write("parse_object", "configmap", compact(edited))
    write("parse_object", "secret", compact(secret))
    write("parse_object", "secret-odd-values", compact(dict(secret, data={"a": 1, "b": None, "c": {"x": []}}, stringData="x")))
    write("parse_object", "wrong-types", compact({"apiVersion": 1, "kind": [], "metadata": {"name": {}, "uid": True,
        "resourceVersion": 1.5, "generation": "2", "labels": [], "annotations": {"a": 1}, "ownerReferences": {},
        "managedFields": [1]}}))
    write("parse_object", "generation-overflow", compact(dict(revision, metadata=dict(revision["metadata"], generation=18446744073709551615))))

    # managed_fields: {"managedFields": [...], "object": {...}, "pointers": [...]}.
    write("managed_fields", "keyed-containers", compact({
        "managedFields": [{"manager": "kubectl-edit", "operation": "Update", "time": "2026-11-29T10:00:00Z",
                           "fieldsV1": {"f:spec": {"f:template": {"f:spec": {"f:containers": {
                               "k:{\"name\":\"user-container\"}": {".": {}, "f:image": {}}}}}}}}],
        "object": {"spec": {"template": {"spec": {"containers": [{"name": "queue-proxy", "image": "q"},
                                                                 {"name": "user-container", "image": "u"}]}}}},
        "pointers": ["/spec/template/spec/containers/1/image", "/spec/template/spec/containers/0/image"]}))
    write("managed_fields", "sets-and-indexes", compact({
        "managedFields": [{"manager": "m", "operation": "Apply", "fieldsV1": {"f:spec": {"f:args": {"v:\"--a\"": {}, "i:1": {}}}}}],
        "object": {"spec": {"args": ["--a", "--b"]}}}))
    write("managed_fields", "real-service", compact({"managedFields": service["metadata"].get("managedFields", []), "object": service}))
    write("managed_fields", "configmap", compact({"managedFields": edited["metadata"]["managedFields"], "object": edited,
                                                 "pointers": ["/data/max-scale", "/data", "/data/a~1b", "/"]}))
    write("managed_fields", "wrong-types", compact({"managedFields": [{"manager": 1}, {"fieldsV1": []}], "object": [], "pointers": 3}))

    # diff: [before, after].
    write("diff", "traffic", compact([{"traffic": [{"percent": 100, "revisionName": "a"}]},
                                      {"traffic": [{"percent": 50, "revisionName": "a"}, {"percent": 50, "tag": "b/c~d"}]}]))
    write("diff", "service-spec", compact([service.get("spec"), dict(service.get("spec", {}), extra={"k": "v" * 400})]))
    write("diff", "types-change", compact([{"a": 1, "b": [1, 2], "c": None}, {"a": "1", "b": {"0": 1}, "d": None}]))
    write("diff", "one-side", compact([{"a": {"b": {"c": [1, {"d": 2}]}}}]))
    write("diff", "nul-split", b'{"a":1}\x00{"a":2}')

    # config: YAML text.
    write("config", "shipped", (ROOT / "config" / "drift-sentinel.yaml").read_bytes())
    write("config", "channels", """
defaultCluster: prod
server: {port: 8080, drainTimeout: 5s, queueCapacity: 64, bodyLimitBytes: 4096}
store: {path: /tmp/x.db, retention: 30d}
api: {token: "${API_TOKEN}"}
channels:
  - {name: log, type: log}
  - {name: hook, type: webhook, url: "http://127.0.0.1:1/hook", secret: "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD"}
  - {name: ding, type: dingtalk, url: "https://oapi.dingtalk.com/robot/send?access_token=${DINGTALK}", secret: "${EMPTY}", atMobiles: ["1"]}
  - {name: am, type: alertmanager, urls: ["http://a", "http://b"], resendInterval: 1m}
routes:
  - {match: {class: [config_drift], severity: warning, namespace: "team-*"}, channels: [hook], groupWait: 0s, continue: true}
  - {channels: [ding, am], groupBy: [cluster, name], repeatInterval: 0s}
rules:
  trustedManagers: [argocd-controller]
  classes: {traffic_drift: {grace: 1m, severity: critical, tolerancePercent: 5}}
  silences: [{matchers: {class: orphan}, comment: quiet}]
""")
    write("config", "wrong-types", "server: {port: http, drainTimeout: [1], queueCapacity: -1}\nchannels: 7\nroutes: {a: b}\n")
    write("config", "interpolation", "defaultCluster: ${MISSING}\napi: {token: $${X} ${A} ${}}\n")
    write("config", "anchors", "a: &a [1, 2]\nb: &b [*a, *a]\nc: &c [*b, *b]\nd: [*c, *c]\n")
    write("config", "deep-nesting", "x: " + "[" * 2000 + "]" * 2000 + "\n")

    # cel: the expression, a NUL, the object as JSON.
    def cel(name, expression, obj):
        write("cel", name, expression.encode() + b"\x00" + compact(obj).encode())
    cel("service-traffic", "!has(object.spec.traffic) || object.spec.traffic.all(t, t.percent >= 0 && t.percent <= 100)", service)
    cel("revision-message", "'revision ' + object.metadata.name + ' has ' + string(size(object.metadata.labels)) + ' labels'", revision)
    cel("config-map-matches", "object.data.all(k, k.matches('^[a-z0-9-]+$') && object.data[k] != '')", config_map)
    cel("old-object-update", "oldObject == null || object.metadata.generation >= oldObject.metadata.generation", revision)
    cel("dynamic-pattern", "object.metadata.annotations.all(k, k.matches(object.metadata.annotations[k]))",
        dict(service, metadata=dict(service["metadata"], annotations={"a1": "^a[0-9]$"})))
    # Issue 27: 800 annotations whose values are a pattern over the dynamic size limit (each
    # call charged for its compile, the rule stopped by its budget), and 400 distinct ones.
    hostile = r"^(((\w{1,50}){1,50}){1,20})$"
    cel("hostile-dynamic-pattern", "object.metadata.annotations.all(k, k.matches(object.metadata.annotations[k]))",
        dict(service, metadata=dict(service["metadata"], annotations={f"example.com/key-{i}": hostile for i in range(800)})))
    cel("hostile-distinct-patterns", "object.metadata.annotations.exists(k, k.matches(object.metadata.annotations[k]))",
        dict(service, metadata=dict(service["metadata"], annotations={f"k{i}": f"{hostile}|{i}" for i in range(400)})))
    cel("nested-comprehensions", "object.metadata.labels.all(a, object.metadata.labels.all(b, object.metadata.labels.all(c, a + b + c != '')))", revision)
    cel("deep-brackets", "(" * 200 + "true" + ")" * 200, {})
    cel("not-an-object", "object.kind == 'Fuzz'", [1, 2, 3])


if __name__ == "__main__":
    main()
