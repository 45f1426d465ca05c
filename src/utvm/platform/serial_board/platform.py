"""The `serial-board` platform: utvm's RPC evaluation firmware on any Cortex-M board, over its UART.

    utvm run model.tflite --platform serial-board --board-config board.toml --check

The board is described by a board.toml (config.py, docs/platforms.md). `build` makes the firmware: the QEMU
platform's project (template Makefile, main_rpc.c, the TVMPlatform hooks of platform.c, the SysTick timer of
timer.c, the CRT) with the QEMU board support replaced by the board's own startup code, linker script and a
UART driver implementing template/utvm_serial_board.h (serial_glue.c adapts it to what main_rpc.c uses) --
or, with `[build] command`, the user's own build of those generated sources. `start` flashes the ELF
(pyocd or the board's command), opens the port with pyserial and starts an RPC session. Closing the session
closes the port and leaves the board running (or runs `[link] reset_command`).

A board that resets in the middle of a call sends a session TERMINATE when it boots: that call fails with a
SessionTerminatedError (the CLI's exit status 7), and `Session.reconnect()` starts the next session.

Every command of the board.toml runs with a time limit (`run_command`), in a process group of its own that
is killed whole when the limit passes or utvm is interrupted; a build or flash command that fails is a
PlatformError (exit 6), a reset command a TransportError (exit 7: the link). Only the last
OUTPUT_TAIL_BYTES of a command's output are kept, and nothing waits for a process it left running.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import selectors
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from utvm.errors import (
    LinkClosedError,
    PlatformError,
    SessionTerminatedError,
    SessionTimeoutError,
    TransportError,
    UtvmError,
)
from utvm.platform.qemu.boards import Board, cross_tool
from utvm.platform.qemu.platform import CortexMFirmware
from utvm.platform.qemu.project import PLATFORM_DIR, FirmwareSpec, generate_project
from utvm.platform.serial_board.config import (
    MAX_BOARD_FILE_BYTES,
    BoardConfig,
    active_board_config,
    expand,
    load_board_config,
    placeholders_of,
    read_regular_file,
)
from utvm.rpc import Session
from utvm.rpc.transport import SerialTransport
from utvm.support import cc
from utvm.support.text import shown

__all__ = ["BoardSession", "SerialBoardPlatform", "SerialBoardTransport"]

log = logging.getLogger("utvm.platform.serial_board")

TEMPLATE_DIR = Path(__file__).resolve().parent / "template"
#: The QEMU template's board files that are not MPS2-specific: the board layer's header, the architectural
#: registers (SCB, SysTick, NVIC; its UART0 part is unused) and the SysTick timer.
PORTABLE_BOARD_FILES = ("utvm_board.h", "utvm_mps2.h", "timer.c")
#: utvm's own files in board/ (the interface a board driver implements, and the adapter to utvm_board.h).
GLUE_FILES = ("utvm_serial_board.h", "serial_glue.c")
#: Seconds between two attempts to open the port and start a session ([link] reconnect_attempts).
REOPEN_DELAY_S = 0.5
#: The bytes of a board command's output kept for its error message (its last line).
OUTPUT_TAIL_BYTES = 64 * 1024


def utvm_board_file_names() -> frozenset[str]:
    """The names of the files utvm itself puts in a board project's board/ (the portable template files, the
    glue, the TVMPlatform hooks): no board file takes one (config.load_board_config refuses it, and a
    header beside a board source of such a name is left out)."""
    return frozenset({*PORTABLE_BOARD_FILES, *GLUE_FILES, *(f.name for f in PLATFORM_DIR.iterdir())})


class _ConfiguredTarget:
    """`SerialBoardPlatform.target`: the cpu of the board.toml in use (the class has no fixed CPU)."""

    def __get__(self, obj: SerialBoardPlatform | None, owner: type) -> str:
        config = obj.config if obj is not None else active_board_config()
        return config.cpu


def board_of(config: BoardConfig) -> Board:
    """The compiler flags of the board's CPU, as a QEMU-platform `Board` (machine: none): its target's
    (`Target.float_flags`), which are those of the QEMU board of the same CPU."""
    from utvm.target import get_target

    t = get_target(config.cpu)
    assert t.mcpu is not None
    return Board(config.name, "none", t.mcpu, t.float_flags)


class SerialBoardTransport(SerialTransport):
    """The board's UART (pyserial), and the board's reset command (`reset_board`)."""

    def __init__(self, config: BoardConfig, firmware: Path | None = None) -> None:
        super().__init__(config.port, baudrate=config.baud)
        self.config = config
        self.firmware = firmware

    def describe(self) -> str:
        return f"board {self.config.name} on serial port {self.config.port}"

    def reset_board(self) -> None:
        """Run [link] reset_command (nothing when the board.toml has none); TransportError if it fails."""
        cfg = self.config
        if cfg.reset_command is not None:
            run_board_command(cfg, cfg.reset_command, "[link] reset_command", self.firmware,
                              timeout=cfg.reset_timeout_s, limit_key="[link] reset_timeout_s", error=TransportError)


def run_board_command(config: BoardConfig, argv: Sequence[str], what: str, elf: Path | None,
                      timeout: float | None = None, *, limit_key: str = "[flash] timeout_s",
                      error: type[UtvmError] = PlatformError) -> None:
    """Run a flash or reset command of board.toml with its placeholders filled (`run_command`). {hex} and
    {bin} are made from the ELF with arm-none-eabi-objcopy when the command uses them."""
    with tempfile.TemporaryDirectory(prefix="utvm-flash-") as tmp:
        values = {"port": config.port, "elf": str(elf or ""), "hex": "", "bin": ""}
        used = placeholders_of(argv)
        for kind, fmt in (("hex", "ihex"), ("bin", "binary")):
            if elf is not None and kind in used:
                out = Path(tmp) / f"{elf.stem}.{kind}"
                cc.run([cross_tool("objcopy"), "-O", fmt, str(elf), str(out)], what=f"objcopy -O {fmt}")
                values[kind] = str(out)
        run_command(config, expand(argv, values), what, config.flash_timeout_s if timeout is None else timeout,
                    limit_key, error)


def run_command(config: BoardConfig, cmd: Sequence[str], what: str, timeout: float, limit_key: str,
                error: type[UtvmError] = PlatformError) -> None:
    """Run a command of the board.toml in its directory, stdin closed, in a process group of its own;
    `error` of one line if it cannot start, exits non-zero (with the last line it printed) or runs longer
    than `timeout` seconds (`limit_key` says where to raise the limit). On the time limit or on any exception
    (Ctrl-C) the whole group is killed. Processes it leaves running (a debug server, QEMU) are not waited
    for: once the command exits, what its output pipe holds is read and the pipe closed."""
    cmd = list(cmd)
    shown_cmd = shown(" ".join(cmd))  # one line, whatever the board.toml's arguments hold
    try:
        proc = subprocess.Popen(cmd, cwd=config.path.parent, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, start_new_session=True)
    except FileNotFoundError:
        raise error(f"{config.path}: {what}: program {cmd[0]!r} not found") from None
    except OSError as exc:
        raise error(f"{config.path}: {what}: cannot run {cmd[0]!r}: {exc.strerror or exc}") from None
    assert proc.stdout is not None
    tail = bytearray()
    try:
        status = _wait_reading(proc, timeout, tail)
    except BaseException:
        _kill_group(proc)
        raise
    finally:
        proc.stdout.close()
    if status is None:
        _kill_group(proc)
        raise error(f"{config.path}: {what} did not finish within {timeout:g} s and was stopped ({limit_key} "
                    f"raises the limit): {shown_cmd}")
    if status != 0:
        lines = [ln.strip() for ln in tail.decode("utf-8", "replace").splitlines() if ln.strip()]
        last = f"; it said: {shown(lines[-1][:300])}" if lines else ""
        raise error(f"{config.path}: {what} failed (exit {status}): {shown_cmd}{last}")


def _wait_reading(proc: subprocess.Popen[bytes], timeout: float, tail: bytearray) -> int | None:
    """Wait up to `timeout` s for `proc` to exit, keeping the last OUTPUT_TAIL_BYTES of its output in `tail`;
    its exit status, or None on the time limit. Never blocks on the pipe: a process the command left behind
    may hold it open forever."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    os.set_blocking(fd, False)
    deadline = time.monotonic() + timeout
    pidfd = -1
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ, "out")
        try:
            pidfd = os.pidfd_open(proc.pid)  # readable when the process exits (Linux 5.3)
            sel.register(pidfd, selectors.EVENT_READ, "exit")
        except (AttributeError, OSError):
            pidfd = -1
        try:
            while True:
                if proc.poll() is not None:
                    _drain(fd, tail)
                    return proc.returncode
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                # Without a pidfd the exit is noticed by polling: at most 50 ms late.
                for key, _ in sel.select(remaining if pidfd >= 0 else min(remaining, 0.05)):
                    if key.data == "out" and not _drain(fd, tail):
                        sel.unregister(fd)  # end of output; the exit comes through the pidfd or the poll
        finally:
            if pidfd >= 0:
                os.close(pidfd)


def _drain(fd: int, tail: bytearray) -> bool:
    """Read what the non-blocking `fd` holds into `tail` (keeping its last OUTPUT_TAIL_BYTES); False at the
    end of the output."""
    while True:
        try:
            chunk = os.read(fd, 1 << 16)
        except BlockingIOError:
            return True
        except OSError:
            return False
        if not chunk:
            return False
        tail += chunk
        if len(tail) > OUTPUT_TAIL_BYTES:
            del tail[:-OUTPUT_TAIL_BYTES]


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """Kill `proc` and every process of its group (it leads one: start_new_session), and reap it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.kill()
    except OSError:
        pass
    try:
        proc.wait(timeout=5.0)  # SIGKILL is not ignorable: only a process stuck in the kernel outlives this
    except subprocess.TimeoutExpired:
        log.warning("process %d did not die after SIGKILL", proc.pid)


class BoardSession(Session):
    """A Session that leaves the board serving when it closes: no RPC Shutdown (after which utvm's firmware
    returns from main()), so the next session on the port (`SerialBoardPlatform.connect`) finds it running.
    Then the board's [link] reset_command runs, if it has one; when it fails, the error is raised unless an
    error is already on its way out (`force`), which it must not hide: then it is logged."""

    def close(self, force: bool = False) -> None:
        if self._closed:
            return
        super().close(force=True)
        transport = self.transport
        if isinstance(transport, SerialBoardTransport):
            try:
                transport.reset_board()
            except (PlatformError, TransportError) as exc:
                if not force:
                    raise
                log.warning("%s", exc)


class SerialBoardPlatform(CortexMFirmware):
    """A real board on a serial port, described by a board.toml (see the module docstring)."""

    name: ClassVar[str] = "serial-board"
    target = _ConfiguredTarget()

    def __init__(self, board_config: str | Path | None = None) -> None:
        self.config = load_board_config(board_config) if board_config is not None else active_board_config()
        self.board = board_of(self.config)

    # --- building ---------------------------------------------------------------------------------------
    def board_files(self) -> dict[str, str | bytes]:
        """board/ of the project beyond the portable template files: utvm's glue and the board's own files.
        Each of these is a regular file of at most MAX_BOARD_FILE_BYTES (else a UsageError naming the key),
        copied as bytes (a vendor file in Latin-1 builds as it is). The names of the board's own files were
        checked when the config was read (none is utvm's, no two alike); a header beside them that has the
        name of one of utvm's files, or of a header copied before it, is left out."""
        cfg = self.config
        files: dict[str, str | bytes] = {name: (TEMPLATE_DIR / name).read_text() for name in GLUE_FILES}
        ours = utvm_board_file_names()
        assert cfg.linker_script is not None and cfg.startup is not None
        named = [("linker_script", cfg.linker_script), ("startup", cfg.startup),
                 *((f"sources[{i}]", s) for i, s in enumerate(cfg.sources))]

        def content(key: str, p: Path) -> bytes:
            return read_regular_file(p, MAX_BOARD_FILE_BYTES, f"the board file {p.name!r}",
                                     f"{cfg.path}: [build] {key}")

        for key, p in named:
            files[p.name] = content(key, p)
        for key, p in named[1:]:  # a driver's own headers, next to it (utvm's files keep their names)
            for h in sorted(p.parent.glob("*.h")):
                if h.name not in ours and h.name not in files:
                    files[h.name] = content(f"{key} (a header beside it)", h)
        return files

    def firmware_spec(
        self,
        *,
        with_test_functions: bool = True,
        crt_config: Mapping[str, int | str] | None = None,
        extra_sources: Sequence[Path | str] = (),
        system_lib_sources: Sequence[Path | str] = (),
        include_dirs: Sequence[Path | str] = (),
        crt_config_file: Path | str | None = None,
    ) -> FirmwareSpec:
        """The QEMU platform's RPC firmware project, with this board's files in place of the MPS2 ones.
        The board's workspace_bytes replaces the QEMU default (a user's crt_config_file still decides)."""
        cfg = self.config
        workspace = {"TVM_CRT_WORKSPACE_SIZE_BYTES": cfg.workspace_bytes}
        spec = super().firmware_spec(
            with_test_functions=with_test_functions,
            crt_config={**(workspace if crt_config_file is None else {}), **(crt_config or {})},
            extra_sources=extra_sources,
            system_lib_sources=system_lib_sources,
            include_dirs=[*include_dirs, *cfg.include_dirs],
            crt_config_file=crt_config_file,
        )
        if spec.crt_config_fallbacks:
            spec = dataclasses.replace(spec, crt_config_fallbacks={**spec.crt_config_fallbacks, **workspace})
        defines = [d for d in spec.defines if not d.startswith("UTVM_PLATFORM_MEMORY_BYTES=")]
        defines += [f"UTVM_PLATFORM_MEMORY_BYTES={cfg.memory_bytes}u", f"UTVM_BOARD_BAUD={cfg.baud}u",
                    f"UTVM_CPU_CLOCK_HZ={cfg.clock_hz}u"]
        board_files: dict[str, str | bytes] = {}
        linker = "none"
        if cfg.build_command is None:
            board_files = self.board_files()
            assert cfg.linker_script is not None
            linker = cfg.linker_script.name
        else:
            board_files = {name: (TEMPLATE_DIR / name).read_text() for name in GLUE_FILES}
        return dataclasses.replace(
            spec,
            defines=defines,
            extra_cflags=[*spec.extra_cflags, *cfg.cflags],
            template_board_files=PORTABLE_BOARD_FILES,
            board_files=board_files,
            linker_script=linker,
        )

    def _build_elf(self, spec: FirmwareSpec) -> Path:
        """utvm's build of the firmware from the board's files, or the board's own `[build] command`."""
        if self.config.build_command is None:
            return super()._build_elf(spec)
        return self._build_with_command(spec)

    def _build_with_command(self, spec: FirmwareSpec) -> Path:
        """Generate utvm's sources into a project directory of the cache and run the user's command on it
        (every time: the command's own inputs are not known to utvm)."""
        cfg = self.config
        assert cfg.build_command is not None
        with tempfile.TemporaryDirectory(prefix="utvm-serial-gen-") as tmp:
            staged = generate_project(spec, Path(tmp) / "project")
            key = cc.hash_inputs([staged], [cfg.name, *cfg.build_command])
            slug = cfg.name.replace(" ", "_")  # config.py's names: 1-64 of letters, digits, space, _ . + -
            project = cc.cache_dir() / "serial-board" / f"{slug}-{key[:16]}"
            if project.exists():
                shutil.rmtree(project)
            shutil.copytree(staged, project)
        elf = project / "build" / "firmware.elf"
        elf.parent.mkdir(parents=True, exist_ok=True)
        cmd = expand(cfg.build_command, {"project": str(project), "elf": str(elf)})
        run_command(cfg, cmd, "[build] command", cfg.build_timeout_s, "[build] timeout_s")
        if not elf.is_file():
            raise PlatformError(f"{cfg.path}: [build] command succeeded but wrote no ELF at {{elf}} ({elf})")
        return elf

    # --- flashing and connecting --------------------------------------------------------------------------
    def flash(self, firmware: Path | str) -> None:
        """Write `firmware` to the board: `pyocd flash -t TARGET` or the board's `[flash] command`."""
        cfg = self.config
        elf = Path(firmware)
        if not elf.is_file():
            raise PlatformError(f"{self.name}: firmware {str(elf)!r} does not exist (build it first)")
        if cfg.pyocd_target is not None:
            pyocd = shutil.which("pyocd")
            if pyocd is None:
                raise PlatformError(f"{cfg.path}: [flash] pyocd_target needs pyocd, which is not on PATH "
                                    "(pip install pyocd), or give [flash] command instead")
            argv: tuple[str, ...] = (pyocd, "flash", "-t", cfg.pyocd_target, "{elf}")
        else:
            assert cfg.flash_command is not None
            argv = cfg.flash_command
        run_board_command(cfg, argv, "[flash]", elf, timeout=cfg.flash_timeout_s)

    def connect(self, firmware: Path | None = None, **session_kwargs: Any) -> Any:
        """Open the board's port and start an RPC session (the board is not flashed). A board that does not
        answer within [link] handshake_timeout_s fails with a SessionTimeoutError naming the port, after
        [link] reconnect_attempts more tries."""
        cfg = self.config
        kwargs = {"handshake_timeout_s": cfg.handshake_timeout_s, "reply_timeout_s": cfg.call_timeout_s,
                  **session_kwargs}
        tries = 1 + cfg.reconnect_attempts
        for attempt in range(tries):
            if attempt:
                time.sleep(REOPEN_DELAY_S)  # e.g. a USB serial port coming back after the board reset
            try:
                transport = SerialBoardTransport(cfg, firmware)
            except TransportError as exc:
                if attempt + 1 < tries:
                    continue
                raise TransportError(f"board {cfg.name}: {exc} ({cfg.path}: [board] port)") from None
            try:
                return BoardSession(transport, **kwargs)
            except (SessionTimeoutError, SessionTerminatedError) as exc:
                transport.abort()
                if attempt + 1 < tries:
                    continue
                if isinstance(exc, SessionTimeoutError):
                    raise SessionTimeoutError(
                        f"board {cfg.name} on {cfg.port} did not answer the session handshake within "
                        f"{kwargs['handshake_timeout_s']:g} s" + (f" ({tries} tries)" if tries > 1 else "") +
                        "; is it flashed with utvm's firmware, on this port, at "
                        f"{cfg.baud} baud?") from None
                raise LinkClosedError(f"board {cfg.name} on {cfg.port}: the link failed while starting the "
                                      f"session: {exc}") from None
            except BaseException:
                transport.abort()
                raise
        raise AssertionError("unreachable")

    def start(self, firmware: Path | str, **session_kwargs: Any) -> Any:
        """Flash `firmware` and return a connected utvm.rpc.Session over the board's UART."""
        path = Path(firmware)
        self.flash(path)
        return self.connect(path, **session_kwargs)
