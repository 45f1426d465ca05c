"""The graph passes of utvm.compiler.passes, each on its own, and the PIPELINE over the corpus models.

Every rewrite must keep what the graph computes: int8 graphs bit-exactly, float graphs within 1e-5
(QDQ fusion, by design, within one output LSB). utvm.ir.verify runs on every result.
"""

from __future__ import annotations

import numpy as np
import pytest

from utvm.compiler.passes.eliminate_dead_nodes import eliminate_dead_nodes
from utvm.compiler.passes.fold_constants import fold_constants
from utvm.compiler.passes.fuse_activation import fuse_activation
from utvm.compiler.passes.fuse_bias import fuse_bias
from utvm.compiler.passes.fuse_requantize import fuse_requantize
from utvm.compiler.passes.remove_noop_reshapes import remove_noop_reshapes
from utvm.compiler.passes.remove_qdq_pairs import remove_qdq_pairs
from utvm.compiler.passes.validate import validate
from utvm.compiler.pipeline import PIPELINE, run_pipeline
from utvm.errors import GraphError
from utvm.frontend import load
from utvm.ir import Graph, Node, Quantization, Tensor, run_reference, verify
from utvm.support.models import models_dir

RNG = np.random.default_rng(5)
MODELS = models_dir()
Q = Quantization


def graph(tensors: list[Tensor], nodes: list[Node], inputs: tuple[str, ...], outputs: tuple[str, ...]) -> Graph:
    g = Graph({t.name: t for t in tensors}, nodes, inputs, outputs, "t")
    verify(g)
    return g


def f32(name: str, shape: tuple[int, ...], const: bool = False) -> Tensor:
    return Tensor(name, shape, "float32", None, RNG.standard_normal(shape).astype(np.float32) if const else None)


def i8(name: str, shape: tuple[int, ...], q: Quantization, data: np.ndarray | None = None) -> Tensor:
    return Tensor(name, shape, "int8", q, data)


def inputs_for(g: Graph) -> dict[str, np.ndarray]:
    out = {}
    for n in g.inputs:
        t = g.tensors[n]
        out[n] = (RNG.integers(-128, 128, t.shape).astype(np.int8) if t.dtype == "int8"
                  else RNG.standard_normal(t.shape).astype(np.float32))
    return out


def assert_same(g: Graph, h: Graph, atol: float = 1e-5, runs: int = 3) -> None:
    verify(h)
    assert h.inputs == g.inputs and h.outputs == g.outputs
    for _ in range(runs):
        ins = inputs_for(g)
        for name, a in run_reference(g, ins).items():
            b = run_reference(h, ins)[name]
            if a.dtype == np.float32:
                np.testing.assert_allclose(b, a, rtol=1e-5, atol=atol)
            else:
                np.testing.assert_array_equal(b, a)


CONV_ATTRS = {"strides": (1, 1), "dilation": (1, 1), "padding": (1, 1, 1, 1), "groups": 1, "activation": "none"}


# --- validate / eliminate_dead_nodes -------------------------------------------------------------------------
def test_validate_returns_graph_and_names_bad_node() -> None:
    g = graph([f32("x", (1, 4)), f32("y", (1, 4))], [Node("relu", ("x",), ("y",), {}, "r")], ("x",), ("y",))
    assert validate(g) is g
    bad = g.replace(tensors={**g.tensors, "y": f32("y", (1, 5))})
    with pytest.raises(GraphError, match=r"node 0 \(relu 'r'\)"):
        validate(bad)


def test_eliminate_dead_nodes() -> None:
    g = graph([f32("x", (1, 4)), f32("a", (1, 4)), f32("b", (1, 4)), f32("y", (1, 4))],
              [Node("relu", ("x",), ("a",), {}, "dead1"), Node("tanh", ("a",), ("b",), {}, "dead2"),
               Node("logistic", ("x",), ("y",), {}, "live")], ("x",), ("y",))
    h = eliminate_dead_nodes(g)
    assert [n.name for n in h.nodes] == ["live"] and set(h.tensors) == {"x", "y"}
    assert eliminate_dead_nodes(h) is h


# --- fold_constants ------------------------------------------------------------------------------------------
def test_fold_constants_dequantizes_weights_and_folds_chains() -> None:
    wq = RNG.integers(-127, 128, (4, 3, 3, 2)).astype(np.int8)
    qw = Q((0.01, 0.02, 0.03, 0.04), (0, 0, 0, 0), 0)
    tensors = [f32("x", (1, 5, 5, 2)), i8("wq", (4, 3, 3, 2), qw, wq), f32("wf", (4, 3, 3, 2)),
               f32("flat", (72,), const=True), f32("b2", (4, 3, 3, 2)), f32("w", (4, 3, 3, 2)), f32("y", (1, 5, 5, 4))]
    nodes = [Node("dequantize", ("wq",), ("wf",), {}, "dq"),
             Node("reshape", ("flat",), ("b2",), {"shape": (4, 3, 3, 2)}, "rs"),
             Node("add", ("wf", "b2"), ("w",), {"activation": "none"}, "sum"),
             Node("conv2d", ("x", "w", ""), ("y",), CONV_ATTRS, "conv")]
    g = graph(tensors, nodes, ("x",), ("y",))
    h = fold_constants(g)
    assert [n.op for n in h.nodes] == ["conv2d"]
    w = h.tensors["w"].data
    want = (wq * np.array(qw.scale).reshape(4, 1, 1, 1)).astype(np.float32) + g.tensors["flat"].data.reshape(4, 3, 3, 2)
    np.testing.assert_allclose(w, want, rtol=1e-6)
    assert_same(g, h)
    assert fold_constants(h) is h


def test_fold_constants_keeps_nodes_writing_graph_outputs() -> None:
    g = graph([f32("c", (2, 2), const=True), f32("y", (2, 2))], [Node("relu", ("c",), ("y",), {}, "r")], (), ("y",))
    assert fold_constants(g) is g


# --- remove_noop_reshapes ------------------------------------------------------------------------------------
def test_remove_noop_reshapes_and_identity_transposes() -> None:
    tensors = [f32("x", (2, 3)), f32("a", (2, 3)), f32("b", (2, 3)), f32("c", (3, 2)), f32("d", (6,)),
               f32("y", (6,))]
    nodes = [Node("relu", ("x",), ("a",), {}, "r"),
             Node("reshape", ("a",), ("b",), {"shape": (2, 3)}, "same"),
             Node("reshape", ("b",), ("c",), {"shape": (3, 2)}, "inner"),
             Node("reshape", ("c",), ("d",), {"shape": (6,)}, "outer"),
             Node("transpose", ("d",), ("y",), {"perm": (0,)}, "id")]
    g = graph(tensors, nodes, ("x",), ("y",))
    h = remove_noop_reshapes(g)
    assert [(n.op, n.name) for n in h.nodes] == [("relu", "r"), ("reshape", "outer")]
    assert h.nodes[1].inputs == ("a",) and h.nodes[1].outputs == ("y",)  # the relu's result, reshaped, is the output
    assert_same(g, h)


def test_noop_reshape_between_graph_input_and_output_stays() -> None:
    g = graph([f32("x", (2, 3)), f32("y", (2, 3))], [Node("reshape", ("x",), ("y",), {"shape": (2, 3)}, "r")],
              ("x",), ("y",))
    assert remove_noop_reshapes(g) is g


# --- remove_qdq_pairs ----------------------------------------------------------------------------------------
def test_remove_qdq_pairs_exact_round_trips_only() -> None:
    qa, qb = Q((0.05,), (3,)), Q((0.07,), (-1,))
    tensors = [i8("x", (8,), qa), f32("f", (8,)), i8("same", (8,), qa), i8("other", (8,), qb),
               i8("id", (8,), qb), i8("y", (8,), qb)]
    nodes = [Node("dequantize", ("x",), ("f",), {}, "dq"),
             Node("quantize", ("f",), ("same",), {}, "q_same"),      # exact round trip: removed with dq
             Node("quantize", ("same",), ("other",), {}, "requant"),  # a real requantization: kept
             Node("quantize", ("other",), ("id",), {}, "q_id"),       # identity requantization: removed
             Node("relu", ("id",), ("y",), {}, "r")]
    g = graph(tensors, nodes, ("x",), ("y",))
    h = remove_qdq_pairs(g)
    assert [n.name for n in h.nodes] == ["requant", "r"]
    assert h.nodes[0].inputs == ("x",) and h.nodes[1].inputs == ("other",)
    ins = {"x": np.arange(-128, 128, 32, dtype=np.int8)}
    np.testing.assert_array_equal(run_reference(g, ins)["y"], run_reference(h, ins)["y"])
    assert_same(g, h)


def test_dequantize_quantize_round_trip_is_exact_for_every_int8() -> None:
    q = Q((0.0137,), (-7,))
    g = graph([i8("x", (256,), q), f32("f", (256,)), i8("y", (256,), q)],
              [Node("dequantize", ("x",), ("f",), {}, "dq"), Node("quantize", ("f",), ("y",), {}, "q")], ("x",), ("y",))
    x = np.arange(-128, 128).astype(np.int8)
    np.testing.assert_array_equal(run_reference(g, {"x": x})["y"], x)


# --- fuse_bias -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("const_shape", [(4,), (1, 1, 1, 4), (1,), ()])
def test_fuse_bias_into_conv(const_shape: tuple[int, ...]) -> None:
    tensors = [f32("x", (1, 5, 5, 2)), f32("w", (4, 3, 3, 2), const=True), f32("b", (4,), const=True),
               f32("c", const_shape, const=True), f32("h", (1, 5, 5, 4)), f32("y", (1, 5, 5, 4))]
    nodes = [Node("conv2d", ("x", "w", "b"), ("h",), CONV_ATTRS, "conv"),
             Node("add", ("c", "h"), ("y",), {"activation": "relu"}, "bias")]
    g = graph(tensors, nodes, ("x",), ("y",))
    h = fuse_bias(g)
    assert len(h.nodes) == 1
    fused = h.nodes[0]
    assert fused.op == "conv2d" and fused.name == "conv" and fused.outputs == ("y",)
    assert fused.attrs["activation"] == "relu" and fused.attrs["padding"] == (1, 1, 1, 1)
    assert_same(g, h)


def test_fuse_bias_dense_sub_and_refusals() -> None:
    tensors = [f32("x", (2, 3)), f32("w", (4, 3), const=True), f32("c", (4,), const=True), f32("h", (2, 4)),
               f32("y", (2, 4))]
    sub = graph(tensors, [Node("dense", ("x", "w", ""), ("h",), {"activation": "none"}, "fc"),
                          Node("sub", ("h", "c"), ("y",), {"activation": "none"}, "s")], ("x",), ("y",))
    h = fuse_bias(sub)
    assert [n.op for n in h.nodes] == ["dense"] and h.nodes[0].inputs[2]
    assert_same(sub, h)
    reversed_sub = sub.replace(nodes=(sub.nodes[0], sub.nodes[1].replace(inputs=("c", "h"))))
    assert fuse_bias(reversed_sub) is reversed_sub  # c - h is not a bias
    also_output = sub.replace(outputs=("y", "h"))
    assert fuse_bias(also_output) is also_output  # h is read elsewhere
    rows = sub.replace(tensors={**sub.tensors, "c": f32("c", (2, 1), const=True)})
    assert fuse_bias(rows) is rows  # varies along rows, not channels


def test_fuse_bias_leaves_int8_adds() -> None:
    qx, qy = Q((0.1,), (0,)), Q((0.2,), (3,))
    w = RNG.integers(-127, 128, (4, 3)).astype(np.int8)
    tensors = [i8("x", (2, 3), qx), i8("w", (4, 3), Q((0.01,), (0,)), w), i8("h", (2, 4), qy),
               i8("c", (4,), qy, np.ones(4, np.int8)), i8("y", (2, 4), qy)]
    g = graph(tensors, [Node("dense", ("x", "w", ""), ("h",), {"activation": "none"}, "fc"),
                        Node("add", ("h", "c"), ("y",), {"activation": "none"}, "a")], ("x",), ("y",))
    assert fuse_bias(g) is g


# --- fuse_activation -----------------------------------------------------------------------------------------
@pytest.mark.parametrize(("op", "attrs", "fused"), [
    ("relu", {}, "relu"), ("relu6", {}, "relu6"), ("clip", {"min": 0.0, "max": 6.0}, "relu6"),
    ("clip", {"min": -1.0, "max": 1.0}, "relu_n1_to_1"), ("clip", {"min": 0.0, "max": float("inf")}, "relu"),
    ("clip", {"min": 0.0, "max": 3.0}, None)])
def test_fuse_activation_float(op: str, attrs: dict, fused: str | None) -> None:
    tensors = [f32("x", (1, 5, 5, 2)), f32("w", (4, 3, 3, 2), const=True), f32("h", (1, 5, 5, 4)),
               f32("y", (1, 5, 5, 4))]
    g = graph(tensors, [Node("conv2d", ("x", "w", ""), ("h",), CONV_ATTRS, "conv"),
                        Node(op, ("h",), ("y",), attrs, "act")], ("x",), ("y",))
    h = fuse_activation(g)
    if fused is None:
        assert h is g
        return
    assert [(n.op, n.name, n.attrs["activation"]) for n in h.nodes] == [("conv2d", "conv", fused)]
    assert_same(g, h)


@pytest.mark.parametrize("producer", ["conv2d", "add", "max_pool2d"])
def test_fuse_activation_int8_is_bit_exact(producer: str) -> None:
    qx, qh = Q((0.05,), (-3,)), Q((0.11,), (9,))
    w = RNG.integers(-127, 128, (4, 3, 3, 4)).astype(np.int8)
    tensors = [i8("x", (1, 5, 5, 4), qx), i8("x2", (1, 5, 5, 4), qx),
               i8("w", (4, 3, 3, 4), Q((0.01, 0.02, 0.015, 0.03), (0, 0, 0, 0), 0), w),
               i8("h", (1, 5, 5, 4), qh if producer != "max_pool2d" else qx),
               i8("y", (1, 5, 5, 4), qh if producer != "max_pool2d" else qx)]
    if producer == "conv2d":
        first = Node("conv2d", ("x", "w", ""), ("h",), CONV_ATTRS, "p")
    elif producer == "add":
        first = Node("add", ("x", "x2"), ("h",), {"activation": "none"}, "p")
    else:
        first = Node("max_pool2d", ("x",), ("h",), {"pool": (3, 3), "strides": (1, 1), "padding": (1, 1, 1, 1),
                                                     "dilation": (1, 1), "ceil_mode": False, "activation": "none"}, "p")
    ins = ("x", "x2") if producer == "add" else ("x",)
    for act in ("relu", "relu6"):
        g = graph(tensors, [first, Node(act, ("h",), ("y",), {}, "act")], ins, ("y",))
        h = fuse_activation(g)
        assert [n.attrs["activation"] for n in h.nodes] == [act]
        assert_same(g, h, runs=4)


def test_fuse_activation_int8_requantizing_relu_is_kept() -> None:
    q1, q2 = Q((0.05,), (-3,)), Q((0.1,), (-128,))
    g = graph([i8("a", (8,), q1), i8("b", (8,), q1), i8("h", (8,), q1), i8("y", (8,), q2)],
              [Node("add", ("a", "b"), ("h",), {"activation": "none"}, "p"), Node("relu", ("h",), ("y",), {}, "r")],
              ("a", "b"), ("y",))
    assert fuse_activation(g) is g


# --- fuse_requantize (QDQ) -------------------------------------------------------------------------------------
@pytest.mark.parametrize("op", ["conv2d", "depthwise_conv2d", "dense"])
def test_fuse_requantize_qdq_to_int8(op: str) -> None:
    qx, qy = Q((0.04,), (5,)), Q((0.3,), (-10,))
    if op == "dense":
        wshape, xshape, yshape, axis, attrs = (6, 8), (3, 8), (3, 6), 0, {"activation": "relu"}
    elif op == "conv2d":
        wshape, xshape, yshape, axis = (6, 3, 3, 4), (1, 6, 6, 4), (1, 6, 6, 6), 0
        attrs = {**CONV_ATTRS, "activation": "relu6"}
    else:
        wshape, xshape, yshape, axis = (1, 3, 3, 6), (1, 6, 6, 3), (1, 6, 6, 6), 3
        attrs = {"strides": (1, 1), "dilation": (1, 1), "padding": (1, 1, 1, 1), "depth_multiplier": 2,
                 "activation": "none"}
    scales = tuple(float(s) for s in RNG.uniform(0.005, 0.02, wshape[axis]))
    wq = RNG.integers(-127, 128, wshape).astype(np.int8)
    tensors = [i8("xq", xshape, qx), f32("xf", xshape), i8("wq", wshape, Q(scales, (0,) * len(scales), axis), wq),
               f32("wf", wshape), f32("b", (wshape[axis],), const=True), f32("yf", yshape), i8("yq", yshape, qy)]
    nodes = [Node("dequantize", ("xq",), ("xf",), {}, "dqx"), Node("dequantize", ("wq",), ("wf",), {}, "dqw"),
             Node(op, ("xf", "wf", "b"), ("yf",), attrs, "layer"), Node("quantize", ("yf",), ("yq",), {}, "q")]
    g = graph(tensors, nodes, ("xq",), ("yq",))
    h = eliminate_dead_nodes(fuse_requantize(g))
    verify(h)
    assert [(n.op, n.name) for n in h.nodes] == [(op, "layer")]
    layer = h.nodes[0]
    assert layer.inputs[:2] == ("xq", "wq") and layer.outputs == ("yq",) and layer.attrs == nodes[2].attrs
    bias = h.tensors[layer.inputs[2]]
    assert bias.dtype == "int32" and bias.quant is not None and bias.quant.axis == 0
    for _ in range(5):
        ins = inputs_for(g)
        a = run_reference(g, ins)["yq"].astype(int)
        b = run_reference(h, ins)["yq"].astype(int)
        assert np.max(np.abs(a - b)) <= 1  # the float graph vs the int8 kernel: one rounding of the result


# --- the pipeline ---------------------------------------------------------------------------------------------
def test_pipeline_lists_named_passes() -> None:
    names = [n for n, _ in PIPELINE]
    assert names[0] == "validate" and names[-1] == "validate"
    for required in ("fold_constants", "fuse_bias", "fuse_activation", "remove_noop_reshapes", "remove_qdq_pairs",
                     "fuse_requantize", "fold_batch_norm"):
        assert required in names


@pytest.mark.parametrize("rel", ["mlperf_tiny/kws_ref_model.tflite", "mlperf_tiny/pretrainedResnet_quant.tflite",
                                 "tflm/micro_speech_quantized.tflite", "tflm/hello_world_float.tflite",
                                 "onnx/mnist-8/model.onnx"])
def test_pipeline_preserves_shared_models(rel: str) -> None:
    g = load(MODELS / rel)
    seen: list[str] = []
    h = run_pipeline(g, on_pass=lambda name, graph: seen.append(name))
    assert seen == [n for n, _ in PIPELINE]
    assert len(h.nodes) <= len(g.nodes)
    assert_same(g, h, atol=1e-4)
    if rel.endswith(".onnx"):
        assert not any(n.op in ("relu", "add") for n in h.nodes)  # biases and relus fused into conv / dense
