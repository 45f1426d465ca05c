"""The tuning log: append and read, resume pairs, the best record, a cut-short last line, bad records."""

from __future__ import annotations

import dataclasses
import json
import warnings
from pathlib import Path

import pytest

from utvm.tune import log as tlog
from utvm.tune.log import Record, TuningLogError


def rec(task: str = "conv2d:0123456789abcdef", cost: float | None = 100.0, error: str | None = None,
        target: str = "cortex-m4", default: bool = False, **schedule: object) -> Record:
    return Record(task, target, dict(schedule or {"px_block": 1}), cost, "instructions", error, "0.1.0",
                  {"op": task.partition(":")[0], "inputs": [{"shape": [1, 4], "dtype": "int8"}], "outputs": []}, "t",
                  default, "qemu-cortex-m4")


def test_append_then_read_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "log.jsonl"
    rs = [rec(px_block=1, default=True), rec(cost=None, error="the device hung", px_block=2),
          rec(cost=50.0, px_block=4)]
    tlog.append(path, rs[:1])
    tlog.append(path, rs[1:])
    assert tlog.read(path) == rs
    lines = path.read_text().splitlines()
    assert len(lines) == 3 and all(json.loads(x)["task"] for x in lines)
    assert json.loads(lines[0])["default"] is True and json.loads(lines[0])["platform"] == "qemu-cortex-m4"


def test_a_missing_log_is_empty(tmp_path: Path) -> None:
    assert tlog.read(tmp_path / "none.jsonl") == []


def test_best_skips_errors_and_other_targets(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    tlog.append(path, [rec(cost=100.0, px_block=1), rec(cost=None, error="wrong output", px_block=2),
                       rec(cost=80.0, px_block=4), rec(cost=10.0, target="cortex-m3", px_block=1),
                       rec(task="dense:0000000000000000", cost=5.0, oc_block=2)])
    assert tlog.best_schedules(path, "cortex-m4") == {"conv2d:0123456789abcdef": {"px_block": 4},
                                                     "dense:0000000000000000": {"oc_block": 2}}
    assert tlog.best_schedules(path, "cortex-m3") == {"conv2d:0123456789abcdef": {"px_block": 1}}
    assert tlog.best_schedules(path, "host") == {}


def test_measured_pairs_cover_errors_too() -> None:
    pairs = tlog.measured([rec(px_block=1), rec(cost=None, error="x", px_block=2)])
    assert pairs == {("conv2d:0123456789abcdef", '{"px_block":1}'), ("conv2d:0123456789abcdef", '{"px_block":2}')}


def test_summarize_compares_with_the_default() -> None:
    rs = [rec(cost=200.0, default=True, px_block=1), rec(cost=150.0, px_block=2),
          rec(cost=None, error="wrong", px_block=4)]
    (s,) = tlog.summarize(rs, describe=lambda w: "my conv")
    assert s.description == "my conv" and s.trials == 3 and s.errors == 1
    assert s.default.cost == 200.0 and s.best.cost == 150.0 and s.ratio == pytest.approx(0.75)


def test_a_cut_short_last_line_is_skipped_then_removed_on_append(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    tlog.append(path, [rec(px_block=1), rec(px_block=2)])
    whole = path.read_bytes()
    path.write_bytes(whole[:-25])  # a crash while writing the second record
    with pytest.warns(UserWarning, match="line 2: an incomplete last record is skipped"):
        assert tlog.read(path) == [rec(px_block=1)]
    with pytest.warns(UserWarning, match="incomplete last record"):
        tlog.append(path, [rec(px_block=4)])  # resuming: the fragment goes, the log stays readable
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert tlog.read(path) == [rec(px_block=1), rec(px_block=4)]


def test_a_whole_last_record_without_its_newline_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    tlog.append(path, [rec(px_block=1)])
    path.write_bytes(path.read_bytes().rstrip(b"\n"))  # e.g. an editor dropped the final newline
    tlog.append(path, [rec(px_block=2)])
    assert tlog.read(path) == [rec(px_block=1), rec(px_block=2)]


@pytest.mark.parametrize(("line", "message"), [
    (b"not json", "line 2: not a JSON record"),
    (b"[1, 2]", "line 2: a record is a JSON object"),
    (b'{"task": "t"}', "line 2: the record has no 'target'"),
    (json.dumps({**rec().to_json(), "unit": "cycles"}).encode(), "line 2: 'unit' 'cycles' is not one of"),
    (json.dumps({**rec().to_json(), "cost": "fast"}).encode(), "line 2: 'cost' must be a number"),
    (json.dumps({**rec().to_json(), "cost": None}).encode(), "line 2: a record without an error needs a cost"),
    (json.dumps({**rec().to_json(), "schedule": {"a": [1]}}).encode(), "line 2: 'schedule' must be an object"),
    (json.dumps({**rec().to_json(), "default": "yes"}).encode(), "line 2: 'default' must be true or false"),
    (b'{"cost": NaN}', "line 2: not a JSON record"),
])
def test_a_bad_record_is_an_error_naming_the_line(tmp_path: Path, line: bytes, message: str) -> None:
    path = tmp_path / "log.jsonl"
    tlog.append(path, [rec()])
    path.write_bytes(path.read_bytes() + line + b"\n" + json.dumps(rec().to_json()).encode() + b"\n")
    with pytest.raises(TuningLogError, match=message):
        tlog.read(path)


def test_the_log_must_be_a_regular_file(tmp_path: Path) -> None:
    (tmp_path / "dir.jsonl").mkdir()
    with pytest.raises(TuningLogError, match="not a regular file"):
        tlog.read(tmp_path / "dir.jsonl")
    with pytest.raises(TuningLogError, match="not a regular file"):
        tlog.append(tmp_path / "dir.jsonl", [rec()])
    target = tmp_path / "real.jsonl"
    target.write_text("")
    (tmp_path / "link.jsonl").symlink_to(target)
    with pytest.raises(TuningLogError, match="symbolic link"):
        tlog.append(tmp_path / "link.jsonl", [rec()])
    with pytest.raises(TuningLogError, match="no such file"):
        tlog.best_schedules(tmp_path / "none.jsonl", "host")


def test_costs_in_different_units_never_compete() -> None:
    qemu = rec(cost=500_000.0, px_block=1)
    board = dataclasses.replace(rec(cost=0.002, px_block=2), unit="seconds", platform="board")
    assert tlog.best_records([qemu, board])[qemu.task] == board  # the latest campaign's unit
    assert tlog.best_records([board, qemu])[qemu.task] == qemu


def test_applying_a_log_keeps_within_the_code_budget() -> None:
    """The fastest record whose code is at most (1 + growth) times the default point's wins; records (or
    defaults) without a code size are not limited; `None` lifts the limit."""
    t = "conv2d:0123456789abcdef"
    default = dataclasses.replace(rec(t, 100.0, default=True, a=0), code=1000)
    fat = dataclasses.replace(rec(t, 50.0, a=1), code=1200)  # 20% more code
    lean = dataclasses.replace(rec(t, 80.0, a=2), code=1099)
    unknown = dataclasses.replace(rec(t, 90.0, a=3), code=None)
    records = [default, fat, lean, unknown]
    assert tlog.best_records(records)[t].schedule == {"a": 2}
    assert tlog.best_records(records, max_code_growth=0.25)[t].schedule == {"a": 1}
    assert tlog.best_records(records, max_code_growth=None)[t].schedule == {"a": 1}
    assert tlog.best_records([dataclasses.replace(default, code=None), fat])[t].schedule == {"a": 1}
    assert tlog.summarize(records)[0].best.schedule == {"a": 2}


@pytest.mark.parametrize("code", [-1, 1.5, True, "12"])
def test_a_bad_code_size_is_an_error(code: object, tmp_path: Path) -> None:
    line = dict(rec().to_json(), code=code)
    (tmp_path / "l.jsonl").write_text(json.dumps(line) + "\n")
    with pytest.raises(TuningLogError, match="'code' must be a byte count"):
        tlog.read(tmp_path / "l.jsonl")
