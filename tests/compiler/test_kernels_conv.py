"""conv2d / depthwise_conv2d kernels: generated C vs utvm.ir.run_reference (bit-exact int8, float 1e-5).

Each batch holds many configurations side by side in one graph (one C build per convention): strides,
SAME-like (symmetric and asymmetric) and VALID padding, dilation, groups, depth multipliers 1-3, batch > 1,
non-square kernels, per-channel and per-tensor weights, with and without bias, every fused activation.
"""

from __future__ import annotations

import math
import re
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kernel_harness import (  # noqa: E402
    UBSAN,
    Batch,
    assert_cross_compiles,
    assert_integer_only,
    assert_spread,
    int8_weights,
    ops_source,
    per_channel,
    per_tensor,
    run_batch,
    scales,
)

from utvm.compiler import compile  # noqa: E402
from utvm.errors import CompileError, GraphError  # noqa: E402
from utvm.ops import ACTIVATIONS  # noqa: E402

UNSUPPORTED_FUSED = {"tanh", "sign_bit"}  # TFLite's kernels reject them; utvm.ops too

# id, op, x shape (NHWC), kernel (kh, kw), out channels (conv) or depth multiplier (depthwise), strides,
# dilation, padding (top, left, bottom, right), groups, per-channel weights, bias, activation
CONV_CASES = [
    ("same3x3_relu", "conv2d", (1, 7, 6, 5), (3, 3), 8, (1, 1), (1, 1), (1, 1, 1, 1), 1, True, True, "relu"),
    ("stride2_asym", "conv2d", (1, 8, 8, 3), (3, 3), 4, (2, 2), (1, 1), (0, 0, 1, 1), 1, False, False, "none"),
    ("pointwise_relu6", "conv2d", (1, 4, 5, 16), (1, 1), 6, (1, 1), (1, 1), (0, 0, 0, 0), 1, True, True, "relu6"),
    ("dilated_n1to1", "conv2d", (1, 9, 8, 4), (3, 3), 5, (1, 1), (2, 2), (2, 2, 2, 2), 1, True, True, "relu_n1_to_1"),
    ("groups2", "conv2d", (1, 6, 6, 6), (3, 3), 4, (1, 1), (1, 1), (1, 1, 1, 1), 2, True, True, "none"),
    ("groups3_strided", "conv2d", (2, 7, 5, 9), (2, 3), 6, (2, 1), (1, 1), (0, 1, 1, 1), 3, False, True, "relu"),
    ("batch2_rect", "conv2d", (2, 10, 4, 1), (10, 4), 7, (2, 2), (1, 1), (4, 1, 5, 2), 1, True, True, "relu6"),
    ("valid_big_stride", "conv2d", (1, 11, 11, 2), (3, 2), 3, (3, 4), (1, 2), (0, 0, 0, 0), 1, True, False, "relu"),
    ("dw_same_relu", "depthwise_conv2d", (1, 7, 6, 8), (3, 3), 1, (1, 1), (1, 1), (1, 1, 1, 1), 1, True, True, "relu"),
    ("dw_m2_valid_s2", "depthwise_conv2d", (1, 9, 7, 3), (3, 3), 2, (2, 2), (1, 1), (0, 0, 0, 0), 1, False, True,
     "none"),
    ("dw_m3_dilated", "depthwise_conv2d", (2, 8, 8, 2), (3, 2), 3, (1, 2), (2, 2), (2, 1, 2, 1), 1, True, False,
     "relu6"),
    ("dw_kws_like", "depthwise_conv2d", (1, 25, 5, 4), (3, 3), 1, (1, 1), (1, 1), (1, 1, 1, 1), 1, True, True,
     "relu_n1_to_1"),
    ("dw_asym_stride", "depthwise_conv2d", (1, 10, 9, 5), (4, 3), 1, (2, 3), (1, 1), (1, 1, 2, 1), 1, True, True,
     "none"),
    # int8 interior/border split (acc_init fast path) with odd sizes: merged window rows of 21 (unrolled loop
    # + remainder) and 37 values, no clipping at all, clipping on one side only, groups with dilation
    # (per-tap runs), a depthwise kernel of 36 taps (loop form), depth multiplier 2 with padding.
    ("odd_c7_same", "conv2d", (1, 9, 7, 7), (3, 3), 5, (1, 1), (1, 1), (1, 1, 1, 1), 1, True, True, "relu"),
    ("pointwise_c37", "conv2d", (1, 3, 5, 37), (1, 1), 4, (1, 1), (1, 1), (0, 0, 0, 0), 1, False, True, "none"),
    ("clip_high_only", "conv2d", (1, 8, 7, 3), (2, 3), 3, (2, 2), (1, 1), (0, 0, 1, 2), 1, True, False, "relu6"),
    ("groups2_dilated_c24", "conv2d", (1, 9, 9, 24), (3, 3), 4, (1, 1), (2, 2), (1, 2, 2, 1), 2, True, True,
     "none"),
    ("dw_big_kernel", "depthwise_conv2d", (1, 9, 8, 3), (6, 6), 1, (1, 1), (1, 1), (2, 3, 3, 2), 1, True, True,
     "none"),
    ("dw_m2_same_odd", "depthwise_conv2d", (1, 7, 5, 3), (3, 3), 2, (1, 1), (1, 1), (1, 1, 1, 1), 1, True, False,
     "relu"),
    ("dw_m17_same", "depthwise_conv2d", (1, 5, 4, 2), (2, 2), 17, (1, 1), (1, 1), (0, 0, 1, 1), 1, True, True,
     "none"),  # more outputs per channel than local accumulators: the per-output-channel form
]


def _add_case(b: Batch, rng: np.random.Generator, case: tuple, dtype: str) -> None:
    cid, op, xs, (kh, kw), k, strides, dil, pad, groups, pc, has_bias, act = case
    n, h, w, c = xs
    if op == "conv2d":
        n_out, wshape, axis = k, (k, kh, kw, c // groups), 0
    else:
        n_out, wshape, axis = c * k, (1, kh, kw, c * k), 3
    taps = kh * kw * (c // groups if op == "conv2d" else 1)
    attrs = {"strides": strides, "dilation": dil, "padding": pad, "activation": act}
    if op == "conv2d":
        attrs["groups"] = groups
    else:
        attrs["depth_multiplier"] = k
    oh = (h + pad[0] + pad[2] - ((kh - 1) * dil[0] + 1)) // strides[0] + 1
    ow = (w + pad[1] + pad[3] - ((kw - 1) * dil[1] + 1)) // strides[1] + 1
    name = f"{cid}_{dtype}"
    if dtype == "float32":
        x = b.input(f"{name}_x", xs, "float32")
        wt = b.const(f"{name}_w", rng.normal(0, 1 / math.sqrt(taps), size=wshape).astype(np.float32))
        ins = [x, wt]
        if has_bias:
            ins.append(b.const(f"{name}_b", rng.normal(0, 0.5, size=n_out).astype(np.float32)))
        y = b.tensor(f"{name}_y", (n, oh, ow, n_out), "float32")
    else:
        s_in, zp_in = 0.05, int(rng.integers(-20, 21))
        w_scales = scales(rng, n_out) if pc else scales(rng, 1)
        wq = per_channel(w_scales, axis) if pc else per_tensor(w_scales[0], 0)
        x = b.input(f"{name}_x", xs, "int8", per_tensor(s_in, zp_in))
        wt = b.const(f"{name}_w", int8_weights(rng, wshape), wq)
        ins = [x, wt]
        if has_bias:
            ins.append(b.const(f"{name}_b", rng.integers(-3000, 3000, size=n_out).astype(np.int32)))
        # Output scale so that typical accumulators land well inside int8 (and the n1-to-1 clamp range).
        s_out = 135 * math.sqrt(taps) * s_in * float(np.mean(w_scales))
        if act == "relu_n1_to_1":
            s_out = 1.0 / 60
        y = b.tensor(f"{name}_y", (n, oh, ow, n_out), "int8", per_tensor(s_out, int(rng.integers(-10, 11))))
    b.op(op, ins, y, attrs)


@pytest.mark.parametrize("rounding", ["single", "double"])
def test_int8_conv_and_depthwise_bit_exact(rounding: str) -> None:
    rng = np.random.default_rng(11)
    b = Batch()
    for case in CONV_CASES:
        _add_case(b, rng, case, "int8")
    assert_spread(b, np.random.default_rng(1), rounding)
    builds = (("packed", "-O2"), ("c", "-O0")) if rounding == "single" else (("unpacked", "-O2", UBSAN),)
    compiled = run_batch(b, rng, rounding=rounding, builds=builds)
    assert_integer_only(compiled[0])
    assert_cross_compiles(compiled[0], "cortex-m4")
    # every int8 case has constant weights: all take the weight-sum path, split where windows clip
    src = ops_source(compiled[0])
    assert len(re.findall(r"static const int32_t \w+_acc_init\[", src)) == len(CONV_CASES)
    assert "/* border: only the in-bounds taps count */" in src


def test_float_conv_and_depthwise() -> None:
    rng = np.random.default_rng(12)
    b = Batch()
    for case in CONV_CASES:
        _add_case(b, rng, case, "float32")
    compiled = run_batch(b, rng, builds=(("packed", "-O2"), ("unpacked", "-O0")))
    assert_cross_compiles(compiled[0], "cortex-m3")  # soft-float


def test_every_supported_activation_is_covered() -> None:
    assert {c[-1] for c in CONV_CASES} == set(ACTIVATIONS) - UNSUPPORTED_FUSED


@pytest.mark.parametrize("act", sorted(UNSUPPORTED_FUSED))
def test_unsupported_fused_activation_is_refused_naming_the_node(act: str) -> None:
    b = Batch()
    case = ("bad", "conv2d", (1, 4, 4, 2), (3, 3), 2, (1, 1), (1, 1), (1, 1, 1, 1), 1, True, True, act)
    _add_case(b, np.random.default_rng(0), case, "int8")
    with pytest.raises(GraphError, match=rf"node 0 \(conv2d 'bad_int8_y'\): fused activation '{act}'"):
        compile(b.graph(), passes=False)


def test_accumulator_bound_is_proven_in_a_comment_and_uniform_scales_are_literals() -> None:
    rng = np.random.default_rng(3)
    b = Batch()
    _add_case(b, rng, CONV_CASES[1], "int8")  # per-tensor weights
    src = ops_source(compile(b.graph(), passes=False))
    assert "The int32 accumulator cannot overflow" in src
    assert "multiplier[" not in src and "const int32_t output_multiplier = " in src  # uniform: a const local


def test_accumulator_that_could_overflow_is_refused_naming_the_node() -> None:
    b = Batch()
    # 9 * 9 * 2048 taps of 127 * 128: 2.7e9 > 2^31
    x = b.input("x", (1, 9, 9, 2048), "int8", per_tensor(0.1, 0))
    w = b.const("w", np.full((1, 9, 9, 2048), 127, np.int8), per_tensor(0.01, 0))
    y = b.tensor("y", (1, 1, 1, 1), "int8", per_tensor(1.0, 0))
    b.op("conv2d", [x, w], y, {"strides": (1, 1), "dilation": (1, 1), "padding": (0, 0, 0, 0), "groups": 1,
                                "activation": "none"})
    with pytest.raises(CompileError, match=r"node 0 \(conv2d 'y'\): the int32 accumulator could overflow"):
        compile(b.graph(), passes=False)
