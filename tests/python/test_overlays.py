"""The PostgreSQL overlays: k8s-overlays/ha-postgres (a writer and a standby) and
k8s-overlays/sharded (two shards, each a writer and a standby, one Trigger per shard).

Checked like k8s/ (test_manifests.py, whose helpers this reuses): `kubectl kustomize` builds them;
built-in kinds pass `kubernetes-validate` strict for the same Kubernetes versions; Triggers pass the
Trigger CRD's schema and Knative's webhook rules (here also inside nested filter expressions);
every pod meets the restricted Pod Security Standard; each overlay's config passes
`drift-sentinel config validate` (PGPASSWORD set to a dummy value) and differs from the config it
copies only where it must. And what HA and sharding need: replicas and a rollout strategy that can
move the writer role, readiness on /readyz, a PodDisruptionBudget that selects exactly one
Deployment's pods, each shard's Trigger filter agreeing with its `shard.clusters` glob and reaching
that shard's Service, every resource event delivered to exactly one place.

Every validator is also shown a deliberately broken copy and must reject it.

A process test at the end serves the overlays' own configs on the run's throwaway PostgreSQL server
(conftest.py's `pg`): two replicas of the ha-postgres config (one writer, one standby, a graceful
handover), and the east shard's config refusing a west cluster's event with 421 and the west
Trigger's token. (test_ha.py tests failover, fencing and shards in depth on configs of its own.)
"""

import copy
import json
import os
import re
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from conftest import ROOT, binary, launch, safe_load
from test_manifests import (
    K8S,
    KUBERNETES_VERSIONS,
    NAMESPACE,
    LocalApiServer,
    broker_token,
    builtin_errors,
    config_with_examples_uncommented,
    find,
    is_knative,
    knative_schema_errors,
    knative_webhook_errors,
    kubectl,
    kustomize,
    load_all,
    parse_duration,
    pod_templates,
    shipped_config_text,
)

OVERLAYS = ROOT / "k8s-overlays"
HA = OVERLAYS / "ha-postgres"
SHARDED = OVERLAYS / "sharded"
SHARDS = ("east", "west")
SECRET_TEMPLATE = HA / "postgres-secret.example.yaml"
DUMMY_ENV = {"PGPASSWORD": "dummy-password"}
SINK_LABELS = {"app.kubernetes.io/name": "drift-sentinel", "app.kubernetes.io/component": "sink"}
SHARD_LABEL = "drift-sentinel/shard"


@pytest.fixture(scope="module")
def ha():
    return kustomize(HA)


@pytest.fixture(scope="module")
def sharded():
    return kustomize(SHARDED)


@pytest.fixture(scope="module")
def built(ha, sharded):
    return {"ha-postgres": ha, "sharded": sharded}


def config_of(configmap: dict) -> dict:
    return safe_load(configmap["data"]["config.yaml"])


def deployment_config(objects: list, deployment: dict) -> dict:
    """The parsed config.yaml of the ConfigMap a sink Deployment mounts."""
    pod = deployment["spec"]["template"]["spec"]
    [volume] = [v for v in pod["volumes"] if "configMap" in v]
    return config_of(find(objects, "ConfigMap", volume["configMap"]["name"]))


def sinks(objects: list) -> list:
    return [
        obj for obj, _ in pod_templates(objects)
        if SINK_LABELS.items() <= obj["spec"]["template"]["metadata"]["labels"].items()
    ]


def selects(selector: dict, obj: dict) -> bool:
    return selector.items() <= obj["spec"]["template"]["metadata"]["labels"].items()


# --- kustomize ----------------------------------------------------------------------------------

BASE_OBJECTS = [
    "Namespace/drift-sentinel",
    "ServiceAccount/drift-sentinel-source",
    "ServiceAccount/drift-sentinel",
    "ClusterRole/drift-sentinel-source",
    "ClusterRoleBinding/drift-sentinel-source",
    "ClusterRole/drift-sentinel-resync",
    "ClusterRoleBinding/drift-sentinel-resync",
    "ClusterRoleBinding/drift-sentinel-oidc-discovery",
    "Deployment/drift-sentinel-dlq",
    "Service/drift-sentinel-dlq",
    "Broker/drift-sentinel",
    "ApiServerSource/drift-sentinel",
    "NetworkPolicy/drift-sentinel-sink",
    "NetworkPolicy/drift-sentinel-dlq",
]

EXPECTED_OBJECTS = {
    "ha-postgres": BASE_OBJECTS + [
        "ConfigMap/drift-sentinel-config",
        "Service/drift-sentinel",
        "Trigger/drift-sentinel",
        "Deployment/drift-sentinel",
        "PodDisruptionBudget/drift-sentinel",
    ],
    "sharded": BASE_OBJECTS + [
        f"{kind}/{name}-{shard}"
        for shard in SHARDS
        for kind, name in [
            ("ConfigMap", "drift-sentinel-config"),
            ("Service", "drift-sentinel"),
            ("Trigger", "drift-sentinel"),
            ("Deployment", "drift-sentinel"),
            ("PodDisruptionBudget", "drift-sentinel"),
        ]
    ] + ["Trigger/drift-sentinel-unsharded"],
}


@pytest.mark.parametrize("overlay", sorted(EXPECTED_OBJECTS))
def test_overlays_build_every_object_once_in_the_namespace(built, overlay):
    objects = built[overlay]
    assert sorted(f"{obj['kind']}/{obj['metadata']['name']}" for obj in objects) == sorted(EXPECTED_OBJECTS[overlay])
    for obj in objects:
        if obj["kind"] not in ("Namespace", "ClusterRole", "ClusterRoleBinding"):
            assert obj["metadata"].get("namespace") == NAMESPACE, obj["metadata"]["name"]
    # The SQLite StatefulSet and its volume are gone; the Secret templates are not applied.
    assert not [obj for obj in objects if obj["kind"] in ("StatefulSet", "PersistentVolumeClaim", "Secret")]


@pytest.mark.parametrize("overlay", sorted(EXPECTED_OBJECTS))
def test_overlays_set_the_base_image_on_every_sink(built, overlay):
    [image] = safe_load((K8S / "kustomization.yaml").read_text())["images"]
    overlay_images = safe_load((OVERLAYS / overlay / "kustomization.yaml").read_text())["images"]
    assert overlay_images == [image]
    for sink in sinks(built[overlay]):
        [container] = sink["spec"]["template"]["spec"]["containers"]
        assert container["image"] == f"{image['newName']}:{image['newTag']}", sink["metadata"]["name"]


def copy_tree(tmp_path: Path) -> Path:
    """k8s/ and k8s-overlays/ side by side, as in the repository."""
    shutil.copytree(K8S, tmp_path / "k8s")
    shutil.copytree(OVERLAYS, tmp_path / "k8s-overlays")
    return tmp_path / "k8s-overlays"


@pytest.mark.parametrize(
    "file, old, new",
    [
        ("ha-postgres/kustomization.yaml", "  - sink\n", "  - sinks\n"),
        # A delete patch of an object the base does not have fails the build.
        ("ha-postgres/kustomization.yaml", "kind: StatefulSet\n", "kind: StatefulSets\n"),
        ("sharded/kustomization.yaml", "  - west\n", "  - north\n"),
        # Without its target, the delete patch matches three ConfigMaps (without only the label
        # selector, it would delete all three: test_overlays_build_every_object_once catches that).
        ("sharded/kustomization.yaml",
         '  - target:\n      kind: ConfigMap\n      name: drift-sentinel-config\n      labelSelector: "!drift-sentinel/shard"\n    patch: |-\n',
         "  - patch: |-\n"),
    ],
    ids=["missing-directory", "delete-unknown-kind", "unknown-shard", "ambiguous-delete"],
)
def test_kustomize_rejects_broken_overlays(tmp_path, file, old, new):
    overlays = copy_tree(tmp_path)
    path = overlays / file
    assert old in path.read_text()
    path.write_text(path.read_text().replace(old, new))
    result = subprocess.run([kubectl(), "kustomize", str(path.parent)], capture_output=True, text=True, timeout=120)
    assert result.returncode != 0


def test_the_copied_tree_builds_unbroken(tmp_path):
    overlays = copy_tree(tmp_path)
    for overlay in EXPECTED_OBJECTS:
        result = subprocess.run([kubectl(), "kustomize", str(overlays / overlay)], capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stderr


# --- built-in kinds: kubernetes-validate ----------------------------------------------------------


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
@pytest.mark.parametrize("overlay", sorted(EXPECTED_OBJECTS))
def test_builtin_kinds_pass_kubernetes_validate_strict(built, overlay, version):
    objects = [obj for obj in built[overlay] if not is_knative(obj)] + load_all(SECRET_TEMPLATE)
    # Everything but the Knative kinds (ApiServerSource, Broker, the Triggers), plus the template.
    assert len(objects) == len(EXPECTED_OBJECTS[overlay]) - {"ha-postgres": 3, "sharded": 5}[overlay] + 1
    errors = [error for obj in objects for error in builtin_errors(obj, version)]
    assert errors == []


@pytest.mark.parametrize(
    "kind, mutate, fragment",
    [
        ("Deployment", lambda o: o["spec"]["strategy"]["rollingUpdate"].__setitem__("maxUnavaliable", 1), "maxUnavaliable"),
        ("Deployment", lambda o: o["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"].__setitem__("preferred", []), "preferred"),
        ("Deployment", lambda o: o["spec"]["template"]["spec"]["containers"][0]["env"][2]["valueFrom"]["secretKeyRef"].__setitem__("keys", "x"), "keys"),
        ("PodDisruptionBudget", lambda o: o["spec"].__setitem__("minAvaliable", 1), "minAvaliable"),
        ("PodDisruptionBudget", lambda o: o["spec"]["selector"].__setitem__("matchLabels", "sink"), "'sink'"),
    ],
    ids=["strategy-typo", "affinity-typo", "secret-ref-typo", "pdb-typo", "pdb-selector-type"],
)
def test_kubernetes_validate_rejects_broken_copies(ha, kind, mutate, fragment):
    broken = copy.deepcopy(find(ha, kind, "drift-sentinel"))
    mutate(broken)
    errors = builtin_errors(broken, KUBERNETES_VERSIONS[0])
    assert errors and fragment in errors[0], errors


# --- Knative kinds: CRD schemas and webhook rules ------------------------------------------------

DIALECTS = {"exact", "prefix", "suffix", "all", "any", "not", "cesql"}
# Knative validates attribute names in filters as CloudEvents attribute names.
ATTRIBUTE_NAME = re.compile(r"^[a-z0-9]+$")


def filter_errors(expression, where: str) -> list:
    """Knative's webhook rules for one filter expression, nested ones included: exactly one
    dialect; exact/prefix/suffix name attributes (lowercase letters and digits) with non-empty
    string values; all/any hold at least one expression; not holds one."""
    if not isinstance(expression, dict) or len(expression) != 1 or set(expression) - DIALECTS:
        return [f"{where}: exactly one dialect of {sorted(DIALECTS)}"]
    [(dialect, value)] = expression.items()
    if dialect in ("exact", "prefix", "suffix"):
        if not isinstance(value, dict) or not value:
            return [f"{where}.{dialect}: at least one attribute"]
        return [
            f"{where}.{dialect}.{name}: invalid attribute name or empty value"
            for name, text in value.items()
            if not ATTRIBUTE_NAME.match(str(name)) or not isinstance(text, str) or not text
        ]
    if dialect in ("all", "any"):
        if not isinstance(value, list) or not value:
            return [f"{where}.{dialect}: at least one expression"]
        return [error for index, nested in enumerate(value) for error in filter_errors(nested, f"{where}.{dialect}[{index}]")]
    if dialect == "not":
        return filter_errors(value, f"{where}.not")
    return [] if isinstance(value, str) and value else [f"{where}.cesql: an expression"]


def trigger_errors(trigger: dict) -> list:
    errors = knative_schema_errors(trigger) + knative_webhook_errors(trigger)
    for index, expression in enumerate(trigger["spec"].get("filters", [])):
        errors += filter_errors(expression, f"Trigger/{trigger['metadata']['name']}: spec.filters[{index}]")
    return errors


@pytest.mark.parametrize("overlay", sorted(EXPECTED_OBJECTS))
def test_knative_kinds_pass_their_crd_schemas_and_webhook_rules(built, overlay):
    objects = [obj for obj in built[overlay] if is_knative(obj)]
    triggers = {"ha-postgres": 1, "sharded": 3}[overlay]
    assert sorted(obj["kind"] for obj in objects) == sorted(["ApiServerSource", "Broker"] + ["Trigger"] * triggers)
    errors = [
        error for obj in objects
        for error in (trigger_errors(obj) if obj["kind"] == "Trigger" else knative_schema_errors(obj) + knative_webhook_errors(obj))
    ]
    assert errors == []


TRIGGER_BREAKAGES = {
    "filter-typo": ("drift-sentinel-east", lambda t: t["spec"]["filters"][1].__setitem__("prefx", t["spec"]["filters"][1].pop("prefix"))),
    "two-dialects": ("drift-sentinel-east", lambda t: t["spec"]["filters"][1].__setitem__("exact", {"cluster": "east-1"})),
    "empty-prefix": ("drift-sentinel-west", lambda t: t["spec"]["filters"][1]["prefix"].__setitem__("cluster", "")),
    "attribute-name": ("drift-sentinel-west", lambda t: t["spec"]["filters"][1]["prefix"].__setitem__("Cluster", "west-")),
    "nested-typo": ("drift-sentinel-unsharded", lambda t: t["spec"]["filters"][1]["not"]["any"][0].__setitem__("prefixes", {"cluster": "x"})),
    "empty-any": ("drift-sentinel-unsharded", lambda t: t["spec"]["filters"][1]["not"].__setitem__("any", [])),
    "audience-type": ("drift-sentinel-east", lambda t: t["spec"]["subscriber"].__setitem__("audience", ["drift-sentinel-east"])),
}


@pytest.mark.parametrize("case", sorted(TRIGGER_BREAKAGES))
def test_trigger_validation_rejects_broken_copies(sharded, case):
    name, mutate = TRIGGER_BREAKAGES[case]
    broken = copy.deepcopy(find(sharded, "Trigger", name))
    mutate(broken)
    assert trigger_errors(broken), f"{case} was accepted"


# --- restricted Pod Security ------------------------------------------------------------------------


def restricted_errors(owner: dict, pod: dict) -> list:
    """What the restricted Pod Security Standard (and this project's own rules) would refuse."""
    where = owner["metadata"]["name"]
    errors = []
    pod_context = pod.get("securityContext", {})
    if pod_context.get("runAsNonRoot") is not True:
        errors.append(f"{where}: pod runAsNonRoot")
    if pod_context.get("seccompProfile") != {"type": "RuntimeDefault"}:
        errors.append(f"{where}: pod seccompProfile")
    if pod.get("hostNetwork") or pod.get("hostPID") or pod.get("hostIPC"):
        errors.append(f"{where}: host namespaces")
    errors += [f"{where}: hostPath volume" for volume in pod.get("volumes", []) if "hostPath" in volume]
    for container in pod["containers"] + pod.get("initContainers", []):
        context = container.get("securityContext", {})
        for key, expected in [
            ("allowPrivilegeEscalation", False),
            ("readOnlyRootFilesystem", True),
            ("runAsNonRoot", True),
            ("capabilities", {"drop": ["ALL"]}),
            ("seccompProfile", {"type": "RuntimeDefault"}),
        ]:
            if context.get(key) != expected:
                errors.append(f"{where}/{container['name']}: {key}")
        if context.get("privileged"):
            errors.append(f"{where}/{container['name']}: privileged")
        if not (container.get("resources", {}).get("requests") and container.get("resources", {}).get("limits")):
            errors.append(f"{where}/{container['name']}: resources")
    return errors


@pytest.mark.parametrize("overlay", sorted(EXPECTED_OBJECTS))
def test_every_pod_meets_the_restricted_pod_security_standard(built, overlay):
    objects = built[overlay]
    namespace = find(objects, "Namespace", NAMESPACE)
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    templates = list(pod_templates(objects))
    assert len(templates) == {"ha-postgres": 2, "sharded": 3}[overlay]
    assert [error for owner, pod in templates for error in restricted_errors(owner, pod)] == []


@pytest.mark.parametrize(
    "mutate",
    [
        lambda pod: pod["containers"][0]["securityContext"].pop("readOnlyRootFilesystem"),
        lambda pod: pod["securityContext"].__setitem__("runAsNonRoot", False),
        lambda pod: pod["volumes"].append({"name": "host", "hostPath": {"path": "/"}}),
        lambda pod: pod["containers"][0]["securityContext"]["capabilities"].__setitem__("add", ["NET_ADMIN"]),
    ],
    ids=["writable-root", "root", "host-path", "capability"],
)
def test_pod_security_check_rejects_broken_copies(ha, mutate):
    deployment = copy.deepcopy(find(ha, "Deployment", "drift-sentinel"))
    mutate(deployment["spec"]["template"]["spec"])
    assert restricted_errors(deployment, deployment["spec"]["template"]["spec"])


# --- the configs ----------------------------------------------------------------------------------


def overlay_configs(objects: list) -> dict:
    return {
        sink["metadata"]["name"]: deployment_config(objects, sink)
        for sink in sinks(objects)
    }


def validate(text: str, tmp_path: Path, env: dict = DUMMY_ENV) -> subprocess.CompletedProcess:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    clean = {key: value for key, value in os.environ.items() if key != "PGPASSWORD"}
    return subprocess.run([binary(), "config", "validate", str(path)], capture_output=True, text=True,
                          env=dict(clean, **env), timeout=60)


def configmap_texts(objects: list) -> dict:
    return {
        sink["metadata"]["name"]: find(
            objects, "ConfigMap",
            next(v for v in sink["spec"]["template"]["spec"]["volumes"] if "configMap" in v)["configMap"]["name"],
        )["data"]["config.yaml"]
        for sink in sinks(objects)
    }


@pytest.mark.parametrize("overlay", sorted(EXPECTED_OBJECTS))
def test_each_overlay_config_passes_config_validate(built, overlay, tmp_path):
    texts = configmap_texts(built[overlay])
    assert len(texts) == {"ha-postgres": 1, "sharded": 2}[overlay]
    for name, text in texts.items():
        result = validate(text, tmp_path)
        assert result.returncode == 0, f"{name}: {result.stderr}"
        assert result.stdout.strip().endswith(": ok")
        # Without the Secret's variable the pod would not start, and the variable is named.
        missing = validate(text, tmp_path, env={})
        assert missing.returncode != 0
        assert "PGPASSWORD is not set" in missing.stderr, missing.stderr


def test_shard_example_channels_share_names_and_use_each_shards_own_robot(sharded, tmp_path):
    """The README's advice for channels in shards, as the shipped examples show it: the same
    channel names in every shard, each shard's robot through variables of its own."""
    urls = {}
    for shard in SHARDS:
        text = find(sharded, "ConfigMap", f"drift-sentinel-config-{shard}")["data"]["config.yaml"]
        uncommented = config_with_examples_uncommented(text)
        config = safe_load(uncommented)
        urls[shard] = {channel["name"]: channel.get("url") for channel in config["channels"]}
        up = shard.upper()
        env = dict(DUMMY_ENV, **{
            f"DINGTALK_{up}_WEBHOOK_URL": "https://oapi.dingtalk.com/robot/send?access_token=0123456789abcdef",
            f"DINGTALK_{up}_SECRET": "SEC0123456789abcdef",
            "SLACK_WEBHOOK_URL": "https://hooks.slack.com/services/T000/B000/XXXX",
        })
        result = validate(uncommented, tmp_path, env)
        assert result.returncode == 0, f"{shard}: {result.stderr}"
    assert set(urls["east"]) == set(urls["west"]), urls
    assert urls["east"]["ops-dingtalk"] != urls["west"]["ops-dingtalk"], urls


@pytest.mark.parametrize(
    "old, new, key",
    [
        ("renewInterval: 2s", "renewInterval: 6s", "store.lease.renewInterval"),
        ("ttl: 10s", "ttl: 1s", "store.lease.ttl"),
        ('clusters: ["east-*"]', "clusters: []", "shard.clusters"),
        ("  name: east\n", "  name: East\n", "shard.name"),
    ],
    ids=["renew-above-half-ttl", "ttl-too-short", "no-globs", "shard-name-case"],
)
def test_config_validate_rejects_broken_copies(sharded, tmp_path, old, new, key):
    text = configmap_texts(sharded)["drift-sentinel-east"]
    assert old in text
    result = validate(text.replace(old, new), tmp_path)
    assert result.returncode != 0
    assert key in result.stderr, result.stderr


def test_the_ha_config_on_sqlite_is_refused(ha, tmp_path):
    """`store.lease` is PostgreSQL's: the same config with a SQLite path does not validate, so a
    half-edited store section is caught."""
    text = configmap_texts(ha)["drift-sentinel"]
    url = re.search(r"\n  url: .*\n", text).group(0)
    result = validate(text.replace(url, "\n  path: /tmp/drift-sentinel.db\n"), tmp_path)
    assert result.returncode != 0
    assert "store.lease" in result.stderr or "store.password" in result.stderr, result.stderr


def config_differences(copy_config: dict, original: dict, allowed: set, path: str = "") -> list:
    """Key paths where `copy_config` differs from `original`, except under the `allowed` paths."""
    if path in allowed:
        return []
    if isinstance(copy_config, dict) and isinstance(original, dict):
        return [
            difference
            for key in sorted(set(copy_config) | set(original))
            for difference in config_differences(
                copy_config.get(key), original.get(key), allowed, f"{path}.{key}" if path else key
            )
        ]
    return [] if copy_config == original else [path or "<root>"]


SHARD_KEYS = {"shard", "auth.oidc.audience", "auth.oidc.allowedSubjects", "rules.ownPipeline", "defaultCluster", "resync.enabled"}


def test_overlay_configs_differ_from_the_base_only_where_they_must(ha, sharded):
    base = safe_load(shipped_config_text())
    ha_config = config_of(find(ha, "ConfigMap", "drift-sentinel-config"))
    assert config_differences(ha_config, base, {"store"}) == []
    assert ha_config["store"]["dedupRetention"] == base["store"]["dedupRetention"]
    for shard in SHARDS:
        config = config_of(find(sharded, "ConfigMap", f"drift-sentinel-config-{shard}"))
        assert config_differences(config, ha_config, SHARD_KEYS) == [], shard
        # Every shard uses the same database.
        assert config["store"] == ha_config["store"]


def test_config_comparison_catches_a_drifted_copy(ha):
    ha_config = config_of(find(ha, "ConfigMap", "drift-sentinel-config"))
    drifted = copy.deepcopy(ha_config)
    drifted["server"]["requestTimeout"] = "9s"
    drifted["rules"]["watchedConfigMaps"].pop()
    assert config_differences(drifted, ha_config, SHARD_KEYS) == ["rules.watchedConfigMaps", "server.requestTimeout"]


def test_ca_file_line_validates_and_names_the_mounted_secret_key(ha, tmp_path):
    """store.caFile is commented out (the Secret's ca.crt is optional); uncommented, it validates
    and names the file the Secret volume projects."""
    text = configmap_texts(ha)["drift-sentinel"]
    commented = re.search(r"\n  # caFile: (\S+)\n", text)
    assert commented
    result = validate(text.replace(commented.group(0), f"\n  caFile: {commented.group(1)}\n"), tmp_path)
    assert result.returncode == 0, result.stderr
    pod = find(ha, "Deployment", "drift-sentinel")["spec"]["template"]["spec"]
    [volume] = [v for v in pod["volumes"] if "secret" in v]
    [mount] = [m for m in pod["containers"][0]["volumeMounts"] if m["name"] == volume["name"]]
    [item] = volume["secret"]["items"]
    assert volume["secret"]["optional"] is True
    assert Path(commented.group(1)) == Path(mount["mountPath"]) / item["path"]
    [secret] = load_all(SECRET_TEMPLATE)
    assert volume["secret"]["secretName"] == secret["metadata"]["name"]
    assert item["key"] in secret["stringData"]


# --- the sink Deployments -----------------------------------------------------------------------


def deployment_errors(objects: list, deployment: dict) -> list:
    """What a replica set of writer and standbys needs from its Deployment."""
    errors = []
    name = deployment["metadata"]["name"]
    spec = deployment["spec"]
    pod = spec["template"]["spec"]
    [container] = pod["containers"]
    config = deployment_config(objects, deployment)
    replicas = spec.get("replicas", 1)
    if replicas < 2:
        errors.append(f"{name}: {replicas} replica(s): no standby")
    # Only the writer is Ready: the rollout must be allowed to stop every old pod before any new
    # one is Ready, or it never finishes.
    strategy = spec.get("strategy", {})
    unavailable = strategy.get("rollingUpdate", {}).get("maxUnavailable", "25%")
    if strategy.get("type") != "Recreate" and unavailable not in ("100%", replicas) and not (
        isinstance(unavailable, int) and unavailable >= replicas
    ):
        errors.append(f"{name}: maxUnavailable {unavailable} makes a rollout wait for a standby to become Ready")
    if container.get("readinessProbe", {}).get("httpGet", {}).get("path") != "/readyz":
        errors.append(f"{name}: readiness is not /readyz")
    if container.get("livenessProbe", {}).get("httpGet", {}).get("path") != "/healthz":
        errors.append(f"{name}: liveness is not /healthz (a standby must stay alive)")
    drain = parse_duration(config["server"]["drainTimeout"])
    if not pod.get("terminationGracePeriodSeconds", 30) > drain:
        errors.append(f"{name}: terminationGracePeriodSeconds not above server.drainTimeout")
    env = {item["name"]: item for item in container.get("env", [])}
    if env.get("POD_NAME", {}).get("valueFrom") != {"fieldRef": {"fieldPath": "metadata.name"}}:
        errors.append(f"{name}: POD_NAME is not the pod's name")
    password = re.fullmatch(r"\$\{(\w+)\}", str(config["store"].get("password", "")))
    if not password or "secretKeyRef" not in env.get(password.group(1), {}).get("valueFrom", {}):
        errors.append(f"{name}: store.password does not come from a Secret's key")
    if "volumeClaimTemplates" in spec or any("persistentVolumeClaim" in v for v in pod.get("volumes", [])):
        errors.append(f"{name}: a data volume (the store is PostgreSQL)")
    tmp = [m for m in container.get("volumeMounts", []) if m["mountPath"] == "/tmp"]
    if not tmp or "emptyDir" not in next((v for v in pod["volumes"] if v["name"] == tmp[0]["name"]), {}):
        errors.append(f"{name}: no emptyDir at /tmp")
    terms = pod.get("affinity", {}).get("podAntiAffinity", {}).get("preferredDuringSchedulingIgnoredDuringExecution", [])
    if not any(
        term["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
        and selects(term["podAffinityTerm"]["labelSelector"]["matchLabels"], deployment)
        for term in terms
    ):
        errors.append(f"{name}: no preferred anti-affinity of its own pods across nodes")
    if "url" not in config["store"] or "path" in config["store"]:
        errors.append(f"{name}: the store is not PostgreSQL")
    return errors


@pytest.mark.parametrize("overlay", sorted(EXPECTED_OBJECTS))
def test_sink_deployments_run_a_writer_and_a_standby(built, overlay):
    objects = built[overlay]
    deployments = sinks(objects)
    assert [d["kind"] for d in deployments] == ["Deployment"] * {"ha-postgres": 1, "sharded": 2}[overlay]
    assert [error for deployment in deployments for error in deployment_errors(objects, deployment)] == []


@pytest.mark.parametrize(
    "mutate, fragment",
    [
        (lambda d: d["spec"].__setitem__("replicas", 1), "no standby"),
        (lambda d: d["spec"].pop("strategy"), "maxUnavailable 25%"),
        (lambda d: d["spec"]["strategy"]["rollingUpdate"].__setitem__("maxUnavailable", 1), "maxUnavailable 1"),
        (lambda d: d["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["httpGet"].__setitem__("path", "/healthz"), "readiness"),
        (lambda d: d["spec"]["template"]["spec"]["containers"][0]["livenessProbe"]["httpGet"].__setitem__("path", "/readyz"), "liveness"),
        (lambda d: d["spec"]["template"]["spec"].__setitem__("terminationGracePeriodSeconds", 20), "terminationGracePeriodSeconds"),
        (lambda d: d["spec"]["template"]["spec"]["containers"][0]["env"].pop(1), "POD_NAME"),
        (lambda d: d["spec"]["template"]["spec"]["containers"][0]["env"].pop(2), "store.password"),
        (lambda d: d["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]["podAffinityTerm"]["labelSelector"]["matchLabels"].__setitem__("app.kubernetes.io/component", "dlq"), "anti-affinity"),
    ],
    ids=["one-replica", "default-strategy", "max-unavailable-1", "readiness-healthz", "liveness-readyz",
         "short-grace", "no-pod-name", "no-password", "anti-affinity-elsewhere"],
)
def test_deployment_check_rejects_broken_copies(ha, mutate, fragment):
    broken = copy.deepcopy(find(ha, "Deployment", "drift-sentinel"))
    mutate(broken)
    errors = deployment_errors(ha, broken)
    assert errors and any(fragment in error for error in errors), errors


def test_the_password_secret_template_has_placeholders_only(ha):
    [secret] = load_all(SECRET_TEMPLATE)
    [container] = find(ha, "Deployment", "drift-sentinel")["spec"]["template"]["spec"]["containers"]
    [reference] = [item["valueFrom"]["secretKeyRef"] for item in container["env"] if item["name"] == "PGPASSWORD"]
    assert reference["name"] == secret["metadata"]["name"] and reference["key"] in secret["stringData"]
    assert reference.get("optional") is not True
    assert set(secret["stringData"].values()) == {"REPLACE_ME"}
    assert "data" not in secret
    # Not applied by the overlay.
    kustomization = safe_load((HA / "kustomization.yaml").read_text())
    assert SECRET_TEMPLATE.name not in kustomization["resources"]


def pdb_errors(objects: list, pdb: dict) -> list:
    """A budget must select the pods of exactly one sink Deployment (both replicas, nothing else)
    and keep its one Ready pod, the writer."""
    name = pdb["metadata"]["name"]
    selector = pdb["spec"]["selector"]["matchLabels"]
    selected = [obj["metadata"]["name"] for obj, _ in pod_templates(objects) if selects(selector, obj)]
    errors = []
    if len(selected) != 1 or selected[0] not in [d["metadata"]["name"] for d in sinks(objects)]:
        errors.append(f"{name}: selects {selected or 'no pods'}, not one sink Deployment's")
    if pdb["spec"].get("minAvailable") != 1 or "maxUnavailable" in pdb["spec"]:
        errors.append(f"{name}: not minAvailable 1")
    if pdb["spec"].get("unhealthyPodEvictionPolicy") != "AlwaysAllow":
        errors.append(f"{name}: a drain would wait at a standby")
    return errors


@pytest.mark.parametrize("overlay", sorted(EXPECTED_OBJECTS))
def test_each_sink_has_a_disruption_budget_over_its_own_pods(built, overlay):
    objects = built[overlay]
    pdbs = [obj for obj in objects if obj["kind"] == "PodDisruptionBudget"]
    assert [error for pdb in pdbs for error in pdb_errors(objects, pdb)] == []
    covered = sorted(
        obj["metadata"]["name"] for pdb in pdbs for obj, _ in pod_templates(objects)
        if selects(pdb["spec"]["selector"]["matchLabels"], obj)
    )
    assert covered == sorted(d["metadata"]["name"] for d in sinks(objects))


@pytest.mark.parametrize(
    "mutate, fragment",
    [
        (lambda p: p["spec"]["selector"]["matchLabels"].__setitem__("app.kubernetes.io/component", "snk"), "no pods"),
        (lambda p: p["spec"]["selector"]["matchLabels"].pop(SHARD_LABEL), "selects ["),
        (lambda p: p["spec"].__setitem__("maxUnavailable", 1), "minAvailable"),
        (lambda p: p["spec"].pop("unhealthyPodEvictionPolicy"), "standby"),
    ],
    ids=["selector-typo", "both-shards", "max-unavailable", "default-eviction-policy"],
)
def test_pdb_check_rejects_broken_copies(sharded, mutate, fragment):
    broken = copy.deepcopy(find(sharded, "PodDisruptionBudget", "drift-sentinel-east"))
    mutate(broken)
    errors = pdb_errors(sharded, broken)
    assert errors and any(fragment in error for error in errors), errors


# --- how events reach the writers -----------------------------------------------------------------


def service_backends(objects: list, service: dict) -> list:
    return [obj["metadata"]["name"] for obj, _ in pod_templates(objects) if selects(service["spec"]["selector"], obj)]


def subscriber_errors(objects: list, trigger: dict) -> list:
    """The Trigger's subscriber is a Service on port 80 whose pods are one sink Deployment's, and
    that sink's OIDC audience and subject are this Trigger's."""
    name = trigger["metadata"]["name"]
    ref = trigger["spec"]["subscriber"]["ref"]
    services = [obj for obj in objects if obj["kind"] == "Service" and obj["metadata"]["name"] == ref["name"]]
    if (ref["apiVersion"], ref["kind"]) != ("v1", "Service") or len(services) != 1:
        return [f"{name}: subscriber {ref['kind']}/{ref['name']} is no Service here"]
    [service] = services
    backends = service_backends(objects, service)
    deployments = {d["metadata"]["name"]: d for d in sinks(objects)}
    if len(backends) != 1 or backends[0] not in deployments:
        return [f"{name}: Service {ref['name']} reaches {backends or 'no pods'}, not one sink"]
    deployment = deployments[backends[0]]
    errors = []
    port = next((p for p in service["spec"]["ports"] if p["port"] == 80), None)
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    if port is None or port["targetPort"] not in [p["name"] for p in container["ports"]]:
        errors.append(f"{name}: Service {ref['name']} port 80 does not reach the sink's port")
    oidc = deployment_config(objects, deployment)["auth"]["oidc"]
    if oidc["audience"] != trigger["spec"]["subscriber"].get("audience"):
        errors.append(f"{name}: audience is not {deployment['metadata']['name']}'s auth.oidc.audience")
    subject = f"system:serviceaccount:{trigger['metadata']['namespace']}:{name}-oidc-eventing.knative.dev-trigger"
    if oidc["allowedSubjects"] != [subject]:
        errors.append(f"{name}: {deployment['metadata']['name']} does not admit the Trigger's identity {subject}")
    own = deployment_config(objects, deployment).get("rules", {}).get("ownPipeline", {})
    if own.get("trigger", "drift-sentinel") != name or own.get("service", "drift-sentinel") != ref["name"]:
        errors.append(f"{name}: rules.ownPipeline of {deployment['metadata']['name']} names another Trigger or Service")
    return errors


@pytest.mark.parametrize("overlay", sorted(EXPECTED_OBJECTS))
def test_every_sink_trigger_reaches_one_sinks_writer(built, overlay):
    objects = built[overlay]
    triggers = [
        obj for obj in objects
        if obj["kind"] == "Trigger" and obj["spec"]["subscriber"]["ref"]["name"] != "drift-sentinel-dlq"
    ]
    assert len(triggers) == len(sinks(objects))
    assert [error for trigger in triggers for error in subscriber_errors(objects, trigger)] == []
    # Each sink gets one Trigger.
    reached = sorted(
        service_backends(objects, find(objects, "Service", t["spec"]["subscriber"]["ref"]["name"]))[0] for t in triggers
    )
    assert reached == sorted(d["metadata"]["name"] for d in sinks(objects))


@pytest.mark.parametrize(
    "mutate, fragment",
    [
        (lambda t: t["spec"]["subscriber"]["ref"].__setitem__("name", "drift-sentinel"), "no Service"),
        (lambda t: t["spec"]["subscriber"]["ref"].__setitem__("name", "drift-sentinel-west"), "audience"),
        (lambda t: t["spec"]["subscriber"].__setitem__("audience", "drift-sentinel"), "audience"),
        (lambda t: t["metadata"].__setitem__("name", "drift-sentinel-east2"), "identity"),
    ],
    ids=["base-service", "other-shard", "wrong-audience", "renamed"],
)
def test_subscriber_check_rejects_broken_copies(sharded, mutate, fragment):
    broken = copy.deepcopy(find(sharded, "Trigger", "drift-sentinel-east"))
    mutate(broken)
    errors = subscriber_errors(sharded, broken)
    assert errors and any(fragment in error for error in errors), errors


def glob_matches(pattern: str, text: str) -> bool:
    """drift-sentinel's globs: `*` any run of characters, `?` one, everything else itself."""
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, text, re.DOTALL) is not None


def filter_matches(expression: dict, event: dict) -> bool:
    """Knative's evaluation of a filter expression on an event's attributes."""
    [(dialect, value)] = expression.items()
    if dialect in ("exact", "prefix", "suffix"):
        test = {"exact": str.__eq__, "prefix": str.startswith, "suffix": str.endswith}[dialect]
        return all(name in event and test(event[name], wanted) for name, wanted in value.items())
    if dialect == "all":
        return all(filter_matches(nested, event) for nested in value)
    if dialect == "any":
        return any(filter_matches(nested, event) for nested in value)
    if dialect == "not":
        return not filter_matches(value, event)
    raise AssertionError(f"dialect {dialect} is not simulated here")


def trigger_matches(trigger: dict, event: dict) -> bool:
    return all(filter_matches(expression, event) for expression in trigger["spec"].get("filters", []))


def shard_prefix(trigger: dict):
    """The `cluster` prefix a shard's Trigger filters on (None: it has none)."""
    prefixes = [e["prefix"]["cluster"] for e in trigger["spec"].get("filters", []) if "cluster" in e.get("prefix", {})]
    return prefixes[0] if len(prefixes) == 1 else None


# Cluster names to route: the shards' own, look-alikes, one no shard owns, and none at all.
SAMPLE_CLUSTERS = ["east-1", "east-prod-eu", "west-1", "west-", "eastern-1", "east", "north-1", "East-1", None]


def routing_errors(objects: list) -> list:
    """Every resource event goes to exactly one Trigger; a shard Trigger's prefix is its sink's
    glob (`east-` and `east-*`), and the sink it reaches owns the event's cluster; anything else
    goes to the dead-letter sink; events of other types go nowhere."""
    errors = []
    triggers = [obj for obj in objects if obj["kind"] == "Trigger"]
    sink_of = {}
    for trigger in triggers:
        ref = trigger["spec"]["subscriber"]["ref"]["name"]
        if ref == "drift-sentinel-dlq":
            continue
        backends = service_backends(objects, find(objects, "Service", ref))
        deployment = find(objects, "Deployment", backends[0])
        shard = deployment_config(objects, deployment)["shard"]
        sink_of[trigger["metadata"]["name"]] = shard
        prefix = shard_prefix(trigger)
        if prefix is None or shard["clusters"] != [prefix + "*"]:
            errors.append(f"{trigger['metadata']['name']}: cluster prefix {prefix!r} is not shard {shard['name']}'s glob {shard['clusters']}")
    for cluster in SAMPLE_CLUSTERS:
        event = {"type": "dev.knative.apiserver.resource.update", "source": "https://10.96.0.1:443"}
        if cluster is not None:
            event["cluster"] = cluster
        matched = [t["metadata"]["name"] for t in triggers if trigger_matches(t, event)]
        if len(matched) != 1:
            errors.append(f"cluster {cluster!r}: delivered by {matched or 'no Trigger'}")
            continue
        shard = sink_of.get(matched[0])
        owners = [s["name"] for s in sink_of.values() if cluster is not None and any(glob_matches(g, cluster) for g in s["clusters"])]
        if shard is not None and shard["name"] not in owners:
            errors.append(f"cluster {cluster!r}: delivered to shard {shard['name']}, which does not own it (421)")
        if shard is None and owners:
            errors.append(f"cluster {cluster!r}: dead-lettered although shard {owners} owns it")
    for cluster in SAMPLE_CLUSTERS:
        other = {"type": "dev.knative.sources.ping", **({"cluster": cluster} if cluster else {})}
        if [t["metadata"]["name"] for t in triggers if trigger_matches(t, other)]:
            errors.append(f"a non-resource event of cluster {cluster!r} is delivered")
    return errors


def test_every_resource_event_goes_to_the_shard_that_owns_its_cluster(sharded):
    assert routing_errors(sharded) == []
    # The samples exercise every route: both shards and the dead-letter sink.
    triggers = [obj for obj in sharded if obj["kind"] == "Trigger"]
    used = {
        name for cluster in SAMPLE_CLUSTERS
        for name in [t["metadata"]["name"] for t in triggers
                     if trigger_matches(t, {"type": "dev.knative.apiserver.resource.add", **({"cluster": cluster} if cluster else {})})]
    }
    assert used == {"drift-sentinel-east", "drift-sentinel-west", "drift-sentinel-unsharded"}


@pytest.mark.parametrize(
    "trigger, mutate, fragment",
    [
        ("drift-sentinel-east", lambda t: t["spec"]["filters"][1]["prefix"].__setitem__("cluster", "east"), "prefix 'east'"),
        ("drift-sentinel-west", lambda t: t["spec"]["filters"][1]["prefix"].__setitem__("cluster", "east-"), "delivered by"),
        ("drift-sentinel-west", lambda t: t["spec"]["filters"].pop(1), "prefix None"),
        ("drift-sentinel-unsharded", lambda t: t["spec"]["filters"][1]["not"]["any"].pop(), "delivered by"),
        ("drift-sentinel-unsharded", lambda t: t["spec"]["filters"].pop(0), "non-resource"),
    ],
    ids=["prefix-without-dash", "west-filters-east", "no-cluster-filter", "catch-all-misses-a-shard", "catch-all-any-type"],
)
def test_routing_check_rejects_broken_copies(sharded, trigger, mutate, fragment):
    broken = copy.deepcopy(sharded)
    mutate(find(broken, "Trigger", trigger))
    errors = routing_errors(broken)
    assert errors and any(fragment in error for error in errors), errors


def test_routing_check_rejects_a_glob_the_prefix_does_not_match(sharded):
    broken = copy.deepcopy(sharded)
    configmap = find(broken, "ConfigMap", "drift-sentinel-config-west")
    configmap["data"]["config.yaml"] = configmap["data"]["config.yaml"].replace('clusters: ["west-*"]', 'clusters: ["west*"]')
    errors = routing_errors(broken)
    assert any("is not shard west's glob" in error for error in errors), errors


def hosting_errors(objects: list) -> list:
    """This cluster (the ApiServerSource's `cluster`) is every shard's defaultCluster and owned by
    exactly one shard, which alone resyncs it: another shard's resync would file this cluster's
    objects in a second shard."""
    cluster = find(objects, "ApiServerSource", "drift-sentinel")["spec"]["ceOverrides"]["extensions"]["cluster"]
    errors = []
    owners = []
    for deployment in sinks(objects):
        config = deployment_config(objects, deployment)
        shard = config["shard"]
        if config["defaultCluster"] != cluster:
            errors.append(f"{shard['name']}: defaultCluster {config['defaultCluster']} is not the source's {cluster}")
        owns = any(glob_matches(glob, cluster) for glob in shard["clusters"])
        owners += [shard["name"]] if owns else []
        resync = config.get("resync", {})
        resyncs = resync.get("enabled", "auto") is not False
        listed = resync.get("cluster", config["defaultCluster"])
        if resyncs and not any(glob_matches(glob, listed) for glob in shard["clusters"]):
            errors.append(f"{shard['name']}: resync files cluster {listed} which it does not own")
    if len(owners) != 1:
        errors.append(f"cluster {cluster} is owned by {owners or 'no shard'}")
    return errors


def test_the_hosting_cluster_belongs_to_one_shard_which_alone_resyncs_it(sharded):
    assert hosting_errors(sharded) == []


@pytest.mark.parametrize(
    "mutate, fragment",
    [
        (lambda objects: find(objects, "ApiServerSource", "drift-sentinel")["spec"]["ceOverrides"]["extensions"].__setitem__("cluster", "my-cluster"), "owned by no shard"),
        (lambda objects: find(objects, "ConfigMap", "drift-sentinel-config-west")["data"].__setitem__(
            "config.yaml", find(objects, "ConfigMap", "drift-sentinel-config-west")["data"]["config.yaml"].replace("enabled: false", "enabled: auto")), "resync files"),
    ],
    ids=["unowned-source-cluster", "west-resyncs-east"],
)
def test_hosting_check_rejects_broken_copies(sharded, mutate, fragment):
    broken = copy.deepcopy(sharded)
    mutate(broken)
    errors = hosting_errors(broken)
    assert errors and any(fragment in error for error in errors), errors


def test_shard_names_and_labels_agree(sharded):
    for shard in SHARDS:
        deployment = find(sharded, "Deployment", f"drift-sentinel-{shard}")
        assert deployment_config(sharded, deployment)["shard"]["name"] == shard
        assert deployment["spec"]["selector"]["matchLabels"][SHARD_LABEL] == shard
        assert find(sharded, "Service", f"drift-sentinel-{shard}")["spec"]["selector"][SHARD_LABEL] == shard
    # The base's NetworkPolicy admits both shards' pods.
    policy = find(sharded, "NetworkPolicy", "drift-sentinel-sink")["spec"]["podSelector"]["matchLabels"]
    assert all(selects(policy, deployment) for deployment in sinks(sharded))


# --- the overlays' configs, served on PostgreSQL ----------------------------------------------------


class Replica:
    """drift-sentinel serving an overlay's config with the database and the API server's keys
    replaced by local ones (everything else as shipped)."""

    def __init__(self, workdir: Path, text: str, pod: str):
        self.workdir = workdir
        (workdir / "config.yaml").write_text(text)
        self.process, self.port, self.log = launch(
            workdir / "config.yaml", workdir / f"{pod}.log", dict(POD_NAME=pod, **DUMMY_ENV))
        self.base = f"http://127.0.0.1:{self.port}"
        self.pod = pod

    def get(self, path: str):
        try:
            with urllib.request.urlopen(self.base + path, timeout=2) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode()
        except (urllib.error.URLError, ConnectionError, OSError):
            return None, ""

    def wait(self, predicate, what: str, timeout: float = 30):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return
            assert self.process.poll() is None, (self.workdir / f"{self.pod}.log").read_text()
            time.sleep(0.1)
        raise AssertionError(f"{self.pod}: not {what} within {timeout}s:\n{(self.workdir / f'{self.pod}.log').read_text()[-3000:]}")

    def lease_held(self):
        status, text = self.get("/metrics")
        match = re.search(r'^drift_sentinel_writer_lease_held\{shard="([^"]+)"\} (\d+)', text, re.M)
        return (match.group(1), int(match.group(2))) if status == 200 and match else None

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(timeout=30)
        self.log.close()
        return self.process.returncode


def local_config(text: str, url: str, workdir: Path, api_server: LocalApiServer) -> str:
    (workdir / "token").write_text("sa-token\n")
    store_url = re.search(r"\n  url: (.*)\n", text).group(1)
    for shipped, local in [
        (store_url, url),
        ("https://kubernetes.default.svc/openid/v1/jwks", api_server.url + "/openid/v1/jwks"),
        ("/var/run/secrets/kubernetes.io/serviceaccount/token", str(workdir / "token")),
        # Long, so that a standby that waited for the lease to expire (instead of taking the
        # released one) could not pass the handover test on a slow machine.
        ("\n    ttl: 10s\n", "\n    ttl: 30s\n"),
    ]:
        assert shipped in text, shipped
        text = text.replace(shipped, local)
    text, removed = re.subn(r"\n\s*caFile: /var/run/secrets/kubernetes.io/serviceaccount/ca.crt", "", text)
    assert removed == 1
    return text


def test_ha_config_serves_one_writer_and_a_standby_that_takes_over(ha, pg, tmp_path):
    api_server = LocalApiServer("sa-token")
    text = local_config(configmap_texts(ha)["drift-sentinel"], pg.database(), tmp_path, api_server)
    first = Replica(tmp_path, text, "drift-sentinel-aaaaa")
    second = None
    try:
        first.wait(lambda: first.get("/readyz")[0] == 200, "ready")
        second = Replica(tmp_path, text, "drift-sentinel-bbbbb")
        second.wait(lambda: second.lease_held() == ("default", 0), "standing by")
        # Once its first attempt at the lease is answered, the standby names the writer.
        second.wait(lambda: "drift-sentinel-aaaaa" in second.get("/readyz")[1], "naming the writer")
        assert first.lease_held() == ("default", 1)
        # The standby: alive, not ready (naming the writer's pod), metrics served, the rest 503.
        assert second.get("/healthz")[0] == 200
        status, body = second.get("/readyz")
        assert status == 503 and '"standby"' in body and "drift-sentinel-aaaaa" in body, body
        assert second.get("/api/v1/drifts")[0] == 503
        # A rollout or a handover before a drain: the writer stops gracefully, releases the lease,
        # and the standby takes it without waiting out the ttl.
        stopped = time.monotonic()
        assert first.stop() == 0
        second.wait(lambda: second.get("/readyz")[0] == 200, "the writer after a graceful stop", timeout=15)
        assert time.monotonic() - stopped < 15, "the standby waited for the lease to expire"
        assert second.lease_held() == ("default", 1)
    finally:
        first.stop()
        if second:
            second.stop()
        api_server.close()


def test_shard_config_refuses_another_shards_cluster_with_421(sharded, pg, tmp_path):
    api_server = LocalApiServer("sa-token")
    text = local_config(configmap_texts(sharded)["drift-sentinel-east"], pg.database(), tmp_path, api_server)
    east = Replica(tmp_path, text, "drift-sentinel-east-aaaaa")
    try:
        east.wait(lambda: east.get("/readyz")[0] == 200, "ready")
        assert east.lease_held() == ("east", 1)
        event = json.loads((ROOT / "examples" / "events" / "configuration-add.ce.json").read_text())

        def token_of(shard: str) -> str:
            oidc = config_of(find(sharded, "ConfigMap", f"drift-sentinel-config-{shard}"))["auth"]["oidc"]
            return broker_token(subject=oidc["allowedSubjects"][0], audience=oidc["audience"])

        def post(cluster: str, token: str):
            body = json.dumps(dict(event, cluster=cluster, id=f"shard-test-{cluster}")).encode()
            request = urllib.request.Request(east.base + "/", data=body, method="POST", headers={
                "Content-Type": "application/cloudevents+json", "Authorization": f"Bearer {token}"})
            try:
                with urllib.request.urlopen(request, timeout=10) as response:
                    return response.status, response.read().decode()
            except urllib.error.HTTPError as error:
                return error.code, error.read().decode()

        assert post("east-2", token_of("east"))[0] == 202
        status, body = post("west-1", token_of("east"))
        assert status == 421 and "cluster_not_in_shard" in body, body
        # A token the Broker sends for the west Trigger is not for this shard.
        assert post("east-3", token_of("west"))[0] == 401
        # Issue 27, item 9: the Broker sends no batches, so only a sender that holds this shard's
        # Trigger token could post one; a batch with one foreign event is refused whole, its
        # owned event counted as refused with it.
        batch = [dict(event, cluster=cluster, id=f"shard-batch-{cluster}") for cluster in ("east-4", "west-2")]
        request = urllib.request.Request(east.base + "/", data=json.dumps(batch).encode(), method="POST", headers={
            "Content-Type": "application/cloudevents-batch+json", "Authorization": f"bearer {token_of('east')}"})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=10)
        answer = json.loads(refused.value.read())
        assert refused.value.code == 421 and answer["message"].startswith("batch[1]: the whole batch of 2 events is refused (1 of them owned here)"), answer
        metrics = urllib.request.urlopen(east.base + "/metrics", timeout=10).read().decode()
        assert 'drift_sentinel_shard_events_total{shard="east",outcome="refused"} 2' in metrics, metrics
        assert 'drift_sentinel_shard_events_total{shard="east",outcome="refused_with_batch"} 1' in metrics, metrics
    finally:
        east.stop()
        api_server.close()


# --- the README's temporary pod --------------------------------------------------------------------


def readme_store_copy_pod() -> dict:
    """The pod spec of the README's `kubectl run store-copy --overrides='...'` (backup, and the
    move to PostgreSQL)."""
    text = (ROOT / "README.md").read_text()
    start = text.index("run store-copy")
    start = text.index("--overrides='", start) + len("--overrides='")
    return json.loads(text[start:text.index("'", start)])["spec"]


def test_the_readme_store_copy_pod_is_admitted_in_the_restricted_namespace():
    pod = readme_store_copy_pod()
    owner = {"metadata": {"name": "store-copy"}}
    assert restricted_errors(owner, pod) == []
    # It mounts the sink's claim, and runs as the sink's user (the store's files are its own).
    sink = find(kustomize(K8S), "StatefulSet", "drift-sentinel")
    claim = f"{sink['spec']['volumeClaimTemplates'][0]['metadata']['name']}-drift-sentinel-0"
    assert pod["volumes"][0]["persistentVolumeClaim"]["claimName"] == claim
    assert pod["securityContext"]["runAsUser"] == sink["spec"]["template"]["spec"]["securityContext"]["runAsUser"]
    broken = copy.deepcopy(pod)
    broken["containers"][0]["securityContext"].pop("allowPrivilegeEscalation")
    assert restricted_errors(owner, broken)
