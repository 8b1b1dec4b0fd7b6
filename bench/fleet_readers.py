#!/usr/bin/env python3
"""Fleet readers against ingest (issue 27, defect 2): does a crowd of `/ui/fleet` readers move
the ingest latency? Starts the release binary on a temporary SQLite store with one fleet group
of two clusters, loads OBJECTS ConfigMaps into each (OBJECTS compared objects), then measures
ingest (wrk, updates of prod-a's ConfigMaps, every one changing the fleet state) alone and with
READERS concurrent fleet readers (a second wrk on /ui/fleet, then on /api/v1/fleet).

    bench/fleet_readers.py --bin target/release/drift-sentinel [--objects 5000] [--readers 64]
        [--duration 20] [--out report.json]

Standard library only; needs `wrk`. Traffic goes to 127.0.0.1 only; the service is stopped by
its pid. Prints a Markdown table and writes the figures as JSON with --out."""

import argparse
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def config(directory: Path) -> str:
    return f"""store:
  path: {directory / 'bench.db'}
channels:
  - {{name: log, type: log}}
routes:
  - {{channels: [log]}}
limits:
  maxObjects: 100000
fleet:
  groups:
    - name: prod
      clusters: ["prod-*"]
      compare:
        - {{apiVersion: v1, kind: ConfigMap, namespace: bench, name: "cm-*"}}
      severity: warning
      grace: 1h
"""


def event(cluster: str, index: int, value: str, version: int, sequence: int) -> dict:
    name = f"cm-{index}"
    return {
        "specversion": "1.0",
        "id": f"load-{cluster}-{sequence}",
        "source": "https://10.96.0.1:443",
        "type": "dev.knative.apiserver.resource.add",
        "subject": f"/api/v1/namespaces/bench/configmaps/{name}",
        "datacontenttype": "application/json",
        "cluster": cluster,
        "apiversion": "v1",
        "kind": "ConfigMap",
        "name": name,
        "namespace": "bench",
        "data": {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "bench", "uid": f"{cluster}-{name}",
                         "resourceVersion": str(version)},
            "data": {"key": value, "other": "same"},
        },
    }


def post_batch(url: str, events: list):
    request = urllib.request.Request(
        url, data=json.dumps(events).encode(), method="POST",
        headers={"content-type": "application/cloudevents-batch+json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        assert response.status == 202, response.status


def wait_ready(url: str, process, timeout=120.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError("drift-sentinel exited early")
        try:
            with urllib.request.urlopen(url + "/readyz", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise RuntimeError("drift-sentinel did not become ready")


UNITS = {"us": 1e-3, "ms": 1.0, "s": 1000.0}


def wrk_figures(text: str) -> dict:
    """p50/p99 (ms), requests per second and non-2xx answers from wrk's --latency output."""
    figures = {}
    for percent in ("50", "90", "99"):
        match = re.search(rf"^\s+{percent}%\s+([\d.]+)(us|ms|s)\s*$", text, re.M)
        if match:
            figures[f"p{percent}_ms"] = round(float(match[1]) * UNITS[match[2]], 2)
    match = re.search(r"Requests/sec:\s+([\d.]+)", text)
    figures["rps"] = float(match[1]) if match else 0.0
    match = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", text)
    figures["non_2xx"] = int(match[1]) if match else 0
    match = re.search(r"(\d+) requests in", text)
    figures["requests"] = int(match[1]) if match else 0
    match = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text)
    figures["socket_errors"] = sum(int(count) for count in match.groups()) if match else 0
    return figures


def ingest(url: str, objects: int, duration: int) -> dict:
    output = subprocess.run(
        ["wrk", "-t1", "-c8", f"-d{duration}s", "--latency", "--timeout", "30s",
         "-s", str(HERE / "fleet_ingest.lua"),
         url + "/", "--", str(objects)],
        check=True, capture_output=True, text=True).stdout
    return wrk_figures(output)


def with_readers(url: str, path: str, readers: int, objects: int, duration: int) -> dict:
    crowd = subprocess.Popen(
        ["wrk", "-t2", f"-c{readers}", f"-d{duration + 6}s", "--latency", "--timeout", "30s",
         url + path],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        time.sleep(3)
        figures = ingest(url, objects, duration)
        output, _ = crowd.communicate(timeout=duration + 60)
    finally:
        if crowd.poll() is None:
            crowd.kill()
            crowd.wait()
    read = wrk_figures(output)
    figures["readers"] = {key: read[key] for key in ("rps", "p50_ms", "p99_ms", "non_2xx", "requests", "socket_errors") if key in read}
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", required=True)
    parser.add_argument("--objects", type=int, default=5000)
    parser.add_argument("--readers", type=int, default=64)
    parser.add_argument("--duration", type=int, default=20)
    parser.add_argument("--out")
    parser.add_argument("--label", default="")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="drift-sentinel-fleet-bench-") as directory:
        directory = Path(directory)
        (directory / "config.yaml").write_text(config(directory))
        port = free_port()
        log = open(directory / "sentinel.log", "wb")
        process = subprocess.Popen(
            [args.bin, "serve", "--config", str(directory / "config.yaml")],
            stdout=log, stderr=subprocess.STDOUT,
            env=dict(os.environ, RUST_LOG="warn", PORT=str(port)))
        url = f"http://127.0.0.1:{port}"
        try:
            wait_ready(url, process)
            started = time.monotonic()
            sequence = 0
            for cluster in ("prod-a", "prod-b"):
                batch = []
                for index in range(args.objects):
                    sequence += 1
                    batch.append(event(cluster, index, "v0", 1, sequence))
                    if len(batch) == 100:
                        post_batch(url, batch)
                        batch = []
                if batch:
                    post_batch(url, batch)
            loaded = time.monotonic() - started
            with urllib.request.urlopen(url + "/api/v1/fleet", timeout=60) as response:
                view = json.loads(response.read())
            compared = sum(len(g["objects"]) + g["truncated"] for g in view["groups"])
            assert compared == args.objects, compared
            results = {
                "label": args.label,
                "objects_compared": compared,
                "load_seconds": round(loaded, 1),
                "alone": ingest(url, args.objects, args.duration),
                "ui_fleet_readers": with_readers(url, "/ui/fleet", args.readers, args.objects, args.duration),
                "api_fleet_readers": with_readers(url, "/api/v1/fleet", args.readers, args.objects, args.duration),
                "alone_after": ingest(url, args.objects, args.duration),
            }
        finally:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            log.close()
    rows = [("ingest alone", results["alone"]),
            (f"+ {args.readers} readers of /ui/fleet", results["ui_fleet_readers"]),
            (f"+ {args.readers} readers of /api/v1/fleet", results["api_fleet_readers"]),
            ("ingest alone again", results["alone_after"])]
    print(f"{args.label} ({results['objects_compared']} compared objects, loaded in {results['load_seconds']} s)")
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    print("| phase | ingest p50 | ingest p99 | ingest req/s | ingest errors | readers req/s | readers p50 | readers non-2xx |")
    print("|---|---|---|---|---|---|---|---|")
    for name, figures in rows:
        readers = figures.get("readers", {})
        print(f"| {name} | {figures.get('p50_ms')} ms | {figures.get('p99_ms')} ms | {figures['rps']:.0f} | "
              f"{figures['non_2xx'] + figures['socket_errors']} | "
              f"{readers.get('rps', '—')} | {str(readers.get('p50_ms', '—')) + ' ms' if readers else '—'} | "
              f"{readers.get('non_2xx', '—')} |")
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
