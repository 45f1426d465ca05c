"""PackedFunc argument conversion, the process-wide registry and Python modules."""

from __future__ import annotations

import ctypes
import itertools
from collections.abc import Iterator

import numpy as np
import pytest

import utvm
from utvm.errors import ArgumentError, FunctionNotFoundError, RuntimeSystemError
from utvm.runtime import (
    DataType,
    Module,
    PackedFunc,
    PyModule,
    TypeCode,
    convert_arg,
    cpu,
    ext_dev,
    get_global_func,
    list_global_func_names,
    register_func,
    remove_global_func,
)
from utvm.runtime.capi import DLTensor

_ids = itertools.count()


@pytest.fixture
def fresh_name() -> Iterator[str]:
    """A global name unique to the test; unregistered afterwards."""
    name = f"test.packed_func.{next(_ids)}"
    yield name
    if get_global_func(name, allow_missing=True) is not None:
        remove_global_func(name)


# --- argument conversion ----------------------------------------------------------------------------------
def _noop() -> None:
    return None


SUPPORTED = [
    (None, TypeCode.NULL, None),
    (7, TypeCode.INT, 7),
    (True, TypeCode.INT, 1),
    (np.int8(-3), TypeCode.INT, -3),
    (np.uint64(5), TypeCode.INT, 5),
    (np.bool_(True), TypeCode.INT, 1),
    (-(2**63), TypeCode.INT, -(2**63)),
    (2.5, TypeCode.FLOAT, 2.5),
    (np.float32(0.5), TypeCode.FLOAT, 0.5),
    ("héllo", TypeCode.STR, "héllo"),
    (b"\x00\xff", TypeCode.BYTES, b"\x00\xff"),
    (bytearray(b"ab"), TypeCode.BYTES, b"ab"),
    (memoryview(b"cd"), TypeCode.BYTES, b"cd"),
    (DataType("int8"), TypeCode.DATA_TYPE, DataType("int8")),
    (ext_dev(1), TypeCode.DEVICE, ext_dev(1)),
    (ctypes.c_void_p(1234), TypeCode.OPAQUE_HANDLE, None),
    (DLTensor(), TypeCode.DLTENSOR_HANDLE, None),
]


@pytest.mark.parametrize(("value", "code", "normalized"), SUPPORTED,
                         ids=[type(v[0]).__name__ for v in SUPPORTED])
def test_convert_supported(value: object, code: TypeCode, normalized: object) -> None:
    got_code, got = convert_arg("f", 0, value)
    assert got_code == code
    if normalized is not None:
        assert got == normalized and type(got) is type(normalized)


def test_convert_functions_and_modules() -> None:
    pf = PackedFunc(_noop)
    assert convert_arg("f", 0, pf) == (TypeCode.PACKED_FUNC_HANDLE, pf)
    code, wrapped = convert_arg("f", 0, _noop)  # a plain function becomes a PackedFunc
    assert code == TypeCode.PACKED_FUNC_HANDLE and isinstance(wrapped, PackedFunc) and wrapped.name == "_noop"
    mod = PyModule("m", {})
    assert convert_arg("f", 0, mod) == (TypeCode.MODULE_HANDLE, mod)


@pytest.mark.parametrize(("value", "type_name"), [
    ([1, 2], "list"), ((1,), "tuple"), ({"a": 1}, "dict"), (object(), "object"), (1j, "complex"),
    (np.zeros(3), "ndarray"), (set(), "set"), (int, "type"),
])
def test_convert_unsupported_names_function_position_and_type(value: object, type_name: str) -> None:
    with pytest.raises(ArgumentError) as info:
        convert_arg("my.func", 2, value)
    msg = str(info.value)
    assert "my.func" in msg and "argument 2" in msg and repr(type_name) in msg
    if type_name == "ndarray":
        assert "utvm.nd.array" in msg  # the hint


@pytest.mark.parametrize(("value", "needle"), [
    (2**63, "does not fit in int64"), (-(2**63) - 1, "does not fit in int64"), ("a\0b", "NUL"),
])
def test_convert_out_of_range(value: object, needle: str) -> None:
    with pytest.raises(ArgumentError, match=needle):
        convert_arg("f", 0, value)


def test_call_converts_arguments_and_return() -> None:
    seen: list[tuple] = []

    def f(*args: object) -> object:
        seen.append(args)
        return np.int16(4)

    pf = PackedFunc(f, "conv")
    ret = pf(np.int32(1), bytearray(b"x"), True, np.float64(2.0), None)
    assert seen == [(1, b"x", 1, 2.0, None)]
    assert [type(a) for a in seen[0]] == [int, bytes, int, float, type(None)]
    assert ret == 4 and type(ret) is int


def test_call_rejects_bad_argument_before_calling() -> None:
    called = []
    pf = PackedFunc(lambda *a: called.append(a), "guarded")
    with pytest.raises(ArgumentError, match=r"guarded: argument 1 has unsupported type 'list'"):
        pf(1, [2])
    assert called == []


def test_call_rejects_bad_return_value() -> None:
    pf = PackedFunc(lambda: {"x": 1}, "bad.ret")
    with pytest.raises(ArgumentError, match=r"bad.ret: return value has unsupported type 'dict'"):
        pf()


def test_exceptions_propagate_unchanged() -> None:
    def boom() -> None:
        raise ZeroDivisionError("nope")

    with pytest.raises(ZeroDivisionError, match="nope"):
        PackedFunc(boom)()


def test_packed_func_takes_packed_func() -> None:
    # the seed's callhello example: a function passed as an argument and called by the callee
    messages: list[str] = []
    callhello = PackedFunc(lambda f: f("hello world"), "callhello")
    callhello(messages.append)
    assert messages == ["hello world"]


def test_packed_func_needs_callable() -> None:
    with pytest.raises(ArgumentError, match="needs a callable"):
        PackedFunc(3)  # type: ignore[arg-type]


# --- registry ---------------------------------------------------------------------------------------------
def test_register_and_call(fresh_name: str) -> None:
    def square(x: int) -> int:
        return x * x

    assert register_func(fresh_name, square) is square
    pf = get_global_func(fresh_name)
    assert isinstance(pf, PackedFunc) and pf.name == fresh_name
    assert pf(7) == 49
    assert fresh_name in list_global_func_names()
    assert list_global_func_names() == sorted(list_global_func_names())


def test_decorator_forms(fresh_name: str) -> None:
    @register_func(fresh_name)
    def add(a: int, b: int) -> int:
        return a + b

    assert add(1, 2) == 3  # still a plain function
    assert get_global_func(fresh_name)(1, 2) == 3

    @register_func(fresh_name, override=True)
    def sub(a: int, b: int) -> int:
        return a - b

    assert get_global_func(fresh_name)(1, 2) == -1


def test_bare_decorator_uses_function_name() -> None:
    @register_func
    def test_packed_func_bare_decorated() -> str:
        return "ok"

    try:
        assert get_global_func("test_packed_func_bare_decorated")() == "ok"
    finally:
        remove_global_func("test_packed_func_bare_decorated")


def test_duplicate_needs_override(fresh_name: str) -> None:
    register_func(fresh_name, lambda: 1)
    with pytest.raises(RuntimeSystemError, match=rf"{fresh_name}.*already registered.*override=True"):
        register_func(fresh_name, lambda: 2)
    assert get_global_func(fresh_name)() == 1
    register_func(fresh_name, lambda: 2, override=True)
    assert get_global_func(fresh_name)() == 2


def test_unknown_global_names_it(fresh_name: str) -> None:
    register_func(fresh_name, lambda: 1)
    missing = fresh_name + "x"
    with pytest.raises(FunctionNotFoundError) as info:
        get_global_func(missing)
    assert repr(missing) in str(info.value)
    assert f"did you mean {fresh_name!r}" in str(info.value)
    assert isinstance(info.value, KeyError)
    assert get_global_func(missing, allow_missing=True) is None
    with pytest.raises(FunctionNotFoundError, match="nothing.here"):
        remove_global_func("nothing.here")


@pytest.mark.parametrize("bad", ["", "a\0b", 3, None])
def test_register_rejects_bad_names(bad: object) -> None:
    with pytest.raises(ArgumentError, match="non-empty str"):
        register_func(bad, lambda: 1)  # type: ignore[arg-type]


def test_register_rejects_non_callable(fresh_name: str) -> None:
    with pytest.raises(ArgumentError, match="expected a callable"):
        register_func(fresh_name, 5)  # type: ignore[arg-type]


def test_package_level_reexports(fresh_name: str) -> None:
    utvm.register_func(fresh_name, lambda x: x + 1)
    assert utvm.get_global_func(fresh_name)(1) == 2
    assert fresh_name in utvm.list_global_func_names()


# --- modules ----------------------------------------------------------------------------------------------
def test_py_module_lookup() -> None:
    base = PyModule("base", {"one": lambda: 1})
    mod = PyModule("mylib", {"add": lambda a, b: a + b}, imports=(base,))
    assert isinstance(mod, Module)
    assert mod["add"](2, 3) == 5
    assert mod.get_function("add").name == "mylib.add"
    assert "add" in mod and "one" not in mod
    assert mod.get_function("one", query_imports=True)() == 1
    with pytest.raises(FunctionNotFoundError, match=r"'mylib' has no function 'ad'; did you mean 'add'"):
        mod["ad"]
    with pytest.raises(FunctionNotFoundError, match="function names are str"):
        mod.get_function(3)  # type: ignore[arg-type]


def test_module_passes_through_packed_func() -> None:
    mod = PyModule("m", {"f": lambda: "from module"})
    call_in = PackedFunc(lambda m, name: m[name](), "call_in")
    assert call_in(mod, "f") == "from module"


def test_devices_and_types_pass_through() -> None:
    echo = PackedFunc(lambda x: x, "echo")
    assert echo(cpu(0)) == cpu(0)
    assert echo(DataType("float32x4")) == "float32x4"


def test_registry_does_not_import_numpy() -> None:
    import subprocess
    import sys

    code = ("import sys, utvm\n"
            "@utvm.register_func('x')\n"
            "def f(a):\n    return a\n"
            "assert utvm.get_global_func('x')(3) == 3\n"
            "print('numpy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_a_backend_overrides_only_the_invoke_hook() -> None:
    """What local.CPackedFunc and rpc.RemoteFunction rely on: __call__ converts and checks every argument
    (ArgumentError naming function and position) before `_invoke` sees (TypeCode, value) pairs."""
    seen: list[list[tuple[TypeCode, object]]] = []

    class Recorder(PackedFunc):
        array_hint = "send it with recorder.upload(...)"

        def _invoke(self, args: list[tuple[TypeCode, object]]) -> object:
            seen.append(args)
            return len(args)

    rec = Recorder(None, "backend.fn")
    assert rec(np.int8(3), None, bytearray(b"z"), cpu(0)) == 4
    assert seen == [[(TypeCode.INT, 3), (TypeCode.NULL, None), (TypeCode.BYTES, b"z"), (TypeCode.DEVICE, cpu(0))]]
    with pytest.raises(ArgumentError, match=r"^backend.fn: argument 1 has unsupported type 'ndarray' .*; send it "
                                            r"with recorder.upload\(...\)$"):
        rec(1, np.zeros(2))
    assert len(seen) == 1  # nothing reached the backend
