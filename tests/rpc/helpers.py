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


class Probe:
    """A transport wrapper for the link tests (a `utvm.rpc.transport.Transport` by duck typing): passes bytes
    through to `inner`, keeps what the host wrote in `written`, records `abort()`, and raises
    KeyboardInterrupt (as a Ctrl-C would) in the `n`-th read or write after `interrupt(op, n)`; with
    op="write-partial" half of that write reaches the device first. `interrupted_at`: len(written) then."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.pipeline_depth = getattr(inner, "pipeline_depth", 1)
        self.written = bytearray()
        self.aborted = False
        self.closed = False
        self._interrupt: tuple[str, int] | None = None
        self.interrupted_at: int | None = None

    def interrupt(self, op: str, n: int = 1) -> None:
        assert op in ("read", "write", "write-partial") and n >= 1
        self._interrupt = (op, n)

    def _due(self, op: str) -> bool:
        if self._interrupt is None or not self._interrupt[0].startswith(op):
            return False
        kind, n = self._interrupt
        self._interrupt = None if n == 1 else (kind, n - 1)
        return n == 1

    def write(self, data: Any, timeout: float | None = None) -> None:
        partial = self._interrupt is not None and self._interrupt[0] == "write-partial"
        if self._due("write"):
            if partial:
                half = bytes(data)[: len(data) // 2]
                self.written += half
                self.inner.write(half, timeout)
            self.interrupted_at = len(self.written)
            raise KeyboardInterrupt
        self.written += data
        self.inner.write(data, timeout)

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        if self._due("read"):
            self.interrupted_at = len(self.written)
            raise KeyboardInterrupt
        return self.inner.read(max_bytes, timeout)

    def close(self) -> None:
        self.closed = True
        self.inner.close()

    def abort(self) -> None:
        self.aborted = self.closed = True
        abort = getattr(self.inner, "abort", None)
        (abort or self.inner.close)()

    def describe(self) -> str:
        describe = getattr(self.inner, "describe", None)
        return describe() if describe else type(self.inner).__name__

    def __getattr__(self, name: str) -> Any:  # proc, kill(), device, release(), ... of the inner transport
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)


def session_messages(wire: bytes) -> list[str]:
    """What the host wrote, one name per session message: TERMINATE, START_INIT, or the RPC request's kind
    (e.g. CallFunc, Shutdown, GET_GLOBAL_FUNC, DEV_FREE_DATA, FREE_HANDLE)."""
    from utvm.rpc import protocol as P
    from utvm.rpc.session import MessageType

    out = []
    for payload, ok in payloads([wire]):
        if not ok or len(payload) < 3:
            out.append("(corrupt)")
        elif payload[2] != MessageType.NORMAL:
            out.append(MessageType(payload[2]).name)
        else:
            req = P.decode_request(payload[3:])
            out.append(req.code.name if isinstance(req, P.Syscall) else type(req).__name__)
    return out
