"""The timing model in utvm's measurements (docs/timing.md): platforms name their core's model, a QEMU session
reads the plugin's regions, the time evaluator gives each result its estimated cycles (`cycles_est`), and
`utvm run --json/--profile` and `utvm size --json` report them beside instructions.

The matching of results to regions and the evaluator's arithmetic are checked without QEMU; the QEMU tests run
the real firmware (slow)."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from utvm.cli import main
from utvm.cli.run_profile import OperatorTiming, format_profile
from utvm.platform import get_platform, get_platform_class
from utvm.platform.qemu import timing
from utvm.platform.qemu.boards import get_board
from utvm.runtime.backend import TimeEvaluator, TimingRegion, estimate_cycles, match_regions
from utvm.runtime.packed_func import PackedFunc
from utvm.support.models import models_dir

HELLO = models_dir() / "tflm" / "hello_world_int8.tflite"
needs_qemu = pytest.mark.skipif(shutil.which("qemu-system-arm") is None or shutil.which("gcc") is None,
                                reason="needs qemu-system-arm and the host gcc")


# --- platforms -----------------------------------------------------------------------------------------------
def test_platforms_name_their_timing_model() -> None:
    expected = {"qemu-cortex-m4": "m4", "qemu-cortex-m7": "m7", "qemu-cortex-m33": "m33", "qemu-cortex-m55": "m55",
                "qemu-cortex-m3": None, "qemu-cortex-m0": None}
    assert {name: get_platform_class(name).timing_model for name in expected} == expected
    assert getattr(get_platform_class("host"), "timing_model", None) is None
    assert {name: get_board(name).timing_model for name in expected} == expected  # the board's fact


# --- matching results to regions -----------------------------------------------------------------------------
def test_regions_pair_in_order_when_counts_agree() -> None:
    regions = [TimingRegion(1000, 1500), TimingRegion(1000, 1400)]
    assert match_regions([1000.0, 1000.0], regions) == regions
    assert match_regions([1000.0, 1000.0], regions[:1]) is None  # fewer regions than results


def test_regrown_repeats_take_their_last_measurement() -> None:
    # repeat 0 measured with number 1 (too short), then 138; repeats 1 and 2 keep 138: 4 regions, 3 results.
    per_call = [7265.0, 7265.0, 7265.0]
    regions = [TimingRegion(7297, 10000), TimingRegion(1_002_602, 1_440_000), TimingRegion(1_002_602, 1_440_001),
               TimingRegion(1_002_602, 1_440_002)]
    assert match_regions(per_call, regions) == regions[1:]
    # a tiny function: the first measurement (number 1) is mostly the timer's own overhead
    regions = [TimingRegion(80, 400), TimingRegion(30_050, 42_000), TimingRegion(30_050, 42_001)]
    assert match_regions([50.0, 50.0], regions) == regions[1:]


def test_estimate_cycles_scales_each_result_by_its_region() -> None:
    est = estimate_cycles([1e-6, 2e-6], [TimingRegion(1000, 1500), TimingRegion(2000, 2000)], 1e9)
    assert est == pytest.approx([1500.0, 2000.0])
    assert estimate_cycles([1e-6], [], 1e9) is None


class _FakeTimer(PackedFunc):
    """A device timer: returns `seconds` as the CRT's evaluator does and closes `regions` in the log."""

    def __init__(self, log: _FakeLog, seconds: list[float], regions: list[TimingRegion]) -> None:
        super().__init__(None, "fake_timer")
        self.log, self.seconds, self.closes = log, seconds, regions

    def _invoke(self, args: list[Any]) -> bytes:
        self.log.closed += self.closes
        return struct.pack(f"<{len(self.seconds)}d", *self.seconds)


class _FakeLog:
    core = "m4"
    instructions_per_second = 1e9

    def __init__(self) -> None:
        self.closed: list[TimingRegion] = [TimingRegion(5, 5)]  # an earlier call's region

    def regions(self) -> list[TimingRegion]:
        return list(self.closed)


def test_time_evaluator_sets_cycles_est_per_call() -> None:
    log = _FakeLog()
    timer = _FakeTimer(log, [2e-6, 2e-6], [TimingRegion(2000, 3000), TimingRegion(2000, 3000)])
    ev = TimeEvaluator(timer, 2, timing=log)
    assert ev.cycles_est is None
    assert ev() == [2e-6, 2e-6]
    assert ev.cycles_est == pytest.approx([3000.0, 3000.0])  # only this call's regions count
    without = TimeEvaluator(_FakeTimer(log, [1e-6], [TimingRegion(1000, 1)]), 1)
    without()
    assert without.cycles_est is None


def test_timing_log_reads_whole_lines_as_they_come(tmp_path: Path) -> None:
    log = timing.TimingLog("m4", [(0x100, 0x200)], 1e9)
    try:
        assert log.regions() == []
        with open(log.path, "ab") as f:
            f.write(b"region=1 insns=10 cycles=12\nregion=2 ins")
        assert log.regions() == [TimingRegion(10, 12)]
        with open(log.path, "ab") as f:
            f.write(b"ns=4 cycles=9\n")
        assert log.regions() == [TimingRegion(10, 12), TimingRegion(4, 9)]
        assert log.qemu_args()[1].endswith(f",core=m4,start=0x100,end=0x200,out={log.path}")
    finally:
        log.close()
    assert not log.path.exists()


# --- reports -------------------------------------------------------------------------------------------------
def test_profile_reports_instructions_and_estimated_cycles() -> None:
    t = OperatorTiming("tvmgen_default_fused_dense", "dense", "node 1", 2e-6, 2000, 2712.4)
    assert t.to_json() == {"function": "tvmgen_default_fused_dense", "op": "dense", "node": "node 1",
                           "seconds": 2e-6, "cycles": 2000, "instructions": 2000, "cycles_est": 2712}
    table = format_profile([t, OperatorTiming("f", "add", "node 2", 1e-6, 1000, None)], 3e-6)
    head = table.splitlines()[0]
    assert "instructions" in head and "est. cycles" in head
    assert "2712" in table.splitlines()[2]
    plain = format_profile([OperatorTiming("f", "add", "node 2", 1e-6, 1000)])
    assert "est. cycles" not in plain


# --- QEMU ----------------------------------------------------------------------------------------------------
@pytest.mark.slow
@needs_qemu
def test_qemu_session_reports_cycles_est(monkeypatch: pytest.MonkeyPatch) -> None:
    plat = get_platform("qemu-cortex-m4")
    elf = plat.build(with_test_functions=True)
    with plat.start(elf) as sess:
        a = sess.array(np.arange(256, dtype="float32"))
        b = sess.empty((256,), "float32")
        before = sess.timing_regions()
        assert before == []
        with sess.time_evaluator("testing.add_one", number=2, repeat=3) as timer:
            seconds = timer(a, b)
            est = timer.cycles_est
        regions = sess.timing_regions()
        assert len(regions) == 3  # one per repeat: min_repeat_ms = 0 never re-measures
        assert est is not None and len(est) == 3
        for s, c, r in zip(seconds, est, regions, strict=True):
            instructions = s * plat.instructions_per_second
            # the region spans the timer's span: the same instructions within the SysTick's resolution
            assert abs(r.instructions - 2 * instructions) < 200
            assert c == pytest.approx(instructions * r.cycles / r.instructions)
            assert instructions < c < 3 * instructions  # loads, stores, taken branches cost more than 1
        # grown number (min_repeat_ms): the measurements a repeat discarded are not taken for the results
        with sess.time_evaluator("testing.add_one", number=1, repeat=2, min_repeat_ms=1) as timer:
            timer(a, b)
            assert timer.cycles_est is not None and len(timer.cycles_est) == 2
    monkeypatch.setenv(timing.ENV_SWITCH, "off")
    with plat.start(elf) as sess:
        assert sess.timing_regions() is None
        with sess.time_evaluator("testing.add_one", number=1, repeat=1) as timer:
            timer(sess.array(np.zeros(4, "float32")), sess.empty((4,), "float32"))
            assert timer.cycles_est is None


@pytest.mark.slow
@needs_qemu
def test_run_and_profile_json_report_cycles_est(capsys: pytest.CaptureFixture) -> None:
    argv = ["run", str(HELLO), "--platform", "qemu-cortex-m4", "--seed", "4", "--repeat", "1", "--profile",
            "--json"]
    assert main(argv) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["instructions"] == res["cycles"] == round(res["latency_s"] * 1e9)
    assert res["timing_model"] == "m4"
    assert res["instructions"] < res["cycles_est"] < 3 * res["instructions"]
    for p in res["profile"]:
        assert p["instructions"] == p["cycles"]
        assert p["instructions"] < p["cycles_est"] < 3 * p["instructions"]
    assert sum(p["cycles_est"] for p in res["profile"]) < res["cycles_est"]


@pytest.mark.slow
@needs_qemu
def test_size_json_reports_one_inference(capsys: pytest.CaptureFixture) -> None:
    assert main(["size", str(HELLO), "--platform", "qemu-cortex-m4", "--json", "-q"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["timing_model"] == "m4"
    assert 100 < res["instructions"] < res["cycles_est"] < 3 * res["instructions"]
    assert main(["size", str(HELLO), "--platform", "qemu-cortex-m3", "--json", "-q"]) == 0
    assert "cycles_est" not in json.loads(capsys.readouterr().out)  # no model for the M3
