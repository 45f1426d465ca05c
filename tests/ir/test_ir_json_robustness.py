"""Graph.from_json on documents it did not write (an MLF archive's src/<model>.json is untrusted input):
every one raises a ModelError naming what is wrong, never AttributeError/OverflowError/RecursionError, and a
tensor over utvm.limits is refused before its data is decoded. Found while fuzzing utvm.mlf.load."""

from __future__ import annotations

import json

import numpy as np
import pytest

from utvm.errors import GraphError, ModelError, ModelFormatError, UnsupportedModelError
from utvm.ir import Graph, Node, Tensor


def _doc(tensors: list | None = None, **extra: object) -> str:
    d = {"ir_version": 1, "tensors": tensors if tensors is not None else [], "nodes": [], "inputs": [],
         "outputs": [], **extra}
    return json.dumps(d)


@pytest.mark.parametrize("text,error,match", [
    ("[]", ModelFormatError, r"malformed IR JSON: the document is a JSON list, not an object"),
    ("[" * 100_000, ModelFormatError, r"malformed IR JSON: RecursionError"),
    (_doc([1]), ModelFormatError, r"tensor 0 is a JSON int, not an object"),
    (_doc([{"name": "a", "shape": [1e400], "dtype": "int8"}]).replace("Infinity", "1e400"), ModelFormatError,
     r"tensor 0 \('a'\): shape \[inf\] must be a list of integers"),
    (_doc([{"name": "a", "shape": [2.5], "dtype": "int8"}]), ModelFormatError, r"must be a list of integers"),
    (_doc([{"name": ["a"], "shape": [2], "dtype": "int8"}]), ModelFormatError, r"'name' must be a string"),
    (_doc([{"name": "a", "shape": [2], "dtype": "int8"}] * 2), ModelFormatError, r"a second tensor of that name"),
    (_doc([{"name": "a", "shape": [2], "dtype": "int8", "quant": {"scale": [1.0], "zero_point": [0],
                                                                  "axis": "x"}}]),
     ModelFormatError, r"quantization .* an integer or null 'axis'"),
    (_doc([{"name": "a", "shape": [2], "dtype": "int8", "data": 5}]), ModelFormatError, r"must be a base64 string"),
    (_doc([{"name": "a", "shape": [2], "dtype": "int8", "data": "AAAAAAAA"}]), ModelFormatError,
     r"data holds 6 bytes, shape \[2\] of int8 needs 2"),
    (_doc([{"name": "a", "shape": [2], "dtype": "int8", "data": "A" * 10_000}]), ModelFormatError,
     r"data of 10000 base64 characters is more than shape \[2\] of int8 holds"),
    (_doc([{"name": "a", "shape": [65536, 65536, 65536, 65536], "dtype": "int8", "data": ""}]),
     UnsupportedModelError, r"tensor 'a' int8\[65536, 65536, 65536, 65536\] has 18446744073709551616 elements"),
    (_doc([{"name": "a", "shape": [-1], "dtype": "int8"}]), ModelFormatError, r"negative dimension -1"),
    (_doc([{"name": "a", "shape": [2], "dtype": "object"}]), GraphError, r"unsupported dtype 'object'"),
    (_doc(metadata=5), ModelFormatError, r"'metadata' an object"),
    (_doc(inputs=[1]), ModelFormatError, r"graph inputs must be a list of tensor names"),
    (json.dumps({"ir_version": 1, "tensors": [], "nodes": [{"op": "add", "inputs": 5, "outputs": []}],
                 "inputs": [], "outputs": []}), ModelFormatError, r"node 0: 'inputs' is a JSON int, not a list"),
])
def test_from_json_refuses_what_it_did_not_write(text: str, error: type, match: str) -> None:
    with pytest.raises(error, match=match) as exc:
        Graph.from_json(text)
    assert isinstance(exc.value, ModelError)


def test_from_json_still_round_trips() -> None:
    w = Tensor("w", (2, 3), "float32", None, np.arange(6, dtype=np.float32).reshape(2, 3))
    g = Graph({"x": Tensor("x", (1, 3), "float32"), "w": w, "y": Tensor("y", (1, 2), "float32")},
              (Node("dense", ("x", "w", ""), ("y",), {"activation": "none"}, "fc"),), ("x",), ("y",), "m",
              {"source": "test"})
    back = Graph.from_json(g.to_json())
    assert back.tensors == g.tensors and back.nodes == g.nodes and back.metadata == {"source": "test"}
