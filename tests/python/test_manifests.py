"""The deployment artefacts: k8s/ manifests, Prometheus rules, the Dockerfile.

What is checked, and with what:

* `kubectl kustomize k8s/` builds (kubectl's built-in kustomize);
* built-in kinds pass `kubernetes-validate` in strict mode (unknown fields are errors) for the
  oldest and newest Kubernetes versions named below;
* ApiServerSource, Broker and Trigger pass Knative's CRD schemas (copied into
  tests/fixtures/knative-crds/), converted to JSON Schema and closed against unknown fields the
  way Knative's webhooks decode (see that directory's README), plus the webhook rules the schemas
  cannot express; every Knative kind the source watches (opt-in ones included) is a namespaced
  kind its CRD serves and stores at that version, under the plural the adapter and RBAC use;
* the objects reference each other correctly (RBAC covers exactly what the source watches, the
  Trigger reaches the sink's Service, the config path, volume and drain settings agree);
* the ConfigMap's config passes `drift-sentinel config validate` and the binary serves with it;
* `promtool check rules` and `promtool test rules` pass, the PrometheusRule matches the file, and
  the rules and the Grafana dashboard use only metrics the binary exports;
* the Dockerfile builds the way the project builds.

Every validator is also shown a deliberately broken copy and must reject it.
"""

import copy
import json
import os
import re
import shutil
import signal
import subprocess
import time
import tomllib
import urllib.error
import urllib.request
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest
import yaml

from conftest import ROOT, binary, launch, safe_load, safe_load_all
from knative_schema import METADATA_SCHEMA, strict_json_schema

K8S = ROOT / "k8s"
MONITORING = K8S / "monitoring"
RULES_FILE = MONITORING / "drift-sentinel-rules.yaml"
RULES_TESTS = ROOT / "tests" / "prometheus" / "drift-sentinel-rules.test.yaml"
CRD_DIR = ROOT / "tests" / "fixtures" / "knative-crds"
SHARED_SCHEMAS = ROOT.parent / "shared" / "schemas"
NAMESPACE = "drift-sentinel"

# Oldest and newest Kubernetes versions whose schemas kubernetes-validate 1.37.0 ships that we
# check against. 1.32 is the floor: StatefulSet persistentVolumeClaimRetentionPolicy is GA there.
KUBERNETES_VERSIONS = ["1.32.0", "1.37.0"]

CRD_FILES = {
    ("sources.knative.dev/v1", "ApiServerSource"): "sources.knative.dev_apiserversource.yaml",
    ("eventing.knative.dev/v1", "Broker"): "eventing.knative.dev_broker.yaml",
    ("eventing.knative.dev/v1", "Trigger"): "eventing.knative.dev_trigger.yaml",
}


# --- helpers ------------------------------------------------------------------------------------


def kubectl() -> str:
    path = shutil.which("kubectl")
    assert path, "kubectl not found: scripts/test.sh installs Debian's kubernetes-client when it is missing"
    return path


def kustomize(directory: Path) -> list:
    result = subprocess.run(
        [kubectl(), "kustomize", str(directory)], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, f"kubectl kustomize {directory} failed:\n{result.stderr}"
    return [doc for doc in safe_load_all(result.stdout) if doc]


def load_all(path: Path) -> list:
    return [doc for doc in safe_load_all(path.read_text()) if doc]


def find(objects: list, kind: str, name: str, api_version: str = None) -> dict:
    matches = [
        obj
        for obj in objects
        if obj["kind"] == kind
        and obj["metadata"]["name"] == name
        and (api_version is None or obj["apiVersion"] == api_version)
    ]
    assert len(matches) == 1, f"expected one {kind}/{name}, found {len(matches)}"
    return matches[0]


def is_knative(obj: dict) -> bool:
    return (obj["apiVersion"], obj["kind"]) in CRD_FILES


def parse_duration(text: str) -> float:
    """drift-sentinel durations as used in the shipped config: '8s', '20s', '5m', '24h'."""
    match = re.fullmatch(r"(\d+)(ms|s|m|h)", text)
    assert match, f"unsupported duration {text!r} in this test"
    return int(match.group(1)) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[match.group(2)]


ISO_DURATION = re.compile(r"^P(?!$)(\d+D)?(T(?=\d)(\d+H)?(\d+M)?(\d+(\.\d+)?S)?)?$")


def parse_iso_duration(text: str) -> float:
    match = re.fullmatch(r"PT(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?", text)
    assert match and any(match.groups()), f"unsupported ISO-8601 duration {text!r} in this test"
    hours, minutes, seconds = (float(g) if g else 0.0 for g in match.groups())
    return hours * 3600 + minutes * 60 + seconds


def guess_plural(kind: str) -> str:
    """`meta.UnsafeGuessKindToResource`, which the ApiServerSource adapter uses for its watches."""
    lower = kind.lower()
    if lower.endswith("endpoints"):
        return lower
    if lower.endswith("s"):
        return lower + "es"
    if lower.endswith("y"):
        return lower[:-1] + "ies"
    return lower + "s"


def pod_templates(objects: list):
    for obj in objects:
        if obj["kind"] in ("Deployment", "StatefulSet", "DaemonSet", "Job"):
            yield obj, obj["spec"]["template"]["spec"]


def shipped_config_text() -> str:
    return find(load_all(K8S / "config.yaml"), "ConfigMap", "drift-sentinel-config")["data"]["config.yaml"]


# --- Knative CRD schemas as strict JSON Schema --------------------------------------------------
# The conversion lives in knative_schema.py (shared with test_fixtures_schema.py).


def crd_validator(api_version: str, kind: str, crd_dir: Path = CRD_DIR):
    crd = safe_load((crd_dir / CRD_FILES[(api_version, kind)]).read_text())
    assert crd["kind"] == "CustomResourceDefinition"
    assert crd["spec"]["names"]["kind"] == kind
    assert f"{crd['spec']['group']}/v1" == api_version
    version = next(v for v in crd["spec"]["versions"] if v["name"] == "v1")
    assert version["served"] and version["storage"]
    schema = strict_json_schema(version["schema"]["openAPIV3Schema"])
    schema["properties"]["apiVersion"] = {"const": api_version}
    schema["properties"]["kind"] = {"const": kind}
    schema["properties"]["metadata"] = METADATA_SCHEMA
    schema["required"] = sorted(set(schema.get("required", [])) | {"apiVersion", "kind", "metadata", "spec"})
    schema["additionalProperties"] = False
    jsonschema.Draft7Validator.check_schema(schema)
    return jsonschema.Draft7Validator(schema)


def knative_schema_errors(obj: dict) -> list:
    validator = crd_validator(obj["apiVersion"], obj["kind"])
    return [
        f"{obj['kind']}/{obj['metadata'].get('name')}: {'.'.join(map(str, error.absolute_path)) or '<root>'}: {error.message}"
        for error in validator.iter_errors(obj)
    ]


def knative_webhook_errors(obj: dict) -> list:
    """Rules Knative's admission webhooks enforce that the schemas do not express."""
    errors = []
    spec = obj.get("spec", {})

    def check_delivery(delivery, where):
        if delivery is None:
            return
        if "backoffPolicy" in delivery and delivery["backoffPolicy"] not in ("linear", "exponential"):
            errors.append(f"{where}.backoffPolicy: must be linear or exponential")
        for field in ("backoffDelay", "timeout", "retryAfterMax"):
            if field in delivery and not ISO_DURATION.match(str(delivery[field])):
                errors.append(f"{where}.{field}: {delivery[field]!r} is not an ISO-8601 duration")
        if "retry" in delivery and delivery["retry"] < 0:
            errors.append(f"{where}.retry: must be >= 0")
        if "deadLetterSink" in delivery and not (delivery["deadLetterSink"].get("ref") or delivery["deadLetterSink"].get("uri")):
            errors.append(f"{where}.deadLetterSink: needs ref or uri")

    if obj["kind"] == "ApiServerSource":
        if spec.get("mode", "Reference") not in ("Reference", "Resource"):
            errors.append(f"spec.mode: {spec.get('mode')!r} is not Reference or Resource")
        if not spec.get("resources"):
            errors.append("spec.resources: at least one resource is required")
        for index, resource in enumerate(spec.get("resources", [])):
            if not resource.get("apiVersion") or not resource.get("kind"):
                errors.append(f"spec.resources[{index}]: apiVersion and kind are required")
        if not (spec.get("sink", {}).get("ref") or spec.get("sink", {}).get("uri")):
            errors.append("spec.sink: a ref or uri is required")
    if obj["kind"] == "Broker":
        check_delivery(spec.get("delivery"), "spec.delivery")
    if obj["kind"] == "Trigger":
        if not (spec.get("broker") or spec.get("brokerRef")):
            errors.append("spec.broker: required")
        if not (spec.get("subscriber", {}).get("ref") or spec.get("subscriber", {}).get("uri")):
            errors.append("spec.subscriber: a ref or uri is required")
        dialects = {"exact", "prefix", "suffix", "all", "any", "not", "cesql"}
        for index, expression in enumerate(spec.get("filters", [])):
            if len(expression) != 1 or set(expression) - dialects:
                errors.append(f"spec.filters[{index}]: exactly one dialect of {sorted(dialects)}")
        check_delivery(spec.get("delivery"), "spec.delivery")
    return [f"{obj['kind']}/{obj['metadata'].get('name')}: {error}" for error in errors]


def builtin_errors(obj: dict, version: str) -> list:
    try:
        kubernetes_validate.validate(obj, version, strict=True)
    except kubernetes_validate.ValidationError as error:
        path = ".".join(map(str, error.path)) or "<root>"
        return [f"{obj['kind']}/{obj['metadata']['name']}: {path}: {error.message}"]
    except kubernetes_validate.SchemaNotFoundError as error:
        return [f"{obj['kind']}/{obj['metadata']['name']}: {error.message}"]
    return []


# --- fixtures -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def rendered():
    return kustomize(K8S)


@pytest.fixture(scope="module")
def secret_template():
    return load_all(K8S / "channels-secret.example.yaml")


# --- kustomize ----------------------------------------------------------------------------------


def test_kustomize_builds_every_manifest_once(rendered):
    kinds = sorted(f"{obj['kind']}/{obj['metadata']['name']}" for obj in rendered)
    assert kinds == sorted([
        "Namespace/drift-sentinel",
        "ServiceAccount/drift-sentinel-source",
        "ServiceAccount/drift-sentinel",
        "ClusterRole/drift-sentinel-source",
        "ClusterRoleBinding/drift-sentinel-source",
        "ClusterRole/drift-sentinel-resync",
        "ClusterRoleBinding/drift-sentinel-resync",
        "ClusterRoleBinding/drift-sentinel-oidc-discovery",
        "ConfigMap/drift-sentinel-config",
        "Service/drift-sentinel",
        "StatefulSet/drift-sentinel",
        "Deployment/drift-sentinel-dlq",
        "Service/drift-sentinel-dlq",
        "Broker/drift-sentinel",
        "Trigger/drift-sentinel",
        "ApiServerSource/drift-sentinel",
        "NetworkPolicy/drift-sentinel-sink",
        "NetworkPolicy/drift-sentinel-dlq",
    ])
    # Namespaced objects all live in one namespace; the Secret template and the Prometheus
    # Operator objects are not part of the default build.
    for obj in rendered:
        if obj["kind"] not in ("Namespace", "ClusterRole", "ClusterRoleBinding"):
            assert obj["metadata"].get("namespace") == NAMESPACE, obj["metadata"]["name"]
    assert not [obj for obj in rendered if obj["kind"] in ("Secret", "PrometheusRule", "ServiceMonitor")]


def test_kustomize_sets_the_sink_image(rendered):
    kustomization = safe_load((K8S / "kustomization.yaml").read_text())
    image = kustomization["images"][0]
    container = find(rendered, "StatefulSet", "drift-sentinel")["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == f"{image['newName']}:{image['newTag']}"


def test_kustomize_rejects_a_broken_kustomization(tmp_path):
    shutil.copytree(K8S, tmp_path / "k8s")
    (tmp_path / "k8s" / "kustomization.yaml").write_text(
        (K8S / "kustomization.yaml").read_text().replace("- trigger.yaml", "- trigger-missing.yaml")
    )
    result = subprocess.run([kubectl(), "kustomize", str(tmp_path / "k8s")], capture_output=True, text=True)
    assert result.returncode != 0


def test_monitoring_kustomization_builds_operator_objects():
    objects = kustomize(MONITORING)
    assert sorted((obj["apiVersion"], obj["kind"]) for obj in objects) == [
        ("monitoring.coreos.com/v1", "PrometheusRule"),
        ("monitoring.coreos.com/v1", "ServiceMonitor"),
    ]


# --- built-in kinds: kubernetes-validate ----------------------------------------------------------


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_builtin_kinds_pass_kubernetes_validate_strict(rendered, secret_template, version):
    objects = [obj for obj in rendered + secret_template if not is_knative(obj)]
    assert len(objects) == 16
    errors = [error for obj in objects for error in builtin_errors(obj, version)]
    assert errors == []


@pytest.mark.parametrize(
    "mutate, fragment",
    [
        (lambda sts: sts["spec"].__setitem__("replica", 1), "replica"),
        (lambda sts: sts["spec"].__setitem__("replicas", "one"), "'one'"),
        (
            lambda sts: sts["spec"]["template"]["spec"]["containers"][0]["securityContext"].__setitem__("runAsNonroot", True),
            "runAsNonroot",
        ),
        (lambda sts: sts["spec"]["template"]["spec"]["containers"][0].pop("name"), "name"),
    ],
    ids=["unknown-field", "wrong-type", "typo-in-securityContext", "missing-required"],
)
def test_kubernetes_validate_rejects_broken_copies(rendered, mutate, fragment):
    broken = copy.deepcopy(find(rendered, "StatefulSet", "drift-sentinel"))
    mutate(broken)
    errors = builtin_errors(broken, KUBERNETES_VERSIONS[0])
    assert errors and fragment in errors[0], errors


# --- Knative kinds: CRD schemas ---------------------------------------------------------------------


def test_knative_kinds_pass_their_crd_schemas_and_webhook_rules(rendered):
    objects = [obj for obj in rendered if is_knative(obj)]
    assert sorted(obj["kind"] for obj in objects) == ["ApiServerSource", "Broker", "Trigger"]
    errors = [error for obj in objects for error in knative_schema_errors(obj) + knative_webhook_errors(obj)]
    assert errors == []


KNATIVE_BREAKAGES = {
    "trigger-filter-typo": ("Trigger", lambda o: o["spec"]["filters"][0].__setitem__("prefx", {"type": "x"})),
    "trigger-retry-type": ("Trigger", lambda o: o["spec"]["delivery"].__setitem__("retry", "eight")),
    "trigger-delivery-typo": ("Trigger", lambda o: o["spec"]["delivery"].__setitem__("retries", 8)),
    "trigger-subscriber-typo": ("Trigger", lambda o: o["spec"]["subscriber"].__setitem__("refs", {})),
    "trigger-no-namespace": ("Trigger", lambda o: o["metadata"].pop("namespace")),
    "source-no-resources": ("ApiServerSource", lambda o: o["spec"].pop("resources")),
    "source-resource-typo": ("ApiServerSource", lambda o: o["spec"]["resources"][0].__setitem__("apiVersoin", "v1")),
    "source-spec-typo": ("ApiServerSource", lambda o: o["spec"].__setitem__("serviceAccount", "x")),
    "source-selector-type": ("ApiServerSource", lambda o: o["spec"]["resources"][4]["selector"].__setitem__("matchExpressions", "Exists")),
    "broker-ref-typo": ("Broker", lambda o: o["spec"]["delivery"]["deadLetterSink"]["ref"].__setitem__("nmae", "x")),
    "broker-wrong-version": ("Broker", lambda o: o.__setitem__("apiVersion", "eventing.knative.dev/v1beta1")),
}


@pytest.mark.parametrize("case", sorted(KNATIVE_BREAKAGES))
def test_crd_validation_rejects_broken_copies(rendered, case):
    kind, mutate = KNATIVE_BREAKAGES[case]
    broken = copy.deepcopy(next(obj for obj in rendered if obj["kind"] == kind))
    mutate(broken)
    if broken["apiVersion"] != next(obj for obj in rendered if obj["kind"] == kind)["apiVersion"]:
        # A wrong apiVersion has no CRD: check it against the real one.
        validator = crd_validator("eventing.knative.dev/v1", kind)
        assert list(validator.iter_errors(broken))
    else:
        assert knative_schema_errors(broken), f"{case} was accepted"


@pytest.mark.parametrize(
    "kind, mutate",
    [
        ("ApiServerSource", lambda o: o["spec"].__setitem__("mode", "resource")),
        ("ApiServerSource", lambda o: o["spec"].pop("sink")),
        ("Trigger", lambda o: o["spec"]["delivery"].__setitem__("backoffDelay", "0.5s")),
        ("Trigger", lambda o: o["spec"]["delivery"].__setitem__("backoffPolicy", "exp")),
        ("Trigger", lambda o: o["spec"]["filters"][0].__setitem__("exact", {"type": "x"})),
        ("Broker", lambda o: o["spec"]["delivery"].__setitem__("timeout", "10s")),
    ],
    ids=["mode-case", "no-sink", "delay-not-iso", "unknown-policy", "two-dialects", "timeout-not-iso"],
)
def test_webhook_rules_reject_broken_copies(rendered, kind, mutate):
    broken = copy.deepcopy(next(obj for obj in rendered if obj["kind"] == kind))
    mutate(broken)
    assert knative_webhook_errors(broken)


def test_crd_copies_match_the_shared_schemas():
    if not SHARED_SCHEMAS.is_dir():
        pytest.skip("../shared/schemas is not beside this clone (only the in-repo copies are used)")
    files = sorted(path.name for path in CRD_DIR.glob("*.yaml"))
    assert set(CRD_FILES.values()) <= set(files)
    for file in files:
        assert (CRD_DIR / file).read_bytes() == (SHARED_SCHEMAS / file).read_bytes(), file


# --- how the objects fit together -----------------------------------------------------------------


def granted_verbs(role) -> dict:
    """(group, resource) -> verbs of a ClusterRole, which may use no names, URLs or wildcards."""
    granted = {}
    for rule in role["rules"]:
        assert set(rule) == {"apiGroups", "resources", "verbs"}, "no resourceNames, URLs or wildcards"
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                assert "*" not in (group, resource)
                granted.setdefault((group, resource), set()).update(rule["verbs"])
    return granted


WATCHED_BY_DEFAULT = {
    ("serving.knative.dev", "services"),
    ("serving.knative.dev", "configurations"),
    ("serving.knative.dev", "revisions"),
    ("serving.knative.dev", "routes"),
    ("serving.knative.dev", "domainmappings"),
    ("apps", "deployments"),
    ("", "configmaps"),
    ("networking.internal.knative.dev", "ingresses"),
    ("networking.internal.knative.dev", "certificates"),
    ("networking.internal.knative.dev", "serverlessservices"),
    ("autoscaling.internal.knative.dev", "podautoscalers"),
    ("eventing.knative.dev", "brokers"),
    ("eventing.knative.dev", "triggers"),
    ("messaging.knative.dev", "channels"),
    ("messaging.knative.dev", "subscriptions"),
    ("flows.knative.dev", "sequences"),
    ("flows.knative.dev", "parallels"),
    ("sources.knative.dev", "apiserversources"),
    ("sources.knative.dev", "pingsources"),
    ("sources.knative.dev", "sinkbindings"),
    ("sources.knative.dev", "containersources"),
}

# Commented out in apiserversource.yaml and in both ClusterRoles (see the README's install
# section for why each is opt-in).
OPT_IN = {
    ("messaging.knative.dev", "inmemorychannels"),
    ("sinks.knative.dev", "jobsinks"),
    ("eventing.knative.dev", "eventtypes"),
    ("eventing.knative.dev", "eventpolicies"),
    ("operator.knative.dev", "knativeservings"),
    ("operator.knative.dev", "knativeeventings"),
    ("networking.istio.io", "virtualservices"),
    ("networking.istio.io", "destinationrules"),
    ("security.istio.io", "peerauthentications"),
    ("", "namespaces"),
    ("cert-manager.io", "certificates"),
}
# Listed by resync only: the source guesses a kind's resource (`guess_plural`), and Gateway's
# guess, "gatewaies", is served nowhere.
RESYNC_ONLY = {("networking.istio.io", "gateways")}

# Lines of an opt-in entry: a commented-out `- apiVersion:`/`kind:` (source) or
# `- apiGroups:`/`resources:`/`verbs:` (RBAC) line.
OPT_IN_LINE = re.compile(r"^(\s*)# (- apiVersion: |  kind: |- apiGroups: |  resources: |  verbs: )")


def with_opt_ins(text: str) -> str:
    """The manifest with its opt-in entries uncommented, as the README tells users to do."""
    return "\n".join(OPT_IN_LINE.sub(r"\1\2", line) for line in text.splitlines()) + "\n"


def watched_resources(source: dict) -> set:
    return {
        (resource["apiVersion"].rpartition("/")[0], guess_plural(resource["kind"]))
        for resource in source["spec"]["resources"]
    }


def test_rbac_grants_exactly_get_list_watch_on_what_the_source_watches(rendered):
    source = find(rendered, "ApiServerSource", "drift-sentinel")
    watched = set()
    for resource in source["spec"]["resources"]:
        group = resource["apiVersion"].rpartition("/")[0]
        watched.add((group, guess_plural(resource["kind"])))
    assert watched == WATCHED_BY_DEFAULT

    role = find(rendered, "ClusterRole", "drift-sentinel-source")
    granted = granted_verbs(role)
    assert set(granted) == watched
    assert all(verbs == {"get", "list", "watch"} for verbs in granted.values()), granted

    binding = find(rendered, "ClusterRoleBinding", "drift-sentinel-source")
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role["metadata"]["name"]}
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": source["spec"]["serviceAccountName"], "namespace": NAMESPACE}
    ]
    find(rendered, "ServiceAccount", source["spec"]["serviceAccountName"])
    # Nothing else in the install is bound to any role.
    assert [obj["kind"] for obj in rendered if obj["kind"] in ("Role", "RoleBinding")] == []


def test_the_sink_may_only_list_what_the_source_watches(rendered):
    source = find(rendered, "ApiServerSource", "drift-sentinel")
    watched = {
        (resource["apiVersion"].rpartition("/")[0], guess_plural(resource["kind"]))
        for resource in source["spec"]["resources"]
    }
    role = find(rendered, "ClusterRole", "drift-sentinel-resync")
    granted = granted_verbs(role)
    assert set(granted) == watched
    assert all(verbs == {"list"} for verbs in granted.values()), granted
    binding = find(rendered, "ClusterRoleBinding", "drift-sentinel-resync")
    assert binding["roleRef"]["name"] == "drift-sentinel-resync"
    pod = find(rendered, "StatefulSet", "drift-sentinel")["spec"]["template"]["spec"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": pod["serviceAccountName"], "namespace": NAMESPACE}
    ]
    # Bound roles are exactly these two and Kubernetes' read-only issuer discovery (the API
    # server's public signing keys, for OIDC): no other identity in the install can read the
    # cluster.
    bound = sorted(obj["roleRef"]["name"] for obj in rendered if obj["kind"] == "ClusterRoleBinding")
    assert bound == ["drift-sentinel-resync", "drift-sentinel-source", "system:service-account-issuer-discovery"]
    discovery = find(rendered, "ClusterRoleBinding", "drift-sentinel-oidc-discovery")
    assert discovery["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:service-account-issuer-discovery",
    }
    assert discovery["subjects"] == binding["subjects"]
    # The install defines no role of that name that could widen Kubernetes' built-in one.
    assert not [obj for obj in rendered if obj["kind"] == "ClusterRole" and obj["metadata"]["name"].startswith("system:")]


def test_opt_in_kinds_uncommented_are_granted_to_both_roles():
    [source] = [doc for doc in safe_load_all(with_opt_ins((K8S / "apiserversource.yaml").read_text())) if doc]
    rbac = [doc for doc in safe_load_all(with_opt_ins((K8S / "rbac.yaml").read_text())) if doc]
    # The shipped files uncomment into exactly the default kinds plus the opt-in ones.
    assert watched_resources(source) == WATCHED_BY_DEFAULT | OPT_IN
    for role_name, verbs, extra in (("drift-sentinel-source", {"get", "list", "watch"}, set()),
                                    ("drift-sentinel-resync", {"list"}, RESYNC_ONLY)):
        granted = granted_verbs(find(rbac, "ClusterRole", role_name))
        assert set(granted) == WATCHED_BY_DEFAULT | OPT_IN | extra, role_name
        assert all(given == verbs for given in granted.values()), role_name
    # Uncommenting touches nothing else.
    assert with_opt_ins("# - apiVersion: v1\n# Pods stay off.\n") == "- apiVersion: v1\n# Pods stay off.\n"


def knative_crds() -> dict:
    """(group, kind) -> CRD, for every copy in tests/fixtures/knative-crds."""
    crds = {}
    for path in CRD_DIR.glob("*.yaml"):
        crd = safe_load(path.read_text())
        crds[(crd["spec"]["group"], crd["spec"]["names"]["kind"])] = crd
    return crds


def crd_mismatches(resources: list, crds: dict) -> list:
    """Knative resources that name no CRD, a version it does not serve and store, a plural other
    than the adapter's guess (which the RBAC rules use), or a cluster-scoped kind."""
    errors = []
    for resource in resources:
        group, _, version = resource["apiVersion"].rpartition("/")
        if not group.endswith("knative.dev"):
            continue
        crd = crds.get((group, resource["kind"]))
        where = f"{resource['apiVersion']} {resource['kind']}"
        if crd is None:
            errors.append(f"{where}: no CRD in {CRD_DIR.name}")
            continue
        versions = {v["name"]: v for v in crd["spec"]["versions"]}
        if not (version in versions and versions[version]["served"] and versions[version]["storage"]):
            storage = [name for name, v in versions.items() if v["storage"]]
            errors.append(f"{where}: not the served storage version {storage}")
        if crd["spec"]["names"]["plural"] != guess_plural(resource["kind"]):
            errors.append(f"{where}: plural {crd['spec']['names']['plural']} is not the guessed {guess_plural(resource['kind'])}")
        if crd["spec"]["scope"] != "Namespaced":
            errors.append(f"{where}: cluster-scoped")
    return errors


def test_watched_istio_kinds_name_a_served_version_and_the_guessed_plural():
    """The mesh's opt-in kinds are watched at v1beta1, which every Istio release since 1.6 serves
    (v1 only since 1.22, and net-istio itself writes v1beta1); the API server converts."""
    [source] = [doc for doc in safe_load_all(with_opt_ins((K8S / "apiserversource.yaml").read_text())) if doc]
    crds = knative_crds()
    istio = [r for r in source["spec"]["resources"] if r["apiVersion"].rpartition("/")[0].endswith("istio.io")]
    assert len(istio) == 3
    assert guess_plural("Gateway") == "gatewaies", "why Gateways are resync-only"
    for resource in istio:
        group, _, version = resource["apiVersion"].rpartition("/")
        crd = crds[(group, resource["kind"])]
        assert version in {v["name"] for v in crd["spec"]["versions"] if v["served"]}, resource
        assert crd["spec"]["names"]["plural"] == guess_plural(resource["kind"])
        assert crd["spec"]["scope"] == "Namespaced"


def test_watched_knative_kinds_are_served_at_their_storage_version():
    [source] = [doc for doc in safe_load_all(with_opt_ins((K8S / "apiserversource.yaml").read_text())) if doc]
    resources = source["spec"]["resources"]
    knative = [r for r in resources if r["apiVersion"].rpartition("/")[0].endswith("knative.dev")]
    assert len(knative) == len([g for g, _ in WATCHED_BY_DEFAULT | OPT_IN if g.endswith("knative.dev")])
    assert crd_mismatches(resources, knative_crds()) == []


@pytest.mark.parametrize(
    "resource, fragment",
    [
        ({"apiVersion": "eventing.knative.dev/v1beta3", "kind": "EventType"}, "storage version"),
        ({"apiVersion": "sources.knative.dev/v1beta2", "kind": "PingSource"}, "storage version"),
        ({"apiVersion": "networking.internal.knative.dev/v1alpha1", "kind": "KIngress"}, "no CRD"),
        ({"apiVersion": "networking.internal.knative.dev/v1alpha1", "kind": "ClusterDomainClaim"}, "cluster-scoped"),
    ],
    ids=["not-storage", "served-not-storage", "unknown-kind", "cluster-scoped"],
)
def test_crd_check_rejects_broken_resources(resource, fragment):
    crds = knative_crds()
    # ClusterDomainClaim has no copy here; give the check its shape (cluster-scoped).
    crds[("networking.internal.knative.dev", "ClusterDomainClaim")] = {"spec": {
        "names": {"plural": "clusterdomainclaims"}, "scope": "Cluster",
        "versions": [{"name": "v1alpha1", "served": True, "storage": True}],
    }}
    errors = crd_mismatches([resource], crds)
    assert errors and fragment in errors[0], errors


def test_source_watches_knative_serving_in_resource_mode(rendered):
    source = find(rendered, "ApiServerSource", "drift-sentinel")
    spec = source["spec"]
    assert spec["mode"] == "Resource"
    assert spec["namespaceSelector"] == {}
    by_kind = {(r["apiVersion"], r["kind"]): r for r in spec["resources"] if r["kind"] != "ConfigMap"}
    assert by_kind[("apps/v1", "Deployment")]["selector"] == {
        "matchExpressions": [{"key": "serving.knative.dev/revision", "operator": "Exists"}]
    }
    # Every Knative kind whole; only Deployments and ConfigMaps are narrowed by labels.
    for (api_version, kind), resource in by_kind.items():
        if kind != "Deployment":
            assert "selector" not in resource, kind
    assert not [r for r in spec["resources"] if r["kind"] == "Pod"], "Pods stay off"
    # Knative's ConfigMaps by three disjoint selectors (which real ConfigMaps each one selects is
    # checked by the Rust test every_watched_knative_config_map_is_selected_by_exactly_one_...).
    config_maps = [r["selector"] for r in spec["resources"] if r["kind"] == "ConfigMap"]
    assert config_maps == [
        {"matchExpressions": [
            {"key": "app.kubernetes.io/name", "operator": "In", "values": ["knative-serving", "knative-eventing"]},
        ]},
        {"matchExpressions": [
            {"key": "app.kubernetes.io/name", "operator": "DoesNotExist"},
            {"key": "networking.knative.dev/ingress-provider", "operator": "Exists"},
        ]},
        {"matchExpressions": [
            {"key": "app.kubernetes.io/name", "operator": "DoesNotExist"},
            {"key": "networking.knative.dev/ingress-provider", "operator": "DoesNotExist"},
            {"key": "knative.dev/config-category", "operator": "Exists"},
        ]},
    ]
    # The cluster name is set, and agrees with the sink's defaultCluster.
    cluster = spec["ceOverrides"]["extensions"]["cluster"]
    assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", cluster)
    assert safe_load(shipped_config_text())["defaultCluster"] == cluster
    sink = spec["sink"]["ref"]
    find(rendered, sink["kind"], sink["name"], sink["apiVersion"])


def test_trigger_delivers_resource_events_from_the_broker_to_the_sink(rendered):
    trigger = find(rendered, "Trigger", "drift-sentinel")["spec"]
    find(rendered, "Broker", trigger["broker"])
    assert trigger["filters"] == [{"prefix": {"type": "dev.knative.apiserver.resource."}}]
    assert "filter" not in trigger

    subscriber = trigger["subscriber"]["ref"]
    assert (subscriber["apiVersion"], subscriber["kind"]) == ("v1", "Service")
    service = find(rendered, "Service", subscriber["name"], "v1")
    # Knative addresses a Service ref on port 80; it must reach the sink container's port.
    port = next(p for p in service["spec"]["ports"] if p["port"] == 80)
    sink = find(rendered, "StatefulSet", "drift-sentinel")
    assert service["spec"]["selector"].items() <= sink["spec"]["template"]["metadata"]["labels"].items()
    container = sink["spec"]["template"]["spec"]["containers"][0]
    assert port["targetPort"] in [p["name"] for p in container["ports"]]

    delivery = trigger["delivery"]
    assert (delivery["retry"], delivery["backoffPolicy"], delivery["backoffDelay"], delivery["timeout"]) == (
        8, "exponential", "PT0.5S", "PT10S"
    )
    # drift-sentinel answers (503) before the Broker's per-attempt timeout expires.
    request_timeout = parse_duration(safe_load(shipped_config_text())["server"]["requestTimeout"])
    assert request_timeout < parse_iso_duration(delivery["timeout"])


def test_dead_letter_sinks_resolve_to_a_running_service(rendered):
    broker = find(rendered, "Broker", "drift-sentinel")["spec"]["delivery"]
    trigger = find(rendered, "Trigger", "drift-sentinel")["spec"]["delivery"]
    assert broker["retry"] > 0 and broker["backoffPolicy"] == "exponential" and broker["backoffDelay"]
    for delivery in (broker, trigger):
        ref = delivery["deadLetterSink"]["ref"]
        service = find(rendered, ref["kind"], ref["name"], ref["apiVersion"])
        assert service["spec"]["ports"][0]["port"] == 80
        backends = [
            obj for obj, _ in pod_templates(rendered)
            if service["spec"]["selector"].items() <= obj["spec"]["template"]["metadata"]["labels"].items()
        ]
        assert [obj["metadata"]["name"] for obj in backends] == ["drift-sentinel-dlq"]


def test_sink_is_one_warm_replica_with_a_persistent_store(rendered):
    sink = find(rendered, "StatefulSet", "drift-sentinel")
    spec = sink["spec"]
    assert spec["replicas"] == 1
    assert spec["serviceName"] == "drift-sentinel"
    [claim] = spec["volumeClaimTemplates"]
    assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]
    pod = spec["template"]["spec"]
    [container] = pod["containers"]
    mounts = {mount["name"]: mount for mount in container["volumeMounts"]}

    config = safe_load(shipped_config_text())
    store_path = Path(config["store"]["path"])
    assert store_path.is_absolute()
    assert store_path.parent == Path(mounts[claim["metadata"]["name"]]["mountPath"])


def test_sink_config_is_a_directory_mount_that_hot_reload_can_see(rendered):
    sink = find(rendered, "StatefulSet", "drift-sentinel")
    pod = sink["spec"]["template"]["spec"]
    [container] = pod["containers"]
    args = container["args"]
    config_path = Path(args[args.index("--config") + 1])
    volume = next(v for v in pod["volumes"] if "configMap" in v)
    mount = next(m for m in container["volumeMounts"] if m["name"] == volume["name"])
    assert "subPath" not in mount and "subPathExpr" not in mount
    assert "items" not in volume["configMap"]
    assert Path(mount["mountPath"]) == config_path.parent
    configmap = find(rendered, "ConfigMap", volume["configMap"]["name"])
    assert config_path.name in configmap["data"]


def test_sink_probes_resources_and_shutdown(rendered):
    pod = find(rendered, "StatefulSet", "drift-sentinel")["spec"]["template"]["spec"]
    [container] = pod["containers"]
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["resources"]["requests"] == {"cpu": "100m", "memory": "128Mi"}
    assert container["resources"]["limits"] == {"cpu": "1", "memory": "512Mi"}
    drain = parse_duration(safe_load(shipped_config_text())["server"]["drainTimeout"])
    assert pod["terminationGracePeriodSeconds"] > drain
    # The sink's only API calls are resync's lists, with the token of its own service account.
    assert pod["automountServiceAccountToken"] is True


def test_sink_secrets_come_from_an_optional_secret_with_placeholders_only(rendered, secret_template):
    [container] = find(rendered, "StatefulSet", "drift-sentinel")["spec"]["template"]["spec"]["containers"]
    [source] = container["envFrom"]
    [secret] = secret_template
    assert source["secretRef"] == {"name": secret["metadata"]["name"], "optional": True}
    assert set(secret["stringData"]) >= {"DINGTALK_WEBHOOK_URL", "DINGTALK_SECRET", "SLACK_WEBHOOK_URL"}
    assert set(secret["stringData"].values()) == {"REPLACE_ME"}
    assert "data" not in secret
    # Every ${VAR} the shipped config uses (outside comments) is a key of that Secret.
    active = "\n".join(line.split("#", 1)[0] for line in shipped_config_text().splitlines())
    assert set(re.findall(r"(?<!\$)\$\{([A-Za-z_][A-Za-z0-9_]*)\}", active)) <= set(secret["stringData"])


def test_every_pod_meets_the_restricted_pod_security_standard(rendered):
    namespace = find(rendered, "Namespace", NAMESPACE)
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    templates = list(pod_templates(rendered))
    assert len(templates) == 2
    for owner, pod in templates:
        where = owner["metadata"]["name"]
        pod_context = pod.get("securityContext", {})
        assert pod_context.get("runAsNonRoot") is True, where
        assert pod_context.get("seccompProfile") == {"type": "RuntimeDefault"}, where
        assert not pod.get("hostNetwork") and not pod.get("hostPID") and not pod.get("hostIPC"), where
        for volume in pod.get("volumes", []):
            assert "hostPath" not in volume, where
        for container in pod["containers"] + pod.get("initContainers", []):
            context = container["securityContext"]
            assert context["allowPrivilegeEscalation"] is False, where
            assert context["readOnlyRootFilesystem"] is True, where
            assert context["runAsNonRoot"] is True, where
            assert context["capabilities"] == {"drop": ["ALL"]}, where
            assert context["seccompProfile"] == {"type": "RuntimeDefault"}, where
            assert not context.get("privileged"), where
            assert container["resources"]["requests"] and container["resources"]["limits"], where


# --- the shipped config -------------------------------------------------------------------------


def validate_config(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([binary(), "config", "validate", str(path)], capture_output=True, text=True, timeout=60)


def test_configmap_config_passes_config_validate(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text(shipped_config_text())
    result = validate_config(path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().endswith(": ok")


def test_config_validate_rejects_a_broken_copy(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text(shipped_config_text().replace("drainTimeout: 20s", "drainTimeout: soon"))
    result = validate_config(path)
    assert result.returncode != 0
    assert "server.drainTimeout" in result.stderr


EXAMPLES_MARKER = "# --- example channels and routes ---"


def config_with_examples_uncommented(text: str = None) -> str:
    """A config's text (the shipped one by default) with its example block uncommented."""
    head, marker, tail = (shipped_config_text() if text is None else text).partition(EXAMPLES_MARKER)
    assert marker, "the example block's marker line is missing"
    lines = []
    for line in tail.splitlines()[1:]:
        assert line.lstrip().startswith("# ") or not line.strip(), f"not an example line: {line!r}"
        lines.append(line.replace("# ", "", 1))
    return head + "\n".join(lines) + "\n"


def test_example_channels_validate_with_real_secret_values_and_fail_on_placeholders(tmp_path, secret_template):
    path = tmp_path / "config.yaml"
    path.write_text(config_with_examples_uncommented())
    config = safe_load(path.read_text())
    assert {channel["type"] for channel in config["channels"]} >= {"log", "dingtalk", "slack"}
    realistic = {
        "DINGTALK_WEBHOOK_URL": "https://oapi.dingtalk.com/robot/send?access_token=0123456789abcdef",
        "DINGTALK_SECRET": "SEC0123456789abcdef",
        "SLACK_WEBHOOK_URL": "https://hooks.slack.com/services/T000/B000/XXXX",
    }
    [secret] = secret_template
    assert set(realistic) == set(secret["stringData"])
    ok = subprocess.run([binary(), "config", "validate", str(path)], capture_output=True, text=True,
                        env=dict(os.environ, **realistic), timeout=60)
    assert ok.returncode == 0, ok.stderr
    # Uncommented but with the template's placeholders, the pod would refuse to start.
    placeholders = subprocess.run([binary(), "config", "validate", str(path)], capture_output=True, text=True,
                                  env=dict(os.environ, **secret["stringData"]), timeout=60)
    assert placeholders.returncode != 0
    assert "channels[1].url" in placeholders.stderr
    # And without the Secret at all, the missing variable is named.
    env = {key: value for key, value in os.environ.items() if key not in realistic}
    missing = subprocess.run([binary(), "config", "validate", str(path)], capture_output=True, text=True,
                             env=env, timeout=60)
    assert missing.returncode != 0
    assert re.search(r"environment variable (DINGTALK_WEBHOOK_URL|DINGTALK_SECRET|SLACK_WEBHOOK_URL) is not set", missing.stderr)


OIDC_FIXTURES = ROOT / "tests" / "fixtures" / "oidc"
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


class LocalApiServer:
    """The API server's `/openid/v1/jwks` on loopback: like the real one it answers only a caller
    with a service-account token (here the file the config's tokenFile names)."""

    def __init__(self, token: str):
        import http.server
        import threading

        jwks = (OIDC_FIXTURES / "jwks-initial.json").read_bytes()
        self.fetches = 0
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                if self.path != "/openid/v1/jwks" or self.headers.get("Authorization") != f"Bearer {token}":
                    self.send_response(401 if self.path == "/openid/v1/jwks" else 404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                outer.fetches += 1
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(jwks)))
                self.end_headers()
                self.wfile.write(jwks)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def shipped_oidc() -> dict:
    return safe_load(shipped_config_text())["auth"]["oidc"]


def broker_token(subject: str = None, audience: str = None, issuer: str = None) -> str:
    """A token as Knative's broker-filter sends it for the Trigger's subscriber audience (RS256,
    `kid` of the signing key, the Trigger's OIDC service account as `sub`)."""
    import jwt

    oidc = shipped_oidc()
    now = int(time.time())
    claims = {
        "iss": issuer or oidc["issuer"],
        "aud": [audience or oidc["audience"]],
        "sub": subject or oidc["allowedSubjects"][0],
        "iat": now, "nbf": now, "exp": now + 3600,
    }
    key = (OIDC_FIXTURES / "rsa-key-1.pem").read_text()
    return jwt.encode(claims, key, algorithm="RS256", headers={"kid": "rsa-1"})


@pytest.fixture(scope="module")
def shipped_service(tmp_path_factory):
    """The real binary on the shipped config: the store moved to a temp dir, the port from PORT,
    and the OIDC key source (the API server's JWKS, the pod's token and CA) pointed at a local
    stand-in of the API server. Everything else, issuer, audience and allowed subject included, is
    as shipped. Yields the base URL, the log path and the stand-in."""
    tmp_path = tmp_path_factory.mktemp("shipped-config")
    (tmp_path / "token").write_text("sa-token\n")
    api_server = LocalApiServer("sa-token")
    config = shipped_config_text()
    for shipped, local in [
        ("/var/lib/drift-sentinel/drift-sentinel.db", str(tmp_path / "drift-sentinel.db")),
        ("https://kubernetes.default.svc/openid/v1/jwks", api_server.url + "/openid/v1/jwks"),
        (f"{SERVICE_ACCOUNT_DIR}/token", str(tmp_path / "token")),
    ]:
        assert shipped in config, shipped
        config = config.replace(shipped, local)
    # The local stand-in speaks plain HTTP: no CA to trust.
    config, removed = re.subn(rf"\n\s*caFile: {re.escape(SERVICE_ACCOUNT_DIR)}/ca.crt", "", config)
    assert removed == 1
    (tmp_path / "config.yaml").write_text(config)
    process, port, log = launch(tmp_path / "config.yaml", tmp_path / "log", {})
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 20
        while True:
            assert process.poll() is None, (tmp_path / "log").read_text()
            try:
                with urllib.request.urlopen(base + "/readyz", timeout=1) as response:
                    if response.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError, OSError):
                pass
            assert time.monotonic() < deadline, "not ready within 20 s"
            time.sleep(0.05)
        with urllib.request.urlopen(base + "/healthz", timeout=2) as response:
            assert response.status == 200
        yield base, tmp_path / "log", api_server
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)
        log.close()
        api_server.close()
    assert process.returncode == 0, (tmp_path / "log").read_text()


@pytest.fixture(scope="module")
def exported_metrics(shipped_service):
    """The metric sample names /metrics exports after one real event (202) and one that is not
    a CloudEvent (400), so that the labelled metric families have samples."""
    base, _, _ = shipped_service
    event = (ROOT / "examples" / "events" / "revision-update.ce.json").read_bytes()
    assert post(base, event, "application/cloudevents+json", broker_token()) == 202
    assert post(base, b"{}", "application/json", broker_token()) == 400
    with urllib.request.urlopen(base + "/metrics", timeout=2) as response:
        return exported_metric_names(response.read().decode())


def test_the_shipped_config_admits_only_the_triggers_oidc_identity(shipped_service):
    base, log, api_server = shipped_service
    event = (ROOT / "examples" / "events" / "configuration-add.ce.json").read_bytes()
    content_type = "application/cloudevents+json"
    # No token (a cluster without `authentication-oidc`, or a caller that is not the Broker).
    assert post(base, event, content_type) == 401
    # A token for another audience, from another issuer, or of another service account.
    assert post(base, event, content_type, broker_token(audience="eventing.knative.dev/broker/x/y")) == 401
    assert post(base, event, content_type, broker_token(issuer="https://evil.example")) == 401
    assert post(base, event, content_type,
                broker_token(subject="system:serviceaccount:default:default")) == 403
    # The Trigger's own token: accepted, with the keys read from the API server with the pod's token.
    assert post(base, event, content_type, broker_token()) == 202
    assert api_server.fetches >= 1


def test_the_oidc_settings_match_the_trigger_and_the_pod(rendered):
    oidc = shipped_oidc()
    trigger = find(rendered, "Trigger", "drift-sentinel")
    assert oidc["audience"] == trigger["spec"]["subscriber"]["audience"]
    # Knative names a Trigger's OIDC service account <trigger>-oidc-eventing.knative.dev-trigger
    # (knative/eventing pkg/auth/serviceaccount.go) in the Trigger's namespace.
    assert oidc["allowedSubjects"] == [
        f"system:serviceaccount:{trigger['metadata']['namespace']}:"
        f"{trigger['metadata']['name']}-oidc-eventing.knative.dev-trigger"
    ]
    assert oidc["tokenFile"] == f"{SERVICE_ACCOUNT_DIR}/token"
    assert oidc["caFile"] == f"{SERVICE_ACCOUNT_DIR}/ca.crt"
    assert oidc["jwksUrl"].startswith("https://kubernetes.default.svc/")
    pod = find(rendered, "StatefulSet", "drift-sentinel")["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is True


def test_network_policies_admit_only_the_dispatchers_and_prometheus(rendered):
    def namespaces(rule):
        return sorted(peer["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"] for peer in rule["from"])

    for policy_name, workload_kind, workload_name, allowed in [
        ("drift-sentinel-sink", "StatefulSet", "drift-sentinel", ["knative-eventing", "monitoring"]),
        ("drift-sentinel-dlq", "Deployment", "drift-sentinel-dlq", ["knative-eventing"]),
    ]:
        policy = find(rendered, "NetworkPolicy", policy_name)["spec"]
        workload = find(rendered, workload_kind, workload_name)["spec"]["template"]
        labels = workload["metadata"]["labels"]
        assert policy["policyTypes"] == ["Ingress"]
        assert policy["podSelector"]["matchLabels"].items() <= labels.items(), policy_name
        # Selects only that workload's pods.
        others = [
            template["metadata"]["labels"] for obj, _ in pod_templates(rendered)
            if obj["metadata"]["name"] != workload_name
            for template in [obj["spec"]["template"]]
        ]
        assert not [other for other in others if policy["podSelector"]["matchLabels"].items() <= other.items()]
        [rule] = policy["ingress"]
        assert namespaces(rule) == allowed
        # No peer widens it: every peer is a namespace selector alone (no ipBlock, no empty selector).
        assert all(set(peer) == {"namespaceSelector"} for peer in rule["from"])
        ports = {port["containerPort"] for container in workload["spec"]["containers"] for port in container["ports"]}
        assert [port["port"] for port in rule["ports"]] == sorted(ports)


def test_configmap_config_serves_health_readiness_and_metrics(exported_metrics):
    assert {
        "drift_sentinel_events_total",
        "drift_sentinel_ingest_responses_total",
        "drift_sentinel_ingest_errors_total",
    } <= exported_metrics


def unknown_metrics(text: str, exported: set) -> set:
    """drift_sentinel_* names in `text` that the binary does not export: not seen in /metrics,
    and, for a labelled family with no samples yet (store errors, deliveries), not registered in
    src/metrics.rs either. A misspelt name matches neither."""
    registered = set(re.findall(r'register\(\s*"([a-z_]+)"', (ROOT / "src" / "metrics.rs").read_text()))
    used = set(re.findall(r"\bdrift_sentinel_[a-z_]+", text))
    return {
        name for name in used - exported
        if re.sub(r"_(total|bucket|sum|count)$", "", name.removeprefix("drift_sentinel_")) not in registered
    }


def test_alerting_rules_use_only_exported_metrics(exported_metrics):
    assert unknown_metrics(RULES_FILE.read_text(), exported_metrics) == set()


def test_metric_check_catches_a_misspelt_name(exported_metrics):
    assert unknown_metrics("rate(drift_sentinel_event_total[5m])", exported_metrics) == {"drift_sentinel_event_total"}


# Exported only by a replica on PostgreSQL (the writer lease): the shipped config is SQLite, so
# /metrics above never shows them, and the rules may use them on the strength of src/metrics.rs
# alone. A fixed list, so that a name the rules misspell is still caught.
POSTGRES_ONLY_METRICS = {
    "drift_sentinel_writer_lease_held",
    "drift_sentinel_writer_lease_takeovers_total",
    "drift_sentinel_writer_lease_losses_total",
}


def test_postgres_only_metrics_are_registered_and_absent_on_sqlite(exported_metrics):
    registered = set(re.findall(r'register\(\s*"([a-z_]+)"', (ROOT / "src" / "metrics.rs").read_text()))
    for name in POSTGRES_ONLY_METRICS:
        assert re.sub(r"_total$", "", name.removeprefix("drift_sentinel_")) in registered, name
    assert not POSTGRES_ONLY_METRICS & exported_metrics
    # The rules' lease metrics are all on the list (and known to unknown_metrics), and a
    # misspelt lease metric is not.
    used = set(re.findall(r"\bdrift_sentinel_writer_lease_[a-z_]+", RULES_FILE.read_text()))
    assert used and used <= POSTGRES_ONLY_METRICS
    assert unknown_metrics("max(drift_sentinel_writer_lease_hold)", exported_metrics) == {"drift_sentinel_writer_lease_hold"}


def post(base: str, body: bytes, content_type: str, token: str = None) -> int:
    headers = {"Content-Type": content_type}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(base + "/", data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


def exported_metric_names(text: str) -> set:
    """Sample names from `# TYPE` lines (OpenMetrics: counter samples end in `_total`)."""
    names = set()
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[:2] == ["#", "TYPE"]:
            name, kind = parts[2], parts[3]
            names.add(f"{name}_total" if kind == "counter" and not name.endswith("_total") else name)
    return names


# --- Prometheus rules ---------------------------------------------------------------------------


def promtool(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    path = shutil.which("promtool")
    assert path, "promtool not found: scripts/test.sh installs the Debian package prometheus"
    return subprocess.run([path, *args], capture_output=True, text=True, cwd=cwd, timeout=120)


def test_promtool_check_rules_passes():
    result = promtool("check", "rules", str(RULES_FILE))
    assert result.returncode == 0, result.stdout + result.stderr


def test_promtool_check_rules_rejects_a_broken_copy(tmp_path):
    broken = tmp_path / "rules.yaml"
    broken.write_text(RULES_FILE.read_text().replace("up{job=\"drift-sentinel\"} == 0", "up{job=\"drift-sentinel\" == 0", 1))
    result = promtool("check", "rules", str(broken))
    assert result.returncode != 0


def test_promtool_rule_unit_tests_pass():
    result = promtool("test", "rules", str(RULES_TESTS))
    assert result.returncode == 0, result.stdout + result.stderr


def test_promtool_rule_unit_tests_catch_a_changed_threshold(tmp_path):
    (tmp_path / "k8s" / "monitoring").mkdir(parents=True)
    (tmp_path / "tests" / "prometheus").mkdir(parents=True)
    (tmp_path / "k8s" / "monitoring" / RULES_FILE.name).write_text(RULES_FILE.read_text().replace("> 900", "> 9000"))
    shutil.copy(RULES_TESTS, tmp_path / "tests" / "prometheus" / RULES_TESTS.name)
    result = promtool("test", "rules", str(tmp_path / "tests" / "prometheus" / RULES_TESTS.name))
    assert result.returncode != 0


@pytest.mark.parametrize(
    "old, new",
    [
        # Grouping per replica (or per node) would fire for every standby while a writer exists.
        ("max by (job, namespace, shard) (drift_sentinel_writer_lease_held) == 0",
         "max without (pod) (drift_sentinel_writer_lease_held) == 0"),
        ("(changes(drift_sentinel_writer_lease_held[15m])) > 6", "(changes(drift_sentinel_writer_lease_held[15m])) > 2"),
        ("(changes(drift_sentinel_writer_lease_held[15m])) > 6", "(changes(drift_sentinel_writer_lease_held[15m])) > 20"),
    ],
    ids=["no-writer-per-replica", "loop-on-a-rollout", "loop-never"],
)
def test_promtool_rule_unit_tests_catch_changed_lease_alerts(tmp_path, old, new):
    (tmp_path / "k8s" / "monitoring").mkdir(parents=True)
    (tmp_path / "tests" / "prometheus").mkdir(parents=True)
    assert old in RULES_FILE.read_text()
    (tmp_path / "k8s" / "monitoring" / RULES_FILE.name).write_text(RULES_FILE.read_text().replace(old, new))
    shutil.copy(RULES_TESTS, tmp_path / "tests" / "prometheus" / RULES_TESTS.name)
    result = promtool("test", "rules", str(tmp_path / "tests" / "prometheus" / RULES_TESTS.name))
    assert result.returncode != 0


def test_prometheusrule_has_the_same_rules_as_the_rules_file():
    rules = safe_load(RULES_FILE.read_text())
    [rule] = load_all(MONITORING / "prometheusrule.yaml")
    assert (rule["apiVersion"], rule["kind"]) == ("monitoring.coreos.com/v1", "PrometheusRule")
    assert rule["spec"]["groups"] == rules["groups"]


def test_rules_cover_health_and_drifts():
    rules = safe_load(RULES_FILE.read_text())
    alerts = {rule["alert"]: rule for group in rules["groups"] for rule in group["rules"]}
    for metric in (
        "up{",
        "drift_sentinel_deliveries_total",
        "drift_sentinel_outbox_pending",
        "drift_sentinel_outbox_oldest_age_seconds",
        "drift_sentinel_ingest_responses_total",
        "drift_sentinel_ingest_errors_total",
        "drift_sentinel_store_errors_total",
        "drift_sentinel_config_reload_errors_total",
        "drift_sentinel_drifts_firing",
        "drift_sentinel_resync_errors_total",
        "drift_sentinel_writer_lease_held",
    ):
        assert any(metric in rule["expr"] for rule in alerts.values()), metric
    for name, rule in alerts.items():
        assert rule["annotations"]["summary"] and rule["annotations"]["description"], name
        # Alertmanager routes on severity: fixed, or the drift's own for the drift alert.
        assert rule["labels"].get("severity") in ("critical", "warning", "info") or "severity" in rule["expr"], name


def dashboard_exprs() -> list:
    dashboard = json.loads((MONITORING / "grafana-dashboard.json").read_text())
    return [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]


def test_grafana_dashboard_queries_parse_and_use_exported_metrics(tmp_path, exported_metrics):
    exprs = dashboard_exprs()
    assert exprs
    assert unknown_metrics("\n".join(exprs), exported_metrics) == set()
    # promtool checks PromQL syntax when the queries are recording rules (Grafana's variables
    # replaced by plain values).
    # Every variable a query uses is one the dashboard defines (Grafana's own $__rate_interval
    # aside).
    dashboard = json.loads((MONITORING / "grafana-dashboard.json").read_text())
    defined = {variable["name"] for variable in dashboard["templating"]["list"]}
    used = {name for expr in exprs for name in re.findall(r"\$(\w+)", expr)} - {"__rate_interval"}
    assert used <= defined, used - defined
    # The variables' own queries use exported metrics too.
    definitions = [variable["definition"] for variable in dashboard["templating"]["list"] if "definition" in variable]
    assert unknown_metrics("\n".join(definitions), exported_metrics) == set()
    values = {"__rate_interval": "5m", "job": "drift-sentinel", "class": ".*", "namespace": ".*"}

    def substituted(expr: str) -> str:
        return re.sub(r"\$(\w+)", lambda match: values[match.group(1)], expr)

    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"dashboard:query{index}", "expr": substituted(expr)}
        for index, expr in enumerate(exprs)
    ]}]}
    (tmp_path / "dashboard-rules.yaml").write_text(yaml.safe_dump(rules))
    result = promtool("check", "rules", str(tmp_path / "dashboard-rules.yaml"))
    assert result.returncode == 0, result.stdout + result.stderr


# --- the container image ------------------------------------------------------------------------

# What distroless cc-debian12 provides to a dynamically linked binary (glibc, libgcc, libstdc++).
DISTROLESS_CC_LIBRARIES = {
    "linux-vdso.so.1", "libc.so.6", "libm.so.6", "libgcc_s.so.1", "libpthread.so.0", "libdl.so.2",
    "librt.so.1", "libstdc++.so.6", "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1",
}


def dockerfile_instructions() -> list:
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]
    return [tuple(line.split(None, 1)) for line in lines]


def test_dockerfile_builds_with_the_locked_release_command_on_a_nonroot_base(rendered):
    instructions = dockerfile_instructions()
    froms = [args for op, args in instructions if op == "FROM"]
    assert len(froms) == 2
    assert froms[0].startswith("docker.io/library/rust:") and froms[0].split()[0].endswith("-bookworm")
    # The runtime matches the build stage's Debian release (bookworm = Debian 12): glibc versions.
    assert froms[1] == "gcr.io/distroless/cc-debian12:nonroot"
    runs = [args for op, args in instructions if op == "RUN"]
    assert any(re.search(r"(^|\s)cargo build --release --locked(\s|$)", run) for run in runs)
    assert ("USER", "65532:65532") in instructions
    entrypoint = next(args for op, args in instructions if op == "ENTRYPOINT")
    cmd = next(args for op, args in instructions if op == "CMD")
    assert entrypoint == '["/usr/local/bin/drift-sentinel"]'
    assert cmd == '["serve", "--config", "/etc/drift-sentinel/config.yaml"]'
    # The StatefulSet runs the same command.
    [container] = find(rendered, "StatefulSet", "drift-sentinel")["spec"]["template"]["spec"]["containers"]
    assert container["args"] == ["serve", "--config", "/etc/drift-sentinel/config.yaml"]
    assert "command" not in container


def docker_context_paths() -> list:
    """The .dockerignore is an allow-list: `*`, then `!path` entries."""
    lines = [line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()]
    lines = [line for line in lines if line and not line.startswith("#")]
    assert lines[0] == "*" and all(line.startswith("!") for line in lines[1:]), lines
    return [line[1:].rstrip("/") for line in lines[1:]]


def test_docker_context_holds_everything_the_build_stage_copies():
    context = docker_context_paths()
    for op, args in dockerfile_instructions():
        if op == "COPY" and not args.startswith("--from"):
            *sources, _destination = args.split()
            for source in sources:
                assert source.rstrip("/") in context, f"COPY {source} is excluded by .dockerignore"
    # Files compiled into the binary must be inside the context too.
    for path in (ROOT / "src").rglob("*.rs"):
        for target in re.findall(r"include_(?:str|bytes)!\(\s*\"([^\"]+)\"", path.read_text()):
            resolved = (path.parent / target).resolve()
            assert any(resolved.is_relative_to(ROOT / entry) for entry in context), f"{path}: {target}"


def copy_docker_context(destination: Path) -> Path:
    """A copy of what `docker build` sends: only the paths .dockerignore allows."""
    destination.mkdir()
    for entry in docker_context_paths():
        source = ROOT / entry
        if source.is_dir():
            shutil.copytree(source, destination / entry)
        else:
            (destination / entry).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, destination / entry)
    return destination


def binary_sources() -> tuple:
    """The files the binary under test was compiled from, and the directory it was built in.

    Cargo writes a dep-info file beside every binary it builds (`target/debug/drift-sentinel.d`,
    a Makefile rule `binary: source source ...`). It names every file of the local packages that
    went into the binary (every workspace member's sources and the files they `include_*!`),
    never registry crates. The build directory is the nearest directory above all of them that
    holds the Cargo.lock."""
    built = Path(binary()).resolve()
    dep_info = built.with_name(built.name + ".d")
    assert dep_info.is_file(), f"{dep_info} missing: cargo writes it beside the binary it builds"
    rule = next(line for line in dep_info.read_text().splitlines() if line.startswith(f"{built}:"))
    listed = rule[len(f"{built}:"):].strip()
    sources = [Path(part.replace("\\ ", " ")) for part in re.split(r"(?<!\\)\s+", listed) if part]
    assert sources, f"{dep_info} names no source file"
    build_dir = Path(os.path.commonpath(sources))
    while not (build_dir / "Cargo.lock").is_file():
        assert build_dir != build_dir.parent, f"no Cargo.lock above the sources in {dep_info}"
        build_dir = build_dir.parent
    return sources, build_dir


def test_binary_sources_are_read_from_cargos_dep_info():
    sources, build_dir = binary_sources()
    relative = {source.relative_to(build_dir).as_posix() for source in sources}
    # The binary's own entry point, its library and a module deep inside are all named.
    assert {"src/main.rs", "src/lib.rs", "crates/core/src/lib.rs"} <= relative, sorted(relative)[:20]


LIBRARY_KINDS = {"lib", "rlib", "dylib", "cdylib", "staticlib", "proc-macro"}


def test_docker_context_alone_holds_the_manifests_lock_file_and_every_source_of_the_binary(tmp_path):
    """What `cargo build --release --locked` in the Dockerfile's build stage needs, checked
    without compiling: the manifests resolve against the committed lock file, offline, from the
    context alone (every workspace member and target path inside it), and every file the binary
    under test was compiled from is in the context."""
    context = copy_docker_context(tmp_path / "context")
    result = subprocess.run(
        ["cargo", "metadata", "--locked", "--offline", "--format-version", "1"],
        cwd=context, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    metadata = json.loads(result.stdout)
    assert Path(metadata["workspace_root"]) == context
    members = [package for package in metadata["packages"] if package["id"] in metadata["workspace_members"]]
    assert any(target["name"] == "drift-sentinel" and "bin" in target["kind"]
               for package in members for target in package["targets"]), members
    for package in members:
        assert Path(package["manifest_path"]).is_relative_to(context), package["manifest_path"]
        # A target whose file is missing is left out of the metadata silently (while `cargo
        # build` refuses the manifest): every target the manifest declares must be listed.
        manifest = tomllib.loads(Path(package["manifest_path"]).read_text())
        listed = {(kind, target["name"]) for target in package["targets"] for kind in target["kind"]}
        declared = [(kind, entry["name"]) for kind in ("bin", "example", "test", "bench")
                    for entry in manifest.get(kind, [])]
        missing_targets = [f"[[{kind}]] {name}" for kind, name in declared if (kind, name) not in listed]
        assert not missing_targets, f"{package['name']}: targets whose files are not in the context: {missing_targets}"
        if "lib" in manifest:
            assert any(kind in LIBRARY_KINDS for kind, _ in listed), f"{package['name']}: its [lib] is not in the context"
        for target in package["targets"]:
            path = Path(target["src_path"])
            assert path.is_relative_to(context) and path.is_file(), \
                f"{package['name']} target {target['name']}: {path} is not in the context (.dockerignore)"
    sources, build_dir = binary_sources()
    missing = [str(source.relative_to(build_dir)) if source.is_relative_to(build_dir) else str(source)
               for source in sources
               if not (source.is_relative_to(build_dir) and (context / source.relative_to(build_dir)).is_file())]
    assert not missing, f"compiled into the binary but outside the Docker context (.dockerignore): {missing}"


def test_the_binary_needs_only_the_libraries_distroless_cc_has():
    ldd = subprocess.run(["ldd", binary()], capture_output=True, text=True)
    assert ldd.returncode == 0, ldd.stderr
    libraries = {line.split()[0].rsplit("/", 1)[-1] for line in ldd.stdout.splitlines() if line.strip()}
    assert "libc.so.6" in libraries, libraries
    assert libraries <= DISTROLESS_CC_LIBRARIES, f"needs libraries distroless cc lacks: {libraries - DISTROLESS_CC_LIBRARIES}"
