"""`python -m utvm.demo` (what `make demo` runs): MLPerf Tiny keyword spotting, end to end on the host.

1. imports `mlperf_tiny/kws_ref_model.tflite` (int8 DS-CNN) from the repository's model corpus;
2. compiles it to C for the AOT executor (passes, one kernel per fused operator, static memory plan) and
   writes the Model Library Format archive to build/demo/kws.tar;
3. builds host evaluation firmware: the C runtime + the RPC server + the model as the system library;
4. starts it, and over RPC uploads random spectrogram inputs, runs `tvmgen_kws_run`, downloads the scores;
5. checks every output bit-exact against TFLite's reference kernels (ai-edge-litert) and prints a summary.

The model corpus is the repository's `models/` folder (models/MANIFEST.md), or $UTVM_MODELS_DIR.
Exit status: 0 when every run is bit-exact, 1 otherwise.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

from utvm.support.models import model_path

N_INPUTS = 10
MODEL = Path("mlperf_tiny") / "kws_ref_model.tflite"
KWS_LABELS = ("down", "go", "left", "no", "off", "on", "right", "stop", "up", "yes", "silence", "unknown")


def _step(n: int, text: str) -> None:
    print(f"[{n}/5] {text}", flush=True)


def _detail(text: str) -> None:
    print(f"      {text}", flush=True)


def main() -> int:
    from utvm.compiler import compile
    from utvm.compiler.local import random_inputs
    from utvm.compiler.oracle import reference_outputs
    from utvm.errors import UtvmError
    from utvm.evaluate import build_firmware, compare, run_on_device
    from utvm.frontend import load
    from utvm.mlf import export_model_library_format
    from utvm.platform import get_platform

    print("utvm demo: MLPerf Tiny keyword spotting compiled to C, run on the host device over RPC\n")
    try:
        _step(1, f"importing {MODEL}")
        path = model_path(MODEL)
        graph = load(path)
        ops: dict[str, int] = {}
        for node in graph.nodes:
            ops[node.op] = ops.get(node.op, 0) + 1
        _detail(f"{len(graph.nodes)} ops ({', '.join(f'{k} x{v}' for k, v in ops.items())}), "
                f"input {graph.tensor(graph.inputs[0]).shape} int8")

        _step(2, "compiling for the AOT executor (packed calling convention)")
        t0 = time.perf_counter()
        compiled = compile(graph, model_name="kws", progress=lambda m: None)
        compiled.source_model_name, compiled.source_model_bytes = path.name, path.read_bytes()
        for line in compiled.summary().splitlines():
            _detail(line)
        out_dir = Path.cwd() / "build" / "demo"
        tar = export_model_library_format(compiled, out_dir / "kws.tar")
        shown = tar.relative_to(Path.cwd()) if tar.is_relative_to(Path.cwd()) else tar
        _detail(f"Model Library Format: {shown} ({tar.stat().st_size // 1024} KiB) in "
                f"{time.perf_counter() - t0:.2f} s")

        _step(3, "building host firmware: CRT + RPC server + the generated system library")
        t0 = time.perf_counter()
        firmware = build_firmware(compiled, "host")
        _detail(f"{firmware.name} ready in {time.perf_counter() - t0:.2f} s (cached by content hash)")

        _step(4, f"running {N_INPUTS} random inputs over RPC ({compiled.run_function})")
        rng = np.random.default_rng(0)
        sets = [random_inputs(compiled, rng) for _ in range(N_INPUTS)]
        results, latency = [], None
        with get_platform("host").start(firmware) as session:
            for i, inputs in enumerate(sets):
                outputs, lat = run_on_device(session, compiled, inputs, repeat=5 if i == 0 else 0)
                latency = lat if lat is not None else latency
                results.append(outputs)
        _detail(f"device latency: {latency * 1e3:.3f} ms per inference (median of 5, device timer)")

        _step(5, "checking against TFLite's reference kernels (ai-edge-litert, in a subprocess)")
        refs = reference_outputs(path, sets)
    except UtvmError as exc:
        print(f"\nutvm demo: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    exact = 0
    for i, (got, want) in enumerate(zip(results, refs, strict=True)):
        verdict = compare(got, want)
        bit_exact, max_err = verdict.bit_exact, verdict.max_abs_err
        exact += bit_exact
        scores = got[0].reshape(-1)
        top = int(np.argmax(scores))
        label = KWS_LABELS[top] if top < len(KWS_LABELS) else str(top)
        _detail(f"input {i}: top class {label:>7} "
                f"(score {int(scores[top])}), {'bit-exact' if bit_exact else f'MISMATCH (max err {max_err:g})'}")
    p = compiled.plan
    print(f"\nsummary: {len(compiled.operators)} operator functions from {len(graph.nodes)} imported ops, "
          f"workspace {p.workspace_bytes} B (lower bound {p.lower_bound_bytes} B, without reuse "
          f"{p.no_reuse_bytes} B), constants {compiled.constant_bytes} B, latency {latency * 1e3:.3f} ms, "
          f"{exact}/{N_INPUTS} outputs bit-exact with TFLite")
    return 0 if exact == N_INPUTS else 1


if __name__ == "__main__":
    sys.exit(main())
