"""Every point of the int8 depthwise_conv2d space (algo direct | plane and the plane's knobs) is bit-exact with
the reference, on random workloads: 1 and odd channel counts, depth multipliers 1-8, strides 1-3, dilation,
asymmetric padding, kernels larger than the input, batch 2, per-channel and per-tensor weights, with and
without bias, every int8 activation, both roundings. Portable points on the host (property-based) and on
QEMU Cortex-M3; the DSP points (SXTAB16/PKH copy, SMLAD/SMLAxy sums, LDRD asm, the doubled SMMULR
requantization) on QEMU Cortex-M4. Each batch is one build: every node has its own workload and point.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kernel_harness import (  # noqa: E402
    Batch,
    assert_cross_compiles,
    int8_weights,
    ops_source,
    per_channel,
    per_tensor,
    scales,
)
from schedule_harness import assign_points, point_tests, spaces  # noqa: E402

from utvm.compiler import compile  # noqa: E402
from utvm.compiler.kernels.depthwise import Mac, row_plan, weight_words  # noqa: E402
from utvm.ops import _quant  # noqa: E402

ACTS = ("none", "relu", "relu6", "relu_n1_to_1")


def add_depthwise(b: Batch, rng: np.random.Generator, i: int) -> None:
    """One random int8 depthwise_conv2d as case i of batch b."""
    while True:
        h, w = int(rng.integers(1, 10)), int(rng.integers(1, 10))
        c, m = int(rng.choice([1, 2, 3, 4, 5, 7, 8, 12])), int(rng.choice([1, 1, 1, 2, 3, 4, 8]))
        kh, kw = int(rng.integers(1, 6)), int(rng.integers(1, 6))
        sh, sw = int(rng.integers(1, 4)), int(rng.integers(1, 4))
        dh, dw = (int(rng.integers(1, 3)), int(rng.integers(1, 3))) if rng.random() < 0.3 else (1, 1)
        pad = tuple(int(v) for v in rng.integers(0, 3, size=4))
        oh = (h + pad[0] + pad[2] - (kh - 1) * dh - 1) // sh + 1
        ow = (w + pad[1] + pad[3] - (kw - 1) * dw - 1) // sw + 1
        if oh >= 1 and ow >= 1:
            break
    n = 2 if rng.random() < 0.2 else 1
    izp, ozp = int(rng.integers(-128, 128)), int(rng.integers(-128, 128))
    x = b.input(f"w{i}_x", (n, h, w, c), "int8", per_tensor(0.05, izp))
    oc = c * m
    if rng.random() < 0.6:
        wq = per_channel(scales(rng, oc), 3)
    else:
        wq = per_tensor(float(scales(rng, 1)[0]), 0)
    inputs = [x, b.const(f"w{i}_w", int8_weights(rng, (1, kh, kw, oc)), wq)]
    if rng.random() < 0.7:
        inputs.append(b.const(f"w{i}_b", rng.integers(-3000, 3000, size=oc).astype(np.int32)))
    out_scale = 0.05 * 0.01 * np.sqrt(kh * kw) * float(rng.uniform(2, 8))
    b.apply("depthwise_conv2d", inputs, f"w{i}_y", {"strides": (sh, sw), "dilation": (dh, dw), "padding": pad,
                                                    "depth_multiplier": m, "activation": str(rng.choice(ACTS))},
            per_tensor(out_scale, ozp))


def make_batch(rng: np.random.Generator, n: int) -> Batch:
    b = Batch()
    for i in range(n):
        add_depthwise(b, rng, i)
    # rows of 300 values: the third kernel row lies beyond LDRD's 1020-byte offset (single loads there)
    x = b.input("wide_x", (1, 3, 300, 5), "int8", per_tensor(0.05, int(rng.integers(-128, 128))))
    wt = b.const("wide_w", int8_weights(rng, (1, 3, 3, 10)), per_channel(scales(rng, 10), 3))
    b.apply("depthwise_conv2d", [x, wt], "wide_y", {"strides": (1, 1), "dilation": (1, 1), "padding": (1, 1, 1, 1),
                                                   "depth_multiplier": 2, "activation": "relu"},
            per_tensor(0.002, int(rng.integers(-128, 128))))
    return b


# The three point tests of a scheduled kernel family (schedule_harness.point_tests); on QEMU: DSP (M4:
# SXTAB16/PKH copy, SMLAD/SMLAxy, LDRD asm, SMMULR requantization) and portable (M3).
(test_portable_points_on_the_host, test_every_portable_knob_value_is_reached_on_the_host,
 test_every_point_kind_on_qemu) = point_tests(make_batch, host_nodes=10, sweep_nodes=14,
                                              sweep_seed=31, qemu_nodes=16, qemu_seed=20261126,
                                              qemu_roundings=("double", "single", "double", "double"))


def _kws_like(target: str) -> tuple[Batch, dict[str, Any]]:
    """A KWS depthwise layer (25x5x64, 3x3, stride 1, SAME, relu) and its default point on `target`."""
    rng = np.random.default_rng(3)
    b = Batch()
    x = b.input("x", (1, 25, 5, 64), "int8", per_tensor(0.05, -128))
    wt = b.const("w", int8_weights(rng, (1, 3, 3, 64)), per_channel(scales(rng, 64), 3))
    bias = b.const("b", rng.integers(-3000, 3000, size=64).astype(np.int32))
    b.apply("depthwise_conv2d", [x, wt, bias], "y", {"strides": (1, 1), "dilation": (1, 1), "padding": (1, 1, 1, 1),
                                                     "depth_multiplier": 1, "activation": "relu"},
            per_tensor(0.02, -128))
    ((_key, space),) = spaces(b.graph(), target, "double")
    return b, space.default


def test_defaults_planes_on_cortex_m_and_the_direct_kernel_on_the_host() -> None:
    _b, m4 = _kws_like("cortex-m4")
    assert m4["algo"] == "plane" and m4["c_block"] == 4 and m4["requant"] == "dbl" and m4["px_block"] == 2
    _b, m3 = _kws_like("cortex-m3")
    assert m3["algo"] == "plane" and m3["requant"] == "fast" and m3["no_sched"] is False
    _b, host = _kws_like("host")
    assert host["algo"] == "direct"


def test_points_of_old_tuning_logs_still_apply() -> None:
    """A point written before the knobs were renamed (a flat dict: dw_px, dw_oc, dw_cb, dw_wload, unroll as a
    bool and, for algo=direct, the plane knobs' "off" values) is read through the space's `legacy` names and
    `added` values: choose_schedule takes it without a warning and the code is the new-format point's."""
    rng = np.random.default_rng(8)
    b = Batch()
    x = b.input("x", (1, 6, 7, 3), "int8", per_tensor(0.05, 3))
    wt = b.const("w", int8_weights(rng, (1, 3, 3, 6)), per_channel(scales(rng, 6), 3))
    b.apply("depthwise_conv2d", [x, wt], "y", {"strides": (1, 1), "dilation": (1, 1), "padding": (1, 1, 1, 1),
                                               "depth_multiplier": 2, "activation": "relu"}, per_tensor(0.02, -5))
    graph = b.graph()
    ((key, space),) = spaces(graph, "cortex-m4", "double")
    off = {"dw_px": 1, "dw_oc": 1, "dw_cb": 1, "requant": "c", "unroll": False, "dw_wload": "reg", "no_sched": False}
    cases = [
        ({"algo": "plane", "dw_px": 2, "dw_oc": 2, "dw_cb": 1, "requant": "dbl", "unroll": True, "dw_wload": "mem",
          "no_sched": True},
         {"algo": "plane", "px_block": 2, "oc_block": 2, "c_block": 1, "requant": "dbl", "row_unroll": True,
          "copy_unroll": True, "w_load": "mem", "no_sched": True, "band": 0}),
        ({"algo": "direct", **off}, {"algo": "direct", "taps": "unrolled", "m_regs": True}),
    ]
    for old, new in cases:
        assert space.check(new) is None and space.check(old) is not None
        sources = []
        for point in (old, new):
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                compiled = compile(graph, passes=False, rounding="double", target="cortex-m4",
                                   schedules={key: point})
            (op,) = [o for o in compiled.operators if o.task]
            assert op.schedule_source == "given" and op.schedule == new, op
            sources.append(ops_source(compiled))
        assert sources[0] == sources[1]


def test_dsp_plane_code_uses_simd_and_no_floating_point() -> None:
    b, _default = _kws_like("cortex-m4")
    src = ops_source(compile(b.graph(), passes=False, rounding="double", target="cortex-m4"))
    for needle in ("__sxtab16", "tvm_pkhbt16", "__smlad", "TVM_LDRD", "smmulr", "__ssat"):
        assert needle in src, needle
    assert "The int32 accumulator cannot overflow" in src
    assert "float" not in src.split("TVM_NO_SCHED int32_t", 1)[-1]


def test_far_words_are_loaded_singly() -> None:
    from utvm.compiler.kernels.depthwise import word_loads

    out = word_loads([("a", 1016), ("b", 1020), ("c", 1024), ("d", 1028)], "rb", "tvm_ld16x2a", "TVM_LDRD")
    assert out == ["uint32_t a;", "uint32_t b;", "TVM_LDRD(a, b, rb, 1016);",
                   "const uint32_t c = tvm_ld16x2a(rb + 512);", "const uint32_t d = tvm_ld16x2a(rb + 514);"]


def test_row_plan_shares_words_between_two_stride_one_pixels() -> None:
    """3 taps, 2 pixels, stride 1: two aligned words; pixel 0 pairs taps (0, 1) then tap 2 alone, pixel 1
    has tap 0 in the high half of word 0 and taps (1, 2) in word 1."""
    loads, macs = row_plan(3, 1, 1, 2, aligned=True)
    assert loads == [0, 2]
    assert macs == [Mac(0, 0, 0, 1), Mac(1, 0, None, 0), Mac(0, 1, 2, None), Mac(1, 1, 1, 2)]
    words, ops = weight_words(macs)
    assert words == [(0, 1), (1, 2)]  # two weight words per kernel row
    assert ops == [(0, "smlad"), (0, "smlatb"), (1, "smlabt"), (1, "smlad")]


def test_row_plan_for_stride_two_shares_the_overlapping_words() -> None:
    loads, macs = row_plan(8, 1, 2, 4, aligned=True)
    assert loads == list(range(0, 14, 2))  # 7 words for 4 pixels x 8 taps (not 16)
    assert all(m.lo is not None and m.hi is not None for m in macs) and len(macs) == 16


def test_unaligned_plan_pairs_adjacent_taps_and_dilated_taps_stay_single() -> None:
    loads, macs = row_plan(5, 1, 1, 1, aligned=False)
    assert loads == [0, 2, 4] and [(m.lo, m.hi) for m in macs] == [(0, 1), (2, 3), (4, None)]
    loads, macs = row_plan(3, 2, 1, 1, aligned=False)
    assert loads == [0, 2, 4] and [(m.lo, m.hi) for m in macs] == [(0, None), (1, None), (2, None)]


def _dbl_asm_model(acc: int, m: int, n: int, zp: int) -> int:
    """The instructions of requant.dbl_requant_helper on 32-bit values: SMMULR; ADD r, r, r ASR #31;
    ASRS r, r, #n (carry = bit n - 1); ADC r, r, #zp (or SBC r, r, #(-zp - 1): r - (-zp - 1) - !carry)."""
    x2 = 2 * acc
    assert -(2**31) <= x2 < 2**31
    r = (x2 * m + (1 << 31)) >> 32
    t = r - 1 if r < 0 else r  # r + (r ASR #31)
    carry = (t >> (n - 1)) & 1
    q = t >> n
    return q + zp + carry if zp >= 0 else q - (-zp - 1) - (1 - carry)


def test_doubled_smmulr_requantization_equals_gemmlowp_double_rounding() -> None:
    """SMMULR(2 * acc, m) = SaturatingRoundingDoublingHighMul(acc, m) for m in [0, 2^31), |2 acc| < 2^31;
    then RoundingDivideByPOT with the zero point folded into the last add: edge and random values."""
    rng = np.random.default_rng(5)
    accs = [0, 1, -1, 2, -2, (1 << 30) - 1, -(1 << 30), 12345, -12345] + [int(v) for v in
                                                                           rng.integers(-(1 << 30), 1 << 30, 400)]
    mults = [0, 1, 1 << 30, (1 << 31) - 1, 1518500250] + [int(v) for v in rng.integers(1 << 30, 1 << 31, 20)]
    for n in (1, 2, 7, 16, 30, 31):
        for m in mults:
            want = _quant.multiply_by_quantized_multiplier(np.array(accs), m, -n, "double")
            for zp in (-128, -1, 0, 5, 127):
                got = [_dbl_asm_model(a, m, n, zp) for a in accs]
                assert got == [int(v) + zp for v in want], (m, n, zp)


@pytest.mark.parametrize("target", ["cortex-m0", "cortex-m3", "cortex-m4"])
def test_points_cross_compile_warning_free(target: str) -> None:
    """Points of every kind build with arm-none-eabi-gcc at -O2 and -O0 (the strict warnings), ARMv6-M too."""
    rng = np.random.default_rng(61)
    seen: dict[str, set[Any]] = {}
    for _ in range(3):
        graph = make_batch(rng, 12).graph()
        schedules = assign_points(graph, target, "double", rng, seen)
        assert_cross_compiles(compile(graph, passes=False, rounding="double", target=target, schedules=schedules),
                              target)
