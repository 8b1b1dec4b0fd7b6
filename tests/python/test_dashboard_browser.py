"""The dashboard in a real headless browser (Debian's chromium): it loads, lists a drift, shows
its diff, and screenshots are written to test-output/. The front page's overview (tiles, bars
and the inline SVG chart) renders drifts of every API group family under the dashboard's
Content-Security-Policy. Its silence form and its repair button (a `manual` remediation rule's
approval) work from their own page, and a page on another site can neither post them nor frame
the dashboard. Its "Re-check now" button starts a resync pass against a
fake Kubernetes API server, and shows it running and then its counts; another site cannot press it.

One chromium serves the whole module (started once per run, or per xdist worker, and driven over
the DevTools protocol); each test opens its page in a browser context of its own (its own cookies
and storage, as a fresh profile)."""

import base64
import copy
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

import pytest

from cloudevents.core.bindings.http import to_binary_event
from cloudevents.core.v1.event import CloudEvent

from conftest import ROOT, Sentinel, attributes, load_yaml_fixture, wait_for
from test_delivery_process import RV, config_map, edit, post

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
OUTPUT = ROOT / "test-output"


CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]
WINDOW = (1280, 900)   # the window a page is shown (and screenshot) in, unless a test sets another


def test_dashboard_lists_and_details_a_drift_in_chromium(workdir, browser):
    assert CHROMIUM, "chromium must be installed (scripts/test.sh installs it)"
    OUTPUT.mkdir(exist_ok=True)
    sentinel = Sentinel(workdir)
    sentinel.config_path.write_text(
        f"store:\n  path: {workdir / 'sentinel.db'}\n"
        "channels:\n  - {name: log, type: log}\n"
        "routes:\n  - {channels: [log], groupWait: 0s, groupInterval: 0s}\n")
    sentinel.start()
    try:
        base = config_map("config-autoscaler")
        post(sentinel, "ui-1", "add", base)
        post(sentinel, "ui-2", "update", edit(base, "enable-scale-to-zero", "false"))
        dom = browser.dump_dom(sentinel.url + "/ui")
        assert "ConfigMap knative-serving/config-autoscaler" in dom, dom[:2000]
        assert "config_drift" in dom and "firing" in dom
        index_png = OUTPUT / "dashboard.png"
        index_png.unlink(missing_ok=True)
        browser.screenshot(sentinel.url + "/ui", index_png)
        assert index_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and index_png.stat().st_size > 5000
        drift_id = dom.split('href="/ui/drifts/')[1].split('"')[0]
        detail = browser.dump_dom(f"{sentinel.url}/ui/drifts/{drift_id}")
        assert "<code>/data/enable-scale-to-zero</code>" in detail
        assert "kubectl-edit (Update)" in detail
        assert "Silence this drift" in detail
        detail_png = OUTPUT / "dashboard-drift.png"
        detail_png.unlink(missing_ok=True)
        browser.screenshot(f"{sentinel.url}/ui/drifts/{drift_id}", detail_png)
        assert detail_png.stat().st_size > 5000
    finally:
        sentinel.stop()


class DevTools:
    """Chromium driven over the DevTools protocol on a pipe (`--remote-debugging-pipe`: file
    descriptors 3 and 4, messages ended by a NUL byte), so a test can click like a person
    without a driver binary. `new_page()` opens the page the other methods act on."""

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
        self.session = None
        self.context = None

    def new_page(self):
        """A blank page, in a new browser context (cookies, storage and cache of its own, as in
        a fresh profile), shown in a WINDOW-sized window; the previous page's context is closed."""
        self.close_page()
        self.context = self.call("Target.createBrowserContext", browser_wide=True)["browserContextId"]
        target = self.call("Target.createTarget", browser_wide=True, url="about:blank",
                           browserContextId=self.context)["targetId"]
        self.session = self.call("Target.attachToTarget", browser_wide=True, targetId=target,
                                 flatten=True)["sessionId"]
        self.window(*WINDOW)
        return self

    def close_page(self):
        if self.context is not None:
            self.call("Target.disposeBrowserContext", browser_wide=True, browserContextId=self.context)
        self.context = self.session = None

    def window(self, width: int, height: int):
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1,
                  mobile=False)

    def call(self, method: str, browser_wide=False, **params):
        self.last_id += 1
        message = {"id": self.last_id, "method": method, "params": params}
        if self.session and not browser_wide:
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
        """Navigates to `url` and waits until its document has loaded (not the one before it,
        even at the same address)."""
        self.evaluate("window.__left = true")
        navigated = self.call("Page.navigate", url=url)
        assert "errorText" not in navigated, navigated
        self.wait_for(f"!window.__left && location.href.startsWith({json.dumps(url)}) "
                      "&& document.readyState === 'complete'")

    def dump_dom(self, url: str) -> str:
        """The page at `url` once loaded, serialized as `chromium --dump-dom` prints it."""
        self.open(url)
        return self.evaluate("(document.doctype ? new XMLSerializer().serializeToString(document.doctype) + '\\n' : '')"
                             " + document.documentElement.outerHTML")

    def screenshot(self, url: str, path: Path):
        """A PNG of the page at `url` as its window shows it, as `chromium --screenshot` takes it."""
        self.open(url)
        path.write_bytes(base64.b64decode(self.call("Page.captureScreenshot", format="png")["data"]))

    def close(self):
        # The browser and its helpers form the process group started for it.
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        os.close(self.to_browser)
        os.close(self.from_browser)
        self.profile.cleanup()


@pytest.fixture(scope="session")
def chromium_browser():
    """One chromium for the module's tests: started once per run (per xdist worker, which may
    take this module's tests between other modules' ones), not at each return to the module."""
    assert CHROMIUM, "chromium must be installed (scripts/test.sh installs it)"
    browser = DevTools()
    yield browser
    browser.close()


@pytest.fixture
def browser(chromium_browser):
    """A page of its own for the test."""
    yield chromium_browser.new_page()
    chromium_browser.close_page()


def serve_directory(directory: Path) -> tuple:
    """A static web server on loopback (the other site); returns (server, port)."""
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, server.server_address[1]


def silences(sentinel) -> list:
    with urllib.request.urlopen(sentinel.url + "/api/v1/silences", timeout=5) as response:
        return json.loads(response.read())["items"]


def test_the_silence_form_works_from_its_page_and_not_from_another_site_in_chromium(workdir, browser):
    assert CHROMIUM, "chromium must be installed (scripts/test.sh installs it)"
    sentinel = Sentinel(workdir)
    sentinel.config_path.write_text(
        f"store:\n  path: {workdir / 'sentinel.db'}\n"
        "channels:\n  - {name: log, type: log}\n"
        "routes:\n  - {channels: [log], groupWait: 0s, groupInterval: 0s}\n")
    sentinel.start()
    other_site = workdir / "other-site"
    other_site.mkdir()
    server = None
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
        if server:
            server.shutdown()
        sentinel.stop()


def remediations(sentinel, drift_id: str) -> list:
    with urllib.request.urlopen(f"{sentinel.url}/api/v1/drifts/{drift_id}", timeout=5) as response:
        return json.loads(response.read())["remediations"]


def test_the_repair_button_approves_a_manual_rule_and_not_from_another_site_in_chromium(workdir, browser):
    assert CHROMIUM, "chromium must be installed (scripts/test.sh installs it)"
    sentinel = Sentinel(workdir)
    sentinel.config_path.write_text(
        f"defaultCluster: prod\nstore:\n  path: {workdir / 'sentinel.db'}\n"
        "channels:\n  - {name: log, type: log}\n"
        "routes:\n  - {channels: [log], groupWait: 0s, groupInterval: 0s}\n"
        "remediation:\n  mode: dryRun\n  rules:\n  - name: approve-config\n"
        "    match: {classes: [config_drift], kinds: [ConfigMap]}\n    action: revert\n    approval: manual\n")
    sentinel.start()
    other_site = workdir / "other-site"
    other_site.mkdir()
    server = None
    try:
        base = config_map("config-autoscaler")
        post(sentinel, "fix-1", "add", base)
        post(sentinel, "fix-2", "update", edit(base, "enable-scale-to-zero", "false"))
        with urllib.request.urlopen(sentinel.url + "/api/v1/drifts?state=firing", timeout=5) as response:
            drift = json.loads(response.read())["items"][0]
        assert remediations(sentinel, drift["id"]) == [], "a manual rule waits for a person"
        # Another site posts the approval form the moment its page opens: refused.
        fields = {"drift": drift["id"], "action": "revert", "approvedBy": "mallory"}
        inputs = "".join(f'<input type="hidden" name="{key}" value="{value}">' for key, value in fields.items())
        (other_site / "post.html").write_text(
            f'<form id="f" method="post" action="{sentinel.url}/ui/remediate">{inputs}</form>'
            '<script>document.getElementById("f").submit()</script>')
        server, port = serve_directory(other_site)
        browser.call("Page.navigate", url=f"http://localhost:{port}/post.html")
        browser.wait_for(f"location.href.startsWith({json.dumps(sentinel.url)}) && document.readyState === 'complete'")
        assert "Refused" in browser.evaluate("document.body.innerText"), browser.evaluate("document.body.innerText")
        assert remediations(sentinel, drift["id"]) == [], "a cross-site post approves nothing"
        # From its own page: the button names the action, a person types their name and clicks.
        browser.open(f"{sentinel.url}/ui/drifts/{drift['id']}")
        assert browser.evaluate("document.querySelector('#remediate button').innerText") == "Revert"
        browser.evaluate("document.querySelector('#remediate input[name=approvedBy]').value = 'alice'")
        browser.evaluate("document.querySelector('#remediate button').click()")
        browser.wait_for("location.href.includes('remediated=1') && document.readyState === 'complete'")
        text = browser.evaluate("document.body.innerText")
        assert "Approved." in text, text
        [attempt] = remediations(sentinel, drift["id"])
        assert attempt["approvedBy"] == "alice" and attempt["outcome"] == "dryRun", attempt
        assert attempt["request"]["method"] == "PATCH", attempt
        assert attempt["request"]["body"]["data"] == {"enable-scale-to-zero": base["data"].get("enable-scale-to-zero")}, attempt
        # The page shows the attempt in its table.
        assert browser.evaluate("document.querySelectorAll('#remediations tr').length") == 2
    finally:
        if server:
            server.shutdown()
        sentinel.stop()


# ---- The overview, with drifts of every API group family --------------------------------------

def post_resource(sentinel, event_id: str, verb: str, obj: dict, plural: str):
    """Posts `obj` as the ApiServerSource sends it, with the resource's real plural in `subject`."""
    meta = obj["metadata"]
    subject = f"/apis/{obj['apiVersion']}/namespaces/{meta['namespace']}/{plural}/{meta['name']}"
    event = CloudEvent(attributes(event_id, verb, obj, cluster="prod", subject=subject), obj)
    message = to_binary_event(event)
    status, _, body = sentinel.post(dict(message.headers), message.body)
    assert status == 202, body


def hand_edit(obj: dict, path: list, value, fields: dict) -> dict:
    """`kubectl edit` of one spec field: the new value, a new resourceVersion, the managedFields entry."""
    out = copy.deepcopy(obj)
    target = out
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    RV[0] += 1
    out["metadata"]["resourceVersion"] = str(RV[0])
    out["metadata"]["managedFields"].append({
        "manager": "kubectl-edit", "operation": "Update", "apiVersion": obj["apiVersion"],
        "fieldsType": "FieldsV1", "fieldsV1": fields, "time": "2026-11-29T10:00:00Z"})
    return out


def trigger() -> dict:
    """The Trigger of tests/fixtures/knative/eventing (a real object)."""
    return load_yaml_fixture("eventing/redhat-developer-vscode-knative__test-eventingTree-trigger.json")["items"][0]


def kingress() -> dict:
    """A networking.internal.knative.dev Ingress as Knative Serving's route controller writes it."""
    return {
        "apiVersion": "networking.internal.knative.dev/v1alpha1", "kind": "Ingress",
        "metadata": {
            "name": "hello", "namespace": "shop", "uid": "2f0e41c5-5d7a-4b0e-9c1e-6c1f0e2d7a11",
            "resourceVersion": "31000", "generation": 1,
            "labels": {"serving.knative.dev/route": "hello", "serving.knative.dev/routeNamespace": "shop",
                       "serving.knative.dev/service": "hello"},
            "annotations": {"networking.knative.dev/ingress.class": "kourier.ingress.networking.knative.dev",
                            "serving.knative.dev/creator": "system:admin"},
            "ownerReferences": [{"apiVersion": "serving.knative.dev/v1", "kind": "Route", "name": "hello",
                                 "uid": "9a7c3a52-1f64-4b8c-8d0e-0c4d7f0f5b21", "controller": True,
                                 "blockOwnerDeletion": True}],
            "managedFields": [{"manager": "controller", "operation": "Update",
                               "apiVersion": "networking.internal.knative.dev/v1alpha1", "fieldsType": "FieldsV1",
                               "fieldsV1": {"f:spec": {".": {}, "f:httpOption": {}, "f:rules": {}}},
                               "time": "2026-11-01T00:00:00Z"}],
        },
        "spec": {"httpOption": "Enabled", "rules": [{
            "hosts": ["hello.shop.example.com"], "visibility": "ExternalIP",
            "http": {"paths": [{"splits": [{"serviceName": "hello-00001", "serviceNamespace": "shop",
                                            "servicePort": 80, "percent": 100,
                                            "appendHeaders": {"Knative-Serving-Revision": "hello-00001",
                                                              "Knative-Serving-Namespace": "shop"}}]}]}}]},
        "status": {"observedGeneration": 1, "conditions": [
            {"type": "LoadBalancerReady", "status": "True", "lastTransitionTime": "2026-11-01T00:00:05Z"},
            {"type": "NetworkConfigured", "status": "True", "lastTransitionTime": "2026-11-01T00:00:05Z"},
            {"type": "Ready", "status": "True", "lastTransitionTime": "2026-11-01T00:00:05Z"}]},
    }


def knative_serving() -> dict:
    """The operator's KnativeServing custom resource."""
    return {
        "apiVersion": "operator.knative.dev/v1beta1", "kind": "KnativeServing",
        "metadata": {
            "name": "knative-serving", "namespace": "knative-serving",
            "uid": "c1d2e3f4-0a1b-4c2d-8e3f-112233445566", "resourceVersion": "32000", "generation": 2,
            "managedFields": [{"manager": "kubectl-client-side-apply", "operation": "Update",
                               "apiVersion": "operator.knative.dev/v1beta1", "fieldsType": "FieldsV1",
                               "fieldsV1": {"f:spec": {".": {}, "f:config": {}, "f:version": {}}},
                               "time": "2026-11-01T00:00:00Z"}],
        },
        "spec": {"version": "1.15", "config": {"autoscaler": {"enable-scale-to-zero": "true"},
                                               "network": {"ingress-class": "kourier.ingress.networking.knative.dev"}}},
        "status": {"version": "1.15.2", "observedGeneration": 2, "conditions": [
            {"type": "DependenciesInstalled", "status": "True"}, {"type": "DeploymentsAvailable", "status": "True"},
            {"type": "InstallSucceeded", "status": "True"}, {"type": "Ready", "status": "True"},
            {"type": "VersionMigrationEligible", "status": "True"}]},
    }


def api(sentinel, path: str):
    with urllib.request.urlopen(sentinel.url + path, timeout=5) as response:
        return json.loads(response.read())


RESYNC_SCHEMA = json.loads((ROOT / "docs" / "schemas" / "api-resync-v1.schema.json").read_text())


def resync_status(sentinel):
    """GET /api/v1/resync, checked against its schema (docs/schemas/api-resync-v1.schema.json)."""
    from jsonschema import Draft202012Validator
    status = api(sentinel, "/api/v1/resync")
    Draft202012Validator(RESYNC_SCHEMA, format_checker=Draft202012Validator.FORMAT_CHECKER).validate(status)
    return status


def test_the_overview_renders_drifts_of_every_api_group_in_chromium(workdir, browser):
    assert CHROMIUM, "chromium must be installed (scripts/test.sh installs it)"
    OUTPUT.mkdir(exist_ok=True)
    sentinel = Sentinel(workdir)
    sentinel.config_path.write_text(
        f"store:\n  path: {workdir / 'sentinel.db'}\n"
        "channels:\n  - {name: log, type: log}\n"
        "routes:\n  - {channels: [log], groupWait: 0s, groupInterval: 0s}\n")
    sentinel.start()
    try:
        # Kubernetes: one hand-edited ConfigMap stays edited, another is put back (resolved).
        for index, name in enumerate(["config-autoscaler", "config-gc"]):
            base = config_map(name)
            post(sentinel, f"ov-cm-{index}-1", "add", base)
            edited = edit(base, "enable-scale-to-zero", "false")
            post(sentinel, f"ov-cm-{index}-2", "update", edited)
            if name == "config-gc":
                post(sentinel, f"ov-cm-{index}-3", "update", edit(edited, "enable-scale-to-zero", None))
        # Eventing: a Trigger's subscriber changed by hand.
        tr = trigger()
        post_resource(sentinel, "ov-tr-1", "add", tr, "triggers")
        post_resource(sentinel, "ov-tr-2", "update",
                      hand_edit(tr, ["spec", "subscriber", "ref", "name"], "payments-v2",
                                {"f:spec": {"f:subscriber": {"f:ref": {"f:name": {}}}}}), "triggers")
        # Networking: a KIngress's HTTP option edited under Knative's feet.
        ing = kingress()
        post_resource(sentinel, "ov-ing-1", "add", ing, "ingresses")
        post_resource(sentinel, "ov-ing-2", "update",
                      hand_edit(ing, ["spec", "httpOption"], "Redirected", {"f:spec": {"f:httpOption": {}}}),
                      "ingresses")
        # Operator: the KnativeServing's autoscaler config edited by hand.
        ks = knative_serving()
        post_resource(sentinel, "ov-ks-1", "add", ks, "knativeservings")
        post_resource(sentinel, "ov-ks-2", "update",
                      hand_edit(ks, ["spec", "config", "autoscaler", "enable-scale-to-zero"], "false",
                                {"f:spec": {"f:config": {"f:autoscaler": {"f:enable-scale-to-zero": {}}}}}),
                      "knativeservings")

        firing = api(sentinel, "/api/v1/drifts?state=firing")["items"]
        groups = sorted({drift["apiVersion"].split("/")[0] if "/" in drift["apiVersion"] else "core"
                         for drift in firing})
        assert groups == ["core", "eventing.knative.dev", "networking.internal.knative.dev",
                          "operator.knative.dev"], firing
        assert [d["kind"] for d in api(sentinel, "/api/v1/drifts?group=networking")["items"]] == ["Ingress"]
        resolved = api(sentinel, "/api/v1/drifts?state=resolved")["items"]
        assert len(resolved) == 1, resolved

        # The page as a person sees it, tall enough for the overview and the list.
        browser.window(1280, 1500)
        browser.open(sentinel.url + "/ui")
        tiles = browser.evaluate("""Object.fromEntries(['critical', 'warning', 'info'].map(s => {
            const tile = document.getElementById('tile-' + s);
            return [s, {n: tile.querySelector('.n').innerText, bg: getComputedStyle(tile).backgroundColor,
                        visible: tile.getBoundingClientRect().width > 0}];
        }))""")
        for severity in ["critical", "warning", "info"]:
            expected = sum(1 for drift in firing if drift["severity"] == severity)
            assert tiles[severity]["n"] == str(expected), (severity, tiles)
            assert tiles[severity]["visible"]
        # The inline <style> applies under the CSP: a non-empty critical tile is red.
        assert tiles["critical"]["bg"] == "rgb(176, 0, 32)", tiles
        by_group = browser.evaluate("""Object.fromEntries([...document.querySelectorAll('#by-group tr')].map(
            row => [row.querySelector('th').innerText, [row.querySelector('td.n').innerText,
                    row.querySelector('.bar').getBoundingClientRect().width]]))""")
        assert {name: count for name, (count, _) in by_group.items()} == {
            "Serving": "0", "Eventing": "1", "Networking": "1", "Operator": "1", "Kubernetes": "1"}, by_group
        # Bars are drawn (their width is an inline style, which the CSP allows) in proportion.
        assert by_group["Eventing"][1] > 0 and by_group["Serving"][1] == 0, by_group
        namespaces = browser.evaluate("[...document.querySelectorAll('#by-namespace th')].map(th => th.innerText)")
        assert set(namespaces) == {"knative-serving", "josh", "shop"}, namespaces
        # The chart: an inline SVG, rendered, with a bar per day and series, numbers that are the
        # API's, and its title and description for assistive technology.
        chart = browser.evaluate("""(() => {
            const svg = document.getElementById('moves-chart');
            const box = svg.getBoundingClientRect();
            const sum = cls => [...svg.querySelectorAll('rect.' + cls)]
                .reduce((total, bar) => total + Number(bar.dataset.count), 0);
            const drawn = [...svg.querySelectorAll('rect.fired')]
                .filter(bar => Number(bar.dataset.count) > 0)
                .map(bar => bar.getBoundingClientRect().height);
            return {width: box.width, height: box.height, fired: sum('fired'), resolved: sum('resolved'),
                    bars: svg.querySelectorAll('rect.fired').length, drawn,
                    labels: [...svg.querySelectorAll('text.count')].map(t => t.textContent),
                    title: svg.querySelector('title').textContent, desc: svg.querySelector('desc').textContent,
                    role: svg.getAttribute('role')};
        })()""")
        assert chart["width"] > 400 and chart["height"] > 100, chart
        assert chart["bars"] == 14, chart
        assert chart["fired"] == len(firing) + len(resolved), chart
        assert chart["resolved"] == len(resolved), chart
        assert chart["drawn"] and all(height > 10 for height in chart["drawn"]), chart
        assert str(chart["fired"]) in chart["labels"] or sum(map(int, chart["labels"])) == chart["fired"] + chart["resolved"], chart
        assert chart["role"] == "img" and "last 14 days" in chart["title"], chart
        assert f"{chart['fired']} fired and {chart['resolved']} resolved" in chart["desc"], chart
        # The list below the overview, filtered by family from the select.
        assert browser.evaluate("document.getElementById('overview').compareDocumentPosition("
                                "document.getElementById('drifts')) & Node.DOCUMENT_POSITION_FOLLOWING")
        shot = browser.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
        overview_png = OUTPUT / "dashboard-overview.png"
        overview_png.write_bytes(base64.b64decode(shot["data"]))
        assert overview_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and overview_png.stat().st_size > 20000
        browser.evaluate("document.querySelector('select[name=group]').value = 'eventing'")
        browser.evaluate("document.querySelector('form.filters button').click()")
        browser.wait_for("location.href.includes('group=eventing') && document.readyState === 'complete'")
        rows = browser.evaluate("[...document.querySelectorAll('#drifts tr')].slice(1).map(r => r.innerText)")
        assert len(rows) == 1 and "Trigger josh/example-trigger0" in rows[0], rows
    finally:
        sentinel.stop()


# ---- Re-check now: the resync button, against a fake Kubernetes API server --------------------

class FakeKubeApi:
    """A Kubernetes API server on loopback that lists the recorded Ready Services on every pass.
    Lists after the first wait for `release`, so a requested pass stays running while the test
    looks at the dashboard."""

    TOKEN = "fake-browser-sa-token"
    SERVICES = "/apis/serving.knative.dev/v1/services"

    def __init__(self):
        self.lists = []
        self.release = threading.Event()
        items = load_yaml_fixture(
            "serving/redhat-developer-vscode-knative__test-servingTree-multipleServiceServicesList.json")["items"]
        items = [item for item in items if item["metadata"]["name"] != "example"]
        for item in items:
            item.pop("apiVersion", None)
            item.pop("kind", None)
        body = json.dumps({"kind": "ServiceList", "apiVersion": "serving.knative.dev/v1",
                           "metadata": {"resourceVersion": "90000"}, "items": items}).encode()
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                if (self.path.split("?")[0] != fake.SERVICES
                        or self.headers.get("Authorization") != f"Bearer {fake.TOKEN}"):
                    self.send_error(404)
                    return
                fake.lists.append(self.path)
                if len(fake.lists) > 1:
                    fake.release.wait(60)
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def kubeconfig(self, directory: Path) -> Path:
        path = directory / "kubeconfig"
        path.write_text(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n"
            f"    server: http://127.0.0.1:{self.server.server_address[1]}\n"
            "contexts:\n- name: fake\n  context:\n    cluster: fake\n    user: fake\n"
            f"current-context: fake\nusers:\n- name: fake\n  user:\n    token: {self.TOKEN}\n")
        return path

    def close(self):
        self.release.set()
        self.server.shutdown()


def until(what: str, check, timeout=30):
    """Polls `check` until it returns a true value (the deadline bounds a hang; it claims no speed)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def test_the_recheck_button_starts_a_resync_pass_and_not_from_another_site_in_chromium(workdir, browser):
    assert CHROMIUM, "chromium must be installed (scripts/test.sh installs it)"
    kube = FakeKubeApi()
    sentinel = Sentinel(workdir)
    sentinel.config_path.write_text(
        f"store:\n  path: {workdir / 'sentinel.db'}\n"
        "channels:\n  - {name: log, type: log}\n"
        "routes:\n  - {channels: [log], groupWait: 0s, groupInterval: 0s}\n"
        f"resync:\n  enabled: true\n  interval: 1h\n  kubeconfig: {kube.kubeconfig(workdir)}\n"
        "  resources:\n    - {apiVersion: serving.knative.dev/v1, kind: Service}\n")
    sentinel.start()
    other_site = workdir / "other-site"
    other_site.mkdir()
    server = None
    try:
        first = until("the scheduled pass at start",
                      lambda: (status := resync_status(sentinel))["lastPass"] and status)
        assert first["lastPass"]["trigger"] == "schedule" and first["lastPass"]["listed"] == 3, first

        # Another site's page presses the button the moment it opens: refused, nothing starts.
        (other_site / "recheck.html").write_text(
            f'<form id="f" method="post" action="{sentinel.url}/ui/resync"></form>'
            '<script>document.getElementById("f").submit()</script>')
        server, port = serve_directory(other_site)
        browser.call("Page.navigate", url=f"http://localhost:{port}/recheck.html")
        browser.wait_for(f"location.href.startsWith({json.dumps(sentinel.url)}) && document.readyState === 'complete'")
        assert "Refused" in browser.evaluate("document.body.innerText"), browser.evaluate("document.body.innerText")
        assert resync_status(sentinel)["running"] is None
        assert len(kube.lists) == 1, kube.lists

        # From the dashboard, a person clicks it: the front page comes back with the pass running.
        browser.open(f"{sentinel.url}/ui")
        assert "Last pass complete" in browser.evaluate("document.getElementById('resync').innerText")
        browser.evaluate("document.querySelector('form[action=\"/ui/resync\"] button').click()")
        browser.wait_for("document.getElementById('resync-running') !== null && document.readyState === 'complete'")
        panel = browser.evaluate("document.getElementById('resync').innerText")
        assert "Running" in panel and "(on request)" in panel, panel
        assert browser.evaluate("document.querySelector('#resync-form button').disabled") is True
        assert resync_status(sentinel)["running"]["trigger"] == "api"

        kube.release.set()
        done = until("the requested pass to end",
                     lambda: (status := resync_status(sentinel))["running"] is None
                     and status["lastPass"]["trigger"] == "api" and status)
        assert done["lastPass"]["outcome"] == "complete" and done["lastPass"]["listed"] == 3, done
        browser.open(f"{sentinel.url}/ui")
        panel = browser.evaluate("document.getElementById('resync').innerText")
        assert "(on request): 3 listed, 0 missed, 0 deleted" in panel, panel
        assert sentinel.metric('drift_sentinel_resync_passes_total{trigger="api",outcome="complete"}') == 1
    finally:
        if server:
            server.shutdown()
        kube.close()
        sentinel.stop()


# ---- The fleet page -------------------------------------------------------------------------

def test_the_fleet_page_shows_a_group_cluster_by_cluster_with_the_differing_value_highlighted_in_chromium(workdir, browser):
    from test_fleet import FLEET_CONFIG, KEY, autoscaler, fleet_drifts, post as post_to, with_key
    assert CHROMIUM, "chromium must be installed (scripts/test.sh installs it)"
    OUTPUT.mkdir(exist_ok=True)
    sentinel = Sentinel(workdir, extra_config=FLEET_CONFIG).start()
    try:
        post_to(sentinel, "prod-eu", "add", with_key(autoscaler("prod-eu"), "100"))
        post_to(sentinel, "prod-us", "add", with_key(autoscaler("prod-us"), "50"))
        assert wait_for(lambda: fleet_drifts(sentinel, "firing"), timeout=30)
        page = browser.dump_dom(sentinel.url + "/ui/fleet")
        assert 'href="/ui/fleet"' in page  # linked from the nav
        assert '<section class="fleet-group" id="group-prod">' in page, page[:3000]
        assert "<th>prod-eu</th><th>prod-us</th>" in page
        # The differing row, each cluster's cell highlighted with its value.
        row = page.split(f"<code>/data/{KEY}</code>")[0].rsplit("<tr", 1)[1]
        assert row.startswith(' class="differs"'), row
        assert '<td data-cluster="prod-us" class="diff"><code>"50"</code></td>' in page
        assert '<td data-cluster="prod-eu" class="diff"><code>"100"</code></td>' in page
        # An alike row is not highlighted; the drift is linked with its state.
        assert '<td data-cluster="prod-us"><code>"devel"</code></td>' in page
        assert 'class="firing" href="/ui/drifts/' in page
        shot_png = OUTPUT / "dashboard-fleet.png"
        shot_png.unlink(missing_ok=True)
        browser.screenshot(sentinel.url + "/ui/fleet", shot_png)
        assert shot_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot_png.stat().st_size > 5000
    finally:
        sentinel.stop()
