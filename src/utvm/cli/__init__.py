"""The `utvm` command.

Each subcommand lives in its own module `utvm.cli.<name>` exposing `add_parser(subparsers)` (which
registers the subcommand and sets `func` to a `run(args) -> int`). Modules are imported lazily, so a
missing optional dependency of one subcommand never breaks the others.
"""

from __future__ import annotations

import argparse
import importlib
import sys

SUBCOMMANDS = ("info", "compile", "run", "deploy", "size", "build_device", "bench", "tune")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="utvm", description="Compile ML models to C and run them on microcontrollers."
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in SUBCOMMANDS:
        try:
            mod = importlib.import_module(f"utvm.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"utvm.cli.{name}":
                continue  # subcommand not implemented in this build
            raise
        mod.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    from utvm.errors import UtvmError

    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except UtvmError as exc:
        print(f"utvm {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:  # a path the user gave that cannot be read or written (-o into a file, a directory...)
        print(f"utvm {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
