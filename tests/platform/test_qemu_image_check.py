"""The Armv6-M proof of the `qemu-cortex-m0` board (utvm.platform.qemu.image_check): which instructions it refuses in
objdump's text, that every image built for the board passes it, and that a firmware with one Armv7-M
instruction is refused at build time with a line naming the instruction and its function."""

from __future__ import annotations

from pathlib import Path

import pytest

from utvm.errors import PlatformError
from utvm.platform.qemu.boards import BOARDS, get_board
from utvm.platform.qemu.image_check import (
    armv6m_violations,
    check_disassembly,
    check_image,
    main,
)
from utvm.platform.qemu.project import APPS_DIR, FirmwareSpec, build_firmware

# What `arm-none-eabi-objdump -d` prints for an Armv6-M image: data as bytes and `.word`, 16-bit Thumb,
# and the 32-bit instructions Armv6-M has (BL, MRS, MSR, DMB, DSB, ISB).
CLEAN = """
firmware.elf:     file format elf32-littlearm


Disassembly of section .text:

00000000 <utvm_vector_table>:
   0:\t00 00 40 20 d5 03 00 00 c5 03 00 00 c5 03 00 00     ..@ ............
\t...

000000c0 <Default_Handler>:
  c0:\tb510      \tpush\t{r4, lr}
  c2:\tf3ef 8005 \tmrs\tr0, IPSR
  c6:\t2380      \tmovs\tr3, #128\t@ 0x80
  c8:\tf3bf 8f4f \tdsb\tsy
  cc:\tf3bf 8f6f \tisb\tsy
  d0:\tf380 8810 \tmsr\tPRIMASK, r0
  d4:\tf3bf 8f5f \tdmb\tsy
  d8:\tb672      \tcpsid\ti
  da:\tbf30      \twfi
  dc:\tb662      \tcpsie\ti
  de:\tf000 f802 \tbl\te6 <utvm_semihost_exit>
  e2:\t46c0      \tnop\t\t\t@ (mov r8, r8)
  e4:\t20000008 \t.word\t0x20000008

000000e6 <utvm_semihost_exit>:
  e6:\tbeab      \tbkpt\t0x00ab
  e8:\te7fe      \tb.n\te8 <utvm_semihost_exit+0x2>
"""

# A function the Cortex-M3 runs without complaint but a Cortex-M0 cannot (objdump's own text of a v6-M object
# holding .inst.w 0xf8d03004, .inst.n 0xb100, .inst.n 0xbf08, .inst.w 0xfb90f0f1).
FOREIGN = """
00000000 <tvmgen_default_fused_conv2d>:
   0:\tf8d0 3004 \tldr.w\tr3, [r0, #4]
   4:\tb100      \tcbz\tr0, 8 <tvmgen_default_fused_conv2d+0x8>
   6:\tbf08      \tit\teq
   8:\tfb90 f0f1 \tsdiveq\tr0, r0, r1
   c:\t6800      \tldr\tr0, [r0, #0]
   e:\t4770      \tbx\tlr
"""


def test_clean_disassembly_passes() -> None:
    assert list(armv6m_violations(CLEAN)) == []
    check_disassembly(CLEAN, "armv6-m", "clean")


@pytest.mark.parametrize("line, reason", [
    ("   0:\tf8d0 3004 \tldr.w\tr3, [r0, #4]", "32-bit"),
    ("   0:\tfb90 f0f1 \tsdiv\tr0, r0, r1", "32-bit"),
    ("   0:\te92d 4ff0 \tstmdb\tsp!, {r4, r5, r6, r7, r8, r9, sl, fp, lr}", "32-bit"),
    ("   0:\tee07 0a90 \tvmov\ts15, r0", "32-bit"),
    ("   0:\te850 3f00 \t<UNDEFINED> instruction: 0xe8503f00", "32-bit"),  # caught by its encoding
    ("   0:\tb100      \tcbz\tr0, 8 <f+0x8>", "compare and branch"),
    ("   0:\tb959      \tcbnz\tr1, 1a <f+0x1a>", "compare and branch"),
    ("   0:\tbf08      \tit\teq", "IT blocks"),
    ("   0:\tbf14      \tite\tne", "IT blocks"),
    ("   0:\tb671      \tcpsid\tf", "FAULTMASK"),
])
def test_each_armv7m_only_form_is_refused(line: str, reason: str) -> None:
    text = f"00000000 <f>:\n{line}\n"
    (v,) = list(armv6m_violations(text))
    assert v.function == "f" and v.address == 0 and reason in v.reason


def test_the_first_offender_is_named_with_its_function() -> None:
    found = list(armv6m_violations(CLEAN + FOREIGN))
    assert [v.instruction.split()[0] for v in found] == ["ldr.w", "cbz", "it", "sdiveq"]
    first = found[0]
    assert (first.function, first.address, first.instruction) == (
        "tvmgen_default_fused_conv2d", 0, "ldr.w r3, [r0, #4]")
    with pytest.raises(PlatformError) as err:
        check_disassembly(CLEAN + FOREIGN, "armv6-m", "qemu-cortex-m0: firmware firmware.elf")
    msg = str(err.value)
    assert "\n" not in msg
    assert msg.startswith("qemu-cortex-m0: firmware firmware.elf is not Armv6-M code: `ldr.w r3, [r0, #4]` at 0x0 "
                          "in tvmgen_default_fused_conv2d")
    assert msg.endswith("; 3 more")
    with pytest.raises(PlatformError, match="armv7-m"):
        check_disassembly(CLEAN, "armv7-m", "x")


def test_board_table_holds_the_m0_to_it() -> None:
    assert get_board("qemu-cortex-m0").isa_check == "armv6-m"
    assert get_board("qemu-cortex-m0").machine == get_board("qemu-cortex-m3").machine == "mps2-an385"
    assert "-mcpu=cortex-m0" in get_board("qemu-cortex-m0").cpu_flags
    assert [name for name, b in BOARDS.items() if b.isa_check] == ["qemu-cortex-m0"]


def hello(board: str, main_c: str | None = None) -> Path:
    """The ELF of the hello firmware (or of `main_c`) built for `board` (cached)."""
    source = main_c if main_c is not None else (APPS_DIR / "main_hello.c").read_text()
    return build_firmware(FirmwareSpec(get_board(board), {"main.c": source}), "hello") / "build" / "firmware.elf"


def test_real_images(capsys: pytest.CaptureFixture) -> None:
    # The M0 build (startup, UART, semihosting, newlib-nano and libgcc of the v6-m multilib) is Armv6-M; the
    # same sources built for the M3 are not, and the check says so.
    m0 = hello("qemu-cortex-m0")
    check_image(m0, "armv6-m", "qemu-cortex-m0")
    assert main([str(m0)]) == 0
    with pytest.raises(PlatformError, match=r"^qemu-cortex-m3: firmware firmware\.elf is not Armv6-M code: `"):
        check_image(hello("qemu-cortex-m3"), "armv6-m", "qemu-cortex-m3")
    assert main([str(hello("qemu-cortex-m3"))]) == 1
    assert "is not Armv6-M code" in capsys.readouterr().err


def test_a_firmware_with_one_armv7m_instruction_is_refused_when_built() -> None:
    # The compiler keeps C to Armv6-M; one Thumb-2 load smuggled in as raw bits is what the check is for.
    main_c = ("int main(void);\nint main(void) {\n  __asm__ volatile(\".inst.w 0xf8d03004\" ::: \"r3\", \"memory\");\n"
              "  return 0;\n}\n")
    with pytest.raises(PlatformError, match=r"is not Armv6-M code: `ldr\.w r3, \[r0, #4\]` at 0x[0-9a-f]+ in main "):
        hello("qemu-cortex-m0", main_c)
