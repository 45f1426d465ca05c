"""The QEMU boards utvm targets: machine, core, memory map and the cross-compiler flags for each.

| platform          | QEMU machine  | core        | float ABI                   | code / RAM / UART0                  |
|-------------------|---------------|-------------|-----------------------------|-------------------------------------|
| `qemu-cortex-m0`  | `mps2-an385`  | Cortex-M3 * | soft (no FPU)               | 0x0 / 0x20000000 / 0x40004000       |
| `qemu-cortex-m3`  | `mps2-an385`  | Cortex-M3   | soft (no FPU)               | 0x0 / 0x20000000 / 0x40004000       |
| `qemu-cortex-m4`  | `mps2-an386`  | Cortex-M4F  | hard, fpv4-sp-d16           | 0x0 / 0x20000000 / 0x40004000       |
| `qemu-cortex-m7`  | `mps2-an500`  | Cortex-M7   | hard, fpv5-d16 (double too) | 0x0 / 0x20000000 / 0x40004000       |
| `qemu-cortex-m33` | `mps2-an505`  | Cortex-M33  | hard, fpv5-sp-d16           | 0x10000000 / 0x38000000 / 0x50200000 |
| `qemu-cortex-m55` | `mps3-an547`  | Cortex-M55  | hard, the core's FPU (+MVE) | 0x38000000 / 0x31000000 / 0x59303000 |

Every image has 4 MiB of code memory and 4 MiB of RAM (the template's `mps2.ld`, placed by `flash_origin`
and `ram_origin`), the CMSDK APB UART0 as the link and SysTick on the processor clock as the timer.

- The AN385/AN386/AN500 images (QEMU's hw/arm/mps2.c): SSRAM1 at 0x0, SSRAM2/3 at 0x20000000, UART0 at
  0x40004000 whose receive interrupt is external interrupt 0, a 25 MHz clock.
- The AN505 image (hw/arm/mps2-tz.c: an Armv8-M IoT Kit subsystem around a Cortex-M33 with the DSP extension
  and a single-precision FPU) boots the core in Secure state with its Secure vector table at 0x10000000
  (INITSVTOR0). The firmware runs Secure throughout, so it uses the Secure aliases (address bit 28 set) of
  everything: SSRAM1 (4 MiB) at 0x10000000, SSRAM2+3 (2 + 2 MiB, contiguous) at 0x38000000, UART0 at
  0x50200000. The memory protection controllers reset with every block Secure and the peripheral
  protection controllers with every port Secure, so Secure accesses pass and nothing has to be configured.
  UART0's receive interrupt is the subsystem's expansion interrupt 0, i.e. NVIC interrupt 32; the clock
  is 20 MHz, so one SysTick tick is 50 instructions under `-icount shift=0` (40 on the 25 MHz boards).
- The AN547 image (hw/arm/mps2-tz.c: the Corstone SSE-300 subsystem around a Cortex-M55 with the DSP
  extension, MVE with integer and float lanes and a double-precision FPU) also boots Secure with the SAU
  off, and the firmware again uses the Secure aliases. Its memory under QEMU 7.2 (the monitor's
  `info mtree`): ITCM 512 KiB at 0x10000000, FPGA SRAM 2 MiB at 0x11000000, DTCM 512 KiB at 0x30000000,
  the SSE-300's SRAM 4 MiB (two 2 MiB banks, contiguous) at 0x31000000, QSPI flash 8 MiB (ROM) at
  0x38000000, DDR at 0x60000000. The core reads its vector table at reset from the ITCM (INITSVTOR0 =
  0x10000000), which is too small for the code and weights of a big model and contiguous with nothing: so
  the code memory is the QSPI flash and RAM the SSE-300 SRAM, and the ITCM holds only a boot table
  (`boot_origin`: the initial stack pointer and the reset handler, startup.c), whose reset handler points
  VTOR at the full table. UART0 is at 0x59303000 (Secure alias of 0x49303000); its receive interrupt is the
  expansion interrupt 1, NVIC 33 (43 is UART0's combined interrupt); the clock is 32 MHz, so a SysTick tick
  is 31.25 instructions. `-mcpu=cortex-m55 -mfloat-abi=hard` with no -mfpu: GCC's default FPU for the core,
  which carries MVE (`__ARM_FEATURE_MVE` 3); newlib and libgcc come from the `thumb/v8-m.main+dp/hard`
  multilib (an explicit `-mfpu=fp-armv8` would pick `thumb/v8.1-m.main+mve/hard`; both are the same ABI).
- * `qemu-cortex-m0`: QEMU has no Cortex-M0 machine. Everything in the image (generated model code, the C
  runtime, startup, newlib-nano and libgcc from the Armv6-M multilib) is compiled for `-mcpu=cortex-m0` and
  run on the AN385's Cortex-M3, which executes Armv6-M code (a subset of Armv7-M) unchanged. The M3 would
  also run an Armv7-M-only instruction without complaint, so every image built for this board is
  disassembled and refused if one slipped in (`image_check.check_image`).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass

from utvm.errors import PlatformError

CROSS_PREFIX = "arm-none-eabi-"
QEMU_BINARY = "qemu-system-arm"
#: The processor clock of the AN385/AN386/AN500 images (the AN505's is 20 MHz, the AN547's 32 MHz: their Boards
#: say so).
CPU_CLOCK_HZ = 25_000_000
#: UART0 of the AN385/AN386/AN500 images.
MPS2_UART0_BASE = 0x40004000
# Under -icount shift=0 one instruction advances the virtual clock by 2**0 ns.
ICOUNT_SHIFT = 0
INSTRUCTIONS_PER_SECOND = 10**9 >> ICOUNT_SHIFT


@dataclass(frozen=True)
class Board:
    name: str
    machine: str
    cpu: str
    float_flags: tuple[str, ...]
    #: Where the image's 4 MiB of code (and its vector table) and its 4 MiB of RAM start (mps2.ld).
    flash_origin: int = 0x00000000
    ram_origin: int = 0x20000000
    #: CMSDK APB UART0: its base address and its receive interrupt (an NVIC external interrupt number).
    uart0_base: int = MPS2_UART0_BASE
    uart0_rx_irq: int = 0
    #: The processor clock, which SysTick counts (CLKSOURCE = processor clock).
    clock_hz: int = CPU_CLOCK_HZ
    #: Where the core reads its vector table at reset when that is not the start of the code memory (the
    #: AN547 boots from its ITCM): mps2.ld then puts a boot table there (startup.c's utvm_boot_vectors:
    #: the initial stack pointer and the reset handler) and the reset handler points VTOR at the full
    #: table, which starts the code memory as on every board. None: the code memory is where it boots.
    boot_origin: int | None = None
    #: An instruction set the linked image must stay within, proven on its disassembly after every build
    #: (`utvm.platform.qemu.image_check.check_image`): "armv6-m", or None for no check.
    isa_check: str | None = None
    #: The core's timing model in QEMU's cycles plugin (utvm.platform.qemu.timing: "m4", "m7", "m33", "m55"),
    #: whose estimated cycles are reported beside instructions; None: instructions only.
    timing_model: str | None = None

    @property
    def cpu_flags(self) -> tuple[str, ...]:
        """Flags every object of a firmware for this board is compiled and linked with."""
        return (f"-mcpu={self.cpu}", "-mthumb", *self.float_flags)

    @property
    def c_defines(self) -> tuple[str, ...]:
        """Preprocessor definitions of the board support where this board differs from the defaults of
        template/board/utvm_mps2.h (the AN385's UART0 and clock)."""
        out = []
        if self.uart0_base != MPS2_UART0_BASE:
            out.append(f"UTVM_UART0_BASE={self.uart0_base:#010x}u")
        if self.uart0_rx_irq != 0:
            out.append(f"UTVM_UART0_RX_IRQ={self.uart0_rx_irq}u")
        if self.clock_hz != CPU_CLOCK_HZ:
            out.append(f"UTVM_CPU_CLOCK_HZ={self.clock_hz}u")
        if self.boot_origin is not None:
            out.append("UTVM_BOOT_VECTORS=1")
        return tuple(out)

    @property
    def instructions_per_tick(self) -> float:
        """Instructions per SysTick tick under -icount (one instruction per nanosecond): 40 at 25 MHz, 50 at
        20 MHz, 31.25 on the AN547's 32 MHz."""
        return INSTRUCTIONS_PER_SECOND / self.clock_hz


BOARDS: dict[str, Board] = {
    b.name: b
    for b in (
        Board("qemu-cortex-m0", "mps2-an385", "cortex-m0", ("-mfloat-abi=soft",), isa_check="armv6-m"),
        Board("qemu-cortex-m3", "mps2-an385", "cortex-m3", ("-mfloat-abi=soft",)),
        Board("qemu-cortex-m4", "mps2-an386", "cortex-m4", ("-mfloat-abi=hard", "-mfpu=fpv4-sp-d16"),
              timing_model="m4"),
        Board("qemu-cortex-m7", "mps2-an500", "cortex-m7", ("-mfloat-abi=hard", "-mfpu=fpv5-d16"), timing_model="m7"),
        Board("qemu-cortex-m33", "mps2-an505", "cortex-m33", ("-mfloat-abi=hard", "-mfpu=fpv5-sp-d16"),
              flash_origin=0x10000000, ram_origin=0x38000000, uart0_base=0x50200000, uart0_rx_irq=32,
              clock_hz=20_000_000, timing_model="m33"),
        Board("qemu-cortex-m55", "mps3-an547", "cortex-m55", ("-mfloat-abi=hard",),
              flash_origin=0x38000000, ram_origin=0x31000000, boot_origin=0x10000000, uart0_base=0x59303000,
              uart0_rx_irq=33, clock_hz=32_000_000, timing_model="m55"),
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
