"""board.toml: the description of a real board for the `serial-board` platform (docs/platforms.md).

    [board]   name, cpu (a Cortex-M target of utvm.target), clock_hz, port, baud
    [build]   linker_script, startup, sources, include_dirs, cflags, memory_bytes, workspace_bytes
              -- or -- command (builds the user's own project from utvm's generated sources), timeout_s
    [flash]   pyocd_target -- or -- command, and timeout_s
    [link]    handshake_timeout_s, call_timeout_s, reset_command, reset_timeout_s, reconnect_attempts

Relative paths are taken from the directory of the board.toml. Commands are lists of strings (no shell);
`{elf}`, `{hex}`, `{bin}`, `{port}` (flash and reset commands) and `{project}`, `{elf}` (build command) are
replaced -- those names only, bare: no format spec, conversion, index or attribute is ever evaluated
(`expand`). Every command has a time limit ([build] timeout_s, [flash] timeout_s, [link] reset_timeout_s).
Every problem is a `UsageError` of one line naming the file, the table and the key.

The file itself is untrusted input: it must be a regular file (a FIFO is never waited on, a device never
read) of at most MAX_BOARD_CONFIG_BYTES, nested at most MAX_NESTING levels (tomllib recurses once per level
and keeps every prefix of a dotted key), and the values written into the firmware's Makefile ([board] name,
[build] cflags, the board files' names) hold no character make or the shell would interpret.

Which board.toml is used: `--board-config` on the command line (`use_board_config`), else the environment
variable UTVM_BOARD_CONFIG.
"""

from __future__ import annotations

import math
import os
import re
import string
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from utvm.errors import UsageError
from utvm.support import files

ENV_VAR = "UTVM_BOARD_CONFIG"
FLASH_PLACEHOLDERS = ("elf", "hex", "bin", "port")
BUILD_PLACEHOLDERS = ("project", "elf")

DEFAULT_MEMORY_BYTES = 64 * 1024
DEFAULT_WORKSPACE_BYTES = 64 * 1024
#: The most [build] memory_bytes / workspace_bytes: the Cortex-M SRAM region (0x20000000-0x3fffffff).
MAX_RAM_BYTES = 512 * 1024 * 1024
#: [build] cflags that make the compiler write files the firmware's Makefile does not own.
_CFLAG_WRITES_FILES = ("-o", "-M", "-save-temps", "-fdump", "-dump", "--output", "-aux-info", "-fprofile",
                       "-ftest-coverage", "--coverage")
DEFAULT_FLASH_TIMEOUT_S = 300.0
DEFAULT_HANDSHAKE_TIMEOUT_S = 10.0
DEFAULT_CALL_TIMEOUT_S = 30.0
DEFAULT_BUILD_TIMEOUT_S = 1800.0
DEFAULT_RESET_TIMEOUT_S = 30.0
MAX_RECONNECT_ATTEMPTS = 1000
#: The longest time limit a board.toml may set (11.6 days): longer ones overflow the system's timers.
MAX_SECONDS = 1e6
#: The largest board.toml read (a real one is a few hundred bytes); a bigger file is refused unread.
MAX_BOARD_CONFIG_BYTES = 1 << 20
#: The largest board file ([build] linker_script, startup, sources and the headers beside them) copied.
MAX_BOARD_FILE_BYTES = 16 << 20
#: The deepest nesting of a board.toml: the brackets of headers, arrays and inline tables plus the parts of
#: a dotted key (a real one needs 3: a table, a key, a list).
MAX_NESTING = 16
#: [board] name: it names the firmware's directory in the cache and is written into its Makefile.
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9 _.+-]{0,63}")
#: One [build] cflags item: one compiler argument that make and the shell pass on unchanged.
_CFLAG = re.compile(r"[A-Za-z0-9_+\-=./,:@%]+")
_CFLAG_CHARS = "letters, digits and _ + - = . / , : @ %"
#: The name of a board file ([build] linker_script, startup, sources): the Makefile globs and names them.
_FILE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]*")


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
    # the time limits of [build] command and [link] reset_command
    build_timeout_s: float = DEFAULT_BUILD_TIMEOUT_S
    reset_timeout_s: float = DEFAULT_RESET_TIMEOUT_S


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

    def positive_int(self, key: str, required: bool = True, default: int | None = None,
                     maximum: int = 2**32 - 1, why: str = "a 32-bit value of the firmware") -> int:
        """An integer of 1 to `maximum` (by default 2**32 - 1: each becomes a uint32_t macro of the firmware)."""
        value = self.get(key, int, required)
        if value is None:
            assert default is not None
            return default
        if value <= 0:
            raise self.error(key, f"must be greater than 0, got {_short(value)}")
        if value > maximum:
            raise self.error(key, f"must be at most {maximum} ({why}), got {_short(value)}")
        return value

    def seconds(self, key: str, default: float) -> float:
        value = self.get(key, (int, float), False)
        if value is None:
            return default
        try:
            seconds = float(value)
        except OverflowError:  # an integer beyond any float
            seconds = math.inf
        if not math.isfinite(seconds) or seconds <= 0:
            raise self.error(key, f"must be a finite number of seconds greater than 0, got {_short(value)}")
        if seconds > MAX_SECONDS:
            raise self.error(key, f"must be at most {MAX_SECONDS:g} seconds, got {_short(value)}")
        return seconds

    def path_(self, key: str, required: bool, kind: str = "file") -> Path | None:
        value = self.string(key, required)
        return None if value is None else self.resolve(key, value, kind)

    def resolve(self, key: str, value: str, kind: str) -> Path:
        p = Path(value)
        if not p.is_absolute():
            p = self.path.parent / p
        if kind == "file" and not p.is_file():
            raise self.error(key, f"{_short(value)} is not a file")
        if kind == "dir" and not p.is_dir():
            raise self.error(key, f"{_short(value)} is not a directory")
        p = p.resolve()
        if kind == "file" and not _FILE_NAME.fullmatch(p.name):
            raise self.error(key, f"the file name {_short(p.name)} holds characters the firmware's Makefile "
                                  "cannot take (use letters, digits and _ . + -)")
        return p

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
        if not argv[0].strip():
            raise self.error(f"{key}[0]", "the program is empty")
        for i, arg in enumerate(argv):
            problem = _placeholder_problem(arg, placeholders)
            if problem:
                allowed = ", ".join("{" + p + "}" for p in placeholders)
                raise self.error(f"{key}[{i}]", f"bad placeholder in {_short(arg)}: {problem}; allowed: "
                                                f"{allowed} (write {{{{ and }}}} for literal braces)")
        return argv

    def finish(self) -> None:
        unknown = sorted(set(self.data) - self.used)
        if unknown:
            raise self.error(_clip(unknown[0]), f"unknown key (known: {', '.join(sorted(self.used))})")


def _article(word: str) -> str:
    return {"str": "a string", "int": "an integer", "list": "a list of strings", "float": "a number",
            "int or float": "a number"}.get(word, word)


def _kind(value: Any) -> str:
    names = {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "a list",
             dict: "a table"}
    return names.get(type(value), type(value).__name__)


def _short(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**40:
        return f"an integer of {len(str(abs(value)))} digits"  # its first 37 digits would be no help
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


# --- command placeholders ---------------------------------------------------------------------------------

def _placeholder_problem(arg: str, allowed: Sequence[str]) -> str:
    """Why `arg` is not a command argument whose placeholders are bare names of `allowed` ("" if it is)."""
    try:
        fields = list(string.Formatter().parse(arg))
    except ValueError as exc:  # a lone { or }
        return str(exc).rstrip(".")
    for _text, name, spec, conversion in fields:
        if name is None:
            continue
        field = "{" + name + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "") + "}"
        if name not in allowed:
            return f"unknown placeholder {_short(field)}"
        if spec or conversion:
            return f"{_short(field)} has a format spec or conversion (write {{{name}}})"
    return ""


def placeholders_of(argv: Sequence[str]) -> set[str]:
    """The placeholder names a checked command (see `_Table.command`) uses."""
    return {name for arg in argv for _t, name, _s, _c in string.Formatter().parse(arg) if name}


def expand(argv: Sequence[str], values: Mapping[str, str]) -> list[str]:
    """A checked command with its placeholders replaced by `values`, verbatim (not str.format: no format
    spec, attribute or index is ever evaluated); {{ and }} become { and }."""
    out = []
    for arg in argv:
        parts = []
        for text, name, _spec, _conversion in string.Formatter().parse(arg):
            parts.append(text)
            if name is not None:
                parts.append(values[name])
        out.append("".join(parts))
    return out


# --- reading the file ---------------------------------------------------------------------------------------

def read_regular_file(path: Path, limit: int, what: str, where: str) -> bytes:
    """The bytes of `path` (`what` it is, e.g. "the board configuration"), a regular file of at most `limit`
    bytes (utvm.support.files.read_regular_file); anything else is a UsageError `<where>: <what>: <why>`."""
    return files.read_regular_file(path, limit, lambda why: UsageError(f"{where}: {what}: {why}"))[0]


def _read_board_toml(path: Path, origin: str) -> str:
    """The text of the board.toml at `path` (read_regular_file, at most MAX_BOARD_CONFIG_BYTES, UTF-8)."""
    where = f"{path}{origin}"
    data = read_regular_file(path, MAX_BOARD_CONFIG_BYTES, "the board configuration", where)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"{where}: the board configuration is not UTF-8 text (byte {exc.start} is "
                         f"0x{data[exc.start]:02x})") from None


#: Runs of a board.toml that cannot open, close or nest anything; and its four kinds of strings (skipped).
_PLAIN = re.compile(r"[^\"'#\[\]{}=,.\n]+")
_STRINGS = (
    ('"""', re.compile(r'"""(?:[^"\\]|\\.|"(?!""))*(?:"{3,5}|\Z)', re.DOTALL)),  # up to 2 quotes end it
    ("'''", re.compile(r"'''.*?(?:'{3,5}|\Z)", re.DOTALL)),
    ('"', re.compile(r'"(?:[^"\\\n]|\\.)*"?')),
    ("'", re.compile(r"'[^'\n]*'?")),
)


def _check_nesting(path: Path, text: str) -> None:
    """Refuse, naming the table and the key, a board.toml nested deeper than MAX_NESTING (brackets of
    headers, arrays and inline tables plus the dots of a dotted key): one linear scan, before tomllib."""
    depth = dots = 0
    i, n = 0, len(text)
    stmt = 0  # where the current top-level line (a key or a header) starts
    key: str | None = None  # the key whose value is being read
    table, header = "", False
    while i < n:
        m = _PLAIN.match(text, i)
        if m:
            i = m.end()
            continue
        c = text[i]
        if c == "#":
            j = text.find("\n", i)
            i = n if j < 0 else j
            continue
        if c in "\"'":
            for start, pattern in _STRINGS:
                if text.startswith(start, i):
                    m = pattern.match(text, i)
                    i = m.end() if m else n
                    break
            continue
        if c == "\n":
            if depth == 0:
                stmt, key, header, dots = i + 1, None, False, 0
            i += 1
            continue
        if c == ".":
            dots += 1
        elif c in "[{":
            header = header or (depth == 0 and key is None and c == "[")
            depth += 1
            dots = 0 if not header else dots
        elif c in "]}":
            depth = max(0, depth - 1)
            if depth == 0 and header:
                table = text[stmt:i + 1].strip().strip("[]").strip()
            dots = 0 if not header else dots
        else:  # = ,
            if c == "=" and depth == 0 and key is None:
                key = text[stmt:i].strip()
            dots = 0
        if depth + dots > MAX_NESTING:
            if header:
                where = f"table [{_clip(text[stmt:i + 1].strip().lstrip('[').strip())}]"
            else:
                where = f"[{_clip(table)}] {_clip(key if key is not None else text[stmt:i + 1].strip())}"
            raise UsageError(f"{path}: {where}: nested more than {MAX_NESTING} levels deep (arrays, inline "
                             "tables and dotted keys together; a board.toml needs 3)")
        i += 1


def _clip(text: str, width: int = 40) -> str:
    return text if len(text) <= width else text[:width - 3] + "..."


def cortex_m_targets() -> list[str]:
    from utvm.target import TARGETS

    return [name for name, t in TARGETS.items() if t.is_cortex_m]


def load_board_config(path: str | os.PathLike[str], *, origin: str = "") -> BoardConfig:
    """Parse and check a board.toml (see the module docstring). `origin` says, in the errors about the file
    itself, where its name came from (" (named by $UTVM_BOARD_CONFIG)")."""
    path = Path(path)
    text = _read_board_toml(path, origin)
    _check_nesting(path, text)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path}: not valid TOML: {exc}") from None
    except RecursionError:  # _check_nesting bounds the depth: a safety net all the same
        raise UsageError(f"{path}: nested too deeply to parse") from None
    except ValueError:  # an integer of more digits than int() converts
        raise UsageError(f"{path}: not valid TOML: an integer has too many digits") from None
    path = path.resolve()
    known = ("board", "build", "flash", "link")
    for key in data:
        if key not in known:
            raise UsageError(f"{path}: unknown table [{_clip(key)}] (known: {', '.join(f'[{k}]' for k in known)})")

    board = _Table(path, "board", data.get("board"), required=True)
    name = board.string("name")
    if not _NAME.fullmatch(str(name)):
        raise board.error("name", f"{_short(name)} must be 1 to 64 letters, digits, spaces and _ . + -, starting "
                                  "with a letter or digit (it names the firmware's build directory)")
    cpu = board.string("cpu")
    if cpu not in cortex_m_targets():
        raise board.error("cpu", f"{_short(cpu)} is not a Cortex-M CPU utvm knows ({', '.join(cortex_m_targets())})")
    clock_hz = board.positive_int("clock_hz")
    port = board.string("port")
    baud = board.positive_int("baud", maximum=2**31 - 1, why="the largest rate a serial driver takes")
    board.finish()

    build = _Table(path, "build", data.get("build"), required=True)
    build_command = build.command("command", BUILD_PLACEHOLDERS)
    files_keys = ("linker_script", "startup", "sources", "include_dirs", "cflags")
    if build_command is not None:
        both = [k for k in files_keys if k in build.data]
        if both:
            raise build.error(both[0], "cannot be given with command (either the board files or a command "
                                       "that builds your own project)")
    elif "timeout_s" in build.data:
        raise build.error("timeout_s", "limits [build] command, which is not given (utvm's own build of the "
                                       "board files needs none)")
    linker_script = build.path_("linker_script", required=build_command is None)
    startup = build.path_("startup", required=build_command is None)
    sources = tuple(build.resolve(f"sources[{i}]", s, "file") for i, s in enumerate(build.strings("sources") or ()))
    include_dirs = tuple(build.resolve(f"include_dirs[{i}]", d, "dir")
                         for i, d in enumerate(build.strings("include_dirs") or ()))
    for key, p in [("startup", startup), *((f"sources[{i}]", s) for i, s in enumerate(sources))]:
        if p is not None and p.suffix != ".c":
            raise build.error(key, f"{p.name!r} is not a C file (.c): the firmware's Makefile compiles C only")
    cflags = build.strings("cflags") or ()
    for i, flag in enumerate(cflags):
        if not flag:
            raise build.error(f"cflags[{i}]", "is empty")
        if not _CFLAG.fullmatch(flag):
            bad = next(ch for ch in flag if not _CFLAG.fullmatch(ch))
            raise build.error(f"cflags[{i}]", f"{_short(flag)} holds {bad!r}, which the firmware's Makefile or the "
                                              f"shell would interpret: one compiler argument per item, of "
                                              f"{_CFLAG_CHARS} (a macro needing more belongs in a header of "
                                              "include_dirs)")
        if flag.startswith(_CFLAG_WRITES_FILES):
            raise build.error(f"cflags[{i}]", f"{_short(flag)} makes the compiler write a file of its own choosing "
                                              "(outputs and dependency files are the firmware Makefile's): "
                                              "not allowed in cflags")
    from utvm.platform.serial_board.platform import utvm_board_file_names

    names: dict[str, str] = {}
    ours = utvm_board_file_names()
    for key, p in [("linker_script", linker_script), ("startup", startup),
                   *((f"sources[{i}]", s) for i, s in enumerate(sources))]:
        if p is None:
            continue
        if p.name in ours:
            raise build.error(key, f"{p.name!r} is the name of one of utvm's own firmware files (rename it)")
        if p.name in names:  # the Makefile copies board files by name into one directory
            raise build.error(key, f"{p.name!r} has the name of {names[p.name]} (board files are copied into one "
                                   "directory by name: rename one)")
        names[p.name] = key
    memory_bytes = build.positive_int("memory_bytes", required=False, default=DEFAULT_MEMORY_BYTES,
                                      maximum=MAX_RAM_BYTES, why="the Cortex-M SRAM region")
    workspace_bytes = build.positive_int("workspace_bytes", required=False, default=DEFAULT_WORKSPACE_BYTES,
                                         maximum=MAX_RAM_BYTES, why="the Cortex-M SRAM region")
    build_timeout_s = build.seconds("timeout_s", DEFAULT_BUILD_TIMEOUT_S)
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
    reset_timeout_s = link.seconds("reset_timeout_s", DEFAULT_RESET_TIMEOUT_S)
    attempts = link.get("reconnect_attempts", int, False)
    if attempts is None:
        attempts = 0
    elif not 0 <= attempts <= MAX_RECONNECT_ATTEMPTS:
        raise link.error("reconnect_attempts", f"must be 0 or more and at most {MAX_RECONNECT_ATTEMPTS}, got "
                                               f"{_short(attempts)}")
    link.finish()

    return BoardConfig(
        path=path, name=str(name), cpu=str(cpu), clock_hz=clock_hz, port=str(port), baud=baud,
        linker_script=linker_script, startup=startup, sources=sources, include_dirs=include_dirs,
        cflags=tuple(cflags), memory_bytes=memory_bytes, workspace_bytes=workspace_bytes,
        build_command=build_command, pyocd_target=pyocd_target, flash_command=flash_command,
        flash_timeout_s=flash_timeout_s, handshake_timeout_s=handshake, call_timeout_s=call,
        reset_command=reset_command, reconnect_attempts=attempts, build_timeout_s=build_timeout_s,
        reset_timeout_s=reset_timeout_s,
    )


# --- which board.toml ------------------------------------------------------------------------------------
_active: Path | None = None


def use_board_config(path: str | os.PathLike[str] | None) -> None:
    """Make `path` the board.toml of the serial-board platform (None: back to $UTVM_BOARD_CONFIG)."""
    global _active
    _active = None if path is None else Path(path)


def active_board_config() -> BoardConfig:
    """The board.toml in use: use_board_config's, else $UTVM_BOARD_CONFIG; a UsageError if neither."""
    if _active is not None:
        return load_board_config(_active)
    env = os.environ.get(ENV_VAR)
    if not env:
        raise UsageError(f"the serial-board platform needs a board description: pass --board-config "
                         f"board.toml or set {ENV_VAR} (docs/platforms.md)")
    return load_board_config(env, origin=f" (named by ${ENV_VAR})")
