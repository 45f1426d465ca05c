"""board.toml: the description of a real board for the `serial-board` platform (docs/platforms.md).

    [board]   name, cpu (a Cortex-M target of utvm.target), clock_hz, port, baud
    [build]   linker_script, startup, sources, include_dirs, cflags, memory_bytes, workspace_bytes
              -- or -- command (builds the user's own project from utvm's generated sources)
    [flash]   pyocd_target -- or -- command, and timeout_s
    [link]    handshake_timeout_s, call_timeout_s, reset_command, reconnect_attempts

Relative paths are taken from the directory of the board.toml. Commands are lists of strings (no shell);
`{elf}`, `{hex}`, `{bin}`, `{port}` (flash and reset commands) and `{project}`, `{elf}` (build command) are
replaced. Every problem is a `UsageError` of one line naming the file, the table and the key.

Which board.toml is used: `--board-config` on the command line (`use_board_config`), else the environment
variable UTVM_BOARD_CONFIG.
"""

from __future__ import annotations

import math
import os
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from utvm.errors import UsageError

ENV_VAR = "UTVM_BOARD_CONFIG"
FLASH_PLACEHOLDERS = ("elf", "hex", "bin", "port")
BUILD_PLACEHOLDERS = ("project", "elf")

DEFAULT_MEMORY_BYTES = 64 * 1024
DEFAULT_WORKSPACE_BYTES = 64 * 1024
DEFAULT_FLASH_TIMEOUT_S = 300.0
DEFAULT_HANDSHAKE_TIMEOUT_S = 10.0
DEFAULT_CALL_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class BoardConfig:
    """A parsed, checked board.toml (paths absolute)."""

    path: Path
    name: str
    cpu: str
    clock_hz: int
    port: str
    baud: int
    # [build]: either the board files ...
    linker_script: Path | None
    startup: Path | None
    sources: tuple[Path, ...]
    include_dirs: tuple[Path, ...]
    cflags: tuple[str, ...]
    memory_bytes: int
    workspace_bytes: int
    # ... or the user's own build
    build_command: tuple[str, ...] | None
    # [flash]
    pyocd_target: str | None
    flash_command: tuple[str, ...] | None
    flash_timeout_s: float
    # [link]
    handshake_timeout_s: float
    call_timeout_s: float
    reset_command: tuple[str, ...] | None
    reconnect_attempts: int


class _Table:
    """One table of the file; every read names file, table and key in its error."""

    def __init__(self, path: Path, name: str, data: Any, required: bool) -> None:
        self.path, self.name = path, name
        if data is None:
            if required:
                raise UsageError(f"{path}: missing table [{name}]")
            data = {}
        if not isinstance(data, dict):
            raise UsageError(f"{path}: [{name}] must be a table, got {_kind(data)}")
        self.data: dict[str, Any] = data
        self.used: set[str] = set()

    def error(self, key: str, what: str) -> UsageError:
        return UsageError(f"{self.path}: [{self.name}] {key}: {what}")

    def get(self, key: str, kind: type | tuple[type, ...], required: bool) -> Any:
        self.used.add(key)
        if key not in self.data:
            if required:
                raise self.error(key, "missing")
            return None
        value = self.data[key]
        if isinstance(value, bool) or not isinstance(value, kind):
            want = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
            raise self.error(key, f"expected {_article(want)}, got {_kind(value)} {_short(value)}")
        return value

    def string(self, key: str, required: bool = True) -> str | None:
        value = self.get(key, str, required)
        if value is not None and not value.strip():
            raise self.error(key, "is empty")
        if value is not None and "\0" in value:
            raise self.error(key, "contains a NUL byte")
        return value

    def positive_int(self, key: str, required: bool = True, default: int | None = None) -> int:
        value = self.get(key, int, required)
        if value is None:
            assert default is not None
            return default
        if value <= 0:
            raise self.error(key, f"must be greater than 0, got {value}")
        return value

    def seconds(self, key: str, default: float) -> float:
        value = self.get(key, (int, float), False)
        if value is None:
            return default
        if not math.isfinite(value) or value <= 0:
            raise self.error(key, f"must be a finite number of seconds greater than 0, got {value}")
        return float(value)

    def path_(self, key: str, required: bool, kind: str = "file") -> Path | None:
        value = self.string(key, required)
        return None if value is None else self.resolve(key, value, kind)

    def resolve(self, key: str, value: str, kind: str) -> Path:
        p = Path(value)
        if not p.is_absolute():
            p = self.path.parent / p
        if kind == "file" and not p.is_file():
            raise self.error(key, f"{value!r} is not a file")
        if kind == "dir" and not p.is_dir():
            raise self.error(key, f"{value!r} is not a directory")
        return p.resolve()

    def strings(self, key: str, required: bool = False, nonempty: bool = False) -> tuple[str, ...] | None:
        value = self.get(key, list, required)
        if value is None:
            return None
        for i, item in enumerate(value):
            if not isinstance(item, str):
                raise self.error(f"{key}[{i}]", f"expected a string, got {_kind(item)} {_short(item)}")
            if "\0" in item:
                raise self.error(f"{key}[{i}]", "contains a NUL byte")
        if nonempty and not value:
            raise self.error(key, "is an empty list")
        return tuple(value)

    def command(self, key: str, placeholders: tuple[str, ...]) -> tuple[str, ...] | None:
        argv = self.strings(key, nonempty=True)
        if argv is None:
            return None
        for i, arg in enumerate(argv):
            try:
                arg.format(**{p: "" for p in placeholders})
            except (KeyError, IndexError, ValueError) as exc:
                allowed = ", ".join("{" + p + "}" for p in placeholders)
                raise self.error(f"{key}[{i}]", f"bad placeholder in {arg!r} ({exc}); allowed: {allowed} "
                                                "(write {{ and }} for literal braces)") from None
        return argv

    def finish(self) -> None:
        unknown = sorted(set(self.data) - self.used)
        if unknown:
            raise self.error(unknown[0], f"unknown key (known: {', '.join(sorted(self.used))})")


def _article(word: str) -> str:
    return {"str": "a string", "int": "an integer", "list": "a list of strings", "float": "a number",
            "int or float": "a number"}.get(word, word)


def _kind(value: Any) -> str:
    names = {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "a list",
             dict: "a table"}
    return names.get(type(value), type(value).__name__)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def cortex_m_targets() -> list[str]:
    from utvm.target import TARGETS

    return [name for name, t in TARGETS.items() if t.is_cortex_m]


def load_board_config(path: str | os.PathLike[str]) -> BoardConfig:
    """Parse and check a board.toml (see the module docstring)."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise UsageError(f"{path}: cannot read the board configuration: {reason}") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path}: not valid TOML: {exc}") from None
    path = path.resolve()
    known = ("board", "build", "flash", "link")
    for key in data:
        if key not in known:
            raise UsageError(f"{path}: unknown table [{key}] (known: {', '.join(f'[{k}]' for k in known)})")

    board = _Table(path, "board", data.get("board"), required=True)
    name = board.string("name")
    cpu = board.string("cpu")
    if cpu not in cortex_m_targets():
        raise board.error("cpu", f"{cpu!r} is not a Cortex-M CPU utvm knows ({', '.join(cortex_m_targets())})")
    clock_hz = board.positive_int("clock_hz")
    port = board.string("port")
    baud = board.positive_int("baud")
    board.finish()

    build = _Table(path, "build", data.get("build"), required=True)
    build_command = build.command("command", BUILD_PLACEHOLDERS)
    files_keys = ("linker_script", "startup", "sources", "include_dirs", "cflags")
    if build_command is not None:
        both = [k for k in files_keys if k in build.data]
        if both:
            raise build.error(both[0], "cannot be given with command (either the board files or a command "
                                       "that builds your own project)")
    linker_script = build.path_("linker_script", required=build_command is None)
    startup = build.path_("startup", required=build_command is None)
    sources = tuple(build.resolve(f"sources[{i}]", s, "file") for i, s in enumerate(build.strings("sources") or ()))
    include_dirs = tuple(build.resolve(f"include_dirs[{i}]", d, "dir")
                         for i, d in enumerate(build.strings("include_dirs") or ()))
    for key, p in [("startup", startup), *((f"sources[{i}]", s) for i, s in enumerate(sources))]:
        if p is not None and p.suffix != ".c":
            raise build.error(key, f"{p.name!r} is not a C file (.c): the firmware's Makefile compiles C only")
    cflags = build.strings("cflags") or ()
    memory_bytes = build.positive_int("memory_bytes", required=False, default=DEFAULT_MEMORY_BYTES)
    workspace_bytes = build.positive_int("workspace_bytes", required=False, default=DEFAULT_WORKSPACE_BYTES)
    build.finish()

    flash = _Table(path, "flash", data.get("flash"), required=True)
    pyocd_target = flash.string("pyocd_target", required=False)
    flash_command = flash.command("command", FLASH_PLACEHOLDERS)
    if (pyocd_target is None) == (flash_command is None):
        raise flash.error("pyocd_target", "give exactly one of pyocd_target and command" +
                          (" (both are set)" if pyocd_target else ""))
    flash_timeout_s = flash.seconds("timeout_s", DEFAULT_FLASH_TIMEOUT_S)
    flash.finish()

    link = _Table(path, "link", data.get("link"), required=False)
    handshake = link.seconds("handshake_timeout_s", DEFAULT_HANDSHAKE_TIMEOUT_S)
    call = link.seconds("call_timeout_s", DEFAULT_CALL_TIMEOUT_S)
    reset_command = link.command("reset_command", FLASH_PLACEHOLDERS)
    attempts = link.get("reconnect_attempts", int, False)
    if attempts is None:
        attempts = 0
    elif attempts < 0:
        raise link.error("reconnect_attempts", f"must be 0 or more, got {attempts}")
    link.finish()

    return BoardConfig(
        path=path, name=str(name), cpu=str(cpu), clock_hz=clock_hz, port=str(port), baud=baud,
        linker_script=linker_script, startup=startup, sources=sources, include_dirs=include_dirs,
        cflags=tuple(cflags), memory_bytes=memory_bytes, workspace_bytes=workspace_bytes,
        build_command=build_command, pyocd_target=pyocd_target, flash_command=flash_command,
        flash_timeout_s=flash_timeout_s, handshake_timeout_s=handshake, call_timeout_s=call,
        reset_command=reset_command, reconnect_attempts=attempts,
    )


# --- which board.toml ------------------------------------------------------------------------------------
_active: Path | None = None


def use_board_config(path: str | os.PathLike[str] | None) -> None:
    """Make `path` the board.toml of the serial-board platform (None: back to $UTVM_BOARD_CONFIG)."""
    global _active
    _active = None if path is None else Path(path)


def active_board_config() -> BoardConfig:
    """The board.toml in use: use_board_config's, else $UTVM_BOARD_CONFIG; a UsageError if neither."""
    path: Path | None = _active
    if path is None:
        env = os.environ.get(ENV_VAR)
        if env:
            path = Path(env)
    if path is None:
        raise UsageError(f"the serial-board platform needs a board description: pass --board-config "
                         f"board.toml or set {ENV_VAR} (docs/platforms.md)")
    return load_board_config(path)
