"""`utvm report MODEL_OR_MLF --platform P -o report.html`: one page of where time, flash and RAM go.

    utvm report kws_ref_model.tflite --platform qemu-cortex-m4 --check -o kws.html
    utvm report model.onnx --platform host --check --debug-layers --json > model.json
    utvm report kws_ref_model.tflite --platform qemu-cortex-m4 --tuning-log kws.jsonl --rounding double

Compiles the model once (the compile flags as `utvm compile`; --tuning-log applies a log for the whole model)
and gathers, for that one build, what four commands would print: metadata.json (`utvm compile`: the memory
plan, the schedules), `utvm info` (MACs), `utvm size --json` (on a QEMU board: flash and RAM by category,
the stack, one inference of the deploy firmware, and from its linker map each operator's code and weights)
and `utvm run --profile --json` (latency, instructions and estimated cycles, each operator's time; with
--check the outputs against the oracle, with --debug-layers every intermediate tensor). The page
(utvm.report.html) is one static HTML file with inline SVG charts, no script and nothing fetched from the
network; it opens from disk in any browser. It names, under each figure, the command that gives it.

-o FILE writes the page (default: <model stem>.report.html), atomically, never replacing a directory, a
device, a FIFO, a symbolic link or an input of the command. --json prints the report as one JSON object
(utvm.report.data: everything the page shows, and the size and run objects it comes from); with --json
the page is written only when -o is given. Exit status 3 when --check or --debug-layers finds a
difference (the report is written first), otherwise as every command (docs/cli.md).
"""

from __future__ import annotations

import argparse
import json
import secrets
import shlex
import sys
from pathlib import Path
from typing import Any

from utvm.cli import EXIT_MISMATCH
from utvm.cli import _args as A
from utvm.cli._progress import progress_printer
from utvm.support import jsonout

#: Seconds a call on the device may take (as `utvm run --timeout`).
DEFAULT_TIMEOUT_S = 60.0


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    from utvm.cli.compile import add_compile_options

    p = subparsers.add_parser("report", help="an HTML page of a model on a platform: time, flash, RAM per layer",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", type=A.model_or_mlf, help="a .tflite/.onnx model or an MLF tar / directory")
    p.add_argument("--platform", default="qemu-cortex-m4", type=A.platform_name,
                   help="where to measure (default: qemu-cortex-m4; flash and stack on QEMU boards only)")
    A.add_board_config_option(p)
    p.add_argument("-o", "--output", type=A.nonempty_path, metavar="FILE.html",
                   help="the page to write (default: <model stem>.report.html; with --json: none unless given)")
    p.add_argument("--json", action="store_true", help="print the report as one JSON object")
    p.add_argument("--seed", type=A.seed, help="seed of the random inputs (default: a fresh one, in the page)")
    p.add_argument("--check", action="store_true", help="compare the outputs with the reference interpreter")
    p.add_argument("--oracle", choices=("tflm", "litert", "onnxruntime"),
                   help="the reference interpreter of --check (implies it; defaults as `utvm run`)")
    p.add_argument("--debug-layers", action="store_true",
                   help="also compare every intermediate tensor with utvm's reference interpreter")
    p.add_argument("--repeat", type=A.repeat_count, default=5,
                   help="time evaluator repeats for the latency (1 to 64; default 5, as `utvm run`)")
    p.add_argument("--timeout", type=A.positive_seconds, default=DEFAULT_TIMEOUT_S, metavar="S",
                   help=f"seconds a call on the device may take (default {DEFAULT_TIMEOUT_S:g})")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    add_compile_options(p)
    p.set_defaults(func=run)


# --- the commands each figure comes from ------------------------------------------------------------------

def compile_flags(args: argparse.Namespace) -> list[str]:
    """The compile flags of `args` that differ from their defaults, as words of a command line."""
    from utvm.cli.compile import add_compile_options

    probe = argparse.ArgumentParser(add_help=False)
    add_compile_options(probe)
    words: list[str] = []
    for action in probe._actions:  # noqa: SLF001 - argparse's own list of the options it was given
        if not action.option_strings:
            continue
        value, default = getattr(args, action.dest, None), action.default
        if value == default:
            continue
        flag = action.option_strings[-1] if action.option_strings[-1].startswith("--") else action.option_strings[0]
        if isinstance(action, argparse._StoreTrueAction):  # noqa: SLF001
            words.append(flag)
        elif isinstance(value, list):
            for v in value:
                words += [flag, v.to_option() if hasattr(v, "to_option") else str(v)]
        else:
            words += [flag, "none" if value is None else (f"{value:g}" if isinstance(value, float) else str(value))]
    return words


def _line(*words: object) -> str:
    return " ".join(shlex.quote(str(w)) for w in words)


def commands(args: argparse.Namespace, seed: int, qemu: bool, mlf: bool, target: str) -> dict[str, str]:
    """The command lines that print the report's figures, by name (utvm.report.data)."""
    flags = compile_flags(args)
    model = args.model
    board = ["--board-config", args.board_config] if getattr(args, "board_config", None) else []
    check = (["--oracle", args.oracle] if args.oracle else ["--check"] if args.check else [])
    debug = ["--debug-layers"] if args.debug_layers else []
    repeat = ["--repeat", str(args.repeat)] if args.repeat != 5 else []
    timeout = ["--timeout", f"{args.timeout:g}"] if args.timeout != DEFAULT_TIMEOUT_S else []
    out = {"report": _line("utvm", "report", model, "--platform", args.platform, *board, "--seed", seed, *check,
                           *debug, *repeat, *timeout, *flags)}
    if mlf:
        out["compile"] = (_line("tar", "-xOf", model, "metadata.json") if Path(model).is_file()
                          else _line("cat", str(Path(model) / "metadata.json")))
    else:
        with_target = flags if "--target" in flags else ["--target", target, *flags]
        out["compile"] = _line("utvm", "compile", model, *with_target, "-o", Path(model).stem + ".tar")
        user_ops = [w for i, w in enumerate(flags) if w in ("--custom-op", "--custom-op-py")
                    or (i and flags[i - 1] in ("--custom-op", "--custom-op-py"))]  # info binds them too
        out["info"] = _line("utvm", "info", model, "--json", *user_ops)
    if qemu:
        out["size"] = _line("utvm", "size", model, "--platform", args.platform, "--json", *flags)
    out["run"] = _line("utvm", "run", model, "--platform", args.platform, *board, "--profile", "--json", "--seed",
                       seed, *check, *debug, *repeat, *timeout, *flags)
    return out


# --- gathering ------------------------------------------------------------------------------------------------

def _strict(obj: Any) -> Any:
    """`obj` as the command's --json printed it (utvm.support.jsonout: non-finite numbers as null)."""
    return json.loads(jsonout.dumps(obj))


def _load(args: argparse.Namespace, say: Any) -> tuple[Any, Any]:
    """The CompiledModel (an MLF as is, a model compiled as `utvm compile` would) and the tuning log's
    whole-model choice, if a log was applied."""
    from utvm.cli.compile import compile_from_args
    from utvm.cli.run import load_model_or_mlf
    from utvm.evaluate import is_mlf

    model = Path(args.model)
    if is_mlf(model):
        return load_model_or_mlf(args, say), None
    choices: list[Any] = []
    compiled = compile_from_args(args, model, say, on_choice=choices.append)
    return compiled, (choices[-1] if choices else None)


def size_of(compiled: Any, board: str, say: Any) -> tuple[dict[str, Any], Any]:
    """What `utvm size --json` prints for `compiled` on `board` (the same functions, the same firmware), and
    the firmware report (footprint.FirmwareReport) it comes from."""
    from utvm.cli.size import model_run_timing
    from utvm.platform.qemu.footprint import firmware_report

    say(f"building and measuring the {board} deploy firmware (utvm size)")
    report = firmware_report(compiled, board, measure=True)
    speed = model_run_timing(report, compiled, board)
    return _strict({"model": compiled.model_name, **report.to_json(), **(speed or {})}), report


def run_on(args: argparse.Namespace, compiled: Any, inputs: list[Any], seed: int,
           say: Any) -> tuple[dict[str, Any], str | None, bool | None]:
    """What `utvm run --profile --json` prints for `compiled` (the same firmware, and `run`'s own measure and
    check: the same calls in the same order), the oracle of --check and its verdict on the outputs (both None
    without --check)."""
    from utvm.cli.run import check, measure
    from utvm.evaluate import build_firmware

    say(f"building {args.platform} firmware (CRT + RPC server + {len(compiled.firmware_sources)} generated sources)")
    firmware = build_firmware(compiled, args.platform, debug=True)
    say(f"running {compiled.run_function} and profiling {len(compiled.operators)} operators (utvm run --profile)")
    outputs, _, result, _, layers = measure(args, compiled, firmware, inputs, seed, say, profile=True)
    ok, checked_by = check(args, Path(args.model), compiled, inputs, outputs, result, layers, say)
    return _strict(result), (checked_by if ok is not None else None), ok


def run(args: argparse.Namespace) -> int:
    from utvm.custom_ops import time_limit

    with time_limit(args.timeout):  # as `utvm run`: bounds each call of a --custom-op-py twin too
        return _report(args)


def _report(args: argparse.Namespace) -> int:
    from utvm.evaluate import is_mlf, read_inputs
    from utvm.platform.qemu.boards import BOARDS
    from utvm.report import build_document, firmware_bytes, render
    from utvm.support.files import check_output_file, write_file_atomic
    from utvm.support.text import shown

    say = progress_printer(args.quiet)
    given = args.output if args.output is not None else (None if args.json else Path(args.model).stem + ".report.html")
    out = check_output_file(given, "-o", A.input_paths(args)) if given is not None else None  # before the work
    compiled, choice = _load(args, say)
    if args.check or args.oracle:  # a user operator without its Python twin: said before the device work
        from utvm.custom_ops import check_reference

        check_reference(compiled.graph)
    seed = args.seed if args.seed is not None else secrets.randbelow(2**31)
    inputs = read_inputs(compiled, [], seed)
    qemu = args.platform in BOARDS
    size = firmware = None
    notes = []
    if qemu:
        size, fw_report = size_of(compiled, args.platform, say)
        firmware = firmware_bytes(fw_report.project, compiled)
        if fw_report.stack_consistent is False:
            notes.append(f"the stack a run used ({fw_report.measured_stack} B) exceeds the static worst case "
                         f"({fw_report.stack.worst_case} B): `utvm size` exits with status 1")
    run_json, checked_by, ok = run_on(args, compiled, inputs, seed, say)
    cmds = commands(args, seed, qemu, is_mlf(Path(args.model)), compiled.options.target)
    doc = build_document(compiled, args.platform, cmds, run_json, size=size, firmware=firmware, choice=choice,
                         checked_by=checked_by, check_ok=ok, model_file=Path(args.model).name, notes=notes)
    if out is not None:
        page = render(doc).encode()
        write_file_atomic(out, page, "-o")
        say(f"wrote {out} ({len(page):,} bytes)")
    if args.json:
        print(jsonout.dumps(doc))
    elif out is not None:
        print(shown(f"wrote {out}: open it in a browser"))
    first = (run_json.get("debug_layers") or {}).get("first_mismatch")
    if ok is False:  # the report is complete; the status says what it found (as `utvm run --check`)
        print(shown(f"utvm report: error: --check: the outputs differ from {checked_by} (the report's checks)"),
              file=sys.stderr)
    elif first is not None:
        print(shown(f"utvm report: error: --debug-layers: operator {first['index']} ({first['function']}) is the "
                    f"first whose output differs from the reference, tensor {first['tensor']!r}"), file=sys.stderr)
    return EXIT_MISMATCH if ok is False or first is not None else 0
