"""Convolution, fully connected and quantization against TFLite Micro: int16 activations with int8 weights
("16x8") for CONV_2D / DEPTHWISE_CONV_2D / FULLY_CONNECTED, QUANTIZE / DEQUANTIZE with int16 and int32, and
TRANSPOSE_CONV (float32, int8, int16x8).

TFLM's 16x8 semantics, measured here: conv and depthwise ignore the int16 zero points in their arithmetic
(only the activation clamp sees the output's), fully connected uses them; an int64 bias (or none) means an
int64 accumulator and TFLite's int64 MultiplyByQuantizedMultiplier (16-bit reduced multiplier), an int32 bias
(conv, fully connected) an int32 accumulator and the int32 one.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tflite_builder import TFLiteBuilder  # noqa: E402
from tflm_harness import Case, check_cases  # noqa: E402
from utvm.errors import ModelFormatError, UnsupportedModelError  # noqa: E402
from utvm.frontend import from_tflite  # noqa: E402

S_IN = 4.0 / 32768  # int16 activations in [-4, 4)
S8 = 0.05  # int8 activations
ACT = {"none": 0, "relu": 1, "relu_n1_to_1": 2, "relu6": 3}


def _out_hw(size: int, k: int, s: int, d: int, padding: int) -> int:
    if padding == 0:
        return (size + s - 1) // s
    return (size - (k - 1) * d - 1) // s + 1


def _s_out(dtype: str, taps: int, factor: float = 1.0) -> float:
    """An output scale that spreads a sum of `taps` products over the output type without saturating it."""
    if dtype == "int16":
        return float(S_IN * 0.01 * 70 * np.sqrt(taps) * 32768 / 12000 * factor)
    return float(S8 * 0.0125 * 73 * 74 * np.sqrt(taps) / 40 * factor)


def conv16(kind: str = "conv", *, shape=(1, 6, 6, 3), out_c: int = 4, kernel=(3, 3), strides=(1, 1),
           dilation=(1, 1), padding: int = 0, bias: str | None = "int64", per_channel: bool = True,
           act: str = "none", zp_in: int = 0, zp_out: int = 0, multiplier: int = 1, seed: int = 0,
           s_out_factor: float = 1.0, dtype: str = "int16") -> bytes:
    """One CONV_2D (kind "conv"; "group": two groups) or DEPTHWISE_CONV_2D ("dw"), int16 x int8 by default
    (dtype "int8" / "float32": those kernels, bias int32 / float32 whatever `bias` names)."""
    rng = np.random.default_rng(seed)
    n, h, w, c = shape
    kh, kw = kernel
    b = TFLiteBuilder()
    s_in = S_IN if dtype == "int16" else S8
    xq = {} if dtype == "float32" else {"scale": s_in, "zero_point": zp_in}
    x = b.tensor("x", shape, dtype, **xq)
    if kind == "dw":
        out_c = c * multiplier
        wshape, axis = (1, kh, kw, out_c), 3
    else:
        cg = c if kind == "conv" else c // 2  # "group": two groups
        wshape, axis = (out_c, kh, kw, cg), 0
    wd = rng.integers(-127, 128, size=wshape).astype(np.int8)
    w_scales = list(rng.uniform(0.005, 0.02, out_c)) if per_channel else 0.01
    if dtype == "float32":
        wt = b.tensor("w", wshape, "float32", data=wd.astype(np.float32) / 100)
    else:
        wt = b.tensor("w", wshape, "int8", data=wd, scale=w_scales, zero_point=0, axis=axis)
    ins = [x, wt]
    if bias is not None:
        if dtype == "float32":
            bt = b.tensor("b", (out_c,), "float32", data=rng.uniform(-1, 1, out_c).astype(np.float32))
        else:
            bias = "int32" if dtype == "int8" else bias
            lim = 5000 if dtype == "int8" else 2**20 if bias == "int32" else 2**22
            bt = b.tensor("b", (out_c,), bias, data=rng.integers(-lim, lim, out_c), scale=[s_in * 0.01] * out_c,
                          zero_point=0)
        ins.append(bt)
    taps = kh * kw * (wshape[3] if kind != "dw" else 1)
    oh = _out_hw(h, kh, strides[0], dilation[0], padding)
    ow = _out_hw(w, kw, strides[1], dilation[1], padding)
    yq = {} if dtype == "float32" else {"scale": _s_out(dtype, taps, s_out_factor), "zero_point": zp_out}
    y = b.tensor("y", (n, oh, ow, out_c), dtype, **yq)
    common = dict(Padding=padding, StrideH=strides[0], StrideW=strides[1], FusedActivationFunction=ACT[act],
                  DilationHFactor=dilation[0], DilationWFactor=dilation[1])
    if kind == "dw":
        b.op("DEPTHWISE_CONV_2D", ins, [y], "DepthwiseConv2DOptions", DepthMultiplier=multiplier, **common)
    else:
        b.op("CONV_2D", ins, [y], "Conv2DOptions", **common)
    return b.build([x], [y])


def fc16(*, batch: int = 3, k: int = 16, units: int = 5, bias: str | None = "int64", per_channel: bool = False,
         w_zp: int = 0, zp_in: int = 0, zp_out: int = 0, act: str = "none", keep_num_dims: bool = False,
         in_shape: tuple[int, ...] | None = None, seed: int = 1, dtype: str = "int16") -> bytes:
    rng = np.random.default_rng(seed)
    b = TFLiteBuilder()
    shape = in_shape or (batch, k)
    s_in = S_IN if dtype == "int16" else S8
    xq = {} if dtype == "float32" else {"scale": s_in, "zero_point": zp_in}
    x = b.tensor("x", shape, dtype, **xq)
    w_scales = list(rng.uniform(0.005, 0.02, units)) if per_channel else 0.01
    wd = rng.integers(-127, 128, (units, k))
    if dtype == "float32":
        wt = b.tensor("w", (units, k), "float32", data=wd.astype(np.float32) / 100)
    else:
        wt = b.tensor("w", (units, k), "int8", data=wd, scale=w_scales, zero_point=w_zp)
    ins = [x, wt]
    if bias is not None:
        if dtype == "float32":
            ins.append(b.tensor("b", (units,), "float32", data=rng.uniform(-1, 1, units).astype(np.float32)))
        else:
            bias = "int32" if dtype == "int8" else bias
            lim = 5000 if dtype == "int8" else 2**20 if bias == "int32" else 2**22
            ins.append(b.tensor("b", (units,), bias, data=rng.integers(-lim, lim, units), scale=s_in * 0.01,
                                zero_point=0))
    oshape = (*shape[:-1], units) if keep_num_dims else (int(np.prod(shape)) // k, units)
    yq = {} if dtype == "float32" else {"scale": _s_out(dtype, k), "zero_point": zp_out}
    y = b.tensor("y", oshape, dtype, **yq)
    b.op("FULLY_CONNECTED", ins, [y], "FullyConnectedOptions", FusedActivationFunction=ACT[act],
         KeepNumDims=keep_num_dims)
    return b.build([x], [y])


def quant(in_dt: str, out_dt: str, *, s_in: float = 0.02, zp_in: int = 0, s_out: float = 0.05, zp_out: int = 0,
          shape=(2, 3, 5), op: str | None = None) -> bytes:
    b = TFLiteBuilder()
    qi = {} if in_dt == "float32" else {"scale": s_in, "zero_point": zp_in}
    qo = {} if out_dt == "float32" else {"scale": s_out, "zero_point": zp_out}
    x = b.tensor("x", shape, in_dt, **qi)
    y = b.tensor("y", shape, out_dt, **qo)
    b.op(op or ("DEQUANTIZE" if out_dt == "float32" else "QUANTIZE"), [x], [y])
    return b.build([x], [y])


def bmm16(a_shape, b_shape, y_shape, *, zp: int = 0, s_out: float = 0.002, dtype: str = "int16") -> bytes:
    b = TFLiteBuilder()
    if dtype == "float32":
        a, bb, y = (b.tensor(n, sh, "float32") for n, sh in (("a", a_shape), ("b", b_shape), ("y", y_shape)))
    else:
        s_in = S_IN if dtype == "int16" else S8
        a = b.tensor("a", a_shape, dtype, scale=s_in, zero_point=zp)
        bb = b.tensor("b", b_shape, dtype, scale=s_in * 2, zero_point=-zp)
        y = b.tensor("y", y_shape, dtype, scale=s_out, zero_point=zp)
    b.op("BATCH_MATMUL", [a, bb], [y], "BatchMatMulOptions", AdjX=False, AdjY=False)
    return b.build([a, bb], [y])


def tconv(dtype: str = "float32", *, shape=(1, 4, 4, 3), out_c: int = 2, kernel=(3, 3), strides=(2, 2),
          padding: int = 0, out_hw: tuple[int, int] | None = None, bias: str | None = "default", act: str = "none",
          zp_in: int = 0, zp_out: int = 0, per_channel: bool = True, seed: int = 0,
          s_out: float | None = None) -> bytes:
    """One TRANSPOSE_CONV; the output size defaults to TFLite's for the padding (SAME: H * s, VALID:
    (H - 1) * s + K)."""
    rng = np.random.default_rng(seed)
    n, h, w, c = shape
    kh, kw = kernel
    if out_hw is None:
        out_hw = ((h * strides[0], w * strides[1]) if padding == 0
                  else ((h - 1) * strides[0] + kh, (w - 1) * strides[1] + kw))
    oshape = (n, *out_hw, out_c)
    b = TFLiteBuilder()
    os_t = b.tensor("output_shape", (4,), "int32", data=np.array(oshape, np.int32))
    wshape = (out_c, kh, kw, c)
    if dtype == "float32":
        x = b.tensor("x", shape, "float32")
        wt = b.tensor("w", wshape, "float32", data=rng.uniform(-1, 1, wshape).astype(np.float32))
        bdt, bdata, bq = "float32", rng.uniform(-1, 1, out_c).astype(np.float32), {}
        y = b.tensor("y", oshape, "float32")
    else:
        s_in = S_IN if dtype == "int16" else 0.05
        x = b.tensor("x", shape, dtype, scale=s_in, zero_point=zp_in)
        w_scales = list(rng.uniform(0.005, 0.02, out_c)) if per_channel else 0.01
        wt = b.tensor("w", wshape, "int8", data=rng.integers(-127, 128, wshape), scale=w_scales, zero_point=0)
        bdt = "int32" if dtype == "int8" else "int64"
        lim = 2000 if dtype == "int8" else 2**22
        bdata, bq = rng.integers(-lim, lim, out_c), {"scale": [s_in * 0.01] * out_c, "zero_point": 0}
        if s_out is None:
            xstd = 18900 if dtype == "int16" else 74
            s_out = s_in * 0.0125 * 73 * xstd * np.sqrt(kh * kw * c / (strides[0] * strides[1])) / (
                10000 if dtype == "int16" else 40)
        y = b.tensor("y", oshape, dtype, scale=float(s_out), zero_point=zp_out)
    ins = [os_t, wt, x]
    if bias is not None:
        ins.append(b.tensor("b", (out_c,), bdt if bias == "default" else bias,
                            data=bdata if bias == "default" else rng.integers(-3000, 3000, out_c), **bq))
    b.op("TRANSPOSE_CONV", ins, [y], "TransposeConvOptions", Padding=padding, StrideH=strides[0],
         StrideW=strides[1], FusedActivationFunction=ACT[act])
    return b.build([x], [y])


def tconv_cases() -> list[Case]:
    return [
        Case("tconv-f32-same-s2", tconv()),
        Case("tconv-f32-valid-s2-relu", tconv(padding=1, act="relu", seed=1)),
        Case("tconv-f32-s1-nobias-relu6", tconv(strides=(1, 1), bias=None, act="relu6", seed=2)),
        Case("tconv-f32-odd-out-s3x2", tconv(shape=(2, 3, 4, 2), kernel=(4, 3), strides=(3, 2), out_hw=(8, 9),
                                             out_c=3, seed=3)),
        Case("tconv-f32-small-out", tconv(shape=(1, 3, 3, 2), kernel=(5, 5), strides=(1, 1), out_hw=(2, 2),
                                          padding=1, seed=4)),
        Case("tconv-i8-same-s2", tconv("int8", zp_in=3, zp_out=-7, seed=5)),
        Case("tconv-i8-valid-per-tensor", tconv("int8", padding=1, per_channel=False, seed=6)),
        Case("tconv-i8-nobias-relu", tconv("int8", bias=None, act="relu", zp_out=-20, seed=7)),
        Case("tconv-i8-s3x2", tconv("int8", shape=(2, 3, 4, 2), kernel=(4, 3), strides=(3, 2), out_hw=(8, 9),
                                    out_c=3, zp_in=-9, seed=8)),
        Case("tconv-i16-same-s2", tconv("int16", seed=9)),
        Case("tconv-i16-valid-zp", tconv("int16", padding=1, zp_in=5, zp_out=-3, seed=10)),
        Case("tconv-i16-nobias-s1", tconv("int16", strides=(1, 1), bias=None, seed=11)),
        Case("tconv-i16-int16bias-relu", tconv("int16", bias="int16", act="relu", seed=12)),
    ]


def int16_cases() -> list[Case]:
    cases = [
        Case("conv16-same-i64", conv16()),
        Case("conv16-valid-stride2-dil", conv16(shape=(2, 9, 8, 3), strides=(2, 1), dilation=(1, 2), padding=1)),
        Case("conv16-i32bias", conv16(bias="int32", seed=2)),
        Case("conv16-nobias-relu", conv16(bias=None, act="relu", seed=3)),
        Case("conv16-zp-relu6", conv16(zp_in=7, zp_out=-5, act="relu6", seed=4, s_out_factor=0.25)),
        Case("conv16-per-tensor-n1to1", conv16(per_channel=False, act="relu_n1_to_1", seed=5, s_out_factor=0.04)),
        Case("conv16-groups", conv16("group", shape=(1, 5, 5, 4), out_c=6, seed=6)),
        Case("conv16-1x1-wide", conv16(shape=(1, 4, 4, 40), out_c=3, kernel=(1, 1), seed=7)),
        Case("dw16-m1", conv16("dw", seed=8)),
        Case("dw16-m2-stride-valid", conv16("dw", shape=(1, 7, 6, 3), multiplier=2, strides=(2, 2), padding=1,
                                            seed=9)),
        Case("dw16-nobias-dil-relu", conv16("dw", shape=(1, 7, 7, 2), bias=None, dilation=(2, 2), act="relu",
                                            seed=10)),
        Case("dw16-zp", conv16("dw", zp_in=-3, zp_out=11, seed=11)),
        Case("fc16-i64", fc16()),
        Case("fc16-i32", fc16(bias="int32", seed=2)),
        Case("fc16-nobias", fc16(bias=None, seed=3)),
        Case("fc16-per-channel-relu", fc16(per_channel=True, act="relu", seed=4)),
        Case("fc16-zps", fc16(w_zp=3, zp_in=5, zp_out=-7, seed=5)),
        Case("fc16-flatten", fc16(in_shape=(2, 2, 16), seed=6)),
        Case("fc16-keepdims-relu6", fc16(in_shape=(2, 2, 16), keep_num_dims=True, act="relu6", seed=7)),
    ]
    cases += [
        Case("bmm16-batched", bmm16((2, 3, 4), (2, 4, 5), (2, 3, 5))),
        Case("bmm16-broadcast", bmm16((2, 1, 3, 6), (1, 2, 6, 2), (2, 2, 3, 2), s_out=0.003)),
        Case("bmm16-2d", bmm16((4, 7), (7, 3), (4, 3), s_out=0.003)),
    ]
    q = [
        ("f32-i16", quant("float32", "int16", s_out=1e-4, zp_out=3)),
        ("f32-i16-sat", quant("float32", "int16", s_out=2e-5, zp_out=-100)),
        ("i16-f32", quant("int16", "float32", s_in=3e-4, zp_in=-12)),
        ("i16-i8", quant("int16", "int8", s_in=1e-3, zp_in=0, s_out=0.2, zp_out=-4)),
        ("i16-i16", quant("int16", "int16", s_in=1e-3, zp_in=5, s_out=2.5e-3, zp_out=-9)),
        ("i16-i16-up", quant("int16", "int16", s_in=1e-3, s_out=3e-4)),
        ("i16-i32", quant("int16", "int32", s_in=1e-3, zp_in=2, s_out=1e-5, zp_out=-30)),
        ("i8-i16", quant("int8", "int16", s_in=0.05, zp_in=-3, s_out=1e-4, zp_out=6)),
        ("i8-i32", quant("int8", "int32", s_in=0.05, zp_in=4, s_out=1e-6, zp_out=1000)),
        ("i32-i8", quant("int32", "int8", s_in=0.5, zp_in=1, s_out=0.3, zp_out=2)),
        ("i32-i16", quant("int32", "int16", s_in=0.5, zp_in=0, s_out=0.01, zp_out=-2)),
    ]
    cases += [Case(f"quant-{name}", m) for name, m in q]
    return cases


def base_cases() -> list[Case]:
    """float32 and int8 of the same operators, through the same builders (the int8 kernels' default
    schedules)."""
    return [
        Case("conv-f32-same-relu", conv16(dtype="float32", act="relu")),
        Case("conv-f32-groups-valid", conv16("group", dtype="float32", shape=(1, 5, 5, 4), out_c=6, padding=1)),
        Case("dw-f32-m2-dil", conv16("dw", dtype="float32", multiplier=2, dilation=(2, 1), bias=None)),
        Case("conv-i8-same-zp-relu6", conv16(dtype="int8", zp_in=-5, zp_out=3, act="relu6", seed=20,
                                             s_out_factor=0.1)),
        Case("conv-i8-stride-per-tensor", conv16(dtype="int8", strides=(2, 2), per_channel=False, seed=21)),
        Case("dw-i8-m2", conv16("dw", dtype="int8", multiplier=2, zp_in=4, zp_out=-2, seed=22)),
        Case("fc-f32", fc16(dtype="float32", act="relu")),
        Case("fc-i8-zps", fc16(dtype="int8", w_zp=2, zp_in=-3, zp_out=5, seed=23)),
        Case("fc-i8-per-channel", fc16(dtype="int8", per_channel=True, bias=None, seed=24)),
        Case("bmm-f32", bmm16((2, 3, 4), (2, 4, 5), (2, 3, 5), dtype="float32")),
        Case("bmm-i8", bmm16((2, 3, 4), (1, 4, 5), (2, 3, 5), dtype="int8", zp=3, s_out=1.0)),
        Case("quant-f32-i8", quant("float32", "int8", s_out=0.02, zp_out=-3)),
        Case("quant-i8-i8", quant("int8", "int8", s_in=0.02, zp_in=5, s_out=0.05, zp_out=-1)),
        Case("quant-i8-u8", quant("int8", "uint8", s_in=0.02, zp_in=5, s_out=0.02, zp_out=133)),
        Case("quant-u8-i8", quant("uint8", "int8", s_in=0.02, zp_in=128, s_out=0.03, zp_out=1)),
        Case("dequant-i8", quant("int8", "float32", s_in=0.02, zp_in=-4)),
        Case("dequant-u8", quant("uint8", "float32", s_in=0.02, zp_in=120)),
    ]


def test_float_int8_against_tflm() -> None:
    check_cases(base_cases(), platform="host")


def test_int16_against_tflm() -> None:
    check_cases(int16_cases(), platform="host")


def test_transpose_conv_against_tflm() -> None:
    check_cases(tconv_cases(), platform="host")


@pytest.mark.slow
def test_sample_on_cortex_m4() -> None:
    keep = {"conv16-same-i64", "conv16-i32bias", "dw16-m2-stride-valid", "fc16-zps", "bmm16-broadcast",
            "quant-f32-i16", "quant-i16-f32", "quant-i16-i8", "quant-i16-i32", "tconv-f32-same-s2",
            "tconv-i8-s3x2", "tconv-i16-valid-zp", "conv-i8-same-zp-relu6", "fc-i8-zps"}
    cases = [c for c in int16_cases() + tconv_cases() + base_cases() if c.id in keep]
    assert len(cases) == len(keep)
    check_cases(cases, platform="qemu-cortex-m4", builds=())


def test_refused_configurations() -> None:
    # TFLM reads a depthwise int16 bias as int64 whatever its type: an int32 one is refused.
    with pytest.raises(UnsupportedModelError, match="bias 'b' has dtype int32; supported: int64"):
        from_tflite(conv16("dw", bias="int32"), name="m")
    # TFLM's BATCH_MATMUL refuses int16 zero points other than 0.
    with pytest.raises(UnsupportedModelError, match="int16 matmul needs zero points 0"):
        from_tflite(bmm16((2, 3), (3, 2), (2, 2), zp=3), name="m")
    with pytest.raises(UnsupportedModelError,
                       match=r"output 'y' has dtype int32; supported: int8, uint8, int16 \(for input dtype float32"):
        from_tflite(quant("float32", "int32"), name="m")
    with pytest.raises(UnsupportedModelError,
                       match=r"output 'y' has dtype int32; supported: int8, int16 \(for input dtype int32"):
        from_tflite(quant("int32", "int32"), name="m")


def test_transpose_conv_refusals() -> None:
    # TFLM reads an int16 TRANSPOSE_CONV's bias as int64: an int32 one would be read out of bounds.
    with pytest.raises(UnsupportedModelError, match="bias 'b' has dtype int32; supported: int64, int16"):
        from_tflite(tconv("int16", bias="int32"), name="m")
    # The output_shape operand must agree with the output tensor TFLM sizes the result by.
    b = TFLiteBuilder()
    os_t = b.tensor("output_shape", (4,), "int32", data=np.array([1, 8, 8, 3], np.int32))
    wt = b.tensor("w", (2, 3, 3, 3), "float32", data=np.zeros((2, 3, 3, 3), np.float32))
    x = b.tensor("x", (1, 4, 4, 3), "float32")
    y = b.tensor("y", (1, 8, 8, 2), "float32")
    b.op("TRANSPOSE_CONV", [os_t, wt, x], [y], "TransposeConvOptions", Padding=0, StrideH=2, StrideW=2)
    with pytest.raises(ModelFormatError, match=r"output_shape operand \[1, 8, 8, 3\] differs"):
        from_tflite(b.build([x], [y]), name="m")
