#!/usr/bin/env python3
"""A short demo of drift-sentinel on its embedded default (the README's first command running):
it sends a realistic sequence of ApiServerSource events, built from real Knative objects, and
shows the drifts they make fire, from three API groups:

  * Serving: someone `kubectl edit`-s a Knative Service's traffic into an 80/20 split
    (`manual_edit` at once; `traffic_drift` once the served split disagrees past its grace);
  * Eventing: a Trigger loses its subscriber, a Service that was renamed
    (`event_delivery_broken`, after its 2-minute grace);
  * an Eventing ConfigMap: `config-features` edited by hand (`config_drift` at once).

Usage: python3 examples/demo.py [--url http://localhost:8080] [--token T] [--no-wait]

Only the Python 3 standard library. Events go out as structured CloudEvents under the cluster
name `demo` (the `cluster` extension), so they never mix with a real cluster's objects in the same
store; every run uses newer resourceVersions, so it can be run again.
"""

import argparse
import copy
import json
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "knative"
NOW = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
# Newer on every run (ten versions a second), so a second run is not taken for a replay.
VERSION = [int(time.time()) * 10]


def load(relative):
    return json.loads((FIXTURES / relative).read_text())


def item(relative, name):
    return next(i for i in load(relative)["items"] if i["metadata"]["name"] == name)


def next_version(obj):
    copy_ = copy.deepcopy(obj)
    VERSION[0] += 1
    copy_["metadata"]["resourceVersion"] = str(VERSION[0])
    return copy_


def written_by(obj, manager, fields):
    """Records in managedFields that `manager` (a person's tool) wrote `fields` now."""
    obj["metadata"].setdefault("managedFields", []).append({
        "manager": manager, "operation": "Update", "apiVersion": obj["apiVersion"],
        "time": NOW, "fieldsType": "FieldsV1", "fieldsV1": fields})


def event(verb, obj):
    meta = obj["metadata"]
    plural = obj["kind"].lower() + "s"
    return {
        "specversion": "1.0",
        "id": f"demo-{VERSION[0]}-{meta['name']}",
        "source": "https://kubernetes.default.svc",
        "type": f"dev.knative.apiserver.resource.{verb}",
        "subject": f"/apis/{obj['apiVersion']}/namespaces/{meta['namespace']}/{plural}/{meta['name']}",
        "time": NOW,
        "datacontenttype": "application/json",
        "apiversion": obj["apiVersion"],
        "kind": obj["kind"],
        "name": meta["name"],
        "namespace": meta["namespace"],
        "cluster": "demo",
        "data": obj,
    }


class Client:
    def __init__(self, url, token):
        self.url = url.rstrip("/")
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}

    def send(self, verb, obj, what):
        body = json.dumps(event(verb, obj)).encode()
        headers = dict(self.headers, **{"Content-Type": "application/cloudevents+json"})
        request = urllib.request.Request(self.url + "/", data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                status = response.status
        except urllib.error.HTTPError as error:
            status = error.code
            print(f"  {what}: HTTP {status} {error.read().decode(errors='replace')}")
            sys.exit(1)
        except urllib.error.URLError as error:
            sys.exit(f"cannot reach drift-sentinel at {self.url}: {error.reason}\n"
                     "Start it first: cargo run --release -- serve --config config/drift-sentinel.yaml")
        print(f"  {what}: HTTP {status}")

    def firing(self):
        request = urllib.request.Request(
            self.url + "/api/v1/drifts?state=firing&cluster=demo&limit=100", headers=self.headers)
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())["items"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="http://localhost:8080")
    parser.add_argument("--token", help="api.token / auth.bearerToken, when the service has one")
    parser.add_argument("--no-wait", action="store_true",
                        help="do not wait for the drifts with a grace period to fire")
    args = parser.parse_args()
    client = Client(args.url, args.token)

    print("1. First sight of three objects (their baseline: nothing to report).")
    service = next_version(item(
        "serving/redhat-developer-vscode-knative__test-servingTree-singleServiceServiceList.json", "example"))
    trigger = next_version(item(
        "eventing/redhat-developer-vscode-knative__test-eventingTree-trigger.json", "example-trigger0"))
    # The capture was read through the old v1beta1 API; a current cluster's source sends v1.
    trigger["apiVersion"] = "eventing.knative.dev/v1"
    features = next_version(json.loads((ROOT / "examples" / "demo" / "config-features.json").read_text()))
    client.send("add", service, "Knative Service a-serverless-example/example")
    client.send("add", trigger, "Trigger josh/example-trigger0")
    client.send("add", features, "ConfigMap knative-eventing/config-features")

    print("2. Someone runs `kubectl edit ksvc example` and splits traffic 80/20 by hand.")
    split = next_version(service)
    split["spec"]["traffic"][0]["percent"] = 80
    split["spec"]["traffic"][1]["percent"] = 20
    written_by(split, "kubectl-edit", {"f:spec": {"f:traffic": {}}})
    client.send("update", split, "Service edited")

    print("3. The Trigger's subscriber Service was renamed: the Eventing controller reports it.")
    lost = next_version(trigger)
    message = 'failed to get object josh/aaa: services.serving.knative.dev "aaa" not found'
    for condition in lost["status"]["conditions"]:
        if condition["type"] in ("SubscriberResolved", "Ready"):
            condition.update({"status": "False", "reason": "Unable to get the Subscriber's URI",
                              "message": message})
    lost["status"].pop("subscriberUri", None)
    client.send("update", lost, "Trigger status")

    print("4. Someone edits Eventing's config-features by hand (kubectl edit cm).")
    edited = next_version(features)
    edited["data"]["delivery-timeout"] = "disabled"
    written_by(edited, "kubectl-edit", {"f:data": {"f:delivery-timeout": {}}})
    client.send("update", edited, "ConfigMap edited")

    expected = {"manual_edit", "config_drift", "traffic_drift", "event_delivery_broken"}
    deadline = time.monotonic() + (0 if args.no_wait else 150)
    seen = set()
    print("\nFiring drifts (traffic_drift and event_delivery_broken fire after their 2-minute grace):")
    while True:
        for drift in client.firing():
            key = (drift["class"], drift["kind"], drift["name"])
            if key not in seen:
                seen.add(key)
                print(f"  [{drift['severity']}] {drift['class']}: {drift['evidence']['summary']}")
        if {key[0] for key in seen} >= expected or time.monotonic() >= deadline:
            break
        time.sleep(2)
    missing = expected - {key[0] for key in seen}
    if missing and not args.no_wait:
        print(f"\nNot firing yet: {', '.join(sorted(missing))} (is a grace period configured longer?)")
    print(f"\nSee them in the service's log (the `log` channel), at {client.url}/api/v1/drifts?cluster=demo "
          f"and on the dashboard at {client.url}/ui")
    return 0 if not missing or args.no_wait else 1


if __name__ == "__main__":
    sys.exit(main())
