"""The Knative fixtures against Knative's own CRD schemas (tests/fixtures/knative-crds/).

* Every object under tests/fixtures/knative/derived/ (written for the tests, see its README)
  passes the schema of its served API version, **closed**: an undeclared field anywhere is an
  error, as is metadata outside ObjectMeta's shape. A failure names the file, the object and the
  path of the violation.
* The objects copied verbatim from public sources (serving/, eventing/, serving-internal/) pass
  the schema of their API version where a copied CRD still serves it, **open** (the API server
  prunes fields it does not know, and these objects carry fields of older releases). Objects of
  API versions no longer served are listed, so that a change of that set is noticed.
* Within derived/, ownerReferences point at the uid the owner has in the fixtures, and the files
  of one object (same kind, namespace, name and uid) have distinct resourceVersions.
* The validators reject deliberately broken copies.
* When ../shared is beside this clone, the copies still match it byte for byte.
"""

import copy
import json
from pathlib import Path

import pytest

from conftest import ROOT, safe_load, safe_load_all
from knative_schema import CRD_DIR, load_crds, object_validator, violations

FIXTURES = ROOT / "tests" / "fixtures" / "knative"
DERIVED = FIXTURES / "derived"
VERBATIM_DIRS = ("serving", "eventing", "serving-internal")
SHARED = ROOT.parent / "shared"

# The InMemoryChannel README block lacks its `annotations:` line (see the fixtures README); the
# test inserts it to read the object.
IMC_DEMO = "knative-eventing__config-channels-in-memory-channel-README__InMemoryChannel-demo.yaml"

# (apiVersion, kind) of verbatim objects whose API version no copied CRD serves any more.
NOT_SERVED = {
    ("eventing.knative.dev/v1beta1", "Broker"),
    ("eventing.knative.dev/v1beta1", "Trigger"),
    ("messaging.knative.dev/v1beta1", "Channel"),
    ("messaging.knative.dev/v1beta1", "Subscription"),
    ("operator.knative.dev/v1alpha1", "KnativeEventing"),
    ("operator.knative.dev/v1alpha1", "KnativeServing"),
    ("sources.knative.dev/v1alpha1", "ApiServerSource"),
    ("sources.knative.dev/v1alpha1", "SinkBinding"),
    ("sources.knative.dev/v1alpha2", "PingSource"),
    ("sources.knative.dev/v1alpha2", "Source"),
}


@pytest.fixture(scope="module")
def crds():
    return load_crds()


def load_objects(path: Path) -> list:
    """The Kubernetes objects in a fixture file (List kinds expanded)."""
    text = path.read_text()
    if path.name == IMC_DEMO:
        text = text.replace("metadata:\n", "metadata:\n  annotations:\n", 1)
    docs = [json.loads(text)] if path.suffix == ".json" else [d for d in safe_load_all(text) if d]
    objects = []
    for doc in docs:
        if doc.get("kind", "").endswith("List") and "items" in doc:
            objects.extend(doc["items"])
        else:
            objects.append(doc)
    return objects


def derived_files() -> list:
    return sorted(DERIVED.glob("*.yaml"))


def derived_objects() -> list:
    out = []
    for path in derived_files():
        [obj] = load_objects(path)  # one object per file
        out.append((path.name, obj))
    return out


def test_derived_directory_has_the_expected_kinds():
    kinds = {obj["kind"] for _, obj in derived_objects()}
    assert kinds == {
        "PodAutoscaler", "ServerlessService", "Ingress", "Certificate", "DomainMapping",
        "Broker", "Trigger", "Subscription", "Channel", "InMemoryChannel", "Sequence", "Parallel",
        "PingSource", "ApiServerSource", "SinkBinding", "ContainerSource",
        "KnativeServing", "KnativeEventing", "Service", "Route",
    }
    # File names are <kind>-<state>.yaml.
    for name, obj in derived_objects():
        assert name.startswith(obj["kind"].lower() + "-"), name


@pytest.mark.parametrize("name", [p.name for p in derived_files()])
def test_derived_object_passes_its_crd_schema_closed(crds, name):
    [obj] = load_objects(DERIVED / name)
    validator = object_validator(crds, obj["apiVersion"], obj["kind"], closed=True)
    assert validator is not None, f"{name}: no copied CRD serves {obj['apiVersion']} {obj['kind']}"
    assert violations(validator, obj, f"derived/{name}") == []


def verbatim_files() -> list:
    return sorted(p for d in VERBATIM_DIRS for p in (FIXTURES / d).iterdir() if p.suffix in (".yaml", ".json"))


def test_verbatim_objects_pass_their_crd_schema_where_still_served(crds):
    errors, not_served, checked = [], set(), 0
    for path in verbatim_files():
        where = path.relative_to(FIXTURES)
        for obj in load_objects(path):
            validator = object_validator(crds, obj["apiVersion"], obj["kind"], closed=False, metadata={"type": "object"})
            if validator is None:
                not_served.add((obj["apiVersion"], obj["kind"]))
                continue
            checked += 1
            errors += violations(validator, obj, str(where))
    assert errors == []
    assert not_served == NOT_SERVED
    assert checked >= 15, checked


# --- the validators must be able to fail ----------------------------------------------------------


def _set(path, value):
    def mutate(obj):
        node = obj
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
    return mutate


def _delete(path):
    def mutate(obj):
        node = obj
        for key in path[:-1]:
            node = node[key]
        del node[path[-1]]
    return mutate


BREAKAGES = {
    # file, mutation, the path the error must name
    "condition-status-typo": ("podautoscaler-scaled-to-zero.yaml",
                              _set(["status", "conditions", 0, "stauts"], "False"), "status.conditions.0"),
    "condition-without-type": ("trigger-subscriber-unresolved.yaml",
                               _delete(["status", "conditions", 0, "type"]), "status.conditions.0"),
    "scale-as-string": ("podautoscaler-active.yaml", _set(["status", "desiredScale"], "3"), "status.desiredScale"),
    "sks-without-objectref": ("serverlessservice-serve.yaml", _delete(["spec", "objectRef"]), "spec"),
    "kingress-split-port-object": ("ingress-ready.yaml",
                                   _set(["spec", "rules", 0, "http", "paths", 0, "splits", 0, "servicePort"], {"number": 80}),
                                   "spec.rules.0.http.paths.0.splits.0.servicePort"),
    "broker-status-typo": ("broker-ready.yaml", _set(["status", "deadLetterSinkURI"], "http://x"), "status"),
    "trigger-wrong-version": ("trigger-ready.yaml", _set(["apiVersion"], "eventing.knative.dev/v1beta1"), None),
    "operator-version-number": ("knativeserving-upgrade-in-progress.yaml", _set(["status", "version"], 1.22), "status.version"),
    "metadata-typo": ("channel-ready.yaml", _set(["metadata", "ownerReference"], []), "metadata"),
    "managed-fields-operation": ("sequence-ready.yaml", _set(["metadata", "managedFields", 0, "operation"], "Patch"),
                                 "metadata.managedFields.0.operation"),
    "bad-timestamp": ("domainmapping-ready.yaml", _set(["metadata", "creationTimestamp"], "yesterday"),
                      "metadata.creationTimestamp"),
}


@pytest.mark.parametrize("case", sorted(BREAKAGES))
def test_validation_rejects_a_broken_copy(crds, case):
    name, mutate, path = BREAKAGES[case]
    [original] = load_objects(DERIVED / name)
    broken = copy.deepcopy(original)
    mutate(broken)
    validator = object_validator(crds, broken["apiVersion"], broken["kind"], closed=True)
    if validator is None:
        # No CRD serves that version: the object is checked against the real one and fails there.
        validator = object_validator(crds, original["apiVersion"], original["kind"], closed=True)
    found = violations(validator, broken, f"derived/{name}")
    assert found, f"{case}: the broken copy of {name} was accepted"
    assert all(line.startswith(f"derived/{name}: ") for line in found)
    if path is not None:
        assert any(f": {path}: " in line for line in found), found


def test_open_validation_still_rejects_wrong_types(crds):
    [obj] = load_objects(FIXTURES / "serving" / "rguske-github-io__knative-serving-unwrapped__revision-knative-webapp-00001.yaml")
    validator = object_validator(crds, obj["apiVersion"], obj["kind"], closed=False, metadata={"type": "object"})
    assert violations(validator, obj, "x") == []
    broken = copy.deepcopy(obj)
    broken["spec"]["timeoutSeconds"] = "300"
    broken["status"]["unknownField"] = 1  # allowed in open mode (pruned by the API server)
    assert [line.split(": ")[2] for line in violations(validator, broken, "x")] == ["spec.timeoutSeconds"]


# --- consistency within derived/ ------------------------------------------------------------------


def test_owner_references_point_at_the_owners_in_the_fixtures():
    known = {}
    for path in verbatim_files():
        for obj in load_objects(path):
            md = obj["metadata"]
            if "uid" in md:
                known.setdefault((obj["kind"], md.get("namespace"), md["name"]), set()).add(md["uid"])
    for _, obj in derived_objects():
        md = obj["metadata"]
        known.setdefault((obj["kind"], md["namespace"], md["name"]), set()).add(md["uid"])
    checked = 0
    for name, obj in derived_objects():
        for ref in obj["metadata"].get("ownerReferences", []):
            assert ref.get("controller") is True and ref.get("blockOwnerDeletion") is True, name
            owners = known.get((ref["kind"], obj["metadata"]["namespace"], ref["name"]))
            if owners is not None:
                assert ref["uid"] in owners, f"{name}: owner {ref['kind']}/{ref['name']} has uid {owners}, not {ref['uid']}"
                checked += 1
    assert checked >= 10, checked


def test_states_of_one_object_have_distinct_resource_versions():
    seen = {}
    for name, obj in derived_objects():
        md = obj["metadata"]
        key = (obj["kind"], md["namespace"], md["name"], md["uid"])
        rv = md["resourceVersion"]
        assert rv not in seen.setdefault(key, {}), f"{name} and {seen[key].get(rv)} share resourceVersion {rv}"
        seen[key][rv] = name
        assert int(md["resourceVersion"]) > 0
        # observedGeneration never runs ahead of generation.
        if "status" in obj and "observedGeneration" in obj["status"]:
            assert obj["status"]["observedGeneration"] <= md["generation"], name


# --- the copies still match ../shared -------------------------------------------------------------


def test_copies_match_the_shared_originals():
    if not (SHARED / "schemas").is_dir() or not (SHARED / "fixtures" / "knative").is_dir():
        pytest.skip("../shared is not beside this clone (only the in-repo copies are used)")
    for crd in sorted(CRD_DIR.glob("*.yaml")):
        assert crd.read_bytes() == (SHARED / "schemas" / crd.name).read_bytes(), crd.name
    shared_fixtures = SHARED / "fixtures" / "knative"
    for path in sorted(FIXTURES.rglob("*")):
        relative = path.relative_to(FIXTURES)
        if path.is_dir() or relative.parts[0] == "derived" or relative.name == "README.md":
            continue
        assert path.read_bytes() == (shared_fixtures / relative).read_bytes(), str(relative)
    # Every shared file is here.
    for path in sorted(shared_fixtures.rglob("*")):
        if path.is_file() and path.name != "README.md":
            assert (FIXTURES / path.relative_to(shared_fixtures)).is_file(), str(path.relative_to(shared_fixtures))


# --- certificate_expiring's objects ------------------------------------------------------------

CERTIFICATES = ROOT / "tests" / "fixtures" / "certificates"
CM_SPEC = "cert-manager-website__docs-usage-certificate__Certificate-example-com-spec-only.yaml"
CM_STATUS = "cert-manager-issue-7895__Certificate-status-expired-still-Ready.yaml"
KCERT = "knative-serving__config-core-300-knativecertificate__Certificate-routing-serving-certs.yaml"


def certificate_objects() -> list:
    """The Certificates the Rust tests build (tests/it/certificates.rs, the class's unit tests,
    decode/fast.rs, golden/make_certificates.py), built the same way: the documentation's
    cert-manager Certificate with the status of cert-manager issue #7895 (and the failure fields
    the fast-path test adds), its child form owned by a Knative Certificate, the Knative
    manifest, and the derived Knative Certificate with a moved notAfter."""
    cm = safe_load((CERTIFICATES / CM_SPEC).read_text())
    cm["status"] = safe_load((CERTIFICATES / CM_STATUS).read_text())
    cm["metadata"].update(uid="5b0c6a57-0c00-4e8e-9d2a-7c2d3f0e1a01", resourceVersion="100", generation=5,
                          creationTimestamp="2025-05-04T13:50:00Z")
    failing = copy.deepcopy(cm)
    failing["status"].update(failedIssuanceAttempts=2, lastFailureTime="2025-07-03T14:50:04Z")
    [kcert] = load_objects(DERIVED / "certificate-ready.yaml")
    child = copy.deepcopy(cm)
    child["metadata"].update(name=kcert["metadata"]["name"], namespace=kcert["metadata"]["namespace"],
                             uid="5b0c6a57-0c01-4e8e-9d2a-7c2d3f0e1a02")
    child["metadata"]["ownerReferences"] = [{
        "apiVersion": "networking.internal.knative.dev/v1alpha1", "kind": "Certificate",
        "name": kcert["metadata"]["name"], "uid": kcert["metadata"]["uid"],
        "controller": True, "blockOwnerDeletion": True,
    }]
    renewed = copy.deepcopy(kcert)
    renewed["status"]["notAfter"] = "2026-12-09T11:00:00Z"
    shipped = safe_load((CERTIFICATES / KCERT).read_text())
    shipped["metadata"].update(uid="0e5b5c1e-7a43-4a44-b3c5-1d6a8f1e2b3c", resourceVersion="7", generation=1,
                               creationTimestamp="2024-01-25T00:00:00Z")
    return [("cert-manager", cm), ("cert-manager failing", failing), ("cert-manager child", child),
            ("knative renewed", renewed), ("knative shipped", shipped)]


@pytest.mark.parametrize("which", [name for name, _ in certificate_objects()])
def test_certificate_objects_pass_their_crd_schema_closed(crds, which):
    obj = dict(certificate_objects())[which]
    validator = object_validator(crds, obj["apiVersion"], obj["kind"], closed=True)
    assert validator is not None, f"no copied CRD serves {obj['apiVersion']} {obj['kind']}"
    assert violations(validator, obj, which) == []


def test_certificate_validation_rejects_a_broken_status(crds):
    obj = dict(certificate_objects())["cert-manager"]
    validator = object_validator(crds, obj["apiVersion"], obj["kind"], closed=True)
    broken = copy.deepcopy(obj)
    broken["status"]["notAfter"] = 20250802
    broken["status"]["expiresSoon"] = True
    found = violations(validator, broken, "broken")
    assert any("status.notAfter" in line for line in found), found
    assert any("expiresSoon" in line for line in found), found


def test_certificate_copies_match_the_shared_originals():
    shared = SHARED / "fixtures" / "certificates"
    if not shared.is_dir():
        pytest.skip("../shared is not beside this clone (only the in-repo copies are used)")
    names = sorted(p.name for p in shared.iterdir() if p.is_file() and p.name != "README.md")
    assert names == sorted(p.name for p in CERTIFICATES.iterdir() if p.name != "README.md")
    for name in names:
        assert (CERTIFICATES / name).read_bytes() == (shared / name).read_bytes(), name
