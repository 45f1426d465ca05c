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
"""

from __future__ import annotations

import abc
import struct
from collections.abc import Sequence
from typing import Any

from utvm.errors import ArgumentError, RemoteProtocolError, RuntimeSystemError
from utvm.runtime.device import Device
from utvm.runtime.module import Module
from utvm.runtime.ndarray_base import NDArrayBase
from utvm.runtime.packed_func import PackedFunc
from utvm.runtime.typecodes import TypeCode

__all__ = ["Backend", "TimeEvaluator"]


class TimeEvaluator(PackedFunc):
    """A timer made by `Backend.time_evaluator`: calling it with the timed function's arguments returns
    `repeat` mean seconds per call. It holds one of the runtime's time-evaluator slots until `free()` (or
    `with`, or garbage collection)."""

    def __init__(self, timer: PackedFunc, repeat: int, name: str | None = None) -> None:
        super().__init__(None, name or timer.name)
        self.timer, self.repeat = timer, repeat

    def _invoke(self, args: list[tuple[TypeCode, Any]]) -> list[float]:
        raw = self.timer._invoke(args)
        if not isinstance(raw, bytes) or len(raw) != 8 * self.repeat:
            raise RemoteProtocolError(
                f"{self.timer.name} returned {raw!r:.60}, expected {self.repeat} doubles as bytes")
        return list(struct.unpack(f"<{self.repeat}d", raw))

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
        return TimeEvaluator(timer, repeat, f"time_evaluator({name})")
