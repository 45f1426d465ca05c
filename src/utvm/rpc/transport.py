"""Byte transports for the link: subprocess pipes, TCP loopback, serial (pyserial), fault injection.

Every transport has the same three calls, and the RPC client uses nothing else:

    write(data, timeout=None)      all of `data`, or SessionTimeoutError
    read(max_bytes, timeout=None)  at least one byte (at most max_bytes), or SessionTimeoutError
    close()
    abort()                        optional: close at once, without waiting for the peer (Transport's default
                                   is close(); a device process is killed by its PID)

`timeout` is in seconds; None waits for ever. When the other end goes away (the device process exits, the
socket or port closes) read and write raise `LinkClosedError`, a `SessionTerminatedError`. The fd-based
transports never block in a write while the peer is blocked writing to us: a write that cannot proceed
drains the read side into a read-ahead buffer, so pipelined requests cannot deadlock.
"""

from __future__ import annotations

import abc
import ipaddress
import math
import os
import random
import select
import socket
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from utvm.errors import LinkClosedError, SessionTimeoutError, TransportError

__all__ = [
    "FaultInjectingTransport",
    "SerialTransport",
    "SubprocessTransport",
    "TcpTransport",
    "Transport",
]

_READ_CHUNK = 1 << 16


class Transport(abc.ABC):
    """A bidirectional byte stream to a device."""

    #: How many requests the client may have in flight on this transport (copies are pipelined up to it).
    pipeline_depth: int = 1

    @abc.abstractmethod
    def write(self, data: bytes | bytearray | memoryview, timeout: float | None = None) -> None: ...

    @abc.abstractmethod
    def read(self, max_bytes: int, timeout: float | None = None) -> bytes: ...

    @abc.abstractmethod
    def close(self) -> None: ...

    def abort(self) -> None:
        """Close at once, without waiting for the peer (the session is out of step, or the user interrupted):
        what close() does unless a transport's close() waits."""
        self.close()

    def describe(self) -> str:
        return type(self).__name__

    def __enter__(self) -> Transport:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# The longest single wait: poll() takes a C int of milliseconds. A longer timeout (a user's `--timeout 1e308`)
# waits this long, ~24.8 days, which is as good as for ever for a device call.
_MAX_POLL_MS = 2**31 - 1
MAX_WAIT_S = _MAX_POLL_MS / 1000.0


def _bounded(timeout: float | None) -> float | None:
    return None if timeout is None else min(max(0.0, timeout), MAX_WAIT_S)


def _deadline(timeout: float | None) -> float | None:
    bounded = _bounded(timeout)
    return None if bounded is None else time.monotonic() + bounded


def _remaining_ms(deadline: float | None) -> int | None:
    if deadline is None:
        return None
    return max(0, min(_MAX_POLL_MS, int((deadline - time.monotonic()) * 1000 + 0.999)))


class _FdTransport(Transport):
    """A transport over a readable and a writable file descriptor (pipes, sockets, ptys), non-blocking.
    A read that finds no data polls without sleeping for up to `spin_s` seconds before it sleeps in poll()
    (0 turns this off)."""

    pipeline_depth = 8
    spin_s = 50e-6

    def __init__(self, rfd: int, wfd: int) -> None:
        self._rfd, self._wfd = rfd, wfd
        os.set_blocking(rfd, False)
        if wfd != rfd:
            os.set_blocking(wfd, False)
        self._rpoll = select.poll()
        self._rpoll.register(rfd, select.POLLIN)
        self._wpoll = select.poll()  # while a write waits: the write side, and the read side to drain it
        if wfd == rfd:
            self._wpoll.register(wfd, select.POLLOUT | select.POLLIN)
        else:
            self._wpoll.register(wfd, select.POLLOUT)
            self._wpoll.register(rfd, select.POLLIN)
        self._ahead = bytearray()  # bytes read while a write was blocked
        self._eof = False
        self._closed = False
        # The last read drained the fd: the next one waits in poll() first rather than failing with EAGAIN
        # (a Python exception) and polling after (a request's reply is rarely there the moment it is sent).
        self._drained = False

    def _closed_error(self, doing: str) -> LinkClosedError:
        return LinkClosedError(f"{self.describe()} closed the link while we were {doing}")

    def _check_open(self) -> None:
        if self._closed:
            raise TransportError(f"{self.describe()}: the transport is closed")

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        self._check_open()
        if self._ahead:
            out = bytes(self._ahead[:max_bytes])
            del self._ahead[:max_bytes]
            return out
        if self._eof:
            raise self._closed_error("reading")
        deadline = _deadline(timeout)
        if self._drained:  # the last read emptied the fd: wait first rather than fail with EAGAIN
            self._wait_readable(deadline)
        while True:
            try:
                data = os.read(self._rfd, max_bytes)
            except BlockingIOError:
                data = None
            except OSError as exc:  # e.g. EIO on a pty whose other side closed
                self._eof = True
                raise self._closed_error(f"reading ({exc})") from exc
            if data:
                self._drained = len(data) < max_bytes
                return data
            if data == b"":
                self._eof = True
                raise self._closed_error("reading")
            if _remaining_ms(deadline) == 0:
                raise SessionTimeoutError(f"no data from {self.describe()} within {timeout:.3g} s")
            self._wait_readable(deadline)

    def _wait_readable(self, deadline: float | None) -> None:
        """Until the read side is readable (or hung up) or the deadline passes. Spins for up to `spin_s`
        first: a reply usually comes within microseconds, and waking a sleeping process (and its idle CPU)
        costs tens of them."""
        rpoll = self._rpoll
        if rpoll.poll(0):
            return
        if self.spin_s > 0:
            now = time.perf_counter()
            spin_end = now + self.spin_s
            while now < spin_end:
                if rpoll.poll(0):
                    return
                now = time.perf_counter()
        rpoll.poll(_remaining_ms(deadline))

    def write(self, data: bytes | bytearray | memoryview, timeout: float | None = None) -> None:
        self._check_open()
        if type(data) is bytes:  # the common case: the whole request goes out in one syscall
            try:
                n = os.write(self._wfd, data)
            except (BlockingIOError, InterruptedError):
                n = 0
            except (BrokenPipeError, ConnectionResetError) as exc:
                raise self._closed_error(f"writing ({exc.strerror})") from exc
            except OSError as exc:
                raise self._closed_error(f"writing ({exc})") from exc
            if n == len(data):
                return
            view = memoryview(data)[n:]
        else:
            view = memoryview(data).cast("B")
        deadline = _deadline(timeout)
        while view:
            try:
                n = os.write(self._wfd, view)
                view = view[n:]
                continue
            except BlockingIOError:
                pass
            except (BrokenPipeError, ConnectionResetError) as exc:
                raise self._closed_error(f"writing ({exc.strerror})") from exc
            except OSError as exc:
                raise self._closed_error(f"writing ({exc})") from exc
            ms = _remaining_ms(deadline)
            if ms == 0:
                raise SessionTimeoutError(
                    f"{self.describe()} accepted no data for {timeout:.3g} s ({len(view)} bytes left to write)"
                )
            for fd, ev in self._wpoll.poll(ms):
                if fd == self._rfd and ev & (select.POLLIN | select.POLLHUP) and not self._eof:
                    self._read_ahead()

    def _read_ahead(self) -> None:
        try:
            chunk = os.read(self._rfd, _READ_CHUNK)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if chunk:
            self._ahead += chunk
        else:
            self._eof = True
            if self._rfd != self._wfd:
                self._wpoll.unregister(self._rfd)


class SubprocessTransport(_FdTransport):
    """Starts `argv` and speaks the link on its stdin/stdout. The child's stderr goes to a temporary file
    whose tail is quoted when the child exits."""

    def __init__(
        self,
        argv: Sequence[str | os.PathLike[str]],
        cwd: str | Path | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.argv = [str(a) for a in argv]
        self._stderr = tempfile.TemporaryFile()
        try:
            self.proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._stderr,
                cwd=cwd,
                env=env,
                bufsize=0,
            )
        except OSError as exc:
            self._stderr.close()
            raise TransportError(f"cannot start device program {self.argv[0]!r}: {exc}") from exc
        assert self.proc.stdin is not None and self.proc.stdout is not None
        super().__init__(self.proc.stdout.fileno(), self.proc.stdin.fileno())

    def describe(self) -> str:
        return f"device process {Path(self.argv[0]).name} (pid {self.proc.pid})"

    def stderr_tail(self, limit: int = 2000) -> str:
        try:
            self._stderr.seek(0, os.SEEK_END)
            size = self._stderr.tell()
            self._stderr.seek(max(0, size - limit))
            return self._stderr.read().decode("utf-8", errors="replace").strip()
        except (OSError, ValueError):
            return ""

    def _closed_error(self, doing: str) -> LinkClosedError:
        try:
            code: int | None = self.proc.wait(timeout=0.5)
        except subprocess.TimeoutExpired:
            code = None
        status = "closed its stdout" if code is None else f"exited with code {code}"
        tail = self.stderr_tail()
        return LinkClosedError(
            f"{self.describe()} {status} while we were {doing}" + (f"; its stderr ends with:\n{tail}" if tail else "")
        )

    def kill(self) -> None:
        """Kill the device process (SIGKILL) without closing our ends: the next read sees the EOF."""
        if self.proc.poll() is None:
            self.proc.kill()

    #: Whether close() asks with SIGTERM (and waits again) before SIGKILL. A device that never exits on its
    #: own when its stdin closes (an emulator) turns this off and is killed straight away.
    terminate_before_kill = True

    def close(self, timeout: float = 2.0) -> None:
        """Close our ends, give the process `timeout` s to exit by itself, then stop it (by PID). Interrupted
        while waiting (KeyboardInterrupt), it kills the process before the interruption goes on."""
        if self._closed:
            return
        self._closed = True
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                f.close()  # type: ignore[union-attr]
            except OSError:
                pass
        try:
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                if self.terminate_before_kill:
                    self.proc.terminate()
                    try:
                        self.proc.wait(timeout=timeout)
                    except subprocess.TimeoutExpired:
                        pass
        finally:  # the process never outlives close(), whatever interrupted the waits
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            self._stderr.close()

    def abort(self) -> None:
        """Kill the process (by its PID) at once, then close our ends: no wait for it to finish anything."""
        if not self._closed and self.proc.poll() is None:
            self.proc.kill()
        self.close(timeout=0.0)


def _check_loopback(host: str) -> None:
    try:
        infos = socket.getaddrinfo(host, None)
    except socket.gaierror as exc:
        raise TransportError(f"cannot resolve TCP host {host!r}: {exc}") from exc
    for info in infos:
        if not ipaddress.ip_address(info[4][0]).is_loopback:
            raise TransportError(
                f"TCP host {host!r} is not a loopback address: utvm's TCP transport only talks to 127.0.0.1 / ::1"
            )


class TcpTransport(_FdTransport):
    """The link over a TCP connection to a loopback address (a device emulator or a bridge)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        peer = sock.getpeername()
        _check_loopback(peer[0])
        self._peer = f"{peer[0]}:{peer[1]}"
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        super().__init__(sock.fileno(), sock.fileno())

    @classmethod
    def connect(cls, port: int, host: str = "127.0.0.1", timeout: float = 10.0) -> TcpTransport:
        _check_loopback(host)
        try:
            sock = socket.create_connection((host, port), timeout=timeout)
        except OSError as exc:
            raise TransportError(f"cannot connect to {host}:{port}: {exc}") from exc
        return cls(sock)

    def describe(self) -> str:
        return f"TCP peer {self._peer}"

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.sock.close()


class SerialTransport(Transport):
    """The link over a serial port via pyserial (a board's UART, a pty, QEMU's serial socket)."""

    pipeline_depth = 1  # a UART without flow control must not be flooded

    def __init__(self, port: str, baudrate: int = 115200, **serial_kwargs: Any) -> None:
        import serial  # pyserial; imported here so the other transports work without it

        self._serial_mod = serial
        # A port that goes away (a board unplugged, a pty whose other end exited) fails with pyserial's
        # SerialException, or straight from the OS: OSError, or termios.error from tcdrain in flush().
        errors: tuple[type[BaseException], ...] = (serial.SerialException, OSError)
        try:
            import termios

            errors += (termios.error,)
        except ImportError:  # not POSIX
            pass
        self._io_errors = errors
        # exclusive: a second program (another utvm session) on the same board fails here, rather than both
        # reading half of each other's replies.
        serial_kwargs.setdefault("exclusive", os.name == "posix")
        try:
            self.ser = serial.Serial(port, baudrate=baudrate, timeout=0, **serial_kwargs)
        except (serial.SerialException, OSError, ValueError) as exc:
            raise TransportError(f"cannot open serial port {port!r}: {exc}") from exc
        self.port = port

    def describe(self) -> str:
        return f"serial port {self.port}"

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        # The timeout is raised outside the try: SessionTimeoutError is a TimeoutError, i.e. an OSError, which
        # the except clause would turn into a LinkClosedError (a silent board is not a closed link).
        try:
            wait = _bounded(timeout)
            if self.ser.timeout != wait:  # setting it reconfigures the port: only when it changes
                self.ser.timeout = wait
            first = self.ser.read(1)
            if first:
                waiting = self.ser.in_waiting
                if waiting and max_bytes > 1:
                    return first + self.ser.read(min(waiting, max_bytes - 1))  # already there: no wait
                return first
        except self._io_errors as exc:
            raise LinkClosedError(f"{self.describe()} failed while reading: {exc}") from exc
        raise SessionTimeoutError(f"no data from {self.describe()} within {timeout:.3g} s")

    def write(self, data: bytes | bytearray | memoryview, timeout: float | None = None) -> None:
        serial = self._serial_mod
        try:
            wait = _bounded(timeout)
            if self.ser.write_timeout != wait:
                self.ser.write_timeout = wait
            self.ser.write(bytes(data))
            self.ser.flush()
        except serial.SerialTimeoutException as exc:
            raise SessionTimeoutError(f"{self.describe()} accepted no data for {timeout:.3g} s") from exc
        except self._io_errors as exc:
            raise LinkClosedError(f"{self.describe()} failed while writing: {exc}") from exc

    def close(self) -> None:
        try:
            self.ser.close()
        except self._io_errors:  # closing restores the port's settings, which fails on a vanished device
            pass


class FaultInjectingTransport(Transport):
    """Wraps a transport and corrupts the byte stream, for testing error handling.

    Each byte written or read is, with the given probabilities, dropped, bit-flipped (one random bit),
    duplicated, or delayed (the stream stalls `delay_s` seconds before it). The faults are drawn from
    `random.Random(seed)` per byte position, so a run is reproducible for a given byte stream.
    `directions` is "both", "write" or "read". `stats` counts the faults injected.
    """

    def __init__(
        self,
        inner: Transport,
        drop: float = 0.0,
        flip: float = 0.0,
        duplicate: float = 0.0,
        delay: float = 0.0,
        seed: int = 0,
        delay_s: float = 0.005,
        directions: str = "both",
    ) -> None:
        for name, p in (("drop", drop), ("flip", flip), ("duplicate", duplicate), ("delay", delay)):
            if not 0.0 <= p < 1.0:
                raise ValueError(f"FaultInjectingTransport: {name} rate must be in [0, 1), got {p}")
        if directions not in ("both", "write", "read"):
            raise ValueError(f"FaultInjectingTransport: directions must be both/write/read, got {directions!r}")
        self.inner = inner
        self.pipeline_depth = inner.pipeline_depth
        self.rates = {"drop": drop, "flip": flip, "duplicate": duplicate, "delay": delay}
        self.delay_s = delay_s
        self.directions = directions
        self.stats = {"drop": 0, "flip": 0, "duplicate": 0, "delay": 0, "bytes": 0}
        self._total = drop + flip + duplicate + delay
        self._rng = {"write": random.Random(f"{seed}-write"), "read": random.Random(f"{seed}-read")}
        self._next_fault = {d: self._gap(d) for d in ("write", "read")}

    def describe(self) -> str:
        return f"{self.inner.describe()} (with injected faults)"

    def _gap(self, direction: str) -> int:
        """Bytes until the next fault (geometric with parameter = total fault rate)."""
        if self._total <= 0.0:
            return 1 << 62
        u = self._rng[direction].random()
        return int(math.log(1.0 - u) / math.log(1.0 - self._total))

    def _mangle(self, data: bytes, direction: str) -> tuple[bytes, float]:
        """Apply the faults due within `data`; returns (mangled bytes, seconds to stall before sending)."""
        self.stats["bytes"] += len(data)
        if self.directions not in ("both", direction):
            return data, 0.0
        rng = self._rng[direction]
        out = bytearray()
        pos = 0
        stall = 0.0
        nxt = self._next_fault[direction]
        while nxt < len(data) - pos:
            out += data[pos : pos + nxt]
            pos += nxt
            b = data[pos]
            r = rng.random() * self._total
            rates = self.rates
            if r < rates["drop"]:
                kind = "drop"
            elif r < rates["drop"] + rates["flip"]:
                kind = "flip"
                out.append(b ^ (1 << rng.randrange(8)))
            elif r < rates["drop"] + rates["flip"] + rates["duplicate"]:
                kind = "duplicate"
                out += bytes((b, b))
            else:
                kind = "delay"
                stall += self.delay_s
                out.append(b)
            self.stats[kind] += 1
            pos += 1
            nxt = self._gap(direction)
        self._next_fault[direction] = nxt - (len(data) - pos)
        out += data[pos:]
        return bytes(out), stall

    def write(self, data: bytes | bytearray | memoryview, timeout: float | None = None) -> None:
        mangled, stall = self._mangle(bytes(data), "write")
        if stall:
            time.sleep(stall)
        if mangled:
            self.inner.write(mangled, timeout)

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        deadline = _deadline(timeout)
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            data = self.inner.read(max_bytes, left)
            mangled, stall = self._mangle(data, "read")
            if stall:
                time.sleep(stall)
            if mangled:
                return mangled
            if deadline is not None and time.monotonic() >= deadline:
                raise SessionTimeoutError(f"no data from {self.describe()} within {timeout:.3g} s")

    def close(self) -> None:
        self.inner.close()

    def abort(self) -> None:
        abort = getattr(self.inner, "abort", None)
        if abort is not None:
            abort()
        else:
            self.inner.close()
