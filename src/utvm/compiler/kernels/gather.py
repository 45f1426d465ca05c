"""C kernels of the gather op family (utvm.ops.gather).

Index-driven copies check every runtime index against its bound and return 1 (an error, as TFLM's kernels
return kTfLiteError) before reading out of bounds. Rearrangements (depth/space/batch) copy contiguous
channel runs, addressed by nested loops or by small per-row / per-column offset tables baked in at compile
time; the resizes read their source rows, columns and weights from such tables (computed in Python exactly
as TFLM computes them at run time, float32 included), so the int8 paths use no floating point.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from utvm.compiler.kernels import C_TYPES, KernelCode, KernelContext, define_helper, register
from utvm.compiler.kernels.cemit import block, fill, for_loop, lines
from utvm.ops.gather import DetectionParams, EmbeddingParams, GatherNdParams, GatherParams, ResizeParams, SpaceParams

_ERR = "return 1;"


def _copy(dst: str, src: str, n: int) -> str:
    """C copying n elements src[e] -> dst[e] (expressions are pointers or `array + offset`)."""
    if n == 1:
        return f"({dst})[0] = ({src})[0];"
    return for_loop("e", 0, n, f"({dst})[e] = ({src})[e];")


def _check(v: str, bound: int | str) -> str:
    """Return the error (1) when the run-time index `v` is outside [0, bound)."""
    return f"if ({v} < 0 || {v} >= {bound}) {{ {_ERR} }}"


@register("gather")
def gather(ctx: KernelContext) -> KernelCode:
    p: GatherParams = ctx.params()
    x, idx, y = ctx.inputs[0], ctx.inputs[1], ctx.outputs[0]
    if math.prod(p.output_shape) == 0:
        return KernelCode(body="return 0;")
    step = for_loop("k", 0, p.coords, [f"const int32_t v = {idx}[b * {p.coords} + k];", _check("v", p.axis_size),
                                       _copy(f"{y} + dst", f"{x} + (base + v) * {p.inner}", p.inner),
                                       f"dst += {p.inner};"])
    rows = for_loop("b", 0, p.batch, for_loop("o", 0, p.outer, [
        f"const int32_t base = (b * {p.outer} + o) * {p.axis_size};", step]))
    return KernelCode(body=lines("int32_t dst = 0;", rows, "return 0;"))


@register("gather_nd")
def gather_nd(ctx: KernelContext) -> KernelCode:
    p: GatherNdParams = ctx.params()
    x, idx, y = ctx.inputs[0], ctx.inputs[1], ctx.outputs[0]
    if p.slices == 0 or p.slice_size == 0:
        return KernelCode(body="return 0;")
    body = ["int32_t from = 0;"]
    for j in range(p.nd):
        body += [f"const int32_t v{j} = {idx}[i * {p.nd} + {j}];", _check(f"v{j}", p.dims[j]),
                 f"from += v{j} * {p.strides[j]};"]
    body.append(_copy(f"{y} + i * {p.slice_size}", f"{x} + from", p.slice_size))
    return KernelCode(body=lines(for_loop("i", 0, p.slices, body), "return 0;"))


@register("embedding_lookup")
def embedding_lookup(ctx: KernelContext) -> KernelCode:
    p: EmbeddingParams = ctx.params()
    ids, table, y = ctx.inputs[0], ctx.inputs[1], ctx.outputs[0]
    if p.lookups == 0 or p.columns == 0:
        return KernelCode(body="return 0;")
    if p.scale is None:
        copy = _copy(f"{y} + i * {p.columns}", f"{table} + v * {p.columns}", p.columns)
    else:
        copy = for_loop("e", 0, p.columns, f"{y}[i * {p.columns} + e] = (float){table}[v * {p.columns} + e] * "
                                           f"{ctx.float_literal(p.scale)};")
    body = [f"const int32_t v = {ids}[i];", _check("v", p.rows), copy]
    return KernelCode(body=lines(for_loop("i", 0, p.lookups, body), "return 0;"))


def _strided(x: str, y: str, dims: Sequence[int], strides: Sequence[int], inner: int) -> list[str]:
    """Nested loops over `dims` (the output in order); the source offset is sum(i_k * strides[k]); each
    innermost step copies `inner` contiguous elements."""
    body = [_copy(f"{y} + dst", f"{x} + s{len(dims)}", inner), f"dst += {inner};"]
    for k in reversed(range(len(dims))):
        body = [for_loop(f"i{k}", 0, dims[k], [f"const int32_t s{k + 1} = s{k} + i{k} * {strides[k]};", *body])]
    return ["int32_t dst = 0;", "const int32_t s0 = 0;", *body]


@register("depth_to_space", "space_to_depth", "batch_to_space_nd", "space_to_batch_nd")
def space(ctx: KernelContext) -> KernelCode:
    p: SpaceParams = ctx.params()
    x, y = ctx.inputs[0], ctx.outputs[0]
    n, h, w, ch = p.input_shape
    on, oh, ow, oc = p.output_shape
    bh, bw = p.block
    if math.prod(p.output_shape) == 0:
        return KernelCode(body="return 0;")
    if p.op == "depth_to_space":
        code = _strided(x, y, (n, h, bh, w, bw), (h * w * ch, w * ch, bw * oc, ch, oc), oc)
    elif p.op == "space_to_depth":
        code = _strided(x, y, (n, oh, ow, bh, bw), (h * w * ch, bh * w * ch, bw * ch, w * ch, ch), ch)
    elif p.op == "batch_to_space_nd":
        pt, _, pl, _ = p.pads
        image = h * w * ch
        # output row r comes from input row (r + top) / bh of the batch group (r + top) % bh; same for columns
        ytab = [((r + pt) % bh) * bw * on * image + ((r + pt) // bh) * w * ch for r in range(oh)]
        xtab = [((q + pl) % bw) * on * image + ((q + pl) // bw) * ch for q in range(ow)]
        yt, xt = ctx.table("int32_t", ytab, "rows"), ctx.table("int32_t", xtab, "cols")
        cell = [f"const int32_t src = b * {image} + {yt}[r] + {xt}[q];", _copy(f"{y} + dst", f"{x} + src", oc),
                f"dst += {oc};"]
        code = ["int32_t dst = 0;", for_loop("b", 0, on, for_loop("r", 0, oh, for_loop("q", 0, ow, cell)))]
    else:  # space_to_batch_nd: output batch (sh * bw + sw) * n + b, padded cells filled
        pt, _, pl, _ = p.pads
        t = C_TYPES[p.dtype]
        pad = for_loop("e", 0, ch, f"{y}[dst + e] = ({t}){ctx.literal(p.pad_value, p.dtype)};")
        copy = block("", [f"const int32_t src = ((b * {h} + ir) * {w} + iq) * {ch};",
                          _copy(f"{y} + dst", f"{x} + src", ch)])
        cell = [f"const int32_t iq = q * {bw} + sw - {pl};",
                f"{block(f'if (ir < 0 || ir >= {h} || iq < 0 || iq >= {w})', pad)} else {copy}", f"dst += {ch};"]
        row = for_loop("r", 0, oh, [f"const int32_t ir = r * {bh} + sh - {pt};", for_loop("q", 0, ow, cell)])
        code = ["int32_t dst = 0;", for_loop("sh", 0, bh, for_loop("sw", 0, bw, for_loop("b", 0, n, row)))]
    return KernelCode(body=lines(code, "return 0;"))


@register("resize_bilinear", "resize_nearest_neighbor")
def resize(ctx: KernelContext) -> KernelCode:
    p: ResizeParams = ctx.params()
    x, y = ctx.inputs[0], ctx.outputs[0]
    n, h, w, ch = p.input_shape
    _, oh, ow, _ = p.output_shape
    if math.prod(p.output_shape) == 0:
        return KernelCode(body="return 0;")
    image, row = h * w * ch, w * ch
    y0 = ctx.table("int32_t", [v * row for v in p.y0], "y0")
    x0 = ctx.table("int32_t", [v * ch for v in p.x0], "x0")

    def pixels(cell: list[str]) -> str:  # the loops over the output pixels around `cell`, then one pixel on
        return lines("int32_t dst = 0;", for_loop("b", 0, n, [f"const int32_t base = b * {image};", for_loop(
            "r", 0, oh, for_loop("q", 0, ow, [*cell, f"dst += {ch};"]))]), "return 0;")

    if p.op == "resize_nearest_neighbor":
        return KernelCode(body=pixels([_copy(f"{y} + dst", f"{x} + base + {y0}[r] + {x0}[q]", ch)]))
    y1 = ctx.table("int32_t", [v * row for v in p.y1], "y1")
    x1 = ctx.table("int32_t", [v * ch for v in p.x1], "x1")
    ptrs = [f"const int32_t p00 = base + {y0}[r] + {x0}[q];", f"const int32_t p10 = base + {y1}[r] + {x0}[q];",
            f"const int32_t p01 = base + {y0}[r] + {x1}[q];", f"const int32_t p11 = base + {y1}[r] + {x1}[q];"]
    if p.dtype == "float32":
        f32 = np.float32
        dy = ctx.table("float", [float(v) for v in p.wy], "dy")
        ay = ctx.table("float", [float(f32(1) - f32(v)) for v in p.wy], "ay")
        dx = ctx.table("float", [float(v) for v in p.wx], "dx")
        ax = ctx.table("float", [float(f32(1) - f32(v)) for v in p.wx], "ax")
        mix = for_loop("c", 0, ch,
                       f"{y}[dst + c] = {x}[p00 + c] * {ay}[r] * {ax}[q] + {x}[p10 + c] * {dy}[r] * {ax}[q]\n"
                       f"    + {x}[p01 + c] * {ay}[r] * {dx}[q] + {x}[p11 + c] * {dy}[r] * {dx}[q];")
        return KernelCode(body=pixels([*ptrs, mix]))
    t = C_TYPES[p.dtype]
    wyh = ctx.table("int32_t", list(p.wy), "wy")
    wyl = ctx.table("int32_t", [1024 - v for v in p.wy], "wyl")
    wxh = ctx.table("int32_t", list(p.wx), "wx")
    wxl = ctx.table("int32_t", [1024 - v for v in p.wx], "wxl")
    if p.rounding == "single":
        rnd = "const int64_t res = (acc + ((int64_t)1 << 19)) >> 20;"
    else:  # round half away from zero, then C's truncating division by 2^20
        rnd = ("const int64_t res = acc > 0 ? ((acc + ((int64_t)1 << 19)) >> 20) "
               ": -((((int64_t)1 << 19) - acc) >> 20);")
    mix = for_loop("c", 0, ch, [f"const int64_t acc = (int64_t){x}[p00 + c] * w00 + (int64_t){x}[p10 + c] * w10\n"
                                f"    + (int64_t){x}[p01 + c] * w01 + (int64_t){x}[p11 + c] * w11;",
                                rnd, f"{y}[dst + c] = ({t})res;"])
    return KernelCode(body=pixels([*ptrs, f"const int32_t w00 = {wyl}[r] * {wxl}[q];",
                                   f"const int32_t w10 = {wyh}[r] * {wxl}[q];",
                                   f"const int32_t w01 = {wyl}[r] * {wxh}[q];",
                                   f"const int32_t w11 = {wyh}[r] * {wxh}[q];", mix]))


# --- detection_postprocess ----------------------------------------------------------------------------------------
define_helper("gather_detpp", """\
/* TFLite_Detection_PostProcess (utvm.ops.gather): boxes are float[4] corners (ymin, xmin, ymax, xmax). */
static void gather_sort_desc(const float* key, int32_t* idx, int32_t n) {
  /* stable: ties keep their order, as TFLM's merge sort */
  for (int32_t i = 1; i < n; ++i) {
    const int32_t v = idx[i];
    int32_t j = i;
    while (j > 0 && key[v] > key[idx[j - 1]]) {
      idx[j] = idx[j - 1];
      --j;
    }
    idx[j] = v;
  }
}
static float gather_iou(const float* boxes, int32_t i, int32_t j) {
  const float* a = boxes + 4 * i;
  const float* b = boxes + 4 * j;
  const float area_a = (a[2] - a[0]) * (a[3] - a[1]);
  const float area_b = (b[2] - b[0]) * (b[3] - b[1]);
  float ih;
  float iw;
  float inter;
  if (area_a <= 0.0f || area_b <= 0.0f) {
    return 0.0f;
  }
  ih = (a[2] < b[2] ? a[2] : b[2]) - (a[0] > b[0] ? a[0] : b[0]);
  iw = (a[3] < b[3] ? a[3] : b[3]) - (a[1] > b[1] ? a[1] : b[1]);
  inter = (ih > 0.0f ? ih : 0.0f) * (iw > 0.0f ? iw : 0.0f);
  return inter / (area_a + area_b - inter);
}
/* Greedy NMS of one score column: the selected box indices, best first; returns their count. */
static int32_t gather_nms(const float* boxes, const float* scores, int32_t n, float score_threshold,
                          float iou_threshold, int32_t max_out, int32_t* keep, uint8_t* active, int32_t* selected) {
  int32_t kept = 0;
  int32_t count = 0;
  int32_t n_active;
  int32_t out_size;
  for (int32_t i = 0; i < n; ++i) {
    if (scores[i] >= score_threshold) {
      keep[kept++] = i;
    }
  }
  gather_sort_desc(scores, keep, kept);
  out_size = kept < max_out ? kept : max_out;
  n_active = kept;
  for (int32_t i = 0; i < kept; ++i) {
    active[i] = 1;
  }
  for (int32_t i = 0; i < kept; ++i) {
    if (n_active == 0 || count >= out_size) {
      break;
    }
    if (!active[i]) {
      continue;
    }
    selected[count++] = keep[i];
    active[i] = 0;
    --n_active;
    for (int32_t j = i + 1; j < kept; ++j) {
      if (active[j] && gather_iou(boxes, keep[i], keep[j]) > iou_threshold) {
        active[j] = 0;
        --n_active;
      }
    }
  }
  return count;
}""", "gather_nms")


# Decode the @NB@ boxes (centre-size encodings @ENC@, @STRIDE@ apart, against @ANCHORS@, in double precision
# as TFLM) into corners, refusing an inverted box; clear the @SLOTS@ output slots.
_DETPP_DECODE = """\
int32_t count = 0;
for (int32_t i = 0; i < @NB@; ++i) {
  const float* e = @ENC@ + i * @STRIDE@;
  const float* a = @ANCHORS@ + i * 4;
  const float yc = (float)((double)e[0] / @YS@ * (double)a[2] + (double)a[0]);
  const float xc = (float)((double)e[1] / @XS@ * (double)a[3] + (double)a[1]);
  const float hh = (float)(0.5 * @EXP@((double)e[2] / @HS@) * (double)a[2]);
  const float hw = (float)(0.5 * @EXP@((double)e[3] / @WS@) * (double)a[3]);
  boxes[4 * i] = yc - hh;
  boxes[4 * i + 1] = xc - hw;
  boxes[4 * i + 2] = yc + hh;
  boxes[4 * i + 3] = xc + hw;
  if (boxes[4 * i] >= boxes[4 * i + 2] || boxes[4 * i + 1] >= boxes[4 * i + 3]) {
    @ERR@
  }
}
for (int32_t i = 0; i < @SLOTS@; ++i) {
  @BOXES@[4 * i] = 0.0f;
  @BOXES@[4 * i + 1] = 0.0f;
  @BOXES@[4 * i + 2] = 0.0f;
  @BOXES@[4 * i + 3] = 0.0f;
  @CLASSES@[i] = 0.0f;
  @SCORES@[i] = 0.0f;
}"""
# Regular NMS: per class, its selection merged into the running top @MAX_DETECTIONS@ (candidate = anchor * @NCB@
# + class).
_DETPP_REGULAR = """\
for (int32_t c = 0; c < @NUM_CLASSES@; ++c) {
  int32_t n;
  int32_t total = count;
  for (int32_t r = 0; r < @NB@; ++r) {
    col[r] = @IN_SCORES@[r * @NCB@ + c + @LABEL_OFFSET@];
  }
  n = gather_nms(boxes, col, @NB@, @SCORE_MIN@, @IOU_MAX@, @PER_CLASS@, keep, active, sel);
  for (int32_t k = 0; k < n; ++k) {
    cand[total] = sel[k] * @NCB@ + c;
    cand_score[total] = col[sel[k]];
    ++total;
  }
  for (int32_t k = 0; k < total; ++k) {
    order[k] = k;
  }
  gather_sort_desc(cand_score, order, total);
  count = total < @MAX_DETECTIONS@ ? total : @MAX_DETECTIONS@;
  for (int32_t k = 0; k < count; ++k) {
    tmp[k] = cand[order[k]];
    tmp_score[k] = cand_score[order[k]];
  }
  for (int32_t k = 0; k < count; ++k) {
    cand[k] = tmp[k];
    cand_score[k] = tmp_score[k];
  }
}
for (int32_t k = 0; k < count; ++k) {
  const int32_t anchor = cand[k] / @NCB@;
  for (int32_t q = 0; q < 4; ++q) {
    @BOXES@[4 * k + q] = boxes[4 * anchor + q];
  }
  @CLASSES@[k] = (float)(cand[k] - anchor * @NCB@);
  @SCORES@[k] = cand_score[k];
}"""
# Fast NMS: each box's best class, then one NMS over those scores.
_DETPP_FAST = """\
for (int32_t r = 0; r < @NB@; ++r) {
  const float* s = @IN_SCORES@ + r * @NCB@ + @LABEL_OFFSET@;
  int32_t b = 0;
  for (int32_t c = 1; c < @NUM_CLASSES@; ++c) {
    if (s[c] > s[b]) {
      b = c;
    }
  }
  best[r] = b;
  col[r] = s[b];
}
count = gather_nms(boxes, col, @NB@, @SCORE_MIN@, @IOU_MAX@, @MAX_DETECTIONS@, keep, active, sel);
for (int32_t k = 0; k < count; ++k) {
  for (int32_t q = 0; q < 4; ++q) {
    @BOXES@[4 * k + q] = boxes[4 * sel[k] + q];
  }
  @CLASSES@[k] = (float)best[sel[k]];
  @SCORES@[k] = col[sel[k]];
}"""


@register("detection_postprocess")
def detection_postprocess(ctx: KernelContext) -> KernelCode:
    p: DetectionParams = ctx.params()
    enc, scores, anchors = ctx.inputs[0], ctx.inputs[1], ctx.inputs[2]
    o_boxes, o_classes, o_scores, o_num = ctx.outputs
    ctx.helper("gather_detpp")
    nb, ncb = p.boxes, p.num_classes + p.label_offset
    cap = p.max_detections + nb  # candidates of the regular NMS: the running top plus one class's selection
    layout: list[tuple[str, str, int]] = [("float", "boxes", 4 * nb), ("float", "col", nb), ("int32_t", "keep", nb),
                                          ("int32_t", "sel", nb)]
    if p.regular:
        layout += [("int32_t", "cand", cap), ("float", "cand_score", cap), ("int32_t", "order", cap),
                   ("int32_t", "tmp", cap), ("float", "tmp_score", cap)]
    else:
        layout.append(("int32_t", "best", nb))
    layout.append(("uint8_t", "active", nb))
    if not all(math.isfinite(v) and v != 0 for v in p.scales):
        raise ctx.error(f"box scales {list(p.scales)} must be finite and nonzero")
    decls, offset = [], 0
    for ctype, name, count in layout:
        decls.append(f"{ctype}* const {name} = ({ctype}*)(void*)({ctx.scratch} + {offset});")
        offset += (4 if ctype != "uint8_t" else 1) * max(count, 1)
        offset = (offset + 3) // 4 * 4
    f = ctx.float_literal
    ys, xs, hs, ws = (repr(float(v)) for v in p.scales)
    holes = {"NB": nb, "NCB": ncb, "BOXES": o_boxes, "CLASSES": o_classes, "SCORES": o_scores, "IN_SCORES": scores,
             "LABEL_OFFSET": p.label_offset, "NUM_CLASSES": p.num_classes, "SCORE_MIN": f(p.score_threshold),
             "IOU_MAX": f(p.iou_threshold), "MAX_DETECTIONS": p.max_detections}
    decode = fill(_DETPP_DECODE, NB=nb, ENC=enc, STRIDE=p.box_stride, ANCHORS=anchors, YS=ys, XS=xs, HS=hs, WS=ws,
                  EXP=ctx.libm("exp"), ERR=_ERR, SLOTS=p.slots, BOXES=o_boxes, CLASSES=o_classes, SCORES=o_scores)
    select = (fill(_DETPP_REGULAR, PER_CLASS=p.detections_per_class, **holes) if p.regular
              else fill(_DETPP_FAST, **holes))
    return KernelCode(body=lines(decls, decode, select, f"{o_num}[0] = (float)count;", "return 0;"),
                      scratch_bytes=offset)
