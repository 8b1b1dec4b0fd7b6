"""Delivery through the real binary: a real Alertmanager pair, and nothing lost across SIGKILL.

The webhook receiver here verifies signatures with the `standardwebhooks` PyPI library (the
reference implementation of the spec), not with this project's code.
"""

import copy
import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from cloudevents.core.bindings.http import to_binary_event
from cloudevents.core.v1.event import CloudEvent
from standardwebhooks.webhooks import Webhook

from conftest import Sentinel, attributes, free_port, load_yaml_fixture, wait_for

WHSEC = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD"
ALERTMANAGER = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")
RV = [20_000_000]


def config_map(name: str) -> dict:
    obj = load_yaml_fixture("configmaps/knative-serving__config-core-configmaps__config-autoscaler.yaml")
    obj["metadata"]["name"] = name
    obj["metadata"]["uid"] = f"uid-{name}"
    obj["metadata"]["resourceVersion"] = "100"
    obj["metadata"]["managedFields"] = [{
        "manager": "kubectl-client-side-apply", "operation": "Update", "apiVersion": "v1",
        "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {".": {}, "f:_example": {}}},
        "time": "2026-11-01T00:00:00Z"}]
    return obj


def edit(obj: dict, key: str, value, manager="kubectl-edit") -> dict:
    out = copy.deepcopy(obj)
    if value is None:
        out["data"].pop(key, None)
    else:
        out["data"][key] = value
    RV[0] += 1
    out["metadata"]["resourceVersion"] = str(RV[0])
    out["metadata"]["managedFields"].append({
        "manager": manager, "operation": "Update", "apiVersion": "v1", "fieldsType": "FieldsV1",
        "fieldsV1": {"f:data": {f"f:{key}": {}}}, "time": "2026-11-29T10:00:00Z"})
    return out


def post(sentinel: Sentinel, event_id: str, verb: str, obj: dict):
    message = to_binary_event(CloudEvent(attributes(event_id, verb, obj, cluster="prod"), obj))
    status, _, body = sentinel.post(dict(message.headers), message.body)
    assert status == 202, body
    return status


# ---- A real Alertmanager ------------------------------------------------------------------------

class Alertmanager:
    def __init__(self, workdir: Path, index: int):
        self.port = None   # picked at the first start, kept across restarts
        self.url = None
        self.dir = workdir / f"am{index}"
        self.dir.mkdir()
        (self.dir / "am.yml").write_text(
            "route:\n  receiver: blackhole\n  group_wait: 1s\nreceivers:\n  - name: blackhole\n")
        self.process = None

    def start(self):
        """Alertmanager cannot bind port 0 and report it: it is given a free port, and a start
        that lost the port to another process (or a restart that finds it not yet released) is
        tried again, on a new port the first time, on the same one after."""
        deadline = time.monotonic() + 30
        log_path = self.dir / "am.log"
        while True:
            port = self.port or free_port()
            offset = log_path.stat().st_size if log_path.exists() else 0
            # A fresh storage directory each start: Alertmanager keeps alerts in memory only, and
            # a restart must lose them for the test to prove that the resend restores them.
            storage = self.dir / f"data-{time.monotonic_ns()}"
            self.log = open(log_path, "ab")
            self.process = subprocess.Popen(
                [ALERTMANAGER, f"--config.file={self.dir / 'am.yml'}", f"--storage.path={storage}",
                 f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address="],
                stdout=self.log, stderr=subprocess.STDOUT)

            def this_start():
                with open(log_path, "rb") as reader:
                    reader.seek(offset)
                    return reader.read().decode(errors="replace")
            wait_for(lambda: 'msg="Listening on"' in this_start() or self.process.poll() is not None, timeout=20)
            if 'msg="Listening on"' in this_start():
                self.port, self.url = port, f"http://127.0.0.1:{port}"
                assert wait_for(self.ready, timeout=20), log_path.read_text()
                return self
            self.stop()
            assert "address already in use" in this_start() and time.monotonic() < deadline, log_path.read_text()

    def ready(self):
        try:
            with urllib.request.urlopen(self.url + "/-/ready", timeout=1) as response:
                return response.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def stop(self):
        if self.process and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)
        self.log.close()

    def alerts(self):
        query = urllib.parse.quote('alertname="KnativeDrift"')
        with urllib.request.urlopen(f"{self.url}/api/v2/alerts?filter={query}", timeout=5) as response:
            return json.loads(response.read())


def test_real_alertmanager_pair_sees_firing_restore_after_restart_and_resolve(workdir):
    assert ALERTMANAGER, "prometheus-alertmanager must be installed (scripts/test.sh installs it)"
    first, second = Alertmanager(workdir, 1).start(), Alertmanager(workdir, 2).start()
    sentinel = Sentinel(workdir, extra_config="")
    sentinel.config_path.write_text(
        f"store:\n  path: {workdir / 'sentinel.db'}\n"
        "channels:\n"
        "  - name: am\n    type: alertmanager\n"
        f"    urls: ['{first.url}', '{second.url}']\n"
        "    resendInterval: 1s\n    minBackoff: 200ms\n    maxBackoff: 1s\n"
        "routes:\n  - channels: [am]\n    groupWait: 0s\n    groupInterval: 0s\n"
    )
    sentinel.start()
    try:
        base = config_map("config-autoscaler")
        post(sentinel, "am-1", "add", base)
        edited = edit(base, "min-scale", "1")
        post(sentinel, "am-2", "update", edited)
        for am in (first, second):
            alerts = wait_for(am.alerts, timeout=20)
            assert alerts, f"alert reached {am.url}"
            labels = alerts[0]["labels"]
            assert labels == {"alertname": "KnativeDrift", "drift_class": "config_drift", "severity": "warning",
                              "cluster": "prod", "namespace": "knative-serving", "kind": "ConfigMap",
                              "name": "config-autoscaler"}, labels
            assert "min-scale added (1)" in alerts[0]["annotations"]["summary"]
            assert "kubectl-edit" in alerts[0]["annotations"]["actor"]
            assert alerts[0]["status"]["state"] == "active"
        # Alertmanager restarts and forgets everything; the next resend restores the alert.
        first.stop()
        first.start()
        assert wait_for(first.alerts, timeout=20), "firing alert restored after an Alertmanager restart"
        # The edit is reverted: the drift resolves and both instances drop the alert.
        post(sentinel, "am-3", "update", edit(edited, "min-scale", None))
        for am in (first, second):
            assert wait_for(lambda: am.alerts() == [], timeout=20), f"{am.url} still has {am.alerts()}"
    finally:
        sentinel.stop()
        first.stop()
        second.stop()


# ---- SIGKILL with deliveries pending --------------------------------------------------------------

class WebhookReceiver:
    """A Standard Webhooks receiver using the reference Python library to verify signatures.
    Its port is bound at once (`port`), connections are refused until `start()`."""

    def __init__(self):
        self.verifier = Webhook(WHSEC)
        self.ids = []
        self.drifts = []
        self.bad = 0
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["content-length"]))
                try:
                    payload = receiver.verifier.verify(body, dict(self.headers))
                except Exception:
                    receiver.bad += 1
                    self.send_response(401)
                    self.end_headers()
                    return
                receiver.ids.append(self.headers["webhook-id"])
                receiver.drifts.extend(payload["data"])
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args):
                pass

        class Server(ThreadingHTTPServer):
            allow_reuse_address = False  # the port is this receiver's alone, even while it is down

        self.server = Server(("127.0.0.1", 0), Handler, bind_and_activate=False)
        self.server.server_bind()
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def start(self):
        self.server.server_activate()
        self.thread.start()
        return self

    def stop(self):
        if self.thread.is_alive():
            self.server.shutdown()
        self.server.server_close()


def test_committed_alerts_survive_sigkill_and_are_delivered_once(workdir):
    receiver = WebhookReceiver()  # its port is held; nothing answers until it starts
    port = receiver.port
    sentinel = Sentinel(workdir)
    sentinel.config_path.write_text(
        f"store:\n  path: {workdir / 'sentinel.db'}\n"
        "channels:\n"
        f"  - name: hook\n    type: webhook\n    url: http://127.0.0.1:{port}/hook\n    secret: {WHSEC}\n"
        "    minBackoff: 200ms\n    maxBackoff: 1s\n    maxAttempts: 1000\n"
        "routes:\n  - channels: [hook]\n    groupWait: 0s\n    groupInterval: 0s\n    groupBy: [name]\n    repeatInterval: 0s\n"
    )
    sentinel.start()
    names = [f"config-drift-{index:02d}" for index in range(20)]
    for index, name in enumerate(names):
        base = config_map(name)
        post(sentinel, f"kill-{index}-a", "add", base)
        post(sentinel, f"kill-{index}-b", "update", edit(base, "max-scale", str(index + 1)))
    # Every 202 above means the drift and its notification are committed; the receiver is down.
    assert wait_for(lambda: sentinel.metric("drift_sentinel_outbox_pending") >= 20, timeout=15)
    sentinel.stop(sig=signal.SIGKILL)
    receiver.start()
    try:
        sentinel.start()
        assert wait_for(lambda: len({drift["name"] for drift in receiver.drifts}) == 20, timeout=30), receiver.drifts
        assert sorted({drift["name"] for drift in receiver.drifts}) == names
        assert receiver.bad == 0
        assert len(receiver.ids) == len(set(receiver.ids)), "no notification delivered twice"
        assert all(drift["state"] == "firing" and drift["class"] == "config_drift" for drift in receiver.drifts)
    finally:
        sentinel.stop()
        receiver.stop()
