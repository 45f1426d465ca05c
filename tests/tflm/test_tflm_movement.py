"""The movement family against TFLite Micro: STRIDED_SLICE, SLICE, SPLIT, SPLIT_V, PACK, UNPACK, REVERSE_V2,
MIRROR_PAD, DYNAMIC_UPDATE_SLICE, BROADCAST_TO, BROADCAST_ARGS, SHAPE, FILL, and the int16/int32/int64/bool
variants of PAD, PADV2, TRANSPOSE, CONCATENATION, RESHAPE, SQUEEZE, EXPAND_DIMS."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tflite_builder import TFLiteBuilder  # noqa: E402
from tflm_harness import Case, check_cases  # noqa: E402
from utvm.errors import GraphError, ModelFormatError, UnsupportedModelError  # noqa: E402
from utvm.frontend import from_tflite  # noqa: E402

QUANT = {"int8": {"scale": 0.05, "zero_point": -3}, "int16": {"scale": 0.002, "zero_point": 0}}


def _t(b: TFLiteBuilder, name: str, shape, dtype: str, **kw) -> int:  # noqa: ANN001
    return b.tensor(name, shape, dtype, **QUANT.get(dtype, {}), **kw)


def _c(b: TFLiteBuilder, name: str, values, dtype: str = "int32") -> int:  # noqa: ANN001
    arr = np.asarray(values, dtype=dtype)
    return b.tensor(name, arr.shape, dtype, data=arr)


def strided_slice(shape, begin, end, strides, dtype="float32", **masks) -> bytes:  # noqa: ANN001
    b = TFLiteBuilder()
    x = _t(b, "x", shape, dtype)
    counts = _counts(shape, begin, end, strides, masks)
    smask = masks.get("ShrinkAxisMask", 0)
    oshape = [k for d, k in enumerate(counts) if not smask >> d & 1]
    y = _t(b, "y", oshape, dtype)
    b.op("STRIDED_SLICE", [x, _c(b, "begin", begin), _c(b, "end", end), _c(b, "strides", strides)], [y],
         "StridedSliceOptions", **masks)
    return b.build([x], [y])


def _counts(shape, begin, end, strides, masks) -> list[int]:  # noqa: ANN001
    """Output extents with numpy's slicing (which the masks map onto): an independent check of the op."""
    bm, em, sm = masks.get("BeginMask", 0), masks.get("EndMask", 0), masks.get("ShrinkAxisMask", 0)
    counts = []
    for d, n in enumerate(shape):
        if sm >> d & 1 or strides[d] == 0:
            counts.append(1)
            continue
        sl = slice(None if bm >> d & 1 else begin[d], None if em >> d & 1 else end[d], strides[d])
        counts.append(len(range(n)[sl]))
    return counts


def slice_(shape, begin, size, dtype="float32", index_dtype="int32") -> bytes:  # noqa: ANN001
    b = TFLiteBuilder()
    x = _t(b, "x", shape, dtype)
    oshape = [n - s if z == -1 else z for n, s, z in zip(shape, begin, size, strict=True)]
    y = _t(b, "y", oshape, dtype)
    b.op("SLICE", [x, _c(b, "begin", begin, index_dtype), _c(b, "size", size, index_dtype)], [y], "SliceOptions")
    return b.build([x], [y])


def split(shape, axis, n, dtype="float32") -> bytes:  # noqa: ANN001
    b = TFLiteBuilder()
    ax = _c(b, "axis", axis)
    x = _t(b, "x", shape, dtype)
    oshape = list(shape)
    oshape[axis] //= n
    ys = [_t(b, f"y{i}", oshape, dtype) for i in range(n)]
    b.op("SPLIT", [ax, x], ys, "SplitOptions", NumSplits=n)
    return b.build([x], ys)


def split_v(shape, sizes, axis, dtype="float32") -> bytes:  # noqa: ANN001
    b = TFLiteBuilder()
    x = _t(b, "x", shape, dtype)
    resolved = list(sizes)
    if -1 in resolved:
        resolved[resolved.index(-1)] = shape[axis] - (sum(sizes) + 1)
    ys = []
    for i, s in enumerate(resolved):
        oshape = list(shape)
        oshape[axis] = s
        ys.append(_t(b, f"y{i}", oshape, dtype))
    b.op("SPLIT_V", [x, _c(b, "sizes", sizes), _c(b, "axis", [axis])], ys, "SplitVOptions", NumSplits=len(sizes))
    return b.build([x], ys)


def pack(shape, n, axis, dtype="float32") -> bytes:  # noqa: ANN001
    b = TFLiteBuilder()
    xs = [_t(b, f"x{i}", shape, dtype) for i in range(n)]
    oshape = list(shape)
    oshape.insert(axis % (len(shape) + 1), n)
    y = _t(b, "y", oshape, dtype)
    b.op("PACK", xs, [y], "PackOptions", ValuesCount=n, Axis=axis)
    return b.build(xs, [y])


def unpack(shape, axis, dtype="float32") -> bytes:  # noqa: ANN001
    b = TFLiteBuilder()
    x = _t(b, "x", shape, dtype)
    ax = axis % len(shape)
    oshape = [d for i, d in enumerate(shape) if i != ax]
    ys = [_t(b, f"y{i}", oshape, dtype) for i in range(shape[ax])]
    b.op("UNPACK", [x], ys, "UnpackOptions", Num=shape[ax], Axis=axis)
    return b.build([x], ys)


def reverse(shape, axes, dtype="float32") -> bytes:  # noqa: ANN001
    b = TFLiteBuilder()
    x = _t(b, "x", shape, dtype)
    y = _t(b, "y", shape, dtype)
    b.op("REVERSE_V2", [x, _c(b, "axes", axes)], [y], "ReverseV2Options")
    return b.build([x], [y])


def mirror_pad(shape, pads, mode, dtype="float32", pad_dtype="int32") -> bytes:  # noqa: ANN001
    b = TFLiteBuilder()
    x = _t(b, "x", shape, dtype)
    y = _t(b, "y", [n + p + q for n, (p, q) in zip(shape, pads, strict=True)], dtype)
    b.op("MIRROR_PAD", [x, _c(b, "pads", pads, pad_dtype)], [y], "MirrorPadOptions", Mode=mode)
    return b.build([x], [y])


def dynamic_update_slice(shape, ushape, start, dtype="float32", index_dtype="int32", runtime=False) -> bytes:  # noqa: ANN001
    b = TFLiteBuilder()
    x = _t(b, "x", shape, dtype)
    u = _t(b, "u", ushape, dtype)
    idx = b.tensor("start", (len(shape),), index_dtype) if runtime else _c(b, "start", start, index_dtype)
    y = _t(b, "y", shape, dtype)
    b.op("DYNAMIC_UPDATE_SLICE", [x, u, idx], [y], "DynamicUpdateSliceOptions")
    return b.build([x, u, idx] if runtime else [x, u], [y])


def dus_after_reverse() -> bytes:
    """REVERSE_V2 -> DYNAMIC_UPDATE_SLICE: the operand dies at the update, so the planner may let the output
    share its buffer (the kernel's in-place path)."""
    b = TFLiteBuilder()
    x = b.tensor("x", (4, 5), "int8", scale=0.1, zero_point=1)
    r = b.tensor("r", (4, 5), "int8", scale=0.1, zero_point=1)
    b.op("REVERSE_V2", [x, _c(b, "axes", [1])], [r], "ReverseV2Options")
    u = b.tensor("u", (2, 5), "int8", scale=0.1, zero_point=1)
    y = b.tensor("y", (4, 5), "int8", scale=0.1, zero_point=1)
    b.op("DYNAMIC_UPDATE_SLICE", [r, u, _c(b, "start", [1, 3])], [y], "DynamicUpdateSliceOptions")
    return b.build([x, u], [y])


def broadcast_to(shape, target, dtype="float32", shape_dtype="int32") -> bytes:  # noqa: ANN001
    b = TFLiteBuilder()
    x = _t(b, "x", shape, dtype)
    y = _t(b, "y", target, dtype)
    b.op("BROADCAST_TO", [x, _c(b, "shape", target, shape_dtype)], [y], "BroadcastToOptions")
    return b.build([x], [y])


def fill(shape, value, dtype) -> bytes:  # noqa: ANN001
    """FILL with a constant scalar value (TFLite Micro needs a rank-0 value, which the oracle cannot feed as
    an input); an independent input passes through an identity RESHAPE so the model has an input."""
    b = TFLiteBuilder()
    x = b.tensor("x", (2,), "float32")
    xo = b.tensor("xo", (2,), "float32")
    b.op("RESHAPE", [x, _c(b, "rs", [2])], [xo], "ReshapeOptions")
    y = _t(b, "y", shape, dtype)
    v = b.tensor("v", (), dtype, data=np.array(value, dtype=dtype), **QUANT.get(dtype, {}))
    b.op("FILL", [_c(b, "dims", shape), v], [y], "FillOptions")
    return b.build([x], [xo, y])


def fill_computed(dtype: str) -> bytes:
    """FILL whose value is computed: a STRIDED_SLICE shrinking the input to a scalar."""
    b = TFLiteBuilder()
    x = _t(b, "x", (3,), dtype)
    v = _t(b, "v", (), dtype)
    b.op("STRIDED_SLICE", [x, _c(b, "b", [1]), _c(b, "e", [2]), _c(b, "s", [1])], [v], "StridedSliceOptions",
         ShrinkAxisMask=1)
    y = _t(b, "y", (2, 3), dtype)
    b.op("FILL", [_c(b, "dims", [2, 3]), v], [y], "FillOptions")
    return b.build([x], [y])


def shape_op(shape, dtype="float32") -> bytes:  # noqa: ANN001
    b = TFLiteBuilder()
    x = _t(b, "x", shape, dtype)
    y = b.tensor("y", (len(shape),), "int32")
    b.op("SHAPE", [x], [y], "ShapeOptions", OutType=2)
    return b.build([x], [y])


def shape_chain() -> bytes:
    """SHAPE -> STRIDED_SLICE (shrink) -> PACK -> RESHAPE's shape, plus SHAPE and BROADCAST_ARGS as graph
    outputs: the shape arithmetic is folded at import into constants."""
    b = TFLiteBuilder()
    x = b.tensor("x", (2, 3, 4), "float32")
    s = b.tensor("s", (3,), "int32")
    b.op("SHAPE", [x], [s], "ShapeOptions", OutType=2)
    d1 = b.tensor("d1", (), "int32")
    b.op("STRIDED_SLICE", [s, _c(b, "b", [1]), _c(b, "e", [2]), _c(b, "st", [1])], [d1], "StridedSliceOptions",
         ShrinkAxisMask=1)
    dims = b.tensor("dims", (2,), "int32")
    b.op("PACK", [d1, _c(b, "eight", 8)], [dims], "PackOptions", ValuesCount=2, Axis=0)
    ba = b.tensor("ba", (4,), "int32")
    b.op("BROADCAST_ARGS", [s, _c(b, "s2", [5, 1, 3, 1])], [ba])
    xr = b.tensor("xr", (3, 8), "float32")
    b.op("RESHAPE", [x, dims], [xr], "ReshapeOptions")
    return b.build([x], [xr, s, ba])


def pad(shape, pads, dtype, v2=False, value=0) -> bytes:  # noqa: ANN001
    b = TFLiteBuilder()
    x = _t(b, "x", shape, dtype)
    y = _t(b, "y", [n + p + q for n, (p, q) in zip(shape, pads, strict=True)], dtype)
    ins = [x, _c(b, "pads", pads)]
    if v2:
        ins.append(b.tensor("cv", (), dtype, data=np.array(value, dtype=dtype), **QUANT.get(dtype, {})))
    b.op("PADV2" if v2 else "PAD", ins, [y], "PadV2Options" if v2 else "PadOptions")
    return b.build([x], [y])


def pad_zp(shape, pads, dtype, zp) -> bytes:  # noqa: ANN001
    """PAD of a tensor with a non-zero zero point: TFLite Micro pads int8 with it, int16 with 0."""
    b = TFLiteBuilder()
    x = b.tensor("x", shape, dtype, scale=0.01, zero_point=zp)
    y = b.tensor("y", [n + p + q for n, (p, q) in zip(shape, pads, strict=True)], dtype, scale=0.01, zero_point=zp)
    b.op("PAD", [x, _c(b, "pads", pads)], [y], "PadOptions")
    return b.build([x], [y])


def concat_mixed_scales() -> bytes:
    """int16 CONCATENATION copies raw values: TFLite Micro does not require equal scales (int8 does)."""
    b = TFLiteBuilder()
    x0 = b.tensor("x0", (2, 2), "int16", scale=0.01, zero_point=0)
    x1 = b.tensor("x1", (2, 3), "int16", scale=0.02, zero_point=0)
    y = b.tensor("y", (2, 5), "int16", scale=0.01, zero_point=0)
    b.op("CONCATENATION", [x0, x1], [y], "ConcatenationOptions", Axis=1)
    return b.build([x0, x1], [y])


def transpose(shape, perm, dtype) -> bytes:  # noqa: ANN001
    b = TFLiteBuilder()
    x = _t(b, "x", shape, dtype)
    y = _t(b, "y", [shape[p] for p in perm], dtype)
    b.op("TRANSPOSE", [x, _c(b, "perm", perm)], [y], "TransposeOptions")
    return b.build([x], [y])


def concat(shapes, axis, dtype) -> bytes:  # noqa: ANN001
    b = TFLiteBuilder()
    xs = [_t(b, f"x{i}", s, dtype) for i, s in enumerate(shapes)]
    oshape = list(shapes[0])
    oshape[axis] = sum(s[axis] for s in shapes)
    y = _t(b, "y", oshape, dtype)
    b.op("CONCATENATION", xs, [y], "ConcatenationOptions", Axis=axis)
    return b.build(xs, [y])


def reshape_like(code, shape, oshape, dtype) -> bytes:  # noqa: ANN001
    b = TFLiteBuilder()
    x = _t(b, "x", shape, dtype)
    y = _t(b, "y", oshape, dtype)
    if code == "RESHAPE":
        b.op("RESHAPE", [x, _c(b, "shape", oshape)], [y], "ReshapeOptions")
    elif code == "SQUEEZE":
        b.op("SQUEEZE", [x], [y], "SqueezeOptions")
    else:
        axis = next(i for i, (a, c) in enumerate(zip(list(shape) + [None], oshape, strict=False)) if a != c)
        b.op("EXPAND_DIMS", [x, _c(b, "axis", [axis])], [y], "ExpandDimsOptions")
    return b.build([x], [y])


def _random_strided_slices(n: int) -> list[Case]:
    """Random begin/end/stride/mask combinations (rank 1..4, out-of-range and negative indices, negative
    strides, shrink axes on valid positions) with extents computed by Python's own slicing."""
    rng = np.random.default_rng(12)
    dtypes = ("float32", "int8", "int16", "int32", "bool")
    out = []
    while len(out) < n:
        k = len(out)
        rank = int(rng.integers(1, 5))
        shape = [int(rng.integers(1, 6)) for _ in range(rank)]
        begin, end, strides = [], [], []
        masks = {"BeginMask": 0, "EndMask": 0, "ShrinkAxisMask": 0}
        for d, size in enumerate(shape):
            st = int(rng.choice([-3, -2, -1, 1, 1, 2, 3]))
            begin.append(int(rng.integers(-size - 2, size + 3)))
            end.append(int(rng.integers(-size - 2, size + 3)))
            if rng.random() < 0.2:
                masks["BeginMask"] |= 1 << d
            if rng.random() < 0.2:
                masks["EndMask"] |= 1 << d
            if rng.random() < 0.15 and rank > 1:
                st, begin[-1] = 1, int(rng.integers(-size, size))
                masks["ShrinkAxisMask"] |= 1 << d
            strides.append(st)
        if 0 in _counts(shape, begin, end, strides, masks):  # TFLite Micro cannot allocate empty tensors
            continue
        out.append(Case(f"ss-random{k}", strided_slice(shape, begin, end, strides, dtypes[k % len(dtypes)], **masks)))
    return out


def _cases() -> list[Case]:
    cases: list[Case] = []
    add = cases.append
    # STRIDED_SLICE: every dtype, then masks, negative strides/indices, shrink, rank 1..4
    for dt in ("float32", "int8", "int16", "int32", "bool"):
        add(Case(f"ss-{dt}", strided_slice((2, 5, 6), [0, 1, -5], [2, -1, 6], [1, 2, 2], dt)))
    add(Case("ss-rank1-neg-stride", strided_slice((7,), [-1], [0], [-2])))
    add(Case("ss-rank1-neg-masks", strided_slice((7,), [3], [1], [-3], BeginMask=1, EndMask=1)))
    add(Case("ss-rank2-begin-end-mask", strided_slice((4, 6), [2, 1], [3, 4], [1, 1], BeginMask=1, EndMask=2)))
    add(Case("ss-rank3-shrink", strided_slice((3, 4, 5), [1, -1, 0], [2, 0, 5], [1, 1, 2], "int8",
                                              ShrinkAxisMask=3)))
    add(Case("ss-rank4-mixed", strided_slice((2, 3, 4, 5), [1, 2, -1, 0], [-3, 0, 0, 5], [-1, -1, -1, 3], "int16",
                                             EndMask=1)))
    add(Case("ss-rank4-nchw-crop", strided_slice((1, 6, 6, 3), [0, 1, 1, 0], [1, 5, 5, 3], [1, 1, 1, 1])))
    add(Case("ss-clamped", strided_slice((5, 4), [-9, 2], [99, 99], [1, 1], "int32")))
    add(Case("ss-empty", strided_slice((5,), [3], [1], [1])))
    # TFLite Micro ignores ellipsis_mask, new_axis_mask and offset (imported the same way, with a warning)
    add(Case("ss-ellipsis-ignored", strided_slice((2, 3, 4), [0, 0, 1], [2, 3, 3], [1, 1, 1], EllipsisMask=1)))
    add(Case("ss-offset-ignored", strided_slice((6,), [1], [3], [1], "int8", Offset=True)))
    add(Case("ss-rank0-result", strided_slice((3,), [-2], [0], [1], "int16", ShrinkAxisMask=1)))
    cases.extend(_random_strided_slices(14))
    # SLICE
    for dt in ("float32", "int8", "int16", "int32", "bool"):
        add(Case(f"slice-{dt}", slice_((3, 4, 5), [1, 0, 2], [2, -1, 3], dt)))
    add(Case("slice-rank5-int64-idx", slice_((2, 2, 3, 2, 4), [1, 0, 1, 0, 1], [1, 2, -1, 1, 2], "int8", "int64")))
    add(Case("slice-rank1", slice_((9,), [4], [3], "int16")))
    # SPLIT / SPLIT_V
    for dt in ("float32", "int8", "int16", "int32"):
        add(Case(f"split-{dt}", split((2, 6, 3), 1, 3, dt)))
        add(Case(f"splitv-{dt}", split_v((4, 7), [2, -1, 1], 1, dt)))
    add(Case("split-axis0", split((4, 3), 0, 2, "int8")))
    add(Case("split-neg-axis", split((2, 3, 4), -1, 2, "int16")))
    add(Case("split-one", split((3, 2), 0, 1)))
    add(Case("splitv-axis0", split_v((6, 2, 2), [1, 3, 2], 0, "int32")))
    add(Case("splitv-neg-axis", split_v((2, 5), [4, 1], -1, "int8")))
    # PACK / UNPACK
    for dt in ("float32", "int8", "int16", "int32", "int64"):
        add(Case(f"pack-{dt}", pack((2, 3), 3, 1, dt)))
    add(Case("pack-axis0", pack((4,), 2, 0, "int8")))
    add(Case("pack-last", pack((2, 2), 3, -1, "int16")))
    add(Case("pack-rank4", pack((1, 2, 2, 3), 2, 2)))
    for dt in ("float32", "int8", "int16", "int32"):
        add(Case(f"unpack-{dt}", unpack((2, 3, 4), 1, dt)))
    add(Case("unpack-axis0", unpack((3, 5), 0, "int8")))
    add(Case("unpack-neg-axis", unpack((2, 2, 3), -1, "int16")))
    # REVERSE_V2
    for dt in ("float32", "int8", "int16", "int32", "int64", "bool"):
        add(Case(f"reverse-{dt}", reverse((2, 3, 4), [1], dt)))
    add(Case("reverse-uint8", reverse((4, 3), [0], "uint8")))
    add(Case("reverse-two-axes", reverse((2, 3, 4), [2, 1], "int8")))
    add(Case("reverse-neg-axis", reverse((3, 5), [-1])))
    add(Case("reverse-all", reverse((2, 2, 3, 2), [0, 1, 2, 3], "int16")))
    # MIRROR_PAD
    for dt in ("float32", "int8"):
        add(Case(f"mirror-reflect-{dt}", mirror_pad((1, 4, 5, 2), [[0, 0], [2, 3], [1, 4], [0, 0]], 0, dt)))
        add(Case(f"mirror-symmetric-{dt}", mirror_pad((3, 4), [[3, 1], [4, 2]], 1, dt)))
    add(Case("mirror-rank1-int64-pads", mirror_pad((5,), [[4, 2]], 0, "float32", "int64")))
    add(Case("mirror-inner-axis", mirror_pad((2, 3), [[0, 0], [2, 2]], 1, "int8")))
    # DYNAMIC_UPDATE_SLICE
    for dt in ("float32", "int8", "int16", "int32"):
        add(Case(f"dus-{dt}", dynamic_update_slice((3, 4, 5), (2, 2, 3), [1, 2, 1], dt)))
    add(Case("dus-clamped-int64", dynamic_update_slice((4, 6), (2, 3), [7, -2], "int8", "int64")))
    add(Case("dus-runtime-start", dynamic_update_slice((5, 6), (2, 4), None, "float32", "int32", True),
             inputs=lambda rng: [rng.uniform(-1, 1, (5, 6)).astype(np.float32),
                                 rng.uniform(-1, 1, (2, 4)).astype(np.float32),
                                 rng.integers(-3, 8, (2,)).astype(np.int32)]))
    add(Case("dus-in-place", dus_after_reverse()))
    add(Case("dus-whole", dynamic_update_slice((2, 3), (2, 3), [1, 1], "int16")))
    # BROADCAST_TO
    for dt in ("float32", "int8", "int16", "int32", "int64", "bool"):
        add(Case(f"bto-{dt}", broadcast_to((3, 1), (2, 3, 4), dt)))
    add(Case("bto-rank5-int64-shape", broadcast_to((1, 2, 1, 3), (2, 2, 2, 2, 3), "int8", "int64")))
    add(Case("bto-uint8", broadcast_to((1,), (3, 2), "uint8")))
    add(Case("bto-same", broadcast_to((2, 3), (2, 3))))
    # FILL, SHAPE, BROADCAST_ARGS
    for dt, v in (("float32", -2.5), ("int8", -7), ("int32", 123456)):
        add(Case(f"fill-{dt}", fill((2, 3, 2), v, dt)))
    for dt in ("float32", "int8", "int32"):
        add(Case(f"fill-computed-{dt}", fill_computed(dt)))
    for dt in ("float32", "int8", "bool"):
        add(Case(f"shape-{dt}", shape_op((2, 1, 3), dt)))
    add(Case("shape-chain", shape_chain()))
    # PAD / PADV2, TRANSPOSE, CONCATENATION, RESHAPE/SQUEEZE/EXPAND_DIMS in the dtypes TFLite Micro adds
    for dt in ("int16", "int32"):
        add(Case(f"pad-{dt}", pad((2, 3, 2), [[1, 0], [0, 2], [1, 1]], dt)))
        add(Case(f"padv2-{dt}", pad((2, 3), [[1, 2], [2, 0]], dt, v2=True, value=-17)))
    add(Case("pad-int16-zero-point", pad_zp((2, 3), [[1, 1], [0, 2]], "int16", 5)))
    add(Case("transpose-int16", transpose((2, 3, 4), (2, 0, 1), "int16")))
    add(Case("transpose-int16-rank5", transpose((2, 1, 3, 2, 2), (4, 3, 2, 1, 0), "int16")))
    for dt in ("int16", "int32", "int64", "bool"):
        add(Case(f"concat-{dt}", concat([(2, 3), (2, 1), (2, 2)], 1, dt)))
    add(Case("concat-int16-mixed-scales", concat_mixed_scales()))
    add(Case("concat-int16-axis0", concat([(1, 3), (2, 3)], 0, "int16")))
    for dt in ("int16", "int32", "int64", "bool"):
        add(Case(f"reshape-{dt}", reshape_like("RESHAPE", (2, 3, 2), (3, 4), dt)))
        add(Case(f"squeeze-{dt}", reshape_like("SQUEEZE", (2, 1, 3), (2, 3), dt)))
    add(Case("expand-int16", reshape_like("EXPAND_DIMS", (2, 3), (2, 1, 3), "int16")))
    # rank 5 where TFLite Micro allows it, and the float32/int8 paths of the pre-existing ops against TFLM
    add(Case("split-rank5", split((2, 1, 4, 2, 3), 2, 2, "int8")))
    add(Case("unpack-rank5", unpack((2, 2, 1, 3, 2), 3, "int16")))
    add(Case("reverse-rank5", reverse((2, 2, 3, 2, 2), [2, 3])))
    add(Case("mirror-rank5", mirror_pad((1, 2, 3, 2, 2), [[0, 0], [1, 1], [2, 0], [0, 1], [0, 0]], 1, "int8")))
    add(Case("dus-rank5", dynamic_update_slice((2, 3, 2, 3, 4), (1, 2, 2, 1, 3), [1, 0, 0, 2, 1], "int16")))
    add(Case("pad-int8", pad((1, 3, 3, 2), [[0, 0], [1, 1], [2, 0], [0, 0]], "int8")))
    add(Case("padv2-float32-rank5", pad((1, 2, 1, 2, 2), [[0, 1], [1, 0], [0, 0], [2, 1], [0, 0]], "float32",
                                        v2=True, value=0.5)))
    add(Case("transpose-int8", transpose((1, 4, 3, 2), (0, 3, 1, 2), "int8")))
    add(Case("concat-int8-rank5", concat([(1, 2, 1, 2, 2), (1, 2, 1, 1, 2)], 3, "int8")))
    return cases


CASES = _cases()


@pytest.mark.parametrize("half", [0, 1])
def test_movement_against_tflm(half: int) -> None:
    # two merged graphs: one with every case has so many operator functions that the packed convention's
    # system-lib name table exceeds the 4095-character string literal C99 guarantees (-pedantic refuses it)
    mid = len(CASES) // 2
    check_cases(CASES[:mid] if half == 0 else CASES[mid:], platform="host")


@pytest.mark.slow
def test_movement_on_cortex_m4() -> None:
    ids = {"ss-int8", "ss-rank4-mixed", "slice-int16", "split-int8", "splitv-float32", "pack-int8", "unpack-int16",
           "reverse-two-axes", "mirror-reflect-int8", "dus-runtime-start", "bto-int16", "fill-int8", "shape-chain",
           "pad-int16", "concat-int16", "transpose-int16"}
    check_cases([c for c in CASES if c.id in ids], platform="qemu-cortex-m4")


# --- refusals ---------------------------------------------------------------------------------------------------
def _raises(model: bytes, exc: type[Exception], match: str) -> None:
    with pytest.raises(exc, match=match):
        from_tflite(model)


def test_refused_configurations() -> None:
    # TFLite Micro's STRIDED_SLICE: rank <= 4, one begin/end/stride per axis, int32 indices, no zero stride
    _raises(strided_slice((1, 2, 1, 2, 2), [0] * 5, [1, 2, 1, 2, 2], [1] * 5), UnsupportedModelError,
            r"operator 0 \(STRIDED_SLICE\): tensor 'x' has rank 5")
    b = TFLiteBuilder()
    x, y = b.tensor("x", (4, 3), "float32"), b.tensor("y", (2, 3), "float32")
    b.op("STRIDED_SLICE", [x, _c(b, "b", [1]), _c(b, "e", [3]), _c(b, "s", [1])], [y], "StridedSliceOptions")
    _raises(b.build([x], [y]), UnsupportedModelError, r"begin has 1 entries for the rank-2 input 'x'")
    _raises(strided_slice((4,), [0], [4], [0]), UnsupportedModelError, r"stride of axis 0 is 0")
    # a shrunk axis outside the tensor, or walked backwards: TFLite Micro writes nothing there
    b = TFLiteBuilder()
    x, y = b.tensor("x", (2, 3), "float32"), b.tensor("y", (2,), "float32")
    b.op("STRIDED_SLICE", [x, _c(b, "b", [0, 3]), _c(b, "e", [2, 4]), _c(b, "s", [1, 1])], [y],
         "StridedSliceOptions", ShrinkAxisMask=2)
    _raises(b.build([x], [y]), UnsupportedModelError, r"strided_slice.*shrunk axis 1: begin 3")
    # runtime begin
    b = TFLiteBuilder()
    x, bg, y = b.tensor("x", (4,), "float32"), b.tensor("bg", (1,), "int32"), b.tensor("y", (2,), "float32")
    b.op("STRIDED_SLICE", [x, bg, _c(b, "e", [3]), _c(b, "s", [1])], [y], "StridedSliceOptions")
    _raises(b.build([x, bg], [y]), UnsupportedModelError, r"begin 'bg' is computed at run time")
    # dtypes TFLite Micro refuses
    _raises(split((2, 4), 1, 2, "bool"), UnsupportedModelError, r"split.*has dtype bool")
    _raises(mirror_pad((3,), [[1, 1]], 0, "int16"), UnsupportedModelError, r"mirror_pad.*has dtype int16")
    _raises(transpose((2, 3), (1, 0), "int32"), UnsupportedModelError, r"TRANSPOSE.*int32")
    _raises(reshape_like("EXPAND_DIMS", (2, 3), (2, 1, 3), "int32"), UnsupportedModelError, r"EXPAND_DIMS.*int32")
    # attributes TFLite Micro refuses or that do not fit
    _raises(reverse((2, 3, 4), [0, 2]), UnsupportedModelError, r"axes \[0, 2\] are not contiguous")
    _raises(mirror_pad((3,), [[3, 0]], 0), UnsupportedModelError, r"mirror_pad.*pads \(3, 0\) must be between 0 and 2")
    _raises(slice_((4,), [3], [2]), UnsupportedModelError, r"slice.*begin 3 size 2 is outside")
    b = TFLiteBuilder()
    x, y0, y1 = b.tensor("x", (2, 5), "float32"), b.tensor("y0", (2, 2), "float32"), b.tensor("y1", (2, 3), "float32")
    b.op("SPLIT", [_c(b, "a", [1]), x], [y0, y1], "SplitOptions", NumSplits=2)
    _raises(b.build([x], [y0, y1]), ModelFormatError, r"axis 1 of 'x' \(5\) does not split into 2 equal parts")
    b = TFLiteBuilder()
    x, y = b.tensor("x", (2,), "float32"), b.tensor("y", (2,), "int64")
    b.op("SHAPE", [x], [y], "ShapeOptions", OutType=4)
    _raises(b.build([x], [y]), UnsupportedModelError, r"SHAPE produces int32 only")


def test_graph_errors_name_the_node() -> None:
    from utvm.ir.graph import Graph, Node, Tensor
    from utvm.ir.verify import verify

    x = Tensor("x", (2, 3), "float32")
    for node, y, match in [
        (Node("broadcast_to", ("x",), ("y",), {"shape": (2, 2)}, "bt"), Tensor("y", (2, 2), "float32"),
         r"node 0 \(broadcast_to 'bt'\).*cannot broadcast"),
        (Node("split", ("x",), ("y",), {"axis": 1, "sizes": (2,)}, "sp"), Tensor("y", (2, 2), "float32"),
         r"'sp'.*sizes \[2\] must be 1 non-negative extents summing to 3"),
        (Node("unpack", ("x",), ("y",), {"axis": 3}, "up"), Tensor("y", (2,), "float32"),
         r"'up'.*axis 3 is out of range for rank 2"),
        (Node("fill", ("x",), ("y",), {"shape": (2,)}, "fl"), Tensor("y", (2,), "float32"),
         r"'fl'.*value 'x' has 6 elements"),
    ]:
        g = Graph({"x": x, "y": y}, (node,), ("x",), ("y",), "g")
        with pytest.raises(GraphError, match=match):
            verify(g)


def test_strided_slice_quirks_warn() -> None:
    from utvm.frontend.tflite import ImportQuirkWarning

    with pytest.warns(ImportQuirkWarning, match=r"operator 0 \(STRIDED_SLICE\): EllipsisMask, Offset set; TFLite "
                                                r"Micro's STRIDED_SLICE ignores them"):
        from_tflite(strided_slice((2, 3), [0, 1], [2, 3], [1, 1], EllipsisMask=1, Offset=True))


def test_shape_arithmetic_is_folded() -> None:
    g = from_tflite(shape_chain())
    assert [n.op for n in g.nodes] == ["reshape"]
    assert g.tensors["s"].data.tolist() == [2, 3, 4]
    assert g.tensors["ba"].data.tolist() == [5, 2, 3, 4]
    assert g.tensors["xr"].shape == (3, 8)
