"""The report's charts as inline SVG text: no script, no external resource, one <svg class="chart"> each.

Every chart starts with a background rectangle of CHART_BACKGROUND over its whole area (the page's own
background is white), so a screenshot shows where each chart is; every text from a model (tensor, node,
function names) goes through `esc` (XML-escaped, cut to a length), and every shape carries a <title> the
browser shows as a tooltip. Numbers are formatted by `fmt_bytes`, `fmt_count` and `fmt_seconds`.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass

#: The background of every chart (the screenshot test finds the charts by it).
CHART_BACKGROUND = "#f3f5f9"
INK = "#1f2933"
MUTED = "#6b7785"
GRID = "#d9dee6"
#: Tableau's ten colours (readable by most colour-blind viewers).
PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7", "#9c755f",
           "#bab0ac")
TENSOR_COLOURS = ("#4e79a7", "#76b7b2", "#59a14f", "#86bcb6", "#a0cbe8", "#8cd17d", "#499894", "#6a9f58")
SCRATCH_COLOUR = "#f28e2b"
PERSISTENT_COLOUR = "#b07aa1"
FONT = "font-family:system-ui,-apple-system,'Segoe UI',Roboto,'DejaVu Sans',sans-serif"


def esc(text: object, limit: int = 0) -> str:
    """`text` escaped for XML/HTML text and attributes; cut to `limit` characters (with an ellipsis) if > 0."""
    s = str(text)
    if limit and len(s) > limit:
        s = s[: max(limit - 1, 1)] + "\u2026"
    return html.escape(s, quote=True)


def fmt_bytes(n: float | None) -> str:
    return "-" if n is None else f"{int(n):,} B"


def fmt_count(n: float | None) -> str:
    return "-" if n is None else f"{int(round(n)):,}"


def fmt_seconds(s: float | None) -> str:
    if s is None:
        return "-"
    if s >= 1.0:
        return f"{s:.3f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.3f} ms"
    return f"{s * 1e6:.2f} \u00b5s"


def _open(kind: str, width: float, height: float, label: str) -> list[str]:
    return [f'<svg class="chart" data-chart="{esc(kind)}" xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" '
            f'height="{height:.0f}" viewBox="0 0 {width:.0f} {height:.0f}" role="img" aria-label="{esc(label)}" '
            f'style="{FONT}">',
            f'<rect x="0" y="0" width="{width:.0f}" height="{height:.0f}" fill="{CHART_BACKGROUND}"/>']


def _text(x: float, y: float, text: str, size: int = 12, anchor: str = "start", fill: str = INK,
          weight: str = "normal") -> str:
    return (f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}" fill="{fill}" '
            f'font-weight="{weight}">{text}</text>')


@dataclass(frozen=True)
class Part:
    """One segment of a stacked bar, or one bar of a bar chart."""

    label: str
    value: float | None
    colour: str
    shown: str  # the value as the page writes it
    tip: str = ""  # the tooltip (defaults to label: shown)


def stacked_bar(kind: str, parts: Sequence[Part], total_shown: str, width: float = 540) -> str:
    """One horizontal bar split into `parts` (values >= 0 drawn to scale), a legend row per part below it."""
    pad, bar_h = 12.0, 26.0
    height = pad + bar_h + 10 + 20 * len(parts) + pad
    out = _open(kind, width, height, f"{kind}: {total_shown}")
    total = sum(max(p.value or 0.0, 0.0) for p in parts) or 1.0
    x, span = pad, width - 2 * pad
    for p in parts:
        w = span * max(p.value or 0.0, 0.0) / total
        if w > 0:
            out.append(f'<rect x="{x:.2f}" y="{pad:.1f}" width="{w:.2f}" height="{bar_h:.1f}" fill="{p.colour}">'
                       f"<title>{esc(p.tip or f'{p.label}: {p.shown}')}</title></rect>")
        x += w
    y = pad + bar_h + 10
    for p in parts:
        pct = 100.0 * max(p.value or 0.0, 0.0) / total
        out.append(f'<rect x="{pad:.1f}" y="{y + 3:.1f}" width="12" height="12" fill="{p.colour}"/>')
        out.append(_text(pad + 18, y + 13, f"{esc(p.label)}: {esc(p.shown)} ({pct:.1f}%)"))
        y += 20
    out.append(_text(width - pad, pad + bar_h + 24, f"total {esc(total_shown)}", anchor="end", weight="bold"))
    out.append("</svg>")
    return "\n".join(out)


def bar_chart(kind: str, rows: Sequence[Part], axis: str, width: float = 1100, label_width: float = 300) -> str:
    """Horizontal bars, one per row, top to bottom in the given order; a row without a value is drawn empty."""
    pad, row_h = 12.0, 20.0
    height = pad + 18 + row_h * max(len(rows), 1) + pad
    out = _open(kind, width, height, axis)
    vmax = max([r.value for r in rows if r.value is not None] + [0.0]) or 1.0
    x0 = pad + label_width
    span = width - x0 - pad - 110
    out.append(_text(x0, pad + 10, esc(axis), size=11, fill=MUTED))
    for i, r in enumerate(rows):
        y = pad + 18 + i * row_h
        out.append(_text(x0 - 8, y + 14, esc(r.label, 44), size=11, anchor="end"))
        if r.value is not None and r.value > 0:
            w = max(span * r.value / vmax, 1.0)
            out.append(f'<rect x="{x0:.1f}" y="{y + 3:.1f}" width="{w:.2f}" height="{row_h - 6:.1f}" '
                       f'fill="{r.colour}"><title>{esc(r.tip or f"{r.label}: {r.shown}")}</title></rect>')
            out.append(_text(x0 + w + 6, y + 14, esc(r.shown), size=11, fill=MUTED))
        else:
            out.append(_text(x0 + 4, y + 14, esc(r.shown), size=11, fill=MUTED))
    out.append(f'<line x1="{x0:.1f}" y1="{pad + 16:.1f}" x2="{x0:.1f}" y2="{height - pad:.1f}" stroke="{GRID}"/>')
    out.append("</svg>")
    return "\n".join(out)


@dataclass(frozen=True)
class Band:
    """A buffer of the memory plan: `size` bytes at `offset`, live from step `start` to `end` (inclusive)."""

    label: str
    offset: int
    size: int
    start: int
    end: int
    colour: str
    tip: str


@dataclass(frozen=True)
class Level:
    """A horizontal line across a memory chart (a peak, a bound, a pool's limit)."""

    label: str
    value: int
    colour: str
    dashed: bool = True


def _ticks(vmax: float, n: int = 5) -> list[int]:
    """Round tick values from 0 to about vmax."""
    if vmax <= 0:
        return [0]
    raw = vmax / n
    mag = 10 ** (len(str(int(raw))) - 1) if raw >= 1 else 1
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    return [int(step * k) for k in range(int(vmax // step) + 1)]


def _levels(out: list[str], levels: Sequence[Level], y_of, x0: float, x1: float) -> None:  # noqa: ANN001
    placed: list[float] = []
    for lv in levels:
        y = y_of(lv.value)
        dash = ' stroke-dasharray="6 4"' if lv.dashed else ""
        out.append(f'<line x1="{x0:.1f}" y1="{y:.1f}" x2="{x1:.1f}" y2="{y:.1f}" stroke="{lv.colour}" '
                   f'stroke-width="1.5"{dash}><title>{esc(lv.label)}: {fmt_bytes(lv.value)}</title></line>')
        ty = y - 4
        while any(abs(ty - p) < 12 for p in placed):  # labels of close levels do not overlap
            ty -= 12
        placed.append(ty)
        out.append(_text(x1 - 4, ty, f"{esc(lv.label)} {fmt_bytes(lv.value)}", size=11, anchor="end", fill=lv.colour))


@dataclass(frozen=True)
class _StepFrame:
    """The plot area of a chart over the execution steps: `steps` columns of width `w` from `x0`, bytes from
    0 at the bottom to `vmax` at `y0`."""

    x0: float
    y0: float
    plot_w: float
    plot_h: float
    vmax: float
    steps: int

    @property
    def w(self) -> float:
        return self.plot_w / max(self.steps, 1)

    def y_of(self, v: float) -> float:
        return self.y0 + self.plot_h - self.plot_h * v / self.vmax


def _step_chart(kind: str, title: str, steps: int, vmax: float, width: float, height: float, x0: float,
                right: float, step_tips: Sequence[str]) -> tuple[list[str], _StepFrame]:
    """The opening of a chart over the execution steps: background, title, byte grid and step axis (a tooltip
    per step); the frame its shapes are placed in."""
    y0 = 28.0
    f = _StepFrame(x0, y0, width - x0 - right, height - y0 - 44, vmax, steps)
    out = _open(kind, width, height, title)
    out.append(_text(x0, 18, esc(title), size=12, weight="bold"))
    for t in _ticks(vmax):
        y = f.y_of(t)
        out.append(f'<line x1="{x0:.1f}" y1="{y:.1f}" x2="{x0 + f.plot_w:.1f}" y2="{y:.1f}" stroke="{GRID}"/>')
        out.append(_text(x0 - 6, y + 4, f"{t:,}", size=10, anchor="end", fill=MUTED))
    w = f.w
    every = max(1, steps // 24)
    base = y0 + f.plot_h
    for s in range(steps):
        if s % every == 0:
            out.append(_text(x0 + (s + 0.5) * w, base + 14, str(s), size=10, anchor="middle", fill=MUTED))
        tip = step_tips[s] if s < len(step_tips) else f"step {s}"
        out.append(f'<rect x="{x0 + s * w:.2f}" y="{base:.1f}" width="{w:.2f}" height="18" fill="none" '
                   f'pointer-events="all"><title>{esc(tip)}</title></rect>')
    out.append(f'<line x1="{x0:.1f}" y1="{base:.1f}" x2="{x0 + f.plot_w:.1f}" y2="{base:.1f}" stroke="{MUTED}"/>')
    out.append(_text(x0 + f.plot_w / 2, base + 30, "execution step (operator function)", size=11,
                     anchor="middle", fill=MUTED))
    return out, f


def _close_step_chart(out: list[str], f: _StepFrame, levels: Sequence[Level]) -> str:
    """`levels` drawn over the shapes, and the chart's text."""
    _levels(out, levels, f.y_of, f.x0, f.x0 + f.plot_w)
    out.append("</svg>")
    return "\n".join(out)


def gantt(kind: str, bands: Sequence[Band], live: Sequence[int], levels: Sequence[Level], step_tips: Sequence[str],
          title: str, width: float = 1100, height: float = 380) -> str:
    """The memory plan over time: x the execution steps, y the byte offset in the workspace; each buffer a
    band over its live steps at its offset; the live bytes at each step as a dark step line; `levels` as
    horizontal lines (peak, bounds, pool limits)."""
    vmax = max([b.offset + b.size for b in bands] + list(live) + [lv.value for lv in levels] + [1]) * 1.08
    out, f = _step_chart(kind, title, len(live), vmax, width, height, 70.0, 16, step_tips)
    x0, w, y_of = f.x0, f.w, f.y_of
    for b in bands:
        top, bottom = y_of(b.offset + b.size), y_of(b.offset)
        span = max((b.end - b.start + 1) * w - 1, 1)
        out.append(f'<rect x="{x0 + b.start * w + 0.5:.2f}" y="{top:.2f}" width="{span:.2f}" '
                   f'height="{max(bottom - top, 1):.2f}" fill="{b.colour}" fill-opacity="0.85" stroke="#ffffff" '
                   f'stroke-width="0.5"><title>{esc(b.tip)}</title></rect>')
    if live:
        pts = []
        for s, v in enumerate(live):
            pts += [f"{x0 + s * w:.2f},{y_of(v):.2f}", f"{x0 + (s + 1) * w:.2f},{y_of(v):.2f}"]
        out.append(f'<polyline points="{" ".join(pts)}" fill="none" stroke="{INK}" stroke-width="2">'
                   "<title>live bytes at each step</title></polyline>")
    return _close_step_chart(out, f, levels)


def stacked_steps(kind: str, steps: Sequence[Sequence[tuple[str, int, str]]], levels: Sequence[Level],
                  step_tips: Sequence[str], title: str, width: float = 540, height: float = 340,
                  vmax: float = 0.0) -> str:
    """Live bytes per step as stacked columns: each step a column of its live buffers (label, bytes, colour),
    the same buffer in the same colour from step to step (a band); `levels` as horizontal lines."""
    top = max([sum(b for _l, b, _c in col) for col in steps] + [lv.value for lv in levels] + [1])
    out, f = _step_chart(kind, title, len(steps), max(vmax, top * 1.08), width, height, 64.0, 12, step_tips)
    x0, w, y_of = f.x0, f.w, f.y_of
    for s, col in enumerate(steps):
        acc = 0
        for label, nbytes, colour in col:
            if nbytes <= 0:
                continue
            y_top, y_bot = y_of(acc + nbytes), y_of(acc)
            out.append(f'<rect x="{x0 + s * w + 1:.2f}" y="{y_top:.2f}" width="{max(w - 2, 1):.2f}" '
                       f'height="{max(y_bot - y_top, 0.5):.2f}" fill="{colour}" stroke="#ffffff" stroke-width="0.5">'
                       f"<title>{esc(f'step {s}: {label}, {nbytes:,} B')}</title></rect>")
            acc += nbytes
    return _close_step_chart(out, f, levels)
