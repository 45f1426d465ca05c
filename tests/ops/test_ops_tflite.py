"""Every op family against LiteRT's reference kernels, one single-op .tflite model per case.

The models are written by the tests (tests/tflite_builder.py), imported with utvm.frontend.from_tflite and
run with utvm.ir.run_reference (rounding "single"); int8 must equal ai-edge-litert's BUILTIN_REF output
bit for bit, float32 within 1e-5 relative. All cases run in one oracle subprocess.

Coverage: conv2d (strides, SAME/VALID, dilation, groups, per-channel and per-tensor weights, every
supported fused activation), depthwise_conv2d (depth multipliers 1-3, dilation), fully connected
(per-tensor / per-channel, keep_num_dims, flattening, no bias), pools, add/sub/mul with broadcasting,
softmax, logistic, tanh, relu/relu6/relu_n1_to_1, quantize/dequantize, pad/padv2, mean, concat, reshape,
transpose, batch matmul - each in int8 and float32.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from oracle import OracleError, tflite_reference_many  # noqa: E402
from tflite_builder import TFLiteBuilder  # noqa: E402
from utvm.frontend import from_tflite  # noqa: E402
from utvm.ir import run_reference  # noqa: E402

N_INPUTS = 6
ACT = {"none": 0, "relu": 1, "relu_n1_to_1": 2, "relu6": 3}


@dataclass(frozen=True)
class Case:
    id: str
    build: Callable[[np.random.Generator], bytes]


def _q(dt: str, scale: float, zp: int) -> dict:
    return {"scale": scale, "zero_point": zp} if dt == "int8" else {}


def _act_tensor(b: TFLiteBuilder, name: str, shape: tuple, dt: str, scale: float, zp: int) -> int:
    return b.tensor(name, shape, dt, **_q(dt, scale, zp))


def _weights(rng: np.random.Generator, b: TFLiteBuilder, shape: tuple, dt: str, per_channel: bool, axis: int,
             in_scale: float) -> tuple[int, int]:
    n = shape[axis]
    if dt == "float32":
        w = b.tensor("w", shape, dt, data=rng.normal(0, 0.3, shape).astype(np.float32))
        bias = b.tensor("bias", (n,), dt, data=rng.normal(0, 0.5, n).astype(np.float32))
        return w, bias
    scales = rng.uniform(0.002, 0.02, n) if per_channel else np.array([0.01])
    w = b.tensor("w", shape, "int8", data=rng.integers(-127, 128, shape),
                 scale=list(scales) if per_channel else float(scales[0]), zero_point=0, axis=axis)
    bscale = in_scale * scales
    bias = b.tensor("bias", (n,), "int32", data=rng.integers(-3000, 3000, n),
                    scale=list(bscale) if per_channel else float(bscale[0]), zero_point=0)
    return w, bias


def _out_hw(h: int, w: int, k: tuple[int, int], s: tuple[int, int], d: tuple[int, int], pad: int) -> tuple[int, int]:
    if pad == 0:
        return -(-h // s[0]), -(-w // s[1])
    eh, ew = (k[0] - 1) * d[0] + 1, (k[1] - 1) * d[1] + 1
    return (h - eh) // s[0] + 1, (w - ew) // s[1] + 1


def conv(dt: str, hw=(9, 8), c_in=3, c_out=4, k=(3, 3), s=(1, 1), d=(1, 1), pad=0, act="none", per_channel=True,
         groups=1) -> Callable[[np.random.Generator], bytes]:
    def build(rng: np.random.Generator) -> bytes:
        b = TFLiteBuilder()
        x = _act_tensor(b, "x", (1, *hw, c_in), dt, 0.05, -3)
        w, bias = _weights(rng, b, (c_out, *k, c_in // groups), dt, per_channel, 0, 0.05)
        oh, ow = _out_hw(*hw, k, s, d, pad)
        y = _act_tensor(b, "y", (1, oh, ow, c_out), dt, 0.25, 6)
        b.op("CONV_2D", [x, w, bias], [y], "Conv2DOptions", Padding=pad, StrideH=s[0], StrideW=s[1],
             DilationHFactor=d[0], DilationWFactor=d[1], FusedActivationFunction=ACT[act])
        return b.build([x], [y])
    return build


def depthwise(dt: str, hw=(9, 8), c_in=3, m=1, k=(3, 3), s=(1, 1), d=(1, 1), pad=0, act="none",
              per_channel=True) -> Callable[[np.random.Generator], bytes]:
    def build(rng: np.random.Generator) -> bytes:
        b = TFLiteBuilder()
        x = _act_tensor(b, "x", (1, *hw, c_in), dt, 0.05, 10)
        w, bias = _weights(rng, b, (1, *k, c_in * m), dt, per_channel, 3, 0.05)
        oh, ow = _out_hw(*hw, k, s, d, pad)
        y = _act_tensor(b, "y", (1, oh, ow, c_in * m), dt, 0.2, -4)
        b.op("DEPTHWISE_CONV_2D", [x, w, bias], [y], "DepthwiseConv2DOptions", Padding=pad, StrideH=s[0],
             StrideW=s[1], DepthMultiplier=m, DilationHFactor=d[0], DilationWFactor=d[1],
             FusedActivationFunction=ACT[act])
        return b.build([x], [y])
    return build


def fully_connected(dt: str, x_shape=(3, 32), units=16, act="none", per_channel=False, keep=False,
                    bias=True) -> Callable[[np.random.Generator], bytes]:
    def build(rng: np.random.Generator) -> bytes:
        b = TFLiteBuilder()
        k = x_shape[-1]
        x = _act_tensor(b, "x", x_shape, dt, 0.05, -3)
        w, bt = _weights(rng, b, (units, k), dt, per_channel, 0, 0.05)
        out = (*x_shape[:-1], units) if keep else (int(np.prod(x_shape)) // k, units)
        y = _act_tensor(b, "y", out, dt, 0.3, 7)
        b.op("FULLY_CONNECTED", [x, w, bt if bias else -1], [y], "FullyConnectedOptions",
             FusedActivationFunction=ACT[act], KeepNumDims=keep)
        return b.build([x], [y])
    return build


def pool(dt: str, kind: str, hw=(9, 10), c=3, k=(3, 3), s=(2, 2), pad=0, act="none"
         ) -> Callable[[np.random.Generator], bytes]:
    def build(rng: np.random.Generator) -> bytes:
        b = TFLiteBuilder()
        x = _act_tensor(b, "x", (1, *hw, c), dt, 0.07, 5)
        oh, ow = _out_hw(*hw, k, s, (1, 1), pad)
        y = _act_tensor(b, "y", (1, oh, ow, c), dt, 0.07, 5)
        b.op(kind, [x], [y], "Pool2DOptions", Padding=pad, StrideH=s[0], StrideW=s[1], FilterHeight=k[0],
             FilterWidth=k[1], FusedActivationFunction=ACT[act])
        return b.build([x], [y])
    return build


def binary(dt: str, code: str, a_shape=(2, 5, 7), b_shape=(2, 5, 7), scales=(0.05, 0.03, 0.07), act="none"
           ) -> Callable[[np.random.Generator], bytes]:
    def build(rng: np.random.Generator) -> bytes:
        b = TFLiteBuilder()
        x = _act_tensor(b, "x", a_shape, dt, scales[0], -3)
        z = _act_tensor(b, "z", b_shape, dt, scales[1], 11)
        y = _act_tensor(b, "y", np.broadcast_shapes(a_shape, b_shape), dt, scales[2], -9)
        b.op(code, [x, z], [y], f"{code.capitalize()}Options", FusedActivationFunction=ACT[act])
        return b.build([x, z], [y])
    return build


def unary(dt: str, code: str, in_q=(0.05, -5), out_q=(0.05, -5), shape=(4, 33), options: str | None = None,
          out_dt: str | None = None, **fields) -> Callable[[np.random.Generator], bytes]:
    def build(rng: np.random.Generator) -> bytes:
        b = TFLiteBuilder()
        odt = out_dt or dt
        x = b.tensor("x", shape, dt, **(_q(dt, *in_q)))
        y = b.tensor("y", shape, odt, **(_q(odt, *out_q)))
        b.op(code, [x], [y], options, **fields)
        return b.build([x], [y])
    return build


def pad_model(dt: str, v2: bool = False) -> Callable[[np.random.Generator], bytes]:
    def build(rng: np.random.Generator) -> bytes:
        b = TFLiteBuilder()
        x = _act_tensor(b, "x", (1, 4, 5, 2), dt, 0.1, 3)
        p = b.tensor("p", (4, 2), "int32", data=np.array([[0, 0], [1, 2], [0, 3], [1, 0]]))
        y = _act_tensor(b, "y", (1, 7, 8, 3), dt, 0.1, 3)
        if v2:
            cv = b.tensor("c", (1,), dt, data=np.array([-7] if dt == "int8" else [1.5]), **_q(dt, 0.1, 3))
            b.op("PADV2", [x, p, cv], [y])
        else:
            b.op("PAD", [x, p], [y])
        return b.build([x], [y])
    return build


def mean_model(dt: str, axes=(1, 2), keep=True, shape=(1, 5, 6, 8), q_in=(0.05, 3), q_out=(0.02, -5)
               ) -> Callable[[np.random.Generator], bytes]:
    def build(rng: np.random.Generator) -> bytes:
        b = TFLiteBuilder()
        x = b.tensor("x", shape, dt, **_q(dt, *q_in))
        a = b.tensor("a", (len(axes),), "int32", data=np.array(axes))
        osh = tuple(1 if i in axes else d for i, d in enumerate(shape)) if keep else tuple(
            d for i, d in enumerate(shape) if i not in axes)
        y = b.tensor("y", osh, dt, **_q(dt, *q_out))
        b.op("MEAN", [x, a], [y], "ReducerOptions", KeepDims=keep)
        return b.build([x], [y])
    return build


def concat_model(dt: str, axis: int = -1) -> Callable[[np.random.Generator], bytes]:
    def build(rng: np.random.Generator) -> bytes:
        b = TFLiteBuilder()
        x = _act_tensor(b, "x", (2, 3, 4), dt, 0.1, 2)
        z = _act_tensor(b, "z", (2, 3, 5) if axis in (-1, 2) else (2, 1, 4), dt, 0.1, 2)
        y = _act_tensor(b, "y", (2, 3, 9) if axis in (-1, 2) else (2, 4, 4), dt, 0.1, 2)
        b.op("CONCATENATION", [x, z], [y], "ConcatenationOptions", Axis=axis)
        return b.build([x, z], [y])
    return build


def reshape_transpose(dt: str) -> Callable[[np.random.Generator], bytes]:
    def build(rng: np.random.Generator) -> bytes:
        b = TFLiteBuilder()
        x = _act_tensor(b, "x", (2, 12), dt, 0.1, 2)
        shp = b.tensor("shape", (3,), "int32", data=np.array([2, 3, 4]))
        r = _act_tensor(b, "r", (2, 3, 4), dt, 0.1, 2)
        perm = b.tensor("perm", (3,), "int32", data=np.array([2, 0, 1]))
        y = _act_tensor(b, "y", (4, 2, 3), dt, 0.1, 2)
        b.op("RESHAPE", [x, shp], [r])
        b.op("TRANSPOSE", [r, perm], [y])
        return b.build([x], [y])
    return build


def batch_matmul(dt: str, batch: int = 2, m: int = 4, k: int = 8, n: int = 5) -> Callable[[np.random.Generator], bytes]:
    def build(rng: np.random.Generator) -> bytes:
        b = TFLiteBuilder()
        x = _act_tensor(b, "x", (batch, m, k), dt, 0.05, 2)
        z = b.tensor("z", (batch, k, n), dt, **_q(dt, 0.03, 0))
        y = _act_tensor(b, "y", (batch, m, n), dt, 0.2, -1)
        b.op("BATCH_MATMUL", [x, z], [y], "BatchMatMulOptions", AdjX=False, AdjY=False)
        return b.build([x, z], [y])
    return build


def _cases() -> list[Case]:
    cs: list[Case] = []
    for dt in ("int8", "float32"):
        def add(name: str, fn: Callable[[np.random.Generator], bytes], dt: str = dt) -> None:
            cs.append(Case(f"{dt}-{name}", fn))

        add("conv-same", conv(dt))
        add("conv-valid", conv(dt, pad=1))
        add("conv-stride2-same", conv(dt, s=(2, 2), hw=(10, 9)))
        add("conv-stride21-valid", conv(dt, s=(2, 1), pad=1, k=(3, 2)))
        add("conv-dilation2", conv(dt, d=(2, 2), hw=(11, 10)))
        add("conv-dilation-valid", conv(dt, d=(2, 1), pad=1, hw=(11, 10)))
        add("conv-1x1", conv(dt, k=(1, 1), c_in=8, c_out=5))
        add("conv-groups", conv(dt, c_in=6, c_out=4, groups=2))
        add("conv-per-tensor", conv(dt, per_channel=False, s=(2, 2), act="relu"))
        for act in ("relu", "relu6", "relu_n1_to_1"):
            add(f"conv-{act}", conv(dt, act=act))
        add("dw-m1", depthwise(dt))
        add("dw-m2-stride2", depthwise(dt, m=2, s=(2, 2)))
        add("dw-m3-valid-relu6", depthwise(dt, m=3, pad=1, act="relu6"))
        add("dw-dilation", depthwise(dt, d=(2, 2), hw=(12, 11), act="relu"))
        add("dw-per-tensor", depthwise(dt, m=2, per_channel=False, act="relu_n1_to_1"))
        add("fc", fully_connected(dt))
        add("fc-relu-nobias", fully_connected(dt, act="relu", bias=False))
        add("fc-per-channel-relu6", fully_connected(dt, per_channel=True, act="relu6"))
        add("fc-flatten", fully_connected(dt, x_shape=(2, 3, 4)))
        add("fc-keepdims", fully_connected(dt, x_shape=(2, 3, 8), keep=True, act="relu_n1_to_1"))
        add("avgpool-same", pool(dt, "AVERAGE_POOL_2D"))
        add("avgpool-valid-relu", pool(dt, "AVERAGE_POOL_2D", pad=1, act="relu"))
        add("avgpool-global", pool(dt, "AVERAGE_POOL_2D", hw=(5, 5), k=(5, 5), s=(1, 1), pad=1))
        add("maxpool-same", pool(dt, "MAX_POOL_2D", k=(2, 3)))
        add("maxpool-valid-relu6", pool(dt, "MAX_POOL_2D", pad=1, s=(1, 2), act="relu6"))
        for code in ("ADD", "SUB", "MUL"):
            add(code.lower(), binary(dt, code))
            add(f"{code.lower()}-broadcast", binary(dt, code, (2, 1, 7), (1, 5, 1), (0.5, 0.01, 0.3)))
            add(f"{code.lower()}-relu", binary(dt, code, (1, 5, 7), (7,), (0.02, 0.09, 0.06), act="relu"))
        add("softmax", unary(dt, "SOFTMAX", (0.1, -5), (1 / 256, -128), options="SoftmaxOptions", Beta=1.0))
        add("softmax-beta", unary(dt, "SOFTMAX", (0.7, 3), (1 / 256, -128), options="SoftmaxOptions", Beta=0.4))
        add("logistic", unary(dt, "LOGISTIC", (0.08, 2), (1 / 256, -128)))
        add("tanh", unary(dt, "TANH", (0.04, -7), (1 / 128, 0)))
        add("relu", unary(dt, "RELU", (0.05, -5), (0.03, -100)))
        add("relu6", unary(dt, "RELU6", (0.05, -5), (0.03, -100)))
        add("relu_n1_to_1", unary(dt, "RELU_N1_TO_1", (0.02, 4), (0.01, 0)))
        add("pad", pad_model(dt))
        add("padv2", pad_model(dt, v2=True))
        add("mean-hw", mean_model(dt))
        add("mean-hw-nokeep", mean_model(dt, keep=False))
        add("mean-c", mean_model(dt, axes=(3,)))
        add("mean-all", mean_model(dt, axes=(1, 2, 3), keep=False))
        add("concat-last", concat_model(dt))
        add("concat-mid", concat_model(dt, axis=1))
        add("reshape-transpose", reshape_transpose(dt))
        add("batch-matmul", batch_matmul(dt))
    cs.append(Case("int8-requantize", unary("int8", "QUANTIZE", (0.02, 9), (0.09, -4))))
    cs.append(Case("int8-requantize-up", unary("int8", "QUANTIZE", (0.09, -4), (0.02, 9))))
    cs.append(Case("quantize-float", unary("float32", "QUANTIZE", out_q=(0.02, 9), out_dt="int8")))
    cs.append(Case("dequantize", unary("int8", "DEQUANTIZE", in_q=(0.02, 9), out_dt="float32")))
    return cs


CASES = _cases()


def _inputs(rng: np.random.Generator, graph) -> dict[str, np.ndarray]:  # noqa: ANN001
    out = {}
    for name in graph.inputs:
        t = graph.tensors[name]
        if t.dtype == "int8":
            out[name] = rng.integers(-128, 128, t.shape, dtype=np.int8)
        else:
            out[name] = (rng.standard_normal(t.shape) * 3).astype(np.float32)
    return out


@pytest.fixture(scope="module")
def runs() -> dict[str, tuple]:
    rng = np.random.default_rng(20240605)
    models, graphs, sets = [], [], []
    for case in CASES:
        m = case.build(rng)
        g = from_tflite(m)
        models.append(m)
        graphs.append(g)
        sets.append([_inputs(rng, g) for _ in range(N_INPUTS)])
    results = tflite_reference_many(list(zip(models, sets, strict=True)))
    return {c.id: (g, s, r) for c, g, s, r in zip(CASES, graphs, sets, results, strict=True)}


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_single_op_matches_litert(runs: dict[str, tuple], case: Case) -> None:
    graph, sets, expected = runs[case.id]
    assert not isinstance(expected, OracleError), f"the oracle failed: {expected}"
    for inputs, want in zip(sets, expected, strict=True):
        got = list(run_reference(graph, inputs).values())
        assert len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            assert g.dtype == w.dtype and g.shape == w.shape
            if g.dtype == np.float32:
                np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5 * max(1.0, float(np.max(np.abs(w)))))
            else:
                diff = np.flatnonzero(g != w)
                assert diff.size == 0, (f"{diff.size} of {g.size} outputs differ; first at {diff[:5]}: "
                                        f"ours {g.ravel()[diff[:5]]}, LiteRT {w.ravel()[diff[:5]]}")
