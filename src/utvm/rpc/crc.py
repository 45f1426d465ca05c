"""CRC-16/CCITT-FALSE, the checksum of the framing layer (docs/architecture.md §5.1).

Polynomial 0x1021, initial value 0xFFFF, not reflected, no final XOR: exactly `binascii.crc_hqx` seeded
with 0xFFFF, which runs in C. The C side (`crt/src/rpc_common/crc16.c`) computes the same function; both
are checked against `tests/vectors/framing.json`. Sans-IO: no I/O, no state beyond the running value.
"""

from __future__ import annotations

import binascii

__all__ = ["CRC16_INIT", "crc16"]

CRC16_INIT = 0xFFFF


def crc16(data: bytes | bytearray | memoryview, crc: int = CRC16_INIT) -> int:
    """CRC-16/CCITT-FALSE of `data`, continuing from `crc` (so it can be computed piecewise)."""
    return binascii.crc_hqx(data, crc)
