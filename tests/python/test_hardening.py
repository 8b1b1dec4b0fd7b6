"""Hardening, process-level: crash safety under load, overload, and graceful shutdown.

* Crash safety: thousands of events from several threads, many of them drifts; the service is
  SIGKILLed at random moments (at least three times) and restarted each time. In the end every
  drift whose event was answered 2xx reached the webhook receiver, and no drift notice arrived
  under two different `webhook-id`s (a resend after a kill between the send and the store update
  carries the same id, which the receiver drops, as the Standard Webhooks spec intends).
* Overload: many concurrent clients push far beyond what the service sustains; the resident
  memory stays under a cap and does not grow from one wave to the next; refused events get 503
  with Retry-After; afterwards the service is ready and takes events again.
* Graceful shutdown: SIGTERM while requests are in flight: they finish with 202 and their drifts
  are committed (visible through the API after a restart); readiness turns false during the drain;
  the process exits within `server.drainTimeout`.

The webhook receiver verifies signatures with the `standardwebhooks` library (as in
test_delivery_process.py).
"""

import copy
import http.client
import json
import multiprocessing
import random
import signal
import socket
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from standardwebhooks.webhooks import Webhook

from conftest import Sentinel, attributes, http_status, load_yaml_fixture, wait_for

WHSEC = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD"


# ---- Events -------------------------------------------------------------------------------------

def base_config_map(name: str) -> dict:
    """A watched ConfigMap (`config-*` in knative-serving) as first seen, applied by CI."""
    obj = load_yaml_fixture("configmaps/knative-serving__config-core-configmaps__config-autoscaler.yaml")
    obj["metadata"]["name"] = name
    obj["metadata"]["uid"] = f"uid-{name}"
    obj["metadata"]["resourceVersion"] = "100"
    obj["data"] = {"_example": "# see the Knative docs"}
    obj["metadata"]["managedFields"] = [{
        "manager": "kubectl-client-side-apply", "operation": "Update", "apiVersion": "v1",
        "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {".": {}, "f:_example": {}}},
        "time": "2026-11-01T00:00:00Z"}]
    return obj


def hand_edit(obj: dict, step: int, value) -> dict:
    """The next version, written by `kubectl edit`: `max-scale` set to `value` (None removes it)."""
    out = copy.deepcopy(obj)
    if value is None:
        out["data"].pop("max-scale", None)
    else:
        out["data"]["max-scale"] = value
    out["metadata"]["resourceVersion"] = str(100 + step)
    stamp = f"2026-11-29T10:{step // 60:02d}:{step % 60:02d}Z"
    fields = {"f:data": {"f:max-scale": {}}} if value is not None else {"f:data": {".": {}}}
    out["metadata"]["managedFields"] = obj["metadata"]["managedFields"][:1] + [{
        "manager": "kubectl-edit", "operation": "Update", "apiVersion": "v1", "fieldsType": "FieldsV1",
        "fieldsV1": fields, "time": stamp}]
    return out


def binary_request(event_id: str, verb: str, obj: dict):
    """Headers and body of a binary-mode CloudEvent, as the Broker sends it."""
    headers = {"content-type": "application/json"}
    for key, value in attributes(event_id, verb, obj, cluster="prod").items():
        if key != "datacontenttype":
            headers[f"ce-{key}"] = value
    return headers, json.dumps(obj).encode()


# ---- A client that behaves like the Broker: retry on 503 and connection errors ---------------

class Client:
    def __init__(self, port: int):
        self.port = port
        self.connection = None

    def _connect(self):
        self.connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)

    def post(self, headers: dict, body: bytes):
        """One attempt: (status, headers, body), or None on a connection error."""
        try:
            if self.connection is None:
                self._connect()
            self.connection.request("POST", "/", body=body, headers=headers)
            response = self.connection.getresponse()
            data = response.read()
            if response.getheader("connection", "").lower() == "close":
                self.close()
            return response.status, {k.lower(): v for k, v in response.getheaders()}, data
        except (OSError, http.client.HTTPException):
            self.close()
            return None

    def close(self):
        if self.connection is not None:
            self.connection.close()
            self.connection = None


def deliver_until_accepted(client: Client, headers: dict, body: bytes, stats: dict, deadline: float,
                           progress=None):
    """Sends like the Broker: retries 503 (after Retry-After, capped) and connection errors."""
    while True:
        result = client.post(headers, body)
        if result is None:
            stats["connection_errors"] += 1
            time.sleep(0.05)
        else:
            status, response_headers, data = result
            if 200 <= status < 300:
                stats["accepted"] += 1
                if progress is not None:
                    progress.add()
                return
            assert status == 503, (status, data)
            assert "retry-after" in response_headers, response_headers
            stats["refused"] += 1
            time.sleep(min(float(response_headers["retry-after"]), 0.2))
        assert time.monotonic() < deadline, "an event was never accepted"


class Progress:
    def __init__(self):
        self.lock = threading.Lock()
        self.count = 0

    def add(self):
        with self.lock:
            self.count += 1


# ---- A Standard Webhooks receiver that de-duplicates by webhook-id -----------------------------

class Receiver:
    def __init__(self, delay: float = 0.0):
        self.verifier = Webhook(WHSEC)
        self.lock = threading.Lock()
        self.by_id = {}        # webhook-id -> payload (first delivery)
        self.repeats = 0       # deliveries of an id already seen (dropped, as idempotency intends)
        self.bad = 0
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                body = self.rfile.read(int(self.headers["content-length"]))
                try:
                    payload = receiver.verifier.verify(body, dict(self.headers))
                except Exception:
                    with receiver.lock:
                        receiver.bad += 1
                    self.send_response(401)
                    self.send_header("content-length", "0")
                    self.end_headers()
                    return
                with receiver.lock:
                    webhook_id = self.headers["webhook-id"]
                    if webhook_id in receiver.by_id:
                        receiver.repeats += 1
                    else:
                        receiver.by_id[webhook_id] = payload
                # A slow destination widens the window between the send and the store update,
                # where a kill leaves a delivered message unrecorded.
                if delay:
                    time.sleep(delay)
                self.send_response(204)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def start(self):
        self.thread.start()
        return self

    def stop(self):
        self.server.shutdown()

    def notices(self):
        """(drift id, state, name) -> set of webhook-ids that carried it."""
        out = {}
        with self.lock:
            for webhook_id, payload in self.by_id.items():
                for drift in payload["data"]:
                    out.setdefault((drift["id"], drift["state"], drift["name"]), set()).add(webhook_id)
        return out


def webhook_sentinel(workdir, port: int, extra_server: str = "") -> Sentinel:
    sentinel = Sentinel(workdir)
    sentinel.config_path.write_text(
        f"store:\n  path: {workdir / 'sentinel.db'}\n"
        f"server:\n  drainTimeout: 5s\n{extra_server}"
        "channels:\n"
        f"  - name: hook\n    type: webhook\n    url: http://127.0.0.1:{port}/hook\n    secret: {WHSEC}\n"
        "    minBackoff: 100ms\n    maxBackoff: 1s\n    maxAttempts: 10000\n    maxAge: 1h\n"
        "routes:\n  - channels: [hook]\n    groupWait: 0s\n    groupInterval: 0s\n    repeatInterval: 0s\n"
    )
    return sentinel


# ---- 1. Crash safety under load -----------------------------------------------------------------

CONFIG_MAPS = 100
CYCLES = 10          # per ConfigMap: add, then CYCLES x (hand edit: fires; revert: resolves)
THREADS = 8


@pytest.mark.exclusive  # loads both cores on purpose
def test_sigkill_under_load_loses_no_acknowledged_drift_and_never_sends_one_under_two_ids(workdir):
    receiver = Receiver(delay=0.3).start()
    sentinel = webhook_sentinel(workdir, receiver.port)
    sentinel.start()
    names = [f"config-crash-{index:03d}" for index in range(CONFIG_MAPS)]
    stats = {"accepted": 0, "refused": 0, "connection_errors": 0}
    stats_lock = threading.Lock()
    deadline = time.monotonic() + 240

    def sender(mine):
        # Each ConfigMap's events go in order (the next only after the previous was accepted), as
        # one watch stream's would; ConfigMaps are interleaved so every thread stays busy.
        client = Client(sentinel.port)
        local = {"accepted": 0, "refused": 0, "connection_errors": 0}
        objects = {name: base_config_map(name) for name in mine}
        plan = [(name, step) for step in range(2 * CYCLES + 1) for name in mine]
        for name, step in plan:
            if step == 0:
                obj, verb = objects[name], "add"
            else:
                value = str(step) if step % 2 == 1 else None
                obj, verb = hand_edit(objects[name], step, value), "update"
                objects[name] = obj
            headers, body = binary_request(f"{name}-{step}", verb, obj)
            deliver_until_accepted(client, headers, body, local, deadline, progress)
        client.close()
        with stats_lock:
            for key, value in local.items():
                stats[key] += value

    threads = [threading.Thread(target=sender, args=(names[index::THREADS],)) for index in range(THREADS)]
    total = CONFIG_MAPS * (2 * CYCLES + 1)
    progress = Progress()
    # SIGKILL at four random moments while events flow (after a random share of them has been
    # acknowledged, so the kills land mid-stream however fast the machine is), restarting each time.
    rng = random.Random()
    kill_points = sorted(int(total * rng.uniform(0.05, 0.9)) for _ in range(4))
    kills = 0
    try:
        for thread in threads:
            thread.start()
        for point in kill_points:
            while progress.count < point and any(thread.is_alive() for thread in threads):
                time.sleep(0.005)
            time.sleep(rng.uniform(0.0, 0.05))
            sentinel.stop(sig=signal.SIGKILL)
            kills += 1
            sentinel.start()
        for thread in threads:
            thread.join(timeout=max(1.0, deadline - time.monotonic()))
            assert not thread.is_alive(), "senders finished"
        # And once more while the backlog is being delivered (the receiver is slow on purpose).
        backlog = sentinel.metric("drift_sentinel_outbox_pending")
        time.sleep(rng.uniform(0.1, 0.6))
        sentinel.stop(sig=signal.SIGKILL)
        kills += 1
        sentinel.start()
        assert kills == 5, kills
        assert stats["accepted"] == total, stats
        assert stats["connection_errors"] > 0, f"the kills cut off requests in flight: {stats}"

        # Every acknowledged edit fired a drift and every revert resolved it: CYCLES episodes per
        # ConfigMap, each seen firing and resolved.
        def complete():
            episodes = {}
            for (drift_id, state, name) in receiver.notices():
                episodes.setdefault(name, {}).setdefault(drift_id, set()).add(state)
            return all(
                len(episodes.get(name, {})) == CYCLES
                and all(states == {"firing", "resolved"} for states in episodes[name].values())
                for name in names
            )

        assert wait_for(complete, timeout=120, step=0.5), summary(receiver, names)
        assert receiver.bad == 0, "every signature verified"
        # Idempotency: a notice sent again after a kill carries the webhook-id it had.
        twice = {key: ids for key, ids in receiver.notices().items() if len(ids) > 1}
        assert not twice, f"{len(twice)} drift notices arrived under two webhook-ids: {list(twice.items())[:3]}"
        print(f"crash test: kills after {kill_points} of {total} events and once while delivering; "
              f"(backlog {backlog:.0f}); {stats}; {len(receiver.by_id)} messages, {receiver.repeats} repeated ids dropped")
    finally:
        sentinel.stop()
        receiver.stop()


def summary(receiver, names):
    notices = receiver.notices()
    per_name = {}
    for (_, state, name) in notices:
        per_name.setdefault(name, []).append(state)
    short = {name: sorted(per_name.get(name, [])) for name in names if len(per_name.get(name, [])) != 2 * CYCLES}
    return f"incomplete: {len(short)} ConfigMaps, e.g. {list(short.items())[:3]}"


# ---- 2. Overload --------------------------------------------------------------------------------

def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


RSS_CAP_KIB = 300 * 1024
FLOOD_SECONDS = 8.0
RV_TOKEN = b"RV00000000000000000000"     # replaced by a fresh, fixed-width resourceVersion


def load_template(index: int):
    """A watched ConfigMap with 500 keys (~140 KB) whose every value changes with each version,
    written by a trusted manager: real work for the writer (decode, diff, store), no alerts."""
    obj = base_config_map(f"config-load-{index}")
    obj["metadata"]["uid"] = f"uid-load-{index}"
    obj["metadata"]["managedFields"][0]["manager"] = "argocd-controller"
    obj["metadata"]["resourceVersion"] = RV_TOKEN.decode()
    obj["data"] = {f"key-{key:03d}": RV_TOKEN.decode() + "-" + "v" * 230 for key in range(500)}
    headers, body = binary_request(RV_TOKEN.decode(), "update", obj)
    return headers, body


class LazyBody:
    """A body built only when the server asks for it (its length is known beforehand)."""

    def __init__(self, template: bytes, version: bytes):
        self.template, self.version = template, version

    def __len__(self):
        return len(self.template)

    def __call__(self):
        return self.template.replace(RV_TOKEN, self.version)


def fresh(template):
    """The template as a new version: a unique, increasing resourceVersion (and event id)."""
    headers, body = template
    version = str(time.time_ns()).rjust(len(RV_TOKEN), "0").encode()
    return dict(headers, **{"ce-id": f"load-{version.decode()}"}), LazyBody(body, version)


@pytest.mark.exclusive  # loads both cores on purpose
def test_overload_keeps_memory_bounded_refuses_with_retry_after_and_recovers(workdir):
    sentinel = Sentinel(workdir)
    # bodyLimitBytes 256 KiB: the admission budget is 16 such bodies (4 MiB) in flight.
    sentinel.config_path.write_text(
        f"store:\n  path: {workdir / 'sentinel.db'}\n"
        "server:\n  drainTimeout: 5s\n  bodyLimitBytes: 262144\n"
        "channels:\n  - {name: log, type: log}\n"
    )
    sentinel.start()
    pid = sentinel.process.pid
    templates = [load_template(index) for index in range(8)]
    try:
        # The sustainable rate: what four senders get committed, one request at a time each.
        sustained = flood(sentinel.port, pid, templates, clients=4, seconds=3.0)
        rate = sustained["202"] / 3.0
        assert rate > 0 and sustained["503"] == 0, sustained
        waves = []
        for wave in range(2):
            waves.append(flood(sentinel.port, pid, templates, clients=128, seconds=FLOOD_SECONDS, processes=4))
            # The backlog drains and the service is ready again.
            assert wait_for(lambda: ready(sentinel), timeout=30), f"ready after wave {wave}"
        peaks = [wave["peak_rss_kib"] for wave in waves]
        print(f"overload: sustainable {rate:.0f}/s; waves "
              f"{[dict(wave, offered_per_s=round(wave['sent'] / FLOOD_SECONDS)) for wave in waves]}")
        for wave in waves:
            assert wave["sent"] / FLOOD_SECONDS >= 10 * rate, f"ten times {rate:.0f}/s offered: {wave}"
            assert wave["503"] > 0, f"overload is refused with 503: {wave}"
            assert wave["503_without_retry_after"] == 0, wave
            assert wave["other"] == 0, f"only 202 and 503 under overload: {wave}"
            assert wave["errors"] <= wave["sent"] // 200, f"connections are answered, not dropped: {wave}"
            assert wave["202"] > 0, f"work goes on under overload: {wave}"
        assert max(peaks) < RSS_CAP_KIB, f"peak RSS {max(peaks) // 1024} MiB over the cap"
        # Bounded, not leaking: the second wave peaks about where the first did.
        assert peaks[1] < peaks[0] * 1.25 + 16 * 1024, f"RSS grew from wave to wave: {peaks}"
        # Recovered: later events are accepted at once.
        client = ExpectingClient(sentinel.port)
        for index in range(10):
            headers, body = fresh(templates[index % len(templates)])
            result = client.post(headers, body)
            assert result is not None and result[0] == 202, result
        client.close()
        assert rss_kib(pid) < RSS_CAP_KIB
        assert sentinel.metric('drift_sentinel_ingest_errors_total{kind="overloaded"}') > 0
    finally:
        sentinel.stop()


def ready(sentinel) -> bool:
    try:
        with urllib.request.urlopen(sentinel.url + "/readyz", timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


class ExpectingClient:
    """HTTP/1.1 with `Expect: 100-continue`: the body goes out only once the server asks for it,
    so a refusal costs the sender (and the loopback) no body. Keeps its connection while the
    server does."""

    def __init__(self, port: int):
        self.port = port
        self.sock = None
        self.reader = None

    def close(self):
        if self.sock is not None:
            self.sock.close()
            self.sock = self.reader = None

    def _head(self):
        status_line = self.reader.readline()
        if not status_line:
            raise ConnectionError("closed")
        status = int(status_line.split()[1])
        headers = {}
        while True:
            line = self.reader.readline()
            if line in (b"\r\n", b"\n", b""):
                break
            name, _, value = line.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        return status, headers

    def post(self, headers: dict, body):
        """`body`: bytes, or a `LazyBody` built only when the server asks for it."""
        try:
            if self.sock is None:
                self.sock = socket.create_connection(("127.0.0.1", self.port), timeout=30)
                self.reader = self.sock.makefile("rb")
            length = len(body)
            head = "POST / HTTP/1.1\r\nhost: sentinel\r\n"
            head += "".join(f"{name}: {value}\r\n" for name, value in headers.items())
            head += f"content-length: {length}\r\nexpect: 100-continue\r\n\r\n"
            self.sock.sendall(head.encode())
            status, response_headers = self._head()
            sent_body = False
            if status == 100:
                self.sock.sendall(body() if callable(body) else body)
                sent_body = True
                status, response_headers = self._head()
            data = self.reader.read(int(response_headers.get("content-length", "0")))
            if not sent_body or response_headers.get("connection", "").lower() == "close":
                self.close()   # the server never read a body it was promised: start afresh
            return status, response_headers, data
        except (OSError, ValueError, IndexError):
            self.close()
            return None


def flood(port, pid, templates, clients, seconds, processes=1):
    """`clients` connections each sending fresh versions of `templates` without pause for
    `seconds`, from `processes` forked processes (one Python process cannot keep many senders
    busy); samples the service's RSS meanwhile."""
    stop = time.monotonic() + seconds
    keys = ("sent", "202", "503", "503_without_retry_after", "other", "errors")

    def run(offset, totals, lock):
        client = ExpectingClient(port)
        local = dict.fromkeys(keys, 0)
        index = offset
        while time.monotonic() < stop:
            headers, body = fresh(templates[index % len(templates)])
            index += 1
            local["sent"] += 1
            response = client.post(headers, body)
            if response is None:
                local["errors"] += 1
            elif response[0] == 202:
                local["202"] += 1
            elif response[0] == 503:
                local["503"] += 1
                if "retry-after" not in response[1]:
                    local["503_without_retry_after"] += 1
            else:
                local["other"] += 1
        client.close()
        with lock:
            for key, value in local.items():
                totals[key] += value

    def worker(first, count, queue):
        totals, lock = dict.fromkeys(keys, 0), threading.Lock()
        threads = [threading.Thread(target=run, args=(first + index, totals, lock)) for index in range(count)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        queue.put(totals)

    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    share = clients // processes
    workers = [context.Process(target=worker, args=(index * share, share, queue)) for index in range(processes)]
    for process in workers:
        process.start()
    result = dict.fromkeys(keys, 0)
    result["peak_rss_kib"] = 0
    while time.monotonic() < stop + 1:
        result["peak_rss_kib"] = max(result["peak_rss_kib"], rss_kib(pid))
        time.sleep(0.02)
    for _ in workers:
        for key, value in queue.get(timeout=60).items():
            result[key] += value
    for process in workers:
        process.join(timeout=10)
    return result


# ---- 5. Graceful shutdown -----------------------------------------------------------------------

def test_sigterm_finishes_in_flight_requests_commits_them_and_exits_within_drain_timeout(workdir):
    receiver = Receiver().start()
    sentinel = webhook_sentinel(workdir, receiver.port)
    sentinel.config_path.write_text(sentinel.config_path.read_text().replace("drainTimeout: 5s", "drainTimeout: 4s"))
    sentinel.start()
    names = [f"config-drain-{index:02d}" for index in range(24)]
    try:
        client = Client(sentinel.port)
        bases = {}
        for name in names:
            bases[name] = base_config_map(name)
            headers, body = binary_request(f"{name}-0", "add", bases[name])
            assert client.post(headers, body)[0] == 202
        client.close()

        # Requests in flight at the moment of SIGTERM: each body is sent slowly, in pieces, so
        # the server is mid-request when the signal arrives, and finishes after it.
        results = {}
        started = threading.Barrier(len(names) + 1)

        def slow_edit(name):
            headers, body = binary_request(f"{name}-1", "update", hand_edit(bases[name], 1, "7"))
            sock = socket.create_connection(("127.0.0.1", sentinel.port), timeout=20)
            head = "POST / HTTP/1.1\r\nHost: sentinel\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
            head += f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
            sock.sendall(head.encode() + body[:10])
            started.wait()
            time.sleep(1.0)   # SIGTERM lands now
            for offset in range(10, len(body), 256):
                sock.sendall(body[offset:offset + 256])
                time.sleep(0.002)
            response = b""
            while True:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                response += chunk
            sock.close()
            results[name] = response.split(b"\r\n", 1)[0]

        threads = [threading.Thread(target=slow_edit, args=(name,)) for name in names]
        for thread in threads:
            thread.start()
        # One sender that never finishes its body: only the drain timeout ends its request.
        stalled = socket.create_connection(("127.0.0.1", sentinel.port), timeout=20)
        headers, body = binary_request("stalled-1", "update", hand_edit(bases[names[0]], 3, "9"))
        stalled.sendall(("POST / HTTP/1.1\r\nHost: sentinel\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
                         + f"content-length: {len(body)}\r\n\r\n").encode() + body[:10])
        started.wait()
        time.sleep(0.3)
        assert readiness(sentinel) == 200
        signaled = time.monotonic()
        sentinel.process.send_signal(signal.SIGTERM)
        # Readiness turns false at once: 503 while the listener still answers, refused after.
        observed = wait_for(lambda: readiness(sentinel) != 200, timeout=1, step=0.01)
        assert observed, "readyz stops answering 200 when the drain starts"
        assert time.monotonic() - signaled < 1
        # New events are refused: 503 with Retry-After, or no connection at all.
        headers, body = binary_request("late-1", "update", hand_edit(bases[names[0]], 2, None))
        late = Client(sentinel.port).post(headers, body)
        assert late is None or (late[0] == 503 and "retry-after" in late[1]), late
        for thread in threads:
            thread.join(timeout=20)
        code = sentinel.process.wait(timeout=20)
        took = time.monotonic() - signaled
        assert code == 0, sentinel.logs()[-2000:]
        # The stalled request held the drain open until drainTimeout (4 s), and no longer.
        assert 3.5 <= took < 4.0 + 1.5, f"exited {took:.1f}s after SIGTERM; drainTimeout is 4s"
        try:
            cut = stalled.recv(65536)
        except OSError:
            cut = b""
        stalled.close()
        assert not cut.startswith(b"HTTP/1.1 2"), f"a request cut off by the drain timeout is not accepted: {cut!r}"
        # Every request in flight at the signal finished with 202.
        assert len(results) == len(names)
        assert all(status.startswith(b"HTTP/1.1 202") for status in results.values()), results
        logs = sentinel.logs()
        assert "Shutting down" in logs and "Stopped." in logs

        # Their effects were committed: after a restart the API shows every drift.
        sentinel.log.close()
        sentinel.start()
        with urllib.request.urlopen(sentinel.url + "/api/v1/drifts?class=config_drift&limit=100", timeout=5) as response:
            drifts = json.loads(response.read())["items"]
        assert sorted(drift["name"] for drift in drifts) == names
        assert all(drift["state"] == "firing" for drift in drifts)
        # And their notifications were queued in the same commits: all reach the receiver.
        assert wait_for(lambda: {key[2] for key in receiver.notices()} >= set(names), timeout=30)
    finally:
        sentinel.stop()
        receiver.stop()


def readiness(sentinel) -> int:
    try:
        with urllib.request.urlopen(sentinel.url + "/readyz", timeout=1) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code
    except (urllib.error.URLError, OSError):
        return 0


def test_sighup_is_not_a_stop(sentinel):
    """SIGHUP, the reflex "reload" of many daemons, used to end the process without a drain:
    it is taken, logged, and the service keeps answering; SIGTERM still stops it cleanly."""
    sentinel.process.send_signal(signal.SIGHUP)
    assert wait_for(lambda: "SIGHUP ignored" in sentinel.logs(), timeout=10), sentinel.logs()[-2000:]
    assert sentinel.process.poll() is None, sentinel.logs()[-2000:]
    assert http_status(sentinel.url + "/readyz") == 200
    assert sentinel.stop() == 0
