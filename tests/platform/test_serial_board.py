"""The `serial-board` platform (a real Cortex-M board over its UART, described by a board.toml).

Without hardware: board.toml parsing and its errors, the CLI's --board-config, the flash step's errors, and
the RPC link through a real pty and pyserial (the host platform's firmware behind a pty). With QEMU standing in
for the board (slow): the board.toml points [build] at the QEMU template's MPS2 startup code and linker script
plus a UART driver written against utvm_serial_board.h (serial_board/mps2_uart.c); its flash command
(serial_board/qemu_flash.py) boots QEMU with UART0 on a pty and links that pty where [board] port says, and
its reset command (serial_board/qemu_reset.py) presses reset through QEMU's monitor.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from tests.platform.serial_board.board_toml import HELPERS, QEMU_BOARD, toml_str, write_board_toml

from utvm.cli import EXIT_BUILD, EXIT_DEVICE, EXIT_USAGE, exit_status, main
from utvm.errors import (
    LinkClosedError,
    PlatformError,
    SessionTerminatedError,
    SessionTimeoutError,
    TransportError,
    UsageError,
)
from utvm.platform import available_platforms, get_platform
from utvm.platform.qemu.boards import BOARDS
from utvm.platform.serial_board.config import ENV_VAR, cortex_m_targets, load_board_config, use_board_config
from utvm.platform.serial_board.platform import SerialBoardPlatform, SerialBoardTransport, run_board_command
from utvm.support.models import models_dir
from utvm.target import platform_target

HERE = Path(__file__).resolve().parent
MODELS = models_dir()
HELLO = MODELS / "tflm" / "hello_world_int8.tflite"


pytestmark = pytest.mark.usefixtures("no_board_config")


# --- board.toml ----------------------------------------------------------------------------------------------

def test_a_board_toml_is_parsed_with_paths_from_its_directory(tmp_path: Path) -> None:
    (tmp_path / "bsp").mkdir()
    for name in ("board.ld", "startup.c", "uart.c"):
        (tmp_path / "bsp" / name).write_text("/* */\n")
    (tmp_path / "board.toml").write_text("""
[board]
name = "nucleo"
cpu = "cortex-m7"
clock_hz = 216000000
port = "/dev/ttyACM0"
baud = 921600
[build]
linker_script = "bsp/board.ld"
startup = "bsp/startup.c"
sources = ["bsp/uart.c"]
include_dirs = ["bsp"]
cflags = ["-DHSE_VALUE=8000000"]
[flash]
pyocd_target = "stm32f746zgtx"
[link]
call_timeout_s = 5
reconnect_attempts = 2
""")
    cfg = load_board_config(tmp_path / "board.toml")
    assert (cfg.name, cfg.cpu, cfg.clock_hz, cfg.port, cfg.baud) == ("nucleo", "cortex-m7", 216000000,
                                                                      "/dev/ttyACM0", 921600)
    assert cfg.linker_script == tmp_path / "bsp" / "board.ld" and cfg.sources == (tmp_path / "bsp" / "uart.c",)
    assert cfg.include_dirs == (tmp_path / "bsp",) and cfg.cflags == ("-DHSE_VALUE=8000000",)
    assert (cfg.pyocd_target, cfg.flash_command, cfg.call_timeout_s, cfg.reconnect_attempts) == (
        "stm32f746zgtx", None, 5.0, 2)
    assert cfg.reset_command is None and cfg.build_command is None


BASE = {
    "board": {"name": '"b"', "cpu": '"cortex-m4"', "clock_hz": "1000", "port": '"/dev/ttyX"', "baud": "9600"},
    "build": {"command": '["make", "-C", "{project}", "ELF={elf}"]'},
    "flash": {"command": '["flash-it", "{hex}"]'},
    "link": {},
}

# (table, key, TOML value or None to delete it) -> what the error says besides file, table and key
BAD_KEYS = [
    ("board", "cpu", None, "missing"),
    ("board", "cpu", "42", "expected a string, got an integer"),
    ("board", "cpu", '"cortex-a53"', "not a Cortex-M CPU"),
    ("board", "clock_hz", "0", "greater than 0"),
    ("board", "clock_hz", "true", "expected an integer, got a boolean"),
    ("board", "baud", '"fast"', "expected an integer"),
    ("board", "port", None, "missing"),
    ("board", "port", '""', "is empty"),
    ("board", "colour", '"red"', "unknown key"),
    ("build", "command", "[]", "empty list"),
    ("build", "command", '["make", 3]', "expected a string"),
    ("build", "linker_script", '"x.ld"', "cannot be given with command"),
    ("flash", "command", '["flash-it", "{elf"]', "bad placeholder"),
    ("flash", "command", '["flash-it", "{serial}"]', "bad placeholder"),
    ("flash", "command", None, "exactly one of pyocd_target and command"),
    ("flash", "pyocd_target", '"stm32"', "both are set"),
    ("flash", "timeout_s", "-1", "greater than 0"),
    ("link", "handshake_timeout_s", '"10"', "expected a number"),
    ("link", "handshake_timeout_s", "nan", "finite"),
    ("link", "reconnect_attempts", "-1", "0 or more"),
    ("link", "reset_command", '"reset.sh"', "expected a list of strings"),
]


def _toml(tables: dict[str, dict[str, str]]) -> str:
    return "".join(f"[{t}]\n" + "".join(f"{k} = {v}\n" for k, v in kv.items()) for t, kv in tables.items())


def test_the_base_of_the_bad_key_cases_is_good(tmp_path: Path) -> None:
    (tmp_path / "board.toml").write_text(_toml(BASE))
    cfg = load_board_config(tmp_path / "board.toml")
    assert cfg.build_command == ("make", "-C", "{project}", "ELF={elf}") and cfg.flash_command == ("flash-it", "{hex}")


@pytest.mark.parametrize("table, key, value, says", BAD_KEYS)
def test_every_bad_key_is_one_line_naming_file_table_and_key(table: str, key: str, value: str | None, says: str,
                                                             tmp_path: Path) -> None:
    tables = {t: dict(kv) for t, kv in BASE.items()}
    if value is None:
        tables[table].pop(key)
    else:
        tables[table][key] = value
    path = tmp_path / "board.toml"
    path.write_text(_toml(tables))
    with pytest.raises(UsageError) as err:
        load_board_config(path)
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith(f"{path.resolve()}: [{table}] ") and says in msg, msg
    assert key in msg.split(":")[1] or key in msg, msg


@pytest.mark.parametrize("text, says", [
    ("[board\n", "not valid TOML"),
    ("", "missing table [board]"),
    (_toml(BASE) + "[flashing]\n", "unknown table [flashing]"),
    (_toml({k: v for k, v in BASE.items() if k != "flash"}), "missing table [flash]"),
    ("board = 3\n" + _toml({k: v for k, v in BASE.items() if k != "board"}), "[board] must be a table"),
])
def test_bad_files_and_tables(text: str, says: str, tmp_path: Path) -> None:
    (tmp_path / "board.toml").write_text(text)
    with pytest.raises(UsageError, match=None) as err:
        load_board_config(tmp_path / "board.toml")
    assert says in str(err.value) and "board.toml" in str(err.value)


def test_board_files_must_exist_and_be_c(tmp_path: Path) -> None:
    tables = {t: dict(kv) for t, kv in BASE.items()}
    (tmp_path / "s.ld").write_text("")
    (tmp_path / "startup.s").write_text("")
    tables["build"] = {"linker_script": '"s.ld"', "startup": '"missing.c"'}
    (tmp_path / "board.toml").write_text(_toml(tables))
    with pytest.raises(UsageError, match=r"\[build\] startup: 'missing.c' is not a file"):
        load_board_config(tmp_path / "board.toml")
    tables["build"]["startup"] = '"startup.s"'
    (tmp_path / "board.toml").write_text(_toml(tables))
    with pytest.raises(UsageError, match=r"\[build\] startup: 'startup.s' is not a C file"):
        load_board_config(tmp_path / "board.toml")


# --- choosing the board: --board-config, $UTVM_BOARD_CONFIG, the platform's target --------------------------

def test_serial_board_is_a_builtin_platform_whose_target_is_the_boards_cpu(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    assert "serial-board" in available_platforms()
    with pytest.raises(UsageError, match="--board-config"):
        get_platform("serial-board")
    with pytest.raises(UsageError, match=ENV_VAR):
        platform_target("serial-board")
    monkeypatch.setenv(ENV_VAR, str(write_board_toml(tmp_path, cpu="cortex-m0")))
    plat = get_platform("serial-board")
    assert isinstance(plat, SerialBoardPlatform) and plat.target == "cortex-m0"
    assert platform_target("serial-board").name == "cortex-m0"
    assert plat.board.cpu_flags == ("-mcpu=cortex-m0", "-mthumb", "-mfloat-abi=soft")
    other = write_board_toml(tmp_path / "..", cpu="cortex-m7")  # the explicit choice wins over the environment
    use_board_config(other)
    assert platform_target("serial-board").name == "cortex-m7"


def test_every_cortex_m_cpu_of_a_qemu_board_is_a_serial_board_cpu_with_its_flags(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The M7, M33 and M55 among them: a board.toml names the CPU, and its firmware is compiled exactly as
    # the QEMU board of that CPU compiles it (the M55 with -mcpu's own FPU, which carries MVE).
    assert {"cortex-m7", "cortex-m33", "cortex-m33-nodsp", "cortex-m55"} <= set(cortex_m_targets())
    for qemu in BOARDS.values():
        (tmp_path / qemu.name).mkdir()
        monkeypatch.setenv(ENV_VAR, str(write_board_toml(tmp_path / qemu.name, cpu=qemu.cpu)))
        plat = get_platform("serial-board")
        assert plat.target == qemu.cpu and plat.board.cpu_flags == qemu.cpu_flags, qemu.name
    (tmp_path / "nodsp").mkdir()
    monkeypatch.setenv(ENV_VAR, str(write_board_toml(tmp_path / "nodsp", cpu="cortex-m33-nodsp")))
    assert get_platform("serial-board").board.cpu_flags == ("-mcpu=cortex-m33+nodsp", "-mthumb",
                                                            "-mfloat-abi=hard", "-mfpu=fpv5-sp-d16")


def test_cli_refuses_a_bad_board_config_with_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    tables = {t: dict(kv) for t, kv in BASE.items()}
    tables["board"]["baud"] = "-5"
    bad = tmp_path / "board.toml"
    bad.write_text(_toml(tables))
    for argv in (["build-device", "--platform", "serial-board", "--board-config", str(bad), "-o", str(tmp_path)],
                 ["run", str(HELLO), "--platform", "serial-board", "--board-config", str(bad)],
                 ["run", str(HELLO), "--platform", "serial-board", "--board-config", ""]):
        assert main(argv) == EXIT_USAGE
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "board-config" in err, err
    assert "[board] baud: must be greater than 0" in main_err(capsys, ["build-device", "--platform", "serial-board",
                                                                       "--board-config", str(bad), "-o", "x"])


def test_cli_refuses_a_board_config_for_another_platform(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    good = write_board_toml(tmp_path)
    assert main(["build-device", "--platform", "host", "--board-config", str(good), "-o", str(tmp_path)]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--board-config" in err and "serial-board" in err, err


def main_err(capsys: pytest.CaptureFixture, argv: list[str]) -> str:
    main(argv)
    return capsys.readouterr().err


def test_cli_without_any_board_config_says_how_to_give_one(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["build-device", "--platform", "serial-board", "-o", str(tmp_path / "fw.elf")]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--board-config" in err and ENV_VAR in err, err


# --- the firmware project -------------------------------------------------------------------------------------

def test_the_firmware_is_the_qemu_rpc_firmware_with_the_boards_files(tmp_path: Path) -> None:
    spec = SerialBoardPlatform(write_board_toml(tmp_path)).firmware_spec(with_test_functions=True)
    assert spec.template_board_files == ("utvm_board.h", "utvm_mps2.h", "timer.c")
    assert {"utvm_serial_board.h", "serial_glue.c", "startup.c", "semihost.c", "mps2_uart.c", "mps2.ld"} <= set(
        spec.board_files)
    assert spec.linker_script == "mps2.ld" and "main.c" in spec.app_sources
    assert {"UTVM_BOARD_BAUD=115200u", "UTVM_CPU_CLOCK_HZ=25000000u", "UTVM_PLATFORM_MEMORY_BYTES=1048576u"} <= set(
        spec.defines)
    assert spec.crt_config["TVM_CRT_WORKSPACE_SIZE_BYTES"] == 262144
    assert spec.board.cpu_flags == ("-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16")


def test_a_board_file_may_not_shadow_utvms(tmp_path: Path) -> None:
    (tmp_path / "timer.c").write_text("/* the board's own SysTick */\n")
    cfg = write_board_toml(tmp_path)
    cfg.write_text(cfg.read_text().replace("sources = [", f"sources = [{toml_str(tmp_path / 'timer.c')}, "))
    # refused when the config is read (a usage error), not when the firmware is built
    with pytest.raises(UsageError, match=r"\[build\] sources\[0\]: 'timer.c' is the name of one of utvm's own "
                                         r"firmware files"):
        SerialBoardPlatform(cfg).firmware_spec()


def test_two_board_files_of_one_name_are_refused_when_the_config_is_read(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "drv.c").write_text("/* one */\n")
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "drv.c").write_text("/* two */\n")
    cfg = write_board_toml(tmp_path)
    cfg.write_text(cfg.read_text().replace(
        "sources = [", f"sources = [{toml_str(tmp_path / 'a' / 'drv.c')}, {toml_str(tmp_path / 'b' / 'drv.c')}, "))
    with pytest.raises(UsageError, match=r"\[build\] sources\[1\]: 'drv.c' has the name of sources\[0\]"):
        load_board_config(cfg)


@pytest.mark.parametrize("flag", ["-MF/tmp/victim.txt", "-MD", "-o", "-save-temps", "-fdump-tree-all"])
def test_a_cflag_that_writes_files_is_refused(tmp_path: Path, flag: str) -> None:
    cfg = write_board_toml(tmp_path)
    cfg.write_text(cfg.read_text().replace("[build]", f"[build]\ncflags = [{toml_str(flag)}]", 1))
    with pytest.raises(UsageError, match=r"\[build\] cflags\[0\]: .* makes the compiler write a file"):
        load_board_config(cfg)


# --- flashing -------------------------------------------------------------------------------------------------

def test_pyocd_missing_is_a_platform_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = write_board_toml(tmp_path, flash='pyocd_target = "stm32f746zgtx"')
    elf = tmp_path / "fw.elf"
    elf.write_bytes(b"\x7fELF")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(PlatformError, match="pyocd") as err:
        SerialBoardPlatform(cfg).flash(elf)
    assert exit_status(err.value) == EXIT_BUILD and "\n" not in str(err.value)


def test_a_failing_flash_command_is_one_line_with_its_last_words(tmp_path: Path) -> None:
    script = "import sys; print('probe: no target connected'); sys.exit(3)"
    cfg = write_board_toml(tmp_path, flash=f"command = [{toml_str(sys.executable)}, \"-c\", {toml_str(script)}, "
                                           '"{elf}", "{port}"]')
    elf = tmp_path / "fw.elf"
    elf.write_bytes(b"\x7fELF")
    with pytest.raises(PlatformError) as err:
        SerialBoardPlatform(cfg).flash(elf)
    msg = str(err.value)
    assert "\n" not in msg and "[flash] failed (exit 3)" in msg and "no target connected" in msg
    assert str(elf) in msg and exit_status(err.value) == EXIT_BUILD


def test_placeholders_of_a_command_are_filled(tmp_path: Path) -> None:
    out = tmp_path / "args.json"
    script = f"import json, sys; json.dump(sys.argv[1:], open({str(out)!r}, 'w'))"
    cfg = load_board_config(write_board_toml(tmp_path, port="/dev/ttyUSB7",
                                             flash=f"command = [{toml_str(sys.executable)}, \"-c\", "
                                                   f"{toml_str(script)}, \"{{elf}}\", \"{{port}}\", \"{{{{x}}}}\"]"))
    assert cfg.flash_command is not None
    run_board_command(cfg, cfg.flash_command, "[flash]", tmp_path / "fw.elf")
    assert json.loads(out.read_text()) == [str(tmp_path / "fw.elf"), "/dev/ttyUSB7", "{x}"]


# --- the link over a real pty and pyserial, no QEMU --------------------------------------------------------

def test_serial_transport_timeout_is_a_timeout_and_the_port_is_exclusive() -> None:
    from utvm.rpc.transport import SerialTransport

    master, slave = os.openpty()
    try:
        port = os.ttyname(slave)
        t = SerialTransport(port)
        try:
            with pytest.raises(SessionTimeoutError, match=f"no data from serial port {port}"):
                t.read(16, timeout=0.05)  # a TimeoutError is an OSError: it must not become LinkClosedError
            with pytest.raises(TransportError, match=f"cannot open serial port '{port}'"):
                SerialTransport(port)
            os.write(master, b"abc")
            assert t.read(16, timeout=5.0) == b"abc"
        finally:
            t.close()
        SerialTransport(port).close()  # free again once closed
    finally:
        os.close(slave)
        os.close(master)


def test_a_board_that_does_not_answer_fails_the_handshake_naming_the_port(tmp_path: Path) -> None:
    master, slave = os.openpty()  # nobody reads the other side
    try:
        port = os.ttyname(slave)
        plat = SerialBoardPlatform(write_board_toml(tmp_path, port=port, handshake_s=0.5, reset=False))
        with pytest.raises(SessionTimeoutError) as err:
            plat.connect()
        assert port in str(err.value) and "did not answer the session handshake within 0.5 s" in str(err.value)
        assert exit_status(err.value) == EXIT_DEVICE
    finally:
        os.close(slave)
        os.close(master)


def test_a_port_that_does_not_exist_is_a_link_error(tmp_path: Path) -> None:
    port = tmp_path / "ttyNOTHERE"
    plat = SerialBoardPlatform(write_board_toml(tmp_path, port=port))
    with pytest.raises(TransportError) as err:
        plat.connect()
    assert str(port) in str(err.value) and exit_status(err.value) == EXIT_DEVICE


class PtyBridge:
    """The host platform's RPC firmware behind a pty: bytes written to the pty's port reach the firmware's
    stdin, its stdout comes back out of the port (what a USB-serial bridge does for a board)."""

    def __init__(self, firmware: Path) -> None:
        self.master, self.slave = os.openpty()
        self.port = os.ttyname(self.slave)
        self.proc = subprocess.Popen([str(firmware)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
        self.threads = [threading.Thread(target=self._pump, args=(self._from_port, self.proc.stdin), daemon=True),
                        threading.Thread(target=self._pump, args=(self.proc.stdout.read, None), daemon=True)]
        for t in self.threads:
            t.start()

    def _from_port(self, n: int) -> bytes:
        try:
            return os.read(self.master, n)
        except OSError:
            return b""

    def _pump(self, read, out) -> None:  # noqa: ANN001
        while True:
            data = read(65536)
            if not data:
                break
            try:
                if out is None:
                    os.write(self.master, data)
                else:
                    out.write(data)
            except OSError:
                break

    def unplug(self) -> None:
        """The board goes away: the device process dies and the pty's far side closes."""
        self.proc.kill()
        self.proc.wait()
        os.close(self.master)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for fd in (self.master, self.slave):
            try:
                os.close(fd)
            except OSError:
                pass


@pytest.fixture(scope="module")
def host_firmware() -> Path:
    return get_platform("host").build(with_test_functions=True)


def test_rpc_over_a_real_pty_with_pyserial(tmp_path: Path, host_firmware: Path) -> None:
    bridge = PtyBridge(host_firmware)
    try:
        plat = SerialBoardPlatform(write_board_toml(tmp_path, port=bridge.port, link="reconnect_attempts = 1",
                                                reset=False))
        with plat.connect() as sess:
            assert isinstance(sess.transport, SerialBoardTransport)
            add_one = sess.get_function("testing.add_one")
            a = sess.array(np.arange(300, dtype="float32"))
            b = sess.empty((300,), "float32")
            add_one(a, b)
            np.testing.assert_array_equal(b.numpy(), np.arange(300, dtype="float32") + 1)
        # The session left the board serving: a second session on the same port works.
        with plat.connect() as sess:
            assert sess.get_function("testing.add_one") is not None
            bridge.unplug()
            with pytest.raises(SessionTerminatedError) as err:  # never a hang, never a wrong result
                sess.get_function("testing.add_one")(a := sess.array(np.zeros(4, "float32")), a)
            assert isinstance(err.value, LinkClosedError) or "terminated" in str(err.value)
    finally:
        bridge.close()


# --- QEMU as the board (slow) -----------------------------------------------------------------------------------

def kill_board(port: Path) -> None:
    """Stop the QEMU that qemu_flash.py started for `port` (by the pid it recorded)."""
    pid_file = port.with_name(port.name + ".pid")
    try:
        pid = int(pid_file.read_text())
    except (OSError, ValueError):
        return
    try:
        if b"qemu-system-arm" in Path(f"/proc/{pid}/cmdline").read_bytes():
            os.kill(pid, signal.SIGKILL)
    except OSError:
        pass


@pytest.fixture
def qemu_board(tmp_path: Path) -> Iterator[Path]:
    """A board.toml of the QEMU stand-in board; QEMU is killed after the test."""
    path = write_board_toml(tmp_path)
    yield path
    kill_board(tmp_path / "ttyBOARD")


@pytest.mark.slow
def test_utvm_run_check_on_the_board_through_the_cli(qemu_board: Path, capsys: pytest.CaptureFixture) -> None:
    argv = ["run", str(HELLO), "--platform", "serial-board", "--board-config", str(qemu_board), "--check",
            "--seed", "3", "--repeat", "2", "--json", "-q"]
    assert main(argv) == 0, capsys.readouterr().err
    res = json.loads(capsys.readouterr().out)
    assert res["bit_exact"] is True and res["seed"] == 3 and set(res["outputs"]) == {"StatefulPartitionedCall:0"}


@pytest.mark.slow
def test_build_device_writes_the_boards_firmware(qemu_board: Path, tmp_path: Path) -> None:
    out = tmp_path / "fw.elf"
    assert main(["build-device", "--platform", "serial-board", "--board-config", str(qemu_board),
                 "--with-test-functions", "-o", str(out)]) == 0
    assert out.read_bytes()[:4] == b"\x7fELF"


@pytest.mark.slow
def test_python_api_and_a_board_reset_in_the_middle_of_a_call(qemu_board: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from utvm import evaluate
    from utvm.compiler import compile
    from utvm.frontend import load

    monkeypatch.setenv(ENV_VAR, str(qemu_board))
    plat = get_platform("serial-board")
    compiled = compile(load(HELLO), model_name="hello", target=plat.target)
    elf = plat.build(with_test_functions=True, system_lib_sources=evaluate.firmware_sources(compiled),
                     crt_config=evaluate.firmware_crt_config(compiled) or None)
    inputs = evaluate.read_inputs(compiled, {}, seed=5)
    refs, _ = evaluate.reference(HELLO, compiled, inputs)
    cfg = plat.config
    assert cfg.reset_command is not None

    with plat.start(elf) as sess:
        sleep = sess.get_function("testing.sleep_ms")
        transport = sess.transport
        write = transport.write
        pressed = threading.Event()

        def write_then_reset(data: bytes, timeout: float | None = None) -> None:
            write(data, timeout)
            if not pressed.is_set():  # the sleep request is on its way: press reset now
                pressed.set()
                run_board_command(cfg, cfg.reset_command, "[link] reset_command", elf)

        transport.write = write_then_reset  # type: ignore[method-assign]
        with pytest.raises(SessionTerminatedError):
            sleep(600_000)  # ten minutes: only the reset can end this call
        transport.write = write  # type: ignore[method-assign]
        assert pressed.is_set()
        sess.reconnect()  # the rebooted board serves a new session
        outputs, _ = evaluate.run_on_device(sess, compiled, inputs)
    assert evaluate.compare(outputs, refs).bit_exact


@pytest.mark.slow
def test_a_silent_board_fails_utvm_run_with_exit_7_naming_the_port(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture) -> None:
    master, slave = os.openpty()
    try:
        port = os.ttyname(slave)
        cfg = write_board_toml(tmp_path, port=port, handshake_s=1.0, reset=False,
                               flash=f"command = [{toml_str(sys.executable)}, \"-c\", \"pass\", \"{{elf}}\"]")
        assert main(["run", str(HELLO), "--platform", "serial-board", "--board-config", str(cfg), "-q"]) == EXIT_DEVICE
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and port in err and "handshake" in err, err
    finally:
        os.close(slave)
        os.close(master)


@pytest.mark.slow
def test_a_build_command_builds_the_users_own_project(tmp_path: Path) -> None:
    """[build] command: the user's build gets utvm's generated project ({project}) and writes {elf}."""
    build = tmp_path / "my_build.py"
    build.write_text(f"""
import shutil, subprocess, sys
from pathlib import Path
project, elf = Path(sys.argv[1]), Path(sys.argv[2])
for f in ("startup.c", "semihost.c", "mps2.ld"):
    shutil.copy({str(QEMU_BOARD)!r} + "/" + f, project / "board" / f)
shutil.copy({str(HELPERS / 'mps2_uart.c')!r}, project / "board" / "mps2_uart.c")
subprocess.run(["make", "-s", "-C", str(project), "LINKER_SCRIPT=board/mps2.ld"], check=True)
assert (project / "build" / "firmware.elf").samefile(elf)
""")
    cfg = write_board_toml(tmp_path)
    text = cfg.read_text()
    start = text.index("linker_script =")
    end = text.index("memory_bytes =")
    cfg.write_text(text[:start] + f'command = [{toml_str(sys.executable)}, {toml_str(build)}, "{{project}}", '
                   '"{elf}"]\n' + text[end:])
    plat = SerialBoardPlatform(cfg)
    assert plat.config.build_command is not None and plat.config.linker_script is None
    elf = plat.build(with_test_functions=True)
    try:
        with plat.start(elf) as sess:
            add_one = sess.get_function("testing.add_one")
            a = sess.array(np.arange(8, dtype="float32"))
            add_one(a, a)
            np.testing.assert_array_equal(a.numpy(), np.arange(8, dtype="float32") + 1)
    finally:
        kill_board(tmp_path / "ttyBOARD")


@pytest.mark.slow
def test_tune_measures_on_the_board(qemu_board: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    # the tuner flashes each batch of candidates and measures it over the board's serial link
    log = tmp_path / "tune.jsonl"
    argv = ["tune", str(HELLO), "--platform", "serial-board", "--board-config", str(qemu_board), "-o", str(log),
            "--trials", "2", "--batch", "2", "--strategy", "grid"]
    assert main(argv) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert records and all(r["platform"] == "serial-board" for r in records), records[:1]
    assert "measured" in out
