"""Search strategies: which points of a task's space to measure next.

    s = make_strategy("model", task.space, seed=7, history=[(point, cost_or_None), ...])
    batch = s.propose(16)            # up to 16 legal points never measured (nor proposed) before
    s.update([(point, cost), ...])   # what they measured (None: an error)

- `grid`: every legal point in cross-product order (first knob slowest), the order `Space.points()` has.
- `random`: legal points sampled without replacement from a seeded generator; the same seed gives the
  same order, so a resumed run continues where the last one stopped.
- `model`: a learned cost model, as AutoTVM does: gradient-boosted trees (scikit-learn, the `tune`
  extra) fitted on `Space.features(point)` -> log(cost) of what was measured so far (failed points count as
  twice the worst cost, so the model learns to avoid them), used to rank a random pool of unmeasured points;
  each batch takes the best predicted, plus a share picked at random (EXPLORATION) so the model sees what
  it would not choose. Until MIN_TRAIN points have a cost it proposes random points.

`auto` (the default of `utvm tune`) is `model` when scikit-learn is installed, else `random`.

A strategy never proposes a point twice and never one in its history (what the log already holds); the
driver measures the default point first, before asking the strategy for anything.
"""

from __future__ import annotations

import itertools
import json
import math
import random
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from utvm.compiler.schedule import Schedule, Space
from utvm.errors import UsageError

STRATEGIES = ("grid", "random", "model")
#: What `--strategy` defaults to: the cost model when scikit-learn is installed, else random sampling.
AUTO = "auto"
#: Spaces up to this many points (legal or not) are enumerated for sampling; larger ones are sampled.
ENUMERATE_LIMIT = 1 << 16
#: Points with a cost before the cost model is used (random proposals until then).
MIN_TRAIN = 8
#: Unmeasured points ranked by the cost model per batch.
POOL_SIZE = 512
#: Share of each model batch picked at random from the pool instead of by prediction.
EXPLORATION = 0.25
TUNE_EXTRA = "pip install 'utvm[tune]' (scikit-learn)"


def point_key(point: Schedule) -> str:
    """The canonical JSON of a point: what the tuning log compares (log.Record.schedule_key)."""
    return json.dumps(point, sort_keys=True, separators=(",", ":"))


def legal_points(space: Space, limit: int = ENUMERATE_LIMIT) -> list[Schedule] | None:
    """Every legal point of `space` in cross-product order, or None when it has more than `limit` points."""
    if space.size > limit:
        return None
    return list(space.points())


class Strategy:
    """Base: bookkeeping of what was measured or proposed."""

    name = ""

    def __init__(self, space: Space, seed: int = 0, history: Iterable[tuple[Schedule, float | None]] = ()) -> None:
        self.space = space
        self.seed = seed
        self.seen: set[str] = set()
        self.history: list[tuple[Schedule, float | None]] = []
        self.update(history)

    def update(self, results: Iterable[tuple[Schedule, float | None]]) -> None:
        for point, cost in results:
            self.seen.add(point_key(point))
            self.history.append((dict(point), cost))

    def propose(self, n: int) -> list[Schedule]:
        out: list[Schedule] = []
        order = self._order()
        while len(out) < n:
            p = next(order, None)  # (never one more than needed: a random order must not lose points)
            if p is None:
                break
            k = point_key(p)
            if k in self.seen:
                continue
            self.seen.add(k)
            out.append(p)
        return out

    def _order(self) -> Iterator[Schedule]:
        raise NotImplementedError


class GridStrategy(Strategy):
    name = "grid"

    def _order(self) -> Iterator[Schedule]:
        return self.space.points()


class RandomStrategy(Strategy):
    name = "random"

    def __init__(self, space: Space, seed: int = 0, history: Iterable[tuple[Schedule, float | None]] = ()) -> None:
        super().__init__(space, seed, history)
        self._rng = random.Random(seed)
        self._iter = self._sample()

    def _sample(self) -> Iterator[Schedule]:
        """Legal points without replacement, in a seeded order."""
        space = self.space
        if space.size <= ENUMERATE_LIMIT:
            order = list(range(space.size))
            self._rng.shuffle(order)
            for i in order:
                p = space.point(i)
                if space.legal(p) is None:
                    yield p
            return
        tried: set[int] = set()
        misses = 0
        while misses < 100_000 and len(tried) < space.size:  # sparse sampling of a huge space
            i = self._rng.randrange(space.size)
            if i in tried:
                misses += 1
                continue
            tried.add(i)
            p = space.point(i)
            if space.legal(p) is None:
                misses = 0
                yield p
            else:
                misses += 1

    def _order(self) -> Iterator[Schedule]:
        return self._iter


class ModelStrategy(RandomStrategy):
    """Gradient-boosted trees over knob features rank a random pool (see the module docstring)."""

    name = "model"

    def __init__(self, space: Space, seed: int = 0, history: Iterable[tuple[Schedule, float | None]] = ()) -> None:
        self._regressor = _regressor_class()
        super().__init__(space, seed, history)
        self.fits = 0

    def propose(self, n: int) -> list[Schedule]:
        measured = [(p, c) for p, c in self.history if c is not None and c > 0 and math.isfinite(c)]
        if len(measured) < MIN_TRAIN or n <= 0:
            return super().propose(n)
        pool = super().propose(max(POOL_SIZE, n))  # marks them seen; the ones not chosen are given back
        if len(pool) <= n:
            return pool
        worst = max(math.log(c) for _p, c in measured)
        xs = [self.space.features(p) for p, _c in self.history]
        # log(cost); a failed point (or a cost that is no cost) counts as twice the worst: log(2 * worst),
        # computed as a sum of logs so that no cost, however large, overflows to infinity
        ys = [math.log(c) if (c is not None and c > 0 and math.isfinite(c)) else worst + math.log(2.0)
              for _p, c in self.history]
        model = self._regressor(n_estimators=60, max_depth=3, learning_rate=0.15, subsample=0.9,
                                random_state=self.seed & 0x7FFFFFFF)
        model.fit(xs, ys)
        self.fits += 1
        pred = model.predict([self.space.features(p) for p in pool])
        ranked = [p for _v, _i, p in sorted(zip(pred, range(len(pool)), pool, strict=True))]
        n_explore = min(int(n * EXPLORATION), n - 1)
        chosen = ranked[:n - n_explore]
        rest = ranked[n - n_explore:]
        chosen += self._rng.sample(rest, min(n_explore, len(rest)))
        unchosen = {point_key(p) for p in pool} - {point_key(p) for p in chosen}
        self.seen -= unchosen  # pool points not measured stay available
        self._iter = itertools.chain([p for p in pool if point_key(p) in unchosen], self._iter)
        return chosen


def _regressor_class() -> Any:
    try:
        from sklearn.ensemble import GradientBoostingRegressor
    except ImportError as exc:
        raise UsageError(f"--strategy model needs the optional cost-model dependency: {TUNE_EXTRA} "
                         f"({exc.name or 'sklearn'} is not installed); grid and random need nothing extra") from None
    return GradientBoostingRegressor


def make_strategy(name: str, space: Space, seed: int = 0,
                  history: Sequence[tuple[Schedule, float | None]] = ()) -> Strategy:
    """The strategy called `name` (one of STRATEGIES) over `space`; `history` = what was measured before."""
    classes = {"grid": GridStrategy, "random": RandomStrategy, "model": ModelStrategy}
    if name not in classes:
        raise UsageError(f"unknown strategy {name!r}; choose one of {', '.join(STRATEGIES)}")
    return classes[name](space, seed, history)


def check_strategy(name: str) -> None:
    """Raise at once (before any work) when the strategy's optional dependency is missing."""
    if name == "model":
        _regressor_class()


def resolve_strategy(name: str) -> str:
    """`auto` -> `model` when its optional dependency is installed, else `random`; other names as given."""
    if name != AUTO:
        return name
    try:
        _regressor_class()
    except UsageError:
        return "random"
    return "model"
