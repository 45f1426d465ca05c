"""`utvm compile MODEL -o OUT.tar`: compile a .tflite/.onnx model to a Model Library Format archive.

    utvm compile kws_ref_model.tflite -o kws.tar --model-name kws --unpacked-api --interface-api c

Progress goes to stderr, one line per stage; the summary (ops, fused ops, workspace against its lower
bound, constant bytes) goes to stdout. `--dump-ir` prints the graph after every pass.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from utvm.cli import _args as A
from utvm.cli._progress import progress_printer
from utvm.compiler import memory


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("compile", help="compile a model to C (Model Library Format tar)",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", type=A.model_file, help="a .tflite or .onnx model")
    add_compile_options(p)
    p.add_argument("-o", "--output", type=A.nonempty_path,
                   help="the MLF tar to write (default: <model stem>.tar in the current directory)")
    p.add_argument("--dump-ir", action="store_true", help="print the graph after import and after every pass")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    p.set_defaults(func=run)


def add_compile_options(p: argparse.ArgumentParser) -> None:
    """The compile flags, shared with `utvm run` (which compiles when given a model)."""
    p.add_argument("--model-name", default="default", type=A.model_name,
                   help="prefix of every generated symbol (tvmgen_<name>_...): a C identifier, at most 40 chars")
    p.add_argument("--executor", default="aot", choices=("aot",), help="executor (default: aot)")
    p.add_argument("--unpacked-api", action="store_true",
                   help="operators take raw pointers (no DLTensor/TVMValue in operator code)")
    p.add_argument("--interface-api", default="packed", choices=("packed", "c"),
                   help="entry point: a PackedFunc (packed) or tvmgen_<m>_run over structs (c; needs --unpacked-api)")
    p.add_argument("--workspace", default="static", choices=("static", "user"),
                   help="workspace pool generated into the code (static) or given by the application via "
                        "TVMContext (user; needs --interface-api c)")
    p.add_argument("--memory-planner", default=memory.DEFAULT_ALGORITHM, choices=tuple(memory.ALGORITHMS),
                   help=f"static memory planning algorithm (default: {memory.DEFAULT_ALGORITHM})")
    p.add_argument("--memory-pool", dest="memory_pools", action=A.MemoryPoolAction, type=A.memory_pool, default=[],
                   metavar="NAME:SIZE[:ATTRS]",
                   help="a workspace memory pool, repeatable, fastest first: SIZE in bytes or with K/KB/KiB "
                        "(1024) or M/MB/MiB suffix; ATTRS comma-separated: rw, section=NAME, align=N "
                        "(docs/compiler.md)")
    p.add_argument("--memory-limit", type=memory_limit, default=None, metavar="BYTES|min",
                   help="fit the workspace in BYTES (K/M suffixes as --memory-pool) with the fastest plan that does: "
                        "kernel schedules with less scratch, row-patch stages, in-place depthwise; 'min': the "
                        "smallest peak reachable (docs/compiler.md, \"Below the layer-by-layer bound\")")
    p.add_argument("--patch-overhead", type=patch_overhead, default=None, metavar="PERCENT",
                   help="the extra work row patches may add, in percent of the model's MACs (default 10)")
    p.add_argument("--constants-section", type=A.section_name, default=None, metavar="SECTION",
                   help="put the weights and constant arrays in this linker section (e.g. .my_weights)")
    p.add_argument("--params", default="embedded", choices=("embedded", "external"),
                   help="weights as const arrays in the code (embedded, the default) or in a separate blob, "
                        "parameters/params.bin, read through the TVMContext so a firmware can take new weights "
                        "(external; TVMSetParameters, docs/compiler.md)")
    p.add_argument("--rounding", default="single", choices=("single", "double"),
                   help="requantization rounding: single (TFLite/LiteRT) or double (gemmlowp/TFLM)")
    p.add_argument("--target", type=A.target_name, default=None,
                   help="the CPU the code is for: host, cortex-m0/-m3/-m4/-m7/-m33/-m55 (default: the "
                        "platform's target; `host`, portable C, for compile)")
    p.add_argument("--tuning-log", metavar="LOG.jsonl", type=A.input_file, default=None,
                   help="apply a `utvm tune` log: the fastest combination of its schedules for the whole model "
                        "within the budgets below (other tasks keep the default; docs/tuning.md)")
    A.add_budget_options(p)
    p.add_argument("--custom-op", action="append", default=[], metavar="NAME=FILE.c:symbol", type=A.custom_op,
                   help="bind operator NAME (a TFLite CUSTOM op's custom_code, or any operator utvm lacks) to the "
                        "C function symbol in FILE.c (docs/custom_ops.md; repeatable)")
    p.add_argument("--custom-op-py", action="append", default=[], metavar="NAME=FILE.py:func", type=A.custom_op_py,
                   help="the numpy implementation of user operator NAME for the reference interpreter (--check; "
                        "repeatable)")


def memory_limit(text: str) -> int | str:
    """--memory-limit: bytes (memory.parse_size: K/KB/KiB, M/MB/MiB) of at least 1, or `min`."""
    if text.strip().lower() == "min":
        return "min"
    try:
        n = memory.parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{exc}, or 'min'") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"memory limit {text!r}: at least 1 byte")
    return n


def patch_overhead(text: str) -> float:
    """--patch-overhead: a percentage (`10`, `10%`, `2.5%`) from 0 to 1000, returned as a fraction."""
    t = text.strip().removesuffix("%").strip()
    try:
        v = float(t)
    except ValueError:
        raise argparse.ArgumentTypeError(f"patch overhead {text[:40]!r} is not a percentage (e.g. 10 or 10%)") from None
    if not 0 <= v <= 1000:
        raise argparse.ArgumentTypeError(f"patch overhead {text[:40]!r}: from 0 to 1000 percent")
    return v / 100


def bind_custom_ops(args: argparse.Namespace) -> None:
    """Bind the --custom-op / --custom-op-py values of `args` (utvm.custom_ops), if the command has them."""
    from utvm import custom_ops

    custom_ops.apply_args(getattr(args, "custom_op", None), getattr(args, "custom_op_py", None))


def target_of(args: argparse.Namespace) -> str:
    """--target, else the target of --platform (when the command has one), else `host`."""
    if getattr(args, "target", None):
        return str(args.target)
    platform = getattr(args, "platform", None)
    if platform:
        from utvm.target import platform_target

        return platform_target(platform).name
    return "host"


def compile_from_args(args: argparse.Namespace, model: Path, say=None, on_choice=None):  # noqa: ANN001, ANN201
    """Import `model` and compile it with the flags in `args`; returns a CompiledModel. With a tuning log,
    `on_choice` (if given) receives its whole-model choice (utvm.tune.budget.ModelChoice: `utvm report`'s gains)."""
    from utvm.compiler import compile as compile_graph
    from utvm.compiler.driver import CompileOptions
    from utvm.errors import CompileError, UsageError
    from utvm.frontend import load

    target = target_of(args)
    bind_custom_ops(args)
    try:  # flags that cannot go together fail before any work, as a usage error
        CompileOptions(args.model_name, args.executor, args.unpacked_api, args.interface_api, args.workspace,
                       args.memory_planner, args.rounding, target, tuple(args.memory_pools),
                       args.constants_section or "", params=getattr(args, "params", "embedded"),
                       **_memory_kwargs(args)).validate()
    except CompileError as exc:
        raise UsageError(str(exc)) from exc
    if not model.is_file():
        raise UsageError(f"{model}: no such model file" if not model.exists() else f"{model}: not a model file")
    log = None
    if getattr(args, "tuning_log", None):  # read first: a file that is no tuning log fails before any work
        from utvm.tune.log import load as load_log

        log = load_log(args.tuning_log)
        log.report()
    say = say or (lambda _m: None)
    t0 = time.monotonic()
    say(f"importing {model}")
    graph = load(model)
    say(f"imported {len(graph.nodes)} ops, {len(graph.tensors)} tensors ({time.monotonic() - t0:.2f} s)")
    if not isinstance(getattr(args, "model", None), list):  # build-device --model A --model B: one of them
        from utvm import custom_ops

        custom_ops.check_all_used(graph)

    def dump(name: str, g) -> None:  # noqa: ANN001
        print(f"--- IR after {name} ({len(g.nodes)} ops) ---")
        print(g.dump())  # the model's names escaped by Graph.dump itself

    dump_ir = dump if getattr(args, "dump_ir", False) else None

    def build(schedules: dict | None, quiet: bool = False):  # noqa: ANN202 - a CompiledModel
        return compile_graph(graph, model_name=args.model_name, executor=args.executor,
                             unpacked_api=args.unpacked_api, interface_api=args.interface_api,
                             workspace=args.workspace, memory_planner=args.memory_planner, rounding=args.rounding,
                             progress=None if quiet else say, dump_ir=None if quiet else dump_ir, target=target,
                             schedules=schedules, memory_pools=tuple(args.memory_pools),
                             constants_section=args.constants_section or "",
                             params=getattr(args, "params", "embedded"), **_memory_kwargs(args))

    compiled = build(None)  # the default build: with a tuning log, the baseline of its budgets
    if log is not None:
        compiled = _apply_tuning_log(args, log, compiled, build, target, say, on_choice)
    compiled.source_model_name = model.name
    compiled.source_model_bytes = model.read_bytes()
    return compiled


def _memory_kwargs(args: argparse.Namespace) -> dict:
    """--memory-limit / --patch-overhead as compile() arguments (absent flags: compile's defaults)."""
    out: dict = {"memory_limit": getattr(args, "memory_limit", None)}
    if getattr(args, "patch_overhead", None) is not None:
        out["patch_overhead"] = args.patch_overhead
    return out


def _apply_tuning_log(args: argparse.Namespace, log, default, build, target: str, say,  # noqa: ANN001, ANN202
                      on_choice=None):
    """The model compiled with the whole-model choice of the tuning log `log` (utvm.tune.budget) within the
    budget flags, `default` being its default build; the default build when the tuned plan's workspace comes
    out over the RAM budget after all (a schedule that changed more than its scratch), with a warning."""
    import warnings

    from utvm.support.text import shown
    from utvm.tune.budget import choose_schedules
    from utvm.tune.log import Budgets, applied_report

    budgets = Budgets(args.max_code_growth, args.max_flash_growth, args.max_ram_growth)
    choice = choose_schedules(log.records, default, budgets, name=f"tuning log {args.tuning_log}")
    if on_choice is not None:
        on_choice(choice)
    compiled = default
    if choice.schedules:
        say(f"compiling again with the schedules of tuning log {args.tuning_log}")
        compiled = build(choice.schedules, quiet=True)
        budget = choice.workspace_budget
        if not args.memory_pools and budget is not None and compiled.plan.workspace_bytes > budget:
            warnings.warn(shown(f"tuning log {args.tuning_log}: the tuned build's workspace "
                                f"{compiled.plan.workspace_bytes:,} bytes is over the budget {int(budget):,} "
                                "(--max-ram-growth): the default build is used"), stacklevel=2)
            compiled = default
    # what the log holds for *this* model's tasks (utvm.tune.log.applied_report)
    say(applied_report(args.tuning_log, choice.schedules, compiled.operators, target, choice.log_tasks))
    if choice.tasks:
        say(f"tuning log {args.tuning_log}: {choice.report()}")
    return compiled


def run(args: argparse.Namespace) -> int:
    from utvm.mlf import export_model_library_format
    from utvm.support.files import check_output_file

    model = Path(args.model)
    out = check_output_file(args.output if args.output is not None else model.stem + ".tar", "-o", A.input_paths(args))
    say = progress_printer(args.quiet)

    compiled = compile_from_args(args, model, say)
    say(f"writing {out}")
    export_model_library_format(compiled, out)
    from utvm.support.text import shown

    print(compiled.summary())
    print(shown(f"wrote {out} ({out.stat().st_size} bytes): {', '.join(sorted(compiled.sources))}, "
                f"{compiled.header_name}"))
    return 0
