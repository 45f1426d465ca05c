"""Transports: subprocess pipes, TCP loopback, serial over a pty pair (pyserial), and fault injection.

The device on the far end is the Python device of fake_device.py run as a program, so these tests check
the transports and the client's handling of processes, sockets and ports, independently of the C device
(test_e2e.py runs the same client against the real host device)."""

from __future__ import annotations

import os
import socket
import subprocess
import time
import tty

import numpy as np
import pytest

from utvm.errors import LinkClosedError, SessionTerminatedError, SessionTimeoutError, TransportError, UtvmError
from utvm.rpc import Session, connect_subprocess
from utvm.rpc.transport import FaultInjectingTransport, SerialTransport, SubprocessTransport, TcpTransport, Transport

from .conftest import fake_device_argv
from .fake_device import FakeDeviceTransport

KW = {"handshake_retry_s": 0.5, "handshake_timeout_s": 20.0, "reply_timeout_s": 20.0}


def exercise(sess: Session) -> None:
    """A little of everything over the link."""
    src = np.random.default_rng(3).random(3000).astype("float32")
    a, b = sess.array(src), sess.empty((3000,), "float32")
    sess.get_function("testing.add_one")(a, b)
    np.testing.assert_array_equal(b.numpy(), src + 1)
    assert sess.get_function("testing.echo")("x" * 100) == "x" * 100


def test_subprocess_pipes_echo_timeout_and_eof():
    t = SubprocessTransport(["cat"])
    t.write(b"hello")
    got = b""
    while len(got) < 5:
        got += t.read(100, timeout=5)
    assert got == b"hello"
    t0 = time.monotonic()
    with pytest.raises(SessionTimeoutError, match="no data from device process cat"):
        t.read(100, timeout=0.1)
    assert 0.09 < time.monotonic() - t0 < 1.0
    big = os.urandom(1 << 20)  # far beyond the pipe buffers: cat echoes while we write; no deadlock
    t.write(big, timeout=10)
    got = bytearray()
    while len(got) < len(big):
        got += t.read(1 << 16, timeout=5)
    assert bytes(got) == big
    t.kill()
    with pytest.raises(LinkClosedError, match=r"device process cat \(pid \d+\) exited with code -9"):
        t.read(100, timeout=5)
    t.close()
    with pytest.raises(TransportError, match="closed"):
        t.read(1, timeout=0)


@pytest.mark.parametrize("timeout", [1e308, float("inf"), 1e9])
def test_a_timeout_too_long_for_poll_waits_instead_of_overflowing(timeout: float) -> None:
    """`utvm run --timeout 1e308` once died with an OverflowError: the wait is bounded, not converted raw."""
    t = SubprocessTransport(["cat"])
    try:
        t.write(b"ok", timeout=timeout)
        got = b""
        while len(got) < 2:
            got += t.read(100, timeout=timeout)
        assert got == b"ok"
    finally:
        t.close()


def test_serial_timeouts_too_long_for_the_port_are_bounded() -> None:
    master, slave = os.openpty()
    tty.setraw(slave)
    try:
        t = SerialTransport(os.ttyname(slave), baudrate=115200)
        os.write(master, b"z")
        assert t.read(1, timeout=1e308) == b"z"
        t.write(b"y", timeout=1e308)
        assert os.read(master, 1) == b"y"
        t.close()
    finally:
        os.close(master)
        os.close(slave)


def test_subprocess_quotes_stderr_of_a_dying_device():
    t = SubprocessTransport(["sh", "-c", "echo 'device: assertion failed' >&2; exit 3"])
    with pytest.raises(
        LinkClosedError,
        match=r"exited with code 3 while we were reading; its stderr ends with:\ndevice: assertion failed",
    ):
        t.read(10, timeout=5)
    t.close()


def test_subprocess_missing_program():
    with pytest.raises(TransportError, match="cannot start device program"):
        SubprocessTransport(["/nonexistent/device"])


def test_session_over_subprocess_pipes():
    with connect_subprocess(fake_device_argv(), **KW) as sess:
        exercise(sess)
        proc = sess.transport.proc
    assert proc.wait(timeout=5) == 0  # Shutdown made the device exit


def test_killing_the_device_mid_call_then_restarting():
    sess = connect_subprocess(fake_device_argv(), **{**KW, "reply_timeout_s": 5.0})
    sleep = sess.get_function("testing.sleep_ms")
    t0 = time.monotonic()
    killer = subprocess.Popen(["sh", "-c", f"sleep 0.3; kill -9 {sess.transport.proc.pid}"])
    with pytest.raises(SessionTerminatedError, match=r"link closed while waiting for the reply to CallFunc .*code -9"):
        sleep(3000)
    assert time.monotonic() - t0 < 2.5
    killer.wait()
    sess.close()
    with connect_subprocess(fake_device_argv(), **KW) as again:
        exercise(again)


def test_session_over_tcp_loopback():
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    client = TcpTransport.connect(port)
    conn, _ = server.accept()
    device = subprocess.Popen(fake_device_argv(), stdin=conn.fileno(), stdout=conn.fileno())
    conn.close()
    server.close()
    try:
        sess = Session(client, **KW)
        assert "TCP peer 127.0.0.1" in client.describe()
        exercise(sess)
        sess.close()
        assert device.wait(timeout=5) == 0
    finally:
        device.kill()
        device.wait()


def test_tcp_refuses_non_loopback_hosts():
    with pytest.raises(TransportError, match="not a loopback address"):
        TcpTransport.connect(9, host="192.0.2.1")


def test_session_over_serial_pty_pair():
    master, slave = os.openpty()
    tty.setraw(slave)
    slave_path = os.ttyname(slave)
    device = subprocess.Popen(fake_device_argv(), stdin=master, stdout=master)
    os.close(master)
    try:
        t = SerialTransport(slave_path, baudrate=115200)
        assert t.pipeline_depth == 1
        sess = Session(t, **KW)
        exercise(sess)
        sess.close()
        assert device.wait(timeout=5) == 0
    finally:
        os.close(slave)
        device.kill()
        device.wait()


@pytest.mark.parametrize("error", ["termios", "oserror"])
def test_serial_port_that_goes_away_raises_link_closed(error: str) -> None:
    """tcdrain on a pty whose other end exited fails with termios.error (EIO), not SerialException:
    it must surface as LinkClosedError, never as a raw OS error."""
    import termios

    master, slave = os.openpty()
    try:
        t = SerialTransport(os.ttyname(slave))

        def boom() -> None:
            raise termios.error(5, "Input/output error") if error == "termios" else OSError(5, "EIO")

        t.ser.flush = boom  # type: ignore[method-assign]
        with pytest.raises(LinkClosedError, match="failed while writing"):
            t.write(b"x", timeout=1.0)
        t.ser.read = lambda n=1: boom()  # type: ignore[method-assign]
        with pytest.raises(LinkClosedError, match="failed while reading"):
            t.read(1, timeout=0.1)
        t.close()
    finally:
        os.close(master)
        os.close(slave)


def test_serial_missing_port():
    with pytest.raises(TransportError, match="cannot open serial port"):
        SerialTransport("/dev/nonexistent-utvm-port")


class Loop(Transport):
    """Whatever is written comes back."""

    def __init__(self) -> None:
        self.buf = bytearray()

    def write(self, data, timeout=None):
        self.buf += data

    def read(self, max_bytes, timeout=None):
        if not self.buf:
            raise SessionTimeoutError("empty")
        out = bytes(self.buf[:max_bytes])
        del self.buf[:max_bytes]
        return out

    def close(self):
        pass


def test_fault_injection_is_reproducible_and_counted():
    data = bytes(range(256)) * 40
    outs = []
    for _ in range(2):
        t = FaultInjectingTransport(Loop(), drop=0.01, flip=0.01, duplicate=0.01, seed=7, directions="write")
        t.write(data)
        outs.append(t.inner.buf)
        s = t.stats
        assert s["bytes"] == len(data) and 50 < s["drop"] + s["flip"] + s["duplicate"] < 600
        assert len(t.inner.buf) == len(data) - s["drop"] + s["duplicate"]
    assert outs[0] == outs[1]
    clean = FaultInjectingTransport(Loop())
    clean.write(data)
    assert clean.read(1 << 20) == data
    with pytest.raises(ValueError, match="drop rate"):
        FaultInjectingTransport(Loop(), drop=1.5)


def test_fault_injection_delay_stalls_the_stream():
    t = FaultInjectingTransport(Loop(), delay=0.5, delay_s=0.001, seed=1)
    t0 = time.monotonic()
    t.write(b"x" * 40)
    assert t.stats["delay"] > 5 and time.monotonic() - t0 >= 0.005
    assert t.inner.buf == b"x" * 40


@pytest.mark.parametrize(("kind", "seed"), [("drop", 1), ("flip", 2), ("duplicate", 3), ("mixed", 4)])
def test_calls_under_faults_are_right_or_fail_clearly(kind, seed):
    """Over a link that corrupts bytes both ways, every call returns the right result or raises a
    UtvmError; never a wrong result. The session recovers after each failure."""
    rates = {"drop": 0.0, "flip": 0.0, "duplicate": 0.0}
    if kind == "mixed":
        rates = {"drop": 0.0004, "flip": 0.0004, "duplicate": 0.0004, "delay": 0.001}
    else:
        rates[kind] = 0.001
    inner = FakeDeviceTransport()
    t = FaultInjectingTransport(inner, seed=seed, **rates)
    sess = None
    for _ in range(20):  # the handshake itself may be hit; retry it
        try:
            sess = Session(t, handshake_retry_s=0.02, handshake_timeout_s=0.3, reply_timeout_s=0.05, nonce=seed)
            break
        except UtvmError:
            continue
    assert sess is not None, "no session could be established at this fault rate"
    rng = np.random.default_rng(seed)
    ok = failed = 0
    for i in range(60):
        try:
            if i % 3 == 0:
                src = rng.random(700).astype("float32")
                a = sess.array(src)
                b = sess.empty((700,), "float32")
                sess.get_function("testing.add_one")(a, b)
                np.testing.assert_array_equal(b.numpy(), src + np.float32(1))
            else:
                word = f"call {i} " * (i % 7)
                assert sess.get_function("testing.echo")(word) == word
            ok += 1
        except UtvmError:
            failed += 1
    injected = sum(t.stats[k] for k in ("drop", "flip", "duplicate"))
    assert injected > 10 and ok > 15 and failed > 0, (ok, failed, t.stats)
