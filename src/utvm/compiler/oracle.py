"""Reference interpreters for checking compiled models: TFLite via ai-edge-litert (BUILTIN_REF reference
kernels), ONNX via onnxruntime (CPU). Both run in a worker subprocess: an interpreter that crashes on a
model fails that check with an OracleError instead of taking the caller down.

    outs = reference_outputs("kws.tflite", [[x0], [x1]])     # many input sets, one subprocess
    # -> [[y0_out0, ...], [y1_out0, ...]], outputs in model order

Inputs are given by position in model order and must already have the model's dtypes and shapes. The
worker is this module run as a script (`python -m utvm.compiler.oracle REQUEST RESPONSE`). The
interpreters are test extras (`pip install utvm[test]`); a missing one raises OracleError saying so.
"""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from utvm.errors import UtvmError


class OracleError(UtvmError):
    """The reference interpreter is missing, failed or crashed."""


def reference_outputs(model: str | os.PathLike, input_sets: Sequence[Sequence[np.ndarray]], *,
                      kind: str | None = None, timeout: float = 600) -> list[list[np.ndarray]]:
    """Outputs of the reference interpreter for each input set (model order)."""
    from utvm.frontend import model_kind

    path = Path(model).resolve()
    kind = kind or model_kind(path)
    if kind not in ("tflite", "onnx"):
        raise OracleError(f"no reference interpreter for model kind {kind!r}")
    job = {"kind": kind, "path": str(path), "sets": [[np.ascontiguousarray(a) for a in s] for s in input_sets]}
    with tempfile.TemporaryDirectory(prefix="utvm-oracle-") as tmp:
        req, resp = Path(tmp) / "request.pkl", Path(tmp) / "response.pkl"
        req.write_bytes(pickle.dumps(job))
        try:
            proc = subprocess.run([sys.executable, "-m", "utvm.compiler.oracle", str(req), str(resp)],
                                  capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            raise OracleError(f"the {kind} reference interpreter timed out after {timeout} s on {path.name}") from exc
        if proc.returncode < 0:
            sig = signal.Signals(-proc.returncode).name
            raise OracleError(f"the {kind} reference interpreter crashed ({sig}) on {path.name}: "
                              f"{proc.stderr[-2000:]}")
        if proc.returncode != 0 or not resp.exists():
            raise OracleError(f"the {kind} oracle worker failed (exit {proc.returncode}) on {path.name}: "
                              f"{proc.stderr[-2000:]}")
        result = pickle.loads(resp.read_bytes())
    if isinstance(result, dict):
        raise OracleError(f"{kind} reference on {path.name}: {result['error']}")
    return result


# --- worker side ------------------------------------------------------------------------------------------

def _run_tflite(path: str, sets: list[list[np.ndarray]]) -> list[list[np.ndarray]]:
    try:
        from ai_edge_litert.interpreter import Interpreter, OpResolverType
    except ImportError as exc:
        raise RuntimeError("ai-edge-litert is not installed (pip install ai-edge-litert)") from exc
    it = Interpreter(model_path=path, experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    ins, outs = it.get_input_details(), it.get_output_details()
    results = []
    for s in sets:
        if len(s) != len(ins):
            raise ValueError(f"{len(s)} inputs given, the model has {len(ins)}")
        for d, v in zip(ins, s, strict=True):
            if v.dtype != d["dtype"] or tuple(v.shape) != tuple(d["shape"]):
                raise ValueError(f"input {d['name']!r}: got {v.dtype}{list(v.shape)}, the model wants "
                                 f"{np.dtype(d['dtype'])}{list(d['shape'])}")
            it.set_tensor(d["index"], v)
        it.invoke()
        results.append([np.array(it.get_tensor(d["index"])) for d in outs])
    return results


def _run_onnx(path: str, sets: list[list[np.ndarray]]) -> list[list[np.ndarray]]:
    try:
        import onnxruntime as ort
    except ImportError as exc:
        raise RuntimeError("onnxruntime is not installed (pip install onnxruntime)") from exc
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    results = []
    for s in sets:
        if len(s) != len(names):
            raise ValueError(f"{len(s)} inputs given, the model has {len(names)}")
        results.append([np.array(y) for y in sess.run(None, dict(zip(names, s, strict=True)))])
    return results


def _worker_main(req: str, resp: str) -> None:
    job: dict[str, Any] = pickle.loads(Path(req).read_bytes())
    try:
        run = _run_tflite if job["kind"] == "tflite" else _run_onnx
        out: Any = run(job["path"], job["sets"])
    except Exception as exc:  # noqa: BLE001 - reported to the caller as the job's error
        out = {"error": f"{type(exc).__name__}: {exc}"}
    Path(resp).write_bytes(pickle.dumps(out))


if __name__ == "__main__":
    _worker_main(sys.argv[1], sys.argv[2])
