"""The TFLite oracle: ai-edge-litert's interpreter with its reference kernels (BUILTIN_REF), run in a
subprocess (one shared model is known to crash the interpreter; a crash must fail one test, not pytest).

Reusable by every test that needs TFLite's answer:

    from oracle import tflite_reference, tflite_reference_batch, tflite_reference_many

    outs = tflite_reference("model.tflite", {"input_1": x})          # one input set -> [out0, out1, ...]
    outs = tflite_reference(model_bytes, [x0, x1])                   # inputs by position, model as bytes
    sets = tflite_reference_batch(path, [inputs0, inputs1, ...])      # many input sets, one subprocess
    res = tflite_reference_many([(model_a, [in0, in1]), (model_b, [in0])])  # many models, one subprocess

Outputs come back in the model's output order. Inputs must already have the model's dtypes (no silent
casts). A failure or crash raises `OracleError` (with the worker's stderr / the signal); in
`tflite_reference_many` a failing job yields an `OracleError` in its slot and the other jobs still run.
"""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

Inputs = Mapping[str, np.ndarray] | Sequence[np.ndarray]
Model = str | os.PathLike | bytes


class OracleError(RuntimeError):
    """The reference interpreter failed or crashed on a job."""


def tflite_reference(model: Model, inputs: Inputs, *, timeout: float = 300) -> list[np.ndarray]:
    """Run one input set through the reference interpreter; return the outputs in model order."""
    return tflite_reference_batch(model, [inputs], timeout=timeout)[0]


def tflite_reference_batch(model: Model, input_sets: Sequence[Inputs], *,
                           timeout: float = 300) -> list[list[np.ndarray]]:
    """Run many input sets through one interpreter in one subprocess."""
    (res,) = tflite_reference_many([(model, input_sets)], timeout=timeout)
    if isinstance(res, OracleError):
        raise res
    return res


def tflite_reference_many(jobs: Sequence[tuple[Model, Sequence[Inputs]]], *, timeout: float = 600
                          ) -> list[list[list[np.ndarray]] | OracleError]:
    """Run several (model, input_sets) jobs in one subprocess. If the interpreter crashes, the jobs are
    re-run one subprocess each so that only the crashing job reports the crash."""
    payload = [_encode_job(m, s) for m, s in jobs]
    try:
        return _run_worker(payload, timeout)
    except _WorkerCrash as exc:
        if len(payload) == 1:
            return [OracleError(str(exc))]
    out: list[list[list[np.ndarray]] | OracleError] = []
    for job in payload:
        try:
            out.extend(_run_worker([job], timeout))
        except _WorkerCrash as exc:
            out.append(OracleError(str(exc)))
    return out


# --- host side ----------------------------------------------------------------------------------------------
class _WorkerCrash(Exception):
    pass


def _encode_job(model: Model, input_sets: Sequence[Inputs]) -> dict[str, Any]:
    if isinstance(model, bytes | bytearray):
        src: dict[str, Any] = {"content": bytes(model)}
    else:
        src = {"path": str(Path(model).resolve())}
    sets = []
    for s in input_sets:
        if isinstance(s, Mapping):
            sets.append({"by": "name", "arrays": {k: np.asarray(v) for k, v in s.items()}})
        else:
            sets.append({"by": "position", "arrays": [np.asarray(v) for v in s]})
    return {"model": src, "sets": sets}


def _run_worker(payload: list[dict[str, Any]], timeout: float) -> list[list[list[np.ndarray]] | OracleError]:
    with tempfile.TemporaryDirectory(prefix="utvm-oracle-") as tmp:
        req = Path(tmp) / "request.pkl"
        resp = Path(tmp) / "response.pkl"
        req.write_bytes(pickle.dumps(payload))
        try:
            proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), str(req), str(resp)],
                                  capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            raise _WorkerCrash(f"the reference interpreter timed out after {timeout} s") from exc
        if proc.returncode != 0 or not resp.exists():
            if proc.returncode < 0:
                sig = signal.Signals(-proc.returncode).name
                raise _WorkerCrash(f"the reference interpreter crashed ({sig}); stderr: {proc.stderr[-2000:]}")
            raise _WorkerCrash(f"the oracle worker failed (exit {proc.returncode}); stderr: {proc.stderr[-2000:]}")
        results = pickle.loads(resp.read_bytes())
    return [OracleError(r["error"]) if isinstance(r, dict) else r for r in results]


# --- worker side --------------------------------------------------------------------------------------------
def _worker_job(job: dict[str, Any]) -> list[list[np.ndarray]]:
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    src = job["model"]
    kw = {"model_path": src["path"]} if "path" in src else {"model_content": src["content"]}
    it = Interpreter(**kw, experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    in_details = it.get_input_details()
    out_details = it.get_output_details()
    by_name = {d["name"]: d for d in in_details}
    results = []
    for s in job["sets"]:
        if s["by"] == "name":
            unknown = set(s["arrays"]) - set(by_name)
            if unknown or len(s["arrays"]) != len(in_details):
                raise ValueError(f"inputs {sorted(s['arrays'])} do not match the model's {sorted(by_name)}")
            pairs = [(by_name[k], v) for k, v in s["arrays"].items()]
        else:
            if len(s["arrays"]) != len(in_details):
                raise ValueError(f"{len(s['arrays'])} inputs given, the model has {len(in_details)}")
            pairs = list(zip(in_details, s["arrays"], strict=True))
        for d, v in pairs:
            if v.dtype != d["dtype"] or tuple(v.shape) != tuple(d["shape"]):
                raise ValueError(f"input {d['name']!r}: got {v.dtype}{list(v.shape)}, "
                                 f"the model wants {np.dtype(d['dtype'])}{list(d['shape'])}")
            it.set_tensor(d["index"], v)
        it.invoke()
        results.append([np.array(it.get_tensor(d["index"])) for d in out_details])
    return results


def _worker_main(req: str, resp: str) -> None:
    payload = pickle.loads(Path(req).read_bytes())
    out: list[Any] = []
    for job in payload:
        try:
            out.append(_worker_job(job))
        except Exception as exc:  # noqa: BLE001 - reported to the host as this job's error
            out.append({"error": f"{type(exc).__name__}: {exc}"})
    Path(resp).write_bytes(pickle.dumps(out))


if __name__ == "__main__":
    _worker_main(sys.argv[1], sys.argv[2])
