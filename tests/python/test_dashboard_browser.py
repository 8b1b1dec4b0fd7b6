"""The dashboard in a real headless browser (Debian's chromium): it loads, lists a drift, shows
its diff, and screenshots are written to test-output/."""

import shutil
import subprocess
import tempfile
from pathlib import Path

from conftest import ROOT, Sentinel
from test_delivery_process import config_map, edit, post

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
OUTPUT = ROOT / "test-output"


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
