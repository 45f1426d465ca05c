"""The `local` backend: the CRT built as a shared library and loaded into this process with ctypes.

    from utvm.runtime import local
    add = local.get_global_func("utvm.local.add_int")      # a C global as a PackedFunc
    add(2, 3)                                               # -> 5, through TVMFuncCall

    @local.register_func("demo.square")                     # a Python callable as a C global
    def square(x):
        return x * x
    local.get_global_func("utvm.local.call_global")("demo.square", 7)   # C calls Python -> 49

What is built: the CRT's `common`, `memory` and `host` (POSIX port) libraries from the CRT's own Makefile
(with -fPIC), linked whole with `local_c/*.c` (C globals that exercise the API from C) into one shared
library, configured by `local_c/crt_config.h`. It is built once per content hash of those inputs and cached
(`utvm.support.cc.cached_build`). Loading it calls TVMPlatformInitialize, TVMInitializeRuntime and
UTVMLocalRegisterGlobals once per process.

`LocalRuntime` (what `load()` returns) is a `utvm.runtime.Backend`, like an RPC session: `get_function`,
`empty`/`array` (host NDArrays), `system_lib` and `time_evaluator` work the same on both, so code written
for one runs on the other.

Python callables registered here become `TVMBackendPackedCFunc`s (ctypes callbacks kept alive for the life
of the process). An exception raised in one is turned into a C error: its text goes to
TVMAPISetLastError and the callback returns -1; when the error reaches the Python caller it is raised as
`CRTError` carrying the original exception's type name and message (and the exception as `__cause__`).
The C runtime is not thread-safe, so every call into it holds one process-wide lock.
"""

from __future__ import annotations

import ctypes
import threading
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from utvm.errors import ArgumentError, CRTArgumentError, CRTError, FunctionNotFoundError
from utvm.runtime.backend import Backend
from utvm.runtime.capi import TVMBackendPackedCFunc, TVMByteArray, TVMValue
from utvm.runtime.datatype import DataType
from utvm.runtime.device import Device, cpu
from utvm.runtime.module import Module
from utvm.runtime.ndarray_base import NDArrayBase
from utvm.runtime.packed_func import PackedFunc, classify, convert_return
from utvm.runtime.typecodes import DLDeviceType, TypeCode
from utvm.support import cc

LOCAL_C_DIR = Path(__file__).resolve().parent / "local_c"
LIB_NAME = "libutvm_local.so"
CRT_LIBS = ("common", "memory", "host")
CFLAGS = (*cc.WARNING_FLAGS, "-O2", "-g")

# Error codes (tests/vectors/abi.json) that mean "the caller passed bad arguments".
K_NUM_ARGUMENTS = 0x800
K_WRONG_ARG_TYPE = 0x801
K_INVALID_ARG = 0x803
_ARGUMENT_ERRORS = (K_NUM_ARGUMENTS, K_WRONG_ARG_TYPE, K_INVALID_ARG)

Progress = Callable[[str], None]
F = TypeVar("F", bound=Callable[..., Any])


# --- building -------------------------------------------------------------------------------------------
def _build_inputs() -> list[Path]:
    crt = cc.crt_dir()
    return [crt / "Makefile", crt / "include", crt / "src" / "common", crt / "src" / "memory", crt / "host",
            LOCAL_C_DIR]


def build(progress: Progress | None = None, compiler: str = "gcc") -> Path:
    """Build (or find in the cache) the local runtime shared library; returns its path."""
    say = progress or (lambda _msg: None)
    sources = sorted(LOCAL_C_DIR.glob("*.c"))

    def builder(tmp: Path) -> Path:
        say(f"compiling the CRT libraries {', '.join(CRT_LIBS)} (position-independent) with {compiler}")
        libs = cc.make_crt_libs(tmp / "crt", LOCAL_C_DIR, libs=CRT_LIBS, cc=compiler, cflags=("-fPIC",))
        say(f"linking {LIB_NAME} from {', '.join(s.name for s in sources)} and the whole CRT libraries")
        whole = ["-Wl,--whole-archive", *(str(libs[n]) for n in CRT_LIBS), "-Wl,--no-whole-archive"]
        return cc.compile_link(sources, tmp / LIB_NAME, include_dirs=(LOCAL_C_DIR, cc.crt_dir() / "include"),
                               cflags=CFLAGS, ldflags=whole, shared=True, cc=compiler)

    extra = [compiler, cc.compiler_version(compiler), *CFLAGS, *CRT_LIBS]
    built: list[bool] = []

    def counting_builder(tmp: Path) -> Path:
        built.append(True)
        return builder(tmp)

    path = cc.cached_build(_build_inputs(), extra, LIB_NAME, counting_builder)
    if not built:
        say(f"using the cached build {path}")
    else:
        say(f"built {path}")
    return path


# --- the loaded library ---------------------------------------------------------------------------------
class _Pending(threading.local):
    depth = 0
    error: tuple[BaseException, str] | None = None


class LocalRuntime(Backend):
    """The loaded CRT. One per process: use `load()`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lock = threading.RLock()
        self._tls = _Pending()
        self._callbacks: list[Any] = []  # every ctypes callback C may still call: never freed
        self._py_by_handle: dict[int, PackedFunc] = {}  # handles of Python functions -> the PackedFunc
        self._handle_by_py: dict[Any, int] = {}  # Python callable -> handle (registered or anonymous)
        self._names: dict[int, str] = {}  # handle -> name, for messages about functions C handed back
        self._anonymous = 0
        self._pending_frees: list[int] = []  # handles of collected owned functions, freed at the next call
        lib = ctypes.CDLL(str(path))
        self.lib = lib
        vp, ci, cp = ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p
        _proto(lib.TVMGetLastError, ctypes.c_char_p, [])
        _proto(lib.TVMAPISetLastError, None, [cp])
        _proto(lib.TVMFuncGetGlobal, ci, [cp, ctypes.POINTER(vp)])
        _proto(lib.TVMFuncRegisterGlobal, ci, [cp, vp, ci])
        _proto(lib.TVMModGetFunction, ci, [vp, cp, ci, ctypes.POINTER(vp)])
        _proto(lib.TVMFuncCall, ci, [vp, ctypes.POINTER(TVMValue), ctypes.POINTER(ci), ci,
                                     ctypes.POINTER(TVMValue), ctypes.POINTER(ci)])
        _proto(lib.TVMFuncFree, ci, [vp])
        _proto(lib.TVMModFree, ci, [vp])
        _proto(lib.TVMPlatformInitialize, ci, [])
        _proto(lib.TVMInitializeRuntime, ci, [])
        _proto(lib.UTVMLocalRegisterGlobals, ci, [])
        with self.lock:
            self._check_init(lib.TVMPlatformInitialize(), "TVMPlatformInitialize")
            self._check_init(lib.TVMInitializeRuntime(), "TVMInitializeRuntime")
            self._check_init(lib.UTVMLocalRegisterGlobals(), "UTVMLocalRegisterGlobals")

    def _check_init(self, rc: int, what: str) -> None:
        if rc != 0:
            raise CRTError(f"{what} failed with error 0x{rc & 0xFFFFFFFF:x}: {self.last_error()}", code=rc)

    def last_error(self) -> str:
        raw = self.lib.TVMGetLastError()
        return raw.decode("utf-8", errors="replace") if raw else ""

    # --- the Backend interface (shared with utvm.rpc.Session) -------------------------------------------
    @property
    def device(self) -> Device:
        """Host memory: the local runtime's arrays are NDArrays on cpu(0)."""
        return cpu(0)

    def get_function(self, name: str, allow_missing: bool = False) -> PackedFunc | None:
        """The C global `name` (same as `get_global_func`)."""
        return self.get_global_func(name, allow_missing)

    def system_lib(self) -> Module:
        """runtime.SystemLib: the local runtime has no generated model code, so this raises the CRT's error."""
        sl = self.get_global_func("runtime.SystemLib")
        assert sl is not None
        return sl()

    def empty(self, shape: Sequence[int] | int, dtype: Any = "float32") -> NDArrayBase:
        from utvm.runtime import ndarray

        return ndarray.empty(shape, dtype, cpu(0))

    def array(self, source: Any, dtype: Any = None) -> NDArrayBase:
        from utvm.runtime import ndarray

        return ndarray.array(source, cpu(0), dtype)

    def _adopt_timer(self, timer: PackedFunc) -> None:
        if isinstance(timer, CPackedFunc) and timer.runtime is self:
            timer._own()

    def free_handle(self, handle: int) -> None:
        """TVMFuncFree(handle): releases a time evaluator; for other functions (static in the CRT) a check."""
        with self.lock:
            rc = self.lib.TVMFuncFree(handle)
            if rc != 0:
                raise CRTError(f"TVMFuncFree(0x{handle:08x}) failed: {self.last_error()}", code=rc)

    def _defer_free(self, handle: int) -> None:  # called by the garbage collector: no C call here
        self._pending_frees.append(handle)

    def _free_pending(self) -> None:
        while self._pending_frees:
            handle = self._pending_frees.pop()
            self.lib.TVMFuncFree(handle)  # nobody to report a failure to: the function was dropped

    # --- globals -----------------------------------------------------------------------------------------
    def get_global_func(self, name: str, allow_missing: bool = False) -> CPackedFunc | None:
        if not isinstance(name, str) or "\0" in name:
            raise ArgumentError(f"a global function name must be a str without NUL, got {name!r}")
        out = ctypes.c_void_p()
        with self.lock:
            rc = self.lib.TVMFuncGetGlobal(name.encode(), ctypes.byref(out))
        if rc != 0 or not out.value:
            if allow_missing:
                return None
            raise FunctionNotFoundError(f"C global function {name!r} is not registered in the local runtime")
        self._names[out.value] = name
        return self._wrap_handle(out.value, name)

    def list_global_func_names(self) -> list[str]:
        """Names in the C global registry, in registration order.

        The C API has no enumeration call, so this walks the global registry's handles (module index of
        a known global, function index 0, 1, ...) and names each with the CRT's TVMCrtHandle_FunctionName,
        an internal symbol of libcommon that the whole-archive link exports."""
        name_of = getattr(self.lib, "TVMCrtHandle_FunctionName", None)
        if name_of is None:
            raise CRTError("this CRT build does not export TVMCrtHandle_FunctionName; cannot list globals")
        name_of.restype, name_of.argtypes = ctypes.c_char_p, [ctypes.c_void_p]
        known = ctypes.c_void_p()
        names: list[str] = []
        with self.lock:
            if self.lib.TVMFuncGetGlobal(b"runtime.SystemLib", ctypes.byref(known)) != 0 or not known.value:
                raise CRTError(f"runtime.SystemLib is not registered: {self.last_error()}")
            module_bits = known.value & 0xFFFF0000
            for index in range(0x7FFF):
                raw = name_of(module_bits | 0x8000 | index)
                if raw is None or raw == b"?":
                    break
                names.append(raw.decode("utf-8", errors="replace"))
        return names

    def register_func(self, name: str, func: Callable[..., Any], override: bool = False) -> PackedFunc:
        """Make the Python callable `func` the C global `name`; returns its PackedFunc."""
        if not isinstance(name, str) or not name or "\0" in name:
            raise ArgumentError(f"a global function name must be a non-empty str without NUL, got {name!r}")
        if not callable(func):
            raise ArgumentError(f"register_func({name!r}): expected a callable, got {type(func).__name__}")
        pf = func if isinstance(func, PackedFunc) else PackedFunc(func, name)
        with self.lock:
            handle = self._register_python(name, pf, override)
            # an override keeps the handle: forget whichever callable it used to stand for
            for key in [k for k, h in self._handle_by_py.items() if h == handle]:
                del self._handle_by_py[key]
            self._handle_by_py.setdefault(_callable_key(pf), handle)
        return pf

    def _register_python(self, name: str, pf: PackedFunc, override: bool) -> int:
        cb = TVMBackendPackedCFunc(self._trampoline(pf))
        with self.lock:
            self._callbacks.append((cb, pf))
            fptr = ctypes.cast(cb, ctypes.c_void_p)
            rc = self.lib.TVMFuncRegisterGlobal(name.encode(), fptr, int(override))
            if rc != 0:
                raise CRTError(f"registering {name!r} as a C global failed: {self.last_error()}", code=rc)
            out = ctypes.c_void_p()
            rc = self.lib.TVMFuncGetGlobal(name.encode(), ctypes.byref(out))
            if rc != 0 or not out.value:
                raise CRTError(f"{name!r} was registered but TVMFuncGetGlobal cannot find it: "
                               f"{self.last_error()}", code=rc)
        self._py_by_handle[out.value] = pf
        self._names[out.value] = name
        return out.value

    def _python_handle(self, pf: PackedFunc) -> int:
        """A C handle for a Python function passed as an argument: the handle it was registered under, or
        a new anonymous global. Each distinct callable is registered once (the C registry cannot forget a
        name, so a program that makes endless new lambdas for C will eventually fill it)."""
        key = _callable_key(pf)
        with self.lock:
            handle = self._handle_by_py.get(key)
            if handle is None:
                self._anonymous += 1
                name = f"utvm.py.{self._anonymous}.{pf.name}"[:200]
                handle = self._register_python(name, pf, override=False)
                self._handle_by_py[key] = handle
        return handle

    def _wrap_handle(self, handle: int, name: str | None = None) -> PackedFunc:
        py = self._py_by_handle.get(handle)
        if py is not None:
            return py
        return CPackedFunc(self, handle, name or self._names.get(handle) or f"<C function 0x{handle:08x}>")

    # --- calls -------------------------------------------------------------------------------------------
    def call(self, handle: int, name: str, args: list[tuple[TypeCode, Any]]) -> Any:
        n = len(args)
        values = (TVMValue * max(n, 1))()
        codes = (ctypes.c_int * max(n, 1))()
        keep: list[Any] = []
        for i, (code, value) in enumerate(args):
            codes[i] = self._encode(name, f"argument {i}", code, value, values[i], keep)
        ret = TVMValue()
        ret_code = ctypes.c_int(int(TypeCode.NULL))
        with self.lock:
            if self._pending_frees:
                self._free_pending()
            tls = self._tls
            if tls.depth == 0:
                tls.error = None
            tls.depth += 1
            try:
                rc = self.lib.TVMFuncCall(handle, values, codes, n, ctypes.byref(ret), ctypes.byref(ret_code))
            finally:
                tls.depth -= 1
            if rc != 0:
                raise self._error(name, rc)
            return self._decode(name, ret, ret_code.value)

    def _error(self, name: str, rc: int) -> BaseException:
        raw = self.lib.TVMGetLastError() or b""
        text = raw.decode("utf-8", errors="replace")
        pending, self._tls.error = self._tls.error, None
        cause: BaseException | None = None
        if pending is not None:
            cause, full = pending
            if not isinstance(cause, Exception):  # KeyboardInterrupt, SystemExit: re-raise as they are
                return cause
            if raw and full.encode("utf-8", errors="replace").startswith(raw):
                text = full  # the C side kept the Python message (maybe truncated): show all of it
        msg = text if name in text else f"{name}: {text or f'failed with error 0x{rc & 0xFFFFFFFF:x}'}"
        err_type = CRTArgumentError if rc in _ARGUMENT_ERRORS else CRTError
        err = err_type(msg, code=rc)
        err.__cause__ = cause
        return err

    def _trampoline(self, pf: PackedFunc) -> Callable[..., int]:
        holder: list[Any] = []  # the last return value's buffers, alive until C has read them

        def trampoline(args: Any, type_codes: Any, num_args: int, out_value: Any, out_code: Any,
                       resource_handle: Any) -> int:
            try:
                pyargs = [self._decode(pf.name, args[i], type_codes[i]) for i in range(num_args)]
                result = convert_return(pf.name, pf(*pyargs))
                got = classify(result)
                assert got is not None  # convert_return checked it
                keep: list[Any] = []
                out_code[0] = self._encode(pf.name, "return value", got[0], got[1], out_value[0], keep)
                holder[:] = keep
                return 0
            except BaseException as exc:  # noqa: BLE001 - every failure must become a C error
                full = f"Python function {pf.name!r} raised {type(exc).__name__}: {exc}"
                self._tls.error = (exc, full)
                self.lib.TVMAPISetLastError(full.encode("utf-8", errors="replace"))
                return -1

        return trampoline

    # --- value conversion --------------------------------------------------------------------------------
    def _encode(self, name: str, where: str, code: TypeCode, value: Any, slot: TVMValue,
                keep: list[Any]) -> int:
        if code == TypeCode.INT:
            slot.v_int64 = value
        elif code == TypeCode.FLOAT:
            slot.v_float64 = value
        elif code == TypeCode.NULL:
            slot.v_handle = None
        elif code == TypeCode.STR:
            try:
                buf = ctypes.create_string_buffer(value.encode("utf-8"))
            except UnicodeEncodeError as exc:
                raise ArgumentError(f"{name}: {where} is a str that is not valid UTF-8 ({exc.reason} at "
                                    f"index {exc.start})") from None
            keep.append(buf)
            slot.v_str = ctypes.addressof(buf)
        elif code == TypeCode.BYTES:
            buf = ctypes.create_string_buffer(value, max(len(value), 1))
            arr = TVMByteArray(ctypes.addressof(buf), len(value))
            keep += [buf, arr]
            slot.v_handle = ctypes.addressof(arr)
        elif code == TypeCode.DATA_TYPE:
            slot.v_type = value.to_dl()
        elif code == TypeCode.DEVICE:
            slot.v_device = value.to_dl()
        elif code == TypeCode.DLTENSOR_HANDLE:
            slot.v_handle = self._tensor_address(name, where, value, keep)
        elif code == TypeCode.PACKED_FUNC_HANDLE:
            if isinstance(value, CPackedFunc):
                if value.runtime is not self:
                    raise ArgumentError(f"{name}: {where} is a function of another runtime")
                slot.v_handle = value.handle
            else:
                slot.v_handle = self._python_handle(value)
        elif code == TypeCode.MODULE_HANDLE:
            if not isinstance(value, LocalModule):
                raise ArgumentError(f"{name}: {where} is a {type(value).__name__}; C functions of the local "
                                    "runtime take only modules of the local runtime")
            slot.v_handle = value.handle
        elif code == TypeCode.OPAQUE_HANDLE:
            slot.v_handle = value.value
        else:  # pragma: no cover - classify() never yields other codes
            raise ArgumentError(f"{name}: {where} has type code {int(code)}, which the local runtime cannot "
                                "pass")
        return int(code)

    @staticmethod
    def _tensor_address(name: str, where: str, value: Any, keep: list[Any]) -> int:
        from utvm.runtime.capi import DLTensor

        if isinstance(value, DLTensor):
            keep.append(value)
            return ctypes.addressof(value)
        if isinstance(value, ctypes._Pointer):
            keep.append(value)
            return ctypes.cast(value, ctypes.c_void_p).value or 0
        from utvm.runtime.ndarray import NDArray

        if not isinstance(value, NDArray):
            raise ArgumentError(f"{name}: {where} is a {type(value).__name__} (an array of another backend, "
                                f"{value.device} memory there); the local runtime takes host NDArrays: "
                                "copy it with utvm.nd.array(...)")
        if value.freed:
            raise ArgumentError(f"{name}: {where} is an array that was freed")
        if value.device.device_type not in (DLDeviceType.CPU, DLDeviceType.CUDA_HOST):
            raise ArgumentError(f"{name}: {where} is an array on {value.device}; the local runtime takes "
                                "host (cpu) arrays")
        ptr = value.handle
        keep += [value, ptr]
        return ctypes.cast(ptr, ctypes.c_void_p).value or 0

    def _decode(self, name: str, value: TVMValue, code: int) -> Any:
        if code == TypeCode.INT:
            return int(value.v_int64)
        if code == TypeCode.UINT:
            return int(value.v_int64) & 0xFFFFFFFFFFFFFFFF
        if code == TypeCode.FLOAT:
            return float(value.v_float64)
        if code == TypeCode.NULL:
            return None
        if code == TypeCode.OPAQUE_HANDLE:
            return ctypes.c_void_p(value.v_handle)
        if code == TypeCode.DATA_TYPE:
            return DataType.from_dl(value.v_type)
        if code == TypeCode.DEVICE:
            return Device.from_dl(value.v_device)
        if code == TypeCode.STR:
            if not value.v_str:
                raise CRTError(f"{name}: got a NULL string (type code {code})")
            return ctypes.string_at(value.v_str).decode("utf-8", errors="replace")
        if code == TypeCode.BYTES:
            if not value.v_handle:
                raise CRTError(f"{name}: got a NULL byte array (type code {code})")
            arr = TVMByteArray.from_address(value.v_handle)
            return ctypes.string_at(arr.data, arr.size) if arr.size else b""
        if code in (TypeCode.DLTENSOR_HANDLE, TypeCode.NDARRAY_HANDLE):
            from utvm.runtime.ndarray import from_dltensor

            return from_dltensor(value.v_handle or 0)  # borrowed: valid while the C side keeps it
        if code == TypeCode.PACKED_FUNC_HANDLE:
            handle = value.v_handle or 0
            if not handle:
                return None
            return self._wrap_handle(handle)
        if code == TypeCode.MODULE_HANDLE:
            return LocalModule(self, value.v_handle or 0)
        raise CRTError(f"{name}: the local runtime cannot convert type code {code} to Python")


def _callable_key(pf: PackedFunc) -> Any:
    """What identifies a Python function for registration: the wrapped callable of a plain PackedFunc
    (so passing `f` twice, or `f` after registering it, reuses one C global), else the PackedFunc."""
    inner = pf._func if type(pf) is PackedFunc else None
    key = inner if inner is not None else pf
    try:
        hash(key)
    except TypeError:
        return ("id", id(key))  # unhashable callable: identity (it is kept alive by the registration)
    return key


def _proto(fn: Any, restype: Any, argtypes: list[Any]) -> None:
    fn.restype = restype
    fn.argtypes = argtypes


class CPackedFunc(PackedFunc):
    """A C function of the local runtime, called through TVMFuncCall. One that owns its handle (a time
    evaluator) releases it with TVMFuncFree on `free()` or when collected."""

    def __init__(self, runtime: LocalRuntime, handle: int, name: str) -> None:
        super().__init__(None, name)
        self.runtime = runtime
        self.handle = int(handle)
        self._freed = False
        self._finalizer: weakref.finalize | None = None

    def _own(self) -> None:
        if self._finalizer is None:
            self._finalizer = weakref.finalize(self, self.runtime._defer_free, self.handle)

    def _invoke(self, args: list[tuple[TypeCode, Any]]) -> Any:
        if self._freed:
            raise ArgumentError(f"{self!r} was freed")
        return self.runtime.call(self.handle, self._name, args)

    def free(self) -> None:
        """Release an owned handle now (TVMFuncFree); a no-op for a function that owns nothing."""
        if self._finalizer is not None and not self._freed:
            self._freed = True
            self._finalizer.detach()
            self.runtime.free_handle(self.handle)

    def __repr__(self) -> str:
        return f"<CPackedFunc {self._name!r} handle=0x{self.handle:08x}>"


class LocalModule(Module):
    """A CRT module (a TVMModule registered in the local runtime), named by its module handle."""

    type_key = "crt"

    def __init__(self, runtime: LocalRuntime, handle: int) -> None:
        self.runtime = runtime
        self.handle = int(handle)

    def _get_function(self, name: str, query_imports: bool) -> PackedFunc | None:
        if "\0" in name:
            return None
        out = ctypes.c_void_p()
        with self.runtime.lock:
            rc = self.runtime.lib.TVMModGetFunction(self.handle, name.encode(), int(query_imports),
                                                    ctypes.byref(out))
        if rc != 0 or not out.value:
            return None
        self.runtime._names.setdefault(out.value, name)
        return self.runtime._wrap_handle(out.value, name)

    def _not_found(self, name: str) -> str:
        return f"CRT module 0x{self.handle:08x} has no function {name!r}"

    def __repr__(self) -> str:
        return f"<LocalModule handle=0x{self.handle:08x}>"


# --- the process-wide instance --------------------------------------------------------------------------
_RUNTIME: LocalRuntime | None = None
_LOAD_LOCK = threading.Lock()


def load(progress: Progress | None = None) -> LocalRuntime:
    """Build if needed, load and initialize the local runtime (once per process)."""
    global _RUNTIME
    with _LOAD_LOCK:
        if _RUNTIME is None:
            path = build(progress)
            if progress:
                progress(f"loading {path.name} and calling TVMPlatformInitialize, TVMInitializeRuntime")
            _RUNTIME = LocalRuntime(path)
        return _RUNTIME


def get_global_func(name: str, allow_missing: bool = False) -> PackedFunc | None:
    """A C global of the local runtime as a PackedFunc; FunctionNotFoundError names an unknown one."""
    return load().get_global_func(name, allow_missing)


def list_global_func_names() -> list[str]:
    """Names of the C globals of the local runtime, in registration order."""
    return load().list_global_func_names()


def register_func(name: str, f: Callable[..., Any] | None = None, override: bool = False) -> Any:
    """Register a Python callable as a C global of the local runtime, so C code can TVMFuncCall it.
    `register_func("n", f)` or `@register_func("n")`; returns `f` unchanged."""
    if f is not None:
        load().register_func(name, f, override)
        return f

    def decorator(func: F) -> F:
        load().register_func(name, func, override)
        return func

    return decorator


def system_lib() -> Module:
    """The system library (runtime.SystemLib). The local runtime has none: this raises the CRT's error."""
    sl = get_global_func("runtime.SystemLib")
    assert sl is not None
    return sl()
