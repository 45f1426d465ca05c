"""Run the benchmarks: `python -m bench` runs all bench/bench_*.py; `python -m bench rpc` only bench_rpc.py.

Arguments after `--` go to every benchmark's main(). A benchmark that fails is reported and the others
still run; the exit status is non-zero if any failed.

Benchmarks: framing_c, models (host latency against LiteRT), rpc, and kernels (instructions and estimated
cycles per inference on a QEMU board, qemu-cortex-m4 unless --board says otherwise, utvm default and tuned
against TFLM's reference and CMSIS-NN firmware; its first run tunes the four models on QEMU, about ten
minutes, and caches the logs), and tune_scaling (`utvm tune` of KWS on qemu-cortex-m4 with 1 and 2 device
workers on Ray, and the runtime cache's saving per candidate; several minutes).
"""

from __future__ import annotations

import importlib
import sys
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent


def available() -> list[str]:
    return sorted(p.stem[len("bench_") :] for p in HERE.glob("bench_*.py"))


def main(argv: list[str]) -> int:
    if "--" in argv:
        split = argv.index("--")
        names, rest = argv[:split], argv[split + 1 :]
    else:
        names, rest = argv, []
    if any(n in ("-h", "--help") for n in names):
        print(__doc__.strip())
        print("benchmarks:", ", ".join(available()))
        return 0
    unknown = [n for n in names if n not in available()]
    if unknown:
        print(f"unknown benchmark(s) {', '.join(unknown)}; available: {', '.join(available())}", file=sys.stderr)
        return 2
    failed = []
    for name in names or available():
        print(f"=== bench_{name} ===", flush=True)
        t0 = time.perf_counter()
        try:
            rc = importlib.import_module(f"bench.bench_{name}").main(rest)
        except Exception:  # report and go on with the next benchmark
            traceback.print_exc()
            rc = 1
        print(
            f"=== bench_{name}: {'ok' if rc == 0 else 'FAILED'} in {time.perf_counter() - t0:.1f} s ===\n", flush=True
        )
        if rc:
            failed.append(name)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
