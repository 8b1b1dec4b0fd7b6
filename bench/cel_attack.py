#!/usr/bin/env python3
"""Reviewer's probe: CEL functions whose cost grows faster than what the budget charges.
Usage: DRIFT_SENTINEL_BIN=target/release/drift-sentinel python bench/cel_attack.py [case ...]
(the Python of tests/python/requirements.txt; written by the issue-27 re-review, kept to re-run it)
Starts the release binary (temp SQLite), one rule per case (matchLabels attack=<case>),
posts one ConfigMap per case and times it; a bystander event is posted concurrently."""
import os, urllib.error, sys, time, json, tempfile, threading, urllib.request
from pathlib import Path
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "python"))
import conftest
from conftest import Sentinel, attributes
from cloudevents.core.bindings.http import to_binary_event
from cloudevents.core.v1.event import CloudEvent

BIN = os.environ.get("DRIFT_SENTINEL_BIN", str(ROOT / "target" / "release" / "drift-sentinel"))
os.environ["DRIFT_SENTINEL_BIN"] = BIN
RULES = {
    # naive O(n*m) window search in cel 0.15 find_runes; charged (n+m)/16
    "indexof": "object.data.text.indexOf(object.data.needle) >= -1",
    "lastindexof": "object.data.text.lastIndexOf(object.data.needle) >= -1",
    # one String + Box per code point; charged n/16
    "split": "size(object.data.text.split('')) > 0",
    # output n_small * n_text built before @ds_sized charges it
    "replace": "size(object.data.small.replace('', object.data.text)) > 0",
    "lastindexof2": "object.data.text.lastIndexOf(object.data.needle) >= -1",
    "overflow": "9223372036854775807 + int(object.data.n) > 0",
    "splitsep": "size(object.data.text.split(object.data.sep)) > 0",
    "mapacc": "size(object.data.text.split('').map(c, c)) > 0",
    "filteracc": "size(object.data.text.split('').filter(c, true)) > 0",
    # control: contains (two-way, linear)
    "contains": "object.data.text.contains(object.data.needle) || true",
}
SIZES = {
    "indexof": dict(text="a" * 750_000, needle="a" * 249_999 + "b"),
    "lastindexof": dict(text="a" * 750_000, needle="b" + "a" * 249_999),
    "split": dict(text="a" * 1_000_000),
    "replace": dict(small="x" * 1000, text="y" * 1_000_000),
    "lastindexof2": dict(text="a" * 300_000, needle="a" * 100_000 + "b"),
    "overflow": dict(n="1"),
    "splitsep": dict(text="a" * 1_000_000, sep="a"),
    "mapacc": dict(text="a" * 12_000),
    "filteracc": dict(text="a" * 12_000),
    "contains": dict(text="a" * 200_000, needle="a" * 20_000 + "b"),
}

def rule_yaml(case):
    expr = RULES[case].replace('"', '\\"')
    return (f"    - name: attack-{case}\n      match: {{kind: ConfigMap, matchLabels: {{attack: {case}}}}}\n"
            f"      expression: \"{expr}\"\n")

RV = [100]
def cm(case, data, name=None):
    RV[0] += 1
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name or f"cm-{case}", "namespace": "team-x", "uid": f"uid-{name or case}",
                         "resourceVersion": str(RV[0]), "labels": {"attack": case}},
            "data": data}

N = [0]
def post(s, obj):
    N[0] += 1
    msg = to_binary_event(CloudEvent(attributes(f"a-{N[0]}", "update", obj, cluster="prod"), obj))
    t = time.monotonic()
    req = urllib.request.Request(s.url + "/", data=msg.body, headers=dict(msg.headers), method="POST")
    try:
        with urllib.request.urlopen(req, timeout=300) as r:
            st, body = r.status, r.read()
    except urllib.error.HTTPError as e:
        st, body = e.code, e.read()
    return st, time.monotonic() - t, body

def metric(s, name, **labels):
    text = urllib.request.urlopen(s.url + "/metrics", timeout=30).read().decode()
    tot = 0.0
    for line in text.splitlines():
        if line.startswith(name) and all(f'{k}="{v}"' in line for k, v in labels.items()):
            tot += float(line.rsplit(" ", 1)[1])
    return tot

def main():
    cases = sys.argv[1:] or list(RULES)
    with tempfile.TemporaryDirectory(prefix="rev27-") as d:
        d = Path(d)
        s = Sentinel(d, "rules:\n  invariants:\n" + "".join(rule_yaml(c) for c in cases))
        s.env = {"RUST_LOG": "info"}
        conftest_bin = getattr(conftest, "BINARY", None)
        s.start()
        try:
            for c in cases:
                obj = cm(c, SIZES[c])
                result = {}
                def bystander():
                    time.sleep(0.05)
                    st, took, _ = post(s, cm("none", {"k": "v"}, name="bystander"))
                    result["by"] = (st, took)
                th = threading.Thread(target=bystander); th.start()
                st, took, body = post(s, obj)
                th.join()
                stops = metric(s, "drift_sentinel_invariant_errors_total", rule=f"attack-{c}")
                print(f"{c}: event status {st} took {took*1000:.0f} ms; bystander {result['by'][0]} "
                      f"{result['by'][1]*1000:.0f} ms; invariant errors for rule {stops:.0f}", flush=True)
            print(json.dumps([l for l in s.logs().splitlines() if "attack-" in l][-6:], indent=0)[:3000])
        finally:
            s.stop()

main()
