"""The gather op family: indexed lookups, space/depth/batch rearrangements and spatial resizes.

Semantics are TensorFlow Lite Micro's (tensorflow/lite/micro/kernels/*.cc and the reference kernels);
every op keeps NHWC and is data movement except the two resizes and the hybrid embedding lookup.

  gather                   (x, indices int32)  axis=int batch_dims=int (negative values count from the end:
                           axis from rank(x), batch_dims from rank(indices)); float32, int8. Indices are
                           runtime data: an index outside [0, x.shape[axis]) makes the kernel return an
                           error (as TFLM does), the reference raises GraphError.
  gather_nd                (x, indices int32[..., K])  K <= min(rank(x), 5); float32, int8. Out-of-range
                           indices are an error, like gather (and TFLM).
  embedding_lookup         (ids int32[N], table[R, ...])  -> [N, ...]; float32, int8, and int8 table ->
                           float32 output (TFLM's hybrid lookup: value * scale, zero point must be 0).
                           Out-of-range ids are an error.
  depth_to_space           (x[N,H,W,C])  block_size=int -> [N, H*b, W*b, C/b^2]; float32, int8
  space_to_depth           (x[N,H,W,C])  block_size=int -> [N, H/b, W/b, C*b^2]; float32, int8
  batch_to_space_nd        (x[N,H,W,C] or [N,H,C])  block_shape=(bh[,bw]) crops=((top,bottom)[,(left,right)]);
                           float32, int8
  space_to_batch_nd        (x[N,H,W,C] or [N,H,C])  block_shape=(bh[,bw]) paddings=((top,bottom)[,(l,r)]);
                           padded cells hold 0 (float32) or the output zero point (int8); float32, int8
  resize_bilinear          (x[N,H,W,C])  size=(OH,OW) align_corners=bool half_pixel_centers=bool;
                           float32 (TFLM's float arithmetic), int8 (TFLM's 10-bit fixed-point weights)
  resize_nearest_neighbor  (x[N,H,W,C])  size, align_corners, half_pixel_centers; float32, int8, int16
  detection_postprocess    (boxes[1,B,>=4], scores[1,B,C(+1)], anchors[B,4]) -> boxes[1,D,4], classes[1,D],
                           scores[1,D], num_detections[1], all float32 (TFLite_Detection_PostProcess, a CUSTOM
                           op): max_detections max_classes_per_detection detections_per_class use_regular_nms
                           nms_score_threshold nms_iou_threshold num_classes y_scale x_scale h_scale w_scale
                           (float attributes hold float32 values, as TFLM stores them). float32 inputs only
                           (TFLM's kernel fails on int8 inputs at run time). Boxes are decoded in double and
                           rounded to float32, as TFLM does; invalid decoded boxes (ymin >= ymax or xmin >= xmax)
                           make the kernel return an error, as TFLM's does. The fast NMS (use_regular_nms false)
                           with more than one class per detection is refused: TFLM writes its outputs at
                           overlapping, out-of-bounds offsets there. Output entries past num_detections are 0
                           (TFLM's regular NMS zeroes them; its fast NMS leaves them untouched).

int8 (and int16) data-movement ops copy the stored integers: TFLM checks no quantization on them.
space_to_batch_nd pads with 0 / the int8 output zero point (TFLite's definition; TFLM leaves its padding value
uninitialised). align_corners and half_pixel_centers together are refused by resize_bilinear (as TFLM does);
resize_nearest_neighbor accepts them (as TFLM does). The resizes' source coordinates and weights are computed
at compile time exactly as TFLM computes them at run time (float32 arithmetic for the float paths and nearest
neighbor, TFLM's integer arithmetic for int8 bilinear).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from utvm.errors import GraphError
from utvm.ir.graph import Graph, Node
from utvm.ops import _common as c
from utvm.ops import _quant

OPS: tuple[str, ...] = ("gather", "gather_nd", "embedding_lookup", "depth_to_space", "space_to_depth",
                        "batch_to_space_nd", "space_to_batch_nd", "resize_bilinear", "resize_nearest_neighbor",
                        "detection_postprocess")

_MOVE_TYPES = ("float32", "int8")
_MAX_ND = 5


@dataclass(frozen=True)
class GatherParams:
    """gather: x viewed as [batch, outer, axis_size, inner], indices as [batch, coords];
    out[b, o, k, :] = x[b, o, indices[b, k], :]."""

    dtype: str
    input_shape: tuple[int, ...]
    output_shape: tuple[int, ...]
    batch: int
    outer: int
    axis_size: int
    inner: int
    coords: int


@dataclass(frozen=True)
class GatherNdParams:
    """gather_nd: `slices` index tuples of length `nd` select `slice_size`-element slices of x, whose
    leading `nd` axes have `dims` and flat strides `strides`."""

    dtype: str
    output_shape: tuple[int, ...]
    nd: int
    slices: int
    slice_size: int
    dims: tuple[int, ...]
    strides: tuple[int, ...]


@dataclass(frozen=True)
class EmbeddingParams:
    """embedding_lookup: rows of `columns` elements out of `rows`; `scale` dequantizes an int8 table into
    a float32 output (None: a plain copy)."""

    dtype: str
    out_dtype: str
    output_shape: tuple[int, ...]
    rows: int
    columns: int
    lookups: int
    scale: float | None


@dataclass(frozen=True)
class SpaceParams:
    """A rearrangement of an NHWC tensor: depth_to_space / space_to_depth (block), batch_to_space_nd /
    space_to_batch_nd (block (bh, bw) and pads (top, bottom, left, right), crops for batch_to_space).
    3-D inputs are viewed as [N, H, 1, C]. `pad_value` fills space_to_batch_nd's padding."""

    op: str
    dtype: str
    input_shape: tuple[int, int, int, int]
    output_shape: tuple[int, int, int, int]
    block: tuple[int, int]
    pads: tuple[int, int, int, int]
    pad_value: float | int


@dataclass(frozen=True)
class ResizeParams:
    """resize_*: per output row / column the source rows and columns (y0, y1 / x0, x1) and, for bilinear,
    the weights: float32 `fy = input_y - y0` (float) or the 10-bit fixed-point `input_y - 1024 * y0` (int8)."""

    op: str
    dtype: str
    input_shape: tuple[int, int, int, int]
    output_shape: tuple[int, int, int, int]
    y0: tuple[int, ...]
    y1: tuple[int, ...]
    x0: tuple[int, ...]
    x1: tuple[int, ...]
    wy: tuple[float, ...] | tuple[int, ...]
    wx: tuple[float, ...] | tuple[int, ...]
    rounding: str


@dataclass(frozen=True)
class DetectionParams:
    """detection_postprocess: `boxes` anchors of `box_stride` encoded values (y, x, h, w first), scores
    rows of `classes_with_background` (= num_classes + label_offset), `slots` output entries."""

    boxes: int
    box_stride: int
    num_classes: int
    label_offset: int
    slots: int
    max_detections: int
    detections_per_class: int
    regular: bool
    score_threshold: float
    iou_threshold: float
    scales: tuple[float, float, float, float]  # y, x, h, w


_DETECTION_ATTRS = ("max_detections", "max_classes_per_detection", "detections_per_class", "use_regular_nms",
                    "nms_score_threshold", "nms_iou_threshold", "num_classes", "y_scale", "x_scale", "h_scale",
                    "w_scale")


def _int_attr(node: Node, graph: Graph, key: str) -> int:
    v = c.attr(node, graph, key)
    if isinstance(v, bool) or int(v) != v:
        raise c.fail(node, graph, f"attribute {key}={v!r} must be an integer")
    return int(v)


def _ints(node: Node, graph: Graph, key: str) -> tuple[int, ...]:
    return tuple(int(v) for v in np.asarray(c.attr(node, graph, key), dtype=np.int64).ravel())


# --- gather ---------------------------------------------------------------------------------------------
def _gather_geometry(node: Node, graph: Graph) -> tuple[int, int, tuple[int, ...]]:
    c.check_count(node, graph, 2)
    x, idx = c.req(node, graph, 0), c.req(node, graph, 1)
    c.check_dtype(node, graph, x, _MOVE_TYPES, "input")
    c.check_dtype(node, graph, idx, ("int32",), "indices")
    rank, irank = len(x.shape), len(idx.shape)
    axis, batch_dims = _int_attr(node, graph, "axis"), _int_attr(node, graph, "batch_dims")
    a = axis + rank if axis < 0 else axis
    if not 0 <= a < rank:
        raise c.fail(node, graph, f"axis {axis} is out of range for input {x.name!r} of rank {rank}")
    bd = batch_dims + irank if batch_dims < 0 else batch_dims
    if not 0 <= bd <= irank or bd >= rank:
        raise c.fail(node, graph, f"batch_dims {batch_dims} is out of range (indices rank {irank}, input rank "
                                  f"{rank})")
    if bd > a:
        raise c.fail(node, graph, f"batch_dims {batch_dims} must not exceed axis {axis}")
    if tuple(x.shape[:bd]) != tuple(idx.shape[:bd]):
        raise c.fail(node, graph, f"the first {bd} (batch) dimensions of input {list(x.shape)} and indices "
                                  f"{list(idx.shape)} differ")
    out = tuple(x.shape[:a]) + tuple(idx.shape[bd:]) + tuple(x.shape[a + 1:])
    return a, bd, out


def _check_const_indices(node: Node, graph: Graph, i: int, bound: np.ndarray | int) -> None:
    t = c.req(node, graph, i)
    if t.data is not None:
        d = np.asarray(t.data, dtype=np.int64)
        bad = (d < 0) | (d >= bound)
        if np.any(bad):
            raise c.fail(node, graph, f"constant indices {t.name!r} hold {int(d[bad].ravel()[0])}, out of range")


# --- shape inference ---------------------------------------------------------------------------------------
def infer(node: Node, graph: Graph) -> list[c.OutType]:
    op = node.op
    if op == "gather":
        _, _, out = _gather_geometry(node, graph)
        return [(out, c.req(node, graph, 0).dtype)]
    if op == "gather_nd":
        c.check_count(node, graph, 2)
        x, idx = c.req(node, graph, 0), c.req(node, graph, 1)
        c.check_dtype(node, graph, x, _MOVE_TYPES, "params")
        c.check_dtype(node, graph, idx, ("int32",), "indices")
        if not x.shape or not idx.shape:
            raise c.fail(node, graph, "params and indices must be at least rank 1")
        nd = idx.shape[-1]
        if nd > len(x.shape) or nd > _MAX_ND:
            raise c.fail(node, graph, f"the index depth {nd} (last dimension of {idx.name!r}) must not exceed "
                                      f"the params rank {len(x.shape)} nor {_MAX_ND}")
        return [(tuple(idx.shape[:-1]) + tuple(x.shape[nd:]), x.dtype)]
    if op == "embedding_lookup":
        c.check_count(node, graph, 2)
        ids, table, y = c.req(node, graph, 0), c.req(node, graph, 1), c.out(node, graph)
        c.check_dtype(node, graph, ids, ("int32",), "ids")
        c.check_dtype(node, graph, table, _MOVE_TYPES, "table")
        if len(ids.shape) != 1 or len(table.shape) < 2:
            raise c.fail(node, graph, f"ids must be rank 1 and the table at least rank 2 (got {list(ids.shape)}, "
                                      f"{list(table.shape)})")
        allowed = ("float32",) if table.dtype == "float32" else ("float32", "int8")
        c.check_dtype(node, graph, y, allowed, "output")
        if table.dtype == "int8" and y.dtype == "float32":
            zp = c.per_tensor(node, graph, table, "table")[1]
            if zp != 0:
                raise c.fail(node, graph, f"an int8 table {table.name!r} looked up into float32 needs zero point 0, "
                                          f"not {zp}")
        return [((ids.shape[0],) + tuple(table.shape[1:]), y.dtype)]
    if op in ("depth_to_space", "space_to_depth", "batch_to_space_nd", "space_to_batch_nd"):
        return [(_space_geometry(node, graph)[1], c.req(node, graph, 0).dtype)]
    if op in ("resize_bilinear", "resize_nearest_neighbor"):
        c.check_count(node, graph, (1, 2))
        x = c.req(node, graph, 0)
        types = ("float32", "int8") if op == "resize_bilinear" else ("float32", "int8", "int16")
        c.check_dtype(node, graph, x, types, "input")
        if len(x.shape) != 4:
            raise c.fail(node, graph, f"input {x.name!r} must be rank 4 (NHWC), got {list(x.shape)}")
        size = _ints(node, graph, "size")
        if len(size) != 2 or min(size) < 1:
            raise c.fail(node, graph, f"size {list(size)} must be two positive integers (height, width)")
        if op == "resize_bilinear" and c.attr(node, graph, "align_corners") and \
                c.attr(node, graph, "half_pixel_centers"):
            raise c.fail(node, graph, "align_corners and half_pixel_centers cannot both be set")
        return [((x.shape[0], size[0], size[1], x.shape[3]), x.dtype)]
    if op == "detection_postprocess":
        return _detection_infer(node, graph)[0]
    raise c.fail(node, graph, f"op {op!r} is not in the gather family")


def _detection_infer(node: Node, graph: Graph) -> tuple[list[c.OutType], DetectionParams]:
    c.check_count(node, graph, 3, 4)
    boxes, scores, anchors = (c.req(node, graph, i) for i in range(3))
    for t, role in ((boxes, "box encodings"), (scores, "class predictions"), (anchors, "anchors")):
        c.check_dtype(node, graph, t, ("float32",), role)
    for i in range(4):
        c.check_dtype(node, graph, c.out(node, graph, i), ("float32",), f"output {i}")
    for k in _DETECTION_ATTRS:
        c.attr(node, graph, k)
    if len(boxes.shape) != 3 or boxes.shape[0] != 1 or boxes.shape[2] < 4:
        raise c.fail(node, graph, f"box encodings {boxes.name!r} must be [1, boxes, >= 4], got {list(boxes.shape)}")
    nb = boxes.shape[1]
    if tuple(anchors.shape) != (nb, 4):
        raise c.fail(node, graph, f"anchors {anchors.name!r} must be [{nb}, 4], got {list(anchors.shape)}")
    nc = _int_attr(node, graph, "num_classes")
    if len(scores.shape) != 3 or scores.shape[0] != 1 or scores.shape[1] != nb or \
            scores.shape[2] - nc not in (0, 1) or nc < 1:
        raise c.fail(node, graph, f"class predictions {scores.name!r} {list(scores.shape)} must be [1, {nb}, "
                                  f"num_classes ({nc}, >= 1) or num_classes + 1]")
    max_det = _int_attr(node, graph, "max_detections")
    per_det = _int_attr(node, graph, "max_classes_per_detection")
    per_class = _int_attr(node, graph, "detections_per_class")
    regular = bool(c.attr(node, graph, "use_regular_nms"))
    iou = float(np.float32(c.attr(node, graph, "nms_iou_threshold")))
    if max_det < 0:
        raise c.fail(node, graph, f"max_detections {max_det} must be >= 0")
    if not 0.0 < iou <= 1.0:
        raise c.fail(node, graph, f"nms_iou_threshold {iou} must be in (0, 1]")
    if regular and per_class <= 0:
        raise c.fail(node, graph, f"detections_per_class {per_class} must be > 0 with regular NMS")
    if not regular and per_det <= 0:
        raise c.fail(node, graph, f"max_classes_per_detection {per_det} must be > 0")
    if not regular and min(per_det, nc) > 1:
        raise c.fail(node, graph, f"fast NMS with max_classes_per_detection {per_det} (> 1, with {nc} classes) is "
                                  "not supported: TFLite Micro writes its outputs out of bounds there")
    scales = tuple(float(np.float32(c.attr(node, graph, k))) for k in ("y_scale", "x_scale", "h_scale", "w_scale"))
    y0 = c.out(node, graph, 0)
    if len(y0.shape) != 3 or y0.shape[0] != 1 or y0.shape[2] != 4 or y0.shape[1] < max_det:
        raise c.fail(node, graph, f"detection boxes {y0.name!r} must be [1, >= max_detections ({max_det}), 4], got "
                                  f"{list(y0.shape)}")
    slots = y0.shape[1]
    p = DetectionParams(nb, boxes.shape[2], nc, scores.shape[2] - nc, slots, max_det, per_class, regular,
                        float(np.float32(c.attr(node, graph, "nms_score_threshold"))), iou, scales)  # type: ignore[arg-type]
    f = "float32"
    return [((1, slots, 4), f), ((1, slots), f), ((1, slots), f), ((1,), f)], p


def _space_geometry(node: Node, graph: Graph) -> tuple[tuple[int, int, int, int], tuple[int, ...],
                                                       tuple[int, int], tuple[int, int, int, int]]:
    """(input as NHWC, output shape in the input's rank, block (bh, bw), pads (top, bottom, left, right))."""
    op = node.op
    c.check_count(node, graph, (1, 2, 3))
    x = c.req(node, graph, 0)
    c.check_dtype(node, graph, x, _MOVE_TYPES, "input")
    shape = tuple(x.shape)
    if op in ("depth_to_space", "space_to_depth"):
        if len(shape) != 4:
            raise c.fail(node, graph, f"input {x.name!r} must be rank 4 (NHWC), got {list(shape)}")
        b = _int_attr(node, graph, "block_size")
        if b < 1:
            raise c.fail(node, graph, f"block_size {b} must be >= 1")
        n, h, w, ch = shape
        if op == "depth_to_space":
            if ch % (b * b):
                raise c.fail(node, graph, f"input depth {ch} is not a multiple of block_size^2 = {b * b}")
            return (n, h, w, ch), (n, h * b, w * b, ch // (b * b)), (b, b), (0, 0, 0, 0)
        if h % b or w % b:
            raise c.fail(node, graph, f"input height {h} and width {w} must be multiples of block_size {b}")
        return (n, h, w, ch), (n, h // b, w // b, ch * b * b), (b, b), (0, 0, 0, 0)
    if len(shape) not in (3, 4):
        raise c.fail(node, graph, f"input {x.name!r} must be rank 3 or 4, got {list(shape)}")
    spatial = len(shape) - 2
    block = _ints(node, graph, "block_shape")
    key = "crops" if op == "batch_to_space_nd" else "paddings"
    pads = _ints(node, graph, key)
    if len(block) != spatial or len(pads) != 2 * spatial:
        raise c.fail(node, graph, f"block_shape {list(block)} and {key} need {spatial} entries / pairs for a "
                                  f"rank-{len(shape)} input")
    if min(block) < 1 or min(pads) < 0:
        raise c.fail(node, graph, f"block_shape {list(block)} must be >= 1 and {key} {list(pads)} >= 0")
    n, h = shape[0], shape[1]
    w, ch = (shape[2], shape[3]) if spatial == 2 else (1, shape[2])
    bh, bw = block[0], (block[1] if spatial == 2 else 1)
    pt, pb = pads[0], pads[1]
    pl, pr = (pads[2], pads[3]) if spatial == 2 else (0, 0)
    if op == "batch_to_space_nd":
        if n % (bh * bw):
            raise c.fail(node, graph, f"batch {n} is not a multiple of the block size {bh * bw}")
        oh, ow = h * bh - pt - pb, w * bw - pl - pr
        if oh < 0 or ow < 0:
            raise c.fail(node, graph, f"crops {list(pads)} remove more than the {h * bh}x{w * bw} output")
        out = (n // (bh * bw), oh, ow, ch)
    else:
        if (h + pt + pb) % bh or (w + pl + pr) % bw:
            raise c.fail(node, graph, f"padded spatial size {h + pt + pb}x{w + pl + pr} is not a multiple of "
                                      f"block_shape {list(block)}")
        out = (n * bh * bw, (h + pt + pb) // bh, (w + pl + pr) // bw, ch)
    out_shape = out if spatial == 2 else (out[0], out[1], out[3])
    return (n, h, w, ch), out_shape, (bh, bw), (pt, pb, pl, pr)


# --- prepare ---------------------------------------------------------------------------------------------------
def prepare(node: Node, graph: Graph, rounding: str = "single") -> object:
    op = node.op
    oshape, dtype = infer(node, graph)[0]
    x = c.req(node, graph, 0)
    if op == "gather":
        a, bd, _ = _gather_geometry(node, graph)
        idx = c.req(node, graph, 1)
        shape = tuple(x.shape)
        _check_const_indices(node, graph, 1, shape[a])
        return GatherParams(dtype, shape, oshape, math.prod(shape[:bd]), math.prod(shape[bd:a]), shape[a],
                            math.prod(shape[a + 1:]), math.prod(idx.shape[bd:]))
    if op == "gather_nd":
        idx = c.req(node, graph, 1)
        nd = idx.shape[-1]
        dims = tuple(x.shape[:nd])
        _check_const_indices(node, graph, 1, np.asarray(dims, dtype=np.int64))
        strides = tuple(math.prod(x.shape[k + 1:]) for k in range(nd))
        return GatherNdParams(dtype, oshape, nd, math.prod(idx.shape[:-1]), math.prod(x.shape[nd:]), dims, strides)
    if op == "embedding_lookup":
        ids, table = x, c.req(node, graph, 1)
        _check_const_indices(node, graph, 0, table.shape[0])
        scale = None
        if table.dtype == "int8" and dtype == "float32":
            scale = c.per_tensor(node, graph, table, "table")[0]
        rows = table.shape[0]
        return EmbeddingParams(table.dtype, dtype, oshape, rows, math.prod(table.shape[1:]), ids.shape[0], scale)
    if op in ("depth_to_space", "space_to_depth", "batch_to_space_nd", "space_to_batch_nd"):
        ishape, _, block, pads = _space_geometry(node, graph)
        out4 = oshape if len(oshape) == 4 else (oshape[0], oshape[1], 1, oshape[2])
        pad_value: float | int = 0.0
        if dtype != "float32":
            pad_value = 0
            if op == "space_to_batch_nd":
                pad_value = c.per_tensor(node, graph, c.out(node, graph), "output")[1]
        return SpaceParams(op, dtype, ishape, tuple(out4), block, pads, pad_value)  # type: ignore[arg-type]
    if op == "detection_postprocess":
        return _detection_infer(node, graph)[1]
    return _prepare_resize(node, graph, op, dtype, tuple(x.shape), oshape, rounding)


def _prepare_resize(node: Node, graph: Graph, op: str, dtype: str, ishape: tuple[int, ...],
                    oshape: tuple[int, ...], rounding: str) -> ResizeParams:
    align = bool(c.attr(node, graph, "align_corners"))
    half = bool(c.attr(node, graph, "half_pixel_centers"))
    rnd = _quant.kernel_rounding(rounding, op)
    axes = []
    for in_size, out_size in ((ishape[1], oshape[1]), (ishape[2], oshape[2])):
        if op == "resize_nearest_neighbor":
            i0 = _nearest(in_size, out_size, align, half)
            axes.append((i0, i0, ()))
        elif dtype == "float32":
            axes.append(_bilinear_float(in_size, out_size, align, half))
        else:
            axes.append(_bilinear_int(in_size, out_size, align, half))
    (y0, y1, wy), (x0, x1, wx) = axes
    return ResizeParams(op, dtype, ishape, oshape, y0, y1, x0, x1, wy, wx, rnd)  # type: ignore[arg-type]


def _nearest(in_size: int, out_size: int, align: bool, half: bool) -> tuple[int, ...]:
    """TFLM's GetNearestNeighbor for every output coordinate, in float32 as TFLM computes it."""
    f32 = np.float32
    if align and out_size > 1:
        scale = f32(in_size - 1) / f32(out_size - 1)
    else:
        scale = f32(in_size) / f32(out_size)
    offset = f32(0.5) if half else f32(0.0)
    out = []
    for v in range(out_size):
        p = f32(f32(v) + offset) * scale
        if align:  # TfLiteRound: half away from zero (exact in float64)
            r = math.floor(float(p) + 0.5) if p >= 0 else -math.floor(-float(p) + 0.5)
        else:
            r = math.floor(float(p))
        r = min(int(r), in_size - 1)
        if half:
            r = max(0, r)
        out.append(r)
    return tuple(out)


def _bilinear_float(in_size: int, out_size: int, align: bool, half: bool
                    ) -> tuple[tuple[int, ...], tuple[int, ...], tuple[float, ...]]:
    """TFLM's ComputeInterpolationValues (float32) per output coordinate: (lower, upper, value - lower)."""
    f32 = np.float32
    scale = f32(in_size) / f32(out_size)
    if align and out_size > 1:
        scale = f32(in_size - 1) / f32(out_size - 1)
    lo, hi, frac = [], [], []
    for v in range(out_size):
        if half:
            s = f32(f32(f32(v) + f32(0.5)) * scale) - f32(0.5)
        else:
            s = f32(f32(v) * scale)
        lower = max(int(math.floor(float(s))), 0)
        upper = min(int(math.ceil(float(s))), in_size - 1)
        lo.append(lower)
        hi.append(upper)
        frac.append(float(f32(s - f32(lower))))
    return tuple(lo), tuple(hi), tuple(frac)


def _cdiv(a: int, b: int) -> int:
    """C's integer division (truncation towards zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _bilinear_int(in_size: int, out_size: int, align: bool, half: bool
                  ) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """TFLM's ComputeInterpolationValuesInteger per output coordinate: (lower, upper, scaled - 1024*lower)."""
    scale10 = ((1 << 10) * in_size + out_size // 2) // out_size
    if align and out_size > 1:
        scale10 = ((1 << 10) * (in_size - 1) + (out_size - 1) // 2) // (out_size - 1)
    lo, hi, w = [], [], []
    for v in range(out_size):
        s = v * scale10 + scale10 // 2 - (1 << 9) if half else v * scale10
        lower = max(_cdiv(s, 1 << 10), 0)
        upper = min(_cdiv(s + (1 << 10) - 1, 1 << 10), in_size - 1)
        lo.append(lower)
        hi.append(upper)
        w.append(s - (1 << 10) * lower)
    return tuple(lo), tuple(hi), tuple(w)


# --- reference ------------------------------------------------------------------------------------------------
def _index_error(op: str, value: int, bound: int) -> GraphError:
    return GraphError(f"{op}: index {value} is out of range [0, {bound}) (TFLite Micro fails the invocation)")


def reference(p: object, *arrays: np.ndarray) -> np.ndarray:
    if isinstance(p, GatherParams):
        x, idx = arrays[0], np.asarray(arrays[1], dtype=np.int64)
        bad = (idx < 0) | (idx >= p.axis_size)
        if np.any(bad):
            raise _index_error("gather", int(idx[bad].ravel()[0]), p.axis_size)
        xv = x.reshape(p.batch, p.outer, p.axis_size, p.inner)
        iv = idx.reshape(p.batch, p.coords)
        out = np.stack([xv[b][:, iv[b], :] for b in range(p.batch)]) if p.batch else \
            np.zeros((0, p.outer, p.coords, p.inner), x.dtype)
        return out.reshape(p.output_shape).astype(x.dtype)
    if isinstance(p, GatherNdParams):
        x, idx = arrays[0], np.asarray(arrays[1], dtype=np.int64).reshape(p.slices, p.nd)
        dims = np.asarray(p.dims, dtype=np.int64)
        bad = (idx < 0) | (idx >= dims)
        if np.any(bad):
            k = np.argwhere(bad)[0]
            raise _index_error("gather_nd", int(idx[k[0], k[1]]), int(dims[k[1]]))
        flat = x.reshape(-1)
        start = idx @ np.asarray(p.strides, dtype=np.int64) if p.nd else np.zeros(p.slices, np.int64)
        out = flat[start[:, None] + np.arange(p.slice_size)[None, :]] if p.slices else flat[:0]
        return out.reshape(p.output_shape).astype(x.dtype)
    if isinstance(p, EmbeddingParams):
        ids, table = np.asarray(arrays[0], dtype=np.int64), arrays[1]
        bad = (ids < 0) | (ids >= p.rows)
        if np.any(bad):
            raise _index_error("embedding_lookup", int(ids[bad][0]), p.rows)
        rows = table.reshape(p.rows, p.columns)[ids]
        if p.scale is not None:
            rows = (rows.astype(np.float32) * np.float32(p.scale)).astype(np.float32)
        return rows.reshape(p.output_shape).astype(p.out_dtype)
    if isinstance(p, SpaceParams):
        return _space_reference(p, arrays[0])
    if isinstance(p, DetectionParams):
        return _detection_reference(p, *arrays)
    assert isinstance(p, ResizeParams)
    return _resize_reference(p, arrays[0])


def _space_reference(p: SpaceParams, x: np.ndarray) -> np.ndarray:
    n, h, w, ch = p.input_shape
    on, oh, ow, oc = p.output_shape
    bh, bw = p.block
    x4 = x.reshape(n, h, w, ch)
    if p.op == "depth_to_space":
        y = x4.reshape(n, h, w, bh, bw, oc).transpose(0, 1, 3, 2, 4, 5)
    elif p.op == "space_to_depth":
        y = x4.reshape(n, oh, bh, ow, bw, ch).transpose(0, 1, 3, 2, 4, 5)
    elif p.op == "space_to_batch_nd":
        pt, pb, pl, pr = p.pads
        xp = np.pad(x4, ((0, 0), (pt, pb), (pl, pr), (0, 0)), constant_values=np.array(p.pad_value).astype(x.dtype))
        # out batch = (sh * bw + sw) * n + b, out[.., i, j, :] = xp[b, i*bh + sh, j*bw + sw, :]
        y = xp.reshape(n, oh, bh, ow, bw, ch).transpose(2, 4, 0, 1, 3, 5)
    else:  # batch_to_space_nd: the inverse, then the crops
        pt, pb, pl, pr = p.pads
        full = x4.reshape(bh, bw, on, h, w, ch).transpose(2, 3, 0, 4, 1, 5).reshape(on, h * bh, w * bw, ch)
        y = full[:, pt:pt + oh, pl:pl + ow, :]
    shape = p.output_shape if x.ndim == 4 else (p.output_shape[0], p.output_shape[1], p.output_shape[3])
    return np.ascontiguousarray(y).reshape(shape).astype(x.dtype)


def _resize_reference(p: ResizeParams, x: np.ndarray) -> np.ndarray:
    y0, y1, x0, x1 = (np.asarray(v, dtype=np.int64) for v in (p.y0, p.y1, p.x0, p.x1))
    if p.op == "resize_nearest_neighbor":
        return x[:, y0][:, :, x0].astype(x.dtype)
    v00, v10 = x[:, y0][:, :, x0], x[:, y1][:, :, x0]
    v01, v11 = x[:, y0][:, :, x1], x[:, y1][:, :, x1]
    if p.dtype == "float32":
        f32 = np.float32
        dy = np.asarray(p.wy, dtype=f32)[None, :, None, None]
        dx = np.asarray(p.wx, dtype=f32)[None, None, :, None]
        ay, ax = f32(1) - dy, f32(1) - dx
        out = v00 * ay * ax + v10 * dy * ax + v01 * ay * dx + v11 * dy * dx
        return out.astype(np.float32)
    one = 1 << 10
    wy = np.asarray(p.wy, dtype=np.int64)[None, :, None, None]
    wx = np.asarray(p.wx, dtype=np.int64)[None, None, :, None]
    acc = (v00.astype(np.int64) * (one - wy) * (one - wx) + v10.astype(np.int64) * wy * (one - wx)
           + v01.astype(np.int64) * (one - wy) * wx + v11.astype(np.int64) * wy * wx)
    if p.rounding == "single":
        res = (acc + (1 << 19)) >> 20
    else:
        r = np.where(acc > 0, acc + (1 << 19), acc - (1 << 19))
        res = np.sign(r) * (np.abs(r) >> 20)  # C division truncates towards zero
    return res.astype(x.dtype)


# --- detection_postprocess -------------------------------------------------------------------------------------
def _decode(p: DetectionParams, enc: np.ndarray, anchors: np.ndarray) -> np.ndarray:
    """[B, 4] float32 corners (ymin, xmin, ymax, xmax): double arithmetic rounded to float32, as TFLM."""
    f32 = np.float32
    ys, xs, hs, ws = p.scales
    out = np.zeros((p.boxes, 4), np.float32)
    for i in range(p.boxes):
        by, bx, bh, bw = (float(v) for v in enc[0, i, :4])
        ay, ax, ah, aw = (float(v) for v in anchors[i])
        yc = f32(by / ys * ah + ay)
        xc = f32(bx / xs * aw + ax)
        hh = f32(0.5 * math.exp(bh / hs) * ah)
        hw = f32(0.5 * math.exp(bw / ws) * aw)
        out[i] = (yc - hh, xc - hw, yc + hh, xc + hw)
    return out


def _iou(b: np.ndarray, i: int, j: int) -> np.float32:
    f32 = np.float32
    area_i = f32(b[i, 2] - b[i, 0]) * f32(b[i, 3] - b[i, 1])
    area_j = f32(b[j, 2] - b[j, 0]) * f32(b[j, 3] - b[j, 1])
    if area_i <= 0 or area_j <= 0:
        return f32(0)
    ih = max(f32(min(b[i, 2], b[j, 2]) - max(b[i, 0], b[j, 0])), f32(0))
    iw = max(f32(min(b[i, 3], b[j, 3]) - max(b[i, 1], b[j, 1])), f32(0))
    inter = f32(ih * iw)
    return f32(inter / f32(f32(area_i + area_j) - inter))


def _stable_desc(keys: list, order: list[int]) -> list[int]:
    """Positions `order` sorted by descending keys[pos]; ties keep their order (TFLM's stable merge sort)."""
    return sorted(order, key=lambda k: -float(keys[k]))


def _nms(p: DetectionParams, boxes: np.ndarray, scores: np.ndarray, max_out: int) -> list[int]:
    keep = [i for i in range(p.boxes) if scores[i] >= np.float32(p.score_threshold)]
    keep = _stable_desc(list(scores), keep)
    out_size = min(len(keep), max_out)
    active = [True] * len(keep)
    selected: list[int] = []
    n_active = len(keep)
    for i in range(len(keep)):
        if n_active == 0 or len(selected) >= out_size:
            break
        if not active[i]:
            continue
        selected.append(keep[i])
        active[i] = False
        n_active -= 1
        for j in range(i + 1, len(keep)):
            if active[j] and _iou(boxes, keep[i], keep[j]) > np.float32(p.iou_threshold):
                active[j] = False
                n_active -= 1
    return selected


def _detection_reference(p: DetectionParams, enc: np.ndarray, scores: np.ndarray, anchors: np.ndarray
                         ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    boxes = _decode(p, enc, anchors)
    if np.any((boxes[:, 0] >= boxes[:, 2]) | (boxes[:, 1] >= boxes[:, 3])):
        raise GraphError("detection_postprocess: a decoded box has ymin >= ymax or xmin >= xmax (TFLite Micro fails "
                         "the invocation)")
    s = scores.reshape(p.boxes, p.num_classes + p.label_offset)[:, p.label_offset:]
    out_boxes = np.zeros((1, p.slots, 4), np.float32)
    out_classes = np.zeros((1, p.slots), np.float32)
    out_scores = np.zeros((1, p.slots), np.float32)
    results: list[tuple[int, int, np.float32]] = []  # (anchor, class, score)
    if p.regular:
        for col in range(p.num_classes):
            cls = s[:, col]
            cand = results + [(a, col, cls[a]) for a in _nms(p, boxes, cls, p.detections_per_class)]
            order = _stable_desc([r[2] for r in cand], list(range(len(cand))))
            results = [cand[k] for k in order[:min(len(cand), p.max_detections)]]
    else:
        best = np.argmax(s, axis=1)  # the first of equal maxima
        top = s[np.arange(p.boxes), best]
        results = [(a, int(best[a]), top[a]) for a in _nms(p, boxes, top, p.max_detections)]
    for k, (a, cls_index, score) in enumerate(results):
        out_boxes[0, k] = boxes[a]
        out_classes[0, k] = cls_index
        out_scores[0, k] = score
    return out_boxes, out_classes, out_scores, np.array([len(results)], np.float32)
