"""Inputs the importer fuzzers (tests/fuzz/fuzz_import.py) found raising something other than a UtvmError,
minimised and rebuilt here with the builders; each must now raise a ModelError naming the operator, node,
tensor or attribute at fault."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from tflite_builder import TFLiteBuilder
from utvm.errors import ModelFormatError, UnsupportedModelError
from utvm.frontend import from_onnx, from_tflite


def _conv(**fields: int) -> bytes:
    b = TFLiteBuilder()
    x = b.tensor("x", (1, 4, 4, 1), "float32")
    w = b.tensor("w", (1, 3, 3, 1), "float32", data=np.ones((1, 3, 3, 1), np.float32))
    y = b.tensor("y", (1, 4, 4, 1), "float32")
    opts = {"Padding": 0, "StrideW": 1, "StrideH": 1, "FusedActivationFunction": 0, "DilationWFactor": 1,
            "DilationHFactor": 1, **fields}
    b.op("CONV_2D", [x, w], [y], "Conv2DOptions", **opts)
    return b.build(inputs=[x], outputs=[y])


def _pool(**fields: int) -> bytes:
    b = TFLiteBuilder()
    x, y = b.tensor("x", (1, 4, 4, 1), "float32"), b.tensor("y", (1, 2, 2, 1), "float32")
    opts = {"Padding": 1, "StrideW": 2, "StrideH": 2, "FilterWidth": 2, "FilterHeight": 2,
            "FusedActivationFunction": 0, **fields}
    b.op("MAX_POOL_2D", [x], [y], "Pool2DOptions", **opts)
    return b.build(inputs=[x], outputs=[y])


@pytest.mark.parametrize("build,fields,match", [
    # found by tflite: ZeroDivisionError in tflite_padding (SAME padding divides by the stride)
    (_conv, {"StrideW": 0}, r"operator 0 \(CONV_2D\) has strides \[1, 0\]; strides must be >= 1"),
    (_conv, {"StrideH": -2}, r"operator 0 \(CONV_2D\) has strides \[-2, 1\]"),
    (_conv, {"DilationHFactor": -1}, r"operator 0 \(CONV_2D\) has dilation factors \[-1, 1\]"),
    (_conv, {"Padding": 7}, r"operator 0 \(CONV_2D\) has unknown padding 7 \(0: SAME, 1: VALID\)"),
    (_pool, {"StrideH": 0, "Padding": 0}, r"operator 0 \(MAX_POOL_2D\) has strides \[0, 2\]"),
    (_pool, {"FilterWidth": 0}, r"operator 0 \(MAX_POOL_2D\): the filter is 2x0; it must be at least 1x1"),
], ids=["conv-stride-0", "conv-negative-stride", "conv-negative-dilation", "conv-padding-7", "pool-stride-0",
        "pool-filter-0"])
def test_tflite_window_attributes_are_checked_before_use(build, fields: dict, match: str) -> None:  # noqa: ANN001
    with pytest.raises(ModelFormatError, match=match):
        from_tflite(build(**fields))


def test_tflite_mean_axis_must_be_integers() -> None:
    """Found by tflite-gen: a float32 axis constant holding NaN (ValueError from int(nan))."""
    b = TFLiteBuilder()
    x, y = b.tensor("x", (1, 4), "float32"), b.tensor("y", (1, 1), "float32")
    axis = b.tensor("axis", (1,), "float32", data=np.array([np.nan], np.float32))
    b.op("MEAN", [x, axis], [y], "ReducerOptions", KeepDims=1)
    with pytest.raises(ModelFormatError, match=r"operator 0: axis 'axis' must be an integer tensor, not float32"):
        from_tflite(b.build(inputs=[x], outputs=[y]))


@pytest.mark.parametrize("code,shape", [("PAD", (1, 2)), ("TRANSPOSE", (2,))])
def test_tflite_paddings_and_perm_must_be_integers(code: str, shape: tuple[int, ...]) -> None:
    b = TFLiteBuilder()
    x, y = b.tensor("x", (1, 2), "float32"), b.tensor("y", (2, 1), "float32")
    c = b.tensor("c", shape, "float32", data=np.full(shape, 0.5, np.float32))
    b.op(code, [x, c], [y])
    with pytest.raises(ModelFormatError, match=r"operator 0: .* 'c' must be an integer tensor, not float32"):
        from_tflite(b.build(inputs=[x], outputs=[y]))


def test_tflite_padv2_constant_values_must_be_a_scalar() -> None:
    """Found reviewing the fuzzer's PADV2 inputs: a constant_values of two elements silently used the first."""
    b = TFLiteBuilder()
    x, y = b.tensor("x", (1, 2), "float32"), b.tensor("y", (1, 4), "float32")
    pads = b.tensor("pads", (2, 2), "int32", data=np.array([[0, 0], [1, 1]], np.int32))
    value = b.tensor("value", (2,), "float32", data=np.zeros((2,), np.float32))
    b.op("PADV2", [x, pads, value], [y])
    with pytest.raises(ModelFormatError, match=r"operator 0 \(PADV2\): constant_values 'value' has 2 elements"):
        from_tflite(b.build(inputs=[x], outputs=[y]))


def test_onnx_non_utf8_string_attribute() -> None:
    """Found by onnx: Pad mode b'const\\xe1nt' (UnicodeDecodeError decoding the attribute)."""
    node = helper.make_node("Pad", ["x", "pads"], ["y"], mode=b"const\xe1nt")
    graph = helper.make_graph([node], "t", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor("pads", TensorProto.INT64, [4], [0, 1, 0, 1])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    with pytest.raises(ModelFormatError, match=r"node 0 \(Pad\): attribute 'mode' is not UTF-8 text \(byte 5: "
                                               r"b'\\xe1'\)"):
        from_onnx(model.SerializeToString())


@pytest.mark.parametrize("attrs,match", [
    ({"kernel_shape": [2, 2], "strides": [1]}, r"strides \[1\] .* must have 2 values each"),
    ({"kernel_shape": [2, 2], "strides": [0, 1]}, r"strides \[0, 1\] .* must be at least 1"),
    ({"kernel_shape": [2, 2], "dilations": [1, 1, 1]}, r"dilations \[1, 1, 1\] must have 2 values each"),
    ({"kernel_shape": [0, 2]}, r"kernel_shape \[0, 2\], .* must be at least 1"),
])
def test_onnx_pool_window_attributes(attrs: dict, match: str) -> None:
    """Found by onnx-proto: a MaxPool with one stride raised IndexError (reported as 'cannot import
    (IndexError: tuple index out of range)'); now the message says what is wrong."""
    node = helper.make_node("MaxPool", ["x"], ["y"], **attrs)
    graph = helper.make_graph([node], "t", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 4, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 3, 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    with pytest.raises(ModelFormatError, match=rf"node 0 \(MaxPool\): (kernel_shape .*)?{match}"):
        from_onnx(model.SerializeToString())


def _onnx(nodes: list, inputs: dict, outputs: dict, inits: list | None = None, opset: int = 13) -> bytes:
    graph = helper.make_graph(nodes, "t",
                              [helper.make_tensor_value_info(k, TensorProto.FLOAT, v) for k, v in inputs.items()],
                              [helper.make_tensor_value_info(k, et, v) for k, (et, v) in outputs.items()],
                              inits or [])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]).SerializeToString()


def test_onnx_concat_of_scalars() -> None:
    """Found by onnx-proto: Concat of a rank-0 Constant ('cannot import (IndexError: tuple index out of
    range)'), both folded and as an operator."""
    value = helper.make_tensor("v", TensorProto.FLOAT, [], [1.0])
    nodes = [helper.make_node("Constant", [], ["c"], value=value),
             helper.make_node("Concat", ["c"], ["y"], axis=0)]
    with pytest.raises(ModelFormatError, match=r"node 1 \(Concat\): axis 0 is out of range for rank 0"):
        from_onnx(_onnx(nodes, {}, {"y": (TensorProto.FLOAT, [1])}))
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Concat", ["r", "r"], ["y"], axis=0)]
    with pytest.raises(ModelFormatError, match=r"node 1 \(Concat\): cannot concatenate rank-0 tensors \('r'\)"):
        from_onnx(_onnx(nodes, {"x": []}, {"y": (TensorProto.FLOAT, [2])}))


def test_onnx_folded_reshape_to_an_empty_but_huge_shape() -> None:
    """Found by onnx-proto: Reshape of an empty constant to [0, 2**51, ...] (numpy: 'array is too big')."""
    data = helper.make_tensor("data", TensorProto.INT64, [0], [])
    spec = helper.make_tensor("shape", TensorProto.INT64, [3], [0, 2**51, 2])
    nodes = [helper.make_node("Reshape", ["data", "shape"], ["y"])]
    with pytest.raises(UnsupportedModelError, match=r"node 0 \(Reshape\): tensor 'y' int64\[0, 2251799813685248, 2\] "
                                                    r"has dimension 2251799813685248 \(axis 1\), over the limit"):
        from_onnx(_onnx(nodes, {}, {"y": (TensorProto.INT64, [0, 2**51, 2])}, [data, spec]))


def test_onnx_integer_constant_reshapes_still_fold() -> None:
    """Shape arithmetic on int64 constants is folded at import (the size checks must not stop that)."""
    src = helper.make_tensor("src", TensorProto.INT64, [1, 2], [3, 2])
    flat = helper.make_tensor("flat", TensorProto.INT64, [1], [2])
    nodes = [helper.make_node("Reshape", ["src", "flat"], ["s"]), helper.make_node("Reshape", ["x", "s"], ["y"])]
    g = from_onnx(_onnx(nodes, {"x": [1, 6]}, {"y": (TensorProto.FLOAT, [3, 2])}, [src, flat]))
    assert g.tensors["y"].shape == (3, 2)


@pytest.mark.parametrize("old,new,match", [
    (b"RELUNAME", b"RELU\xffAME", r"node 0: the name b'RELU\\xffAME' is not UTF-8 text"),
    (b"\n\x01x", b"\n\x01\xff", r"graph input 0: the name b'\\xff' is not UTF-8 text"),
])
def test_onnx_names_that_are_not_utf8(old: bytes, new: bytes, match: str) -> None:
    """Found by onnx: protobuf hands a string field that is not UTF-8 over as bytes; a node name of bytes raised
    TypeError (str + bytes) and a graph input named b'\\xff' became an IR tensor named by bytes."""
    node = helper.make_node("Relu", ["x"], ["y"], name="RELUNAME")
    model = _onnx([node], {"x": [1]}, {"y": (TensorProto.FLOAT, [1])})
    assert model.count(old) >= 1  # every occurrence: the name and its uses
    with pytest.raises(ModelFormatError, match=match):
        from_onnx(model.replace(old, new))


def test_onnx_folded_unsqueeze_with_a_huge_axis() -> None:
    """Found by onnx-proto: numpy's expand_dims raised OverflowError on axis 2**32."""
    data = helper.make_tensor("data", TensorProto.FLOAT, [2], [1.0, 2.0])
    axes = helper.make_tensor("axes", TensorProto.INT64, [1], [2**32])
    nodes = [helper.make_node("Unsqueeze", ["data", "axes"], ["y"])]
    with pytest.raises(ModelFormatError, match=r"node 0 \(Unsqueeze\): axis 4294967296 is out of range for rank 2"):
        from_onnx(_onnx(nodes, {}, {"y": (TensorProto.FLOAT, [2, 1])}, [data, axes]))


def test_onnx_folded_flatten_of_an_empty_constant() -> None:
    """Found by onnx-proto: numpy cannot reshape an empty array to (0, -1)."""
    data = helper.make_tensor("data", TensorProto.FLOAT, [0, 3], [])
    nodes = [helper.make_node("Flatten", ["data"], ["f"], axis=1), helper.make_node("Add", ["x", "f"], ["y"])]
    g = from_onnx(_onnx(nodes, {"x": [1, 1]}, {"y": (TensorProto.FLOAT, [0, 3])}, [data]))
    assert g.tensors["y"].shape == (0, 3)


@pytest.mark.parametrize("op,folded", [("Squeeze", False), ("Squeeze", True), ("Unsqueeze", True), ("Reshape", False)])
def test_onnx_axes_and_shapes_must_be_integers(op: str, folded: bool) -> None:
    """Found by onnx-proto: Squeeze with a float axes constant holding NaN ('cannot import (ValueError: cannot
    convert float NaN to integer)')."""
    what = "shape" if op == "Reshape" else "axes"
    spec = helper.make_tensor("spec", TensorProto.FLOAT, [1], [float("nan")])
    data = helper.make_tensor("data", TensorProto.FLOAT, [1, 3], [1.0, 2.0, 3.0])
    nodes = [helper.make_node(op, ["data" if folded else "x", "spec"], ["y"])]
    inits = [spec, data] if folded else [spec]
    with pytest.raises(ModelFormatError, match=rf"node 0 \({op}\): input 1 \({what}\) 'spec' must be an integer "
                                               r"tensor, not float32"):
        from_onnx(_onnx(nodes, {} if folded else {"x": [1, 3]}, {"y": (TensorProto.FLOAT, [3])}, inits))


def test_onnx_matmul_by_an_empty_constant() -> None:
    """Found by onnx-proto: MatMul by a constant of shape [0] ('cannot import (ValueError: cannot reshape array of
    size 0 into shape (0,newaxis))')."""
    b = helper.make_tensor("b", TensorProto.FLOAT, [0], [])
    g = from_onnx(_onnx([helper.make_node("MatMul", ["x", "b"], ["y"])], {"x": [2, 0]},
                        {"y": (TensorProto.FLOAT, [2])}, [b]))
    assert g.tensors["y"].shape == (2,)


@pytest.mark.parametrize("op,attrs,inputs", [
    ("Squeeze", {}, ["r", "axes"]),
    ("Pad", {}, ["r", "pads", "", "axes"]),
])
def test_onnx_rank0_tensors_have_no_axis(op: str, attrs: dict, inputs: list[str]) -> None:
    """Found by onnx-proto: Squeeze of a rank-0 tensor with axes [0] ('cannot import (IndexError: tuple index out
    of range)'): axis 0 was accepted for rank 0."""
    inits = [helper.make_tensor("axes", TensorProto.INT64, [1], [0]),
             helper.make_tensor("pads", TensorProto.INT64, [2], [1, 1])]
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node(op, inputs, ["y"], **attrs)]
    with pytest.raises(ModelFormatError, match=rf"node 1 \({op}\): axis 0 is out of range for rank 0"):
        from_onnx(_onnx(nodes, {"x": []}, {"y": (TensorProto.FLOAT, [1])}, inits, opset=18))
