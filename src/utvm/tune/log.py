"""The tuning log: JSON lines, one record per measured candidate, appended as they are measured.

    {"task": "conv2d:3f2a9c01d4e5b6a7", "target": "cortex-m4", "schedule": {"px_block": 2, ...},
     "cost": 812345.0, "unit": "cycles_est", "error": null, "utvm": "0.1.0",
     "workload": {...}, "time": "2026-11-25T14:02:11Z", "default": false, "platform": "qemu-cortex-m4",
     "code": 1836, "weights": 19456, "scratch": 320}

`cost` is in `unit`: `instructions` (a platform with an instruction-counting clock: QEMU under -icount),
`cycles_est` (cycles estimated by the platform's timing model of its core from the executed instructions:
QEMU boards with a `timing_model`, `utvm tune --cost cycles`) or `seconds` (the host, a board's timer);
`error` is null or a one-line reason (the candidate failed to build, gave a wrong output, crashed or hung the
device) and such a record is never chosen. Costs in different units never compete: each reader works on
the records of one unit per task (the unit asked for, else the unit of the task's last good record: the
latest measurement campaign). Optional keys: `workload` (what the task is, for reading the log without the
model), `time`, `default` (true for the kernel's default point: the baseline `summarize` compares against
and the budgets are measured from), `platform` (where it was measured), and three footprints of the
schedule, each a byte count or null (unknown):

- `code`: machine code the schedule puts in a firmware with the model's nodes of that task (utvm.tune.codesize);
- `weights`: constant data it puts in flash for those nodes: the kernel's tables and arrays, pre-widened or
  reordered weights included (utvm.compiler.footprint);
- `scratch`: the scratch buffer one call asks for, as the memory planner places it (utvm.compiler.footprint).

and `error_kind`, what failed when `error` is not null (ERROR_KINDS): `build` (the candidate did not compile
or build: the point's fault), `result` (it ran and gave a wrong output, an error code or no usable cost: the
point's fault) or `device` (the device hung, crashed or its link failed while it ran: perhaps the point's
fault, perhaps the device's). A resumed run measures a `device` record's point again (`retried`); a record
without the key (written before it existed) is classified by its error's wording (`error_kind`).

Applying a log: `best_records` / `best_schedules` choose per task (the fastest record within a per-task
budget: by default code at most DEFAULT_MAX_CODE_GROWTH over the default point's); `utvm compile
--tuning-log` chooses for the whole model within flash and workspace budgets (utvm.tune.budget). Only the
tuning driver writes the log; each record is one `write` of one line, flushed at once, so a crash loses at
most the record being written and a re-run resumes after what is there (`measured` gives the (task,
schedule) pairs to skip).

Schema and versions. The record format has no version number: it only ever grows by optional keys. A key
added later is optional for the reader (a record written before it existed reads as null/unknown: `code`
before it was recorded, `weights` and `scratch` likewise, and their budgets count such a record as its
task's default point), and keys the reader does not know are ignored, so an older utvm reads a newer log
(but refuses a unit it does not know, e.g. `cycles_est` before timing models: such a line is refused with
its reason, the rest applied). A key is never renamed, and its meaning and type never change; a new meaning
takes a new key or a new `unit`.

A log is untrusted input (docs/tuning.md, "What a log may hold"). Each line is checked against a schema
before it is believed (`parse_line`): its length (MAX_RECORD_BYTES), nesting (MAX_DEPTH), the digits of its
numbers, every field's type (no bool for a number, no float for a count, no object for a string), range
(a cost > 0 and finite, from MIN_COST to MAX_COST; a byte count from 0 to MAX_CODE_BYTES) and length. A line
is then either a record or refused with a reason naming the line:

- applying a log (`load`, `best_schedules`, `summary_of_log`) skips refused lines with one warning each
  (MAX_REPORTED of them, then a count); a file in which no line is a record is not a tuning log (an error);
- appending to a log (`read`, what the tuner does before its first measurement, and `append`) is strict:
  every complete line must be a record, or the file is not ours and is left exactly as it is. The one
  thing repaired is a last line cut short by a crash while the tuner wrote it (it begins as the writer's
  lines do, and every line before it is a record): reading skips it with a warning, the next `append`
  removes it.

Several records of one point (task, target, unit, schedule: a log two tuners appended to at once, or two
logs concatenated) are one measurement: the first without an error counts (else the first), the others
are duplicates and ignored (`unique`). A task has one default record per target and unit: the first marked
`default` without an error; a later `default` record of another schedule is an ordinary candidate.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import stat
import warnings
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from utvm.errors import UsageError
from utvm.support.files import read_regular_file
from utvm.support.text import shown

UNITS = ("instructions", "cycles_est", "seconds")
#: A tuning log larger than this, or with more lines, is refused (a log of a whole zoo of models stays far
#: below: 100 models of 10 tasks tuned with 64 trials are 64,000 lines of about 1 KiB); reading the most a
#: log may hold takes seconds, not minutes.
MAX_LOG_BYTES = 256 << 20
MAX_LOG_LINES = 250_000
#: The longest line that may be a record (a record of a real task is about 1 KiB).
MAX_RECORD_BYTES = 1 << 20
#: The deepest nesting of arrays and objects in a record (a real one nests 5 deep: record, workload,
#: inputs, a tensor, its shape).
MAX_DEPTH = 16
#: Characters of one number in a record (a cost or a count has far fewer; a 10^6-digit integer is refused
#: before it is converted).
MAX_NUMBER_CHARS = 40
#: Characters of a name or a short text field (task, target, platform, utvm, time, knob names and values).
MAX_TEXT = 256
#: Characters of an `error` reason.
MAX_ERROR_CHARS = 4096
#: Knobs of one schedule.
MAX_KNOBS = 64
#: The largest integer knob value, byte count (code, weights, scratch) and tensor dimension a record may hold.
MAX_INT = 2**31 - 1
MAX_CODE_BYTES = MAX_INT
#: The byte counts of a record: what a schedule takes besides time (module docstring), each optional.
FOOTPRINTS = ("code", "weights", "scratch")
#: The smallest and largest cost (instructions, estimated cycles or seconds) a record may hold: a picosecond
#: or one instruction at least, so that a ratio of two costs is always a finite number.
MIN_COST = 1e-12
MAX_COST = 1e18
#: Refused lines reported one by one when a log is applied (then a count of the rest).
MAX_REPORTED = 5
#: Applying a log stops at this many refused lines (a file with so many is not a tuning log), or at
#: MAX_LEADING_REFUSED refused lines before the first record: a large file that is no log is not read to
#: its end.
MAX_REFUSED = 10_000
MAX_LEADING_REFUSED = 100

#: How much more machine code than the default point a task's schedule may take when a log is applied (a
#: fraction of the default's bytes): the fastest point within it wins. Schedules that unroll or specialise
#: buy a few percent of speed with kilobytes of flash, which on a microcontroller is often the scarcer one.
DEFAULT_MAX_CODE_GROWTH = 0.10
#: The budgets of applying a log to a whole model (`utvm compile/run/deploy/size --tuning-log`,
#: utvm.tune.budget): the tuned tasks' flash (code + weights) at most 10% over the default build's, and the
#: model's workspace no larger than the default build's.
DEFAULT_MAX_FLASH_GROWTH = 0.10
DEFAULT_MAX_RAM_GROWTH = 0.0

_TASK = re.compile(r"[A-Za-z0-9_.\-]{1,64}:[0-9a-f]{16}")
_NAME = re.compile(r"[A-Za-z0-9_.\-]{1,64}")
_KNOB = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
#: How every line the writer makes begins (json.dumps with sort_keys: "code" is the first key; logs written
#: before `code` existed begin with "cost"): what a line cut short by a crash begins with.
_WRITER_PREFIXES = (b'{"code": ', b'{"cost": ')
_RECORD_KEYS = ("task", "target", "schedule", "cost", "unit", "error", "utvm")
#: What an `error_kind` says failed (module docstring): the candidate's build, its result, or the device.
ERROR_BUILD = "build"
ERROR_RESULT = "result"
ERROR_DEVICE = "device"
ERROR_KINDS = (ERROR_BUILD, ERROR_RESULT, ERROR_DEVICE)
#: How the tuner's errors begin (utvm.tune.measure writes each with its prefix): what also classifies a
#: record written before `error_kind` existed.
HUNG = "the device hung"
CRASHED = "the device crashed or reset"
NOT_IN_SPACE = "not a point of the task's space"
COMPILE_FAILED = "compiling the candidate failed"
NOT_THE_TASK = "the candidate's operators"
KERNEL_REFUSED = "the kernel refused the schedule"
BUILD_FAILED = "building the candidate failed"
_DEVICE_ERRORS = (HUNG, CRASHED)
_BUILD_ERRORS = (COMPILE_FAILED, BUILD_FAILED, NOT_IN_SPACE, KERNEL_REFUSED, NOT_THE_TASK)


class TuningLogError(UsageError):
    """A tuning log that cannot be read (or written): names the file and the line."""


class _Refusal(Exception):
    """Why one line is not a record (internal: becomes a TuningLogError or a `Refused` naming the line)."""


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
    #: bytes of constant data (tables, arrays, pre-widened or reordered weights) the schedule puts in flash
    #: for the model's nodes of this task (None: not recorded)
    weights: int | None = None
    #: bytes of scratch buffer one call of the schedule asks for in the workspace (None: not recorded)
    scratch: int | None = None
    #: what failed when `error` is set (ERROR_KINDS; None: not recorded, see `error_kind`)
    error_kind: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and usable_cost(self.cost)

    def schedule_key(self) -> str:
        key = self.__dict__.get("_schedule_key")  # computed once: summaries and resumes compare it often
        if key is None:
            key = json.dumps(self.schedule, sort_keys=True, separators=(",", ":"))
            object.__setattr__(self, "_schedule_key", key)
        return key

    def to_json(self) -> dict[str, Any]:
        return {"task": self.task, "target": self.target, "schedule": dict(self.schedule),
                "cost": self.cost, "unit": self.unit, "error": self.error, "utvm": self.utvm,
                "workload": self.workload, "time": self.time, "default": self.default, "platform": self.platform,
                "code": self.code, "weights": self.weights, "scratch": self.scratch, "error_kind": self.error_kind}

    @staticmethod
    def from_json(d: Any, where: str) -> Record:
        """The record `d` (a parsed JSON value) holds, checked against the schema (module docstring);
        TuningLogError `<where>: <reason>` when it is not one."""
        try:
            return _record(d)
        except _Refusal as exc:
            raise TuningLogError(f"{where}: {exc}") from None


def _brief(value: Any, limit: int = 40) -> str:
    """A short, printable rendering of a value from a log, for a reason (a string as Python writes it)."""
    try:
        text = repr(value) if isinstance(value, str) else json.dumps(value, ensure_ascii=True, allow_nan=True)
    except (TypeError, ValueError, RecursionError):
        text = type(value).__name__
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def usable_cost(cost: Any) -> bool:
    """Is `cost` one a record may hold: a number (not a bool) from MIN_COST to MAX_COST (so > 0 and
    finite)? What the reader checks and the tuner makes sure of before it writes."""
    return _is_number(cost) and MIN_COST <= cost <= MAX_COST


def _text(d: Mapping[str, Any], key: str, limit: int = MAX_TEXT, *, optional: bool = True) -> str:
    value = d.get(key)
    if value is None and optional:
        return ""
    if not isinstance(value, str):
        raise _Refusal(f"'{key}' must be a string{' or null' if optional else ''}, got {_brief(value)}")
    if len(value) > limit:
        raise _Refusal(f"'{key}' is longer than {limit} characters ({len(value)})")
    return value


def _record(d: Any) -> Record:
    if not isinstance(d, dict):
        raise _Refusal(f"a record is a JSON object, got {_json_type(d)}")
    missing = next((k for k in _RECORD_KEYS if k not in d), None)
    if missing is not None:
        raise _Refusal(f"the record has no {missing!r}")
    task, target = d["task"], d["target"]
    if not isinstance(task, str) or not isinstance(target, str) or not task or not target:
        raise _Refusal(f"'task' and 'target' must be non-empty strings, got {_brief(task)} and {_brief(target)}")
    if not _TASK.fullmatch(task):
        raise _Refusal(f"'task' {_brief(task)} is not a task key (<op>:<16 hex digits>)")
    if not _NAME.fullmatch(target):
        raise _Refusal(f"'target' {_brief(target)} is not a target name")
    schedule = _schedule(d["schedule"])
    cost = d["cost"]
    if cost is not None and not usable_cost(cost):
        if not _is_number(cost):
            raise _Refusal(f"'cost' must be a number or null, got {_brief(cost)}")
        raise _Refusal(f"'cost' must be > 0, finite, from {MIN_COST:g} to {MAX_COST:g}, got {_brief(cost)}")
    unit = d["unit"]
    if not isinstance(unit, str) or unit not in UNITS:
        raise _Refusal(f"'unit' {_brief(unit)} is not one of {', '.join(UNITS)}")
    error = d["error"]
    if error is not None:
        error = _text(d, "error", MAX_ERROR_CHARS)
    if error is None and cost is None:
        raise _Refusal("a record without an error needs a cost")
    version = _text(d, "utvm", optional=False)
    default = d.get("default", False)
    if not isinstance(default, bool):
        raise _Refusal(f"'default' must be true or false, got {_brief(default)}")
    workload = _workload(d.get("workload"))
    if workload and workload.get("op") != task.partition(":")[0]:  # a row names the operator of its task
        raise _Refusal(f"'workload.op' {_brief(workload.get('op'))} is not the operator of task {_brief(task)}")
    code, weights, scratch = (_byte_count(d, key) for key in FOOTPRINTS)
    kind = d.get("error_kind")
    if kind is not None:
        if not isinstance(kind, str) or kind not in ERROR_KINDS:
            raise _Refusal(f"'error_kind' {_brief(kind)} is not one of {', '.join(ERROR_KINDS)} (or null)")
        if error is None:
            raise _Refusal(f"'error_kind' {_brief(kind)} without an 'error'")
    return Record(task, target, schedule, None if cost is None else float(cost), unit, error, version,
                  workload, _text(d, "time"), default, _text(d, "platform"), code, weights, scratch, kind)


def _json_type(value: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean", int: "a number",
            float: "a number", type(None): "null"}.get(type(value), type(value).__name__)


def _schedule(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _Refusal(f"'schedule' must be an object of int/str/bool knob values, got {_json_type(value)}")
    if len(value) > MAX_KNOBS:
        raise _Refusal(f"'schedule' has {len(value)} knobs; at most {MAX_KNOBS}")
    for k, v in value.items():
        if not _KNOB.fullmatch(k):
            raise _Refusal(f"'schedule' knob name {_brief(k)} is not an identifier of at most 64 characters")
        if isinstance(v, bool):
            continue
        if isinstance(v, int):
            if abs(v) > MAX_INT:
                raise _Refusal(f"'schedule' knob {k} = {_brief(v)} is out of range (at most {MAX_INT})")
        elif isinstance(v, str):
            if len(v) > MAX_TEXT:
                raise _Refusal(f"'schedule' knob {k}: a value longer than {MAX_TEXT} characters")
        else:
            raise _Refusal(f"'schedule' must be an object of int/str/bool knob values ({k} = {_brief(v)})")
    return dict(value)


def _workload(value: Any) -> dict[str, Any]:
    """The workload (optional; what describe_workload reads must have its type)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _Refusal(f"'workload' must be an object or null, got {_json_type(value)}")
    op = value.get("op")
    if op is not None and not (isinstance(op, str) and len(op) <= MAX_TEXT):
        raise _Refusal(f"'workload.op' must be a string of at most {MAX_TEXT} characters, got {_brief(op)}")
    for key in ("inputs", "outputs"):
        tensors = value.get(key)
        if tensors is None:
            continue
        if not isinstance(tensors, list):
            raise _Refusal(f"'workload.{key}' must be an array of tensors, got {_json_type(tensors)}")
        for t in tensors:
            if t is None:  # an absent optional input
                continue
            if not isinstance(t, dict):
                raise _Refusal(f"'workload.{key}' must be an array of tensor objects, holds {_brief(t)}")
            shape, dtype = t.get("shape"), t.get("dtype")
            if shape is not None and not (isinstance(shape, list)
                                          and all(_is_int(n) and 0 <= n <= MAX_INT for n in shape)):
                raise _Refusal(f"'workload.{key}': a shape must be an array of sizes 0..{MAX_INT}, "
                               f"got {_brief(shape)}")
            if dtype is not None and not (isinstance(dtype, str) and len(dtype) <= 32):
                raise _Refusal(f"'workload.{key}': a dtype must be a short string, got {_brief(dtype)}")
    attrs = value.get("attrs")
    if attrs is not None and not isinstance(attrs, dict):
        raise _Refusal(f"'workload.attrs' must be an object, got {_json_type(attrs)}")
    return value


def _byte_count(d: Mapping[str, Any], key: str) -> int | None:
    """An optional byte count of a record (`code`, `weights`, `scratch`): absent or null (unknown), or an
    integer (not a float or a bool) from 0 to MAX_CODE_BYTES."""
    value = d.get(key)
    if value is None:
        return None
    if not _is_int(value) or not 0 <= value <= MAX_CODE_BYTES:
        raise _Refusal(f"'{key}' must be a byte count from 0 to {MAX_CODE_BYTES} or null, got {_brief(value)}")
    return int(value)


def byte_count(value: Any) -> int | None:
    """`value` if a record may hold it as a byte count (an int, not a bool, from 0 to MAX_CODE_BYTES), else
    None (unknown): what the tuner writes of a measured footprint."""
    return value if _is_int(value) and 0 <= value <= MAX_CODE_BYTES else None


# --- reading a line ------------------------------------------------------------------------------------
def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _bounded_int(text: str) -> int:
    if len(text) > MAX_NUMBER_CHARS:
        raise ValueError(f"a number of {len(text)} digits")
    return int(text)


def _bounded_float(text: str) -> float:
    if len(text) > MAX_NUMBER_CHARS:
        raise ValueError(f"a number of {len(text)} characters")
    return float(text)


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for k, _v in pairs:
            if k in seen:
                raise ValueError(f"the key {_brief(k)} appears twice in one object")
            seen.add(k)
    return out


def _too_deep(value: Any) -> bool:
    """Do arrays and objects nest more than MAX_DEPTH deep in `value`? (Iteratively: never the Python
    stack; json's own recursion limit has already refused the extreme.)"""
    level = [value]
    for _depth in range(MAX_DEPTH):
        inner = []
        for v in level:
            if type(v) is dict:
                inner += [x for x in v.values() if type(x) is dict or type(x) is list]
            elif type(v) is list:
                inner += [x for x in v if type(x) is dict or type(x) is list]
        if not inner:
            return False
        level = inner
    return True


_DECODER = json.JSONDecoder(parse_constant=_no_constant, parse_int=_bounded_int, parse_float=_bounded_float,
                            object_pairs_hook=_unique_keys)


def _parse(raw: bytes) -> Record:
    """The record one line holds; _Refusal with the reason when it holds none."""
    if len(raw) > MAX_RECORD_BYTES:
        raise _Refusal(f"a line of {len(raw):,} bytes; a record has at most {MAX_RECORD_BYTES:,}")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _Refusal(f"not a JSON record (not UTF-8 text: byte {exc.start + 1})") from None
    try:
        value = _DECODER.decode(text)
    except RecursionError:
        raise _Refusal(f"not a JSON record (arrays or objects nested more than {MAX_DEPTH} deep)") from None
    except ValueError as exc:
        raise _Refusal(f"not a JSON record ({exc})") from None
    if type(value) is dict and _too_deep(value):
        raise _Refusal(f"arrays or objects nested more than {MAX_DEPTH} deep")
    return _record(value)


def parse_line(raw: bytes | str, where: str = "tuning log") -> Record:
    """The record one line of a log holds, or TuningLogError `<where>: <why not>`."""
    try:
        return _parse(raw.encode("utf-8", "surrogateescape") if isinstance(raw, str) else raw)
    except _Refusal as exc:
        raise TuningLogError(f"{where}: {exc}") from None


def _torn(raw: bytes) -> bool:
    """Does `raw` (a last line without its newline, that is not a record) look like a line the writer was
    cutting short when it crashed: it begins as every line the writer makes does?"""
    fragment = raw.lstrip(b" \t")
    return bool(fragment) and any(p.startswith(fragment) or fragment.startswith(p) for p in _WRITER_PREFIXES)


# --- reading a file ------------------------------------------------------------------------------------
def _read_bytes(p: Path) -> tuple[bytes, os.stat_result]:
    """The bytes of the log at `p` (a regular file of at most MAX_LOG_BYTES, utvm.support.files) and its stat."""
    return read_regular_file(p, MAX_LOG_BYTES, lambda why: TuningLogError(f"tuning log {p}: {why}"))


@dataclass(frozen=True)
class Refused:
    """A line of a log that is not a record, and why."""

    line: int
    reason: str


_TORN = "an incomplete last record is skipped (cut short by a crash while it was written)"


@dataclass
class LogContents:
    """What a log holds: its records (in file order, as written: `unique` makes them one per point), the
    line of each, and the lines refused and why (a last line cut short by a crash among them: `torn`)."""

    path: Path
    records: list[Record] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)
    refused: list[Refused] = field(default_factory=list)
    #: the line number of a last line cut short by a crash (skipped), else None
    torn: int | None = None

    def report(self) -> None:
        """One warning per refused line (MAX_REPORTED of them, then a count), one for the records that repeat
        a point measured earlier (`unique`)."""
        for r in self.refused[:MAX_REPORTED]:
            warnings.warn(shown(f"tuning log {self.path}, line {r.line}: record refused: {r.reason}"), stacklevel=3)
        rest = self.refused[MAX_REPORTED:]
        if rest:
            warnings.warn(shown(f"tuning log {self.path}: {len(rest)} more line(s) refused (lines {rest[0].line} "
                                f"to {rest[-1].line})"), stacklevel=3)
        counted = _counted(self.records, _point)
        kept = set(counted.values())
        repeats = [i for i in range(len(self.records)) if i not in kept]
        if repeats:
            dup = repeats[0]
            first = self.lines[counted[_point(self.records[dup])]]
            warnings.warn(shown(f"tuning log {self.path}: {len(repeats)} record(s) repeat a point measured earlier "
                                f"(line {self.lines[dup]} repeats line {first}); the first measurement without an "
                                "error counts"), stacklevel=3)


_NONBLANK = re.compile(rb"[^ \t\r\n\x0b\x0c]")


def _lines(data: bytes) -> Iterator[tuple[int, bytes, bool]]:
    """(line number, bytes, is the last line without a newline) of every line that is not blank (blank:
    what bytes.strip() removes), found without a Python step per blank line or a list of all lines."""
    pos = counted = 0
    n = 1
    while True:
        m = _NONBLANK.search(data, pos)
        if m is None:
            return
        start = data.rfind(b"\n", 0, m.start()) + 1
        n += data.count(b"\n", counted, start)
        counted = start
        end = data.find(b"\n", m.start())
        if end < 0:
            yield n, data[start:], True
            return
        yield n, data[start:end], False
        pos = end + 1


def _not_ours(p: Path, line: int, reason: str) -> TuningLogError:
    return TuningLogError(f"tuning log {p}, line {line}: {reason}; not a tuning log: refusing to write to it (the "
                          "file is left as it is)")


def _scan(p: Path, data: bytes, *, strict: bool, line0: int = 0) -> LogContents:
    """Every line of `data`, the log at `p` from its line line0 + 1 on, as a record or refused with its
    reason (a last line cut short by a crash is refused as `torn`). strict (appending): any other refused
    line is a TuningLogError, the file is not ours. Else (applying): MAX_LEADING_REFUSED refused lines
    before the first record, or MAX_REFUSED in all, are a TuningLogError (a file that is no log is not read
    to its end)."""
    out = LogContents(p)
    for count, (n, raw, last_open) in enumerate(_lines(data), 1):
        n += line0
        if count > MAX_LOG_LINES:
            raise TuningLogError(f"tuning log {p}: more than {MAX_LOG_LINES:,} lines (line {n}); a tuning log "
                                 "holds fewer: split it")
        try:
            out.records.append(_parse(raw))
            out.lines.append(n)
            continue
        except _Refusal as exc:
            reason = str(exc)
        if last_open and _torn(raw):
            out.torn = n
            out.refused.append(Refused(n, _TORN))
            continue
        if strict:
            raise _not_ours(p, n, reason)
        out.refused.append(Refused(n, reason))
        if len(out.refused) >= (MAX_REFUSED if out.records else MAX_LEADING_REFUSED):
            first = out.refused[0]
            raise TuningLogError(f"tuning log {p}: not a tuning log: {len(out.refused):,} lines are not records "
                                 f"(line {first.line}: {first.reason})")
    return out


def load(path: str | os.PathLike[str]) -> LogContents:
    """Every line of the log at `path`, as a record or refused with its reason, to apply it (module
    docstring): `.report()` warns of the refused lines. A file none of whose lines is a record (a torn last
    line aside) is not a tuning log: TuningLogError naming the first line."""
    p = Path(path)
    contents = _scan(p, _read_bytes(p)[0], strict=False)
    if not contents.records and len(contents.refused) > (contents.torn is not None):
        first = contents.refused[0]
        raise TuningLogError(f"tuning log {p}: not a tuning log: no line is a record (line {first.line}: "
                             f"{first.reason})")
    return contents


def read(path: str | os.PathLike[str]) -> list[Record]:
    """Every record of the log at `path`, as written (a missing file is an empty log). Strict, as appending
    is (what the tuner checks before its first append): a line that is not a record is a TuningLogError
    naming it, the file is not ours; a last line cut short by a crash is skipped with a warning."""
    p = Path(path)
    if not p.exists() and not p.is_symlink():
        return []
    data, st = _read_bytes(p)
    contents = _scan(p, data, strict=True)
    if contents.torn is not None:
        warnings.warn(shown(f"tuning log {p}, line {contents.torn}: {_TORN}"), stacklevel=2)
    cut = data.rfind(b"\n") + 1  # every line up to here is a record: an append need not check them again
    _CHECKED[(st.st_dev, st.st_ino)] = (cut, data.count(b"\n", 0, cut), data[max(0, cut - _TAIL):cut])
    return contents.records


# --- appending -----------------------------------------------------------------------------------------
def check_writable(path: str | os.PathLike[str]) -> Path:
    """`path` as a Path if records may be appended there: missing, or a regular file (not a directory,
    FIFO, device or symbolic link). The tuner checks this before it measures anything; what the file holds
    is checked by `read` (every line a record)."""
    p = Path(path)
    if p.is_symlink():
        raise TuningLogError(f"tuning log {p}: a symbolic link; give the file itself")
    if p.exists() and not p.is_file():
        raise TuningLogError(f"tuning log {p}: not a regular file; refusing to write to it")
    return p


def encode(record: Record) -> bytes:
    """The line `append` writes for `record` (with its newline); TuningLogError if the reader would refuse
    it (a record utvm writes is always one utvm reads back)."""
    line = json.dumps(record.to_json(), sort_keys=True, allow_nan=False).encode()
    parse_line(line, f"a record of task {record.task} (not written)")
    return line + b"\n"


def append(path: str | os.PathLike[str], records: Iterable[Record]) -> None:
    """Append `records`, one line each, flushed and fsynced (the log survives a crash of the tuner). The
    file must be empty or a tuning log (every line a record): anything else is a TuningLogError and the file
    is left as it is (`_make_appendable`; a last line the writer was cutting short when it crashed is
    removed first). Each append checks only what was added since this process last checked the file."""
    p = check_writable(path)
    lines = [encode(r) for r in records]  # a record the reader would refuse is never written
    p.parent.mkdir(parents=True, exist_ok=True)
    with p.open("ab+") as f:  # O_APPEND: each line lands whole at the end, whoever else appends
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise TuningLogError(f"tuning log {p}: not a regular file; refusing to write to it")
        _make_appendable(f, p, st)
        for line in lines:
            f.write(line)
            f.flush()
        os.fsync(f.fileno())


#: (st_dev, st_ino) of a log -> (bytes, lines) at its start known to be whole records (each line ended),
#: and the last _TAIL bytes of them: what `append` need not check again. A log only grows; one that shrank
#: or whose checked end no longer holds the same bytes (another file on a reused inode) is checked from its
#: start.
_CHECKED: dict[tuple[int, int], tuple[int, int, bytes]] = {}
_TAIL = 256


def _tail(f: Any, end: int) -> bytes:
    """The last _TAIL bytes before offset `end` of the open file `f`."""
    f.seek(max(0, end - _TAIL))
    return f.read(min(end, _TAIL))


def _make_appendable(f: Any, p: Path, st: os.stat_result) -> None:
    """Before appending: every line of the file since the last check (`_CHECKED`) must be a record (or
    blank), and the file must end with a newline. A last line without its newline that is a whole record
    just lacks it (an edited file): end it. One that is not a record is removed only if it is the start of
    a line the writer makes and every line before it is a record (a crash while the tuner wrote it: reading
    skips it, and left there it would end up in the middle of the log); anything else means the file is not
    ours: TuningLogError, nothing written."""
    start, line0, tail = _CHECKED.get((st.st_dev, st.st_ino), (0, 0, b""))
    if not start or start > st.st_size or _tail(f, start) != tail:
        start = line0 = 0
    if st.st_size - start > MAX_LOG_BYTES:
        raise TuningLogError(f"tuning log {p}: larger than {MAX_LOG_BYTES:,} bytes")
    f.seek(start)
    data = f.read(st.st_size - start)
    torn = _scan(p, data, strict=True, line0=line0).torn
    cut = data.rfind(b"\n") + 1
    end, lines = start + cut, line0 + data.count(b"\n")
    if torn is not None:
        warnings.warn(shown(f"tuning log {p}: an incomplete last record ({len(data) - cut} bytes, cut short by a "
                            "crash) is removed before appending"), stacklevel=3)
        f.truncate(end)
    elif cut < len(data):  # a record (or blanks) without its newline
        f.write(b"\n")
        end, lines = st.st_size + 1, lines + 1
    _CHECKED[(st.st_dev, st.st_ino)] = (end, lines, _tail(f, end))


def measured(records: Iterable[Record]) -> set[tuple[str, str]]:
    """The (task, schedule) pairs the log holds (with or without an error) but for those a resumed run
    measures again (`retried`): what a resumed run skips. The schedule is `Record.schedule_key()`, the
    canonical JSON of the point."""
    return {(r.task, r.schedule_key()) for r in records if not retried(r)}


def error_kind(r: Record) -> str | None:
    """What failed in `r` (ERROR_KINDS), None without an error: its `error_kind`, or for a record written
    before that key existed, what its error's wording says (the tuner's device failures begin HUNG or
    CRASHED, its build failures as _BUILD_ERRORS; anything else is a result)."""
    if r.error is None:
        return None
    if r.error_kind is not None:
        return r.error_kind
    if r.error.startswith(_DEVICE_ERRORS):
        return ERROR_DEVICE
    return ERROR_BUILD if r.error.startswith(_BUILD_ERRORS) else ERROR_RESULT


def retried(r: Record) -> bool:
    """Does a resumed run measure the point of `r` again? Yes when its error was the device's or the
    link's (`error_kind` device): a one-off failure of a device says nothing of the point. A wrong result
    or a failed build is the point's own and stays."""
    return error_kind(r) == ERROR_DEVICE


# --- one measurement per point, one default per task -------------------------------------------------
def _point(r: Record) -> tuple[str, str, str, str]:
    return (r.task, r.target, r.unit, r.schedule_key())


def _counted(records: Sequence[Record], key: Callable[[Record], Hashable | None]) -> dict[Hashable, int]:
    """key -> the index of the record of that key that counts: the first without an error, else the first
    (in order of each key's first record; a record whose key is None is left out)."""
    chosen: dict[Hashable, int] = {}
    for i, r in enumerate(records):
        k = key(r)
        if k is None:
            continue
        j = chosen.get(k)
        if j is None or (r.ok and not records[j].ok):
            chosen[k] = i
    return chosen


def unique(records: Iterable[Record]) -> list[Record]:
    """One record per point (task, target, unit, schedule): the first without an error, else the first;
    and one default per (task, target, unit): the first record marked `default` without an error (else the
    first marked), a later one of another schedule loses its mark. What every reader of a log works on."""
    rs = list(records)
    out = [rs[i] for i in _counted(rs, _point).values()]
    defaults = set(_counted(out, lambda r: (r.task, r.target, r.unit) if r.default else None).values())
    return [dataclasses.replace(r, default=False) if r.default and i not in defaults else r for i, r in enumerate(out)]


# --- what a log says ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Budgets:
    """How much more than the default point a schedule may take, each a fraction of the default's bytes
    (None: no limit). Per task (`best_records`, the summary's best): `code` bounds its machine code, `flash`
    its code + weights, `ram` its scratch. For a whole model (utvm.tune.budget), `flash` bounds the sum over
    the model's tasks and `ram` the model's planned workspace; `code` stays a per-task limit. A footprint a
    record lacks (null: written before utvm recorded it, or not measurable) counts as the default's."""

    code: float | None = DEFAULT_MAX_CODE_GROWTH
    flash: float | None = None
    ram: float | None = None

    def describe(self) -> str:
        def pct(v: float | None) -> str:
            return "unlimited" if v is None else f"+{v * 100:g}%"

        out = f"flash {pct(self.flash)}, workspace {pct(self.ram)}"
        return out + (f", code per task {pct(self.code)}" if self.code is not None else "")


#: What the Python functions apply by default (best_records, summarize, tune): per task, code +10%.
API_BUDGETS = Budgets()
#: What the commands apply (`--max-flash-growth`, `--max-ram-growth`; `--max-code-growth` off).
COMMAND_BUDGETS = Budgets(code=None, flash=DEFAULT_MAX_FLASH_GROWTH, ram=DEFAULT_MAX_RAM_GROWTH)


def delta(r: Record, base: Record | None, key: str) -> int:
    """Bytes of footprint `key` (code, weights, scratch) `r` takes over `base`, 0 when either is unknown (a
    record without the figure counts as the default's)."""
    mine, theirs = getattr(r, key), getattr(base, key, None) if base is not None else None
    return 0 if mine is None or theirs is None else int(mine) - int(theirs)


def flash_delta(r: Record, base: Record | None) -> int:
    """Flash bytes (code + weights) `r` takes over `base` (unknown figures count as the default's)."""
    return delta(r, base, "code") + delta(r, base, "weights")


def flash_of(r: Record | None) -> int:
    """The known flash bytes (code + weights) of a record (unknown figures count 0)."""
    return 0 if r is None else int(r.code or 0) + int(r.weights or 0)


def within(r: Record, base: Record | None, budgets: Budgets) -> bool:
    """Is `r` within the per-task `budgets` over its task's default record `base` (None: no baseline, no
    limit)? Code: code <= (1 + code) x the default's; flash: code + weights grow by at most flash x the
    default's code + weights; ram: scratch <= (1 + ram) x the default's."""
    if base is None:
        return True
    if (budgets.code is not None and r.code is not None and base.code is not None
            and r.code > base.code * (1.0 + budgets.code)):
        return False
    if budgets.flash is not None and flash_delta(r, base) > budgets.flash * flash_of(base):
        return False
    return not (budgets.ram is not None and r.scratch is not None and base.scratch is not None
                and r.scratch > base.scratch * (1.0 + budgets.ram))


@dataclass(frozen=True)
class TaskSummary:
    """What a log says about one task: its default and best records, how much was measured."""

    task: str
    target: str
    description: str
    unit: str
    trials: int  # points of this task measured (one per point: see `unique`)
    errors: int  # of which had an error
    default: Record | None  # the default point's record without error (None: not measured, or it failed)
    best: Record | None  # the lowest-cost record without error within the per-task budgets

    @property
    def ratio(self) -> float | None:
        """best / default cost (below 1: the tuned schedule is faster)."""
        if self.best is None or self.default is None or not self.default.cost:
            return None
        return float(self.best.cost) / float(self.default.cost)  # type: ignore[arg-type]


def summarize(records: Iterable[Record], describe: Any = None,
              max_code_growth: float | None = DEFAULT_MAX_CODE_GROWTH, *, max_flash_growth: float | None = None,
              max_ram_growth: float | None = None, unit: str | None = None) -> list[TaskSummary]:
    """Per (task, target), in order of first appearance: the default point's cost, the best (what
    `best_records` chooses with these budgets), counts. `describe(workload) -> str` names the task (default:
    the task key); `unit`: only records in that unit (default: each task's latest unit, see best_records).
    Works on `unique(records)`: a point measured twice is one trial, and the default is one record, so a task
    is never compared with a second measurement of its own default."""
    budgets = Budgets(max_code_growth, max_flash_growth, max_ram_growth)
    groups: dict[tuple[str, str], list[Record]] = {}
    for r in unique(records):
        if unit is None or r.unit == unit:
            groups.setdefault((r.task, r.target), []).append(r)
    out = []
    for (task, target), rs in groups.items():
        best = _best(rs, budgets).get(task)
        default = next((r for r in rs if r.default and r.ok and (best is None or r.unit == best.unit)), None)
        workload = next((r.workload for r in rs if r.workload), None)
        text = describe(workload) if (describe is not None and workload) else task
        shown_unit = (best or rs[-1]).unit
        out.append(TaskSummary(task, target, text, shown_unit, len(rs), sum(1 for r in rs if not r.ok), default,
                               best))
    return out


def best_records(records: Iterable[Record], target: str | None = None,
                 max_code_growth: float | None = DEFAULT_MAX_CODE_GROWTH, *, max_flash_growth: float | None = None,
                 max_ram_growth: float | None = None, unit: str | None = None) -> dict[str, Record]:
    """Task key -> its lowest-cost record without error (for `target`, when given) within the per-task
    budgets over the task's default point (`Budgets`, `within`: code at most (1 + max_code_growth) times the
    default's, code + weights at most max_flash_growth over the default's, scratch at most (1 +
    max_ram_growth) times the default's; None: no limit; records or defaults without a figure are not
    limited by it). Costs in different units never compete: with `unit`, only records in it count; without,
    a task measured in several units (instructions on QEMU, estimated cycles, seconds on a board or the
    host) is judged in the unit of its last record without error, i.e. by the latest measurement campaign.
    Works on `unique(records)`."""
    rs = [r for r in unique(records) if (target is None or r.target == target) and (unit is None or r.unit == unit)]
    return _best(rs, Budgets(max_code_growth, max_flash_growth, max_ram_growth))


def task_unit(records: Iterable[Record]) -> dict[str, str]:
    """Task key -> the unit its records are judged in: that of its last record without error."""
    return {r.task: r.unit for r in records if r.ok}


def _best(records: Iterable[Record], budgets: Budgets) -> dict[str, Record]:
    """best_records of records that are already `unique` (and of one target)."""
    ok = [r for r in records if r.ok]
    unit = task_unit(ok)  # the last one wins
    base: dict[str, Record] = {}
    for r in ok:
        if r.default and r.unit == unit[r.task]:
            base.setdefault(r.task, r)
    best: dict[str, Record] = {}
    for r in ok:
        if r.unit != unit[r.task] or not within(r, base.get(r.task), budgets):
            continue
        cur = best.get(r.task)
        if cur is None or (r.cost, r.schedule_key()) < (cur.cost, cur.schedule_key()):  # type: ignore[operator]
            best[r.task] = r
    return best


def best_schedules(path: str | os.PathLike[str], target: str,
                   max_code_growth: float | None = DEFAULT_MAX_CODE_GROWTH) -> dict[str, dict[str, Any]]:
    """Task key -> the best schedule measured on `target` within the per-task code budget (see
    best_records), for the Python API and the benchmark; `--tuning-log` chooses for the whole model within
    flash and workspace budgets instead (utvm.tune.budget.choose_schedules). Lines that are not records are
    skipped with a warning each (`load`)."""
    contents = load(path)
    contents.report()
    return {k: dict(r.schedule) for k, r in best_records(contents.records, target, max_code_growth).items()}


def applied_report(path: str | os.PathLike[str], schedules: Mapping[str, Any], operators: Iterable[Any],
                   target: str, log_tasks: Iterable[str] | None = None) -> str:
    """The line `--tuning-log` prints once the model is compiled: how many of *this model's* tasks the log
    has usable records for (without an error; their schedules go to the compiler). `schedules`: the schedules
    chosen from the log (utvm.tune.budget.choose_schedules, or best_schedules); `operators`: the compiled
    model's OperatorInfo, with their task and schedule_source; `log_tasks`: the tasks the log has usable
    records for on `target` (default: those of `schedules`). A log with a usable record for none of them
    (made for another model, target or rounding) is also a warning."""
    ops = list(operators)
    tasks = {str(op.task) for op in ops if getattr(op, "task", "")}
    matched = tasks & set(schedules)
    applied = {str(op.task) for op in ops if getattr(op, "task", "") and op.schedule_source == "given"}
    line = (f"tuning log {path}: {len(matched)} of {len(tasks)} task(s) of this model have usable records for "
            f"{target}")
    if len(applied) != len(matched):
        line += f" ({len(applied)} applied, {len(matched) - len(applied)} refused by their kernel)"
    others = len(set(schedules if log_tasks is None else log_tasks) - tasks)
    if others:
        line += f"; the log's {others} other task(s) on {target} are not in this model"
    if tasks and not matched:
        warnings.warn(shown(f"tuning log {path} has no usable record for any of the {len(tasks)} task(s) of this "
                            f"model on {target} (a log of another model, target or --rounding?): every task keeps "
                            "its default schedule"), stacklevel=2)
    return shown(line)
