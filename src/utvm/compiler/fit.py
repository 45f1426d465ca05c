"""Scratch-aware schedules: lower a graph so that its workspace stays within a peak (docs/kernels.md §12).

The SIMD kernels ask for scratch buffers (im2col columns, int16 channel planes) that the memory planner places
beside the activations; at a step where the activations already reach the model's peak, any scratch raises
it. `lower_within` lowers with the default schedules (and the given ones: a tuning log's) and, when the plan's
workspace exceeds the limit, replaces schedules, layer by layer, by points of their spaces with less scratch:

1. The limit: `peak_limit`, or (None) the peak of the *portable build*: the same plan with every kernel at the
   point of its space with the least scratch (`Space.leaner`: the points that differ only in the knobs that
   change the scratch) and every other kernel's scratch as it is; a schedule given by the caller (a tuning
   log's) keeps its scratch in that build (the log allows it). Without a limit the replacements may also
   cost at most `max_slowdown` (1 % by default) of the model's estimated instructions (the sum of
   `Space.cost` over its operators with a model) in all: the portable peak is where the default build goes
   when that is (about) free, not at any price (the least-scratch points are the scalar kernels: measured on
   qemu-cortex-m4, forcing the portable peak costs micro_speech 3.2x its instructions, KWS +70 %, ResNet-8
   +41 %, AD01 +7 %); with no budget left the build stays above it. `max_slowdown=None` forces it. With an
   explicit limit there is no budget unless the caller gives one (`utvm compile --memory-limit` gives its
   `--patch-overhead`): then the build stops where the budget does, over the limit, and the caller decides.
2. While the workspace exceeds the limit: at the step where the live activations plus the step's scratch are
   largest among the steps over the limit (the operator's scratch lives during its call only, so the step's
   operator is the only contributor besides the tensors), that operator's schedule becomes the fastest point
   (`Space.cost`, a static estimate) among those whose scratch brings every step of its task within the limit,
   or, when none does, the fastest of those with the least scratch. When every step is within the limit and the
   placed workspace still is not (fragmentation), the largest scratch steps down to the fastest point with
   less. Each replacement lowers a scratch, so the loop ends; it also ends when the steps over the limit have
   nothing left to lower (within the budget, below).
3. Schedules given by the caller (a tuning log's, `schedules`) are replaced only after every default one is at
   its least scratch, and only for an explicit `peak_limit`: without one, a log's choice stands.

Schedules are per task (every node of one workload gets the same point, as a tuning log's do); the plan is
re-derived with `footprint.workspace_peak` (only the scratch sizes change), and the graph is lowered once
more with the chosen points at the end. A limit below the least reachable peak is a `MemoryLimitError` naming
that peak.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from utvm.compiler import memory
from utvm.compiler.footprint import workspace_peak
from utvm.compiler.kernels import get_space
from utvm.compiler.lower import Lowered, kernel_contexts, lower
from utvm.compiler.schedule import Option, Schedule, Space
from utvm.errors import CompileError
from utvm.ir.graph import Graph
from utvm.target import Target

#: without a limit, the estimated extra instructions the replacements may cost in all (a fraction of the model's)
DEFAULT_MAX_SLOWDOWN = 0.01
#: lower_within's default budget: DEFAULT_MAX_SLOWDOWN without a limit, none with one
AUTO = "auto"


class MemoryLimitError(CompileError):
    """The workspace cannot be brought within the limit: `smallest` is the least peak the schedules reach."""

    def __init__(self, limit: int, smallest: int) -> None:
        self.limit = int(limit)
        self.smallest = int(smallest)
        super().__init__(f"the workspace cannot be brought within {self.limit:,} bytes: the smallest peak the "
                         f"kernels' schedules reach is {self.smallest:,} bytes")


@dataclass
class _Task:
    """One tuning task of the lowered model: its space, the steps (operator indices) of its nodes, where its
    schedule came from and the options (`Space.leaner`) it may take."""

    key: str
    space: Space
    steps: list[int]
    source: str
    options: list[Option]
    current: Option


def lower_within(graph: Graph, model_name: str, rounding: str = "single",
                 algorithm: str = memory.DEFAULT_ALGORITHM, progress: Callable[[str], None] | None = None,
                 target: Target | str = "host", schedules: Mapping[str, Schedule] | None = None,
                 task_counts: Mapping[str, int] | None = None, pools: Sequence[memory.PoolSpec] = (),
                 peak_limit: int | None = None, max_slowdown: float | str | None = AUTO) -> Lowered:
    """`lower(graph, model_name, rounding, algorithm, progress, target, schedules, task_counts, pools)` with the
    schedules of kernels adjusted so that the plan's workspace is at most `peak_limit` bytes. None: towards the
    portable build's peak. `max_slowdown` bounds the replacements' estimated extra instructions, as a fraction
    of the model's: by default (AUTO) DEFAULT_MAX_SLOWDOWN without a limit and no bound with one; None: no
    bound. See the module docstring. An explicit limit the schedules cannot reach raises MemoryLimitError (its
    `smallest`: the least peak they reach) when nothing bounds them; within a bound, the build that bound
    reaches is returned, over the limit."""
    if peak_limit is not None and peak_limit < 0:
        raise CompileError(f"peak limit {peak_limit}: must be a byte count >= 0")
    if max_slowdown == AUTO:
        max_slowdown = DEFAULT_MAX_SLOWDOWN if peak_limit is None else None
    if max_slowdown is not None and (not isinstance(max_slowdown, (int, float)) or max_slowdown < 0):
        raise CompileError(f"max_slowdown {max_slowdown!r}: must be >= 0 (a fraction of the model's instructions)")
    lowered = lower(graph, model_name, rounding, algorithm, progress, target, schedules, task_counts, pools)
    tasks = _tasks(lowered, model_name, rounding, target, task_counts)
    fit = _Fit(lowered, tasks, algorithm, pools)
    defaults = [k for k, t in tasks.items() if t.source != "given"]
    # without a limit, a log's schedules keep their scratch: the limit is the portable peak, or what they need
    limit = fit.least(defaults) if peak_limit is None else int(peak_limit)
    if lowered.plan.workspace_bytes <= limit:
        return lowered
    phases = [defaults] if peak_limit is None else [defaults, list(tasks)]
    budget = None
    if max_slowdown is not None:
        budget = float(max_slowdown) * sum(t.current.cost * len(t.steps) for t in tasks.values())
    for movable in phases:
        budget = fit.shrink(movable, limit, progress, budget)
        if fit.peak() <= limit:
            break
    else:
        if peak_limit is not None and max_slowdown is None:
            raise MemoryLimitError(limit, fit.least(list(tasks)))
    chosen = {k: t.current.point for k, t in tasks.items() if t.current.point != lowered_point(lowered, k)}
    if not chosen:  # nothing within the budget lowers the peak
        return lowered
    if progress:
        progress(f"schedules for a workspace within {limit:,} bytes: " + "; ".join(
            f"{k} {p}" for k, p in chosen.items()))
    final = lower(graph, model_name, rounding, algorithm, progress, target, {**dict(schedules or {}), **chosen},
                  task_counts, pools)
    if fit.peak() <= limit < final.plan.workspace_bytes and peak_limit is not None:  # pragma: no cover - a kernel bug
        raise CompileError(f"the workspace is {final.plan.workspace_bytes:,} bytes with the chosen schedules, over "
                           f"the limit {peak_limit:,} (planned {fit.peak():,}): a kernel's scratch differs from "
                           "what its space says (Space.scratch)")
    # a schedule replaced here is the build's own choice, not a tuning log's (even where it replaced a log's)
    final.funcs = [replace(f, schedule_source="default") if f.task in chosen else f for f in final.funcs]
    return final


def lowered_point(lowered: Lowered, task: str) -> Schedule:
    """The schedule the operators of `task` were lowered with."""
    return next(f.schedule for f in lowered.funcs if f.task == task)


def portable_peak(graph: Graph, model_name: str, rounding: str = "single",
                  algorithm: str = memory.DEFAULT_ALGORITHM, target: Target | str = "host",
                  task_counts: Mapping[str, int] | None = None, pools: Sequence[memory.PoolSpec] = ()) -> int:
    """The workspace of `graph` lowered with every kernel at the point of least scratch (lower_within's
    default limit)."""
    lowered = lower(graph, model_name, rounding, algorithm, None, target, None, task_counts, pools)
    tasks = _tasks(lowered, model_name, rounding, target, task_counts)
    return _Fit(lowered, tasks, algorithm, pools).least(list(tasks))


def _tasks(lowered: Lowered, model_name: str, rounding: str, target: Target | str,
           task_counts: Mapping[str, int] | None) -> dict[str, _Task]:
    """The tasks of `lowered` whose spaces have memory knobs, in step order of their first node."""
    done = {f.node_index for f in lowered.funcs}
    skip = [i for i in range(len(lowered.graph.nodes)) if i not in done]
    contexts = list(kernel_contexts(lowered.graph, model_name, rounding, target, skip, None, task_counts))
    if [c.func_name for c in contexts] != [f.name for f in lowered.funcs]:  # pragma: no cover - one naming
        raise CompileError("the kernel contexts do not match the lowered operators")
    tasks: dict[str, _Task] = {}
    for step, (ctx, f) in enumerate(zip(contexts, lowered.funcs, strict=True)):
        if not f.task:
            continue
        if f.task in tasks:
            tasks[f.task].steps.append(step)
            continue
        space = get_space(ctx)
        if not space.memory_knobs:
            continue
        options = space.leaner(f.schedule)
        here = next((o for o in options if o.point == f.schedule), None)
        if here is None:  # the point is legal (it was lowered); its cost is the model's
            cost = float(space.cost(f.schedule)) if space.cost is not None else 0.0
            here = Option(dict(f.schedule), int(f.code.scratch_bytes), cost)
            options.append(here)
        if here.scratch != f.code.scratch_bytes:  # pragma: no cover - a kernel bug: its space cannot be trusted
            warnings.warn(f"{f.name}: its space says {here.scratch} bytes of scratch for {f.schedule}, the kernel "
                          f"asked for {f.code.scratch_bytes}; its schedule is left as it is", stacklevel=2)
            continue
        tasks[f.task] = _Task(f.task, space, [step], f.schedule_source, options, here)
    return tasks


class _Fit:
    """The plan of a lowered model with the scratch of its tasks' operators as their current options say."""

    def __init__(self, lowered: Lowered, tasks: dict[str, _Task], algorithm: str,
                 pools: Sequence[memory.PoolSpec]) -> None:
        self.lowered, self.tasks, self.algorithm, self.pools = lowered, tasks, algorithm, tuple(pools)
        self.funcs = lowered.funcs
        self.steps = {f.name: s for s, f in enumerate(self.funcs)}
        n = len(self.funcs)
        # bytes live at each step besides the operator's own scratch (tensors, state, user operators' areas)
        own = {f"scratch:{f.name}" for f in self.funcs if f.task in tasks}
        self.live = [0] * n
        for b in lowered.plan.buffers:
            if b.tensors and b.tensors[0] in own and len(b.tensors) == 1:
                continue
            for s in range(max(b.start, 0), min(b.end, n - 1) + 1):
                self.live[s] += memory.align(b.size)

    def scratch_of(self, overrides: Mapping[str, int] | None = None) -> dict[str, int]:
        out = {}
        for f in self.funcs:
            t = self.tasks.get(f.task) if f.task else None
            if t is not None:
                out[f.name] = (overrides or {}).get(t.key, t.current.scratch)
        return out

    def peak(self, overrides: Mapping[str, int] | None = None) -> int:
        return workspace_peak(self.lowered.plan, self.steps, self.scratch_of(overrides), self.algorithm, self.pools)

    def least(self, keys: list[str]) -> int:
        """The workspace with the tasks `keys` at their least scratch (the others as they are)."""
        return self.peak({k: min(o.scratch for o in self.tasks[k].options) for k in keys})

    def step_total(self, s: int) -> int:
        f = self.funcs[s]
        t = self.tasks.get(f.task) if f.task else None
        return self.live[s] + (memory.align(t.current.scratch) if t is not None and t.current.scratch else 0)

    def shrink(self, movable: list[str], limit: int, progress: Callable[[str], None] | None,
               budget: float | None = None) -> float | None:
        """Step the schedules of `movable` tasks down in scratch until the workspace fits `limit` or none can
        (within `budget` estimated extra instructions in all, when given); returns the budget left."""
        movable_set = set(movable)
        while self.peak() > limit:
            over = sorted((s for s in range(len(self.funcs)) if self.step_total(s) > limit),
                          key=lambda s: (-self.step_total(s), s))
            pick: tuple[_Task, Option] | None = None
            for s in over:
                t = self.tasks.get(self.funcs[s].task) if self.funcs[s].task else None
                if t is None or t.key not in movable_set or t.current.scratch == 0:
                    continue
                pick = self._replacement(t, limit, budget)
                if pick is not None:
                    break
            if pick is None and not over:  # every step within the limit: the placement's fragmentation
                pick = self._largest_down(movable_set, budget)
            if pick is None:
                return budget
            t, opt = pick
            if budget is not None:
                budget -= self._extra(t, opt)
            if progress:
                progress(f"task {t.key}: scratch {t.current.scratch:,} -> {opt.scratch:,} bytes with {opt.point}")
            t.current = opt
        return budget

    @staticmethod
    def _extra(t: _Task, o: Option) -> float:
        """Estimated instructions option `o` adds over `t`'s current point, for all the task's nodes."""
        return (o.cost - t.current.cost) * len(t.steps)

    def _smaller(self, t: _Task, budget: float | None) -> list[Option]:
        """The options of `t` with less scratch than its current one (within `budget`), fastest first."""
        return [o for o in t.options if o.scratch < t.current.scratch
                and (budget is None or self._extra(t, o) <= budget)]

    def _replacement(self, t: _Task, limit: int, budget: float | None) -> tuple[_Task, Option] | None:
        """The fastest option of `t` with less scratch whose every step fits `limit`; else the fastest of the
        least scratch below the current; None when none has less (within `budget`)."""
        room = min(limit - self.live[s] for s in t.steps)
        smaller = self._smaller(t, budget)
        if not smaller:
            return None
        fitting = [o for o in smaller if (memory.align(o.scratch) if o.scratch else 0) <= room]
        if fitting:
            return t, fitting[0]  # options are fastest first
        least = min(o.scratch for o in smaller)
        return t, next(o for o in smaller if o.scratch == least)

    def _largest_down(self, movable: set[str], budget: float | None) -> tuple[_Task, Option] | None:
        """The task with the largest scratch that can take less: its fastest option with less (within
        `budget`)."""
        for t in sorted((self.tasks[k] for k in movable), key=lambda t: -t.current.scratch):
            smaller = self._smaller(t, budget)
            if smaller:
                return t, smaller[0]
        return None
