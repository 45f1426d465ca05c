"""Unary math and activations against TFLite Micro's kernels (tests/tflm_harness.py): every op x dtype TFLM
supports, quantization variants (whole int8 ranges, int16 sweeps), ranks 1..5; refused configurations name the
node. (TFLM refuses empty tensors for these ops: it fails to allocate them, so no case has one.)"""

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
from utvm.ir.interp import prepare_graph  # noqa: E402

Q8 = (0.05, 3)


def _q(q: tuple[float, int] | None) -> dict:
    return {} if q is None else {"scale": q[0], "zero_point": q[1]}


def unary_model(code: str, dtype: str, shape: tuple[int, ...] = (2, 3, 4), qin: tuple[float, int] | None = None,
                qout: tuple[float, int] | None = None, out_dtype: str | None = None, options: str | None = None,
                **fields: object) -> bytes:
    b = TFLiteBuilder()
    x = b.tensor("x", shape, dtype, **_q(qin))
    y = b.tensor("y", shape, out_dtype or dtype, **_q(qout))
    b.op(code, [x], [y], options, **fields)
    return b.build([x], [y])


def prelu_model(dtype: str, shape: tuple[int, ...], alpha_shape: tuple[int, ...], alpha: np.ndarray | None,
                qin: tuple[float, int] | None = None, qa: tuple[float, int] | None = None,
                qout: tuple[float, int] | None = None) -> bytes:
    b = TFLiteBuilder()
    x = b.tensor("x", shape, dtype, **_q(qin))
    a_dtype = "float32" if dtype == "float32" else "int8"
    a = b.tensor("alpha", alpha_shape, a_dtype, data=alpha, **_q(qa))
    try:
        out_shape = tuple(int(d) for d in np.broadcast_shapes(shape, alpha_shape))
    except ValueError:  # a model TFLM would refuse: keep the input's shape
        out_shape = shape
    y = b.tensor("y", out_shape, dtype, **_q(qout))
    b.op("PRELU", [x, a], [y])
    return b.build([x] if alpha is not None else [x, a], [y])


def leaky(dtype: str, alpha: float, shape: tuple[int, ...] = (2, 3, 4), qin=None, qout=None) -> bytes:  # noqa: ANN001
    return unary_model("LEAKY_RELU", dtype, shape, qin, qout, None, "LeakyReluOptions", Alpha=alpha)


FLOAT_ONLY = ["NEG", "CEIL", "FLOOR", "ROUND", "SQUARE", "EXP", "SIN", "COS"]
FLOAT_POSITIVE = ["SQRT", "LOG"]


def float_cases() -> list[Case]:
    cases = []
    shapes = [(7,), (2, 5), (2, 3, 4), (1, 2, 3, 4), (1, 2, 1, 3, 2)]
    for k, code in enumerate(FLOAT_ONLY + ["ABS", "ELU", "HARD_SWISH", "RSQRT"] + FLOAT_POSITIVE):
        shape = shapes[k % len(shapes)]
        ranges = {0: (0.05, 6.0)} if code in FLOAT_POSITIVE + ["RSQRT"] else {0: (-6.0, 6.0)}
        cases.append(Case(f"{code.lower()}-float32", unary_model(code, "float32", shape), ranges=ranges))
    # ROUND at exact halves (half to even), HARD_SWISH around its kinks
    halves = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, -3.5, 0.49999997, 7.0], np.float32)
    cases.append(Case("round-float32-halves", unary_model("ROUND", "float32", (10,)), inputs=lambda rng: [halves]))
    kinks = np.array([-4.0, -3.0, -2.9, 0.0, 2.9, 3.0, 3.1, 10.0], np.float32)
    cases.append(Case("hard_swish-float32-kinks", unary_model("HARD_SWISH", "float32", (8,)),
                      inputs=lambda rng: [kinks]))
    for alpha in (0.2, -0.5, 1.5):
        cases.append(Case(f"leaky_relu-float32-{alpha}", leaky("float32", alpha, (3, 5))))
    cases.append(Case("logical_not-bool", unary_model("LOGICAL_NOT", "bool", (3, 4))))
    for dt in ("float32", "int8", "int32", "int64"):
        cases.append(Case(f"zeros_like-{dt}", unary_model("ZEROS_LIKE", dt, (2, 3))))
    for shape in [(5,), (3, 6), (2, 2, 7)]:
        cases.append(Case(f"log_softmax-float32-{len(shape)}d", unary_model("LOG_SOFTMAX", "float32", shape),
                          ranges={0: (-8.0, 8.0)}))
    # PRELU float: alpha per channel (constant), full, scalar-ish, and as a run-time input
    rng = np.random.default_rng(5)
    cases.append(Case("prelu-float32-channel", prelu_model("float32", (1, 3, 3, 4), (4,),
                                                            rng.uniform(-1, 1, 4).astype(np.float32))))
    cases.append(Case("prelu-float32-hw", prelu_model("float32", (2, 3, 4), (3, 1),
                                                       rng.uniform(-1, 1, (3, 1)).astype(np.float32))))
    cases.append(Case("prelu-float32-runtime", prelu_model("float32", (2, 5), (2, 5), None)))
    return cases


CAST_TYPES = ["float32", "int8", "int16", "int32", "uint32", "bool"]


def cast_cases() -> list[Case]:
    cases = []
    for a in CAST_TYPES:
        for b in CAST_TYPES:
            ranges = {0: (-120.0, 120.0)} if a == "float32" else ({0: (-300, 300)} if a in ("int16", "int32") else {})
            if a == "float32" and b == "uint32":  # a negative float into an unsigned type is undefined in C
                ranges = {0: (0.0, 120.0)}
            cases.append(Case(f"cast-{a}-{b}", unary_model("CAST", a, (2, 7), out_dtype=b), ranges=ranges))
    return cases


def int8_cases() -> list[Case]:
    cases = []
    # ABS: equal scales (no rescale), different scales, shifted zero points
    cases.append(Case("abs-int8-same", unary_model("ABS", "int8", (16, 16), Q8, Q8)))
    cases.append(Case("abs-int8-rescale", unary_model("ABS", "int8", (16, 16), (0.05, -10), (0.03, -128))))
    cases.append(Case("abs-int8-rescale-up", unary_model("ABS", "int8", (4, 64), (0.02, 0), (0.1, -100))))
    # RSQRT int8 (inputs >= zero point: TFLM errors below it)
    cases.append(Case("rsqrt-int8", unary_model("RSQRT", "int8", (16, 16), (0.05, -128), (0.02, -120)),
                      inputs=lambda rng: [np.arange(-128, 128, dtype=np.int8).reshape(16, 16)]))
    cases.append(Case("rsqrt-int8-zp", unary_model("RSQRT", "int8", (2, 60), (0.3, 5), (0.01, -128)),
                      ranges={0: (5, 127)}))
    for qi, qo in [((0.05, 3), (0.03, -20)), ((0.1, -128), (0.05, 0)), ((0.02, 10), (0.02, 10))]:
        tag = f"{qi[0]}-{qo[0]}-{qi[1]}"
        cases.append(Case(f"elu-int8-{tag}", unary_model("ELU", "int8", (16, 16), qi, qo),
                          inputs=lambda rng: [np.arange(-128, 128, dtype=np.int8).reshape(16, 16)]))
        cases.append(Case(f"hard_swish-int8-{tag}", unary_model("HARD_SWISH", "int8", (16, 16), qi, qo),
                          inputs=lambda rng: [np.arange(-128, 128, dtype=np.int8).reshape(16, 16)]))
    cases.append(Case("hard_swish-int8-wide", unary_model("HARD_SWISH", "int8", (16, 16), (0.2, 0), (0.5, -10)),
                      inputs=lambda rng: [np.arange(-128, 128, dtype=np.int8).reshape(16, 16)]))
    cases.append(Case("hard_swish-int8-fine", unary_model("HARD_SWISH", "int8", (16, 16), (0.003, -5), (0.003, 4)),
                      inputs=lambda rng: [np.arange(-128, 128, dtype=np.int8).reshape(16, 16)]))
    # output exponent -16: gemmlowp's int16 RoundingDivideByPOT truncates its mask to -1 (results +-1)
    cases.append(Case("hard_swish-int8-tiny-ratio", unary_model("HARD_SWISH", "int8", (16, 16), (0.0014394495, 79),
                                                                (0.85096067, 29)),
                      inputs=lambda rng: [np.arange(-128, 128, dtype=np.int8).reshape(16, 16)]))
    for alpha in (0.1, -0.3, 2.0, 0.0):
        cases.append(Case(f"leaky_relu-int8-{alpha}", leaky("int8", alpha, (16, 16), (0.05, -3), (0.04, 7)),
                          inputs=lambda rng: [np.arange(-128, 128, dtype=np.int8).reshape(16, 16)]))
    # LOG_SOFTMAX int8: output scale 16/256, zero point 127; rows with a wide spread reach diff_min
    for k, (shape, qi) in enumerate([((4, 10), (0.05, 3)), ((2, 3, 33), (0.2, -10)), ((64,), (0.01, 0)),
                                     ((3, 1), (0.1, 0)), ((2, 2, 2, 5), (1.0, 5))]):
        cases.append(Case(f"log_softmax-int8-{k}", unary_model("LOG_SOFTMAX", "int8", shape, qi, (16 / 256, 127))))
    rng = np.random.default_rng(6)
    cases.append(Case("prelu-int8-channel", prelu_model("int8", (1, 4, 4, 3), (3,), rng.integers(-128, 128, 3),
                                                        (0.05, -4), (0.01, 2), (0.03, 5))))
    cases.append(Case("prelu-int8-full", prelu_model("int8", (3, 8), (3, 8), rng.integers(-128, 128, (3, 8)),
                                                     (0.1, 0), (0.004, -7), (0.06, -1))))
    cases.append(Case("prelu-int8-runtime", prelu_model("int8", (2, 6), (2, 6), None, (0.1, 0), (0.01, 0),
                                                        (0.05, 2))))
    return cases


def int16_cases() -> list[Case]:
    cases = []
    cases.append(Case("abs-int16-noquant", unary_model("ABS", "int16", (4, 50)),
                      inputs=lambda rng: [np.concatenate([[-32768, 32767, 0, -1], rng.integers(-32768, 32768, 196)])
                                          .astype(np.int16).reshape(4, 50)]))
    cases.append(Case("abs-int16-same", unary_model("ABS", "int16", (4, 50), (0.001, 0), (0.001, 0))))
    cases.append(Case("abs-int16-rescale", unary_model("ABS", "int16", (4, 50), (0.001, 0), (0.0007, 0))))
    cases.append(Case("rsqrt-int16", unary_model("RSQRT", "int16", (4, 50), (0.001, 0), (0.01, 0)),
                      ranges={0: (0, 32767)}))
    cases.append(Case("rsqrt-int16-b", unary_model("RSQRT", "int16", (4, 50), (0.0001, 0), (0.004, 0)),
                      ranges={0: (0, 32767)}))
    for alpha in (0.1, -0.7):
        cases.append(Case(f"leaky_relu-int16-{alpha}", leaky("int16", alpha, (4, 50), (0.001, 0), (0.0008, 0))))
    cases.append(Case("leaky_relu-int16-zp", leaky("int16", 0.3, (4, 50), (0.001, 300), (0.0011, -200))))
    cases.append(Case("prelu-int16-zp", prelu_model("int16", (3, 10), (10,), np.arange(-50, 50, 10),
                                                    (0.001, -100), (0.02, 3), (0.0009, 50))))
    rng = np.random.default_rng(7)
    cases.append(Case("prelu-int16-channel", prelu_model("int16", (1, 5, 5, 4), (4,), rng.integers(-128, 128, 4),
                                                         (0.001, 0), (0.01, 0), (0.0012, 0))))
    return cases


def all_cases() -> list[Case]:
    return float_cases() + cast_cases() + int8_cases() + int16_cases()


def test_unary_ops_match_tflm() -> None:
    check_cases(all_cases() + activation_cases(), platform="host")


@pytest.mark.slow
def test_unary_ops_on_cortex_m4() -> None:
    pick = {"exp-float32", "round-float32-halves", "leaky_relu-float32--0.5", "log_softmax-float32-2d",
            "prelu-float32-channel", "cast-float32-int8", "cast-int32-bool", "abs-int8-rescale", "rsqrt-int8",
            "elu-int8-0.05-0.03-3", "hard_swish-int8-0.05-0.03-3", "leaky_relu-int8--0.3", "prelu-int8-channel",
            "abs-int16-noquant", "rsqrt-int16", "leaky_relu-int16--0.7", "prelu-int16-channel", "logical_not-bool"}
    pick |= {"logistic-int16-0.001", "tanh-int16-0.0003", "relu6-int16-zp", "softmax-int8-int16-0.5",
             "softmax-int16-wide", "log_softmax-int8-4", "tanh-int8-0.05-3"}
    sample = [c for c in all_cases() + activation_cases() if c.id in pick]
    assert len(sample) == len(pick)
    check_cases(sample, platform="qemu-cortex-m4", builds=())


def _refused(model: bytes, *words: str) -> None:
    with pytest.raises((GraphError, UnsupportedModelError)) as info:
        prepare_graph(from_tflite(model), "double")
    msg = str(info.value)
    for w in words:
        assert w in msg, msg


def test_refused_configurations() -> None:
    _refused(unary_model("NEG", "int8", (4,), Q8, Q8), "neg", "int8")
    _refused(unary_model("EXP", "int16", (4,), (0.001, 0), (0.001, 0)), "exp", "int16")
    _refused(unary_model("ELU", "int16", (4,), (0.001, 0), (0.001, 0)), "elu", "int16")
    _refused(unary_model("LOGICAL_NOT", "int8", (4,), Q8, Q8), "logical_not")
    _refused(unary_model("ABS", "int16", (4,), (0.001, 3), (0.001, 0)), "zero points 0")
    _refused(unary_model("CAST", "float32", (4,), out_dtype="int64"), "cast to int64")
    _refused(unary_model("HARD_SWISH", "int8", (4,), (1.0, 0), (0.001, 0)), "hard_swish", "exponent")
    _refused(prelu_model("float32", (2, 3), (4,), np.ones(4, np.float32)), "does not broadcast")
    _refused(unary_model("LOG_SOFTMAX", "int8", (4,), Q8, (0.1, 127)), "16/256")
    _refused(unary_model("RELU", "int16", (4,), (0.001, 5), (0.001, 0)), "zero points 0")
    _refused(unary_model("LOGISTIC", "int16", (4,), (0.001, 0), (0.001, 0)), "2^-15")
    _refused(unary_model("TANH", "int16", (4,), (4.0, 0), (2.0 ** -15, 0)), "too large")
    _refused(unary_model("SOFTMAX", "int16", (4,), (0.001, 0), (1 / 65536, 0), None, "SoftmaxOptions", Beta=1.0),
             "softmax", "scale")
    _refused(unary_model("SOFTMAX", "int8", (4,), Q8, (1 / 65536, 0), "int16", "SoftmaxOptions", Beta=1.0),
             "zero point -32768")
    _refused(unary_model("ELU", "int8", (4,), Q8, Q8, "int16"), "elu")


def activation_cases() -> list[Case]:
    """The existing activations (utvm.ops.activation, utvm.ops.softmax) in every dtype TFLM has."""
    full8 = lambda rng: [np.arange(-128, 128, dtype=np.int8).reshape(16, 16)]  # noqa: E731
    cases = []
    for code in ("RELU", "RELU6", "LOGISTIC", "TANH"):
        cases.append(Case(f"{code.lower()}-float32", unary_model(code, "float32", (3, 7)), ranges={0: (-8.0, 8.0)}))
    for qi in [(0.05, 3), (0.1, -128), (0.02, 100)]:
        tag = f"{qi[0]}-{qi[1]}"
        cases.append(Case(f"logistic-int8-{tag}", unary_model("LOGISTIC", "int8", (16, 16), qi, (1 / 256, -128)),
                          inputs=full8))
        cases.append(Case(f"tanh-int8-{tag}", unary_model("TANH", "int8", (16, 16), qi, (1 / 128, 0)), inputs=full8))
        cases.append(Case(f"relu-int8-{tag}", unary_model("RELU", "int8", (16, 16), qi, (0.04, -120)), inputs=full8))
        cases.append(Case(f"relu6-int8-{tag}", unary_model("RELU6", "int8", (16, 16), qi, (0.03, -128)),
                          inputs=full8))
    cases.append(Case("relu-int16", unary_model("RELU", "int16", (4, 50), (0.001, 0), (0.0007, 0))))
    cases.append(Case("relu-int16-same", unary_model("RELU", "int16", (4, 50), (0.001, 0), (0.001, 0))))
    cases.append(Case("relu6-int16", unary_model("RELU6", "int16", (4, 50), (0.0005, 0), (0.0005, 0))))
    cases.append(Case("relu6-int16-zp", unary_model("RELU6", "int16", (4, 50), (0.0003, 100), (0.001, 0))))
    # a quantization at which a float LUT was once suspected to differ from TFLM's fixed-point tanh
    cases.append(Case("tanh-int8-0.0152-12", unary_model("TANH", "int8", (16, 16), (0.0152, 12), (1 / 128, 0)),
                      inputs=full8))
    cases.append(Case("logistic-int8-0.0152-12",
                      unary_model("LOGISTIC", "int8", (16, 16), (0.0152, 12), (1 / 256, -128)), inputs=full8))
    full16 = lambda rng: [np.arange(-32768, 32768, 64, dtype=np.int16).reshape(8, 128)]  # noqa: E731
    for code in ("LOGISTIC", "TANH"):
        for s_in in (2.0 ** -12, 2.0 ** -11, 0.001, 0.0003, 1 / 48):
            cases.append(Case(f"{code.lower()}-int16-{s_in:.6g}",
                              unary_model(code, "int16", (8, 128), (s_in, 0), (2.0 ** -15, 0)), inputs=full16))
        cases.append(Case(f"{code.lower()}-int16-random", unary_model(code, "int16", (4, 64), (0.0005, 0),
                                                                        (2.0 ** -15, 0))))
    for beta, shape, qi in [(1.0, (4, 10), (0.05, 3)), (0.5, (2, 3, 17), (0.2, -10)), (2.0, (50,), (0.01, 0))]:
        cases.append(Case(f"softmax-int8-{beta}", unary_model("SOFTMAX", "int8", shape, qi, (1 / 256, -128), None,
                                                              "SoftmaxOptions", Beta=beta)))
        cases.append(Case(f"softmax-int8-int16-{beta}", unary_model("SOFTMAX", "int8", shape, qi, (1 / 65536, -32768),
                                                                    "int16", "SoftmaxOptions", Beta=beta)))
    for beta, shape, s_in in [(1.0, (4, 10), 0.001), (0.5, (2, 3, 17), 0.0002), (2.0, (50,), 0.0005),
                              (1.0, (3, 8), 2.0 ** -12)]:
        cases.append(Case(f"softmax-int16-{beta}-{s_in:.6g}",
                          unary_model("SOFTMAX", "int16", shape, (s_in, 0), (1 / 32768, 0), None, "SoftmaxOptions",
                                      Beta=beta), ranges={0: (-4000, 4000)}))
    cases.append(Case("softmax-int16-wide", unary_model("SOFTMAX", "int16", (4, 20), (0.0003, 0), (1 / 32768, 0),
                                                         None, "SoftmaxOptions", Beta=1.0)))
    return cases

