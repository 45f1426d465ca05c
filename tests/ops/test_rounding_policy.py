"""Which rounding ai-edge-litert's reference kernels actually use, per op (the table in
utvm.ops._quant.kernel_rounding for rounding="single").

Measured, not assumed: for each op a single-op model is run by LiteRT (BUILTIN_REF) and by our kernel
with its params forced to single and to double rounding. LiteRT must equal the rounding the table says
and differ from the other one somewhere (so the case is sensitive). Result for ai-edge-litert 2.3:
FULLY_CONNECTED rounds once (TFLITE_SINGLE_ROUNDING); CONV_2D, DEPTHWISE_CONV_2D, ADD, SUB, MUL, MEAN,
RELU, QUANTIZE (int8 -> int8) and BATCH_MATMUL use gemmlowp's double rounding. int8 TANH/LOGISTIC go
through a float lookup table (not TFLM's fixed-point functions).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_ops_tflite import batch_matmul, binary, conv, depthwise, fully_connected, mean_model, unary  # noqa: E402

from oracle import tflite_reference, tflite_reference_many  # noqa: E402
from tflite_builder import TFLiteBuilder  # noqa: E402
from utvm.frontend import from_tflite  # noqa: E402
from utvm.ir import run_reference  # noqa: E402
from utvm.ops import _quant  # noqa: E402

CASES = {
    "dense": fully_connected("int8", x_shape=(16, 256), units=64),
    "dense-per-channel": fully_connected("int8", x_shape=(16, 256), units=64, per_channel=True),
    "conv2d": conv("int8", hw=(16, 16), c_in=8, c_out=16),
    "depthwise_conv2d": depthwise("int8", hw=(16, 16), c_in=8, m=2),
    "add": binary("int8", "ADD", (4, 16, 16), (4, 16, 16), (0.5, 0.01, 0.3)),
    "sub": binary("int8", "SUB", (4, 16, 16), (4, 16, 16), (0.5, 0.01, 0.3)),
    "mul": binary("int8", "MUL", (4, 16, 16), (4, 16, 16), (0.1, 0.1, 0.45)),
    "mean": mean_model("int8", axes=(3,), shape=(1, 16, 16, 8)),
    "relu": unary("int8", "RELU", (0.02, -5), (0.09, -100), shape=(64, 64)),
    "quantize": unary("int8", "QUANTIZE", (0.02, -5), (0.09, 7), shape=(64, 64)),
    "matmul": batch_matmul("int8", batch=4, m=16, k=8, n=16),
}


@pytest.fixture(scope="module")
def measured() -> dict[str, tuple]:
    rng = np.random.default_rng(99)
    graphs, jobs = {}, []
    for key, build in CASES.items():
        model = build(rng)
        g = from_tflite(model)
        sets = [{n: rng.integers(-128, 128, g.tensors[n].shape, dtype=np.int8) for n in g.inputs} for _ in range(8)]
        graphs[key] = (g, sets)
        jobs.append((model, sets))
    results = tflite_reference_many(jobs)
    return {k: (*graphs[k], r) for k, r in zip(CASES, results, strict=True)}


def _run_forced(graph, inputs: dict[str, np.ndarray], rounding: str, monkeypatch: pytest.MonkeyPatch
                ) -> np.ndarray:  # noqa: ANN001
    """Run the graph with every kernel forced to `rounding` (params prepared under that choice)."""
    with monkeypatch.context() as mp:
        mp.setattr(_quant, "kernel_rounding", lambda mode, op: rounding)
        return run_reference(graph, inputs)[graph.outputs[0]]


@pytest.mark.parametrize("key", list(CASES))
def test_litert_rounding_per_op(measured: dict[str, tuple], key: str, monkeypatch: pytest.MonkeyPatch) -> None:
    graph, sets, expected = measured[key]
    op = graph.nodes[-1].op
    want = _quant.kernel_rounding("single", op)
    other = "double" if want == "single" else "single"
    differs = 0
    for inputs, (lite,) in zip(sets, expected, strict=True):
        np.testing.assert_array_equal(_run_forced(graph, inputs, want, monkeypatch), lite,
                                      err_msg=f"{op}: LiteRT does not match {want} rounding")
        differs += int(np.sum(_run_forced(graph, inputs, other, monkeypatch) != lite))
    assert differs > 0, f"{key}: case does not distinguish the roundings; pick other scales"


def _tflm_tanh_table(s_in: float, zp: int) -> np.ndarray:
    """TFLM's reference_integer_ops::Tanh (gemmlowp fixed point, input in Q4.27), for inputs -128..127."""
    mant, e = math.frexp(s_in * (1 << 27))
    mult = math.floor(mant * 2**31 + 0.5)
    radius = _quant.calculate_input_radius(4, e, 31)
    x = np.arange(-128, 128) - zp
    q4 = _quant.multiply_by_quantized_multiplier(x, mult, e, "double")
    out = np.clip(_quant.rounding_divide_by_pot(_quant.tanh(q4, 4), 24), -128, 127)
    return np.where(x <= -radius, -128, np.where(x >= radius, 127, out))


def test_litert_tanh_uses_the_float_lookup_table() -> None:
    """LiteRT evaluates int8 TANH through a float lookup table, not TFLM's fixed-point tanh: at this input
    scale the two differ in two entries and LiteRT agrees with the table."""
    s_in, zp = 0.015232667326927185, 12
    b = TFLiteBuilder()
    x = b.tensor("x", (256,), "int8", scale=s_in, zero_point=zp)
    y = b.tensor("y", (256,), "int8", scale=1 / 128, zero_point=0)
    b.op("TANH", [x], [y])
    model = b.build([x], [y])
    xs = np.arange(-128, 128).astype(np.int8)
    (lite,) = tflite_reference(model, [xs])
    ours = run_reference(from_tflite(model), {"x": xs})["y"]
    np.testing.assert_array_equal(ours, lite)
    assert int(np.sum(_tflm_tanh_table(s_in, zp) != lite)) == 2
