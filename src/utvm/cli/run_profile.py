"""`utvm run --profile`: time every fused operator on the device, through the system library.

Works on any platform and in every calling convention: the firmware is built with
`build_firmware(..., debug=True)`, so every operator function is a packed function of the system library
(`tvmgen_<m>_<op>`: the operator itself in the packed convention, a packed wrapper around the raw-pointer
function in the unpacked and C conventions, see utvm.compiler.debug; it checks its arguments as a
packed operator does, so each time includes those checks, which the unpacked / C model run itself does not
pay: there the operators' sum can exceed the whole model's time), and the host allocates device arrays of
its argument shapes (inputs, outputs, scratch), fills the inputs with random values of their dtype, and
times the function with the device's time evaluator (`runtime.RPCTimeEvaluator`: one warm-up, then
`repeat` single calls; the median is kept). On a platform with a deterministic instruction clock (QEMU
under -icount: `instructions_per_second`) each time is also given in instructions, and on a board with a
timing model (the QEMU cycles plugin, docs/timing.md) in estimated cycles (`TimeEvaluator.cycles_est`). The
table is sorted by cost; `plot_profile` draws it as a bar chart (matplotlib, Agg backend, no display needed).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from utvm.errors import UsageError


@dataclass(frozen=True)
class OperatorTiming:
    name: str  # the generated function
    op: str  # what it computes (e.g. conv2d)
    node: str  # the graph node it came from
    seconds: float  # median per call
    cycles: int | None  # instructions under an instruction-counting clock, else None (the historical name)
    cycles_est: float | None = None  # estimated cycles under the board's timing model, else None

    @property
    def instructions(self) -> int | None:
        return self.cycles

    def to_json(self) -> dict[str, Any]:
        # "cycles" keeps its old meaning (instructions) for existing readers; "instructions" says it plainly.
        return {"function": self.name, "op": self.op, "node": self.node, "seconds": self.seconds,
                "cycles": self.cycles, "instructions": self.cycles,
                "cycles_est": None if self.cycles_est is None else round(self.cycles_est)}


def _random(shape: Sequence[int], dtype: str, rng: np.random.Generator) -> np.ndarray:
    if dtype.startswith("float"):
        return rng.standard_normal(tuple(shape)).astype(dtype)
    if dtype == "bool":
        return rng.integers(0, 2, tuple(shape)).astype(np.bool_)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, tuple(shape), endpoint=True).astype(dtype)


def profile_operators(
    session: Any,
    compiled: Any,
    repeat: int = 3,
    instructions_per_second: float | None = None,
    seed: int = 0,
) -> list[OperatorTiming]:
    """Time each operator function of `compiled` on the device; most expensive first."""
    mod = session.system_lib()
    rng = np.random.default_rng(seed)
    timings = []
    for op in compiled.operators:
        if mod.get_function(op.name, allow_missing=True) is None:
            raise UsageError(
                f"--profile: operator {op.name!r} is not in the firmware's system library (convention "
                f"{compiled.options.convention!r}); build the firmware with build_firmware(..., debug=True)"
            )
        arrays = []
        try:
            for i, t in enumerate(op.args):
                if i < len(op.inputs):
                    arrays.append(session.array(_random(t.shape, t.dtype, rng)))
                else:
                    arrays.append(session.empty(t.shape, t.dtype))
            # One evaluator per operator, freed at once: the device has only a few evaluator slots.
            with session.time_evaluator(op.name, module=mod, number=1, repeat=repeat, min_repeat_ms=0) as timer:
                seconds = float(np.median(timer(*arrays)))
                est = timer.cycles_est
        finally:
            for a in arrays:
                a.free()
        cycles = round(seconds * instructions_per_second) if instructions_per_second else None
        cycles_est = float(np.median(est)) if est else None
        timings.append(OperatorTiming(op.name, op.op, op.node, seconds, cycles, cycles_est))
    return sorted(timings, key=lambda t: (-t.seconds, t.name))


def format_profile(timings: Sequence[OperatorTiming], total_s: float | None = None) -> str:
    """A text table: rank, function, op, time, instructions, estimated cycles, share of the operators' sum.
    The names are escaped (utvm.support.text.shown): a user operator's name from the model cannot forge a
    row."""
    from utvm.support.text import shown

    total_ops = sum(t.seconds for t in timings) or 1.0
    with_cycles = any(t.cycles is not None for t in timings)
    with_est = any(t.cycles_est is not None for t in timings)
    names = {id(t): (shown(t.name), shown(t.op)) for t in timings}
    name_w = max([len("function"), *(len(n) for n, _ in names.values())])
    op_w = max([len("op"), *(len(o) for _, o in names.values())])
    head = f"{'#':>3}  {'function':<{name_w}}  {'op':<{op_w}}  {'time (us)':>11}"
    head += f"  {'instructions':>13}" if with_cycles else ""
    head += f"  {'est. cycles':>13}" if with_est else ""
    head += f"  {'share':>6}  {'cumul.':>6}"
    lines = [head, "-" * len(head)]
    cumulative = 0.0
    for i, t in enumerate(timings, 1):
        cumulative += t.seconds
        name, op = names[id(t)]
        row = f"{i:>3}  {name:<{name_w}}  {op:<{op_w}}  {t.seconds * 1e6:>11.2f}"
        if with_cycles:
            row += f"  {t.cycles if t.cycles is not None else '-':>13}"
        if with_est:
            row += f"  {round(t.cycles_est) if t.cycles_est is not None else '-':>13}"
        row += f"  {100 * t.seconds / total_ops:>5.1f}%  {100 * cumulative / total_ops:>5.1f}%"
        lines.append(row)
    lines.append("-" * len(head))
    summary = f"sum of {len(timings)} operators: {sum(t.seconds for t in timings) * 1e6:.2f} us"
    if total_s is not None:
        summary += f"; whole model: {total_s * 1e6:.2f} us"
    if with_est:
        summary += (f"; {sum(t.cycles_est or 0.0 for t in timings):.0f} estimated cycles for the operators (the "
                    "board's timing model, docs/timing.md)")
    lines.append(summary)
    return "\n".join(lines)


def plot_profile(timings: Sequence[OperatorTiming], path: Path | str, title: str = "") -> Path:
    """A horizontal bar chart of the operators' times (most expensive on top), written as PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    ordered = list(timings)[::-1]  # barh draws bottom-up
    fig, ax = plt.subplots(figsize=(9, 0.35 * len(ordered) + 1.5))
    try:
        ax.barh([t.name for t in ordered], [t.seconds * 1e6 for t in ordered], color="tab:blue")
        ax.set_xlabel("time per call (us)")
        ax.set_title(title or "per-operator time on the device")
        ax.tick_params(axis="y", labelsize=8)
        fig.tight_layout()
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, format="png", dpi=100)
    finally:
        plt.close(fig)
    return path
