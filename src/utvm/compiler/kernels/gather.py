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

from utvm.compiler.kernels import C_TYPES, KernelCode, KernelContext, c_literal, define_helper, register
from utvm.ops.gather import DetectionParams, EmbeddingParams, GatherNdParams, GatherParams, ResizeParams, SpaceParams

_ERR = "return 1;"


def _copy(dst: str, src: str, n: int, indent: str = "") -> list[str]:
    """C lines copying n elements src[e] -> dst[e] (expressions are pointers or `array + offset`)."""
    if n == 1:
        return [f"{indent}({dst})[0] = ({src})[0];"]
    return [f"{indent}for (int32_t e = 0; e < {n}; ++e) {{", f"{indent}  ({dst})[e] = ({src})[e];", f"{indent}}}"]


@register("gather")
def gather(ctx: KernelContext) -> KernelCode:
    p: GatherParams = ctx.params()
    x, idx, y = ctx.inputs[0], ctx.inputs[1], ctx.outputs[0]
    lines = ["int32_t dst = 0;",
             f"for (int32_t b = 0; b < {p.batch}; ++b) {{",
             f"  for (int32_t o = 0; o < {p.outer}; ++o) {{",
             f"    const int32_t base = (b * {p.outer} + o) * {p.axis_size};",
             f"    for (int32_t k = 0; k < {p.coords}; ++k) {{",
             f"      const int32_t v = {idx}[b * {p.coords} + k];",
             f"      if (v < 0 || v >= {p.axis_size}) {{ {_ERR} }}",
             *_copy(f"{y} + dst", f"{x} + (base + v) * {p.inner}", p.inner, "      "),
             f"      dst += {p.inner};",
             "    }", "  }", "}", "return 0;"]
    if math.prod(p.output_shape) == 0:
        lines = ["return 0;"]
    return KernelCode(body="\n".join(lines))


@register("gather_nd")
def gather_nd(ctx: KernelContext) -> KernelCode:
    p: GatherNdParams = ctx.params()
    x, idx, y = ctx.inputs[0], ctx.inputs[1], ctx.outputs[0]
    if p.slices == 0 or p.slice_size == 0:
        return KernelCode(body="return 0;")
    lines = [f"for (int32_t i = 0; i < {p.slices}; ++i) {{", "  int32_t from = 0;"]
    for j in range(p.nd):
        lines += [f"  const int32_t v{j} = {idx}[i * {p.nd} + {j}];",
                  f"  if (v{j} < 0 || v{j} >= {p.dims[j]}) {{ {_ERR} }}",
                  f"  from += v{j} * {p.strides[j]};"]
    lines += _copy(f"{y} + i * {p.slice_size}", f"{x} + from", p.slice_size, "  ")
    lines += ["}", "return 0;"]
    return KernelCode(body="\n".join(lines))


@register("embedding_lookup")
def embedding_lookup(ctx: KernelContext) -> KernelCode:
    p: EmbeddingParams = ctx.params()
    ids, table, y = ctx.inputs[0], ctx.inputs[1], ctx.outputs[0]
    if p.lookups == 0 or p.columns == 0:
        return KernelCode(body="return 0;")
    lines = [f"for (int32_t i = 0; i < {p.lookups}; ++i) {{",
             f"  const int32_t v = {ids}[i];",
             f"  if (v < 0 || v >= {p.rows}) {{ {_ERR} }}"]
    if p.scale is None:
        lines += _copy(f"{y} + i * {p.columns}", f"{table} + v * {p.columns}", p.columns, "  ")
    else:
        lines += [f"  for (int32_t e = 0; e < {p.columns}; ++e) {{",
                  f"    {y}[i * {p.columns} + e] = (float){table}[v * {p.columns} + e] * "
                  f"{c_literal(p.scale, 'float32')};",
                  "  }"]
    lines += ["}", "return 0;"]
    return KernelCode(body="\n".join(lines))


def _strided(x: str, y: str, dims: Sequence[int], strides: Sequence[int], inner: int) -> list[str]:
    """Nested loops over `dims` (the output in order); the source offset is sum(i_k * strides[k]); each
    innermost step copies `inner` contiguous elements."""
    lines = ["int32_t dst = 0;", "const int32_t s0 = 0;"]
    for k, (d, st) in enumerate(zip(dims, strides, strict=True)):
        ind = "  " * k
        lines += [f"{ind}for (int32_t i{k} = 0; i{k} < {d}; ++i{k}) {{",
                  f"{ind}  const int32_t s{k + 1} = s{k} + i{k} * {st};"]
    ind = "  " * len(dims)
    lines += _copy(f"{y} + dst", f"{x} + s{len(dims)}", inner, ind)
    lines.append(f"{ind}dst += {inner};")
    for k in reversed(range(len(dims))):
        lines.append("  " * k + "}")
    return lines


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
        lines = _strided(x, y, (n, h, bh, w, bw), (h * w * ch, w * ch, bw * oc, ch, oc), oc)
    elif p.op == "space_to_depth":
        lines = _strided(x, y, (n, oh, ow, bh, bw), (h * w * ch, bh * w * ch, bw * ch, w * ch, ch), ch)
    elif p.op == "batch_to_space_nd":
        pt, _, pl, _ = p.pads
        image = h * w * ch
        # output row r comes from input row (r + top) / bh of the batch group (r + top) % bh; same for columns
        ytab = [((r + pt) % bh) * bw * on * image + ((r + pt) // bh) * w * ch for r in range(oh)]
        xtab = [((q + pl) % bw) * on * image + ((q + pl) // bw) * ch for q in range(ow)]
        yt, xt = ctx.table("int32_t", ytab, "rows"), ctx.table("int32_t", xtab, "cols")
        lines = ["int32_t dst = 0;",
                 f"for (int32_t b = 0; b < {on}; ++b) {{",
                 f"  for (int32_t r = 0; r < {oh}; ++r) {{",
                 f"    for (int32_t q = 0; q < {ow}; ++q) {{",
                 f"      const int32_t src = b * {image} + {yt}[r] + {xt}[q];",
                 *_copy(f"{y} + dst", f"{x} + src", oc, "      "),
                 f"      dst += {oc};", "    }", "  }", "}"]
    else:  # space_to_batch_nd: output batch (sh * bw + sw) * n + b, padded cells filled
        pt, _, pl, _ = p.pads
        t = C_TYPES[p.dtype]
        fill = c_literal(p.pad_value, p.dtype)
        lines = ["int32_t dst = 0;",
                 f"for (int32_t sh = 0; sh < {bh}; ++sh) {{",
                 f"  for (int32_t sw = 0; sw < {bw}; ++sw) {{",
                 f"    for (int32_t b = 0; b < {n}; ++b) {{",
                 f"      for (int32_t r = 0; r < {oh}; ++r) {{",
                 f"        const int32_t ir = r * {bh} + sh - {pt};",
                 f"        for (int32_t q = 0; q < {ow}; ++q) {{",
                 f"          const int32_t iq = q * {bw} + sw - {pl};",
                 f"          if (ir < 0 || ir >= {h} || iq < 0 || iq >= {w}) {{",
                 f"            for (int32_t e = 0; e < {ch}; ++e) {{",
                 f"              {y}[dst + e] = ({t}){fill};",
                 "            }",
                 "          } else {",
                 f"            const int32_t src = ((b * {h} + ir) * {w} + iq) * {ch};",
                 *_copy(f"{y} + dst", f"{x} + src", ch, "            "),
                 "          }",
                 f"          dst += {ch};",
                 "        }", "      }", "    }", "  }", "}"]
    lines.append("return 0;")
    return KernelCode(body="\n".join(lines))


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
    head = ["int32_t dst = 0;",
            f"for (int32_t b = 0; b < {n}; ++b) {{",
            f"  const int32_t base = b * {image};",
            f"  for (int32_t r = 0; r < {oh}; ++r) {{",
            f"    for (int32_t q = 0; q < {ow}; ++q) {{"]
    tail = [f"      dst += {ch};", "    }", "  }", "}", "return 0;"]
    if p.op == "resize_nearest_neighbor":
        body = _copy(f"{y} + dst", f"{x} + base + {y0}[r] + {x0}[q]", ch, "      ")
        return KernelCode(body="\n".join(head + body + tail))
    y1 = ctx.table("int32_t", [v * row for v in p.y1], "y1")
    x1 = ctx.table("int32_t", [v * ch for v in p.x1], "x1")
    ptrs = [f"      const int32_t p00 = base + {y0}[r] + {x0}[q];",
            f"      const int32_t p10 = base + {y1}[r] + {x0}[q];",
            f"      const int32_t p01 = base + {y0}[r] + {x1}[q];",
            f"      const int32_t p11 = base + {y1}[r] + {x1}[q];"]
    if p.dtype == "float32":
        import numpy as np

        f32 = np.float32
        dy = ctx.table("float", [float(v) for v in p.wy], "dy")
        ay = ctx.table("float", [float(f32(1) - f32(v)) for v in p.wy], "ay")
        dx = ctx.table("float", [float(v) for v in p.wx], "dx")
        ax = ctx.table("float", [float(f32(1) - f32(v)) for v in p.wx], "ax")
        body = ptrs + [f"      for (int32_t c = 0; c < {ch}; ++c) {{",
                       f"        {y}[dst + c] = {x}[p00 + c] * {ay}[r] * {ax}[q] + {x}[p10 + c] * {dy}[r] * {ax}[q]",
                       f"            + {x}[p01 + c] * {ay}[r] * {dx}[q] + {x}[p11 + c] * {dy}[r] * {dx}[q];",
                       "      }"]
        return KernelCode(body="\n".join(head + body + tail))
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
    body = ptrs + ["      const int32_t w00 = " + f"{wyl}[r] * {wxl}[q];",
                   f"      const int32_t w10 = {wyh}[r] * {wxl}[q];",
                   f"      const int32_t w01 = {wyl}[r] * {wxh}[q];",
                   f"      const int32_t w11 = {wyh}[r] * {wxh}[q];",
                   f"      for (int32_t c = 0; c < {ch}; ++c) {{",
                   f"        const int64_t acc = (int64_t){x}[p00 + c] * w00 + (int64_t){x}[p10 + c] * w10",
                   f"            + (int64_t){x}[p01 + c] * w01 + (int64_t){x}[p11 + c] * w11;",
                   f"        {rnd}",
                   f"        {y}[dst + c] = ({t})res;",
                   "      }"]
    return KernelCode(body="\n".join(head + body + tail))


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
    f = lambda v: c_literal(v, "float32")  # noqa: E731
    ys, xs, hs, ws = (repr(float(v)) for v in p.scales)
    lines = decls + [
        "int32_t count = 0;",
        f"for (int32_t i = 0; i < {nb}; ++i) {{",
        f"  const float* e = {enc} + i * {p.box_stride};",
        f"  const float* a = {anchors} + i * 4;",
        f"  const float yc = (float)((double)e[0] / {ys} * (double)a[2] + (double)a[0]);",
        f"  const float xc = (float)((double)e[1] / {xs} * (double)a[3] + (double)a[1]);",
        f"  const float hh = (float)(0.5 * exp((double)e[2] / {hs}) * (double)a[2]);",
        f"  const float hw = (float)(0.5 * exp((double)e[3] / {ws}) * (double)a[3]);",
        "  boxes[4 * i] = yc - hh;",
        "  boxes[4 * i + 1] = xc - hw;",
        "  boxes[4 * i + 2] = yc + hh;",
        "  boxes[4 * i + 3] = xc + hw;",
        "  if (boxes[4 * i] >= boxes[4 * i + 2] || boxes[4 * i + 1] >= boxes[4 * i + 3]) {",
        f"    {_ERR}",
        "  }",
        "}",
        f"for (int32_t i = 0; i < {p.slots}; ++i) {{",
        f"  {o_boxes}[4 * i] = 0.0f;",
        f"  {o_boxes}[4 * i + 1] = 0.0f;",
        f"  {o_boxes}[4 * i + 2] = 0.0f;",
        f"  {o_boxes}[4 * i + 3] = 0.0f;",
        f"  {o_classes}[i] = 0.0f;",
        f"  {o_scores}[i] = 0.0f;",
        "}"]
    if p.regular:
        lines += [
            f"for (int32_t c = 0; c < {p.num_classes}; ++c) {{",
            "  int32_t n;",
            "  int32_t total = count;",
            f"  for (int32_t r = 0; r < {nb}; ++r) {{",
            f"    col[r] = {scores}[r * {ncb} + c + {p.label_offset}];",
            "  }",
            f"  n = gather_nms(boxes, col, {nb}, {f(p.score_threshold)}, {f(p.iou_threshold)}, "
            f"{p.detections_per_class}, keep, active, sel);",
            "  for (int32_t k = 0; k < n; ++k) {",
            "    cand[total] = sel[k] * " + str(ncb) + " + c;",
            "    cand_score[total] = col[sel[k]];",
            "    ++total;",
            "  }",
            "  for (int32_t k = 0; k < total; ++k) {",
            "    order[k] = k;",
            "  }",
            "  gather_sort_desc(cand_score, order, total);",
            f"  count = total < {p.max_detections} ? total : {p.max_detections};",
            "  for (int32_t k = 0; k < count; ++k) {",
            "    tmp[k] = cand[order[k]];",
            "    tmp_score[k] = cand_score[order[k]];",
            "  }",
            "  for (int32_t k = 0; k < count; ++k) {",
            "    cand[k] = tmp[k];",
            "    cand_score[k] = tmp_score[k];",
            "  }",
            "}",
            "for (int32_t k = 0; k < count; ++k) {",
            f"  const int32_t anchor = cand[k] / {ncb};",
            "  for (int32_t q = 0; q < 4; ++q) {",
            f"    {o_boxes}[4 * k + q] = boxes[4 * anchor + q];",
            "  }",
            f"  {o_classes}[k] = (float)(cand[k] - anchor * {ncb});",
            f"  {o_scores}[k] = cand_score[k];",
            "}"]
    else:
        lines += [
            f"for (int32_t r = 0; r < {nb}; ++r) {{",
            f"  const float* s = {scores} + r * {ncb} + {p.label_offset};",
            "  int32_t b = 0;",
            f"  for (int32_t c = 1; c < {p.num_classes}; ++c) {{",
            "    if (s[c] > s[b]) {",
            "      b = c;",
            "    }",
            "  }",
            "  best[r] = b;",
            "  col[r] = s[b];",
            "}",
            f"count = gather_nms(boxes, col, {nb}, {f(p.score_threshold)}, {f(p.iou_threshold)}, "
            f"{p.max_detections}, keep, active, sel);",
            "for (int32_t k = 0; k < count; ++k) {",
            "  for (int32_t q = 0; q < 4; ++q) {",
            f"    {o_boxes}[4 * k + q] = boxes[4 * sel[k] + q];",
            "  }",
            f"  {o_classes}[k] = (float)best[sel[k]];",
            f"  {o_scores}[k] = col[sel[k]];",
            "}"]
    lines += [f"{o_num}[0] = (float)count;", "return 0;"]
    return KernelCode(body="\n".join(lines), scratch_bytes=offset, uses_libm=True)
