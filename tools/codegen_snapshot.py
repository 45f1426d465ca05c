"""Generated-C snapshot: proof that a refactor of the kernel layer did not change the code it writes.

From a checkout's root, with its .venv (for an older commit, a worktree and PYTHONPATH=<worktree>/src):

    python tools/codegen_snapshot.py snap OUT.json [--quick]   # hashes of the generated C
    python tools/codegen_snapshot.py diff BASE.json NEW.json   # same keys, same hashes?
    python tools/codegen_snapshot.py verify BASE.json [--quick]
        # every entry of BASE re-emitted with this checkout's code at the point as its space normalises it
        # (follows knob renames and conditional spaces); CODEGEN_SNAPSHOT_BLANK_GEMM=1 (at both ends) ignores
        # the shared-GEMM function name

For every graph (repo models + the kernel tests' batches) x target x rounding: the whole compiled C with the
default schedules, and every legal schedule point (capped, evenly spread) of every node with a space, emitted
alone. Text is normalised (comments dropped, whitespace collapsed), so only code changes count.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path.cwd()
sys.path.insert(0, str(ROOT / "tests" / "compiler"))
sys.path.insert(0, str(ROOT / "tests"))

TARGETS = ("host", "cortex-m0", "cortex-m3", "cortex-m4", "cortex-m7", "cortex-m33", "cortex-m55")
MAX_POINTS = 40


def norm(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    return re.sub(r"\s+", " ", text).strip()


def h(text: str) -> str:
    if os.environ.get("CODEGEN_SNAPSHOT_BLANK_GEMM"):
        text = re.sub(r"_gemm_[0-9a-f]{12}\b", "_gemm_X", text)
    return hashlib.sha256(norm(text).encode()).hexdigest()[:16]


def graphs(quick: bool) -> list[tuple[str, Any, bool]]:
    from utvm import frontend

    out: list[tuple[str, Any, bool]] = []
    for p in sorted((ROOT / "models").rglob("*")):
        if p.suffix in (".tflite", ".onnx") and "subset" not in str(p):
            try:
                out.append((str(p.relative_to(ROOT)), frontend.load(p), True))
            except Exception as exc:  # noqa: BLE001
                print("skip", p, exc, file=sys.stderr)
    import test_kernels_depthwise_dsp as dw
    import test_kernels_elementwise_tables as ew
    import test_kernels_pool_simd as pool
    import test_schedules_gemm as gemm

    rng = np.random.default_rng(7)
    for seed in range(1 if quick else 3):
        rng = np.random.default_rng(100 + seed)
        out.append((f"gemm{seed}", gemm.make_batch(rng, 6, 4).graph(), False))
        out.append((f"dw{seed}", dw.make_batch(rng, 8).graph(), False))
        out.append((f"pool{seed}", pool.make_batch(rng, 8).graph(), False))
        out.append((f"ew{seed}", ew.make_batch(rng, 10).graph(), False))
    extra = []
    for modname, fn, args in (("test_kernels_elementwise", "_batch", ("int8",)),
                              ("test_kernels_elementwise", "_batch", ("float32",)),
                              ("test_kernels_softmax", "_batch", ("int8",)),
                              ("test_kernels_softmax", "_batch", ("float32",)),
                              ("test_kernels_activation", "_int8_batch", ()),
                              ("test_kernels_quantize", "_batch", ()),
                              ("test_kernels_dense", "_batch", (np.random.default_rng(3),)),
                              ("test_kernels_pool", "_pool_batch", ("int8", np.random.default_rng(4))),
                              ("test_kernels_matmul", "_matmul_batch", ("int8", np.random.default_rng(5))),
                              ("test_kernels_matmul", "_matmul_batch", ("int16", np.random.default_rng(5)))):
        try:
            mod = __import__(modname)
            tag = f"{modname}.{fn}{[a for a in args if isinstance(a, str)]}"
            extra.append((tag, getattr(mod, fn)(*args).graph(), False))
        except Exception as exc:  # noqa: BLE001
            print("skip batch", modname, fn, exc, file=sys.stderr)
    return out + extra


def spread(points: list[dict]) -> list[dict]:
    if len(points) <= MAX_POINTS:
        return points
    step = len(points) / MAX_POINTS
    return [points[int(i * step)] for i in range(MAX_POINTS)]


def snap(quick: bool) -> dict[str, str]:
    from utvm.compiler import compile
    from utvm.compiler.kernels import FileScope, get_kernel, get_space
    from utvm.compiler.lower import fold_constant_aliases, kernel_contexts

    warnings.simplefilter("ignore")
    res: dict[str, str] = {}
    targets = ("host", "cortex-m3", "cortex-m4") if quick else TARGETS
    for gname, graph, passes in graphs(quick):
        print(gname, file=sys.stderr, flush=True)
        for target in targets:
            for rounding in ("single", "double"):
                tag = f"{gname}|{target}|{rounding}"
                try:
                    c = compile(graph, passes=passes, rounding=rounding, target=target)
                    for name, text in sorted(list(c.firmware_sources.items()) + list(c.includes.items())):
                        res[f"{tag}|model|{name}"] = h(text)
                    res[f"{tag}|model|libm"] = ",".join(c.libm_functions)
                except Exception as exc:  # noqa: BLE001
                    res[f"{tag}|model"] = f"ERROR {type(exc).__name__}: {exc}"[:200]
                    continue
                g = fold_constant_aliases(c.graph)
                done: set[str] = set()
                for ctx in kernel_contexts(g, "m", rounding, target):
                    space = get_space(ctx)
                    if not space.knobs:
                        continue
                    key = ctx.task_key()
                    if key in done:
                        continue
                    done.add(key)
                    for pt in spread(list(space.points())):
                        ctx2 = type(ctx)(ctx.node, ctx.index, g, rounding, ctx.func_name, FileScope("p"),
                                         dict(ctx.inputs._params), list(ctx.outputs), target,  # type: ignore[attr-defined]
                                         schedule=pt)
                        ctx2.task_count = ctx.task_count
                        ptag = f"{tag}|{ctx.node.op}|{json.dumps(pt, sort_keys=True)}|{ctx.index}"
                        try:
                            code = get_kernel(ctx.node, ctx.index)(ctx2)
                        except Exception as exc:  # noqa: BLE001
                            res[ptag] = f"ERROR {type(exc).__name__}: {exc}"[:200]
                            continue
                        f = ctx2.file
                        text = "\n".join([f.render_prelude(), *f.decls, code.body,
                                          getattr(code, "attributes", "")])
                        res[ptag] = (h(text) + f" s{code.scratch_bytes} p{getattr(code, 'persistent_bytes', 0)}"
                                     f" i{tuple(code.inplace)}")
    return res


def main() -> None:
    if sys.argv[1] == "snap":
        out = snap("--quick" in sys.argv)
        Path(sys.argv[2]).write_text(json.dumps(out, indent=0, sort_keys=True))
        print(f"{len(out)} entries", file=sys.stderr)
    else:
        a = json.loads(Path(sys.argv[2]).read_text())
        b = json.loads(Path(sys.argv[3]).read_text())
        diff = [k for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
        for k in diff[:60]:
            print(k, "\n   base:", a.get(k), "\n   new: ", b.get(k))
        print(f"{len(diff)} of {len(set(a) | set(b))} differ")
        sys.exit(1 if diff else 0)




def verify(base_path: str, quick: bool) -> int:
    """Every entry of a base snapshot, re-emitted with the current code at the point as the current space
    normalises it: same hash? (keys changed by knob renames / conditional spaces are followed)."""
    from collections import defaultdict

    from utvm.compiler import compile
    from utvm.compiler.kernels import FileScope, get_kernel, get_space
    from utvm.compiler.lower import fold_constant_aliases, kernel_contexts

    warnings.simplefilter("ignore")
    base = json.loads(Path(base_path).read_text())
    groups: dict[tuple[str, str, str], list[tuple[str, str]]] = defaultdict(list)
    for k, v in base.items():
        g, t, r, rest = k.split("|", 3)
        groups[(g, t, r)].append((rest, v))
    bad = 0
    n = 0
    bad_ops: dict[str, int] = {}
    gs = {name: (graph, passes) for name, graph, passes in graphs(quick)}
    for (gname, target, rounding), items in sorted(groups.items()):
        if gname not in gs:
            print("missing graph", gname)
            continue
        graph, passes = gs[gname]
        try:
            c = compile(graph, passes=passes, rounding=rounding, target=target)
        except Exception as exc:  # noqa: BLE001
            print(f"{gname}|{target}|{rounding}: compile failed {exc}")
            bad += len(items)
            continue
        models = {f"model|{name}": h(text) for name, text in
                  list(c.firmware_sources.items()) + list(c.includes.items())}
        models["model|libm"] = ",".join(c.libm_functions)
        g = fold_constant_aliases(c.graph)
        ctxs = {ctx.index: ctx for ctx in kernel_contexts(g, "m", rounding, target)}
        for rest, want in items:
            n += 1
            if rest.startswith("model|"):
                got = models.get(rest)
            else:
                op, pt, idx = rest.split("|")
                ctx = ctxs[int(idx)]
                space = get_space(ctx)
                point = space.normalize(json.loads(pt))
                reason = space.check(point)
                if reason:
                    got = f"REFUSED {reason}"
                else:
                    ctx2 = type(ctx)(ctx.node, ctx.index, g, rounding, ctx.func_name, FileScope("p"),
                                     dict(ctx.inputs._params), list(ctx.outputs), target,  # type: ignore[attr-defined]
                                     schedule=point)
                    ctx2.task_count = ctx.task_count
                    try:
                        code = get_kernel(ctx.node, ctx.index)(ctx2)
                        f = ctx2.file
                        text = "\n".join([f.render_prelude(), *f.decls, code.body, getattr(code, "attributes", "")])
                        got = (h(text) + f" s{code.scratch_bytes} p{getattr(code, 'persistent_bytes', 0)}"
                               f" i{tuple(code.inplace)}")
                    except Exception as exc:  # noqa: BLE001
                        got = f"ERROR {type(exc).__name__}: {exc}"[:200]
            if got != want:
                bad += 1
                what = rest if rest.startswith("model|") else rest.split("|")[0]
                bad_ops[what] = bad_ops.get(what, 0) + 1
                if bad <= int(os.environ.get("CODEGEN_SNAPSHOT_SHOW", "40")):
                    print(f"{gname}|{target}|{rounding}|{rest}\n   base: {want}\n   now:  {got}")
    print("by op:", bad_ops)
    print(f"{bad} of {n} differ")
    return 1 if bad else 0


if __name__ == "__main__":
    if sys.argv[1] == "verify":
        sys.exit(verify(sys.argv[2], "--quick" in sys.argv))
    main()
