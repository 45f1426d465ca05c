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

Any other exception is a bug of utvm's: one line `utvm <command>: internal error: <type>: <message> (...)`, status
1 (UTVM_TRACEBACK=1 lets it through, with its traceback). Once a user's Python (--custom-op-py) has run, the
process ends with os._exit as soon as its status is decided (threads the user's code started, or its exit
handlers, can neither hold the process open nor change the status).

Text that did not come from utvm (a tensor or op name, a path, a line of a user's file) is escaped in every
error line (utvm.support.text.shown), so it can neither split the line nor drive the terminal.

This module imports nothing heavy (numpy, the importers and the oracles are imported by the subcommands, in
`main`), so the command owns Ctrl-C from its first instruction: an interrupt while the command line is
parsed or while a subcommand's modules are imported ends in the same one line and status 130 as one during
the work.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # not typing's: importing typing (and signal, which imports enum) is the slow part
if TYPE_CHECKING:
    import argparse

SUBCOMMANDS = ("info", "compile", "run", "deploy", "size", "build_device", "bench", "tune", "report", "acceptance")

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
    """The error's message, escaped (utvm.support.text.shown): a model's tensor name holding a newline or an
    escape sequence never splits or colours the line. An OSError as `<file>: <reason>` (its repr says
    [Errno 2] ...)."""
    from utvm.support.text import shown

    if isinstance(exc, OSError) and exc.strerror:
        where = f"{exc.filename}: " if exc.filename is not None else ""
        return shown(f"{where}{exc.strerror}")
    return shown(str(exc) or type(exc).__name__)


def _error_text(exc: BaseException) -> tuple[str, str]:
    """The error line, and the lines that follow it: only a build error has any, the compiler's output
    (docs/cli.md), each of its lines escaped on its own (a compiler quotes source lines, so your file's
    bytes). Every other error is one line, whatever its message holds."""
    from utvm.errors import BuildError
    from utvm.support.text import shown

    if isinstance(exc, BuildError):
        head, sep, output = str(exc).partition("\n")
        if sep:
            return _one_line(BuildError(head)), "\n".join(shown(line) for line in output.splitlines())
    return _one_line(exc), ""


def _command_of(argv: list[str]) -> str | None:
    """The subcommand a command line names (its first word that is not an option), before it is parsed."""
    for word in argv:
        if not word.startswith("-"):
            return word if word in {name.replace("_", "-") for name in SUBCOMMANDS} else None
    return None


def build_parser() -> argparse.ArgumentParser:
    import importlib

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
    """Run the `utvm` command line `argv` and return its exit status.

    argv None is the process's own command line (the `utvm` console script, `python -m utvm`): the process
    is then the command's, which makes SIGINT raise KeyboardInterrupt from here on (unless the process was
    started with SIGINT ignored, as a background job is) and ignores it once the status is decided, so that
    neither the interpreter's shutdown nor a second Ctrl-C while the line is printed turns into a traceback
    or a death by signal; stdout and stderr then escape what their encoding cannot write. When a user's
    Python has run (--custom-op-py), the process then ends here, with os._exit (`_end_process`): never
    returning. A list (tests, scripts) leaves the process's signal handling and streams as they are, and
    returns."""
    console = argv is None
    words = sys.argv[1:] if argv is None else list(argv)
    try:
        if console:
            _own_sigint()
            _tolerant_streams()
        status = _main(words)
    except KeyboardInterrupt:  # while the command line is parsed, modules are imported or the work runs
        if console:
            _ignore_sigint()  # the status is decided: the line is printed whole
        # Whatever was running has been stopped on the way out (a session's close kills its device process
        # at once when an exception is passing): nothing is waited for.
        command = _command_of(words)
        print(f"utvm {command}: interrupted" if command else "utvm: interrupted", file=sys.stderr)
        status = EXIT_INTERRUPTED
    except Exception as exc:  # a bug of utvm's: one line too (an escaped one), unless asked for the traceback
        import os

        from utvm.errors import UtvmError

        if isinstance(exc, UtvmError | OSError):  # one raised before the command's own handler (_main)
            status = _error(_command_of(words), exc)
        elif os.environ.get("UTVM_TRACEBACK") == "1":
            raise
        else:
            status = _internal_error(_command_of(words), exc)
    finally:
        if console:
            _ignore_sigint()
    if console:
        _end_process(status)
    return status


def _error(command: str | None, exc: BaseException) -> int:
    """Print the error line of `exc` (and a build error's output); its status."""
    line, output = _error_text(exc)
    print(f"utvm {command}: error: {line}" if command else f"utvm: error: {line}", file=sys.stderr)
    if output:
        print(output, file=sys.stderr)
    return exit_status(exc)


def _internal_error(command: str | None, exc: Exception) -> int:
    """Print the one line of an exception utvm did not expect (a bug): `utvm <command>: internal error: <type>:
    <message> (...)`, escaped; status 1. Never raising (the message may be anything)."""
    head = f"utvm {command}" if command else "utvm"
    try:
        from utvm.support.text import shown

        text = str(exc)
        what = shown(f"{type(exc).__name__}: {text}" if text else type(exc).__name__)
    except Exception:  # noqa: BLE001 - even its message fails
        what = "an exception that cannot be printed"
    try:
        print(f"{head}: internal error: {what} (a bug of utvm's: please report it with the command line; "
              "UTVM_TRACEBACK=1 shows the traceback)", file=sys.stderr)
    except Exception:  # noqa: BLE001 - stderr is gone: the status still tells
        pass
    return EXIT_ERROR


def _end_process(status: int) -> None:
    """After a user's Python has run (utvm.support.user_python.ran()), end the process now: flush stdout and
    stderr, then os._exit(status). A thread the user's code started (a non-daemon one would keep the
    interpreter's shutdown waiting for ever) or an exit handler of its own can neither hold the process nor
    change its status. Otherwise the interpreter ends as usual."""
    user_python = sys.modules.get("utvm.support.user_python")
    if user_python is None or not user_python.ran():
        return
    user_python.flush_std_streams()
    user_python.REAL_EXIT(status)


def _own_sigint() -> None:
    """Ctrl-C raises KeyboardInterrupt (Python's own handler, installed again in case something changed it),
    unless SIGINT is ignored: a job started in the background of a shell stays deaf to the terminal's Ctrl-C."""
    import signal  # here, not at the top: it imports enum, and this module must import in no time

    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def _tolerant_streams() -> None:
    """stdout and stderr write what their encoding cannot carry as escapes (a model's name under
    PYTHONIOENCODING=ascii), never a UnicodeEncodeError traceback; surrogateescape (raw bytes of a path, in
    the C.UTF-8 and POSIX locales) is kept as it is."""
    for stream in (sys.stdout, sys.stderr):
        if getattr(stream, "errors", None) == "strict" and hasattr(stream, "reconfigure"):
            try:
                stream.reconfigure(errors="backslashreplace")
            except (ValueError, OSError):  # a stream that cannot change its error handler now: left as it is
                pass


def _ignore_sigint() -> None:
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _main(argv: list[str]) -> int:
    from utvm.errors import UtvmError

    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help (0) or a bad argument (2, already printed as one line)
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    if not getattr(args, "func", None):  # the usage to stdout, as --help; the error as every error
        parser.print_help()
        print("utvm: error: no command given (see utvm --help)", file=sys.stderr)
        return EXIT_USAGE
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

    from utvm.support import user_python

    saved = warnings.showwarning
    warnings.showwarning = one_line_warning  # type: ignore[assignment]
    program = user_python.set_program(f"utvm {args.command}")  # names the command in user code's lines
    try:
        return int(args.func(args) or 0)
    except (UtvmError, OSError) as exc:  # OSError: a path the user gave that cannot be read or written
        return _error(args.command, exc)
    finally:
        user_python.set_program(program)
        warnings.showwarning = saved


if __name__ == "__main__":
    sys.exit(main())
