"""Data movement: slicing, splitting, stacking, reversing, mirror padding, updating, broadcasting, filling.

Every op copies elements (no arithmetic), so quantized tensors pass through unchanged; like TFLite Micro's
kernels, none of these ops checks or changes quantization parameters. Index-like operands (begin, end,
strides, sizes, axes, shapes, paddings) are attributes fixed at import; only `dynamic_update_slice` reads
its start indices at run time.

  strided_slice  (x)  begin=(..) end=(..) strides=(..) begin_mask=int end_mask=int shrink_axis_mask=int
                 one entry per axis of x (any rank; TFLite Micro's kernel takes <= 4). TFLite Micro's
                 semantics: a negative begin/end counts from the end, then begin is clamped to [0, n]
                 ([-1, n-1] for a negative stride), end likewise; a masked begin/end takes the whole axis
                 in the stride's direction; a shrunk axis takes the single element at begin and is dropped
                 from the output (it must be inside the axis and its stride positive: TFLite Micro writes
                 nothing otherwise)
  slice          (x)  begin=(..) size=(..)  size -1 = up to the end; 0 <= begin <= n, begin + size <= n
  split          (x) -> y0, y1, ...  axis=int sizes=(..)  output i takes sizes[i] along axis (TFLite
                 SPLIT and SPLIT_V)
  pack           (x0, x1, ...)  axis=int  stacks equally shaped inputs along a new axis
  unpack         (x) -> y0, y1, ...  axis=int  one output per index of `axis` (which is removed)
  reverse        (x)  axes=(..)  reverses the order along each axis
  mirror_pad     (x)  pads=((before, after), ...) mode="reflect"|"symmetric"  (reflect: pads <= n - 1,
                 symmetric: pads <= n, numpy's np.pad modes)
  dynamic_update_slice (x, update, start[int32|int64, rank])  x with `update` written at `start`; each
                 start index is clamped to [0, x.shape[d] - update.shape[d]] (TFLite/XLA)
  broadcast_to   (x)  shape=(..)  numpy broadcasting of x to `shape`
  fill           (value[one element])  shape=(..)  `shape` filled with the value
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from utvm.ir.graph import Graph, Node, Tensor
from utvm.ops import _common as c

OPS: tuple[str, ...] = ("strided_slice", "slice", "split", "pack", "unpack", "reverse", "mirror_pad",
                        "dynamic_update_slice", "broadcast_to", "fill")

#: dtypes each op computes on (TFLite Micro's kernels; uint8 only where TFLite Micro moves it)
DTYPES: dict[str, tuple[str, ...]] = {
    "strided_slice": ("float32", "int8", "int16", "int32", "bool"),
    "slice": ("float32", "int8", "int16", "int32", "bool"),
    "split": ("float32", "int8", "int16", "int32"),
    "pack": ("float32", "int8", "int16", "int32", "int64"),
    "unpack": ("float32", "int8", "int16", "int32"),
    "reverse": ("float32", "int8", "uint8", "int16", "int32", "int64", "bool"),
    "mirror_pad": ("float32", "int8"),
    "dynamic_update_slice": ("float32", "int8", "int16", "int32"),
    "broadcast_to": ("float32", "int8", "uint8", "int16", "int32", "int64", "bool"),
    "fill": ("float32", "int8", "int32"),
}
MIRROR_MODES = ("reflect", "symmetric")


@dataclass(frozen=True)
class MovementParams:
    """Everything the kernels need. `starts`/`steps`/`counts` (strided_slice, slice, reverse): per input
    axis, output element j along that axis is input element starts[d] + j * steps[d], counts[d] of them
    (shrunk axes have count 1 and are then dropped from output_shapes[0]). split: `sizes` along `axis`.
    pack/unpack: `axis` (non-negative, of the packed tensor). mirror_pad: `pads`, `mode`.
    dynamic_update_slice: `index_dtype` of the start indices."""

    op: str
    dtype: str
    input_shapes: tuple[tuple[int, ...], ...]
    output_shapes: tuple[tuple[int, ...], ...]
    axis: int = 0
    starts: tuple[int, ...] = ()
    steps: tuple[int, ...] = ()
    counts: tuple[int, ...] = ()
    sizes: tuple[int, ...] = ()
    pads: tuple[tuple[int, int], ...] = ()
    mode: str = ""
    index_dtype: str = ""


def _ints(node: Node, key: str) -> tuple[int, ...]:
    return tuple(int(v) for v in node.attrs.get(key, ()))


def _axis(node: Node, graph: Graph, axis: int, rank: int) -> int:
    if not -rank <= axis < rank:
        raise c.fail(node, graph, f"axis {axis} is out of range for rank {rank}")
    return axis % rank


def _check_x(node: Node, graph: Graph, i: int = 0) -> Tensor:
    x = c.req(node, graph, i)
    c.check_dtype(node, graph, x, DTYPES[node.op], "input")
    return x


def strided_slice_plan(node: Node, graph: Graph, shape: tuple[int, ...]) -> tuple[list[int], list[int], list[int]]:
    """(starts, steps, counts) per axis of a strided_slice, TFLite Micro's rules; GraphError when TFLite
    Micro would compute something else than the declared output (see the module docstring)."""
    begin, end, strides = _ints(node, "begin"), _ints(node, "end"), _ints(node, "strides")
    rank = len(shape)
    for what, v in (("begin", begin), ("end", end), ("strides", strides)):
        if len(v) != rank:
            raise c.fail(node, graph, f"{what} {list(v)} needs one entry per axis of the rank-{rank} input")
    bmask, emask = int(node.attrs.get("begin_mask", 0)), int(node.attrs.get("end_mask", 0))
    smask = int(node.attrs.get("shrink_axis_mask", 0))
    starts, counts = [], []
    for d, n in enumerate(shape):
        st = strides[d]
        if st == 0:
            raise c.fail(node, graph, f"stride of axis {d} is 0")
        lo, hi = (0, n) if st > 0 else (-1, n - 1)
        b = begin[d] + n if begin[d] < 0 else begin[d]
        b = min(max(b, lo), hi)
        if bmask >> d & 1:
            b = 0 if st > 0 else n - 1
        if smask >> d & 1:
            if st < 0 or b >= n:
                raise c.fail(node, graph, f"shrunk axis {d}: begin {begin[d]} (stride {st}) does not select an "
                                          f"element of the axis of size {n}")
            e = b + 1
        else:
            e = end[d] + n if end[d] < 0 else end[d]
            e = min(max(e, lo), hi)
            if emask >> d & 1:
                e = n if st > 0 else -1
        starts.append(b)
        counts.append(len(range(b, e, st)))
    return starts, list(strides), counts


def infer(node: Node, graph: Graph) -> list[c.OutType]:
    op = node.op
    if op == "pack":
        if not node.inputs:
            raise c.fail(node, graph, "pack needs at least one input")
        c.check_count(node, graph, len(node.inputs))
        xs = [_check_x(node, graph, i) for i in range(len(node.inputs))]
        for t in xs[1:]:
            if t.dtype != xs[0].dtype or tuple(t.shape) != tuple(xs[0].shape):
                raise c.fail(node, graph, f"input {t.name!r} ({t.dtype}{list(t.shape)}) differs from input "
                                          f"{xs[0].name!r} ({xs[0].dtype}{list(xs[0].shape)})")
        rank = len(xs[0].shape) + 1
        ax = _axis(node, graph, int(node.attrs.get("axis", 0)), rank)
        shape = list(xs[0].shape)
        shape.insert(ax, len(xs))
        return [(tuple(shape), xs[0].dtype)]
    if op == "fill":
        c.check_count(node, graph, 1)
        v = _check_x(node, graph)
        if v.size != 1:
            raise c.fail(node, graph, f"value {v.name!r} has {v.size} elements; it must have one")
        shape = _ints(node, "shape")
        if any(d < 0 for d in shape):
            raise c.fail(node, graph, f"shape {list(shape)} has a negative dimension")
        return [(shape, v.dtype)]
    if op == "dynamic_update_slice":
        c.check_count(node, graph, 3)
        x, u, idx = _check_x(node, graph, 0), c.req(node, graph, 1), c.req(node, graph, 2)
        if u.dtype != x.dtype:
            raise c.fail(node, graph, f"update {u.name!r} is {u.dtype}, operand {x.name!r} is {x.dtype}")
        c.check_dtype(node, graph, idx, ("int32", "int64"), "start indices")
        if len(u.shape) != len(x.shape) or any(a > b for a, b in zip(u.shape, x.shape, strict=True)):
            raise c.fail(node, graph, f"update {u.name!r} of shape {list(u.shape)} does not fit in operand "
                                      f"{x.name!r} of shape {list(x.shape)}")
        if tuple(idx.shape) != (len(x.shape),):
            raise c.fail(node, graph, f"start indices {idx.name!r} have shape {list(idx.shape)}; expected "
                                      f"[{len(x.shape)}]")
        return [(tuple(x.shape), x.dtype)]
    if op in ("split", "unpack"):
        c.check_count(node, graph, 1, len(node.outputs))
        if not node.outputs:
            raise c.fail(node, graph, f"{op} needs at least one output")
        x = _check_x(node, graph)
        if not x.shape:
            raise c.fail(node, graph, f"input {x.name!r} is a scalar")
        ax = _axis(node, graph, int(node.attrs.get("axis", 0)), len(x.shape))
        if op == "unpack":
            if x.shape[ax] != len(node.outputs):
                raise c.fail(node, graph, f"axis {ax} of {x.name!r} has {x.shape[ax]} elements but the node has "
                                          f"{len(node.outputs)} outputs")
            shape = tuple(d for i, d in enumerate(x.shape) if i != ax)
            return [(shape, x.dtype)] * len(node.outputs)
        sizes = _ints(node, "sizes")
        if len(sizes) != len(node.outputs) or any(s < 0 for s in sizes) or sum(sizes) != x.shape[ax]:
            raise c.fail(node, graph, f"sizes {list(sizes)} must be {len(node.outputs)} non-negative extents "
                                      f"summing to {x.shape[ax]} (axis {ax} of {x.name!r})")
        outs = []
        for s in sizes:
            shape_l = list(x.shape)
            shape_l[ax] = s
            outs.append((tuple(shape_l), x.dtype))
        return outs
    c.check_count(node, graph, 1)
    x = _check_x(node, graph)
    shape = tuple(x.shape)
    rank = len(shape)
    if op == "strided_slice":
        _starts, _steps, counts = strided_slice_plan(node, graph, shape)
        smask = int(node.attrs.get("shrink_axis_mask", 0))
        return [(tuple(n for d, n in enumerate(counts) if not smask >> d & 1), x.dtype)]
    if op == "slice":
        begin, size = _ints(node, "begin"), _ints(node, "size")
        if len(begin) != rank or len(size) != rank:
            raise c.fail(node, graph, f"begin {list(begin)} and size {list(size)} need one entry per axis of the "
                                      f"rank-{rank} input")
        out = []
        for d, n in enumerate(shape):
            s = n - begin[d] if size[d] == -1 else size[d]
            if not 0 <= begin[d] <= n or not 0 <= s <= n - begin[d]:
                raise c.fail(node, graph, f"axis {d}: begin {begin[d]} size {size[d]} is outside the axis of "
                                          f"size {n}")
            out.append(s)
        return [(tuple(out), x.dtype)]
    if op == "reverse":
        axes = [_axis(node, graph, a, rank) for a in _ints(node, "axes")]
        if len(set(axes)) != len(axes):
            raise c.fail(node, graph, f"axes {list(_ints(node, 'axes'))} repeat an axis")
        return [(shape, x.dtype)]
    if op == "mirror_pad":
        pads = tuple((int(p[0]), int(p[1])) for p in node.attrs.get("pads", ()))
        mode = node.attrs.get("mode", "reflect")
        if mode not in MIRROR_MODES:
            raise c.fail(node, graph, f"mode {mode!r} is not one of {', '.join(MIRROR_MODES)}")
        if len(pads) != rank:
            raise c.fail(node, graph, f"pads {list(pads)} need one (before, after) pair per axis (rank {rank})")
        limit = 1 if mode == "reflect" else 0
        for d, (b, a) in enumerate(pads):
            if b < 0 or a < 0 or max(b, a) > shape[d] - limit or (shape[d] == 0 and b + a):
                raise c.fail(node, graph, f"axis {d} of size {shape[d]}: pads ({b}, {a}) must be between 0 and "
                                          f"{shape[d] - limit} in {mode} mode")
        return [(tuple(n + b + a for n, (b, a) in zip(shape, pads, strict=True)), x.dtype)]
    if op == "broadcast_to":
        target = _ints(node, "shape")
        if len(target) < rank or any(d < 0 for d in target) or any(
                n not in (1, t) for n, t in zip(shape, target[len(target) - rank:], strict=True)):
            raise c.fail(node, graph, f"cannot broadcast {x.name!r} of shape {list(shape)} to {list(target)}")
        return [(target, x.dtype)]
    raise c.fail(node, graph, f"op {op!r} is not a movement op")


def prepare(node: Node, graph: Graph, rounding: str = "single") -> MovementParams:
    outs = infer(node, graph)
    in_shapes = tuple(tuple(c.req(node, graph, i).shape) for i in range(len(node.inputs)))
    out_shapes = tuple(s for s, _ in outs)
    dtype = outs[0][1]
    p = MovementParams(node.op, dtype, in_shapes, out_shapes)
    op = node.op
    shape = in_shapes[0]
    if op == "strided_slice":
        starts, steps, counts = strided_slice_plan(node, graph, shape)
        return _replace(p, starts=tuple(starts), steps=tuple(steps), counts=tuple(counts))
    if op == "slice":
        begin = _ints(node, "begin")
        return _replace(p, starts=begin, steps=(1,) * len(shape), counts=out_shapes[0])
    if op == "reverse":
        axes = {a % len(shape) for a in _ints(node, "axes")}
        return _replace(p, starts=tuple(n - 1 if d in axes else 0 for d, n in enumerate(shape)),
                        steps=tuple(-1 if d in axes else 1 for d in range(len(shape))), counts=shape)
    if op in ("split", "unpack"):
        return _replace(p, axis=int(node.attrs.get("axis", 0)) % len(shape), sizes=_ints(node, "sizes"))
    if op == "pack":
        return _replace(p, axis=int(node.attrs.get("axis", 0)) % len(out_shapes[0]))
    if op == "mirror_pad":
        return _replace(p, pads=tuple((int(a), int(b)) for a, b in node.attrs["pads"]),
                        mode=str(node.attrs.get("mode", "reflect")))
    if op == "dynamic_update_slice":
        return _replace(p, index_dtype=c.req(node, graph, 2).dtype)
    return p


def _replace(p: MovementParams, **kw: object) -> MovementParams:
    import dataclasses

    return dataclasses.replace(p, **kw)  # type: ignore[arg-type]


def reference(p: MovementParams, *arrays: np.ndarray) -> np.ndarray | tuple[np.ndarray, ...]:
    x = arrays[0]
    if p.op in ("strided_slice", "slice", "reverse"):
        idx = [np.arange(s, s + k * st, st, dtype=np.int64) if k else np.zeros(0, np.int64)
               for s, st, k in zip(p.starts, p.steps, p.counts, strict=True)]
        y = x[np.ix_(*idx)] if idx else x.copy()
        return np.ascontiguousarray(y).reshape(p.output_shapes[0])
    if p.op == "split":
        cuts = np.cumsum(p.sizes)[:-1]
        return tuple(np.ascontiguousarray(a) for a in np.split(x, cuts, axis=p.axis))
    if p.op == "unpack":
        return tuple(np.ascontiguousarray(np.take(x, i, axis=p.axis)) for i in range(x.shape[p.axis]))
    if p.op == "pack":
        return np.stack(arrays, axis=p.axis)
    if p.op == "mirror_pad":
        return np.pad(x, p.pads, mode=p.mode) if x.size else x.copy()
    if p.op == "dynamic_update_slice":
        u, start = arrays[1], arrays[2]
        y = x.copy()
        lo = [int(min(max(int(s), 0), n - k)) for s, n, k in zip(start.ravel(), x.shape, u.shape, strict=True)]
        y[tuple(slice(b, b + k) for b, k in zip(lo, u.shape, strict=True))] = u
        return y
    if p.op == "broadcast_to":
        return np.ascontiguousarray(np.broadcast_to(x, p.output_shapes[0]))
    if p.op == "fill":
        return np.full(p.output_shapes[0], x.ravel()[0], dtype=x.dtype)
    raise ValueError(f"not a movement op: {p.op}")
