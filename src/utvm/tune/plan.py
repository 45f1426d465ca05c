"""What is left to measure of one task, and in which batches: the one place the order of proposals is decided,
for the serial tuner (utvm.tune.driver) and the device farm (utvm.tune.farm) alike.

    plan = TaskPlan(task, budget=64, records=done_of_the_task, strategy="random", seed=task_seed(0, task.key))
    while points := plan.next_batch(16):       # the points of one evaluation firmware
        for res in measurer.measure(task, points):
            plan.record(record_of(res))          # a record of each point proposed, sooner or later

A batch is the kernel's default point first (when the log has no record of it), then the points a resumed
run measures again (records whose error was the device's: `log.retried`), then the strategy's proposals,
`min(batch, budget - recorded - in flight)` points in all. The strategy sees each record as it comes
(`record`) and never proposes a point that is in flight.

Why the farm's log equals serial tuning's (as a set, every field but the time) with the grid and random
strategies: their proposals do not depend on costs, only on the points already taken, so the k-th batch of
a task holds the same points, in the same order (the same candidate indices), whether batch k-1 has been
measured yet or is still in flight on another device; and on QEMU a candidate's cost does not depend on the
firmware it is in or on the device that runs it. The learned strategy (`model`) proposes from what has
been measured so far: in the farm it keeps proposing while batches are in flight, so its choices, not its
costs, depend on the order results come back in.
"""

from __future__ import annotations

from collections.abc import Mapping

from utvm.compiler.schedule import Schedule
from utvm.tune import log as tlog
from utvm.tune.strategy import Strategy, make_strategy, point_key
from utvm.tune.tasks import Task


class TaskPlan:
    """The measurement plan of one task (see the module docstring)."""

    def __init__(self, task: Task, budget: int, records: Mapping[str, tlog.Record], strategy: str,
                 seed: int) -> None:
        """`records`: the log's records of the task (schedule key -> record, one per point: log.unique),
        in its target and unit; those of points outside the task's current space are left out, and those
        whose error was the device's are measured again."""
        space = task.space
        self.task = task
        self.budget = budget
        inside = {k: r for k, r in records.items() if space.check(r.schedule) is None}
        #: the task's records in its current space that count (schedule key -> record): the trials
        self.mine: dict[str, tlog.Record] = {k: r for k, r in inside.items() if not tlog.retried(r)}
        self.default_key = point_key(space.default)
        #: points a resumed run measures again (their record's error was the device's), first come first
        self.retry: list[Schedule] = [dict(r.schedule) for k, r in inside.items()
                                      if k not in self.mine and k != self.default_key]
        history = [(dict(r.schedule), r.cost if r.ok else None) for r in self.mine.values()]
        self.strategy: Strategy = make_strategy(strategy, space, seed, history)
        self.strategy.seen.update(point_key(p) for p in self.retry)
        #: schedule keys proposed and not recorded yet
        self.in_flight: set[str] = set()
        self._exhausted = False

    @property
    def left(self) -> int:
        """Points still to propose within the budget."""
        return max(0, self.budget - len(self.mine) - len(self.in_flight))

    def next_batch(self, batch: int) -> list[Schedule]:
        """The next `batch` points at most (fewer when the budget or the space runs out; [] when nothing is
        left to propose), marked in flight."""
        want = min(batch, self.left)
        if want <= 0:
            return []
        points: list[Schedule] = []
        if self.default_key not in self.mine and self.default_key not in self.in_flight:
            points.append(dict(self.task.space.default))
            self.strategy.seen.add(self.default_key)
        while self.retry and len(points) < want:
            points.append(self.retry.pop(0))
        points += self.strategy.propose(want - len(points))
        if not points:
            self._exhausted = True  # every legal point is measured or in flight
        self.in_flight.update(point_key(p) for p in points)
        return points

    def record(self, rec: tlog.Record) -> None:
        """A record of a point proposed (or of any point of the task): it counts as a trial, and the
        strategy learns its cost (None: an error)."""
        key = rec.schedule_key()
        self.mine[key] = rec
        self.in_flight.discard(key)
        self.strategy.update([(dict(rec.schedule), rec.cost if rec.ok else None)])

    @property
    def finished(self) -> bool:
        """Nothing in flight, and nothing left to propose (the budget is met, or the space is exhausted:
        known once `next_batch` has found no point while the budget had room)."""
        return not self.in_flight and (self.left == 0 or self._exhausted)
