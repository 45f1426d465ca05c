"""Hostile board.toml files and board commands (issue 19): every one is refused in one line naming the file,
the table and the key (exit 2), never a hang, a traceback or memory exhausted; every command of a board has
a time limit and is killed with its whole process group (exit 6 for build and flash, 7 for reset).

Classes: the file is not a regular file of bounded size (a FIFO, a device, a directory, too big, not
UTF-8) -- through the API, --board-config and $UTVM_BOARD_CONFIG; deep nesting (arrays, inline tables,
dotted keys, headers); command placeholders beyond the bare documented names; values that would reach the
firmware's Makefile unescaped; numbers beyond what the firmware and the system timers take; commands that
never finish, that leave processes behind or that are interrupted.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import string
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from utvm.cli import EXIT_BUILD, EXIT_DEVICE, EXIT_USAGE, exit_status, main
from utvm.errors import PlatformError, TransportError, UsageError
from utvm.platform.serial_board import config as C
from utvm.platform.serial_board import platform as P
from utvm.platform.serial_board.config import ENV_VAR, load_board_config
from utvm.platform.serial_board.platform import SerialBoardPlatform, SerialBoardTransport, run_board_command

BASE = {
    "board": {"name": '"b"', "cpu": '"cortex-m4"', "clock_hz": "1000", "port": '"/dev/ttyX"', "baud": "9600"},
    "build": {"command": '["make", "-C", "{project}", "ELF={elf}"]'},
    "flash": {"command": '["flash-it", "{hex}"]'},
    "link": {},
}


def _toml(tables: dict[str, dict[str, str]], tail: str = "") -> str:
    return "".join(f"[{t}]\n" + "".join(f"{k} = {v}\n" for k, v in kv.items()) for t, kv in tables.items()) + tail


def _tables(**changes: dict[str, str | None]) -> dict[str, dict[str, str]]:
    tables = {t: dict(kv) for t, kv in BASE.items()}
    for table, kv in changes.items():
        for k, v in kv.items():
            if v is None:
                tables[table].pop(k, None)
            else:
                tables[table][k] = v
    return tables


def _refused(path: Path, *says: str) -> str:
    with pytest.raises(UsageError) as err:
        load_board_config(path)
    msg = str(err.value)
    assert "\n" not in msg and str(path) in msg, msg
    for s in says:
        assert s in msg, msg
    return msg


def _one_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.endswith("\n"), err
    return err


pytestmark = pytest.mark.usefixtures("no_board_config")


# --- the file: a regular file of bounded size ---------------------------------------------------------------

def _special(kind: str, tmp_path: Path) -> tuple[Path, socket.socket | None]:
    if kind == "fifo":
        p = tmp_path / "board.toml"
        os.mkfifo(p)  # no writer: opening it for reading would block forever
        return p, None
    if kind == "directory":
        return tmp_path, None
    if kind == "socket":
        p = tmp_path / "s"
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(p))
        return p, sock
    return Path(kind), None  # a device


SPECIAL = [("fifo", "a FIFO"), ("/dev/zero", "a character device"), ("/dev/null", "a character device"),
           ("directory", "a directory"), ("socket", "a socket")]


@pytest.mark.parametrize("kind, what", SPECIAL)
def test_a_board_config_that_is_not_a_regular_file_is_refused_unopened(kind: str, what: str, tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str],
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    path, sock = _special(kind, tmp_path)
    try:
        _refused(path, f"the board configuration: is {what}, not a regular file")
        # $UTVM_BOARD_CONFIG: the same refusal, saying where the name came from; exit 2, one line
        monkeypatch.setenv(ENV_VAR, str(path))
        assert main(["build-device", "--platform", "serial-board", "-o", str(tmp_path / "fw.elf")]) == EXIT_USAGE
        err = _one_line(capsys)
        assert f"named by ${ENV_VAR}" in err and what in err, err
        monkeypatch.delenv(ENV_VAR)
        assert main(["build-device", "--platform", "serial-board", "--board-config", str(path), "-o",
                     str(tmp_path / "fw.elf")]) == EXIT_USAGE
        assert what in _one_line(capsys)
    finally:
        if sock is not None:
            sock.close()


def test_a_board_config_over_the_size_limit_is_refused_unread(tmp_path: Path) -> None:
    good = _toml(BASE)
    at_limit = tmp_path / "board.toml"
    at_limit.write_text("#" * (C.MAX_BOARD_CONFIG_BYTES - len(good) - 1) + "\n" + good)
    assert at_limit.stat().st_size == C.MAX_BOARD_CONFIG_BYTES
    assert load_board_config(at_limit).name == "b"
    at_limit.write_text("#" * (C.MAX_BOARD_CONFIG_BYTES - len(good)) + "\n" + good)
    _refused(at_limit, f"the board configuration: larger than {C.MAX_BOARD_CONFIG_BYTES:,} bytes")


def test_a_board_config_that_is_not_utf8_or_not_readable(tmp_path: Path) -> None:
    p = tmp_path / "board.toml"
    p.write_bytes(b'[board]\nname = "\xff"\n')
    _refused(p, "not UTF-8 text (byte 16 is 0xff)")
    _refused(tmp_path / "missing.toml", "the board configuration: no such file")


# --- nesting ------------------------------------------------------------------------------------------------

def _nested(kind: str, depth: int) -> str:
    if kind == "array":
        return _toml(BASE, f"x = {'[' * depth}{']' * depth}\n")
    if kind == "inline table":
        return _toml(BASE, f"x = {'{a = ' * depth}1{'}' * depth}\n")
    if kind == "dotted key":
        return _toml(BASE, "x" + ".b" * depth + " = 1\n")
    if kind == "header":
        return "[x" + ".b" * (depth - 1) + "]\n" + _toml(BASE)
    if kind == "array of tables":
        return _toml(BASE) + "[[x" + ".b" * (depth - 2) + "]]\n"
    assert kind == "mixed"  # inline tables holding dotted keys
    return _toml(BASE, "x = " + "{a.b = " * (depth - 1) + "1" + "}" * (depth - 1) + "\n")


NESTINGS = ["array", "inline table", "dotted key", "header", "array of tables", "mixed"]


@pytest.mark.parametrize("kind", NESTINGS)
@pytest.mark.parametrize("depth", [C.MAX_NESTING + 1, 400_000])
def test_deep_nesting_is_refused_naming_the_key(kind: str, depth: int, tmp_path: Path) -> None:
    p = tmp_path / "board.toml"
    text = _nested(kind, depth)
    if len(text.encode()) > C.MAX_BOARD_CONFIG_BYTES:
        text = text[: C.MAX_BOARD_CONFIG_BYTES]  # still deeper than the limit long before it is cut
    p.write_text(text)
    msg = _refused(p, f"nested more than {C.MAX_NESTING} levels deep")
    assert "[link] x" in msg or "table [x" in msg, msg


@pytest.mark.parametrize("kind", NESTINGS)
def test_nesting_within_the_limit_is_still_parsed(kind: str, tmp_path: Path) -> None:
    p = tmp_path / "board.toml"
    p.write_text(_nested(kind, 6))
    msg = _refused(p)  # parsed: the error is the unknown key or table, not the nesting
    assert "nested" not in msg and ("unknown key" in msg or "unknown table" in msg), msg


def test_brackets_dots_and_hashes_inside_strings_and_comments_do_not_nest(tmp_path: Path) -> None:
    noise = "[[[[{{{{" * 8 + "." * 40 + "#"
    plain = noise.replace("{", "")  # a command's braces are placeholders
    p = tmp_path / "board.toml"
    tables = _tables(board={"port": f"\'\'\'\n{noise}\n\'\'\'"},
                     flash={"command": json.dumps(["flash-it", "{hex}", noise.replace("{", "{{")])})
    p.write_text(_toml(tables, f"# {noise}\nreset_command = ['{plain}', \"\"\"{plain}\n\\\"\"\"\"]\n"))
    cfg = load_board_config(p)
    assert cfg.port == noise + "\n" and cfg.flash_command is not None
    assert C.expand(cfg.flash_command, {"hex": "H"})[2] == noise
    assert cfg.reset_command == (plain, plain + '\n"')


_TOML_BITS = st.sampled_from(["[", "]", "{", "}", "=", ",", ".", "\"", "'", "#", "\n", " ", "a", "1", "\\",
                              '"""', "'''", "[board]\n", "x = ", "[[", "]]"])


@settings(max_examples=300)
@given(st.lists(_TOML_BITS, max_size=120))
def test_any_text_is_parsed_or_refused_in_one_line(tmp_path_factory: pytest.TempPathFactory,
                                                   bits: list[str]) -> None:
    p = tmp_path_factory.mktemp("toml") / "board.toml"
    p.write_text(_toml(BASE) + "".join(bits))
    try:
        load_board_config(p)
    except UsageError as exc:
        assert "\n" not in str(exc)


# --- placeholders ---------------------------------------------------------------------------------------------

BAD_PLACEHOLDERS = [
    ("{elf:99999999}", "format spec"), ("{elf:>9}", "format spec"), ("{elf!r}", "format spec or conversion"),
    ("{elf!s:5}", "conversion"), ("{elf:{port}}", "format spec"), ("{firmware:99999999}", "unknown placeholder"),
    ("{0}", "unknown placeholder '{0}'"), ("{}", "unknown placeholder '{}'"), ("{x.y}", "unknown placeholder"),
    ("{elf.real}", "unknown placeholder '{elf.real}'"), ("{elf[0]}", "unknown placeholder '{elf[0]}'"),
    ("{ elf }", "unknown placeholder"), ("{serial}", "unknown placeholder"), ("{elf", "expected '}'"),
    ("elf}", "Single '}'"), ("{", "Single '{'"), ("}{", "Single '}'"), ("{project}", "unknown placeholder"),
]


@pytest.mark.parametrize("table, key", [("flash", "command"), ("link", "reset_command"), ("build", "command")])
@pytest.mark.parametrize("arg, says", BAD_PLACEHOLDERS)
def test_only_bare_documented_placeholders_are_allowed(table: str, key: str, arg: str, says: str,
                                                       tmp_path: Path) -> None:
    if table == "build" and arg == "{project}":
        arg, says = "{hex}", "unknown placeholder"  # the build command has {project} and {elf} only
    p = tmp_path / "board.toml"
    p.write_text(_toml(_tables(**{table: {key: json.dumps(["prog", arg])}})))
    _refused(p, f"[{table}] {key}[1]: bad placeholder", says, "allowed: {")


def test_placeholders_are_replaced_verbatim(tmp_path: Path) -> None:
    out = tmp_path / "args.json"
    script = f"import json, sys; json.dump(sys.argv[1:], open({str(out)!r}, 'w'))"
    argv = [sys.executable, "-c", script, "{elf}", "{{elf}}", "{port}{port}", "}}{{", "{elf:}", "a{port}b"]
    p = tmp_path / "board.toml"
    p.write_text(_toml(_tables(board={"port": json.dumps("{0:>9}{elf}")}, flash={"command": json.dumps(argv)})))
    cfg = load_board_config(p)
    assert cfg.flash_command is not None
    run_board_command(cfg, cfg.flash_command, "[flash]", tmp_path / "fw.elf")
    port = "{0:>9}{elf}"  # a value is never itself expanded
    assert json.loads(out.read_text()) == [str(tmp_path / "fw.elf"), "{elf}", port + port, "}{",
                                           str(tmp_path / "fw.elf"), f"a{port}b"]


@settings(max_examples=300)
@given(st.text(alphabet="{}:!.[]0elfhxpor ", max_size=16))
def test_a_placeholder_is_refused_or_expands_to_its_value(arg: str) -> None:
    if C._placeholder_problem(arg, C.FLASH_PLACEHOLDERS):
        return
    values = {"elf": "E", "hex": "H", "bin": "B", "port": "P"}
    assert C.expand([arg], values) == [arg.format(**values)]  # bare names only: what str.format would give


# --- values that reach the firmware's Makefile, numbers beyond their range -----------------------------------

BAD_VALUES = [
    ("board", "name", json.dumps("b\n$(shell touch pwned)"), "must be 1 to 64 letters"),
    ("board", "name", '".."', "must be 1 to 64 letters"),
    ("board", "name", '"../../outside"', "must be 1 to 64 letters"),
    ("board", "name", json.dumps("x" * 65), "must be 1 to 64 letters"),
    ("board", "name", json.dumps("b\x1b[2J"), "must be 1 to 64 letters"),
    ("board", "baud", str(2**31), "at most 2147483647"),
    ("build", "memory_bytes", str(2**32), "at most 536870912 (the Cortex-M SRAM region)"),
    ("build", "memory_bytes", str(2**29 + 1), "at most 536870912"),
    ("build", "workspace_bytes", str(2**32 - 1), "at most 536870912"),
    ("board", "clock_hz", "9" * 100, "an integer of 100 digits"),
    ("board", "baud", "9" * 5000, "an integer has too many digits"),
    ("flash", "timeout_s", "1e308", "at most 1e+06 seconds"),
    ("flash", "timeout_s", "9" * 400, "an integer of 400 digits"),
    ("link", "reset_timeout_s", "inf", "finite"),
    ("link", "reset_timeout_s", "0", "greater than 0"),
    ("link", "call_timeout_s", "1e7", "at most 1e+06"),
    ("link", "reconnect_attempts", "99999999999", "at most 1000"),
    ("link", "reset_command", '[""]', "the program is empty"),
]


@pytest.mark.parametrize("table, key, value, says", BAD_VALUES)
def test_values_beyond_their_range_are_refused(table: str, key: str, value: str, says: str, tmp_path: Path) -> None:
    p = tmp_path / "board.toml"
    p.write_text(_toml(_tables(**{table: {key: value}})))
    msg = _refused(p, says)
    assert f"[{table}] {key}" in msg or "not valid TOML" in msg, msg


def _files_board(tmp_path: Path, **build: str) -> Path:
    for name in ("b.ld", "startup.c", "a b.c", "uart$x.c"):
        (tmp_path / name).write_text("/* */\n")
    kv: dict[str, str | None] = {"command": None, "linker_script": '"b.ld"', "startup": '"startup.c"', **build}
    p = tmp_path / "board.toml"
    p.write_text(_toml(_tables(build=kv)))
    return p


@pytest.mark.parametrize("key, value, says", [
    ("cflags", json.dumps(["$(shell id)"]), "holds '$'"),
    ("cflags", json.dumps(["-DA=1 -DB=2"]), "holds ' '"),
    ("cflags", json.dumps(["-DX=#"]), "holds '#'"),
    ("cflags", json.dumps(['-DS="s"']), "holds '\"'"),
    ("cflags", json.dumps(["-DX=`id`"]), "holds '`'"),
    ("cflags", json.dumps(["-O2", "-DA\nall:"]), "cflags[1]"),
    ("cflags", json.dumps([""]), "is empty"),
    ("sources", json.dumps(["a b.c"]), "the file name 'a b.c'"),
    ("sources", json.dumps(["uart$x.c"]), "the file name 'uart$x.c'"),
    ("timeout_s", "5", "limits [build] command, which is not given"),
])
def test_values_written_into_the_firmware_makefile_are_plain(key: str, value: str, says: str,
                                                             tmp_path: Path) -> None:
    _refused(_files_board(tmp_path, **{key: value}), f"[build] {key}", says)


def test_plain_makefile_values_are_kept(tmp_path: Path) -> None:
    cfg = load_board_config(_files_board(tmp_path, cflags=json.dumps(["-O2", "-Wl,--gc-sections", "-DHSE=8000000",
                                                                      "-I/opt/bsp", "-mfpu=fpv5-d16"])))
    assert cfg.cflags[1] == "-Wl,--gc-sections" and cfg.build_timeout_s == C.DEFAULT_BUILD_TIMEOUT_S
    assert cfg.reset_timeout_s == C.DEFAULT_RESET_TIMEOUT_S


# --- every command has a time limit; its process group is killed -------------------------------------------

def _gone(pid: int) -> bool:
    """Whether `pid` has exited (gone or a zombie), waiting for the kernel to finish a SIGKILL."""
    for _ in range(6000):  # only an unkilled process takes the whole minute
        try:
            stat_line = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return True
        if stat_line.rsplit(") ", 1)[1].startswith(("Z", "X")):
            return True
        time.sleep(0.01)
    return False


def _group_gone(pgid: int) -> bool:
    """Whether every process of group `pgid` has exited (gone, or a zombie its new parent has not reaped yet: a
    SIGKILLed grandchild is reparented to PID 1, which reaps it when it gets to it), waiting for the kernel to
    finish the SIGKILLs."""
    for _ in range(6000):  # only an unkilled process takes the whole minute
        alive = []
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(") ", 1)[1].split()
            except (OSError, IndexError):
                continue  # exited while we looked
            if int(fields[2]) == pgid and not fields[0].startswith(("Z", "X")):
                alive.append(stat.parent.name)
        if not alive:
            return True
        time.sleep(0.01)
    return False


def _hanging(tmp_path: Path) -> tuple[list[str], Path]:
    """A command that starts a grandchild in its process group, records its pid, then never finishes."""
    pid_file = tmp_path / "grandchild.pid"
    script = ("import subprocess, sys, time\n"
              "p = subprocess.Popen(['sleep', '100000'], stdout=sys.stdout)\n"
              f"open({str(pid_file)!r}, 'w').write(str(p.pid))\n"
              "print('working', flush=True)\n"
              "time.sleep(100000)\n")
    return [sys.executable, "-c", script], pid_file


def _grandchild_killed(pid_file: Path) -> None:
    if pid_file.exists():  # (on a very slow machine the limit may pass before it starts)
        pid = int(pid_file.read_text())
        try:
            assert _gone(pid), f"grandchild {pid} outlived its command's time limit"
        finally:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


def test_a_flash_command_over_its_time_limit_is_killed_with_its_group(tmp_path: Path) -> None:
    argv, pid_file = _hanging(tmp_path)
    p = tmp_path / "board.toml"
    p.write_text(_toml(_tables(flash={"command": json.dumps(argv), "timeout_s": "0.5"})))
    elf = tmp_path / "fw.elf"
    elf.write_bytes(b"\x7fELF")
    plat = SerialBoardPlatform(p)
    with pytest.raises(PlatformError) as err:
        plat.flash(elf)
    msg = str(err.value)
    assert "[flash] did not finish within 0.5 s" in msg and "[flash] timeout_s raises the limit" in msg
    assert exit_status(err.value) == EXIT_BUILD
    _grandchild_killed(pid_file)


def test_a_reset_command_over_its_time_limit_is_a_link_error(tmp_path: Path) -> None:
    argv, pid_file = _hanging(tmp_path)
    master, slave = os.openpty()
    try:
        p = tmp_path / "board.toml"
        p.write_text(_toml(_tables(board={"port": json.dumps(os.ttyname(slave))},
                                   link={"reset_command": json.dumps(argv), "reset_timeout_s": "0.5"})))
        cfg = load_board_config(p)
        transport = SerialBoardTransport(cfg)
        try:
            with pytest.raises(TransportError) as err:
                transport.reset_board()
        finally:
            transport.close()
        msg = str(err.value)
        assert "[link] reset_command did not finish within 0.5 s" in msg and "[link] reset_timeout_s" in msg
        assert exit_status(err.value) == EXIT_DEVICE and "\n" not in msg
        _grandchild_killed(pid_file)
    finally:
        os.close(slave)
        os.close(master)


def test_a_failing_reset_command_is_a_link_error(tmp_path: Path) -> None:
    p = tmp_path / "board.toml"
    script = "import sys; print('probe \\x1b[2J lost'); sys.exit(4)"
    p.write_text(_toml(_tables(link={"reset_command": json.dumps([sys.executable, "-c", script])})))
    cfg = load_board_config(p)
    with pytest.raises(TransportError) as err:
        run_board_command(cfg, cfg.reset_command or (), "[link] reset_command", None, error=TransportError)
    assert "failed (exit 4)" in str(err.value) and "probe" in str(err.value)
    assert exit_status(err.value) == EXIT_DEVICE


def test_a_build_command_over_its_time_limit_is_exit_6_in_one_line(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    argv, pid_file = _hanging(tmp_path)
    p = tmp_path / "board.toml"
    p.write_text(_toml(_tables(build={"command": json.dumps([*argv, "{project}", "{elf}"]), "timeout_s": "0.5"})))
    out = tmp_path / "fw.elf"
    assert main(["build-device", "--platform", "serial-board", "--board-config", str(p), "-o", str(out)]) == EXIT_BUILD
    err = _one_line(capsys)
    assert "[build] command did not finish within 0.5 s" in err and "[build] timeout_s" in err, err
    assert not out.exists()
    _grandchild_killed(pid_file)


def test_a_command_that_leaves_a_process_holding_its_output_is_not_waited_for(tmp_path: Path) -> None:
    pid_file = tmp_path / "daemon.pid"
    script = ("import subprocess, sys\n"
              "p = subprocess.Popen(['sleep', '100000'], stdout=sys.stdout)\n"
              f"open({str(pid_file)!r}, 'w').write(str(p.pid))\n"
              "print('flashed; debug server left running')\n")
    p = tmp_path / "board.toml"
    p.write_text(_toml(_tables(flash={"command": json.dumps([sys.executable, "-c", script])})))
    cfg = load_board_config(p)
    try:
        run_board_command(cfg, cfg.flash_command or (), "[flash]", None)  # returns once the command exits
        pid = int(pid_file.read_text())
        assert Path(f"/proc/{pid}").exists()  # a success leaves what the command started running
    finally:
        if pid_file.exists():
            os.kill(int(pid_file.read_text()), signal.SIGKILL)


def test_a_flood_of_output_keeps_only_its_tail(tmp_path: Path) -> None:
    script = ("import sys\nfor i in range(200): sys.stdout.write('x' * 65535 + '\\n')\n"
              "print('the last words'); sys.exit(2)")
    p = tmp_path / "board.toml"
    p.write_text(_toml(_tables(flash={"command": json.dumps([sys.executable, "-c", script])})))
    cfg = load_board_config(p)
    with pytest.raises(PlatformError, match="failed \\(exit 2\\).*it said: the last words$"):
        run_board_command(cfg, cfg.flash_command or (), "[flash]", None)


def test_an_interrupt_kills_the_running_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    argv, _ = _hanging(tmp_path)
    p = tmp_path / "board.toml"
    p.write_text(_toml(_tables(flash={"command": json.dumps(argv)})))
    cfg = load_board_config(p)
    started: list[int] = []

    def interrupted(proc, timeout, tail):  # noqa: ANN001, ANN202 -- Ctrl-C while the command runs
        started.append(proc.pid)
        raise KeyboardInterrupt

    monkeypatch.setattr(P, "_wait_reading", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run_board_command(cfg, cfg.flash_command or (), "[flash]", None)
    assert started and _gone(started[0])
    assert _group_gone(started[0])  # and nothing of its process group is left running


def test_a_missing_or_unrunnable_program(tmp_path: Path) -> None:
    p = tmp_path / "board.toml"
    not_exec = tmp_path / "flash.sh"
    not_exec.write_text("#!/bin/sh\n")
    for prog, says in ((str(tmp_path / "nope"), "not found"), (str(not_exec), "cannot run")):
        p.write_text(_toml(_tables(flash={"command": json.dumps([prog])}, link={"reset_command": json.dumps([prog])})))
        cfg = load_board_config(p)
        with pytest.raises(PlatformError, match=says):
            run_board_command(cfg, cfg.flash_command or (), "[flash]", None)
        with pytest.raises(TransportError, match=says):
            run_board_command(cfg, cfg.reset_command or (), "[link] reset_command", None, error=TransportError)


def test_every_name_in_an_error_line_is_escaped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "board.toml"
    p.write_text(_toml(BASE, '"\\u001b[2J\\u202e" = 1\n'))
    assert main(["build-device", "--platform", "serial-board", "--board-config", str(p), "-o",
                 str(tmp_path / "fw.elf")]) == EXIT_USAGE
    err = _one_line(capsys)
    assert "\x1b" not in err and "\u202e" not in err and "\\x1b[2J" in err, err
    assert all(ch in string.printable for ch in err), err


# --- the board's own files --------------------------------------------------------------------------------------

@pytest.mark.parametrize("case, says", [
    ("fifo header", "[build] sources[0] (a header beside it): the board file 'regs.h': is a FIFO, not a regular "
                    "file"),
    ("directory header", "the board file 'dir.h': is a directory, not a regular file"),
    ("huge source", f"the board file 'uart.c': larger than {C.MAX_BOARD_FILE_BYTES:,} bytes"),
])
def test_board_files_are_regular_bounded_utf8(case: str, says: str, tmp_path: Path) -> None:
    bsp = tmp_path / "bsp"
    bsp.mkdir()
    (bsp / "uart.c").write_text("/* uart */\n")
    if case == "fifo header":
        os.mkfifo(bsp / "regs.h")  # no writer: reading it would block forever
    elif case == "directory header":
        (bsp / "dir.h").mkdir()
    else:
        with open(bsp / "uart.c", "wb") as f:
            f.truncate(C.MAX_BOARD_FILE_BYTES + 1)
    p = _files_board(tmp_path, sources=json.dumps(["bsp/uart.c"]))
    with pytest.raises(UsageError) as err:
        SerialBoardPlatform(p).firmware_spec()
    assert says in str(err.value) and exit_status(err.value) == EXIT_USAGE and "\n" not in str(err.value)


def test_board_files_in_any_encoding_are_copied_as_bytes(tmp_path: Path) -> None:
    from utvm.platform.qemu.project import generate_project

    bsp = tmp_path / "bsp"
    bsp.mkdir()
    latin1 = b"/* \xa9 vendor, caf\xe9 */\nint uart_ready;\n"
    (bsp / "uart.c").write_bytes(latin1)
    (bsp / "regs.h").write_bytes(b"/* \xff\xfe */\n")
    spec = SerialBoardPlatform(_files_board(tmp_path, sources=json.dumps(["bsp/uart.c"]))).firmware_spec()
    assert spec.board_files["uart.c"] == latin1
    project = generate_project(spec, tmp_path / "project")
    assert (project / "board" / "uart.c").read_bytes() == latin1
    assert (project / "board" / "regs.h").read_bytes() == b"/* \xff\xfe */\n"


@pytest.mark.parametrize("name", ["platform.c", "utvm_platform.h"])
def test_board_files_never_replace_utvms_platform_hooks(name: str, tmp_path: Path) -> None:
    bsp = tmp_path / "bsp"
    bsp.mkdir()
    (bsp / "uart.c").write_text("/* uart */\n")
    (bsp / name).write_text("/* the board's own */\n")
    source = "bsp/" + (name if name.endswith(".c") else "uart.c")
    p = _files_board(tmp_path, sources=json.dumps([source]))
    if name.endswith(".c"):
        with pytest.raises(UsageError, match=f"'{name}' is the name of one of utvm's own firmware files"):
            SerialBoardPlatform(p).firmware_spec()
    else:  # a header beside a source is copied only when utvm has none of that name
        files = SerialBoardPlatform(p).firmware_spec().board_files
        assert name not in files and "uart.c" in files
