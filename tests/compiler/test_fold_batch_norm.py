"""The batch_norm op (utvm.ops.batch_norm) and the pass `fold_batch_norm`, tested on their own.

Folding must not change what a graph computes: the folded graph equals the unfolded reference within
1e-5 relative / 1e-4 absolute. Cases the pass must leave alone are checked to come back unchanged.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from utvm.compiler.passes.fold_batch_norm import fold_batch_norm
from utvm.errors import GraphError
from utvm.ir import Graph, Node, Quantization, Tensor, run_reference, verify
from utvm.ops import batch_norm, op_module

RNG = np.random.default_rng(42)
EPS = 1e-3


def _f32(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def _const(name: str, data: np.ndarray) -> Tensor:
    return Tensor(name, data.shape, str(data.dtype), None, data)


def _bn_params(c: int, prefix: str = "bn") -> list[Tensor]:
    var = RNG.uniform(0.2, 3.0, c).astype(np.float32)
    return [_const(f"{prefix}_scale", _f32(c)), _const(f"{prefix}_bias", _f32(c)),
            _const(f"{prefix}_mean", _f32(c)), _const(f"{prefix}_var", var)]


def _bn_node(x: str, out: str, prefix: str = "bn") -> Node:
    params = tuple(f"{prefix}_{role}" for role in ("scale", "bias", "mean", "var"))
    return Node("batch_norm", (x, *params), (out,), {"epsilon": EPS}, prefix)


def _graph(tensors: list[Tensor], nodes: list[Node], inputs: tuple[str, ...],
           outputs: tuple[str, ...]) -> Graph:
    return Graph({t.name: t for t in tensors}, tuple(nodes), inputs, outputs, "bn_test")


def _conv_bn(op: str = "conv2d", bias: bool = True, activation: str = "none") -> Graph:
    """x[1,6,7,4] -> conv -> y_conv -> batch_norm -> y."""
    c_in = 4
    if op == "conv2d":
        w, c_out = _f32(6, 3, 3, c_in), 6
        attrs = {"strides": (1, 1), "dilation": (1, 1), "padding": (1, 1, 1, 1), "groups": 1}
    elif op == "grouped":
        op, w, c_out = "conv2d", _f32(6, 3, 3, 2), 6
        attrs = {"strides": (2, 2), "dilation": (1, 1), "padding": (1, 1, 1, 1), "groups": 2}
    else:  # depthwise, multiplier 2
        w, c_out = _f32(1, 3, 3, 2 * c_in), 2 * c_in
        attrs = {"strides": (1, 1), "dilation": (1, 1), "padding": (0, 0, 0, 0), "depth_multiplier": 2}
    attrs["activation"] = activation
    x = Tensor("x", (1, 6, 7, c_in), "float32")
    tensors = [x, _const("w", w), *_bn_params(c_out)]
    inputs = ("x", "w") + (("b",) if bias else ())
    if bias:
        tensors.append(_const("b", _f32(c_out)))
    conv = Node(op, inputs, ("y_conv",), attrs, "conv")
    g0 = _graph(tensors, [conv], ("x",), ("y_conv",))
    (shape, _), = op_module(op).infer(conv, g0)
    tensors += [Tensor("y_conv", shape, "float32"), Tensor("y", shape, "float32")]
    return _graph(tensors, [conv, _bn_node("y_conv", "y")], ("x",), ("y",))


def _dense_bn() -> Graph:
    tensors = [Tensor("x", (3, 5), "float32"), _const("w", _f32(4, 5)), _const("b", _f32(4)), *_bn_params(4),
               Tensor("h", (3, 4), "float32"), Tensor("y", (3, 4), "float32")]
    nodes = [Node("dense", ("x", "w", "b"), ("h",), {"activation": "none"}, "fc"), _bn_node("h", "y")]
    return _graph(tensors, nodes, ("x",), ("y",))


def _run(g: Graph, x: np.ndarray) -> np.ndarray:
    return run_reference(g, {"x": x})[g.outputs[0]]


def _ops(g: Graph) -> Counter[str]:
    return Counter(n.op for n in g.nodes)


# ===================================================================================== the op
def test_reference_is_the_batch_norm_formula() -> None:
    g = _graph([Tensor("x", (2, 3, 5), "float32"), *_bn_params(5), Tensor("y", (2, 3, 5), "float32")],
               [_bn_node("x", "y")], ("x",), ("y",))
    x = _f32(2, 3, 5)
    s, b, m, v = (g.tensors[n].data.astype(np.float64) for n in g.nodes[0].inputs[1:])
    want = (x.astype(np.float64) - m) / np.sqrt(v + EPS) * s + b
    got = run_reference(g, {"x": x})["y"]
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    params = batch_norm.prepare(g.nodes[0], g)
    assert params.channels == 5 and params.multiplier is not None and params.offset is not None


def test_runtime_parameters_give_the_same_result_as_constants() -> None:
    const = _graph([Tensor("x", (4, 3), "float32"), *_bn_params(3), Tensor("y", (4, 3), "float32")],
                   [_bn_node("x", "y")], ("x",), ("y",))
    names = list(const.nodes[0].inputs[1:])
    tensors = {k: (t.replace(data=None) if k in names else t) for k, t in const.tensors.items()}
    runtime = const.replace(tensors=tensors, inputs=("x", *names))
    p = batch_norm.prepare(runtime.nodes[0], runtime)
    assert p.multiplier is None and p.offset is None
    x = _f32(4, 3)
    feeds = {"x": x, **{n: const.tensors[n].data for n in names}}
    np.testing.assert_array_equal(run_reference(runtime, feeds)["y"], run_reference(const, {"x": x})["y"])


def test_infer_names_the_bad_tensor() -> None:
    g = _graph([Tensor("x", (2, 4), "float32"), *_bn_params(3), Tensor("y", (2, 4), "float32")],
               [_bn_node("x", "y")], ("x",), ("y",))
    with pytest.raises(GraphError, match=r"node 0 \(batch_norm 'bn'\): scale 'bn_scale' has shape \[3\], "
                                         r"expected \[4\]"):
        batch_norm.infer(g.nodes[0], g)
    q = Tensor("x", (2, 3), "int8", Quantization((0.5,), (0,)))
    g8 = _graph([q, *_bn_params(3), Tensor("y", (2, 3), "float32")], [_bn_node("x", "y")], ("x",), ("y",))
    with pytest.raises(GraphError, match="input 'x' has dtype int8; supported: float32"):
        batch_norm.infer(g8.nodes[0], g8)
    no_eps = g.replace(nodes=(g.nodes[0].replace(attrs={}),))
    with pytest.raises(GraphError, match="attribute 'epsilon' is missing"):
        batch_norm.infer(no_eps.nodes[0], no_eps)


# ===================================================================================== the pass
@pytest.mark.parametrize("op,bias", [("conv2d", True), ("conv2d", False), ("grouped", True),
                                     ("depthwise_conv2d", True), ("depthwise_conv2d", False)])
def test_fold_into_conv(op: str, bias: bool) -> None:
    g = _conv_bn(op, bias)
    folded = fold_batch_norm(g)
    verify(folded)
    assert "batch_norm" not in _ops(folded) and len(folded.nodes) == 1
    conv = folded.nodes[0]
    assert conv.name == "conv" and conv.outputs == ("y",) and len(conv.inputs) == 3
    assert {k: v for k, v in conv.attrs.items()} == dict(g.nodes[0].attrs), "attributes are kept"
    assert "y_conv" not in folded.tensors and "bn_scale" not in folded.tensors, "dead tensors are dropped"
    for _ in range(3):
        x = _f32(1, 6, 7, 4)
        np.testing.assert_allclose(_run(folded, x), _run(g, x), rtol=1e-5, atol=1e-4)
    assert fold_batch_norm(folded) is folded, "nothing left to fold: the same graph comes back"


def test_fold_into_dense() -> None:
    g = _dense_bn()
    folded = fold_batch_norm(g)
    verify(folded)
    assert _ops(folded) == Counter({"dense": 1})
    x = _f32(3, 5)
    np.testing.assert_allclose(_run(folded, x), _run(g, x), rtol=1e-5, atol=1e-4)


def test_the_input_graph_is_not_modified() -> None:
    g = _conv_bn()
    before = g.to_json()
    fold_batch_norm(g)
    assert g.to_json() == before


def test_fold_in_the_middle_of_a_graph_keeps_order() -> None:
    g = _conv_bn()
    extra = [Tensor("z", g.tensors["y"].shape, "float32")]
    relu = Node("relu", ("y",), ("z",), {}, "after")
    g = g.replace(tensors={**g.tensors, **{t.name: t for t in extra}}, nodes=(*g.nodes, relu), outputs=("z",))
    folded = fold_batch_norm(g)
    verify(folded)
    assert [n.op for n in folded.nodes] == ["conv2d", "relu"]
    x = _f32(1, 6, 7, 4)
    np.testing.assert_allclose(run_reference(folded, {"x": x})["z"], run_reference(g, {"x": x})["z"],
                               rtol=1e-5, atol=1e-4)


def _unchanged(g: Graph) -> None:
    folded = fold_batch_norm(g)
    assert folded.nodes == g.nodes
    x = _f32(*g.tensors["x"].shape)
    for name in g.outputs:
        np.testing.assert_array_equal(run_reference(folded, {"x": x})[name], run_reference(g, {"x": x})[name])


def test_not_folded_when_the_conv_has_an_activation() -> None:
    _unchanged(_conv_bn(activation="relu"))


def test_not_folded_when_the_conv_output_is_used_elsewhere() -> None:
    g = _conv_bn()
    extra = Tensor("side", g.tensors["y_conv"].shape, "float32")
    g = g.replace(tensors={**g.tensors, "side": extra},
                  nodes=(*g.nodes, Node("relu", ("y_conv",), ("side",), {}, "side")), outputs=("y", "side"))
    _unchanged(g)


def test_not_folded_when_the_conv_output_is_a_graph_output() -> None:
    g = _conv_bn()
    _unchanged(g.replace(outputs=("y", "y_conv")))


def test_not_folded_with_runtime_parameters_or_weights() -> None:
    g = _conv_bn()
    runtime_var = g.replace(tensors={**g.tensors, "bn_var": g.tensors["bn_var"].replace(data=None)},
                            inputs=("x", "bn_var"))
    folded = fold_batch_norm(runtime_var)
    assert folded.nodes == runtime_var.nodes
    runtime_w = g.replace(tensors={**g.tensors, "w": g.tensors["w"].replace(data=None)}, inputs=("x", "w"))
    assert fold_batch_norm(runtime_w).nodes == runtime_w.nodes


def test_not_folded_after_other_ops() -> None:
    c = 3
    tensors = [Tensor("x", (2, 4, 4, c), "float32"), _const("k", _f32(1, 1, 1, c)), *_bn_params(c),
               Tensor("a", (2, 4, 4, c), "float32"), Tensor("y", (2, 4, 4, c), "float32")]
    nodes = [Node("add", ("x", "k"), ("a",), {"activation": "none"}, "add"), _bn_node("a", "y")]
    _unchanged(_graph(tensors, nodes, ("x",), ("y",)))
    # and a batch_norm straight on a graph input has no producer at all
    tensors2 = [Tensor("x", (2, c), "float32"), *_bn_params(c), Tensor("y", (2, c), "float32")]
    _unchanged(_graph(tensors2, [_bn_node("x", "y")], ("x",), ("y",)))


def test_two_batch_norms_in_a_row_both_fold() -> None:
    g = _conv_bn()
    shape = g.tensors["y"].shape
    tensors = {**g.tensors, **{t.name: t for t in _bn_params(6, "bn2")}, "y2": Tensor("y2", shape, "float32")}
    g = g.replace(tensors=tensors, nodes=(*g.nodes, _bn_node("y", "y2", "bn2")), outputs=("y2",))
    folded = fold_batch_norm(g)
    verify(folded)
    assert [n.op for n in folded.nodes] == ["conv2d"] and folded.nodes[0].outputs == ("y2",)
    x = _f32(1, 6, 7, 4)
    np.testing.assert_allclose(run_reference(folded, {"x": x})["y2"], run_reference(g, {"x": x})["y2"],
                               rtol=1e-5, atol=1e-4)
