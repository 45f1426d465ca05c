"""Run generated code on the host: the model + the CRT built as a shared library, called with ctypes.

    model = LocalModel(compiled, opt="-O0")
    outputs = model.run([x])            # through the model's own entry point, in its convention
    outputs = model.run_system_lib([x]) # through runtime.SystemLib + TVMModGetFunction + TVMFuncCall

`run` uses the convention the model was compiled for: `tvmgen_<m>_run(&inputs, &outputs[, &context])`
for the C interface (also `run_model_descriptor`, which calls the `TVMModel` entry point the way
TVMExecute does), the packed `tvmgen_<m>_run` over DLTensors otherwise. The library is linked from the
generated sources and the CRT's common, memory and host libraries (whole, so the CRT API is callable),
compiled with the strict warning flags, cached by content hash (`utvm.support.cc.cached_build`).
"""

from __future__ import annotations

import ctypes
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from utvm.compiler.driver import CompiledModel
from utvm.compiler.kernels import DL_TYPES
from utvm.errors import ArgumentError, CRTError
from utvm.runtime.capi import DLDataType, DLDevice, DLTensor, TVMValue
from utvm.runtime.typecodes import TypeCode
from utvm.support import cc

CRT_LIBS = ("common", "memory", "host")
LIB_NAME = "libtvmgen_model.so"
_lock = threading.Lock()


def host_crt_config_dir() -> Path:
    return cc.crt_dir() / "host"


def crt_pic_libs(compiler: str = "gcc", cflags: Sequence[str] = ()) -> dict[str, Path]:
    """The CRT libraries for the host, position-independent, built once per CRT content (cc.cached_crt_libs)."""
    return cc.cached_crt_libs(host_crt_config_dir(), cc=compiler, cflags=("-fPIC", *cflags), libs=CRT_LIBS)


def build_shared(compiled: CompiledModel, opt: str = "-O2", cflags: Sequence[str] = (),
                 compiler: str = "gcc") -> Path:
    """Compile the model's sources with -std=c99 -Wall -Wextra -Werror -pedantic + `opt` into a .so."""
    libs = crt_pic_libs(compiler)
    flags = (*cc.WARNING_FLAGS, opt, "-g", *cflags)
    with tempfile.TemporaryDirectory(prefix="utvm-model-") as tmp:
        srcs, inc = compiled.write_sources(Path(tmp))

        def builder(out: Path) -> Path:
            whole = ["-Wl,--whole-archive", *(str(libs[n]) for n in CRT_LIBS), "-Wl,--no-whole-archive", "-lm"]
            return cc.compile_link(srcs, out / LIB_NAME, include_dirs=(inc, cc.crt_dir() / "include"),
                                   cflags=flags, ldflags=whole, shared=True, cc=compiler)

        key = [compiler, cc.compiler_version(compiler), *flags, str(libs["common"])]
        return cc.cached_build([Path(tmp), *libs.values()], key, LIB_NAME, builder)


def _dl_tensor(arr: np.ndarray, shape_store: list) -> DLTensor:
    code, bits = DL_TYPES[str(arr.dtype)]
    shape = (ctypes.c_int64 * max(arr.ndim, 1))(*arr.shape)
    shape_store.append(shape)
    return DLTensor(arr.ctypes.data_as(ctypes.c_void_p), DLDevice(1, 0), arr.ndim, DLDataType(code, bits, 1),
                    ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64)), None, 0)


def aligned_empty(nbytes: int, alignment: int = 16) -> np.ndarray:
    """A uint8 buffer of `nbytes` whose address is a multiple of `alignment`."""
    raw = np.zeros(nbytes + alignment, dtype=np.uint8)
    off = (-raw.ctypes.data) % alignment
    return raw[off:off + nbytes]


class TVMModelStruct(ctypes.Structure):
    """ctypes mirror of TVMModel (tvm/runtime/crt/tvm_micro_backend.h)."""

    _fields_ = [
        ("version", ctypes.c_uint32),
        ("name", ctypes.c_char_p),
        ("num_input_tensors", ctypes.c_uint32),
        ("num_output_tensors", ctypes.c_uint32),
        ("num_workspaces", ctypes.c_uint32),
        ("workspace_size", ctypes.POINTER(ctypes.c_size_t)),
        ("workspace_from_context", ctypes.c_uint32),
        ("entrypoint", ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)),
    ]


class TVMContextStruct(ctypes.Structure):
    """ctypes mirror of TVMContext (tvm/runtime/crt/tvm_micro_backend.h)."""

    _fields_ = [("workspace", ctypes.c_void_p), ("params", ctypes.c_void_p), ("device", ctypes.c_void_p)]


class LocalModel:
    """A compiled model loaded into this process (with --params external, running on its own blob)."""

    def __init__(self, compiled: CompiledModel, opt: str = "-O2", cflags: Sequence[str] = (),
                 compiler: str = "gcc") -> None:
        self.compiled = compiled
        self.path = build_shared(compiled, opt, cflags, compiler)
        self.lib = ctypes.CDLL(str(self.path))
        self.lib.TVMGetLastError.restype = ctypes.c_char_p
        self._runtime_ready = False
        # --params external: the model's blob, 16-byte aligned, which the runs' contexts point to (and, with the
        # packed interface, installed in the model's own context)
        self._params: np.ndarray | None = None
        if compiled.params_blob is not None:
            self._params = aligned_empty(len(compiled.params_blob))
            self._params[:] = np.frombuffer(compiled.params_blob, np.uint8)
            if compiled.options.interface_api == "packed":
                fn = getattr(self.lib, f"{compiled.prefix}_set_parameters")
                fn.restype = ctypes.c_int32
                err = fn(ctypes.c_void_p(self._params.ctypes.data), ctypes.c_size_t(self._params.size))
                if err:
                    raise CRTError(f"{compiled.prefix}_set_parameters refused the model's own blob: {err:#x}", err)

    # --- helpers ----------------------------------------------------------------------------------------
    def last_error(self) -> str:
        msg = self.lib.TVMGetLastError()
        return msg.decode(errors="replace") if msg else ""

    def _check_inputs(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        iface = self.compiled.interface
        if len(inputs) != len(iface.inputs):
            raise ArgumentError(f"model {self.compiled.model_name!r} takes {len(iface.inputs)} inputs, "
                                f"got {len(inputs)}")
        out = []
        for x, spec in zip(inputs, iface.inputs, strict=True):
            a = np.asarray(x, order="C")  # a scalar input stays 0-d
            if str(a.dtype) != spec.dtype or tuple(a.shape) != spec.shape:
                raise ArgumentError(f"input {spec.name!r} must be {spec.dtype}{list(spec.shape)}, "
                                    f"got {a.dtype}{list(a.shape)}")
            out.append(a.copy())
        return out

    def _new_outputs(self) -> list[np.ndarray]:
        return [np.zeros(o.shape, dtype=o.dtype) for o in self.compiled.interface.outputs]

    def _structs(self, ins: Sequence[np.ndarray], outs: Sequence[np.ndarray]) -> tuple[ctypes.Structure, ...]:
        iface = self.compiled.interface

        def make(xs: tuple, arrays: Sequence[np.ndarray]) -> ctypes.Structure:
            fields = [(x.field, ctypes.c_void_p) for x in xs] or [("unused_", ctypes.c_void_p)]
            cls = type("S", (ctypes.Structure,), {"_fields_": fields})
            return cls(*(a.ctypes.data for a in arrays))

        return make(iface.inputs, ins), make(iface.outputs, outs)

    def _context(self) -> tuple[ctypes.Structure, object]:
        """A TVMContext with fresh (zeroed) workspaces: one, or one per memory pool in pool order."""
        pools = self.compiled.plan.pools
        if pools:
            wss = [aligned_empty(max(u.used, 1), u.spec.align) for u in pools]
        else:
            wss = [aligned_empty(max(self.compiled.plan.workspace_bytes, 1))]
        ptrs = (ctypes.c_void_p * len(wss))(*(ws.ctypes.data for ws in wss))
        params = None if self._params is None else self._params.ctypes.data
        return TVMContextStruct(ctypes.cast(ptrs, ctypes.c_void_p), params, None), (wss, ptrs)

    def call_packed(self, name: str, arrays: Sequence[np.ndarray], type_codes: Sequence[int] | None = None) -> int:
        """Call a packed function of the library by symbol with DLTensors; returns its return code."""
        keep: list = []
        tensors = (DLTensor * max(len(arrays), 1))(*(_dl_tensor(a, keep) for a in arrays))
        values = (TVMValue * max(len(arrays), 1))()
        for i in range(len(arrays)):
            values[i].v_handle = ctypes.addressof(tensors[i])
        codes = (ctypes.c_int * max(len(arrays), 1))(
            *(type_codes if type_codes is not None else [TypeCode.DLTENSOR_HANDLE] * len(arrays)))
        rv, rc = TVMValue(), ctypes.c_int(0)
        fn = getattr(self.lib, name)
        fn.restype = ctypes.c_int
        with _lock:
            return int(fn(values, codes, len(arrays), ctypes.byref(rv), ctypes.byref(rc), None))

    # --- running ---------------------------------------------------------------------------------------------
    def run(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        ins, outs = self._check_inputs(inputs), self._new_outputs()
        opts = self.compiled.options
        if opts.interface_api == "c":
            s_in, s_out = self._structs(ins, outs)
            fn = getattr(self.lib, f"{self.compiled.prefix}_run")
            fn.restype = ctypes.c_int32
            with _lock:
                if opts.workspace == "user" or self._takes_context:
                    ctx, keep = self._context()
                    err = fn(ctypes.byref(s_in), ctypes.byref(s_out), ctypes.byref(ctx))
                    del keep
                else:
                    err = fn(ctypes.byref(s_in), ctypes.byref(s_out))
            if err:
                raise CRTError(f"{self.compiled.prefix}_run returned {err:#x}", err)
        else:
            err = self.call_packed(self.compiled.run_function, [*ins, *outs])
            if err:
                raise CRTError(f"{self.compiled.run_function} returned {err:#x}: {self.last_error()}", err)
        return outs

    @property
    def _takes_context(self) -> bool:
        """Interface c: whether tvmgen_<m>_run takes a context beyond the workspace's needs (its operators take
        the context: --params external, or a user operator that takes it)."""
        meta = self.compiled.metadata.get("modules", {}).get(self.compiled.model_name, {}).get("utvm", {})
        return bool(meta.get("operator_context"))

    def model_descriptor(self) -> TVMModelStruct:
        return TVMModelStruct.in_dll(self.lib, f"{self.compiled.prefix}_model")

    def run_model_descriptor(self, inputs: Sequence[np.ndarray], context: bool = True) -> list[np.ndarray]:
        """Interface c only: call the TVMModel's entry point as TVMExecute does."""
        ins, outs = self._check_inputs(inputs), self._new_outputs()
        model = self.model_descriptor()
        s_in, s_out = self._structs(ins, outs)
        ctx, keep = self._context() if context else (None, None)
        with _lock:
            err = model.entrypoint(ctypes.addressof(s_in), ctypes.addressof(s_out),
                                   ctypes.addressof(ctx) if ctx is not None else None)
        del keep
        if err:
            raise CRTError(f"{self.compiled.prefix}_model.entrypoint returned {err:#x}", err)
        return outs

    def _init_runtime(self) -> None:
        if self._runtime_ready:
            return
        for fn in ("TVMPlatformInitialize", "TVMInitializeRuntime"):
            err = getattr(self.lib, fn)()
            if err:
                raise CRTError(f"{fn} failed: {err:#x} {self.last_error()}", err)
        self._runtime_ready = True

    def system_lib_function(self, name: str) -> ctypes.c_void_p:
        """A function handle from runtime.SystemLib + TVMModGetFunction (the path RPC takes)."""
        with _lock:
            self._init_runtime()
            sys_lib = ctypes.c_void_p()
            if self.lib.TVMFuncGetGlobal(b"runtime.SystemLib", ctypes.byref(sys_lib)):
                raise CRTError(f"TVMFuncGetGlobal(runtime.SystemLib): {self.last_error()}")
            rv, rc = TVMValue(), ctypes.c_int(0)
            codes = (ctypes.c_int * 1)()
            args = (TVMValue * 1)()
            if self.lib.TVMFuncCall(sys_lib, args, codes, 0, ctypes.byref(rv), ctypes.byref(rc)):
                raise CRTError(f"runtime.SystemLib(): {self.last_error()}")
            if rc.value != TypeCode.MODULE_HANDLE:
                raise CRTError(f"runtime.SystemLib() returned type code {rc.value}, not a module")
            func = ctypes.c_void_p()
            err = self.lib.TVMModGetFunction(ctypes.c_void_p(rv.v_handle), name.encode(), 0, ctypes.byref(func))
            if err:
                raise CRTError(f"TVMModGetFunction({name!r}): {self.last_error()}", err)
            return func

    def call_system_lib(self, name: str, arrays: Sequence[np.ndarray]) -> None:
        func = self.system_lib_function(name)
        keep: list = []
        tensors = (DLTensor * max(len(arrays), 1))(*(_dl_tensor(a, keep) for a in arrays))
        values = (TVMValue * max(len(arrays), 1))()
        for i in range(len(arrays)):
            values[i].v_handle = ctypes.addressof(tensors[i])
        codes = (ctypes.c_int * max(len(arrays), 1))(*([TypeCode.DLTENSOR_HANDLE] * len(arrays)))
        rv, rc = TVMValue(), ctypes.c_int(0)
        with _lock:
            err = self.lib.TVMFuncCall(func, values, codes, len(arrays), ctypes.byref(rv), ctypes.byref(rc))
        if err:
            raise CRTError(f"{name} (via runtime.SystemLib): {self.last_error()}", err)

    def run_system_lib(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        ins, outs = self._check_inputs(inputs), self._new_outputs()
        self.call_system_lib(self.compiled.run_function, [*ins, *outs])
        return outs


def random_inputs(compiled: CompiledModel, rng: np.random.Generator) -> list[np.ndarray]:
    """One random input set in model order: integers over the dtype's range, floats ~ N(0, 1)."""
    out = []
    for x in compiled.interface.inputs:
        if x.dtype == "float32":
            out.append(rng.standard_normal(x.shape).astype(np.float32))
        elif x.dtype == "bool":
            out.append(rng.integers(0, 2, x.shape).astype(np.bool_))
        else:
            info = np.iinfo(x.dtype)
            out.append(rng.integers(info.min, info.max, x.shape, endpoint=True).astype(x.dtype))
    return out
