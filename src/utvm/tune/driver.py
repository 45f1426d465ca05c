"""The tuning driver: every task of a model, measured in batches, logged as it goes (docs/architecture.md §11).

    from utvm.tune import tune
    result = tune("kws_ref_model.tflite", "kws.jsonl", platform="qemu-cortex-m4", rounding="double")
    print(format_summary(result.summaries))

For each task (`extract_tasks`), in the order its first node runs: the default point first (the baseline),
then the strategy's proposals, `batch` points per evaluation firmware (`Measurer`), until `trials` points
of the task are in the log or the space has no legal point left (utvm.tune.plan decides the batches).
Each measured candidate is appended to the log at once (`log.append`); a re-run reads the log first and
skips every (task, schedule) pair it holds, with or without an error, but for those whose error was the
device's (`log.retried`: measured again), so an interrupted run resumes where it stopped and a finished
one returns at once. Only this driver writes the log.

With `workers` > 1, `farm` or `ray_address`, the batches are built and measured on a device farm on Ray
(utvm.tune.farm): the same plans, the same records, written here as they come back from the devices.

Progress (through `progress(message)`): per batch, a line `task i/n <description>: done/total trials, best
<cost> = <ratio>x the default <cost>, errors, ETA <remaining time>`. Its best and default are what the final
table says of the task so far (`log.summarize` with the same per-task budgets: `max_code_growth`,
`max_flash_growth`, `max_ram_growth`). The ETA is the time per candidate of this run so far times the
candidates still to measure in this task and the following ones. `cost` is what is minimised (measure.COSTS:
estimated cycles on a platform with a timing model of its core, else instructions, or seconds off QEMU):
records of another unit in the log are neither resumed nor compared.

The log may hold anything before the run: it must be empty or a tuning log (every complete line a record,
`log.read`), or the run stops before any work and the file is left as it is. Every string of a summary or a
progress line that came from the log or the model goes through `utvm.support.text.shown`.
"""

from __future__ import annotations

import dataclasses
import datetime
import math
import os
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import utvm
from utvm.compiler.schedule import describe_workload
from utvm.errors import UsageError
from utvm.support.text import shown
from utvm.tune import log as tlog
from utvm.tune.measure import COSTS, UNIT_CYCLES, UNIT_INSTRUCTIONS, CandidateHook, Measurer
from utvm.tune.plan import TaskPlan
from utvm.tune.strategy import AUTO, STRATEGIES, check_strategy, legal_points, point_key, resolve_strategy
from utvm.tune.tasks import Task, extract_tasks

#: Points measured per task unless told otherwise (fewer when the space has fewer legal points).
DEFAULT_TRIALS = 64
#: Candidates per evaluation firmware.
DEFAULT_BATCH = 16
#: Seconds the device may take to answer one request (a candidate that takes longer is a hang).
DEFAULT_TIMEOUT_S = 20.0
DEFAULT_STRATEGY = "auto"
#: Characters of a task's description in the summary table (a workload from a log may describe anything).
MAX_DESCRIPTION = 120


@dataclass
class TuneResult:
    tasks: list[Task]
    summaries: list[tlog.TaskSummary]
    measured: int  # candidates measured in this run
    resumed: int  # (task, schedule) pairs found in the log and skipped
    seconds: float
    stats: dict[str, int] = field(default_factory=dict)
    unit: str = ""  # what the costs were measured in (measure.COSTS)
    target: str = ""


def format_cost(cost: float | None, unit: str) -> str:
    if cost is None:
        return "-"
    if unit in (UNIT_INSTRUCTIONS, UNIT_CYCLES):
        name = "insn" if unit == UNIT_INSTRUCTIONS else "cyc"
        if cost >= 1e6:
            return f"{cost / 1e6:.3f} M {name}"
        if cost >= 1e3:
            return f"{cost / 1e3:.1f} k {name}"
        return f"{cost:.0f} {name}"
    if cost >= 1e-3:
        return f"{cost * 1e3:.3f} ms"
    return f"{cost * 1e6:.2f} us"


def format_duration(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    if seconds >= 60:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds}s"


def _cell(text: object, limit: int | None = None) -> str:
    """A table cell or progress text from a log or a model: escaped (one inert line), at most `limit` long."""
    out = shown(text)
    return out if limit is None or len(out) <= limit else out[:limit - 3] + "..."


def footprint_cell(best: tlog.Record | None, default: tlog.Record | None, key: str) -> str:
    """`<bytes> (<+delta>)` of footprint `key` (code, weights, scratch) of the best record against the
    default's; `?` for a figure the record lacks, no delta when the default's is unknown."""
    if best is None:
        return "-"
    value = getattr(best, key)
    if value is None:
        return "?"
    base = getattr(default, key) if default is not None else None
    return f"{value}" if base is None else f"{value} ({value - base:+d})"


def format_summary(summaries: Sequence[tlog.TaskSummary]) -> str:
    """The table `utvm tune` ends with and `utvm tune --summary` prints: per task, default vs best (its
    cost, and its code, weights and scratch bytes with their growth over the default point's). Every cell
    that came from the log (description, target, schedule) is escaped: a log cannot drive the terminal or
    forge a row."""
    if not summaries:
        return "no task in the log"
    rows = []
    for s in summaries:
        ratio = f"{s.ratio:.3f}" if s.ratio is not None else "-"
        best = _cell(", ".join(f"{k}={v}" for k, v in s.best.schedule.items())) if s.best else "-"
        rows.append((_cell(s.description, MAX_DESCRIPTION), _cell(s.target), str(s.trials), str(s.errors),
                     format_cost(s.default.cost if s.default else None, s.unit),
                     format_cost(s.best.cost if s.best else None, s.unit), ratio,
                     *(footprint_cell(s.best, s.default, k) for k in tlog.FOOTPRINTS), best))
    head = ("task", "target", "trials", "errors", "default", "best", "best/default", "code B", "weights B",
            "scratch B", "best schedule")
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(head[:-1])]

    def line(cells: Sequence[str]) -> str:
        left = [cells[0].ljust(widths[0]), cells[1].ljust(widths[1])]
        right = [c.rjust(w) for c, w in zip(cells[2:-1], widths[2:], strict=True)]
        return "  ".join([*left, *right, cells[-1]])

    out = [line(head), "-" * len(line(head))]
    out += [line(r) for r in rows]
    ratios = [s.ratio for s in summaries if s.ratio is not None and s.ratio > 0]
    if ratios:
        gm = math.exp(sum(math.log(r) for r in ratios) / len(ratios))  # (a product of many may overflow)
        out.append(f"{len(summaries)} task(s); geometric mean best/default over {len(ratios)}: {gm:.3f}")
    return "\n".join(out)


def progress_line(ti: int, n: int, task: Task, budget: int, mine: dict[str, tlog.Record], unit: str,
                  eta_s: float | None, budgets: tlog.Budgets = tlog.API_BUDGETS,
                  records: Sequence[tlog.Record] | None = None) -> str:
    """`task i/n <description>: done/total trials, best <cost> = <ratio>x the default <cost>, errors, ETA`.
    `mine`: the task's records in its current space (the trials); `records`: all its records (default:
    `mine`), of which the best and the default are what the final table says (`log.summarize` with the
    per-task `budgets`)."""
    summary = tlog.summarize(list(mine.values()) if records is None else records, max_code_growth=budgets.code,
                             max_flash_growth=budgets.flash, max_ram_growth=budgets.ram, unit=unit)
    s = next((x for x in summary if x.task == task.key), None)
    errors = sum(1 for r in mine.values() if not r.ok)
    text = f"task {ti + 1}/{n} {_cell(task.description)}" + (f" (x{task.count})" if task.count > 1 else "")
    text += f": {min(len(mine), budget)}/{budget} trials"
    if s is not None and s.best is not None:
        text += f", best {format_cost(s.best.cost, unit)}"
        if s.default is not None and s.ratio is not None:
            text += f" = {s.ratio:.3f}x the default {format_cost(s.default.cost, unit)}"
    if errors:
        text += f", {errors} error(s)"
    if eta_s is not None:
        text += f", ETA {format_duration(eta_s)}"
    return text


def task_seed(seed: int, key: str) -> int:
    """The strategy seed of one task: the run's seed and the task key (stable across runs)."""
    return (int(seed) * 1_000_003 + zlib.crc32(key.encode())) & 0xFFFFFFFF


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _record(task: Task, res: Any, target: str, default: bool, platform: str) -> tlog.Record:
    """The log record of one measurement, always one the reader accepts (a cost that is not > 0 and finite
    is an error; long texts are cut)."""
    cost, error = res.cost, res.error
    if error is None and not tlog.usable_cost(cost):
        error = f"the measurement gave no usable cost ({cost!r})"
    if error is not None:
        cost = None
        error = str(error)[:tlog.MAX_ERROR_CHARS]
    sizes = [tlog.byte_count(getattr(res, k, None)) for k in tlog.FOOTPRINTS]  # out of range or a bool: unknown
    kind = None
    if error is not None:  # what failed (log.ERROR_KINDS); a cost that is no cost is the result's
        kind = getattr(res, "error_kind", None) if res.error is not None else tlog.ERROR_RESULT
        kind = kind if kind in tlog.ERROR_KINDS else tlog.ERROR_RESULT
    return tlog.Record(task.key, target, dict(res.schedule), None if cost is None else float(cost), res.unit, error,
                       utvm.__version__[:tlog.MAX_TEXT], dict(task.workload), _now(), default,
                       str(platform)[:tlog.MAX_TEXT], *sizes, kind)


def tune(model: Any, log_path: str | os.PathLike[str], platform: str = "host", *, target: str | None = None,
         rounding: str = "single", trials: int = DEFAULT_TRIALS, strategy: str = DEFAULT_STRATEGY,
         batch: int = DEFAULT_BATCH, timeout: float = DEFAULT_TIMEOUT_S, seed: int = 0,
         progress: Callable[[str], None] | None = None, on_candidate: CandidateHook | None = None,
         only: Sequence[str] | None = None, measurer: Measurer | None = None,
         max_code_growth: float | None = tlog.DEFAULT_MAX_CODE_GROWTH, max_flash_growth: float | None = None,
         max_ram_growth: float | None = None, cost: str | None = None, workers: int = 1,
         ray_address: str | None = None, farm: Any = None) -> TuneResult:
    """Tune every task of `model` (a .tflite/.onnx path or an imported Graph) on `platform`, appending to
    the log at `log_path` (see the module docstring). `target`: the CPU to generate code for (default:
    the platform's). `strategy`: grid, random, model or auto (model when scikit-learn is installed, else
    random). `only`: task keys to tune (default: all). `on_candidate(session, index, schedule)`
    runs before each candidate is measured (tests use it to kill the device). `max_code_growth`,
    `max_flash_growth`, `max_ram_growth`: the per-task budgets of the progress lines' and the summary's best
    (log.best_records). `cost`: what is measured and minimised (measure.COSTS; None: the platform's
    default, see measure.cost_unit). `workers` > 1 (devices of `platform`), `farm` (a farm file or a
    farm.FarmConfig) or `ray_address` (a Ray cluster to join) measure on a device farm on Ray
    (utvm.tune.farm; `on_candidate` then runs on the devices and must be picklable); without them Ray is
    never imported."""
    say = progress or (lambda _m: None)
    farm_config = None
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise UsageError(f"workers must be an integer >= 1, got {workers!r}")
    if workers > 1 or farm is not None or ray_address is not None:
        from utvm.tune import farm as tfarm

        if measurer is not None:
            raise UsageError("a measurer measures in this process: give no measurer with workers, farm or ray_address")
        farm_config = tfarm.configure(platform, workers, farm, ray_address)
        platform = farm_config.groups[0].platform
    if strategy not in (*STRATEGIES, AUTO):
        raise UsageError(f"unknown strategy {strategy!r}; choose one of {', '.join((AUTO, *STRATEGIES))}")
    strategy = resolve_strategy(strategy)
    for label, v in (("trials", trials), ("batch", batch)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise UsageError(f"{label} must be an integer >= 1, got {v!r}")
    for label, growth in (("max_code_growth", max_code_growth), ("max_flash_growth", max_flash_growth),
                          ("max_ram_growth", max_ram_growth)):
        if growth is not None and (isinstance(growth, bool) or not isinstance(growth, int | float)
                                   or not math.isfinite(growth) or growth < 0):
            raise UsageError(f"{label} must be a finite fraction >= 0 or None, got {growth!r}")
    limits = tlog.Budgets(max_code_growth, max_flash_growth, max_ram_growth)
    check_strategy(strategy)
    path = tlog.check_writable(log_path)
    records = tlog.read(path)  # a file that is not a tuning log fails before any work, and is left as it is
    if farm_config is not None:
        group_ms = tfarm.farm_measurers(farm_config, target, timeout=timeout, seed=seed, cost=cost)
    else:
        group_ms = [measurer or Measurer(platform, target, timeout=timeout, seed=seed, on_candidate=on_candidate,
                                         progress=lambda msg: None, cost=cost)]
    m = group_ms[0]
    if cost is not None and measurer is not None and COSTS.get(cost) != measurer.unit:
        raise UsageError(f"cost {cost!r}: the measurer given measures {measurer.unit}")
    t_start = time.monotonic()
    say(f"extracting tasks for {m.target} (rounding {rounding})")
    tasks = extract_tasks(model, m.target, rounding)
    if only is not None:
        unknown = sorted(set(only) - {t.key for t in tasks})
        if unknown:
            raise UsageError(f"the model has no task {', '.join(unknown)}")
        tasks = [t for t in tasks if t.key in set(only)]
    where = _cell(m.platform_name) if farm_config is None else farm_config.describe()
    say(f"{len(tasks)} task(s) on {where} (target {m.target}); costs in {m.unit}; "
        f"{trials} trials per task, {strategy} search, {batch} candidates per firmware; log {_cell(path)}")
    # A point written before a knob was renamed or its space became conditional is read as the space names
    # it now (Space.normalize): an old log resumes instead of measuring its points again, and the same point
    # in the old and the new form is one point (log.unique).
    spaces = {t.key: t.space for t in tasks}
    kept = tlog.unique(dataclasses.replace(r, schedule=spaces[r.task].normalize(r.schedule)) if r.task in spaces
                       else r for r in records)
    if len(kept) < len(records):
        say(f"the log holds {len(records) - len(kept)} record(s) of points measured before (concurrent tuners?): "
            "of each point the first measurement without an error counts")

    # What the log already holds, per task (only points of the task's current space count), one record per
    # point (log.unique: of a point measured twice, the first without an error).
    done: dict[str, dict[str, tlog.Record]] = {t.key: {} for t in tasks}
    for r in kept:
        if r.task in done and r.target == m.target and r.unit == m.unit:  # another clock: measured again
            done[r.task][r.schedule_key()] = r
    budgets = []
    for t in tasks:
        legal = legal_points(t.space)
        budgets.append(min(trials, len(legal)) if legal is not None else trials)
    plans = [TaskPlan(t, b, done[t.key], strategy, task_seed(seed, t.key)) for t, b in zip(tasks, budgets, strict=True)]
    resumed = sum(min(sum(1 for r in done[p.task.key].values() if not tlog.retried(r)), p.budget) for p in plans)
    clock = {"measured": 0, "seconds": 0.0}  # this run's candidates and the time they took

    def line(ti: int) -> str:
        plan = plans[ti]
        later = sum(q.left for q in plans[ti + 1:])
        eta = (plan.left + later) * clock["seconds"] / clock["measured"] if clock["measured"] else None
        return progress_line(ti, len(tasks), plan.task, plan.budget, plan.mine, m.unit, eta, limits,
                             list(done[plan.task.key].values()))

    def take(ti: int, res: Any, platform_name: str) -> None:
        """Log one measurement of task `ti` (only this driver writes the log) and tell its plan."""
        plan = plans[ti]
        rec = _record(plan.task, res, m.target, point_key(res.schedule) == plan.default_key, platform_name)
        tlog.append(path, [rec])
        plan.record(rec)
        done[plan.task.key][rec.schedule_key()] = rec
        clock["measured"] += 1

    if farm_config is not None:
        stats = tfarm.run(plans, farm_config, take=take, line=line, say=say, clock=clock, batch=batch,
                          target=m.target, unit=m.unit,
                          platform_names=[g.platform_name for g in group_ms], cost=cost, timeout=timeout, seed=seed,
                          on_candidate=on_candidate)
    else:
        for ti, plan in enumerate(plans):
            say(line(ti))
            while points := plan.next_batch(batch):
                t0 = time.monotonic()
                for res in m.measure(plan.task, points):
                    take(ti, res, m.platform_name)
                clock["seconds"] += time.monotonic() - t0
                say(line(ti))
        stats = dict(m.stats)

    summaries = tlog.summarize([r for k in done for r in done[k].values()], describe_workload, limits.code,
                               max_flash_growth=limits.flash, max_ram_growth=limits.ram, unit=m.unit)
    return TuneResult(tasks, summaries, int(clock["measured"]), resumed, time.monotonic() - t_start, stats,
                      m.unit, m.target)


def summary_of_log(log_path: str | os.PathLike[str],
                   max_code_growth: float | None = tlog.DEFAULT_MAX_CODE_GROWTH, *,
                   max_flash_growth: float | None = None, max_ram_growth: float | None = None,
                   unit: str | None = None) -> list[tlog.TaskSummary]:
    """Per task of the log at `log_path`: default vs best within the per-task budgets (what `utvm tune
    --summary` prints; `unit`: only records in it, else each task's latest). Lines that are not records are
    skipped with a warning each (log.load); a file none of whose lines is a record is a TuningLogError."""
    contents = tlog.load(Path(log_path))
    contents.report()
    return tlog.summarize(contents.records, describe_workload, max_code_growth, max_flash_growth=max_flash_growth,
                          max_ram_growth=max_ram_growth, unit=unit)
