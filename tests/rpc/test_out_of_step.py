"""A request that fails between its write and its reply (a reply timeout, a corrupt reply, a Ctrl-C) leaves the
link out of step: the device may still be busy. Then:

- the error is the request's own, saying which request, what happened and what comes next (never a
  handshake timeout from cleanup code);
- cleanup (array.free(), function.free(), time evaluators, session.close(), leaving `with`) raises nothing and
  sends nothing: no DevFreeData, no handshake, no Shutdown; close() stops the transport at once (a device
  process is killed by its PID);
- the next request restarts the session once the device answers, and works; function handles freed in the
  meantime are released then.

The in-memory Python device (fake_device.py) covers every failure x request pair; the real device (the
host firmware, and QEMU in the slow runs) covers an operator that does not return (testing.sleep_ms) and a
KeyboardInterrupt at several points of a call.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from utvm.errors import (
    ArgumentError,
    RemoteProtocolError,
    SessionTerminatedError,
    SessionTimeoutError,
)
from utvm.rpc import Session
from utvm.rpc.transport import SubprocessTransport

from .helpers import Probe, session_messages
from .test_client import FAST, ScriptedTransport


class Scripted(ScriptedTransport):
    """ScriptedTransport, plus `corrupt_first_packet`: one bit of the first packet the device answers the next
    write with is flipped inside its payload, so that packet fails its CRC (whichever request it answers)."""

    corrupt_first_packet = False

    def write(self, data, timeout=None):
        if not self.corrupt_first_packet:
            return super().write(data, timeout)
        self.corrupt_first_packet = False
        self.written += data
        out = bytearray(self.device.receive(bytes(data)))
        i = out.index(b"\xff\xfd") + 9  # past FF FD, the length and the session header
        while out[i] == 0xFF or out[i - 1] == 0xFF:  # not an escape: the flip must not change the framing
            i += 1
        out[i] ^= 0x02 if out[i] == 0xFE else 0x01
        self._rx += out


NEXT = "the session will be restarted before the next request, and the arrays allocated in this session are gone"

# failure name -> (arm(scripted transport, probe), exception, message regex with {what}, or None)
FAILURES: dict[str, tuple[Callable[[Scripted, Probe], None], type[BaseException], str | None]] = {
    "reply-timeout": (
        lambda t, p: setattr(t, "hold_next", 1),
        SessionTimeoutError,
        r"^timed out after 0.3 s waiting for the reply to {what} from fake device: it did not return within "
        r"0.3 s, so the device is busy or hung; "
        + re.escape(NEXT) + "$",
    ),
    "corrupt-reply": (
        lambda t, p: setattr(t, "corrupt_first_packet", True),
        RemoteProtocolError,
        r"^a packet from the device was corrupted while we waited for the reply to {what}.*; " + re.escape(NEXT),
    ),
    "ctrl-c-in-read": (lambda t, p: p.interrupt("read"), KeyboardInterrupt, None),
    "ctrl-c-in-write": (lambda t, p: p.interrupt("write-partial"), KeyboardInterrupt, None),
}

# request name -> (do(session, array), a regex of what the errors call its first request)
REQUESTS: dict[str, tuple[Callable[[Session, Any], Any], str]] = {
    "CallFunc": (lambda s, arr: s.get_function("testing.echo")("x"), r"CallFunc testing\.echo"),
    "GetGlobalFunc": (lambda s, arr: s.get_function("testing.log"), r"GetGlobalFunc\('testing\.log'\)"),
    "DevAllocData": (lambda s, arr: s.empty((8,), "float32"), r"DevAllocData\(32 bytes for a \(8,\) tensor\)"),
    "CopyToRemote": (lambda s, arr: arr.copyfrom(np.ones(arr.shape, "float32")),
                     r"CopyToRemote\(bytes \d+\.\.\d+ of <RemoteNDArray shape=\(5000,\)[^>]*>\)"),
    "CopyFromRemote": (lambda s, arr: arr.numpy(), r"CopyFromRemote\(bytes \d+\.\.\d+ of <RemoteNDArray[^>]*>\)"),
}


def fake_session() -> tuple[Session, Scripted, Probe]:
    t = Scripted()
    p = Probe(t)
    return Session(p, **FAST), t, p


@pytest.mark.parametrize("request_", REQUESTS)
@pytest.mark.parametrize("failure", FAILURES)
def test_cleanup_after_a_failed_request_sends_nothing_and_the_next_request_restarts(failure, request_):
    sess, t, p = fake_session()
    arm, exc_type, pattern = FAILURES[failure]
    do, what = REQUESTS[request_]
    echo = sess.get_function("testing.echo")
    target = sess.array(np.arange(5000, dtype="float32"))  # several packets: the copies are pipelined
    doomed = sess.array(np.arange(10, dtype="float32"))
    kept = sess.array(np.arange(10, dtype="float32"))
    ev = sess.time_evaluator("testing.sleep_ms", number=1)  # holds one of the device's evaluator slots
    assert len(t.device.timers) == 1
    arm(t, p)
    with pytest.raises(exc_type) as info:
        try:
            do(sess, target)
        finally:  # a caller's cleanup: it must neither raise nor wait for the device
            mark = len(p.written)
            doomed.free()
            ev.free()
            target.free()
            assert len(p.written) == mark, session_messages(bytes(p.written[mark:]))
    if pattern is not None:
        assert re.search(pattern.format(what=what), str(info.value)), str(info.value)
    assert sess.out_of_step
    with pytest.raises(SessionTerminatedError, match="is gone: .*, so the session will be restarted before the next"):
        kept.numpy()
    with pytest.raises(ArgumentError, match="was freed"):
        doomed.numpy()
    assert len(p.written) == mark  # still nothing sent

    t.release()  # late replies arrive now: they must not be taken for the answer to the next request
    assert echo("after") == "after"
    assert sess.stats["resyncs"] == 1 and not sess.out_of_step
    assert session_messages(bytes(p.written[mark:])) == ["START_INIT", "InitServer", "FREE_HANDLE", "CallFunc"]
    assert t.device.timers == {}  # the evaluator's slot was given back after the restart
    assert t.device.memory == {}  # the device freed the arrays when the new session started
    fresh = sess.array(np.arange(3, dtype="float32"))
    np.testing.assert_array_equal(fresh.numpy(), np.arange(3, dtype="float32"))
    sess.close()
    assert not p.aborted and t.device.shutdown  # in step again: a normal close


@pytest.mark.parametrize("exit_", ["close-in-finally", "with-block"])
@pytest.mark.parametrize("failure", FAILURES)
def test_closing_after_a_failed_request_sends_nothing_and_aborts_the_transport(failure, exit_):
    sess, t, p = fake_session()
    arm, exc_type, _ = FAILURES[failure]
    echo = sess.get_function("testing.echo")
    arm(t, p)
    mark = None
    with pytest.raises(exc_type):
        if exit_ == "close-in-finally":
            try:
                echo("x")
            finally:
                mark = len(p.written)
                sess.close()
        else:
            with sess:
                try:
                    echo("x")
                finally:
                    mark = len(p.written)
    assert len(p.written) == mark  # no Shutdown, no handshake
    assert p.aborted and not t.device.shutdown


@pytest.mark.parametrize("exc_type", [KeyboardInterrupt, ValueError, RuntimeError])
def test_leaving_a_with_block_by_any_exception_aborts(exc_type):
    sess, t, p = fake_session()
    with pytest.raises(exc_type), sess:
        assert sess.get_function("testing.echo")(1) == 1  # in step: only the exit decides
        raise exc_type("the caller's own error")
    assert p.aborted and not t.device.shutdown
    assert session_messages(bytes(p.written))[-1] == "CallFunc"


def test_a_healthy_close_still_shuts_the_device_down():
    sess, t, p = fake_session()
    with sess:
        assert sess.get_function("testing.echo")(1) == 1
    assert not p.aborted and p.closed and t.device.shutdown
    assert session_messages(bytes(p.written))[-1] == "Shutdown"
    sess2, t2, p2 = fake_session()
    sess2.close(force=True)
    assert p2.aborted and not t2.device.shutdown


def test_a_restart_that_times_out_says_why_the_session_was_restarted():
    sess, t, p = fake_session()
    echo = sess.get_function("testing.echo")
    t.hold_next = 1
    with pytest.raises(SessionTimeoutError, match="waiting for the reply to CallFunc testing.echo"):
        echo(1)
    t.hold_next = 1000  # the device stays busy: the handshake of the restart is not answered either
    with pytest.raises(SessionTimeoutError) as info:
        echo(2)
    assert re.search(
        r"timed out after 0.5 s waiting for the session START_REPLY from fake device \(\d+ START_INIT sent\) while "
        r"restarting the session because CallFunc testing.echo timed out \(the device may still be busy with it "
        r"or hung; the next request tries again\)$",
        str(info.value),
    ), str(info.value)
    assert sess.out_of_step
    t.hold_next = 0
    t.release()  # the device is back
    assert echo(3) == 3 and sess.stats["resyncs"] == 2


def test_an_interrupted_restart_is_redone_and_close_does_not_wait_meanwhile():
    sess, t, p = fake_session()
    echo = sess.get_function("testing.echo")
    t.hold_next = 1
    with pytest.raises(SessionTimeoutError):
        echo(1)
    p.interrupt("read")  # Ctrl-C while the restart waits for the START_REPLY
    with pytest.raises(KeyboardInterrupt):
        echo(2)
    assert sess.out_of_step
    t.release()
    assert echo(3) == 3  # the restart is done again
    p.interrupt("read")
    with pytest.raises(KeyboardInterrupt):
        echo(4)
    mark = len(p.written)
    sess.close()
    assert len(p.written) == mark and p.aborted


def test_arrays_of_a_session_that_fell_out_of_step_are_gone_before_any_request():
    """A copy or a call with an array is refused at once, before the restart (which frees the memory), so no
    request ever carries a stale device address."""
    sess, t, p = fake_session()
    add_one, echo = sess.get_function("testing.add_one"), sess.get_function("testing.echo")
    a, b = sess.array(np.zeros(4, "float32")), sess.empty((4,), "float32")
    p.interrupt("read")
    with pytest.raises(KeyboardInterrupt):
        echo(1)
    mark = len(p.written)
    for use in (lambda: add_one(a, b), lambda: b.numpy(), lambda: a.copyfrom(np.ones(4, "float32"))):
        with pytest.raises(SessionTerminatedError, match="is gone: CallFunc testing.echo was interrupted"):
            use()
    assert len(p.written) == mark
    assert echo(2) == 2  # the restart
    with pytest.raises(SessionTerminatedError, match="is gone: the session was restarted after a link error"):
        b.numpy()


def test_a_handle_dropped_while_out_of_step_is_released_after_the_restart():
    import gc

    sess, t, p = fake_session()
    echo = sess.get_function("testing.echo")
    ev = sess.time_evaluator("testing.sleep_ms", number=1)
    t.hold_next = 1
    with pytest.raises(SessionTimeoutError):
        echo(1)
    mark = len(p.written)
    del ev
    gc.collect()  # the collector only queues the release (no I/O), and the restart must not forget it
    assert len(p.written) == mark and len(t.device.timers) == 1
    t.release()
    assert echo(2) == 2
    assert session_messages(bytes(p.written[mark:])) == ["START_INIT", "InitServer", "FREE_HANDLE", "CallFunc"]
    assert t.device.timers == {}


# --- transports: abort() and an interrupted close() ------------------------------------------------------


def test_subprocess_abort_kills_the_process_by_pid():
    t = SubprocessTransport(["sleep", "600"])  # exits neither on stdin EOF nor soon
    t.abort()
    assert t.proc.returncode is not None and t.proc.returncode < 0


def test_a_subprocess_close_interrupted_while_waiting_kills_the_process():
    t = SubprocessTransport(["sleep", "600"])
    real_wait = t.proc.wait

    def wait(timeout: float | None = None) -> int:
        if timeout is not None:
            raise KeyboardInterrupt  # Ctrl-C during the graceful wait
        return real_wait()

    t.proc.wait = wait  # type: ignore[method-assign]
    with pytest.raises(KeyboardInterrupt):
        t.close(timeout=60)
    assert t.proc.poll() is not None and t.proc.returncode < 0


# --- the real device ----------------------------------------------------------------------------------------


def _device_process(sess: Session) -> subprocess.Popen:
    return sess.transport.proc  # Probe -> SubprocessTransport / QemuTransport


def test_an_operator_that_never_returns_reports_the_call_timeout_and_cleanup_does_not_mask_it(link_starter):
    sess = link_starter(wrap=Probe, reply_timeout_s=0.5)
    p, proc = sess.transport, _device_process(sess)
    sleep = sess.get_function("testing.sleep_ms")
    arr = sess.array(np.arange(100, dtype="float32"))
    ev = sess.time_evaluator("testing.sleep_ms", number=1)
    mark = None
    with pytest.raises(SessionTimeoutError) as info:
        try:
            sleep(600_000)  # ten minutes: an operator that does not return
        finally:
            mark = len(p.written)
            arr.free()
            ev.free()
            sess.close()
    msg = str(info.value)
    assert msg.startswith("timed out after 0.5 s waiting for the reply to CallFunc testing.sleep_ms from ")
    assert msg.endswith(f": it did not return within 0.5 s, so the device is busy or hung; {NEXT}")
    assert "START_REPLY" not in msg
    assert len(p.written) == mark  # no DevFreeData, FreeHandle, handshake or Shutdown
    assert p.aborted
    assert proc.poll() is not None and proc.returncode < 0  # killed by its PID, not waited for


@pytest.mark.parametrize("how", ["reply-timeout", "ctrl-c"])
def test_after_a_failed_call_the_next_request_restarts_once_the_device_is_done(link_starter, how):
    sess = link_starter(wrap=Probe, reply_timeout_s=0.5)
    p = sess.transport
    sleep = sess.get_function("testing.sleep_ms")
    arr = sess.array(np.arange(100, dtype="float32"))
    ev = sess.time_evaluator("testing.sleep_ms", number=1)
    if how == "ctrl-c":
        p.interrupt("read")
    try:
        with pytest.raises(SessionTimeoutError if how == "reply-timeout" else KeyboardInterrupt):
            try:
                sleep(1500)  # the device is busy for 1.5 s: longer than the reply timeout
            finally:
                mark = len(p.written)
                arr.free()
                ev.free()
                assert len(p.written) == mark
        sess.reply_timeout_s = 30.0
        assert sleep(3) == 3  # the restart's handshake is answered once the device has slept
        assert sess.stats["resyncs"] == 1
        sent = session_messages(bytes(p.written[mark:]))
        assert sent[0] == "START_INIT" and "FREE_HANDLE" in sent and sent[-1] == "CallFunc", sent
        with sess.time_evaluator("testing.sleep_ms", number=1) as ev2:
            assert len(ev2(0)) == 1
        fresh = sess.array(np.arange(7, dtype="float32"))
        np.testing.assert_array_equal(fresh.numpy(), np.arange(7, dtype="float32"))
    finally:
        sess.close()
    assert not p.aborted  # in step again: a normal close


def _prepare(sess: Session) -> dict[str, Any]:
    return {
        "sleep": sess.get_function("testing.sleep_ms"),
        "arr": sess.empty((20_000,), "float32"),
        "ev": sess.time_evaluator("testing.sleep_ms", number=1),
    }


def _busy_then_interrupted_restart(sess: Session, p: Probe, objs: dict[str, Any]) -> None:
    sess.reply_timeout_s = 0.3
    with pytest.raises(SessionTimeoutError):
        objs["sleep"](600_000)
    p.interrupt("read")  # Ctrl-C while the restart waits for the busy device's START_REPLY
    sess.get_function("testing.log")


# where the Ctrl-C hits -> what the user was doing
INTERRUPTS: dict[str, Callable[[Session, Probe, dict[str, Any]], Any]] = {
    "CallFunc-read": lambda s, p, o: (p.interrupt("read"), o["sleep"](600_000)),
    "CallFunc-write": lambda s, p, o: (p.interrupt("write-partial"), o["sleep"](600_000)),
    "GetGlobalFunc-read": lambda s, p, o: (p.interrupt("read"), s.get_function("testing.log")),
    "upload-read": lambda s, p, o: (p.interrupt("read", 2), o["arr"].copyfrom(np.ones(20_000, "float32"))),
    "download-read": lambda s, p, o: (p.interrupt("read", 2), o["arr"].numpy()),
    "restart-handshake-read": _busy_then_interrupted_restart,
}


@pytest.mark.parametrize("exit_", ["cleanup-in-finally", "with-block"])
@pytest.mark.parametrize("where", INTERRUPTS)
def test_ctrl_c_during_a_call_kills_the_device_and_sends_nothing_more(link_starter, where, exit_):
    sess = link_starter(wrap=Probe)
    p, proc = sess.transport, _device_process(sess)
    objs = _prepare(sess)
    with pytest.raises(KeyboardInterrupt):
        if exit_ == "cleanup-in-finally":
            try:
                INTERRUPTS[where](sess, p, objs)
            finally:
                objs["arr"].free()
                objs["ev"].free()
                sess.close()
        else:
            with sess:
                INTERRUPTS[where](sess, p, objs)
    assert p.interrupted_at is not None
    assert len(p.written) == p.interrupted_at, session_messages(bytes(p.written[p.interrupted_at :]))
    assert p.aborted
    assert proc.poll() is not None and proc.returncode < 0  # killed by its PID
