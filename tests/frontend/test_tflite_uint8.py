"""uint8 model inputs/outputs (converters' `inference_input_type/inference_output_type = tf.uint8`): uint8 is
accepted on QUANTIZE / DEQUANTIZE operands (hence on model I/O), and the reference semantics
(utvm.ir.run_reference) equal LiteRT's reference kernels (BUILTIN_REF) bit for bit on every one of the 256
input values, for uint8 -> int8, int8 -> uint8 and uint8 -> uint8 over several scale / zero-point pairs
(equal scales 128 apart, LiteRT's xor shortcut, and different scales), float32 <-> uint8, and small
uint8 -> QUANTIZE -> int8 op -> QUANTIZE -> uint8 models. uint8 inside any other op is still refused.

The model builders here are shared with tests/compiler/test_uint8_io.py.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from oracle import OracleError, tflite_reference_many  # noqa: E402
from tflite_builder import TFLiteBuilder  # noqa: E402
from utvm.errors import GraphError, UnsupportedModelError  # noqa: E402
from utvm.frontend import from_tflite  # noqa: E402
from utvm.ir import run_reference  # noqa: E402

Q = tuple[float, int]


@dataclass(frozen=True)
class QuantCase:
    id: str
    in_dtype: str
    in_q: Q
    out_dtype: str
    out_q: Q


# (scale, zero point) pairs: equal scales with zero points 128 apart (LiteRT takes its x ^ 0x80 shortcut),
# equal scales otherwise, larger / smaller output scales, zero points at the ends of the range.
QUANT_CASES = [
    QuantCase("u8-i8-xor", "uint8", (0.05, 128), "int8", (0.05, 0)),
    QuantCase("u8-i8-same-scale", "uint8", (0.02, 100), "int8", (0.02, -5)),
    QuantCase("u8-i8-down", "uint8", (0.1, 0), "int8", (0.3, -100)),
    QuantCase("u8-i8-up", "uint8", (0.0123, 255), "int8", (0.004, 17)),
    QuantCase("i8-u8-xor", "int8", (0.0078125, -1), "uint8", (0.0078125, 127)),
    QuantCase("i8-u8-down", "int8", (0.07, -3), "uint8", (0.1, 130)),
    QuantCase("i8-u8-up", "int8", (0.5, 100), "uint8", (0.02, 255)),
    QuantCase("i8-u8-clamp-low", "int8", (0.05, 0), "uint8", (0.05, 0)),
    QuantCase("u8-u8-down", "uint8", (0.05, 128), "uint8", (0.1, 100)),
    QuantCase("u8-u8-up", "uint8", (0.3, 7), "uint8", (0.011, 250)),
]


def all_values(dtype: str) -> np.ndarray:
    """Every value of an 8-bit type, shape (1, 256)."""
    info = np.iinfo(np.dtype(dtype))
    return np.arange(info.min, info.max + 1).astype(dtype).reshape(1, 256)


def quantize_model(case: QuantCase) -> bytes:
    b = TFLiteBuilder()
    x = b.tensor("x", (1, 256), case.in_dtype, scale=case.in_q[0], zero_point=case.in_q[1])
    y = b.tensor("y", (1, 256), case.out_dtype, scale=case.out_q[0], zero_point=case.out_q[1])
    b.op("QUANTIZE", [x], [y])
    return b.build([x], [y])


def float_uint8_model() -> bytes:
    """Two independent paths: float32 -> QUANTIZE -> uint8, and uint8 -> DEQUANTIZE -> float32."""
    b = TFLiteBuilder()
    f = b.tensor("f", (1, 64), "float32")
    fq = b.tensor("fq", (1, 64), "uint8", scale=0.037, zero_point=131)
    u = b.tensor("u", (1, 256), "uint8", scale=0.0117, zero_point=77)
    ud = b.tensor("ud", (1, 256), "float32")
    b.op("QUANTIZE", [f], [fq])
    b.op("DEQUANTIZE", [u], [ud])
    return b.build([f, u], [fq, ud])


def fc_model(rng: np.random.Generator) -> bytes:
    """uint8 -> QUANTIZE -> int8 FULLY_CONNECTED (relu) -> QUANTIZE -> uint8 (a converter's uint8-I/O model)."""
    b = TFLiteBuilder()
    xu = b.tensor("input_u8", (1, 16), "uint8", scale=0.05, zero_point=128)
    xi = b.tensor("input_i8", (1, 16), "int8", scale=0.05, zero_point=0)
    w = b.tensor("w", (6, 16), "int8", data=rng.integers(-127, 128, (6, 16)), scale=[0.01, 0.02, 0.015, 0.01, 0.03,
                                                                                        0.005], zero_point=0, axis=0)
    bias = b.tensor("b", (6,), "int32", data=rng.integers(-300, 300, (6,)),
                    scale=[0.05 * s for s in (0.01, 0.02, 0.015, 0.01, 0.03, 0.005)], zero_point=0)
    yi = b.tensor("fc_i8", (1, 6), "int8", scale=0.12, zero_point=-20)
    yu = b.tensor("output_u8", (1, 6), "uint8", scale=0.12, zero_point=108)
    b.op("QUANTIZE", [xu], [xi])
    b.op("FULLY_CONNECTED", [xi, w, bias], [yi], "FullyConnectedOptions", FusedActivationFunction=1)
    b.op("QUANTIZE", [yi], [yu])
    return b.build([xu], [yu])


def add_model() -> bytes:
    """Two uint8 inputs (different quantization) -> QUANTIZE -> int8 ADD -> QUANTIZE (new scale) -> uint8."""
    b = TFLiteBuilder()
    au = b.tensor("a_u8", (1, 4, 4, 3), "uint8", scale=0.04, zero_point=128)
    bu = b.tensor("b_u8", (1, 4, 4, 3), "uint8", scale=0.09, zero_point=60)
    ai = b.tensor("a_i8", (1, 4, 4, 3), "int8", scale=0.04, zero_point=0)
    bi = b.tensor("b_i8", (1, 4, 4, 3), "int8", scale=0.06, zero_point=-10)
    si = b.tensor("sum_i8", (1, 4, 4, 3), "int8", scale=0.11, zero_point=3)
    su = b.tensor("sum_u8", (1, 4, 4, 3), "uint8", scale=0.08, zero_point=90)
    b.op("QUANTIZE", [au], [ai])
    b.op("QUANTIZE", [bu], [bi])
    b.op("ADD", [ai, bi], [si], "AddOptions", FusedActivationFunction=0)
    b.op("QUANTIZE", [si], [su])
    return b.build([au, bu], [su])


def random_inputs(model: bytes, rng: np.random.Generator) -> list[np.ndarray]:
    g = from_tflite(model)
    out = []
    for name in g.inputs:
        t = g.tensors[name]
        if t.dtype == "float32":
            out.append((rng.standard_normal(t.shape) * 6).astype(np.float32))
        elif t.shape == (1, 256):
            out.append(all_values(t.dtype))
        else:
            info = np.iinfo(np.dtype(t.dtype))
            out.append(rng.integers(info.min, info.max, t.shape, endpoint=True).astype(t.dtype))
    return out


def cases(rng: np.random.Generator) -> list[tuple[str, bytes, list[list[np.ndarray]]]]:
    """(id, model, input sets) for every model of this file; the first set of each quantize model is every
    input value."""
    models = [(c.id, quantize_model(c)) for c in QUANT_CASES]
    models += [("float-uint8", float_uint8_model()), ("fc", fc_model(rng)), ("add", add_model())]
    return [(cid, m, [random_inputs(m, rng) for _ in range(2)]) for cid, m in models]


@pytest.fixture(scope="module")
def litert() -> dict[str, tuple[bytes, list, list]]:
    """id -> (model, input sets, LiteRT outputs per set): one oracle subprocess for the whole file."""
    runs = cases(np.random.default_rng(2024))
    results = tflite_reference_many([(m, sets) for _cid, m, sets in runs])
    return {cid: (m, sets, r) for (cid, m, sets), r in zip(runs, results, strict=True)}


def _check_reference(cid: str, model: bytes, sets: list, expected: object) -> None:
    assert not isinstance(expected, OracleError), f"{cid}: LiteRT failed: {expected}"
    g = from_tflite(model)
    for k, (inputs, want) in enumerate(zip(sets, expected, strict=True)):  # type: ignore[call-overload]
        got = run_reference(g, dict(zip(g.inputs, inputs, strict=True)))
        for name, w in zip(g.outputs, want, strict=True):
            assert got[name].dtype == w.dtype, f"{cid} set {k} output {name!r}: {got[name].dtype} vs LiteRT {w.dtype}"
            np.testing.assert_array_equal(got[name], w, err_msg=f"{cid} set {k} output {name!r}")


@pytest.mark.parametrize("case", QUANT_CASES, ids=[c.id for c in QUANT_CASES])
def test_requantize_matches_litert_on_every_input_value(litert: dict, case: QuantCase) -> None:
    model, sets, expected = litert[case.id]
    assert sets[0][0].size == 256 and len(np.unique(sets[0][0])) == 256  # really every value
    _check_reference(case.id, model, sets, expected)


def test_equal_scales_128_apart_is_a_sign_flip(litert: dict) -> None:
    # LiteRT's shortcut (x ^ 0x80) and the general formula agree; pin it down independently of both.
    for cid in ("u8-i8-xor", "i8-u8-xor"):
        model, sets, _ = litert[cid]
        g = from_tflite(model)
        x = sets[0][0]
        (y,) = run_reference(g, {"x": x}).values()
        np.testing.assert_array_equal(y.view(np.uint8), x.view(np.uint8) ^ 0x80, err_msg=cid)


@pytest.mark.parametrize("cid", ["float-uint8", "fc", "add"])
def test_uint8_io_models_match_litert(litert: dict, cid: str) -> None:
    model, sets, expected = litert[cid]
    _check_reference(cid, model, sets, expected)


def test_import_keeps_uint8_io_and_its_quantization() -> None:
    g = from_tflite(fc_model(np.random.default_rng(1)))
    (x,), (y,) = g.inputs, g.outputs
    tx, ty = g.tensors[x], g.tensors[y]
    assert (tx.dtype, tx.quant.scale, tx.quant.zero_point) == ("uint8", (float(np.float32(0.05)),), (128,))  # type: ignore[union-attr]
    assert (ty.dtype, ty.quant.scale, ty.quant.zero_point) == ("uint8", (float(np.float32(0.12)),), (108,))  # type: ignore[union-attr]
    assert [n.op for n in g.nodes] == ["quantize", "dense", "quantize"]


def test_rounding_double_gives_the_same_requantization() -> None:
    # LiteRT's QUANTIZE requantizes with gemmlowp (double) rounding, which the "double" mode uses too.
    for case in QUANT_CASES:
        g = from_tflite(quantize_model(case))
        x = all_values(case.in_dtype)
        single = run_reference(g, {"x": x})["y"]
        np.testing.assert_array_equal(run_reference(g, {"x": x}, rounding="double")["y"], single, err_msg=case.id)


# --- uint8 anywhere else is still refused, naming the node and the tensor ---------------------------------------
def _unary(code: str, dtype_in: str, dtype_out: str) -> bytes:
    b = TFLiteBuilder()
    x = b.tensor("in", (1, 4), dtype_in, scale=0.1, zero_point=3)
    y = b.tensor("out", (1, 4), dtype_out, scale=0.1, zero_point=3)
    b.op(code, [x], [y])
    return b.build([x], [y])


def test_uint8_into_other_ops_is_refused() -> None:
    with pytest.raises(UnsupportedModelError, match=r"node 0 \(relu 'out'\).*'in' has dtype uint8"):
        from_tflite(_unary("RELU", "uint8", "uint8"))
    b = TFLiteBuilder()
    x = b.tensor("x", (1, 4), "uint8", scale=0.1, zero_point=3)
    y = b.tensor("y", (1, 4), "uint8", scale=0.1, zero_point=3)
    s = b.tensor("s", (1, 4), "uint8", scale=0.1, zero_point=3)
    b.op("ADD", [x, y], [s], "AddOptions", FusedActivationFunction=0)
    with pytest.raises(UnsupportedModelError, match=r"node 0 \(add 's'\).*'x' has dtype uint8"):
        from_tflite(b.build([x, y], [s]))


def test_quantize_to_an_unsupported_type_names_the_output() -> None:
    with pytest.raises(UnsupportedModelError, match=r"quantize 'out'.*output 'out' has dtype int16; supported: "
                                                    r"int8, uint8"):
        from_tflite(_unary("QUANTIZE", "uint8", "int16"))


def test_uint8_concat_needs_one_quantization() -> None:
    # A uint8 CONCATENATION with different input scales requantizes in TFLite; a byte copy would be wrong, so
    # it is refused (naming both tensors) rather than computed.
    b = TFLiteBuilder()
    x = b.tensor("x", (1, 4), "uint8", scale=0.1, zero_point=3)
    y = b.tensor("y", (1, 4), "uint8", scale=0.2, zero_point=3)
    z = b.tensor("z", (1, 8), "uint8", scale=0.1, zero_point=3)
    b.op("CONCATENATION", [x, y], [z], "ConcatenationOptions", Axis=1, FusedActivationFunction=0)
    g = from_tflite(b.build([x, y], [z]))
    with pytest.raises(GraphError, match=r"uint8 input 'y' \(scale 0.2.*'z'.*must share quantization"):
        run_reference(g, {"x": np.zeros((1, 4), np.uint8), "y": np.zeros((1, 4), np.uint8)})
