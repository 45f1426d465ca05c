"""Argument types of the `utvm` command: each checks its value when the command line is parsed, so a bad
value is one line naming the option (exit status 2) before any work starts."""

from __future__ import annotations

import argparse
import math
import os
import re
import stat
import sys
from typing import Any, NoReturn

from utvm.support.files import path_kind

SEED_MAX = 2**64 - 1


class Parser(argparse.ArgumentParser):
    """argparse, with errors as one line (`utvm run: error: argument --seed: ...`) and exit status 2.

    No option is ever matched by a prefix (allow_abbrev=False, inherited by every subcommand's parser):
    `--crt-config X=1` must never be read as `--crt-config-file X=1`, and an option added later must never
    change what an old command line means."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["allow_abbrev"] = False
        super().__init__(*args, **kwargs)

    def parse_args(self, args: Any = None, namespace: Any = None) -> Any:  # noqa: ANN401 - argparse's own
        # argparse reports an unknown option of a subcommand from the top parser ("utvm: error: ..."): said
        # here by the subcommand's parser, so the line names the command as every other error does.
        parsed, extra = self.parse_known_args(args, namespace)
        if extra:
            command = getattr(parsed, "command", None)
            subs = [a for a in self._actions if isinstance(a, argparse._SubParsersAction)]  # noqa: SLF001
            owner = subs[0].choices.get(command, self) if subs and isinstance(command, str) else self
            owner.error(f"unrecognized arguments: {' '.join(extra)}")
        return parsed

    def error(self, message: str) -> NoReturn:
        from utvm.support.text import shown

        # The message quotes what was typed (or what a file held): escaped, so it stays one inert line.
        print(f"{self.prog}: error: {shown(message)} (see {self.prog} --help)", file=sys.stderr)
        raise SystemExit(2)


def _int(text: str) -> int:
    try:
        return int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None


def seed(text: str) -> int:
    """A random seed: an integer in [0, 2**64)."""
    value = _int(text)
    if not 0 <= value <= SEED_MAX:
        raise argparse.ArgumentTypeError(f"{value} is out of range: a seed is an integer from 0 to 2**64 - 1")
    return value


def positive_int(text: str) -> int:
    """An integer >= 1."""
    value = _int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} must be at least 1")
    return value


def repeat_count(text: str) -> int:
    """`utvm run --repeat`: 1 .. the time evaluator's limit in every evaluation firmware."""
    from utvm.evaluate import EVAL_MAX_REPEAT

    value = positive_int(text)
    if value > EVAL_MAX_REPEAT:
        raise argparse.ArgumentTypeError(f"{value} is over {EVAL_MAX_REPEAT}, the evaluation firmware's "
                                         "TVM_CRT_MAX_TIME_EVALUATOR_REPEAT")
    return value


def positive_seconds(text: str) -> float:
    """A finite number of seconds > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text} must be a finite number of seconds greater than 0")
    return value


def model_name(text: str) -> str:
    """A model name: a C identifier of at most MAX_MODEL_NAME characters (it prefixes generated symbols)."""
    from utvm.compiler.driver import MAX_MODEL_NAME

    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", text):
        raise argparse.ArgumentTypeError(f"{text[:60]!r} is not a C identifier ([A-Za-z_][A-Za-z0-9_]*)")
    if len(text) > MAX_MODEL_NAME:
        raise argparse.ArgumentTypeError(f"the name is {len(text)} characters long; at most {MAX_MODEL_NAME} "
                                         "(it prefixes every generated symbol and file name)")
    return text


def nonempty_path(text: str) -> str:
    """A path that is not empty (an empty -o never silently means a default name)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("the path is empty")
    if "\0" in text:
        raise argparse.ArgumentTypeError("the path contains a NUL byte")
    return text


def _stat(text: str, missing: str) -> os.stat_result:
    """os.stat of a path given on the command line (it follows symbolic links and opens nothing, so a FIFO
    or a device is looked at, never waited on or woken), or a one-line reason it has none."""
    nonempty_path(text)
    try:
        return os.stat(text)
    except FileNotFoundError:
        if os.path.lexists(text):
            raise argparse.ArgumentTypeError(f"{text!r}: a symbolic link to nothing (its target does not "
                                             "exist)") from None
        raise argparse.ArgumentTypeError(f"{text!r}: {missing}") from None
    except NotADirectoryError:
        raise argparse.ArgumentTypeError(f"{text!r}: a component of the path is not a directory") from None
    except PermissionError:
        raise argparse.ArgumentTypeError(f"{text!r}: permission denied (a directory on the way cannot be "
                                         "searched)") from None
    except (OSError, ValueError) as exc:  # too long, a symbolic link loop, ...
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise argparse.ArgumentTypeError(f"{text[:200]!r}: {reason.lower()}") from None


def _readable(text: str) -> None:
    """Open the regular file `text` for reading and close it (a permission denied is said now, by name).
    O_NONBLOCK: should the path have become a FIFO since it was looked at, the open does not wait."""
    try:
        fd = os.open(text, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except PermissionError:
        raise argparse.ArgumentTypeError(f"{text!r}: permission denied (the file cannot be read)") from None
    except OSError as exc:
        raise argparse.ArgumentTypeError(f"{text!r}: {(exc.strerror or str(exc)).lower()}") from None
    try:
        mode = os.fstat(fd).st_mode
    finally:
        os.close(fd)
    if not stat.S_ISREG(mode):
        raise argparse.ArgumentTypeError(f"{text!r} is {path_kind(mode)}, not a regular file")


def _regular_file(text: str, missing: str, kind: str) -> str:
    """An existing, readable regular file; a directory, FIFO, device or socket is refused by what it is, so
    nothing is ever waited on. The refusals say "<missing>" and "not a <kind>"."""
    mode = _stat(text, missing).st_mode
    if not stat.S_ISREG(mode):
        raise argparse.ArgumentTypeError(f"{text!r} is {path_kind(mode)}, not a {kind}")
    _readable(text)
    return text


def input_file(text: str) -> str:
    """A file the command reads (--tuning-log, --crt-config-file, ...)."""
    return _regular_file(text, "no such file", "regular file")


def input_dir(text: str) -> str:
    """An existing, searchable directory (`-I DIR`)."""
    mode = _stat(text, "no such directory").st_mode
    if not stat.S_ISDIR(mode):
        raise argparse.ArgumentTypeError(f"{text!r} is {path_kind(mode)}, not a directory")
    if not os.access(text, os.R_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"{text!r}: permission denied (the directory cannot be read)")
    return text


def model_file(text: str) -> str:
    """A model file (.tflite/.onnx) to read."""
    return _regular_file(text, "no such model file", "model file")


def model_or_mlf(text: str) -> str:
    """A model file or an MLF (a tar, or the directory it was extracted to): a readable regular file or a
    directory. The archive itself is checked when it is read (utvm.support.archive)."""
    mode = _stat(text, "no such model file or MLF").st_mode
    if stat.S_ISDIR(mode):
        return input_dir(text)
    if not stat.S_ISREG(mode):
        raise argparse.ArgumentTypeError(f"{text!r} is {path_kind(mode)}, not a model file or an MLF")
    _readable(text)
    return text


def platform_name(text: str) -> str:
    """A known platform (built-in or installed plugin)."""
    from utvm.platform import available_platforms

    known = available_platforms()
    if text not in known:
        raise argparse.ArgumentTypeError(f"unknown platform {text!r}; known platforms: {', '.join(known)}")
    return text


def board_config(text: str) -> str:
    """A board.toml of the serial-board platform, checked when the command line is parsed."""
    from utvm.errors import UsageError
    from utvm.platform.serial_board.config import load_board_config

    input_file(text)  # a FIFO or a device is refused by what it is, before anything opens it
    try:
        load_board_config(text)
    except UsageError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def add_board_config_option(p: argparse.ArgumentParser) -> None:
    """--board-config of the commands that take --platform (used by --platform serial-board)."""
    p.add_argument("--board-config", type=board_config, metavar="BOARD.toml",
                   help="the board of --platform serial-board (default: $UTVM_BOARD_CONFIG; docs/platforms.md)")


def add_budget_options(p: argparse.ArgumentParser) -> None:
    """--max-flash-growth, --max-ram-growth and --max-code-growth: the budgets of applying a tuning log
    (utvm.tune.log.Budgets; docs/tuning.md, "Budgets")."""
    from utvm.tune.log import DEFAULT_MAX_FLASH_GROWTH, DEFAULT_MAX_RAM_GROWTH

    p.add_argument("--max-flash-growth", metavar="F", type=growth, default=DEFAULT_MAX_FLASH_GROWTH,
                   help="with a tuning log: the tuned tasks' flash (code + weights) at most F over the default "
                        f"build's (a fraction; default {DEFAULT_MAX_FLASH_GROWTH:g}; `none`: no limit)")
    p.add_argument("--max-ram-growth", metavar="F", type=growth, default=DEFAULT_MAX_RAM_GROWTH,
                   help="with a tuning log: the model's planned workspace at most (1 + F) times the default "
                        f"build's (default {DEFAULT_MAX_RAM_GROWTH:g}: no larger; `none`: no limit)")
    p.add_argument("--max-code-growth", metavar="F", type=growth, default=None,
                   help="with a tuning log: also, each task's machine code at most (1 + F) times its default "
                        "point's (a per-task limit; default `none`: only the flash budget)")


def c_source(text: str) -> str:
    """An existing C source file (`--extra-source FILE.c`): the name ends in .c."""
    nonempty_path(text)
    from pathlib import Path

    if Path(text).suffix != ".c":
        raise argparse.ArgumentTypeError(f"{text[:80]!r} is not a C source (the name must end in .c)")
    return input_file(text)


def include_dir(text: str) -> str:
    """An existing directory (`-I DIR`)."""
    return input_dir(text)


def add_user_code_options(p: argparse.ArgumentParser, *aliases: str) -> None:
    """--extra-source FILE.c and -I/--include-dir DIR: the user's C compiled into the evaluation firmware
    (docs/platforms.md, "Your own C in the firmware")."""
    p.add_argument("--extra-source", *aliases, dest="extra_source", action="append", default=[], type=c_source,
                   metavar="FILE.c", help="a C file compiled into the firmware with its warning flags; it may "
                   "define void utvm_user_init(void) to register functions (repeatable)")
    p.add_argument("-I", "--include-dir", dest="include_dir", action="append", default=[], type=include_dir,
                   metavar="DIR", help="a directory searched for the headers of --extra-source (repeatable)")


def target_name(text: str) -> str:
    """A known CPU target (utvm.target)."""
    from utvm.target import TARGETS

    if text not in TARGETS:
        raise argparse.ArgumentTypeError(f"unknown target {text!r}; known targets: {', '.join(TARGETS)}")
    return text


def code_growth(text: str) -> float | None:
    """A fraction >= 0 (0.1: 10% more code), or `none` for no limit."""
    return growth(text)


def growth(text: str) -> float | None:
    """A budget's growth over the default build (--max-flash-growth, --max-ram-growth, --max-code-growth): a
    fraction >= 0 (0.1: 10% more; 0: no more), or `none` for no limit."""
    if text.strip().lower() == "none":
        return None
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a fraction (e.g. 0.1) or none") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text} must be a finite fraction >= 0 (or none)")
    return value


def _user_op_spec(text: str, ext: str, what: str) -> str:
    """NAME=FILE<ext>:<what> (utvm.custom_ops): syntax only; the file is read when the model is compiled."""
    from utvm import custom_ops
    from utvm.errors import UsageError

    if "\0" in text:
        raise argparse.ArgumentTypeError("the value contains a NUL byte")
    try:
        custom_ops.split_spec(text, ext, what)
    except UsageError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def custom_op(text: str) -> str:
    """--custom-op NAME=FILE.c:symbol."""
    return _user_op_spec(text, ".c", "symbol")


def custom_op_py(text: str) -> str:
    """--custom-op-py NAME=FILE.py:func."""
    return _user_op_spec(text, ".py", "func")


def memory_pool(text: str):  # noqa: ANN201 - a utvm.compiler.memory.PoolSpec (imported lazily)
    """`NAME:SIZE[:ATTRS]` of --memory-pool (utvm.compiler.memory.parse_pool)."""
    from utvm.compiler.memory import parse_pool

    try:
        return parse_pool(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


class MemoryPoolAction(argparse.Action):
    """Appends each --memory-pool in order (= preference); a pool named twice is a usage error."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> None:
        pools = list(getattr(namespace, self.dest, None) or [])
        name = getattr(values, "name", "")
        if any(p.name.lower() == name.lower() for p in pools):
            parser.error(f"argument {option_string}: pool {name!r} is given twice")
        setattr(namespace, self.dest, [*pools, values])


def section_name(text: str) -> str:
    """A linker section name ([A-Za-z0-9_.$]+, at most 64 characters), e.g. .my_weights."""
    if not re.fullmatch(r"[A-Za-z0-9_.$]{1,64}", text):
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a section name ([A-Za-z0-9_.$]+, at most 64 "
                                         "characters)")
    return text


def crt_config_item(item: str) -> tuple[str, str]:
    """`TVM_CRT_NAME=VALUE` of --crt-config: a crt_config.h limit and a non-negative integer."""
    name, sep, value = item.partition("=")
    name, value = name.strip(), value.strip()
    if not sep or not re.fullmatch(r"TVM_CRT_[A-Z0-9_]+", name):
        raise argparse.ArgumentTypeError(f"{item[:80]!r}: expected TVM_CRT_NAME=VALUE")
    if not re.fullmatch(r"(0x[0-9a-fA-F]+|[0-9]+)[uUlL]*", value):
        raise argparse.ArgumentTypeError(f"{item[:80]!r}: the value must be a non-negative integer")
    known = _crt_config_names()
    if name not in known:  # a typo would otherwise be a #define nothing reads: silently no change at all
        raise argparse.ArgumentTypeError(f"{name} is not a crt_config.h setting utvm's CRT reads (docs/crt.md); "
                                         f"known: {', '.join(sorted(n for n in known if n.startswith('TVM_CRT_')))}")
    return name, value


def _crt_config_names() -> frozenset[str]:
    """The names a crt_config.h may set: the limits tvm/runtime/crt/config.h and the template default, and
    the upstream microTVM names config_upstream.h maps (or refuses with an #error naming them)."""
    from utvm.crt_config import upstream_names
    from utvm.support import cc

    crt = cc.crt_dir()
    text = ((crt / "include" / "tvm" / "runtime" / "crt" / "config.h").read_text()
            + (crt / "templates" / "crt_config.h.template").read_text())
    names = set(re.findall(r"#[ \t]*(?:ifndef|define)[ \t]+(TVM_CRT_[A-Z0-9_]+)", text))
    return frozenset(names | {n.name for n in upstream_names()})


class CrtConfigAction(argparse.Action):
    """Appends each --crt-config NAME=VALUE; a NAME given twice is a usage error (never: the last wins)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> None:
        items = list(getattr(namespace, self.dest, None) or [])
        name = values[0] if isinstance(values, tuple) else ""
        if any(n == name for n, _v in items):
            parser.error(f"argument {option_string}: {name} is given twice")
        setattr(namespace, self.dest, [*items, values])


def add_crt_config_options(p: argparse.ArgumentParser) -> None:
    """--crt-config NAME=VALUE and --crt-config-file crt_config.h of the commands that build evaluation
    firmware (run, build-device; docs/crt.md)."""
    p.add_argument("--crt-config", action=CrtConfigAction, default=[], metavar="NAME=VALUE", type=crt_config_item,
                   help="override a crt_config.h limit, e.g. TVM_CRT_MAX_PACKET_SIZE_BYTES=4096 (repeatable)")
    p.add_argument("--crt-config-file", type=input_file, metavar="crt_config.h",
                   help="build the CRT with this crt_config.h (utvm's, or an upstream microTVM one: docs/crt.md; "
                        "every built-in platform); the platform's values fill what it leaves out, --crt-config "
                        "overrides it")


def input_paths(args: argparse.Namespace) -> list[str]:
    """Every file the command reads, as given on its command line (the model(s), a tuning log, user C and
    Python, extra sources, a crt_config.h, a board config, input arrays): an output must be none of them."""
    out: list[str] = []

    def add(value: object) -> None:
        if isinstance(value, str | os.PathLike) and os.fspath(value):
            out.append(os.fspath(value))

    for name in ("model", "tuning_log", "crt_config_file", "board_config"):
        add(getattr(args, name, None))
    models = getattr(args, "model", None)
    for given in models if isinstance(models, list) else []:  # build-device --model [NAME=]MODEL
        add(given)
        add(str(given).partition("=")[2])
    for value in getattr(args, "extra_source", None) or []:
        add(value)
    from utvm.custom_ops import split_spec

    for name, ext, what in (("custom_op", ".c", "symbol"), ("custom_op_py", ".py", "func")):
        for spec in getattr(args, name, None) or []:  # already checked when parsed
            add(split_spec(str(spec), ext, what)[1])
    for item in getattr(args, "input", None) or []:
        add(str(item).partition("=")[2])  # NAME=FILE.npy
    return out
