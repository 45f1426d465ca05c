"""utvm.ir.graph: tensors with quantization (per-channel included), nodes, graphs; JSON round trip and
the text dump; constructor checks naming the tensor."""

from __future__ import annotations

import json

import numpy as np
import pytest

from utvm.errors import GraphError, ModelFormatError
from utvm.ir import Graph, Node, Quantization, Tensor


def small_graph() -> Graph:
    w = np.arange(2 * 3 * 3 * 4, dtype=np.int8).reshape(2, 3, 3, 4)
    b = np.array([100, -200], dtype=np.int32)
    tensors = [
        Tensor("x", (1, 5, 5, 4), "int8", Quantization((0.05,), (-3,))),
        Tensor("w", w.shape, "int8", Quantization((0.01, 0.02), (0, 0), 0), w),
        Tensor("b", (2,), "int32", Quantization((0.0005, 0.001), (0, 0), 0), b),
        Tensor("y", (1, 5, 5, 2), "int8", Quantization((0.2,), (4,))),
        Tensor("z", (1, 50), "int8", Quantization((0.2,), (4,))),
    ]
    nodes = [
        Node("conv2d", ("x", "w", "b"), ("y",), {"strides": (1, 1), "dilation": (1, 1), "padding": [1, 1, 1, 1],
                                                "groups": 1, "activation": "relu"}, "conv"),
        Node("reshape", ("y",), ("z",), {"shape": (1, 50)}, "flat"),
    ]
    return Graph({t.name: t for t in tensors}, nodes, ("x",), ("z",), "small", {"source": "test"})


def test_json_round_trip_is_exact() -> None:
    g = small_graph()
    text = g.to_json()
    g2 = Graph.from_json(text)
    assert g2.name == "small" and g2.inputs == ("x",) and g2.outputs == ("z",) and g2.metadata == {"source": "test"}
    assert g2.nodes == g.nodes
    for name, t in g.tensors.items():
        assert g2.tensors[name] == t
        assert g2.tensors[name].quant == t.quant
    assert g2.tensors["w"].quant.per_channel and g2.tensors["w"].quant.axis == 0
    assert g2.to_json() == text
    assert json.loads(text)["ir_version"] == 1


def test_attrs_are_frozen_to_tuples() -> None:
    g = small_graph()
    assert g.nodes[0].attrs["padding"] == (1, 1, 1, 1)
    assert Graph.from_json(g.to_json()).nodes[0].attrs["strides"] == (1, 1)


def test_dump_is_readable() -> None:
    text = small_graph().dump()
    assert text.splitlines()[0] == "graph small {"
    assert "input  %x: int8[1, 5, 5, 4] q(s=0.05, z=-3)" in text
    assert "[0] %y: int8[1, 5, 5, 2] q(s=0.2, z=4) = conv2d(%x, %w, %b)" in text
    assert "%w" in text and "activation=relu" in text
    assert "output %z: int8[1, 50]" in text


def test_from_json_errors_are_model_format_errors() -> None:
    with pytest.raises(ModelFormatError, match="malformed IR JSON"):
        Graph.from_json("{not json")
    with pytest.raises(ModelFormatError, match="version"):
        Graph.from_json(json.dumps({"ir_version": 99}))
    with pytest.raises(ModelFormatError, match="malformed"):
        Graph.from_json(json.dumps({"ir_version": 1, "tensors": [{"name": "a"}], "nodes": []}))


def test_tensor_checks_name_the_tensor() -> None:
    with pytest.raises(GraphError, match="tensor 't': unsupported dtype 'float16'"):
        Tensor("t", (1,), "float16")
    with pytest.raises(GraphError, match=r"tensor .t.: shape \(1, -1\) must be non-negative integers"):
        Tensor("t", (1, -1), "int8")
    with pytest.raises(GraphError, match="tensor 't': data shape"):
        Tensor("t", (2,), "int8", None, np.zeros(3, np.int8))
    with pytest.raises(GraphError, match="2 scales but 3 zero points"):
        Quantization((0.1, 0.2), (0, 0, 0), 0)
    with pytest.raises(GraphError, match="axis missing"):
        Quantization((0.1, 0.2), (0, 0))


def test_with_nodes_drops_unreferenced_tensors() -> None:
    g = small_graph()
    g2 = g.with_nodes(g.nodes[:1])
    assert "z" in g2.tensors  # graph output stays
    g3 = g.replace(outputs=("y",)).with_nodes(g.nodes[:1])
    assert "z" not in g3.tensors and set(g3.tensors) == {"x", "w", "b", "y"}
