"""User operators: bind an operator utvm lacks to a C function (the device) and a numpy one (the reference).

    utvm run model.tflite --custom-op ClampScale=clamp.c:clamp_scale --custom-op-py ClampScale=clamp.py:clamp

An operator is bound by its name: a TFLite CUSTOM operator's custom_code ("ClampScale"), or the name of
any operator utvm has no converter for (a TFLite builtin such as "CUMSUM", an ONNX op type such as
"Hardmax"). A bound operator imports as the canonical op `custom` (utvm.ops.custom) with attributes `name`,
`options` (the operator's option bytes, hex: a CUSTOM op's custom_options, raw) and `outputs` (each
output's shape and dtype, from the model's tensors).

- C (`bind_c`, `--custom-op NAME=FILE.c:symbol`): the generated code calls `symbol` with the signature of
  <tvm/runtime/crt/utvm_custom_op.h> (docs/custom_ops.md). FILE.c is compiled into every firmware and
  copied into the Model Library Format as codegen/host/src/utvm_user_<stem>.c.
- Python (`register`, `--custom-op-py NAME=FILE.py:func`): the reference interpreter (`utvm.ir.run_reference`,
  `utvm run --check`) calls `func(inputs, outputs, options)` with the same view as the C function: lists
  of `CustomTensor` (`data` an ndarray; the outputs' are zero-filled, to fill in place), the option bytes;
  it returns None or 0 for success, another integer for an error.

Bindings are process-wide (like a registry of kernels); `bindings(c=..., py=...)` binds for a `with`
block only, which is what the Python API's `custom_ops=` arguments use.

User Python runs inside the reference interpreter's error contract (docs/custom_ops.md, "Checking"): a twin
that raises (SystemExit and GeneratorExit included), writes NaN into an integer output, writes an input or
returns or leaves the wrong thing is an OracleError naming the operator and the twin. The import of a file and
every call run as user code (utvm.support.user_python.guarded): what they print is escaped on stderr, os._exit
and the like raise instead of ending utvm, and the interpreter state they change is put back. Under `time_limit(S)`
(what `utvm run --timeout S` sets) every call runs in a forked child process of its own, which is killed,
with everything it started, when it has not answered within S seconds: a twin that loops, crashes the
interpreter or calls os._exit is one OracleError, never a hang or the end of utvm. A --custom-op-py file is
imported once per process (`parse_py_spec` keeps the module of each unchanged file).
"""

from __future__ import annotations

import contextvars
import errno
import hashlib
import importlib.util
import inspect
import math
import os
import re
import selectors
import signal
import stat
import struct
import sys
import time
import types
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from utvm.errors import OracleError, UsageError
from utvm.support import user_python

#: the canonical op name of a user operator
OP = "custom"
#: inputs + outputs of one user operator: UTVM_CUSTOM_OP_MAX_TENSORS of <tvm/runtime/crt/utvm_custom_op.h>,
#: which sizes the generated code's arrays (tests/cli/test_custom_ops.py checks the two agree)
MAX_TENSORS = 16

#: the prefix of a user operator's C file among the generated sources (`CBinding.file_name`): platforms compile
#: these files with the user-code flags (utvm.platform.USER_CODE_FLAGS), as they do --extra-source files
USER_SOURCE_PREFIX = "utvm_user_"
#: a source stem longer than this is shortened to its first characters and a hash of the whole (an MLF member
#: name, a firmware project's file, a cache file: every file system takes it, `utvm.mlf.load` and tar read it)
MAX_STEM_CHARS = 64
#: a user operator's C file goes into the MLF whole: at most this many bytes (the MLF reader takes 512 MiB)
MAX_SOURCE_BYTES = 64 << 20

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_IDENT_SUB = re.compile(r"[^A-Za-z0-9_]")
#: what an operator name may be (a TFLite custom_code, a builtin or ONNX op type): printable, no separators
_NAME = re.compile(r"[A-Za-z0-9_.\-/]{1,64}\Z")


def safe_stem(raw: str) -> str:
    """A file stem every file system, tar and make take: each character other than an ASCII letter, digit or
    _ made `_`, and a stem longer than MAX_STEM_CHARS cut to 48 characters + `_` + 12 hex digits of the
    SHA-256 of the whole (the same stem, the same result)."""
    stem = "".join(ch if ch.isascii() and (ch.isalnum() or ch == "_") else "_" for ch in raw)
    if len(stem) > MAX_STEM_CHARS:
        digest = hashlib.sha256(raw.encode("utf-8", "surrogateescape")).hexdigest()[:12]
        stem = f"{stem[:48]}_{digest}"
    return stem


def user_file_name(source: str | Path) -> str:
    """The name of the user's C file `source` among the generated sources: `utvm_user_<safe_stem>.c`."""
    return f"{USER_SOURCE_PREFIX}{safe_stem(Path(source).stem)}.c"


def is_user_source(name: str | Path) -> bool:
    """Whether a generated source's file name is a user operator's C file (`user_file_name`)."""
    n = Path(name).name
    return n.startswith(USER_SOURCE_PREFIX) and n.endswith(".c")


@dataclass(frozen=True, slots=True)
class CBinding:
    """A user operator's C implementation: `symbol` defined in the C file `source`."""

    name: str
    source: Path
    symbol: str

    @property
    def file_name(self) -> str:
        """Its name among the generated sources (codegen/host/src/ of the MLF): user_file_name."""
        return user_file_name(self.source)

    def text(self) -> str:
        """The C file's text; it must at least mention `symbol(` (a misspelt symbol is one line here, not a
        linker's diagnostics after the build). It goes into the MLF as text: UTF-8 only."""
        size = _check_regular(self.source, f"--custom-op {self.name}").st_size
        if size > MAX_SOURCE_BYTES:
            raise UsageError(f"--custom-op {self.name}: {self.source} holds {size:,} bytes (at most "
                             f"{MAX_SOURCE_BYTES:,}: it goes into the Model Library Format)")
        try:
            data = self.source.read_bytes()
        except OSError as exc:
            raise OSError(exc.errno, f"--custom-op {self.name}: cannot read {self.source}: "
                                     f"{exc.strerror or exc}") from exc
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise UsageError(f"--custom-op {self.name}: {self.source} is not UTF-8 text (byte "
                             f"{data[exc.start]:#04x} at offset {exc.start}); the file goes into the Model "
                             "Library Format as text") from exc
        if not re.search(rf"\b{self.symbol}\s*\(", text):
            raise UsageError(f"--custom-op {self.name}: {self.source} does not define the function "
                             f"{self.symbol!r}")
        return text


@dataclass(slots=True)
class CustomTensor:
    """One input or output of a user operator in the reference interpreter (the C struct's numpy twin)."""

    data: np.ndarray
    scale: float = 0.0  # 0.0: not quantized
    zero_point: int = 0


PyFunc = Callable[[list[CustomTensor], list[CustomTensor], bytes], Any]

_C: dict[str, CBinding] = {}
#: name -> (its Python implementation, where it comes from for messages: "twin.py:func", or the function's name)
_PY: dict[str, tuple[PyFunc, str]] = {}


def _check_name(name: str, what: str) -> str:
    if not isinstance(name, str) or not _NAME.match(name):
        raise UsageError(f"{what}: operator name {name!r} must be 1-64 characters of letters, digits and _.-/")
    return name


def _check_regular(path: Path, what: str) -> os.stat_result:
    """The stat of `path`: OSError (status 8) when it does not exist or cannot be examined, UsageError when it
    is not a regular file (a FIFO would block the read, a directory or a device is no source)."""
    try:
        st = path.stat()
    except FileNotFoundError:
        raise OSError(errno.ENOENT, f"{what}: {path}: no such file") from None
    except OSError as exc:
        raise OSError(exc.errno, f"{what}: {path}: {exc.strerror or 'cannot be read'}") from exc
    if not stat.S_ISREG(st.st_mode):
        raise UsageError(f"{what}: {path} is not a regular file")
    return st


def _where(func: Any) -> str:
    name = getattr(func, "__qualname__", None) or getattr(func, "__name__", None)
    module = getattr(func, "__module__", None)
    if isinstance(name, str) and isinstance(module, str):
        return f"{module}.{name}"
    return name if isinstance(name, str) else type(func).__name__


def _not_plain(func: Any) -> str | None:
    """What `func` is when calling it would not run it (an async function, a generator function), else None."""
    if inspect.iscoroutinefunction(func):
        return "an async function (async def)"
    if inspect.isasyncgenfunction(func):
        return "an async generator function"
    if inspect.isgeneratorfunction(func):
        return "a generator function (it yields)"
    return None


def register(name: str, func: PyFunc, *, where: str | None = None) -> None:
    """Bind operator `name` to the numpy implementation `func(inputs, outputs, options)`; `where` says in
    messages where it comes from (default: the function's qualified name)."""
    _check_name(name, "custom op")
    if not callable(func):
        raise UsageError(f"custom op {name}: {type(func).__name__} object is not callable")
    where = where or _where(func)
    _bind_py(name, func, where, f"custom op {name}: {where}")


def _bind_py(name: str, func: PyFunc, where: str, what: str) -> None:
    """Bind the callable `func` (`what`: how a refusal names it), unless calling it would not run it."""
    kind = _not_plain(func)
    if kind:
        raise UsageError(f"{what} is {kind}; the twin is a plain function (def, not async def, no yield) that "
                         "fills its outputs and returns None or 0")
    _PY[name] = (func, where)


def bind_c(name: str, source: str | Path, symbol: str) -> CBinding:
    """Bind operator `name` to the C function `symbol` of the file `source` (read when compiled)."""
    _check_name(name, "--custom-op")
    if not _IDENT.match(symbol):
        raise UsageError(f"--custom-op {name}: symbol {symbol!r} is not a C identifier")
    path = Path(source)
    if path.suffix != ".c":
        raise UsageError(f"--custom-op {name}: {path} is not a .c file")
    _check_regular(path, f"--custom-op {name}")
    b = CBinding(name, path, symbol)
    _C[name] = b
    return b


def unregister(name: str) -> None:
    """Forget both bindings of `name`."""
    _C.pop(name, None)
    _PY.pop(name, None)


def is_bound(name: str) -> bool:
    return name in _C or name in _PY


def c_binding(name: str) -> CBinding | None:
    return _C.get(name)


def py_impl(name: str) -> PyFunc | None:
    bound = _PY.get(name)
    return bound[0] if bound else None


@contextmanager
def bindings(c: Mapping[str, tuple[str | Path, str]] | None = None,
             py: Mapping[str, PyFunc] | None = None) -> Iterator[None]:
    """Bind `c` (name -> (file.c, symbol)) and `py` (name -> func) for the `with` block, then restore."""
    saved_c, saved_py, saved_args = dict(_C), dict(_PY), set(_FROM_ARGS)
    try:
        for name, (src, sym) in (c or {}).items():
            bind_c(name, src, sym)
        for name, fn in (py or {}).items():
            register(name, fn)
        yield
    finally:
        _C.clear()
        _C.update(saved_c)
        _PY.clear()
        _PY.update(saved_py)
        _FROM_ARGS.clear()
        _FROM_ARGS.update(saved_args)


# --- command-line specs --------------------------------------------------------------------------------------

def split_spec(spec: str, ext: str, what: str) -> tuple[str, Path, str]:
    """(name, file, symbol) of `NAME=FILE<ext>:<what>`; UsageError naming the part that is wrong."""
    option = "--custom-op" if ext == ".c" else "--custom-op-py"
    name, eq, rest = spec.partition("=")
    file, colon, symbol = rest.rpartition(":")
    if not eq or not colon or not name or not file or not symbol:
        raise UsageError(f"{option} {spec[:80]!r}: expected NAME=FILE{ext}:{what}")
    _check_name(name, option)
    if not file.endswith(ext):
        raise UsageError(f"{option} {name}: {file[:80]!r} is not a {ext} file")
    if not _IDENT.match(symbol):
        raise UsageError(f"{option} {name}: {what} {symbol[:80]!r} is not an identifier")
    return name, Path(file), symbol


def parse_c_spec(spec: str) -> CBinding:
    """Bind `NAME=FILE.c:symbol` (--custom-op)."""
    return bind_c(*split_spec(spec, ".c", "symbol"))


#: the modules of --custom-op-py files, by (resolved path, inode, size, mtime): each unchanged file is executed
#: once per process, however many commands or operators name it
_MODULES: dict[tuple[str, int, int, int], ModuleType] = {}


def _load_module(name: str, path: Path) -> ModuleType:
    """The module of the --custom-op-py file `path` (executed on first use, as user code: `_as_user_code`).
    Whatever its code raises at import, SystemExit included, and any exit it attempts (os._exit, ...) is an
    OracleError (the reference interpreter's status: the user's Python failed); Ctrl-C stays Ctrl-C. What it
    prints goes to stderr, escaped, each line naming the operator (stdout may be the command's JSON)."""
    what = f"--custom-op-py {name}"
    st = _check_regular(path, what)
    key = (str(path.resolve()), st.st_ino, st.st_size, st.st_mtime_ns)
    if key in _MODULES:
        return _MODULES[key]
    mod_spec = importlib.util.spec_from_file_location(f"utvm_custom_op_{_IDENT_SUB.sub('_', name)}", path)
    if mod_spec is None or mod_spec.loader is None:
        raise UsageError(f"{what}: cannot load {path} as a Python module")
    module = importlib.util.module_from_spec(mod_spec)
    with _as_user_code(f"{name} ({path.name})", f"{what}: {path} failed to load:"):
        mod_spec.loader.exec_module(module)
    _MODULES[key] = module
    return module


def parse_py_spec(spec: str) -> str:
    """Load FILE.py (once per process: `_load_module`) and bind `NAME=FILE.py:func` (--custom-op-py);
    returns the name."""
    return _bind_py_file(*split_spec(spec, ".py", "func"))


def _bind_py_file(name: str, path: Path, func: str) -> str:
    module = _load_module(name, path)
    # a module's __getattr__, a callable's attributes: the user's code
    with _as_user_code(f"{name} ({path.name}:{func})", f"--custom-op-py {name}: looking up {func!r} in {path}",
                       UsageError):
        fn = getattr(module, func, None)
        if not callable(fn):
            raise UsageError(f"--custom-op-py {name}: {path} defines no function {func!r}")
        _bind_py(name, fn, f"{path.name}:{func}", f"--custom-op-py {name}: {func!r} of {path}")
    return name


_FROM_ARGS: set[str] = set()


def apply_args(c_specs: list[str] | None, py_specs: list[str] | None) -> None:
    """Bind the --custom-op and --custom-op-py values of a command line, replacing those of an earlier one
    run in the same process (bindings made through the Python API stay). Nothing given: nothing changes.
    An operator named twice by one option is a UsageError (never: the last one wins). Applying the same
    values again (a command binds before and while compiling) executes no Python file again (_load_module)."""
    if not c_specs and not py_specs:
        return
    c = [split_spec(spec, ".c", "symbol") for spec in c_specs or ()]
    py = [split_spec(spec, ".py", "func") for spec in py_specs or ()]
    for option, parts in (("--custom-op", c), ("--custom-op-py", py)):
        names = [name for name, _file, _symbol in parts]
        twice = next((name for i, name in enumerate(names) if name in names[:i]), None)
        if twice is not None:
            raise UsageError(f"{option} {twice} is given twice (one implementation per operator)")
    for name in _FROM_ARGS:
        unregister(name)
    _FROM_ARGS.clear()
    for name, file, symbol in c:
        _FROM_ARGS.add(bind_c(name, file, symbol).name)
    for name, file, func in py:
        _FROM_ARGS.add(_bind_py_file(name, file, func))


def user_sources(graph: Any) -> dict[str, str]:
    """The C files of the user operators `graph` uses (file name among the generated sources -> text)."""
    out: dict[str, str] = {}
    seen: dict[str, Path] = {}
    for node in graph.nodes:
        if node.op != OP:
            continue
        b = _C.get(str(node.attrs.get("name")))
        if b is None:
            continue  # the kernel refuses the node with a message naming the op
        fname = b.file_name
        if fname in seen and seen[fname].resolve() != b.source.resolve():
            raise UsageError(f"--custom-op: {seen[fname]} and {b.source} would both be {fname}; rename one")
        seen[fname] = b.source
        out[fname] = b.text()
    return out


def check_all_used(graph: Any, *more: Any) -> None:
    """A UsageError naming every bound operator `graph` (and the graphs `more`, all compiled with these
    bindings) does not run as a user operator: a name the model lacks, or one utvm implements itself (only
    CUSTOM codes and operators without a converter are bound), so a binding is never silently ignored."""
    used = {str(n.attrs.get("name")) for g in (graph, *more) for n in g.nodes if n.op == OP}
    unused = sorted((set(_C) | set(_PY)) - used)
    if unused:
        raise UsageError(f"--custom-op {', '.join(unused)}: the model has no such operator for a user "
                         "implementation (a TFLite CUSTOM code or an operator utvm has no converter for; "
                         "utvm's own operators cannot be replaced)")


def describe(graph: Any, packed: bool) -> list[dict[str, str]]:
    """metadata.json's record of the user operators `graph` uses (`modules.<m>.utvm.custom_ops`): name, the C
    function and the source file providing it, and how the generated code reaches it."""
    out = []
    for name in sorted({str(n.attrs.get("name")) for n in graph.nodes if n.op == OP}):
        b = _C.get(name)
        if b is None:
            continue
        call = (f"TVMBackendGetFuncFromEnv(\"{name}\") -> a packed wrapper of {b.symbol} in the operators' file"
                if packed else f"direct call of {b.symbol}")
        out.append({"name": name, "symbol": b.symbol, "source": b.file_name, "call": call,
                    "signature": "tvm/runtime/crt/utvm_custom_op.h"})
    return out


def check_reference(graph: Any) -> None:
    """OracleError naming the first user operator of `graph` the reference interpreter cannot run (no Python
    implementation bound)."""
    for i, node in enumerate(graph.nodes):
        name = str(node.attrs.get("name"))
        if node.op == OP and name not in _PY:
            raise OracleError(no_python_message(node.label(i), name))


def no_python_message(label: str, name: str) -> str:
    return (f"{label}: user operator {name!r} has no Python implementation for the reference interpreter "
            f"(--custom-op-py {name}=FILE.py:func, or utvm.custom_ops.register)")


# --- running a Python implementation (the reference interpreter's side) ---------------------------------------

_TIME_LIMIT: contextvars.ContextVar[float | None] = contextvars.ContextVar("utvm_custom_op_time_limit",
                                                                          default=None)
#: the answer of a twin's child process: b"K" + u64 length + the outputs' bytes, or b"E" + length + a message
_HEADER = struct.Struct("<cQ")
_MAX_MESSAGE_BYTES = 1 << 16
#: one wait of the parent at most (a time limit of 1e308 s still waits in steps a poll() takes)
_MAX_WAIT_S = 3600.0
#: how often the parent looks whether a child that closed its pipe has ended
_POLL_S = 0.01

InputSpec = tuple[np.ndarray, float, int]  # data, scale, zero point
OutputSpec = tuple[tuple[int, ...], str, float, int]  # shape, dtype, scale, zero point


@contextmanager
def time_limit(seconds: float | None) -> Iterator[None]:
    """Within the block every call of a Python implementation runs in a forked child process, stopped (with
    whatever it started) when it has not answered within `seconds` of wall-clock time: an OracleError
    naming the operator and the twin. `utvm run --timeout S` runs the command under time_limit(S). None:
    calls run in this process, unbounded (their failures are still OracleErrors)."""
    if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, int | float)
                                or not math.isfinite(seconds) or seconds <= 0):
        raise UsageError(f"custom op time limit {seconds!r}: expected a finite number of seconds > 0, or None")
    token = _TIME_LIMIT.set(None if seconds is None else float(seconds))
    try:
        yield
    finally:
        _TIME_LIMIT.reset(token)


def run_python(name: str, label: str, inputs: Sequence[InputSpec], outputs: Sequence[OutputSpec],
               options: bytes) -> list[np.ndarray]:
    """Call the Python implementation of user operator `name` (node `label`) as the C function would be
    called: read-only input tensors, zero-filled outputs to fill in place, the option bytes. Returns the
    outputs, checked against their declared shape and dtype. Every way the user's code can fail is an
    OracleError naming the node, the operator and the twin; under `time_limit` the call runs in a child
    process (see there)."""
    bound = _PY.get(name)
    if bound is None:
        raise OracleError(no_python_message(label, name))
    fn, where = bound
    what = f"{label}: the Python implementation of user operator {name!r} ({where})"
    who = f"{name} ({where})"
    limit = _TIME_LIMIT.get()
    if limit is None:
        return _call(fn, what, who, inputs, outputs, options)
    return _call_in_child(fn, what, who, inputs, outputs, options, limit)


_NEVER_EXITS = "(a twin returns; it never exits utvm)"


@contextmanager
def _as_user_code(who: str, failure: str, passes: type[BaseException] | tuple[type[BaseException], ...] = ()
                  ) -> Iterator[None]:
    """Run the block as user code (`user_python.guarded(who)`: its prints escaped on stderr, its exits refused,
    the interpreter's state put back). Whatever it raises, SystemExit and a refused exit included, is an
    OracleError `<failure> <what the code did>`; Ctrl-C and utvm's own errors `passes` (raised by utvm's code
    in the block) pass through."""
    try:
        with user_python.guarded(who):
            yield
    except KeyboardInterrupt:
        raise
    except passes:
        raise
    except BaseException as exc:  # noqa: BLE001 - the user's code: any failure, SystemExit too, is one line
        raise OracleError(f"{failure} {_describe_exception(exc, who)}") from None


def _describe_exception(exc: BaseException, who: str) -> str:
    """What the user's code did, for an error line: `raised ValueError: ...`, `called sys.exit(3) at f.py:4`.
    Its __str__ (and the like) is the user's code too: it runs guarded, and cannot end or break this."""
    try:
        with user_python.guarded(who):
            return _describe(exc)
    except KeyboardInterrupt:
        raise
    except BaseException:  # noqa: BLE001 - an exception whose description fails in every way
        return "raised an exception that cannot be described"


def _describe(exc: BaseException) -> str:
    """user_python.describe, with what it means for a twin."""
    text = user_python.describe(exc)
    if isinstance(exc, user_python.UserExit | SystemExit):
        return f"{text} {_NEVER_EXITS}"
    if isinstance(exc, RuntimeWarning) and "invalid value encountered in cast" in text:
        return "wrote NaN or an infinity into an integer output (numpy: invalid value encountered in cast)"
    if isinstance(exc, ValueError) and "read-only" in text:
        return f"{text} (the inputs are read only: write only the outputs)"
    if isinstance(exc, ValueError) and "NaN" in text and "integer" in text:
        return f"{text} (NaN written into an integer output)"
    return text


def _call(fn: PyFunc, what: str, who: str, inputs: Sequence[InputSpec], outputs: Sequence[OutputSpec],
          options: bytes) -> list[np.ndarray]:
    """run_python in this process: the call, and the checks that touch what it returned, run as user code
    (`_as_user_code`)."""
    originals = [np.asarray(a) for a, _scale, _zp in inputs]
    copies = [a.copy() for a in originals]
    for a in copies:
        a.flags.writeable = False
    ins = [CustomTensor(a, float(scale), int(zp)) for a, (_a, scale, zp) in zip(copies, inputs, strict=True)]
    outs = [CustomTensor(np.zeros(shape, dtype), float(scale), int(zp)) for shape, dtype, scale, zp in outputs]
    with _as_user_code(who, what, OracleError), warnings.catch_warnings():
        # numpy casting NaN or an infinity into an integer array writes garbage and warns: here an error
        warnings.filterwarnings("error", message="invalid value encountered in cast", category=RuntimeWarning)
        rc = fn(ins, outs, bytes(options))
        if isinstance(rc, types.CoroutineType | types.GeneratorType | types.AsyncGeneratorType):
            kind = type(rc).__name__
            if not isinstance(rc, types.AsyncGeneratorType):
                rc.close()  # so Python does not add "coroutine ... was never awaited" to the one line
            raise OracleError(f"{what} returned a {kind} (is it async def, or does it yield?); a twin is a "
                              "plain function that fills its outputs and returns None or 0")
        return _checked(what, rc, copies, originals, outs, outputs)


def _checked(what: str, rc: object, copies: list[np.ndarray], originals: list[np.ndarray], outs: list[Any],
             outputs: Sequence[OutputSpec]) -> list[np.ndarray]:
    if rc is not None:
        if isinstance(rc, bool | np.bool_) or not isinstance(rc, int | np.integer):
            raise OracleError(f"{what} returned a value of type {type(rc).__name__}; it returns None or 0 for "
                              "success, another integer for an error")
        value = int(rc)
        if value != 0:
            raise OracleError(f"{what} returned {user_python.value_text(value)} (an error)")
    for i, (a, b) in enumerate(zip(copies, originals, strict=True)):
        if a.tobytes() != b.tobytes():
            raise OracleError(f"{what} wrote its input {i}; the inputs are read only")
    if len(outs) != len(outputs) or not all(type(t) is CustomTensor for t in outs):
        raise OracleError(f"{what} changed the list of its {len(outputs)} output(s); fill each output's data in "
                          "place")
    results = []
    for i, (t, (shape, dtype, _scale, _zp)) in enumerate(zip(outs, outputs, strict=True)):
        data = t.data
        if not isinstance(data, np.ndarray):
            raise OracleError(f"{what} left output {i} as a {type(data).__name__}, not a numpy array of "
                              f"{dtype}{list(shape)}")
        if data.shape != tuple(shape) or data.dtype != np.dtype(dtype):
            raise OracleError(f"{what} left output {i} as {data.dtype}{list(data.shape)}; expected "
                              f"{dtype}{list(shape)}")
        results.append(np.array(data, dtype=data.dtype, order="C", copy=True))
    return results


def _call_in_child(fn: PyFunc, what: str, who: str, inputs: Sequence[InputSpec], outputs: Sequence[OutputSpec],
                   options: bytes, limit: float) -> list[np.ndarray]:
    """run_python in a forked child process of its own process group, killed (the group) unless it answers
    within `limit` seconds; the outputs come back over a pipe as raw bytes (nothing is unpickled)."""
    sizes = [int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize for shape, dtype, _s, _z in outputs]
    user_python.flush_std_streams()  # else the child would write our buffered output a second time
    r, w = os.pipe()
    parent = os.getpid()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # Python 3.12+: a fork while threads run
            pid = os.fork()
    except OSError as exc:
        os.close(r)
        os.close(w)
        raise OracleError(f"{what}: cannot start a process to run it in: {exc.strerror or exc}") from None
    if pid == 0:  # the child: never returns
        _child_main(r, w, parent, fn, what, who, inputs, outputs, options)
    os.close(w)
    try:
        try:
            os.setpgid(pid, pid)  # also done by the child: whichever runs first
        except OSError:
            pass
        payload = _await_answer(r, pid, limit, sum(sizes), what)
    finally:
        os.close(r)
        _stop_child(pid)
    results, offset = [], 0
    for (shape, dtype, _s, _z), size in zip(outputs, sizes, strict=True):
        results.append(np.frombuffer(payload, np.dtype(dtype), size // max(np.dtype(dtype).itemsize, 1),
                                     offset).reshape(shape).copy())
        offset += size
    return results


def _child_main(r: int, w: int, parent: int, fn: PyFunc, what: str, who: str, inputs: Sequence[InputSpec],
                outputs: Sequence[OutputSpec], options: bytes) -> None:
    code = 0
    try:
        os.close(r)
        try:
            os.setpgid(0, 0)  # its own group: killed as one, with whatever it starts; Ctrl-C reaches only utvm
        except OSError:
            pass
        _die_with(parent)
        import faulthandler

        faulthandler.disable()  # a crash of the twin is reported in the parent's one line, not dumped here
        try:  # what the twin writes below sys.stdout goes to stderr too: stdout may be the command's JSON
            os.dup2(2, 1)
        except OSError:
            pass
        try:
            results = _call(fn, what, who, inputs, outputs, options)
            body = b"".join(a.tobytes() for a in results)
            message = _HEADER.pack(b"K", len(body)) + body
        except BaseException as exc:  # noqa: BLE001 - an OracleError, or a KeyboardInterrupt the twin raised
            text = str(exc) if isinstance(exc, OracleError) else f"{what} {_describe_exception(exc, who)}"
            data = text.encode("utf-8", "backslashreplace")[:_MAX_MESSAGE_BYTES]
            message = _HEADER.pack(b"E", len(data)) + data
        user_python.flush_std_streams()
        view = memoryview(message)
        while view:
            view = view[os.write(w, view):]
    except BaseException:  # noqa: BLE001 - nothing may return into the parent's stack
        code = 70
    finally:
        user_python.REAL_EXIT(code)


def _die_with(parent: int) -> None:
    """Linux: this process is killed when utvm dies (SIGTERM, SIGKILL: no cleanup of ours runs then), so a
    twin that loops never outlives it. Elsewhere a no-op."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # utvm died before the prctl
        user_python.REAL_EXIT(70)


def _await_answer(r: int, pid: int, limit: float, expect: int, what: str) -> bytes:
    """The outputs' bytes the child sends on `r`; an OracleError for its error message, for no answer within
    `limit` seconds, or for an end without an answer (os._exit, a crash, a signal)."""
    deadline = time.monotonic() + limit
    buf = bytearray()
    need = _HEADER.size
    kind = b""
    with selectors.DefaultSelector() as sel:
        sel.register(r, selectors.EVENT_READ)
        while True:
            if not kind and len(buf) >= _HEADER.size:
                kind, length = _HEADER.unpack_from(buf)
                readable = (kind == b"K" and length == expect) or (kind == b"E" and length <= _MAX_MESSAGE_BYTES)
                if not readable:
                    raise OracleError(f"{what}: its process sent an answer utvm cannot read")
                need = _HEADER.size + length
            if kind and len(buf) >= need:
                break
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise OracleError(f"{what} did not return within {limit:g} s (--timeout); it was stopped")
            if not sel.select(min(remaining, _MAX_WAIT_S)):
                continue
            chunk = os.read(r, max(need - len(buf), 1 << 16))
            if not chunk:
                raise OracleError(f"{what} ended without returning ({_how_it_ended(pid, deadline)})")
            buf += chunk
    payload = bytes(buf[_HEADER.size:need])
    if kind == b"E":
        raise OracleError(payload.decode("utf-8", "replace"))
    return payload


def _how_it_ended(pid: int, deadline: float) -> str:
    """How the child that closed its pipe ended, waiting for its end until `deadline`; it is left unreaped
    (WNOWAIT), so its PID stays its own until `_stop_child`."""
    while True:
        try:
            ended = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return "its process is gone"
        if ended is not None:
            break
        if time.monotonic() >= deadline:
            return "it closed its answer pipe"
        time.sleep(_POLL_S)
    if ended.si_code == os.CLD_EXITED:
        return f"its process exited with status {ended.si_status} (os._exit?)"
    try:
        return f"its process was killed by {signal.Signals(ended.si_status).name}"
    except ValueError:
        return f"its process was killed by signal {ended.si_status}"


def _stop_child(pid: int) -> None:
    """Kill the child's process group (the child, and whatever it started) and reap the child."""
    for kill in (os.killpg, os.kill):  # (os.kill: if it never made its own group)
        try:
            kill(pid, signal.SIGKILL)
        except OSError:
            pass
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass
