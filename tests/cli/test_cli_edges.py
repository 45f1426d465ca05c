"""The edges of the command line itself (issue 19), class by class:

- Ctrl-C: the command owns SIGINT from its first instruction: an interrupt while the subcommands' modules
  are imported, while the command line is parsed or while the work runs is one line and status 130, never a
  traceback or a death by signal (subprocesses that signal themselves at a fixed point: no timing);
- no abbreviation: an option is never matched by a prefix (`--crt-config` is not `--crt-config-file`);
- input paths: every option (and positional) naming a file or directory to read says what the path is when
  it is not what it must be (a directory, a FIFO, a device, a socket, a dangling link), exit 2, one line,
  and never opens (so never waits on) a FIFO;
- terminal output: text from a model (tensor, op and custom-op names) or typed by the user is escaped in
  every error line, progress line and table of run / compile / deploy / size / --profile / --debug-layers.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import unicodedata
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.tflite_builder import TFLiteBuilder, one_op_model

from utvm.cli import EXIT_INTERRUPTED, EXIT_MODEL, EXIT_USAGE, _one_line, build_parser, main
from utvm.cli import _args as A
from utvm.errors import UsageError
from utvm.support.models import models_dir

ROOT = Path(__file__).resolve().parents[2]
HELLO = models_dir() / "tflm" / "hello_world_int8.tflite"
GUARD_S = 300  # not a speed requirement: only so a regression cannot hang CI for ever

#: Unicode categories a terminal acts on rather than shows (utvm.support.text).
ACTIVE = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"})

EVIL_IN = "in\x1b[2J\nFORGED\u202eput"
EVIL_MID = "mid\r\x1b[31mred\x07"
EVIL_OUT = "out\n#  forged row\x1b]0;title\x07"


def inert(text: str) -> bool:
    """No character a terminal would act on, apart from the newlines between lines."""
    return not any(unicodedata.category(ch) in ACTIVE for ch in text.replace("\n", ""))


def one_line_error(err: str, command: str) -> str:
    assert err.startswith(f"utvm {command}: error: "), err
    assert err.count("\n") == 1 and err.endswith("\n") and "Traceback" not in err, err
    assert inert(err), err
    return err


@pytest.fixture(scope="module")
def evil_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A two-operator float model whose tensor names hold escape sequences, newlines, bidi overrides."""
    b = TFLiteBuilder()
    x = b.tensor(EVIL_IN, (1, 4), "float32")
    m = b.tensor(EVIL_MID, (1, 4), "float32")
    y = b.tensor(EVIL_OUT, (1, 4), "float32")
    b.op("RELU", [x], [m])
    b.op("TANH", [m], [y])
    path = tmp_path_factory.mktemp("evil") / "evil.tflite"
    path.write_bytes(b.build([x], [y]))
    return path


# --- Ctrl-C ---------------------------------------------------------------------------------------------------

# The driver stands in for the `utvm` console script (`sys.exit(main())`, argv from sys.argv) and sends itself
# SIGINT at one fixed point: when a module is first imported, or when a function of the command is called.
DRIVER = r"""
import builtins, os, signal, sys
kind, point = sys.argv[1], sys.argv[2]
del sys.argv[1:3]
if os.environ.get("IGNORE_SIGINT"):
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # as a shell starts a background job
def interrupt():
    os.kill(os.getpid(), signal.SIGINT)
if kind == "import":
    real_import, fired = builtins.__import__, []
    def hooked(name, *args, **kwargs):
        if name == point and not fired:
            fired.append(1)
            interrupt()
        return real_import(name, *args, **kwargs)
    builtins.__import__ = hooked
from utvm.cli import main
if kind == "call":
    import importlib
    module, _, attr = point.rpartition(".")
    mod = importlib.import_module(module)
    real = getattr(mod, attr)
    def wrapped(*args, **kwargs):
        interrupt()
        return real(*args, **kwargs)
    setattr(mod, attr, wrapped)
sys.exit(main())
"""


def _drive(kind: str, point: str, *argv: str, ignore: bool = False) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **({"IGNORE_SIGINT": "1"} if ignore else {})}
    return subprocess.run([sys.executable, "-c", DRIVER, kind, point, *argv], capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=GUARD_S)


@pytest.mark.parametrize("kind, point, what", [
    ("import", "utvm.cli._args", "before the first subcommand module is imported"),
    ("import", "numpy", "while the subcommands' modules import numpy"),
    ("call", "utvm.cli._args.model_name", "while the command line is parsed (an argument type)"),
    ("call", "utvm.mlf.export_model_library_format", "during the work"),
])
def test_ctrl_c_at_any_point_is_one_line_and_130(kind: str, point: str, what: str, tmp_path: Path) -> None:
    proc = _drive(kind, point, "compile", str(HELLO), "--model-name", "m", "-o", str(tmp_path / "out.tar"), "-q")
    assert proc.returncode == EXIT_INTERRUPTED, (what, proc.returncode, proc.stderr)  # not -2 (death by signal)
    assert proc.stderr == "utvm compile: interrupted\n", (what, proc.stderr)
    assert not (tmp_path / "out.tar").exists()


def test_ctrl_c_before_a_command_is_named(tmp_path: Path) -> None:
    proc = _drive("import", "numpy")  # `utvm` alone: the parser is being built when the interrupt comes
    assert proc.returncode == EXIT_INTERRUPTED and proc.stderr == "utvm: interrupted\n", proc.stderr


def test_a_background_job_started_with_sigint_ignored_keeps_it_ignored(tmp_path: Path) -> None:
    """A shell starts a background job with SIGINT ignored (the terminal's Ctrl-C is not for it): the command
    does not take SIGINT back, and finishes its work."""
    proc = _drive("import", "numpy", "compile", str(HELLO), "-o", str(tmp_path / "out.tar"), "-q", ignore=True)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "out.tar").is_file()


def test_importing_the_command_is_light() -> None:
    """The console script imports utvm.cli before main() runs: nothing heavy may be imported there, or an
    interrupt during that import would be a traceback."""
    code = "import sys, utvm.cli; print(sorted(m for m in ('numpy', 'argparse', 'utvm.errors') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=GUARD_S)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out


# --- no abbreviation ------------------------------------------------------------------------------------------

def _parsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    subs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))  # noqa: SLF001
    return {"": parser, **subs.choices}


def test_no_parser_matches_an_option_by_a_prefix() -> None:
    parsers = _parsers()
    assert all(p.allow_abbrev is False for p in parsers.values())
    for command, p in parsers.items():
        if not command:
            continue
        options = {s for a in p._actions for s in a.option_strings}  # noqa: SLF001
        base = [] if command in ("build-device", "acceptance") else [str(HELLO)]
        base += ["-o", "x"] if "-o" in options else []
        for option in options:
            if option.startswith("--") and len(option) > 4 and option[:-1] not in options:
                _ns, extra = p.parse_known_args([*base, option[:-1]])
                assert extra == [option[:-1]], (command, option)


def test_crt_config_is_never_read_as_crt_config_file(monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture) -> None:
    """docs/crt.md: `utvm run ... --crt-config NAME=VALUE` overrides a limit of the evaluation firmware (it
    was prefix-matched to --crt-config-file: "no such file")."""
    import utvm.cli.run as run_cli

    seen: dict[str, object] = {}

    def build_firmware(compiled: object, platform: str, **kwargs: object) -> Path:
        seen.update(kwargs)
        raise UsageError("stop here")

    monkeypatch.setattr(run_cli, "build_firmware", build_firmware)
    assert main(["run", str(HELLO), "--crt-config", "TVM_CRT_MAX_PACKET_SIZE_BYTES=4096", "-q"]) == EXIT_USAGE
    assert seen["crt_config"] == {"TVM_CRT_MAX_PACKET_SIZE_BYTES": "4096"} and "crt_config_file" not in seen
    capsys.readouterr()
    for command in (["run", str(HELLO)], ["build-device", "-o", "x"]):
        assert main([*command, "--crt-config", "TVM_CRT_MAX_ARGS=8", "--crt-config", "TVM_CRT_MAX_ARGS=9"]) == 2
        assert "TVM_CRT_MAX_ARGS is given twice" in one_line_error(capsys.readouterr().err, command[0])
        assert main([*command, "--crt-config", "TVM_CRT_MAX_ARGZ=8"]) == EXIT_USAGE  # a typo does not vanish
        assert "TVM_CRT_MAX_ARGZ is not a crt_config.h setting" in one_line_error(capsys.readouterr().err,
                                                                                  command[0])


def test_an_unknown_option_names_its_command(capsys: pytest.CaptureFixture) -> None:
    import signal

    before = signal.getsignal(signal.SIGINT)
    assert main(["compile", str(HELLO), "--tuning", "log.jsonl"]) == EXIT_USAGE
    err = one_line_error(capsys.readouterr().err, "compile")
    assert "unrecognized arguments: --tuning log.jsonl" in err
    assert signal.getsignal(signal.SIGINT) is before  # main(list) leaves the caller's process as it was


# --- input paths ------------------------------------------------------------------------------------------------

FILE_TYPES = (A.input_file, A.c_source, A.board_config, A.model_file)
DIR_TYPES = (A.input_dir, A.include_dir)
KINDS = {
    "missing": "no such",
    "directory": "is a directory, not a",
    "FIFO": "is a FIFO, not a",
    "device": "is a character device, not a",
    "socket": "is a socket, not a",
    "dangling link": "a symbolic link to nothing",
    "through a file": "a component of the path is not a directory",
    "regular file": "is a regular file, not a directory",
}


def _input_options() -> list[tuple[str, str]]:
    """(command, option) of every argument whose value is a path to read ('' for a positional; every
    spelling of an option: `-I/--include-dir`)."""
    out = []
    for command, p in _parsers().items():
        for a in p._actions:  # noqa: SLF001
            if a.type in (*FILE_TYPES, *DIR_TYPES, A.model_or_mlf):
                out.append((command, "/".join(a.option_strings)))
    return out


def test_every_path_to_read_has_a_path_type() -> None:
    """No option that reads a file is left with a type that only checks the path is not empty."""
    options = set(_input_options())
    for command in ("compile", "run", "deploy", "size", "info", "tune"):
        assert (command, "") in options, command
    for option in ("--tuning-log", "--crt-config-file", "--extra-source", "-I/--include-dir", "--board-config"):
        assert ("run", option) in options, option
    assert ("compile", "--tuning-log") in options  # (tune --summary: the tuning-log reader says what it is)
    assert ("build-device", "--crt-config-file") in options and ("build-device", "-I/--include-dir") in options


@pytest.fixture(scope="module")
def short_dir() -> Iterator[Path]:
    """A short directory (a socket's path must fit in 108 bytes)."""
    with tempfile.TemporaryDirectory(prefix="u19", dir="/tmp") as d:
        yield Path(d)


def _make(kind: str, where: Path, name: str) -> str:
    where.mkdir(parents=True, exist_ok=True)
    path = where / name
    if kind == "directory":
        path.mkdir()
    elif kind == "FIFO":
        os.mkfifo(path)  # opening it would wait for a writer: for ever
    elif kind == "device":
        path.symlink_to("/dev/null")  # under a name the option takes (FILE.c)
    elif kind == "socket":
        s = socket.socket(socket.AF_UNIX)
        s.bind(str(path))
        s.close()
    elif kind == "dangling link":
        path.symlink_to(where / "nothing-here")
    elif kind == "through a file":
        (where / "plain").write_text("x")
        return str(where / "plain" / name)
    elif kind == "regular file":
        path.write_text("x")
    return str(path)


def _cases() -> list[tuple[str, str, str]]:
    out = []
    for command, option in _input_options():
        p = _parsers()[command]
        action = next(a for a in p._actions if "/".join(a.option_strings) == option)  # noqa: SLF001
        for kind in KINDS:
            if kind == "regular file" and action.type not in DIR_TYPES:
                continue
            if kind == "directory" and action.type in (*DIR_TYPES, A.model_or_mlf):
                continue  # what they take (an MLF may be an extracted directory)
            out.append((command, option, kind))
    return out


@pytest.mark.parametrize("command, option, kind", _cases())
def test_a_path_to_read_says_what_it_is(command: str, option: str, kind: str, short_dir: Path,
                                        capsys: pytest.CaptureFixture) -> None:
    where = short_dir / f"{command}{option}{kind}".replace(" ", "_")
    path = _make(kind, where, "m.tflite" if not option else "x.c")
    model = [str(HELLO)] if command not in ("build-device", "tune") else []
    argv = [command, path] if not option else [command, *model, option.split("/")[-1], path]
    if command in ("deploy", "build-device") or (command == "tune" and not option):
        argv += ["-o", str(where / "out")]
    assert main(argv) == EXIT_USAGE
    err = one_line_error(capsys.readouterr().err, command)
    assert f"argument {option or 'model'}" in err and KINDS[kind] in err, err
    assert path in err or repr(path)[1:-1] in err, err
    assert not (where / "out").exists()


def test_an_unreadable_input_is_said_by_name(capsys: pytest.CaptureFixture) -> None:
    """Root reads every file, so under root the command runs in a child that became `nobody` first. The folder
    is a fresh world-searchable one under the system's temp dir, holding a copy of the model: only the file
    itself is unreadable."""
    where = Path(tempfile.mkdtemp(prefix="utvm-unreadable-"))
    try:
        where.chmod(0o755)
        model = where / "m.tflite"  # the checkout may sit in a folder only its owner can search
        shutil.copyfile(HELLO, model)
        model.chmod(0o644)
        log = where / "log.jsonl"
        log.write_text("")
        log.chmod(0)
        argv = ["compile", str(model), "--tuning-log", str(log), "-o", str(where / "o.tar")]
        if os.geteuid() != 0:
            assert main(argv) == EXIT_USAGE
            err = capsys.readouterr().err
        else:
            read_end, write_end = os.pipe()
            pid = os.fork()
            if pid == 0:  # the child: drop root, run the command, send back its status and stderr
                code = 99
                try:
                    os.close(read_end)
                    os.setgid(65534)
                    os.setuid(65534)
                    stream = io.StringIO()
                    with contextlib.redirect_stderr(stream):
                        code = main(argv)
                    os.write(write_end, stream.getvalue().encode())
                finally:
                    os._exit(code)
            os.close(write_end)
            with os.fdopen(read_end, "rb") as pipe:
                err = pipe.read().decode()
            assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == EXIT_USAGE, err
        assert "permission denied (the file cannot be read)" in one_line_error(err, "compile")
        assert not (where / "o.tar").exists()
    finally:
        shutil.rmtree(where)


def test_regular_files_and_links_to_them_still_pass(tmp_path: Path) -> None:
    real = tmp_path / "crt_config.h"
    real.write_text("")
    (tmp_path / "link.h").symlink_to(real)
    assert A.input_file(str(tmp_path / "link.h")) == str(tmp_path / "link.h")
    assert A.model_or_mlf(str(tmp_path)) == str(tmp_path)  # an extracted MLF is a directory
    assert A.input_dir(str(tmp_path)) == str(tmp_path)
    assert stat.S_ISREG(os.stat(A.model_file(str(HELLO))).st_mode)


# --- terminal output --------------------------------------------------------------------------------------------

@settings(max_examples=200)
@given(st.text(max_size=40))
def test_every_error_line_is_one_inert_line(text: str) -> None:
    for exc in (UsageError(text), OSError(2, "No such file or directory", text), RuntimeError(text)):
        line = _one_line(exc)
        assert "\n" not in line and inert(line), (text, line)


def test_a_hostile_value_in_a_parse_error_is_escaped(capsys: pytest.CaptureFixture) -> None:
    assert main(["run", str(HELLO), "--platform", "\x1b[2J\nforged\u202e"]) == EXIT_USAGE
    assert "\\x1b[2J\\nforged\\u202e" in one_line_error(capsys.readouterr().err, "run")


def test_a_hostile_operator_name_in_an_error_is_escaped(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    model = tmp_path / "evil_op.tflite"
    model.write_bytes(one_op_model(custom_code="Evil\x1b[2J\nop\u2028"))
    assert main(["compile", str(model), "-o", str(tmp_path / "o.tar"), "-q"]) == EXIT_MODEL
    assert "Evil\\x1b[2J\\nop\\u2028" in one_line_error(capsys.readouterr().err, "compile")


def test_run_tables_and_progress_escape_model_names(evil_model: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["run", str(evil_model), "--profile", "--debug-layers", "--seed", "1"]) == 0
    out, err = capsys.readouterr()
    assert inert(out) and inert(err), (out, err)
    assert all(line.startswith("[") for line in err.splitlines()), err  # progress lines only
    assert "kernel tvmgen_default_fused_tanh (node 1 (tanh 'out\\n#  forged row\\x1b]0;title\\x07'))" in err
    assert "output 'out\\n#  forged row\\x1b]0;title\\x07' float32[1, 4]:" in out
    assert not [line for line in out.splitlines() if line.startswith("#  forged")]  # no row was forged
    rows = [line for line in out.splitlines() if "tvmgen_default_fused_" in line]
    assert len(rows) == 4, out  # two operators in the profile, two in the layer table


def test_compile_dump_and_summary_escape_model_names(evil_model: Path, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture) -> None:
    assert main(["compile", str(evil_model), "-o", str(tmp_path / "e.tar"), "--dump-ir"]) == 0
    out, err = capsys.readouterr()
    assert inert(out) and inert(err), (out, err)
    assert "  input  %in\\x1b[2J\\nFORGED\\u202eput: float32[1, 4]" in out
    assert not [line for line in out.splitlines() if line.startswith(("FORGED", "#  forged"))]


def _layer(index: int, tensor: str, n_diff: int) -> object:
    from utvm.layer_debug import LayerComparison

    return LayerComparison(index, f"tvmgen_default_op{index}\x1b[1m", "custom\nop", f"node {index} ('{tensor}')",
                           tensor, "int8", (1, 4), float(n_diff), n_diff, (0, 1) if n_diff else None)


def test_layer_and_profile_tables_escape_every_name() -> None:
    from utvm.cli.run_profile import OperatorTiming, format_profile
    from utvm.layer_debug import LayerDebugResult, format_layers

    result = LayerDebugResult({}, {}, [_layer(0, EVIL_MID, 0), _layer(1, EVIL_OUT, 2)])
    table = format_layers(result)
    assert inert(table) and len(table.splitlines()) == 2 + 2 + 2, table  # head, rule, 2 rows, blank, verdict
    assert table.splitlines()[-1].startswith("first difference: operator 1 tvmgen_default_op1\\x1b[1m (custom\\nop")
    timings = [OperatorTiming(f"f{i}\r\x1b[2K", "op\n|forged", "n", 1e-6, None) for i in range(3)]
    table = format_profile(timings, 3e-6)
    assert inert(table) and len(table.splitlines()) == 2 + 3 + 2, table


def test_size_report_escapes_symbol_names() -> None:
    from utvm.cli.size import format_report

    cols = {"text": 1, "data": 2, "bss": 3}
    fp = SimpleNamespace(categories={c: dict(cols) for c in ("runtime", "operators", "constants", "application")},
                         totals=lambda: {"text": 4, "data": 8, "bss": 12}, elf_totals={"text": 4, "data": 8, "bss": 12},
                         elf="fw\n.elf")
    stack = SimpleNamespace(worst_case=10, thread_cost=4, exception_frame=4, handler_cost=2,
                            path=["main", "user\x1b[2J\nop"], handler_path=["h\u202e"], indirect_calls=["i\x07"],
                            recursion=[], dynamic=[], unknown=["u\r"])
    report = SimpleNamespace(footprint=fp, board="b", convention="c", stack=stack, measured_stack=None,
                             stack_consistent=None)
    text = format_report(report, "m")
    assert inert(text) and len(text.splitlines()) == 1 + 7 + 1 + 1 + 2 + 2, text  # title table size stack paths flags


def test_deploy_note_cannot_end_its_comment(tmp_path: Path) -> None:
    """The --input paths typed are quoted in a comment of the generated utvm_samples.h: a '*/' in a path
    does not end the comment early."""
    import numpy as np

    weird = tmp_path / "a*" / "x.npy"
    weird.parent.mkdir()
    np.save(weird, np.zeros((1, 1), np.int8))
    out = tmp_path / "fw"
    assert main(["deploy", str(HELLO), "-o", str(out), "--input", f"serving_default_dense_input:0={weird}",
                 "-q"]) == 0
    header = (out / "include" / "utvm_samples.h").read_text()
    comment = header[header.index("/*"):header.index("*/") + 2]
    assert "x.npy" in comment  # the whole note is inside the first comment


def test_a_build_error_keeps_the_compiler_output_below_its_line_escaped(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture) -> None:
    """docs/cli.md: a build error adds the compiler's output after its line; the compiler quotes your source
    lines, so each is escaped too."""
    from utvm.cli import EXIT_BUILD

    src = tmp_path / "broken.c"
    src.write_text('int broken(void) { return 1 }\n/* \x1b[2J */ static const char *s = "\x1b[31m";\n')
    assert main(["build-device", "--extra-source", str(src), "-o", str(tmp_path / "fw")]) == EXIT_BUILD
    err = capsys.readouterr().err
    first, *output = err.splitlines()
    assert first.startswith("utvm build-device: error: ") and "broken.c" in first, err
    assert inert(err) and output and any("\\x1b[2J" in line for line in output), err


def test_text_the_terminal_encoding_cannot_carry_is_escaped(tmp_path: Path) -> None:
    """`python -m utvm` (the process's own command line) under an ASCII stdout: a model's non-ASCII name is
    written as an escape, not a UnicodeEncodeError traceback."""
    model = tmp_path / "accent.tflite"
    model.write_bytes(one_op_model("in", "sortie_\u00e9"))
    proc = subprocess.run([sys.executable, "-m", "utvm", "compile", str(model), "-o", str(tmp_path / "o.tar"),
                           "--dump-ir", "-q"], capture_output=True, text=True, cwd=ROOT, timeout=GUARD_S,
                          env={**os.environ, "PYTHONIOENCODING": "ascii"})
    assert proc.returncode == 0, proc.stderr
    assert "%sortie_\\xe9: float32[1, 4]" in proc.stdout


# --- outputs: never one of the command's inputs, never a path that names a directory --------------------
@pytest.mark.parametrize("how", ["same", "dot-slash", "hard-link"])
def test_an_output_that_is_the_input_is_refused_and_the_input_kept(how: str, tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture) -> None:
    model = tmp_path / "m.tflite"
    shutil.copyfile(HELLO, model)
    before = model.read_bytes()
    out = {"same": str(model), "dot-slash": str(model.parent / "." / model.name),
           "hard-link": str(tmp_path / "link.tflite")}[how]
    if how == "hard-link":
        os.link(model, out)
    assert main(["compile", str(model), "-o", out, "-q"]) == EXIT_USAGE
    assert "is the input" in one_line_error(capsys.readouterr().err, "compile")
    assert main(["run", str(model), "--profile-plot", out, "-q", "--repeat", "1"]) == EXIT_USAGE
    assert "is the input" in one_line_error(capsys.readouterr().err, "run")
    assert model.read_bytes() == before


def test_an_output_that_is_a_user_file_of_the_command_is_refused(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture) -> None:
    """Not only the model: any file the command reads (here an --extra-source of build-device, an MLF given
    with --model) is never replaced by its output."""
    src = tmp_path / "user.c"
    src.write_text("int user_value(void);\nint user_value(void) { return 1; }\n")
    assert main(["build-device", "--extra-source", str(src), "-o", str(src)]) == EXIT_USAGE
    assert "is the input" in one_line_error(capsys.readouterr().err, "build-device")
    mlf = tmp_path / "m.tar"
    assert main(["compile", str(HELLO), "-o", str(mlf), "-q"]) == 0
    capsys.readouterr()
    before = mlf.read_bytes()
    assert main(["build-device", "--model", f"x={mlf}", "-o", str(mlf)]) == EXIT_USAGE
    assert "is the input" in one_line_error(capsys.readouterr().err, "build-device")
    assert mlf.read_bytes() == before and src.read_text().startswith("int user_value")


def test_an_output_path_ending_in_a_separator_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    keep = tmp_path / "keep.txt"
    keep.write_text("mine\n")
    for out in (f"{keep}/", f"{tmp_path / 'newdir'}/"):
        assert main(["compile", str(HELLO), "-o", out, "-q"]) == EXIT_USAGE
        assert "names a directory" in one_line_error(capsys.readouterr().err, "compile")
    assert keep.read_text() == "mine\n" and not (tmp_path / "newdir").exists()


def test_a_newline_in_a_source_path_does_not_split_the_build_error_line(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture) -> None:
    from utvm.cli import EXIT_BUILD

    d = tmp_path / "bad\x1b[2J\nname"
    d.mkdir()
    src = d / "f\n.c"
    src.write_text("int x = ;\n")
    assert main(["build-device", "--extra-source", str(src), "-o", str(tmp_path / "fw")]) == EXIT_BUILD
    first = capsys.readouterr().err.splitlines()[0]
    assert first.startswith("utvm build-device: error: ") and "bad\\x1b[2J\\nname/f\\n.c" in first, first


# --- limits of the evaluation firmware: said before the build, or lifted to what the model needs ------------
def test_run_repeat_is_bounded_by_the_evaluation_firmware(capsys: pytest.CaptureFixture) -> None:
    from utvm.evaluate import EVAL_MAX_REPEAT

    assert main(["run", str(HELLO), "--repeat", str(EVAL_MAX_REPEAT + 1)]) == EXIT_USAGE
    assert f"is over {EVAL_MAX_REPEAT}" in one_line_error(capsys.readouterr().err, "run")


@pytest.mark.parametrize("setting, says", [
    ("TVM_CRT_MAX_NDIM=0", "TVM_CRT_MAX_NDIM must be 1 .. 32"),
    ("TVM_CRT_MAX_NDIM=99999999999999999999", "TVM_CRT_MAX_NDIM"),
    ("TVM_CRT_WORKSPACE_SIZE_BYTES=0", "TVM_CRT_WORKSPACE_SIZE_BYTES must be >="),
    ("TVM_CRT_MAX_PACKET_SIZE_BYTES=1", "TVM_CRT_MAX_PACKET_SIZE_BYTES must be >= 128"),
])
def test_a_crt_setting_the_crt_refuses_is_a_usage_error_before_the_build(setting: str, says: str,
                                                                         capsys: pytest.CaptureFixture) -> None:
    """The CRT's config.h sanity checks are the one definition of what is allowed: they are run on the
    build's crt_config.h before any firmware is built, and their complaint is the one line."""
    assert main(["run", str(HELLO), "--crt-config", setting, "-q", "--repeat", "1"]) == EXIT_USAGE
    assert says in one_line_error(capsys.readouterr().err, "run")


@pytest.mark.parametrize("rank", [7, 9])
def test_an_input_of_rank_above_the_crt_default_runs(rank: int, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """TVM_CRT_MAX_NDIM is 6 by default: the evaluation firmware of a model with a rank-7 input raises it."""
    model = tmp_path / f"r{rank}.tflite"
    model.write_bytes(one_op_model(shape=(1,) * (rank - 2) + (2, 3)))
    for flags in ([], ["--unpacked-api", "--interface-api", "c"]):
        assert main(["run", str(model), "--check", "-q", "--repeat", "1", *flags]) == 0, capsys.readouterr().err


def test_no_command_is_a_usage_error_with_its_line(capsys: pytest.CaptureFixture) -> None:
    assert main([]) == EXIT_USAGE
    captured = capsys.readouterr()
    assert "COMMAND" in captured.out  # the usage, as --help prints it
    assert captured.err == "utvm: error: no command given (see utvm --help)\n"
