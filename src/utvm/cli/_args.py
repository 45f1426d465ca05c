"""Argument types of the `utvm` command: each checks its value when the command line is parsed, so a bad
value is one line naming the option (exit status 2) before any work starts."""

from __future__ import annotations

import argparse
import math
import re
import sys
from typing import NoReturn

SEED_MAX = 2**64 - 1


class Parser(argparse.ArgumentParser):
    """argparse, with errors as one line (`utvm run: error: argument --seed: ...`) and exit status 2."""

    def error(self, message: str) -> NoReturn:
        print(f"{self.prog}: error: {message} (see {self.prog} --help)", file=sys.stderr)
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

    nonempty_path(text)
    try:
        load_board_config(text)
    except UsageError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def add_board_config_option(p: argparse.ArgumentParser) -> None:
    """--board-config of the commands that take --platform (used by --platform serial-board)."""
    p.add_argument("--board-config", type=board_config, metavar="BOARD.toml",
                   help="the board of --platform serial-board (default: $UTVM_BOARD_CONFIG; docs/platforms.md)")


def c_source(text: str) -> str:
    """An existing C source file (`--extra-source FILE.c`): the name ends in .c."""
    nonempty_path(text)
    from pathlib import Path

    if Path(text).suffix != ".c":
        raise argparse.ArgumentTypeError(f"{text[:80]!r} is not a C source (the name must end in .c)")
    if not Path(text).is_file():
        raise argparse.ArgumentTypeError(f"{text[:80]!r}: no such file")
    return text


def include_dir(text: str) -> str:
    """An existing directory (`-I DIR`)."""
    nonempty_path(text)
    from pathlib import Path

    if not Path(text).is_dir():
        raise argparse.ArgumentTypeError(f"{text[:80]!r}: no such directory")
    return text


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
