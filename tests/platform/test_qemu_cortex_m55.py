"""The `qemu-cortex-m55` board (QEMU's `mps3-an547`, run Secure): its memory map and boot table, an image
larger than the ITCM, MVE instructions executing (CP10/CP11 enabled at reset), a fault's exit status, a
standalone `utvm deploy` project built with make alone, `utvm size`, and an MVE-built MLF refused on a CPU
without MVE. The RPC firmware and the shared models on this board: test_qemu_platform.py, test_qemu_eval.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from utvm.cli import EXIT_USAGE, main
from utvm.compiler import compile, export_model_library_format
from utvm.errors import LinkClosedError
from utvm.frontend import load
from utvm.platform.qemu.boards import BOARDS, cross_tool
from utvm.platform.qemu.deploy import parse_deploy_output
from utvm.platform.qemu.footprint import read_elf_sections
from utvm.platform.qemu.project import FirmwareSpec, build_firmware, generate_project
from utvm.platform.qemu.runner import QemuTransport
from utvm.support.models import models_dir
from utvm.target import get_target

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from oracle import tflite_reference  # noqa: E402

BOARD = BOARDS["qemu-cortex-m55"]
MICRO_SPEECH = models_dir() / "tflm" / "micro_speech_quantized.tflite"
HELLO = models_dir() / "tflm" / "hello_world_int8.tflite"

#: Firmware that proves the memory map and MVE: 1 MiB + 1 KiB of constants (more than the ITCM's 512 KiB)
#: read at both ends, 3 MiB of .bss written at both ends (the stack sits above it, at the top of the 4 MiB
#: of RAM), and an MVE vector add; it prints what it read and exits with status 0.
BIG_IMAGE_MAIN = r"""
#include <arm_mve.h>
#include <stdint.h>

#include "utvm_board.h"

#define BIG_CONST_BYTES ((1u << 20) + 1024u)
#define BIG_BSS_BYTES (3u << 20)

static const uint8_t g_big_const[BIG_CONST_BYTES] = {[0] = 0x11u, [BIG_CONST_BYTES - 1u] = 0x5Au};
static uint8_t g_big_bss[BIG_BSS_BYTES];

static void put_hex8(uint32_t value) {
  static const char kHex[] = "0123456789abcdef";
  char text[3] = {kHex[(value >> 4) & 0xFu], kHex[value & 0xFu], '\0'};
  utvm_uart_puts(text);
}

int main(void) {
  volatile const uint8_t* rom = g_big_const;
  volatile uint8_t* ram = g_big_bss;
  int8_t a[16];
  int8_t b[16];
  int8_t sum[16];
  int i;
  utvm_uart_init();
  ram[0] = 0x22u;
  ram[BIG_BSS_BYTES - 1u] = 0x33u;
  put_hex8(rom[0]);
  put_hex8(rom[BIG_CONST_BYTES - 1u]);
  put_hex8(ram[0]);
  put_hex8(ram[BIG_BSS_BYTES - 1u]);
  utvm_uart_puts(" ");
  for (i = 0; i < 16; ++i) {
    a[i] = (int8_t)(i * 7 - 50);
    b[i] = (int8_t)(100 - i * 3);
  }
  /* One 128-bit MVE add of 16 int8 lanes: faults (NOCP) unless the reset handler enabled CP10/CP11. */
  vst1q_s8(sum, vaddq_s8(vld1q_s8(a), vld1q_s8(b)));
  for (i = 0; i < 16; ++i) {
    put_hex8((uint8_t)sum[i]);
  }
  utvm_uart_puts("\n");
  return 0;
}
"""


def test_board_entry() -> None:
    # The AN547 boots from its ITCM's Secure alias; code and constants live in the 8 MiB QSPI flash (Secure
    # alias 0x38000000), RAM is the SSE-300's 4 MiB SRAM (0x31000000), UART0 the Secure alias of
    # 0x49303000 with its receive interrupt on NVIC 33, the clock 32 MHz: 31.25 instructions a tick.
    assert (BOARD.machine, BOARD.cpu, BOARD.flash_origin, BOARD.ram_origin, BOARD.boot_origin) == (
        "mps3-an547", "cortex-m55", 0x38000000, 0x31000000, 0x10000000)
    assert BOARD.cpu_flags == ("-mcpu=cortex-m55", "-mthumb", "-mfloat-abi=hard")
    assert BOARD.c_defines == ("UTVM_UART0_BASE=0x59303000u", "UTVM_UART0_RX_IRQ=33u",
                               "UTVM_CPU_CLOCK_HZ=32000000u", "UTVM_BOOT_VECTORS=1")
    assert BOARD.instructions_per_tick == 31.25
    assert [b.name for b in BOARDS.values() if b.boot_origin is not None] == ["qemu-cortex-m55"]
    # The compiler's defaults for the core: the FPU and MVE with integer and float lanes, linked against
    # the Armv8-M Mainline double-precision hard-float newlib.
    gcc = cross_tool("gcc")
    macros = subprocess.run([gcc, *BOARD.cpu_flags, "-dM", "-E", "-"], input="", capture_output=True, text=True,
                            check=True).stdout
    assert "#define __ARM_FEATURE_MVE 3" in macros.splitlines()
    assert subprocess.run([gcc, *BOARD.cpu_flags, "-print-multi-directory"], capture_output=True, text=True,
                          check=True).stdout.strip() == "thumb/v8-m.main+dp/hard"


def test_project_puts_a_boot_table_in_the_itcm(tmp_path: Path) -> None:
    project = generate_project(FirmwareSpec(BOARD, {"main.c": "int main(void) { return 0; }\n"}), tmp_path / "p")
    assert "BOOT_ORIGIN := 0x10000000" in (project / "project.mk").read_text()
    subprocess.run(["make", "-s", "-C", str(project)], check=True, capture_output=True)
    elf = project / "build" / "firmware.elf"
    sections = {s.name: s for s in read_elf_sections(elf)}
    assert sections[".boot_vectors"].addr == 0x10000000 and sections[".boot_vectors"].size == 8
    assert sections[".text"].addr == 0x38000000
    # The boot table (in the ELF, which QEMU loads) and the full vector table (the start of firmware.bin,
    # the code memory's image, which leaves the boot table out) agree on the stack top and the reset handler.
    binary = (project / "build" / "firmware.bin").read_bytes()
    assert len(binary) < 64 * 1024
    boot = subprocess.run([cross_tool("objcopy"), "-O", "binary", "-j", ".boot_vectors", str(elf), "/dev/stdout"],
                          capture_output=True, check=True).stdout
    assert boot == binary[:8]
    assert int.from_bytes(boot[:4], "little") == 0x31000000 + 0x400000
    reset = int.from_bytes(boot[4:8], "little")
    assert reset & 1 == 1 and 0x38000000 < reset < 0x38000000 + len(binary)


@pytest.mark.slow
def test_big_image_and_mve_run() -> None:
    project = build_firmware(FirmwareSpec(BOARD, {"main.c": BIG_IMAGE_MAIN}), "m55-big")
    elf = project / "build" / "firmware.elf"
    with QemuTransport(BOARD, elf, first_bytes_timeout=30) as q:
        line = q.read_until(b"\n", 30)
        assert q.wait(30) == 0
    a = np.arange(16) * 7 - 50
    b = 100 - np.arange(16) * 3
    assert line.decode() == "115a2233 " + bytes((a + b).astype(np.int8).view(np.uint8)).hex() + "\n"
    # The image really is past the ITCM's 512 KiB, and the generated add is an MVE instruction.
    text = next(s for s in read_elf_sections(elf) if s.name == ".text")
    assert text.size > (1 << 20)
    disassembly = subprocess.run([cross_tool("objdump"), "-d", "--section=.text", str(elf)], capture_output=True,
                                 text=True, check=True).stdout
    assert "vadd.i8\tq" in disassembly


@pytest.mark.slow
def test_fault_exit_status_names_the_exception() -> None:
    # The HardFault comes through the full vector table in the QSPI flash (VTOR), not the ITCM's boot table.
    crash = "int main(void) { return *(volatile int*)0xF0000000u; }\n"
    project = build_firmware(FirmwareSpec(BOARD, {"main.c": crash}), "crash")
    with pytest.raises(LinkClosedError, match=r"exited with code 131 .*firmware fault: exception 3"):
        QemuTransport(BOARD, project / "build" / "firmware.elf")


@pytest.mark.slow
def test_deploy_project_builds_with_make_and_runs_bit_exact(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    x = np.random.default_rng(55).integers(-128, 127, (1, 1960), endpoint=True).astype(np.int8)
    np.save(tmp_path / "x.npy", x)
    project = tmp_path / "fw"
    assert main(["deploy", str(MICRO_SPEECH), "--platform", "qemu-cortex-m55", "-o", str(project), "-q",
                 "--unpacked-api", "--interface-api", "c", "--input", f"Reshape_1={tmp_path / 'x.npy'}"]) == 0
    capsys.readouterr()
    mk = (project / "project.mk").read_text()
    assert "QEMU_MACHINE := mps3-an547" in mk and "-mcpu=cortex-m55" in mk and "BOOT_ORIGIN := 0x10000000" in mk
    assert "reads its vector table at reset from 0x10000000" in (project / "README.md").read_text()
    subprocess.run(["make", "-s", "-C", str(project)], check=True, capture_output=True)
    proc = subprocess.run(["make", "-s", "-C", str(project), "run"], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    dep = parse_deploy_output(proc.stdout)
    assert dep.status == 0 and dep.board == "qemu-cortex-m55" and 0 < dep.stack_high_water < 0x10000
    (expected,) = tflite_reference(MICRO_SPEECH, {"Reshape_1": x})
    np.testing.assert_array_equal(dep.outputs["labels_softmax"], expected)


@pytest.mark.slow
def test_size_report(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["size", str(MICRO_SPEECH), "--platform", "qemu-cortex-m55", "--json", "-q"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["board"] == "qemu-cortex-m55"
    assert {k: v for k, v in rep["totals"].items() if k != "total"} == rep["elf_totals"]
    assert rep["sizes"]["constants"]["text"] > 18_000  # micro speech's weights (18.7 KB of int8)
    # The high-water mark of the run in QEMU is below the static worst case of the call graph.
    assert 0 < rep["stack"]["measured_high_water"] <= rep["stack"]["worst_case"]
    assert rep["stack"]["consistent"] is True


def test_mve_mlf_is_refused_on_a_cpu_without_mve(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    m55 = get_target("cortex-m55")
    assert m55.runs_on(m55) is None
    assert m55.runs_on(get_target("cortex-m4")) == ("the code was generated for cortex-m55, whose kernels use "
                                                     "MVE (Helium), and cortex-m4 has none")
    assert "the DSP extension and MVE (Helium), and cortex-m3 has neither" in m55.runs_on(get_target("cortex-m3"))
    assert get_target("cortex-m4").runs_on(m55) is None  # DSP code runs on the M55 (it has the extension)
    tar = export_model_library_format(compile(load(HELLO), target="cortex-m55"), tmp_path / "hello_m55.tar")
    for platform, cpu in (("host", "host"), ("qemu-cortex-m3", "cortex-m3"), ("qemu-cortex-m33", "cortex-m33")):
        assert main(["run", str(tar), "--platform", platform, "-q"]) == EXIT_USAGE
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1, err
        assert "whose kernels use" in err and "MVE (Helium)" in err and f"{cpu} has" in err
        assert f"recompile the model with --target {cpu}" in err
