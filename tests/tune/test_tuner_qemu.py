"""The tuner on qemu-cortex-m4 (slow): instruction counts under -icount, deterministic, resumed, and a tuning
log that changes the instructions the whole model executes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from utvm.cli import main
from utvm.tune import log as tlog
from utvm.tune.driver import tune
from utvm.tune.measure import Measurer
from utvm.tune.tasks import extract_tasks

from .conftest import patch_kernel

pytestmark = pytest.mark.slow
PLATFORM = "qemu-cortex-m4"


def cycles(capsys: pytest.CaptureFixture, model: Path, *extra: str) -> int:
    assert main(["run", str(model), "--platform", PLATFORM, "--json", "--seed", "1", "--check", *extra]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["bit_exact"] is True
    return int(res["cycles"])


def test_tuning_on_qemu_counts_instructions_and_the_log_changes_the_count(
        small_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    task = extract_tasks(small_model, "cortex-m4")[0]
    # (injected code before a shared kernel's call would run before the call writes the output: per layer)
    points = [p for p in task.space.points() if p != task.space.default and not p.get("share")]
    patch_kernel(monkeypatch, "conv2d", points[1], "this is not C;")  # fails arm-none-eabi-gcc -Werror
    patch_kernel(monkeypatch, "conv2d", points[2], "out0[5] = (int8_t)(out0[5] + 1);")  # a wrong output
    log = tmp_path / "m4.jsonl"
    m = Measurer(PLATFORM, seed=0, cost="instructions")  # (the board's default cost is its estimated cycles)
    r = tune(small_model, log, PLATFORM, trials=6, batch=6, strategy="grid", only=[task.key], measurer=m)
    recs = tlog.read(log)
    assert r.measured == 6 and len(recs) == 6
    (dflt,) = [x for x in recs if x.default]
    assert dflt.ok and dflt.schedule == task.space.default
    errors = {tlog.Record.schedule_key(x): x.error for x in recs if not x.ok}
    assert len(errors) == 2 and m.stats["build_failures"] == 1
    assert next(x for x in recs if x.schedule == points[1]).error.startswith("building the candidate failed:")
    assert next(x for x in recs if x.schedule == points[2]).error.startswith("wrong output:")
    ok = [x for x in recs if x.ok]
    assert all(x.unit == "instructions" and x.target == "cortex-m4" for x in ok)
    assert all(x.cost == int(x.cost) and x.cost > 0 for x in ok)
    assert tlog.best_schedules(log, "cortex-m4")[task.key] not in (points[1], points[2])

    # Deterministic: the default measured again, in another firmware, costs the same instructions.
    (again,) = list(Measurer(PLATFORM, seed=5, cost="instructions").measure(task, [task.space.default]))
    assert again.ok and again.cost == dflt.cost

    # Resumed: nothing left to do.
    assert tune(small_model, log, PLATFORM, trials=6, batch=6, strategy="grid", only=[task.key],
                cost="instructions").measured == 0

    # Applying a log changes what the whole model executes, in the direction the tuner measured.
    other = max((x for x in ok if x.cost != dflt.cost), key=lambda x: abs(x.cost - dflt.cost))
    chosen = tmp_path / "chosen.jsonl"
    tlog.append(chosen, [other])
    base = cycles(capsys, small_model)
    tuned = cycles(capsys, small_model, "--tuning-log", str(chosen), "--max-flash-growth", "none",
                   "--max-ram-growth", "none")  # the point farthest from the default, whatever it takes
    assert tuned != base
    assert (tuned > base) == (other.cost > dflt.cost)


def test_tuning_on_estimated_cycles(small_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """`--cost cycles` on qemu-cortex-m4 (its timing model of the M4): every record in estimated cycles,
    deterministic, never fewer than the instructions the point executes; the run ends with the whole-model
    choice, which `--tuning-log` then applies."""
    log = tmp_path / "cycles.jsonl"
    assert main(["tune", str(small_model), "--platform", PLATFORM, "--cost", "cycles", "--trials", "2", "--batch", "2",
                 "-o", str(log), "-q"]) == 0
    out = capsys.readouterr().out
    assert " cyc " in out and "whole-model choice (flash +10%, workspace +0%)" in out
    recs = tlog.read(log)
    assert len(recs) == 6 and all(r.ok and r.unit == "cycles_est" and r.cost == int(r.cost) for r in recs)
    assert all(r.weights is not None and r.scratch is not None for r in recs)
    task = extract_tasks(small_model, "cortex-m4")[2]  # the dense layer
    (dflt,) = [r for r in recs if r.task == task.key and r.default]
    (again,) = list(Measurer(PLATFORM, seed=3).measure(task, [task.space.default]))
    assert again.unit == "cycles_est" and again.cost == dflt.cost
    (insn,) = list(Measurer(PLATFORM, seed=3, cost="instructions").measure(task, [task.space.default]))
    assert insn.unit == "instructions" and 0 < insn.cost <= again.cost
    assert cycles(capsys, small_model, "--tuning-log", str(log)) > 0
