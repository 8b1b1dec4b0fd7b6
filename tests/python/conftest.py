"""Process-level test helpers: run the real drift-sentinel binary on loopback with a temp store.

Shared by every test file:
* `wait_for`: polls a condition (no fixed sleeps where a condition can be observed);
* ports: the service is started with `PORT=0` and reports the port it bound in its `Listening.`
  log line, so no port is picked first and taken by another process before the service binds it;
  a restart binds the same port again (retried while the old one is still being released).
  Python servers bind port 0 too (`reserve_port`: a port that refuses connections, as a
  destination that is down);
* `pg`: one throwaway PostgreSQL server per test run (per xdist worker), a database per test;
* `exclusive`: tests that load the machine on purpose run while no other test runs, when the
  suite runs on several xdist workers (`-n 6` in scripts/test.sh); the longest tests are collected first;
* `safe_load`/`safe_load_all`: YAML parsed once per distinct text, with libyaml.
"""

import copy
import fcntl
import functools
import json
import os
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "knative"


def binary() -> str:
    path = os.environ.get("DRIFT_SENTINEL_BIN", str(ROOT / "target" / "debug" / "drift-sentinel"))
    if not Path(path).exists():
        raise RuntimeError(f"{path} not found: build it with `cargo build` or set DRIFT_SENTINEL_BIN")
    return path


# ---- Waiting -------------------------------------------------------------------------------------

def wait_for(predicate, timeout=30.0, step=0.05):
    """Polls `predicate` until it returns a true value and returns that value; at the deadline,
    returns what one last call returns (false unless the condition came true just then). The
    timeout bounds a hang; it claims no speed."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(step)


# ---- Ports ---------------------------------------------------------------------------------------

def free_port() -> int:
    """A port nobody listens on right now. Racy by nature (another process may bind it before
    the program told to use it does): only for programs that cannot bind port 0 and report it
    (Alertmanager), whose start is retried on `address already in use`."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def reserve_port() -> socket.socket:
    """A socket bound to a fresh loopback port and not listening: nobody else can bind the port
    (no SO_REUSEADDR), and connections to it are refused, as to a server that is down. Close it
    to free the port."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    return sock


LISTENING = "Listening."


def listening_port(text: str):
    """The port of the service's `Listening.` log line in `text` (JSON lines), or None."""
    for line in text.splitlines():
        if LISTENING not in line:
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        fields = entry.get("fields", entry)
        if fields.get("message") == LISTENING and "addr" in fields:
            return int(fields["addr"].rsplit(":", 1)[1])
    return None


def launch(config_path: Path, log_path: Path, env: dict, port=None, timeout=30.0):
    """Starts `drift-sentinel serve --config config_path`, its output appended to `log_path`.
    Without `port` it binds port 0 and the port is read from its `Listening.` line; with one (a
    restart on the port clients know) a bind refused with `Address already in use` is retried
    until `timeout`. Returns (process, port, log file)."""
    deadline = time.monotonic() + timeout
    while True:
        offset = log_path.stat().st_size if log_path.exists() else 0
        log = open(log_path, "ab")
        process = subprocess.Popen(
            [binary(), "serve", "--config", str(config_path)],
            stdout=log, stderr=subprocess.STDOUT,
            # At least `info`: the port is read from the `Listening.` line.
            env=dict(os.environ, **{"RUST_LOG": "info", **env}, PORT=str(port or 0)),
        )
        while True:
            with open(log_path, "rb") as reader:
                reader.seek(offset)
                text = reader.read().decode(errors="replace")
            bound = listening_port(text)
            if bound is not None:
                assert port is None or bound == port, (port, bound)
                return process, bound, log
            if process.poll() is not None:
                log.close()
                if port and "Address already in use" in text and time.monotonic() < deadline:
                    time.sleep(0.2)
                    break
                raise RuntimeError(f"drift-sentinel exited early:\n{text[-4000:]}")
            if time.monotonic() >= deadline:
                process.kill()
                process.wait()
                log.close()
                raise RuntimeError(f"drift-sentinel did not listen within {timeout}s:\n{text[-4000:]}")
            time.sleep(0.02)


def http_status(url: str, timeout=2.0) -> int:
    """The status of GET `url`, or 0 when nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code
    except (urllib.error.URLError, ConnectionError, OSError):
        return 0


# ---- The service ---------------------------------------------------------------------------------

class Sentinel:
    """A running drift-sentinel process."""

    env = {"RUST_LOG": "debug"}

    def __init__(self, workdir: Path, extra_config: str = ""):
        self.workdir = workdir
        self.port = None   # known once started; a restart keeps it
        self.url = None
        self.config_path = workdir / "config.yaml"
        self.config_path.write_text(
            "store:\n"
            f"  path: {workdir / 'sentinel.db'}\n"
            "server:\n"
            "  drainTimeout: 5s\n"
            "channels:\n"
            "  - {name: log, type: log}\n" + extra_config
        )
        self.log_path = workdir / "sentinel.log"
        self.process = None

    def start(self, path="/readyz", timeout=30.0):
        """Starts the process and waits until `path` answers 200."""
        started = time.monotonic()
        self.process, self.port, self.log = launch(self.config_path, self.log_path, self.env, self.port, timeout)
        self.url = f"http://127.0.0.1:{self.port}"
        while time.monotonic() - started < timeout:
            if self.process.poll() is not None:
                raise RuntimeError(f"drift-sentinel exited early:\n{self.logs()[-4000:]}")
            if http_status(self.url + path, timeout=1) == 200:
                return self
            time.sleep(0.05)
        raise RuntimeError(f"drift-sentinel did not answer {path} within {timeout}s:\n{self.logs()[-4000:]}")

    def stop(self, sig=signal.SIGTERM, timeout=15) -> int:
        if self.process is None or self.process.poll() is not None:
            return self.process.returncode if self.process else 0
        self.process.send_signal(sig)
        code = self.process.wait(timeout=timeout)
        self.log.close()
        return code

    def post(self, headers: dict, body: bytes):
        request = urllib.request.Request(self.url + "/", data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, dict(response.headers), response.read()
        except urllib.error.HTTPError as error:
            return error.code, dict(error.headers), error.read()

    def metric(self, prefix: str) -> float:
        with urllib.request.urlopen(self.url + "/metrics", timeout=5) as response:
            for line in response.read().decode().splitlines():
                if line.startswith(prefix):
                    return float(line.rsplit(" ", 1)[1])
        return 0.0

    def logs(self) -> str:
        return self.log_path.read_text(errors="replace")


@pytest.fixture
def workdir():
    with tempfile.TemporaryDirectory(prefix="drift-sentinel-test-") as directory:
        yield Path(directory)


@pytest.fixture
def sentinel(workdir):
    instance = Sentinel(workdir).start()
    yield instance
    instance.stop()


# ---- PostgreSQL ----------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def pg():
    """One throwaway PostgreSQL server for the run (for each xdist worker): each test takes a
    database of its own with `pg.database()`."""
    from pgserver import PgServer

    server = PgServer()
    yield server
    server.stop()


# ---- Tests that must run alone -------------------------------------------------------------------
# Under xdist every test runs holding a shared lock on a file of this run, and a test marked
# `exclusive` holds it exclusively: no other test runs beside it. A second lock, taken
# exclusively while an exclusive test waits for the first, keeps the other workers from starting
# new tests meanwhile (no starvation). Consecutive exclusive tests on one worker keep the lock
# from one to the next, so the other workers wait once for all of them, not between them.

def pytest_configure(config):
    config.addinivalue_line(
        "markers", "exclusive: the test loads the machine on purpose; no other test runs meanwhile")


def _exclusive(item) -> bool:
    return item is not None and item.get_closest_marker("exclusive") is not None


class _RunLock:
    def __init__(self, directory: Path):
        self.running = open(directory / "tests-running.lock", "a+")
        self.waiting = open(directory / "tests-waiting.lock", "a+")
        self.held = None   # None, "shared" or "exclusive"

    def enter(self, exclusive: bool):
        if exclusive and self.held == "exclusive":
            return
        if exclusive:
            fcntl.flock(self.waiting, fcntl.LOCK_EX)
            fcntl.flock(self.running, fcntl.LOCK_EX)
            self.held = "exclusive"
        else:
            fcntl.flock(self.waiting, fcntl.LOCK_SH)
            fcntl.flock(self.waiting, fcntl.LOCK_UN)
            fcntl.flock(self.running, fcntl.LOCK_SH)
            self.held = "shared"

    def leave(self):
        fcntl.flock(self.running, fcntl.LOCK_UN)
        fcntl.flock(self.waiting, fcntl.LOCK_UN)
        self.held = None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        yield
        return
    config = item.config
    if not hasattr(config, "_drift_sentinel_run_lock"):
        # The workers' base temporary directories are in this run's own directory.
        config._drift_sentinel_run_lock = _RunLock(config._tmp_path_factory.getbasetemp().parent)
    lock = config._drift_sentinel_run_lock
    lock.enter(_exclusive(item))
    try:
        yield
    finally:
        if not (_exclusive(item) and _exclusive(nextitem)):
            lock.leave()


# ---- Order ---------------------------------------------------------------------------------------
# Longest first, so that with several workers the run does not end on one long test started last: the
# tests that must run alone, then the modules of long process tests (each waits on the service's
# timers), then the rest in file order.
LONG_MODULES = ("test_ha.py", "test_connections.py", "test_hardening.py", "test_fleet.py", "test_delivery_process.py")


def pytest_collection_modifyitems(items):
    def rank(item):
        if item.get_closest_marker("exclusive"):
            return 0
        if item.path.name in LONG_MODULES:
            return 1 + LONG_MODULES.index(item.path.name)
        return 1 + len(LONG_MODULES)
    items[:] = sorted(items, key=rank)


# ---- Events --------------------------------------------------------------------------------------

# ---- YAML ----------------------------------------------------------------------------------------
# yaml.safe_load and safe_load_all with libyaml's parser (the same documents, about nine times
# faster than PyYAML's pure-Python one on the CRD copies), each distinct text parsed once per
# process: every call returns a fresh copy, so callers may change what they get.

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@functools.lru_cache(maxsize=None)
def _parsed(text: str, every_document: bool):
    return list(yaml.load_all(text, Loader=_LOADER)) if every_document else yaml.load(text, Loader=_LOADER)


def safe_load(text: str):
    """`yaml.safe_load(text)`."""
    return copy.deepcopy(_parsed(text, False))


def safe_load_all(text: str) -> list:
    """`list(yaml.safe_load_all(text))`."""
    return copy.deepcopy(_parsed(text, True))


def load_yaml_fixture(relative: str):
    """Fixtures are YAML; the ones used here have JSON twins or are simple enough for a tiny loader."""
    return safe_load((FIXTURES / relative).read_text())


def revision_object():
    return load_yaml_fixture(
        "serving/rguske-github-io__knative-serving-unwrapped__revision-knative-webapp-00001.yaml"
    )


def attributes(event_id: str, verb: str, obj: dict, **extensions) -> dict:
    meta = obj["metadata"]
    attrs = {
        "specversion": "1.0",
        "id": event_id,
        "source": "https://10.96.0.1:443",
        "type": f"dev.knative.apiserver.resource.{verb}",
        "subject": f"/apis/{obj['apiVersion']}/namespaces/{meta['namespace']}/{obj['kind'].lower()}s/{meta['name']}",
        "datacontenttype": "application/json",
        "apiversion": obj["apiVersion"],
        "kind": obj["kind"],
        "name": meta["name"],
        "namespace": meta["namespace"],
    }
    attrs.update(extensions)
    return attrs


def swap_config(directory: Path, text: str, generation: int):
    """Writes the config the way the kubelet updates a ConfigMap volume: a new timestamped
    directory, then an atomic swap of the `..data` symlink."""
    target = directory / f"..2026_11_29_{generation}"
    target.mkdir()
    (target / "config.yaml").write_text(text)
    temporary = directory / "..data_tmp"
    temporary.symlink_to(target.name)
    os.replace(temporary, directory / "..data")
    link = directory / "config.yaml"
    if not link.is_symlink():
        link.symlink_to("..data/config.yaml")
