"""The QEMU boards utvm targets: machine, core and the cross-compiler flags for each.

| platform         | QEMU machine | core       | float ABI                      |
|------------------|--------------|------------|--------------------------------|
| `qemu-cortex-m3` | `mps2-an385` | Cortex-M3  | soft (no FPU)                  |
| `qemu-cortex-m4` | `mps2-an386` | Cortex-M4F | hard, fpv4-sp-d16              |
| `qemu-cortex-m7` | `mps2-an500` | Cortex-M7  | hard, fpv5-d16 (double too)    |

All three MPS2 images share the memory map the template's `mps2.ld` assumes (4 MiB code at 0x0, 4 MiB RAM at
0x20000000), the CMSDK UART0 at 0x40004000 and a 25 MHz processor clock.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass

from utvm.errors import PlatformError

CROSS_PREFIX = "arm-none-eabi-"
QEMU_BINARY = "qemu-system-arm"
CPU_CLOCK_HZ = 25_000_000
# Under -icount shift=0 one instruction advances the virtual clock by 2**0 ns.
ICOUNT_SHIFT = 0
INSTRUCTIONS_PER_SECOND = 10**9 >> ICOUNT_SHIFT


@dataclass(frozen=True)
class Board:
    name: str
    machine: str
    cpu: str
    float_flags: tuple[str, ...]

    @property
    def cpu_flags(self) -> tuple[str, ...]:
        """Flags every object of a firmware for this board is compiled and linked with."""
        return (f"-mcpu={self.cpu}", "-mthumb", *self.float_flags)


BOARDS: dict[str, Board] = {
    b.name: b
    for b in (
        Board("qemu-cortex-m3", "mps2-an385", "cortex-m3", ("-mfloat-abi=soft",)),
        Board("qemu-cortex-m4", "mps2-an386", "cortex-m4", ("-mfloat-abi=hard", "-mfpu=fpv4-sp-d16")),
        Board("qemu-cortex-m7", "mps2-an500", "cortex-m7", ("-mfloat-abi=hard", "-mfpu=fpv5-d16")),
    )
}


def get_board(name: str) -> Board:
    try:
        return BOARDS[name]
    except KeyError:
        raise PlatformError(f"unknown QEMU board {name!r}; known boards: {', '.join(BOARDS)}") from None


def find_tool(name: str, package: str) -> str:
    """Absolute path of a host tool, or a PlatformError naming the Debian package that provides it."""
    path = shutil.which(name)
    if path is None:
        raise PlatformError(
            f"{name} not found on PATH; install the Debian package {package} (tools/bootstrap.sh does)"
        )
    return path


def cross_tool(tool: str) -> str:
    """`gcc`, `size`, `nm`, ... of the arm-none-eabi toolchain."""
    return find_tool(CROSS_PREFIX + tool, "gcc-arm-none-eabi")


def qemu_binary() -> str:
    return find_tool(QEMU_BINARY, "qemu-system-arm")
