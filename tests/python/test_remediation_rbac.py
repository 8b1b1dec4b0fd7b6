"""Remediation's RBAC: the default install (`k8s/`) grants no write verb to anyone, and the opt-in
kustomize Component `k8s/components/remediation/` grants exactly what its example rules need
(revert and rollback: patch; restore: create; deleteOrphan: delete) on exactly their kinds, to
the sink's service account only; the example rules validate with the shipped config."""

import os
from pathlib import Path

from yaml import safe_load

from test_manifests import (K8S, NAMESPACE, find, guess_plural, kustomize, shipped_config_text,
                            validate_config)

COMPONENT = K8S / "components" / "remediation"
READ_VERBS = {"get", "list", "watch"}
# The verb each action sends (cluster/write.rs sends exactly the planned request).
VERB_OF_ACTION = {"revert": "patch", "rollback": "patch", "restore": "create", "deleteOrphan": "delete"}
ROLE_KINDS = ("ClusterRole", "Role")


def grants(objects: list) -> set:
    """(namespace or None, group, resource, verb) of every Role and ClusterRole rule."""
    granted = set()
    for role in (obj for obj in objects if obj["kind"] in ROLE_KINDS):
        namespace = role["metadata"].get("namespace") if role["kind"] == "Role" else None
        for rule in role.get("rules", []):
            assert set(rule) == {"apiGroups", "resources", "verbs"}, "no resourceNames, URLs or wildcards"
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    for verb in rule["verbs"]:
                        granted.add((namespace, group, resource, verb))
    return granted


def overlay(tmp_path: Path) -> list:
    """The install with the component, as a user's overlay builds it."""
    (tmp_path / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
        f"resources:\n  - {os.path.relpath(K8S, tmp_path)}\n"
        f"components:\n  - {os.path.relpath(COMPONENT, tmp_path)}\n")
    return kustomize(tmp_path)


def needed_by_the_example_rules() -> set:
    section = safe_load((COMPONENT / "example-rules.yaml").read_text())["remediation"]
    # The sender reads the namespace's opt-out annotation before each write.
    needed = {(None, "", "namespaces", "get")}
    for rule in section["rules"]:
        verb = VERB_OF_ACTION[rule["action"]]
        namespaces = rule["match"].get("namespaces") or [None]
        for kind in rule["match"]["kinds"]:
            name, _, group = kind.partition(".")
            for namespace in namespaces:
                needed.add((namespace, group, guess_plural(name), verb))
    return needed


def test_the_default_install_grants_no_write_verb_and_no_namespace_read():
    granted = grants(kustomize(K8S))
    assert granted, "the install has roles"
    writes = {grant for grant in granted if grant[3] not in READ_VERBS}
    assert writes == set(), writes
    assert not any(grant[2] == "namespaces" for grant in granted)


def test_the_component_grants_exactly_what_the_example_rules_send_to_the_sink_only(tmp_path):
    default = grants(kustomize(K8S))
    with_component = overlay(tmp_path)
    added = grants(with_component) - default
    assert added == needed_by_the_example_rules(), added
    assert all(grant[2] != "secrets" for grant in added)
    pod = find(with_component, "StatefulSet", "drift-sentinel")["spec"]["template"]["spec"]
    sink = {"kind": "ServiceAccount", "name": pod["serviceAccountName"], "namespace": NAMESPACE}
    bindings = [obj for obj in with_component
                if obj["kind"] in ("ClusterRoleBinding", "RoleBinding")
                and obj["metadata"]["name"] == "drift-sentinel-remediation"]
    assert len(bindings) == 3, bindings
    for binding in bindings:
        assert binding["subjects"] == [sink], binding
        assert binding["roleRef"]["name"] == "drift-sentinel-remediation", binding
        assert binding["roleRef"]["kind"] == ("Role" if binding["kind"] == "RoleBinding" else "ClusterRole")


def test_the_example_rules_validate_with_the_shipped_config(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text(shipped_config_text() + "\n" + (COMPONENT / "example-rules.yaml").read_text())
    result = validate_config(path)
    assert result.returncode == 0, result.stderr
    broken = tmp_path / "broken.yaml"
    broken.write_text(path.read_text().replace("action: rollback", "action: restore"))
    result = validate_config(broken)
    assert result.returncode != 0
    assert "remediation.rules[2]" in result.stderr, result.stderr
