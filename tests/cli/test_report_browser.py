"""`utvm report` pages in headless Chromium (Debian's `chromium`, installed by tools/bootstrap.sh): KWS on
qemu-cortex-m4, whose figures equal what `utvm size --json` and `utvm run --profile --json` print for the
same build (run through the command lines the page names), and an ONNX model on the host. Each page
renders with no console message, its charts are non-blank where they are drawn, and its per-layer table has
one row per operator function. Without chromium these tests fail, naming the package: they never skip."""

from __future__ import annotations

import contextlib
import io
import json
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from utvm.cli import main
from utvm.report.svg import CHART_BACKGROUND
from utvm.support.models import models_dir

pytestmark = pytest.mark.slow

KWS = models_dir() / "mlperf_tiny" / "kws_ref_model.tflite"
MNIST = models_dir() / "onnx" / "mnist-8" / "model.onnx"
WINDOW = (1200, 4000)  # CSS pixels: both pages end well above 4000 (checked: the last rows are blank)


def run_cli(argv: list[Any]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main([str(a) for a in argv])
    return status, out.getvalue(), err.getvalue()


def chromium() -> str:
    path = shutil.which("chromium")
    if path is None:
        pytest.fail("chromium is not installed: the report pages cannot be rendered (Debian's `chromium` package; "
                    "tools/bootstrap.sh installs it with the other system packages)")
    return path


def browse(page: Path, tmp: Path) -> tuple[np.ndarray, str, list[str]]:
    """Open `page` in headless Chromium: the screenshot (RGB uint8), the DOM it built, the console lines."""
    png = tmp / f"{page.stem}.png"
    proc = subprocess.run(
        [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--force-color-profile=srgb",
         "--hide-scrollbars", f"--user-data-dir={tmp / 'chromium-profile'}", "--enable-logging=stderr", "--v=0",
         "--dump-dom", f"--screenshot={png}", f"--window-size={WINDOW[0]},{WINDOW[1]}", page.resolve().as_uri()],
        capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    import matplotlib.image

    rgb = np.round(matplotlib.image.imread(png)[..., :3] * 255).astype(np.uint8)
    console = [line for line in proc.stderr.splitlines() if ":CONSOLE" in line]
    return rgb, proc.stdout, console


def _runs(flags: np.ndarray, gap: int = 0) -> list[tuple[int, int]]:
    """[start, end) of the runs of True in `flags`, runs closer than `gap` merged."""
    idx = np.flatnonzero(flags)
    if not idx.size:
        return []
    out = [[int(idx[0]), int(idx[0]) + 1]]
    for i in idx[1:]:
        if i - out[-1][1] <= gap:
            out[-1][1] = int(i) + 1
        else:
            out.append([int(i), int(i) + 1])
    return [(a, b) for a, b in out]


def chart_regions(rgb: np.ndarray) -> list[tuple[int, int, int, int]]:
    """The rectangles (top, bottom, left, right) of the charts: where their background colour is."""
    bg = np.array([int(CHART_BACKGROUND[i:i + 2], 16) for i in (1, 3, 5)], np.uint8)
    mask = (rgb == bg).all(axis=-1)
    regions = []
    for top, bottom in _runs(mask.any(axis=1)):
        for left, right in _runs(mask[top:bottom].any(axis=0), gap=4):
            if (bottom - top) * (right - left) > 2000:  # not a stray pixel of anti-aliasing
                regions.append((top, bottom, left, right))
    return regions


def check_page(page: Path, tmp: Path, operator_functions: int) -> None:
    rgb, dom, console = browse(page, tmp)
    assert console == []  # no error, no message at all: the page runs nothing
    assert dom.count('<tr class="layer"') == operator_functions
    charts = dom.count('<svg class="chart"')
    regions = chart_regions(rgb)
    assert len(regions) == charts >= 3, (regions, charts)
    bg = np.array([int(CHART_BACKGROUND[i:i + 2], 16) for i in (1, 3, 5)], np.uint8)
    for top, bottom, left, right in regions:
        area = rgb[top:bottom, left:right]
        drawn = ~((area == bg).all(axis=-1) | (area == 255).all(axis=-1))
        assert drawn.mean() > 0.01, (top, bottom, left, right)  # bars, bands, lines and labels, not an empty box
    assert (rgb[-40:] == 255).all()  # the whole page is in the screenshot


@pytest.fixture(scope="module")
def kws(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    d = tmp_path_factory.mktemp("kws")
    page = d / "kws.html"
    status, out, err = run_cli(["report", KWS, "--platform", "qemu-cortex-m4", "--check", "--seed", 11, "-q",
                                "--json", "-o", page])
    assert status == 0, err
    return {"doc": json.loads(out), "page": page, "dir": d}


def test_kws_figures_equal_size_and_run(kws: dict[str, Any]) -> None:
    doc = kws["doc"]
    got = {}
    for name in ("size", "run"):
        words = shlex.split(doc["commands"][name])
        assert words[:3] == ["utvm", name, str(KWS)]
        status, out, err = run_cli(words[1:])
        assert status == 0, err
        got[name] = json.loads(out)
    size, run = got["size"], got["run"]
    assert doc["sources"]["size"] == size  # the same firmware, measured by the same functions
    assert doc["sources"]["run"] == run  # QEMU's instruction clock: the same numbers, run after run
    assert run["bit_exact"] is True and doc["checks"]["check"]["ok"] is True

    flash = {p["key"]: p["bytes"] for p in doc["summary"]["flash"]["parts"]}
    sizes, totals = size["sizes"], size["totals"]
    assert flash["weights"] == sizes["constants"]["text"] + sizes["constants"]["data"]
    assert flash["code"] == sizes["operators"]["text"] + sizes["operators"]["data"]
    assert sum(flash.values()) == doc["summary"]["flash"]["total_bytes"] == totals["text"] + totals["data"]
    ram = {p["key"]: p["bytes"] for p in doc["summary"]["ram"]["parts"]}
    assert ram["stack"] == size["stack"]["measured_high_water"] > 0
    assert ram["static"] + ram["workspace"] + ram["persistent"] == totals["data"] + totals["bss"]
    assert ram["workspace"] + ram["persistent"] == doc["memory"]["workspace_bytes"]

    inference = doc["summary"]["inference"]
    assert (inference["instructions"], inference["cycles_est"]) == (run["instructions"], run["cycles_est"])
    assert (inference["deploy"]["instructions"], inference["deploy"]["cycles_est"]) == \
        (size["instructions"], size["cycles_est"])
    profile = {p["function"]: p for p in run["profile"]}
    layers = doc["layers"]
    assert len(layers) == len(profile) == 12
    for r in layers:
        p = profile[r["function"]]
        assert (r["seconds"], r["instructions"], r["cycles_est"]) == (p["seconds"], p["instructions"], p["cycles_est"])
        if r["macs"]:
            assert r["instructions_per_mac"] == pytest.approx(p["instructions"] / r["macs"])
    # every byte of the generated code and constants counted once, per operator or shared
    code = doc["code"]
    assert sum(r["code_bytes"] for r in layers) + sum(p["bytes"] for p in code["shared_code"]) + \
        code["executor_code_bytes"] + code["other_code_bytes"] == sizes["operators"]["text"]
    assert sum(r["weight_bytes"] for r in layers) + sum(p["bytes"] for p in code["shared_weights"]) + \
        code["other_constant_bytes"] == sizes["constants"]["text"]
    assert all(r["code_bytes"] > 0 for r in layers) and sum(r["weight_bytes"] for r in layers) > 30_000


def test_kws_page_in_chromium(kws: dict[str, Any]) -> None:
    check_page(kws["page"], kws["dir"], len(kws["doc"]["layers"]))


def test_onnx_page_on_the_host_in_chromium(tmp_path: Path) -> None:
    page = tmp_path / "mnist.html"
    status, out, err = run_cli(["report", MNIST, "--platform", "host", "--check", "--debug-layers", "--seed", 5,
                                "-q", "-o", page])
    assert status == 0, err
    assert out.strip().endswith("open it in a browser")
    check_page(page, tmp_path, 6)
    text = page.read_text()
    assert "onnxruntime" in text and "Every intermediate tensor of the 6 operator functions" in text
