"""Running a user's Python (a --custom-op-py file's import, each call of its twin) inside utvm's error contract
(docs/custom_ops.md, "Checking"): `guarded(who)` is the block the user's code runs in.

While the user's code runs:

- `sys.stdout` and `sys.stderr` are an `EscapedStream` writing to the stderr utvm had: each line prefixed
  `<program>: <who> says: ` and escaped (utvm.support.text.shown), so what the code prints can neither drive
  the terminal (an escape sequence, a BEL) nor land in the command's stdout (its --json).
- the calls that would end or replace utvm's process raise `UserExit` instead, naming the call and the
  file:line it was made at: os._exit (posix._exit), os.abort, os.kill / os.killpg / signal.pthread_kill /
  signal.raise_signal aimed at utvm's process or group (unless a Python handler of the code's own takes the
  signal), the os.exec* family. sys.exit raises `UserSystemExit` (a SystemExit that knows where). A
  `UserExit` the code catches is raised again when the block ends: the code never survives its own exit.
- `atexit.register`, `os.register_at_fork` and `sys.addaudithook` called from the user's code are refused,
  with one warning line (no exit or fork handler of user code ever runs; the standard library's and installed
  packages' registrations, such as `import logging` makes, go through). An exception that ends a thread the
  code started is one warning line (`_thread_hook`), not a traceback.

When the block ends the interpreter and process state the code may have changed is put back (`_State`; the
list is docs/custom_ops.md's: `_ATTRIBUTES`, `_settings`, fds 0-2, signal handlers, mask and timers, and the
warnings filters). A process the user's code forked that returns into utvm ends there (os._exit(0)): it never
runs utvm's code a second time.

Not covered (in-process Python cannot stop them): a crash or an exit from C code (ctypes, an extension), a
shell command killing utvm, threads the code starts (they outlive the block; what they print once it has
ended is not escaped), writes below sys.stdout (os.write(1, ...)). The CLI ends its process with os._exit
once user code has run (`ran()`), so a thread or an exit handler of the user's can neither hold the process
open nor change its status.
"""

from __future__ import annotations

import _signal
import atexit
import builtins
import gc
import io
import os
import signal
import sys
import threading
import time
import warnings
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, NoReturn

from utvm.support.text import shown

#: os._exit as it was when utvm started (what utvm itself ends a process with)
REAL_EXIT: Callable[[int], NoReturn] = os._exit
#: utvm's own process (a child utvm forks for a twin protects its parent too)
_MAIN_PID = os.getpid()
#: the most characters of a user object's text in a line
_MAX_TEXT = 300

_program = "utvm"
_ran = False
_lib_dirs: tuple[str, ...] | None = None


def set_program(name: str) -> str:
    """Name the command in the lines user code's output and warnings get (`utvm run`); returns the old name."""
    global _program
    old, _program = _program, name
    return old


def ran() -> bool:
    """Whether user code has run in this process (a `guarded` block was entered)."""
    return _ran


def flush_std_streams() -> None:
    """Flush sys.stdout / stderr and the process's own (before a fork or os._exit: nothing buffered is written
    twice or lost). A closed or broken stream, or no stream at all, is passed over."""
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            if stream is not None:
                stream.flush()
        except Exception:  # noqa: BLE001 - a closed stream, a broken pipe, a stream the user's code replaced
            pass


class UserExit(BaseException):
    """User code called something that ends or replaces the process (os._exit, os.abort, os.exec*, a fatal signal
    to itself); its text says which, and where. A BaseException: `except Exception` in the user's code does not
    swallow it."""


class UserSystemExit(SystemExit):
    """sys.exit() called by user code; `where` is the file:line of the call."""

    where = ""


# --- saying what user code did -------------------------------------------------------------------------------

def text_of(value: object) -> str:
    """str(value) of the user's object, at most _MAX_TEXT characters; a __str__ that fails is named, not raised
    (Ctrl-C stays Ctrl-C)."""
    try:
        text = str(value)
    except KeyboardInterrupt:
        raise
    except BaseException:  # noqa: BLE001 - a __str__ of the user's that fails, in any way
        return f"<{type(value).__name__} that cannot be printed>"
    return text if len(text) <= _MAX_TEXT else text[:_MAX_TEXT - 3] + "..."


def value_text(value: object) -> str:
    """An exit status or a returned code for a line: None or an integer as it is (`a huge integer` past 18
    digits, which could not even be printed), anything else quoted (text_of)."""
    if value is None:
        return "None"
    if isinstance(value, int):
        return repr(value) if abs(value) < 10**18 else "a huge integer"
    return repr(text_of(value))


def describe(exc: BaseException) -> str:
    """What user code did, for the end of one line: `called os._exit(3) at f.py:4` (a refused exit), `called
    sys.exit(3) at f.py:4`, `raised ValueError: <its text>`."""
    if isinstance(exc, UserExit):
        return str(exc)
    if isinstance(exc, SystemExit):
        where = exc.where if isinstance(exc, UserSystemExit) else ""
        return f"called sys.exit({value_text(exc.code)})" + (f" at {where}" if where else "")
    text = text_of(exc)
    return f"raised {type(exc).__name__}: {text}" if text else f"raised {type(exc).__name__}"


class EscapedStream(io.TextIOBase):
    """A text stream writing each line to `target` as one line `prefix + text`, escaped by `shown` (a newline
    the code writes stays a line break; every other control character is shown, not acted on). A line is
    written when it is complete, past _MAX_PENDING characters (a line never ends: memory and time stay
    bounded), or by `end_line` (the end of the block). Thread-safe; it keeps working after the block (a thread
    of the user's may hold it)."""

    _MAX_PENDING = 1 << 16

    def __init__(self, target: Any, prefix: str) -> None:
        super().__init__()
        self._target = target
        self._prefix = prefix
        self._pending = ""
        self._lock = threading.Lock()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return "utf-8"

    def writable(self) -> bool:
        return True

    def write(self, s: str) -> int:
        if not isinstance(s, str):
            raise TypeError(f"write() argument must be str, not {type(s).__name__}")
        with self._lock:
            *lines, self._pending = (self._pending + s).split("\n")
            if len(self._pending) > self._MAX_PENDING:
                lines.append(self._pending)
                self._pending = ""
            if lines:
                self._emit(lines)
        return len(s)

    def end_line(self) -> None:
        """Write what is left of an unfinished line."""
        with self._lock:
            if self._pending:
                line, self._pending = self._pending, ""
                self._emit([line])

    def flush(self) -> None:
        try:
            self._target.flush()
        except (OSError, ValueError, AttributeError):
            pass

    def _emit(self, lines: list[str]) -> None:
        self._target.write("".join(shown(self._prefix + line) + "\n" for line in lines))
        self.flush()


def _say(target: Any, line: str) -> None:
    """One line of utvm's about user code on `target` (escaped)."""
    try:
        target.write(shown(line) + "\n")
        target.flush()
    except (OSError, ValueError, AttributeError):
        pass


# --- what the block refuses ----------------------------------------------------------------------------------

def _caller(depth: int) -> str:
    """`file.py:line` of the frame `depth` levels above the function calling this one."""
    try:
        frame = sys._getframe(depth + 1)
    except ValueError:
        return "an unknown place"
    return f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}"


def _from_library(depth: int) -> bool:
    """Whether the frame `depth` levels above the function calling this one runs code of the standard library,
    of an installed package or of utvm itself (not of the user's files)."""
    global _lib_dirs
    if _lib_dirs is None:
        import sysconfig

        paths = sysconfig.get_paths()
        dirs = {os.path.dirname(os.path.dirname(os.path.abspath(__file__)))}  # utvm's package
        dirs.update(os.path.abspath(paths[k]) for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths)
        _lib_dirs = tuple(d.rstrip(os.sep) + os.sep for d in dirs)
    try:
        filename = sys._getframe(depth + 1).f_code.co_filename
    except ValueError:
        return False
    return filename.startswith("<frozen ") or os.path.abspath(filename).startswith(_lib_dirs)


def _signal_name(sig: object) -> str:
    try:
        return signal.Signals(sig).name  # type: ignore[arg-type]
    except (ValueError, TypeError):
        return repr(sig)


def _handled_in_python(sig: object) -> bool:
    """Whether signal `sig` goes to a Python handler of the user's (so sending it to oneself ends nothing)."""
    try:
        handler = signal.getsignal(sig)  # type: ignore[arg-type]
    except (ValueError, TypeError, OSError):
        return False
    return callable(handler) and handler is not signal.default_int_handler


def _own_groups() -> set[int]:
    """The process groups of this process and of utvm's."""
    groups = {os.getpgrp()}
    try:
        groups.add(os.getpgid(_MAIN_PID))
    except OSError:
        pass
    return groups


def _kill_aims_at_utvm(pid: object) -> bool:
    """Whether os.kill(pid, ...) reaches this process or utvm's (itself, its group, every process)."""
    return isinstance(pid, int) and (pid in (0, -1, os.getpid(), _MAIN_PID) or (pid < 0 and -pid in _own_groups()))


def _killpg_aims_at_utvm(pgid: object) -> bool:
    return isinstance(pgid, int) and (pgid == 0 or pgid in _own_groups())


def _fatal(sig: object) -> bool:
    """Whether sending signal `sig` to this process could end it (not 0, no Python handler of the user's)."""
    return sig != 0 and not _handled_in_python(sig)


_EXECS = ("execl", "execle", "execlp", "execlpe", "execv", "execve", "execvp", "execvpe")


class _Guard:
    """The state of one `guarded` block: who runs, in which process, and the first exit it refused."""

    def __init__(self, who: str, target: Any) -> None:
        self.who = who
        self.pid = os.getpid()
        self.target = target
        self.attempt: UserExit | None = None

    def here(self) -> bool:
        return os.getpid() == self.pid

    def refused(self, real: Callable[..., Any], call: Callable[..., str],
                when: Callable[..., bool] | None = None) -> Callable[..., Any]:
        """`real`, except in this process (not in one the user's code forked) when `when(*args)` (default:
        always): then a UserExit `called <call(*args)> at <file:line>`. The first one is kept, to be raised again
        when the block ends."""
        def refusing(*args: Any, **kwargs: Any) -> Any:
            if self.here() and (when is None or when(*args, **kwargs)):
                exc = UserExit(f"called {call(*args, **kwargs)} at {_caller(1)}")
                if self.attempt is None:
                    self.attempt = exc
                raise exc
            return real(*args, **kwargs)

        return refusing

    def warned(self, real: Callable[..., Any], call: Callable[..., str], why: str) -> Callable[..., Any]:
        """`real` for the standard library and installed packages; for the user's code one warning line, and
        nothing registered."""
        def register(*args: Any, **kwargs: Any) -> Any:
            if _from_library(1):
                return real(*args, **kwargs)
            _say(self.target, f"{_program}: warning: {self.who}: {call(*args, **kwargs)} at {_caller(1)} is "
                              f"refused ({why})")
            return args[0] if args else None  # (atexit.register returns the function: a decorator keeps it)

        return register

    def patches(self) -> list[tuple[Any, str, Any]]:
        """(object, attribute, replacement) of every call the block replaces."""
        real_sys_exit = sys.exit

        def sys_exit(status: object = None) -> NoReturn:
            if not self.here():
                real_sys_exit(status)
            exc = UserSystemExit(status)
            exc.where = _caller(1)
            raise exc

        real_start = threading.Thread.start

        def start(thread: threading.Thread) -> None:
            _user_threads[thread] = (self.who, self.target)  # its exception: one line (`_thread_hook`)
            real_start(thread)

        refused, warned = self.refused, self.warned
        os_exit = refused(os._exit, lambda status: f"os._exit({value_text(status)})")
        return [
            (os, "_exit", os_exit), (sys.modules["posix"], "_exit", os_exit), (sys, "exit", sys_exit),
            (os, "abort", refused(os.abort, lambda: "os.abort()")),
            (os, "kill", refused(os.kill, lambda pid, sig: f"os.kill({pid}, {_signal_name(sig)})",
                                 lambda pid, sig: _fatal(sig) and _kill_aims_at_utvm(pid))),
            (os, "killpg", refused(os.killpg, lambda pgid, sig: f"os.killpg({pgid}, {_signal_name(sig)})",
                                   lambda pgid, sig: _fatal(sig) and _killpg_aims_at_utvm(pgid))),
            (signal, "raise_signal", refused(signal.raise_signal,
                                             lambda sig: f"signal.raise_signal({_signal_name(sig)})", _fatal)),
            (signal, "pthread_kill", refused(signal.pthread_kill,
                                             lambda tid, sig: f"signal.pthread_kill({tid}, {_signal_name(sig)})",
                                             lambda tid, sig: _fatal(sig))),
            *((os, name, refused(getattr(os, name), lambda *args, name=name, **kwargs: f"os.{name}()"))
              for name in _EXECS),
            (atexit, "register", warned(atexit.register, lambda func, *args, **kwargs: "atexit.register("
                                        f"{getattr(func, '__qualname__', None) or type(func).__name__})",
                                        "utvm runs no exit handler of user code")),
            (os, "register_at_fork", warned(os.register_at_fork, lambda **kwargs: "os.register_at_fork()",
                                            "utvm runs no fork handler of user code")),
            (sys, "addaudithook", warned(sys.addaudithook, lambda hook: "sys.addaudithook()",
                                         "a hook can never be removed: it would run inside utvm for the rest of "
                                         "the process")),
            (threading.Thread, "start", start),
        ]


#: the threads user code started, and who started them
_user_threads: weakref.WeakKeyDictionary[threading.Thread, tuple[str, Any]] = weakref.WeakKeyDictionary()
_previous_thread_hook: Callable[[Any], object] | None = None


def _thread_hook(args: Any) -> None:
    """threading.excepthook once user code has run: an exception that ends a thread the user's code started is
    one line on stderr (escaped), never a traceback; other threads' go to the hook that was there before."""
    started = _user_threads.get(args.thread) if args.thread is not None else None
    if started is None:
        if _previous_thread_hook is not None:
            _previous_thread_hook(args)
        return
    if issubclass(args.exc_type, SystemExit):
        return  # (as Python's own hook: a thread's sys.exit() ends the thread, quietly)
    what = describe(args.exc_value) if args.exc_value is not None else f"raised {args.exc_type.__name__}"
    if isinstance(args.exc_value, UserExit):
        what += " (refused)"
    who, target = started
    _say(target, f"{_program}: warning: {who}: its thread {args.thread.name!r} {what}")


def _install_thread_hook() -> None:
    global _previous_thread_hook
    if threading.excepthook is not _thread_hook:
        _previous_thread_hook = threading.excepthook
        threading.excepthook = _thread_hook


# --- the state put back --------------------------------------------------------------------------------------

#: the attributes user code may replace (hooks, streams), put back by identity
_ATTRIBUTES: tuple[tuple[Any, str], ...] = (
    *((sys, name) for name in ("excepthook", "unraisablehook", "displayhook", "breakpointhook")),
    *((sys, name) for name in ("stdin", "stdout", "stderr", "__stdin__", "__stdout__", "__stderr__")),
    (threading, "excepthook"),
)
_TIMERS = (signal.ITIMER_REAL, signal.ITIMER_VIRTUAL, signal.ITIMER_PROF)
#: signal.valid_signals() and signal.getsignal without their conversion to enums, which would be two thirds of
#: the time a block takes (the handlers are taken and put back around every call of a twin)
_SIGNALS = tuple(int(sig) for sig in signal.valid_signals())
_getsignal: Callable[[int], Any] = _signal.getsignal


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _set_environ(saved: dict[str, str]) -> None:
    current = dict(os.environ)
    for key in current.keys() - saved.keys():
        del os.environ[key]
    for key, value in saved.items():
        if current.get(key) != value:
            os.environ[key] = value


def _set_builtins(saved: dict[str, Any]) -> None:
    current = vars(builtins)
    for name, value in saved.items():
        if current.get(name, current) is not value:
            current[name] = value


def _set_gc_callbacks(saved: list[Any]) -> None:
    gc.callbacks[:] = saved


Setting = tuple[Callable[[], Any], Callable[[Any], object]]


def _replaced(get: Callable[[], Any], put: Callable[[Any], object]) -> Setting:
    """(get, put) of a setting that holds an object (a tracer): put back only when replaced, so it is never
    installed a second time, and a user object's __eq__ never runs."""
    def put_back(saved: Any) -> None:
        if get() is not saved:
            put(saved)

    return get, put_back


def _changed(get: Callable[[], Any], put: Callable[[Any], object]) -> Setting:
    """(get, put) of a setting that is a value costly to set (a locale, numpy's print options): put back only
    when it changed."""
    def put_back(saved: Any) -> None:
        if get() != saved:
            put(saved)

    return get, put_back


def _settings() -> list[Setting]:
    """(get, put) of each setting of the interpreter and the process user code may change; put(saved) puts
    back what get() returned before."""
    out: list[Setting] = [
        (sys.getrecursionlimit, sys.setrecursionlimit),
        (sys.get_int_max_str_digits, sys.set_int_max_str_digits),
        (sys.getswitchinterval, sys.setswitchinterval),
        _replaced(sys.gettrace, sys.settrace),
        _replaced(sys.getprofile, sys.setprofile),
        _replaced(threading.gettrace, threading.settrace),
        _replaced(threading.getprofile, threading.setprofile),
        (os.getcwd, os.chdir),
        (_umask, os.umask),
        (lambda: dict(os.environ), _set_environ),
        (lambda: dict(vars(builtins)), _set_builtins),
        (gc.isenabled, lambda enabled: gc.enable() if enabled else gc.disable()),
        (gc.get_threshold, lambda threshold: gc.set_threshold(*threshold)),
        (lambda: list(gc.callbacks), _set_gc_callbacks),
    ]
    np = sys.modules.get("numpy")
    if np is not None:
        out += [(np.geterr, lambda err: np.seterr(**err)), _replaced(np.geterrcall, np.seterrcall),
                _changed(np.get_printoptions, lambda options: np.set_printoptions(**options))]
    locale = sys.modules.get("locale")
    if locale is not None:
        out.append(_changed(lambda: locale.setlocale(locale.LC_ALL), lambda name: locale.setlocale(locale.LC_ALL,
                                                                                                    name)))
    return out


def _quietly(step: Callable[..., object], *args: Any) -> None:
    """Run one step of putting the state back; one that fails (the user left it unrestorable) stops no other."""
    try:
        step(*args)
    except Exception:  # noqa: BLE001 - restoring as much as can be restored
        pass


class _State:
    """The interpreter state user code may change, taken before it runs (with the attributes `patched` the
    block replaces) and put back after."""

    def __init__(self, patched: list[tuple[Any, str]]) -> None:
        self.fds: dict[int, int] = {}
        for fd in (0, 1, 2):
            try:
                self.fds[fd] = os.dup(fd)
            except OSError:  # (not open)
                pass
        self.attributes = [(obj, name, getattr(obj, name)) for obj, name in (*_ATTRIBUTES, *patched)]
        self.settings: list[tuple[Callable[[Any], object], Any]] = []
        for get, put in _settings():
            try:
                self.settings.append((put, get()))
            except Exception:  # noqa: BLE001 - e.g. no working directory: nothing to put back
                pass
        self.handlers = {sig: h for sig in _SIGNALS if (h := _getsignal(sig)) is not None}
        self.mask = signal.pthread_sigmask(signal.SIG_BLOCK, ())
        self.timers = {timer: signal.getitimer(timer) for timer in _TIMERS}
        self.taken = time.monotonic()

    def restore(self) -> None:
        _quietly(self._restore_fds)
        for obj, name, value in self.attributes:
            if getattr(obj, name, None) is not value:
                _quietly(setattr, obj, name, value)
        for put, saved in self.settings:
            _quietly(put, saved)
        _quietly(self._restore_signals)

    def _restore_fds(self) -> None:
        """fds 0-2 as they were (`os.close(2)` or a dup2 over it must not silence utvm's error line)."""
        for fd, copy in self.fds.items():
            try:
                a, b = os.fstat(fd), os.fstat(copy)
                if (a.st_dev, a.st_ino) != (b.st_dev, b.st_ino):
                    os.dup2(copy, fd)
            except OSError:
                _quietly(os.dup2, copy, fd)  # (fd closed)
            finally:
                os.close(copy)

    def _restore_signals(self) -> None:
        """The handlers first, then the mask (a signal it held back goes to utvm's handler), then the timers."""
        for sig, handler in self.handlers.items():
            if _getsignal(sig) is not handler:
                _quietly(signal.signal, sig, handler)
        _quietly(signal.pthread_sigmask, signal.SIG_SETMASK, self.mask)
        elapsed = time.monotonic() - self.taken
        for timer, (value, interval) in self.timers.items():
            if value == 0.0:
                if signal.getitimer(timer)[0] != 0.0:
                    signal.setitimer(timer, 0)  # an alarm of the user's: cancelled
                continue
            if timer == signal.ITIMER_REAL:  # wall-clock: what was left of it
                value = max(value - elapsed, 1e-6)
            signal.setitimer(timer, value, interval)  # (a CPU-time timer restarts at what it had)


@contextmanager
def guarded(who: str) -> Iterator[None]:
    """Run the block as user code (the module docstring): `who` names it in lines it prints and in warnings
    (`ClampScale (twins.py:twin)`). Its exceptions pass through; a `UserExit` it swallowed is raised when it
    ends (unless another UserExit or a KeyboardInterrupt is passing)."""
    global _ran
    _ran = True
    _install_thread_hook()  # (before the snapshot: it stays)
    target = sys.stderr
    guard = _Guard(who, target)
    patches = guard.patches()
    state = _State([(obj, attr) for obj, attr, _new in patches])
    stream = EscapedStream(target, f"{_program}: {who} says: ")
    failed: BaseException | None = None
    try:
        for obj, attr, new in patches:
            setattr(obj, attr, new)
        sys.stdout = sys.stderr = sys.__stdout__ = sys.__stderr__ = stream
        with warnings.catch_warnings():
            yield
    except BaseException as exc:
        failed = exc
        raise
    finally:
        _quietly(stream.end_line)
        if not guard.here():  # a process the user's code forked has come back to utvm: it ends here
            REAL_EXIT(0)
        state.restore()
        attempt = guard.attempt
        if attempt is not None and failed is not attempt and not isinstance(failed, UserExit | KeyboardInterrupt):
            raise attempt.with_traceback(None) from None
