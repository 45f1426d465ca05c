"""utvm.compiler.oracle, the one reference oracle: ONNX through onnxruntime, model kind detection, and the
failure paths a real model never takes: a worker killed by a signal (only the job at fault fails, the
others are re-run and answered), a worker that exits without answering, a hang (timeout, no retry), and a
missing interpreter (a clear error before any subprocess). The failing workers are small scripts standing
in for the worker command; the host side that handles them is the real one."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from utvm.compiler import oracle
from utvm.compiler.oracle import OracleError, reference, reference_many, reference_outputs
from utvm.errors import UtvmError
from utvm.support.models import models_dir

MODELS = models_dir()
HELLO = MODELS / "tflm" / "hello_world_int8.tflite"
MNIST = MODELS / "onnx" / "mnist-8"

# Stand-in worker: dies by SIGSEGV when any job's model is the bytes b"CRASH", else is the real worker.
_CRASHING_WORKER = """
import os, pickle, signal, sys
from utvm.compiler import oracle
jobs = pickle.loads(open(sys.argv[1], "rb").read())
if any(j["model"].get("content") == b"CRASH" for j in jobs):
    os.kill(os.getpid(), signal.SIGSEGV)
oracle._worker_main(sys.argv[1], sys.argv[2])
"""


def _fake_worker(monkeypatch: pytest.MonkeyPatch, code: str) -> list[int]:
    """Replace the worker command by `python -c code REQUEST RESPONSE`; returns a list counting launches."""
    launches: list[int] = []

    def command(request: Path, response: Path) -> list[str]:
        launches.append(1)
        return [sys.executable, "-P", "-c", code, str(request), str(response)]

    monkeypatch.setattr(oracle, "_worker_command", command)
    return launches


def _mnist_set(i: int) -> tuple[np.ndarray, np.ndarray]:
    d = MNIST / f"test_data_set_{i}"
    x = numpy_helper.to_array(onnx.load_tensor(str(d / "input_0.pb")))
    y = numpy_helper.to_array(onnx.load_tensor(str(d / "output_0.pb")))
    return x, y


def test_onnx_model_by_path_and_by_bytes_matches_its_test_data() -> None:
    (x0, y0), (x1, y1) = _mnist_set(0), _mnist_set(1)
    outs = reference_outputs(MNIST / "model.onnx", [[x0], {"Input3": x1}])
    np.testing.assert_allclose(outs[0][0], y0, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(outs[1][0], y1, rtol=1e-5, atol=1e-4)
    (from_bytes,) = reference((MNIST / "model.onnx").read_bytes(), [x0])  # no TFL3 identifier: ONNX
    np.testing.assert_array_equal(from_bytes, outs[0][0])


def test_onnx_input_mismatch_names_the_input() -> None:
    x, _ = _mnist_set(0)
    with pytest.raises(OracleError, match=r"onnx reference on model.onnx: .*input 'Input3': got float64\[1, 1, 28, "
                                          r"28\], the model wants float32\[1, 1, 28, 28\]"):
        reference(MNIST / "model.onnx", [x.astype(np.float64)])
    with pytest.raises(OracleError, match=r"inputs \['x'\] do not match the model's \['Input3'\]"):
        reference(MNIST / "model.onnx", {"x": x})


def test_tflite_bytes_are_detected_and_match_the_path() -> None:
    x = [np.array([[33]], dtype=np.int8)]
    np.testing.assert_array_equal(reference(HELLO.read_bytes(), x)[0], reference(HELLO, x)[0])


def test_a_crashing_worker_fails_only_its_job(monkeypatch: pytest.MonkeyPatch) -> None:
    launches = _fake_worker(monkeypatch, _CRASHING_WORKER)
    good = [[np.array([[7]], dtype=np.int8)], [np.array([[-90]], dtype=np.int8)]]
    res = reference_many([(HELLO, good), (b"CRASH", good), (HELLO, good[:1])], kind="tflite")
    assert len(launches) == 4, "one worker for the batch, then one per job after the crash"
    assert isinstance(res[1], OracleError) and isinstance(res[1], UtvmError)
    assert "crashed (SIGSEGV) on <5-byte model>" in str(res[1])
    assert not isinstance(res[0], OracleError) and not isinstance(res[2], OracleError)
    assert len(res[0]) == 2 and len(res[2]) == 1
    np.testing.assert_array_equal(res[0][0][0], res[2][0][0])
    assert res[0][0][0].dtype == np.int8 and res[0][0][0].shape == (1, 1)


def test_a_single_crashing_job_raises_without_a_retry(monkeypatch: pytest.MonkeyPatch) -> None:
    launches = _fake_worker(monkeypatch, _CRASHING_WORKER)
    with pytest.raises(OracleError, match=r"TFLite reference interpreter crashed \(SIGSEGV\) on <5-byte model>"):
        reference_outputs(b"CRASH", [[np.zeros((1, 1), np.int8)]], kind="tflite")
    assert len(launches) == 1


def test_a_worker_exiting_without_an_answer_is_an_error_with_its_stderr(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_worker(monkeypatch, "import sys; sys.stderr.write('worker gave up'); sys.exit(3)")
    with pytest.raises(OracleError, match=r"exited with status 3 on hello_world_int8.tflite without an answer.*"
                                          r"worker gave up"):
        reference(HELLO, [np.zeros((1, 1), np.int8)])


def test_a_hanging_worker_times_out_every_job_once(monkeypatch: pytest.MonkeyPatch) -> None:
    launches = _fake_worker(monkeypatch, "import time; time.sleep(60)")
    x = [[np.zeros((1, 1), np.int8)]]
    res = reference_many([(HELLO, x), (HELLO, x)], timeout=1)
    assert len(launches) == 1, "a hang is not retried"
    assert all(isinstance(r, OracleError) and "timed out after 1 s" in str(r) for r in res), res


def test_a_missing_interpreter_is_reported_before_any_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    launches = _fake_worker(monkeypatch, "raise SystemExit(99)")
    monkeypatch.setitem(oracle.INTERPRETERS, "tflite",
                        ("ai_edge_litert_is_not_here", "ai-edge-litert", "TFLite reference interpreter"))
    with pytest.raises(OracleError, match=r"TFLite reference interpreter is not installed: pip install ai-edge-litert"):
        reference(HELLO, [np.zeros((1, 1), np.int8)])
    assert launches == []


def test_bad_models_fail_in_their_own_slot() -> None:
    x = [[np.zeros((1, 1), np.int8)]]
    res = reference_many([(MNIST / "missing.onnx", x), (HELLO, x), (HELLO.with_suffix(".txt"), x)])
    assert isinstance(res[0], OracleError) and "missing.onnx" in str(res[0])
    assert isinstance(res[2], OracleError) and "hello_world_int8.txt" in str(res[2])
    assert not isinstance(res[1], OracleError)
    with pytest.raises(OracleError, match="no reference interpreter for model kind 'pte'"):
        reference(HELLO, x[0], kind="pte")
