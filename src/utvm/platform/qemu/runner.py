"""Running firmware on qemu-system-arm, with UART0 as a binary-clean byte link.

QEMU is started with UART0 on a `stdio` character device with `mux=off,signal=off`, so the pipes carry raw
bytes (never `-nographic`: its Ctrl-A multiplexer eats 0x01 bytes); `-icount shift=0` makes the virtual clock
count instructions (1 ns each), so on-device timing is deterministic; semihosting lets the firmware end the
emulation with an exit status and read a command line, which carries a fresh random seed (`seed=<hex>`) on
every boot.

`QemuTransport` is a `utvm.rpc` transport (write/read/close, plus kill() and `proc`) over that link. It waits
for the firmware's first bytes before anyone may send (the firmware may not have enabled its receiver yet),
and since QEMU does not exit when its stdin closes, close() waits briefly for the firmware to end the
emulation (semihosting, e.g. after an RPC Shutdown) and otherwise kills this QEMU by its PID.

Throughput: QEMU hands the CMSDK UART one byte per main-loop iteration, about 30 KB/s towards the device
(replies come back several times faster).

Timing model: given `timing_model` (the core's, e.g. "m4"; utvm.platform.qemu.timing), QEMU also loads the
cycles plugin with one region per span between the firmware's `TVMPlatformTimerStart` and
`TVMPlatformTimerStop` (their addresses from the ELF's symbols): exactly the span the device's SysTick
measures. The transport's `timing` (a `TimingLog`) then reads the regions closed so far, and time evaluators
of a session over it report estimated cycles (`utvm.runtime.backend.TimeEvaluator.cycles_est`).
`UTVM_TIMING_MODEL=off` runs without the plugin.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from utvm.errors import LinkClosedError, PlatformError, SessionTimeoutError
from utvm.platform.qemu import timing as timing_model_plugin
from utvm.platform.qemu.boards import ICOUNT_SHIFT, INSTRUCTIONS_PER_SECOND, Board, qemu_binary
from utvm.rpc.transport import SubprocessTransport
from utvm.runtime.backend import TimingRegion

FIRST_BYTES_TIMEOUT_S = 20.0


def qemu_command(board: Board, elf: Path | str, seed: str | None = None, extra: Sequence[str] = ()) -> list[str]:
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


class QemuTransport(SubprocessTransport):
    """One emulation of one firmware; the byte link is UART0 (see the module docstring)."""

    def __init__(
        self,
        board: Board,
        elf: Path | str,
        first_bytes_timeout: float | None = FIRST_BYTES_TIMEOUT_S,
        extra_args: Sequence[str] = (),
        timing_model: str | None = None,
    ) -> None:
        self.board = board
        self.elf = Path(elf)
        if not self.elf.is_file():
            raise PlatformError(f"firmware {self.elf} does not exist")
        #: The timing model's regions (None: QEMU runs without the plugin).
        self.timing: timing_model_plugin.TimingLog | None = None
        args = list(extra_args)
        if timing_model is not None and timing_model_plugin.enabled():
            self.timing = timing_model_plugin.TimingLog.for_timer(self.elf, timing_model, INSTRUCTIONS_PER_SECOND)
            args += self.timing.qemu_args()
        try:
            super().__init__(qemu_command(board, self.elf, seed=os.urandom(16).hex(), extra=args))
        except BaseException:
            if self.timing is not None:
                self.timing.close()
            raise
        if first_bytes_timeout is not None:
            try:
                self._ahead += self.read(4096, first_bytes_timeout)
            except BaseException:
                self.close(timeout=0.0)
                raise

    def timing_regions(self) -> list[TimingRegion] | None:
        """The regions the timing model closed so far (instructions, estimated cycles); None without one."""
        return None if self.timing is None else self.timing.regions()

    def describe(self) -> str:
        return f"QEMU {self.board.machine} running {self.elf.name} (pid {self.proc.pid})"

    def stderr_tail(self, limit: int = 2000) -> str:
        # QEMU always warns that the board's on-board Ethernet has no peer (`-nic none` cannot remove an
        # on-board NIC); that says nothing about the firmware.
        lines = super().stderr_tail(limit).splitlines()
        return "\n".join(line for line in lines if "has no peer" not in line)

    def _closed_error(self, doing: str) -> LinkClosedError:
        err = super()._closed_error(doing)
        code = self.proc.poll()
        if code is not None and code >= 128:
            return LinkClosedError(f"{err} (firmware fault: exception {code - 128}; see board/startup.c)")
        return err

    # --- for text-speaking firmware (tests, standalone firmware) -----------------------------------------
    def read_exactly(self, num_bytes: int, timeout: float) -> bytes:
        deadline = time.monotonic() + timeout
        out = bytearray()
        while len(out) < num_bytes:
            out += self.read(num_bytes - len(out), max(0.0, deadline - time.monotonic()))
        return bytes(out)

    def read_until(self, terminator: bytes, timeout: float) -> bytes:
        """Read up to and including `terminator` (one byte at a time: nothing after it is consumed)."""
        deadline = time.monotonic() + timeout
        out = bytearray()
        while not out.endswith(terminator):
            out += self.read(1, max(0.0, deadline - time.monotonic()))
        return bytes(out)

    def wait(self, timeout: float) -> int:
        """Wait for the firmware to end the emulation (semihosting exit); return QEMU's exit status."""
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise SessionTimeoutError(
                f"firmware {self.elf.name} on {self.board.machine} did not exit within {timeout:g} s"
            ) from None

    terminate_before_kill = False  # QEMU does not exit when stdin closes: end our own process by PID

    def close(self, timeout: float = 1.0) -> None:
        """Wait up to `timeout` s for the firmware to end the emulation (semihosting), then kill this QEMU."""
        try:
            super().close(timeout)
        finally:
            if self.timing is not None:
                self.timing.close()
