"""Schedule spaces: flat and conditional (algo -> sub-space), old points normalised, shared knob definitions."""

from __future__ import annotations

import pytest

from utvm.compiler.schedule import REQUANT_FORMS, Knob, Space, no_sched_knob, requant_knob, unroll_knob
from utvm.errors import CompileError

ALGO = Knob("algo", ("direct", "block"))
PX = Knob("px_block", (1, 2, 4))
RQ = requant_knob()


def conditional(**kw: object) -> Space:
    return Space.conditional(ALGO, {"direct": (), "block": (PX, RQ)}, shared=(no_sched_knob(),),
                             default={"algo": "direct", "no_sched": False}, **kw)  # type: ignore[arg-type]


def test_a_conditional_point_names_only_its_branch() -> None:
    space = conditional()
    points = list(space.points())
    assert space.size == 2 + 2 * 3 * 3 == len(points)
    assert {"algo": "direct", "no_sched": True} in points
    assert all(set(p) == {"algo", "no_sched"} for p in points if p["algo"] == "direct")
    assert all(set(p) == {"algo", "no_sched", "px_block", "requant"} for p in points if p["algo"] == "block")
    assert [space.point(i) for i in range(space.size)] == points
    with pytest.raises(IndexError):
        space.point(space.size)


def test_check_refuses_a_knob_of_another_branch_and_a_missing_one() -> None:
    space = conditional()
    assert space.check({"algo": "direct", "no_sched": False}) is None
    assert "px_block" in (space.check({"algo": "direct", "no_sched": False, "px_block": 2}) or "")
    assert "for algo='direct'" in (space.check({"algo": "direct", "no_sched": False, "px_block": 2}) or "")
    assert "missing" in (space.check({"algo": "block", "no_sched": False, "px_block": 2}) or "")
    assert "algo" in (space.check({"no_sched": False}) or "")
    assert "not one of" in (space.check({"algo": "other", "no_sched": False}) or "")


def test_an_old_flat_point_is_normalised_into_its_branch() -> None:
    space = conditional(legacy={"dw_px": "px_block"})
    old_direct = {"algo": "direct", "no_sched": True, "dw_px": 1, "requant": "c"}
    assert space.normalize(old_direct) == {"algo": "direct", "no_sched": True}
    old_block = {"algo": "block", "no_sched": False, "dw_px": 4, "requant": "fast"}
    new = space.normalize(old_block)
    assert new == {"algo": "block", "no_sched": False, "px_block": 4, "requant": "fast"}
    assert space.check(new) is None
    # a knob the space never had is kept, so check names it
    assert "bogus" in (space.check(space.normalize({**old_block, "bogus": 1})) or "")


def test_features_have_one_length_and_zeros_for_absent_knobs() -> None:
    space = conditional()
    feats = [space.features(p) for p in space.points()]
    assert len({len(f) for f in feats}) == 1
    direct = space.features({"algo": "direct", "no_sched": False})
    assert direct[0:2] == [1.0, 0.0] and sum(direct) == 2.0  # algo=direct, no_sched=False, nothing else


def test_a_branch_must_cover_the_selector_and_name_known_knobs() -> None:
    with pytest.raises(CompileError, match="branches"):
        Space((ALGO, PX), {"algo": "direct"}, branches={"direct": ()})
    with pytest.raises(CompileError, match="unknown knobs"):
        Space((ALGO, PX), {"algo": "direct"}, branches={"direct": (), "block": ("nope",)})
    with pytest.raises(CompileError, match="defined differently"):
        Space.conditional(ALGO, {"direct": (Knob("u", (1, 2)),), "block": (Knob("u", (1, 4)),)},
                          default={"algo": "direct", "u": 1})


def test_the_default_must_be_legal() -> None:
    with pytest.raises(CompileError, match="not legal"):
        conditional(legal=lambda p: "never")


def test_describe_lists_each_branch() -> None:
    text = conditional().describe()
    assert text.startswith("algo=direct: no_sched in [False, True]; algo=block: no_sched")


def test_shared_knobs_are_one_definition() -> None:
    assert requant_knob() == requant_knob() and requant_knob().values == REQUANT_FORMS == ("c", "fast", "dbl")
    assert no_sched_knob().values == (False, True)
    assert unroll_knob((1, 2)).values == (1, 2) and unroll_knob((1, 2)).name == "unroll"


def test_a_flat_space_is_the_cross_product_as_before() -> None:
    space = Space((PX, Knob("b", (False, True))), default={"px_block": 1, "b": False})
    assert space.size == 6 and len(list(space.points())) == 6
    assert space.point(1) == {"px_block": 1, "b": True}
    assert space.normalize({"px_block": 2, "b": True}) == {"px_block": 2, "b": True}


def test_a_knob_added_since_takes_the_value_old_points_had() -> None:
    unroll = unroll_knob((1, 2))
    space = Space.conditional(ALGO, {"direct": (unroll,), "block": (PX,)}, default={"algo": "direct", "unroll": 2},
                              added={"unroll": 2})
    assert space.normalize({"algo": "direct"}) == {"algo": "direct", "unroll": 2}
    assert space.normalize({"algo": "direct", "unroll": 1}) == {"algo": "direct", "unroll": 1}
    assert space.normalize({"algo": "block", "px_block": 1}) == {"algo": "block", "px_block": 1}
