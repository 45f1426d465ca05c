"""The board.toml of the QEMU stand-in board (mps2-an386 with UART0 on a pty), for every test that drives the
serial-board platform: tests/platform/test_serial_board.py and the acceptance kit's tests."""

from __future__ import annotations

import json
import sys
from pathlib import Path

HELPERS = Path(__file__).resolve().parent
QEMU_BOARD = HELPERS.parents[2] / "src" / "utvm" / "platform" / "qemu" / "template" / "board"


def toml_str(value: str | Path) -> str:
    return json.dumps(str(value))  # a TOML basic string is a JSON string for these paths


def write_board_toml(tmp: Path, *, port: str | Path | None = None, flash: str | None = None, link: str = "",
                     cpu: str = "cortex-m4", handshake_s: float = 20.0, reset: bool = True) -> Path:
    """A board.toml for the QEMU stand-in board (mps2-an386) in `tmp`: its UART on the pty `port` (default
    tmp/ttyBOARD), flashed and reset by the helpers beside this file."""
    port = port if port is not None else tmp / "ttyBOARD"
    if flash is None:
        flash = (f"command = [{toml_str(sys.executable)}, {toml_str(HELPERS / 'qemu_flash.py')}, "
                 '"{elf}", "{port}"]')
    reset_line = f"reset_command = [{toml_str(sys.executable)}, {toml_str(HELPERS / 'qemu_reset.py')}, \"{{port}}\"]"
    text = f"""
[board]
name = "qemu-an386"
cpu = "{cpu}"
clock_hz = 25000000
port = {toml_str(port)}
baud = 115200

[build]
linker_script = {toml_str(QEMU_BOARD / 'mps2.ld')}
startup = {toml_str(QEMU_BOARD / 'startup.c')}
sources = [{toml_str(QEMU_BOARD / 'semihost.c')}, {toml_str(HELPERS / 'mps2_uart.c')}]
memory_bytes = 1048576
workspace_bytes = 262144

[flash]
{flash}

[link]
handshake_timeout_s = {handshake_s}
{link}
{reset_line if reset else ""}
"""
    path = tmp / "board.toml"
    path.write_text(text)
    return path
