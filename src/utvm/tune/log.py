"""The tuning log: JSON lines, one record per measured candidate, appended as they are measured.

    {"task": "conv2d:3f2a9c01d4e5b6a7", "target": "cortex-m4", "schedule": {"px_block": 2, ...},
     "cost": 812345.0, "unit": "instructions", "error": null, "utvm": "0.1.0",
     "workload": {...}, "time": "2026-11-25T14:02:11Z", "default": false, "platform": "qemu-cortex-m4",
     "code": 1836}

`cost` is in instructions (a platform with an instruction-counting clock: QEMU under -icount) or seconds
(the host); `error` is null or a one-line reason (the candidate failed to build, gave a wrong output,
crashed or hung the device) and such a record is never chosen. Applying a log = for each task and target,
the lowest-cost record without error whose machine code is at most 10% larger than the default point's
(`best_schedules`, `DEFAULT_MAX_CODE_GROWTH`; costs in different units never compete: the unit of the
task's last good record decides). Optional keys: `workload` (what the task is, for reading the log without
the model), `time`, `default` (true for the kernel's default point: the baseline `summarize` compares
against), `platform` (where it was measured) and `code` (bytes of machine code the schedule adds to a
firmware with the model's nodes of that task). Only the tuning driver writes the
log; each record is one `write` of one line, flushed at once, so a crash loses at most the record being
written and a re-run resumes after what is there (`measured` gives the (task, schedule) pairs to skip).
Reading is strict about structure and tolerant of one thing: a last line cut short by a crash is skipped
with a warning (and the next `append` removes it before writing). Anything else that is not a record is an
error naming the line.
"""

from __future__ import annotations

import json
import math
import os
import warnings
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from utvm.errors import UsageError

UNITS = ("instructions", "seconds")
#: A tuning log larger than this is refused (a log of a whole zoo of models stays far below).
MAX_LOG_BYTES = 256 << 20

#: How much more machine code than the default point a task's schedule may take when a log is applied (a
#: fraction of the default's bytes): the fastest point within it wins. Schedules that unroll or specialise
#: buy a few percent of speed with kilobytes of flash, which on a microcontroller is often the scarcer one.
DEFAULT_MAX_CODE_GROWTH = 0.10


class TuningLogError(UsageError):
    """A tuning log that cannot be read (or written): names the file and the line."""


@dataclass(frozen=True)
class Record:
    task: str
    target: str
    schedule: dict[str, Any]
    cost: float | None
    unit: str
    error: str | None
    utvm: str
    workload: dict[str, Any] = field(default_factory=dict)
    time: str = ""
    #: the kernel's default point of this task (the baseline of `summarize`)
    default: bool = False
    #: the platform it was measured on ("" when not recorded)
    platform: str = ""
    #: bytes of machine code the schedule puts in a firmware holding the model's nodes of this task (the
    #: target compiler's -O2 output, data excluded; None when not measured)
    code: int | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.cost is not None and math.isfinite(self.cost)

    def schedule_key(self) -> str:
        return json.dumps(self.schedule, sort_keys=True, separators=(",", ":"))

    def to_json(self) -> dict[str, Any]:
        return {"task": self.task, "target": self.target, "schedule": dict(self.schedule),
                "cost": self.cost, "unit": self.unit, "error": self.error, "utvm": self.utvm,
                "workload": self.workload, "time": self.time, "default": self.default, "platform": self.platform,
                "code": self.code}

    @staticmethod
    def from_json(d: Any, where: str) -> Record:
        if not isinstance(d, dict):
            raise TuningLogError(f"{where}: a record is a JSON object, got {type(d).__name__}")
        try:
            task, target, schedule = d["task"], d["target"], d["schedule"]
            cost, unit, error, version = d["cost"], d["unit"], d["error"], d["utvm"]
        except KeyError as exc:
            raise TuningLogError(f"{where}: the record has no {exc.args[0]!r}") from None
        if not isinstance(task, str) or not isinstance(target, str) or not task or not target:
            raise TuningLogError(f"{where}: 'task' and 'target' must be non-empty strings")
        if not isinstance(schedule, dict) or not all(isinstance(v, int | str | bool) for v in schedule.values()):
            raise TuningLogError(f"{where}: 'schedule' must be an object of int/str/bool knob values")
        if cost is not None and (isinstance(cost, bool) or not isinstance(cost, int | float)):
            raise TuningLogError(f"{where}: 'cost' must be a number or null")
        if unit not in UNITS:
            raise TuningLogError(f"{where}: 'unit' {unit!r} is not one of {', '.join(UNITS)}")
        if error is not None and not isinstance(error, str):
            raise TuningLogError(f"{where}: 'error' must be a string or null")
        if error is None and cost is None:
            raise TuningLogError(f"{where}: a record without an error needs a cost")
        workload = d.get("workload") or {}
        default = d.get("default", False)
        if not isinstance(default, bool):
            raise TuningLogError(f"{where}: 'default' must be true or false")
        return Record(task, target, dict(schedule), None if cost is None else float(cost), unit, error,
                      str(version), workload if isinstance(workload, dict) else {}, str(d.get("time", "")),
                      default, str(d.get("platform", "") or ""), _code(d.get("code"), where))


def read(path: str | os.PathLike[str]) -> list[Record]:
    """Every record of the log at `path` (a missing file is an empty log)."""
    p = Path(path)
    if not p.exists():
        return []
    if not p.is_file():
        raise TuningLogError(f"tuning log {p}: not a regular file")
    if p.stat().st_size > MAX_LOG_BYTES:
        raise TuningLogError(f"tuning log {p}: larger than {MAX_LOG_BYTES:,} bytes")
    return list(_parse(p.read_bytes(), str(p)))


def _parse(data: bytes, name: str) -> Iterator[Record]:
    lines = data.split(b"\n")
    complete = data.endswith(b"\n")
    for n, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        where = f"tuning log {name}, line {n}"
        try:
            obj = json.loads(raw.decode("utf-8"), parse_constant=_no_constant)
        except (UnicodeDecodeError, ValueError) as exc:
            if n == len(lines) and not complete:  # the last line, cut short by a crash while writing
                warnings.warn(f"{where}: an incomplete last record is skipped", stacklevel=3)
                return
            raise TuningLogError(f"{where}: not a JSON record ({exc})") from None
        yield Record.from_json(obj, where)


def _code(value: Any, where: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise TuningLogError(f"{where}: 'code' must be a byte count or null")
    return value


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def check_writable(path: str | os.PathLike[str]) -> Path:
    """`path` as a Path if records may be appended there: missing, or a regular file (not a directory,
    FIFO, device or symbolic link). The tuner checks this before it measures anything."""
    p = Path(path)
    if p.is_symlink():
        raise TuningLogError(f"tuning log {p}: a symbolic link; give the file itself")
    if p.exists() and not p.is_file():
        raise TuningLogError(f"tuning log {p}: not a regular file; refusing to write to it")
    return p


def append(path: str | os.PathLike[str], records: Iterable[Record]) -> None:
    """Append `records`, one line each, flushed and fsynced (the log survives a crash of the tuner)."""
    p = check_writable(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    if p.exists() and p.stat().st_size:
        _end_last_line(p)
    with p.open("ab") as f:
        for r in records:
            f.write((json.dumps(r.to_json(), sort_keys=True, allow_nan=False) + "\n").encode())
            f.flush()
        os.fsync(f.fileno())


def _end_last_line(p: Path) -> None:
    """Make the log end with a newline before appending. A last line that is a whole record just lacks its
    newline (an edited file): end it. Anything else there was cut short by a crash while it was written
    (reading skips it): remove it, or it would end up in the middle of the log, where it is an error."""
    with p.open("rb+") as f:
        size = f.seek(0, os.SEEK_END)
        tail_start = max(0, size - (1 << 20))
        f.seek(tail_start)
        tail = f.read()
        if tail.endswith(b"\n"):
            return
        cut = tail.rfind(b"\n")
        if cut < 0 and tail_start > 0:  # a last line over 1 MiB: no record is that long
            raise TuningLogError(f"tuning log {p}: the last line is longer than 1 MiB; not a tuning log?")
        last = tail[cut + 1:]
        try:
            Record.from_json(json.loads(last.decode("utf-8"), parse_constant=_no_constant), "")
        except (UnicodeDecodeError, ValueError, TuningLogError):
            warnings.warn(f"tuning log {p}: an incomplete last record ({len(last)} bytes, cut short by a crash) "
                          "is removed before appending", stacklevel=3)
            f.truncate(tail_start + cut + 1)
            return
        f.write(b"\n")


def measured(records: Iterable[Record]) -> set[tuple[str, str]]:
    """The (task, schedule) pairs the log holds (with or without an error): what a resumed run skips.
    The schedule is `Record.schedule_key()`, the canonical JSON of the point."""
    return {(r.task, r.schedule_key()) for r in records}


@dataclass(frozen=True)
class TaskSummary:
    """What a log says about one task: its default and best records, how much was measured."""

    task: str
    target: str
    description: str
    unit: str
    trials: int  # records of this task
    errors: int  # of which had an error
    default: Record | None  # the default point's record without error (None: not measured, or it failed)
    best: Record | None  # the lowest-cost record without error

    @property
    def ratio(self) -> float | None:
        """best / default cost (below 1: the tuned schedule is faster)."""
        if self.best is None or self.default is None or not self.default.cost:
            return None
        return float(self.best.cost) / float(self.default.cost)  # type: ignore[arg-type]


def summarize(records: Iterable[Record], describe: Any = None,
              max_code_growth: float | None = DEFAULT_MAX_CODE_GROWTH) -> list[TaskSummary]:
    """Per (task, target), in order of first appearance: the default point's cost, the best (what applying
    the log with `max_code_growth` chooses), counts. `describe(workload) -> str` names the task (default:
    the task key)."""
    groups: dict[tuple[str, str], list[Record]] = {}
    for r in records:
        groups.setdefault((r.task, r.target), []).append(r)
    out = []
    for (task, target), rs in groups.items():
        best = best_records(rs, max_code_growth=max_code_growth).get(task)
        default = next((r for r in rs if r.default and r.ok and (best is None or r.unit == best.unit)), None)
        workload = next((r.workload for r in rs if r.workload), None)
        text = describe(workload) if (describe is not None and workload) else task
        unit = (best or rs[-1]).unit
        out.append(TaskSummary(task, target, text, unit, len(rs), sum(1 for r in rs if not r.ok), default, best))
    return out


def best_records(records: Iterable[Record], target: str | None = None,
                 max_code_growth: float | None = DEFAULT_MAX_CODE_GROWTH) -> dict[str, Record]:
    """Task key -> its lowest-cost record without error (for `target`, when given) whose code is at most
    (1 + max_code_growth) times the task's default point's (None: no limit; records or defaults without a
    code size are not limited). Costs in different units never compete: a task measured both in
    instructions (QEMU) and in seconds (a board, the host) is judged in the unit of its last record without
    error, i.e. by the latest measurement campaign."""
    ok = [r for r in records if r.ok and (target is None or r.target == target)]
    unit = {r.task: r.unit for r in ok}  # the last one wins
    limit: dict[str, float] = {}
    if max_code_growth is not None:
        for r in ok:
            if r.default and r.code is not None and r.unit == unit[r.task]:
                limit[r.task] = r.code * (1.0 + max_code_growth)
    best: dict[str, Record] = {}
    for r in ok:
        if r.unit != unit[r.task]:
            continue
        if r.code is not None and r.task in limit and r.code > limit[r.task]:
            continue
        cur = best.get(r.task)
        if cur is None or (r.cost, r.schedule_key()) < (cur.cost, cur.schedule_key()):  # type: ignore[operator]
            best[r.task] = r
    return best


def best_schedules(path: str | os.PathLike[str], target: str,
                   max_code_growth: float | None = DEFAULT_MAX_CODE_GROWTH) -> dict[str, dict[str, Any]]:
    """What `--tuning-log PATH` applies: task key -> the best schedule measured on `target` within the code
    budget (see best_records)."""
    p = Path(path)
    if not p.is_file():
        raise TuningLogError(f"--tuning-log {p}: no such file")
    return {k: dict(r.schedule) for k, r in best_records(read(p), target, max_code_growth).items()}
