"""The maps render: map.html and process_map.svg opened in headless Chromium (no network),
screenshots not blank, the expected elements in the rendered DOM."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from matplotlib import image

from sparkfield.core.conf import load_config
from sparkfield.geo import run as run_coffee
from sparkfield.process import run_process_mining

pytestmark = pytest.mark.slow
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars", "--window-size=1200,900"]


def _chromium(tmp: Path, *args: str) -> subprocess.CompletedProcess:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    assert chromium, "chromium is not installed: run scripts/system_deps.sh (make test does)"
    profile = tmp / "profile"
    return subprocess.run([chromium, *FLAGS, f"--user-data-dir={profile}", *args],
                          capture_output=True, text=True, timeout=120)


def _screenshot(tmp: Path, page: Path) -> np.ndarray:
    shot = tmp / f"{page.stem}.png"
    res = _chromium(tmp, f"--screenshot={shot}", page.as_uri())
    assert shot.exists(), res.stderr[-2000:]
    return image.imread(str(shot))[..., :3]


def _dom(tmp: Path, page: Path) -> str:
    res = _chromium(tmp, "--dump-dom", page.as_uri())
    assert res.returncode == 0, res.stderr[-2000:]
    return res.stdout


@pytest.fixture(scope="module")
def outputs(spark, repo_root, fixtures_dir, tmp_path_factory):
    base = tmp_path_factory.mktemp("visual")
    run_coffee(spark, load_config("coffee_shops", "local", repo_root / "conf", {"job": {
        "output": str(base / "coffee"), "search": {"grid_step_m": 25}}}))
    log = fixtures_dir / "process" / "running-example.xes"
    run_process_mining(spark, load_config("process_mining", "local", repo_root / "conf", {
        "job": {"log": str(log), "output": str(base / "pm")}}))
    return base


def test_map_html_renders_offline(outputs, tmp_path):
    page = outputs / "coffee" / "map.html"
    pixels = _screenshot(tmp_path, page)
    assert pixels.std() > 0.05 and (pixels < 0.95).mean() > 0.02  # not a blank page
    dom = _dom(tmp_path, page)
    assert dom.count('class="top-location"') == 10
    assert dom.count('class="station"') == 22 and 'id="crime-density"' in dom
    assert "<table id=\"top-table\">" in dom or "id=\"top-table\"" in dom


def test_process_map_svg_renders(outputs, tmp_path):
    page = outputs / "pm" / "process_map.svg"
    pixels = _screenshot(tmp_path, page)
    assert pixels.std() > 0.05
    dom = _dom(tmp_path, page)
    for activity in ("register request", "decide", "pay compensation"):
        assert activity in dom
