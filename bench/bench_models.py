"""Model latency on the host: our generated C against LiteRT's interpreter, both measured in the same run.

For every int8 TFLite model of the repository's corpus (models/, or $UTVM_MODELS_DIR) that the compiler
supports:
- ours: `utvm.compiler.compile(..., unpacked_api=True, interface_api="c")`, built with gcc -O2 into a
  shared library by `utvm.compiler.local.LocalModel`, `tvmgen_<m>_run(&inputs, &outputs)` called through
  ctypes on buffers prepared once. The ctypes call overhead, measured on an empty function of the same
  signature (bench/c/bench_empty_call.c) called the same way, is reported and subtracted ("net").
- baselines: ai-edge-litert's `Interpreter` with BUILTIN_REF (reference) kernels and with its default
  resolver (optimised kernels + default delegates), `num_threads=1` like our code, `invoke()` timed
  from Python on the same input. Each (model, resolver) runs in its own subprocess, so an interpreter
  that crashes on a model is reported in the table instead of ending the benchmark.
- footprint known on the host, from the compiled metadata: constants bytes, workspace bytes against the
  planner's lower bound (largest sum of simultaneously live tensors).
- `=ref`: whether our output is bit-identical to the BUILTIN_REF output for that input.

Latencies are medians over samples, each sample the mean of k back-to-back calls (k sized so a sample
lasts about 10 ms), in this thread's CPU time (time.thread_time: other processes on a shared machine do
not inflate it; both run single-threaded in the calling thread), or elapsed time with --wall; both clocks
go to --json. Ratios are litert time / our net time: above 1 our code is faster.

    python -m bench models [-- --quick] [-- --wall] [-- --models kws_ref_model,ad01_int8] [-- --json PATH]
"""

from __future__ import annotations

import argparse
import ctypes
import importlib.metadata
import json
import os
import pickle
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from utvm.support.models import models_dir

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
EMPTY_SOURCE = HERE / "c" / "bench_empty_call.c"
RESOLVERS = {"ref": "BUILTIN_REF", "opt": "AUTO"}
LITERT_TIMEOUT_S = 120.0


# --- timing -----------------------------------------------------------------------------------------------

def per_call_s(call: Callable[[], Any], target_s: float, samples: int) -> dict[str, float]:
    """Median seconds per call, {"cpu": this thread's CPU time, "wall": elapsed time}: `samples` samples,
    each the mean of k back-to-back calls, k chosen so that a sample lasts about `target_s`."""
    n = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            call()
        dt = time.perf_counter() - t0
        if dt >= target_s / 10 or n >= 1 << 20:
            break
        n *= 10
    k = max(1, round(n * target_s / dt))
    reps = range(k)
    cpu, wall = [], []
    for _ in range(samples):
        c0, w0 = time.thread_time(), time.perf_counter()
        for _ in reps:
            call()
        w1, c1 = time.perf_counter(), time.thread_time()
        cpu.append((c1 - c0) / k)
        wall.append((w1 - w0) / k)
    return {"cpu": statistics.median(cpu), "wall": statistics.median(wall)}


# --- ours ------------------------------------------------------------------------------------------------

def build_empty() -> Path:
    from utvm.support import cc

    def builder(tmp: Path) -> Path:
        return cc.compile_link([EMPTY_SOURCE], tmp / "libbench_empty.so", cflags=[*cc.WARNING_FLAGS, "-O2"],
                               shared=True)

    return cc.cached_build([EMPTY_SOURCE], ["-O2", cc.compiler_version("gcc")], "libbench_empty.so", builder)


def _struct(fields: list[str], arrays: list[np.ndarray]) -> ctypes.Structure:
    """A struct tvmgen_<m>_inputs / _outputs: one data pointer per tensor, in order."""
    cls = type("S", (ctypes.Structure,), {"_fields_": [(f, ctypes.c_void_p) for f in fields] or
                                          [("unused_", ctypes.c_void_p)]})
    return cls(*(a.ctypes.data for a in arrays))


def time_ours(lm: Any, inputs: list[np.ndarray], target_s: float,
              samples: int) -> tuple[dict[str, float], list[np.ndarray]]:
    """Seconds per call of tvmgen_<m>_run on prepared buffers, and the outputs of those calls."""
    iface = lm.compiled.interface
    outs = [np.zeros(o.shape, dtype=o.dtype) for o in iface.outputs]
    s_in = _struct([x.field for x in iface.inputs], inputs)
    s_out = _struct([x.field for x in iface.outputs], outs)
    fn = getattr(lm.lib, f"{lm.compiled.prefix}_run")
    fn.restype = ctypes.c_int32
    args = (ctypes.c_void_p(ctypes.addressof(s_in)), ctypes.c_void_p(ctypes.addressof(s_out)))
    err = fn(*args)
    if err:
        raise RuntimeError(f"{lm.compiled.prefix}_run returned {err:#x}")
    return per_call_s(lambda: fn(*args), target_s, samples), outs


def time_empty_call(target_s: float, samples: int) -> dict[str, float]:
    lib = ctypes.CDLL(str(build_empty()))
    fn = lib.bench_empty_run
    fn.restype = ctypes.c_int32
    a, b = ctypes.c_uint64(0), ctypes.c_uint64(0)
    args = (ctypes.c_void_p(ctypes.addressof(a)), ctypes.c_void_p(ctypes.addressof(b)))
    return per_call_s(lambda: fn(*args), target_s, samples)


# --- litert (in a subprocess per model and resolver) ------------------------------------------------------

def time_litert(path: Path, resolver: str, inputs: list[np.ndarray], target_s: float, samples: int,
                threads: int) -> dict[str, Any]:
    """{"per_call_s": {"cpu", "wall"}, "outputs"}, or {"error": text} for a crash, a timeout or an
    exception in the worker."""
    job = {"path": str(path), "resolver": resolver, "inputs": inputs, "target_s": target_s, "samples": samples,
           "threads": threads}
    with tempfile.TemporaryDirectory(prefix="utvm-bench-litert-") as tmp:
        req, resp = Path(tmp) / "request.pkl", Path(tmp) / "response.pkl"
        req.write_bytes(pickle.dumps(job))
        try:
            proc = subprocess.run([sys.executable, "-m", "bench.bench_models", "--litert-worker", str(req), str(resp)],
                                  cwd=REPO, capture_output=True, text=True, timeout=LITERT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return {"error": f"timed out after {LITERT_TIMEOUT_S:.0f} s"}
        if proc.returncode < 0:
            return {"error": f"crashed ({signal.Signals(-proc.returncode).name})"}
        if proc.returncode != 0 or not resp.exists():
            tail = proc.stderr.strip().splitlines()[-1:] or ["no output"]
            return {"error": f"worker exit {proc.returncode}: {tail[0][:120]}"}
        return pickle.loads(resp.read_bytes())


def _litert_worker(req: str, resp: str) -> None:
    job = pickle.loads(Path(req).read_bytes())
    try:
        from ai_edge_litert.interpreter import Interpreter, OpResolverType

        it = Interpreter(model_path=job["path"], num_threads=job["threads"],
                         experimental_op_resolver_type=getattr(OpResolverType, job["resolver"]))
        it.allocate_tensors()
        details = it.get_input_details()
        if len(details) != len(job["inputs"]):
            raise ValueError(f"{len(job['inputs'])} inputs given, the model has {len(details)}")
        for d, x in zip(details, job["inputs"], strict=True):
            if x.dtype != d["dtype"] or tuple(x.shape) != tuple(d["shape"]):
                raise ValueError(f"input {d['name']!r}: got {x.dtype}{list(x.shape)}, the interpreter wants "
                                 f"{np.dtype(d['dtype'])}{[int(n) for n in d['shape']]}")
            it.set_tensor(d["index"], x)
        it.invoke()
        out: dict[str, Any] = {
            "outputs": [np.array(it.get_tensor(d["index"])) for d in it.get_output_details()],
            "per_call_s": per_call_s(it.invoke, job["target_s"], job["samples"]),
        }
    except Exception as exc:  # noqa: BLE001 - reported in the table
        out = {"error": f"{type(exc).__name__}: {exc}"[:160]}
    Path(resp).write_bytes(pickle.dumps(out))


# --- the benchmark ----------------------------------------------------------------------------------------

def _prepare(path: Path) -> tuple[Any, str]:
    """(CompiledModel, "") for a supported int8 model, else (None, why it is left out)."""
    from utvm.compiler import compile
    from utvm.errors import UtvmError
    from utvm.frontend import load

    try:
        graph = load(path)
    except UtvmError as exc:
        return None, f"not imported: {type(exc).__name__}: {str(exc).splitlines()[0][:110]}"
    io = [graph.tensor(t) for t in (*graph.inputs, *graph.outputs)]
    if any(t.dtype != "int8" for t in io):
        return None, "not an int8 model (I/O " + "/".join(sorted({t.dtype for t in io})) + ")"
    name = re.sub(r"\W", "_", path.stem)
    try:
        return compile(graph, model_name=name, unpacked_api=True, interface_api="c"), ""
    except UtvmError as exc:
        return None, f"not supported: {type(exc).__name__}: {str(exc).splitlines()[0][:100]}"


def _footprint(compiled: Any) -> dict[str, int]:
    mod = compiled.metadata["modules"][compiled.model_name]["memory"]
    main = mod["functions"]["main"][0]
    return {"constants_bytes": main["constants_size_bytes"], "workspace_bytes": main["workspace_size_bytes"],
            "lower_bound_bytes": mod["plan"]["lower_bound_bytes"], "io_bytes": main["io_size_bytes"]}


def _same(ours: list[np.ndarray], ref: list[np.ndarray]) -> str:
    if len(ours) != len(ref):
        return "n/a"
    worst = 0
    for a, b in zip(ours, ref, strict=True):
        if a.shape != b.shape:
            return "shape"
        worst = max(worst, int(np.max(np.abs(a.astype(np.int64) - b.astype(np.int64)), initial=0)))
    return "yes" if worst == 0 else f"{worst}LSB"


def _us(s: float | None) -> str:
    return f"{s * 1e6:9.1f}" if s is not None else f"{'-':>9}"


def _ratio(base: float | None, ours: float) -> str:
    return f"{base / ours:8.2f}x" if base is not None and ours > 0 else f"{'-':>9}"


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench models", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer, shorter samples")
    ap.add_argument("--models", default=None, help="comma-separated model file stems (default: all)")
    ap.add_argument("--threads", type=int, default=1, help="litert num_threads (default 1, like our code)")
    ap.add_argument("--wall", action="store_true",
                    help="tabulate elapsed time instead of thread CPU time (both go to --json)")
    ap.add_argument("--json", type=Path, default=None, help="also write the figures to this file")
    ns = ap.parse_args(argv)
    clock = "wall" if ns.wall else "cpu"
    target_s, samples = (0.004, 7) if ns.quick else (0.01, 21)
    root = models_dir()
    paths = sorted(root.rglob("*.tflite"))
    if ns.models:
        wanted = set(ns.models.split(","))
        paths = [p for p in paths if p.stem in wanted]
        missing = wanted - {p.stem for p in paths}
        if missing:
            print(f"no such model(s) under {root}: {', '.join(sorted(missing))}", file=sys.stderr)
            return 2
    if not paths:
        print(f"no .tflite models under {root} (set UTVM_MODELS_DIR)", file=sys.stderr)
        return 2
    from utvm.compiler.local import LocalModel, random_inputs

    try:
        litert_version = importlib.metadata.version("ai-edge-litert")
    except importlib.metadata.PackageNotFoundError:
        litert_version = "(not installed)"
    empty = time_empty_call(target_s, samples * 2)
    rows: list[dict[str, Any]] = []
    skipped: list[tuple[str, str]] = []
    for path in paths:
        rel = str(path.relative_to(root))
        compiled, why = _prepare(path)
        if compiled is None:
            skipped.append((rel, why))
            continue
        lm = LocalModel(compiled, opt="-O2")
        inputs = random_inputs(compiled, np.random.default_rng(0))
        ours, ours_out = time_ours(lm, inputs, target_s, samples)
        ran = lm.run(inputs)
        if not all(np.array_equal(a, b) for a, b in zip(ran, ours_out, strict=True)):
            raise AssertionError(f"{rel}: the timed calls and LocalModel.run give different outputs")
        row: dict[str, Any] = {"model": rel, "ours_raw_s": ours,
                               "ours_net_s": {c: max(t - empty[c], 0.0) for c, t in ours.items()},
                               **_footprint(compiled)}
        for key, resolver in RESOLVERS.items():
            r = time_litert(path, resolver, inputs, target_s, samples, ns.threads)
            row[f"{key}_s"] = r.get("per_call_s")
            row[f"{key}_error"] = r.get("error")
            if key == "ref":
                row["bit_exact"] = _same(ours_out, r["outputs"]) if "outputs" in r else "n/a"
        rows.append(row)
        print(f"  measured {rel}", file=sys.stderr, flush=True)

    def t(r: dict[str, Any], key: str) -> float | None:
        v = r[f"{key}_s"]
        return v[clock] if v else None

    print(f"model latency on the host: median {'elapsed' if ns.wall else 'thread CPU'} time per inference, us "
          f"({'quick' if ns.quick else 'default'} run; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} "
          "CPUs)")
    print(f"  ours: gcc -O2, C interface + unpacked API, tvmgen_<m>_run via ctypes; the ctypes call overhead "
          f"({empty[clock] * 1e6:.2f} us, an empty call) is subtracted in 'net'")
    print(f"  litert {litert_version}: Interpreter(num_threads={ns.threads}), invoke() from Python (its binding "
          f"overhead is included); ref = BUILTIN_REF kernels, opt = the default resolver (AUTO)")
    print("  ratio = litert time / our net time (above 1: ours is faster); =ref: our output vs BUILTIN_REF's")
    head = (f"  {'model':<40} {'ours raw':>9} {'ours net':>9} {'ref':>9} {'ref/ours':>9} {'opt':>9} "
            f"{'opt/ours':>9} {'=ref':>5} {'const B':>8} {'ws B':>7} {'lower B':>7} {'ws/lb':>6}")
    print(head)
    print("  " + "-" * (len(head) - 2))
    ratios = []
    for r in rows:
        net, ref, opt = t(r, "ours_net"), t(r, "ref"), t(r, "opt")
        ws, lb = r["workspace_bytes"], r["lower_bound_bytes"]
        print(f"  {r['model']:<40} {_us(t(r, 'ours_raw'))} {_us(net)} {_us(ref)} {_ratio(ref, net)} "
              f"{_us(opt)} {_ratio(opt, net)} {r['bit_exact']:>5} {r['constants_bytes']:8d} "
              f"{ws:7d} {lb:7d} {(ws / lb if lb else 1.0):6.2f}")
        if ref and opt and net:
            ratios.append((ref / net, opt / net))
    for r in rows:
        for key in RESOLVERS:
            if r[f"{key}_error"]:
                print(f"  litert {key} on {r['model']}: {r[f'{key}_error']}")
    if ratios:
        print(f"  geometric mean over {len(ratios)} models: ref/ours "
              f"{statistics.geometric_mean(x for x, _ in ratios):.2f}x, opt/ours "
              f"{statistics.geometric_mean(y for _, y in ratios):.2f}x")
    for rel, why in skipped:
        print(f"  left out: {rel}: {why}")
    if ns.json:
        ns.json.write_text(json.dumps({"empty_call_s": empty, "litert": litert_version, "models": rows,
                                       "skipped": dict(skipped)}, indent=1, default=str))
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--litert-worker":
        _litert_worker(sys.argv[2], sys.argv[3])
    else:
        sys.exit(main(sys.argv[1:]))
