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
- `atexit.register` and `os.register_at_fork` called from the user's code are refused, with one warning line
  (no exit or fork handler of user code ever runs; the standard library's and installed packages'
  registrations, such as `import logging` makes, go through).

When the block ends the interpreter state the code may have changed is put back: the recursion limit, the
int-to-str digit limit, the switch interval, sys.excepthook / unraisablehook / displayhook / breakpointhook and
threading.excepthook, trace and profile functions, sys.stdin / stdout / stderr (and their __std*__), every
signal handler, the signal mask, interval timers (an alarm the code set is cancelled, one it changed reset),
the working directory, the umask, os.environ, the builtins, gc's state, the warnings filters, numpy's error
state, error callback and print options, and the locale. A process the user's code forked that returns into
utvm ends there (os._exit(0)): it never runs utvm's code a second time.

Not covered (in-process Python cannot stop them): a crash or an exit from C code (ctypes, an extension), a
shell command killing utvm, threads the code starts (they outlive the block; what they print once it has
ended is not escaped), writes below sys.stdout (os.write(1, ...)). The CLI ends its process with os._exit
once user code has run (`ran()`), so a thread or an exit handler of the user's can neither hold the process
open nor change its status.
"""

from __future__ import annotations

import atexit
import builtins
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


class UserExit(BaseException):
    """User code called something that ends or replaces the process (os._exit, os.abort, os.exec*, a fatal signal
    to itself). A BaseException: `except Exception` in the user's code does not swallow it."""

    def __init__(self, description: str) -> None:
        super().__init__(description)
        self.description = description


class UserSystemExit(SystemExit):
    """sys.exit() called by user code; `where` is the file:line of the call."""

    where = ""


class EscapedStream(io.TextIOBase):
    """A text stream writing each line to `target` as one line `prefix + text`, escaped by `shown` (a newline
    the code writes stays a line break; every other control character is shown, not acted on). A line is
    written when it is complete, or by `end_line` (the end of the block). Thread-safe; it keeps working after
    the block (a thread of the user's may hold it)."""

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

    @property
    def errors(self) -> str:  # type: ignore[override]
        return "strict"

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False

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
                lines, self._pending = [self._pending], ""
                self._emit(lines)

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


def _own_pids() -> tuple[set[int], set[int]]:
    """(this process and utvm's, their process groups)."""
    pids = {os.getpid(), _MAIN_PID}
    groups = {os.getpgrp()}
    try:
        groups.add(os.getpgid(_MAIN_PID))
    except OSError:
        pass
    return pids, groups


class _Guard:
    """The state of one `guarded` block: who runs, in which process, and the first exit it refused."""

    def __init__(self, who: str, target: Any) -> None:
        self.who = who
        self.pid = os.getpid()
        self.target = target
        self.attempt: UserExit | None = None

    def here(self) -> bool:
        return os.getpid() == self.pid

    def refuse(self, call: str) -> NoReturn:
        exc = UserExit(f"called {call} at {_caller(2)}")
        if self.attempt is None:
            self.attempt = exc
        raise exc

    def patches(self) -> list[tuple[Any, str, Any]]:
        """(object, attribute, replacement) of every call the block replaces."""
        g = self
        real_exit = os._exit
        real_sys_exit = sys.exit
        real_abort = os.abort
        real_kill = os.kill
        real_killpg = getattr(os, "killpg", None)
        real_raise = signal.raise_signal
        real_pthread_kill = getattr(signal, "pthread_kill", None)

        def _exit(status: int) -> NoReturn:
            if not g.here():
                real_exit(status)
            g.refuse(f"os._exit({_safe_repr(status)})")

        def exit_(status: object = None) -> NoReturn:
            if not g.here():
                real_sys_exit(status)
            exc = UserSystemExit(status)
            exc.where = _caller(1)
            raise exc

        def abort() -> NoReturn:
            if not g.here():
                real_abort()
            g.refuse("os.abort()")

        def kill(pid: int, sig: int) -> None:
            pids, groups = _own_pids()
            aimed = isinstance(pid, int) and (pid in (0, -1) or pid in pids or (pid < 0 and -pid in groups))
            if g.here() and aimed and sig != 0 and not _handled_in_python(sig):
                g.refuse(f"os.kill({pid}, {_signal_name(sig)})")
            real_kill(pid, sig)

        def killpg(pgid: int, sig: int) -> None:
            _pids, groups = _own_pids()
            if g.here() and (pgid == 0 or pgid in groups) and sig != 0:
                g.refuse(f"os.killpg({pgid}, {_signal_name(sig)})")
            assert real_killpg is not None
            real_killpg(pgid, sig)

        def raise_signal(sig: int) -> None:
            if g.here() and not _handled_in_python(sig):
                g.refuse(f"signal.raise_signal({_signal_name(sig)})")
            real_raise(sig)

        def pthread_kill(thread_id: int, sig: int) -> None:
            if g.here() and sig != 0 and not _handled_in_python(sig):
                g.refuse(f"signal.pthread_kill({thread_id}, {_signal_name(sig)})")
            assert real_pthread_kill is not None
            real_pthread_kill(thread_id, sig)

        def refused_exec(name: str, real: Callable[..., Any]) -> Callable[..., Any]:
            def exec_(*args: Any, **kwargs: Any) -> Any:
                if g.here():
                    g.refuse(f"os.{name}()")
                return real(*args, **kwargs)

            return exec_

        real_register = atexit.register

        def register(func: Callable[..., Any], *args: Any, **kwargs: Any) -> Callable[..., Any]:
            if _from_library(1):
                return real_register(func, *args, **kwargs)
            name = getattr(func, "__qualname__", None) or type(func).__name__
            _say(g.target, f"{_program}: warning: {g.who}: atexit.register({name}) at {_caller(1)} is refused "
                           "(utvm runs no exit handler of user code)")
            return func

        real_at_fork = getattr(os, "register_at_fork", None)

        def register_at_fork(**kwargs: Any) -> None:
            if _from_library(1):
                assert real_at_fork is not None
                real_at_fork(**kwargs)
                return
            _say(g.target, f"{_program}: warning: {g.who}: os.register_at_fork() at {_caller(1)} is refused "
                           "(utvm runs no fork handler of user code)")

        real_audit = sys.addaudithook

        def addaudithook(hook: Callable[..., Any]) -> None:
            if _from_library(1):
                real_audit(hook)
                return
            _say(g.target, f"{_program}: warning: {g.who}: sys.addaudithook() at {_caller(1)} is refused (a hook "
                           "can never be removed: it would run inside utvm for the rest of the process)")

        real_start = threading.Thread.start

        def start(thread: threading.Thread) -> None:
            _user_threads[thread] = (g.who, g.target)  # its exception is one line (`_thread_hook`), not a traceback
            real_start(thread)

        out: list[tuple[Any, str, Any]] = [
            (os, "_exit", _exit), (sys, "exit", exit_), (os, "abort", abort), (os, "kill", kill),
            (signal, "raise_signal", raise_signal), (atexit, "register", register),
            (sys, "addaudithook", addaudithook), (threading.Thread, "start", start),
        ]
        posix = sys.modules.get("posix")
        if posix is not None:
            out.append((posix, "_exit", _exit))
        if real_killpg is not None:
            out.append((os, "killpg", killpg))
        if real_pthread_kill is not None:
            out.append((signal, "pthread_kill", pthread_kill))
        if real_at_fork is not None:
            out.append((os, "register_at_fork", register_at_fork))
        for name in ("execl", "execle", "execlp", "execlpe", "execv", "execve", "execvp", "execvpe"):
            real = getattr(os, name, None)
            if real is not None:
                out.append((os, name, refused_exec(name, real)))
        return out


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
    if isinstance(args.exc_type, type) and issubclass(args.exc_type, SystemExit):
        return  # (as Python's own hook: a thread's sys.exit() ends the thread, quietly)
    if isinstance(args.exc_value, UserExit):
        what = f"{args.exc_value.description} (refused)"
    else:
        try:
            text = str(args.exc_value)
        except Exception:  # noqa: BLE001 - the user's __str__
            text = "<cannot be printed>"
        what = f"raised {args.exc_type.__name__}" + (f": {text[:300]}" if text else "")
    who, target = started
    _say(target, f"{_program}: warning: {who}: its thread {args.thread.name!r} {what}")


def _install_thread_hook() -> None:
    global _previous_thread_hook
    if threading.excepthook is not _thread_hook:
        _previous_thread_hook = threading.excepthook
        threading.excepthook = _thread_hook


def _safe_repr(value: object) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) < 10**18:
        return repr(value)
    return f"<{type(value).__name__}>"


def _same_file(fd: int, copy: int) -> bool:
    try:
        a, b = os.fstat(fd), os.fstat(copy)
    except OSError:
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


_UNCATCHABLE = frozenset(getattr(signal, n) for n in ("SIGKILL", "SIGSTOP") if hasattr(signal, n))
_SIGNALS = tuple(int(sig) for sig in sorted(signal.valid_signals()) if sig not in _UNCATCHABLE)
#: signal.getsignal without its enum conversion (the state is taken for every call of a twin)
_getsignal: Callable[[int], Any] = getattr(__import__("_signal"), "getsignal", signal.getsignal)
_HOOKS = ("excepthook", "unraisablehook", "displayhook", "breakpointhook")
_STDIO = ("stdin", "stdout", "stderr", "__stdin__", "__stdout__", "__stderr__")
_TIMERS = tuple(getattr(signal, n) for n in ("ITIMER_REAL", "ITIMER_VIRTUAL", "ITIMER_PROF") if hasattr(signal, n))


def _each(*steps: Callable[[], object]) -> None:
    """Run every step; one that fails (the user left the state unrestorable) does not stop the others."""
    for step in steps:
        try:
            step()
        except Exception:  # noqa: BLE001 - restoring as much as can be restored
            pass


class _State:
    """The interpreter state user code may change, taken before it runs and put back after."""

    def __init__(self) -> None:
        self.main_thread = threading.current_thread() is threading.main_thread()
        self.recursion_limit = sys.getrecursionlimit()
        self.int_digits = sys.get_int_max_str_digits() if hasattr(sys, "get_int_max_str_digits") else None
        self.switch_interval = sys.getswitchinterval()
        self.hooks = {name: getattr(sys, name) for name in _HOOKS if hasattr(sys, name)}
        self.thread_hook = threading.excepthook
        self.trace, self.profile = sys.gettrace(), sys.getprofile()
        self.thread_trace, self.thread_profile = threading.gettrace(), threading.getprofile()
        self.stdio = {name: getattr(sys, name, None) for name in _STDIO}
        self.signals: dict[int, Any] = {}
        for sig in _SIGNALS:
            try:
                handler = _getsignal(sig)
            except (ValueError, OSError):
                continue
            if handler is not None:
                self.signals[sig] = handler
        self.mask = signal.pthread_sigmask(signal.SIG_BLOCK, ()) if hasattr(signal, "pthread_sigmask") else None
        self.timers = {t: signal.getitimer(t) for t in _TIMERS}
        self.taken = time.monotonic()
        try:
            self.cwd: str | None = os.getcwd()
        except OSError:
            self.cwd = None
        self.umask = os.umask(0o022)
        os.umask(self.umask)
        self.environ = dict(os.environ)
        self.fds: dict[int, int] = {}
        for fd in (0, 1, 2):
            try:
                self.fds[fd] = os.dup(fd)
            except OSError:  # (not open)
                pass
        self.builtins = dict(vars(builtins))
        import gc

        self.gc = (gc.isenabled(), gc.get_threshold(), list(gc.callbacks))
        np = sys.modules.get("numpy")
        self.numpy = (np.geterr(), np.geterrcall(), np.get_printoptions()) if np is not None else None
        locale = sys.modules.get("locale")
        self.locale = None
        if locale is not None:
            try:
                self.locale = locale.setlocale(locale.LC_ALL)
            except (locale.Error, ValueError):
                pass

    def restore(self) -> None:
        _each(self._restore_fds, self._restore_stdio, self._restore_sys, self._restore_signals, self._restore_process,
              self._restore_builtins, self._restore_gc, self._restore_numpy, self._restore_locale)

    def _restore_fds(self) -> None:
        """fds 0-2 as they were (`os.close(2)` or a dup2 over it must not silence utvm's error line)."""
        for fd, copy in self.fds.items():
            try:
                if not _same_file(fd, copy):
                    os.dup2(copy, fd)
            except OSError:
                pass
            finally:
                os.close(copy)

    def _restore_stdio(self) -> None:
        for name, stream in self.stdio.items():
            setattr(sys, name, stream)

    def _restore_sys(self) -> None:
        if sys.getrecursionlimit() != self.recursion_limit:
            sys.setrecursionlimit(self.recursion_limit)
        if self.int_digits is not None and sys.get_int_max_str_digits() != self.int_digits:
            sys.set_int_max_str_digits(self.int_digits)
        if sys.getswitchinterval() != self.switch_interval:
            sys.setswitchinterval(self.switch_interval)
        for name, hook in self.hooks.items():
            if getattr(sys, name, None) is not hook:
                setattr(sys, name, hook)
        if threading.excepthook is not self.thread_hook:
            threading.excepthook = self.thread_hook
        if sys.gettrace() is not self.trace:
            sys.settrace(self.trace)
        if sys.getprofile() is not self.profile:
            sys.setprofile(self.profile)
        if threading.gettrace() is not self.thread_trace:
            threading.settrace(self.thread_trace)  # type: ignore[arg-type]
        if threading.getprofile() is not self.thread_profile:
            threading.setprofile(self.thread_profile)  # type: ignore[arg-type]

    def _restore_signals(self) -> None:
        if self.main_thread:  # (signal.signal works in the main thread only)
            for sig, handler in self.signals.items():
                try:
                    if _getsignal(sig) is not handler:
                        signal.signal(sig, handler)
                except (ValueError, OSError, TypeError):
                    pass
        if self.mask is not None and signal.pthread_sigmask(signal.SIG_BLOCK, ()) != self.mask:
            signal.pthread_sigmask(signal.SIG_SETMASK, self.mask)
        elapsed = time.monotonic() - self.taken
        for timer, (value, interval) in self.timers.items():
            if value == 0.0:
                if signal.getitimer(timer)[0] != 0.0:
                    signal.setitimer(timer, 0)  # an alarm of the user's: cancelled
                continue
            if timer == getattr(signal, "ITIMER_REAL", None):  # wall-clock: what was left of it
                value = max(value - elapsed, 1e-6)
            signal.setitimer(timer, value, interval)  # (a CPU-time timer restarts at what it had)

    def _restore_process(self) -> None:
        if self.cwd is not None:
            try:
                if os.getcwd() != self.cwd:
                    os.chdir(self.cwd)
            except OSError:
                os.chdir(self.cwd)
        os.umask(self.umask)
        if dict(os.environ) != self.environ:
            for key in [k for k in os.environ if k not in self.environ]:
                del os.environ[key]
            for key, value in self.environ.items():
                if os.environ.get(key) != value:
                    os.environ[key] = value

    def _restore_builtins(self) -> None:
        current = vars(builtins)
        for name, value in self.builtins.items():
            if current.get(name, current) is not value:
                current[name] = value

    def _restore_gc(self) -> None:
        import gc

        enabled, threshold, callbacks = self.gc
        if gc.callbacks != callbacks:
            gc.callbacks[:] = callbacks
        if gc.isenabled() != enabled:
            (gc.enable if enabled else gc.disable)()
        if gc.get_threshold() != threshold:
            gc.set_threshold(*threshold)

    def _restore_numpy(self) -> None:
        np = sys.modules.get("numpy")
        if self.numpy is None or np is None:
            return
        err, call, printoptions = self.numpy
        np.seterr(**err)
        np.seterrcall(call)
        if np.get_printoptions() != printoptions:
            np.set_printoptions(**printoptions)

    def _restore_locale(self) -> None:
        locale = sys.modules.get("locale")
        if self.locale is not None and locale is not None and locale.setlocale(locale.LC_ALL) != self.locale:
            locale.setlocale(locale.LC_ALL, self.locale)


@contextmanager
def guarded(who: str) -> Iterator[None]:
    """Run the block as user code (the module docstring): `who` names it in lines it prints and in warnings
    (`ClampScale (twins.py:twin)`). Its exceptions pass through; a `UserExit` it swallowed is raised when it
    ends (unless another UserExit or a KeyboardInterrupt is passing)."""
    global _ran
    _ran = True
    _install_thread_hook()  # (before the snapshot: it stays)
    state = _State()
    target = sys.stderr
    guard = _Guard(who, target)
    stream = EscapedStream(target, f"{_program}: {who} says: ")
    patches = guard.patches()
    saved = [(obj, attr, getattr(obj, attr)) for obj, attr, _new in patches]
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
        if not guard.here():  # a process the user's code forked has come back to utvm: it ends here
            _each(stream.end_line, stream.flush)
            REAL_EXIT(0)
        _each(stream.end_line)
        for obj, attr, old in reversed(saved):
            setattr(obj, attr, old)
        state.restore()
        attempt = guard.attempt
        if attempt is not None and failed is not attempt and not isinstance(failed, UserExit | KeyboardInterrupt):
            raise attempt.with_traceback(None) from None
