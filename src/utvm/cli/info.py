"""`utvm info MODEL`: what a .tflite / .onnx model contains, as tables.

    utvm info kws_ref_model.tflite          # inputs, outputs, op counts, parameters, MACs per layer
    utvm info model.onnx --json             # the same as JSON

The model is checked as `utvm compile` checks it: a graph compile refuses (a cycle, an operator writing a
model input or a constant, two writers of one tensor, a tensor over utvm's limits) is the same one-line
error and exit status 4. Every name from the model (tensors, operators, custom operators, its description)
is printed escaped (utvm.support.text.shown): it cannot drive the terminal or forge a row of a table.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from utvm.cli import _args as A
from utvm.ir.graph import Graph, Tensor
from utvm.support import jsonout
from utvm.support.text import shown


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("info", help="show a model's inputs, outputs, ops, parameters and MACs",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", type=A.model_file, help="a .tflite or .onnx model")
    p.add_argument("--json", action="store_true", help="print JSON instead of tables")
    p.add_argument("--custom-op", action="append", default=[], metavar="NAME=FILE.c:symbol", type=A.custom_op,
                   help="count operator NAME as a bound user operator (docs/custom_ops.md; repeatable)")
    p.add_argument("--custom-op-py", action="append", default=[], metavar="NAME=FILE.py:func", type=A.custom_op_py,
                   help="its numpy implementation (repeatable)")
    p.set_defaults(func=run)


def table(headers: Sequence[str], rows: Sequence[Sequence[object]], right: Sequence[int] = ()) -> str:
    """A plain-text table; columns in `right` are right-aligned (numbers). Every cell is escaped (`shown`):
    a name from a model holding a newline or an escape sequence stays in its cell."""
    cells = [[shown(h) for h in headers]] + [[shown(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]

    def line(r: list[str]) -> str:
        padded = (c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True)))
        return "  ".join(padded).rstrip()

    out = [line(cells[0]), "  ".join("-" * w for w in widths)]
    out += [line(r) for r in cells[1:]]
    return "\n".join(out)


def _quant(t: Tensor) -> str:
    q = t.quant
    if q is None:
        return "-"
    if q.per_channel and len(q.scale) > 1:
        return f"per-channel axis {q.axis} ({len(q.scale)} scales)"
    return f"scale {q.scale[0]:.6g}, zero point {q.zero_point[0]}"


def summary(graph: Graph) -> dict:
    from utvm.ir.stats import layer_stats, parameter_count

    layers = layer_stats(graph)
    const_bytes = sum(t.nbytes for t in graph.tensors.values() if t.is_constant)

    def io(names: Sequence[str]) -> list[dict]:
        return [{"name": n, "shape": list(graph.tensors[n].shape), "dtype": graph.tensors[n].dtype,
                 "quantization": _quant(graph.tensors[n])} for n in names]

    return {
        "name": graph.name,
        "source": graph.metadata.get("source", ""),
        **({"description": str(graph.metadata["description"])} if graph.metadata.get("description") else {}),
        "inputs": io(graph.inputs),
        "outputs": io(graph.outputs),
        "ops": dict(Counter(n.op for n in graph.nodes)),
        "parameters": parameter_count(graph),
        "constant_bytes": const_bytes,
        "macs": sum(r.macs for r in layers),
        "layers": [{"index": r.index, "op": r.op, "name": r.name, "output_shape": list(r.output_shape),
                    "dtype": r.dtype, "params": r.params, "macs": r.macs} for r in layers],
    }


def _short(name: str, width: int = 48) -> str:
    return name if len(name) <= width else "..." + name[-(width - 3):]


def render(s: dict) -> str:
    parts = [f"model {shown(s['name'])} ({shown(s['source']) or 'unknown format'}): {len(s['layers'])} ops, "
             f"{s['parameters']:,} parameters ({s['constant_bytes']:,} bytes of constants), {s['macs']:,} MACs"]
    if s.get("description"):
        parts.append(f"description: {shown(s['description'])}")
    for title in ("inputs", "outputs"):
        parts += ["", f"{title}:", table(("name", "shape", "dtype", "quantization"),
                                         [(x["name"], x["shape"], x["dtype"], x["quantization"]) for x in s[title]])]
    parts += ["", "ops:", table(("op", "count"), sorted(s["ops"].items(), key=lambda kv: (-kv[1], kv[0])), right=(1,))]
    rows = [(r["index"], r["op"], _short(r["name"]), r["output_shape"], r["dtype"], f"{r['params']:,}",
             f"{r['macs']:,}") for r in s["layers"]]
    rows.append(("", "total", "", "", "", f"{sum(r['params'] for r in s['layers']):,}", f"{s['macs']:,}"))
    parts += ["", "layers:", table(("#", "op", "name", "output", "dtype", "params", "MACs"), rows, right=(0, 5, 6))]
    return "\n".join(parts)


def render_problems(problems: Sequence[Any]) -> str:
    ops = Counter(p.op for p in problems if p.op)
    head = (f"not supported: {len(problems)} operator{'s' if len(problems) != 1 else ''}"
            + (f" ({', '.join(f'{shown(k)} x{v}' if v > 1 else shown(k) for k, v in sorted(ops.items()))})"
               if ops else ""))
    rows = [(p.index if p.index >= 0 else "-", p.op or "-", p.reason) for p in problems]
    return head + "\n" + table(("#", "operator", "why"), rows, right=(0,))


def run(args: argparse.Namespace) -> int:
    import warnings

    from utvm.cli import EXIT_MODEL
    from utvm.cli.compile import bind_custom_ops
    from utvm.frontend import survey

    bind_custom_ops(args)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        graph, problems = survey(Path(args.model))
    notes = sorted({str(w.message) for w in caught})
    s: dict[str, Any] = summary(graph) if graph is not None else {"name": Path(args.model).stem}
    if notes:
        s["warnings"] = notes
    if problems:
        s["unsupported"] = [{"index": p.index, "op": p.op, "reason": p.reason} for p in problems]
    if args.json:
        print(jsonout.dumps(s, indent=1))
    else:
        parts = [render(s)] if graph is not None else []
        if notes:
            parts.append("warnings:\n" + "\n".join(f"  {shown(n)}" for n in notes))
        if problems:
            parts.append(render_problems(problems))
        print("\n\n".join(parts))
    if problems:  # the report is complete; the status says the model cannot be compiled as it is
        first = problems[0]
        where = f"operator {first.index} ({first.op})" if first.index >= 0 else "the model"
        print(shown(f"utvm info: error: {args.model}: {len(problems)} unsupported operator(s), listed above; "
                    f"first: {where}: {first.reason}"), file=sys.stderr)
        return EXIT_MODEL
    return 0
