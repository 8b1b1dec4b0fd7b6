"""The dashboard in a real headless browser (Debian's chromium): it loads, lists a drift, shows
its diff, and screenshots are written to test-output/. Its silence form works from its own page,
and a page on another site can neither post it nor frame the dashboard."""

import functools
import http.server
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from conftest import ROOT, Sentinel
from test_delivery_process import config_map, edit, post

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
OUTPUT = ROOT / "test-output"


CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def chromium(*arguments: str) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory(prefix="chromium-") as profile:
        return subprocess.run(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={profile}", "--window-size=1280,900", *arguments],
            capture_output=True, text=True, timeout=120)


def test_dashboard_lists_and_details_a_drift_in_chromium(workdir):
    assert CHROMIUM, "chromium must be installed (scripts/test.sh installs it)"
    OUTPUT.mkdir(exist_ok=True)
    sentinel = Sentinel(workdir)
    sentinel.config_path.write_text(
        f"store:\n  path: {workdir / 'sentinel.db'}\n"
        "channels:\n  - {name: log, type: log}\n"
        "routes:\n  - {channels: [log], groupWait: 0s}\n")
    sentinel.start()
    try:
        base = config_map("config-autoscaler")
        post(sentinel, "ui-1", "add", base)
        post(sentinel, "ui-2", "update", edit(base, "enable-scale-to-zero", "false"))
        dom = chromium("--dump-dom", sentinel.url + "/ui")
        assert dom.returncode == 0, dom.stderr[-2000:]
        assert "ConfigMap knative-serving/config-autoscaler" in dom.stdout, dom.stdout[:2000]
        assert "config_drift" in dom.stdout and "firing" in dom.stdout
        index_png = OUTPUT / "dashboard.png"
        index_png.unlink(missing_ok=True)
        shot = chromium(f"--screenshot={index_png}", sentinel.url + "/ui")
        assert shot.returncode == 0, shot.stderr[-2000:]
        assert index_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and index_png.stat().st_size > 5000
        drift_id = dom.stdout.split('href="/ui/drifts/')[1].split('"')[0]
        detail = chromium("--dump-dom", f"{sentinel.url}/ui/drifts/{drift_id}")
        assert "<code>/data/enable-scale-to-zero</code>" in detail.stdout
        assert "kubectl-edit (Update)" in detail.stdout
        assert "Silence this drift" in detail.stdout
        detail_png = OUTPUT / "dashboard-drift.png"
        detail_png.unlink(missing_ok=True)
        chromium(f"--screenshot={detail_png}", f"{sentinel.url}/ui/drifts/{drift_id}")
        assert detail_png.stat().st_size > 5000
    finally:
        sentinel.stop()


class DevTools:
    """Chromium driven over the DevTools protocol on a pipe (`--remote-debugging-pipe`: file
    descriptors 3 and 4, messages ended by a NUL byte), so a test can click like a person
    without a driver binary."""

    def __init__(self):
        # Chromium's helper processes may still write to the profile for a moment after the kill.
        self.profile = tempfile.TemporaryDirectory(prefix="chromium-", ignore_cleanup_errors=True)
        to_browser_read, self.to_browser = os.pipe()
        self.from_browser, from_browser_write = os.pipe()

        def give_pipes():
            # The browser expects the pipe on descriptors 3 and 4; dup first, as either end may
            # already sit on 3 or 4.
            read_end, write_end = os.dup(to_browser_read), os.dup(from_browser_write)
            os.dup2(read_end, 3)
            os.dup2(write_end, 4)

        self.process = subprocess.Popen(
            [CHROMIUM, *CHROMIUM_FLAGS, f"--user-data-dir={self.profile.name}", "--remote-debugging-pipe",
             "about:blank"],
            preexec_fn=give_pipes, close_fds=False, start_new_session=True,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_browser_read)
        os.close(from_browser_write)
        self.last_id = 0
        self.buffer = b""
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]

    def call(self, method: str, browser_wide=False, **params):
        self.last_id += 1
        message = {"id": self.last_id, "method": method, "params": params}
        if getattr(self, "session", None) and not browser_wide:
            message["sessionId"] = self.session
        os.write(self.to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            while b"\0" not in self.buffer:
                chunk = os.read(self.from_browser, 1 << 16)
                assert chunk, "chromium closed its DevTools pipe"
                self.buffer += chunk
            raw, self.buffer = self.buffer.split(b"\0", 1)
            answer = json.loads(raw)
            if answer.get("id") == self.last_id:
                assert "error" not in answer, answer
                return answer.get("result", {})
        raise TimeoutError(method)

    def frame_text(self, url: str, timeout=10) -> str:
        """The text an iframe showing `url` holds (an iframe of another site is a target of its own)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            targets = self.call("Target.getTargets", browser_wide=True)["targetInfos"]
            frames = [target for target in targets if target["type"] == "iframe" and target["url"].startswith(url)]
            if frames:
                session = self.call("Target.attachToTarget", browser_wide=True, targetId=frames[0]["targetId"],
                                    flatten=True)["sessionId"]
                own, self.session = self.session, session
                try:
                    self.wait_for("document.readyState === 'complete'")
                    return self.evaluate("document.title + ' ' + location.href + ' ' + document.body.innerText")
                finally:
                    self.session = own
            time.sleep(0.1)
        raise AssertionError(f"no frame of {url}")

    def evaluate(self, expression: str):
        return self.call("Runtime.evaluate", expression=expression, returnByValue=True)["result"].get("value")

    def wait_for(self, expression: str, timeout=15):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                value = self.evaluate(expression)
            except AssertionError:
                value = None  # the page is between documents
            if value:
                return value
            time.sleep(0.1)
        raise AssertionError(f"never true: {expression} (at {self.evaluate('location.href')})")

    def open(self, url: str):
        self.call("Page.navigate", url=url)
        self.wait_for(f"location.href.startsWith({json.dumps(url)}) && document.readyState === 'complete'")

    def close(self):
        # The browser and its helpers form the process group this test started.
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        os.close(self.to_browser)
        os.close(self.from_browser)
        self.profile.cleanup()


def serve_directory(directory: Path) -> tuple:
    """A static web server on loopback (the other site); returns (server, port)."""
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, server.server_address[1]


def silences(sentinel) -> list:
    with urllib.request.urlopen(sentinel.url + "/api/v1/silences", timeout=5) as response:
        return json.loads(response.read())["items"]


def test_the_silence_form_works_from_its_page_and_not_from_another_site_in_chromium(workdir):
    assert CHROMIUM, "chromium must be installed (scripts/test.sh installs it)"
    sentinel = Sentinel(workdir)
    sentinel.config_path.write_text(
        f"store:\n  path: {workdir / 'sentinel.db'}\n"
        "channels:\n  - {name: log, type: log}\n"
        "routes:\n  - {channels: [log], groupWait: 0s}\n")
    sentinel.start()
    other_site = workdir / "other-site"
    other_site.mkdir()
    server = None
    browser = DevTools()
    try:
        base = config_map("config-autoscaler")
        post(sentinel, "csrf-1", "add", base)
        post(sentinel, "csrf-2", "update", edit(base, "enable-scale-to-zero", "false"))
        with urllib.request.urlopen(sentinel.url + "/api/v1/drifts?state=firing", timeout=5) as response:
            drift = json.loads(response.read())["items"][0]
        # Another site (`localhost` is another site than `127.0.0.1`) posts the form as the
        # dashboard used to render it, hidden matchers and all, the moment its page opens.
        fields = {"drift": drift["id"], "class": "config_drift", "cluster": "*", "namespace": "*",
                  "name": "*", "duration": "7d"}
        inputs = "".join(f'<input type="hidden" name="{key}" value="{value}">' for key, value in fields.items())
        (other_site / "post.html").write_text(
            f'<form id="f" method="post" action="{sentinel.url}/ui/silences">{inputs}</form>'
            '<script>document.getElementById("f").submit()</script>')
        (other_site / "frame.html").write_text(f'<iframe src="{sentinel.url}/ui"></iframe>')
        server, port = serve_directory(other_site)
        browser.call("Page.navigate", url=f"http://localhost:{port}/post.html")
        browser.wait_for(f"location.href.startsWith({json.dumps(sentinel.url)}) && document.readyState === 'complete'")
        assert "Refused" in browser.evaluate("document.body.innerText"), browser.evaluate("document.body.innerText")
        assert silences(sentinel) == [], "a cross-site post silences nothing"
        # The dashboard cannot be framed by another site.
        browser.open(f"http://localhost:{port}/frame.html")
        time.sleep(1)
        frame = browser.frame_text(f"{sentinel.url}/ui")
        assert "drift-sentinel" not in frame and "config-autoscaler" not in frame, frame
        # From its own page, the form works: a person picks a duration and clicks.
        browser.open(f"{sentinel.url}/ui/drifts/{drift['id']}")
        browser.evaluate("document.querySelector('select[name=duration]').value = '1h'")
        browser.evaluate("document.querySelector('form[action=\"/ui/silences\"] button').click()")
        browser.wait_for("location.href.includes('silenced=1') && document.readyState === 'complete'")
        assert "Silenced." in browser.evaluate("document.body.innerText")
        [silence] = silences(sentinel)
        assert silence["matchers"] == {"class": "config_drift", "cluster": "prod", "namespace": "knative-serving",
                                       "kind": "ConfigMap", "name": "config-autoscaler"}, silence
    finally:
        browser.close()
        if server:
            server.shutdown()
        sentinel.stop()
