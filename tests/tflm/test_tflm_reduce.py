"""Reductions, normalization and pooling against TFLite Micro's kernels (tests/tflm_harness.py): REDUCE_MAX,
REDUCE_MIN, SUM, REDUCE_ALL, MEAN, ARG_MAX, ARG_MIN, CUMSUM, L2_NORMALIZATION, L2_POOL_2D, AVERAGE_POOL_2D and
MAX_POOL_2D in every dtype TFLM's kernels take, axes positive, negative, repeated and empty, keep_dims,
ranks 1..5; refused configurations name the node or operator."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tflite_builder import TFLiteBuilder  # noqa: E402
from tflm_harness import Case, check_cases  # noqa: E402
from utvm.errors import GraphError, UnsupportedModelError  # noqa: E402
from utvm.frontend import from_tflite  # noqa: E402
from utvm.ir import run_reference  # noqa: E402

Q8 = (0.05, 3)
Q16 = (0.002, 0)
ACT = {"none": 0, "relu": 1, "relu_n1_to_1": 2, "relu6": 3}


def _q(dtype: str, q: tuple[float, int] | None) -> dict:
    return {} if q is None or dtype in ("float32", "int32", "int64") else {"scale": q[0], "zero_point": q[1]}


def reducer(code: str, dtype: str, shape: tuple[int, ...], axes: tuple[int, ...], keep: bool = False,
            qin: tuple[float, int] | None = Q8, qout: tuple[float, int] | None = None) -> bytes:
    b = TFLiteBuilder()
    x = b.tensor("x", shape, dtype, **_q(dtype, qin))
    a = b.tensor("axes", (len(axes),), "int32", data=np.array(axes, dtype=np.int32))
    red = {int(i) % len(shape) for i in axes}
    osh = tuple(1 if i in red else d for i, d in enumerate(shape)) if keep else tuple(
        d for i, d in enumerate(shape) if i not in red)
    y = b.tensor("y", osh, dtype, **_q(dtype, qout or qin))
    b.op(code, [x, a], [y], "ReducerOptions", KeepDims=keep)
    return b.build([x], [y])


def arg(code: str, dtype: str, shape: tuple[int, ...], axis: int, out_dtype: str = "int32",
        axis_dtype: str = "int32") -> bytes:
    b = TFLiteBuilder()
    x = b.tensor("x", shape, dtype, **_q(dtype, Q8))
    a = b.tensor("axis", (1,), axis_dtype, data=np.array([axis]))
    y = b.tensor("y", tuple(d for i, d in enumerate(shape) if i != axis % len(shape)), out_dtype)
    b.op(code, [x, a], [y], "ArgMaxOptions" if code == "ARG_MAX" else "ArgMinOptions",
         OutputType={"int32": 2, "int64": 4}[out_dtype])
    return b.build([x], [y])


def cumsum(dtype: str, shape: tuple[int, ...], axis: int, exclusive: bool = False, reverse: bool = False,
           qin: tuple[float, int] = Q8, qout: tuple[float, int] = (0.2, -4)) -> bytes:
    b = TFLiteBuilder()
    x = b.tensor("x", shape, dtype, **_q(dtype, qin))
    a = b.tensor("axis", (1,), "int32", data=np.array([axis], dtype=np.int32))
    y = b.tensor("y", shape, dtype, **_q(dtype, qout))
    b.op("CUMSUM", [x, a], [y], "CumsumOptions", Exclusive=exclusive, Reverse=reverse)
    return b.build([x], [y])


def l2norm(dtype: str, shape: tuple[int, ...], qin: tuple[float, int] = Q8, act: str = "none") -> bytes:
    b = TFLiteBuilder()
    x = b.tensor("x", shape, dtype, **_q(dtype, qin))
    y = b.tensor("y", shape, dtype, **_q(dtype, (1 / 128, 0)))
    b.op("L2_NORMALIZATION", [x], [y], "L2NormOptions", FusedActivationFunction=ACT[act])
    return b.build([x], [y])


def pool(code: str, dtype: str, shape: tuple[int, ...], k: tuple[int, int], s: tuple[int, int], same: bool,
         act: str = "none", q: tuple[float, int] | None = None, qout: tuple[float, int] | None = None) -> bytes:
    n, h, w, c = shape
    kh, kw = k
    if same:
        oh, ow = -(-h // s[0]), -(-w // s[1])
    else:
        oh, ow = (h - kh) // s[0] + 1, (w - kw) // s[1] + 1
    b = TFLiteBuilder()
    x = b.tensor("x", shape, dtype, **_q(dtype, q))
    y = b.tensor("y", (n, oh, ow, c), dtype, **_q(dtype, qout or q))
    b.op(code, [x], [y], "Pool2DOptions", Padding=0 if same else 1, StrideH=s[0], StrideW=s[1], FilterHeight=kh,
         FilterWidth=kw, FusedActivationFunction=ACT[act])
    return b.build([x], [y])


def _ties(lo: int, hi: int):  # noqa: ANN202 - few distinct values: ties in arg max/min
    return {0: (lo, hi)}


def _with_nan(shape: tuple[int, ...]):  # noqa: ANN202 - NaNs first in a row, inside, and a row of NaNs only
    def make(rng: np.random.Generator) -> list[np.ndarray]:
        x = rng.uniform(-3, 3, size=shape).astype(np.float32)
        x[0, 0] = x[1, 2] = np.nan
        x[2, :] = np.nan
        return [x]
    return make


def _mostly_true(shape: tuple[int, ...], p: float = 0.85):  # noqa: ANN202 - both outcomes of an "all"
    return lambda rng: [rng.random(shape) < p]


def _tiny_rows(rng: np.random.Generator) -> list[np.ndarray]:
    """Rows whose sums of squares are 0, 1, 2, 3, 4 and 5 (zero point -3): TFLM's small-sum paths."""
    x = np.full((6, 5), -3, dtype=np.int8)
    for r in range(1, 6):
        x[r, :r] += rng.choice(np.array([-1, 1], dtype=np.int8), size=r)
    return [x]


def cases() -> list[Case]:
    out: list[Case] = []

    def add(id_: str, model: bytes, **kw: object) -> None:
        out.append(Case(id_, model, **kw))  # type: ignore[arg-type]

    # REDUCE_MAX / REDUCE_MIN: float32 and int8 (shared quantization), ranks 1..5, axes variants
    for code in ("REDUCE_MAX", "REDUCE_MIN"):
        c = code.lower()
        for dt in ("float32", "int8"):
            add(f"{c}-{dt}-r1", reducer(code, dt, (7,), (0,)))
            add(f"{c}-{dt}-r2-neg-keep", reducer(code, dt, (3, 5), (-1,), keep=True))
            add(f"{c}-{dt}-r3-dup", reducer(code, dt, (2, 3, 4), (1, -2, 1)))
            add(f"{c}-{dt}-r4-hw-keep", reducer(code, dt, (1, 4, 5, 3), (1, 2), keep=True))
            add(f"{c}-{dt}-r5-3axes", reducer(code, dt, (2, 2, 3, 2, 3), (0, 2, 4)))
        add(f"{c}-float32-all", reducer(code, "float32", (2, 3, 4), (0, 1, 2)))
        add(f"{c}-int8-noaxes", reducer(code, "int8", (2, 3), ()))
    # REDUCE_ALL: bool
    add("reduce_all-r1", reducer("REDUCE_ALL", "bool", (6,), (0,), qin=None), inputs=_mostly_true((6,)))
    add("reduce_all-r2-neg", reducer("REDUCE_ALL", "bool", (3, 4), (-1,), qin=None), inputs=_mostly_true((3, 4)))
    add("reduce_all-r4-keep-dup", reducer("REDUCE_ALL", "bool", (2, 3, 2, 2), (1, 3, -3), keep=True, qin=None),
        inputs=_mostly_true((2, 3, 2, 2)))
    add("reduce_all-r5-all", reducer("REDUCE_ALL", "bool", (2, 1, 2, 2, 2), (0, 1, 2, 3, 4), qin=None),
        inputs=_mostly_true((2, 1, 2, 2, 2), 0.97))
    add("reduce_all-empty", reducer("REDUCE_ALL", "bool", (3, 0), (1,), qin=None))
    # SUM: float32, int8, int16, requantized
    add("sum-float32-r2", reducer("SUM", "float32", (4, 6), (1,)))
    add("sum-float32-r4-keep", reducer("SUM", "float32", (2, 3, 4, 5), (1, 2), keep=True))
    add("sum-float32-r5-neg", reducer("SUM", "float32", (2, 2, 3, 2, 3), (-1, -3)))
    add("sum-int8-r1", reducer("SUM", "int8", (9,), (0,), qin=(0.05, 3), qout=(0.3, -2)))
    add("sum-int8-r3-dup", reducer("SUM", "int8", (2, 3, 4), (2, -1), qin=(0.05, -7), qout=(0.15, 5)))
    add("sum-int8-r4-keep", reducer("SUM", "int8", (1, 3, 4, 5), (1, 2), keep=True, qin=(0.02, 0), qout=(0.1, 1)))
    add("sum-int8-r5-3axes", reducer("SUM", "int8", (2, 2, 3, 2, 3), (0, 2, 4), qin=(0.05, 3), qout=(0.5, 0)))
    add("sum-int8-same-quant", reducer("SUM", "int8", (2, 3, 4), (1,), qin=(0.05, 3), qout=(0.05, 3)))
    add("sum-int8-noaxes", reducer("SUM", "int8", (2, 3), (), qin=(0.05, 3), qout=(0.07, -3)))
    add("sum-int16-r2", reducer("SUM", "int16", (4, 6), (1,), qin=Q16, qout=(0.01, 0)))
    add("sum-int16-r4-keep", reducer("SUM", "int16", (2, 3, 4, 5), (1, 2), keep=True, qin=Q16, qout=(0.02, 0)))
    add("sum-int16-zp", reducer("SUM", "int16", (3, 4, 5), (-1, 0), qin=(0.002, 11), qout=(0.03, -9)))
    # MEAN: int16 (and int8 through TFLM's special 4D H/W path)
    add("mean-int16-hw-keep", reducer("MEAN", "int16", (1, 5, 6, 8), (1, 2), keep=True, qin=Q16, qout=(0.001, 0)))
    add("mean-int16-c", reducer("MEAN", "int16", (2, 3, 4, 5), (3,), qin=Q16, qout=(0.003, 0)))
    add("mean-int16-same-quant", reducer("MEAN", "int16", (2, 3, 4), (0, -1), qin=Q16, qout=Q16))
    add("mean-int16-r5-zp", reducer("MEAN", "int16", (2, 2, 3, 2, 3), (1, 3, 4), qin=(0.002, 7), qout=(0.004, -3)))
    add("mean-int8-hw-keep", reducer("MEAN", "int8", (2, 5, 6, 8), (1, 2), keep=True, qin=Q8, qout=(0.02, -5)))
    add("mean-int8-same-quant", reducer("MEAN", "int8", (1, 5, 6, 8), (2, 1), keep=True, qin=Q8, qout=Q8))
    add("mean-int8-big-ratio", reducer("MEAN", "int8", (1, 6, 6, 4), (1, 2), keep=True, qin=(0.5, -1), qout=(0.01, 2)))
    add("mean-int16-wide-hw", reducer("MEAN", "int16", (1, 64, 64, 2), (1, 2), keep=True, qin=Q16, qout=(0.0001, 0)))
    add("mean-int8-tiny-ratio", reducer("MEAN", "int8", (1, 32, 32, 1), (1, 2), qin=(0.001, 0), qout=(9000.0, 0)))
    add("mean-int8-noaxes", reducer("MEAN", "int8", (2, 3), (), qin=Q8, qout=(0.1, -2)))
    add("mean-float32-hw-keep", reducer("MEAN", "float32", (2, 5, 6, 3), (1, 2), keep=True))
    # NaN never wins a float max/min or arg max/min (TFLM's strict comparisons)
    add("reduce_max-float32-nan", reducer("REDUCE_MAX", "float32", (3, 4), (1,)), inputs=_with_nan((3, 4)))
    add("reduce_min-float32-nan", reducer("REDUCE_MIN", "float32", (3, 4), (0,)), inputs=_with_nan((3, 4)))
    add("arg_max-float32-nan", arg("ARG_MAX", "float32", (3, 4), 1), inputs=_with_nan((3, 4)))
    add("arg_min-float32-nan", arg("ARG_MIN", "float32", (3, 4), 0), inputs=_with_nan((3, 4)))
    # empty reductions: the identity of max/min, zero sums (raw 0 for integers, as TFLM)
    add("reduce_max-float32-empty", reducer("REDUCE_MAX", "float32", (2, 0, 3), (1,)))
    add("reduce_min-int8-empty", reducer("REDUCE_MIN", "int8", (2, 0), (-1,), keep=True))
    add("sum-float32-empty", reducer("SUM", "float32", (0, 3), (0,)))
    add("sum-int8-empty", reducer("SUM", "int8", (2, 0), (1,), qin=Q8, qout=(0.1, 7)))
    add("mean-int16-empty", reducer("MEAN", "int16", (0, 4), (0,), qin=Q16, qout=(0.003, 5)))
    # ARG_MAX / ARG_MIN: float32, int8 inputs, int32 outputs
    for code in ("ARG_MAX", "ARG_MIN"):
        c = code.lower()
        add(f"{c}-float32-r1", arg(code, "float32", (9,), 0))
        add(f"{c}-float32-r3-neg", arg(code, "float32", (2, 3, 4), -1))
        add(f"{c}-float32-r5", arg(code, "float32", (2, 2, 3, 2, 3), 2))
        add(f"{c}-int8-r2", arg(code, "int8", (4, 6), 0))
        add(f"{c}-int8-r4-ties", arg(code, "int8", (2, 3, 4, 5), 3), ranges=_ties(-2, 2))
        add(f"{c}-int8-r3-ties-mid", arg(code, "int8", (3, 5, 4), -2), ranges=_ties(0, 1))
    # CUMSUM: float32, int8; axis positive/negative; exclusive, reverse
    for excl in (False, True):
        for rev in (False, True):
            tag = f"{'x' if excl else 'i'}{'r' if rev else 'f'}"
            add(f"cumsum-float32-{tag}", cumsum("float32", (2, 5, 3), 1, excl, rev))
            add(f"cumsum-int8-{tag}", cumsum("int8", (3, 4, 2), -2, excl, rev))
    add("cumsum-float32-r1", cumsum("float32", (8,), 0))
    add("cumsum-float32-r4-last", cumsum("float32", (2, 2, 3, 4), -1))
    add("cumsum-int8-r1-zp0", cumsum("int8", (12,), 0, qin=(0.05, 0), qout=(0.5, 0)))
    add("cumsum-int8-r5-first", cumsum("int8", (3, 2, 2, 2, 3), 0, True, False, qin=(0.03, -20), qout=(0.09, 10)))
    # L2_NORMALIZATION: float32, int8; ranks 1..4
    add("l2norm-float32-r1", l2norm("float32", (6,)))
    add("l2norm-float32-r4", l2norm("float32", (2, 3, 2, 5)))
    add("l2norm-int8-r2", l2norm("int8", (4, 6)))
    add("l2norm-int8-r3-zp", l2norm("int8", (2, 3, 16), qin=(0.1, -11)))
    add("l2norm-int8-r4-small", l2norm("int8", (2, 2, 2, 7), qin=(0.1, 0)), ranges=_ties(-1, 1))
    add("l2norm-int8-r2-wide", l2norm("int8", (2, 300), qin=(0.1, 4)))
    add("l2norm-int8-tiny-rows", l2norm("int8", (6, 5), qin=(0.1, -3)), inputs=_tiny_rows)
    add("l2norm-int8-huge-row", l2norm("int8", (1, 8300), qin=(0.1, 127)),
        inputs=lambda rng: [np.where(rng.random((1, 8300)) < 0.999, -128, 127).astype(np.int8)])
    # L2_POOL_2D: float32
    add("l2pool-same", pool("L2_POOL_2D", "float32", (1, 5, 6, 3), (2, 3), (2, 2), True))
    add("l2pool-valid-relu6", pool("L2_POOL_2D", "float32", (2, 6, 5, 2), (3, 2), (1, 2), False, "relu6"))
    add("l2pool-same-relu-n1", pool("L2_POOL_2D", "float32", (1, 4, 4, 4), (3, 3), (1, 1), True, "relu_n1_to_1"))
    # AVERAGE_POOL_2D / MAX_POOL_2D int16 (and the int8/float paths they share)
    for code in ("AVERAGE_POOL_2D", "MAX_POOL_2D"):
        c = "avgpool" if code == "AVERAGE_POOL_2D" else "maxpool"
        add(f"{c}-int16-same", pool(code, "int16", (1, 5, 6, 3), (2, 3), (2, 2), True, q=Q16))
        add(f"{c}-int16-valid-relu", pool(code, "int16", (2, 6, 5, 2), (3, 2), (1, 2), False, "relu", q=Q16))
        add(f"{c}-int16-same-relu6", pool(code, "int16", (1, 7, 7, 5), (3, 3), (2, 1), True, "relu6", q=(0.0005, 0)))
        add(f"{c}-int16-zp", pool(code, "int16", (1, 4, 5, 4), (2, 2), (1, 1), True, q=(0.002, 13)))
    return out


def test_reduction_ops_match_tflm() -> None:
    check_cases(cases(), platform="host")


@pytest.mark.slow
def test_reduction_ops_on_cortex_m4() -> None:
    keep = ("reduce_max-int8-r5-3axes", "reduce_min-float32-r4-hw-keep", "sum-int8-r3-dup", "sum-int16-zp",
            "mean-int16-r5-zp", "arg_max-int8-r4-ties", "arg_min-float32-r3-neg", "cumsum-int8-xr",
            "cumsum-float32-if", "l2norm-int8-r3-zp", "l2norm-float32-r4", "l2pool-valid-relu6",
            "avgpool-int16-same", "maxpool-int16-valid-relu")
    sample = [c for c in cases() if c.id in keep]
    assert len(sample) == len(keep)
    check_cases(sample, platform="qemu-cortex-m4", builds=())


def _import(model: bytes):  # noqa: ANN202
    return from_tflite(model, name="m")


def test_refused_configurations() -> None:
    # dtypes TFLM's kernels refuse
    for model, what in ((reducer("REDUCE_MAX", "int16", (2, 3), (1,), qin=Q16), "int16"),
                        (reducer("SUM", "int32", (2, 3), (1,)), "int32"),
                        (cumsum("int16", (2, 3), 1, qin=Q16, qout=Q16), "int16"),
                        (l2norm("int16", (2, 3), qin=Q16), "int16"),
                        (pool("L2_POOL_2D", "int8", (1, 4, 4, 1), (2, 2), (2, 2), True, q=Q8), "int8"),
                        (arg("ARG_MAX", "int16", (2, 3), 1), "int16"),
                        (reducer("REDUCE_ALL", "float32", (2, 3), (1,)), "float32")):
        with pytest.raises(UnsupportedModelError, match=f"dtype {what}; supported"):
            _import(model)
    # int64 outputs and axes: TFLM's ARG_MAX/ARG_MIN write and read only int32
    with pytest.raises(UnsupportedModelError, match="int32"):
        _import(arg("ARG_MAX", "float32", (2, 3), 1, out_dtype="int64"))
    with pytest.raises(UnsupportedModelError, match="int32"):
        _import(arg("ARG_MIN", "float32", (2, 3), 1, axis_dtype="int64"))
    b = TFLiteBuilder()
    x, y = b.tensor("x", (2, 3), "float32"), b.tensor("y", (2,), "float32")
    b.op("MEAN", [x, b.tensor("axes", (1,), "int64", data=np.array([1]))], [y], "ReducerOptions", KeepDims=False)
    with pytest.raises(UnsupportedModelError, match="operator 0 \\(MEAN\\): axis 'axes' is int64"):
        _import(b.build([x], [y]))
    # REDUCE_MAX int8 needs one quantization on both sides (TFLM checks it)
    g = _import(reducer("REDUCE_MAX", "int8", (2, 3), (1,), qin=Q8, qout=(0.1, 3)))
    with pytest.raises(GraphError, match="share quantization"):
        run_reference(g, {g.inputs[0]: np.zeros((2, 3), np.int8)}, rounding="double")
    # L2_NORMALIZATION: no fused activation in TFLM; an out-of-range axis is named
    with pytest.raises(UnsupportedModelError, match="l2_normalization.*fused activation"):
        _import(l2norm("float32", (2, 3), act="relu"))
    with pytest.raises(UnsupportedModelError, match="arg_max.*axis 1 of 'x' is empty"):
        _import(arg("ARG_MAX", "float32", (2, 0), -1))
    with pytest.raises(UnsupportedModelError, match="reduce_sum.*axis 3 is out of range"):
        _import(reducer("SUM", "float32", (2, 3), (3,)))
