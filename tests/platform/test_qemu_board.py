"""The QEMU board layer: command line, project generation, and the hello firmware on every board
(startup, UART0 binary-clean both ways, SysTick determinism under -icount, per-boot randomness, semihosting
exit status)."""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from utvm.errors import LinkClosedError, PlatformError, SessionTimeoutError, TransportError
from utvm.platform.qemu.boards import BOARDS, get_board
from utvm.platform.qemu.project import (
    APPS_DIR,
    FirmwareSpec,
    build_firmware,
    crt_config_text,
    generate_project,
)
from utvm.platform.qemu.runner import QemuTransport, qemu_command


def hello_spec(board_name: str) -> FirmwareSpec:
    return FirmwareSpec(get_board(board_name), {"main.c": (APPS_DIR / "main_hello.c").read_text()})


def test_board_table() -> None:
    assert {b: BOARDS[b].machine for b in BOARDS} == {
        "qemu-cortex-m0": "mps2-an385",  # Armv6-M code on the AN385's Cortex-M3 (test_qemu_image_check.py)
        "qemu-cortex-m3": "mps2-an385",
        "qemu-cortex-m4": "mps2-an386",
        "qemu-cortex-m7": "mps2-an500",
        "qemu-cortex-m33": "mps2-an505",
        "qemu-cortex-m55": "mps3-an547",  # its memory map, boot table and MVE: test_qemu_cortex_m55.py
    }
    assert "-mfloat-abi=hard" in BOARDS["qemu-cortex-m4"].cpu_flags
    assert "-mfpu=fpv4-sp-d16" in BOARDS["qemu-cortex-m4"].cpu_flags
    assert BOARDS["qemu-cortex-m33"].cpu_flags == ("-mcpu=cortex-m33", "-mthumb", "-mfloat-abi=hard",
                                                   "-mfpu=fpv5-sp-d16")
    # The AN505 runs Secure: the Secure aliases of its SSRAMs and UART0, the expansion interrupt 0 (NVIC 32),
    # 20 MHz; the MPS2 defaults of utvm_mps2.h are never restated for the other boards.
    assert BOARDS["qemu-cortex-m33"].c_defines == ("UTVM_UART0_BASE=0x50200000u", "UTVM_UART0_RX_IRQ=32u",
                                                   "UTVM_CPU_CLOCK_HZ=20000000u")
    assert BOARDS["qemu-cortex-m33"].instructions_per_tick == 50
    assert all(BOARDS[b].c_defines == () and BOARDS[b].instructions_per_tick == 40
               for b in BOARDS if b not in ("qemu-cortex-m33", "qemu-cortex-m55"))
    with pytest.raises(PlatformError, match="qemu-cortex-m85.*known boards: qemu-cortex-m0"):
        get_board("qemu-cortex-m85")


def test_qemu_command_is_binary_clean_and_deterministic() -> None:
    cmd = qemu_command(BOARDS["qemu-cortex-m4"], "fw.elf", seed="ab12")
    assert "-nographic" not in cmd
    assert cmd[cmd.index("-chardev") + 1] == "stdio,id=uart0,mux=off,signal=off"
    assert cmd[cmd.index("-icount") + 1] == "shift=0"
    assert "seed=ab12" in cmd[cmd.index("-semihosting-config") + 1]
    assert cmd[cmd.index("-M") + 1] == "mps2-an386"


def test_crt_config_overrides() -> None:
    text = crt_config_text({"TVM_CRT_MAX_PACKET_SIZE_BYTES": 4096})
    assert "#define TVM_CRT_MAX_PACKET_SIZE_BYTES 4096" in text
    assert "#define TVM_CRT_FRAMER_BUFFER_SIZE_BYTES 64" in crt_config_text({"TVM_CRT_FRAMER_BUFFER_SIZE_BYTES": 64})
    with pytest.raises(PlatformError, match="MAX_ARGS"):
        crt_config_text({"TVM_CRT_MAX_ARGS": "many"})
    with pytest.raises(PlatformError, match="UTVM_X"):
        crt_config_text({"UTVM_X": 1})


@pytest.mark.parametrize("board_name, flash, ram", [("qemu-cortex-m3", 0x00000000, 0x20000000),
                                                     ("qemu-cortex-m33", 0x10000000, 0x38000000),
                                                     ("qemu-cortex-m55", 0x38000000, 0x31000000)])
def test_generated_project_builds_with_make_alone(tmp_path, board_name: str, flash: int, ram: int) -> None:
    project = generate_project(hello_spec(board_name), tmp_path / "hello")
    assert {p.name for p in (project / "board").iterdir()} >= {"startup.c", "uart.c", "timer.c", "mps2.ld"}
    subprocess.run(["make", "-s", "-C", str(project)], check=True, capture_output=True)
    elf = project / "build" / "firmware.elf"
    head = elf.read_bytes()[:28]
    assert head[:4] == b"\x7fELF" and int.from_bytes(head[18:20], "little") == 40  # EM_ARM
    assert int.from_bytes(head[24:28], "little") & ~1 >= flash  # e_entry: Reset_Handler, in the code memory
    # The vector table starts the code memory (where the core reads it at reset: 0x0, or the AN505's Secure
    # vector table at 0x10000000; the AN547 boots from a copy of its first two words in the ITCM): the first
    # word is the initial stack pointer, the top of the 4 MiB RAM.
    binary = (project / "build" / "firmware.bin").read_bytes()
    assert int.from_bytes(binary[0:4], "little") == ram + 0x400000
    reset = int.from_bytes(binary[4:8], "little")
    assert reset & 1 == 1 and flash < reset < flash + len(binary)  # a Thumb reset handler in the image


def run_hello(board_name: str, delay: float, status: int) -> tuple[bytes, bytes]:
    """Boot the hello firmware, wait `delay` s before talking; returns (random hex, tick line)."""
    project = build_firmware(hello_spec(board_name), "hello")
    with QemuTransport(BOARDS[board_name], project / "build" / "firmware.elf", first_bytes_timeout=10) as q:
        assert q.read_until(b"\n", 10) == b"utvm-hello\n"
        random_line = q.read_until(b"\n", 10)
        time.sleep(delay)
        payload = bytes(range(256))  # every byte value, 0x01 (Ctrl-A) and 0xff included
        q.write(payload, 10)
        assert q.read_exactly(256, 10) == payload
        ticks = q.read_until(b"\n", 10)
        q.write(bytes([status]), 10)
        assert q.wait(10) == status
    return random_line, ticks


@pytest.mark.slow
@pytest.mark.parametrize("board_name", sorted(BOARDS))
def test_hello_firmware(board_name: str) -> None:
    r1, t1 = run_hello(board_name, 0.0, 0)
    r2, t2 = run_hello(board_name, 0.25, 42)
    assert r1 != r2, "TVMPlatformGenerateRandom's source must differ on every boot"
    # The device polled the UART a different number of times in the two runs (the host waited 0.25 s in
    # one), yet the workload's tick count is identical: readings start on a tick edge.
    assert t1 == t2
    board = BOARDS[board_name]
    instructions = int(t1, 16) * board.instructions_per_tick  # 40 at 25 MHz, 50 at 20 MHz, 31.25 at 32 MHz
    if board.cpu == "cortex-m55":
        # Armv8.1-M's low-overhead loops: a multiply-accumulate and LE (the loop end) per iteration.
        assert 12345 * 2 - board.instructions_per_tick <= instructions <= 12345 * 2 + 400
    elif board.isa_check is None:
        # 12345 iterations of a 3-instruction loop (Thumb-2: the constants stay in registers).
        assert 12345 * 3 - board.instructions_per_tick <= instructions <= 12345 * 3 + 400
    else:
        # Armv6-M has no multiply-accumulate and no 32-bit immediates: 7 instructions an iteration.
        assert 12345 * 7 - board.instructions_per_tick <= instructions <= 12345 * 7 + 400


@pytest.mark.slow
def test_close_kills_a_firmware_that_does_not_exit() -> None:
    project = build_firmware(hello_spec("qemu-cortex-m3"), "hello")
    q = QemuTransport(BOARDS["qemu-cortex-m3"], project / "build" / "firmware.elf")
    with pytest.raises(SessionTimeoutError, match="did not exit"):
        q.wait(0.2)  # it waits for 256 bytes that never come
    pid = q.proc.pid
    q.close(timeout=0.1)
    assert q.proc.returncode is not None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    with pytest.raises(TransportError, match="closed"):
        q.read(1, 0.1)


@pytest.mark.slow
def test_fault_exit_status_names_the_exception(tmp_path) -> None:
    crash = "int main(void) { return *(volatile int*)0xF0000000u; }\n"  # bus fault -> HardFault
    project = build_firmware(FirmwareSpec(BOARDS["qemu-cortex-m3"], {"main.c": crash}), "crash")
    with pytest.raises(LinkClosedError, match=r"exited with code 131 .*firmware fault: exception 3"):
        QemuTransport(BOARDS["qemu-cortex-m3"], project / "build" / "firmware.elf")
