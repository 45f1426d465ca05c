"""The `utvm` command.

Each subcommand lives in its own module `utvm.cli.<name>` exposing `add_parser(subparsers)` (which
registers the subcommand and sets `func` to a `run(args) -> int`). Modules are imported lazily, so a
missing optional dependency of one subcommand never breaks the others.

Every failure is one line on stderr, `utvm <command>: error: <what, naming the option, file, tensor or
byte at fault>`, and an exit status that tells its kind (documented in docs/cli.md):

    0  success                          5  the compiler could not generate code
    1  any other error                  6  building or starting firmware failed
    2  a bad command-line argument      7  the device or the link failed (timeout, reset, remote error)
    3  --check: outputs differ          8  a file could not be read or written (I/O)
    4  the model or archive is bad      9  the reference interpreter failed
  130  interrupted (Ctrl-C): the device process is killed at once, by its PID
"""

from __future__ import annotations

import argparse
import importlib
import sys

SUBCOMMANDS = ("info", "compile", "run", "deploy", "size", "build_device", "bench", "tune")

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_MISMATCH = 3
EXIT_MODEL = 4
EXIT_COMPILE = 5
EXIT_BUILD = 6
EXIT_DEVICE = 7
EXIT_IO = 8
EXIT_ORACLE = 9
EXIT_INTERRUPTED = 130


def exit_status(exc: BaseException) -> int:
    """The exit status of a command that failed with `exc` (the table in the module docstring)."""
    from utvm import errors as E

    table: tuple[tuple[type[BaseException] | tuple[type[BaseException], ...], int], ...] = (
        (E.UsageError, EXIT_USAGE),
        (E.ModelError, EXIT_MODEL),  # ModelFormatError, ArchiveError, UnsupportedModelError, GraphError
        (E.CompileError, EXIT_COMPILE),
        ((E.BuildError, E.PlatformError), EXIT_BUILD),
        ((E.SessionError, E.TransportError, E.ProtocolError, E.RemoteError), EXIT_DEVICE),
        (E.OracleError, EXIT_ORACLE),
        (OSError, EXIT_IO),
    )
    for kinds, status in table:
        if isinstance(exc, kinds):
            return status
    return EXIT_ERROR


def _one_line(exc: BaseException) -> str:
    """The error's message; an OSError as `<file>: <reason>` (its repr says [Errno 2] ...)."""
    if isinstance(exc, OSError) and exc.strerror:
        where = f"{exc.filename}: " if exc.filename is not None else ""
        return f"{where}{exc.strerror}"
    return str(exc) or type(exc).__name__


def build_parser() -> argparse.ArgumentParser:
    from utvm.cli._args import Parser

    parser = Parser(prog="utvm", description="Compile ML models to C and run them on microcontrollers.",
                    epilog="Exit status: 0 ok, 1 other error, 2 bad argument, 3 --check mismatch, 4 bad model or "
                           "archive, 5 compile error, 6 build/platform error, 7 device/link error, 8 file I/O, "
                           "9 reference interpreter, 130 interrupted (docs/cli.md).")
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
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help (0) or a bad argument (2, already printed as one line)
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    from utvm.platform.serial_board.config import use_board_config

    board_config = getattr(args, "board_config", None)
    if board_config is not None and getattr(args, "platform", None) != "serial-board":
        print(f"utvm {args.command}: error: argument --board-config: only --platform serial-board uses a board "
              f"description (this command runs on {getattr(args, 'platform', None)})", file=sys.stderr)
        return EXIT_USAGE
    use_board_config(board_config)  # this command's board.toml, or none ($UTVM_BOARD_CONFIG)
    import warnings

    def one_line_warning(message: Warning | str, category: type[Warning], *_rest: object, **_kw: object) -> None:
        # An import quirk read as TFLM reads it, a deprecation: one line naming the command, not a traceback.
        print(f"utvm {args.command}: warning: {_one_line(Exception(str(message)))}", file=sys.stderr)

    saved = warnings.showwarning
    warnings.showwarning = one_line_warning  # type: ignore[assignment]
    try:
        return int(args.func(args) or 0)
    except (UtvmError, OSError) as exc:  # OSError: a path the user gave that cannot be read or written
        print(f"utvm {args.command}: error: {_one_line(exc)}", file=sys.stderr)
        return exit_status(exc)
    except KeyboardInterrupt:
        # Whatever was running has been stopped on the way out (a session's close kills its device process
        # at once when an exception is passing): nothing is waited for.
        print(f"utvm {args.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        warnings.showwarning = saved


if __name__ == "__main__":
    sys.exit(main())
