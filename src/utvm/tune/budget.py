"""Applying a tuning log to a whole model within flash and workspace budgets (docs/tuning.md, "Budgets").

    from utvm.compiler import compile
    from utvm.tune import log as tlog
    from utvm.tune.budget import choose_schedules

    default = compile(graph, target="cortex-m4", rounding="double")          # the default build
    choice = choose_schedules(tlog.load("kws.jsonl").records, default, tlog.COMMAND_BUDGETS)
    tuned = compile(graph, target="cortex-m4", rounding="double", schedules=choice.schedules)

What is chosen: one point per task of the model (a schedule of the log the kernel accepts, or its default
point), so that the model's tasks run fastest, each weighted by the nodes that use it (sum of n_t x cost_t),
subject to
- flash: the sum over the model's tasks of code + weights grows by at most `flash` x the default build's
  (the records' `code` and `weights` are already for all the nodes of their task);
- RAM: the workspace the memory planner gives the model, with each node's scratch buffer as its point asks,
  is at most (1 + `ram`) x the default build's (the peak of the plan, not the sum of the scratch areas: a
  larger scratch may fit where a dead tensor was);
- code: with `code` set, each task's code at most (1 + `code`) x its default point's (a per-task limit, off
  in the commands unless `--max-code-growth` is given).
Only records of one unit compete (the `unit` asked for, else that of the latest record without error among
the model's tasks: the latest measurement campaign); a task measured in other units only keeps its default
point, with a warning. Only points faster than their task's default are candidates (a tuned build is never
slower on any task than the default build; a task whose default point has no record in the unit, because
its measurement failed or the log was made by hand, is compared from just above its slowest measured point:
any of its measured points may replace it); a footprint a record lacks (null: written before utvm recorded
it, or not measurable), or its task's default lacks, counts as the default's, with one warning.

The algorithm (a multiple-choice knapsack, solved greedily, then checked by the planner):
1. Per task, the candidates are the records of the unit whose schedule the kernel accepts
   (`Space.normalize`, `Space.check`), faster than the default, within the per-task code limit; a candidate
   no faster, no smaller in flash and no smaller in scratch than another is dropped (dominated).
2. Every task starts at its default point. Repeatedly, of all moves of one task from its current point to
   a faster candidate that keep the flash sum within its budget and the workspace's lower bound within the
   RAM budget (the largest sum of live buffers at one step: the scratch only changes at the task's own
   steps, so this is exact and cheap), take the best: a move that adds no flash before any other (the
   larger gain first), else the one with the largest gain (n_t x cost saved) per flash byte added. Stop
   when no move is left. The same again taking the largest gain first, whatever its bytes; the better of
   the two choices wins (gain per byte alone can fill the budget with small gains where one large move
   was worth more; the larger-gain-first pass takes that move, as the classic 0/1-knapsack heuristic
   compares the greedy fill with the best single item). The result is good, not proven optimal: the exact
   problem is NP-hard, and a model has few tasks with few points that are not dominated.
3. Plan the workspace of that choice with the model's planner (utvm.compiler.footprint.workspace_peak). If
   it is over the RAM budget (the planner's heuristics can miss the lower bound), back off: of the tasks
   whose scratch grew, the one with the least gain per scratch byte added loses every candidate with that
   scratch or more (when none grew, the task with the least gain among those whose scratch changed keeps
   only candidates of the default's scratch), and step 2 starts again. All-default is the default build,
   which is within any budget, so this ends.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from utvm.compiler import memory
from utvm.compiler.footprint import workspace_peak
from utvm.compiler.schedule import Schedule, describe_workload
from utvm.errors import CompileError
from utvm.support.text import shown
from utvm.tune import log as tlog
from utvm.tune.strategy import point_key


@dataclass(frozen=True)
class Option:
    """One point a task may take in the whole-model choice."""

    schedule: Schedule
    record: tlog.Record | None  # None: the kernel's default point, not measured in the unit
    cost: float  # per call of one node
    code: int  # bytes over the default point's (unknown: 0)
    weights: int  # bytes over the default point's (unknown: 0)
    scratch: int  # bytes of one call's scratch buffer

    @property
    def flash(self) -> int:
        return self.code + self.weights


@dataclass(frozen=True)
class TaskChoice:
    """What the whole-model choice gives one task."""

    task: str
    description: str
    count: int  # nodes of the model that use it
    default: Option
    chosen: Option

    @property
    def tuned(self) -> bool:
        return self.chosen is not self.default

    @property
    def ratio(self) -> float:
        return self.chosen.cost / self.default.cost if self.default.cost > 0 else 1.0


@dataclass
class ModelChoice:
    """The schedules to compile a model with, and what they cost (`choose_schedules`)."""

    #: task key -> its point, for every task of the model the log has usable records for
    schedules: dict[str, Schedule]
    tasks: list[TaskChoice]
    unit: str | None
    budgets: tlog.Budgets
    flash_base: int = 0  # the tasks' code + weights in the default build (known figures)
    flash_budget: float | None = None  # bytes the tasks' flash may grow
    workspace_default: int = 0
    workspace: int = 0
    workspace_budget: float | None = None
    #: tasks of the log on the model's target with a usable record (of any model)
    log_tasks: set[str] = field(default_factory=set)
    refused: int = 0  # records whose schedule the kernel refuses
    backoffs: int = 0  # times the planner's check took a task back (algorithm step 3)

    @property
    def flash_delta(self) -> int:
        return sum(t.chosen.flash for t in self.tasks)

    @property
    def ratio(self) -> float | None:
        """The model's tasks' cost (n_t x cost, summed) chosen / default."""
        before = sum(t.count * t.default.cost for t in self.tasks)
        return sum(t.count * t.chosen.cost for t in self.tasks) / before if before > 0 else None

    def report(self) -> str:
        """One line: the budgets, what was chosen, the flash and workspace against their budgets."""
        tuned = sum(1 for t in self.tasks if t.tuned)
        line = (f"whole-model choice ({self.budgets.describe()}): {tuned} of {len(self.tasks)} task(s) take a "
                "tuned point")
        if self.ratio is not None and self.unit:
            line += f", the tasks' cost {self.ratio:.3f}x the default ({self.unit})"
        line += (f"; flash of the tasks {self.flash_base:,} B {self.flash_delta:+,} B"
                 + (f" (budget {_signed(self.flash_budget)} B)" if self.flash_budget is not None else ""))
        line += (f"; workspace {self.workspace_default:,} B -> {self.workspace:,} B"
                 + (f" (budget {int(self.workspace_budget):,} B)" if self.workspace_budget is not None else ""))
        if self.backoffs:
            line += f"; the planner's check took back {self.backoffs} choice(s)"
        return line


def _signed(v: float) -> str:
    return f"+{int(v):,}"


def _ext(size: int) -> int:
    """Bytes a scratch buffer of `size` takes in a plan (none at all for 0: no buffer)."""
    return memory.extent(size) if size > 0 else 0


def _prune(options: Sequence[Option]) -> list[Option]:
    """Drop every option another is at least as good as in cost, flash and scratch (first of equals kept)."""
    kept: list[Option] = []
    for o in sorted(options, key=lambda o: (o.cost, o.flash, o.scratch, point_key(o.schedule))):
        if not any(k.cost <= o.cost and k.flash <= o.flash and k.scratch <= o.scratch for k in kept):
            kept.append(o)
    return kept


def choose_schedules(records: Iterable[tlog.Record], default_build: Any,
                     budgets: tlog.Budgets = tlog.COMMAND_BUDGETS, *, unit: str | None = None,
                     name: str = "tuning log") -> ModelChoice:
    """The fastest combination of per-task points within `budgets` for the model `default_build` (the
    CompiledModel compiled with every kernel's default point, the target and options the tuned build will
    have) from `records` (a tuning log's; module docstring). `name` names the log in the warnings (a task
    measured in other units only; records without footprints, once)."""
    from utvm.tune.tasks import extract_tasks

    opts = default_build.options
    target = opts.target
    ops = list(default_build.operators)
    steps: dict[str, list[int]] = {}
    for s, op in enumerate(ops):
        if op.task:
            steps.setdefault(str(op.task), []).append(s)
    good = [r for r in tlog.unique(records) if r.target == target and r.ok]
    mine = [r for r in good if r.task in steps]
    if unit is None and mine:
        unit = mine[-1].unit  # the latest measurement campaign
    choice = ModelChoice({}, [], unit, budgets, log_tasks={r.task for r in good})
    other = sorted({r.task for r in mine} - {r.task for r in mine if r.unit == unit})
    if other:
        units = sorted({r.unit for r in mine if r.task in other})
        warnings.warn(shown(f"{name}: {len(other)} task(s) of this model have records in {', '.join(units)} only, "
                            f"not in {unit} (the costs compared): they keep their default schedule"), stacklevel=2)
    mine = [r for r in mine if r.unit == unit]
    step_of = {op.name: s for s, op in enumerate(ops)}
    plan_args = (default_build.plan, step_of)
    algorithm, pools = opts.memory_planner, tuple(opts.memory_pools)
    choice.workspace_default = choice.workspace = workspace_peak(*plan_args, {}, algorithm, pools)
    if budgets.ram is not None:
        choice.workspace_budget = choice.workspace_default * (1.0 + budgets.ram)
    if not mine:
        return choice

    spaces = {t.key: t for t in extract_tasks(default_build.graph, target, opts.rounding, passes=False)}
    by_task: dict[str, list[tlog.Record]] = {}
    for r in mine:
        by_task.setdefault(r.task, []).append(r)
    code_only = tlog.Budgets(code=budgets.code, flash=None, ram=None)
    lacking = 0
    first_refusal = ""
    defaults: dict[str, Option] = {}
    options: dict[str, list[Option]] = {}
    descriptions: dict[str, str] = {}
    for key in sorted(by_task, key=lambda k: steps[k][0]):
        task = spaces.get(key)
        if task is None:  # (the model's operators and its tasks come from the same lowering)
            continue
        space = task.space
        dkey = point_key(space.default)
        accepted = []
        for r in by_task[key]:
            sched = space.normalize(r.schedule)
            reason = space.check(sched)
            if reason is not None:
                choice.refused += 1
                first_refusal = first_refusal or f"task {key}: {reason}"
                continue
            accepted.append((r, sched))
        if not accepted:
            continue
        base = (next((r for r, s in accepted if point_key(s) == dkey), None)
                or next((r for r, _s in accepted if r.default), None))
        scratch0 = int(ops[steps[key][0]].scratch_bytes)
        # A default not measured in the unit (it failed, or a hand-made log): compared from just above the
        # slowest measured point, so any measured point may replace it and the fastest gains most.
        slowest = max(float(r.cost) for r, _s in accepted)  # type: ignore[arg-type]
        base_cost = float(base.cost) if base is not None else math.nextafter(slowest, math.inf)  # type: ignore[arg-type]
        defaults[key] = Option(dict(space.default), base, base_cost, 0, 0, scratch0)
        cands = []
        for r, sched in accepted:
            if point_key(sched) == dkey or float(r.cost) >= base_cost or not tlog.within(r, base, code_only):  # type: ignore[arg-type]
                continue
            lacking += any(getattr(r, k) is None or getattr(base, k, None) is None for k in tlog.FOOTPRINTS)
            cands.append(Option(dict(sched), r, float(r.cost), tlog.delta(r, base, "code"),  # type: ignore[arg-type]
                                tlog.delta(r, base, "weights"), scratch0 if r.scratch is None else int(r.scratch)))
        options[key] = _prune(cands)
        descriptions[key] = describe_workload(task.workload)
        choice.flash_base += tlog.flash_of(base)
    if choice.refused:
        warnings.warn(shown(f"{name}: {choice.refused} record(s) of this model's tasks name a schedule their kernel "
                            f"refuses ({first_refusal}): never chosen"), stacklevel=2)
    if lacking:
        warnings.warn(shown(f"{name}: {lacking} record(s) of this model's tasks, or their task's default, lack a "
                            "code, weights or scratch size (written before utvm recorded them, or not measurable): "
                            "a size not known of both counts as the default's"), stacklevel=2)
    if budgets.flash is not None:
        choice.flash_budget = budgets.flash * choice.flash_base

    # The workspace's lower bound at each step without the tuned tasks' scratch (algorithm step 2).
    tuned_funcs = {ops[s].name for k in defaults for s in steps[k]}
    live = [0] * len(ops)
    for b in default_build.plan.buffers:
        tag = b.tensors[0] if b.tensors else ""
        if tag.startswith("scratch:") and tag[len("scratch:"):] in tuned_funcs:
            continue
        for s in range(b.start, min(b.end, len(ops) - 1) + 1):
            live[s] += memory.extent(b.size)
    peak_at = {k: max(live[s] for s in steps[k]) for k in defaults}
    count = {k: len(steps[k]) for k in defaults}
    order = list(defaults)

    while True:
        cur = max((_greedy(order, defaults, options, count, peak_at, choice.flash_budget, choice.workspace_budget,
                           per_byte) for per_byte in (True, False)),
                  key=lambda c: sum(count[k] * (defaults[k].cost - c[k].cost) for k in order))
        scratch = {ops[s].name: cur[k].scratch for k in order for s in steps[k]}
        try:
            peak: int | None = workspace_peak(*plan_args, scratch, algorithm, pools)
        except CompileError:  # the --memory-pools do not hold this plan: as over the budget
            peak = None
        if peak is not None and (choice.workspace_budget is None or peak <= choice.workspace_budget):
            break
        grown = [k for k in order if cur[k].scratch > defaults[k].scratch]
        changed = [k for k in order if cur[k].scratch != defaults[k].scratch]
        if grown:
            k = min(grown, key=lambda k: (count[k] * (defaults[k].cost - cur[k].cost))
                    / (cur[k].scratch - defaults[k].scratch))
            options[k] = [o for o in options[k] if o.scratch < cur[k].scratch]
        elif changed:
            k = min(changed, key=lambda k: count[k] * (defaults[k].cost - cur[k].cost))
            options[k] = [o for o in options[k] if o.scratch == defaults[k].scratch]
        else:  # every scratch is the default build's: its plan (cannot be over; the default build compiled)
            peak = choice.workspace_default
            break
        choice.backoffs += 1
    choice.workspace = peak
    for k in order:
        choice.tasks.append(TaskChoice(k, descriptions[k], count[k], defaults[k], cur[k]))
        choice.schedules[k] = dict(cur[k].schedule)
    return choice


def _greedy(order: Sequence[str], defaults: dict[str, Option], options: dict[str, list[Option]],
            count: dict[str, int], peak_at: dict[str, int], flash_budget: float | None,
            ram_budget: float | None, per_byte: bool = True) -> dict[str, Option]:
    """Algorithm step 2 (module docstring): from every task at its default point, the best move at a time
    (by gain per flash byte added, or with `per_byte` False by gain alone)."""
    cur = dict(defaults)
    used = 0
    while True:
        best: tuple[tuple[int, float, int], str, Option] | None = None
        for i, k in enumerate(order):
            c = cur[k]
            for o in options[k]:
                if o.cost >= c.cost:
                    continue
                added = o.flash - c.flash
                if flash_budget is not None and used + added > flash_budget:
                    continue
                if ram_budget is not None and peak_at[k] + _ext(o.scratch) > ram_budget:
                    continue
                gain = count[k] * (c.cost - o.cost)
                free = flash_budget is None or added <= 0 or not per_byte
                rank = (1 if free else 0, gain if free else gain / added, -i)
                if best is None or rank > best[0]:
                    best = (rank, k, o)
        if best is None:
            return cur
        _rank, k, o = best
        used += o.flash - cur[k].flash
        cur[k] = o


def format_choice(choice: ModelChoice, describe_limit: int = 120) -> str:
    """The whole-model choice as `utvm tune` prints it: its report line, then a row per task (the point, its
    cost against the default, and what it takes over the default point's code, weights and scratch)."""
    out = [shown(choice.report())]
    for t in choice.tasks:
        desc = shown(t.description)
        desc = desc if len(desc) <= describe_limit else desc[:describe_limit - 3] + "..."
        head = f"  {desc}" + (f" (x{t.count})" if t.count > 1 else "")
        if not t.tuned:
            out.append(f"{head}: the default point")
            continue
        o = t.chosen
        point = shown(", ".join(f"{k}={v}" for k, v in o.schedule.items()))
        out.append(f"{head}: {point}: {t.ratio:.3f}x, code {o.code:+,} B, weights {o.weights:+,} B, scratch "
                   f"{o.scratch:,} B ({o.scratch - t.default.scratch:+,})")
    return "\n".join(out)


def choose_for_model(model: Any, records: Iterable[tlog.Record], target: str, rounding: str = "single",
                     budgets: tlog.Budgets = tlog.COMMAND_BUDGETS, *, unit: str | None = None,
                     name: str = "tuning log") -> ModelChoice:
    """`choose_schedules` for `model` (a .tflite/.onnx path or an imported Graph) compiled for `target` with
    `rounding` and the compiler's other defaults (what `utvm tune` prints at the end of a run and with
    `--summary LOG MODEL`)."""
    from utvm.compiler import compile as compile_graph
    from utvm.tune.tasks import _load

    default = compile_graph(_load(model), target=target, rounding=rounding)
    return choose_schedules(records, default, budgets, unit=unit, name=name)
