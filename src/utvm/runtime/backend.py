"""Backend: what user code needs from a runtime, shared by `local` and `rpc` (docs/architecture.md §3).

    def add_one(backend: Backend, x: np.ndarray) -> np.ndarray:
        a, b = backend.array(x), backend.empty(x.shape, "float32")
        backend.get_function("testing.add_one")(a, b)       # a PackedFunc; a and b are NDArrayBase
        return b.numpy()

    add_one(local.load(), x)                                 # the CRT in this process (ctypes)
    add_one(session, x)                                      # a device over RPC (utvm.rpc.Session)

A backend hands out PackedFuncs (`get_function`, `system_lib().get_function`) that all convert their
arguments with `utvm.runtime.convert_arg`, arrays that are all `NDArrayBase`, modules that are all
`Module`, and time evaluators (`time_evaluator`) built on the CRT's `runtime.RPCTimeEvaluator`.

A backend whose device runs under a timing model (a QEMU board with the cycles plugin,
utvm.platform.qemu.timing) also estimates cycles: `timing_regions()` lists the spans the plugin closed so far
(instructions and estimated cycles of each timer start .. stop), and each time evaluator call sets
`TimeEvaluator.cycles_est` beside the seconds it returns.
"""

from __future__ import annotations

import abc
import struct
from collections.abc import Sequence
from typing import Any, NamedTuple, Protocol

from utvm.errors import ArgumentError, RemoteProtocolError, RuntimeSystemError
from utvm.runtime.device import Device
from utvm.runtime.module import Module
from utvm.runtime.ndarray_base import NDArrayBase
from utvm.runtime.packed_func import PackedFunc
from utvm.runtime.typecodes import TypeCode

__all__ = ["Backend", "TimeEvaluator", "TimingRegion", "TimingSource", "estimate_cycles", "match_regions"]


class TimingRegion(NamedTuple):
    """One span a timing model closed: the instructions executed in it and their estimated cycles."""

    instructions: int
    cycles: int


class TimingSource(Protocol):
    """A device's timing model as a backend sees it (utvm.platform.qemu.timing.TimingLog)."""

    core: str
    instructions_per_second: float

    def regions(self) -> list[TimingRegion]:
        """Every region closed so far, oldest first."""
        ...


#: How far a region's instructions may be from `number` x a result's instructions per call and still be that
#: result's measurement: the timer's resolution (a SysTick tick is 40-50 instructions) plus the fixed
#: instructions between the region's ends and the timer's readings, with room to spare.
MATCH_SLACK_INSTRUCTIONS = 256
MATCH_SLACK_FRACTION = 0.01


def _fits(region: TimingRegion, per_call: float) -> bool:
    if per_call <= 0:
        return False
    number = max(1, round(region.instructions / per_call))
    slack = MATCH_SLACK_INSTRUCTIONS + MATCH_SLACK_FRACTION * region.instructions
    return abs(region.instructions - number * per_call) <= slack


def match_regions(per_call: Sequence[float], regions: Sequence[TimingRegion]) -> list[TimingRegion] | None:
    """The region that measured each result, given each result's instructions per call and the regions a
    time evaluator call closed (oldest first); None when there are fewer regions than results.

    The CRT's evaluator measures each repeat once, but when a repeat took less than `min_repeat_ms` it grows
    `number` and measures that repeat again, so a call may close more regions than it returns results; the
    last measurement of each repeat is the one reported. With as many regions as results they pair in order.
    Otherwise, from the end: the last region is the last repeat's; walking back, each earlier result takes
    the latest earlier region whose instructions are a whole multiple (`number`) of its instructions per call
    within the timer's resolution (the latest earlier region when none is), leaving one region at least for
    each result before it. Every measurement of one repeat times the same function, so a region mistaken for
    its neighbour of the same repeat has (all but) the same cycles per instruction."""
    n = len(per_call)
    if len(regions) < n:
        return None
    if len(regions) == n:
        return list(regions)
    out: list[TimingRegion] = []
    j = len(regions) - 1
    for r in range(n - 1, -1, -1):
        pick = j
        if r != n - 1:
            for i in range(j, r - 1, -1):
                if _fits(regions[i], per_call[r]):
                    pick = i
                    break
        out.append(regions[pick])
        j = pick - 1
    return out[::-1]


class TimeEvaluator(PackedFunc):
    """A timer made by `Backend.time_evaluator`: calling it with the timed function's arguments returns
    `repeat` mean seconds per call. It holds one of the runtime's time-evaluator slots until `free()` (or
    `with`, or garbage collection).

    `cycles_est`: after each call, when the backend's device runs under a timing model, the estimated cycles
    per call of each result (same order): a result's instructions per call N = seconds x
    `instructions_per_second` (the device's clock counts instructions), times the cycles per instruction of
    the region that measured it (`match_regions`); None without a timing model (or when the model closed
    fewer regions than there are results)."""

    def __init__(self, timer: PackedFunc, repeat: int, name: str | None = None,
                 timing: TimingSource | None = None) -> None:
        super().__init__(None, name or timer.name)
        self.timer, self.repeat = timer, repeat
        self.timing = timing
        self.cycles_est: list[float] | None = None

    def _invoke(self, args: list[tuple[TypeCode, Any]]) -> list[float]:
        self.cycles_est = None
        before = len(self.timing.regions()) if self.timing is not None else 0
        raw = self.timer._invoke(args)
        if not isinstance(raw, bytes) or len(raw) != 8 * self.repeat:
            raise RemoteProtocolError(
                f"{self.timer.name} returned {raw!r:.60}, expected {self.repeat} doubles as bytes")
        seconds = list(struct.unpack(f"<{self.repeat}d", raw))
        if self.timing is not None:
            self.cycles_est = estimate_cycles(seconds, self.timing.regions()[before:],
                                              self.timing.instructions_per_second)
        return seconds

    def free(self) -> None:
        """Give the runtime's time-evaluator slot back now."""
        free = getattr(self.timer, "free", None)
        if free is not None:
            free()

    def __enter__(self) -> TimeEvaluator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.free()


class Backend(abc.ABC):
    """A runtime that runs PackedFuncs on some memory: `local.LocalRuntime` or `rpc.Session`."""

    __slots__ = ()

    @property
    @abc.abstractmethod
    def device(self) -> Device:
        """The device arrays of this backend live on, as its runtime names it."""

    @abc.abstractmethod
    def get_function(self, name: str, allow_missing: bool = False) -> PackedFunc | None:
        """The global function `name`; FunctionNotFoundError naming it if absent (None with allow_missing)."""

    @abc.abstractmethod
    def system_lib(self) -> Module:
        """The system library module (runtime.SystemLib): the generated model code, where there is one."""

    @abc.abstractmethod
    def empty(self, shape: Sequence[int] | int, dtype: Any = "float32") -> NDArrayBase:
        """An uninitialised array of this backend."""

    def array(self, source: Any, dtype: Any = None) -> NDArrayBase:
        """A new array of this backend holding a copy of `source` (numpy array, array of any backend, or
        anything numpy.asarray takes)."""
        import numpy as np

        src = np.asarray(source, dtype=dtype)
        arr = self.empty(src.shape, src.dtype)
        try:
            return arr.copyfrom(src)
        except BaseException:
            arr.free()
            raise

    def timing_source(self) -> TimingSource | None:
        """The device's timing model, if it runs under one: the `timing` of the backend's transport (a QEMU
        board's, utvm.platform.qemu.runner.QemuTransport); None otherwise."""
        return getattr(getattr(self, "transport", None), "timing", None)

    def timing_regions(self) -> list[TimingRegion] | None:
        """The regions the device's timing model closed so far (each timer start .. stop, oldest first:
        instructions and estimated cycles); None without a timing model."""
        timing = self.timing_source()
        return None if timing is None else timing.regions()

    def _adopt_timer(self, timer: PackedFunc) -> None:  # noqa: B027 - optional hook, nothing by default
        """Make `timer`, a fresh time evaluator handle, released when it is freed or collected."""

    def time_evaluator(
        self,
        name: str,
        number: int = 10,
        repeat: int = 1,
        min_repeat_ms: int = 0,
        module: Module | None = None,
        limit_zero_time_iterations: int = 100,
        cooldown_interval_ms: int = 0,
        repeats_to_cooldown: int = 1,
    ) -> TimeEvaluator:
        """A callable timing `name` with runtime.RPCTimeEvaluator (docs/architecture.md §5.4): one warm-up call, then
        `repeat` measurements of `number` calls (grown until `min_repeat_ms`); it returns `repeat` mean
        seconds per call. `name` is a function of `module`, or with module=None a global function (the
        module argument then travels as NULL, which utvm's CRT takes to mean the global registry)."""
        for label, v, lo in (("number", number, 1), ("repeat", repeat, 1), ("min_repeat_ms", min_repeat_ms, 0)):
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise ArgumentError(f"time_evaluator: {label} must be an int >= {lo}, got {v!r}")
        make = self.get_function("runtime.RPCTimeEvaluator")
        assert make is not None
        dev = self.device
        timer = make(module, name, dev.device_type, dev.device_id, number, repeat, min_repeat_ms,
                     limit_zero_time_iterations, cooldown_interval_ms, repeats_to_cooldown, 0, "")
        if not isinstance(timer, PackedFunc):
            raise RuntimeSystemError(f"runtime.RPCTimeEvaluator gave no timer for {name!r} (returned {timer!r})")
        timer._name = f"time_evaluator({name})"  # what the timer's errors name
        self._adopt_timer(timer)
        return TimeEvaluator(timer, repeat, f"time_evaluator({name})", timing=self.timing_source())


def estimate_cycles(seconds: Sequence[float], regions: Sequence[TimingRegion],
                    instructions_per_second: float) -> list[float] | None:
    """Estimated cycles per call of each result (see TimeEvaluator.cycles_est)."""
    per_call = [s * instructions_per_second for s in seconds]
    matched = match_regions(per_call, regions)
    if matched is None:
        return None
    return [n * (r.cycles / r.instructions) if r.instructions else 0.0 for n, r in zip(per_call, matched,
                                                                                         strict=True)]
