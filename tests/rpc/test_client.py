"""The RPC client against the in-memory Python device (tests/rpc/fake_device.py): functions, modules,
remote arrays and their chunked copies, the time evaluator, device logs, and every error path (timeouts
naming what was awaited, termination, corrupt or late replies, remote exceptions)."""

from __future__ import annotations

import gc
import logging
import time

import numpy as np
import pytest

from utvm.errors import (
    ArgumentError,
    FunctionNotFoundError,
    RemoteError,
    RemoteProtocolError,
    SessionTerminatedError,
    SessionTimeoutError,
    UtvmError,
)
from utvm.rpc import RemoteFunction, RemoteModule, Session
from utvm.rpc import protocol as P
from utvm.rpc.session import MessageType, SessionProtocol, encode_message
from utvm.rpc.transport import Transport

from .fake_device import FakeDevice, FakeDeviceTransport
from .helpers import payloads

FAST = {"handshake_retry_s": 0.05, "handshake_timeout_s": 0.5, "reply_timeout_s": 0.3}


class ScriptedTransport(FakeDeviceTransport):
    """A fake device whose replies can be held back, replaced or corrupted, one request at a time."""

    def __init__(self, device: FakeDevice | None = None) -> None:
        super().__init__(device)
        self.hold_next = 0  # swallow the device's output for this many writes
        self.held = bytearray()
        self.corrupt_next = 0
        self.replace_next: bytes | None = None

    def write(self, data, timeout=None):
        self.written += data
        out = self.device.receive(bytes(data))
        if self.replace_next is not None:
            out, self.replace_next = self.replace_next, None
        elif self.hold_next:
            self.hold_next -= 1
            self.held += out
            out = b""
        elif self.corrupt_next and out:
            self.corrupt_next -= 1
            out = bytearray(out)
            out[len(out) // 2] ^= 0x40
            out = bytes(out)
        self._rx += out

    def release(self) -> None:
        self._rx += self.held
        self.held.clear()


@pytest.fixture
def fake() -> ScriptedTransport:
    return ScriptedTransport()


@pytest.fixture
def sess(fake: ScriptedTransport):
    s = Session(fake, **FAST)
    yield s
    s.close()


def session_payloads(wire: bytes) -> list[bytes]:
    return [p for p, ok in payloads([wire]) if ok]


def test_connect_sends_terminate_then_init_and_negotiates_packet_size(fake):
    s = Session(fake, nonce=0x82, **FAST)
    first = session_payloads(bytes(fake.written))
    assert fake.written[:1] == b"\xfe"  # the framer's reset prefix
    assert first[0] == encode_message(0, MessageType.TERMINATE)
    assert first[1] == encode_message(0x82, MessageType.START_INIT, b"\x01")
    assert first[2][3:] == P.encode_init_server()  # the first NORMAL message
    assert s.max_packet_size == 2048 - 11
    s.close()
    assert fake.device.shutdown and fake.closed


def test_functions_and_modules(sess, fake):
    f = sess.get_function("testing.add_one")
    assert isinstance(f, RemoteFunction) and f.handle == 0x80028000 | 0x8000 | 5
    assert sess.get_function("testing.add_one") is f  # cached: no second GetGlobalFunc
    with pytest.raises(FunctionNotFoundError, match="no global function 'no.such'"):
        sess.get_function("no.such")
    assert sess.get_function("no.such", allow_missing=True) is None
    lib = sess.system_lib()
    assert isinstance(lib, RemoteModule)
    g = lib.get_function("testing.add_one")
    assert g.name == "system_lib.testing.add_one"
    with pytest.raises(FunctionNotFoundError, match="has no function 'nope'"):
        lib.get_function("nope")
    echo = sess.get_function("testing.echo")
    for value in (7, -(2**63), 2.5, "text \u00e9", b"\x00\xff", None):
        assert echo(value) == value
    assert echo(np.int16(-3)) == -3 and echo(np.float32(0.5)) == 0.5
    assert isinstance(echo(lib), RemoteModule)


def test_add_one_and_arrays(sess, fake):
    a_np = np.arange(5000, dtype="float32").reshape(50, 100)
    a = sess.array(a_np)
    b = sess.empty((50, 100), "float32")
    assert sess.get_function("testing.add_one")(a, b) is None
    np.testing.assert_array_equal(b.numpy(), a_np + 1)
    assert b.shape == (50, 100) and b.dtype == "float32" and b.nbytes == 20000


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "int32", "int64", "float16", "float32", "float64", "bool"])
@pytest.mark.parametrize("shape", [(), (0,), (1,), (3, 0), (7, 333)])
def test_array_roundtrip(sess, dtype, shape):
    src = (np.random.default_rng(1).integers(-100, 100, size=shape)).astype(dtype)
    arr = sess.array(src)
    out = arr.numpy()
    assert out.dtype == src.dtype and out.shape == src.shape
    np.testing.assert_array_equal(out, src)
    arr.free()


def test_copies_are_split_by_the_negotiated_packet_size(sess, fake):
    n = 3 * 1985 + 17 * 4  # float32 elements: the chunk for a 1-d tensor is 2037 - (44 + 8) = 1985 bytes
    src = np.random.default_rng(0).random(n // 4 * 4, dtype=np.float64).astype("float32")
    start = len(fake.device.requests)
    arr = sess.array(src)
    np.testing.assert_array_equal(arr.numpy(), src)
    reqs = fake.device.requests[start:]
    ups = [r for r in reqs if isinstance(r, P.CopyToRemote)]
    downs = [r for r in reqs if isinstance(r, P.CopyFromRemote)]
    total = src.nbytes
    assert [r.tensor.byte_offset for r in ups] == list(range(0, total, 1985))
    assert [len(r.data) for r in ups] == [min(1985, total - o) for o in range(0, total, 1985)]
    assert [(r.tensor.byte_offset, r.nbytes) for r in downs] == [(r.tensor.byte_offset, len(r.data)) for r in ups]
    assert all(r.tensor.shape == src.shape and r.tensor.data == arr.data for r in ups + downs)
    # Every session payload the host sent fits the device's 2048-byte buffer, and the largest fill it.
    sizes = [len(p) for p in session_payloads(bytes(fake.written))]
    assert max(sizes) == 2048


def test_custom_max_packet_size_and_pipeline_depth():
    t = ScriptedTransport()
    s = Session(t, max_packet_size=300, pipeline_depth=1, **FAST)
    src = np.arange(1000, dtype="int32")
    arr = s.array(src)
    np.testing.assert_array_equal(arr.numpy(), src)
    ups = [r for r in t.device.requests if isinstance(r, P.CopyToRemote)]
    assert {len(r.data) for r in ups[:-1]} == {300 - 52}
    assert not any(isinstance(r, P.Syscall) and r.code == P.RPCCode.GET_GLOBAL_FUNC for r in t.device.requests)


def test_copy_argument_checks(sess):
    arr = sess.empty((4,), "float32")
    with pytest.raises(ArgumentError, match=r"source shape \(5,\) does not match"):
        arr.copyfrom(np.zeros(5, "float32"))
    # Arguments are checked by utvm.runtime.convert_arg, as for the local backend: the message names the
    # function, the argument and its type, and says how to get a numpy array onto the device.
    with pytest.raises(ArgumentError, match=r"testing.echo: argument 0 has unsupported type 'ndarray' .*"
                       r"upload numpy arrays to the device with session.array"):
        sess.get_function("testing.echo")(np.zeros(3))
    with pytest.raises(ArgumentError, match="shape must hold non-negative ints"):
        sess.empty((-1,), "float32")
    with pytest.raises(ArgumentError, match="no DLPack equivalent"):
        sess.empty((1,), "complex64")
    with pytest.raises(ArgumentError, match=r"testing.echo: argument 0 has unsupported type 'list'"):
        sess.get_function("testing.echo")([1])


def test_arrays_are_freed(sess, fake):
    a = sess.empty((100,), "float32")
    b = sess.empty((100,), "float32")
    assert len(fake.device.memory) == 2
    a.free()
    assert len(fake.device.memory) == 1
    with pytest.raises(ArgumentError, match="was freed"):
        a.numpy()
    del b
    gc.collect()
    sess.get_function("testing.echo")(1)  # the dropped array is freed before the next request
    assert fake.device.memory == {}


def test_remote_error_carries_the_device_text_and_the_session_survives(sess):
    with pytest.raises(RemoteError, match="CallFunc testing.fail failed on the device: kaputt 42") as info:
        sess.get_function("testing.fail")("kaputt 42")
    assert info.value.device_message == "kaputt 42"
    assert sess.get_function("testing.echo")(5) == 5


def test_remote_error_inside_a_pipelined_copy_keeps_the_link_in_step(sess, fake):
    arr = sess.empty((10000,), "float32")
    fake.device.memory[arr.data] = bytearray(100)  # the device now thinks the tensor is tiny
    with pytest.raises(RemoteError, match="overruns the 100-byte tensor"):
        arr.copyfrom(np.zeros(10000, "float32"))
    assert sess.get_function("testing.echo")("after") == "after"
    assert sess.stats["resyncs"] == 0


def test_device_log_goes_to_the_utvm_device_logger(sess, caplog):
    with caplog.at_level(logging.INFO, logger="utvm.device"):
        assert sess.get_function("testing.log")("hello from the device") == 0
    assert [(r.name, r.getMessage()) for r in caplog.records] == [("utvm.device", "hello from the device")]


def test_time_evaluator(sess, fake):
    ev = sess.time_evaluator("testing.sleep_ms", number=2, repeat=3)
    times = ev(2)
    assert len(times) == 3 and all(0.0015 < t < 0.5 for t in times)
    ev2 = sess.system_lib().time_evaluator("testing.sleep_ms", number=1, repeat=1, min_repeat_ms=5)
    assert 0.0 < ev2(0)[0] < 0.5
    with pytest.raises(ArgumentError, match="repeat must be an int >= 1"):
        sess.time_evaluator("testing.sleep_ms", repeat=0)
    ev.free()
    ev2.free()
    assert fake.device.timers == {}
    with pytest.raises(RemoteError, match="no function 'nope'"):
        sess.time_evaluator("nope")


class BlackHole(Transport):
    def __init__(self) -> None:
        self.written: list[bytes] = []

    def write(self, data, timeout=None):
        self.written.append(bytes(data))

    def read(self, max_bytes, timeout=None):
        time.sleep(timeout or 0)
        raise SessionTimeoutError("nothing")

    def close(self):
        pass


def test_handshake_timeout_names_the_start_reply_and_retries_with_new_nonces():
    t = BlackHole()
    t0 = time.monotonic()
    with pytest.raises(
        SessionTimeoutError, match=r"after 0.3 s waiting for the session START_REPLY .* START_INIT sent"
    ):
        Session(t, handshake_retry_s=0.1, handshake_timeout_s=0.3, nonce=0x82)
    assert time.monotonic() - t0 < 1.0
    inits = [p for w in t.written for p in session_payloads(w) if p[2] == MessageType.START_INIT]
    nonces = [p[0] for p in inits]
    assert len(nonces) >= 2 and nonces[0] == 0x82 and len(set(nonces)) == len(nonces)


def test_reply_timeout_names_the_request_then_a_late_reply_is_not_taken_for_a_new_one(sess, fake):
    echo = sess.get_function("testing.echo")
    arr = sess.array(np.arange(4, dtype="float32"))
    fake.hold_next = 1
    t0 = time.monotonic()
    with pytest.raises(SessionTimeoutError, match="waiting for the reply to CallFunc testing.echo"):
        echo("first")
    assert 0.25 < time.monotonic() - t0 < 1.0
    fake.release()  # the late reply to "first" arrives now
    assert echo("second") == "second"  # a fresh session: the stale reply is dropped
    assert sess.stats["resyncs"] == 1 and sess.stats["dropped"] >= 1
    assert fake.device.memory == {}  # the device freed it when the new session started...
    with pytest.raises(SessionTerminatedError, match="is gone: the session was restarted after a link error"):
        arr.numpy()  # ... and the client knows
    n_requests = len(fake.device.requests)
    arr.free()  # nothing to free on the device any more: no request
    assert len(fake.device.requests) == n_requests
    assert echo("third") == "third"


def test_corrupt_reply_fails_fast_and_the_next_call_recovers(sess, fake):
    echo = sess.get_function("testing.echo")
    fake.corrupt_next = 1
    t0 = time.monotonic()
    with pytest.raises(RemoteProtocolError, match="corrupted while we waited for the reply to CallFunc testing.echo"):
        echo(1)
    assert time.monotonic() - t0 < 0.2
    assert echo(2) == 2


def test_terminate_mid_call_then_reconnect(sess, fake):
    echo = sess.get_function("testing.echo")
    arr = sess.empty((4,), "float32")
    fake.replace_next = fake.device.session.terminate()  # the device resets instead of answering
    with pytest.raises(SessionTerminatedError, match="terminated the session .* reply to CallFunc testing.echo"):
        echo(1)
    with pytest.raises(SessionTerminatedError, match="call reconnect"):
        echo(2)
    fake.device.session = SessionProtocol(0x33, 2048)  # the rebooted device
    sess.reconnect()
    with pytest.raises(SessionTerminatedError, match="earlier session"):
        echo(3)
    with pytest.raises(SessionTerminatedError, match="earlier session"):
        arr.numpy()
    assert sess.get_function("testing.echo")(4) == 4


def test_malformed_reply_is_a_remote_protocol_error(sess, fake):
    echo = sess.get_function("testing.echo")
    fake.replace_next = fake.device.session.send_normal(b"\x00" * 5)
    with pytest.raises(RemoteProtocolError, match="bad reply to CallFunc testing.echo: .*shorter than its 12-byte"):
        echo(1)
    assert echo(1) == 1


def test_closed_session_refuses_calls(fake):
    s = Session(fake, **FAST)
    f = s.get_function("testing.echo")
    s.close()
    s.close()  # idempotent
    with pytest.raises(SessionTerminatedError, match="closed"):
        f(1)


def test_every_client_error_is_a_utvm_error():
    for cls in (SessionTimeoutError, SessionTerminatedError, RemoteError, RemoteProtocolError, ArgumentError):
        assert issubclass(cls, UtvmError)


def test_unknown_handle_is_a_remote_error(sess):
    bogus = RemoteFunction(sess, 0x80018001, "bogus")
    with pytest.raises(RemoteError, match="no function for handle 0x80018001"):
        bogus()


def test_time_evaluators_release_their_device_slots(sess, fake):
    for _ in range(3 * fake.device.max_timers):  # more than the device holds at once
        with sess.time_evaluator("testing.sleep_ms", number=1) as ev:
            assert len(ev(0)) == 1
    for _ in range(2 * fake.device.max_timers):
        sess.time_evaluator("testing.sleep_ms", number=1)(0)  # dropped at once: freed before the next request
        gc.collect()
    assert len(fake.device.timers) <= 1
    ev = sess.time_evaluator("testing.sleep_ms")
    ev.free()
    with pytest.raises(ArgumentError, match="was freed"):
        ev(0)


def test_an_interrupted_call_leaves_no_stale_reply_behind(sess, fake):
    echo = sess.get_function("testing.echo")
    real_read = fake.read

    def interrupted(max_bytes, timeout=None):
        fake.read = real_read
        raise KeyboardInterrupt

    fake.read = interrupted
    with pytest.raises(KeyboardInterrupt):
        echo("lost")  # its reply stays unread in the transport
    assert echo("next") == "next"  # not "lost": the session was restarted first
    assert sess.stats["resyncs"] == 1


def test_any_object_with_write_read_close_is_a_transport():
    class Duck:  # not a Transport subclass: no describe(), no pipeline_depth
        def __init__(self) -> None:
            self.inner = FakeDeviceTransport()

        def write(self, data, timeout=None):
            self.inner.write(data, timeout)

        def read(self, max_bytes, timeout=None):
            return self.inner.read(max_bytes, timeout)

        def close(self):
            self.inner.close()

    with Session(Duck(), **FAST) as s:
        assert s.pipeline_depth == 1
        assert s.get_function("testing.echo")("quack") == "quack"
        s.reply_timeout_s = 0.05
        s.transport.inner.device.session.state = s.transport.inner.device.session.state.RESET  # device forgets
        with pytest.raises(SessionTimeoutError, match="from Duck"):
            s.get_function("testing.echo")("lost")
