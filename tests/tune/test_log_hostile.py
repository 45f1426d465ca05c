"""Hostile tuning logs (issue 19): a file that is not ours is never truncated or rewritten, every record is
checked against the schema (applied or refused with a reason, never a traceback), one measurement per point
and one default per task, a log of another model says so, the progress lines' best is the table's, and
nothing from a log reaches the terminal unescaped."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from utvm.cli import EXIT_OK, EXIT_USAGE, main
from utvm.support.models import models_dir
from utvm.tune import log as tlog
from utvm.tune.driver import format_summary, summary_of_log, tune
from utvm.tune.log import Record, TuningLogError
from utvm.tune.measure import Measurement
from utvm.tune.strategy import point_key
from utvm.tune.tasks import Task, extract_tasks

HELLO = models_dir() / "tflm" / "hello_world_int8.tflite"
TASK = "dense:0123456789abcdef"
ESCAPES = ("\x1b", "\x07", "\r", "\u202e", "\u2028", "\x9b")


def rec(cost: float | None = 100.0, error: str | None = None, default: bool = False, task: str = TASK,
        target: str = "host", code: int | None = None, unit: str = "seconds", **schedule: Any) -> Record:
    return Record(task, target, dict(schedule or {"px_block": 1}), cost, unit, error, "0.1.0",
                  {"op": task.partition(":")[0], "inputs": [{"shape": [1, 4], "dtype": "int8"}], "outputs": []}, "t",
                  default, "host", code)


def line(**changes: Any) -> bytes:
    return json.dumps({**rec().to_json(), **changes}).encode()


def cli(capsys: pytest.CaptureFixture, *argv: str) -> tuple[int, str, list[str]]:
    rc = main(list(argv))
    cap = capsys.readouterr()
    return rc, cap.out, cap.err.splitlines()


def assert_inert(text: str) -> None:
    """Nothing a terminal would act on: no control, bidi or separator character but the line breaks."""
    for ch in ESCAPES:
        assert ch not in text, (ch, text)


# --- data loss: a file that is not a tuning log is never truncated or rewritten ----------------------------
NOT_LOGS = {
    "text without a newline": b"important notes, no newline",
    "text": b"line one\nline two\n",
    "a model": HELLO.read_bytes(),
    "json, not records": b'{"a": 1}\n',
    "a log, then text": line() + b"\n" + b"my own notes",
    "a log, then a line that is no record": line() + b"\n" + line(cost=-1.0) + b"\n",
    "text, then what looks like a torn record": b"notes\n" + b'{"code": 12, "co',
    "a record's first bytes alone, then text": b'{"code": \nnotes\n',
}


@pytest.mark.parametrize("content", list(NOT_LOGS.values()), ids=list(NOT_LOGS))
def test_tune_never_writes_to_a_file_that_is_not_a_tuning_log(content: bytes, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "precious.txt"
    out.write_bytes(content)
    rc, stdout, err = cli(capsys, "tune", str(HELLO), "-o", str(out), "-q")
    assert rc == EXIT_USAGE and stdout == ""
    assert len(err) == 1 and err[0].startswith("utvm tune: error: tuning log ")
    assert "refusing to write to it (the file is left as it is)" in err[0]
    assert out.read_bytes() == content
    with pytest.raises(TuningLogError, match="not a tuning log|line"):  # the API refuses too
        tlog.append(out, [rec()])
    assert out.read_bytes() == content


def test_only_a_torn_last_record_of_a_real_log_is_repaired(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    whole = line(schedule={"px_block": 1}) + b"\n"
    torn = json.dumps(rec(px_block=2).to_json(), sort_keys=True).encode()[:30]  # a crash mid-write
    assert torn.startswith(b'{"code": ')
    log.write_bytes(whole + torn)
    with pytest.warns(UserWarning, match="line 2: an incomplete last record is skipped"):
        assert tlog.read(log) == [rec(px_block=1)]
    with pytest.warns(UserWarning, match="incomplete last record"):
        tlog.append(log, [rec(px_block=4)])
    assert log.read_bytes().startswith(whole)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert tlog.read(log) == [rec(px_block=1), rec(px_block=4)]
    # A crash while the first record was written: the fragment alone is ours too.
    first = tmp_path / "first.jsonl"
    first.write_bytes(torn)
    with pytest.warns(UserWarning, match="incomplete last record"):
        tlog.append(first, [rec(px_block=4)])
    assert tlog.read(first) == [rec(px_block=4)]


def test_each_append_checks_what_was_added_since_the_last(tmp_path: Path) -> None:
    """A file that stops being a log between two appends is refused and left as it is; one rewritten in place
    (same inode, same size up to the checked end) is checked again from its start."""
    log = tmp_path / "log.jsonl"
    tlog.append(log, [rec(px_block=1)])
    first = log.read_bytes()
    tlog.append(log, [rec(px_block=2)])  # checks line 1: the next append starts after it
    with log.open("ab") as f:
        f.write(b"my notes\n")
    before = log.read_bytes()
    with pytest.raises(TuningLogError, match=r"line 3: not a JSON record .*refusing to write to it"):
        tlog.append(log, [rec(px_block=4)])
    assert log.read_bytes() == before
    rewritten = b"x" * (len(first) - 1) + b"\n" + before[len(first):before.rfind(b"my notes")]
    log.write_bytes(rewritten)
    with pytest.raises(TuningLogError, match=r"line 1: not a JSON record"):
        tlog.append(log, [rec(px_block=4)])
    assert log.read_bytes() == rewritten


def test_an_empty_file_is_a_log(tmp_path: Path) -> None:
    log = tmp_path / "empty.jsonl"
    log.write_bytes(b"")
    tlog.append(log, [rec()])
    assert tlog.read(log) == [rec()]


# --- the schema: every line is a record or refused with a reason ------------------------------------------
REFUSED = {
    "cost 0": (line(cost=0), "'cost' must be > 0"),
    "cost < 0": (line(cost=-3.5), "'cost' must be > 0"),
    "cost overflows to inf": (line().replace(b'"cost": 100.0', b'"cost": 1e999'), "'cost' must be > 0, finite"),
    "cost subnormal": (line(cost=1e-320), "'cost' must be > 0, finite, from"),
    "cost a bool": (line(cost=True), "'cost' must be a number"),
    "cost a huge integer": (line(cost=10**30), "'cost' must be > 0, finite, from"),
    "cost of a million digits": (line().replace(b'"cost": 100.0', b'"cost": ' + b"7" * 10**6), "digits"),
    "NaN": (line().replace(b'"cost": 100.0', b'"cost": NaN'), "NaN is not JSON"),
    "Infinity": (line().replace(b'"cost": 100.0', b'"cost": -Infinity'), "Infinity is not JSON"),
    "code a float": (line(code=1.0), "'code' must be a byte count"),
    "code a bool": (line(code=False), "'code' must be a byte count"),
    "code huge": (line(code=2**40), "'code' must be a byte count"),
    "code negative": (line(code=-1), "'code' must be a byte count"),
    "weights negative": (line(weights=-1), "'weights' must be a byte count"),
    "weights a bool": (line(weights=True), "'weights' must be a byte count"),
    "weights huge": (line(weights=2**31), "'weights' must be a byte count"),
    "weights a float": (line(weights=1024.0), "'weights' must be a byte count"),
    "weights a string": (line(weights="1024"), "'weights' must be a byte count"),
    "weights an object": (line(weights={"bytes": 1}), "'weights' must be a byte count"),
    "scratch negative": (line(scratch=-16), "'scratch' must be a byte count"),
    "scratch a bool": (line(scratch=False), "'scratch' must be a byte count"),
    "scratch huge": (line(scratch=10**12), "'scratch' must be a byte count"),
    "scratch a float": (line(scratch=0.5), "'scratch' must be a byte count"),
    "scratch a list": (line(scratch=[64]), "'scratch' must be a byte count"),
    "unit cycles": (line(unit="cycles"), "'unit' 'cycles' is not one of instructions, cycles_est, seconds"),
    "task an object": (line(task={"op": "dense"}), "'task' and 'target' must be non-empty strings"),
    "task with an escape": (line(task="dense:0123456789abcdef\x1b[2J"), "is not a task key"),
    "target with a newline": (line(target="host\nutvm compile: error: forged"), "is not a target name"),
    "schedule nested": (line(schedule={"px_block": {"a": 1}}), "'schedule' must be an object of int/str/bool"),
    "schedule float": (line(schedule={"px_block": 2.0}), "'schedule' must be an object of int/str/bool"),
    "schedule a list": (line(schedule=[1, 2]), "'schedule' must be an object"),
    "knob name with an escape": (line(schedule={"\x1b[31m": 1}), "is not an identifier"),
    "knob value huge": (line(schedule={"px_block": 2**62}), "out of range"),
    "unit": (line(unit=["seconds"]), "'unit'"),
    "error an object": (line(error={"a": 1}), "'error' must be a string"),
    "error too long": (line(error="x" * (tlog.MAX_ERROR_CHARS + 1)), "'error' is longer than"),
    "utvm an object": (line(utvm={"v": 1}), "'utvm' must be a string"),
    "time a number": (line(time=12), "'time' must be a string"),
    "platform a list": (line(platform=["host"]), "'platform' must be a string"),
    "default a number": (line(default=1), "'default' must be true or false"),
    "workload a list": (line(workload=[1]), "'workload' must be an object"),
    "workload inputs a number": (line(workload={"op": "dense", "inputs": 3}), "'workload.inputs' must be an array"),
    "workload shape a string": (line(workload={"inputs": [{"shape": "1x4"}]}), "a shape must be an array"),
    "workload shape of bools": (line(workload={"inputs": [{"shape": [True]}]}), "a shape must be an array"),
    "workload attrs a list": (line(workload={"attrs": [1]}), "'workload.attrs' must be an object"),
    "workload op a number": (line(workload={"op": 7}), "'workload.op' must be a string"),
    "deep nesting": (b"[" * 100_000 + b"]" * 100_000, "nested more than"),
    "nesting past the limit": (line(workload={"attrs": {"a": json.loads("[" * 20 + "]" * 20)}}), "nested more than"),
    "a key twice": (line()[:-1] + b', "cost": -1}', "appears twice"),
    "not UTF-8": (line()[:-1] + b', "x": "\xff\xfe"}', "not UTF-8"),
    "a line too long": (line(extra="x" * tlog.MAX_RECORD_BYTES), "a record has at most"),
    "a number": (b"12", "a record is a JSON object"),
    "a string": (b'"task"', "a record is a JSON object"),
}


@pytest.mark.parametrize(("raw", "reason"), list(REFUSED.values()), ids=list(REFUSED))
def test_a_record_outside_the_schema_is_refused_with_its_reason(raw: bytes, reason: str, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(TuningLogError, match="^where: .*" + re.escape(reason)):
        tlog.parse_line(raw, "where")
    # In a log, the line is refused and the rest applied; `tune --summary` says so on one line.
    log = tmp_path / "log.jsonl"
    log.write_bytes(line(default=True) + b"\n" + raw + b"\n" + line(schedule={"px_block": 2}, cost=50.0) + b"\n")
    contents = tlog.load(log)
    assert [r.schedule for r in contents.records] == [{"px_block": 1}, {"px_block": 2}]
    assert [r.line for r in contents.refused] == [2] and reason in contents.refused[0].reason
    rc, out, err = cli(capsys, "tune", "--summary", str(log))
    assert rc == EXIT_OK and "0.500" in out
    assert len(err) == 1 and err[0].startswith(f"utvm tune: warning: tuning log {log}, line 2: record refused: ")
    assert_inert(out + "\n".join(err))


@pytest.mark.parametrize(("key", "value"), [("weights", -1), ("weights", True), ("weights", 2**31),
                                          ("weights", "12"), ("scratch", -1), ("scratch", False),
                                          ("scratch", 2**40), ("scratch", 1.5)])
def test_a_bad_footprint_is_one_line_naming_the_field_and_the_line(key: str, value: Any, tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture) -> None:
    log = tmp_path / "log.jsonl"
    log.write_bytes(line(default=True) + b"\n" + line(schedule={"px_block": 2}, **{key: value}) + b"\n")
    with pytest.raises(TuningLogError, match=f"^tuning log .*, line 2: '{key}' must be a byte count from 0 to "):
        tlog.read(log)  # appending is strict: the whole file is refused, naming the line
    rc, _out, err = cli(capsys, "tune", "--summary", str(log))
    assert rc == EXIT_OK  # applying skips the line, with one warning naming it and the field
    assert len(err) == 1 and f"line 2: record refused: '{key}' must be a byte count" in err[0]
    assert_inert(err[0])
    rc, _out, err = cli(capsys, "compile", str(HELLO), "-o", str(tmp_path / "m.tar"), "-q", "--tuning-log", str(log))
    assert rc == EXIT_OK and sum(f"line 2: record refused: '{key}'" in x for x in err) == 1


def test_a_log_written_before_weights_and_scratch_were_recorded_still_loads(tmp_path: Path) -> None:
    old = {k: v for k, v in rec(code=1200).to_json().items() if k not in ("weights", "scratch")}
    older = {k: v for k, v in old.items() if k != "code"}
    log = tmp_path / "old.jsonl"
    log.write_text(json.dumps(old) + "\n" + json.dumps({**older, "schedule": {"px_block": 2}}) + "\n")
    first, second = tlog.read(log)
    assert (first.code, first.weights, first.scratch) == (1200, None, None)
    assert (second.code, second.weights, second.scratch) == (None, None, None)
    tlog.append(log, [dataclasses.replace(rec(px_block=4), weights=64, scratch=0)])  # a new record beside them
    assert [(r.weights, r.scratch) for r in tlog.read(log)] == [(None, None), (None, None), (64, 0)]


def test_a_file_with_no_record_is_not_a_tuning_log(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    log = tmp_path / "log.jsonl"
    log.write_bytes(line(cost=-1) + b"\n")
    rc, out, err = cli(capsys, "tune", "--summary", str(log))
    assert rc == EXIT_USAGE and out == "" and len(err) == 1
    assert "not a tuning log: no line is a record (line 1: 'cost' must be > 0" in err[0]
    rc, out, err = cli(capsys, "compile", str(HELLO), "-o", str(tmp_path / "m.tar"), "-q", "--tuning-log", str(HELLO))
    assert rc == EXIT_USAGE and len(err) == 1 and "not a tuning log" in err[0]
    assert not (tmp_path / "m.tar").exists()


def test_many_refused_lines_are_reported_in_a_bounded_number_of_lines(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture) -> None:
    log = tmp_path / "log.jsonl"
    log.write_bytes(line(default=True) + b"\n" + b"garbage\n" * 1000)
    rc, _out, err = cli(capsys, "tune", "--summary", str(log))
    assert rc == EXIT_OK and len(err) == tlog.MAX_REPORTED + 1
    assert f"{1000 - tlog.MAX_REPORTED} more line(s) refused" in err[-1]


def test_a_large_file_that_is_not_a_log_is_not_read_to_its_end(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    big = tmp_path / "big.jsonl"
    big.write_bytes(b"\n" * 1_000_000 + b"x\n" * 200_000 + line() + b"\n")
    with pytest.raises(TuningLogError, match=r"not a tuning log: 100 lines are not records \(line 1000001: "):
        tlog.load(big)
    big.write_bytes(line() + b"\n" + b"x\n" * 20_000)
    with pytest.raises(TuningLogError, match="not a tuning log: 10,000 lines are not records"):
        tlog.load(big)
    monkeypatch.setattr(tlog, "MAX_LOG_LINES", 10)
    big.write_bytes((line() + b"\n\n") * 11)
    with pytest.raises(TuningLogError, match=r"more than 10 lines \(line 21\)"):
        tlog.read(big)


def test_a_log_that_is_not_a_regular_file_is_refused(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path in (fifo, tmp_path, Path("/dev/zero")):
        with pytest.raises(TuningLogError, match="not a regular file"):
            tlog.load(path)
        with pytest.raises(TuningLogError, match="not a regular file"):
            tlog.best_schedules(path, "host")
    with pytest.raises(TuningLogError, match="no such file"):
        summary_of_log(tmp_path / "none.jsonl")


# --- one measurement per point, one default per task --------------------------------------------------
def test_a_point_measured_twice_is_one_measurement(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """Two tuners on one log measure the default twice (1.0 s, then 0.36 s): the summary must not call the
    default 0.36x itself."""
    log = tmp_path / "log.jsonl"
    tlog.append(log, [rec(1.0, default=True), rec(0.5, px_block=2)])
    tlog.append(log, [rec(0.36, default=True), rec(0.2, px_block=2), rec(0.9, px_block=4)])
    (s,) = tlog.summarize(tlog.read(log))
    assert s.default.cost == 1.0 and s.best.cost == 0.5 and s.ratio == pytest.approx(0.5)
    assert s.trials == 3
    rc, out, err = cli(capsys, "tune", "--summary", str(log))
    assert rc == EXIT_OK and "0.500" in out and "0.360" not in out
    assert len(err) == 1 and "2 record(s) repeat a point measured earlier (line 3 repeats line 1)" in err[0]
    # A point that failed once and was measured again by the other tuner counts by its good record.
    flaky = [rec(None, error="the device hung", default=True), rec(0.36, default=True)]
    (s,) = tlog.summarize(flaky)
    assert s.default is not None and s.default.cost == 0.36 and s.errors == 0 and s.ratio == 1.0


def test_one_default_per_task(tmp_path: Path) -> None:
    """A second record marked default (another schedule: a newer kernel's default) is an ordinary candidate;
    the first is the baseline of the summary and of the code budget."""
    first = rec(1.0, default=True, code=1000, px_block=1)
    second = rec(0.5, default=True, code=5000, px_block=2)
    lean = rec(0.8, code=1050, px_block=4)
    (s,) = tlog.summarize([first, second, lean])
    assert s.default == first and s.best == lean and s.ratio == pytest.approx(0.8)
    assert tlog.best_records([first, second, lean])[TASK] == lean  # 5000 bytes are over 1000 * 1.1
    assert tlog.best_records([first, second, lean], max_code_growth=None)[TASK].schedule == {"px_block": 2}


# --- a log of another model ----------------------------------------------------------------------------
def test_a_log_of_another_model_says_that_nothing_applies(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    log = tmp_path / "other.jsonl"
    tlog.append(log, [rec(task="conv2d:0123456789abcdef"), rec(task="dense:00000000000000ff")])
    rc, _out, err = cli(capsys, "compile", str(HELLO), "-o", str(tmp_path / "m.tar"), "--tuning-log", str(log))
    assert rc == EXIT_OK
    warn = [x for x in err if x.startswith("utvm compile: warning:")]
    assert len(warn) == 1 and "has no usable record for any of the 3 task(s) of this model on host" in warn[0]
    assert any("0 of 3 task(s) of this model have usable records for host; the log's 2 other task(s)" in x for x in err)
    # And a log that has some: the count of this model's tasks, not of the log's.
    tasks = extract_tasks(HELLO, "host")
    t = tasks[0]
    tlog.append(log, [Record(t.key, "host", dict(t.space.default), 1.0, "seconds", None, "0.1.0", {}, "", True)])
    rc, _out, err = cli(capsys, "compile", str(HELLO), "-o", str(tmp_path / "m.tar"), "--tuning-log", str(log))
    assert rc == EXIT_OK and not any("warning" in x for x in err)
    assert any("1 of 3 task(s) of this model have usable records for host" in x for x in err)


# --- the progress lines' best is the table's (the code budget) ------------------------------------------
class FakeMeasurer:
    """A measurer without a device: each schedule's cost and code size from its knobs (deterministic);
    the schedules that run fastest take the most code."""

    target = "host"
    platform_name = "fake\x1b[2J"
    unit = "seconds"

    def __init__(self) -> None:
        self.stats = {"firmwares": 0, "restarts": 0, "build_failures": 0}

    def measure(self, task: Task, points: Sequence[dict]) -> Iterator[Measurement]:
        for p in points:
            rank = sum(len(str(v)) * (i + 1) for i, v in enumerate(p.values())) % 17
            if point_key(p) == point_key(task.space.default):
                rank = 8
            yield Measurement(dict(p), 1e-3 * (1 + rank), "seconds", None, 1000 + 400 * (17 - rank))


def test_progress_best_is_the_best_within_the_code_budget(tmp_path: Path) -> None:
    lines: list[str] = []
    log = tmp_path / "log.jsonl"
    result = tune(HELLO, log, "host", trials=12, batch=4, strategy="grid", progress=lines.append,
                  measurer=FakeMeasurer())  # type: ignore[arg-type]
    for s in result.summaries:
        last = [x for x in lines if x.startswith("task ") and s.description in x][-1]
        assert f"= {s.ratio:.3f}x the default" in last, (last, s)
    assert any(s.ratio is not None and s.ratio > 0.2 for s in result.summaries)  # the fastest were too big
    unlimited = tune(HELLO, log, "host", trials=12, batch=4, strategy="grid", measurer=FakeMeasurer(),  # type: ignore[arg-type]
                     max_code_growth=None)
    assert all(u.ratio <= s.ratio for u, s in zip(unlimited.summaries, result.summaries, strict=True))
    assert any(u.ratio < s.ratio for u, s in zip(unlimited.summaries, result.summaries, strict=True))
    assert all("\x1b" not in x for x in lines)


def test_a_measurement_the_reader_would_refuse_is_logged_as_an_error(tmp_path: Path) -> None:
    class Zero(FakeMeasurer):
        def measure(self, task: Task, points: Sequence[dict]) -> Iterator[Measurement]:
            for i, p in enumerate(points):  # a code size out of range, or a bool, is unknown
                yield Measurement(dict(p), 0.0, "seconds", None, (-5, True)[i % 2])

    log = tmp_path / "log.jsonl"
    tune(HELLO, log, "host", trials=2, batch=2, measurer=Zero())  # type: ignore[arg-type]
    recs = tlog.read(log)
    assert recs and all(r.error == "the measurement gave no usable cost (0.0)" and r.code is None for r in recs)


# --- nothing from a log reaches the terminal raw ----------------------------------------------------------
def test_the_summary_escapes_everything_from_the_log(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    evil = "\x1b[2J\x1b]0;title\x07\r\u202eforged row\u2028\x9b31m"
    log = tmp_path / "log.jsonl"
    wl = {"op": "dense", "inputs": [{"shape": [1, 4], "dtype": "i8\x1b[2J\u202e"}], "attrs": {"strides": evil}}
    tlog.append(log, [dataclasses.replace(rec(1.0, default=True), workload=wl, platform=evil),
                      dataclasses.replace(rec(0.5, algo=evil), workload=wl, error=None)])
    rc, out, err = cli(capsys, "tune", "--summary", str(log))
    assert rc == EXIT_OK and not err
    assert_inert(out)
    assert len(out.splitlines()) == 4  # header, rule, one row, the geometric mean: no forged row
    assert "\\x1b[2J" in out
    # A summary built from the API is escaped as well.
    assert_inert(format_summary(tlog.summarize(tlog.read(log), lambda w: str(w["op"]))))


def test_a_workload_of_another_operator_than_its_task_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    # The summary names a task by its workload: a record may not make a dense task's row read "conv2d".
    log = tmp_path / "log.jsonl"
    forged = {"op": "conv2d", "inputs": [{"shape": [1, 49, 10, 64], "dtype": "int8"}], "outputs": []}
    log.write_bytes(line(default=True) + b"\n" + line(cost=0.5, workload=forged) + b"\n")
    rc, out, err = cli(capsys, "tune", "--summary", str(log))
    assert rc == EXIT_OK and len(err) == 1 and "'workload.op' 'conv2d' is not the operator of task" in err[0]
    assert "conv2d" not in out


def test_a_refused_line_is_reported_escaped(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    log = tmp_path / "log.jsonl"
    log.write_bytes(line(default=True) + b"\n" + line(cost="\x1b[2J\nutvm tune: error: forged\u202e") + b"\n")
    rc, _out, err = cli(capsys, "tune", "--summary", str(log))
    assert rc == EXIT_OK and len(err) == 1 and "'cost' must be a number or null" in err[0]
    assert_inert(err[0])


# --- property: any line is a record or refused; any file is read or refused; nothing is ever lost ---------
_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12)


@st.composite
def _mutated_record(draw: st.DrawFn) -> bytes:
    d = rec(draw(st.floats(1e-9, 1e9)), default=draw(st.booleans()), px_block=draw(st.integers(1, 8))).to_json()
    for _ in range(draw(st.integers(0, 3))):
        key = draw(st.sampled_from([*d, "extra"]))
        if draw(st.booleans()):
            d.pop(key, None)
        else:
            d[key] = draw(_json)
    raw = json.dumps(d, allow_nan=True).encode()
    if draw(st.booleans()):
        cut = draw(st.integers(0, len(raw)))
        raw = raw[:cut] + draw(st.binary(max_size=6)) + raw[cut:]
    return raw


_lines = st.one_of(
    _mutated_record(),
    _json.map(lambda v: json.dumps(v, allow_nan=True).encode()),
    st.binary(max_size=40).map(lambda b: b.replace(b"\n", b" ")),
    st.sampled_from([b"[" * 5000, b"{\"a\":" * 3000, b"9" * 5000, b"NaN", b"Infinity", b"-Infinity", b"1e400",
                     b'{"code": ', b"\xff\xfe", b"\x1b[2J", b"{}"]),
)


def _check_line(raw: bytes) -> Record | None:
    try:
        r = tlog.parse_line(raw, "w")
    except TuningLogError as exc:
        assert str(exc).startswith("w: ") and "\n" not in str(exc)
        return None
    assert tlog.parse_line(tlog.encode(r)) == r  # what is read back is what utvm writes
    assert r.cost is None or (math.isfinite(r.cost) and r.cost > 0)
    return r


@settings(max_examples=300)
@given(_lines)
def test_property_a_line_is_a_record_or_refused(raw: bytes) -> None:
    _check_line(raw)


@settings(max_examples=150)
@given(st.lists(_lines, max_size=6), st.booleans())
def test_property_a_file_is_read_or_refused_and_never_lost(tmp_path_factory: pytest.TempPathFactory,
                                                           lines: list[bytes], newline: bool) -> None:
    path = tmp_path_factory.mktemp("prop") / "log.jsonl"
    data = b"\n".join(lines) + (b"\n" if newline and lines else b"")
    path.write_bytes(data)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            contents = tlog.load(path)
        except TuningLogError as exc:
            assert "not a tuning log" in str(exc)
        else:
            assert len(contents.records) + len(contents.refused) == sum(1 for x in data.split(b"\n") if x.strip())
            for s in tlog.summarize(contents.records):
                assert s.ratio is None or (math.isfinite(s.ratio) and s.ratio > 0)
            assert_inert(format_summary(tlog.summarize(contents.records)))
        try:
            tlog.append(path, [rec(px_block=99)])
        except TuningLogError:
            assert path.read_bytes() == data  # refused: left exactly as it was
        else:
            after = path.read_bytes()
            kept = data if data.endswith(b"\n") or not data else data[:data.rfind(b"\n") + 1]
            assert after.startswith(kept)  # at most a torn last line was removed
            if not after.startswith(data):
                assert tlog._torn(data[len(kept):])
            assert tlog.read(path)[-1] == rec(px_block=99)


@settings(max_examples=6,  # (capsys is read after each example: a function-scoped fixture is fine here)
          suppress_health_check=[*settings.default.suppress_health_check, HealthCheck.function_scoped_fixture])
@given(st.lists(_lines, min_size=1, max_size=4))
def test_property_the_cli_applies_or_refuses_a_random_log(tmp_path_factory: pytest.TempPathFactory,
                                                          capsys: pytest.CaptureFixture, lines: list[bytes]) -> None:
    d = tmp_path_factory.mktemp("cli")
    log = d / "log.jsonl"
    log.write_bytes(b"\n".join([line(default=True), *lines]) + b"\n")
    for argv, command in ((["tune", "--summary", str(log)], "tune"),
                          (["compile", str(HELLO), "-q", "-o", str(d / "m.tar"), "--tuning-log", str(log)], "compile")):
        capsys.readouterr()
        rc, out, err = cli(capsys, *argv)
        assert rc in (EXIT_OK, EXIT_USAGE)
        assert all(x.startswith(f"utvm {command}: ") for x in err), err
        if rc != EXIT_OK:
            assert len(err) == 1 and "error" in err[0]
        assert_inert(out + "\n".join(err))
