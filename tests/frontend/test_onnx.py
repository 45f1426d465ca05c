"""`utvm.frontend.onnx.from_onnx`: the corpus models, layout tracking, and bad input.

Models built here with `onnx.helper` are checked against onnxruntime; the shared mnist-8 against its three
stored test_data_sets and onnxruntime. Bad input must raise a utvm ModelError whose message names the
thing at fault, never an exception from inside onnx/protobuf.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx_helpers import MNIST, assert_close, load_data_set, ort_run, run_graph

from utvm.compiler.passes.fold_batch_norm import fold_batch_norm
from utvm.errors import ModelError, ModelFormatError, UnsupportedModelError, UnsupportedOperatorError
from utvm.frontend.onnx import SUPPORTED_OPS, from_onnx
from utvm.ir import Graph

MNIST_MODEL = MNIST / "model.onnx"
RNG = np.random.default_rng(1234)


def _ops(graph: Graph) -> Counter[str]:
    return Counter(n.op for n in graph.nodes)


def _rand(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def _model(nodes: list[onnx.NodeProto], inputs: dict[str, list[int]], outputs: dict[str, list[int] | None],
           inits: dict[str, np.ndarray] | None = None, opset: int = 13) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes, "t",
        [helper.make_tensor_value_info(k, TensorProto.FLOAT, v) for k, v in inputs.items()],
        [helper.make_tensor_value_info(k, TensorProto.FLOAT, v) for k, v in outputs.items()],
        [numpy_helper.from_array(v, k) for k, v in (inits or {}).items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    model = onnx.shape_inference.infer_shapes(model)  # fills the output shapes given as None
    onnx.checker.check_model(model)
    return model


def _check(model: onnx.ModelProto, feeds: dict[str, np.ndarray] | None = None) -> Graph:
    """Import, run, and compare with onnxruntime; returns the graph for structural checks."""
    graph = from_onnx(model)
    if feeds is None:
        consts = {t.name for t in model.graph.initializer}
        feeds = {i.name: _rand(*[d.dim_value for d in i.type.tensor_type.shape.dim])
                 for i in model.graph.input if i.name not in consts}
    assert_close(run_graph(graph, feeds), ort_run(model, feeds), "utvm vs onnxruntime")
    return graph


# ===================================================================================== the corpus models
@pytest.mark.parametrize("data_set", sorted(p.name for p in MNIST.glob("test_data_set_*")))
def test_mnist_matches_stored_outputs_and_onnxruntime(data_set: str) -> None:
    graph = from_onnx(MNIST_MODEL)
    (x,), (y,) = load_data_set(MNIST / data_set)
    got = run_graph(graph, {"Input3": x})
    assert_close(got, [y], f"mnist-8 {data_set} vs stored output")
    assert_close(got, ort_run(MNIST_MODEL, {"Input3": x}), f"mnist-8 {data_set} vs onnxruntime")
    assert int(np.argmax(got[0])) == int(np.argmax(y))


def test_mnist_data_sets_present() -> None:
    assert len(list(MNIST.glob("test_data_set_*"))) == 3, f"mnist-8 with 3 test_data_sets expected in {MNIST}"


def test_mnist_random_inputs_match_onnxruntime() -> None:
    graph = from_onnx(MNIST_MODEL.read_bytes())  # bytes work as well as a path
    for _ in range(5):
        x = RNG.uniform(0, 255, (1, 1, 28, 28)).astype(np.float32)
        assert_close(run_graph(graph, {"Input3": x}), ort_run(MNIST_MODEL, {"Input3": x}), "mnist-8 random")


def test_mnist_structure() -> None:
    graph = from_onnx(onnx.load(str(MNIST_MODEL)))
    assert graph.inputs == ("Input3",) and graph.outputs == ("Plus214_Output_0",)
    assert graph.tensors["Input3"].shape == (1, 1, 28, 28), "the input stays NCHW, as the user feeds it"
    ops = _ops(graph)
    assert ops["conv2d"] == 2 and ops["max_pool2d"] == 2 and ops["dense"] == 1 and ops["relu"] == 2
    # NCHW->NHWC of a 1-channel input only moves a size-1 axis: a reshape, not a transpose; the one real
    # transpose puts the pooled features back in NCHW order before the Reshape that flattens them
    assert ops["transpose"] == 1
    t = next(n for n in graph.nodes if n.op == "transpose")
    assert t.attrs["perm"] == (0, 3, 1, 2) and t.outputs == ("Pooling160_Output_0",)
    conv = next(n for n in graph.nodes if n.op == "conv2d")
    assert graph.tensors[conv.inputs[1]].shape == (8, 5, 5, 1), "weights OIHW -> OHWI"
    assert conv.attrs["padding"] == (2, 2, 2, 2), "SAME_UPPER 5x5 -> 2 each side"
    dense = next(n for n in graph.nodes if n.op == "dense")
    assert graph.tensors[dense.inputs[1]].shape == (10, 256), "MatMul B[K, N] -> dense w[O, K]"
    # the Reshape of the MatMul weight was evaluated at import: no node, no int64 shape tensor left
    assert all(t.dtype == "float32" for t in graph.tensors.values())
    Graph.from_json(graph.to_json())  # JSON round trip of an imported graph


# ===================================================================================== layout tracking
def test_conv_chain_keeps_nhwc_between_ops() -> None:
    w1, w2 = _rand(8, 3, 3, 3), _rand(8, 8, 1, 1)
    model = _model([
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2"], ["c2"]),
        helper.make_node("Add", ["c2", "bias"], ["a"]),  # [C,1,1] constant broadcast in NHWC
        helper.make_node("Clip", ["a", "lo", "hi"], ["y"]),
    ], {"x": [1, 3, 8, 8]}, {"y": [1, 8, 8, 8]},
        {"w1": w1, "b1": _rand(8), "w2": w2, "bias": _rand(8, 1, 1), "lo": np.array(-0.5, np.float32),
         "hi": np.array(0.75, np.float32)})
    graph = _check(model)
    # one layout change in, one out: everything between runs in NHWC
    assert _ops(graph)["transpose"] == 2
    add = next(n for n in graph.nodes if n.op == "add")
    assert graph.tensors[add.inputs[1]].shape == (1, 1, 1, 8)
    clip = next(n for n in graph.nodes if n.op == "clip")
    assert (clip.attrs["min"], clip.attrs["max"]) == (-0.5, 0.75)


def test_residual_block_folds_and_needs_no_transposes_inside() -> None:
    c = 8

    def bn(prefix: str) -> dict[str, np.ndarray]:
        return {f"{prefix}_s": _rand(c), f"{prefix}_b": _rand(c), f"{prefix}_m": _rand(c),
                f"{prefix}_v": RNG.uniform(0.5, 2.0, c).astype(np.float32)}

    def bn_node(x: str, prefix: str, y: str) -> onnx.NodeProto:
        return helper.make_node("BatchNormalization", [x] + [f"{prefix}_{k}" for k in "sbmv"], [y])

    model = _model([
        helper.make_node("Conv", ["x", "w0"], ["c0"], pads=[1, 1, 1, 1], strides=[2, 2]),
        bn_node("c0", "bn0", "n0"),
        helper.make_node("Relu", ["n0"], ["r0"]),
        helper.make_node("Conv", ["r0", "w1"], ["c1"], pads=[1, 1, 1, 1]),
        bn_node("c1", "bn1", "n1"),
        helper.make_node("Relu", ["n1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2"], ["c2"], pads=[1, 1, 1, 1]),
        bn_node("c2", "bn2", "n2"),
        helper.make_node("Add", ["n2", "r0"], ["s"]),
        helper.make_node("Relu", ["s"], ["r2"]),
        helper.make_node("GlobalAveragePool", ["r2"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("Gemm", ["f", "fc_w", "fc_b"], ["y"], transB=1),
        helper.make_node("Softmax", ["y"], ["p"], axis=1),
    ], {"x": [1, 3, 16, 16]}, {"p": [1, 10]},
        {"w0": _rand(c, 3, 3, 3), "w1": _rand(c, c, 3, 3), "w2": _rand(c, c, 3, 3), "fc_w": _rand(10, c),
         "fc_b": _rand(10), **bn("bn0"), **bn("bn1"), **bn("bn2")}, opset=11)
    graph = _check(model)
    # one transpose at the input; GlobalAveragePool's [N,1,1,C] -> [N,C,1,1] only moves size-1 axes
    assert _ops(graph)["transpose"] == 1
    folded = fold_batch_norm(graph)
    assert _ops(folded)["batch_norm"] == 0 and _ops(folded)["conv2d"] == 3
    x = _rand(1, 3, 16, 16)
    assert_close(run_graph(folded, {"x": x}), ort_run(model, {"x": x}), "folded block vs onnxruntime")


def test_depthwise_and_grouped_conv() -> None:
    model = _model([
        # depthwise, multiplier 2, SAME_UPPER, stride 2, with bias
        helper.make_node("Conv", ["x", "wd", "bd"], ["d"], group=4, auto_pad="SAME_UPPER", strides=[2, 2]),
        # grouped: 8 -> 6 channels in 2 groups, dilation 2, asymmetric pads
        helper.make_node("Conv", ["d", "wg"], ["y"], group=2, dilations=[2, 2], pads=[1, 0, 2, 1]),
    ], {"x": [1, 4, 9, 9]}, {"y": None}, {"wd": _rand(8, 1, 3, 3), "bd": _rand(8), "wg": _rand(6, 4, 3, 3)})
    graph = _check(model)
    dw = next(n for n in graph.nodes if n.op == "depthwise_conv2d")
    assert dw.attrs["depth_multiplier"] == 2 and graph.tensors[dw.inputs[1]].shape == (1, 3, 3, 8)
    assert dw.attrs["padding"] == (1, 1, 1, 1)
    gc = next(n for n in graph.nodes if n.op == "conv2d")
    assert gc.attrs["groups"] == 2 and gc.attrs["dilation"] == (2, 2) and gc.attrs["padding"] == (1, 0, 2, 1)
    assert graph.tensors[gc.inputs[1]].shape == (6, 3, 3, 4)


def test_same_lower_and_valid_padding() -> None:
    model = _model([
        helper.make_node("Conv", ["x", "w"], ["a"], auto_pad="SAME_LOWER", strides=[2, 2]),
        helper.make_node("MaxPool", ["a"], ["y"], kernel_shape=[2, 2], auto_pad="VALID"),
    ], {"x": [2, 2, 8, 7]}, {"y": None}, {"w": _rand(3, 2, 4, 4)})
    graph = _check(model)
    conv = next(n for n in graph.nodes if n.op == "conv2d")
    assert conv.attrs["padding"] == (1, 2, 1, 1)  # SAME_LOWER puts the odd pixel first


def test_concat_of_nhwc_values_runs_in_nhwc() -> None:
    model = _model([
        helper.make_node("Conv", ["x", "w1"], ["a"]),
        helper.make_node("Conv", ["x", "w2"], ["b"]),
        helper.make_node("Concat", ["a", "b", "c"], ["y"], axis=1),
    ], {"x": [1, 2, 5, 5]}, {"y": [1, 7, 5, 5]}, {"w1": _rand(3, 2, 1, 1), "w2": _rand(2, 2, 1, 1),
                                                  "c": _rand(1, 2, 5, 5)})
    graph = _check(model)
    cat = next(n for n in graph.nodes if n.op == "concat")
    assert cat.attrs["axis"] == 3, "channel concat in NHWC"
    assert _ops(graph)["transpose"] == 2


def test_transpose_after_conv_is_one_composed_transpose() -> None:
    model = _model([
        helper.make_node("Conv", ["x", "w"], ["a"]),
        helper.make_node("Transpose", ["a"], ["y"], perm=[0, 2, 1, 3]),
    ], {"x": [1, 3, 4, 5]}, {"y": None}, {"w": _rand(6, 3, 1, 1)})
    graph = _check(model)
    transposes = [n for n in graph.nodes if n.op == "transpose"]
    assert len(transposes) == 2  # the input's, then the composed one
    assert transposes[-1].attrs["perm"] == (0, 1, 3, 2)  # NHWC -> the ONNX perm of NCHW, in one step
    assert transposes[-1].outputs == ("y",)


@pytest.mark.parametrize("opset,axis", [(11, 1), (11, 2), (11, -1), (11, 0), (13, 1), (13, -1), (13, 2)])
def test_softmax_both_semantics(opset: int, axis: int) -> None:
    model = _model([
        helper.make_node("Conv", ["x", "w"], ["a"]),
        helper.make_node("Softmax", ["a"], ["y"], axis=axis),
    ], {"x": [2, 3, 4, 5]}, {"y": None}, {"w": _rand(3, 3, 1, 1)}, opset=opset)
    graph = _check(model)
    sm = next(n for n in graph.nodes if n.op == "softmax")
    if opset >= 13 and axis == 1:
        assert sm.attrs["axis"] == 3, "opset 13 softmax over channels runs in NHWC"


def test_opset6_clip_attributes_and_relu_chain() -> None:
    model = _model([
        helper.make_node("Clip", ["x"], ["a"], min=-0.25, max=0.5),
        helper.make_node("Relu", ["a"], ["y"]),
    ], {"x": [3, 7]}, {"y": None}, opset=6)
    _check(model)


def test_flatten_gemm_after_pooling() -> None:
    model = _model([
        helper.make_node("Conv", ["x", "w"], ["a"], pads=[1, 1, 1, 1]),
        helper.make_node("AveragePool", ["a"], ["p"], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1,
                         count_include_pad=1, pads=[1, 1, 1, 1]),
        helper.make_node("GlobalAveragePool", ["p"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("Gemm", ["f", "wf", "bf"], ["y"], transB=1, alpha=0.5, beta=2.0),
    ], {"x": [2, 3, 10, 10]}, {"y": [2, 4]}, {"w": _rand(5, 3, 3, 3), "wf": _rand(4, 5), "bf": _rand(4)})
    graph = _check(model)
    assert _ops(graph)["dense"] == 1
    # count_include_pad with a ceil_mode extension: the explicit pads are made real zeros first
    assert _ops(graph)["pad"] == 1


def test_reduce_mean_pad_sum_and_matmul() -> None:
    model = _model([
        helper.make_node("Conv", ["x", "w"], ["a"]),
        helper.make_node("Pad", ["a", "pads", "v"], ["p"]),
        helper.make_node("ReduceMean", ["p"], ["m"], axes=[2, 3], keepdims=0),
        helper.make_node("ReduceMean", ["p"], ["k"], axes=[1], keepdims=1),
        helper.make_node("Sum", ["m", "m2", "m"], ["s"]),
        helper.make_node("MatMul", ["s", "mw"], ["y1"]),
        helper.make_node("MatMul", ["s", "z"], ["y2"]),  # both operands at runtime
        helper.make_node("Squeeze", ["k", "ax"], ["y3"]),
    ], {"x": [2, 3, 4, 4], "m2": [2, 6], "z": [6, 2]}, {"y1": None, "y2": None, "y3": None},
        {"w": _rand(6, 3, 1, 1), "pads": np.array([0, 0, 1, 2, 0, 0, 2, 1], np.int64),
         "v": np.array(0.5, np.float32), "mw": _rand(6), "ax": np.array([1], np.int64)}, opset=13)
    graph = _check(model)
    assert _ops(graph)["matmul"] == 1 and _ops(graph)["dense"] == 1


def test_batch_norm_ranks_2_3_4_and_folding() -> None:
    c = 4
    bn = {f"{p}{r}": v for r in (2, 3, 4) for p, v in
          (("s", _rand(c)), ("b", _rand(c)), ("m", _rand(c)),
           ("v", RNG.uniform(0.5, 2, c).astype(np.float32)))}
    model = _model([
        helper.make_node("Conv", ["x", "w"], ["a"]),
        helper.make_node("BatchNormalization", ["a", "s4", "b4", "m4", "v4"], ["y4"], epsilon=1e-3),
        helper.make_node("BatchNormalization", ["x2", "s2", "b2", "m2", "v2"], ["y2"]),
        helper.make_node("BatchNormalization", ["x3", "s3", "b3", "m3", "v3"], ["y3"]),
    ], {"x": [1, 2, 5, 5], "x2": [3, c], "x3": [2, c, 6]}, {"y4": None, "y2": None, "y3": None},
        {"w": _rand(c, 2, 3, 3), **bn})
    graph = _check(model)
    assert _ops(graph)["batch_norm"] == 3
    folded = fold_batch_norm(graph)
    assert _ops(folded)["batch_norm"] == 2, "the conv's batch norm folds; the others have no producer"
    feeds = {"x": _rand(1, 2, 5, 5), "x2": _rand(3, c), "x3": _rand(2, c, 6)}
    assert_close(run_graph(folded, feeds), ort_run(model, feeds), "folded vs onnxruntime")


def test_identity_dropout_and_input_as_output() -> None:
    model = _model([
        helper.make_node("Identity", ["x"], ["i"]),
        helper.make_node("Dropout", ["i"], ["d"]),
        helper.make_node("Relu", ["d"], ["y"]),
        helper.make_node("Identity", ["x"], ["y2"]),
    ], {"x": [2, 3]}, {"y": None, "y2": None})
    graph = _check(model)
    assert graph.outputs == ("y", "y2")
    # aliases cost nothing; an output that aliases an input is copied out under its own name
    assert _ops(graph) == Counter({"relu": 1, "reshape": 1})


def test_conv_output_as_graph_output_and_elementwise_with_runtime_operand() -> None:
    model = _model([
        helper.make_node("Conv", ["x", "w"], ["y"]),
        helper.make_node("Mul", ["y", "u"], ["p"]),  # u is a 4-D NCHW runtime input
        helper.make_node("Sub", ["p", "row"], ["q"]),  # rank-1 constant, broadcast along W
    ], {"x": [1, 2, 3, 4], "u": [1, 3, 3, 4]}, {"y": None, "q": None},
        {"w": _rand(3, 2, 1, 1), "row": _rand(4)})
    graph = _check(model)
    assert graph.tensors["y"].shape == (1, 3, 3, 4) and graph.tensors["q"].shape == (1, 3, 3, 4)


def test_constant_node_and_folding() -> None:
    shape = helper.make_tensor("shape_c", TensorProto.INT64, [2], [3, -1])
    model = _model([
        helper.make_node("Constant", [], ["shape"], value=shape),
        helper.make_node("Constant", [], ["k"], value_float=2.0),
        helper.make_node("Mul", ["c", "k"], ["c2"]),  # folded at import
        helper.make_node("Transpose", ["c2"], ["c3"], perm=[1, 0]),  # folded at import
        helper.make_node("Reshape", ["x", "shape"], ["r"]),
        helper.make_node("Add", ["r", "c3"], ["y"]),
    ], {"x": [2, 3, 2]}, {"y": [3, 4]}, {"c": _rand(4, 3)})
    graph = _check(model)
    assert _ops(graph) == Counter({"reshape": 1, "add": 1})


def test_dynamic_batch_pinned_with_shapes() -> None:
    model = _model([helper.make_node("Relu", ["x"], ["y"])], {"x": ["N", 3]}, {"y": ["N", 3]})
    with pytest.raises(UnsupportedModelError, match=r"input 'x' has a dynamic dimension 'N' \(axis 0\)"):
        from_onnx(model)
    graph = from_onnx(model, shapes={"x": (2, 3)})
    assert graph.tensors["x"].shape == (2, 3) and graph.tensors["y"].shape == (2, 3)


def test_int8_clip_uses_identity_quantization() -> None:
    graph_def = helper.make_graph(
        [helper.make_node("Clip", ["x", "", "hi"], ["y"])], "t",
        [helper.make_tensor_value_info("x", TensorProto.INT8, [5])],
        [helper.make_tensor_value_info("y", TensorProto.INT8, [5])],
        [numpy_helper.from_array(np.array(3, np.int8), "hi")])
    model = helper.make_model(graph_def, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8  # what onnxruntime reads
    x = np.array([-128, -3, 0, 3, 127], np.int8)
    graph = from_onnx(model)
    assert graph.tensors["x"].quant is not None and graph.tensors["x"].quant.scale == (1.0,)
    got = run_graph(graph, {"x": x})
    np.testing.assert_array_equal(got[0], np.array([-128, -3, 0, 3, 3], np.int8))
    np.testing.assert_array_equal(got[0], ort_run(model, {"x": x})[0])


def test_int8_data_movement_and_max_pool() -> None:
    graph_def = helper.make_graph([
        helper.make_node("MaxPool", ["x"], ["p"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
        helper.make_node("Transpose", ["p"], ["t"], perm=[0, 2, 3, 1]),
        helper.make_node("Concat", ["t", "t"], ["c"], axis=-1),
        helper.make_node("Flatten", ["c"], ["y"]),
    ], "t", [helper.make_tensor_value_info("x", TensorProto.INT8, [1, 2, 5, 5])],
        [helper.make_tensor_value_info("y", TensorProto.INT8, [1, 36])])
    model = helper.make_model(graph_def, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    x = RNG.integers(-128, 128, (1, 2, 5, 5)).astype(np.int8)
    got = run_graph(from_onnx(model), {"x": x})
    np.testing.assert_array_equal(got[0], ort_run(model, {"x": x})[0])


# ===================================================================================== bad input
@pytest.mark.parametrize("cut", [0, 1, 7, 16, 64, 300, 1000, 5000, 13000, 20000, 26000, -20, -1])
def test_truncated_file(tmp_path: Path, cut: int) -> None:
    data = MNIST_MODEL.read_bytes()
    path = tmp_path / "truncated.onnx"
    path.write_bytes(data[:cut])
    with pytest.raises(ModelFormatError) as info:
        from_onnx(path)
    msg = str(info.value)
    assert "truncated or corrupt" in msg or "invalid ONNX model" in msg or "not an ONNX model" in msg


@pytest.mark.parametrize("data", [b"", b"\x00" * 64, b"this is not an onnx model, just text\n",
                                  bytes(range(256)) * 8, b"\x08\x07\x12\x00\x3a\xff\xff\xff\xff\x0f"])
def test_garbage_bytes(data: bytes) -> None:
    with pytest.raises(ModelFormatError):
        from_onnx(data)


def test_random_byte_corruption_never_escapes_as_a_foreign_exception() -> None:
    data = bytearray(MNIST_MODEL.read_bytes())
    rng = np.random.default_rng(7)
    outcomes = Counter()
    for _ in range(40):
        corrupt = bytearray(data)
        for pos in rng.integers(0, len(data), 3):
            corrupt[pos] = int(rng.integers(0, 256))
        try:
            from_onnx(bytes(corrupt))
            outcomes["imported"] += 1
        except ModelError as exc:  # anything else fails the test with its traceback
            outcomes[type(exc).__name__] += 1
    assert sum(outcomes.values()) == 40


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ModelFormatError, match="does not exist"):
        from_onnx(tmp_path / "nope.onnx")
    with pytest.raises(TypeError, match="path, bytes or an onnx.ModelProto"):
        from_onnx(42)


def test_unknown_operator_names_op_node_and_supported_set() -> None:
    model = _model([
        helper.make_node("Relu", ["x"], ["a"]),
        helper.make_node("LRN", ["a"], ["y"], size=3),
    ], {"x": [1, 3, 4, 4]}, {"y": None})
    with pytest.raises(UnsupportedOperatorError) as info:
        from_onnx(model)
    err = info.value
    assert (err.op, err.node) == ("LRN", 1)
    assert "unsupported operator 'LRN' at node 1" in str(err)
    assert set(err.supported) == set(SUPPORTED_OPS)
    assert "Conv" in str(err) and "Softmax" in str(err)


def test_custom_domain_operator() -> None:
    node = helper.make_node("FusedConv", ["x"], ["y"], domain="com.microsoft")
    graph_def = helper.make_graph([node], "t", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
    model = helper.make_model(graph_def, opset_imports=[helper.make_opsetid("", 13),
                                                        helper.make_opsetid("com.microsoft", 1)])
    with pytest.raises(UnsupportedOperatorError, match="'com.microsoft.FusedConv' at node 0"):
        from_onnx(model)


@pytest.mark.parametrize("elem,name", [(TensorProto.DOUBLE, "DOUBLE"), (TensorProto.FLOAT16, "FLOAT16"),
                                       (TensorProto.STRING, "STRING")])
def test_unsupported_tensor_type_names_the_tensor(elem: int, name: str) -> None:
    graph_def = helper.make_graph([helper.make_node("Identity", ["inp"], ["y"])], "t",
                                  [helper.make_tensor_value_info("inp", elem, [2])],
                                  [helper.make_tensor_value_info("y", elem, [2])])
    model = helper.make_model(graph_def, opset_imports=[helper.make_opsetid("", 13)])
    with pytest.raises(UnsupportedModelError, match=f"input 'inp' has unsupported element type {name}"):
        from_onnx(model)


def test_unsupported_initializer_type_names_the_tensor() -> None:
    graph_def = helper.make_graph([helper.make_node("Add", ["x", "c"], ["y"])], "t",
                                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
                                  [numpy_helper.from_array(np.ones(2, np.float64), "c")])
    model = helper.make_model(graph_def, opset_imports=[helper.make_opsetid("", 13)])
    with pytest.raises(UnsupportedModelError, match="initializer 'c' has unsupported element type DOUBLE"):
        from_onnx(model)


def test_shape_without_dims_is_dynamic() -> None:
    graph_def = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "t",
                                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph_def, opset_imports=[helper.make_opsetid("", 13)])
    with pytest.raises(UnsupportedModelError, match="input 'x' has no shape"):
        from_onnx(model)
    unknown = _model([helper.make_node("Relu", ["x"], ["y"])], {"x": [None, 3]}, {"y": None})
    with pytest.raises(UnsupportedModelError, match=r"input 'x' has a dynamic dimension \(axis 0\)"):
        from_onnx(unknown)


def test_runtime_reshape_shape_is_refused_with_the_node() -> None:
    graph_def = helper.make_graph([helper.make_node("Reshape", ["x", "s"], ["y"], name="flat")], "t",
                                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
                                   helper.make_tensor_value_info("s", TensorProto.INT64, [1])],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [6])])
    model = helper.make_model(graph_def, opset_imports=[helper.make_opsetid("", 13)])
    with pytest.raises(UnsupportedModelError,
                       match=r"node 0 \(Reshape 'flat'\): input 1 \(shape\) 's' must be a constant"):
        from_onnx(model)
    graph = from_onnx(model, freeze={"s": np.array([6], np.int64)})
    assert graph.inputs == ("x",) and graph.tensors["y"].shape == (6,)
    with pytest.raises(UnsupportedModelError, match=r"freeze: \['nope'\] are not graph inputs"):
        from_onnx(model, freeze={"nope": np.zeros(1)})


def test_conv3d_and_bad_attributes_are_named() -> None:
    model = _model([helper.make_node("Conv", ["x", "w"], ["y"])], {"x": [1, 1, 4, 4, 4]}, {"y": None},
                   {"w": _rand(1, 1, 2, 2, 2)})
    with pytest.raises(UnsupportedModelError, match=r"node 0 \(Conv\): only 2-D convolution is supported"):
        from_onnx(model)
    bad_group = _model([helper.make_node("Conv", ["x", "w"], ["y"], group=2)], {"x": [1, 3, 4, 4]},
                       {"y": [1, 2, 4, 4]}, {"w": _rand(2, 3, 1, 1)})
    with pytest.raises(ModelFormatError, match=r"node 0 \(Conv\): group=2 does not fit input channels 3"):
        from_onnx(bad_group)
    bad_reshape = _model([helper.make_node("Reshape", ["x", "s"], ["y"])], {"x": [2, 3]}, {"y": [4, 2]},
                         {"s": np.array([4, -1], np.int64)})
    with pytest.raises(ModelFormatError, match=r"node 0 \(Reshape\): cannot reshape \[2, 3\] to \[4, -1\]"):
        from_onnx(bad_reshape)


def test_ill_formed_graph_is_a_format_error() -> None:
    model = _model([helper.make_node("Relu", ["x"], ["y"])], {"x": [2]}, {"y": None})
    model.graph.node[0].input[0] = "undefined_tensor"
    with pytest.raises(ModelFormatError, match="undefined_tensor"):
        from_onnx(model)
    broadcast = _model([helper.make_node("Add", ["x", "c"], ["y"])], {"x": [2, 3]}, {"y": [2, 3]},
                       {"c": _rand(4)})
    with pytest.raises(ModelFormatError, match=r"node 0 \(Add\): input shapes do not broadcast"):
        from_onnx(broadcast)
