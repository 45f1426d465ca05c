"""The Helium (MVE) GEMM of int8 conv2d and dense (kernels/_gemm_mve.py), host side: its tables and lane order
reproduce the reference arithmetic in a numpy model of the kernel, its space exists only on MVE vocabularies
(other targets' spaces and code are unchanged), its legality names what it refuses, and every point
cross-compiles warning-free for Cortex-M55. The points run bit-exact on QEMU in test_schedules_gemm.py
(`test_every_point_kind_on_qemu[qemu-cortex-m55-...]`).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kernel_harness import (  # noqa: E402
    Batch,
    assert_cross_compiles,
    compare,
    int8_weights,
    per_channel,
    per_tensor,
)
from schedule_harness import assign_points, check_batch, cover, run_on_platform, spaces  # noqa: E402
from test_schedules_gemm import make_batch  # noqa: E402

from utvm.compiler import compile  # noqa: E402
from utvm.compiler.kernels import _gemm_mve as mve  # noqa: E402
from utvm.compiler.kernels.requant import OutputStage  # noqa: E402
from utvm.ir import run_reference  # noqa: E402
from utvm.ops import _quant  # noqa: E402
from utvm.support import cc  # noqa: E402

# --- workloads that reach every MVE path -------------------------------------------------------------------------

ACTS = ("none", "relu", "relu6", "relu_n1_to_1")


def add_mve_conv(b: Batch, rng: np.random.Generator, i: int) -> None:
    """A random int8 conv2d shaped for the MVE GEMM's paths: channels around and at multiples of 16 (whole,
    partial and predicated blocks of 16; `cols = window` rows and taps), odd output channels (padded lanes),
    strides, dilation, padding, 1x1 windows (in place), batches of 2, requantization scales above one (left
    shifts: the full requantization form)."""
    while True:
        h, w = int(rng.integers(1, 8)), int(rng.integers(1, 8))
        c, oc = int(rng.choice([1, 3, 15, 16, 16, 17, 32, 48])), int(rng.integers(1, 12))
        kh, kw = (1, 1) if rng.random() < 0.3 else (int(rng.integers(1, 4)), int(rng.integers(1, 4)))
        sh, sw = int(rng.integers(1, 3)), int(rng.integers(1, 3))
        dh, dw = (1, 1) if rng.random() < 0.6 else (int(rng.integers(1, 3)), int(rng.integers(1, 3)))
        pad = (0, 0, 0, 0) if rng.random() < 0.25 else tuple(int(v) for v in rng.integers(0, 2, size=4))
        oh = (h + pad[0] + pad[2] - (kh - 1) * dh - 1) // sh + 1
        ow = (w + pad[1] + pad[3] - (kw - 1) * dw - 1) // sw + 1
        if oh >= 1 and ow >= 1 and oh * ow <= 36:
            break
    n = 2 if rng.random() < 0.2 else 1
    x = b.input(f"m{i}_x", (n, h, w, c), "int8", per_tensor(0.05, int(rng.integers(-128, 128))))
    wq = per_channel(list(rng.uniform(0.002, 0.02, size=oc)), 0) if rng.random() < 0.6 else \
        per_tensor(float(rng.uniform(0.002, 0.02)), 0)
    inputs = [x, b.const(f"m{i}_w", int8_weights(rng, (oc, kh, kw, c)), wq)]
    if rng.random() < 0.7:
        bias_scale = 0.05 * np.asarray(wq.scale)
        inputs.append(b.const(f"m{i}_b", rng.integers(-3000, 3000, size=oc).astype(np.int32),
                              per_channel(list(bias_scale), 0) if len(bias_scale) > 1
                              else per_tensor(float(bias_scale[0]), 0)))
    # mostly the usual scale below one half; sometimes above one (a left shift)
    gain = float(rng.uniform(2, 8)) if rng.random() < 0.75 else float(rng.uniform(0.05, 0.5))
    out_scale = 0.05 * 0.01 * np.sqrt(kh * kw * c) * gain
    b.apply("conv2d", inputs, f"m{i}_y", {"strides": (sh, sw), "dilation": (dh, dw), "padding": pad, "groups": 1,
                                          "activation": str(rng.choice(ACTS))},
            per_tensor(out_scale, int(rng.integers(-128, 128))))


def add_mve_dense(b: Batch, rng: np.random.Generator, i: int) -> None:
    """A random int8 dense: reductions from 1 to 300 (predicated last blocks read in place), odd units, one or two
    rows, scales above one sometimes (single rounding's left-shift branch)."""
    k, units, batch = int(rng.integers(1, 300)), int(rng.integers(1, 14)), int(rng.integers(1, 3))
    x = b.input(f"n{i}_x", (batch, k), "int8", per_tensor(0.05, int(rng.integers(-128, 128))))
    ws = float(rng.uniform(0.002, 0.02))
    inputs = [x, b.const(f"n{i}_w", int8_weights(rng, (units, k)), per_tensor(ws, 0))]
    if rng.random() < 0.7:
        inputs.append(b.const(f"n{i}_b", rng.integers(-3000, 3000, size=units).astype(np.int32),
                              per_tensor(0.05 * ws, 0)))
    gain = float(rng.uniform(2, 8)) if rng.random() < 0.7 else float(rng.uniform(0.1, 0.5))
    b.apply("dense", inputs, f"n{i}_y", {"activation": str(rng.choice(ACTS))},
            per_tensor(0.05 * ws * np.sqrt(k) * gain, int(rng.integers(-128, 128))))


def make_mve_batch(rng: np.random.Generator, n_conv: int, n_dense: int) -> Batch:
    return make_batch(rng, n_conv, n_dense, add_mve_conv, add_mve_dense)


#: what the MVE batches must reach: window rows and taps, in-place partial blocks, padded lanes, scattered
#: stores and both requantization forms in both roundings (needles in the generated C)
MVE_PATHS = ("addw %[xq0]", "tp0[t]", "vldrbq_z_s8(", "vstrbq_p_s32(", "vstrbq_scatter_offset_p_s32(",
             "tvm_mve_requant_double(", "tvm_mve_requant_right_double(", "tvm_mve_requant_right_single(",
             "tvm_mve_requant_single(")
MVE_MIN_ROUNDS, MVE_MAX_ROUNDS = 4, 24


def mve_rounds(run: Any | None) -> tuple[list[str], dict[str, set[Any]], list[tuple[Any, str]]]:
    """Batches of MVE-shaped workloads, rounding double and single in turn, every node at a point not seen yet
    where possible, until every path of MVE_PATHS and every `cols` form was generated (at least
    MVE_MIN_ROUNDS, at most MVE_MAX_ROUNDS batches). With `run` (a QEMU board) each batch is checked bit-exact
    (schedule_harness.check_batch); without, only compiled, drawing the same random numbers, so the host-side
    test sees exactly the batches the QEMU test runs. Returns the paths never reached, the knob values used
    and the (graph, rounding) of each batch."""
    rng = np.random.default_rng(20261131)
    seen: dict[str, set[Any]] = {}
    graphs: list[tuple[Any, str]] = []
    text = ""
    missing: list[str] = list(MVE_PATHS)
    for i in range(MVE_MAX_ROUNDS):
        rounding = ("double", "single")[i % 2]
        b = make_mve_batch(rng, 16, 6)
        if run is None:
            g = b.graph()
            schedules = assign_points(g, "cortex-m55", rounding, rng, seen)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                c = compile(g, passes=False, rounding=rounding, target="cortex-m55", schedules=schedules,
                            unpacked_api=False)
            b.random_inputs(rng)  # what check_batch draws for the inputs
        else:
            c = check_batch(b, "cortex-m55", rounding, rng, seen, run, unpacked_api=False)
        graphs.append((b.graph(), rounding))
        text += "\n".join(c.sources.values())
        missing = [n for n in MVE_PATHS if n not in text]
        missing += [f"cols={v}" for v in ("copy", "inplace", "window") if v not in seen.get("cols", set())]
        if i + 1 >= MVE_MIN_ROUNDS and not missing:
            break
    return missing, seen, graphs


@pytest.mark.slow
def test_every_mve_point_kind_on_qemu_cortex_m55() -> None:
    """MVE-shaped workloads, every node at a point not seen yet where possible, both roundings, bit-exact on
    qemu-cortex-m55, until every MVE path was run; every reachable value of every knob used (`cover`)."""
    missing, seen, graphs = mve_rounds(run_on_platform("qemu-cortex-m55"))
    assert not missing, missing
    cover(seen, graphs, "cortex-m55")


def test_the_mve_workloads_reach_every_path() -> None:
    """The batches of the QEMU test above (the same random numbers) reach every path of MVE_PATHS within
    MVE_MAX_ROUNDS: checked host side, so a change of the spaces that loses a path fails fast."""
    missing, seen, _graphs = mve_rounds(None)
    assert not missing, missing


# --- the tables, in a numpy model of the kernel -----------------------------------------------------------------

def _model_gemm(w: np.ndarray, bias: np.ndarray | None, zp: int, x: np.ndarray, ob: int) -> np.ndarray:
    """The kernel's integer arithmetic on the host: the packed weight table walked block by block, 16 values
    at a time (VMLADAV(A) wrapping to int32), the interleaved epilogue table's initial accumulators added lane
    by lane. Returns the (pixels, n) accumulators."""
    n, k = w.shape
    kp = mve.kp16(k)
    lane = mve.lane_group(ob)
    n_r = -(-n // lane) * lane
    table = mve.pack_weights(w, ob).astype(np.int64)
    ep = mve.epilogue_table([mve.folded_init(w, bias, zp)], ob).reshape(-1, 4)  # one column: init
    cols = np.zeros((x.shape[0], kp), np.int64)
    cols[:, :k] = x
    out = np.zeros((x.shape[0], n), np.int64)
    at = 0
    for oc in range(0, n_r, ob):
        width = min(ob, n_r - oc)
        acc = np.zeros((width, x.shape[0]), np.int64)
        for b in range(kp // 16):
            for i in range(width):
                wv = table[at:at + 16]
                at += 16
                acc[i] += cols[:, 16 * b:16 * b + 16] @ wv
        acc = ((acc + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)
        for p in range(x.shape[0]):
            for i in range(width):
                c = oc + i
                if c >= n:
                    continue
                # the lane of (channel c, pixel p) and its group in the lane-order table
                idx = c if lane == 4 else 2 * (c - c % 2) + c % 2
                init = ep[idx // 4, idx % 4]
                out[p, c] = ((acc[i, p] + init + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)
    return out


@pytest.mark.parametrize("n, k, ob", [(1, 1, 4), (5, 27, 4), (12, 64, 8), (7, 40, 2), (3, 17, 8), (9, 144, 2)])
def test_tables_reproduce_the_accumulator(n: int, k: int, ob: int) -> None:
    rng = np.random.default_rng(n * 1000 + k)
    w = rng.integers(-128, 128, size=(n, k)).astype(np.int8)
    bias = rng.integers(-5000, 5000, size=n).astype(np.int32)
    zp = int(rng.integers(-128, 128))
    x = rng.integers(-128, 128, size=(3, k))
    want = bias.astype(np.int64)[None, :] + (x - zp) @ w.astype(np.int64).T
    assert np.array_equal(_model_gemm(w, bias, zp, x, ob), want)
    assert np.array_equal(_model_gemm(w, None, zp, x, ob), want - bias.astype(np.int64)[None, :])


def test_the_folded_initial_value_wraps_like_the_sum() -> None:
    """bias - zp * sum w is kept modulo 2^32: the wrapping MACs land on the true (int32) accumulator."""
    w = np.full((1, 4000), 127, np.int8)
    init = mve.folded_init(w, np.array([2**31 - 1 - 127 * 4000 * 127], np.int64), -128)
    assert -(2**31) <= int(init[0]) < 2**31


def test_lane_order_pairs_two_channels_of_two_pixels() -> None:
    assert list(mve.lane_order([1, 2, 3], 2)) == [1, 2, 1, 2, 3, 0, 3, 0]
    assert list(mve.lane_order([1, 2, 3, 4, 5], 4)) == [1, 2, 3, 4, 5, 0, 0, 0]
    table = mve.epilogue_table([[1, 2, 3, 4, 5, 6, 7, 8], [10, 20, 30, 40, 50, 60, 70, 80]], 4)
    assert list(table) == [1, 2, 3, 4, 10, 20, 30, 40, 5, 6, 7, 8, 50, 60, 70, 80]


def test_weights_are_packed_block_of_16_major() -> None:
    w = np.arange(2 * 20, dtype=np.int64).reshape(2, 20).astype(np.int8)
    t = mve.pack_weights(w, 2)
    assert t.size == 2 * 32
    assert list(t[:16]) == list(range(16)) and list(t[16:32]) == list(range(20, 36))
    assert list(t[32:36]) == [16, 17, 18, 19] and not t[36:48].any()


# --- the space --------------------------------------------------------------------------------------------------

def _stage(shift: int, bound: int, rounding: str = "double") -> OutputStage:
    return OutputStage(rounding, (1 << 30,), (shift,), 0, 0, -128, 127, bound, False)


def test_legality_names_the_block_the_pixels_and_the_requantization() -> None:
    p = {"px_block": 4, "oc_block": 4, "kb_unroll": 1, "no_sched": True, "k_loop": "c", "cols": "copy"}
    assert "not one of the MVE blocks" in (mve.mve_legal(p, 16, _stage(-3, 100)) or "")
    p.update(px_block=4, oc_block=2)
    assert "> the 2 output pixels" in (mve.mve_legal(p, 2, _stage(-3, 100)) or "")
    p.update(px_block=2, oc_block=4, k_loop="asm")
    assert "k_loop asm: 8 accumulators" in (mve.mve_legal(p, 16, _stage(-3, 100)) or "")
    p.update(px_block=2, oc_block=2)
    assert mve.mve_legal(p, 16, _stage(-3, 100)) is None
    # single rounding with a left shift: acc << shift must not wrap
    assert "does not fit int32" in (mve.mve_legal(p, 16, _stage(2, 1 << 30, "single")) or "")
    assert mve.mve_legal(p, 16, _stage(2, 1 << 28, "single")) is None


def _graph(seed: int = 3) -> Any:
    return make_batch(np.random.default_rng(seed), 6, 3).graph()


def test_mve_is_the_default_on_cortex_m55_and_absent_elsewhere() -> None:
    g = _graph()
    for _key, space in spaces(g, "cortex-m55", "double"):
        assert space.default["algo"] == "mve", space.default
        assert "mve" in space.knobs[0].values and 8 in next(k for k in space.knobs if k.name == "oc_block").values
    for target in ("cortex-m4", "cortex-m33", "cortex-m3", "host"):
        for _key, space in spaces(g, target, "double"):
            assert "mve" not in space.knobs[0].values
            assert {k.name for k in space.knobs}.isdisjoint({"kb_unroll", "k_loop", "cols"})
            assert next(k for k in space.knobs if k.name == "oc_block").values == (1, 2, 4)


def test_a_refused_requantization_leaves_the_dsp_gemm_as_default() -> None:
    """Single rounding (dense) with a multiplier above one: the MVE form would wrap acc << shift."""
    b = Batch()
    rng = np.random.default_rng(1)
    x = b.input("x", (1, 64), "int8", per_tensor(1.0, 0))
    wt = b.const("w", int8_weights(rng, (4, 64)), per_tensor(1.0, 0))
    b.apply("dense", [x, wt], "y", {"activation": "none"}, per_tensor(0.0001, 0))
    (_key, space), = spaces(b.graph(), "cortex-m55", "single")
    assert space.default["algo"] == "gemm"
    point = {"algo": "mve", "px_block": 1, "oc_block": 4, "kb_unroll": 2, "no_sched": True, "k_loop": "asm",
             "cols": "inplace"}
    assert "MVE requantization" in (space.check(point) or "")


def test_inplace_columns_only_for_windows_that_never_pad() -> None:
    b = Batch()
    rng = np.random.default_rng(2)
    for i, (kh, pad) in enumerate([(1, (0, 0, 0, 0)), (1, (1, 0, 0, 0)), (3, (0, 0, 0, 0))]):
        x = b.input(f"x{i}", (1, 4, 4, 8), "int8", per_tensor(0.05, 3))
        wt = b.const(f"w{i}", int8_weights(rng, (4, kh, kh, 8)), per_channel([0.01] * 4, 0))
        b.apply("conv2d", [x, wt], f"y{i}", {"strides": (1, 1), "dilation": (1, 1), "padding": pad, "groups": 1,
                                             "activation": "none"}, per_tensor(0.1, 0))
    cols = [next(k for k in space.knobs if k.name == "cols").values for _k, space in spaces(b.graph(), "cortex-m55",
                                                                                            "double")]
    assert cols == [("copy", "inplace"), ("copy",), ("copy",)]


# --- the C ----------------------------------------------------------------------------------------------------------

def _compile_points(seed: int, rounding: str, seen: dict[str, set[Any]]) -> Any:
    rng = np.random.default_rng(seed)
    g = make_batch(rng, 8, 3).graph()
    schedules = assign_points(g, "cortex-m55", rounding, rng, seen)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return compile(g, passes=False, rounding=rounding, target="cortex-m55", schedules=schedules)


def test_no_bare_predicate_constant_reaches_the_c() -> None:
    """GCC 12 turns a constant predicate of 32-bit lanes into all-true: every predicate goes through
    tvm_mve_pred (an empty asm hides the constant)."""
    text = "\n".join(_compile_points(5, "double", {}).sources.values())
    assert "tvm_mve_pred(" in text and "vmladav" in text
    assert not re.search(r"\(mve_pred16_t\)\s*0x", text.replace("(mve_pred16_t)bits", ""))


@pytest.mark.parametrize("rounding", ["double", "single"])
def test_every_mve_point_cross_compiles_warning_free(rounding: str) -> None:
    """The operators build with arm-none-eabi-gcc for cortex-m55 (hard-float ABI: MVE needs it) at -O2 and -O0
    with the strict warnings, over batches whose nodes take the MVE knobs' values in turn."""
    seen: dict[str, set[Any]] = {}
    for seed in range(3):
        assert_cross_compiles(_compile_points(40 + seed, rounding, seen), "cortex-m55", ("-mfloat-abi=hard",))
    for knob in ("k_loop", "cols", "kb_unroll"):
        assert len(seen.get(knob, ())) >= 2, (knob, seen.get(knob))
    assert {1, 2, 4, 8} <= seen["oc_block"] and {1, 2, 4} <= seen["px_block"]


def test_mve_code_refuses_a_compiler_without_mve() -> None:
    """The file checks __ARM_FEATURE_MVE before <arm_mve.h>: a Cortex-M4 build stops with utvm's message."""
    gcc = shutil.which("arm-none-eabi-gcc")
    if gcc is None:
        pytest.skip("arm-none-eabi-gcc is not installed")
    c = _compile_points(7, "double", {})
    with tempfile.TemporaryDirectory() as tmp:
        srcs, inc = c.write_sources(Path(tmp))
        ops = next(s for s in srcs if s.name.endswith("_ops.c"))
        proc = subprocess.run([gcc, "-mcpu=cortex-m4", "-mthumb", "-c", str(ops), "-o", str(Path(tmp) / "o.o"),
                               f"-I{inc}", f"-I{cc.crt_dir() / 'include'}"], capture_output=True, text=True)
    assert proc.returncode != 0 and "compile with -mcpu=cortex-m55 -mfloat-abi=hard" in proc.stderr


def test_requantization_reference_and_model_agree_on_a_layer() -> None:
    """The epilogue's arithmetic (init, requant, zero point, clamp) on the model's accumulators equals the
    reference requantization (ops._quant), as the C computes it lane by lane."""
    rng = np.random.default_rng(9)
    w = rng.integers(-128, 128, size=(6, 50)).astype(np.int8)
    x = rng.integers(-128, 128, size=(4, 50))
    acc = _model_gemm(w, None, 7, x, 2)
    mult, shift = np.array([1 << 30, 1518500250] * 3), np.array([-9, -12] * 3)
    got = _quant.multiply_by_quantized_multiplier(acc, mult, shift, "double")
    want = _quant.multiply_by_quantized_multiplier((x - 7) @ w.astype(np.int64).T, mult, shift, "double")
    assert np.array_equal(got, want)


# --- int16 x int8 (16x8): VMLALDAVA ----------------------------------------------------------------------------------

@pytest.mark.slow
def test_16x8_conv_and_dense_against_tflm_on_qemu_cortex_m55() -> None:
    """conv2d and dense with int16 activations use VMLALDAVA on Cortex-M55 (8 MACs an instruction, a predicated
    last block, int64 sums): TFLM's outputs on qemu-cortex-m55, every conv and fully connected 16x8 case."""
    tests = Path(__file__).resolve().parents[1]
    sys.path.insert(0, str(tests))
    sys.path.insert(0, str(tests / "tflm"))
    from test_tflm_conv import int16_cases

    from tflm_harness import check_cases

    cases = [c for c in int16_cases() if c.id.startswith(("conv16", "fc16"))]
    assert len(cases) >= 12
    check_cases(cases, platform="qemu-cortex-m55", builds=())


def test_16x8_kernels_speak_vmlaldava_on_cortex_m55_only() -> None:
    b = Batch()
    rng = np.random.default_rng(4)
    x = b.input("x", (1, 3, 3, 19), "int16", per_tensor(1e-4, 0))
    wt = b.const("w", int8_weights(rng, (5, 2, 2, 19)), per_channel([0.01] * 5, 0))
    b.apply("conv2d", [x, wt], "y", {"strides": (1, 1), "dilation": (1, 1), "padding": (0, 0, 0, 0), "groups": 1,
                                     "activation": "none"}, per_tensor(1e-3, 0))
    xd = b.input("xd", (1, 37), "int16", per_tensor(1e-4, 0))
    wd = b.const("wd", int8_weights(rng, (3, 37)), per_tensor(0.01, 0))
    b.apply("dense", [xd, wd], "yd", {"activation": "none"}, per_tensor(1e-3, 0))
    g = b.graph()
    m55 = "\n".join(compile(g, passes=False, target="cortex-m55").sources.values())
    m4 = "\n".join(compile(g, passes=False, target="cortex-m4").sources.values())
    assert m55.count("tvm_mve_dot_s16s8(acc") == 2 and "vmlaldavaq_s16" in m55
    assert "vmlaldav" not in m4 and "arm_mve.h" not in m4


# --- int8 matmul: four columns a vector ------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("rounding", ["double", "single"])
def test_int8_matmul_on_qemu_cortex_m55(rounding: str) -> None:
    """The matmul kernel's cases (batched, broadcast, vector-matrix, columns not a multiple of 4: predicated
    loads and stores) bit-exact on qemu-cortex-m55."""
    from test_kernels_matmul import _matmul_batch

    rng = np.random.default_rng(75)
    c = check_batch(_matmul_batch("int8", rng), "cortex-m55", rounding, rng, {}, run_on_platform("qemu-cortex-m55"),
                    unpacked_api=False)
    assert "vmlaq_n_s32" in "\n".join(c.sources.values())


def _window_edge_batch() -> Batch:
    b = Batch()
    rng = np.random.default_rng(6)
    for i, (h, w, kh, kw, dil) in enumerate([(4, 2, 3, 3, (1, 1)), (5, 5, 3, 3, (1, 2)), (5, 5, 3, 3, (1, 1))]):
        x = b.input(f"x{i}", (1, h, w, 16), "int8", per_tensor(0.05, 3))
        wt = b.const(f"w{i}", int8_weights(rng, (4, kh, kw, 16)), per_channel([0.01] * 4, 0))
        b.apply("conv2d", [x, wt], f"y{i}", {"strides": (1, 1), "dilation": dil, "padding": (1, 1, 1, 1),
                                             "groups": 1, "activation": "none"}, per_tensor(0.1, 0))
    x = b.input("xl", (1, 9, 9, 16), "int8", per_tensor(0.05, 3))
    wt = b.const("wl", int8_weights(rng, (4, 8, 8, 16)), per_channel([0.01] * 4, 0))
    b.apply("conv2d", [x, wt], "yl", {"strides": (1, 1), "dilation": (1, 1), "padding": (0, 0, 0, 0),
                                      "groups": 1, "activation": "none"}, per_tensor(0.1, 0))
    return b


def test_window_columns_read_rows_in_place_only_where_a_window_fits() -> None:
    """A kernel wider than the input (every window clips) or with dilation across goes tap by tap only, so no
    row skip is emitted (ADDW takes 0..4095); a large window is not offered `window` (its tap table)."""
    g = _window_edge_batch().graph()
    sp = spaces(g, "cortex-m55", "double")
    assert [sp[i][1].default["cols"] for i in range(4)] == ["window", "window", "window", "copy"]
    c = compile(g, passes=False, rounding="double", target="cortex-m55")
    text = "\n".join(c.sources.values())
    funcs = re.split(r"\n(?:TVM_NO_SCHED )?static int32_t ", text)
    by_node = {f.split("(", 1)[0]: f for f in funcs}
    assert sum("addw %[xq" in f for f in by_node.values()) == 1  # only the third layer reads rows in place
    assert sum("tp0[t]" in f for f in by_node.values()) == 3


@pytest.mark.slow
def test_window_edges_on_qemu_cortex_m55() -> None:
    """Those layers at their default points, bit-exact on qemu-cortex-m55."""
    rng = np.random.default_rng(8)
    b = _window_edge_batch()
    g = b.graph()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        c = compile(g, passes=False, rounding="double", target="cortex-m55", unpacked_api=False)
    inputs = b.random_inputs(rng)
    ref = run_reference(g, inputs, rounding="double")
    outs = run_on_platform("qemu-cortex-m55")(c, [inputs[n] for n in g.inputs])
    for name, got in zip(g.outputs, outs, strict=True):
        compare(name, got, ref[name])
