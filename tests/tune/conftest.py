"""A small int8 model for the tuner's tests: three tasks (a 3x3 conv, two 1x1 convs sharing one workload,
a fully connected layer), small enough that a host firmware of a few candidates builds in a second."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import numpy as np
import pytest

from utvm.support.models import models_dir

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tflite_builder import TFLiteBuilder  # noqa: E402
from utvm.compiler import kernels as K  # noqa: E402
from utvm.tune.strategy import point_key  # noqa: E402

MODELS = models_dir()
SHARED_MODELS = {
    "kws_ref_model": MODELS / "mlperf_tiny" / "kws_ref_model.tflite",
    "pretrainedResnet_quant": MODELS / "mlperf_tiny" / "pretrainedResnet_quant.tflite",
    "ad01_int8": MODELS / "mlperf_tiny" / "ad01_int8.tflite",
    "micro_speech_quantized": MODELS / "tflm" / "micro_speech_quantized.tflite",
}


def _conv(b: TFLiteBuilder, rng: np.random.Generator, x: int, x_scale: float, shape: tuple[int, ...],
          out_shape: tuple[int, ...], name: str, pad: int) -> int:
    c_out = shape[0]
    w_scale = rng.uniform(0.005, 0.02, c_out)
    w = b.tensor(f"{name}_w", shape, "int8", data=rng.integers(-127, 128, shape, dtype=np.int8),
                 scale=list(w_scale), zero_point=[0] * c_out, axis=0)
    bias = b.tensor(f"{name}_b", (c_out,), "int32", data=rng.integers(-500, 500, c_out, dtype=np.int32),
                    scale=list(x_scale * w_scale), zero_point=[0] * c_out, axis=0)
    y = b.tensor(name, out_shape, "int8", scale=0.1, zero_point=-2)
    b.op("CONV_2D", [x, w, bias], [y], "Conv2DOptions", Padding=pad, StrideH=1, StrideW=1,
         DilationHFactor=1, DilationWFactor=1, FusedActivationFunction=1)
    return y


def small_model_bytes(seed: int = 0) -> bytes:
    rng = np.random.default_rng(seed)
    b = TFLiteBuilder()
    x = b.tensor("x", (1, 6, 6, 4), "int8", scale=0.05, zero_point=-3)
    y1 = _conv(b, rng, x, 0.05, (8, 3, 3, 4), (1, 6, 6, 8), "conv3x3", pad=0)
    y2 = _conv(b, rng, y1, 0.1, (8, 1, 1, 8), (1, 6, 6, 8), "conv1x1_a", pad=1)
    y3 = _conv(b, rng, y2, 0.1, (8, 1, 1, 8), (1, 6, 6, 8), "conv1x1_b", pad=1)
    shape = b.tensor("flat_shape", (2,), "int32", data=np.array([1, 288], np.int32))
    flat = b.tensor("flat", (1, 288), "int8", scale=0.1, zero_point=-2)
    b.op("RESHAPE", [y3, shape], [flat])
    w_scale = 0.01
    w = b.tensor("fc_w", (4, 288), "int8", data=rng.integers(-127, 128, (4, 288), dtype=np.int8),
                 scale=w_scale, zero_point=0)
    bias = b.tensor("fc_b", (4,), "int32", data=rng.integers(-500, 500, 4, dtype=np.int32),
                    scale=0.1 * w_scale, zero_point=0)
    y = b.tensor("y", (1, 4), "int8", scale=0.2, zero_point=1)
    b.op("FULLY_CONNECTED", [flat, w, bias], [y], "FullyConnectedOptions", FusedActivationFunction=0,
         KeepNumDims=False)
    return b.build([x], [y])


@pytest.fixture(scope="session")
def small_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("tune-model") / "small.tflite"
    path.write_bytes(small_model_bytes())
    return path


def patch_kernel(monkeypatch: pytest.MonkeyPatch, op: str, point: dict, inject: str) -> None:
    """Make the kernel of `op` emit `inject` before its final `return` for `point` only (`return 0;`, or the
    call of a kernel shared between layers)."""
    K.supported_ops()  # load the registry
    original = K._KERNELS[op]

    def kernel(ctx: K.KernelContext) -> K.KernelCode:
        code = original(ctx)
        if point_key(ctx.schedule) != point_key(point):
            return code
        head, sep, tail = code.body.rpartition("return ")
        assert sep, "a kernel body ends with a return statement"
        return dataclasses.replace(code, body=f"{head}{inject}\nreturn {tail}")

    monkeypatch.setitem(K._KERNELS, op, kernel)
