"""Quantized ONNX onto the int8 path, checked against onnxruntime.

A float CNN (conv + relu, max pool, depthwise conv, residual add, global average pool, reshape, gemm) is
quantized by onnxruntime's own static quantizer in the three forms users get from it: QDQ with uint8
activations (its default), QDQ with int8 activations, and the QOperator format (QLinearConv, QGemm,
QLinearAdd, QLinearGlobalAveragePool). Each must import with every computing operator on int8 (no float
conv/dense/add left), and the generated C must agree with onnxruntime: bit-exact where the result is
defined by integer arithmetic alone; where onnxruntime requantizes with a float multiplier (it rounds
half to even in float, utvm with TFLite's fixed-point multiplier) at most one output quantization step
apart, and the tests measure how many outputs are not bit-exact. The QDQ forms (standard operators only)
are also checked against onnx's own reference implementation (onnx.reference.ReferenceEvaluator), the
spec's definition of them, with the same bounds.

utvm's onnxruntime oracle runs with onnxruntime's x86 U8S8 overflow guard on (`session.x64quantprecision`,
see utvm.compiler.oracle): without it, on x86 CPUs without VNNI, its int8 convolutions saturate and miss
the ONNX result by tens of steps, whatever utvm does.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, version_converter
from onnx import numpy_helper as nh
from onnx.reference import ReferenceEvaluator
from onnxruntime import quantization  # a test dependency: never skipped

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from utvm.compiler import compile  # noqa: E402
from utvm.compiler.local import LocalModel  # noqa: E402
from utvm.compiler.oracle import reference_outputs  # noqa: E402
from utvm.errors import UnsupportedModelError  # noqa: E402
from utvm.frontend import from_onnx  # noqa: E402
from utvm.ir import run_reference  # noqa: E402


def _float_cnn(rng: np.random.Generator, tail: str = "gemm") -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 12, 12])
    out_dim = [1, 10]
    inits = [
        nh.from_array((rng.standard_normal((8, 3, 3, 3)) * 0.3).astype(np.float32), "w1"),
        nh.from_array((rng.standard_normal(8) * 0.1).astype(np.float32), "b1"),
        nh.from_array((rng.standard_normal((8, 1, 3, 3)) * 0.3).astype(np.float32), "w2"),
        nh.from_array((rng.standard_normal(8) * 0.1).astype(np.float32), "b2"),
        nh.from_array((rng.standard_normal((8, 10)) * 0.3).astype(np.float32), "wf"),
        nh.from_array((rng.standard_normal(10) * 0.1).astype(np.float32), "bf"),
        nh.from_array(np.array([1, -1], np.int64), "shape"),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], group=8),
        helper.make_node("Add", ["c2", "p1"], ["a2"]),
        helper.make_node("GlobalAveragePool", ["a2"], ["g"]),
        helper.make_node("Reshape", ["g", "shape"], ["f"]),
        helper.make_node("Gemm", ["f", "wf", "bf"], ["logits" if tail == "softmax" else "y"]),
    ]
    if tail == "softmax":  # a float island: Softmax stays float between Dequantize and Quantize
        nodes.append(helper.make_node("Softmax", ["logits"], ["y"], axis=1))
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, out_dim)
    g = helper.make_graph(nodes, "qnet", [x], [y], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m


class _Reader(quantization.CalibrationDataReader):
    def __init__(self, seed: int) -> None:
        rng = np.random.default_rng(seed)
        self.data = iter([{"x": rng.standard_normal((1, 3, 12, 12)).astype(np.float32)} for _ in range(8)])

    def get_next(self) -> dict | None:
        return next(self.data, None)


FORMS = {
    "qdq-uint8": ("QDQ", "QUInt8"),
    "qdq-int8": ("QDQ", "QInt8"),
    "qoperator-uint8": ("QOperator", "QUInt8"),
}


def _quantized(tmp_path: Path, form: str, tail: str = "gemm") -> Path:
    fmt, act = FORMS[form]
    src, dst = tmp_path / f"float_{tail}.onnx", tmp_path / f"{form}_{tail}.onnx"
    onnx.save(_float_cnn(np.random.default_rng(0), tail), src)
    quantization.quantize_static(str(src), str(dst), _Reader(1), quant_format=getattr(quantization.QuantFormat, fmt),
                                 activation_type=getattr(quantization.QuantType, act),
                                 weight_type=quantization.QuantType.QInt8, per_channel=True)
    return dst


def _onnx_reference(path: Path, input_sets: list[list[np.ndarray]]) -> list[list[np.ndarray]] | None:
    """onnx's reference implementation's outputs; None for a model with contrib (com.microsoft) operators,
    which onnx does not define. The evaluator implements QuantizeLinear / DequantizeLinear from opset 19,
    which for int8 / uint8 (per tensor and per axis) computes what opset 13 does (19 adds float8 and
    `saturate`, for float8 only): an older model is converted first."""
    model = onnx.load(path)
    if any((n.domain or "") not in ("", "ai.onnx") for n in model.graph.node):
        return None
    opset = max(o.version for o in model.opset_import if (o.domain or "") in ("", "ai.onnx"))
    if opset < 19:
        model = version_converter.convert_version(model, 19)
    ref = ReferenceEvaluator(model)
    names = [i.name for i in model.graph.input]
    return [[np.asarray(y) for y in ref.run(None, dict(zip(names, s, strict=True)))] for s in input_sets]


@pytest.mark.parametrize("form", sorted(FORMS))
def test_quantized_onnx_runs_on_the_int8_path_and_matches_onnxruntime(tmp_path: Path, form: str) -> None:
    path = _quantized(tmp_path, form)
    graph = from_onnx(path)
    computing = Counter(graph.tensors[n.outputs[0]].dtype for n in graph.nodes
                        if n.op in ("conv2d", "depthwise_conv2d", "dense", "add", "mean", "max_pool2d"))
    assert computing == Counter({"int8": 6}), computing
    ops = Counter(n.op for n in graph.nodes)
    assert ops["quantize"] == 1 and ops["dequantize"] == 1  # float only at the model's edges
    rng = np.random.default_rng(5)
    sets = [[(rng.standard_normal((1, 3, 12, 12)) * s).astype(np.float32)] for s in (0.5, 1.0, 1.0, 2.0)]
    oracles = {"onnxruntime": reference_outputs(path, sets, kind="onnx"), "onnx.reference": _onnx_reference(path, sets)}
    assert (oracles["onnx.reference"] is None) == form.startswith("qoperator")  # QOperator: contrib operators
    step = graph.tensors[graph.nodes[-1].inputs[0]].quant.scale[0]  # the dequantized output's scale
    model = LocalModel(compile(graph, rounding="double"), opt="-O2")
    outs = []
    for s in sets:
        (got,) = model.run(s)
        ref = run_reference(graph, {graph.inputs[0]: s[0]}, rounding="double")[graph.outputs[0]]
        np.testing.assert_array_equal(got, ref)  # the C is the reference interpreter, bit for bit
        outs.append(got)
    for oracle, want in oracles.items():
        if want is None:
            continue
        exact = total = 0
        for got, (w,) in zip(outs, want, strict=True):
            diff = np.abs(got - w)
            assert float(diff.max()) <= step * 1.0001, \
                f"{form}: off by {diff.max() / step:.2f} quantization steps from {oracle}"
            exact += int(np.sum(diff == 0))
            total += diff.size
        assert exact >= 0.9 * total, f"{form}: only {exact} of {total} outputs bit-exact with {oracle}"


def test_a_float_island_in_a_qdq_model_stays_float(tmp_path: Path) -> None:
    path = _quantized(tmp_path, "qdq-int8", tail="softmax")
    graph = from_onnx(path)
    assert any(n.op == "softmax" and graph.tensors[n.outputs[0]].dtype == "float32" for n in graph.nodes)
    x = np.random.default_rng(2).standard_normal((1, 3, 12, 12)).astype(np.float32)
    (got,) = LocalModel(compile(graph, rounding="double")).run([x])
    for want in (reference_outputs(path, [[x]], kind="onnx"), _onnx_reference(path, [[x]])):
        assert want is not None
        np.testing.assert_allclose(got, want[0][0], atol=0.02)  # softmax of logits within one logit step


def test_dynamic_quantization_is_refused_with_the_reason(tmp_path: Path) -> None:
    src, dst = tmp_path / "f.onnx", tmp_path / "dyn.onnx"
    onnx.save(_float_cnn(np.random.default_rng(0)), src)
    quantization.quantize_dynamic(str(src), str(dst), weight_type=quantization.QuantType.QInt8)
    ops = {n.op_type for n in onnx.load(dst).graph.node}
    assert ops & {"DynamicQuantizeLinear", "MatMulInteger", "ConvInteger"}, ops
    with pytest.raises(UnsupportedModelError, match="utvm's int8 path needs static scales"):
        from_onnx(dst)


def test_asymmetric_weights_are_refused_naming_the_node(tmp_path: Path) -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2])
    inits = [nh.from_array(np.ones((4, 2), np.int8), "wq"), nh.from_array(np.float32(0.1), "ws"),
             nh.from_array(np.int8(3), "wz"), nh.from_array(np.float32(0.05), "s"), nh.from_array(np.int8(0), "z")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"]),
             helper.make_node("QLinearMatMul", ["xq", "s", "z", "wq", "ws", "wz", "s", "z"], ["yq"], name="mm"),
             helper.make_node("DequantizeLinear", ["yq", "s", "z"], ["y"])]
    m = helper.make_model(helper.make_graph(nodes, "g", [x], [y], inits), opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    with pytest.raises(UnsupportedModelError, match=r"node 1 \(QLinearMatMul 'mm'\).*zero point \[3\].*symmetric"):
        from_onnx(m)
