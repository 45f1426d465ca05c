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
