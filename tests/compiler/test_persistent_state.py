"""Persistent state of stateful kernels (KernelCode.persistent_bytes): planned in the workspace for the whole
run and across runs, never shared, passed as `uint8_t* state` in every convention, streaming from run to run."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from utvm.compiler import compile, memory
from utvm.compiler.local import LocalModel
from utvm.compiler.lower import MemoryPlan
from utvm.ir import run_reference
from utvm.ir.graph import Graph, Node, Tensor


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 3000), st.integers(0, 9), st.integers(0, 9)), max_size=10),
       st.lists(st.integers(1, 500), min_size=1, max_size=3))
def test_a_persistent_block_overlaps_no_other_buffer(others: list[tuple[int, int, int]], blocks: list[int]) -> None:
    items = [memory.Interval(i, size, min(a, b), max(a, b)) for i, (size, a, b) in enumerate(others)]
    steps = 10
    first = len(items)
    items += [memory.persistent(first + k, size, steps) for k, size in enumerate(blocks)]
    for algorithm in memory.ALGORITHMS:
        plan = memory.place(items, algorithm)
        for p in items[first:]:
            assert (p.start, p.end) == (0, steps - 1)
            for o in items:
                if o.id == p.id:
                    continue
                op, oo = plan.offsets[p.id], plan.offsets[o.id]
                assert op + p.size <= oo or oo + o.size <= op, (algorithm, p, o)


def _svdf_graph() -> Graph:
    """x[2, 5] -> svdf (float32, memory 3) -> h -> svdf -> y: two state blocks, one intermediate."""
    rng = np.random.default_rng(0)

    def const(name: str, shape: tuple[int, ...]) -> Tensor:
        return Tensor(name, shape, "float32", None, rng.uniform(-0.5, 0.5, shape).astype(np.float32))

    ts = [Tensor("x", (2, 5), "float32"), Tensor("h", (2, 3), "float32"), Tensor("y", (2, 2), "float32"),
          const("wf1", (6, 5)), const("wt1", (6, 3)), const("b1", (3,)),
          const("wf2", (4, 3)), const("wt2", (4, 4)), const("b2", (2,))]
    attrs = {"activation": "none", "state_dtype": "float32", "state_scale": 0.0, "state_zero_point": 0}
    nodes = (Node("svdf", ("x", "wf1", "wt1", "b1"), ("h",), {**attrs, "rank": 2}, "s1"),
             Node("svdf", ("h", "wf2", "wt2", "b2"), ("y",), {**attrs, "rank": 2, "activation": "relu"}, "s2"))
    return Graph({t.name: t for t in ts}, nodes, ("x",), ("y",), "stateful")


def test_state_blocks_are_planned_for_the_whole_run_and_in_the_workspace_size() -> None:
    c = compile(_svdf_graph(), model_name="st")
    plan = c.plan
    assert len(plan.persistent) == 2
    blocks = [b for b in plan.buffers if b.tensors[0].startswith("persistent:")]
    assert sorted(b.size for b in blocks) == [4 * 2 * 4 * 4, 4 * 2 * 6 * 3]  # float32 [B, F, M]
    last = len(c.operators) - 1
    for blk in blocks:
        assert (blk.start, blk.end) == (0, last)
        for other in plan.buffers:
            if other.id != blk.id:
                assert blk.offset + blk.size <= other.offset or other.offset + other.size <= blk.offset
    assert plan.workspace_bytes >= sum(memory.align(b.size) for b in blocks)
    assert f"TVMGEN_ST_WORKSPACE_SIZE {plan.workspace_bytes}" in " ".join(c.includes["tvmgen_st.h"].split())
    assert MemoryPlan.from_json(plan.to_json()) == plan
    assert [op.persistent_bytes for op in c.operators] == [4 * 2 * 6 * 3, 4 * 2 * 4 * 4]
    assert [a.name for a in c.operators[0].args][-1] == "state"


@pytest.mark.parametrize("conv", [{}, {"unpacked_api": True}, {"unpacked_api": True, "interface_api": "c"}],
                         ids=["packed", "unpacked", "c"])
def test_state_streams_across_runs_in_every_convention(conv: dict) -> None:
    g = _svdf_graph()
    c = compile(g, model_name=f"st_{len(conv)}", **conv)
    if conv.get("unpacked_api"):
        assert "uint8_t* state" in c.sources[f"tvmgen_st_{len(conv)}_ops.c"]
    m = LocalModel(c, opt="-O1")
    x = np.random.default_rng(1).uniform(-2, 2, (2, 5)).astype(np.float32)
    state: dict[str, list[np.ndarray]] = {}
    outs = []
    for _ in range(4):  # the same input each run: the outputs move only through the state
        got = m.run([x])[0]
        want = run_reference(g, {"x": x}, state=state)["y"]
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        outs.append(got)
    assert not np.array_equal(outs[0], outs[1])


def test_reset_state_starts_a_new_stream() -> None:
    """`tvmgen_<m>_reset_state()` zeroes the persistent blocks: the next run is the first run again."""
    g = _svdf_graph()
    c = compile(g, model_name="rs", unpacked_api=True, interface_api="c")
    assert "void tvmgen_rs_reset_state(void);" in c.includes["tvmgen_rs.h"]
    m = LocalModel(c, opt="-O1")
    x = np.random.default_rng(2).uniform(-2, 2, (2, 5)).astype(np.float32)
    first = [m.run([x])[0] for _ in range(3)]
    m.lib.tvmgen_rs_reset_state()
    again = [m.run([x])[0] for _ in range(3)]
    for a, b in zip(first, again, strict=True):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(first[0], first[2])


def test_user_workspace_reset_takes_the_workspace() -> None:
    c = compile(_svdf_graph(), model_name="rsu", unpacked_api=True, interface_api="c", workspace="user")
    assert "void tvmgen_rsu_reset_state(void* workspace);" in c.includes["tvmgen_rsu.h"]
    main = c.sources["tvmgen_rsu_main.c"]
    assert main.count("memset((void*)((uint8_t*)workspace + ") == 2
    m = LocalModel(c, opt="-O0")  # builds with the strict flags
    x = np.ones((2, 5), np.float32)
    want = run_reference(_svdf_graph(), {"x": x})["y"]
    np.testing.assert_allclose(m.run([x])[0], want, rtol=1e-5, atol=1e-6)  # a zeroed workspace: the first run


def test_a_model_without_state_has_no_reset() -> None:
    ts = {"x": Tensor("x", (4,), "float32"), "y": Tensor("y", (4,), "float32")}
    c = compile(Graph(ts, (Node("relu", ("x",), ("y",), {}, "r"),), ("x",), ("y",), "plain"), model_name="plain")
    assert not c.plan.persistent
    assert "reset_state" not in c.sources["tvmgen_plain_main.c"] + c.includes["tvmgen_plain.h"]
