"""Search strategies: grid order, seeded random sampling without replacement, the learned cost model."""

from __future__ import annotations

import sys

import pytest

from utvm.compiler.schedule import Knob, Space
from utvm.errors import UsageError
from utvm.tune.strategy import ModelStrategy, make_strategy, point_key

SPACE = Space((Knob("a", (1, 2, 4)), Knob("b", ("x", "y")), Knob("c", (False, True))),
              default={"a": 1, "b": "x", "c": False},
              legal=lambda p: "a 4 with y" if p["a"] == 4 and p["b"] == "y" else None)
LEGAL = list(SPACE.points())


def drain(strategy, n: int = 5) -> list[dict]:  # noqa: ANN001
    out = []
    while True:
        batch = strategy.propose(n)
        if not batch:
            return out
        out += batch
        strategy.update([(p, 1.0) for p in batch])


def test_grid_is_the_legal_cross_product_in_order() -> None:
    assert drain(make_strategy("grid", SPACE)) == LEGAL
    assert len(LEGAL) == 10


def test_random_is_seeded_and_without_replacement() -> None:
    a = drain(make_strategy("random", SPACE, seed=3))
    assert sorted(map(point_key, a)) == sorted(map(point_key, LEGAL))
    assert a == drain(make_strategy("random", SPACE, seed=3))
    assert a != drain(make_strategy("random", SPACE, seed=4))


def test_history_is_never_proposed_again() -> None:
    done = [(LEGAL[0], 5.0), (LEGAL[3], None)]
    for name in ("grid", "random"):
        got = drain(make_strategy(name, SPACE, seed=1, history=done))
        assert len(got) == len(LEGAL) - 2
        assert point_key(LEGAL[0]) not in map(point_key, got) and point_key(LEGAL[3]) not in map(point_key, got)


def test_a_resumed_random_search_continues_the_same_order() -> None:
    first = make_strategy("random", SPACE, seed=9)
    head = first.propose(4)
    resumed = make_strategy("random", SPACE, seed=9, history=[(p, 1.0) for p in head])
    assert head + drain(resumed) == drain(make_strategy("random", SPACE, seed=9))


def test_an_unknown_strategy_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="unknown strategy 'annealing'"):
        make_strategy("annealing", SPACE)


def test_the_model_strategy_names_its_extra_when_it_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "sklearn", None)
    monkeypatch.setitem(sys.modules, "sklearn.ensemble", None)
    with pytest.raises(UsageError, match=r"utvm\[tune\]"):
        make_strategy("model", SPACE)


def test_the_model_strategy_learns_which_points_are_cheap() -> None:
    pytest.importorskip("sklearn")
    big = Space(tuple(Knob(k, (1, 2, 3, 4, 5, 6)) for k in "pqrs"), default={k: 1 for k in "pqrs"})

    def cost(p: dict) -> float:  # cheapest where p is small and q is large
        return 10.0 + 3 * p["p"] - 2 * p["q"] + 0.1 * p["r"]

    s = make_strategy("model", big, seed=0)
    assert isinstance(s, ModelStrategy)
    seen = []
    for _ in range(6):
        batch = s.propose(8)
        assert batch and not {point_key(p) for p in batch} & {point_key(p) for p in seen}
        seen += batch
        s.update([(p, cost(p)) for p in batch])
    assert s.fits >= 4
    later = [cost(p) for p in seen[-16:]]
    first = [cost(p) for p in seen[:16]]  # random until it has MIN_TRAIN points
    assert sum(later) / len(later) < sum(first) / len(first)
    assert len({point_key(p) for p in seen}) == len(seen) == 48
