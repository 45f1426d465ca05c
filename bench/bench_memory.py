"""RAM below the layer-by-layer bound: TFLM's arena, utvm's layer-by-layer plan and its memory-aware plans (row-patch
stages, in-place depthwise, kernel schedules of less scratch: utvm.compiler.patch), with the instructions of each
build on a QEMU board.

    python -m bench memory [-- --board qemu-cortex-m4] [--models mnv1_96_b13,kws_ref_model] [--overhead 10]
                           [--no-run] [--json F]

Models: MobileNetV1-style int8 models built here as the tests build them (tests/compiler/test_patch.py,
`mobilenet_tflite`: 96x96x3 input, a 3x3/2 conv, depthwise-separable blocks, width 0.25, an average pool and a
fully connected head; random weights, seeded), with 13, 7 and 5 blocks; and KWS (DS-CNN) and ResNet-8 from the
repository's models/mlperf_tiny ($UTVM_MODELS_DIR overrides the folder).

Columns:
- TFLM head / total: `tflite-micro`'s Python interpreter, `print_allocations()` after allocating the model: the
  arena's head (TFLM's planned activations) and its total (head + tail: the interpreter's persistent data);
- bound: the layer-by-layer lower bound of utvm's default build for the board's target (the most bytes live at
  one step when every operator holds its whole input and output, kernel scratch included);
- target: the issue's RAM target, min(0.4 x TFLM's total, 0.6 x the bound); peak@target: the workspace of
  `utvm compile --memory-limit <target> --patch-overhead N%` (the fastest build that fits; "-" when none does
  within the overhead); min: `--memory-limit min` (the smallest peak reachable within the overhead);
- each with its ratios to TFLM's total arena and to the bound, and `insn`: the instructions of one inference
  (`tvmgen_default_run`, from the `bl` in main() to its return, utvm's timing plugin) of its `utvm deploy`
  firmware (--rounding double --unpacked-api --seed 1, gcc -O2) over those of the default build; =host: every
  build's outputs equal the host reference's (TFLM's kernels).

Targets (issue 21) on the MobileNet-style models: peak <= 0.4 x TFLM's total arena, <= 0.6 x the bound, <= +10%
instructions.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
ROUNDING = "double"
SEED = 1
#: MobileNet-style models of the benchmark: name -> (blocks, seed)
MOBILENETS = {"mnv1_96_b13": (13, 0), "mnv1_96_b7": (7, 1), "mnv1_96_b5": (5, 2)}
FILES = {"kws_ref_model": "mlperf_tiny/kws_ref_model.tflite",
         "pretrainedResnet_quant": "mlperf_tiny/pretrainedResnet_quant.tflite"}
MODELS = (*MOBILENETS, *FILES)

_TFLM_SCRIPT = """\
import sys
from tflite_micro.python.tflite_micro import runtime
it = runtime.Interpreter.from_file(sys.argv[1], arena_size=1 << 22)
it.print_allocations()
"""


def tflm_arena(model: Path) -> dict[str, int]:
    """TFLM's arena head and total for `model` (print_allocations, which writes to the C stdout: a subprocess)."""
    p = subprocess.run([sys.executable, "-c", _TFLM_SCRIPT, str(model)], capture_output=True, text=True, timeout=300)
    out: dict[str, int] = {}
    for line in (p.stdout + "\n" + p.stderr).splitlines():
        for key in ("total", "head", "tail"):
            tag = f"Arena allocation {key} "
            if tag in line:
                out[key] = int(line.split(tag, 1)[1].split()[0])
    if "total" not in out or "head" not in out:
        raise RuntimeError(f"tflite-micro print_allocations gave no arena figures for {model}: "
                           f"{(p.stderr or p.stdout).strip()[-300:]}")
    return out


def mobilenet_bytes(blocks: int, seed: int) -> bytes:
    sys.path.insert(0, str(REPO / "tests"))
    sys.path.insert(0, str(REPO / "tests" / "compiler"))
    from test_patch import mobilenet_tflite

    return mobilenet_tflite(seed=seed, size=96, width=0.25, blocks=blocks)


def build(model: Path, target: str, limit: int | str | None, overhead: float) -> Any:
    from utvm.compiler import compile as compile_graph
    from utvm.frontend import load

    return compile_graph(load(model), model_name="default", unpacked_api=True, rounding=ROUNDING, target=target,
                         memory_limit=limit, patch_overhead=overhead)


def instructions(compiled: Any, board: str, refs: list[Any]) -> tuple[int, bool]:
    """(instructions of one inference, outputs equal to `refs`) of the deploy firmware of `compiled` on `board`."""
    import numpy as np

    from bench.bench_kernels import deploy_elf, plugin_count
    from utvm.platform.qemu.deploy import parse_deploy_output

    elf = deploy_elf(compiled, board)
    insns, _cycles, uart = plugin_count(board, elf, f"{compiled.prefix}_run")
    outs = list(parse_deploy_output(uart).outputs.values())
    same = len(outs) == len(refs) and all(np.array_equal(np.asarray(o).reshape(-1), np.asarray(r).reshape(-1))
                                          for o, r in zip(outs, refs, strict=True))
    return insns, same


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench memory", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--board", default="qemu-cortex-m4", help="the QEMU board (default qemu-cortex-m4)")
    ap.add_argument("--models", default=None, help=f"comma-separated subset of {', '.join(MODELS)}")
    ap.add_argument("--overhead", type=float, default=10.0, help="--patch-overhead in percent (default 10)")
    ap.add_argument("--no-run", action="store_true", help="compile only: no QEMU instruction counts")
    ap.add_argument("--json", type=Path, default=None, help="also write the figures to this file")
    ns = ap.parse_args(argv)
    from bench.bench_kernels import reference_outputs
    from utvm.errors import CompileError
    from utvm.platform import get_platform_class
    from utvm.support.models import models_dir

    target = get_platform_class(ns.board).target
    names = list(MODELS) if not ns.models else ns.models.split(",")
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        print(f"unknown model(s) {', '.join(unknown)}; choose from {', '.join(MODELS)}", file=sys.stderr)
        return 2
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="utvm-bench-memory-") as tmp:
        for name in names:
            if name in MOBILENETS:
                path = Path(tmp) / f"{name}.tflite"
                path.write_bytes(mobilenet_bytes(*MOBILENETS[name]))
            else:
                path = models_dir() / FILES[name]
            arena = tflm_arena(path)
            lbl = build(path, target, None, ns.overhead / 100)
            bound = lbl.metadata["modules"]["default"]["memory"]["layer_by_layer_bound_bytes"]
            goal = int(min(0.4 * arena["total"], 0.6 * bound))
            builds: dict[str, Any] = {"lbl": lbl, "min": build(path, target, "min", ns.overhead / 100)}
            try:
                builds["target"] = build(path, target, goal, ns.overhead / 100)
            except CompileError:
                builds["target"] = None
            row: dict[str, Any] = {"model": name, "tflm_head": arena["head"], "tflm_total": arena["total"],
                                   "bound": bound, "layer_by_layer": lbl.plan.workspace_bytes, "goal": goal}
            for key in ("target", "min"):
                c = builds[key]
                if c is None:
                    row[key] = None
                    continue
                mem = c.metadata["modules"]["default"]["memory"]
                row[key] = {"peak": mem["peak_bytes"], "extra_macs": mem["extra_macs"],
                            "stages": mem["memory_aware"]["stages"], "inplace": mem["memory_aware"]["inplace_nodes"],
                            "estimated_overhead": mem["memory_aware"].get("overhead", 0)}
            if not ns.no_run:
                refs = reference_outputs(path, lbl)
                row["insn_lbl"], same = instructions(lbl, ns.board, refs)
                for key in ("target", "min"):
                    if builds[key] is not None:
                        row[key]["insn"], ok = instructions(builds[key], ns.board, refs)
                        same = same and ok
                row["same_as_host"] = same
            rows.append(row)
            print(f"  measured {name}", file=sys.stderr, flush=True)
    report(rows, ns)
    if ns.json:
        ns.json.write_text(json.dumps({"board": ns.board, "target": target, "overhead_percent": ns.overhead,
                                       "rows": rows}, indent=1))
    return 0


def report(rows: list[dict[str, Any]], ns: argparse.Namespace) -> None:
    print(f"RAM (bytes) and instructions per inference on {ns.board} (target of the board; utvm deploy --rounding "
          f"{ROUNDING} --unpacked-api --seed {SEED}, gcc -O2); plans: utvm compile --memory-limit <target>|min "
          f"--patch-overhead {ns.overhead:g}%; insn: instructions over the layer-by-layer build's")
    head = (f"  {'model':<24} {'TFLM head':>9} {'TFLM total':>10} {'bound':>6} {'M insn':>7} {'target':>6} "
            f"{'peak@tgt':>8} {'/TFLM':>5} {'/bound':>6} {'insn':>5} {'min':>6} {'/TFLM':>5} {'/bound':>6} "
            f"{'insn':>5} {'=host':>5}  plan at target; min")
    print(head)
    print("  " + "-" * (len(head) - 2))

    def cols(r: dict[str, Any], key: str) -> str:
        v = r[key]
        if v is None:
            return f"{'-':>8} {'-':>5} {'-':>6} {'-':>5}" if key == "target" else f"{'-':>6} {'-':>5} {'-':>6} {'-':>5}"
        insn = f"{v['insn'] / r['insn_lbl']:.3f}" if "insn" in v else "-"
        width = 8 if key == "target" else 6
        return f"{v['peak']:>{width}} {v['peak'] / r['tflm_total']:>5.2f} {v['peak'] / r['bound']:>6.3f} {insn:>5}"

    def plan(v: dict[str, Any] | None) -> str:
        if v is None:
            return "-"
        out = ", ".join(f"{s['first_node']}..{s['last_node']}/{s['rows_per_patch']}" for s in v["stages"])
        out = out or "schedules"
        return out + (f" +in place {v['inplace']}" if v["inplace"] else "")

    for r in rows:
        run = "insn_lbl" in r
        print(f"  {r['model']:<24} {r['tflm_head']:>9} {r['tflm_total']:>10} {r['bound']:>6} "
              f"{r['insn_lbl'] / 1e6 if run else 0:>7.3f} {r['goal']:>6} {cols(r, 'target')} {cols(r, 'min')} "
              f"{('yes' if r['same_as_host'] else 'NO') if run else '-':>5}  {plan(r['target'])}; {plan(r['min'])}")
