"""Knative CRD schemas (tests/fixtures/knative-crds/) as JSON Schema, shared by the tests.

The CRDs carry OpenAPI v3 structural schemas with Kubernetes extensions, not JSON Schema. The
conversion (`x-kubernetes-int-or-string` → integer or string, `nullable` → also `null`) is the
one tests/fixtures/knative-crds/README.md describes. Two modes:

* closed (the default): every object node that declares `properties` rejects undeclared
  fields, also where the CRD preserves unknown fields, the way Knative's webhooks decode; used
  for manifests and for objects written for the tests, where an unknown field is a typo;
* open: undeclared fields are allowed, as the API server accepts and prunes them; used for
  objects copied verbatim from public sources, which may carry fields of older API versions.
"""

import copy
from pathlib import Path

import jsonschema

from conftest import safe_load

ROOT = Path(__file__).resolve().parents[2]
CRD_DIR = ROOT / "tests" / "fixtures" / "knative-crds"

# Fields Knative's Go types accept but the CRD schemas do not list (DeliverySpec in
# knative/eventing pkg/apis/duck/v1/delivery_types.go).
DELIVERY_EXTRA_FIELDS = {
    "timeout": {"type": "string"},
    "retryAfterMax": {"type": "string"},
}

NAME_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
NAMESPACE_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"

# The metadata a manifest may set (what the k8s/ manifests are checked against).
METADATA_SCHEMA = {
    "type": "object",
    "required": ["name", "namespace"],
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string", "pattern": NAME_PATTERN, "maxLength": 253},
        "namespace": {"type": "string", "pattern": NAMESPACE_PATTERN, "maxLength": 63},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
    },
}

_TIME = {"type": "string", "format": "date-time", "pattern": r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$"}

# ObjectMeta of a stored object as the API server returns it (k8s.io/apimachinery
# pkg/apis/meta/v1 ObjectMeta, OwnerReference and ManagedFieldsEntry), closed.
LIVE_METADATA_SCHEMA = {
    "type": "object",
    "required": ["name", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp"],
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string", "pattern": NAME_PATTERN, "maxLength": 253},
        "generateName": {"type": "string"},
        "namespace": {"type": "string", "pattern": NAMESPACE_PATTERN, "maxLength": 63},
        "selfLink": {"type": "string"},
        "uid": {"type": "string", "pattern": r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"},
        "resourceVersion": {"type": "string", "pattern": r"^[0-9]+$"},
        "generation": {"type": "integer", "minimum": 1},
        "creationTimestamp": _TIME,
        "deletionTimestamp": _TIME,
        "deletionGracePeriodSeconds": {"type": "integer"},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
        "finalizers": {"type": "array", "items": {"type": "string"}},
        "ownerReferences": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["apiVersion", "kind", "name", "uid"],
                "additionalProperties": False,
                "properties": {
                    "apiVersion": {"type": "string"},
                    "kind": {"type": "string"},
                    "name": {"type": "string"},
                    "uid": {"type": "string"},
                    "controller": {"type": "boolean"},
                    "blockOwnerDeletion": {"type": "boolean"},
                },
            },
        },
        "managedFields": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["apiVersion", "fieldsType", "fieldsV1", "manager", "operation", "time"],
                "additionalProperties": False,
                "properties": {
                    "apiVersion": {"type": "string"},
                    "fieldsType": {"const": "FieldsV1"},
                    "fieldsV1": {"type": "object"},
                    "manager": {"type": "string", "minLength": 1},
                    "operation": {"enum": ["Apply", "Update"]},
                    "subresource": {"type": "string"},
                    "time": _TIME,
                },
            },
        },
    },
}


def to_json_schema(node, closed: bool = True, honor_preserve: bool = False):
    """OpenAPI v3 structural schema (with Kubernetes extensions) → JSON Schema.

    With `honor_preserve`, a closed conversion still leaves open the nodes the CRD marks
    `x-kubernetes-preserve-unknown-fields` (used for `status`, which Knative's controllers write
    from their Go types, and which no webhook decodes strictly)."""
    if isinstance(node, list):
        return [to_json_schema(item, closed, honor_preserve) for item in node]
    if not isinstance(node, dict):
        return node
    if honor_preserve and node.get("x-kubernetes-preserve-unknown-fields"):
        closed = False
    out = {}
    for key, value in node.items():
        if key.startswith("x-kubernetes-") or key == "nullable":
            continue
        if key == "properties":
            out[key] = {name: to_json_schema(sub, closed, honor_preserve) for name, sub in value.items()}
        elif key in ("items", "additionalProperties", "not") and isinstance(value, dict):
            out[key] = to_json_schema(value, closed, honor_preserve)
        elif key in ("anyOf", "allOf", "oneOf"):
            out[key] = to_json_schema(value, closed, honor_preserve)
        else:
            out[key] = value
    if node.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if node.get("nullable") and isinstance(out.get("type"), str):
        out["type"] = [out["type"], "null"]
    if "properties" in node:
        if closed:
            # Closed even where the CRD preserves unknown fields: the webhook decodes strictly.
            # Nodes that preserve unknown fields without declaring any stay open (label maps,
            # ceOverrides.extensions, Trigger filter dialects).
            out.setdefault("additionalProperties", False)
        if "backoffPolicy" in node["properties"] and "deadLetterSink" in node["properties"]:
            for name, schema in DELIVERY_EXTRA_FIELDS.items():
                out["properties"].setdefault(name, schema)
    return out


def strict_json_schema(node):
    """OpenAPI v3 structural schema (with Kubernetes extensions) → closed JSON Schema."""
    return to_json_schema(node, closed=True)


def load_crds(crd_dir: Path = CRD_DIR) -> dict:
    """(group, kind) → CRD, for every CustomResourceDefinition file in crd_dir."""
    crds = {}
    for path in sorted(crd_dir.glob("*.yaml")):
        crd = safe_load(path.read_text())
        assert crd["kind"] == "CustomResourceDefinition", path
        key = (crd["spec"]["group"], crd["spec"]["names"]["kind"])
        assert key not in crds, f"{path}: a second CRD for {key}"
        crds[key] = dict(crd, _file=path.name)
    return crds


def served_schema(crds: dict, api_version: str, kind: str):
    """The openAPIV3Schema of the served version `api_version` of `kind`, or None when no copied
    CRD serves it (an old API version, or a kind that has no CRD here)."""
    if "/" not in api_version:
        return None
    group, version = api_version.split("/", 1)
    crd = crds.get((group, kind))
    if crd is None:
        return None
    for v in crd["spec"]["versions"]:
        if v["name"] == version and v.get("served"):
            return v["schema"]["openAPIV3Schema"]
    return None


def object_validator(crds: dict, api_version: str, kind: str, closed: bool = True, metadata: dict = None):
    """A Draft 7 validator for a whole object of `kind` at `api_version` (None if not served).

    The Eventing schemas describe only spec and status, the Serving ones `metadata` as a bare
    object: apiVersion, kind and metadata are checked here. In closed mode, `status` nodes that
    the CRD marks `x-kubernetes-preserve-unknown-fields` stay open (Parallel's copied `ready`
    conditions carry a lastTransitionTime the schema does not list). `metadata` defaults to the stored
    ObjectMeta shape (LIVE_METADATA_SCHEMA)."""
    schema = served_schema(crds, api_version, kind)
    if schema is None:
        return None
    status = schema.get("properties", {}).get("status")
    schema = to_json_schema(copy.deepcopy(schema), closed)
    schema.setdefault("properties", {})
    if status is not None:
        # Closed, except below status nodes the CRD marks as preserving unknown fields.
        schema["properties"]["status"] = to_json_schema(copy.deepcopy(status), closed, honor_preserve=True)
    schema["properties"]["apiVersion"] = {"const": api_version}
    schema["properties"]["kind"] = {"const": kind}
    schema["properties"]["metadata"] = metadata if metadata is not None else LIVE_METADATA_SCHEMA
    schema["required"] = sorted(set(schema.get("required", [])) | {"apiVersion", "kind", "metadata"})
    if closed:
        schema["additionalProperties"] = False
    jsonschema.Draft7Validator.check_schema(schema)
    return jsonschema.Draft7Validator(schema, format_checker=jsonschema.Draft7Validator.FORMAT_CHECKER)


def violations(validator, obj: dict, where: str) -> list:
    """Every violation as `where: Kind/name: path.to.field: message`, in path order."""
    errors = sorted(validator.iter_errors(obj), key=lambda e: [str(p) for p in e.absolute_path])
    name = obj.get("metadata", {}).get("name")
    return [
        f"{where}: {obj.get('kind')}/{name}: {'.'.join(map(str, error.absolute_path)) or '<root>'}: {error.message}"
        for error in errors
    ]
