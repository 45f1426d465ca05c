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
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from utvm.errors import UsageError

#: the canonical op name of a user operator
OP = "custom"
#: inputs + outputs of one user operator: UTVM_CUSTOM_OP_MAX_TENSORS of <tvm/runtime/crt/utvm_custom_op.h>,
#: which sizes the generated code's arrays (tests/cli/test_custom_ops.py checks the two agree)
MAX_TENSORS = 16

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_IDENT_SUB = re.compile(r"[^A-Za-z0-9_]")
#: what an operator name may be (a TFLite custom_code, a builtin or ONNX op type): printable, no separators
_NAME = re.compile(r"[A-Za-z0-9_.\-/]{1,64}\Z")


@dataclass(frozen=True, slots=True)
class CBinding:
    """A user operator's C implementation: `symbol` defined in the C file `source`."""

    name: str
    source: Path
    symbol: str

    @property
    def file_name(self) -> str:
        """Its name among the generated sources (codegen/host/src/ of the MLF)."""
        stem = "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in self.source.stem)
        return f"utvm_user_{stem}.c"

    def text(self) -> str:
        """The C file's text; it must at least mention `symbol(` (a misspelt symbol is one line here, not a
        linker's diagnostics after the build)."""
        try:
            text = self.source.read_text()
        except OSError as exc:
            raise OSError(exc.errno, f"--custom-op {self.name}: cannot read {self.source}: "
                                     f"{exc.strerror or exc}") from exc
        except UnicodeDecodeError as exc:
            raise UsageError(f"--custom-op {self.name}: {self.source} is not UTF-8 text") from exc
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
_PY: dict[str, PyFunc] = {}


def _check_name(name: str, what: str) -> str:
    if not isinstance(name, str) or not _NAME.match(name):
        raise UsageError(f"{what}: operator name {name!r} must be 1-64 characters of letters, digits and _.-/")
    return name


def register(name: str, func: PyFunc) -> None:
    """Bind operator `name` to the numpy implementation `func(inputs, outputs, options)`."""
    _check_name(name, "custom op")
    if not callable(func):
        raise UsageError(f"custom op {name}: {func!r} is not callable")
    _PY[name] = func


def bind_c(name: str, source: str | Path, symbol: str) -> CBinding:
    """Bind operator `name` to the C function `symbol` of the file `source` (read when compiled)."""
    _check_name(name, "--custom-op")
    if not _IDENT.match(symbol):
        raise UsageError(f"--custom-op {name}: symbol {symbol!r} is not a C identifier")
    path = Path(source)
    if path.suffix != ".c":
        raise UsageError(f"--custom-op {name}: {path} is not a .c file")
    if not path.is_file():
        raise OSError(2, f"--custom-op {name}: {path}: no such file")
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
    return _PY.get(name)


@contextmanager
def bindings(c: Mapping[str, tuple[str | Path, str]] | None = None,
             py: Mapping[str, PyFunc] | None = None) -> Iterator[None]:
    """Bind `c` (name -> (file.c, symbol)) and `py` (name -> func) for the `with` block, then restore."""
    saved = dict(_C), dict(_PY)
    try:
        for name, (src, sym) in (c or {}).items():
            bind_c(name, src, sym)
        for name, fn in (py or {}).items():
            register(name, fn)
        yield
    finally:
        _C.clear()
        _C.update(saved[0])
        _PY.clear()
        _PY.update(saved[1])


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


def parse_py_spec(spec: str) -> str:
    """Load FILE.py and bind `NAME=FILE.py:func` (--custom-op-py); returns the name."""
    name, path, func = split_spec(spec, ".py", "func")
    if not path.is_file():
        raise OSError(2, f"--custom-op-py {name}: {path}: no such file")
    mod_spec = importlib.util.spec_from_file_location(f"utvm_custom_op_{_IDENT_SUB.sub('_', name)}", path)
    if mod_spec is None or mod_spec.loader is None:
        raise UsageError(f"--custom-op-py {name}: cannot load {path} as a Python module")
    module = importlib.util.module_from_spec(mod_spec)
    try:
        mod_spec.loader.exec_module(module)
    except Exception as exc:  # noqa: BLE001 - the user's module: any failure is reported as one line
        raise UsageError(f"--custom-op-py {name}: {path} failed to load: {type(exc).__name__}: {exc}") from exc
    fn = getattr(module, func, None)
    if not callable(fn):
        raise UsageError(f"--custom-op-py {name}: {path} defines no function {func!r}")
    register(name, fn)
    return name


_FROM_ARGS: set[str] = set()


def apply_args(c_specs: list[str] | None, py_specs: list[str] | None) -> None:
    """Bind the --custom-op and --custom-op-py values of a command line, replacing those of an earlier one
    run in the same process (bindings made through the Python API stay). Nothing given: nothing changes."""
    if not c_specs and not py_specs:
        return
    for name in _FROM_ARGS:
        unregister(name)
    _FROM_ARGS.clear()
    for spec in c_specs or ():
        _FROM_ARGS.add(parse_c_spec(spec).name)
    for spec in py_specs or ():
        _FROM_ARGS.add(parse_py_spec(spec))


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


def check_all_used(graph: Any) -> None:
    """A UsageError naming every bound operator `graph` does not run as a user operator: a name the model
    lacks, or one utvm implements itself (only CUSTOM codes and operators without a converter are bound),
    so a binding is never silently ignored."""
    used = {str(n.attrs.get("name")) for n in graph.nodes if n.op == OP}
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
    from utvm.errors import OracleError

    for i, node in enumerate(graph.nodes):
        name = str(node.attrs.get("name"))
        if node.op == OP and name not in _PY:
            raise OracleError(no_python_message(node.label(i), name))


def no_python_message(label: str, name: str) -> str:
    return (f"{label}: user operator {name!r} has no Python implementation for the reference interpreter "
            f"(--custom-op-py {name}=FILE.py:func, or utvm.custom_ops.register)")
