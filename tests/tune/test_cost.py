"""`utvm tune --cost cycles|instructions`: what the tuner minimises. On a platform with a timing model of its
core (`timing_model`) the cost is the time evaluator's estimated cycles (`cycles_est`, unit "cycles_est"),
else instructions under QEMU's -icount, else seconds; a cost the platform cannot measure is refused; a log's
records of another unit are measured again, never compared."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar

import pytest

from utvm.cli import EXIT_USAGE, main
from utvm.errors import PlatformError, UsageError
from utvm.platform import get_platform
from utvm.tune import log as tlog
from utvm.tune.driver import format_cost, tune
from utvm.tune.measure import Measurement, Measurer, cost_unit
from utvm.tune.tasks import Task, extract_tasks

#: The fake clock: seconds x this = "instructions"; the fake timing model's estimate is a different number.
IPS = 1e9


class _Timer:
    """A time evaluator whose platform has a timing model: `cycles_est` after each call."""

    def __init__(self, real: Any, estimate: Any) -> None:
        self.real, self.estimate = real, estimate
        self.cycles_est: list[float] | None = None

    def __call__(self, *args: Any) -> list[float]:
        secs = self.real(*args)
        self.cycles_est = self.estimate(secs)
        return secs

    def __enter__(self) -> _Timer:
        self.real.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.real.__exit__(*exc)


class _Session:
    def __init__(self, real: Any, estimate: Any) -> None:
        self.real, self.estimate = real, estimate

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)

    def time_evaluator(self, name: str, **kwargs: Any) -> _Timer:
        return _Timer(self.real.time_evaluator(name, **kwargs), self.estimate)


class TimedHost:
    """The host platform dressed as a QEMU board with a timing model: an instruction clock (seconds x IPS)
    and estimated cycles from `estimate(seconds) -> cycles_est`."""

    name = "timed-host"
    target = "host"
    timing_model: ClassVar[str | None] = "m4"
    instructions_per_second = IPS

    def __init__(self, estimate: Any = None) -> None:
        self.host = get_platform("host")
        self.estimate = estimate or (lambda secs: [7.0 * IPS * s + 1000.0 for s in secs])

    def build(self, **kwargs: Any) -> Path:
        return self.host.build(**kwargs)

    def start(self, firmware: Path, **kwargs: Any) -> _Session:
        return _Session(self.host.start(firmware, **kwargs), self.estimate)


def dense_task(small_model: Path) -> Task:
    return extract_tasks(small_model, "host")[2]


def test_the_cost_unit_of_each_platform_and_request() -> None:
    assert cost_unit(None, 25e6, "m4", "qemu-cortex-m4") == "cycles_est"  # the default where there is a model
    assert cost_unit("cycles", 25e6, "m4", "qemu-cortex-m4") == "cycles_est"
    assert cost_unit("instructions", 25e6, "m4", "qemu-cortex-m4") == "instructions"
    assert cost_unit(None, 25e6, None, "qemu-cortex-m3") == "instructions"
    assert cost_unit(None, None, None, "host") == "seconds"
    with pytest.raises(UsageError, match=r"^--cost cycles: platform qemu-cortex-m3 has no timing model of its "
                                         r"core; use --cost instructions$"):
        cost_unit("cycles", 25e6, None, "qemu-cortex-m3")
    with pytest.raises(UsageError, match=r"^--cost cycles: platform host has no timing model of its core; use no "
                                         r"--cost \(its costs are seconds\)$"):
        cost_unit("cycles", None, None, "host")
    with pytest.raises(UsageError, match="^--cost instructions: platform host has no instruction-counting clock"):
        cost_unit("instructions", None, None, "host")
    with pytest.raises(UsageError, match="unknown cost 'joules'"):
        cost_unit("joules", 25e6, "m4", "qemu-cortex-m4")


def test_cycles_are_read_from_the_time_evaluator(small_model: Path) -> None:
    task = dense_task(small_model)
    points = [task.space.default, *[p for p in task.space.points() if p != task.space.default][:2]]
    m = Measurer(TimedHost(), seed=0)
    assert m.unit == "cycles_est" and m.timing_model == "m4"
    results = list(m.measure(task, points))
    assert len(results) == 3 and all(r.ok and r.unit == "cycles_est" for r in results)
    # The estimate (7 cycles per "instruction" + 1000), not the instruction clock: rounded, > 1000.
    assert all(r.cost == int(r.cost) and r.cost > 1000 for r in results)
    # Instructions on the same platform when asked for.
    m = Measurer(TimedHost(), seed=0, cost="instructions")
    (insn,) = list(m.measure(task, points[:1]))
    assert insn.unit == "instructions" and insn.cost < results[0].cost
    # Every record holds the footprints besides the cost.
    assert all(r.weights is not None and r.weights > 0 and r.scratch is not None and r.code is not None
               for r in results)


@pytest.mark.parametrize("estimate", [lambda secs: None, lambda secs: [], lambda secs: [float("nan")] * len(secs),
                                      lambda secs: [0.0] * len(secs)],
                         ids=["none", "empty", "nan", "zero"])
def test_a_timing_model_that_gives_no_estimate_stops_the_tuning(small_model: Path, estimate: Any,
                                                                 tmp_path: Path) -> None:
    task = dense_task(small_model)
    log = tmp_path / "log.jsonl"
    with pytest.raises(PlatformError, match=r"platform timed-host: the time evaluator of tvmgen_c0_fused_dense gave "
                                            r"no estimated cycles .*timing model m4 is off or failed\): tune with "
                                            r"--cost instructions"):
        tune(small_model, log, trials=1, only=[task.key], measurer=Measurer(TimedHost(estimate), seed=0))
    assert tlog.read(log) == []  # nothing measured, nothing logged


def test_tune_on_a_timed_platform_logs_cycles_and_measures_other_units_again(small_model: Path,
                                                                             tmp_path: Path) -> None:
    task = dense_task(small_model)
    log = tmp_path / "log.jsonl"
    first = tune(small_model, log, trials=2, batch=2, only=[task.key], measurer=Measurer(TimedHost(), seed=0,
                                                                                        cost="instructions"))
    assert first.unit == "instructions" and first.measured == 2
    lines: list[str] = []
    again = tune(small_model, log, trials=2, batch=2, only=[task.key], progress=lines.append,
                 measurer=Measurer(TimedHost(), seed=0))
    assert again.unit == "cycles_est" and again.measured == 2 and again.resumed == 0  # not compared: measured again
    assert any("costs in cycles_est" in x for x in lines) and any(" cyc" in x for x in lines if x.startswith("task"))
    recs = tlog.read(log)
    assert [r.unit for r in recs] == ["instructions"] * 2 + ["cycles_est"] * 2
    (s,) = again.summaries
    assert s.unit == "cycles_est" and s.default is not None and s.default.unit == "cycles_est"
    assert tune(small_model, log, trials=2, batch=2, only=[task.key],
                measurer=Measurer(TimedHost(), seed=0)).resumed == 2


@pytest.mark.parametrize(("argv", "message"), [
    (["--cost", "cycles"], "--cost cycles: platform host has no timing model of its core"),
    (["--cost", "instructions"], "--cost instructions: platform host has no instruction-counting clock"),
    (["--cost", "joules"], "argument --cost: invalid choice: 'joules'"),
])
def test_a_cost_the_platform_cannot_measure_is_one_line_and_exit_2(small_model: Path, tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture, argv: list[str],
                                                                   message: str) -> None:
    rc = main(["tune", str(small_model), "-o", str(tmp_path / "log.jsonl"), *argv])
    err = capsys.readouterr().err
    assert rc == EXIT_USAGE and message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "log.jsonl").exists()


def test_the_summary_picks_the_records_of_the_cost_asked_for(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    task = "conv2d:0123456789abcdef"

    def rec(cost: float, unit: str, default: bool = False, **point: int) -> tlog.Record:
        return tlog.Record(task, "cortex-m4", point or {"a": 0}, cost, unit, None, "0.1.0", {}, "", default)

    log = tmp_path / "log.jsonl"
    tlog.append(log, [rec(1000.0, "instructions", True), rec(500.0, "instructions", a=1),
                      rec(1500.0, "cycles_est", True), rec(1200.0, "cycles_est", a=1)])
    assert main(["tune", "--summary", str(log), "--cost", "instructions"]) == 0
    out = capsys.readouterr().out
    assert "1.0 k insn" in out and "0.500" in out and "cyc" not in out
    assert main(["tune", "--summary", str(log)]) == 0  # the latest campaign's unit
    out = capsys.readouterr().out
    assert "1.5 k cyc" in out and "1.2 k cyc" in out and "0.800" in out and "insn" not in out


def test_cycles_are_formatted_as_cycles() -> None:
    assert format_cost(1_234_567.0, "cycles_est") == "1.235 M cyc"
    assert format_cost(5_500.0, "cycles_est") == "5.5 k cyc"
    assert format_cost(999.0, "cycles_est") == "999 cyc"
    assert format_cost(1_234_567.0, "instructions") == "1.235 M insn"


class _Fixed:
    """A measurer without a device, for the driver: fixed costs in `unit`."""

    target = "host"
    platform_name = "fixed"

    def __init__(self, unit: str) -> None:
        self.unit = unit
        self.stats = {"firmwares": 0, "restarts": 0, "build_failures": 0}

    def measure(self, task: Task, points: Sequence[dict]) -> Iterator[Measurement]:
        for i, p in enumerate(points):
            yield Measurement(dict(p), 100.0 + i, self.unit, None, 10, 20, 30)


def test_the_driver_records_the_footprints_it_is_given(small_model: Path, tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    tune(small_model, log, trials=2, batch=2, measurer=_Fixed("cycles_est"))  # type: ignore[arg-type]
    recs = tlog.read(log)
    assert recs and all((r.unit, r.code, r.weights, r.scratch) == ("cycles_est", 10, 20, 30) for r in recs)


def test_a_cost_another_measurer_cannot_give_is_refused(small_model: Path, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="cost 'cycles': the measurer given measures instructions"):
        tune(small_model, tmp_path / "log.jsonl", cost="cycles", measurer=_Fixed("instructions"))  # type: ignore[arg-type]
    assert not (tmp_path / "log.jsonl").exists()
