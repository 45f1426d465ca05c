"""utvm.ir.verify (errors name the node and tensor) and utvm.ir.run_reference (inputs checked by name,
outputs in graph order, intermediates, rounding modes)."""

from __future__ import annotations

import numpy as np
import pytest

from utvm.errors import GraphError, UnsupportedOperatorError
from utvm.ir import Graph, Node, Quantization, Tensor, run_reference, verify
from utvm.ir.interp import prepare_graph


def float_graph() -> Graph:
    rng = np.random.default_rng(0)
    w = rng.standard_normal((3, 4)).astype(np.float32)
    tensors = [Tensor("x", (2, 4), "float32"), Tensor("w", (3, 4), "float32", None, w),
               Tensor("h", (2, 3), "float32"), Tensor("y", (2, 3), "float32"), Tensor("s", (2, 3), "float32")]
    nodes = [Node("dense", ("x", "w", ""), ("h",), {"activation": "none"}, "fc"),
             Node("relu", ("h",), ("y",), {}, "act"),
             Node("softmax", ("y",), ("s",), {"axis": -1, "beta": 1.0}, "sm")]
    return Graph({t.name: t for t in tensors}, nodes, ("x",), ("s", "h"), "f")


def test_verify_accepts_a_good_graph() -> None:
    verify(float_graph())


def test_verify_wrong_declared_shape_names_node_and_tensor() -> None:
    g = float_graph()
    g = g.replace(tensors={**g.tensors, "y": Tensor("y", (2, 4), "float32")})
    with pytest.raises(GraphError, match=r"node 1 \(relu 'act'\): output 'y' is declared float32\[2, 4\] but the op "
                                         r"computes float32\[2, 3\]"):
        verify(g)


def test_verify_use_before_definition() -> None:
    g = float_graph()
    g = g.replace(nodes=(g.nodes[1], g.nodes[0], g.nodes[2]))
    with pytest.raises(GraphError, match=r"node 0 \(relu 'act'\): input 0 'h' is used before it is computed"):
        verify(g)


def test_verify_unknown_op_and_missing_tensor() -> None:
    g = float_graph()
    bad = g.replace(nodes=(*g.nodes, Node("frobnicate", ("s",), ("s",), {}, "f")))
    with pytest.raises(UnsupportedOperatorError, match="'frobnicate' at node 3"):
        verify(bad)
    bad = g.replace(nodes=(g.nodes[0].replace(inputs=("x", "nope", "")), *g.nodes[1:]))
    with pytest.raises(GraphError, match=r"node 0 \(dense 'fc'\): input 1 names tensor 'nope'"):
        verify(bad)


def test_verify_double_producer_and_dtype_mismatch() -> None:
    g = float_graph()
    bad = g.replace(nodes=(*g.nodes, Node("relu", ("y",), ("h",), {}, "again")))
    with pytest.raises(GraphError, match=r"node 3 \(relu 'again'\): output 'h' is already produced by node 0"):
        verify(bad)
    q = Quantization((0.1,), (0,))
    tensors = {"a": Tensor("a", (4,), "int8", q), "b": Tensor("b", (4,), "float32"), "c": Tensor("c", (4,), "int8", q)}
    g2 = Graph(tensors, (Node("add", ("a", "b"), ("c",), {"activation": "none"}, "mix"),), ("a", "b"), ("c",))
    with pytest.raises(GraphError, match=r"node 0 \(add 'mix'\): inputs 'a' \(int8\) and 'b' \(float32\) differ"):
        verify(g2)


def test_verify_bad_attribute_names_node() -> None:
    g = float_graph()
    bad = g.replace(nodes=(g.nodes[0].replace(attrs={"activation": "gelu"}), *g.nodes[1:]))
    with pytest.raises(GraphError, match=r"node 0 \(dense 'fc'\): unknown activation 'gelu'"):
        verify(bad)


def test_verify_output_never_computed() -> None:
    g = float_graph().replace(outputs=("s", "ghost"))
    with pytest.raises(GraphError, match="graph output 'ghost'"):
        verify(g)


def test_run_reference_outputs_in_graph_order_and_values() -> None:
    g = float_graph()
    x = np.random.default_rng(1).standard_normal((2, 4)).astype(np.float32)
    out = run_reference(g, {"x": x})
    assert list(out) == ["s", "h"]
    h = x @ g.tensors["w"].data.T
    np.testing.assert_allclose(out["h"], h, rtol=1e-6)
    e = np.exp(np.maximum(h, 0) - np.maximum(h, 0).max(axis=1, keepdims=True))
    np.testing.assert_allclose(out["s"], e / e.sum(axis=1, keepdims=True), rtol=1e-6)
    inter = run_reference(g, {"x": x}, intermediates=True)
    assert list(inter) == ["x", "h", "y", "s"]


def test_run_reference_checks_inputs_by_name() -> None:
    g = float_graph()
    x = np.zeros((2, 4), np.float32)
    with pytest.raises(GraphError, match="missing input 'x'"):
        run_reference(g, {})
    with pytest.raises(GraphError, match=r"unknown input\(s\) \['q'\]"):
        run_reference(g, {"x": x, "q": x})
    with pytest.raises(GraphError, match=r"input 'x': shape \[4, 2\]"):
        run_reference(g, {"x": x.reshape(4, 2)})
    with pytest.raises(GraphError, match="input 'x': dtype float64"):
        run_reference(g, {"x": x.astype(np.float64)})
    with pytest.raises(GraphError, match="must be a dict"):
        run_reference(g, [x])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="rounding"):
        run_reference(g, {"x": x}, rounding="banker")


def test_prepare_graph_gives_params_per_node() -> None:
    params = prepare_graph(float_graph())
    assert [type(p).__name__ for p in params] == ["DenseParams", "ActivationParams", "SoftmaxParams"]
    assert params[0].k == 4 and params[0].units == 3 and not params[0].has_bias
