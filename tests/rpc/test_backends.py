"""One runtime interface for both backends (docs/architecture.md §3): the same user code, unchanged, against the local
runtime (the CRT in this process, ctypes), the in-memory Python device and the real C device over RPC
(host platform; the QEMU boards too, marked slow, via conftest's PLATFORM_STARTERS).

The user code below only uses `utvm.runtime` names: Backend, PackedFunc, NDArrayBase, Module. Each backend
has a C (or Python) `testing.add_one(a, b)` with the host device's contract: b = a + 1 for float32 tensors.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from utvm.errors import ArgumentError, CRTArgumentError, RemoteError
from utvm.rpc import Session
from utvm.runtime import Backend, Device, Module, NDArrayBase, PackedFunc, TimeEvaluator, local
from utvm.runtime.typecodes import DLDeviceType

from .conftest import LINK_PLATFORMS, PLATFORM_STARTERS
from .fake_device import FakeDeviceTransport

FAST = {"handshake_retry_s": 0.05, "handshake_timeout_s": 2.0, "reply_timeout_s": 5.0}
BACKENDS = [
    pytest.param("local", id="local"),
    pytest.param("fake", id="rpc-fake"),
    *(pytest.param(p.values[0], id=f"rpc-{p.id}", marks=p.marks) for p in LINK_PLATFORMS),
]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    if request.param == "local":
        yield local.load()
        return
    if request.param == "fake":
        sess = Session(FakeDeviceTransport(), **FAST)
    else:
        request.getfixturevalue("_host_device_built")
        sess = PLATFORM_STARTERS[request.param]()
    try:
        yield sess
    finally:
        sess.close()


# --- the user code: written once, against the runtime's interface only ----------------------------------
def add_one(backend: Backend, x: np.ndarray) -> np.ndarray:
    """Upload x, call testing.add_one(a, b), read b back."""
    f = backend.get_function("testing.add_one")
    a = backend.array(x)
    b = backend.empty(x.shape, "float32")
    with a, b:
        assert f(a, b) is None
        return b.numpy()


def test_the_same_code_runs_on_every_backend(backend: Backend) -> None:
    x = np.random.default_rng(3).standard_normal((7, 33)).astype("float32")
    got = add_one(backend, x)
    assert got.dtype == np.float32 and got.shape == x.shape
    assert np.array_equal(got.view(np.uint32), (x + np.float32(1)).view(np.uint32))


def test_every_backend_hands_out_the_shared_types(backend: Backend) -> None:
    assert isinstance(backend, Backend)
    f = backend.get_function("testing.add_one")
    assert isinstance(f, PackedFunc) and f.name == "testing.add_one"
    assert backend.get_function("testing.no_such_function", allow_missing=True) is None
    arr = backend.empty((2, 3), "float32")
    assert isinstance(arr, NDArrayBase)
    assert (arr.shape, arr.dtype, arr.ndim, arr.size, arr.nbytes) == ((2, 3), "float32", 2, 6, 24)
    assert arr.device == backend.device == Device("cpu", 0)  # the memory as its own runtime names it
    assert arr.datatype.code == 2 and arr.datatype.bits == 32
    arr.copyfrom(np.arange(6, dtype="float32").reshape(2, 3))
    np.testing.assert_array_equal(np.asarray(arr), np.arange(6, dtype="float32").reshape(2, 3))
    arr.free()
    arr.free()  # idempotent
    with pytest.raises(ArgumentError, match="was freed"):
        arr.numpy()


def test_argument_errors_are_the_same_on_every_backend(backend: Backend) -> None:
    f = backend.get_function("testing.add_one")
    with backend.empty((3,), "float32") as a:
        for bad, type_name in (([1, 2], "list"), ({"k": 1}, "dict"), (1j, "complex"), (np.zeros(3), "ndarray")):
            with pytest.raises(ArgumentError, match=rf"^testing.add_one: argument 1 has unsupported type "
                                                    rf"'{type_name}' \(supported: int, float, str, bytes"):
                f(a, bad)
        with pytest.raises(ArgumentError, match=r"^testing.add_one: argument 1 = 18446744073709551616 does not "
                                                r"fit in int64"):
            f(a, 2**64)
        with pytest.raises(ArgumentError, match=r"^testing.add_one: argument 0 is a str containing NUL"):
            f("a\0b", a)


def test_a_freed_array_is_refused_naming_the_function_and_argument(backend: Backend) -> None:
    f = backend.get_function("testing.add_one")
    a, b = backend.empty((3,), "float32"), backend.empty((3,), "float32")
    b.free()
    with pytest.raises(ArgumentError, match=r"^testing.add_one: argument 1 is an array that was freed"):
        f(a, b)
    a.free()


def test_the_callee_checks_what_conversion_cannot(backend: Backend) -> None:
    """Wrong dtype or arity passes the shared conversion and is refused by the function itself: a C
    function of the local runtime (CRTArgumentError) or the device (RemoteError), naming the function."""
    f = backend.get_function("testing.add_one")
    with backend.empty((3,), "int32") as a, backend.empty((3,), "float32") as b:
        with pytest.raises((CRTArgumentError, RemoteError), match="testing.add_one"):
            f(a, b)
        with pytest.raises((CRTArgumentError, RemoteError), match="testing.add_one"):
            f(b)


def test_arrays_copy_between_backends(backend: Backend) -> None:
    import utvm.nd as nd

    host = nd.array(np.arange(5, dtype="float32"))
    with backend.empty((5,), "float32") as arr:
        arr.copyfrom(host)  # an NDArrayBase of any backend is a source
        back = nd.empty((5,), "float32")
        assert arr.copyto(back) is back
        np.testing.assert_array_equal(back.numpy(), np.arange(5, dtype="float32"))
        again = backend.array(arr)
        with again:
            np.testing.assert_array_equal(again.numpy(), np.arange(5, dtype="float32"))


def test_time_evaluator_on_every_backend(backend: Backend) -> None:
    x = np.ones(256, "float32")
    a, b = backend.array(x), backend.empty(x.shape, "float32")
    with a, b, backend.time_evaluator("testing.add_one", number=3, repeat=2) as timer:
        assert isinstance(timer, TimeEvaluator) and isinstance(timer, PackedFunc)
        seconds = timer(a, b)
        assert len(seconds) == 2 and all(0.0 < s < 0.5 for s in seconds), seconds
        np.testing.assert_array_equal(b.numpy(), x + 1)
        with pytest.raises(ArgumentError, match=r"^time_evaluator\(testing.add_one\): argument 0 has unsupported"):
            timer([1], b)
    with pytest.raises(ArgumentError, match="was freed"):
        timer(a, b)
    with pytest.raises(ArgumentError, match="repeat must be an int >= 1"):
        backend.time_evaluator("testing.add_one", repeat=0)


def test_time_evaluators_give_their_slots_back_on_every_backend(backend: Backend) -> None:
    """More evaluators than the runtime has slots (TVM_CRT_MAX_TIME_EVALUATORS), freed or just dropped."""
    with backend.empty((1,), "float32") as a:
        for _ in range(12):
            with backend.time_evaluator("testing.add_one", number=1) as timer:
                assert len(timer(a, a)) == 1
            backend.time_evaluator("testing.add_one", number=1)  # dropped at once: released by the next call
        assert len(backend.time_evaluator("testing.add_one", number=1)(a, a)) == 1


# --- arrays, functions and modules of the other backend ---------------------------------------------------
@pytest.fixture
def fake_session() -> Iterator[Session]:
    sess = Session(FakeDeviceTransport(), **FAST)
    yield sess
    sess.close()


def test_a_host_array_on_an_rpc_call_is_refused_naming_function_and_argument(fake_session: Session) -> None:
    import utvm.nd as nd

    f = fake_session.get_function("testing.add_one")
    with fake_session.empty((3,), "float32") as b:
        n_requests = len(fake_session.transport.device.requests)
        with pytest.raises(ArgumentError, match=r"^testing.add_one: argument 0 is a NDArray in cpu\(0\) memory; "
                                                r"the device takes its own arrays: upload it with session.array"):
            f(nd.array(np.zeros(3, "float32")), b)
        assert len(fake_session.transport.device.requests) == n_requests  # refused before anything was sent


def test_a_remote_array_on_a_local_call_is_refused_naming_function_and_argument(fake_session: Session) -> None:
    import utvm.nd as nd

    f = local.get_global_func("testing.add_one")
    assert f is not None
    with fake_session.empty((3,), "float32") as remote:
        with pytest.raises(ArgumentError, match=r"^testing.add_one: argument 1 is a RemoteNDArray .*the local "
                                                r"runtime takes host NDArrays"):
            f(nd.empty((3,), "float32"), remote)


def test_functions_and_modules_that_rpc_cannot_carry(fake_session: Session) -> None:
    echo = fake_session.get_function("testing.echo")
    with pytest.raises(ArgumentError, match=r"^testing.echo: argument 0 is <PackedFunc 'py'>, not a function of "
                                            r"this session \(a device cannot call back into the host"):
        echo(PackedFunc(lambda: 1, "py"))
    with pytest.raises(ArgumentError, match=r"^testing.echo: argument 0 is <PackedFunc '.*<lambda>'>, not a function"):
        echo(lambda: 1)  # a plain Python function converts to a PackedFunc first
    with pytest.raises(ArgumentError, match=r"^testing.echo: argument 0 is <LocalModule .*not a module of this"):
        echo(local.get_global_func("utvm.local.test_module")())
    other = Session(FakeDeviceTransport(), **FAST)
    try:
        with other.empty((1,), "float32") as theirs:
            with pytest.raises(ArgumentError, match=r"^testing.echo: argument 0 is an array of another session"):
                echo(theirs)
        with pytest.raises(ArgumentError, match=r"^testing.echo: argument 0 is <RemoteFunction testing.echo"):
            echo(other.get_function("testing.echo"))
    finally:
        other.close()


def test_remote_functions_modules_and_arrays_are_runtime_types(fake_session: Session) -> None:
    echo = fake_session.get_function("testing.echo")
    lib = fake_session.system_lib()
    assert isinstance(echo, PackedFunc) and isinstance(lib, Module)
    assert "testing.add_one" in lib and "nope" not in lib
    assert lib.implements_function("testing.sleep_ms")
    assert lib["testing.sleep_ms"](0) == 0
    assert lib.get_function("nope", allow_missing=True) is None
    assert lib.get_function("a\0b", allow_missing=True) is None
    assert isinstance(echo(lib), Module)
    assert echo(echo).name == "<function returned by testing.echo>"  # a RemoteFunction travels as a handle


def test_rpc_returns_the_runtime_value_types(fake_session: Session) -> None:
    import ctypes

    from utvm.runtime import DataType, ext_dev

    echo = fake_session.get_function("testing.echo")
    got = echo(DataType("int8x4"))
    assert isinstance(got, DataType) and got == "int8x4"
    dev = echo(ext_dev(3))
    assert isinstance(dev, Device) and dev == ext_dev(3) and dev.device_type == DLDeviceType.EXT_DEV
    h = echo(ctypes.c_void_p(0xBEEF0))
    assert isinstance(h, ctypes.c_void_p) and h.value == 0xBEEF0
    assert echo(h).value == 0xBEEF0  # an opaque handle goes back as one
