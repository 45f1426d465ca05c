"""The static memory planner's algorithms on synthetic lifetimes (utvm.compiler.memory).

Invariants: no two buffers live at the same step overlap, every offset is 16-byte aligned, no plan is
below the lower bound, branch_and_bound is never worse than the greedy plans, it is optimal on small
problems (checked by brute force) and reaches the lower bound on chains.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from utvm.compiler import memory
from utvm.compiler.memory import ALGORITHMS, Interval, align, lower_bound, place
from utvm.errors import CompileError


def _intervals(draw_list: list[tuple[int, int, int]]) -> list[Interval]:
    return [Interval(i, size, min(a, b), max(a, b)) for i, (size, a, b) in enumerate(draw_list)]


interval_lists = st.lists(st.tuples(st.integers(0, 5000), st.integers(0, 12), st.integers(0, 12)),
                          min_size=0, max_size=14).map(_intervals)


def _overlaps(items: list[Interval], offsets: dict[int, int]) -> list[tuple[int, int]]:
    bad = []
    for a, b in itertools.combinations(items, 2):
        live_together = a.start <= b.end and b.start <= a.end
        oa, ob = offsets[a.id], offsets[b.id]
        if live_together and a.size and b.size and oa < ob + b.size and ob < oa + a.size:
            bad.append((a.id, b.id))
    return bad


@settings(max_examples=150, deadline=None)
@given(interval_lists)
def test_every_algorithm_gives_a_valid_plan_not_below_the_bound(items: list[Interval]) -> None:
    bound = lower_bound(items)
    sizes = {}
    for name in ALGORITHMS:
        p = place(items, name)
        assert _overlaps(items, p.offsets) == [], name
        assert all(off % 16 == 0 for off in p.offsets.values()), name
        assert p.size >= bound, name
        assert p.lower_bound == bound
        assert p.size == max((p.offsets[it.id] + memory.extent(it.size) for it in items), default=0)
        sizes[name] = p.size
    assert sizes["branch_and_bound"] <= min(sizes["greedy_by_size"], sizes["greedy_by_conflicts"])


def _brute_force_optimum(items: list[Interval]) -> int:
    """First fit over every placement order reaches the optimum (see the memory module's docstring)."""
    conflicts = memory._conflict_lists(items)
    return min(memory._pool_size(items, memory._place_in_order(order, conflicts))
               for order in itertools.permutations(items))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 300), st.integers(0, 6), st.integers(0, 6)), min_size=1, max_size=6)
       .map(_intervals))
def test_branch_and_bound_is_optimal_on_small_problems(items: list[Interval]) -> None:
    offsets, proven = memory.branch_and_bound(items)
    assert proven
    assert memory._pool_size(items, offsets) == _brute_force_optimum(items)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(1, 100_000), min_size=1, max_size=40))
def test_branch_and_bound_reaches_the_lower_bound_on_chains(sizes: list[int]) -> None:
    # Tensor i is written by op i and read by op i + 1: a chain of lifetimes [i, i + 1].
    items = [Interval(i, s, i, i + 1) for i, s in enumerate(sizes)]
    p = place(items, "branch_and_bound")
    assert p.size == p.lower_bound == max(align(a) + align(b) for a, b in zip([0, *sizes], [*sizes, 0], strict=True))
    assert p.optimal


def test_greedy_by_size_misses_a_chain_optimum_that_branch_and_bound_finds() -> None:
    items = [Interval(i, s, i, i + 1) for i, s in enumerate([40 * 16, 60 * 16, 50 * 16, 50 * 16, 60 * 16])]
    assert place(items, "greedy_by_size").size > lower_bound(items)
    assert place(items, "branch_and_bound").size == lower_bound(items) == 110 * 16


def test_lower_bound_counts_aligned_sizes_of_simultaneously_live_buffers() -> None:
    items = [Interval(0, 1, 0, 2), Interval(1, 17, 1, 1), Interval(2, 100, 2, 3), Interval(3, 5, 3, 3)]
    # step 1: 16 + 32; step 2: 16 + 112; step 3: 112 + 16
    assert lower_bound(items) == 128


def test_budget_exhaustion_still_returns_a_valid_plan() -> None:
    items = [Interval(i, (i * 7919) % 1000 + 1, i % 5, i % 5 + (i % 3)) for i in range(30)]
    offsets, _proven = memory.branch_and_bound(items, budget=3)
    memory.check(items, offsets)
    assert memory._pool_size(items, offsets) >= lower_bound(items)


def test_unknown_algorithm_is_named_in_the_error() -> None:
    with pytest.raises(CompileError, match="unknown memory planner 'best_fit'.*greedy_by_size"):
        place([Interval(0, 10, 0, 1)], "best_fit")


def test_check_rejects_an_overlapping_plan() -> None:
    items = [Interval(0, 32, 0, 1), Interval(1, 32, 1, 2)]
    with pytest.raises(CompileError, match="buffers 0 and 1 are live together at steps 1..1"):
        memory.check(items, {0: 0, 1: 16})


def test_two_sided_plan_only_for_bipartite_conflicts() -> None:
    chain = [Interval(i, s, i, i + 1) for i, s in enumerate([100, 300, 20, 500, 40])]
    offsets = memory.two_sided(chain, memory._conflict_lists(chain))
    assert offsets is not None
    memory.check(chain, offsets)
    assert memory._pool_size(chain, offsets) == lower_bound(chain)
    triangle = [Interval(0, 16, 0, 2), Interval(1, 16, 1, 2), Interval(2, 16, 2, 2)]  # three live at step 2
    assert memory.two_sided(triangle, memory._conflict_lists(triangle)) is None
