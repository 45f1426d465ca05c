"""`utvm size MODEL_OR_MLF --platform qemu-cortex-m4`: flash, RAM and stack of the model's firmware.

    utvm size kws_ref_model.tflite --platform qemu-cortex-m4 --unpacked-api --interface-api c
    utvm size kws_ref_model.tflite --compare-conventions          # the AOT RFC's table
    utvm size kws.tar --json

Builds the standalone firmware `utvm deploy` writes (cached) and reports:
- text / data / bss split into runtime (CRT, platform hooks, C library), operators (generated code and
  the workspace pool), constants (weights) and application (main, board support); the parts add up to
  what arm-none-eabi-size says of the ELF. With --params external the weights are not in the code but in
  the firmware's parameter blob (params.bin in the flash section utvm_params): its bytes are counted in
  the constants, and the report says where the blob is;
- the worst-case stack, summed along the call graph from GCC's -fstack-usage / -fcallgraph-info (indirect
  calls followed to every address-taken function and flagged; library functions from their disassembly),
  cross-checked against the high-water mark of a run in QEMU (stack painting): if the run used more than
  the static bound, the report says so and the command exits with status 1.
--compare-conventions compiles the model three times (packed; unpacked; unpacked + C interface) and prints
text, data, bss, total and max stack of each, with the savings against packed (the RFC's table).
On a board with a timing model (docs/timing.md) the firmware also runs under QEMU's cycles plugin, and the
report gives one inference's `instructions` and `cycles_est` (estimated cycles), from the call of the model
in main() to its return (not with --no-run).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from utvm.cli import _args as A
from utvm.cli._progress import progress_printer
from utvm.errors import UsageError
from utvm.support import jsonout

CONVENTIONS = (
    ("packed", {"unpacked_api": False, "interface_api": "packed"}),
    ("unpacked", {"unpacked_api": True, "interface_api": "packed"}),
    ("unpacked + C interface", {"unpacked_api": True, "interface_api": "c"}),
)


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    from utvm.cli.compile import add_compile_options

    p = subparsers.add_parser("size", help="flash/RAM/stack footprint of a model's firmware",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", type=A.model_or_mlf, help="a .tflite/.onnx model or an MLF tar / directory")
    p.add_argument("--platform", default="qemu-cortex-m4", type=A.platform_name,
                   help="the board (default: qemu-cortex-m4)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    p.add_argument("--compare-conventions", action="store_true",
                   help="packed vs unpacked vs unpacked + C interface (compiles the model three times)")
    p.add_argument("--no-run", action="store_true",
                   help="skip the QEMU run that measures the stack high-water mark")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    add_compile_options(p)
    p.set_defaults(func=run)


def _fmt_table(rows: list[list[Any]], header: list[str]) -> str:
    from utvm.support.text import shown

    cells = [[shown(c) for c in row] for row in [header, *rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    out = []
    for n, r in enumerate(cells):
        out.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths,
                                                                                                 strict=True))))
        if n == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out)


def format_report(report: Any, model_name: str) -> str:
    from utvm.platform.qemu.footprint import CATEGORIES, COLUMNS
    from utvm.support.text import shown

    fp = report.footprint
    rows = []
    for cat in CATEGORIES:
        cols = fp.categories[cat]
        rows.append([cat, *(cols[c] for c in COLUMNS), sum(cols.values())])
    totals = fp.totals()
    rows.append(["total", *(totals[c] for c in COLUMNS), sum(totals.values())])
    elf = fp.elf_totals
    lines = [
        f"model {shown(model_name)} on {report.board} ({report.convention} convention): {shown(fp.elf)}",
        _fmt_table(rows, ["bytes", "text", "data", "bss", "total"]),
        f"arm-none-eabi-size of the ELF: text {elf['text']}  data {elf['data']}  bss {elf['bss']}"
        f"  ({'matches' if totals == elf else 'DOES NOT MATCH'})",
    ]
    params = getattr(report, "params", None)
    if params is not None:
        lines.append(f"weights: external (--params external), a parameter blob of {params['bytes']} bytes in "
                     f"flash section {params['section']} at {params['address']:#010x}, counted in the constants")
    st = report.stack
    lines.append(
        f"stack, worst case (static): {st.worst_case} bytes = {st.thread_cost} (deepest path)"
        f" + {st.exception_frame} (exception frame) + {st.handler_cost} (deepest handler)"
    )
    # function names come from the firmware's symbols (your C among them): escaped like any outside text
    lines.append("  deepest path: " + " -> ".join(map(shown, st.path)))
    if st.handler_path:
        lines.append("  deepest handler: " + " -> ".join(map(shown, st.handler_path)))
    if report.measured_stack is not None:
        verdict = "consistent" if report.stack_consistent else "EXCEEDS the static bound"
        lines.append(f"stack, measured in QEMU (stack painting high-water mark): {report.measured_stack} bytes"
                     f" ({verdict})")
    for label, names in (("indirect calls (followed to every address-taken function)", st.indirect_calls),
                         ("recursion (counted once)", st.recursion),
                         ("dynamic stack frames", st.dynamic),
                         ("no stack information (counted as 0)", st.unknown)):
        if names:
            lines.append(f"  flagged, {label}: {', '.join(map(shown, names))}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from utvm.cli.deploy import load_compiled, qemu_board_name
    from utvm.evaluate import is_mlf
    from utvm.platform.qemu.footprint import firmware_report

    say = progress_printer(args.quiet)

    board = qemu_board_name(args.platform)
    if not args.compare_conventions:
        compiled = load_compiled(args, say)
        say(f"building and measuring the {board} deploy firmware")
        report = firmware_report(compiled, board, measure=not args.no_run)
        speed = None if args.no_run else model_run_timing(report, compiled, board)
        if args.json:
            print(jsonout.dumps({"model": compiled.model_name, **report.to_json(), **(speed or {})}))
        else:
            print(format_report(report, compiled.model_name))
            if speed is not None:
                print(f"one inference: {speed['instructions']} instructions, {speed['cycles_est']} estimated cycles "
                      f"({speed['timing_model']} timing model, docs/timing.md)")
        return 0 if report.stack_consistent in (None, True) else 1

    if is_mlf(Path(args.model)):
        raise UsageError("--compare-conventions compiles the model three times: give a .tflite/.onnx model, "
                            "not an MLF")
    reports = []
    for label, flags in CONVENTIONS:
        conv_args = argparse.Namespace(**{**vars(args), **flags, "workspace": "static"})
        say(f"compiling with the {label} convention")
        compiled = load_compiled(conv_args, lambda _m: None)
        say(f"building and measuring the {label} firmware")
        reports.append((label, compiled, firmware_report(compiled, board, measure=not args.no_run)))
    if args.json:
        speeds = [None if args.no_run else model_run_timing(r, c, board) for _label, c, r in reports]
        print(jsonout.dumps({"model": reports[0][1].model_name, "board": board,
                             "conventions": [{"convention": label, **r.to_json(), **(speed or {})}
                                             for (label, _c, r), speed in zip(reports, speeds, strict=True)]}))
        return 0
    print(format_comparison(reports, board))
    return 0


def model_run_timing(report: Any, compiled: Any, board: str) -> dict[str, Any] | None:
    """One inference of the deploy firmware under the board's timing model: {"instructions", "cycles_est",
    "timing_model"} from the call of the model's entry point in main() (`<prefix>_run`, or `TVMExecute` in
    the C interface) to its return; None on a board without a model or with the plugin turned off."""
    from utvm.errors import PlatformError
    from utvm.platform.qemu import timing
    from utvm.platform.qemu.boards import get_board

    core = get_board(board).timing_model
    if core is None or not timing.enabled():
        return None
    elf = Path(report.project) / "build" / "firmware.elf"
    sites = timing.call_sites(elf, [f"{compiled.prefix}_run", "TVMExecute"])
    run = timing.count_calls(get_board(board), elf, core, sites, timeout=600.0)
    if run.exit_status != 0 or not run.regions:
        raise PlatformError(f"{elf}: the run under the {core} timing model "
                            + (f"exited with status {run.exit_status}" if run.exit_status else "measured no call"))
    first = run.regions[0]
    return {"instructions": first.instructions, "cycles_est": first.cycles, "timing_model": core}


def format_comparison(reports: list[tuple[str, Any, Any]], board: str) -> str:
    """The AOT RFC's table: text, data, bss, total, max stack, with savings against packed."""
    from utvm.support.text import shown

    base_total = sum(reports[0][2].footprint.totals().values())
    base_stack = reports[0][2].stack.worst_case
    rows = []
    for label, compiled, r in reports:
        t = r.footprint.totals()
        total = sum(t.values())
        measured = r.measured_stack if r.measured_stack is not None else "-"
        rows.append([f"{compiled.model_name} {label}", t["text"], t["data"], t["bss"], total,
                     base_total - total, r.stack.worst_case, base_stack - r.stack.worst_case, measured])
    header = ["model / convention", "text", "data", "bss", "total", "size saved", "max stack",
              "stack saved", "measured stack"]
    note = ""
    blobs = [f"{compiled.model_name} {label} {r.params['bytes']}" for label, compiled, r in reports
             if getattr(r, "params", None) is not None]
    if blobs:
        note = ("\nweights: external (--params external), parameter blobs in flash counted in text: "
                + ", ".join(map(shown, blobs)) + " bytes")
    return (f"footprint of the deploy firmware on {board} (bytes; max stack = static worst case, "
            f"measured = QEMU high-water mark)\n" + _fmt_table(rows, header) + note)

