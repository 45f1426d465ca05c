"""Sliding-window geometry shared by the conv and pool kernels (not a kernel module: registers nothing).

A window along one spatial axis starts at `origin = o * stride - pad` and has taps `t = 0 .. k-1` at
`origin + t * dilation`. Instead of testing every tap against the input bounds inside the hot loop, the
kernels compute once per output row/column the range of taps that fall inside `[lo, hi)`:

    t_lo = origin < lo ? ceil((lo - origin) / dilation) : 0
    t_hi = min(k, ceil((hi - origin) / dilation))          (an empty range when t_hi <= t_lo)

Divisions are by the compile-time dilation (the C compiler turns them into multiplies). Whichever side can
never clip for this geometry (decided here, over every output position) is a constant in the C code.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Axis:
    """One spatial axis of a window: output length, input bounds [lo, hi), kernel, stride, dilation, pad."""

    out: int
    lo: int
    hi: int
    k: int
    stride: int
    dilation: int
    pad: int

    def origins(self) -> list[int]:
        return [o * self.stride - self.pad for o in range(self.out)]

    @property
    def clips_low(self) -> bool:
        return any(s < self.lo for s in self.origins())

    @property
    def clips_high(self) -> bool:
        return any(s + (self.k - 1) * self.dilation >= self.hi for s in self.origins())

    @property
    def clips(self) -> bool:
        return self.clips_low or self.clips_high


def _ceil_div(num: str, d: int) -> str:
    """ceil(num / d) for num >= 0 in C (and <= 0 whenever num <= 0, which is all an empty range needs)."""
    return num if d == 1 else f"({num} + {d - 1}) / {d}"


def origin_stmt(origin: str, index: str, ax: Axis) -> str:
    """`const int32_t <origin> = <index> * stride - pad;`"""
    expr = index if ax.stride == 1 else f"{index} * {ax.stride}"
    if ax.pad:
        expr += f" - {ax.pad}"
    return f"const int32_t {origin} = {expr};"


def tap_range(lo_name: str, hi_name: str, origin: str, ax: Axis, lo: int | None = None,
              hi: int | None = None) -> str:
    """C declaring `lo_name`/`hi_name`, the taps of the window at `origin` inside [lo, hi) (default: the
    axis' input bounds). Sides that never clip are constants."""
    lo = ax.lo if lo is None else lo
    hi = ax.hi if hi is None else hi
    probe = Axis(ax.out, lo, hi, ax.k, ax.stride, ax.dilation, ax.pad)
    lines = []
    if probe.clips_low:
        below = f"{lo} - {origin}" if lo else f"-{origin}"
        lines.append(f"const int32_t {lo_name} = {origin} < {lo} ? {_ceil_div(below, ax.dilation)} : 0;")
    else:
        lines.append(f"const int32_t {lo_name} = 0;")
    if probe.clips_high:
        room = _ceil_div(f"{hi} - {origin}", ax.dilation)
        lines.append(f"const int32_t {hi_name}_room = {room};")
        lines.append(f"const int32_t {hi_name} = {hi_name}_room < {ax.k} ? {hi_name}_room : {ax.k};")
    else:
        lines.append(f"const int32_t {hi_name} = {ax.k};")
    return "\n".join(lines)


def pos(origin: str, tap: str, dilation: int) -> str:
    """C expression of the input position of tap `tap` in the window at `origin`."""
    return f"{origin} + {tap}" if dilation == 1 else f"{origin} + {tap} * {dilation}"
