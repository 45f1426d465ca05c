"""How `utvm tune` scales out: the same tuning job with 1 and 2 device workers on qemu-cortex-m4, and what the
QEMU runtime-library cache saves per candidate, all in one run.

    python -m bench tune_scaling -- [--model PATH] [--trials 64] [--batch 16] [--strategy auto]
                                    [--workers 2] [--cache-trials 16] [--json F]

Every run is the command a user types (`python -m utvm tune MODEL --platform qemu-cortex-m4 --rounding double
-o LOG -q`, plus `--workers N`), in a process of its own, timed from start to exit (Python, Ray's start and
stop included), on a cache whose runtime libraries are removed first (a fresh clone: the first firmware of the
run builds the runtime). The model defaults to KWS (models/mlperf_tiny/kws_ref_model.tflite) and the job to the
tuner's defaults (64 trials per task, 16 candidates per firmware, the auto strategy).

1. runtime cache off, 1 worker, --cache-trials per task: the cost per candidate before the cache
   (utvm.platform.qemu.project.RUNTIME_CACHE = False: every firmware compiles the C runtime);
2. the same with the cache: the cost per candidate after it;
3. the whole job with 1 worker;
4. the whole job with --workers devices: the wall time, the speed-up over 3.

Printed: a table of the runs (candidates, wall time, seconds per candidate, and for the 1-worker runs the CPU
seconds per candidate of the whole process tree, which other work on the machine does not change), the
speed-up, the per-candidate cost before and after the runtime cache (wall and CPU), and the machine's load
average before and after each run (other work on the machine slows the runs: the ratios are the figures, the
seconds are this machine's at this load). A farm's CPU is not counted: Ray's processes are not all this
process's descendants when they end.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from utvm.support.models import models_dir

PLATFORM = "qemu-cortex-m4"
ROUNDING = "double"


@dataclass
class Run:
    name: str
    workers: int
    runtime_cache: bool
    trials: int
    candidates: int
    seconds: float
    load_before: float
    load_after: float
    cpu: float  # CPU seconds of the run's process tree (1 worker: all of it)

    @property
    def per_candidate(self) -> float:
        return self.seconds / self.candidates if self.candidates else float("nan")

    @property
    def cpu_per_candidate(self) -> float:
        return self.cpu / self.candidates if self.candidates else float("nan")


def _tune(name: str, model: Path, workdir: Path, cache: Path, *, workers: int, runtime_cache: bool, trials: int,
          batch: int, strategy: str) -> Run:
    for entry in cache.glob("qemu-crt-*"):  # a cold runtime, as on a fresh clone
        shutil.rmtree(entry, ignore_errors=True)
    log = workdir / f"{name.replace(' ', '_')}.jsonl"
    log.unlink(missing_ok=True)
    args = ["tune", str(model), "--platform", PLATFORM, "--rounding", ROUNDING, "--trials", str(trials), "--batch",
            str(batch), "--strategy", strategy, "-o", str(log), "-q"]
    if workers > 1:
        args += ["--workers", str(workers)]
    code = ("import sys\nfrom utvm.platform.qemu import project\n"
            f"project.RUNTIME_CACHE = {runtime_cache!r}\n"
            "from utvm.cli import main\nsys.exit(main(sys.argv[1:]))\n")
    env = {**os.environ, "UTVM_CACHE_DIR": str(cache)}
    load0 = os.getloadavg()[0]
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env)
    seconds = time.perf_counter() - t0
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    if proc.returncode != 0:
        raise RuntimeError(f"run {name!r} failed (exit {proc.returncode}): {proc.stderr.strip()[-2000:]}")
    m = re.search(r"measured (\d+) candidate\(s\)", proc.stdout)
    if m is None:
        raise RuntimeError(f"run {name!r}: no 'measured N candidate(s)' line in its output:\n{proc.stdout[-2000:]}")
    return Run(name, workers, runtime_cache, trials, int(m[1]), seconds, load0, os.getloadavg()[0], cpu)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench tune_scaling", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, default=models_dir() / "mlperf_tiny" / "kws_ref_model.tflite",
                    help="the model to tune (default: KWS)")
    ap.add_argument("--trials", type=int, default=64, help="trials per task of the whole job (default 64)")
    ap.add_argument("--batch", type=int, default=16, help="candidates per firmware (default 16)")
    ap.add_argument("--strategy", default="auto", choices=("auto", "grid", "random", "model"))
    ap.add_argument("--workers", type=int, default=2, help="devices of the farm run (default 2)")
    ap.add_argument("--cache-trials", type=int, default=16,
                    help="trials per task of the two runs that measure the runtime cache (default 16)")
    ap.add_argument("--json", type=Path, default=None, help="also write the figures to this file")
    ns = ap.parse_args(argv)
    try:
        import ray  # noqa: F401
    except ImportError:
        print("tune_scaling: needs Ray for the farm run: pip install 'utvm[distributed]'")
        return 1
    print(f"tune_scaling: {ns.model.name} on {PLATFORM} (--rounding {ROUNDING}), {ns.trials} trials per task, "
          f"batch {ns.batch}, strategy {ns.strategy}; {os.cpu_count()} CPUs, load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    with tempfile.TemporaryDirectory(prefix="utvm-bench-scaling-") as tmp:
        work, cache = Path(tmp), Path(tmp) / "cache"
        cache.mkdir()
        plan = [("runtime cache off", 1, False, ns.cache_trials), ("runtime cache on", 1, True, ns.cache_trials),
                ("1 worker", 1, True, ns.trials), (f"{ns.workers} workers", ns.workers, True, ns.trials)]
        runs = []
        for name, workers, runtime_cache, trials in plan:
            r = _tune(name, ns.model, work, cache, workers=workers, runtime_cache=runtime_cache, trials=trials,
                      batch=ns.batch, strategy=ns.strategy)
            print(f"  {name}: {r.candidates} candidates in {r.seconds:.1f} s (load {r.load_before:.2f} -> "
                  f"{r.load_after:.2f})", flush=True)
            runs.append(r)
    head = ("run", "workers", "runtime cache", "trials", "candidates", "wall s", "s/candidate", "CPU s/candidate",
            "load")
    rows = [(r.name, str(r.workers), "on" if r.runtime_cache else "off", str(r.trials), str(r.candidates),
             f"{r.seconds:.1f}", f"{r.per_candidate:.3f}", f"{r.cpu_per_candidate:.3f}" if r.workers == 1 else "-",
             f"{r.load_before:.1f}->{r.load_after:.1f}") for r in runs]
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(head)]
    print("  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)))
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))
    before, after, one, many = runs
    speedup = one.seconds / many.seconds
    saved = 1 - after.per_candidate / before.per_candidate
    saved_cpu = 1 - after.cpu_per_candidate / before.cpu_per_candidate
    print(f"speed-up with {ns.workers} workers: {speedup:.2f}x ({one.seconds:.1f} s -> {many.seconds:.1f} s)")
    print(f"runtime cache, per candidate: {before.per_candidate:.3f} s -> {after.per_candidate:.3f} s wall "
          f"({saved * 100:.0f}% less), {before.cpu_per_candidate:.3f} s -> {after.cpu_per_candidate:.3f} s CPU "
          f"({saved_cpu * 100:.0f}% less)")
    if ns.json is not None:
        ns.json.write_text(json.dumps({"runs": [asdict(r) for r in runs], "speedup": speedup,
                                       "runtime_cache_saving": saved, "runtime_cache_cpu_saving": saved_cpu},
                                      indent=2))
    return 0
