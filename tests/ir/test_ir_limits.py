"""utvm.limits itself, and the compiler's safety net: the `validate` pass refuses a graph built in Python whose
tensors the generated C cannot index or the host cannot hold, naming the node and the tensor."""

from __future__ import annotations

import pytest

from utvm import limits
from utvm.compiler import compile
from utvm.compiler.passes.validate import validate
from utvm.errors import CompileError, ModelFormatError, UnsupportedModelError
from utvm.ir import Graph, Node, Quantization, Tensor

LIMIT = 2**31 - 1
Q = Quantization((0.1,), (0,))


@pytest.fixture(autouse=True)
def _default_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(limits.HOST_MEMORY_BUDGET_ENV, raising=False)


def test_the_constants() -> None:
    assert limits.MAX_TENSOR_ELEMENTS == limits.MAX_TENSOR_BYTES == 2**31 - 1
    assert limits.DEFAULT_HOST_MEMORY_BUDGET == 1 << 30
    assert limits.HOST_MEMORY_BUDGET_ENV == "UTVM_HOST_MEMORY_BUDGET"
    assert limits.host_memory_budget() == 1 << 30


@pytest.mark.parametrize("shape,dtype,elements,nbytes", [
    ((), "float32", 1, 4),
    ((0, 2**40), "int8", 0, 0),
    ((2**32, 2**32), "int64", 2**64, 2**67),   # an int64 product would wrap to 0
    ((3,) * 41, "int8", 3**41, 3**41),          # past int64 as well
])
def test_sizes_are_exact(shape: tuple[int, ...], dtype: str, elements: int, nbytes: int) -> None:
    assert limits.tensor_size(shape, dtype) == (elements, nbytes)


@pytest.mark.parametrize("shape,error,match", [
    ((LIMIT,), None, ""),
    ((LIMIT + 1,), UnsupportedModelError, r"has dimension 2147483648 \(axis 0\), over the limit"),
    ((2, 2**30), UnsupportedModelError, r"has 2147483648 elements, over the limit of 2147483647"),
    ((0, LIMIT + 1), UnsupportedModelError, r"has dimension 2147483648 \(axis 1\)"),
    ((-1, 4), ModelFormatError, r"has a negative dimension -1 \(axis 0\)"),
    ((-2**31, -2), ModelFormatError, r"negative dimension -2147483648"),
    ((1.5,), ModelFormatError, r"non-integer dimension 1.5"),
    ((1,) * 33, UnsupportedModelError, r"has rank 33, over the limit of 32"),
])
def test_check_tensor(shape: tuple, error: type | None, match: str) -> None:
    if error is None:
        assert limits.check_tensor("t", shape, "int8", budget=2**40) == LIMIT
        return
    with pytest.raises(error, match=match):
        limits.check_tensor("t", shape, "int8", budget=2**40)


def test_tally_sums_against_the_budget() -> None:
    tally = limits.Tally(budget=100, model="m")
    tally.add("a", (60,), "int8")
    with pytest.raises(UnsupportedModelError, match=r"tensor 'b' int8\[41\]: the 2 tensors of m so far need 101 "
                                                    r"bytes, over the host memory budget of 100 bytes"):
        tally.add("b", (41,), "int8")


def test_long_shapes_are_elided_in_messages() -> None:
    assert limits.format_shape((1,) * 9) == "[1, 1, 1, 1, 1, 1, 1, 1, ... (9 dims)]"
    assert limits.format_shape((2, 3)) == "[2, 3]"


# --- the compiler ------------------------------------------------------------------------------------------
def _add_graph(shape: tuple[int, ...], dtype: str = "int8", big: str = "z") -> Graph:
    """x + y -> z; the tensor named `big` has `shape` (the others broadcast from [1])."""
    q = Q if dtype == "int8" else None
    tensors = {n: Tensor(n, shape if n == big else (1,), dtype, q) for n in "xyz"}
    if big != "z":
        tensors["z"] = Tensor("z", shape, dtype, q)
    return Graph(tensors, (Node("add", ("x", "y"), ("z",), {"activation": "none"}, "sum"),), ("x", "y"), ("z",),
                 "big")


@pytest.mark.parametrize("big,kind", [("x", r"graph input \(node 0 \(add 'sum'\) input 0\)"),
                                      ("z", r"node 0 \(add 'sum'\) output 0")])
def test_validate_refuses_an_over_limit_tensor_naming_node_and_tensor(big: str, kind: str) -> None:
    g = _add_graph((8, 2**30), big=big)
    with pytest.raises(CompileError, match=rf"^{kind}: tensor '{big}' int8\[8, 1073741824\] has 8589934592 "
                                           r"elements, over the limit of 2147483647 \(MAX_TENSOR_ELEMENTS"):
        validate(g)
    with pytest.raises(CompileError, match="8589934592 elements"):
        compile(g, model_name="big")  # the pipeline validates first: no C is generated


def test_validate_refuses_a_constant_over_the_budget_naming_its_reader(monkeypatch: pytest.MonkeyPatch) -> None:
    import numpy as np

    c = Tensor("c", (1024,), "float32", None, np.zeros(1024, np.float32))
    g = Graph({"x": Tensor("x", (1,), "float32"), "c": c, "y": Tensor("y", (1024,), "float32")},
              (Node("add", ("x", "c"), ("y",), {"activation": "none"}, "n"),), ("x",), ("y",), "g")
    monkeypatch.setenv(limits.HOST_MEMORY_BUDGET_ENV, "4095")
    with pytest.raises(CompileError, match=r"^constant \(node 0 \(add 'n'\) input 1\): tensor 'c' float32\[1024\] is "
                                           r"4096 bytes, over the host memory budget of 4095 bytes"):
        validate(g)


@pytest.mark.parametrize("where", ["below", "at", "above"])
def test_validate_limit_is_exact(monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    monkeypatch.setenv(limits.HOST_MEMORY_BUDGET_ENV, str(2**40))
    n = {"below": LIMIT - 1, "at": LIMIT, "above": LIMIT + 1}[where]
    g = _add_graph((n,), big="x")
    if where == "above":
        with pytest.raises(CompileError, match="MAX_TENSOR_"):
            validate(g)
    else:
        assert validate(g) is g


def test_validate_holds_the_graph_to_the_host_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    g = _add_graph((1000,), "float32", big="x")  # x and z: 4000 bytes each
    monkeypatch.setenv(limits.HOST_MEMORY_BUDGET_ENV, "3999")
    with pytest.raises(CompileError, match=r"tensor 'x' float32\[1000\] is 4000 bytes, over the host memory budget "
                                           r"of 3999 bytes"):
        validate(g)
    monkeypatch.setenv(limits.HOST_MEMORY_BUDGET_ENV, "8000")
    with pytest.raises(CompileError, match=r"the 3 tensors of graph 'big' so far need 8004 bytes"):
        validate(g)
    monkeypatch.setenv(limits.HOST_MEMORY_BUDGET_ENV, "8008")
    assert validate(g) is g
