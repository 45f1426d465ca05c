"""Reference interpreters for checking compiled models: TFLite via ai-edge-litert's reference kernels
(BUILTIN_REF), ONNX via onnxruntime (CPU, one thread). They run in a worker subprocess, so an interpreter
that crashes on a model fails that check with an OracleError instead of taking the caller (pytest, `utvm
run`) down. The one oracle of the project: `utvm run --check`, the demo and the tests all use it.

    outs = reference_outputs("kws.tflite", [[x0], [x1]])      # many input sets, one subprocess
    # -> [[y0_out0, ...], [y1_out0, ...]], outputs in model order
    outs = reference(model_bytes, {"input_1": x}, kind="tflite")   # one set, inputs by name
    res = reference_many([(model_a, sets_a), (model_b, sets_b)])    # many models, one subprocess
    # -> a result (as reference_outputs) or an OracleError per job

A model is a path or its bytes (kind "tflite"/"onnx" is detected from the TFLite identifier or the
suffix; bytes without the identifier are taken as ONNX unless `kind` says otherwise). An input set is a
sequence (model order) or a mapping by input name; arrays must already have the model's dtypes and
shapes (no silent casts: a mismatch is an error naming the input).

Crash isolation: `reference_many` runs every job in one worker; if the worker dies (a signal, or an exit
without an answer), each job is re-run in a worker of its own, so only the job at fault reports the
crash (with the signal and the worker's stderr) and the others still get their outputs. A timeout fails
every job of that worker (a hang would hang again). The worker is this module run with `python -P -m
utvm.compiler.oracle REQUEST RESPONSE` (pickles). The interpreters are test extras (`pip install
utvm[test]`); a missing one is an OracleError saying which package to install, raised before any
subprocess starts.
"""

from __future__ import annotations

import importlib.util
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

from utvm.errors import OracleError

__all__ = ["INTERPRETERS", "OracleError", "reference", "reference_many", "reference_outputs"]

Inputs = Mapping[str, np.ndarray] | Sequence[np.ndarray]
Model = str | os.PathLike | bytes
Result = list[list[np.ndarray]]

#: model kind -> (module the worker imports, package to install, what it is called in messages)
INTERPRETERS: dict[str, tuple[str, str, str]] = {
    "tflite": ("ai_edge_litert", "ai-edge-litert", "TFLite reference interpreter"),
    "tflm": ("tflite_micro", "tflite-micro", "TFLite Micro interpreter"),
    "onnx": ("onnxruntime", "onnxruntime", "onnxruntime"),
}


def reference(model: Model, inputs: Inputs, *, kind: str | None = None, timeout: float = 300) -> list[np.ndarray]:
    """The reference outputs of one input set, in model order."""
    return reference_outputs(model, [inputs], kind=kind, timeout=timeout)[0]


def reference_outputs(model: Model, input_sets: Sequence[Inputs], *, kind: str | None = None,
                      timeout: float = 600) -> Result:
    """The reference outputs of each input set (one interpreter, one subprocess); raises OracleError."""
    (res,) = reference_many([(model, input_sets)], kind=kind, timeout=timeout)
    if isinstance(res, OracleError):
        raise res
    return res


def reference_many(jobs: Sequence[tuple[Model, Sequence[Inputs]]], *, kind: str | None = None,
                   timeout: float = 600) -> list[Result | OracleError]:
    """Run several (model, input_sets) jobs in one worker; a failing job yields an OracleError in its slot.

    `kind` forces the model kind of every job (None: detect it per job). If the worker crashes, the jobs
    are re-run one worker each so that only the crashing job reports the crash.
    """
    out: list[Result | OracleError | None] = [None] * len(jobs)
    pending: list[tuple[int, dict[str, Any]]] = []
    for i, (model, sets) in enumerate(jobs):
        try:
            pending.append((i, _encode_job(model, sets, kind)))
        except OracleError as exc:
            out[i] = exc
    if pending:
        try:
            results = _run_worker([job for _, job in pending], timeout)
        except _WorkerCrash as exc:
            if len(pending) == 1:
                results = [exc.error]
            else:
                results = []
                for _, job in pending:
                    try:
                        results.extend(_run_worker([job], timeout))
                    except _WorkerCrash as single:
                        results.append(single.error)
        for (i, _), res in zip(pending, results, strict=True):
            out[i] = res
    return out  # type: ignore[return-value]  # every slot is filled


# --- host side ----------------------------------------------------------------------------------------------
class _WorkerCrash(Exception):
    def __init__(self, error: OracleError) -> None:
        super().__init__(str(error))
        self.error = error


def _label(model: Model) -> str:
    return f"<{len(model)}-byte model>" if isinstance(model, bytes | bytearray) else Path(model).name


def _model_kind(model: Model) -> str:
    if isinstance(model, bytes | bytearray):
        return "tflite" if bytes(model[4:8]) == b"TFL3" else "onnx"
    from utvm.errors import ModelFormatError
    from utvm.frontend import model_kind

    try:
        return model_kind(model)
    except ModelFormatError as exc:
        raise OracleError(f"reference interpreter: {exc}") from exc


def _require_interpreter(kind: str) -> None:
    if kind not in INTERPRETERS:
        raise OracleError(f"no reference interpreter for model kind {kind!r} (known: {', '.join(INTERPRETERS)})")
    module, package, what = INTERPRETERS[kind]
    if importlib.util.find_spec(module) is None:
        raise OracleError(f"the {what} is not installed: pip install {package} (or utvm[test])")


def _encode_job(model: Model, input_sets: Sequence[Inputs], kind: str | None) -> dict[str, Any]:
    job_kind = kind or _model_kind(model)
    _require_interpreter(job_kind)
    if isinstance(model, bytes | bytearray):
        src: dict[str, Any] = {"content": bytes(model)}
    else:
        path = Path(model).resolve()
        if not path.is_file():
            raise OracleError(f"reference interpreter: model {str(model)!r} does not exist")
        src = {"path": str(path)}
    sets = []
    for s in input_sets:
        if isinstance(s, Mapping):
            sets.append({"by": "name", "arrays": {k: np.asarray(v, order="C") for k, v in s.items()}})
        else:
            sets.append({"by": "position", "arrays": [np.asarray(v, order="C") for v in s]})
    return {"kind": job_kind, "label": _label(model), "model": src, "sets": sets}


def _worker_command(request: Path, response: Path) -> list[str]:
    # -P: the worker's directory is not put on sys.path (nothing in the caller's cwd shadows a module).
    return [sys.executable, "-P", "-m", "utvm.compiler.oracle", str(request), str(response)]


def _worker_env() -> dict[str, str]:
    import utvm

    root = str(Path(utvm.__file__).resolve().parents[1])  # wherever the caller imported utvm from
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    return env


def _run_worker(jobs: list[dict[str, Any]], timeout: float) -> list[Result | OracleError]:
    """Run `jobs` in one worker; raises _WorkerCrash if it died without answering."""
    kinds = sorted({INTERPRETERS[j["kind"]][2] for j in jobs})
    what = f"the {' / '.join(kinds)}" if kinds else "the oracle worker"
    on = jobs[0]["label"] if len(jobs) == 1 else f"a batch of {len(jobs)} models"
    with tempfile.TemporaryDirectory(prefix="utvm-oracle-") as tmp:
        req, resp = Path(tmp) / "request.pkl", Path(tmp) / "response.pkl"
        req.write_bytes(pickle.dumps(jobs))
        try:
            proc = subprocess.run(_worker_command(req, resp), capture_output=True, text=True, timeout=timeout,
                                  env=_worker_env())
        except subprocess.TimeoutExpired:
            # A hang would hang again: every job of this worker fails, none is retried.
            err = f"{what} timed out after {timeout:g} s on {on}"
            return [OracleError(f"{err} ({j['label']})" if len(jobs) > 1 else err) for j in jobs]
        stderr = proc.stderr[-2000:].strip()
        if proc.returncode < 0:
            try:
                sig = signal.Signals(-proc.returncode).name
            except ValueError:
                sig = f"signal {-proc.returncode}"
            raise _WorkerCrash(OracleError(f"{what} crashed ({sig}) on {on}; stderr: {stderr or '(empty)'}"))
        try:
            results = pickle.loads(resp.read_bytes())
        except (OSError, EOFError, pickle.UnpicklingError) as exc:
            raise _WorkerCrash(OracleError(f"{what} exited with status {proc.returncode} on {on} without an "
                                           f"answer ({type(exc).__name__}); stderr: {stderr or '(empty)'}")) from exc
        if proc.returncode != 0 or not isinstance(results, list) or len(results) != len(jobs):
            raise _WorkerCrash(OracleError(f"the oracle worker failed (exit {proc.returncode}) on {on}; "
                                           f"stderr: {stderr or '(empty)'}"))
    return [OracleError(f"{j['kind']} reference on {j['label']}: {r['error']}") if isinstance(r, dict) else r
            for j, r in zip(jobs, results, strict=True)]


# --- worker side --------------------------------------------------------------------------------------------
_ONNX_DTYPES = {"tensor(float)": np.float32, "tensor(double)": np.float64, "tensor(float16)": np.float16,
                "tensor(int8)": np.int8, "tensor(uint8)": np.uint8, "tensor(int16)": np.int16,
                "tensor(uint16)": np.uint16, "tensor(int32)": np.int32, "tensor(int64)": np.int64,
                "tensor(bool)": np.bool_}


class _Tflite:
    def __init__(self, src: dict[str, Any]) -> None:
        from ai_edge_litert.interpreter import Interpreter, OpResolverType

        kw = {"model_path": src["path"]} if "path" in src else {"model_content": src["content"]}
        self.it = Interpreter(**kw, experimental_op_resolver_type=OpResolverType.BUILTIN_REF, num_threads=1)
        self.it.allocate_tensors()
        self.inputs = [(d["name"], np.dtype(d["dtype"]), tuple(int(x) for x in d["shape"]))
                       for d in self.it.get_input_details()]
        self._in = [d["index"] for d in self.it.get_input_details()]
        self._out = [d["index"] for d in self.it.get_output_details()]

    def run(self, arrays: list[np.ndarray]) -> list[np.ndarray]:
        for index, a in zip(self._in, arrays, strict=True):
            self.it.set_tensor(index, a)
        self.it.invoke()
        return [np.array(self.it.get_tensor(i)) for i in self._out]


class _Tflm:
    """TFLite Micro's own kernels (the PyPI `tflite-micro` package), with its signal-library custom ops."""

    def __init__(self, src: dict[str, Any]) -> None:
        import tflite
        from tflite_micro.python.tflite_micro import runtime

        content = src["content"] if "content" in src else Path(src["path"]).read_bytes()
        model = tflite.Model.GetRootAsModel(content, 0)
        sg = model.Subgraphs(0)
        n_in, n_out = sg.InputsLength(), sg.OutputsLength()
        names = []
        for i in range(n_in):
            t = sg.Tensors(int(sg.Inputs(i)))
            names.append(t.Name().decode("utf-8", "replace") if t.Name() else f"input_{i}")
        # Generous arena: TFLM fails cleanly ("arena too small") rather than corrupting anything.
        self.it = runtime.Interpreter.from_bytes(content, arena_size=max(1 << 20, 16 * len(content)))
        self.inputs = []
        for i in range(n_in):
            d = self.it.get_input_details(i)
            self.inputs.append((names[i], np.dtype(d["dtype"]), tuple(int(x) for x in d["shape"])))
        self.n_out = n_out

    def run(self, arrays: list[np.ndarray]) -> list[np.ndarray]:
        # No reset between input sets: stateful ops (SVDF, LSTM, the signal library's delay lines) stream
        # from one set to the next, as on the device; each job starts from a fresh interpreter (zero state).
        for i, a in enumerate(arrays):
            self.it.set_input(np.asarray(a, order="C"), i)
        self.it.invoke()
        return [np.array(self.it.get_output(i)) for i in range(self.n_out)]


class _Onnx:
    def __init__(self, src: dict[str, Any]) -> None:
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1
        opts.inter_op_num_threads = 1
        # onnxruntime's uint8 x int8 kernels on x86 without VNNI add pairs of products in saturating 16-bit
        # arithmetic (2 * 255 * 127 > 32767): a QLinearConv / QGemm with full-range int8 weights (what its
        # own quantizer makes), and every QDQ group it fuses into one, can miss the ONNX definition by tens
        # of output steps. Its own remedy, this option, runs those weights as uint8 (w + 128, zero point
        # with them: the same products) through its exact kernels; where nothing overflows it changes nothing.
        opts.add_session_config_entry("session.x64quantprecision", "1")
        self.sess = ort.InferenceSession(src.get("path") or src["content"], opts,
                                         providers=["CPUExecutionProvider"])
        # Symbolic dimensions (strings / None) match any size.
        self.inputs = [(i.name, np.dtype(_ONNX_DTYPES[i.type]) if i.type in _ONNX_DTYPES else None,
                        tuple(d if isinstance(d, int) else -1 for d in i.shape)) for i in self.sess.get_inputs()]

    def run(self, arrays: list[np.ndarray]) -> list[np.ndarray]:
        feeds = {name: a for (name, _, _), a in zip(self.inputs, arrays, strict=True)}
        return [np.array(y) for y in self.sess.run(None, feeds)]


def _ordered(interp: _Tflite | _Tflm | _Onnx, s: dict[str, Any]) -> list[np.ndarray]:
    """The arrays of one input set in model order, checked against the model's inputs."""
    names = [name for name, _, _ in interp.inputs]
    if s["by"] == "name":
        if sorted(s["arrays"]) != sorted(names):
            raise ValueError(f"inputs {sorted(s['arrays'])} do not match the model's {sorted(names)}")
        arrays = [s["arrays"][n] for n in names]
    else:
        if len(s["arrays"]) != len(names):
            raise ValueError(f"{len(s['arrays'])} inputs given, the model has {len(names)} ({', '.join(names)})")
        arrays = list(s["arrays"])
    for (name, dtype, shape), a in zip(interp.inputs, arrays, strict=True):
        shape_ok = a.ndim == len(shape) and all(w in (-1, g) for g, w in zip(a.shape, shape, strict=True))
        if (dtype is not None and a.dtype != dtype) or not shape_ok:
            want = "?" if dtype is None else str(dtype)
            raise ValueError(f"input {name!r}: got {a.dtype}{list(a.shape)}, the model wants "
                             f"{want}{['?' if d == -1 else d for d in shape]}")
    return arrays


def _worker_job(job: dict[str, Any]) -> Result:
    interp = {"tflite": _Tflite, "tflm": _Tflm, "onnx": _Onnx}[job["kind"]](job["model"])
    return [interp.run(_ordered(interp, s)) for s in job["sets"]]


def _worker_main(request: str, response: str) -> None:
    jobs: list[dict[str, Any]] = pickle.loads(Path(request).read_bytes())
    out: list[Any] = []
    for job in jobs:
        try:
            out.append(_worker_job(job))
        except Exception as exc:  # noqa: BLE001 - reported to the caller as this job's error
            out.append({"error": f"{type(exc).__name__}: {exc}"})
    tmp = Path(response).with_suffix(".partial")
    tmp.write_bytes(pickle.dumps(out))
    tmp.rename(response)  # the caller never reads a half-written answer


if __name__ == "__main__":
    _worker_main(sys.argv[1], sys.argv[2])
