"""Hostile user code (issue 19, "User code escapes the error contract"): a --custom-op-py twin, the C of a
--custom-op, --extra-source files and -I directories. Whatever the user's code or files do, utvm answers
with one line on stderr and the documented exit status (docs/custom_ops.md, docs/platforms.md), never a
traceback, a hang, a silent "last one wins" or a user file in place of a generated one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import unicodedata
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from utvm import custom_ops, mlf
from utvm.cli import EXIT_BUILD, EXIT_ERROR, EXIT_IO, EXIT_ORACLE, EXIT_USAGE, main
from utvm.errors import OracleError, UsageError
from utvm.frontend import load
from utvm.ir import run_reference
from utvm.support.models import models_dir
from utvm.support.text import shown

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tflite_builder import TFLiteBuilder  # noqa: E402

DATA = Path(__file__).resolve().parent / "data"
C_FILE = DATA / "clamp_scale.c"
PY_FILE = DATA / "clamp_scale.py"
C_OP = f"ClampScale={C_FILE}:clamp_scale"
HELLO = models_dir() / "tflm" / "hello_world_int8.tflite"
OPTIONS = bytes([0x90, 100, 3, 1])
X = np.arange(-128, 128, 8, dtype=np.int8).reshape(1, 32)

#: One twin per way a user's Python can go wrong (name -> body of `def twin(inputs, outputs, options):`).
TWINS = r'''
import os, signal, sys
import numpy as np

def good(inputs, outputs, options):
    outputs[0].data[...] = inputs[0].data

def raises(inputs, outputs, options):
    raise ValueError("boom\nsecond line \x1b[2J")

def exits(inputs, outputs, options):
    sys.exit(3)

def exits_huge(inputs, outputs, options):
    sys.exit(10 ** 5000)

def exits_with_text(inputs, outputs, options):
    sys.exit("bye\x1b[2J")

def writes_bytes(inputs, outputs, options):
    sys.stdout.write(b"bytes")

def generator_exit(inputs, outputs, options):
    raise GeneratorExit

def nan_assigned(inputs, outputs, options):
    outputs[0].data[...] = float("nan")

def nan_cast(inputs, outputs, options):
    outputs[0].data[...] = np.full(outputs[0].data.shape, np.nan, np.float32)

def writes_input(inputs, outputs, options):
    inputs[0].data[0, 0] = 1

def writes_input_made_writable(inputs, outputs, options):
    inputs[0].data.flags.writeable = True
    inputs[0].data[0, 0] += 1

def returns_array(inputs, outputs, options):
    return outputs[0].data

def returns_text(inputs, outputs, options):
    return "ok"

def returns_true(inputs, outputs, options):
    return True

def returns_huge(inputs, outputs, options):
    return 10 ** 5000

def wrong_dtype(inputs, outputs, options):
    outputs[0].data = outputs[0].data.astype(np.float32)

def not_an_array(inputs, outputs, options):
    outputs[0].data = [0] * 32

def clears_outputs(inputs, outputs, options):
    outputs.clear()

class Unprintable(Exception):
    def __str__(self):
        raise RuntimeError("no")

def raises_unprintable(inputs, outputs, options):
    raise Unprintable()

def loops(inputs, outputs, options):
    while True:
        try:
            pass
        except BaseException:
            pass

def hard_exit(inputs, outputs, options):
    os._exit(4)

def swallows_exit(inputs, outputs, options):
    try:
        os._exit(1)
    except BaseException:
        pass
    outputs[0].data[...] = inputs[0].data

def aborts(inputs, outputs, options):
    os.abort()

def kills_itself(inputs, outputs, options):
    os.kill(os.getpid(), signal.SIGKILL)

def raises_signal(inputs, outputs, options):
    signal.raise_signal(signal.SIGTERM)

def execs(inputs, outputs, options):
    os.execv(sys.executable, [sys.executable, "-c", "raise SystemExit(86)"])

async def _coroutine():
    pass

class ReturnsCoroutine:
    def __call__(self, inputs, outputs, options):
        return _coroutine()

returns_coroutine = ReturnsCoroutine()

def segfault(inputs, outputs, options):
    import ctypes
    ctypes.string_at(0)

def prints(inputs, outputs, options):
    print("twin output")
    outputs[0].data[...] = inputs[0].data
'''

#: twin -> what the one error line says about it (every one: exit 9)
FAILURES = {
    "raises": r"raised ValueError: boom\nsecond line \x1b[2J",
    "exits": "called sys.exit(3)",
    "exits_huge": "called sys.exit(a huge integer) at twins.py:",
    "exits_with_text": r"called sys.exit('bye\x1b[2J') at twins.py:",
    "writes_bytes": "raised TypeError: write() argument must be str, not bytes",
    "generator_exit": "raised GeneratorExit",
    "nan_assigned": "cannot convert float NaN to integer (NaN written into an integer output)",
    "nan_cast": "wrote NaN or an infinity into an integer output",
    "writes_input": "assignment destination is read-only (the inputs are read only",
    "writes_input_made_writable": "wrote its input 0; the inputs are read only",
    "returns_array": "returned a value of type ndarray",
    "returns_text": "returned a value of type str",
    "returns_true": "returned a value of type bool",
    "returns_huge": "returned a huge integer (an error)",
    "wrong_dtype": "left output 0 as float32[1, 32]; expected int8[1, 32]",
    "not_an_array": "left output 0 as a list, not a numpy array",
    "clears_outputs": "changed the list of its 1 output(s)",
    "raises_unprintable": "raised Unprintable: <Unprintable that cannot be printed>",
    # what would end utvm's process is refused while the twin runs, naming the call and where it was made
    "hard_exit": "called os._exit(4) at twins.py:",
    "swallows_exit": "called os._exit(1) at twins.py:",  # caught by the twin: still its failure
    "aborts": "called os.abort() at twins.py:",
    "kills_itself": ", SIGKILL) at twins.py:",
    "raises_signal": "called signal.raise_signal(SIGTERM) at twins.py:",
    "execs": "called os.execv() at twins.py:",
    "returns_coroutine": "returned a coroutine",
}
#: only in a child process (under --timeout): what cannot be caught in the calling process
CHILD_ONLY = {
    "loops": "did not return within 1 s (--timeout); it was stopped",
    "segfault": "ended without returning (its process was killed by SIGSEGV)",
}


@pytest.fixture(autouse=True)
def _no_bindings_left() -> Iterator[None]:
    with custom_ops.bindings():
        yield


def _model_bytes() -> bytes:
    b = TFLiteBuilder()
    x = b.tensor("x", [1, 32], "int8", scale=0.5, zero_point=3)
    y = b.tensor("y", [1, 32], "int8", scale=0.25, zero_point=-2)
    z = b.tensor("z", [1, 32], "int8", scale=0.25, zero_point=-2)
    b.custom_op("ClampScale", [x], [y], OPTIONS)
    b.op("RELU", [y], [z])
    return b.build([x], [z])


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The model, its MLF (compiled once: `run MLF --check` needs no compiler) and the twins' file."""
    d = tmp_path_factory.mktemp("user_code")
    model = d / "clamp.tflite"
    model.write_bytes(_model_bytes())
    twins = d / "twins.py"
    twins.write_text(TWINS)
    tar = d / "clamp.tar"
    with custom_ops.bindings():
        assert main(["compile", str(model), "-q", "-o", str(tar), "--custom-op", C_OP]) == 0
    return {"model": model, "mlf": tar, "twins": twins, "dir": d}


def _one_line(capsys: pytest.CaptureFixture) -> str:
    err = capsys.readouterr().err
    assert err.endswith("\n") and err.count("\n") == 1, err
    return err.strip()


def _run_check(files: dict[str, Path], twin: str, *extra: str) -> int:
    return main(["run", str(files["mlf"]), "--check", "-q", "--seed", "1", "--repeat", "1",
                 "--custom-op-py", f"ClampScale={files['twins']}:{twin}", *extra])


# --- a twin inside the reference interpreter's error contract ------------------------------------------------

@pytest.mark.parametrize("twin", ["raises", "exits", "returns_array", "loops", "hard_exit", "returns_coroutine"])
def test_a_failing_twin_is_one_line_exit_9_through_the_cli(twin: str, files: dict[str, Path],
                                                           capsys: pytest.CaptureFixture) -> None:
    capsys.readouterr()
    assert _run_check(files, twin, "--timeout", "1") == EXIT_ORACLE
    line = _one_line(capsys)
    want = {**FAILURES, **CHILD_ONLY}[twin]
    assert line.startswith("utvm run: error: node 0 (custom 'y'): the Python implementation of user operator "
                           f"'ClampScale' (twins.py:{twin}) ") and want in line, line


@pytest.mark.parametrize("in_child", [False, True], ids=["in-process", "child-process"])
def test_every_failure_of_a_twin_is_an_oracle_error(in_child: bool, files: dict[str, Path]) -> None:
    custom_ops.apply_args([], [f"ClampScale={files['twins']}:good"])
    graph = load(files["model"])  # (a bound operator imports)
    cases = {**FAILURES, **(CHILD_ONLY if in_child else {})}
    for twin, want in cases.items():
        custom_ops.apply_args([], [f"ClampScale={files['twins']}:{twin}"])
        with custom_ops.time_limit(1.0 if in_child else None), pytest.raises(OracleError) as info:
            run_reference(graph, {"x": X})
        text = shown(str(info.value))  # as the error line shows it
        assert want in text and f"(twins.py:{twin})" in text, (twin, text)
    custom_ops.apply_args([], [f"ClampScale={files['twins']}:good"])  # still usable after all that
    with custom_ops.time_limit(5.0 if in_child else None):
        out = run_reference(graph, {"x": X})["z"]
    np.testing.assert_array_equal(out, np.maximum(X, -2))


def test_a_twin_in_a_child_prints_to_stderr_and_its_outputs_come_back(files: dict[str, Path],
                                                                     capfd: pytest.CaptureFixture) -> None:
    custom_ops.apply_args([], [f"ClampScale={files['twins']}:prints"])
    capfd.readouterr()
    with custom_ops.time_limit(30):
        out = run_reference(load(files["model"]), {"x": X})["z"]
    np.testing.assert_array_equal(out, np.maximum(X, -2))
    captured = capfd.readouterr()
    assert "twin output" in captured.err and "twin output" not in captured.out  # stdout stays the command's


def test_sys_exit_at_import_is_exit_9_and_a_twin_is_imported_once(files: dict[str, Path], tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture) -> None:
    bad = tmp_path / "exits_at_import.py"
    bad.write_text("import sys\nsys.exit(7)\n")
    assert _run_check({**files, "twins": bad}, "f") == EXIT_ORACLE
    line = _one_line(capsys)
    assert "--custom-op-py ClampScale:" in line and "failed to load: called sys.exit(7)" in line
    # a file whose import is counted: one `run` (which binds before and while compiling) imports it once
    log = tmp_path / "imports.log"
    counted = tmp_path / "counted.py"
    counted.write_text(f"with open({str(log)!r}, 'a') as f:\n    f.write('imported\\n')\n"
                       "def twin(inputs, outputs, options):\n    outputs[0].data[...] = inputs[0].data\n")
    argv = ["run", str(files["model"]), "-q", "--seed", "1", "--repeat", "1", "--check",
            "--custom-op", C_OP, "--custom-op-py", f"ClampScale={counted}:twin"]
    assert main(argv) in (0, 3)  # (the twin is not clamp_scale: the check may differ; that is not the point)
    capsys.readouterr()
    assert log.read_text() == "imported\n"


def test_an_import_error_of_the_twin_s_file_is_one_line(files: dict[str, Path], tmp_path: Path,
                                                       capsys: pytest.CaptureFixture) -> None:
    latin1 = tmp_path / "latin1.py"
    latin1.write_bytes(b'x = "caf\xe9"\n')  # not UTF-8: a SyntaxError when imported
    assert _run_check({**files, "twins": latin1}, "f") == EXIT_ORACLE
    assert "failed to load: raised SyntaxError" in _one_line(capsys)


# --- user code cannot end, hold or break utvm's process (through the real command line) ----------------------

HANG_GUARD_S = 300  # not a speed requirement: only so a regression cannot hang CI for ever
CONTROL = {"Cc", "Cf", "Zl", "Zp"}


def _utvm(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`python -m utvm ARGV` in a process of its own (what only a real process shows: an exit, a hang)."""
    return subprocess.run([sys.executable, "-m", "utvm", *argv], capture_output=True, text=True, cwd=cwd,
                          stdin=subprocess.DEVNULL, timeout=HANG_GUARD_S)


def _twin_file(path: Path, extra: str) -> Path:
    """clamp_scale.py's twin (so a check passes) with `extra` module code after it."""
    path.write_text(PY_FILE.read_text() + "\n" + extra)
    return path


def _check_argv(files: dict[str, Path], twin_file: Path, func: str = "clamp_scale") -> list[str]:
    return ["run", str(files["mlf"]), "--check", "-q", "--seed", "1", "--repeat", "1",
            "--custom-op-py", f"ClampScale={twin_file}:{func}"]


def _inert(text: str) -> bool:
    """No character a terminal would act on, apart from the line breaks."""
    return not any(unicodedata.category(ch) in CONTROL for ch in text.replace("\n", ""))


@pytest.mark.parametrize("command", ["run", "info"])
def test_a_thread_the_twin_s_module_starts_does_not_keep_utvm_running(command: str, files: dict[str, Path],
                                                                     tmp_path: Path) -> None:
    twin = _twin_file(tmp_path / "threads.py", "import threading\n"
                      "threading.Thread(target=threading.Event().wait, name='user-forever').start()\n")
    argv = (_check_argv(files, twin) if command == "run" else
            ["info", str(files["model"]), "--custom-op", C_OP, "--custom-op-py", f"ClampScale={twin}:clamp_scale"])
    proc = _utvm(*argv, cwd=tmp_path)  # (before the fix: the check's OK, then no end)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "" and ("check against utvm reference semantics: OK" in proc.stdout
                                  if command == "run" else "custom      1" in proc.stdout)


@pytest.mark.parametrize("code, call", [
    ("import os\nos._exit(0)\n", "called os._exit(0) at {name}:4"),
    ("import os\nos._exit(3)\n", "called os._exit(3) at {name}:4"),  # 3: the status of a mismatch
    ("import sys\nsys.exit(0)\n", "called sys.exit(0) at {name}:4"),
    ("import os\nos.abort()\n", "called os.abort() at {name}:4"),
    ("import os, signal\nos.kill(os.getpid(), signal.SIGTERM)\n", "SIGTERM) at {name}:4"),
    ("import os, signal\nos.killpg(os.getpgrp(), signal.SIGKILL)\n", "SIGKILL) at {name}:4"),
    ("import os\ntry:\n    os._exit(0)\nexcept BaseException:\n    pass\n", "called os._exit(0) at {name}:5"),
])
def test_an_exit_at_import_is_one_line_exit_9(code: str, call: str, files: dict[str, Path], tmp_path: Path) -> None:
    twin = tmp_path / "exits_at_import.py"
    twin.write_text("def f(inputs, outputs, options):\n    pass\n" + code)
    proc = _utvm(*_check_argv(files, twin, "f"), cwd=tmp_path)
    assert proc.returncode == EXIT_ORACLE, (proc.returncode, proc.stdout, proc.stderr)
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.startswith(f"utvm run: error: --custom-op-py ClampScale: {twin} failed to load: ")
    assert call.format(name=twin.name) in proc.stderr, proc.stderr


@pytest.mark.parametrize("timeout", [[], ["--timeout", "30"]], ids=["in-process", "child-process"])
def test_an_exit_inside_the_twin_is_one_line_exit_9(timeout: list[str], files: dict[str, Path],
                                                    tmp_path: Path) -> None:
    twin = _twin_file(tmp_path / "exits.py", "import os\ndef exits(inputs, outputs, options):\n    os._exit(3)\n")
    argv = _check_argv(files, twin, "exits") + timeout
    if not timeout:  # the calls in utvm's own process: through the Python API
        script = (f"import sys\nfrom utvm import custom_ops\nfrom utvm.cli import main\n"
                  f"with custom_ops.time_limit(None):\n    sys.exit(main({argv!r}))\n")
        proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path,
                              stdin=subprocess.DEVNULL, timeout=HANG_GUARD_S)
    else:
        proc = _utvm(*argv, cwd=tmp_path)
    lines = len(twin.read_text().splitlines())  # (the os._exit line is the last)
    assert proc.returncode == EXIT_ORACLE, (proc.returncode, proc.stderr)
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert f"(exits.py:exits) called os._exit(3) at exits.py:{lines} (a twin returns" in proc.stderr, proc.stderr


def test_a_signal_the_twin_handles_itself_is_not_refused(files: dict[str, Path], tmp_path: Path) -> None:
    twin = _twin_file(tmp_path / "handled.py", """
import os, signal, time
def handled(inputs, outputs, options):
    got = []
    signal.signal(signal.SIGUSR1, lambda *args: got.append(1))
    os.killpg(os.getpgrp(), signal.SIGUSR1)  # (its own session: this process alone)
    os.kill(-os.getpgrp(), signal.SIGUSR1)
    os.kill(os.getpid(), signal.SIGUSR1)
    signal.raise_signal(signal.SIGUSR1)
    for _ in range(1000):
        if len(got) == 4:
            break
        time.sleep(0.001)
    assert len(got) == 4, got
    return clamp_scale(inputs, outputs, options)
""")
    argv = _check_argv(files, twin, "handled")
    script = (f"import sys\nfrom utvm import custom_ops\nfrom utvm.cli import main\n"
              f"with custom_ops.time_limit(None):\n    sys.exit(main({argv!r}))\n")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path,
                          stdin=subprocess.DEVNULL, timeout=HANG_GUARD_S, start_new_session=True)
    assert proc.returncode == 0 and proc.stderr == "", (proc.returncode, proc.stderr)
    assert "check against utvm reference semantics: OK" in proc.stdout


def test_what_user_code_prints_is_escaped_on_stderr_and_its_hooks_never_run(files: dict[str, Path],
                                                                                   tmp_path: Path) -> None:
    twin = _twin_file(tmp_path / "loud.py", r"""
import atexit, sys, threading
print("\x1b]0;pwned\x07\x1b[2J at import")
sys.stderr.write("to stderr\r\x1b[31mred")
atexit.register(lambda: print("\x1b[31mEXIT HANDLER RAN\x07"))
sys.addaudithook(lambda event, args: print("\x1b[31mAUDIT HOOK RAN\x07"))
def fails():
    raise ValueError("in a thread\n\x1b[2J")
thread = threading.Thread(target=fails, name="worker")
thread.start()
thread.join()
def loud(inputs, outputs, options):
    print("\x1b]0;pwned\x07 twin\nsecond line")
    sys.stderr.write("\x1b[2J\n")
    return clamp_scale(inputs, outputs, options)
""")
    proc = _utvm(*_check_argv(files, twin, "loud"), "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["bit_exact"] is True  # stdout stays the command's JSON
    assert _inert(proc.stderr) and "RAN" not in proc.stdout + proc.stderr, proc.stderr
    line_of = {text: i for i, line in enumerate(twin.read_text().splitlines(), 1)
               for text in ("atexit.register", "sys.addaudithook") if line.startswith(text)}
    lines = proc.stderr.splitlines()
    assert lines == [
        r"utvm run: ClampScale (loud.py) says: \x1b]0;pwned\x07\x1b[2J at import",
        r"utvm run: warning: ClampScale (loud.py): atexit.register(<lambda>) at "
        f"loud.py:{line_of['atexit.register']} is refused (utvm runs no exit handler of user code)",
        "utvm run: warning: ClampScale (loud.py): sys.addaudithook() at "
        f"loud.py:{line_of['sys.addaudithook']} is refused (a hook can never be removed: it would run inside "
        "utvm for the rest of the process)",
        r"utvm run: warning: ClampScale (loud.py): its thread 'worker' raised ValueError: in a thread\n\x1b[2J",
        r"utvm run: ClampScale (loud.py) says: to stderr\r\x1b[31mred",
        r"utvm run: ClampScale (loud.py:loud) says: \x1b]0;pwned\x07 twin",
        r"utvm run: ClampScale (loud.py:loud) says: second line",
        r"utvm run: ClampScale (loud.py:loud) says: \x1b[2J",
    ], proc.stderr


def test_an_escaped_stream_writes_whole_lines_and_bounds_one_that_never_ends() -> None:
    import io

    from utvm.support.user_python import EscapedStream

    target = io.StringIO()
    stream = EscapedStream(target, "p: ")
    stream.write("a\x1b")
    assert target.getvalue() == ""  # (a line is written when it ends)
    stream.write("b\nc")
    assert target.getvalue() == "p: a\\x1bb\n"
    stream.write("x" * EscapedStream._MAX_PENDING)  # a line that never ends is written all the same
    assert target.getvalue() == "p: a\\x1bb\n" + "p: c" + "x" * EscapedStream._MAX_PENDING + "\n"
    stream.write("\r")
    stream.end_line()
    assert target.getvalue().endswith("\np: \\r\n")
    with pytest.raises(TypeError, match="must be str, not bytes"):
        stream.write(b"x")  # type: ignore[arg-type]


def test_hooks_the_standard_library_registers_go_through(capsys: pytest.CaptureFixture) -> None:
    import atexit
    import sysconfig

    from utvm.support import user_python

    def handler() -> None:
        pass

    library = compile("before = atexit._ncallbacks()\natexit.register(handler)\n"
                      "registered = atexit._ncallbacks() - before\natexit.unregister(handler)\n",
                      os.path.join(sysconfig.get_paths()["stdlib"], "utvm_test_library.py"), "exec")
    user = compile("before = atexit._ncallbacks()\natexit.register(handler)\n"
                   "registered = atexit._ncallbacks() - before\n", "user.py", "exec")
    in_library: dict[str, object] = {"atexit": atexit, "handler": handler}
    in_user: dict[str, object] = dict(in_library)
    capsys.readouterr()
    with user_python.guarded("Op (user.py)"):
        exec(library, in_library)
        exec(user, in_user)
    assert in_library["registered"] == 1 and in_user["registered"] == 0
    assert capsys.readouterr().err == (f"utvm: warning: Op (user.py): atexit.register({handler.__qualname__}) at "
                                       "user.py:2 is refused (utvm runs no exit handler of user code)\n")


def test_a_process_the_twin_s_module_forks_never_runs_utvm(files: dict[str, Path], tmp_path: Path) -> None:
    twin = _twin_file(tmp_path / "forks.py", "import os\nif os.fork() == 0:\n    print('the fork')\n")
    proc = _utvm(*_check_argv(files, twin), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("check against utvm reference semantics: OK") == 1, proc.stdout


# --- user code cannot change the interpreter under utvm (in this process) ------------------------------------

STATE_CHANGES = r"""
import builtins, gc, io, locale, os, signal, sys, warnings
import numpy as np
def _depth():
    frame, n = sys._getframe(), 0
    while frame is not None:
        frame, n = frame.f_back, n + 1
    return n
sys.setrecursionlimit(_depth() + 30)  # (30 when run from a shell: utvm then fails in RecursionError)
sys.set_int_max_str_digits(640)
sys.excepthook = lambda *args: None
sys.stdout, sys.stderr, sys.stdin = io.StringIO(), io.StringIO(), io.StringIO()
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGTERM, lambda *args: None)
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGINT])
signal.setitimer(signal.ITIMER_REAL, 3600)
np.seterr(all="raise")
np.set_printoptions(precision=1)
warnings.simplefilter("ignore")
os.chdir("/")
os.umask(0o777)
os.environ["PATH"] = "/nowhere"
os.environ["UTVM_HOSTILE"] = "1"
builtins.print = lambda *args, **kw: None
gc.disable()
gc.callbacks.append(lambda *args: None)
gc.set_threshold(100000, 50, 50)
sys.setswitchinterval(0.5)
sys.displayhook = sys.breakpointhook = sys.unraisablehook = lambda *args: None
sys.setprofile(lambda *args: None)
np.seterrcall(lambda *args: None)
locale.setlocale(locale.LC_ALL, "C")
os.dup2(os.open(os.devnull, os.O_WRONLY), 2)
def changes(inputs, outputs, options):
    sys.setrecursionlimit(_depth() + 40)
    os.chdir("/")
    np.seterr(all="ignore")
    return clamp_scale(inputs, outputs, options)
"""


def _interpreter_state() -> dict[str, object]:
    import builtins
    import gc
    import locale
    import signal
    import warnings

    umask = os.umask(0o022)
    os.umask(umask)
    return {"recursion": sys.getrecursionlimit(), "digits": sys.get_int_max_str_digits(),
            "excepthook": sys.excepthook, "stdio": (sys.stdout, sys.stderr, sys.stdin),
            "sigint": signal.getsignal(signal.SIGINT), "sigterm": signal.getsignal(signal.SIGTERM),
            "mask": signal.pthread_sigmask(signal.SIG_BLOCK, []), "timer": signal.getitimer(signal.ITIMER_REAL),
            "numpy": (np.geterr(), np.get_printoptions()), "warnings": list(warnings.filters), "cwd": os.getcwd(),
            "umask": umask, "environ": dict(os.environ), "print": builtins.print,
            "gc": (gc.isenabled(), list(gc.callbacks), gc.get_threshold()), "fd 2": os.fstat(2)[:3],
            "switch": sys.getswitchinterval(), "profile": sys.getprofile(), "errcall": np.geterrcall(),
            "hooks": (sys.displayhook, sys.breakpointhook, sys.unraisablehook),
            "locale": locale.setlocale(locale.LC_ALL)}


@pytest.mark.parametrize("timeout", ["1000", None], ids=["child-process", "in-process"])
def test_user_code_leaves_the_interpreter_as_it_found_it(timeout: str | None, files: dict[str, Path],
                                                         tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    twin = _twin_file(tmp_path / "changes.py", STATE_CHANGES)
    before = _interpreter_state()
    argv = _check_argv(files, twin, "changes") + (["--timeout", timeout] if timeout else [])
    if timeout:
        status = main(argv)
    else:
        with custom_ops.time_limit(None):
            status = main(argv)
    out = capsys.readouterr()
    assert status == 0, out.err  # (before the fix: a RecursionError traceback)
    assert "check against utvm reference semantics: OK" in out.out and out.err == ""
    after = _interpreter_state()
    timer, timer_before = after.pop("timer"), before.pop("timer")  # (counting down: not the twin's hour)
    assert after == before and timer[1] == timer_before[1] and timer[0] <= timer_before[0]


def test_an_unexpected_exception_is_one_line_internal_error(monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture) -> None:
    import utvm.cli

    def broken() -> None:
        raise RuntimeError("boom\n\x1b[2J")

    monkeypatch.setattr(utvm.cli, "build_parser", broken)
    monkeypatch.delenv("UTVM_TRACEBACK", raising=False)
    assert main(["info", str(HELLO)]) == EXIT_ERROR
    line = _one_line(capsys)
    assert line.startswith(r"utvm info: internal error: RuntimeError: boom\n\x1b[2J (a bug of utvm's: please "
                           "report it"), line
    monkeypatch.setenv("UTVM_TRACEBACK", "1")
    with pytest.raises(RuntimeError, match="boom"):
        main(["info", str(HELLO)])

    def refuses() -> None:  # a utvm error raised before the command's own handler: its status, as always
        raise UsageError("bad\x1b[2J")

    monkeypatch.setattr(utvm.cli, "build_parser", refuses)
    assert main(["info", str(HELLO)]) == EXIT_USAGE
    assert _one_line(capsys) == r"utvm info: error: bad\x1b[2J"


# --- twins that are no plain functions -----------------------------------------------------------------------

@pytest.mark.parametrize("code, kind", [
    ("async def f(inputs, outputs, options):\n    pass\n", "an async function (async def)"),
    ("async def f(inputs, outputs, options):\n    yield\n", "an async generator function"),
    ("def f(inputs, outputs, options):\n    yield\n", "a generator function (it yields)"),
])
def test_an_async_or_generator_twin_is_refused_when_bound(code: str, kind: str, files: dict[str, Path],
                                                          tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    twin = tmp_path / "not_plain.py"
    twin.write_text(code)
    assert _run_check({**files, "twins": twin}, "f") == EXIT_USAGE
    assert f"--custom-op-py ClampScale: 'f' of {twin} is {kind}; the twin is a plain function" in _one_line(capsys)
    with pytest.raises(UsageError, match="is an async function"):
        custom_ops.register("ClampScale", _async_twin)


async def _async_twin(inputs: list, outputs: list, options: bytes) -> None:
    pass


def test_a_coroutine_returned_in_process_is_closed(files: dict[str, Path], recwarn: pytest.WarningsRecorder) -> None:
    import gc

    custom_ops.apply_args([], [f"ClampScale={files['twins']}:returns_coroutine"])
    with pytest.raises(OracleError, match="returned a coroutine"):
        run_reference(load(files["model"]), {"x": X})
    gc.collect()
    assert not [w for w in recwarn if "never awaited" in str(w.message)]


# --- what the user gives on the command line -----------------------------------------------------------------

@pytest.mark.parametrize("argv", [
    ["--custom-op", C_OP, "--custom-op", f"ClampScale={DATA / 'other.c'}:clamp_scale"],
    ["--custom-op", C_OP, "--custom-op-py", f"ClampScale={PY_FILE}:clamp_scale",
     "--custom-op-py", f"ClampScale={PY_FILE}:scale_clamp_f32"],
])
def test_one_operator_named_twice_is_refused(argv: list[str], files: dict[str, Path], tmp_path: Path,
                                             capsys: pytest.CaptureFixture) -> None:
    assert main(["compile", str(files["model"]), "-q", "-o", str(tmp_path / "m.tar"), *argv]) == EXIT_USAGE
    assert "ClampScale is given twice" in _one_line(capsys)
    assert not (tmp_path / "m.tar").exists()


def test_build_device_refuses_a_custom_op_it_would_ignore(files: dict[str, Path], tmp_path: Path,
                                                         capsys: pytest.CaptureFixture) -> None:
    out = str(tmp_path / "fw")
    assert main(["build-device", "-o", out, "--custom-op", C_OP]) == EXIT_USAGE
    assert "--custom-op binds an operator of a --model file; no --model is given" in _one_line(capsys)
    assert main(["build-device", "-o", out, "--model", str(files["mlf"]), "--custom-op", C_OP]) == EXIT_USAGE
    assert "every --model is an MLF" in _one_line(capsys)
    assert main(["build-device", "-o", out, "--model", str(HELLO), "--custom-op", C_OP]) == EXIT_USAGE
    assert "--custom-op ClampScale: the model has no such operator" in _one_line(capsys)
    assert not Path(out).exists()


def test_an_mlf_refuses_bindings_it_would_ignore(files: dict[str, Path], capsys: pytest.CaptureFixture) -> None:
    assert main(["run", str(files["mlf"]), "-q", "--custom-op", C_OP]) == EXIT_USAGE
    assert "is already compiled (an MLF carries the C of its user operators)" in _one_line(capsys)
    assert main(["run", str(files["mlf"]), "-q", "--custom-op-py", f"Other={files['twins']}:good"]) == EXIT_USAGE
    assert "--custom-op Other: the model has no such operator" in _one_line(capsys)


def test_user_files_that_are_not_regular_files_or_not_text(files: dict[str, Path], tmp_path: Path,
                                                          capsys: pytest.CaptureFixture) -> None:
    fifo_py, fifo_c = tmp_path / "fifo.py", tmp_path / "fifo.c"
    os.mkfifo(fifo_py)
    os.mkfifo(fifo_c)
    compile_argv = ["compile", str(files["model"]), "-q", "-o", str(tmp_path / "m.tar")]
    assert main([*compile_argv, "--custom-op", f"ClampScale={fifo_c}:f"]) == EXIT_USAGE
    assert f"{fifo_c} is not a regular file" in _one_line(capsys)
    assert main([*compile_argv, "--custom-op", C_OP, "--custom-op-py", f"ClampScale={fifo_py}:f"]) == EXIT_USAGE
    assert f"{fifo_py} is not a regular file" in _one_line(capsys)
    latin1 = tmp_path / "latin1.c"
    latin1.write_bytes(C_FILE.read_bytes() + b"/* caf\xe9 */\n")
    assert main([*compile_argv, "--custom-op", f"ClampScale={latin1}:clamp_scale"]) == EXIT_USAGE
    assert "latin1.c is not UTF-8 text (byte 0xe9 at offset" in _one_line(capsys)
    assert main([*compile_argv, "--custom-op", f"ClampScale={tmp_path / 'none.c'}:f"]) == EXIT_IO
    assert "none.c: no such file" in _one_line(capsys)
    custom_ops.MAX_SOURCE_BYTES, saved = 100, custom_ops.MAX_SOURCE_BYTES  # (a 64 MiB file, in small)
    try:
        assert main([*compile_argv, "--custom-op", C_OP]) == EXIT_USAGE
    finally:
        custom_ops.MAX_SOURCE_BYTES = saved
    assert "clamp_scale.c holds" in _one_line(capsys)


# --- user C: the same flags everywhere, never in place of utvm's files ---------------------------------------

def test_user_code_flags_are_one_definition() -> None:
    import re

    from utvm.platform.qemu.project import TEMPLATE_DIR
    from utvm.platform.user_code import USER_CODE_FLAGS
    from utvm.support import cc

    (warnings,) = re.findall(r"^WARNINGS := (.*)$", (TEMPLATE_DIR / "Makefile").read_text(), re.MULTILINE)
    assert tuple(warnings.split()) == USER_CODE_FLAGS == tuple(cc.WARNING_FLAGS)


def test_custom_op_c_gets_the_strict_flags_on_the_host(files: dict[str, Path], tmp_path: Path,
                                                      capsys: pytest.CaptureFixture) -> None:
    sloppy = tmp_path / "sloppy_op.c"  # an unused variable: a warning, so an error, as on the boards
    sloppy.write_text(C_FILE.read_text().replace("int32_t clamp_scale(const UtvmCustomTensor* inputs, int32_t "
                                                 "num_inputs, UtvmCustomTensor* outputs,\n                    "
                                                 "int32_t num_outputs, const uint8_t* options, int32_t "
                                                 "options_size) {",
                                                 "int32_t clamp_scale(const UtvmCustomTensor* inputs, int32_t "
                                                 "num_inputs, UtvmCustomTensor* outputs,\n                    "
                                                 "int32_t num_outputs, const uint8_t* options, int32_t "
                                                 "options_size) {\n  int unused_here;", 1))
    assert "int unused_here;" in sloppy.read_text()
    assert main(["run", str(files["model"]), "-q", "--custom-op", f"ClampScale={sloppy}:clamp_scale"]) == EXIT_BUILD
    err = capsys.readouterr().err
    assert err.startswith("utvm run: error: ") and "utvm_user_sloppy_op.c" in err and "unused_here" in err


#: sensor.value() over RPC returns DEEP + NEAR = 43, from headers in a subdirectory of -I and beside the file
SENSOR_C = rb"""
#include <stdint.h>
#include <string.h>
#include <tvm/runtime/c_runtime_api.h>
#include "sub/deep.h"
#include "near.h"
/* caf\xe9: Latin-1 */

static int sensor_value(TVMValue* args, int* type_codes, int num_args, TVMValue* ret_value, int* ret_type_code,
                        void* resource_handle) {
  (void)args; (void)type_codes; (void)num_args; (void)resource_handle;
  ret_value->v_int64 = DEEP + NEAR;
  *ret_type_code = (int)kTVMArgInt;
  return 0;
}

void utvm_user_init(void);

void utvm_user_init(void) {
  TVMBackendPackedCFunc func = &sensor_value;
  TVMFunctionHandle handle = NULL;
  (void)memcpy((void*)&handle, (const void*)&func, sizeof(handle));
  (void)TVMFuncRegisterGlobal("sensor.value", handle, 0);
}
""".replace(b"\\xe9", b"\xe9")


@pytest.fixture
def user_c(tmp_path: Path) -> tuple[Path, Path]:
    """(sensor.c beside its own header, an -I tree with a subdirectory); headers in Latin-1, not UTF-8."""
    src = tmp_path / "src" / "sensor.c"
    src.parent.mkdir()
    src.write_bytes(SENSOR_C)
    (src.parent / "near.h").write_bytes(b"#define NEAR 2 /* \xe9 */\n")
    inc = tmp_path / "inc"
    (inc / "sub").mkdir(parents=True)
    (inc / "sub" / "deep.h").write_bytes(b'#include "other.h"\n#define DEEP (OTHER + 1)\n')
    (inc / "sub" / "other.h").write_bytes(b"#define OTHER 40 /* \xff */\n")
    return src, inc


@pytest.mark.parametrize("platform", ["host", "qemu-cortex-m4"])
@pytest.mark.parametrize("stray", ["beside the source", "deep in -I", "tvm path in -I", "model header in -I"])
def test_a_user_file_never_shadows_one_of_utvm_s(platform: str, stray: str, user_c: tuple[Path, Path],
                                                 tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    src, inc = user_c
    path = {"beside the source": src.parent / "crt_config.h", "deep in -I": inc / "sub" / "crt_config.h",
            "tvm path in -I": inc / "tvm" / "runtime" / "c_runtime_api.h",
            "model header in -I": inc / "sub" / "tvmgen_default.h"}[stray]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#define TVM_CRT_MAX_ARGS 1\n")
    argv = ["--extra-source", str(src), "-I", str(inc), "-o", str(tmp_path / "fw"), "--platform", platform]
    if stray == "model header in -I":  # the model compiled as `default`: its header is tvmgen_default.h
        argv += ["--model", f"default={HELLO}"]
    assert main(["build-device", *argv]) == EXIT_USAGE
    line = _one_line(capsys)
    assert f"{path} would shadow utvm's" in line and (str(src) in line or f"-I {inc}" in line), line
    assert not (tmp_path / "fw").exists()


def test_headers_in_any_encoding_and_subdirectories_work_on_the_host(user_c: tuple[Path, Path],
                                                                   tmp_path: Path) -> None:
    from utvm.platform import get_platform

    src, inc = user_c
    assert b"\xe9" in src.read_bytes()
    assert main(["build-device", "--extra-source", str(src), "-I", str(inc), "-o", str(tmp_path / "fw")]) == 0
    with get_platform("host").start(tmp_path / "fw") as session:
        assert session.get_function("sensor.value")() == 43


def test_boards_get_the_whole_include_tree_as_bytes(user_c: tuple[Path, Path], tmp_path: Path) -> None:
    from utvm.platform import get_platform
    from utvm.platform.qemu.project import generate_project

    src, inc = user_c
    (inc / "sub" / "table.inc").write_bytes(b"1, 2, 3\n")  # not only *.h: whatever the headers include
    os.mkfifo(inc / "sub" / "pipe.h")  # never opened
    os.symlink(inc, inc / "sub" / "loop")  # a loop of links ends
    spec = get_platform("qemu-cortex-m4").firmware_spec(with_test_functions=False, extra_sources=[src],
                                                        include_dirs=[inc])
    project = generate_project(spec, tmp_path / "project")
    assert (project / "src" / "sensor.c").read_bytes() == src.read_bytes()
    assert (project / "include" / "near.h").read_bytes() == (src.parent / "near.h").read_bytes()
    for rel in ("sub/deep.h", "sub/other.h", "sub/table.inc"):
        assert (project / "include" / rel).read_bytes() == (inc / rel).read_bytes()
    assert not (project / "include" / "sub" / "pipe.h").exists()
    assert (project / "include" / "crt_config.h").read_text().count("TVM_CRT_MAX_ARGS") >= 1


@pytest.mark.parametrize("platform", ["host", "qemu-cortex-m4"])
def test_sources_given_twice_or_trees_too_large(platform: str, user_c: tuple[Path, Path], tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture) -> None:
    from utvm.platform import user_code

    src, inc = user_c
    out = ["-o", str(tmp_path / "fw"), "--platform", platform]
    assert main(["build-device", "--extra-source", str(src), "--extra-source", str(src), *out]) == EXIT_USAGE
    assert f"--extra-source {src} is given twice" in _one_line(capsys)
    monkeypatch.setattr(user_code, "MAX_TREE_FILES", 1)  # (10,000 files, in small)
    assert main(["build-device", "--extra-source", str(src), "-I", str(inc), *out]) == EXIT_USAGE
    assert f"-I {inc}: more than 1 files" in _one_line(capsys)
    if platform != "host":  # two sources a board project would give one name (the host keeps each its own)
        other = tmp_path / "my sensor.c"
        other.write_text("int other_value(void);\nint other_value(void) { return 1; }\n")
        (tmp_path / "my_sensor.c").write_text("int third(void);\nint third(void) { return 3; }\n")
        assert main(["build-device", "--extra-source", str(other), "--extra-source", str(tmp_path / "my_sensor.c"),
                     *out]) == EXIT_USAGE
        assert "two sources would be src/my_sensor.c" in _one_line(capsys)


def test_a_board_project_takes_any_source_file_name(user_c: tuple[Path, Path], tmp_path: Path) -> None:
    from utvm.platform import get_platform

    src, inc = user_c
    odd = src.with_name("my sensor $x " + "q" * 230 + ".c")
    odd.write_bytes(src.read_bytes())
    spec = get_platform("qemu-cortex-m4").firmware_spec(with_test_functions=False, extra_sources=[odd],
                                                        include_dirs=[inc])
    (name,) = [n for n in spec.app_sources if n != "main.c"]
    assert name == custom_ops.safe_stem(odd.stem) + ".c" and len(name) <= 66 and name.startswith("my_sensor__x_")


@pytest.mark.slow
def test_a_nested_include_tree_builds_and_runs_on_qemu(user_c: tuple[Path, Path], tmp_path: Path) -> None:
    src, inc = user_c
    src = src.rename(src.with_name("my sensor " + "q" * 240 + ".c"))  # a name make and .su files choke on
    from utvm.platform import get_platform

    fw = tmp_path / "fw.elf"
    assert main(["build-device", "--platform", "qemu-cortex-m4", "--extra-source", str(src), "-I", str(inc),
                 "-o", str(fw)]) == 0
    with get_platform("qemu-cortex-m4").start(fw) as session:
        assert session.get_function("sensor.value")() == 43


# --- names that go into an archive ---------------------------------------------------------------------------

def test_a_long_source_stem_makes_an_mlf_that_reads_back(files: dict[str, Path], tmp_path: Path,
                                                         capsys: pytest.CaptureFixture) -> None:
    long_c = tmp_path / ("s" * 250 + ".c")
    long_c.write_bytes(C_FILE.read_bytes())
    tar = tmp_path / "long.tar"
    assert main(["compile", str(files["model"]), "-q", "-o", str(tar), "--custom-op",
                 f"ClampScale={long_c}:clamp_scale"]) == 0
    compiled = mlf.load(tar)
    (name,) = [n for n in compiled.sources if custom_ops.is_user_source(n)]
    assert name == custom_ops.user_file_name(long_c) and len(name) <= 80
    with tarfile.open(tar) as tf:
        tf.extractall(tmp_path / "x", filter="data")
    assert (tmp_path / "x" / "codegen" / "host" / "src" / name).read_bytes() == C_FILE.read_bytes()
    capsys.readouterr()
    assert main(["run", str(tar), "-q", "--repeat", "1", "--check", "--custom-op-py",
                 f"ClampScale={PY_FILE}:clamp_scale"]) == 0


@settings(max_examples=200)
@given(st.text(min_size=1, max_size=300).filter(lambda s: "/" not in s and "\0" not in s))
def test_every_user_file_name_is_a_safe_archive_member(stem: str) -> None:
    from utvm.support.archive import safe_file_name

    name = custom_ops.user_file_name(f"{stem}.c")
    assert safe_file_name(name, "member") == name and name.isascii() and len(name) <= 10 + 64 + 2
    assert custom_ops.is_user_source(name) and name == custom_ops.user_file_name(f"{stem}.c")


def test_the_python_api_refuses_what_the_cli_refuses() -> None:
    with pytest.raises(UsageError, match="is not callable"):
        custom_ops.register("Op", 3)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="time limit"):
        with custom_ops.time_limit(float("nan")):
            pass
