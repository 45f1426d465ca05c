"""Applying a tuning log to the whole model within flash and workspace budgets (utvm.tune.budget): the
choice is for the model, not per task; the workspace is the planner's peak, not the sum of the scratch
areas; units never mix; what a record lacks counts as the default's; the commands take the budget flags."""

from __future__ import annotations

import json
import re
import tarfile
import warnings
from pathlib import Path
from typing import Any

import pytest

from utvm.cli import EXIT_OK, EXIT_USAGE, main
from utvm.compiler import compile
from utvm.compiler.driver import CompiledModel
from utvm.compiler.footprint import task_footprint
from utvm.frontend import load
from utvm.support.models import models_dir
from utvm.tune import budget as tbudget
from utvm.tune import log as tlog
from utvm.tune.budget import choose_schedules
from utvm.tune.log import Budgets, Record
from utvm.tune.tasks import Task, extract_tasks

FLASH_ONLY = Budgets(code=None, flash=0.10, ram=None)


@pytest.fixture(scope="module")
def default_build(small_model: Path) -> CompiledModel:
    return compile(load(small_model), target="host")


@pytest.fixture(scope="module")
def tasks(small_model: Path) -> list[Task]:
    """conv 3x3 (one node, step 0), conv 1x1 (two nodes, steps 1 and 2), dense (one node, step 3)."""
    ts = extract_tasks(small_model, "host")
    assert [t.count for t in ts] == [1, 2, 1]
    return ts


def points(task: Task, n: int) -> list[dict]:
    return [p for p in task.space.points() if p != task.space.default][:n]


def rec(task: Task, point: dict, cost: float, code: int | None = 1000, weights: int | None = 1000,
        scratch: int | None = 0, default: bool = False, unit: str = "seconds") -> Record:
    return Record(task.key, "host", dict(point), cost, unit, None, "0.1.0", dict(task.workload), "", default, "host",
                  code, weights, scratch)


def defaults(tasks: list[Task], unit: str = "seconds") -> list[Record]:
    """Every task's default point: 100 (cost units), 1000 B of code and 1000 B of weights, no scratch: the
    tasks' flash is 6000 B, a 10% budget 600 B."""
    return [rec(t, t.space.default, 100.0, default=True, unit=unit) for t in tasks]


def quiet_choice(records: list[Record], build: CompiledModel, budgets: Budgets, **kw: Any) -> tbudget.ModelChoice:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning expected unless a test says so
        return choose_schedules(records, build, budgets, **kw)


def test_the_choice_is_for_the_whole_model_not_per_task(default_build: CompiledModel, tasks: list[Task]) -> None:
    a, b, c = tasks
    (pa,), (pb,), (pc,) = points(a, 1), points(b, 1), points(c, 1)
    big_a = rec(a, pa, 50.0, code=1500)  # gain 50 for +500 B: over a's own 10% (200 B), within the model's 600 B
    choice = quiet_choice([*defaults(tasks), big_a], default_build, FLASH_ONLY)
    assert choice.schedules[a.key] == pa and choice.flash_base == 6000 and choice.flash_delta == 500
    assert choice.flash_budget == pytest.approx(600)
    per_task = tlog.summarize([*defaults(tasks), big_a], max_code_growth=None, max_flash_growth=0.1)
    assert per_task[0].best.schedule == a.space.default  # the table's per-task view cannot take it
    # Two smaller moves worth more together (b: 2 nodes x 20 = 40 for +200 B, c: 30 for +200 B) than a's 50.
    more = [*defaults(tasks), big_a, rec(b, pb, 80.0, code=1200), rec(c, pc, 70.0, weights=1200)]
    choice = quiet_choice(more, default_build, FLASH_ONLY)
    assert choice.schedules == {a.key: a.space.default, b.key: pb, c.key: pc}
    assert choice.flash_delta == 400 and [t.tuned for t in choice.tasks] == [False, True, True]
    assert choice.ratio == pytest.approx((100 + 2 * 80 + 70) / 400)
    # One large gain worth more than the small ones the budget leaves room for: it is taken alone.
    huge_a = rec(a, pa, 10.0, code=1500)  # 90
    choice = quiet_choice([*defaults(tasks), huge_a, rec(b, pb, 80.0, code=1200), rec(c, pc, 70.0, weights=1200)],
                          default_build, FLASH_ONLY)
    assert choice.schedules[a.key] == pa and choice.flash_delta <= 600
    # No limit: the fastest point of every task.
    choice = quiet_choice(more, default_build, Budgets(code=None, flash=None, ram=None))
    assert choice.schedules == {a.key: pa, b.key: pb, c.key: pc}


def test_the_workspace_is_the_planners_peak_not_the_sum_of_the_scratch(default_build: CompiledModel,
                                                                         tasks: list[Task]) -> None:
    """The default build needs 576 B (two 288-byte tensors live at steps 1 and 2); at step 0 only y1 is live,
    so conv 3x3 may take up to 288 B of scratch without raising the peak; conv 1x1 may take none."""
    a, b, _c = tasks
    pa1, pa2 = points(a, 2)
    (pb,) = points(b, 1)
    fits = rec(a, pa1, 60.0, scratch=288)
    over = rec(a, pa2, 40.0, scratch=304)
    mid = rec(b, pb, 10.0, scratch=16)
    records = [*defaults(tasks), fits, over, mid]
    ram0 = Budgets(code=None, flash=None, ram=0.0)
    choice = quiet_choice(records, default_build, ram0)
    assert choice.workspace_default == 576 and choice.workspace == 576 and choice.workspace_budget == 576
    assert choice.schedules[a.key] == pa1 and choice.schedules[b.key] == b.space.default
    choice = quiet_choice(records, default_build, Budgets(code=None, flash=None, ram=0.05))  # 604 B
    assert choice.schedules[a.key] == pa2 and choice.workspace == 592
    choice = quiet_choice(records, default_build, Budgets(code=None, flash=None, ram=None))
    assert choice.schedules == {**choice.schedules, a.key: pa2, b.key: pb} and choice.workspace > 576
    # The tuned build's real plan is what the choice said.
    tuned = compile(default_build.source_graph, target="host",
                    schedules=quiet_choice(records, default_build, ram0).schedules)
    assert tuned.plan.workspace_bytes == 576


def test_a_choice_the_planner_refuses_is_backed_off(default_build: CompiledModel, tasks: list[Task],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """When the plan comes out over the budget though the lower bound did not (a planner heuristic), the task
    whose scratch grew loses the points of that scratch and the choice is made again."""
    a = tasks[0]
    pa1, pa2 = points(a, 2)
    real = tbudget.workspace_peak
    grown = default_build.operators[0].name

    def pessimistic(plan: Any, steps: Any, scratch: dict[str, int], *args: Any) -> int:
        return real(plan, steps, scratch, *args) + (1000 if scratch.get(grown, 0) > 0 else 0)

    monkeypatch.setattr(tbudget, "workspace_peak", pessimistic)
    records = [*defaults(tasks), rec(a, pa1, 50.0, scratch=288), rec(a, pa2, 70.0, scratch=0)]
    choice = quiet_choice(records, default_build, Budgets(code=None, flash=None, ram=0.0))
    assert choice.backoffs == 1 and choice.schedules[a.key] == pa2 and choice.workspace == 576
    assert "the planner's check took back 1 choice(s)" in choice.report()


def test_units_never_mix(default_build: CompiledModel, tasks: list[Task]) -> None:
    a, b, _c = tasks
    (pa,), (pb,) = points(a, 1), points(b, 1)
    insn = [rec(a, a.space.default, 100.0, default=True, unit="instructions"), rec(a, pa, 50.0, unit="instructions")]
    cyc = [rec(b, b.space.default, 300.0, default=True, unit="cycles_est"), rec(b, pb, 200.0, unit="cycles_est"),
           rec(a, pa, 10.0, unit="cycles_est")]  # a's point in cycles, without a default measured in cycles
    with pytest.warns(UserWarning) as caught:
        choice = choose_schedules([*insn, *cyc], default_build, FLASH_ONLY)  # the latest unit: estimated cycles
    assert choice.unit == "cycles_est" and choice.schedules == {a.key: pa, b.key: pb}
    assert not any("instructions only" in str(w.message) for w in caught)  # a has cycles records too
    assert "1 record(s) of this model's tasks, or their task's default, lack" in str(caught[0].message)  # a's
    with pytest.warns(UserWarning, match=r"1 task\(s\) of this model have records in cycles_est only, not in "
                                         "instructions"):
        choice = choose_schedules([*insn, *cyc], default_build, FLASH_ONLY, unit="instructions")
    assert choice.unit == "instructions" and set(choice.schedules) == {a.key} and choice.schedules[a.key] == pa
    with pytest.warns(UserWarning, match=r"1 task\(s\) of this model have records in instructions only, not in "
                                         r"cycles_est .*: they keep their default schedule"):
        choice = choose_schedules([*insn, *cyc[:2]], default_build, FLASH_ONLY)
    assert set(choice.schedules) == {b.key}
    # The per-task table compares within one unit too.
    (s,) = [x for x in tlog.summarize([*insn, *cyc], unit="instructions") if x.task == a.key]
    assert s.unit == "instructions" and s.best.cost == 50.0 and s.ratio == 0.5


def test_records_without_footprints_count_as_the_default_with_one_warning(default_build: CompiledModel,
                                                                          tasks: list[Task]) -> None:
    a, b, _c = tasks
    (pa,), (pb,) = points(a, 1), points(b, 1)
    old = [rec(a, pa, 50.0, code=None, weights=None, scratch=None), rec(b, pb, 50.0, code=9000, weights=None)]
    with pytest.warns(UserWarning) as caught:
        choice = choose_schedules([*defaults(tasks), *old], default_build, tlog.COMMAND_BUDGETS)
    lines = [str(w.message) for w in caught]
    assert len(lines) == 1 and "2 record(s) of this model's tasks, or their task's default, lack a code, weights or "\
                               "scratch size" in lines[0]
    assert choice.schedules[a.key] == pa  # unknown: as the default's, within every budget
    assert choice.schedules[b.key] == b.space.default  # its code is known: +8000 B is over the budget


def test_only_faster_accepted_points_within_the_code_limit_are_chosen(default_build: CompiledModel,
                                                                      tasks: list[Task]) -> None:
    a = tasks[0]
    pa1, pa2 = points(a, 2)
    refused = rec(a, {"algo": "gemm", "px_block": 3}, 1.0)  # not a point of the kernel's space
    slower = rec(a, pa1, 150.0, code=500)
    fat = rec(a, pa2, 50.0, code=1200)  # +20% code, +10% of the tasks' flash
    with pytest.warns(UserWarning, match=rf"tuning log: 1 record\(s\) of this model's tasks name a schedule their "
                                         rf"kernel refuses \(task {a.key}: .*\): never chosen"):
        choice = choose_schedules([*defaults(tasks), refused, slower, fat], default_build, tlog.COMMAND_BUDGETS)
    assert choice.refused == 1 and choice.schedules[a.key] == pa2
    choice = quiet_choice([*defaults(tasks), slower, fat], default_build,
                          Budgets(code=0.1, flash=0.1, ram=0.0))  # --max-code-growth 0.1: per task as well
    assert choice.schedules[a.key] == a.space.default and not choice.tasks[0].tuned


def test_a_log_of_nothing_in_this_model_chooses_nothing(default_build: CompiledModel, tasks: list[Task]) -> None:
    other = Record("conv2d:0123456789abcdef", "host", {"px_block": 1}, 1.0, "seconds", None, "0.1.0")
    choice = quiet_choice([other], default_build, tlog.COMMAND_BUDGETS)
    assert choice.schedules == {} and choice.tasks == [] and choice.log_tasks == {other.task}
    assert choice.workspace == choice.workspace_default == 576


# --- the commands ----------------------------------------------------------------------------------------
def _operators(tar: Path) -> dict[str, dict]:
    with tarfile.open(tar) as tf:
        name = next(n for n in tf.getnames() if n.endswith("metadata.json"))
        meta = json.load(tf.extractfile(name))  # type: ignore[arg-type]
    ops = meta["modules"]["default"]["memory"]["functions"]["operator_functions"]
    return {op["task"]: op for op in ops if op["task"]}


def test_compile_applies_the_budgets(small_model: Path, tasks: list[Task], tmp_path: Path,
                                     capsys: pytest.CaptureFixture) -> None:
    """With the scratch each point really asks for: conv 3x3's 72 B fit at step 0, conv 1x1's 16 B and dense's
    576 B raise the workspace (two tensors are live at steps 1 and 2, dense's 576 B beside y3 at step 3)."""
    a, b, c = tasks
    (pa,), (pb,), (pc,) = points(a, 1), points(b, 1), points(c, 1)
    scratch = {t.key: task_footprint(t.graph, t.key, p, "host", t.rounding, t.count).scratch
               for t, p in ((a, pa), (b, pb), (c, pc))}
    assert scratch == {a.key: 72, b.key: 16, c.key: 576}
    log = tmp_path / "log.jsonl"
    tlog.append(log, [*defaults(tasks), rec(a, pa, 50.0, code=1500, scratch=72),
                      rec(b, pb, 80.0, code=1200, scratch=16), rec(c, pc, 70.0, weights=1200, scratch=576)])
    out = tmp_path / "m.tar"

    def chosen(*flags: str) -> list[dict]:
        assert main(["compile", str(small_model), "-o", str(out), "--tuning-log", str(log), *flags]) == EXIT_OK
        ops = _operators(out)
        return [ops[t.key]["schedule"] for t in tasks]

    assert chosen() == [pa, b.space.default, c.space.default]
    err = capsys.readouterr().err
    assert "whole-model choice (flash +10%, workspace +0%): 1 of 3 task(s) take a tuned point" in err
    assert "flash of the tasks 6,000 B +500 B (budget +600 B); workspace 576 B -> 576 B (budget 576 B)" in err
    assert chosen("--max-ram-growth", "none") == [a.space.default, pb, pc]  # 40 + 30 for 400 B beat 50 for 500 B
    assert chosen("--max-ram-growth", "none", "--max-flash-growth", "none") == [pa, pb, pc]
    assert chosen("--max-ram-growth", "none", "--max-flash-growth", "none", "--max-code-growth", "0.25") == [
        a.space.default, pb, pc]  # per task: a's +50% code is out, b's +20% in
    # 5% more workspace (604 B) lets conv 1x1 take its 16 B, but a's 50 beats b's 40 within the flash budget.
    assert chosen("--max-ram-growth", "0.05") == [pa, b.space.default, c.space.default]
    assert chosen("--max-ram-growth", "0.05", "--max-flash-growth", "0.2") == [pa, pb, c.space.default]


@pytest.mark.parametrize("command", ["compile", "run", "deploy", "size", "tune"])
@pytest.mark.parametrize(("flag", "value", "message"), [
    ("--max-flash-growth", "-0.1", "argument --max-flash-growth: -0.1 must be a finite fraction >= 0 (or none)"),
    ("--max-ram-growth", "lots", "argument --max-ram-growth: 'lots' is not a fraction (e.g. 0.1) or none"),
    ("--max-ram-growth", "inf", "argument --max-ram-growth: inf must be a finite fraction >= 0"),
    ("--max-code-growth", "nan", "argument --max-code-growth: nan must be a finite fraction >= 0"),
])
def test_a_bad_budget_is_one_line_and_exit_2(command: str, flag: str, value: str, message: str, small_model: Path,
                                             tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    rc = main([command, str(small_model), flag, value, "-o", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert rc == EXIT_USAGE and message in err and len(err.strip().splitlines()) == 1


def test_tune_summary_shows_the_footprints_and_the_whole_model_choice(small_model: Path, tasks: list[Task],
                                                                     tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture) -> None:
    a, b, c = tasks
    (pa,), (pb,), (pc,) = points(a, 1), points(b, 1), points(c, 1)
    log = tmp_path / "log.jsonl"
    tlog.append(log, [*defaults(tasks), rec(a, pa, 50.0, code=1500, scratch=288), rec(b, pb, 80.0, code=1200),
                      rec(c, pc, 70.0, weights=1200, code=None)])
    assert main(["tune", "--summary", str(log)]) == EXIT_OK
    out = capsys.readouterr().out.splitlines()
    assert re.search(r"best/default +code B +weights B +scratch B +best schedule$", out[0])
    row = {t.key: " ".join(next(x for x in out if t.description[:60] in x).split()) for t in tasks}
    assert "1.000 1000 (+0) 1000 (+0) 0 (+0)" in row[a.key]  # per task, a's +500 B is over its 10%: the default
    assert "0.800 1200 (+200) 1000 (+0) 0 (+0)" in row[b.key]
    assert "0.700 ? 1200 (+200) 0 (+0)" in row[c.key]
    assert not any("whole-model" in x for x in out)
    assert main(["tune", "--summary", str(log), str(small_model), "--max-ram-growth", "none"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "whole-model choice (flash +10%, workspace unlimited): 2 of 3 task(s) take a tuned point" in out
    assert "scratch 0 B (+0)" in out and "code +0 B, weights +200 B" in out
    assert main(["tune", "--summary", str(log), str(small_model), "--max-flash-growth", "none",
                 "--max-ram-growth", "none"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "3 of 3 task(s) take a tuned point" in out and "code +500 B, weights +0 B, scratch 288 B (+288)" in out
    # A model the log has nothing for says so.
    hello = models_dir() / "tflm" / "hello_world_int8.tflite"
    assert main(["tune", "--summary", str(log), str(hello)]) == EXIT_OK
    assert "no usable record of this model's tasks on host" in capsys.readouterr().out


def test_with_memory_pools_the_choice_fits_them(small_model: Path, tasks: list[Task]) -> None:
    """`--memory-pool`s bound the workspace whatever the RAM budget: a choice they cannot hold is backed off."""
    from utvm.compiler.memory import parse_pool

    build = compile(load(small_model), target="host", memory_pools=(parse_pool("only:576"),))
    _a, _b, c = tasks
    (pc,) = points(c, 1)
    records = [*defaults(tasks), rec(c, pc, 10.0, scratch=576)]  # dense's 576 B beside y3: 864 B
    choice = quiet_choice(records, build, Budgets(code=None, flash=None, ram=None))
    assert choice.schedules[c.key] == c.space.default and choice.backoffs == 1 and choice.workspace == 576
    roomy = compile(load(small_model), target="host", memory_pools=(parse_pool("only:1K"),))
    assert quiet_choice(records, roomy, Budgets(code=None, flash=None, ram=None)).schedules[c.key] == pc
