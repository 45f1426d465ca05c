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
"""

from __future__ import annotations

import dataclasses
import logging
import shutil
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
)
from utvm.platform.qemu.boards import Board, cross_tool
from utvm.platform.qemu.platform import CortexMFirmware
from utvm.platform.qemu.project import FirmwareSpec, generate_project
from utvm.platform.serial_board.config import BoardConfig, active_board_config, load_board_config
from utvm.rpc import Session
from utvm.rpc.transport import SerialTransport
from utvm.support import cc

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


class _ConfiguredTarget:
    """`SerialBoardPlatform.target`: the cpu of the board.toml in use (the class has no fixed CPU)."""

    def __get__(self, obj: SerialBoardPlatform | None, owner: type) -> str:
        config = obj.config if obj is not None else active_board_config()
        return config.cpu


def board_of(config: BoardConfig) -> Board:
    """The compiler flags of the board's CPU, as a QEMU-platform `Board` (machine: none)."""
    from utvm.target import get_target

    t = get_target(config.cpu)
    assert t.mcpu is not None
    float_flags = ("-mfloat-abi=hard", f"-mfpu={t.fpu}") if t.fpu else ("-mfloat-abi=soft",)
    return Board(config.name, "none", t.mcpu, float_flags)


class SerialBoardTransport(SerialTransport):
    """The board's UART (pyserial), and the board's reset command (`reset_board`)."""

    def __init__(self, config: BoardConfig, firmware: Path | None = None) -> None:
        super().__init__(config.port, baudrate=config.baud)
        self.config = config
        self.firmware = firmware

    def describe(self) -> str:
        return f"board {self.config.name} on serial port {self.config.port}"

    def reset_board(self) -> None:
        """Run [link] reset_command (nothing when the board.toml has none)."""
        if self.config.reset_command is not None:
            run_board_command(self.config, self.config.reset_command, "[link] reset_command", self.firmware)


def run_board_command(config: BoardConfig, argv: Sequence[str], what: str, elf: Path | None,
                      timeout: float | None = None) -> None:
    """Run a flash or reset command of board.toml with its placeholders filled; PlatformError (one line) if
    it fails. {hex} and {bin} are made from the ELF with arm-none-eabi-objcopy when the command uses them."""
    with tempfile.TemporaryDirectory(prefix="utvm-flash-") as tmp:
        values = {"port": config.port, "elf": str(elf or ""), "hex": "", "bin": ""}
        for kind, fmt in (("hex", "ihex"), ("bin", "binary")):
            if elf is not None and any("{" + kind + "}" in a for a in argv):
                out = Path(tmp) / f"{elf.stem}.{kind}"
                cc.run([cross_tool("objcopy"), "-O", fmt, str(elf), str(out)], what=f"objcopy -O {fmt}")
                values[kind] = str(out)
        cmd = [a.format(**values) for a in argv]
        try:
            proc = subprocess.run(cmd, cwd=config.path.parent, stdin=subprocess.DEVNULL, capture_output=True,
                                  text=True, errors="replace", timeout=timeout)
        except FileNotFoundError:
            raise PlatformError(f"{config.path}: {what}: program {cmd[0]!r} not found") from None
        except OSError as exc:
            raise PlatformError(f"{config.path}: {what}: cannot run {cmd[0]!r}: {exc}") from None
        except subprocess.TimeoutExpired:
            raise PlatformError(f"{config.path}: {what} did not finish within {timeout:g} s: "
                                f"{' '.join(cmd)}") from None
    if proc.returncode != 0:
        lines = [ln.strip() for ln in (proc.stderr + proc.stdout).splitlines() if ln.strip()]
        last = f"; it said: {lines[-1][:300]}" if lines else ""
        raise PlatformError(f"{config.path}: {what} failed (exit {proc.returncode}): {' '.join(cmd)}{last}")


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
            except PlatformError as exc:
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
    def board_files(self) -> dict[str, str]:
        """board/ of the project beyond the portable template files: utvm's glue and the board's own files."""
        cfg = self.config
        files = {name: (TEMPLATE_DIR / name).read_text() for name in GLUE_FILES}
        taken = {*PORTABLE_BOARD_FILES, *GLUE_FILES}
        assert cfg.linker_script is not None and cfg.startup is not None
        named = [("linker_script", cfg.linker_script), ("startup", cfg.startup),
                 *((f"sources[{i}]", s) for i, s in enumerate(cfg.sources))]
        for key, p in named:
            if p.name in taken:
                raise PlatformError(f"{cfg.path}: [build] {key}: a board file is already named {p.name!r} "
                                    "(rename it)")
            taken.add(p.name)
            files[p.name] = p.read_text()
        for _key, p in named[1:]:  # a driver's own headers, next to it (utvm's files keep their names)
            for h in sorted(p.parent.glob("*.h")):
                if h.name not in taken:
                    files.setdefault(h.name, h.read_text())
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
        board_files: dict[str, str] = {}
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
            project = cc.cache_dir() / "serial-board" / f"{cfg.name}-{key[:16]}"
            if project.exists():
                shutil.rmtree(project)
            shutil.copytree(staged, project)
        elf = project / "build" / "firmware.elf"
        elf.parent.mkdir(parents=True, exist_ok=True)
        cmd = [a.format(project=str(project), elf=str(elf)) for a in cfg.build_command]
        try:
            proc = subprocess.run(cmd, cwd=cfg.path.parent, stdin=subprocess.DEVNULL, capture_output=True,
                                  text=True, errors="replace")
        except OSError as exc:
            raise PlatformError(f"{cfg.path}: [build] command: cannot run {cmd[0]!r}: {exc}") from None
        if proc.returncode != 0:
            lines = [ln.strip() for ln in (proc.stderr + proc.stdout).splitlines() if ln.strip()]
            last = f"; it said: {lines[-1][:300]}" if lines else ""
            raise PlatformError(f"{cfg.path}: [build] command failed (exit {proc.returncode}): "
                                f"{' '.join(cmd)}{last}")
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
