"""Proving that a firmware image stays within an instruction set: the guard of the `qemu-cortex-m0` board.

QEMU has no Cortex-M0 machine, so `qemu-cortex-m0` runs an image compiled entirely for `-mcpu=cortex-m0` on
the AN385's Cortex-M3. Armv6-M's instructions are a subset of Armv7-M's, so the image runs unchanged; but the
M3 would just as happily run an Armv7-M-only instruction (a Thumb-2 `ldr.w`, an `sdiv`, an IT block, a
`cbz`) that slipped in through inline assembly, a wrong library or a wrong flag, and a result computed with
one would prove nothing about a Cortex-M0. So every image built for the board is disassembled
(`arm-none-eabi-objdump -d`) and refused at the first instruction Armv6-M does not have (Armv6-M
Architecture Reference Manual, chapter A5, "The Thumb Instruction Set Encoding"):

- 32-bit instructions: only BL, MSR, MRS, DMB, DSB and ISB. Anything else 32-bit (every Thumb-2 data
  processing or load/store form, `.w` encodings, LDM/STM with writeback variants, SDIV/UDIV, long
  multiplies, coprocessor and floating-point instructions) is Armv7-M or later.
- 16-bit instructions: Armv7-M's 16-bit encodings are Armv6-M's plus CBZ, CBNZ and IT (the hints NOP, YIELD,
  WFE, WFI and SEV are in both), and CPS on FAULTMASK (`cpsid f`/`cpsie f`: Armv6-M has PRIMASK only).

A 32-bit instruction is recognised by its encoding (the top five bits of its first halfword are 0b11101,
0b11110 or 0b11111), not by the name objdump gives it, so an instruction the disassembler cannot name is
caught too. Data is not read as code: objdump prints constant objects (the vector table, weights) as bytes
and literal pools as `.word` (the ELF's mapping symbols say where they are).
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from utvm.errors import PlatformError
from utvm.platform.qemu.boards import cross_tool

#: The only 32-bit Thumb instructions of Armv6-M (Armv6-M ARM, A5.3).
ARMV6M_32BIT = frozenset({"bl", "msr", "mrs", "dmb", "dsb", "isb"})
#: 16-bit Thumb instructions of Armv7-M that Armv6-M lacks (IT's forms are matched by _IT).
ARMV7M_ONLY_16BIT = frozenset({"cbz", "cbnz"})
#: The instruction sets a board may be held to (Board.isa_check) -> their name in messages.
ISAS = {"armv6-m": "Armv6-M"}

_FUNCTION = re.compile(r"^([0-9a-f]+) <(.+)>:$")
# "  1c4:\tf8d0 3004 \tldr.w\tr3, [r0, #4]": address, the halfwords of the encoding, mnemonic, operands. Data
# (".word" lines, byte dumps of objects) has other shapes and does not match, or has a "." mnemonic.
_INSTRUCTION = re.compile(r"^\s*([0-9a-f]+):\t([0-9a-f]{4}(?: [0-9a-f]{4})?)\s*\t(\S+)[ \t]*(.*)$")
_IT = re.compile(r"^it[te]{0,3}$")


@dataclass(frozen=True)
class Violation:
    """One instruction outside the instruction set: where it is and why it is refused."""

    function: str
    address: int
    instruction: str  # as objdump prints it: "ldr.w r3, [r0, #4]"
    reason: str

    def describe(self) -> str:
        return f"`{self.instruction}` at {self.address:#x} in {self.function} ({self.reason})"


def _is_32bit(halfwords: list[str]) -> bool:
    return len(halfwords) == 2 and (int(halfwords[0], 16) >> 11) in (0b11101, 0b11110, 0b11111)


def armv6m_violations(disassembly: str) -> Iterator[Violation]:
    """Every instruction of `disassembly` (the text of `arm-none-eabi-objdump -d`, raw encodings shown) that
    Armv6-M does not have, in address order of the listing."""
    function = "?"
    for line in disassembly.splitlines():
        m = _FUNCTION.match(line)
        if m:
            function = m[2]
            continue
        m = _INSTRUCTION.match(line)
        if m is None or m[3].startswith("."):
            continue
        address, halfwords, mnemonic, operands = int(m[1], 16), m[2].split(), m[3].lower(), m[4]
        operands = operands.split("@", 1)[0].strip()  # objdump's comment ("@ 0x334", "@ (mov r8, r8)")
        text = f"{mnemonic} {operands}".strip()
        base = mnemonic.split(".", 1)[0]
        reason = None
        if _is_32bit(halfwords):
            if base not in ARMV6M_32BIT:
                reason = "a 32-bit instruction; Armv6-M's are only BL, MSR, MRS, DMB, DSB and ISB"
        elif base in ARMV7M_ONLY_16BIT:
            reason = "compare and branch on zero is Armv7-M only"
        elif _IT.match(base):
            reason = "IT blocks are Armv7-M only"
        elif base in ("cpsid", "cpsie") and "f" in operands.lower():
            reason = "FAULTMASK is Armv7-M only"
        if reason is not None:
            yield Violation(function, address, text, reason)


def disassemble(elf: Path) -> str:
    """`arm-none-eabi-objdump -d` of the ELF (encodings shown)."""
    try:
        out = subprocess.run([cross_tool("objdump"), "-d", str(elf)], capture_output=True, text=True, check=False,
                             timeout=300)
    except subprocess.TimeoutExpired:
        raise PlatformError(f"arm-none-eabi-objdump -d {elf} did not finish within 300 s") from None
    if out.returncode != 0:
        tail = (out.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise PlatformError(f"arm-none-eabi-objdump -d {elf} failed: {tail}")
    return out.stdout


def check_disassembly(disassembly: str, isa: str, what: str) -> None:
    """PlatformError naming the first instruction of `disassembly` outside `isa` (and how many there are)."""
    if isa not in ISAS:
        raise PlatformError(f"{what}: no instruction-set check for {isa!r}; known: {', '.join(ISAS)}")
    found = list(armv6m_violations(disassembly))
    if found:
        more = f"; {len(found) - 1} more" if len(found) > 1 else ""
        raise PlatformError(f"{what} is not {ISAS[isa]} code: {found[0].describe()}{more}")


def check_image(elf: Path | str, isa: str, board: str | None = None) -> None:
    """Refuse the linked image `elf` (of `board`, named in the message) unless every instruction in it is one
    `isa` has: PlatformError naming the first that is not, its address and its function."""
    elf = Path(elf)
    what = f"{board}: firmware {elf.name}" if board else str(elf)
    check_disassembly(disassemble(elf), isa, what)


def main(argv: list[str] | None = None) -> int:
    """`python -m utvm.platform.qemu.image_check FIRMWARE.elf [ISA]`: status 0 when every instruction of the image is
    one ISA (default armv6-m) has, else 1 and one line naming the first that is not."""
    import sys

    args = sys.argv[1:] if argv is None else argv
    if len(args) not in (1, 2) or (len(args) == 2 and args[1] not in ISAS):
        print(f"usage: python -m utvm.platform.qemu.image_check FIRMWARE.elf [{'|'.join(ISAS)}]", file=sys.stderr)
        return 2
    isa = args[1] if len(args) == 2 else "armv6-m"
    try:
        check_image(args[0], isa)
    except PlatformError as exc:
        print(exc, file=sys.stderr)
        return 1
    print(f"{args[0]}: every instruction is {ISAS[isa]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
