"""`drift-sentinel admission export`: what it writes is valid `admissionregistration.k8s.io/v1`
for Kubernetes' own schemas (kubernetes-validate, strict: unknown fields are errors) from 1.30, the
first version with ValidatingAdmissionPolicy v1, to the newest the validator ships; the shipped
Component `k8s/components/admission/` builds into the install from an overlay. The verdicts of the
policies are tested in Rust (tests/it/admission.rs); a validator is also shown a broken copy."""

import copy
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from conftest import ROOT, binary
from test_manifests import K8S, builtin_errors as errors, kustomize

COMPONENT = K8S / "components" / "admission"
LIBRARY = ROOT / "examples" / "invariants" / "knative.yaml"
VERSIONS = ["1.30.0", "1.37.0"]


def export(*args: str) -> list:
    result = subprocess.run(
        [binary(), "admission", "export", "--invariants", str(LIBRARY), "--skip-unexportable", *args],
        capture_output=True, text=True, timeout=60, check=True)
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("action", ["warn", "audit", "deny"])
def test_every_written_object_passes_kubernetes_schemas(version, action):
    objects = export("--protect-managed", "--action", action)
    kinds = sorted({obj["kind"] for obj in objects})
    assert kinds == ["ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"]
    assert len(objects) == 18  # eight rules and protect-managed, a policy and a binding each
    assert [error for obj in objects for error in errors(obj, version)] == []
    for obj in objects:
        assert obj["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "drift-sentinel"
        assert obj["metadata"]["annotations"]["drift-sentinel.dev/rule"]
        if obj["kind"] == "ValidatingAdmissionPolicyBinding":
            actions = obj["spec"]["validationActions"]
            # Kubernetes refuses Deny with Warn (validation.go, validateValidationActions).
            assert not {"Deny", "Warn"} <= set(actions) and len(set(actions)) == len(actions)
        else:
            for validation in obj["spec"]["validations"]:
                assert "\n" not in validation.get("message", "")


@pytest.mark.parametrize("version", VERSIONS)
def test_the_shipped_component_passes_kubernetes_schemas(version):
    objects = [doc for path in sorted(COMPONENT.glob("drift-sentinel-*.yaml"))
               for doc in yaml.safe_load_all(path.read_text()) if doc]
    assert len(objects) == 16
    assert [error for obj in objects for error in errors(obj, version)] == []


@pytest.mark.parametrize("mutate, fragment", [
    (lambda policy: policy["spec"].__setitem__("validation", []), "validation"),
    (lambda policy: policy["spec"]["matchConstraints"]["resourceRules"][0].__setitem__("apiGroups", "x"), "'x'"),
    (lambda policy: policy["spec"]["validations"][0].pop("expression"), "expression"),
], ids=["unknown-field", "wrong-type", "missing-required"])
def test_the_validator_rejects_broken_copies(mutate, fragment):
    policy = copy.deepcopy(next(obj for obj in export() if obj["kind"] == "ValidatingAdmissionPolicy"))
    mutate(policy)
    found = errors(policy, VERSIONS[0])
    assert found and fragment in found[0], found


def test_the_component_builds_into_the_install(tmp_path: Path):
    (tmp_path / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
        f"resources:\n  - {os.path.relpath(K8S, tmp_path)}\n"
        f"components:\n  - {os.path.relpath(COMPONENT, tmp_path)}\n")
    built = kustomize(tmp_path)
    policies = [obj for obj in built if obj["kind"].startswith("ValidatingAdmissionPolicy")]
    assert len(policies) == 16
    # Cluster-scoped: the install's namespace is not put on them.
    assert all("namespace" not in obj["metadata"] for obj in policies)
    assert len(built) - len(policies) == len(kustomize(K8S))


def test_an_export_of_nothing_is_still_a_component_kustomize_builds(tmp_path: Path):
    out = tmp_path / "nothing"
    # The one rule asked for reads status: not exportable, skipped.
    subprocess.run([binary(), "admission", "export", "--invariants", str(LIBRARY), "--rule",
                    "public-services-use-tls", "--skip-unexportable", "--out", str(out)],
                   capture_output=True, text=True, timeout=60, check=True)
    assert sorted(path.name for path in out.iterdir()) == ["kustomization.yaml"]
    assert kustomize(out) == []
