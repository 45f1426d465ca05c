"""CRC-16/CCITT-FALSE against the shared vectors and its defining parameters."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from utvm.rpc.crc import CRC16_INIT, crc16


def _bitwise_crc(data: bytes) -> int:
    """The textbook definition: poly 0x1021, init 0xFFFF, MSB first, no reflection, no final XOR."""
    crc = 0xFFFF
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
            crc &= 0xFFFF
    return crc


def test_vectors(framing_vectors):
    for v in framing_vectors["crc16"]:
        assert crc16(bytes.fromhex(v["data"])) == v["crc"], v


def test_check_value():
    assert crc16(b"123456789") == 0x29B1  # the catalogue check value of CRC-16/CCITT-FALSE
    assert CRC16_INIT == 0xFFFF


@given(st.binary(max_size=300), st.integers(0, 300))
def test_matches_definition_and_is_incremental(data, cut):
    assert crc16(data) == _bitwise_crc(data)
    assert crc16(data[cut:], crc16(data[:cut])) == crc16(data)
