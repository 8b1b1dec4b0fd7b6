"""`drift-sentinel export --last-good` through the real binary: real Knative objects sent as
ApiServerSource events (CloudEvents SDK, binary mode) to a running sink, then exported from its
SQLite store while it runs. Every manifest must pass its CRD's schema (closed) with create-time
metadata only (name, namespace, labels, annotations: nothing the server sets), equal the object's
spec, and leave out what cannot be restored (owned children, Pods, Secrets)."""

import copy
import subprocess

from cloudevents.core.bindings.http import to_binary_event
from cloudevents.core.v1.event import CloudEvent

from conftest import Sentinel, attributes, binary, load_yaml_fixture, safe_load, safe_load_all
from knative_schema import load_crds, object_validator, violations

SERVICE = "serving/openshift-labs-learn-katacoda__serverless-05-knative-client__ksvc-greeter.yaml"
ROUTE = "serving/rguske-github-io__knative-serving-unwrapped__route-knative-webapp.yaml"
CONFIG_MAP = "configmaps/knative-serving__config-core-configmaps__config-autoscaler.yaml"
BROKER = "derived/broker-ready.yaml"

# What a manifest's metadata may hold: what a create takes from a user.
CREATE_METADATA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1},
        "namespace": {"type": "string"},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
    },
    "required": ["name"],
    "additionalProperties": False,
}


def send(sentinel, event_id, verb, obj):
    message = to_binary_event(CloudEvent(attributes(event_id, verb, obj), obj))
    status, _, body = sentinel.post(dict(message.headers), message.body)
    assert status == 202, (status, body, sentinel.logs()[-2000:])


def export(sentinel, out, *arguments):
    return subprocess.run(
        [binary(), "export", "--last-good", "--config", str(sentinel.config_path), "--out", str(out), *arguments],
        capture_output=True, text=True, timeout=60,
    )


def secret():
    # Not a Knative kind: the smallest Secret the API server serves, as `kubectl get -o yaml` prints it.
    return {
        "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": "db", "namespace": "knativetutorial", "uid": "5f1c7a9e-0000-4000-8000-000000000001",
                     "resourceVersion": "35300", "creationTimestamp": "2019-08-05T12:00:00Z"},
        "data": {"password": "aHVudGVyMg=="},
    }


def restorable_spec(obj):
    """The object's spec less the template's `creationTimestamp: null` (Go's zero time, which the
    export leaves out: the CRD's schema does not list it)."""
    spec = copy.deepcopy(obj["spec"])
    metadata = spec["template"]["metadata"]
    assert metadata.pop("creationTimestamp") is None
    return spec


def manifests(out):
    return {str(path.relative_to(out)): safe_load(path.read_text()) for path in sorted(out.rglob("*.yaml"))}


def test_export_writes_restorable_manifests_that_pass_their_schemas(workdir):
    sentinel = Sentinel(workdir).start()
    try:
        service = load_yaml_fixture(SERVICE)
        # A hand `kubectl apply` leaves its last-applied configuration: kept as a hash only.
        service = copy.deepcopy(service)
        service["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"] = '{"kind":"Service"}'
        service["metadata"]["labels"] = {"team": "greeters"}
        route = load_yaml_fixture(ROUTE)
        config_map = load_yaml_fixture(CONFIG_MAP)
        # The repository's file as the API server serves it: with a uid and a version.
        config_map["metadata"].update({"uid": "7d0b6a52-0000-4000-8000-000000000002", "resourceVersion": "35250"})
        broker = load_yaml_fixture(BROKER)
        # A ConfigMap with binaryData: the state keeps those values as hashes, so it is left out.
        binary = copy.deepcopy(config_map)
        binary["metadata"].update({"name": "certs", "uid": "7d0b6a52-0000-4000-8000-000000000003"})
        binary["binaryData"] = {"ca.der": "MIIBszCCAVmgAwIBAgIU"}
        for number, obj in enumerate([service, route, config_map, broker, secret(), binary]):
            send(sentinel, f"e{number}", "add", obj)

        out = workdir / "backup"
        result = export(sentinel, out)
        assert result.returncode == 0, result.stderr
        written = manifests(out)
        assert sorted(written) == [
            "default/drift-sentinel/broker.eventing.knative.dev-drift-sentinel.yaml",
            "default/knative-serving/configmap-config-autoscaler.yaml",
            "default/knativetutorial/service.serving.knative.dev-greeter.yaml",
        ]
        assert result.stdout.strip() == (
            f"wrote 3 manifests to {out}; left out: 1 ConfigMaps with binaryData (kept as hashes only), "
            "1 owned by a controller that re-creates them, 1 Secrets (values kept as hashes only)"
        ), result.stdout

        crds = load_crds()
        for path, manifest in written.items():
            assert set(manifest) <= {"apiVersion", "kind", "metadata", "spec", "data"}, path
            validator = object_validator(crds, manifest["apiVersion"], manifest["kind"], metadata=CREATE_METADATA)
            if validator is not None:
                assert violations(validator, manifest, path) == []
            else:
                assert manifest["kind"] == "ConfigMap", path

        exported = written["default/knativetutorial/service.serving.knative.dev-greeter.yaml"]
        assert exported["spec"] == restorable_spec(service)
        assert exported["metadata"] == {
            "name": "greeter",
            "namespace": "knativetutorial",
            "labels": {"team": "greeters"},
        }, "creator, lastModifier and the hashed last-applied configuration are left out"
        exported_map = written["default/knative-serving/configmap-config-autoscaler.yaml"]
        assert exported_map["data"] == config_map["data"]
        assert exported_map["metadata"]["labels"] == config_map["metadata"]["labels"]
        assert exported_map["metadata"]["annotations"] == config_map["metadata"]["annotations"]

        # One YAML stream on standard output, the summary on standard error.
        result = export(sentinel, "-")
        assert result.returncode == 0, result.stderr
        documents = safe_load_all(result.stdout)
        assert sorted((doc["kind"], doc["metadata"]["name"]) for doc in documents) == [
            ("Broker", "drift-sentinel"), ("ConfigMap", "config-autoscaler"), ("Service", "greeter"),
        ]
        assert sorted(documents, key=lambda doc: doc["kind"]) == [
            written[path] for path in sorted(written, key=lambda path: written[path]["kind"])
        ]
        assert result.stderr.strip().startswith("wrote 3 manifests to standard output; left out: "), result.stderr

        # Filters: one kind (any case), one namespace, nothing.
        only = workdir / "only-configmaps"
        result = export(sentinel, only, "--kind", "configmap")
        assert result.returncode == 0, result.stderr
        assert list(manifests(only)) == ["default/knative-serving/configmap-config-autoscaler.yaml"]
        services = workdir / "only-services"
        result = export(sentinel, services, "--kind", "Service.serving.knative.dev", "--namespace", "knativetutorial")
        assert result.returncode == 0, result.stderr
        assert list(manifests(services)) == ["default/knativetutorial/service.serving.knative.dev-greeter.yaml"]
        none = workdir / "none"
        result = export(sentinel, none, "--namespace", "nowhere")
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == f"wrote 0 manifests to {none}"
        assert not none.exists() or manifests(none) == {}
    finally:
        sentinel.stop()


def test_export_of_a_deleted_service_only_with_deleted(workdir):
    sentinel = Sentinel(workdir).start()
    try:
        service = load_yaml_fixture(SERVICE)
        send(sentinel, "a", "add", service)
        gone = copy.deepcopy(service)
        gone["metadata"]["resourceVersion"] = str(int(service["metadata"]["resourceVersion"]) + 1)
        send(sentinel, "d", "delete", gone)
        live = workdir / "live"
        result = export(sentinel, live)
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == f"wrote 0 manifests to {live}"
        both = workdir / "with-deleted"
        result = export(sentinel, both, "--deleted")
        assert result.returncode == 0, result.stderr
        written = manifests(both)
        assert list(written) == ["default/knativetutorial/service.serving.knative.dev-greeter.yaml"]
        assert written["default/knativetutorial/service.serving.knative.dev-greeter.yaml"]["spec"] == restorable_spec(service)

        # Created again under the same name (a new uid): the live one is written, the deleted
        # one is left out, so a restore from the directory applies only the live spec.
        again = copy.deepcopy(service)
        again["metadata"]["uid"] = "c4ee1f47-b77f-11e9-96b1-22e0f431a3ee"
        again["metadata"]["resourceVersion"] = str(int(service["metadata"]["resourceVersion"]) + 2)
        again["spec"]["template"]["spec"]["containers"][0]["image"] = "quay.io/rhdevelopers/knative-tutorial-greeter:v2"
        send(sentinel, "r", "add", again)
        latest = workdir / "latest"
        result = export(sentinel, latest, "--deleted")
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == (
            f"wrote 1 manifest to {latest}; left out: 1 deleted objects whose name a live or a later-deleted object has"
        ), result.stdout
        written = manifests(latest)
        assert list(written) == ["default/knativetutorial/service.serving.knative.dev-greeter.yaml"]
        assert written["default/knativetutorial/service.serving.knative.dev-greeter.yaml"]["spec"] == restorable_spec(again)
    finally:
        sentinel.stop()


def test_export_refuses_a_directory_with_files_and_writes_nothing_to_the_store(workdir):
    sentinel = Sentinel(workdir).start()
    try:
        send(sentinel, "a", "add", load_yaml_fixture(SERVICE))
    finally:
        sentinel.stop()
    store = workdir / "sentinel.db"
    before = store.read_bytes()
    out = workdir / "old-backup"
    out.mkdir()
    (out / "stale.yaml").write_text("kind: Service\n")
    result = export(sentinel, out)
    assert result.returncode == 2
    assert result.stderr.strip() == f"drift-sentinel export: {out}: not empty; export into a new or empty directory"
    fresh = workdir / "fresh"
    result = export(sentinel, fresh)
    assert result.returncode == 0, result.stderr
    assert list(manifests(fresh)) == ["default/knativetutorial/service.serving.knative.dev-greeter.yaml"]
    # A reader of a WAL file may create the (empty) write-ahead log and its index beside it, as
    # the service does; the store itself is unchanged and nothing went into the log.
    assert store.read_bytes() == before, "the export wrote to the store"
    wal = workdir / "sentinel.db-wal"
    assert not wal.exists() or wal.stat().st_size == 0


def test_export_names_a_store_that_is_not_there_and_creates_none(workdir):
    config = workdir / "config.yaml"
    store = workdir / "nowhere" / "sentinel.db"
    config.write_text(f"store:\n  path: {store}\n")
    result = subprocess.run(
        [binary(), "export", "--last-good", "--config", str(config), "--out", str(workdir / "out")],
        capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 2
    assert result.stderr.startswith(f"drift-sentinel export: {store}: "), result.stderr
    assert result.stderr.strip() == f"drift-sentinel export: {store}: no store file there (missing, or not a file)"
    assert not store.exists() and not store.parent.exists()
    assert not (workdir / "out").exists(), "a failed export leaves no empty output directory"


def test_export_names_what_failed(workdir):
    missing = workdir / "missing.yaml"
    result = subprocess.run(
        [binary(), "export", "--last-good", "--config", str(missing), "--out", str(workdir / "out")],
        capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 2
    assert result.stderr.startswith(f"drift-sentinel export: {missing}: "), result.stderr
    result = subprocess.run([binary(), "export", "--out", str(workdir / "out")], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "--last-good" in result.stderr, result.stderr
