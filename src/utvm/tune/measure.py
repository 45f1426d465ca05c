"""Measuring schedule candidates on a device, many per firmware (docs/architecture.md §5.4, §11).

    m = Measurer("qemu-cortex-m4", timeout=20.0, seed=0)
    for result in m.measure(task, [task.space.default, {...}, ...]):   # one firmware per batch
        print(result.schedule, result.cost, result.unit, result.error)

For one task and a batch of points:

1. Each point is compiled from the task's single-node graph (`compile(task.graph, model_name=f"c{i}",
   target=..., schedules={task.key: point}, passes=False)`, packed convention). A point the kernel refuses
   or fails to emit is a candidate with an error; so is one whose operator is not the task's.
2. The candidates' operator files go into ONE evaluation firmware with a system library generated here
   (one const `TVMFuncRegistry` naming every candidate's operator, `TVMSystemLibEntryPoint`), built with the
   platform's own `build` (its compiler, its flags). If the build fails, the candidates the compiler names
   are taken out (each logged with its first error line) and the rest rebuilt; a failure that names none
   (e.g. the link) is bisected, so one bad candidate never costs the batch. Batches are also split so that
   the candidates' constants stay under MAX_FIRMWARE_CONSTANT_BYTES (flash).
3. On the device: the task's inputs (seeded random over each dtype's range) are uploaded once per boot.
   Per candidate: its outputs are filled with random bytes on the device (`tvm.contrib.random.random_fill`,
   so a candidate that skips an element cannot pass on a predecessor's result), the operator is called,
   the outputs are downloaded and compared bit-exactly with `utvm.ir.run_reference` of the task's graph
   (float outputs: within utvm.evaluate's tolerance); a wrong candidate gets an error and is never timed.
   A right one is timed with the device's time evaluator (`runtime.RPCTimeEvaluator`): on a platform
   with an instruction-counting clock (QEMU under -icount: `instructions_per_second`) one repeat, and the
   cost is in instructions, or in estimated cycles when the platform has a timing model of its core
   (`timing_model`; the evaluator's `cycles_est` after the call), both deterministic; elsewhere the median
   of HOST_REPEATS repeats, in seconds. `cost` chooses (COSTS): "cycles" (the default where there is a
   timing model), "instructions" (the default on other instruction-clock platforms) or None (the
   platform's default; seconds off QEMU).
4. A device that does not answer within `timeout` (a candidate that hangs) or whose link closes or resets
   (a candidate that crashes it) costs that candidate, logged as "the device hung/crashed ..."; the
   firmware is started again, the inputs uploaded again, and the batch goes on with the next candidate.

Each candidate's footprint besides time is recorded with it: its machine code (utvm.tune.codesize, the
target compiler, in a thread while the batch builds and runs) and its constant bytes and scratch bytes
(utvm.compiler.footprint, from the lowering: nothing is built for them).

Every error says what failed (`Measurement.error_kind`, utvm.tune.log.ERROR_KINDS): `build` (steps 1-2),
`result` (a wrong output, an error code) or `device` (step 4).

Results are yielded one by one, as they are known, so the caller can log each at once (Ctrl-C loses
nothing measured). The steps are also methods of their own, for the device farm (utvm.tune.farm), which
builds on one machine and measures on another: `compile` (1), `batches` and `build` (2, the code sizes
resolved: `resolve`), `open_device` and `measure_candidate` (3, 4). The batch firmware is removed from
utvm's build cache once measured (it is never reused; a tuning run would otherwise leave hundreds of them).
"""

from __future__ import annotations

import re
import shutil
import tempfile
import warnings
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from utvm.compiler.schedule import Schedule
from utvm.errors import (
    BuildError,
    LinkClosedError,
    PlatformError,
    ProtocolError,
    RemoteError,
    SessionError,
    SessionTimeoutError,
    TransportError,
    UsageError,
)
from utvm.tune.log import (
    BUILD_FAILED,
    COMPILE_FAILED,
    CRASHED,
    ERROR_BUILD,
    ERROR_DEVICE,
    ERROR_RESULT,
    HUNG,
    KERNEL_REFUSED,
    NOT_IN_SPACE,
    NOT_THE_TASK,
)
from utvm.tune.tasks import Task

UNIT_INSTRUCTIONS = "instructions"
UNIT_CYCLES = "cycles_est"
UNIT_SECONDS = "seconds"
#: `--cost` (what the tuner minimises) -> the unit of the records.
COSTS = {"cycles": UNIT_CYCLES, "instructions": UNIT_INSTRUCTIONS}
#: Repeats of the time evaluator where time is wall-clock (the host): the median is the cost.
HOST_REPEATS = 5
#: Each host repeat runs the operator until it has taken at least this long (short operators).
HOST_MIN_REPEAT_MS = 2
#: The constants (weights, tables) of one firmware's candidates stay under this (QEMU boards: 4 MiB flash).
MAX_FIRMWARE_CONSTANT_BYTES = 1 << 20
SYSTEM_LIB_NAME = "tvmgen_tune_system_lib.c"
_ERROR_LINE = re.compile(r"tvmgen_c(\d+)_ops\.c:\d+(?::\d+)?: (?:fatal )?error: (.*)")

#: What runs before each candidate is measured: (session, candidate index in the batch, schedule).
CandidateHook = Callable[[Any, int, Schedule], None]


@dataclass(frozen=True)
class Measurement:
    """The outcome of one candidate: a cost (in `unit`) or an error (a one-line reason)."""

    schedule: Schedule
    cost: float | None
    unit: str
    error: str | None
    #: machine code bytes the schedule puts in the model's firmware (utvm.tune.codesize; None: unknown)
    code: int | None = None
    #: constant bytes it puts in flash for the model's nodes of the task (utvm.compiler.footprint; None: unknown)
    weights: int | None = None
    #: scratch bytes one call asks for (utvm.compiler.footprint; None: unknown)
    scratch: int | None = None
    #: what failed when `error` is set: build, result or device (utvm.tune.log.ERROR_KINDS)
    error_kind: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.cost is not None


@dataclass(frozen=True)
class OpInfo:
    """What measuring a candidate's operator needs of it: its function name, its scratch bytes and the names
    of its input and output tensors (of the task's graph)."""

    name: str
    scratch_bytes: int
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]

    @staticmethod
    def of(op: Any) -> OpInfo:  # an OperatorInfo of a CompiledModel
        return OpInfo(str(op.name), int(op.scratch_bytes or 0), tuple(t.name for t in op.inputs),
                      tuple(t.name for t in op.outputs))


@dataclass
class _Candidate:
    index: int
    schedule: Schedule
    compiled: Any = None  # CompiledModel (None once `resolve`d: what remains is `info`)
    error: str | None = None
    code: Any = None  # a Future of utvm.tune.codesize.code_bytes, or its result once `resolve`d
    footprint: Any = None  # utvm.compiler.footprint.TaskFootprint (None: unknown)
    error_kind: str | None = None
    info: OpInfo | None = None

    @property
    def op(self) -> OpInfo:
        if self.info is None:
            self.info = OpInfo.of(self.compiled.operators[0])
        return self.info

    def fail(self, error: str, kind: str) -> None:
        self.error, self.error_kind = error, kind

    @property
    def source_name(self) -> str:
        return f"tvmgen_c{self.index}_ops.c"


def one_line(text: str, limit: int = 400) -> str:
    s = " ".join(str(text).split())
    return s if len(s) <= limit else s[:limit - 3] + "..."


def random_array(shape: Sequence[int], dtype: str, rng: np.random.Generator) -> np.ndarray:
    """Values over the whole range of an integer dtype, N(0, 1) for floats, 0/1 for bool."""
    shape = tuple(int(d) for d in shape)
    if dtype.startswith("float"):
        return rng.standard_normal(shape).astype(dtype)
    if dtype == "bool":
        return rng.integers(0, 2, shape).astype(np.bool_)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, shape, endpoint=True).astype(dtype)


def task_inputs(task: Task, seed: int) -> dict[str, np.ndarray]:
    """The seeded random inputs of a task's graph (the same for a task and seed on every run)."""
    rng = np.random.default_rng([int(seed) & 0xFFFFFFFF, zlib.crc32(task.key.encode())])
    return {name: random_array(task.graph.tensor(name).shape, task.graph.tensor(name).dtype, rng)
            for name in task.graph.inputs}


def compare_outputs(got: Sequence[np.ndarray], want: Sequence[np.ndarray], names: Sequence[str]) -> str | None:
    """None when `got` is `want` (bit-exact; float within utvm.evaluate's tolerance), else why not."""
    from utvm.evaluate import compare

    for name, g, w in zip(names, got, want, strict=True):
        g, w = np.asarray(g), np.asarray(w)
        if g.shape != w.shape:
            return f"wrong output: {name} has shape {list(g.shape)}, the reference {list(w.shape)}"
        if g.dtype.kind == "f":
            v = compare([g], [w])
            if not v.ok:
                return f"wrong output: {name} differs from the reference (max |diff| {v.max_abs_err:.3g})"
            continue
        if not np.array_equal(g, w.astype(g.dtype)):
            bad = int(np.count_nonzero(g != w.astype(g.dtype)))
            diff = int(np.max(np.abs(g.astype(np.int64) - w.astype(np.int64))))
            return (f"wrong output: {name} differs from the reference in {bad} of {g.size} elements "
                    f"(max |diff| {diff})")
    return None


def system_lib_source(functions: Sequence[str]) -> str:
    """A system library holding the packed operator `functions` (defined in other files): the registry
    format of utvm.compiler.codegen.system_lib_source, for a batch of candidates."""
    from utvm.compiler.codegen import PACKED_PARAMS, registry_names_literal

    n = len(functions)
    out = ["/* The candidates of one tuning batch (generated by utvm.tune.measure). Do not edit. */",
           "#include <stddef.h>", "#include <stdint.h>", "#include <tvm/runtime/c_runtime_api.h>",
           "#include <tvm/runtime/crt/error_codes.h>", "#include <tvm/runtime/crt/module.h>", ""]
    out += [f"int {f}({PACKED_PARAMS});" for f in functions]
    out += ["", f"static const TVMBackendPackedCFunc tvmgen_tune_funcs[{n}] = {{",
            ",\n".join(f"  {f}" for f in functions), "};", "",
            f"static const char tvmgen_tune_func_names[] =\n    {registry_names_literal(functions)};", "",
            "static const TVMFuncRegistry tvmgen_tune_registry = {tvmgen_tune_func_names, tvmgen_tune_funcs};",
            "static const TVMModule tvmgen_tune_module = {&tvmgen_tune_registry};", "",
            "/* Overrides the CRT's weak default: runtime.SystemLib returns this module. */",
            "const TVMModule* TVMSystemLibEntryPoint(void) {", "  return &tvmgen_tune_module;", "}", ""]
    return "\n".join(out)


def cost_unit(cost: str | None, instructions_per_second: float | None, timing_model: str | None,
              platform: str) -> str:
    """The unit a Measurer's costs are in: `cost` (COSTS: "cycles" or "instructions"; None: the
    platform's default) on a platform with that clock (an instruction-counting one: `instructions_per_second`;
    a timing model of its core: `timing_model`). A cost the platform cannot measure is a UsageError naming
    it and the platform."""
    if cost is not None and cost not in COSTS:
        raise UsageError(f"unknown cost {cost!r}; choose one of {', '.join(COSTS)}")
    cycles = bool(timing_model) and bool(instructions_per_second)
    if cost == "cycles" and not cycles:
        alt = "--cost instructions" if instructions_per_second else "no --cost (its costs are seconds)"
        raise UsageError(f"--cost cycles: platform {platform} has no timing model of its core; use {alt}")
    if cost == "instructions" and not instructions_per_second:
        raise UsageError(f"--cost instructions: platform {platform} has no instruction-counting clock: its costs "
                         "are seconds (give no --cost)")
    if cost is not None:
        return COSTS[cost]
    if cycles:
        return UNIT_CYCLES
    return UNIT_INSTRUCTIONS if instructions_per_second else UNIT_SECONDS


def _device_failure(exc: BaseException, timeout: float) -> str:
    if isinstance(exc, SessionTimeoutError):
        return f"{HUNG}: no reply within {timeout:g} s ({one_line(exc, 200)}); the firmware was restarted"
    return f"{CRASHED} ({type(exc).__name__}: {one_line(exc, 200)}); the firmware was restarted"


#: Errors of the link or the device (not of the candidate's output): the firmware is restarted after one.
_LINK_ERRORS = (SessionError, TransportError, ProtocolError, LinkClosedError)


class Measurer:
    """Builds and measures candidates on one platform (see the module docstring)."""

    def __init__(self, platform: str | Any = "host", target: str | None = None, timeout: float = 20.0,
                 seed: int = 0, on_candidate: CandidateHook | None = None,
                 progress: Callable[[str], None] | None = None, keep_firmware: bool = False,
                 cost: str | None = None) -> None:
        from utvm.platform import get_platform
        from utvm.target import get_target, platform_target

        if isinstance(platform, str):
            self.platform_name = platform
            self.platform = get_platform(platform)
            cpu = platform_target(platform)
            self.target = get_target(target).name if target else cpu.name
            reason = get_target(self.target).runs_on(cpu)
            if reason:
                raise UsageError(f"target {self.target}: {reason} (platform {platform})")
        else:
            self.platform = platform
            self.platform_name = str(getattr(platform, "name", type(platform).__name__))
            self.target = get_target(target or getattr(platform, "target", "host")).name
        ips = getattr(self.platform, "instructions_per_second", None)
        self.instructions_per_second: float | None = float(ips) if ips else None
        model = getattr(self.platform, "timing_model", None)
        self.timing_model: str | None = str(model) if model else None
        self.unit = cost_unit(cost, self.instructions_per_second, self.timing_model, self.platform_name)
        self.timeout = float(timeout)
        self.seed = int(seed)
        self.on_candidate = on_candidate
        self.progress = progress or (lambda _m: None)
        self.keep_firmware = keep_firmware
        self._reference: dict[str, tuple[dict[str, np.ndarray], list[np.ndarray]]] = {}
        self.stats = {"firmwares": 0, "restarts": 0, "build_failures": 0}

    # --- 1. compile -----------------------------------------------------------------------------------------
    def _compile(self, task: Task, index: int, point: Schedule) -> _Candidate:
        from utvm.compiler import compile as compile_graph

        cand = _Candidate(index, dict(point))
        reason = task.space.check(point)
        if reason is not None:
            cand.fail(f"{NOT_IN_SPACE}: {reason}", ERROR_BUILD)
            return cand
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                compiled = compile_graph(task.graph, model_name=f"c{index}", rounding=task.rounding,
                                         target=self.target, schedules={task.key: dict(point)}, passes=False,
                                         task_counts={task.key: task.count})
        except Exception as exc:  # a kernel that fails on one point costs that point only
            cand.fail(f"{COMPILE_FAILED}: {type(exc).__name__}: {one_line(exc)}", ERROR_BUILD)
            return cand
        ops = [op for op in compiled.operators if op.task]
        if len(compiled.operators) != 1 or len(ops) != 1 or ops[0].task != task.key:
            found = ", ".join(op.task or op.op for op in compiled.operators) or "none"
            cand.fail(f"{NOT_THE_TASK} ({found}) are not the task {task.key}", ERROR_BUILD)
        elif ops[0].schedule_source != "given":
            why = "; ".join(one_line(w.message) for w in caught) or "the kernel used its default point"
            cand.fail(f"{KERNEL_REFUSED}: {why}", ERROR_BUILD)
        else:
            cand.compiled = compiled
            cand.footprint = _footprint(task, point, self.target)
        return cand

    # --- 2. build ---------------------------------------------------------------------------------------------
    def _build(self, cands: list[_Candidate], failed: list[_Candidate]) -> list[tuple[Path, list[_Candidate]]]:
        """Firmware for `cands`: [(firmware, its candidates)], one unless a failing build had to be split;
        candidates that cannot be built are moved to `failed` with their error."""
        if not cands:
            return []
        with tempfile.TemporaryDirectory(prefix="utvm-tune-") as tmp:
            files = []
            for c in cands:
                path = Path(tmp) / c.source_name
                path.write_text(c.compiled.sources[f"tvmgen_c{c.index}_ops.c"])
                files.append(path)
            lib = Path(tmp) / SYSTEM_LIB_NAME
            lib.write_text(system_lib_source([c.op.name for c in cands]))
            try:
                fw = self.platform.build(with_test_functions=False, system_lib_sources=[*files, lib])
                self.stats["firmwares"] += 1
                return [(Path(fw), cands)]
            except BuildError as exc:
                self.stats["build_failures"] += 1
                text = str(exc)
        by_index = {c.index: c for c in cands}
        named: dict[int, str] = {}
        for m in _ERROR_LINE.finditer(text):  # compile errors point at a candidate's file
            if int(m[1]) in by_index:
                named.setdefault(int(m[1]), m[2])
        if named or len(cands) == 1:
            bad = [by_index[i] for i in named] or cands
            for c in bad:
                c.fail(f"{BUILD_FAILED}: {one_line(named.get(c.index) or _first_error(text))}",
                       ERROR_BUILD)
                failed.append(c)
            return self._build([c for c in cands if c not in bad], failed)
        half = len(cands) // 2
        self.progress(f"the firmware of {len(cands)} candidates failed to build; splitting it")
        return self._build(cands[:half], failed) + self._build(cands[half:], failed)

    def discard(self, firmware: Path) -> None:
        """Remove a batch firmware from utvm's build cache (it is never built again)."""
        if self.keep_firmware:
            return
        from utvm.support.cc import cache_dir

        try:
            rel = firmware.resolve().relative_to(cache_dir().resolve())
        except ValueError:
            return  # a platform that builds elsewhere keeps its own files
        if len(rel.parts) > 1:
            shutil.rmtree(cache_dir() / rel.parts[0], ignore_errors=True)

    # --- 3. run -----------------------------------------------------------------------------------------------
    def reference(self, task: Task) -> tuple[dict[str, np.ndarray], list[np.ndarray]]:
        """The task's inputs and its reference outputs (utvm.ir.run_reference), computed once per task."""
        if task.key not in self._reference:
            from utvm.ir import run_reference

            inputs = task_inputs(task, self.seed)
            res = run_reference(task.graph, inputs, rounding=task.rounding)
            self._reference[task.key] = (inputs, [np.asarray(res[n]) for n in task.graph.outputs])
        return self._reference[task.key]

    def measure(self, task: Task, points: Sequence[Schedule]) -> Iterator[Measurement]:
        """Compile, build and measure `points` of `task`; one Measurement per point, each yielded as soon as
        it is known (candidates that fail to compile or build first)."""
        inputs, refs = self.reference(task)
        cands = self.compile(task, points)
        for c in cands:
            if c.error is not None:
                yield self.result_of(c)
        good = [c for c in cands if c.error is None]
        pool = self.code_sizes(task, good)
        try:
            for batch in self.batches(good):
                failed, groups = self.build(task, batch)
                for c in failed:
                    yield self.result_of(c)
                for firmware, group in groups:
                    try:
                        yield from self._run(task, firmware, group, inputs, refs)
                    finally:
                        self.discard(firmware)
        finally:
            pool.shutdown(wait=False, cancel_futures=True)

    def compile(self, task: Task, points: Sequence[Schedule]) -> list[_Candidate]:
        """Step 1: a candidate per point (index = its place in `points`), compiled or with its error."""
        return [self._compile(task, i, p) for i, p in enumerate(points)]

    def code_sizes(self, task: Task, good: list[_Candidate]) -> Any:
        """Each candidate's code size, measured by the target's compiler (utvm.tune.codesize) in two threads
        while the batch builds and runs: sets `code` of each to a Future; returns the pool."""
        from concurrent.futures import ThreadPoolExecutor

        from utvm.tune.codesize import code_bytes

        pool = ThreadPoolExecutor(max_workers=2)
        for c in good:
            c.code = pool.submit(code_bytes, task, dict(c.schedule), self.target)
        return pool

    def batches(self, good: list[_Candidate]) -> list[list[_Candidate]]:
        """The compiled candidates in firmware batches, in order, their constants under
        MAX_FIRMWARE_CONSTANT_BYTES each (a candidate larger than that alone)."""
        batches: list[list[_Candidate]] = []
        size = 0
        for c in good:
            nbytes = int(c.compiled.constant_bytes)
            if batches and size + nbytes <= MAX_FIRMWARE_CONSTANT_BYTES:
                batches[-1].append(c)
                size += nbytes
            else:
                batches.append([c])
                size = nbytes
        return batches

    def build(self, task: Task,
              batch: list[_Candidate]) -> tuple[list[_Candidate], list[tuple[Path, list[_Candidate]]]]:
        """Step 2: the firmware of one batch: (the candidates that could not be built, with their error;
        [(firmware, its candidates)], one unless a failing build had to be split)."""
        failed: list[_Candidate] = []
        self.progress(f"building {len(batch)} candidate(s) of {task.key} for {self.platform_name}")
        groups = self._build(batch, failed)
        return failed, groups

    def resolve(self, cands: Sequence[_Candidate]) -> None:
        """Wait for the candidates' code sizes and keep only what measuring needs (`OpInfo`, no compiled
        model): what the farm sends to a device."""
        for c in cands:
            if c.error is None:
                c.op  # noqa: B018 - fills `info` from the compiled model
            code = c.code
            c.code = code.result() if code is not None and hasattr(code, "result") else code
            c.compiled = None

    def result_of(self, c: _Candidate, cost: float | None = None) -> Measurement:
        code = c.code.result() if hasattr(c.code, "result") and c.error is None else c.code
        code = code if c.error is None else None
        fp = c.footprint if c.error is None else None
        return Measurement(dict(c.schedule), None if c.error else cost, self.unit, c.error, code,
                           None if fp is None else fp.weights, None if fp is None else fp.scratch,
                           c.error_kind if c.error else None)

    def _start(self, firmware: Path) -> Any:
        return self.platform.start(firmware, reply_timeout_s=self.timeout)

    def open_device(self, task: Task, firmware: Path) -> _Device:
        """Step 3: `firmware` started with the task's inputs uploaded (close it with `.close()`)."""
        inputs, _refs = self.reference(task)
        dev = _Device(self, task, firmware, inputs)
        try:
            dev.start()
        except BaseException:
            dev.close()
            raise
        return dev

    def measure_candidate(self, dev: _Device, c: _Candidate) -> tuple[Measurement, bool]:
        """Steps 3-4 for one candidate of the running firmware `dev`: its Measurement, and whether the device
        failed (hung, crashed, or its link did) while it ran, in which case the firmware has been started
        again (a firmware that cannot start again raises)."""
        _inputs, refs = self.reference(dev.task)
        try:
            if self.on_candidate is not None:
                self.on_candidate(dev.session, c.index, dict(c.schedule))
            cost = dev.measure(c, refs)
        except _LINK_ERRORS as exc:
            c.fail(_device_failure(exc, self.timeout), ERROR_DEVICE)
            self.stats["restarts"] += 1
            dev.restart()
            return self.result_of(c), True
        return self.result_of(c, cost), False

    def _run(self, task: Task, firmware: Path, cands: list[_Candidate], inputs: dict[str, np.ndarray],
             refs: list[np.ndarray]) -> Iterator[Measurement]:
        dev = _Device(self, task, firmware, inputs)
        try:
            dev.start()
            for c in cands:
                yield self.measure_candidate(dev, c)[0]
        finally:
            dev.close()


class _Device:
    """One running batch firmware, with the task's inputs uploaded and its outputs allocated."""

    def __init__(self, measurer: Measurer, task: Task, firmware: Path, inputs: dict[str, np.ndarray]) -> None:
        self.m = measurer
        self.task = task
        self.firmware = firmware
        self.inputs = inputs
        self.session: Any = None
        self.arrays: dict[str, Any] = {}
        self.outputs: list[Any] = []

    def start(self) -> None:
        self.session = self.m._start(self.firmware)
        sess = self.session
        self.arrays = {name: sess.array(np.asarray(a, order="C")) for name, a in self.inputs.items()}
        g = self.task.graph
        self.outputs = [sess.empty(g.tensor(n).shape, g.tensor(n).dtype) for n in g.outputs]
        self.fill = sess.get_function("tvm.contrib.random.random_fill")
        self.lib = sess.system_lib()

    def restart(self) -> None:
        self.close()
        self.start()  # a firmware that cannot start again ends the tuning (PlatformError, SessionError)

    def close(self) -> None:
        if self.session is not None:
            self.session.close(force=True)
            self.session = None

    def _restore_inputs(self) -> None:
        """Upload the inputs again: a wrong or failing kernel may have written over them."""
        for name, arr in self.arrays.items():
            arr.copyfrom(np.asarray(self.inputs[name], order="C"))

    def measure(self, c: _Candidate, refs: list[np.ndarray]) -> float | None:
        """Check the candidate's output, then time it; sets c.error (and returns None) when it is wrong."""
        sess, op = self.session, c.op
        fn = self.lib.get_function(op.name)
        scratch = None
        try:
            if op.scratch_bytes:
                scratch = sess.empty((op.scratch_bytes,), "uint8")
            args = [self.arrays[name] for name in op.inputs] + list(self.outputs)
            if scratch is not None:
                args.append(scratch)
            for o in self.outputs:
                self.fill(o)
            fn(*args)
            got = [o.numpy() for o in self.outputs]
            wrong = compare_outputs(got, refs, list(op.outputs))
            if wrong is not None:
                c.fail(wrong, ERROR_RESULT)
                self._restore_inputs()
                return None
            det = self.m.instructions_per_second is not None
            repeat, min_ms = (1, 0) if det else (HOST_REPEATS, HOST_MIN_REPEAT_MS)
            with sess.time_evaluator(op.name, module=self.lib, number=1, repeat=repeat,
                                     min_repeat_ms=min_ms) as timer:
                secs = [float(s) for s in timer(*args)]
                cycles = getattr(timer, "cycles_est", None)  # the platform's timing model (None without)
            seconds = float(np.median(secs))
            if self.m.unit == UNIT_CYCLES:
                return self._cycles(op.name, cycles, len(secs))
            if det:
                return float(round(seconds * self.m.instructions_per_second))
            return seconds
        except RemoteError as exc:  # the operator returned an error code, or the device refused a request
            c.fail(f"the candidate failed on the device: {one_line(exc)}", ERROR_RESULT)
            self._restore_inputs()
            return None
        finally:
            try:
                if scratch is not None:
                    scratch.free()
                fn.free()
            except _LINK_ERRORS:
                pass  # the device is gone: the restart frees everything

    def _cycles(self, name: str, cycles: Any, results: int) -> float:
        """The cost in estimated cycles: the median of the time evaluator's `cycles_est` (one per result).
        A platform that has a timing model but gave no estimate (its model off, or failed) ends the tuning
        with a PlatformError: every candidate would be unmeasurable."""
        values = [float(c) for c in cycles] if isinstance(cycles, list | tuple) else []
        if len(values) != results or not all(np.isfinite(v) and v > 0 for v in values):
            raise PlatformError(f"platform {self.m.platform_name}: the time evaluator of {name} gave no estimated "
                                f"cycles (cycles_est {one_line(repr(cycles), 80)}; its timing model "
                                f"{self.m.timing_model} is off or failed): tune with --cost instructions")
        return float(round(float(np.median(values))))


def _footprint(task: Task, point: Schedule, target: str) -> Any:
    """The constant and scratch bytes of a compiled candidate (utvm.compiler.footprint), or None when they
    cannot be told (the record then says unknown; the measurement goes on)."""
    from utvm.compiler.footprint import task_footprint

    try:
        return task_footprint(task.graph, task.key, point, target, task.rounding, task.count)
    except Exception:  # noqa: BLE001 - a footprint is best effort, as the code size is
        return None


def _first_error(text: str) -> str:
    for line in text.splitlines():
        if "error" in line.lower():
            return line.strip()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[0] if lines else "the build failed"
