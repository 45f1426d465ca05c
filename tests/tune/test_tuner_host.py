"""The tuner end to end on the host platform (fast): the log, resuming, wrong / unbuildable / hanging /
crashing candidates, and applying the log with --tuning-log."""

from __future__ import annotations

import json
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest

from utvm.cli import main
from utvm.compiler import compile
from utvm.frontend import load
from utvm.tune import log as tlog
from utvm.tune.driver import tune
from utvm.tune.measure import Measurer
from utvm.tune.tasks import extract_tasks

from .conftest import patch_kernel


def records_of(log: Path, task: str | None = None) -> list[tlog.Record]:
    return [r for r in tlog.read(log) if task is None or r.task == task]


def first_task(model: Path) -> tuple[str, list[dict]]:
    (task, *_rest) = extract_tasks(model, "host")
    return task.key, list(task.space.points())


def test_tune_writes_one_record_per_candidate_and_resumes(small_model: Path, tmp_path: Path) -> None:
    log = tmp_path / "small.jsonl"
    lines: list[str] = []
    r = tune(small_model, log, "host", trials=4, batch=3, progress=lines.append)
    tasks = extract_tasks(small_model, "host")
    recs = tlog.read(log)
    assert r.measured == 12 and r.resumed == 0 and len(recs) == 12
    for t in tasks:
        mine = [x for x in recs if x.task == t.key]
        assert len(mine) == 4 and len({x.schedule_key() for x in mine}) == 4
        assert mine[0].default and mine[0].schedule == t.space.default  # the baseline first
        assert all(x.ok and x.unit == "seconds" and x.cost > 0 and x.platform == "host" for x in mine)
        assert mine[0].workload == dict(t.workload)
        for x in mine:  # the footprints besides the cost: what the compiled candidate asks for
            op = compile(t.graph, target="host", rounding=t.rounding, schedules={t.key: x.schedule}, passes=False,
                         task_counts={t.key: t.count}).operators[0]
            assert x.scratch == op.scratch_bytes and x.weights is not None and x.weights > 0 and x.code
    assert any(line.startswith("task 3/3 dense") and "4/4 trials" in line and "x the default" in line
               for line in lines)
    assert [s.task for s in r.summaries] == [t.key for t in tasks]

    before = log.read_bytes()
    again = tune(small_model, log, "host", trials=4, batch=3)
    assert again.measured == 0 and again.resumed == 12 and log.read_bytes() == before

    more = tune(small_model, log, "host", trials=6, batch=3)
    recs = tlog.read(log)
    assert more.measured == 6 and len(recs) == 18
    assert len({(x.task, x.schedule_key()) for x in recs}) == 18  # nothing measured twice


def test_a_wrong_candidate_is_logged_and_never_chosen(small_model: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    key, points = first_task(small_model)
    broken = points[1]  # the grid measures the default, then points[0], points[1], ...
    patch_kernel(monkeypatch, "conv2d", broken, "out0[0] = (int8_t)(out0[0] ^ 1);")
    log = tmp_path / "log.jsonl"
    tune(small_model, log, "host", trials=4, batch=4, strategy="grid", only=[key])
    recs = records_of(log, key)
    assert len(recs) == 4
    bad = [r for r in recs if r.schedule == broken]
    assert len(bad) == 1 and bad[0].cost is None
    assert bad[0].error.startswith("wrong output:") and "differs from the reference in 1 of 288" in bad[0].error
    assert sum(1 for r in recs if r.ok) == 3
    assert tlog.best_schedules(log, "host")[key] != broken


def test_a_candidate_that_fails_to_build_costs_only_itself(small_model: Path, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    key, points = first_task(small_model)
    patch_kernel(monkeypatch, "conv2d", points[2], "this is not C;")
    log = tmp_path / "log.jsonl"
    m = Measurer("host", seed=0)
    tune(small_model, log, "host", trials=5, batch=5, strategy="grid", only=[key], measurer=m)
    recs = records_of(log, key)
    bad = [r for r in recs if r.schedule == points[2]]
    assert len(bad) == 1 and bad[0].error.startswith("building the candidate failed:")
    assert sum(1 for r in recs if r.ok) == 4 and len(recs) == 5
    assert m.stats["build_failures"] == 1 and m.stats["firmwares"] == 1  # the rest in one firmware


def test_a_hanging_candidate_is_logged_and_the_device_restarted(small_model: Path, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    key, points = first_task(small_model)
    patch_kernel(monkeypatch, "conv2d", points[0], "{ volatile int spin = 1; while (spin) { } }")
    log = tmp_path / "log.jsonl"
    m = Measurer("host", timeout=2.0, seed=0)
    tune(small_model, log, "host", trials=4, batch=4, strategy="grid", only=[key], measurer=m)
    recs = records_of(log, key)
    hung = [r for r in recs if r.schedule == points[0]]
    assert len(hung) == 1 and hung[0].error.startswith("the device hung: no reply within 2 s")
    assert sum(1 for r in recs if r.ok) == 3 and m.stats["restarts"] == 1


def test_a_device_killed_mid_task_is_restarted_and_tuning_completes(small_model: Path, tmp_path: Path) -> None:
    key, _points = first_task(small_model)
    killed: list[int] = []

    def kill(session, index: int, schedule: dict) -> None:  # noqa: ANN001
        if index == 1 and not killed:
            killed.append(session.transport.proc.pid)
            session.transport.proc.kill()
            session.transport.proc.wait()

    log = tmp_path / "log.jsonl"
    m = Measurer("host", seed=0, on_candidate=kill)
    tune(small_model, log, "host", trials=5, batch=5, only=[key], measurer=m)
    recs = records_of(log, key)
    assert killed and len(recs) == 5 and m.stats["restarts"] == 1
    crashed = [r for r in recs if not r.ok]
    assert len(crashed) == 1 and crashed[0].error.startswith("the device crashed or reset")
    assert recs.index(crashed[0]) == 1 and all(r.ok for r in recs[2:])  # the batch went on after it


def test_ctrl_c_keeps_what_was_measured(small_model: Path, tmp_path: Path) -> None:
    key, _points = first_task(small_model)

    def interrupt(session, index: int, schedule: dict) -> None:  # noqa: ANN001
        if index == 2:
            raise KeyboardInterrupt

    log = tmp_path / "log.jsonl"
    with pytest.raises(KeyboardInterrupt):
        tune(small_model, log, "host", trials=4, batch=4, only=[key],
             measurer=Measurer("host", seed=0, on_candidate=interrupt))
    assert len(records_of(log, key)) == 2
    r = tune(small_model, log, "host", trials=4, batch=4, only=[key])
    assert r.resumed == 2 and r.measured == 2 and len(records_of(log, key)) == 4


def _operators(tar: Path) -> list[dict]:
    with tarfile.open(tar) as tf:
        meta = json.load(tf.extractfile("./metadata.json") if "./metadata.json" in tf.getnames()
                         else tf.extractfile("metadata.json"))
    return meta["modules"]["default"]["memory"]["functions"]["operator_functions"]


def _ops_c(tar: Path) -> str:
    with tarfile.open(tar) as tf:
        name = next(n for n in tf.getnames() if n.endswith("tvmgen_default_ops.c"))
        return tf.extractfile(name).read().decode()


def test_tuning_log_changes_the_generated_code(small_model: Path, tmp_path: Path,
                                               capsys: pytest.CaptureFixture) -> None:
    tasks = extract_tasks(small_model, "host")
    conv = tasks[0]
    chosen = next(p for p in conv.space.points() if p != conv.space.default)
    log = tmp_path / "hand.jsonl"
    mk: Callable[..., tlog.Record] = lambda point, cost, default=False: tlog.Record(  # noqa: E731
        conv.key, "host", point, cost, "seconds", None, "0.1.0", dict(conv.workload), "", default, "host")
    tlog.append(log, [mk(conv.space.default, 2e-6, True), mk(chosen, 1e-6)])
    plain, tuned = tmp_path / "plain.tar", tmp_path / "tuned.tar"
    assert main(["compile", str(small_model), "-o", str(plain), "-q"]) == 0
    assert main(["compile", str(small_model), "-o", str(tuned), "-q", "--tuning-log", str(log)]) == 0
    capsys.readouterr()
    ops = {op["task"]: op for op in _operators(tuned) if op["task"]}
    assert ops[conv.key]["schedule"] == chosen and ops[conv.key]["schedule_source"] == "given"
    assert all(op["schedule_source"] == "default" for k, op in ops.items() if k != conv.key)
    assert _ops_c(plain) != _ops_c(tuned)
    # The summary of that log.
    assert main(["tune", "--summary", str(log)]) == 0
    out = capsys.readouterr().out
    assert conv.description in out and "0.500" in out


def test_compiling_with_a_tuners_log_applies_its_best_records(small_model: Path, tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    tune(small_model, log, "host", trials=3, batch=3)
    best = tlog.best_schedules(log, "host")
    compiled = compile(load(small_model), target="host", schedules=best)
    for op in compiled.operators:
        if op.task:
            assert op.schedule == best[op.task] and op.schedule_source == "given"


def test_a_log_written_before_knobs_were_renamed_resumes_without_measuring_again(small_model: Path,
                                                                                   tmp_path: Path) -> None:
    """Records in the old point format (renamed knobs under their old names, a direct point naming the
    other branch's knobs too) count as measured: Space.normalize reads them as the space names them now."""
    log = tmp_path / "small.jsonl"
    tune(small_model, log, "host", trials=4, batch=4)
    spaces = {t.key: t.space for t in extract_tasks(small_model, "host")}
    old_lines = []
    renamed = 0
    for line in log.read_text().splitlines():
        d = json.loads(line)
        space = spaces[d["task"]]
        old_name = {new: old for old, new in space.legacy.items()}
        point = {old_name.get(k, k): v for k, v in d["schedule"].items()}
        renamed += point != d["schedule"]
        if point.get("algo") == "direct":  # old flat spaces named every knob; the other branch's are dropped
            point.update({k.name: k.values[0] for k in space.knobs if k.name not in point and k.name not in
                          space.branches.get("direct", ())})
        d["schedule"] = point
        old_lines.append(json.dumps(d))
    assert renamed, "the small model's spaces have no renamed knob: the test would prove nothing"
    log.write_text("\n".join(old_lines) + "\n")
    before = log.read_bytes()
    again = tune(small_model, log, "host", trials=4, batch=4)
    assert again.measured == 0 and again.resumed == 12 and log.read_bytes() == before
