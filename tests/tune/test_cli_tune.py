"""`utvm tune`: arguments, the summary, exit statuses, the log as a regular file that is appended to."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from utvm.cli import EXIT_OK, EXIT_USAGE, main
from utvm.support.models import models_dir
from utvm.tune import log as tlog


def run(capsys: pytest.CaptureFixture, *argv: str) -> tuple[int, str, str]:
    rc = main(["tune", *argv])
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def test_tune_on_the_host_prints_the_table_and_appends_to_the_log(small_model: Path, tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture) -> None:
    log = tmp_path / "log.jsonl"
    rc, out, err = run(capsys, str(small_model), "--platform", "host", "-o", str(log), "--trials", "2",
                       "--batch", "2")
    assert rc == EXIT_OK
    assert "task 1/3 conv2d 1x6x6x4/int8" in err and "2/2 trials" in err
    assert "best/default" in out and "3 task(s)" in out and "measured 6 candidate(s)" in out
    assert f"--tuning-log {log}" in out
    assert len(tlog.read(log)) == 6
    rc, out, _err = run(capsys, str(small_model), "-o", str(log), "--trials", "3", "--batch", "2", "-q")
    assert rc == EXIT_OK and "6 already in the log" in out
    assert len(tlog.read(log)) == 9  # appended, never replaced
    rc, out, _err = run(capsys, "--summary", str(log))
    assert rc == EXIT_OK and out.count("host") >= 3 and "conv2d 1x6x6x8/int8 8x1x1x8/int8" in out


@pytest.mark.parametrize(("argv", "message"), [
    ([], "give a MODEL to tune"),
    (["MODEL"], "-o LOG.jsonl is required"),
    (["MODEL", "-o", "L", "--summary", "L"], "--summary LOG prints a log: give no -o with it"),
    (["MODEL", "-o", "L", "--trials", "0"], "argument --trials: 0 must be at least 1"),
    (["MODEL", "-o", "L", "--batch", "x"], "argument --batch: 'x' is not an integer"),
    (["MODEL", "-o", "L", "--strategy", "annealing"], "argument --strategy: invalid choice"),
    (["MODEL", "-o", "L", "--timeout", "0"], "argument --timeout"),
    (["MODEL", "-o", "L", "--platform", "nowhere"], "unknown platform 'nowhere'"),
    (["MODEL", "-o", "L", "--target", "cortex-m99"], "unknown target 'cortex-m99'"),
    (["MODEL", "-o", "L", "--platform", "qemu-cortex-m3", "--target", "cortex-m4"], "has none"),
    (["nope.tflite", "-o", "L"], "no such model file"),
])
def test_bad_arguments_are_one_line_and_exit_2(small_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture,
                                               argv: list[str], message: str) -> None:
    argv = [str(small_model) if a == "MODEL" else str(tmp_path / "log.jsonl") if a == "L" else a for a in argv]
    rc, out, err = run(capsys, *argv)
    assert rc == EXIT_USAGE
    assert message in err and len(err.strip().splitlines()) == 1 and out == ""
    assert not (tmp_path / "log.jsonl").exists()


def test_the_log_must_be_a_regular_file(small_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    rc, _out, err = run(capsys, str(small_model), "-o", str(fifo))
    assert rc == EXIT_USAGE and "is a FIFO, not a regular file" in err
    real = tmp_path / "real.jsonl"
    real.write_text("")
    (tmp_path / "link.jsonl").symlink_to(real)
    rc, _out, err = run(capsys, str(small_model), "-o", str(tmp_path / "link.jsonl"))
    assert rc == EXIT_USAGE and "is a symbolic link" in err
    rc, _out, err = run(capsys, str(small_model), "-o", "/dev/null")
    assert rc == EXIT_USAGE and "character device" in err


def test_a_bad_log_is_named_by_line_before_any_work(small_model: Path, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture) -> None:
    log = tmp_path / "log.jsonl"
    log.write_text('{"task": "conv2d:1", "target": "host"}\n')
    rc, _out, err = run(capsys, str(small_model), "-o", str(log))
    assert rc == EXIT_USAGE and f"tuning log {log}, line 1: the record has no 'schedule'" in err
    rc, _out, err = run(capsys, "--summary", str(log))
    assert rc == EXIT_USAGE and "line 1" in err
    rc, _out, err = run(capsys, "--summary", str(tmp_path / "none.jsonl"))
    assert rc == EXIT_USAGE and "no such file" in err


def test_the_model_strategy_without_its_extra_names_it(small_model: Path, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "sklearn", None)
    monkeypatch.setitem(sys.modules, "sklearn.ensemble", None)
    rc, _out, err = run(capsys, str(small_model), "-o", str(tmp_path / "log.jsonl"), "--strategy", "model")
    assert rc == EXIT_USAGE and "pip install 'utvm[tune]'" in err
    assert not (tmp_path / "log.jsonl").exists()


def test_summary_of_an_empty_log(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    log = tmp_path / "log.jsonl"
    log.write_text("")
    rc, out, _err = run(capsys, "--summary", str(log))
    assert rc == EXIT_OK and "no task in the log" in out


def test_help_lists_the_options(capsys: pytest.CaptureFixture) -> None:
    rc, out, _err = run(capsys, "--help")
    assert rc == 0
    for opt in ("--platform", "--trials", "--strategy", "--timeout", "--batch", "--seed", "--summary", "--target"):
        assert opt in out


def test_a_model_without_tasks_has_nothing_to_tune(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    model = models_dir() / "tflm" / "hello_world_float.tflite"
    rc, out, _err = run(capsys, str(model), "-o", str(tmp_path / "log.jsonl"), "-q")
    assert rc == EXIT_OK and "nothing to tune" in out
