"""The `serial-board` platform: utvm's RPC evaluation firmware on a real Cortex-M board over a serial port.

- `config`: board.toml (board, build, flash and link settings) and which one is in use.
- `platform`: `SerialBoardPlatform` (build, flash, connect, start) and its pyserial transport.
- `template/`: `utvm_serial_board.h`, the six functions a board's UART driver implements, and
  `serial_glue.c`, which adapts them to the QEMU firmware's board layer (main_rpc.c, platform.c, timer.c).
"""

from __future__ import annotations

from utvm.platform.serial_board.config import BoardConfig, load_board_config, use_board_config

__all__ = ["BoardConfig", "load_board_config", "use_board_config"]
