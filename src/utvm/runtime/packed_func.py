"""PackedFunc, argument conversion and the process-wide global function registry (seed 004, docs/architecture.md §3).

A PackedFunc takes positional arguments of a fixed set of kinds; each one travels as a TVMValue plus a
type code (`TypeCode`). `convert_arg` is the single place that decides which kind a Python value is:

    None -> NULL            int, bool, numpy integer -> INT      float, numpy floating -> FLOAT
    str -> STR              bytes, bytearray, memoryview -> BYTES
    DataType -> DATA_TYPE   Device -> DEVICE                    NDArray, ctypes DLTensor -> DLTENSOR_HANDLE
    PackedFunc (or a plain Python function) -> PACKED_FUNC_HANDLE    Module -> MODULE_HANDLE
    ctypes.c_void_p -> OPAQUE_HANDLE

Anything else raises `ArgumentError` naming the function, the argument index and the type. Backends
(`local.CPackedFunc`, `rpc.RemoteFunction`) subclass PackedFunc and override only `_invoke`, which receives
the converted `(TypeCode, value)` pairs: every backend accepts exactly the same arguments and reports a bad
one the same way, and a backend's encoder (ctypes TVMValues, the RPC packed sequence) only maps each type
code to its own representation. A backend refuses a supported kind it cannot carry (a host array on an
RPC call, a Python callback on a device) with an ArgumentError naming the function and the argument.
A Python PackedFunc sees the converted values (e.g. numpy scalars arrive as int/float, a bytearray as bytes),
and its return value goes through the same conversion.
"""

from __future__ import annotations

import ctypes
import difflib
import functools
import numbers
import threading
import types
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, TypeVar, overload

from utvm.errors import ArgumentError, FunctionNotFoundError, RuntimeSystemError
from utvm.runtime.capi import DLTensor
from utvm.runtime.datatype import DataType
from utvm.runtime.device import Device
from utvm.runtime.module import Module
from utvm.runtime.ndarray_base import NDArrayBase
from utvm.runtime.typecodes import TypeCode

SUPPORTED_KINDS = "int, float, str, bytes, DataType, Device, NDArray/DLTensor, PackedFunc, Module, None"
_I64_MIN, _I64_MAX = -(2**63), 2**63 - 1
_FUNCTION_TYPES = (types.FunctionType, types.BuiltinFunctionType, types.MethodType, functools.partial)

F = TypeVar("F", bound=Callable[..., Any])


class PackedFunc:
    """A type-erased function with a name. `PackedFunc(f, name)` wraps a Python callable."""

    #: What an ArgumentError for a numpy array passed to this function suggests instead.
    array_hint: ClassVar[str] = "wrap numpy arrays with utvm.nd.array(...)"

    def __init__(self, func: Callable[..., Any] | None = None, name: str | None = None) -> None:
        if func is not None and not callable(func):
            raise ArgumentError(f"PackedFunc needs a callable, got {type(func).__name__}")
        self._func = func
        self._name = name or getattr(func, "__qualname__", None) or getattr(func, "__name__", "<anonymous>")

    @property
    def name(self) -> str:
        return self._name

    def __call__(self, *args: Any) -> Any:
        if not args:
            return self._invoke([])
        name = self._name
        return self._invoke([convert_arg(name, i, a, self.array_hint) for i, a in enumerate(args)])

    def _invoke(self, args: list[tuple[TypeCode, Any]]) -> Any:
        """Call with converted (type code, value) pairs; backends override this."""
        assert self._func is not None
        ret = self._func(*(v for _, v in args))
        return convert_return(self._name, ret)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self._name!r}>"


_EXACT = {int: TypeCode.INT, float: TypeCode.FLOAT, str: TypeCode.STR, bytes: TypeCode.BYTES}


def classify(value: Any) -> tuple[TypeCode, Any] | None:
    """(type code, normalized value) for a supported value, None for an unsupported one."""
    code = _EXACT.get(type(value))
    if code is not None:  # the common cases, without the isinstance chain
        return code, value
    if value is None:
        return TypeCode.NULL, None
    if isinstance(value, PackedFunc):
        return TypeCode.PACKED_FUNC_HANDLE, value
    if isinstance(value, Module):
        return TypeCode.MODULE_HANDLE, value
    if isinstance(value, DataType):
        return TypeCode.DATA_TYPE, value
    if isinstance(value, Device):
        return TypeCode.DEVICE, value
    if isinstance(value, str):
        return TypeCode.STR, value
    if isinstance(value, bytes | bytearray | memoryview):
        return TypeCode.BYTES, bytes(value)
    if isinstance(value, numbers.Integral):  # int, bool, numpy integers
        return TypeCode.INT, int(value)
    if isinstance(value, numbers.Real):  # float, numpy floating
        return TypeCode.FLOAT, float(value)
    if type(value).__module__ == "numpy" and getattr(value, "shape", None) == () and value.dtype.kind == "b":
        return TypeCode.INT, int(value)  # numpy.bool_ is not registered as numbers.Integral
    if isinstance(value, NDArrayBase):  # an array of any backend
        return TypeCode.DLTENSOR_HANDLE, value
    if isinstance(value, DLTensor) or (isinstance(value, ctypes._Pointer) and value._type_ is DLTensor):
        return TypeCode.DLTENSOR_HANDLE, value
    if isinstance(value, ctypes.c_void_p):
        return TypeCode.OPAQUE_HANDLE, value
    if isinstance(value, _FUNCTION_TYPES):
        return TypeCode.PACKED_FUNC_HANDLE, PackedFunc(value)
    return None


def _unsupported(func_name: str, where: str, value: Any, array_hint: str = PackedFunc.array_hint) -> ArgumentError:
    tname = type(value).__name__
    hint = ""
    if type(value).__module__ == "numpy" and tname == "ndarray":
        hint = f"; {array_hint}"
    elif isinstance(value, int):
        hint = "; integers must fit in int64"
    return ArgumentError(
        f"{func_name}: {where} has unsupported type {tname!r} (supported: {SUPPORTED_KINDS}){hint}")


def convert_arg(func_name: str, index: int, value: Any,
                array_hint: str = PackedFunc.array_hint) -> tuple[TypeCode, Any]:
    """Convert positional argument `index` of a call to `func_name`; raises ArgumentError naming both
    (`array_hint`: what the message suggests for a numpy array, which no backend takes as it is)."""
    got = classify(value)
    if got is None:
        raise _unsupported(func_name, f"argument {index}", value, array_hint)
    code, norm = got
    if code == TypeCode.INT and not _I64_MIN <= norm <= _I64_MAX:
        raise ArgumentError(f"{func_name}: argument {index} = {norm} does not fit in int64")
    if code == TypeCode.STR and "\0" in norm:
        nul = norm.index("\0")
        pos = len(norm[:nul].encode("utf-8", errors="surrogatepass"))
        seen = repr(norm[:nul]) if nul <= 40 else repr(norm[:32])[:-1] + "\u2026'"
        raise ArgumentError(f"{func_name}: argument {index} is a str containing NUL, which C strings cannot carry "
                            f"(pass bytes instead): its first NUL is at byte {pos}, so the callee would see only "
                            f"{seen}; nothing was sent")
    return code, norm


def convert_return(func_name: str, value: Any) -> Any:
    """Check and normalize a Python PackedFunc's return value like an argument."""
    got = classify(value)
    if got is None:
        raise _unsupported(func_name, "return value", value)
    code, norm = got
    if code == TypeCode.INT and not _I64_MIN <= norm <= _I64_MAX:
        raise ArgumentError(f"{func_name}: return value {norm} does not fit in int64")
    return norm


# --- the process-wide registry ------------------------------------------------------------------------------
_REGISTRY: dict[str, PackedFunc] = {}
_LOCK = threading.Lock()


def _check_name(name: object) -> str:
    if not isinstance(name, str) or not name or "\0" in name:
        raise ArgumentError(f"a global function name must be a non-empty str without NUL, got {name!r}")
    return name


def _register(name: str, func: Callable[..., Any], override: bool) -> None:
    if not callable(func):
        raise ArgumentError(f"register_func({name!r}): expected a callable, got {type(func).__name__}")
    pf = func if isinstance(func, PackedFunc) else PackedFunc(func, name)
    with _LOCK:
        if name in _REGISTRY and not override:
            raise RuntimeSystemError(f"global function {name!r} is already registered "
                                     "(pass override=True to replace it)")
        _REGISTRY[name] = pf


@overload
def register_func(name: str, f: None = None, override: bool = False) -> Callable[[F], F]: ...
@overload
def register_func(name: str, f: F, override: bool = False) -> F: ...
@overload
def register_func(name: F, f: None = None, override: bool = False) -> F: ...


def register_func(name: Any, f: Any = None, override: bool = False) -> Any:
    """Register a global PackedFunc. Forms: `register_func("n", f)`, `@register_func("n")`,
    `@register_func("n", override=True)`, `@register_func` (named after the function).
    Returns `f` unchanged, so a decorated function stays a plain Python function."""
    if callable(name) and not isinstance(name, str) and f is None:
        func = name
        _register(_check_name(getattr(func, "__name__", None)), func, override)
        return func
    _check_name(name)
    if f is not None:
        _register(name, f, override)
        return f

    def decorator(func: F) -> F:
        _register(name, func, override)
        return func

    return decorator


def get_global_func(name: str, allow_missing: bool = False) -> PackedFunc | None:
    """The registered PackedFunc `name`; unknown names raise FunctionNotFoundError (None if allow_missing)."""
    with _LOCK:
        pf = _REGISTRY.get(name)
        names = list(_REGISTRY)
    if pf is None and not allow_missing:
        raise FunctionNotFoundError(_not_found_message(name, names))
    return pf


def remove_global_func(name: str) -> None:
    """Unregister `name` (FunctionNotFoundError if it is not registered)."""
    with _LOCK:
        if _REGISTRY.pop(name, None) is None:
            raise FunctionNotFoundError(_not_found_message(name, list(_REGISTRY)))


def list_global_func_names() -> list[str]:
    with _LOCK:
        return sorted(_REGISTRY)


def _not_found_message(name: str, known: Sequence[str], where: str = "global function") -> str:
    msg = f"{where} {name!r} is not registered"
    close = difflib.get_close_matches(str(name), known, n=3)
    if close:
        msg += f"; did you mean {', '.join(map(repr, close))}?"
    return msg
