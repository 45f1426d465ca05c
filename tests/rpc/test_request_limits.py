"""Requests the device cannot take as they are are refused by the client, before anything is sent.

1. Size: a session payload is at most TVM_CRT_MAX_PACKET_SIZE_BYTES (docs/architecture.md §5.3: the RPC packet plus 3
   bytes of session header; GetCRTMaxPacketSize = that - 11). A request over it would be dropped by the device
   and the client would wait for a reply that never comes. Tested exactly at the boundary against the real
   host device built with several packet sizes: the largest request that fits is answered by the device, one
   byte more is refused with a LocalProtocolError naming the request, its size and the limit, nothing is
   written, and the session (with its arrays) goes on.
2. NUL: the device reads strings as C strings, so a function name or a str argument holding a NUL would be
   cut to its prefix there. Refused with an ArgumentError naming the function or argument and the byte.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from utvm.errors import ArgumentError, FunctionNotFoundError, LocalProtocolError, RemoteError, SessionTimeoutError
from utvm.rpc import Session
from utvm.rpc.transport import SubprocessTransport

from .conftest import E2E_SESSION_KWARGS
from .fake_device import FakeDevice, FakeDeviceTransport
from .helpers import Probe, session_messages
from .test_client import FAST, ScriptedTransport

# --- the size of a request ----------------------------------------------------------------------------------


@functools.cache
def host_device_with_packet_size(packet_size: int) -> Path:
    from utvm.platform.host import build_device

    return Path(build_device(with_test_functions=True, crt_config={"TVM_CRT_MAX_PACKET_SIZE_BYTES": packet_size}))


def start_host(packet_size: int, **kwargs: Any) -> Session:
    """A session (over a Probe) to a fresh host device built with TVM_CRT_MAX_PACKET_SIZE_BYTES = packet_size."""
    transport = Probe(SubprocessTransport([host_device_with_packet_size(packet_size)]))
    try:
        return Session(transport, **{**E2E_SESSION_KWARGS, **kwargs})
    except BaseException:
        transport.abort()
        raise


def answer(fn: Callable[..., Any], *args: Any) -> tuple[str, Any]:
    """("value", result) or ("device error", message): either way the device received and answered."""
    try:
        return "value", fn(*args)
    except RemoteError as exc:
        return "device error", str(exc)


def utf8_text(nbytes: int) -> str:
    """A str of `nbytes` UTF-8 bytes but fewer characters (a limit counted in characters would be wrong)."""
    return "\u00e9" * (nbytes // 2) + "s" * (nbytes % 2)


def split4(nbytes: int) -> list[Any]:
    """Four arguments (str, bytes, str, bytes) whose payloads add up to `nbytes`: none is large by itself."""
    q = nbytes // 4
    return ["a" * q, b"b" * q, "c" * q, b"d" * (nbytes - 3 * q)]


@dataclass(frozen=True)
class Variant:
    """A kind of request whose session payload is `overhead` + n bytes; `request(sess, n)` sends it and
    returns answer(...); `expect(outcome)` checks the device's answer; the refusal names `what`."""

    name: str
    overhead: int
    request: Callable[[Session, int], tuple[str, Any]]
    expect: Callable[[tuple[str, Any]], bool]
    what: str


# Overheads from docs/architecture.md §5.3: session header 3, u64 nbytes 8, i32 code 4; CallFunc: u64 handle 8; a packed
# sequence: i32 n + i32 per type code; str/bytes: u64 length + the bytes; int: 8.
VARIANTS = [
    Variant(  # GetGlobalFunc: 3 + 8 + 4 + (4 + 4) + 8 + n
        "global-function-name", 31,
        lambda s, n: answer(s.get_function, "g" * n, True),
        lambda out: out == ("value", None),  # the device looked the name up: unknown
        r"GetGlobalFunc\('g+\u2026' \([\d,]+ characters\)\)",
    ),
    Variant(  # CallFunc: 3 + 8 + 4 + 8 + (4 + 4) + 8 + n
        "str-argument", 39,
        lambda s, n: answer(s.get_function("testing.log"), "s" * n),
        lambda out: out == ("value", 0),
        "CallFunc testing.log",
    ),
    Variant(
        "utf8-str-argument", 39,
        lambda s, n: answer(s.get_function("testing.log"), utf8_text(n)),
        lambda out: out == ("value", 0),
        "CallFunc testing.log",
    ),
    Variant(
        "bytes-argument", 39,
        lambda s, n: answer(s.get_function("testing.sleep_ms"), b"b" * n),
        lambda out: out[0] == "device error" and "expects one int argument" in out[1],
        "CallFunc testing.sleep_ms",
    ),
    Variant(  # CallFunc with 4 arguments: 3 + 8 + 4 + 8 + (4 + 4 * 4) + 4 * 8 + n
        "four-arguments-adding-up", 75,
        lambda s, n: answer(s.get_function("testing.fail"), *split4(n)),
        lambda out: out[0] == "device error" and "got 4 argument(s)" in out[1],
        "CallFunc testing.fail",
    ),
    Variant(  # runtime.RPCTimeEvaluator(NULL, name, 9 ints, ""): 3 + 8 + 4 + 8 + (4 + 12 * 4) + 8 + n + 9 * 8 + 8
        "time-evaluator-name", 163,
        lambda s, n: answer(s.time_evaluator, "t" * n),
        lambda out: out[0] == "device error" and "no global function named 'ttt" in out[1],
        "CallFunc runtime.RPCTimeEvaluator",
    ),
]


@pytest.mark.parametrize("packet_size", [256, 2048, 4096])
@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: v.name)
def test_the_largest_request_that_fits_is_answered_and_one_byte_more_is_refused_unsent(packet_size, variant):
    sess = start_host(packet_size)
    try:
        assert sess.max_packet_size == packet_size - 11  # negotiated: GetCRTMaxPacketSize
        kept = sess.array(np.arange(64, dtype="float32"))
        n = packet_size - variant.overhead
        outcome = variant.request(sess, n)  # exactly TVM_CRT_MAX_PACKET_SIZE_BYTES: the device answers
        assert variant.expect(outcome), outcome
        written, requests = len(sess.transport.written), sess.stats["requests"]
        with pytest.raises(LocalProtocolError) as info:
            variant.request(sess, n + 1)
        msg = str(info.value)
        assert f"the request is {packet_size + 1:,} bytes; the device takes at most {packet_size:,} bytes per " \
               "packet (TVM_CRT_MAX_PACKET_SIZE_BYTES)" in msg
        assert re.match(variant.what, msg), msg
        assert "\n" not in msg and len(msg) < 400
        assert len(sess.transport.written) == written and sess.stats["requests"] == requests  # nothing sent
        # The session goes on as if nothing happened: no restart, the arrays are still there.
        np.testing.assert_array_equal(kept.numpy(), np.arange(64, dtype="float32"))
        assert variant.expect(variant.request(sess, n))
        assert sess.stats["resyncs"] == 0
    finally:
        sess.close()


@pytest.mark.parametrize(
    ("request_", "what", "size"),
    [
        (lambda s: s.get_function("x" * 5000), "GetGlobalFunc('xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\u2026' (5,000 "
         "characters))", 5031),
        (lambda s: s.get_function("testing.log")("y" * 10_000), "CallFunc testing.log", 10_039),
        (lambda s: s.get_function("testing.sleep_ms")(b"\0" * 10_000), "CallFunc testing.sleep_ms", 10_039),
        (lambda s: s.get_function("testing.fail")(*(["z" * 500] * 5)), "CallFunc testing.fail", 2_587),
        (lambda s: s.time_evaluator("w" * 3000), "CallFunc runtime.RPCTimeEvaluator", 3_163),
    ],
    ids=["5000-char-name", "10kB-str", "10kB-bytes", "five-500-byte-strs", "3000-char-evaluator-name"],
)
def test_far_too_large_requests_fail_at_once_on_every_platform(link_starter, request_, what, size):
    sess = link_starter(wrap=Probe)
    try:
        arr = sess.array(np.arange(10, dtype="float32"))
        for name in ("testing.log", "testing.sleep_ms", "testing.fail", "runtime.RPCTimeEvaluator"):
            sess.get_function(name)  # looked up now: the request below is the only one
        written = len(sess.transport.written)
        with pytest.raises(LocalProtocolError) as info:
            request_(sess)
        assert str(info.value).startswith(
            f"{what}: the request is {size:,} bytes; the device takes at most 2,048 bytes per packet "
            "(TVM_CRT_MAX_PACKET_SIZE_BYTES)"
        )
        assert str(info.value).endswith("nothing was sent")
        assert len(sess.transport.written) == written
        np.testing.assert_array_equal(arr.numpy(), np.arange(10, dtype="float32"))
        assert sess.stats["resyncs"] == 0
    finally:
        sess.close()


def test_the_5000_char_name_message_in_full():
    t = FakeDeviceTransport()
    with Session(t, **FAST) as sess, pytest.raises(LocalProtocolError) as info:
        sess.get_function("x" * 5000)
    assert str(info.value) == (
        "GetGlobalFunc('xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\u2026' (5,000 characters)): the request is 5,031 bytes; "
        "the device takes at most 2,048 bytes per packet (TVM_CRT_MAX_PACKET_SIZE_BYTES); nothing was sent"
    )


def test_a_call_refused_for_its_size_names_its_largest_argument():
    with Session(FakeDeviceTransport(), **FAST) as sess:
        echo = sess.get_function("testing.echo")
        with pytest.raises(LocalProtocolError, match=r"its largest argument, 2 \(bytes\), takes 3,008 bytes"):
            echo(1, "x" * 100, b"y" * 3000, 2.5)
        with pytest.raises(LocalProtocolError, match=r"its largest argument, 0 \(a str\), takes 2,508 bytes"):
            echo("\u00e9" * 1250)  # 2,500 bytes of UTF-8 in 1,250 characters


# The same boundary on the Python device (it drops oversized packets as the C device does), for the requests
# the host test firmware has no function for, and with limits that do not come from the device.
FAKE_VARIANTS = [
    Variant(  # ModuleGetFunction(module, name, int): 3 + 8 + 4 + 8 + (4 + 3 * 4) + 8 + 8 + n + 8
        "module-function-name", 63,
        lambda s, n: answer(lambda: s.system_lib().get_function("m" * n, allow_missing=True)),
        lambda out: out == ("value", None),
        "CallFunc tvm.rpc.server.ModuleGetFunction",
    ),
    *VARIANTS[:3],
]


@pytest.mark.parametrize("packet_size", [128, 2048, 3000])
@pytest.mark.parametrize("variant", FAKE_VARIANTS, ids=lambda v: v.name)
def test_boundary_on_the_python_device(packet_size, variant):
    t = ScriptedTransport(FakeDevice(max_packet_size=packet_size))
    sess = Session(t, **FAST)
    try:
        sess.system_lib()
        n = packet_size - variant.overhead
        assert variant.expect(variant.request(sess, n))
        written = len(t.written)
        with pytest.raises(LocalProtocolError, match=rf"the request is {packet_size + 1:,} bytes; the device takes "
                           rf"at most {packet_size:,} bytes per packet \(TVM_CRT_MAX_PACKET_SIZE_BYTES\)"):
            variant.request(sess, n + 1)
        assert len(t.written) == written
    finally:
        sess.close()


def test_a_limit_given_by_the_caller_is_named_as_such():
    t = ScriptedTransport(FakeDevice(max_packet_size=2048))
    with Session(t, max_packet_size=300, **FAST) as sess:  # smaller than the device's: its own limit
        sess.get_function("testing.echo")("x" * (311 - 39))
        written = len(t.written)
        with pytest.raises(LocalProtocolError, match=r"the request is 312 bytes; the device takes at most 311 bytes "
                           r"per packet \(TVM_CRT_MAX_PACKET_SIZE_BYTES, from max_packet_size=300\)"):
            sess.get_function("testing.echo")("x" * (312 - 39))
        assert len(t.written) == written


def test_a_device_that_does_not_report_its_limit_gets_the_assumed_one():
    dev = FakeDevice(max_packet_size=1 << 17)
    del dev.globals["tvm.rpc.server.GetCRTMaxPacketSize"]
    dev._global_names.remove("tvm.rpc.server.GetCRTMaxPacketSize")
    with Session(ScriptedTransport(dev), **FAST) as sess:
        assert sess.get_function("testing.echo")("x" * 60_000) == "x" * 60_000
        with pytest.raises(LocalProtocolError, match=r"the request is 70,039 bytes; the device takes at most "
                           r"65,547 bytes per packet \(assumed: the device does not report"):
            sess.get_function("testing.echo")("x" * 70_000)


@pytest.mark.parametrize("bad", [0, 52, -1, 2.5, True, "2037"])
def test_a_max_packet_size_without_room_for_a_request_is_refused(bad):
    t = FakeDeviceTransport()
    with pytest.raises(ArgumentError, match="max_packet_size must be an int > 52"):
        Session(t, max_packet_size=bad, **FAST)
    assert not t.written


def test_tensors_with_too_many_dimensions_are_refused_by_name():
    t = ScriptedTransport()
    with Session(t, max_packet_size=300, **FAST) as sess:  # 32 dims (numpy's most) take 256 bytes of shape
        a, b = sess.empty((1,) * 32, "float32"), sess.empty((1,) * 32, "float32")  # DevAllocData: fixed size
        written = len(t.written)
        with pytest.raises(LocalProtocolError, match=r"CallFunc testing.add_one: the request is [\d,]+ bytes.*"
                           r"its largest argument, 0 \(a tensor\)"):
            sess.get_function("testing.add_one")(a, b)
        with pytest.raises(LocalProtocolError, match=r"CopyToRemote to <RemoteNDArray .*leaves no room.*nothing "
                           "was sent"):
            a.copyfrom(np.zeros((1,) * 32, "float32"))
        with pytest.raises(LocalProtocolError, match=r"CopyFromRemote from <RemoteNDArray .*leaves no room"):
            b.numpy()
        assert session_messages(bytes(t.written[written:])) == ["GET_GLOBAL_FUNC"]  # testing.add_one's lookup


def test_a_refused_request_starts_no_session_restart():
    t = ScriptedTransport()
    with Session(t, **FAST) as sess:
        echo = sess.get_function("testing.echo")
        t.hold_next = 1
        with pytest.raises(SessionTimeoutError):
            echo("lost")  # out of step: the next request restarts the session first...
        written = len(t.written)
        with pytest.raises(LocalProtocolError):
            echo("x" * 5000)  # ...but a refused one sends nothing at all, not even the handshake
        assert len(t.written) == written and sess.out_of_step and sess.stats["resyncs"] == 0
        t.release()
        assert echo("next") == "next" and sess.stats["resyncs"] == 1


# --- NUL characters and other strings a C string cannot carry ------------------------------------------------

NAMES_WITH_NUL = ["\0testing.echo", "testing.\0echo", "testing.echo\0", "testing.echo\0.evil", "t\u00e9st\0ing"]


@pytest.mark.parametrize("name", NAMES_WITH_NUL, ids=["first", "middle", "last", "real-prefix", "after-utf8"])
def test_a_function_name_with_a_nul_is_refused_naming_the_byte(name):
    t = ScriptedTransport()
    with Session(t, **FAST) as sess:
        written = len(t.written)
        pos = name.encode().index(b"\0")
        prefix = name[: name.index("\0")]
        with pytest.raises(ArgumentError) as info:
            sess.get_function(name)
        assert str(info.value) == (
            f"GetGlobalFunc({name!r}): the function name holds a NUL character at byte {pos}; the device reads it "
            f"as a C string and would see only {prefix!r}; nothing was sent"
        )
        with pytest.raises(ArgumentError, match=f"at byte {pos}"):
            sess.get_function(name, allow_missing=True)  # not "missing": refused
        assert len(t.written) == written


STRS_WITH_NUL = ["\0abc", "ab\0c", "abc\0", "\u00e9\u00e9\0x", "\0"]


@pytest.mark.parametrize("index", [0, 2])
@pytest.mark.parametrize("text", STRS_WITH_NUL, ids=["first", "middle", "last", "after-utf8", "only"])
def test_a_str_argument_with_a_nul_is_refused_naming_the_argument_and_the_byte(index, text):
    t = ScriptedTransport()
    with Session(t, **FAST) as sess:
        echo = sess.get_function("testing.echo")
        args: list[Any] = [1, "fine", b"bytes may hold \0"]
        args[index] = text
        written = len(t.written)
        pos = text.encode().index(b"\0")
        with pytest.raises(ArgumentError) as info:
            echo(*args)
        msg = str(info.value)
        assert msg.startswith(f"testing.echo: argument {index} ")
        assert msg.endswith(f"its first NUL is at byte {pos}, so the callee would see only "
                            f"{text[: text.index(chr(0))]!r}; nothing was sent")
        assert len(t.written) == written
        assert echo(b"bytes may hold \0") == b"bytes may hold \0"  # bytes carry NULs


def test_other_requests_taking_names_refuse_nuls_too():
    t = ScriptedTransport()
    with Session(t, **FAST) as sess:
        lib = sess.system_lib()
        sess.get_function("runtime.RPCTimeEvaluator")
        written = len(t.written)
        with pytest.raises(ArgumentError, match=r"runtime.RPCTimeEvaluator: argument 1 .*first NUL is at byte 7"):
            sess.time_evaluator("testing\0.sleep_ms")
        with pytest.raises(FunctionNotFoundError):  # as the local backend's modules: no such function
            lib.get_function("testing.add_one\0")
        assert len(t.written) == written


@pytest.mark.parametrize("text", ["\ud800", "ok\udcff"])
def test_strs_that_are_not_utf8_are_refused(text):
    t = ScriptedTransport()
    with Session(t, **FAST) as sess:
        echo = sess.get_function("testing.echo")
        written = len(t.written)
        with pytest.raises(ArgumentError, match=r"cannot be encoded as UTF-8"):
            sess.get_function(text)
        with pytest.raises(ArgumentError, match=r"testing.echo: argument 1: STR value .* not valid in UTF-8"):
            echo(1, text)
        assert len(t.written) == written


@pytest.mark.parametrize("name", [5, None, b"testing.echo", ["testing.echo"]])
def test_a_function_name_must_be_a_str(name):
    t = ScriptedTransport()
    with Session(t, **FAST) as sess, pytest.raises(ArgumentError, match="a function name is a str"):
        sess.get_function(name)


def test_nul_in_a_name_on_the_real_device_is_refused_unsent(link_starter):
    sess = link_starter(wrap=Probe)
    try:
        written = len(sess.transport.written)
        with pytest.raises(ArgumentError, match=r"at byte 11; .* would see only 'testing.log'"):
            sess.get_function("testing.log\0.evil")
        with pytest.raises(ArgumentError, match="testing.log: argument 0 .*at byte 3"):
            sess.get_function("testing.log")("abc\0def")
        assert session_messages(bytes(sess.transport.written[written:])) == ["GET_GLOBAL_FUNC"]
    finally:
        sess.close()
