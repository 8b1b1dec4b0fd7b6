#!/usr/bin/env python3
"""The reviewer's reproductions of issue 27, defect 1 (BENCHMARKS.md, "Hostile CEL"): a team
invariant whose `matches` pattern comes from the object, against the release binary on loopback.

  cargo build --release --bin drift-sentinel
  python -m pip install -r tests/python/requirements.txt   # once (cloudevents, pyyaml, ...)
  python bench/hostile_cel.py [--bin target/release/drift-sentinel] [--stored 300]

Phases, each printed as one line of numbers:
1. live: the hostile Service (800 annotations whose values are the issue's pattern) is posted
   again and again (as the Broker retries it), once with the same pattern in every annotation
   and once with patterns distinct per event (no cache helps), while bystander events flow at
   20/s: the bystanders' latency (p50, p99, max), the hostile event's, and the budget stops
   counted (`drift_sentinel_invariant_errors_total{kind="budget"}`); then from 16 concurrent
   senders (many hostile events share a round: the budget bounds each, not their number).
2. reload: `--stored` hostile Services (distinct patterns) are stored, the rules are reloaded,
   and bystander events are posted during the re-judge: their latency, that each got 202, how
   long the re-judge took (from `/readyz`).
3. restart: the same store, a SIGTERM and a start: the time to the first 202, the bystanders'
   latency during the re-judge after start.
4. heavy literal pattern: a ConfigMap with one 240 KB value and a rule with a fixed heavy
   pattern (a Unicode word boundary, which makes the lazy DFA give up): the event's latency;
   then a value just short enough for the budget to let the search run (the slowest
   evaluation the budget allows).

Everything runs on 127.0.0.1; the process it starts is stopped by its pid.
"""

import argparse
import copy
import json
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "python"))

import conftest  # noqa: E402  (the process tests' launcher: PORT=0, the `Listening.` line)
from conftest import Sentinel, attributes, load_yaml_fixture, swap_config, wait_for  # noqa: E402
from cloudevents.core.bindings.http import to_binary_event  # noqa: E402
from cloudevents.core.v1.event import CloudEvent  # noqa: E402

HOSTILE_PATTERN = r"^(((\w{1,50}){1,50}){1,20})$"
DYNAMIC_RULE = (
    "    - name: keys-match-values\n"
    "      match: {kind: Service}\n"
    "      expression: \"object.metadata.annotations.all(k, k.matches(object.metadata.annotations[k]))\"\n"
)
HEAVY_RULE = (
    "    - name: heavy-literal\n"
    "      match: {kind: ConfigMap}\n"
    "      expression: \"object.data.all(k, !object.data[k].matches('(\\\\\\\\b\\\\\\\\w+\\\\\\\\b\\\\\\\\s?){1,30}x'))\"\n"
)
KSVC = "serving/openshift-labs-learn-katacoda__serverless-05-knative-client__ksvc-greeter.yaml"
COUNTER = [0]
RV = [90_000_000]


def next_rv() -> str:
    RV[0] += 1
    return str(RV[0])


def post(sentinel: Sentinel, verb: str, obj: dict) -> tuple:
    """Posts one ApiServerSource event (binary mode); (status, seconds)."""
    COUNTER[0] += 1
    message = to_binary_event(CloudEvent(attributes(f"bench-{COUNTER[0]}", verb, obj, cluster="prod"), obj))
    started = time.monotonic()
    status, _, _ = sentinel.post(dict(message.headers), message.body)
    return status, time.monotonic() - started


def service(namespace: str, name: str, uid: str, annotations: dict) -> dict:
    obj = load_yaml_fixture(KSVC)
    obj["metadata"].update(namespace=namespace, name=name, uid=uid, resourceVersion=next_rv())
    obj["metadata"].pop("selfLink", None)
    obj["metadata"]["annotations"] = annotations
    return obj


def hostile(index: int, distinct: bool, slot=None, annotations: int = 800) -> dict:
    """The hostile Service; `slot` names the object (the same one updated), else `index` does."""
    values = {f"example.com/key-{key}": (f"{HOSTILE_PATTERN}|{index}-{key}" if distinct else HOSTILE_PATTERN)
              for key in range(annotations)}
    slot = index if slot is None else slot
    return service("hostile", f"hostile-{slot}", f"7e0a0000-0000-4000-8000-{slot:012d}", values)


def bystander(index: int) -> dict:
    return service("team-a", f"bystander-{index % 50}", f"5d1c9a20-0000-4000-8000-{index % 50:012d}",
                   {"team": "a"})


def metric(sentinel: Sentinel, name: str, **labels) -> float:
    with urllib.request.urlopen(sentinel.url + "/metrics", timeout=5) as response:
        text = response.read().decode()
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        if all(f'{key}="{value}"' in line for key, value in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


def readyz(sentinel: Sentinel) -> dict:
    with urllib.request.urlopen(sentinel.url + "/readyz", timeout=5) as response:
        return json.loads(response.read())


def quantiles(samples: list) -> str:
    if not samples:
        return "none"
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return (f"n={len(ordered)} p50={statistics.median(ordered) * 1000:.1f}ms "
            f"p99={p99 * 1000:.1f}ms max={ordered[-1] * 1000:.1f}ms")


def bystanders_while(sentinel: Sentinel, busy, rate: float = 20.0) -> tuple:
    """Posts bystander events at `rate` per second while `busy()` is true; (latencies, statuses)."""
    latencies, statuses = [], []
    index = 0
    while busy():
        status, took = post(sentinel, "update", bystander(index))
        latencies.append(took)
        statuses.append(status)
        index += 1
        time.sleep(max(0.0, 1.0 / rate - took))
    return latencies, statuses


def config(workdir: Path, invariants: str) -> str:
    return (f"store:\n  path: {workdir / 'sentinel.db'}\nserver:\n  drainTimeout: 5s\n"
            "channels:\n  - {name: log, type: log}\nrules:\n  invariants:\n" + invariants)


def start(workdir: Path, volume: Path) -> Sentinel:
    sentinel = Sentinel(workdir)
    sentinel.env = {"RUST_LOG": "info"}
    sentinel.config_path = volume / "config.yaml"
    return sentinel.start()


def live(workdir: Path, volume: Path, seconds: float):
    sentinel = start(workdir, volume)
    try:
        for distinct, senders in ((False, 1), (True, 1), (True, 16)):
            hostile_took, stop = [], threading.Event()

            def hammer(sender: int):
                index = 1_000_000 * (sender + 1) if distinct else 0
                while not stop.is_set():
                    index += 1
                    slot = (2 + sender) if distinct else 0
                    status, took = post(sentinel, "update", hostile(index, distinct, slot=slot))
                    hostile_took.append(took)

            before = metric(sentinel, "drift_sentinel_invariant_errors_total", kind="budget")
            threads = [threading.Thread(target=hammer, args=(sender,)) for sender in range(senders)]
            for thread in threads:
                thread.start()
            deadline = time.monotonic() + seconds
            latencies, statuses = bystanders_while(sentinel, lambda: time.monotonic() < deadline)
            stop.set()
            for thread in threads:
                thread.join()
            stops = metric(sentinel, "drift_sentinel_invariant_errors_total", kind="budget") - before
            errors = metric(sentinel, "drift_sentinel_invariant_errors_total", kind="evaluation")
            print(f"live ({'distinct' if distinct else 'same'} patterns, {senders} hostile sender(s)): "
                  f"bystanders {quantiles(latencies)}, non-202 {sum(1 for s in statuses if s != 202)}; "
                  f"hostile events {quantiles(hostile_took)}; budget stops {stops:.0f} of {len(hostile_took)}, "
                  f"evaluation errors {errors:.0f}", flush=True)
    finally:
        sentinel.stop()


def reload_and_restart(workdir: Path, volume: Path, stored: int):
    sentinel = start(workdir, volume)
    try:
        for index in range(stored):
            status, _ = post(sentinel, "add", hostile(10_000 + index, True))
            assert status == 202, status
        swap_config(volume, config(workdir, DYNAMIC_RULE + HEAVY_RULE.replace("heavy-literal", "second")), 2)
        started = time.monotonic()
        assert wait_for(lambda: "rejudging" in readyz(sentinel), timeout=10, step=0.002), "no re-judge seen"
        latencies, statuses = bystanders_while(sentinel, lambda: "rejudging" in readyz(sentinel))
        took = time.monotonic() - started
        print(f"reload with {stored} hostile objects stored: re-judge {took:.2f}s; bystanders during it "
              f"{quantiles(latencies)}, all 202: {all(s == 202 for s in statuses)}", flush=True)
    finally:
        sentinel.stop()
    stopped = time.monotonic()
    sentinel = Sentinel(workdir)
    sentinel.env = {"RUST_LOG": "info"}
    sentinel.config_path = volume / "config.yaml"
    sentinel.start()
    try:
        status, first = post(sentinel, "update", bystander(0))
        ready_after = time.monotonic() - stopped
        body = readyz(sentinel)
        latencies, statuses = bystanders_while(sentinel, lambda: "rejudging" in readyz(sentinel))
        print(f"restart with {stored} hostile objects stored: start to first answer {ready_after:.2f}s "
              f"(status {status}, {first * 1000:.1f}ms; /readyz then {body}); bystanders during the re-judge "
              f"{quantiles(latencies)}, all 202: {all(s == 202 for s in statuses)}", flush=True)
    finally:
        sentinel.stop()


def heavy_literal(workdir: Path, volume: Path, repeats: int):
    sentinel = start(workdir, volume)
    try:
        text = "ab_\u00dc " * 40_000   # 240 KB (the Ü is two bytes)
        config_map = {"apiVersion": "v1", "kind": "ConfigMap",
                      "metadata": {"name": "big", "namespace": "team-a", "uid": "c0f1a000-0000-4000-8000-000000000001",
                                   "resourceVersion": next_rv()},
                      "data": {"text": text}}
        took = []
        for _ in range(repeats):
            config_map = copy.deepcopy(config_map)
            config_map["metadata"]["resourceVersion"] = next_rv()
            status, seconds = post(sentinel, "update", config_map)
            assert status == 202, status
            took.append(seconds)
        stops = metric(sentinel, "drift_sentinel_invariant_errors_total", rule="heavy-literal", kind="budget")
        print(f"heavy literal pattern on a {len(text.encode()) // 1000} KB value: events {quantiles(took)}, "
              f"budget stops {stops:.0f} of {repeats}", flush=True)
        # At the edge of the budget: the longest text the pattern (a 1.7 MB program) may search
        # within it (about 5 KB), searched to the end: the slowest evaluation the budget lets by.
        config_map["data"] = {"text": "ab_\u00dc " * 850}
        took = []
        for _ in range(repeats):
            config_map = copy.deepcopy(config_map)
            config_map["metadata"]["resourceVersion"] = next_rv()
            status, seconds = post(sentinel, "update", config_map)
            assert status == 202, status
            took.append(seconds)
        edge_stops = metric(sentinel, "drift_sentinel_invariant_errors_total", rule="heavy-literal",
                            kind="budget") - stops
        print(f"heavy literal pattern at the edge of the budget ({len(config_map['data']['text'].encode())} bytes): "
              f"events {quantiles(took)}, budget stops {edge_stops:.0f} of {repeats}", flush=True)
    finally:
        sentinel.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", default=str(ROOT / "target" / "release" / "drift-sentinel"))
    parser.add_argument("--stored", type=int, default=300)
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args()
    conftest.binary = lambda: args.bin
    with tempfile.TemporaryDirectory(prefix="drift-sentinel-hostile-") as directory:
        workdir = Path(directory)
        volume = workdir / "volume"
        volume.mkdir()
        swap_config(volume, config(workdir, DYNAMIC_RULE + HEAVY_RULE), 1)
        live(workdir, volume, args.seconds)
        heavy_literal(workdir, volume, 20)
        reload_and_restart(workdir, volume, args.stored)


if __name__ == "__main__":
    main()
