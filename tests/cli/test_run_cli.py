"""`utvm run MODEL_OR_MLF --platform host`: compile (or load an MLF), build host firmware, run over RPC."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from utvm.cli import EXIT_USAGE, main
from utvm.compiler import compile, export_model_library_format
from utvm.compiler.local import LocalModel
from utvm.frontend import load
from utvm.support.models import models_dir

MODELS = models_dir()
HELLO = MODELS / "tflm" / "hello_world_int8.tflite"
AD01 = MODELS / "mlperf_tiny" / "ad01_int8.tflite"


def test_run_and_check_a_tflite_model(capsys: pytest.CaptureFixture) -> None:
    assert main(["run", str(HELLO), "--platform", "host", "--check", "--seed", "3"]) == 0
    cap = capsys.readouterr()
    assert "1 random input(s), seed 3 (rerun with --seed 3)" in cap.err
    assert "output 'StatefulPartitionedCall:0' int8[1, 1]:" in cap.out
    assert "latency: " in cap.out
    assert "check against TFLite reference kernels (ai-edge-litert): OK (bit-exact)" in cap.out


def test_json_output_with_an_input_file(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    x = np.array([[17]], np.int8)
    np.save(tmp_path / "x.npy", x)
    argv = ["run", str(HELLO), "--input", f"serving_default_dense_input:0={tmp_path / 'x.npy'}", "--check",
            "--json", "--unpacked-api", "--interface-api", "c"]
    assert main(argv) == 0
    res = json.loads(capsys.readouterr().out)
    assert set(res) == {"outputs", "bit_exact", "max_abs_err", "latency_s", "seed"}
    assert res["bit_exact"] is True and res["max_abs_err"] == 0.0 and res["latency_s"] > 0
    want = LocalModel(compile(load(HELLO))).run([x])[0]
    assert res["outputs"] == {"StatefulPartitionedCall:0": want.tolist()}


def test_run_an_mlf_checks_against_utvm_reference(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    tar = export_model_library_format(compile(load(AD01), model_name="ad01", rounding="double"),
                                      tmp_path / "ad01.tar")
    assert main(["run", str(tar), "--check", "--json", "--seed", "1"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["bit_exact"] is True and len(res["outputs"]["Identity"][0]) == 640


def test_an_mlf_from_utvm_compile_is_checked_against_tflite(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    # `utvm compile` keeps the model file in the archive, so --check on the MLF uses TFLite's own kernels.
    tar = tmp_path / "hello.tar"
    assert main(["compile", str(HELLO), "-o", str(tar), "--model-name", "hello"]) == 0
    capsys.readouterr()
    assert main(["run", str(tar), "--check", "--seed", "2"]) == 0
    assert "check against TFLite reference kernels (ai-edge-litert): OK (bit-exact)" in capsys.readouterr().out


def test_a_mismatch_exits_nonzero(capsys: pytest.CaptureFixture) -> None:
    # gemmlowp's double rounding differs from TFLite's single rounding by 1 LSB on many of ad01's outputs:
    # checked against LiteRT's reference kernels, a double-rounding build is a mismatch ...
    assert main(["run", str(AD01), "--rounding", "double", "--oracle", "litert", "--seed", "0"]) == 3
    out = capsys.readouterr().out
    assert "MISMATCH (max abs error 1)" in out
    # ... and bit-exact against TFLM's kernels, the default oracle of --rounding double
    assert main(["run", str(AD01), "--rounding", "double", "--check", "--seed", "0"]) == 0
    assert "check against TFLite Micro's kernels (tflite-micro): OK (bit-exact)" in capsys.readouterr().out


@pytest.mark.parametrize("argv, message", [
    (["--input", "nope=x.npy"], "--input 'nope': the model has no such input"),
    (["--input", "serving_default_dense_input:0"], "expected NAME=FILE.npy"),
    (["--platform", "toaster"], "unknown platform 'toaster'"),
    (["--input", "serving_default_dense_input:0=a.npy", "--input", "serving_default_dense_input:0=b.npy"],
     "--input 'serving_default_dense_input:0' is given twice"),
])
def test_bad_arguments_fail_with_the_reason(argv: list[str], message: str, capsys: pytest.CaptureFixture) -> None:
    assert main(["run", str(HELLO), *argv]) == EXIT_USAGE
    assert message in capsys.readouterr().err


def test_input_of_the_wrong_shape_is_named(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    np.save(tmp_path / "x.npy", np.zeros((1, 2), np.int8))
    assert main(["run", str(HELLO), "--input", f"serving_default_dense_input:0={tmp_path / 'x.npy'}"]) == EXIT_USAGE
    assert "--input serving_default_dense_input:0: the model takes int8[1, 1], " in capsys.readouterr().err
