"""Helpers shared by the link tests: h11's tr() for byte streams, and collectors of sans-IO events."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from utvm.rpc.framing import NEED_DATA, PacketEnd, PacketStart, PayloadChunk, Unframer

TRAILING = b"\xff\xfd\x07\x00"  # the start of a next packet: must not disturb what precedes it


def splits(data: bytes) -> Iterator[tuple[str, list[bytes]]]:
    """The ways tr() feeds a stream: whole, one byte at a time, and in uneven pieces."""
    yield "whole", [data]
    yield "bytewise", [data[i : i + 1] for i in range(len(data))]
    yield "uneven", [data[i : i + 3] for i in range(0, len(data), 3)]


def tr(feed: Callable[[list[bytes]], Any], data: bytes, expected: Any) -> None:
    """Run `feed(chunks)` with `data` split three ways and with trailing bytes; each must give `expected`."""
    for how, chunks in splits(data):
        got = feed(chunks)
        assert got == expected, f"fed {how}: {got!r} != {expected!r}"
    got = feed([data + TRAILING])
    assert got == expected, f"fed with trailing bytes: {got!r} != {expected!r}"


def unframe(chunks: list[bytes], max_packet_size: int = 0xFFFFFFFF) -> tuple[list[tuple[bytes, bool]], Unframer]:
    """Packets ([payload, crc_ok]) the unframer produces from `chunks`, checking the event grammar:
    PacketStart, PayloadChunk*, PacketEnd; the chunks add up to at most the announced length."""
    u = Unframer(max_packet_size)
    packets: list[tuple[bytes, bool]] = []
    current: bytearray | None = None
    length = 0
    for chunk in chunks:
        u.receive_data(chunk)
        while (ev := u.next_event()) is not NEED_DATA:
            if type(ev) is PacketStart:
                assert current is None, "PacketStart inside a packet"
                current, length = bytearray(), ev.length
            elif type(ev) is PayloadChunk:
                assert current is not None, "PayloadChunk outside a packet"
                current += ev.data
                assert len(current) <= length, "more payload than the length field announced"
            else:
                assert type(ev) is PacketEnd
                assert current is not None, "PacketEnd without PacketStart"
                if ev.crc_ok:
                    assert len(current) == length
                packets.append((bytes(current), ev.crc_ok))
                current = None
    return packets, u


def payloads(chunks: list[bytes], max_packet_size: int = 0xFFFFFFFF) -> list[tuple[bytes, bool]]:
    return unframe(chunks, max_packet_size)[0]
