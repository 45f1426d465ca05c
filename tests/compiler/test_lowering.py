"""Lowering: reshape aliases, in-place reuse, copies into outputs, and the memory plan on real graphs."""

from __future__ import annotations

import numpy as np
import pytest

from utvm.compiler import compile
from utvm.compiler.local import LocalModel
from utvm.errors import CompileError, UnsupportedOperatorError
from utvm.ir.graph import Graph, Node, Tensor
from utvm.support.models import models_dir

MODELS = models_dir()


def f32(name: str, *shape: int, data: np.ndarray | None = None) -> Tensor:
    return Tensor(name, tuple(shape), "float32", data=data)


def chain_graph() -> Graph:
    """x -> dense(relu) -> h -> reshape -> r -> add(r, r) -> y."""
    w = np.arange(12, dtype=np.float32).reshape(3, 4) / 10
    ts = [f32("x", 1, 4), f32("w", 3, 4, data=w), f32("b", 3, data=np.ones(3, np.float32)), f32("h", 1, 3),
          f32("r", 3, 1), f32("y", 3, 1)]
    nodes = [Node("dense", ("x", "w", "b"), ("h",), {"activation": "relu"}, "fc"),
             Node("reshape", ("h",), ("r",), {"shape": (3, 1)}, "rs"),
             Node("add", ("r", "r"), ("y",), {"activation": "none"}, "twice")]
    return Graph({t.name: t for t in ts}, nodes, ("x",), ("y",))


def branch_graph() -> Graph:
    """x -> a = x + 1; b = a + 2; c = a + b (a is read after b is written: no in-place for b)."""
    one = np.ones((1, 8), np.float32)
    ts = [f32("x", 1, 8), f32("one", 1, 8, data=one), f32("two", 1, 8, data=2 * one), f32("a", 1, 8),
          f32("b", 1, 8), f32("c", 1, 8)]
    nodes = [Node("add", ("x", "one"), ("a",), {"activation": "none"}, "n0"),
             Node("add", ("a", "two"), ("b",), {"activation": "none"}, "n1"),
             Node("add", ("a", "b"), ("c",), {"activation": "none"}, "n2")]
    return Graph({t.name: t for t in ts}, nodes, ("x",), ("c",))


def test_reshape_is_an_alias_and_add_writes_in_place() -> None:
    c = compile(chain_graph(), passes=False)
    names = [op.name for op in c.operators]
    assert names == ["tvmgen_default_fused_dense_relu", "tvmgen_default_fused_add"]
    assert c.plan.aliases == 1 and c.plan.inplace == 1
    # dense writes straight into the model output (h, r and y are one buffer) and needs no workspace
    assert c.plan.locations["h"] == c.plan.locations["r"] == c.plan.locations["y"] == ("output", 0)
    assert c.plan.workspace_bytes == 0
    x = np.array([[1, -2, 3, 0.5]], np.float32)
    w = np.arange(12, dtype=np.float32).reshape(3, 4) / 10
    (y,) = LocalModel(c).run([x])
    np.testing.assert_allclose(y, 2 * np.maximum(x @ w.T + 1, 0).reshape(3, 1), rtol=1e-6)


def test_no_in_place_over_a_tensor_read_later_nor_over_a_model_input() -> None:
    c = compile(branch_graph(), passes=False)
    loc = c.plan.locations
    assert loc["x"] == ("input", 0)
    assert loc["a"] != loc["x"]  # the caller's input is never written
    assert loc["b"] != loc["a"]  # a is read again at step 2, after b is written
    # a and b both die at step 2, so c reuses one of them: that one lives in the output buffer already
    assert loc["c"] == ("output", 0) and [loc["a"], loc["b"]].count(("output", 0)) == 1
    assert c.plan.inplace == 1
    x = np.arange(8, dtype=np.float32).reshape(1, 8)
    (y,) = LocalModel(c).run([x])
    np.testing.assert_array_equal(y, (x + 1) + (x + 3))
    np.testing.assert_array_equal(x, np.arange(8, dtype=np.float32).reshape(1, 8))


def test_reshape_from_model_input_to_model_output_copies() -> None:
    ts = [f32("x", 2, 3), f32("y", 3, 2)]
    g = Graph({t.name: t for t in ts}, [Node("reshape", ("x",), ("y",), {"shape": (3, 2)}, "r")], ("x",), ("y",))
    c = compile(g, passes=False)
    assert [op.op for op in c.operators] == ["reshape"]
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    (y,) = LocalModel(c).run([x])
    np.testing.assert_array_equal(y, x.reshape(3, 2))


def test_reshape_of_a_constant_into_a_model_output_is_computed() -> None:
    k = np.arange(6, dtype=np.float32)
    ts = [f32("x", 1, 2), f32("k", 6, data=k), f32("s", 1, 2), f32("y", 2, 3)]
    nodes = [Node("add", ("x", "x"), ("s",), {"activation": "none"}, "n"),
             Node("reshape", ("k",), ("y",), {"shape": (2, 3)}, "r")]
    g = Graph({t.name: t for t in ts}, nodes, ("x",), ("s", "y"))
    c = compile(g, passes=False)
    s, y = LocalModel(c, opt="-O0").run([np.ones((1, 2), np.float32)])
    np.testing.assert_array_equal(y, k.reshape(2, 3))


def test_output_that_is_an_input_or_a_constant_or_listed_twice_is_copied() -> None:
    k = np.array([[7, 8]], np.float32)
    ts = [f32("x", 1, 2), f32("k", 1, 2, data=k), f32("s", 1, 2)]
    g = Graph({t.name: t for t in ts}, [Node("add", ("x", "k"), ("s",), {"activation": "none"}, "n")],
              ("x",), ("s", "x", "k", "s"))
    for conv in ({}, {"unpacked_api": True, "interface_api": "c"}):
        c = compile(g, passes=False, **conv)
        x = np.array([[1, 2]], np.float32)
        s, xo, ko, s2 = LocalModel(c, opt="-O0").run([x])
        np.testing.assert_array_equal(s, x + k)
        np.testing.assert_array_equal(xo, x)
        np.testing.assert_array_equal(ko, k)
        np.testing.assert_array_equal(s2, x + k)


def test_unsupported_operator_names_the_op_and_node() -> None:
    ts = [f32("x", 1, 4), f32("y", 1, 4)]
    g = Graph({t.name: t for t in ts}, [Node("frobnicate", ("x",), ("y",), {}, "weird")], ("x",), ("y",))
    with pytest.raises(UnsupportedOperatorError, match=r"'frobnicate' at node 0 \('weird'\).*supported operators"):
        compile(g, passes=False)


@pytest.mark.parametrize("kwargs, message", [
    ({"interface_api": "c"}, "--interface-api c requires --unpacked-api"),
    ({"workspace": "user", "unpacked_api": True}, "--workspace user requires --interface-api c"),
    ({"model_name": "my-model"}, "must be a C identifier"),
    ({"executor": "graph"}, "executor 'graph' is not supported"),
    ({"rounding": "nearest"}, "rounding 'nearest'"),
    ({"memory_planner": "magic"}, "memory planner 'magic'"),
])
def test_bad_options_are_refused_with_the_reason(kwargs: dict, message: str) -> None:
    with pytest.raises(CompileError, match=message):
        compile(chain_graph(), **kwargs)


def _tensor_level_overlaps(c) -> list[tuple[str, str]]:  # noqa: ANN001
    """Independent check of a plan: tensors (not buffers) live at the same step never share bytes unless
    they are one buffer (an alias or an in-place pair)."""
    steps: dict[str, list[int]] = {}
    for s, op in enumerate(c.operators):
        for t in (*op.inputs, *op.outputs):
            steps.setdefault(t.name, []).append(s)
    g = c.graph
    ws = {t: off for t, (kind, off) in c.plan.locations.items() if kind == "workspace" and t in steps}
    bad = []
    names = sorted(ws)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            if ws[a] == ws[b]:
                continue  # same buffer class
            la, lb = (min(steps[a]), max(steps[a])), (min(steps[b]), max(steps[b]))
            if la[0] <= lb[1] and lb[0] <= la[1]:
                ea, eb = ws[a] + g.tensor(a).nbytes, ws[b] + g.tensor(b).nbytes
                if ws[a] < eb and ws[b] < ea:
                    bad.append((a, b))
    return bad


@pytest.mark.parametrize("model", ["tflm/hello_world_int8.tflite", "tflm/hello_world_float.tflite",
                                   "mlperf_tiny/ad01_int8.tflite"])
@pytest.mark.parametrize("planner", ["greedy_by_size", "greedy_by_conflicts", "branch_and_bound"])
def test_plans_of_chain_models(model: str, planner: str) -> None:
    from utvm.frontend import load

    c = compile(load(MODELS / model), memory_planner=planner)
    assert _tensor_level_overlaps(c) == []
    p = c.plan
    assert p.workspace_bytes >= p.lower_bound_bytes > 0
    if planner == "branch_and_bound":
        assert p.workspace_bytes == p.lower_bound_bytes  # chain-structured: the bound is reached
    main = c.metadata["modules"]["default"]["memory"]["functions"]["main"][0]
    assert main["workspace_size_bytes"] == p.workspace_bytes
    assert c.metadata["modules"]["default"]["memory"]["plan"]["lower_bound_bytes"] == p.lower_bound_bytes
