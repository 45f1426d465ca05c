"""Unrolled int8 dot products shared by the conv and dense kernels (not a kernel module: registers nothing).

The emitted C adds products of int8 values to an int32 accumulator. Counts and offsets are compile-time
constants, so short runs become straight-line code with constant offsets (one load each, one multiply-add)
and long runs a loop unrolled by `UNROLL` plus a straight-line remainder. Whether the accumulator can
overflow is the caller's business (the kernels prove it from the constant weights).
"""

from __future__ import annotations

from collections.abc import Sequence

from utvm.compiler.kernels.cemit import block, for_loop, lines

UNROLL = 8         # products per iteration of an unrolled loop
FULL_UNROLL = 16   # runs up to this length are fully unrolled


def _term(x: str, w: str, xi: int | str, wi: int | str) -> str:
    return f"(int32_t){x}[{xi}] * {w}[{wi}]"


def dot_run(acc: str, x: str, w: str, n: int) -> str:
    """C statements: `acc += sum_{i < n} x[i] * w[i]` for int8 pointers `x`, `w` (side-effect-free
    expressions) and a compile-time n >= 0."""
    if n <= FULL_UNROLL:
        return lines(f"{acc} += {_term(x, w, i, i)};" for i in range(n))
    blocks, rest = divmod(n, UNROLL)
    step = [f"{acc} += {_term('xq', 'wq', i, i)};" for i in range(UNROLL)] + [f"xq += {UNROLL};", f"wq += {UNROLL};"]
    return block("", [f"const int8_t* xq = {x};", f"const int8_t* wq = {w};", for_loop("i", 0, blocks, step),
                      *(f"{acc} += {_term('xq', 'wq', i, i)};" for i in range(rest))])


def dot_offsets(acc: str, x: str, w: str, offsets: Sequence[tuple[int, int]]) -> str:
    """C statements: `acc += x[xo] * w[wo]` for each compile-time (xo, wo) pair, straight-line."""
    return lines(f"{acc} += {_term(x, w, xo, wo)};" for xo, wo in offsets)
