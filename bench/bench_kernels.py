"""Instructions and estimated cycles per inference on a QEMU Cortex-M board: utvm default and tuned against
TFLM's peer firmware (reference kernels and CMSIS-NN), all counted in this run under utvm's timing plugin.

    python -m bench kernels -- [--board qemu-cortex-m4] [--peer DIR] [--models kws_ref_model] [--trials 32]
                               [--tuning-log DIR] [--no-tune] [--json F]

Boards: qemu-cortex-m4 (default; QEMU mps2-an386), qemu-cortex-m55 (mps3-an547, Helium), qemu-cortex-m7
(mps2-an500) and qemu-cortex-m33 (mps2-an505). Every count comes from utvm's cycles plugin
(utvm.platform.qemu.timing, docs/timing.md) with the board's core model: the instructions and the estimated
cycles of one inference, from the `bl` that calls the model in main() (`tvmgen_default_run` for utvm,
`MicroInterpreter::Invoke()` for TFLM; found with arm-none-eabi-objdump) to its return address.

The peer (count.py and the TFLM firmware: `<peer>/firmware/<model>/` for the M4, `<peer>/m55/firmware/<model>/`
for the M55, each with tflm_ref.elf and tflm_cmsis_nn.elf) is not part of this repository: name its folder with
--peer DIR or $UTVM_PEER_DIR. Without it the benchmark says so in one line and measures nothing on the M4 and
M55. count.py also counts the peer ELFs (`--board mps3-an547` for the M55): the plugin's instructions must equal
its figure (a cross-check of the region), and it gives the firmware's outputs, sizes and arena. The M7 and M33
have no peer firmware: the benchmark prints utvm's counts and whether its outputs equal the host reference's.

For each model (kws_ref_model, pretrainedResnet_quant, ad01_int8 from the repository's models/mlperf_tiny,
micro_speech_quantized from models/tflm; $UTVM_MODELS_DIR overrides the folder):
- utvm default: the `utvm deploy` firmware for the board with --rounding double --unpacked-api --seed 1 (its
  sample input is exactly the one linked into the peer firmware), built with the board's gcc -O2;
- utvm tuned: the same with the schedules `--tuning-log` would apply (utvm.tune.budget.choose_schedules,
  within its default flash and workspace budgets) from a log this benchmark makes with `utvm.tune` on the
  board (--trials per task, the tuner's default cost for the board; cached under utvm's cache directory by
  board, model, kernel sources and budget, so a second run only counts), or from --tuning-log DIR
  (DIR/<model>.jsonl; tuned there if missing); --no-tune skips it;
- TFLM ref / TFLM CMSIS-NN: the peer's ELFs.

Columns per variant: millions of instructions and of estimated cycles, cycles per instruction, the ratios to
TFLM CMSIS-NN on both (below 1: utvm is ahead), flash (text + data minus the sample input: code, weights and
runtime), weights (utvm: the `constants` of the linker-map split `utvm size` uses; TFLM: the embedded .tflite
file), RAM (utvm: the planned workspace; TFLM: the interpreter's arena), and =peer / =host: whether the outputs
equal TFLM CMSIS-NN's and TFLM ref's (same input bytes) / the host reference interpreter's.
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

import numpy as np

from utvm.support.models import models_dir

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
ROUNDING = "double"
SEED = 1
MODELS = {  # name -> path under the models directory
    "kws_ref_model": "mlperf_tiny/kws_ref_model.tflite",
    "pretrainedResnet_quant": "mlperf_tiny/pretrainedResnet_quant.tflite",
    "ad01_int8": "mlperf_tiny/ad01_int8.tflite",
    "micro_speech_quantized": "tflm/micro_speech_quantized.tflite",
}
DEFAULT_TRIALS = 32
#: board -> the peer's firmware folder under the peer directory (None: no peer firmware for this core)
PEER_FIRMWARE = {"qemu-cortex-m4": "firmware", "qemu-cortex-m55": "m55/firmware", "qemu-cortex-m7": None,
                 "qemu-cortex-m33": None}
PEER_ENV = "UTVM_PEER_DIR"
PEER_FILES = ("tflm_ref.elf", "tflm_cmsis_nn.elf")
TFLM_INVOKE = "_ZN6tflite16MicroInterpreter6InvokeEv"  # tflite::MicroInterpreter::Invoke()
VARIANTS = ("tflm_ref", "tflm_cmsis_nn", "default", "tuned")
LABELS = {"tflm_ref": "TFLM ref", "tflm_cmsis_nn": "TFLM CMSIS-NN", "default": "utvm default", "tuned": "utvm tuned"}


def flags(board: str) -> str:
    return f"utvm deploy --platform {board} --rounding {ROUNDING} --unpacked-api --seed {SEED} (gcc -O2)"


def missing_peer(peer: Path | None, sub: str, names: list[str]) -> str | None:
    """None when `peer` has count.py and both firmware of every model in `names` under `sub`; else what is
    missing."""
    if peer is None:
        return f"no peer folder given (--peer DIR or ${PEER_ENV})"
    wanted = [peer / "count.py"] + [peer / sub / n / f for n in names for f in PEER_FILES]
    absent = [str(p) for p in wanted if not p.is_file()]
    return f"{absent[0]} is missing" + (f" (and {len(absent) - 1} more)" if len(absent) > 1 else "") if absent else None


def count_py(peer: Path, elf: Path, machine: str) -> dict[str, Any]:
    """count.py's JSON for `elf` (one boot, TFLM's Invoke())."""
    cmd = [sys.executable, str(peer / "count.py"), "--board", machine, str(elf)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    if p.returncode != 0:
        raise RuntimeError(f"count.py {elf}: {p.stderr.strip() or p.stdout.strip()}")
    return json.loads(p.stdout)


def plugin_count(board: str, elf: Path, symbol: str) -> tuple[int, int, str]:
    """(instructions, estimated cycles, UART output) of the first call of `symbol` in main() under the board's
    timing model; every call of a boot must give the same figures."""
    from utvm.platform.qemu import timing
    from utvm.platform.qemu.boards import get_board

    b = get_board(board)
    assert b.timing_model is not None, board
    run = timing.count_calls(b, elf, b.timing_model, timing.call_sites(elf, [symbol]), timeout=900)
    if run.exit_status != 0 or not run.regions:
        raise RuntimeError(f"{elf}: exit status {run.exit_status}, {len(run.regions)} call(s) of {symbol} counted")
    if len(set(run.regions)) != 1:
        raise RuntimeError(f"{elf}: the calls of {symbol} differ: {run.regions}")
    return run.regions[0].instructions, run.regions[0].cycles, run.uart


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


def tuning_log(name: str, model: Path, board: str, target: str, ns: argparse.Namespace) -> Path:
    """The log of `model`: given (--tuning-log DIR) or cached; tuned (resumed) when it lacks trials."""
    from utvm.support.cc import cache_dir
    from utvm.tune.driver import tune

    if ns.tuning_log is not None:
        log = Path(ns.tuning_log) / f"{name}.jsonl"
    else:
        key = hashlib.sha256(model.read_bytes()).hexdigest()[:12]
        log = (cache_dir() / "bench-tuning" /
               f"{board}-{name}-{key}-{kernel_sources_hash()}-{ns.strategy}-t{ns.trials}-s{ns.seed}.jsonl")
    t0 = time.monotonic()

    def say(msg: str) -> None:
        print(f"  [{time.monotonic() - t0:6.1f}s] {name}: {msg}", file=sys.stderr, flush=True)

    result = tune(model, log, board, target=target, rounding=ROUNDING, trials=ns.trials, strategy=ns.strategy,
                  seed=ns.seed, progress=say if not ns.quiet else None)
    if result.measured:
        say(f"tuned: {result.measured} candidates measured in {result.seconds:.0f} s -> {log}")
    return log


def compile_model(model: Path, target: str, log: Path | None) -> Any:
    """The model compiled as this benchmark's flags say; with `log`, the schedules `--tuning-log` applies."""
    from utvm.compiler import compile as compile_graph
    from utvm.frontend import load

    graph = load(model)
    compiled = compile_graph(graph, model_name="default", unpacked_api=True, rounding=ROUNDING, target=target)
    if log is None:
        return compiled
    from utvm.tune import log as tlog
    from utvm.tune.budget import choose_schedules

    choice = choose_schedules(tlog.read(log), compiled, tlog.COMMAND_BUDGETS, name=f"tuning log {log}")
    return compile_graph(load(model), model_name="default", unpacked_api=True, rounding=ROUNDING, target=target,
                         schedules=choice.schedules)


def deploy_elf(compiled: Any, board: str) -> Path:
    """Build (cached) the `utvm deploy` firmware of `compiled` for `board`."""
    from utvm.evaluate import read_inputs
    from utvm.platform.qemu.deploy import deploy_spec
    from utvm.platform.qemu.project import build_firmware

    inputs = read_inputs(compiled, [], SEED)  # what `utvm deploy --seed 1` writes
    spec = deploy_spec(compiled, board, inputs, note=f"Random values (utvm deploy --seed {SEED})")
    return build_firmware(spec, "deploy") / "build" / "firmware.elf"


def utvm_figures(compiled: Any, board: str, model: Path, refs: list[np.ndarray]) -> dict[str, Any]:
    from utvm.platform.qemu.deploy import parse_deploy_output
    from utvm.platform.qemu.footprint import size_footprint

    elf = deploy_elf(compiled, board)
    insns, cycles, uart = plugin_count(board, elf, f"{compiled.prefix}_run")
    outputs = list(parse_deploy_output(uart).outputs.values())
    fp = size_footprint(elf)
    totals, consts = fp.totals(), fp.categories["constants"]
    in_bytes = sum(x.size for x in compiled.interface.inputs)
    return {"instructions": insns, "cycles_est": cycles, "flash": totals["text"] + totals["data"] - in_bytes,
            "weights": consts["text"] + consts["data"], "ram": compiled.plan.workspace_bytes,
            "outputs": [o.reshape(-1).tolist() for o in outputs],
            "same_as_host": len(outputs) == len(refs) and all(np.array_equal(o, r) for o, r in zip(outputs, refs,
                                                                                                   strict=True)),
            "given": sum(1 for op in compiled.operators if op.schedule_source == "given"),
            "tasks": sum(1 for op in compiled.operators if op.task)}


def peer_figures(peer: Path, elf: Path, board: str, model: Path, in_bytes: int) -> dict[str, Any]:
    from utvm.platform.qemu.boards import get_board

    c = count_py(peer, elf, get_board(board).machine)
    insns, cycles, _uart = plugin_count(board, elf, TFLM_INVOKE)
    if insns != c["instructions"]:
        raise RuntimeError(f"{elf}: the timing plugin counted {insns} instructions, count.py {c['instructions']}: "
                           "the regions differ")
    return {"instructions": insns, "cycles_est": cycles, "flash": c["text"] + c["data"] - in_bytes,
            "weights": model.stat().st_size, "ram": c["arena_bytes"],
            "outputs": [o["values"] for o in c["outputs"]]}


def reference_outputs(model: Path, compiled: Any) -> list[np.ndarray]:
    from utvm.evaluate import read_inputs, reference

    refs, _by = reference(model, compiled, read_inputs(compiled, [], SEED))
    return [np.asarray(r) for r in refs]


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench kernels", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--board", default="qemu-cortex-m4", choices=sorted(PEER_FIRMWARE),
                    help="the QEMU board (default qemu-cortex-m4)")
    ap.add_argument("--models", default=None, help=f"comma-separated subset of {', '.join(MODELS)}")
    ap.add_argument("--trials", type=int, default=DEFAULT_TRIALS, help=f"tuning trials per task ({DEFAULT_TRIALS})")
    ap.add_argument("--strategy", default=None, choices=("grid", "random", "model"),
                    help="tuning strategy (default: model when scikit-learn is installed, else random)")
    ap.add_argument("--seed", type=int, default=0, help="tuning seed (default 0)")
    ap.add_argument("--tuning-log", default=None, metavar="DIR",
                    help="use (and complete) DIR/<model>.jsonl instead of the cached logs")
    ap.add_argument("--no-tune", action="store_true", help="measure the default build only")
    ap.add_argument("--json", type=Path, default=None, help="also write the figures to this file")
    ap.add_argument("--peer", type=Path, default=None, metavar="DIR",
                    help=f"the TFLM peer folder: count.py and firmware/<model>/*.elf (default ${PEER_ENV})")
    ap.add_argument("-q", "--quiet", action="store_true", help="no tuning progress lines")
    ns = ap.parse_args(argv)
    from utvm.platform import get_platform_class
    from utvm.platform.qemu import timing
    from utvm.tune.strategy import resolve_strategy

    ns.strategy = resolve_strategy(ns.strategy or "auto")
    from utvm.platform.qemu.boards import get_board

    board = ns.board
    target = get_platform_class(board).target
    core = get_board(board).timing_model
    assert core is not None, board
    names = list(MODELS) if not ns.models else ns.models.split(",")
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        print(f"unknown model(s) {', '.join(unknown)}; choose from {', '.join(MODELS)}", file=sys.stderr)
        return 2
    sub = PEER_FIRMWARE[board]
    peer = ns.peer or (Path(os.environ[PEER_ENV]) if os.environ.get(PEER_ENV) else None)
    if sub is not None:
        why = missing_peer(peer, sub, names)
        if why is not None:
            print(f"bench kernels: skipped, the TFLite Micro peer firmware for {board} is not available: {why}; it "
                  f"is not part of this repository: get the project's peer folder (count.py + {sub}/<model>/"
                  "tflm_ref.elf, tflm_cmsis_nn.elf) and pass --peer DIR or set UTVM_PEER_DIR", file=sys.stderr)
            return 0
    if not timing.enabled():
        print(f"bench kernels: {timing.ENV_SWITCH} turns the timing plugin off; unset it", file=sys.stderr)
        return 2
    kinds = [k for k in VARIANTS if (sub is not None or not k.startswith("tflm")) and not (ns.no_tune and k == "tuned")]
    rows: list[dict[str, Any]] = []
    for name in names:
        model = models_dir() / MODELS[name]
        row: dict[str, Any] = {"model": name}
        default = compile_model(model, target, None)
        refs = reference_outputs(model, default)
        row["default"] = utvm_figures(default, board, model, refs)
        if "tuned" in kinds:
            log = tuning_log(name, model, board, target, ns)
            row["log"] = str(log)
            row["tuned"] = utvm_figures(compile_model(model, target, log), board, model, refs)
        if sub is not None:
            assert peer is not None
            in_bytes = sum(x.size for x in default.interface.inputs)
            for kind in ("tflm_ref", "tflm_cmsis_nn"):
                row[kind] = peer_figures(peer, peer / sub / name / f"{kind}.elf", board, model, in_bytes)
            for kind in ("default", "tuned"):
                if kind in row:
                    row[kind]["same_as_cmsis_nn"] = row[kind]["outputs"] == row["tflm_cmsis_nn"]["outputs"]
                    row[kind]["same_as_ref"] = row[kind]["outputs"] == row["tflm_ref"]["outputs"]
        rows.append(row)
        print(f"  counted {name}", file=sys.stderr, flush=True)
    report(rows, kinds, board, core, ns)
    if ns.json:
        for r in rows:
            for k in kinds:
                r[k].pop("outputs", None)
        ns.json.write_text(json.dumps({"board": board, "timing_model": core, "flags": flags(board),
                                       "strategy": ns.strategy, "trials": ns.trials, "rows": rows}, indent=1))
    return 0


def report(rows: list[dict[str, Any]], kinds: list[str], board: str, core: str, ns: argparse.Namespace) -> None:
    from utvm.platform.qemu.boards import get_board

    base = "tflm_cmsis_nn" if "tflm_cmsis_nn" in kinds else None
    print(f"per inference on {board} (QEMU {get_board(board).machine}, -icount; cycles: the {core} timing model, "
          f"docs/timing.md); utvm: {flags(board)}"
          + ("" if "tuned" not in kinds else f"; tuned: utvm tune --platform {board} --rounding {ROUNDING} "
             f"--strategy {ns.strategy} --trials {ns.trials} --seed {ns.seed}, applied as --tuning-log does"))
    print("  M insn / M cyc: millions of instructions / estimated cycles; /CMSIS: ratio to TFLM CMSIS-NN (below 1: "
          "ahead); flash: text + data minus the input; =peer: outputs equal CMSIS-NN's and ref's; =host: the host "
          "reference's")
    head = (f"  {'model':<24} {'variant':<14} {'M insn':>8} {'M cyc':>8} {'cyc/insn':>8} {'insn/CMSIS':>10} "
            f"{'cyc/CMSIS':>9} {'flash B':>8} {'weights B':>9} {'RAM B':>7} {'=peer':>6} {'=host':>6}")
    print(head)
    print("  " + "-" * (len(head) - 2))
    for r in rows:
        for i, k in enumerate(kinds):
            v = r[k]
            ratios = ["-", "-"]
            if base is not None:
                ratios = [f"{v['instructions'] / r[base]['instructions']:.3f}",
                          f"{v['cycles_est'] / r[base]['cycles_est']:.3f}"]
            peer_same = "-"
            if "same_as_cmsis_nn" in v:
                peer_same = "yes" if v["same_as_cmsis_nn"] and v["same_as_ref"] else (
                    "cmsis" if v["same_as_cmsis_nn"] else "NO")
            host_same = "-" if "same_as_host" not in v else ("yes" if v["same_as_host"] else "NO")
            ram = "-" if v["ram"] is None else str(v["ram"])
            print(f"  {r['model'] if i == 0 else '':<24} {LABELS[k]:<14} {v['instructions'] / 1e6:8.3f} "
                  f"{v['cycles_est'] / 1e6:8.3f} {v['cycles_est'] / v['instructions']:8.3f} {ratios[0]:>10} "
                  f"{ratios[1]:>9} {v['flash']:8d} {v['weights']:9d} {ram:>7} {peer_same:>6} {host_same:>6}")
    if rows and base is not None:
        import statistics

        gm = statistics.geometric_mean
        for kind in ("default", "tuned"):
            if kind in kinds:
                insn = gm(r[kind]["instructions"] / r[base]["instructions"] for r in rows)
                cyc = gm(r[kind]["cycles_est"] / r[base]["cycles_est"] for r in rows)
                print(f"  geometric mean over {len(rows)} models, utvm {kind} / CMSIS-NN: instructions {insn:.3f}, "
                      f"estimated cycles {cyc:.3f}")
    if "tuned" in kinds:
        print("  tuned: " + ", ".join(f"{r['model']}: {r['tuned']['given']}/{r['tuned']['tasks']} operators given a "
                                      f"schedule (log {r['log']})" for r in rows))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
