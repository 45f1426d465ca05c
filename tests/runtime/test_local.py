"""The local backend: the CRT as a shared library, called through TVMFuncCall, calling Python back."""

from __future__ import annotations

import ctypes
import itertools
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import utvm.nd as nd
from utvm.errors import ArgumentError, CRTArgumentError, CRTError, FunctionNotFoundError
from utvm.runtime import DataType, Module, PackedFunc, cpu, ext_dev, local

ERRORS = json.loads((Path(__file__).resolve().parents[1] / "vectors" / "abi.json").read_text())["error_codes"]
_ids = itertools.count()


@pytest.fixture(scope="module")
def rt() -> local.LocalRuntime:
    return local.load()


@pytest.fixture
def name() -> str:
    return f"test.local.{next(_ids)}"


def g(fname: str) -> PackedFunc:
    f = local.get_global_func(fname)
    assert f is not None
    return f


# --- building and loading ---------------------------------------------------------------------------------
def test_build_is_cached(rt: local.LocalRuntime) -> None:
    messages: list[str] = []
    assert local.build(messages.append) == rt.path
    assert messages == [f"using the cached build {rt.path}"]
    assert local.load() is rt


# --- C globals from Python --------------------------------------------------------------------------------
def test_c_global(rt: local.LocalRuntime) -> None:
    add = g("utvm.local.add_int")
    assert isinstance(add, local.CPackedFunc) and add.name == "utvm.local.add_int"
    assert add(2, 3) == 5 and add(-(2**62), -(2**62)) == -(2**63)
    assert add.handle >> 31 == 1  # a CRT handle: valid bits set, never NULL


def test_wrong_number_of_arguments_names_the_function(rt: local.LocalRuntime) -> None:
    add = g("utvm.local.add_int")
    with pytest.raises(CRTArgumentError) as info:
        add(1, 2, 3)
    assert str(info.value) == "utvm.local.add_int: expected 2 arguments, got 3"
    assert info.value.code == ERRORS["kTvmErrorFunctionCallNumArguments"]
    assert isinstance(info.value, ArgumentError) and isinstance(info.value, CRTError)


def test_wrong_argument_type_names_the_argument(rt: local.LocalRuntime) -> None:
    needle = r"utvm.local.add_int: argument 1 has type code 11, expected int"
    with pytest.raises(CRTArgumentError, match=needle) as i:
        g("utvm.local.add_int")(1, "two")
    assert i.value.code == ERRORS["kTvmErrorFunctionCallWrongArgType"]


def test_unsupported_python_argument_is_refused_before_c(rt: local.LocalRuntime) -> None:
    with pytest.raises(ArgumentError, match=r"utvm.local.echo: argument 0 has unsupported type 'list'"):
        g("utvm.local.echo")([1])
    with pytest.raises(ArgumentError, match=r"utvm.local.echo: argument 0 is a PyModule"):
        g("utvm.local.echo")(__import__("utvm").runtime.PyModule("py", {}))


def test_unencodable_string_names_the_argument(rt: local.LocalRuntime) -> None:
    with pytest.raises(ArgumentError, match=r"utvm.local.echo: argument 0 is a str that is not valid UTF-8"):
        g("utvm.local.echo")("bad \ud800 surrogate")


def test_unknown_global_names_it(rt: local.LocalRuntime) -> None:
    with pytest.raises(FunctionNotFoundError, match="'no.such.function'"):
        local.get_global_func("no.such.function")
    assert local.get_global_func("no.such.function", allow_missing=True) is None


def test_c_error_message_reaches_python(rt: local.LocalRuntime) -> None:
    with pytest.raises(CRTError, match=r"^utvm.local.fail: it broke$") as info:
        g("utvm.local.fail")("it broke")
    assert info.value.code == ERRORS["kTvmErrorFunctionCallInvalidArg"]


@pytest.mark.parametrize("value", [
    0, -1, 2**63 - 1, 3.25, float("inf"), "", "naïve text", b"", b"\x00\x01\xff", None,
    DataType("float32x4"), DataType("uint1"), cpu(0), ext_dev(7),
])
def test_echo_returns_every_value_kind(rt: local.LocalRuntime, value: object) -> None:
    got = g("utvm.local.echo")(value)
    assert got == value and type(got) is type(value)


@settings(max_examples=100, deadline=None)
@given(st.one_of(st.integers(-(2**63), 2**63 - 1), st.floats(allow_nan=False),
                 st.text().filter(lambda t: "\0" not in t), st.binary(), st.none()))
def test_values_survive_c_and_a_python_callback(value: object) -> None:
    # Python -> C (call_global) -> Python callback -> back through C -> Python, unchanged
    name = "test.local.identity"
    if local.get_global_func(name, allow_missing=True) is None:
        local.register_func(name, lambda x: x)
    got = g("utvm.local.call_global")(name, value)
    assert got == value and type(got) is type(value)


def test_echo_returns_handles(rt: local.LocalRuntime) -> None:
    echo = g("utvm.local.echo")
    h = echo(ctypes.c_void_p(0xDEAD0))
    assert isinstance(h, ctypes.c_void_p) and h.value == 0xDEAD0
    c_func = echo(g("utvm.local.add_int"))
    assert isinstance(c_func, local.CPackedFunc) and c_func.name == "utvm.local.add_int" and c_func(1, 1) == 2
    mod = echo(g("utvm.local.test_module")())
    assert isinstance(mod, local.LocalModule) and mod["add_one"](1) == 2
    arr = nd.array(np.arange(4, dtype="int32"))
    view = echo(arr)
    assert view.data_ptr == arr.data_ptr and view.numpy().tolist() == [0, 1, 2, 3]


# --- Python from C ----------------------------------------------------------------------------------------
def test_c_calls_python_round_trip(rt: local.LocalRuntime, name: str) -> None:
    calls: list[int] = []

    def square(x: int) -> int:
        calls.append(x)
        return x * x

    assert local.register_func(name, square) is square
    assert g("utvm.local.call_global")(name, 12) == 144
    assert calls == [12]
    # the callback is a C global now: its handle comes back as the very same Python function
    assert g(name).name == name and g(name)(3) == 9


def test_c_loop_calls_python(rt: local.LocalRuntime, name: str) -> None:
    @local.register_func(name)
    def square(x: int) -> int:
        return x * x

    acc = g("utvm.local.accumulate")
    assert acc(name, 10) == sum(i * i for i in range(10))  # by name: TVMFuncGetGlobal in C
    assert acc(square, 4) == 14  # a function argument (kTVMPackedFuncHandle)
    assert acc(lambda i: -i, 5) == -10  # an anonymous Python function


def test_python_function_argument_is_registered_once(rt: local.LocalRuntime) -> None:
    def triple(x: int) -> int:
        return 3 * x

    call_packed = g("utvm.local.call_packed")
    assert call_packed(triple, 2) == 6
    count = rt._anonymous
    assert call_packed(triple, 3) == 9 and call_packed(PackedFunc(triple), 4) == 12
    assert rt._anonymous == count


def test_callback_receives_every_argument_kind(rt: local.LocalRuntime, name: str) -> None:
    seen: list[tuple] = []
    local.register_func(name, lambda *args: seen.append(args))
    arr = nd.array(np.arange(6, dtype="float32").reshape(2, 3))
    mod = g("utvm.local.test_module")()
    add = g("utvm.local.add_int")
    py = PackedFunc(lambda: "py", "py.func")
    g("utvm.local.call_global")(name, 5, 0.5, "str", b"by\x00tes", None, DataType("int8"), ext_dev(1), arr,
                                 add, mod, py, ctypes.c_void_p(64))
    (args,) = seen
    assert args[:7] == (5, 0.5, "str", b"by\x00tes", None, DataType("int8"), ext_dev(1))
    view = args[7]
    assert isinstance(view, nd.NDArray) and view.shape == (2, 3) and view.data_ptr == arr.data_ptr
    assert args[8](2, 2) == 4 and isinstance(args[8], local.CPackedFunc)
    assert isinstance(args[9], local.LocalModule) and args[9]["add_one"](0) == 1
    assert args[10] is py and args[10]() == "py"
    assert args[11].value == 64


@pytest.mark.parametrize("value", [7, 1.5, "text from python", b"\x00bytes\xff", None, DataType("bool"),
                                   cpu(2)])
def test_callback_return_values_reach_the_caller(rt: local.LocalRuntime, name: str, value: object) -> None:
    local.register_func(name, lambda: value)
    got = g("utvm.local.call_global")(name)
    assert got == value and type(got) is type(value)


def test_callback_returns_tensors_and_functions(rt: local.LocalRuntime, name: str) -> None:
    arr = nd.array(np.arange(3, dtype="int8"))
    local.register_func(name, lambda: arr)
    assert g("utvm.local.call_global")(name).numpy().tolist() == [0, 1, 2]
    local.register_func(name, lambda: g("utvm.local.add_int"), override=True)
    assert g("utvm.local.call_global")(name)(20, 22) == 42


def test_c_writes_into_ndarray_memory(rt: local.LocalRuntime) -> None:
    a = nd.array(np.arange(5, dtype="float32"))
    assert g("utvm.local.tensor_scale")(a, 0.5) is None
    assert a.numpy().tolist() == [0.0, 0.5, 1.0, 1.5, 2.0]
    src = np.ones(4, dtype="float32")
    g("utvm.local.tensor_scale")(nd.from_dlpack(src), 3.0)  # zero copy: numpy sees the C write
    assert src.tolist() == [3.0] * 4


@pytest.mark.parametrize("dtype", ["int8", "int32", "float32", "float64"])
def test_tensor_sum(rt: local.LocalRuntime, dtype: str) -> None:
    data = np.arange(-5, 7, dtype=dtype).reshape(3, 4)
    assert g("utvm.local.tensor_sum")(nd.array(data)) == float(data.sum())


def test_tensor_errors_name_the_problem(rt: local.LocalRuntime) -> None:
    tsum = g("utvm.local.tensor_sum")
    with pytest.raises(CRTArgumentError, match=r"utvm.local.tensor_sum: unsupported dtype \(code 1, bits 16"):
        tsum(nd.array(np.zeros(2, dtype="uint16")))
    with pytest.raises(CRTArgumentError, match="only compact tensors"):
        tsum(nd.from_dlpack(np.arange(8, dtype="float32")[::2]))
    with pytest.raises(CRTArgumentError, match="argument 0 has type code 2, expected a DLTensor"):
        tsum(1.0)


# --- exceptions across the boundary -----------------------------------------------------------------------
def test_python_exception_becomes_c_error_and_comes_back(rt: local.LocalRuntime, name: str) -> None:
    @local.register_func(name)
    def fails(x: int) -> int:
        raise ValueError(f"cannot handle {x}")

    with pytest.raises(CRTError) as info:
        g("utvm.local.call_global")(name, 3)
    msg = str(info.value)
    assert msg == f"utvm.local.call_global: Python function {name!r} raised ValueError: cannot handle 3"
    assert type(info.value.__cause__) is ValueError and str(info.value.__cause__) == "cannot handle 3"
    assert rt.last_error() == f"Python function {name!r} raised ValueError: cannot handle 3"  # what C saw


def test_long_exception_message_is_kept_whole(rt: local.LocalRuntime, name: str) -> None:
    text = "x" * 5000 + " the end"
    local.register_func(name, lambda: (_ for _ in ()).throw(RuntimeError(text)))
    with pytest.raises(CRTError) as info:
        g("utvm.local.call_global")(name)
    assert str(info.value).endswith("RuntimeError: " + text)
    assert len(rt.last_error()) < len(text)  # C held a truncated copy; Python restored the original


@pytest.mark.parametrize("pad", ["", "a", "ab"])
def test_truncation_inside_a_multibyte_character(rt: local.LocalRuntime, name: str, pad: str) -> None:
    text = pad + "€" * 2000  # 3 bytes each: for two of the three pads C's buffer ends mid-character
    local.register_func(name, lambda: (_ for _ in ()).throw(ValueError(text)))
    with pytest.raises(CRTError) as info:
        g("utvm.local.call_global")(name)
    assert str(info.value).endswith("ValueError: " + text)


def test_exception_stops_a_c_loop(rt: local.LocalRuntime) -> None:
    calls: list[int] = []

    def f(i: int) -> int:
        calls.append(i)
        if i == 3:
            raise KeyError("stop at 3")
        return i

    with pytest.raises(CRTError, match=r"raised KeyError: 'stop at 3'"):
        g("utvm.local.accumulate")(f, 100)
    assert calls == [0, 1, 2, 3]


def test_nested_exception_through_two_levels(rt: local.LocalRuntime, name: str) -> None:
    inner = name + ".inner"
    local.register_func(inner, lambda: 1 // 0)
    local.register_func(name, lambda: g("utvm.local.call_global")(inner))
    with pytest.raises(CRTError) as info:
        g("utvm.local.call_global")(name)
    assert "ZeroDivisionError: integer division or modulo by zero" in str(info.value)
    assert f"{name!r} raised CRTError" in str(info.value)  # the outer callback re-raised the inner error


def test_bad_callback_return_becomes_error(rt: local.LocalRuntime, name: str) -> None:
    local.register_func(name, lambda: [1, 2])
    with pytest.raises(CRTError, match=rf"{name}: return value has unsupported type 'list'"):
        g("utvm.local.call_global")(name)


def test_keyboard_interrupt_is_reraised_as_is(rt: local.LocalRuntime, name: str) -> None:
    def interrupted() -> None:
        raise KeyboardInterrupt

    local.register_func(name, interrupted)
    with pytest.raises(KeyboardInterrupt):
        g("utvm.local.call_global")(name)
    assert g("utvm.local.add_int")(1, 1) == 2  # the runtime is still usable


def test_error_state_does_not_leak_into_the_next_call(rt: local.LocalRuntime, name: str) -> None:
    local.register_func(name, lambda: 1 // 0)
    with pytest.raises(CRTError):
        g("utvm.local.call_global")(name)
    with pytest.raises(CRTError) as info:
        g("utvm.local.fail")("plain C failure")
    assert str(info.value) == "utvm.local.fail: plain C failure" and info.value.__cause__ is None


# --- registration -----------------------------------------------------------------------------------------
def test_register_override_rules(rt: local.LocalRuntime, name: str) -> None:
    def one() -> int:
        return 1

    def two() -> int:
        return 2

    local.register_func(name, one)
    with pytest.raises(CRTError, match=rf"'{name}' is already registered"):
        local.register_func(name, two)
    assert g("utvm.local.call_global")(name) == 1
    local.register_func(name, two, override=True)
    assert g("utvm.local.call_global")(name) == 2
    assert g("utvm.local.call_packed")(one) == 1  # `one` no longer stands for the overridden global


def test_list_global_func_names(rt: local.LocalRuntime, name: str) -> None:
    names = local.list_global_func_names()
    assert names[0] == "runtime.SystemLib"  # TVMInitializeRuntime registers the built-ins first
    assert {"runtime.RPCTimeEvaluator", "utvm.local.add_int", "utvm.local.test_module"} <= set(names)
    assert name not in names
    local.register_func(name, lambda: None)
    after = local.list_global_func_names()
    assert after[-1] == name and after[:-1] == names
    assert len(after) == len(set(after))


@pytest.mark.parametrize("bad", ["", "nul\0name", 5])
def test_register_rejects_bad_names(rt: local.LocalRuntime, bad: object) -> None:
    with pytest.raises(ArgumentError, match="non-empty str"):
        local.register_func(bad, lambda: 1)  # type: ignore[arg-type]


def test_register_rejects_too_long_name(rt: local.LocalRuntime) -> None:
    with pytest.raises(CRTError, match="invalid name"):
        local.register_func("n" * 300, lambda: 1)


# --- modules ----------------------------------------------------------------------------------------------
def test_crt_module(rt: local.LocalRuntime) -> None:
    mod = g("utvm.local.test_module")()
    assert isinstance(mod, Module) and isinstance(mod, local.LocalModule)
    assert mod["add_one"](41) == 42
    assert mod.get_function("is_self")() == 1  # resource_handle is the owning TVMModule*
    assert "add_one" in mod and "missing" not in mod
    with pytest.raises(FunctionNotFoundError, match=r"CRT module 0x[0-9a-f]+ has no function 'missing'"):
        mod["missing"]
    with pytest.raises(CRTArgumentError, match="utvm.local.test_module:add_one: expected 1 argument, got 0"):
        mod["add_one"]()


def test_system_lib_missing_is_a_clear_error(rt: local.LocalRuntime) -> None:
    with pytest.raises(CRTError) as info:
        local.system_lib()
    assert info.value.code == ERRORS["kTvmErrorSystemLibMissing"]
    assert "runtime.SystemLib" in str(info.value) and "no system library" in str(info.value)


# --- the Backend interface (shared with utvm.rpc.Session; tests/rpc/test_backends.py runs both) ------------
def test_local_runtime_is_a_backend(rt: local.LocalRuntime) -> None:
    from utvm.runtime import Backend, NDArrayBase

    assert isinstance(rt, Backend) and rt.device == cpu(0)
    assert rt.get_function("utvm.local.add_int")(1, 2) == 3
    assert rt.get_function("no.such.function", allow_missing=True) is None
    with pytest.raises(FunctionNotFoundError, match="'no.such.function'"):
        rt.get_function("no.such.function")
    a = rt.array(np.arange(4, dtype="float32"))
    b = rt.empty((4,), "float32")
    assert isinstance(a, nd.NDArray) and isinstance(b, NDArrayBase) and b.device == cpu(0)
    assert rt.get_function("testing.add_one")(a, b) is None
    np.testing.assert_array_equal(b.numpy(), np.arange(4, dtype="float32") + 1)
    with pytest.raises(CRTError) as info:
        rt.system_lib()
    assert info.value.code == ERRORS["kTvmErrorSystemLibMissing"]


def test_testing_add_one_checks_its_arguments(rt: local.LocalRuntime) -> None:
    add_one = g("testing.add_one")
    a, b = nd.empty((2, 3), "float32"), nd.empty((3, 2), "float32")
    with pytest.raises(CRTArgumentError, match=r"^testing.add_one: dimension 0 differs: a has 2, b has 3$"):
        add_one(a, b)
    with pytest.raises(CRTArgumentError, match=r"^testing.add_one: argument 1 must be a float32 tensor$"):
        add_one(a, nd.empty((2, 3), "int32"))
    with pytest.raises(CRTArgumentError, match=r"^testing.add_one: argument 0 has type code 0, expected a DLTensor"):
        add_one(1, b)


def test_local_time_evaluator_owns_its_slot(rt: local.LocalRuntime) -> None:
    from utvm.runtime import TimeEvaluator

    x = nd.array(np.ones(64, "float32"))
    y = nd.empty((64,), "float32")
    timer = rt.time_evaluator("testing.add_one", number=2, repeat=3, min_repeat_ms=1)
    assert isinstance(timer, TimeEvaluator) and isinstance(timer.timer, local.CPackedFunc)
    seconds = timer(x, y)
    assert len(seconds) == 3 and all(0.0 < s < 0.1 for s in seconds), seconds
    np.testing.assert_array_equal(y.numpy(), np.full(64, 2, "float32"))
    handle = timer.timer.handle
    timer.free()
    timer.free()  # idempotent
    with pytest.raises(ArgumentError, match="was freed"):
        timer(x, y)
    with pytest.raises(CRTError, match="not live"):
        rt.free_handle(handle)  # the slot was given back: its handle is dead
    for _ in range(8):  # more than TVM_CRT_MAX_TIME_EVALUATORS, each dropped: the slots come back
        assert len(rt.time_evaluator("utvm.local.add_int", number=1)(1, 2)) == 1
    with pytest.raises(CRTError, match="utvm.local.nope"):
        rt.time_evaluator("utvm.local.nope")


def test_c_functions_refuse_arrays_of_another_backend_and_freed_arrays(rt: local.LocalRuntime) -> None:
    from utvm.runtime import Device, NDArrayBase
    from utvm.runtime.datatype import DataType as DT

    class Elsewhere(NDArrayBase):  # a minimal array of some other backend
        shape, datatype, device, freed = (2,), DT("float32"), Device("cpu", 0), False

        def numpy(self) -> np.ndarray:
            return np.zeros(2, "float32")

        def copyfrom(self, source: object) -> NDArrayBase:
            return self

        def free(self) -> None:
            pass

    total = g("utvm.local.tensor_sum")
    with pytest.raises(ArgumentError, match=r"^utvm.local.tensor_sum: argument 0 is a Elsewhere .*the local "
                                            r"runtime takes host NDArrays"):
        total(Elsewhere())
    a = nd.array(np.ones(3, "float32"))
    a.free()
    with pytest.raises(ArgumentError, match=r"^utvm.local.tensor_sum: argument 0 is an array that was freed"):
        total(a)
