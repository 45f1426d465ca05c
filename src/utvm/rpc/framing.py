"""The framing layer of the link (docs/architecture.md §5.1), sans-IO.

Wire format of one packet::

    FF FD | u32 length (LE) | payload (length bytes) | u16 CRC (LE)

Length, payload and CRC are escaped: a data byte FF travels as FF FF. Control sequences are FF followed by
FE (NOP, ignored; sent after a reset), FD (packet start: a partial packet in progress is dropped) or
anything else (an invalid escape: the packet in progress is dropped and counted). The first packet after a
framer reset is preceded by one raw FE. The CRC is CRC-16/CCITT-FALSE over every raw wire byte from FF FD
through the end of the escaped payload, NOP pairs inside the packet included.

This module never does I/O (the h11 model, docs/architecture.md §12.1): `Framer.send(payload) -> bytes` turns a payload
into wire bytes; `Unframer.receive_data(bytes)` takes wire bytes in and `Unframer.next_event()` hands out
frozen events: `PacketStart(length)`, then `PayloadChunk(data)` as soon as payload bytes arrive (the
receiver never buffers a whole packet to check it), then `PacketEnd(crc_ok)`; or `NEED_DATA` when it needs
more bytes. Every `PacketStart` is followed by exactly one `PacketEnd`; a packet dropped part-way (restart,
invalid escape) ends with `PacketEnd(crc_ok=False, reason=...)`. Bytes between packets are skipped.
"""

from __future__ import annotations

import binascii
import struct
from dataclasses import dataclass
from typing import Any

from utvm.errors import LocalProtocolError

__all__ = [
    "ESCAPE",
    "ESCAPE_NOP",
    "ESCAPE_PACKET_START",
    "MAX_LENGTH_FIELD",
    "NEED_DATA",
    "Event",
    "Framer",
    "FramingStats",
    "PacketEnd",
    "PacketStart",
    "PayloadChunk",
    "Sentinel",
    "Unframer",
    "encode_packet",
    "escape",
]

ESCAPE = 0xFF
ESCAPE_NOP = 0xFE
ESCAPE_PACKET_START = 0xFD
RESET_PREFIX = b"\xfe"
MAX_LENGTH_FIELD = 0xFFFFFFFF  # the u32 length field

_START = b"\xff\xfd"
_CRC_AFTER_START = binascii.crc_hqx(_START, 0xFFFF)


class Sentinel(type):
    """Metaclass of sentinels: each sentinel is a class that is an instance of itself, so a caller can
    dispatch on `type(event)` for events and sentinels alike (as h11 does)."""

    def __new__(mcs, name: str, bases: tuple[type, ...], namespace: dict[str, Any], **kwds: Any) -> Any:
        assert bases == (Sentinel,)
        v = super().__new__(mcs, name, bases, namespace, **kwds)
        v.__class__ = v  # type: ignore[misc]
        return v

    def __repr__(cls) -> str:
        return cls.__name__


class NEED_DATA(Sentinel, metaclass=Sentinel):
    """`next_event()` needs more bytes before it can produce another event."""


@dataclass(frozen=True, slots=True)
class PacketStart:
    """A packet header was received; `length` payload bytes follow."""

    length: int

    def __post_init__(self) -> None:
        if (
            isinstance(self.length, bool)
            or not isinstance(self.length, int)
            or not (0 <= self.length <= MAX_LENGTH_FIELD)
        ):
            raise LocalProtocolError(f"PacketStart.length must be an int in 0..{MAX_LENGTH_FIELD}, got {self.length!r}")


@dataclass(frozen=True, slots=True)
class PayloadChunk:
    """Some payload bytes of the current packet, in order, before the CRC verdict."""

    data: bytes

    def __post_init__(self) -> None:
        if not isinstance(self.data, bytes) or not self.data:
            raise LocalProtocolError(f"PayloadChunk.data must be non-empty bytes, got {self.data!r:.40}")


@dataclass(frozen=True, slots=True)
class PacketEnd:
    """The end of the current packet. `crc_ok` False means: discard what the chunks delivered; `reason`
    then says why (CRC mismatch, restarted by FF FD, invalid escape)."""

    crc_ok: bool
    reason: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.crc_ok, bool):
            raise LocalProtocolError(f"PacketEnd.crc_ok must be a bool, got {self.crc_ok!r}")
        if self.crc_ok == bool(self.reason):
            raise LocalProtocolError("PacketEnd carries a reason exactly when crc_ok is False")


Event = PacketStart | PayloadChunk | PacketEnd
_PACKET_OK = PacketEnd(True)  # events are immutable values: one instance serves every good packet


def escape(data: bytes | bytearray | memoryview) -> bytes:
    """Escape every FF data byte as FF FF."""
    return bytes(data).replace(b"\xff", b"\xff\xff")


def _unescape_general(raw: bytes) -> bytes:
    """Unescape a raw run made of whole FF FF / FF FE pairs and plain bytes (NOPs are removed)."""
    out = bytearray()
    i = 0
    while True:
        j = raw.find(b"\xff", i)
        if j < 0:
            out += raw[i:]
            return bytes(out)
        out += raw[i:j]
        if raw[j + 1] == ESCAPE:
            out.append(ESCAPE)
        i = j + 2


def encode_packet(payload: bytes | bytearray | memoryview, *more: bytes | bytearray | memoryview) -> bytes:
    """Wire bytes of one packet whose payload is `payload` followed by `more` (no reset prefix). The parts
    are escaped and checksummed one by one and joined once (no copy of the payload beforehand)."""
    if not more and type(payload) is bytes:  # the common case: one bytes payload
        length = len(payload)
        if length > MAX_LENGTH_FIELD:
            raise LocalProtocolError(f"packet payload of {length} bytes exceeds the u32 length field")
        header = _HEAD.pack(_START, length)
        if length >= 0xFF and b"\xff" in header[2:]:
            header = _START + header[2:].replace(b"\xff", b"\xff\xff")
        payload = payload.replace(b"\xff", b"\xff\xff")  # returns the same bytes object when there is no FF
        crc = binascii.crc_hqx(payload, binascii.crc_hqx(header, 0xFFFF))
        if crc & 0xFF == 0xFF or crc >= 0xFF00:
            return b"".join((header, payload, _U16.pack(crc).replace(b"\xff", b"\xff\xff")))
        return b"".join((header, payload, _U16.pack(crc)))
    parts = (payload, *more) if more else (payload,)
    if memoryview in map(type, parts):  # `in` and len() need a byte sequence, not any-format view
        parts = tuple(bytes(p) if type(p) is memoryview else p for p in parts)
    length = 0
    for part in parts:
        length += len(part)
    if length > MAX_LENGTH_FIELD:
        raise LocalProtocolError(f"packet payload of {length} bytes exceeds the u32 length field")
    header = _START + _U32.pack(length)
    if b"\xff" in header[2:]:
        header = _START + header[2:].replace(b"\xff", b"\xff\xff")
    crc = binascii.crc_hqx(header, 0xFFFF)
    out = [header]
    for part in parts:
        if type(part) is bytes or b"\xff" in part:  # bytes.replace copies only when there is an FF
            part = part.replace(b"\xff", b"\xff\xff")
        crc = binascii.crc_hqx(part, crc)
        out.append(part)
    tail = _U16.pack(crc)
    out.append(tail.replace(b"\xff", b"\xff\xff") if b"\xff" in tail else tail)
    return b"".join(out)


_U32 = struct.Struct("<I")
_U16 = struct.Struct("<H")
_HEAD = struct.Struct("<2sI")  # FF FD and the length field, unescaped


class Framer:
    """Turns payloads into wire bytes. After construction or `reset()` the next packet is preceded by one
    raw FE, so a receiver that was in the middle of an escape sequence resynchronises."""

    def __init__(self, max_packet_size: int = MAX_LENGTH_FIELD) -> None:
        self.max_packet_size = max_packet_size
        self._after_reset = True

    def reset(self) -> None:
        self._after_reset = True

    def send(self, payload: bytes | bytearray | memoryview, *more: bytes | bytearray | memoryview) -> bytes:
        """Wire bytes of one packet (payload = `payload` + `more`)."""
        size = len(payload) if type(payload) is not memoryview else payload.nbytes
        for part in more:
            size += len(part) if type(part) is not memoryview else part.nbytes
        if size > self.max_packet_size:
            raise LocalProtocolError(
                f"packet payload of {size} bytes exceeds the maximum packet size {self.max_packet_size}"
            )
        if self._after_reset:
            self._after_reset = False
            return RESET_PREFIX + encode_packet(payload, *more)
        return encode_packet(payload, *more)


@dataclass
class FramingStats:
    """What the unframer saw besides good packets (all counters only grow)."""

    packets_ok: int = 0
    crc_errors: int = 0
    invalid_escapes: int = 0
    restarts: int = 0  # FF FD inside a packet
    too_long: int = 0  # length field above max_packet_size
    nops: int = 0
    junk_bytes: int = 0  # bytes outside any packet (boot noise, the reset FE, dropped packet bodies)


def _length_field(buf: bytearray, i: int, n: int) -> tuple[int, int] | None:
    """(length, offset after the field) of the u32 length field at buf[i:], escaped FF FF bytes included;
    None if it is incomplete or holds anything but FF FF pairs (then the general path deals with it)."""
    if n - i >= 4 and buf.find(b"\xff", i, i + 4) < 0:
        return int.from_bytes(buf[i : i + 4], "little"), i + 4
    length = 0
    for k in range(4):
        if i >= n:
            return None
        b = buf[i]
        if b == ESCAPE:
            if i + 1 >= n or buf[i + 1] != ESCAPE:
                return None
            i += 1
        i += 1
        length |= b << (8 * k)
    return length, i


# Payloads from this size on are scanned for their FF FF pairs with numpy (bytes.count and bytes.replace
# with a two-byte pattern run at a few hundred MB/s; the CRC alone is slower still).
_LARGE = 1 << 14


def _ff_offsets(buf: bytearray, start: int, stop: int) -> Any:
    """Offsets (from `start`) of the FF bytes in buf[start:stop], as a numpy array."""
    import numpy as np

    a = np.frombuffer(buf, np.uint8, stop - start, start)
    idx = np.flatnonzero(a == ESCAPE)
    del a  # release the export of `buf` at once (a bytearray cannot grow while it is exported)
    return idx


def _pairs_ok(idx: Any) -> bool:
    """True if the sorted FF offsets `idx` (an even count) form adjacent FF FF pairs, in order."""
    return bool((idx[1::2] - idx[0::2] == 1).all())


def _large_span(buf: bytearray, start: int, length: int, n: int) -> tuple[int, Any] | None:
    """(raw end, offsets of the second FF of each pair) of a payload of `length` bytes at buf[start:]
    whose only escapes are FF FF pairs; None if it is not all in buf[:n - 2] or holds anything else."""
    import numpy as np

    idx = _ff_offsets(buf, start, n)
    end = length  # relative to start; grows by one per pair inside it
    while True:
        ffs = int(np.searchsorted(idx, end))
        grown = length + ((ffs + 1) >> 1)  # an FF cut off at the end is half a pair
        if grown == end:
            break
        end = grown
        if start + end + 2 > n:
            return None
    if ffs & 1 or not _pairs_ok(idx[:ffs]):
        return None
    return start + end, idx[1:ffs:2]


def _large_partial(buf: bytearray, start: int, length: int, n: int) -> bool | None:
    """True if buf[start:n] is the clean, incomplete beginning of a payload of `length` bytes (FF only in
    FF FF pairs, the last one possibly cut in half); None otherwise."""
    idx = _ff_offsets(buf, start, n)
    ffs = len(idx)
    if n - start - (ffs >> 1) >= length + 2:
        return None  # all there (whole_packet() refused it)
    if ffs & 1:
        if idx[-1] != n - 1 - start:
            return None
        idx = idx[:-1]
    return True if _pairs_ok(idx) else None


def _drop_bytes(data: bytes, offsets: Any) -> bytes:
    """`data` without the bytes at `offsets` (a numpy index array)."""
    import numpy as np

    return np.delete(np.frombuffer(data, np.uint8), offsets).tobytes()


_IDLE, _HEADER, _PAYLOAD, _CRC = range(4)
_MEMO_LIMIT = 64  # raw packets up to this size are remembered by whole_packet()
_STATE_NAMES = ("IDLE", "HEADER", "PAYLOAD", "CRC")


class Unframer:
    """Turns wire bytes into events. `max_packet_size` bounds the length field: longer packets are skipped
    (counted in `stats.too_long`) without a PacketStart, like any bytes outside a packet."""

    def __init__(self, max_packet_size: int = MAX_LENGTH_FIELD) -> None:
        if not 0 <= max_packet_size <= MAX_LENGTH_FIELD:
            raise LocalProtocolError(f"max_packet_size must be in 0..{MAX_LENGTH_FIELD}, got {max_packet_size}")
        self.max_packet_size = max_packet_size
        self.stats = FramingStats()
        self._buf = bytearray()
        self._pos = 0
        self._state = _IDLE
        self._started = False  # a PacketStart was emitted and its PacketEnd is still owed
        self._crc = 0
        self._acc = 0  # the length or CRC field being assembled
        self._nacc = 0
        self._remaining = 0  # payload bytes still to come
        # The last small packet whole_packet() took, raw, and its payload: the same bytes again (an ack, the
        # reply to a repeated call) are taken without unescaping or checking them again.
        self._memo_wire: bytes | None = None
        self._memo_payload = b""

    @property
    def state(self) -> str:
        return _STATE_NAMES[self._state]

    @property
    def in_packet(self) -> bool:
        return self._state != _IDLE

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        if self._pos:
            del self._buf[: self._pos]
            self._pos = 0
        self._buf += data

    def next_event(self) -> Event | type[NEED_DATA]:
        if self._pos >= len(self._buf):
            return NEED_DATA  # what every state answers to an empty buffer (IDLE counts no junk here)
        while True:
            state = self._state
            if state == _PAYLOAD:
                ev = self._payload()
            elif state == _IDLE:
                ev = self._idle()
            else:
                ev = self._field_byte(state)
            if ev is not None:
                return ev

    def whole_packet(self) -> bytes | None:
        """A fast path for consumers that want whole packets (the session layer): if the buffer starts
        with one complete packet whose only escapes are FF FF pairs (no NOPs or control sequences inside),
        whose length and CRC fields need no unescaping, and which passes its CRC, consume it and return its
        payload; otherwise consume nothing and return None (then use `next_event()`, which also reports
        every error). The result is exactly what the events would have delivered."""
        if self._state != _IDLE:
            return None
        buf, pos = self._buf, self._pos
        memo = self._memo_wire
        if memo is not None and buf.startswith(memo, pos) and len(self._memo_payload) <= self.max_packet_size:
            self._pos = pos + len(memo)
            self.stats.packets_ok += 1
            return self._memo_payload
        n = len(buf)
        junk = 0
        if n - pos >= 9 and buf[pos] == ESCAPE_NOP:  # the FE a framer sends after a reset: one junk byte
            pos += 1
            junk = 1
        if n - pos < 8 or buf[pos] != ESCAPE or buf[pos + 1] != ESCAPE_PACKET_START:
            return None
        header = _length_field(buf, pos + 2, n)
        if header is None:
            return None
        length, start = header
        if length > self.max_packet_size:
            return None
        end = start + length  # the raw end of the payload: one byte further for each FF FF pair
        pairs = 0
        seconds = None
        if end + 2 > n:
            return None
        if length >= _LARGE:
            span = _large_span(buf, start, length, n)
            if span is None:
                return None
            end, seconds = span
            pairs = len(seconds)
        elif buf.find(b"\xff", start, end) >= 0:
            ffs = buf.count(b"\xff", start, end)
            while True:  # grow the raw span until it holds `length` bytes once unescaped
                grown = start + length + ((ffs + 1) >> 1)  # an FF cut off at the end is half a pair
                if grown == end:
                    break
                if grown + 2 > n:
                    return None
                ffs += buf.count(b"\xff", end, grown)
                end = grown
            # Every FF must belong to an FF FF pair (an odd run holds a NOP, a restart or an invalid escape).
            pairs = ffs >> 1
            if ffs & 1 or buf.count(b"\xff\xff", start, end) != pairs:
                return None
        c0 = buf[end]
        after = end + 1
        if c0 == ESCAPE:  # an escaped CRC byte (FF FF)
            if buf[after] != ESCAPE:
                return None
            after += 1
        if after >= n:
            return None
        c1 = buf[after]
        after += 1
        if c1 == ESCAPE:
            if after >= n or buf[after] != ESCAPE:
                return None
            after += 1
        with memoryview(buf) as view:
            if binascii.crc_hqx(view[pos:end], 0xFFFF) != c0 | (c1 << 8):
                return None
            payload = bytes(view[start:end])
        self._pos = after
        self.stats.packets_ok += 1
        self.stats.junk_bytes += junk
        if pairs:
            payload = _drop_bytes(payload, seconds) if seconds is not None else payload.replace(b"\xff\xff", b"\xff")
        if after - pos <= _MEMO_LIMIT:
            self._memo_wire, self._memo_payload = bytes(buf[pos:after]), payload
        return payload

    def partial_packet(self, limit: int = 1 << 20) -> bool:
        """True if the buffer holds the clean beginning of one packet whose end has not arrived yet: an
        unescaped header (after at most the reset FE) with a length within `limit` and max_packet_size, and
        FF bytes only in FF FF pairs so far (the last one may be cut in half). A consumer of whole packets
        (the session layer) may then wait for more bytes and take the packet with `whole_packet()` rather
        than stream it through `next_event()`; anything else (a NOP, a restart, an invalid escape, a
        complete packet whole_packet() refused) gives False, and `next_event()` reports it as usual."""
        if self._state != _IDLE:
            return False
        buf, pos = self._buf, self._pos
        n = len(buf)
        if n - pos >= 1 and buf[pos] == ESCAPE_NOP:
            pos += 1
        if n - pos < 6 or buf[pos] != ESCAPE or buf[pos + 1] != ESCAPE_PACKET_START:
            return False
        header = _length_field(buf, pos + 2, n)
        if header is None:
            return False
        length, start = header
        if length > limit or length > self.max_packet_size:
            return False
        if length >= _LARGE:
            clean = _large_partial(buf, start, length, n)
            if clean is None:
                return False
            ffs = pairs = lone = 0  # checked
        else:
            ffs = buf.count(b"\xff", start, n)
            pairs = buf.count(b"\xff\xff", start, n)
            if n - start - pairs >= length + 2:
                return False  # all there (whole_packet() refused it)
            lone = ffs - 2 * pairs
        if lone:
            if lone > 1 or buf[n - 1] != ESCAPE:
                return False
            run = 1  # the trailing run of FFs must be the odd one (a pair cut in half)
            while n - run - 1 >= start and buf[n - run - 1] == ESCAPE:
                run += 1
            if not run & 1:
                return False
        if pos != self._pos:  # the reset FE goes as junk, as next_event() would count it
            self.stats.junk_bytes += 1
            self._pos = pos
        return True

    def events(self) -> list[Event]:
        """Every event available now (a convenience over `next_event()`)."""
        out: list[Event] = []
        while (ev := self.next_event()) is not NEED_DATA:
            out.append(ev)  # type: ignore[arg-type]
        return out

    # --- states -------------------------------------------------------------------------------------------
    def _begin(self) -> None:
        self._state = _HEADER
        self._crc = _CRC_AFTER_START
        self._acc = 0
        self._nacc = 0

    def _abort(self, reason: str) -> PacketEnd | None:
        started, self._started = self._started, False
        if started:
            return PacketEnd(False, reason)
        return None

    def _idle(self) -> type[NEED_DATA] | None:
        buf, pos = self._buf, self._pos
        n = len(buf)
        i = buf.find(b"\xff", pos)
        if i < 0:
            self.stats.junk_bytes += n - pos
            self._pos = n
            return NEED_DATA
        self.stats.junk_bytes += i - pos
        if i + 1 >= n:
            self._pos = i
            return NEED_DATA
        b = buf[i + 1]
        if b == ESCAPE_PACKET_START:
            if i + 6 <= n and buf.find(b"\xff", i + 2, i + 6) < 0:  # fast path: an unescaped length field
                self._pos = i + 6
                self._state = _HEADER
                self._crc = binascii.crc_hqx(buf[i + 2 : i + 6], _CRC_AFTER_START)
                return self._length_known(int.from_bytes(buf[i + 2 : i + 6], "little"))
            self._pos = i + 2
            self._begin()
        elif b == ESCAPE_NOP:
            self._pos = i + 2
            self.stats.nops += 1
        elif b == ESCAPE:
            # Out of sync: this FF may be the second half of a pair or the start of FF FD; look again.
            self._pos = i + 1
            self.stats.junk_bytes += 1
        else:
            self._pos = i + 2
            self.stats.junk_bytes += 2
        return None

    def _field_byte(self, state: int) -> Event | type[NEED_DATA] | None:
        """One logical byte of the length (HEADER) or CRC field."""
        buf, pos = self._buf, self._pos
        n = len(buf)
        if pos >= n:
            return NEED_DATA
        b = buf[pos]
        if state == _CRC and not self._nacc and pos + 2 <= n and b != ESCAPE and buf[pos + 1] != ESCAPE:
            self._pos = pos + 2  # fast path: an unescaped CRC field
            return self._crc_known(b | (buf[pos + 1] << 8))
        raw = 1
        if b == ESCAPE:
            if pos + 1 >= n:
                return NEED_DATA
            b2 = buf[pos + 1]
            if b2 == ESCAPE_PACKET_START:
                return self._restart(pos + 2)
            if b2 == ESCAPE_NOP:
                self.stats.nops += 1
                if state == _HEADER:
                    self._crc = binascii.crc_hqx(b"\xff\xfe", self._crc)
                self._pos = pos + 2
                return None
            if b2 != ESCAPE:
                return self._invalid_escape(pos + 2, b2)
            raw = 2
        if state == _HEADER:
            self._crc = binascii.crc_hqx(buf[pos : pos + raw], self._crc)
        self._pos = pos + raw
        self._acc |= b << (8 * self._nacc)
        self._nacc += 1
        if state == _HEADER and self._nacc == 4:
            return self._length_known(self._acc)
        if state == _CRC and self._nacc == 2:
            return self._crc_known(self._acc)
        return None

    def _length_known(self, length: int) -> PacketStart | None:
        self._acc = self._nacc = 0
        if length > self.max_packet_size:
            self.stats.too_long += 1
            self._state = _IDLE
            return None
        self._remaining = length
        self._state = _PAYLOAD if length else _CRC
        self._started = True
        return PacketStart(length)

    def _crc_known(self, received: int) -> PacketEnd:
        self._state = _IDLE
        self._started = False
        self._acc = self._nacc = 0
        if received == self._crc:
            self.stats.packets_ok += 1
            return _PACKET_OK
        self.stats.crc_errors += 1
        return PacketEnd(False, f"CRC mismatch: packet carries 0x{received:04X}, bytes give 0x{self._crc:04X}")

    def _restart(self, new_pos: int) -> PacketEnd | None:
        self.stats.restarts += 1
        self._pos = new_pos
        ev = self._abort("packet dropped: a new packet started (FF FD) inside it")
        self._begin()
        return ev

    def _invalid_escape(self, new_pos: int, second: int) -> PacketEnd | None:
        self.stats.invalid_escapes += 1
        self._pos = new_pos
        self._state = _IDLE
        return self._abort(f"packet dropped: invalid escape FF {second:02X}")

    def _payload(self) -> Event | type[NEED_DATA] | None:
        buf, pos = self._buf, self._pos
        n = len(buf)
        start = pos
        remaining = self._remaining
        nop_seen = False
        while remaining and pos < n:
            end = pos + remaining
            if end > n:
                end = n
            i = buf.find(b"\xff", pos, end)
            if i < 0:
                remaining -= end - pos
                pos = end
                break
            remaining -= i - pos
            pos = i
            if pos + 1 >= n:
                break  # the escape's second byte has not arrived
            b2 = buf[pos + 1]
            if b2 == ESCAPE:
                remaining -= 1
                pos += 2
            elif b2 == ESCAPE_NOP:
                self.stats.nops += 1
                nop_seen = True
                pos += 2
            elif pos > start:
                break  # hand out the good bytes first; the control sequence is handled next call
            elif b2 == ESCAPE_PACKET_START:
                return self._restart(pos + 2)
            else:
                return self._invalid_escape(pos + 2, b2)
        if pos == start:
            return NEED_DATA
        raw = bytes(buf[start:pos])
        self._crc = binascii.crc_hqx(raw, self._crc)
        self._pos = pos
        self._remaining = remaining
        if not remaining:
            self._state = _CRC
        data = _unescape_general(raw) if nop_seen else raw.replace(b"\xff\xff", b"\xff")
        return PayloadChunk(data) if data else None
