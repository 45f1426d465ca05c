"""Running firmware on qemu-system-arm, with the UART as a binary-clean byte link.

QEMU is started with its UART0 on a `stdio` character device with `mux=off,signal=off`, so the pipes carry
raw bytes (never `-nographic`: its Ctrl-A multiplexer eats 0x01 bytes); `-icount shift=0` makes the virtual
clock count instructions, so on-device timing is deterministic; semihosting lets firmware end the emulation
with an exit status and read a command line, which carries a fresh random seed (`seed=<hex>`) on every boot.

QEMU does not exit when its stdin closes: `QemuProcess.close()` waits briefly for a semihosting exit, then
kills this process (by its own PID, never by name).
"""

from __future__ import annotations

import os
import selectors
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from utvm.errors import PlatformError, SessionTimeoutError, TransportError
from utvm.platform.qemu.boards import ICOUNT_SHIFT, Board, qemu_binary


def qemu_command(
    board: Board, elf: Path | str, seed: str | None = None, extra: Sequence[str] = ()
) -> list[str]:
    """The qemu-system-arm command line that runs `elf` on `board` with UART0 on stdin/stdout."""
    semihosting = "enable=on,target=native,arg=firmware"
    if seed is not None:
        semihosting += f",arg=seed={seed}"
    return [
        qemu_binary(), "-M", board.machine,
        "-display", "none", "-monitor", "none", "-nodefaults", "-nic", "none",
        "-chardev", "stdio,id=uart0,mux=off,signal=off", "-serial", "chardev:uart0",
        "-icount", f"shift={ICOUNT_SHIFT}",
        "-semihosting-config", semihosting,
        "-kernel", str(elf),
        *extra,
    ]  # fmt: skip


class QemuProcess:
    """One emulation of one firmware; the byte link is UART0.

    Implements the transport interface of `utvm.rpc` (`write(data, timeout)`, `read(max_bytes, timeout)`,
    `close()`). `read` returns at least one byte or raises: SessionTimeoutError when nothing arrived in time,
    TransportError when QEMU has exited (the message carries its exit status and stderr).
    """

    def __init__(self, board: Board, elf: Path | str, extra_args: Sequence[str] = ()) -> None:
        self.board = board
        self.elf = Path(elf)
        if not self.elf.is_file():
            raise PlatformError(f"firmware {self.elf} does not exist")
        self.command = qemu_command(board, self.elf, seed=os.urandom(16).hex(), extra=extra_args)
        self._stderr = tempfile.TemporaryFile()
        try:
            self._proc = subprocess.Popen(
                self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr, bufsize=0
            )
        except OSError as exc:
            self._stderr.close()
            raise PlatformError(f"cannot start {self.command[0]}: {exc}") from exc
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._in = self._proc.stdin
        self._out_fd = self._proc.stdout.fileno()
        os.set_blocking(self._out_fd, False)
        os.set_blocking(self._in.fileno(), False)
        self._pending = bytearray()
        self._closed = False

    # --- process ---------------------------------------------------------------------------------------
    @property
    def pid(self) -> int:
        return self._proc.pid

    @property
    def returncode(self) -> int | None:
        return self._proc.poll()

    def stderr_text(self) -> str:
        self._stderr.seek(0)
        lines = self._stderr.read().decode(errors="replace").splitlines()
        # QEMU always warns that the board's Ethernet has no peer; that says nothing about the firmware.
        return "\n".join(line for line in lines if "has no peer" not in line)

    def _exited_error(self, what: str) -> TransportError:
        rc = self._proc.poll()
        detail = self.stderr_text()
        msg = f"QEMU ({self.board.machine}, {self.elf.name}) exited with status {rc} while {what}"
        if rc is not None and rc >= 128:
            msg += f" (firmware fault: exception {rc - 128}, see startup.c)"
        return TransportError(msg + (f"; stderr: {detail}" if detail else ""))

    def wait(self, timeout: float) -> int:
        """Wait for the firmware to end the emulation (semihosting exit); return QEMU's exit status."""
        try:
            return self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise SessionTimeoutError(
                f"firmware {self.elf.name} on {self.board.machine} did not exit within {timeout:g} s"
            ) from None

    def close(self, grace: float = 0.0) -> int | None:
        """End the emulation: wait up to `grace` seconds for a semihosting exit, then kill our QEMU."""
        if self._closed:
            return self._proc.returncode
        self._closed = True
        try:
            self._in.close()
        except OSError:
            pass
        try:
            self._proc.wait(grace)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        if self._proc.stdout is not None:
            self._proc.stdout.close()
        self._stderr.close()
        return self._proc.returncode

    def __enter__(self) -> QemuProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- byte link -------------------------------------------------------------------------------------
    def wait_for_output(self, timeout: float) -> None:
        """Block until the firmware has sent its first bytes (kept for the next read()).

        The host must not send anything before: the firmware may not have enabled its UART receiver yet.
        """
        if not self._pending:
            self._pending += self._read_some(4096, timeout, "the firmware's first bytes")

    def read(self, max_bytes: int, timeout: float | None) -> bytes:
        if self._closed:
            raise TransportError(f"QEMU link to {self.elf.name} is closed")
        if self._pending:
            out = bytes(self._pending[:max_bytes])
            del self._pending[:max_bytes]
            return out
        return self._read_some(max_bytes, timeout, f"up to {max_bytes} bytes from the UART")

    def read_exactly(self, num_bytes: int, timeout: float) -> bytes:
        deadline = time.monotonic() + timeout
        out = bytearray()
        while len(out) < num_bytes:
            out += self.read(num_bytes - len(out), max(0.0, deadline - time.monotonic()))
        return bytes(out)

    def read_until(self, terminator: bytes, timeout: float) -> bytes:
        """Read until `terminator` (included in the result)."""
        deadline = time.monotonic() + timeout
        out = bytearray()
        while not out.endswith(terminator):
            chunk = self.read(1 if terminator else 4096, max(0.0, deadline - time.monotonic()))
            out += chunk
        return bytes(out)

    def _read_some(self, max_bytes: int, timeout: float | None, what: str) -> bytes:
        if self._closed:
            raise TransportError(f"QEMU link to {self.elf.name} is closed")
        with selectors.DefaultSelector() as sel:
            sel.register(self._out_fd, selectors.EVENT_READ)
            if not sel.select(timeout):
                if self._proc.poll() is not None:
                    raise self._exited_error(f"waiting for {what}")
                raise SessionTimeoutError(
                    f"timed out after {timeout:g} s waiting for {what} from {self.elf.name}"
                )
        try:
            data = os.read(self._out_fd, max_bytes)
        except BlockingIOError:
            data = b""
        if not data:
            self._proc.wait()
            raise self._exited_error(f"waiting for {what}")
        return data

    def write(self, data: bytes, timeout: float | None) -> int:
        if self._closed:
            raise TransportError(f"QEMU link to {self.elf.name} is closed")
        view = memoryview(bytes(data))
        deadline = None if timeout is None else time.monotonic() + timeout
        with selectors.DefaultSelector() as sel:
            sel.register(self._in.fileno(), selectors.EVENT_WRITE)
            while view:
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                if not sel.select(left):
                    raise SessionTimeoutError(
                        f"timed out after {timeout:g} s writing {len(view)} of {len(data)} bytes"
                        f" to {self.elf.name}"
                    )
                try:
                    n = os.write(self._in.fileno(), view)
                except BlockingIOError:
                    continue
                except (BrokenPipeError, ConnectionResetError):
                    self._proc.wait(1)
                    raise self._exited_error(f"writing {len(data)} bytes") from None
                view = view[n:]
        return len(data)
