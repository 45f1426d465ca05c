"""`utvm compile MODEL -o OUT.tar [...]`: progress on stderr, the summary on stdout, an MLF tar out."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest

from utvm import mlf
from utvm.cli import EXIT_MODEL, EXIT_USAGE, main
from utvm.support.models import models_dir

MODELS = models_dir()
HELLO = MODELS / "tflm" / "hello_world_int8.tflite"
AD01 = MODELS / "mlperf_tiny" / "ad01_int8.tflite"


def test_compile_writes_an_mlf_and_prints_the_summary(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "ad01.tar"
    assert main(["compile", str(AD01), "-o", str(out)]) == 0
    cap = capsys.readouterr()
    assert "importing" in cap.err and "memory plan (branch_and_bound): 256 bytes, lower bound 256" in cap.err
    assert "model default: 10 ops imported -> 10 operator functions" in cap.out
    assert "workspace: 256 bytes, lower bound 256 bytes" in cap.out
    assert f"wrote {out}" in cap.out
    c = mlf.load(out)
    assert c.options.convention == "packed" and c.model_name == "default"
    # The summary reports the bytes of constants the C bakes in: every int8 weight of ad01's ten layers
    # (264,192 bytes) plus the per-channel int32 tables, as the metadata records them.
    assert f"constants: {c.constant_bytes} bytes" in cap.out
    weights = sum(t.nbytes for t in c.source_graph.constants.values() if t.dtype == "int8")
    main_fn = c.metadata["modules"]["default"]["memory"]["functions"]["main"][0]
    assert c.constant_bytes == main_fn["constants_size_bytes"]
    assert weights <= c.constant_bytes < weights + 16 * 1024


def test_compile_options_reach_the_archive(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "hw.tar"
    argv = ["compile", str(HELLO), "-o", str(out), "--model-name", "hw", "--unpacked-api", "--interface-api", "c",
            "--workspace", "user", "--memory-planner", "greedy_by_size", "--rounding", "double", "--target",
            "cortex-m4", "-q"]
    assert main(argv) == 0
    cap = capsys.readouterr()
    assert cap.err == ""  # -q: no progress
    assert ("convention: c (executor aot, unpacked API, interface c, workspace user, rounding double, "
            "target cortex-m4)") in cap.out
    with tarfile.open(out) as tar:
        meta = json.load(tar.extractfile("metadata.json"))
        names = tar.getnames()
    opts = meta["modules"]["hw"]["utvm"]["options"]
    assert opts == {"executor": "aot", "unpacked_api": True, "interface_api": "c", "workspace": "user",
                    "memory_planner": "greedy_by_size", "rounding": "double", "target": "cortex-m4"}
    assert meta["modules"]["hw"]["target"] == ["c -keys=arm_cpu,cpu -mcpu=cortex-m4"]
    assert "codegen/host/include/tvmgen_hw.h" in names


def test_default_output_name_is_the_model_stem(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["compile", str(HELLO), "-q"]) == 0
    assert (tmp_path / "hello_world_int8.tar").exists()


def test_dump_ir_prints_the_graph_after_every_pass(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["compile", str(HELLO), "-o", str(tmp_path / "x.tar"), "--dump-ir", "-q"]) == 0
    out = capsys.readouterr().out
    assert "--- IR after import (3 ops) ---" in out
    assert out.count("--- IR after ") >= 2 and "graph " in out and "dense(" in out


@pytest.mark.parametrize("argv, message", [
    (["--interface-api", "c"], "--interface-api c requires --unpacked-api"),
    (["--model-name", "9lives"], "argument --model-name: '9lives' is not a C identifier"),
    (["--model-name", "m" * 300], "argument --model-name: the name is 300 characters long; at most 40"),
])
def test_bad_flags_fail_with_the_reason(argv: list[str], message: str, tmp_path: Path,
                                        capsys: pytest.CaptureFixture) -> None:
    assert main(["compile", str(HELLO), "-o", str(tmp_path / "x.tar"), "-q", *argv]) == EXIT_USAGE
    assert message in capsys.readouterr().err
    assert not (tmp_path / "x.tar").exists()


def test_bad_models_fail_naming_the_file(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["compile", str(tmp_path / "nope.tflite"), "-q"]) == EXIT_USAGE
    assert "nope.tflite" in capsys.readouterr().err
    bad = tmp_path / "truncated.tflite"
    bad.write_bytes(HELLO.read_bytes()[:300])
    assert main(["compile", str(bad), "-q", "-o", str(tmp_path / "t.tar")]) == EXIT_MODEL
    assert "utvm compile: error:" in capsys.readouterr().err


def test_unwritable_output_paths_fail_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """-o under a regular file, or onto a directory: refused before any work (exit 2) with a one-line error
    naming the path, no traceback and no half-written archive left behind (root ignores permissions, so
    these are the portable cases)."""
    a_file = tmp_path / "plain"
    a_file.write_text("x")
    a_dir = tmp_path / "adir"
    a_dir.mkdir()
    for out, name, status in [(a_file / "x.tar", "plain", EXIT_USAGE), (a_dir, "adir", EXIT_USAGE)]:
        assert main(["compile", str(HELLO), "-o", str(out), "-q"]) == status
        err = capsys.readouterr().err
        assert err.startswith("utvm compile: error: ") and err.count("\n") == 1 and name in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adir", "plain"]
    assert main(["build-device", "--platform", "host", "-o", str(a_file / "dev")]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith("utvm build-device: error: ") and "plain" in err, err
