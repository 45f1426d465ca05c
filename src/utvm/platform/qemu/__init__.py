"""QEMU Cortex-M platforms: utvm firmware on qemu-system-arm's MPS2 boards (DESIGN.md §9).

`qemu-cortex-m3` (mps2-an385), `qemu-cortex-m4` (mps2-an386, hard float), `qemu-cortex-m7` (mps2-an500).
- `boards`: the board table and toolchain lookup.
- `project`: generating and building self-contained firmware projects (template/).
- `runner`: running firmware in QEMU with UART0 as a binary-clean byte link.
"""

from __future__ import annotations

from utvm.platform.qemu.boards import BOARDS, Board, get_board

__all__ = ["BOARDS", "Board", "get_board"]
