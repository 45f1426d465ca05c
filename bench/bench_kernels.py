"""Instructions per inference on Cortex-M4 (QEMU mps2-an386): utvm default and tuned against TFLM's peer
firmware (reference kernels and CMSIS-NN), all counted in this run with the peer's count.py.

The peer (count.py, firmware/<model>/tflm_ref.elf and tflm_cmsis_nn.elf: TFLite Micro built for mps2-an386
with its reference and its CMSIS-NN kernels) is not part of this repository: name its folder with --peer DIR
or $UTVM_PEER_DIR. Without it the benchmark says so in one line and measures nothing.

For each model (kws_ref_model, pretrainedResnet_quant, ad01_int8 from the repository's models/mlperf_tiny,
micro_speech_quantized from models/tflm; $UTVM_MODELS_DIR overrides the folder):
- utvm default: the `utvm deploy` firmware for qemu-cortex-m4 with --rounding double --unpacked-api
  --seed 1 (its sample input is exactly the one linked into the peer firmware), built with the board's
  gcc -O2, counted with `count.py --call tvmgen_default_run` (the call of the model's entry in main());
- utvm tuned: the same with --tuning-log: a log this benchmark makes with `utvm.tune` (on qemu-cortex-m4,
  --trials per task, cached under utvm's cache directory by model, kernel sources and budget, so a second
  run only counts), or the logs in --tuning-log DIR (DIR/<model>.jsonl; tuned there if missing);
- TFLM ref / TFLM CMSIS-NN: <peer>/firmware/<model>/tflm_ref.elf and tflm_cmsis_nn.elf, counted the
  same way (`count.py`, Invoke()).

Columns: instructions per inference (millions), the ratios utvm / CMSIS-NN and utvm / TFLM-ref (below 1:
utvm executes fewer instructions), `=peer`: whether utvm's outputs are identical to the CMSIS-NN and the
reference firmware's (same input bytes), and code bytes: flash (text + data) minus weights. For utvm the
weights are the `constants` category of the linker-map split `utvm size` uses; for TFLM, the embedded
.tflite flatbuffer (its file size) and the input array are subtracted, which leaves the interpreter, the
kernels and the flatbuffer reader.

    python -m bench kernels -- [--peer DIR] [--models kws_ref_model] [--trials 32] [--tuning-log DIR] [--json F]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from utvm.support.models import models_dir

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
BOARD = "qemu-cortex-m4"
TARGET = "cortex-m4"
ROUNDING = "double"
SEED = 1
MODELS = {  # name -> path under the models directory
    "kws_ref_model": "mlperf_tiny/kws_ref_model.tflite",
    "pretrainedResnet_quant": "mlperf_tiny/pretrainedResnet_quant.tflite",
    "ad01_int8": "mlperf_tiny/ad01_int8.tflite",
    "micro_speech_quantized": "tflm/micro_speech_quantized.tflite",
}
DEFAULT_TRIALS = 32
FLAGS = f"utvm deploy --platform {BOARD} --rounding {ROUNDING} --unpacked-api --seed {SEED} (gcc -O2)"


PEER_ENV = "UTVM_PEER_DIR"
PEER_FILES = ("tflm_ref.elf", "tflm_cmsis_nn.elf")


def missing_peer(peer: Path | None, names: list[str]) -> str | None:
    """None when `peer` has count.py and both firmware of every model in `names`; else what is missing."""
    if peer is None:
        return f"no peer folder given (--peer DIR or ${PEER_ENV})"
    wanted = [peer / "count.py"] + [peer / "firmware" / n / f for n in names for f in PEER_FILES]
    absent = [str(p) for p in wanted if not p.is_file()]
    return f"{absent[0]} is missing" + (f" (and {len(absent) - 1} more)" if len(absent) > 1 else "") if absent else None


def count(peer: Path, elf: Path, call: str | None = None) -> dict[str, Any]:
    """count.py's JSON for `elf` (one boot)."""
    cmd = [sys.executable, str(peer / "count.py"), str(elf)]
    if call:
        cmd += ["--call", call]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    if p.returncode != 0:
        raise RuntimeError(f"count.py {elf}: {p.stderr.strip() or p.stdout.strip()}")
    return json.loads(p.stdout)


def kernel_sources_hash() -> str:
    """A hash of the compiler's kernel and schedule sources and of the tuner's: a cached log is remade when
    they change."""
    import utvm.compiler
    import utvm.tune

    root = Path(utvm.compiler.__file__).resolve().parent
    tune = Path(utvm.tune.__file__).resolve().parent
    h = hashlib.sha256()
    for p in sorted([*root.glob("kernels/*.py"), root / "schedule.py", root / "lower.py", *tune.glob("*.py")]):
        h.update(p.name.encode() + b"\0" + p.read_bytes())
    return h.hexdigest()[:16]


def tuning_log(name: str, model: Path, ns: argparse.Namespace) -> Path:
    """The log of `model`: given (--tuning-log DIR) or cached; tuned (resumed) when it lacks trials."""
    from utvm.support.cc import cache_dir
    from utvm.tune.driver import tune

    if ns.tuning_log is not None:
        log = Path(ns.tuning_log) / f"{name}.jsonl"
    else:
        key = hashlib.sha256(model.read_bytes()).hexdigest()[:12]
        log = (cache_dir() / "bench-tuning" /
               f"{name}-{key}-{kernel_sources_hash()}-{ns.strategy}-t{ns.trials}-s{ns.seed}.jsonl")
    t0 = time.monotonic()

    def say(msg: str) -> None:
        print(f"  [{time.monotonic() - t0:6.1f}s] {name}: {msg}", file=sys.stderr, flush=True)

    result = tune(model, log, BOARD, target=TARGET, rounding=ROUNDING, trials=ns.trials, strategy=ns.strategy,
                  seed=ns.seed, progress=say if not ns.quiet else None)
    if result.measured:
        say(f"tuned: {result.measured} candidates measured in {result.seconds:.0f} s -> {log}")
    return log


def deploy_elf(model: Path, log: Path | None) -> tuple[Path, Any]:
    """Build (cached) the `utvm deploy` firmware of `model` as this benchmark's flags say; (ELF, compiled)."""
    from utvm.compiler import compile as compile_graph
    from utvm.evaluate import read_inputs
    from utvm.frontend import load
    from utvm.platform.qemu.deploy import deploy_spec
    from utvm.platform.qemu.project import build_firmware
    from utvm.tune.log import best_schedules

    schedules = best_schedules(log, TARGET) if log is not None else None
    compiled = compile_graph(load(model), model_name="default", unpacked_api=True, rounding=ROUNDING,
                             target=TARGET, schedules=schedules)
    inputs = read_inputs(compiled, [], SEED)  # what `utvm deploy --seed 1` writes
    spec = deploy_spec(compiled, BOARD, inputs, note=f"Random values (utvm deploy --seed {SEED})")
    project = build_firmware(spec, "deploy")
    return project / "build" / "firmware.elf", compiled


def code_bytes_utvm(elf: Path) -> int:
    from utvm.platform.qemu.footprint import size_footprint

    fp = size_footprint(elf)
    totals, consts = fp.totals(), fp.categories["constants"]
    return (totals["text"] + totals["data"]) - (consts["text"] + consts["data"])


def code_bytes_peer(c: dict[str, Any], model: Path, input_bytes: int) -> int:
    return c["text"] + c["data"] - model.stat().st_size - input_bytes


def same_outputs(a: dict[str, Any], b: dict[str, Any]) -> bool:
    va = [o["values"] for o in a["outputs"]]
    vb = [o["values"] for o in b["outputs"]]
    return bool(va) and va == vb


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench kernels", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=None, help=f"comma-separated subset of {', '.join(MODELS)}")
    ap.add_argument("--trials", type=int, default=DEFAULT_TRIALS, help=f"tuning trials per task ({DEFAULT_TRIALS})")
    ap.add_argument("--strategy", default=None, choices=("grid", "random", "model"),
                    help="tuning strategy (default: model when scikit-learn is installed, else random)")
    ap.add_argument("--seed", type=int, default=0, help="tuning seed (default 0)")
    ap.add_argument("--tuning-log", default=None, metavar="DIR",
                    help="use (and complete) DIR/<model>.jsonl instead of the cached logs")
    ap.add_argument("--json", type=Path, default=None, help="also write the figures to this file")
    ap.add_argument("--peer", type=Path, default=None, metavar="DIR",
                    help=f"the TFLM peer folder: count.py and firmware/<model>/*.elf (default ${PEER_ENV})")
    ap.add_argument("-q", "--quiet", action="store_true", help="no tuning progress lines")
    ns = ap.parse_args(argv)
    from utvm.tune.strategy import resolve_strategy

    ns.strategy = resolve_strategy(ns.strategy or "auto")
    names = list(MODELS) if not ns.models else ns.models.split(",")
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        print(f"unknown model(s) {', '.join(unknown)}; choose from {', '.join(MODELS)}", file=sys.stderr)
        return 2
    peer = ns.peer or (Path(os.environ[PEER_ENV]) if os.environ.get(PEER_ENV) else None)
    why = missing_peer(peer, names)
    if why is not None:
        print(f"bench kernels: skipped, the TFLite Micro peer firmware is not available: {why}; it is not part of "
              "this repository: get the project's peer folder (count.py + firmware/<model>/tflm_ref.elf, "
              "tflm_cmsis_nn.elf) and pass --peer DIR or set UTVM_PEER_DIR", file=sys.stderr)
        return 0
    rows: list[dict[str, Any]] = []
    for name in names:
        model = models_dir() / MODELS[name]
        peer_dir = peer / "firmware" / name
        log = tuning_log(name, model, ns)
        row: dict[str, Any] = {"model": name, "log": str(log)}
        for kind, lg in (("default", None), ("tuned", log)):
            elf, compiled = deploy_elf(model, lg)
            c = count(peer, elf, "tvmgen_default_run")
            row[kind] = {"instructions": c["instructions"], "code_bytes": code_bytes_utvm(elf),
                         "given": sum(1 for op in compiled.operators if op.schedule_source == "given"),
                         "tasks": sum(1 for op in compiled.operators if op.task), "count": c}
            in_bytes = sum(x.size for x in compiled.interface.inputs)
        for kind in ("tflm_ref", "tflm_cmsis_nn"):
            c = count(peer, peer_dir / f"{kind}.elf")
            row[kind] = {"instructions": c["instructions"], "code_bytes": code_bytes_peer(c, model, in_bytes),
                         "count": c}
        for kind in ("default", "tuned"):
            row[kind]["same_as_cmsis_nn"] = same_outputs(row[kind]["count"], row["tflm_cmsis_nn"]["count"])
            row[kind]["same_as_ref"] = same_outputs(row[kind]["count"], row["tflm_ref"]["count"])
        rows.append(row)
        print(f"  counted {name}", file=sys.stderr, flush=True)

    print(f"instructions per inference on {BOARD} (QEMU mps2-an386, -icount, count.py); utvm: {FLAGS}; "
          f"tuned: utvm tune --platform {BOARD} --rounding {ROUNDING} --strategy {ns.strategy} "
          f"--trials {ns.trials} --seed {ns.seed}")
    print("  ratios: utvm / peer (below 1: utvm executes fewer instructions); =peer: outputs identical to "
          "TFLM CMSIS-NN / TFLM ref; code B: flash minus weights")
    head = (f"  {'model':<24} {'TFLM ref M':>10} {'CMSIS-NN M':>10} {'utvm M':>8} {'/CMSIS':>7} {'/ref':>6} "
            f"{'tuned M':>8} {'/CMSIS':>7} {'/ref':>6} {'=peer':>7} {'tuned':>6} "
            f"{'code B def':>10} {'tuned':>7} {'CMSIS':>7} {'ref':>7}")
    print(head)
    print("  " + "-" * (len(head) - 2))
    for r in rows:
        ref, cm = r["tflm_ref"]["instructions"], r["tflm_cmsis_nn"]["instructions"]
        d, t = r["default"]["instructions"], r["tuned"]["instructions"]
        same = all(r[k][f"same_as_{p}"] for k in ("default", "tuned") for p in ("cmsis_nn", "ref"))
        same_txt = "yes" if same else ("cmsis" if all(r[k]["same_as_cmsis_nn"] for k in ("default", "tuned"))
                                       else "NO")
        tasks = f"{r['tuned']['given']}/{r['tuned']['tasks']}"
        print(f"  {r['model']:<24} {ref / 1e6:10.3f} {cm / 1e6:10.3f} {d / 1e6:8.3f} {d / cm:7.3f} {d / ref:6.3f} "
              f"{t / 1e6:8.3f} {t / cm:7.3f} {t / ref:6.3f} {same_txt:>7} {tasks:>6} "
              f"{r['default']['code_bytes']:10d} {r['tuned']['code_bytes']:7d} "
              f"{r['tflm_cmsis_nn']['code_bytes']:7d} {r['tflm_ref']['code_bytes']:7d}")
    if rows:
        import statistics

        gm = statistics.geometric_mean
        def ratio(kind: str) -> float:
            return gm(r[kind]["instructions"] / r["tflm_cmsis_nn"]["instructions"] for r in rows)

        print(f"  geometric mean over {len(rows)} models: default / CMSIS-NN {ratio('default'):.3f}, "
              f"tuned / CMSIS-NN {ratio('tuned'):.3f}")
    print("  tuned: operator functions given a schedule by the log / operator functions with a task; logs: "
          + ", ".join(f"{r['model']}: {r['log']}" for r in rows))
    if ns.json:
        for r in rows:
            for k in ("default", "tuned", "tflm_ref", "tflm_cmsis_nn"):
                r[k].pop("count", None)
        ns.json.write_text(json.dumps({"flags": FLAGS, "strategy": ns.strategy, "trials": ns.trials, "rows": rows},
                                      indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
