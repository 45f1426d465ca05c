"""QEMU Cortex-M platforms: utvm firmware on qemu-system-arm's MPS2 boards (docs/architecture.md §9).

`qemu-cortex-m3` (mps2-an385), `qemu-cortex-m4` (mps2-an386, hard float), `qemu-cortex-m7` (mps2-an500),
`qemu-cortex-m33` (mps2-an505, run Secure), `qemu-cortex-m55` (mps3-an547, run Secure, MVE) and
`qemu-cortex-m0` (Armv6-M code on mps2-an385's Cortex-M3).

- `boards`: the board table (machine, core, memory map, UART0, clock, compiler flags) and toolchain lookup.
- `image_check`: proof that an image stays within its board's instruction set (Armv6-M for `qemu-cortex-m0`).
- `project`: self-contained firmware projects from `template/` (startup + vector table, linker script,
  CMSDK UART0, SysTick, semihosting, TVMPlatform hooks, Makefile), built with make and cached.
- `runner`: QEMU's command line and `QemuTransport`, the binary-clean byte link over UART0.
- `platform`: the RPC evaluation firmware as a utvm platform (`build`, `start` -> `utvm.rpc.Session`).
- `deploy`: standalone firmware (`utvm deploy`): main.c, sample inputs, reading what it prints.
- `footprint`: flash/RAM by category from the linker map, worst-case stack from the call graph (`utvm size`).
"""

from __future__ import annotations

from utvm.platform.qemu.boards import BOARDS, Board, get_board

__all__ = ["BOARDS", "Board", "get_board"]
