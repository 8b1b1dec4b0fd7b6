"""Process-level test helpers: run the real drift-sentinel binary on loopback with a temp store."""

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

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "knative"


def binary() -> str:
    path = os.environ.get("DRIFT_SENTINEL_BIN", str(ROOT / "target" / "debug" / "drift-sentinel"))
    if not Path(path).exists():
        raise RuntimeError(f"{path} not found: build it with `cargo build` or set DRIFT_SENTINEL_BIN")
    return path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Sentinel:
    """A running drift-sentinel process."""

    def __init__(self, workdir: Path, extra_config: str = ""):
        self.workdir = workdir
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
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

    def start(self):
        env = dict(os.environ, PORT=str(self.port), RUST_LOG="debug")
        self.log = open(self.log_path, "ab")
        self.process = subprocess.Popen(
            [binary(), "serve", "--config", str(self.config_path)],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            env=env,
        )
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"drift-sentinel exited early:\n{self.log_path.read_text()}")
            try:
                with urllib.request.urlopen(self.url + "/readyz", timeout=1) as response:
                    if response.status == 200:
                        return self
            except (urllib.error.URLError, ConnectionError, OSError):
                pass
            time.sleep(0.05)
        raise RuntimeError("drift-sentinel did not become ready")

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


def load_yaml_fixture(relative: str):
    """Fixtures are YAML; the ones used here have JSON twins or are simple enough for a tiny loader."""
    import yaml  # PyYAML ships with the test dependencies

    return yaml.safe_load((FIXTURES / relative).read_text())


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
