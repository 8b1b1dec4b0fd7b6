"""The drill kit: `k8s/drills/` (a namespace that allows drills, a hello Service, a Broker and a
Trigger, the drill runner's identity) builds, passes the Kubernetes and Knative schemas, and
grants the runner exactly what the shipped catalog `examples/drills/knative.yaml` needs in the
drills namespace (never Secrets; the sink's roles are not touched); every target the catalog
drills there is one of these objects or one Knative makes from them."""

from yaml import safe_load

from knative_schema import load_crds, object_validator, violations
from test_export import CREATE_METADATA
from test_manifests import KUBERNETES_VERSIONS, K8S, ROOT, builtin_errors, guess_plural, kustomize

DRILLS = K8S / "drills"
CATALOG = ROOT / "examples" / "drills" / "knative.yaml"
# What Knative makes from the kit's objects (a Revision's Deployment), drilled by name.
MADE_BY_KNATIVE = {("apps/v1", "Deployment", "drills", "hello-00001-deployment")}
# The verbs a drill needs on its target: read it, then its injection and its restore.
VERBS = {"mergePatch": {"get", "patch"}, "jsonPatch": {"get", "patch"},
         "delete": {"get", "delete", "create"}, "create": {"get", "create", "delete"}}


def catalog() -> list:
    return safe_load(CATALOG.read_text())["drills"]


def test_the_kit_builds_and_passes_its_schemas():
    objects = kustomize(DRILLS)
    crds = load_crds()
    knative = [obj for obj in objects if "knative.dev/" in obj["apiVersion"]]
    assert sorted(obj["kind"] for obj in knative) == ["Broker", "Service", "Trigger"]
    errors = [error for obj in knative
              for error in violations(object_validator(crds, obj["apiVersion"], obj["kind"],
                                                       metadata=CREATE_METADATA), obj,
                                      obj["metadata"]["name"])]
    errors += [error for obj in objects if obj not in knative
               for error in builtin_errors(obj, KUBERNETES_VERSIONS[0])]
    assert errors == []
    [namespace] = [obj for obj in objects if obj["kind"] == "Namespace"]
    assert namespace["metadata"]["labels"]["drift-sentinel.dev/drills"] == "allowed"


def test_every_drill_in_the_kit_namespace_targets_a_kit_object():
    objects = kustomize(DRILLS)
    present = {(obj["apiVersion"], obj["kind"], obj["metadata"].get("namespace"), obj["metadata"]["name"])
               for obj in objects} | MADE_BY_KNATIVE
    for drill in catalog():
        target = drill["target"]
        if target["namespace"] != "drills":
            continue
        key = (target["apiVersion"], target["kind"], target["namespace"], target["name"])
        assert key in present, (drill["name"], key)


def test_the_runner_gets_exactly_what_the_catalog_needs_in_the_drills_namespace():
    objects = kustomize(DRILLS)
    [role] = [obj for obj in objects if obj["kind"] == "Role"]
    granted = set()
    for rule in role["rules"]:
        assert set(rule) == {"apiGroups", "resources", "verbs"}
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                granted |= {(group, resource, verb) for verb in rule["verbs"]}
    needed = set()
    for drill in catalog():
        target = drill["target"]
        if target["namespace"] != "drills":
            continue
        group = target["apiVersion"].rpartition("/")[0]
        [how] = list(drill["inject"])
        needed |= {(group, guess_plural(target["kind"]), verb) for verb in VERBS[how]}
    assert granted == needed
    assert all(resource != "secrets" for (_, resource, _) in granted)
    # The runner's own identity; the kit binds nothing to the sink.
    subjects = [subject for obj in objects if obj["kind"] in ("RoleBinding", "ClusterRoleBinding")
                for subject in obj["subjects"]]
    assert {subject["name"] for subject in subjects} == {"drift-sentinel-drill"}


def test_the_knative_serving_opt_in_grants_only_the_configmap_drill():
    objects = kustomize(DRILLS / "knative-serving")
    # Never the namespace itself: deleting the kit must not delete knative-serving.
    assert sorted(obj["kind"] for obj in objects) == ["Role", "RoleBinding"]
    [role] = [obj for obj in objects if obj["kind"] == "Role"]
    assert role["metadata"]["namespace"] == "knative-serving"
    serving = [drill for drill in catalog() if drill["target"]["namespace"] == "knative-serving"]
    assert [drill["target"]["kind"] for drill in serving] == ["ConfigMap"]
    names = sorted({drill["target"]["name"] for drill in serving})
    assert role["rules"] == [{"apiGroups": [""], "resources": ["configmaps"],
                              "resourceNames": names, "verbs": ["get", "patch"]}]
    [binding] = [obj for obj in objects if obj["kind"] == "RoleBinding"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "drift-sentinel-drill",
                                    "namespace": "drills"}]
    assert all(error == [] for error in (builtin_errors(obj, KUBERNETES_VERSIONS[0]) for obj in objects))
