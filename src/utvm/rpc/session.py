"""The session layer of the link (docs/architecture.md §5.2), sans-IO.

Theory of operation
-------------------
A session message is one framed packet whose payload is::

    u16 session id (LE: low byte initiator nonce, high byte responder nonce) | u8 type | body

Types: START_INIT (body: version 0x01), START_REPLY (version), TERMINATE (id 0, no body), LOG (text, id 0,
valid in every state) and NORMAL (exactly one whole RPC packet, only inside an established session and
only with its id). Before NORMAL traffic flows the two peers agree on a session id with a two-way
handshake: the initiator sends START_INIT carrying its nonce; the responder answers START_REPLY carrying
both nonces; from then on every NORMAL message carries that id, so traffic left over from an earlier
session (a late reply, a reply to a retried request) is recognised and dropped. A nonce is never 0; the
next one is `((n << 5) | (n >> 5)) + 1 (mod 256)`, skipping 0. The host initiates (TERMINATE, then
START_INIT) and retries with a new nonce; a device sends TERMINATE when it boots. If both sides send
START_INIT at once, the numerically lower nonce wins and the other init is ignored. A TERMINATE means the
peer lost all state: an established session ends with `SessionTerminated(was_established=True)`.

This file is blind to which side it runs on: host and device follow the same table below, and everything
the peer can make happen is in it. The object never does I/O and knows no clock (docs/architecture.md §12.1):
bytes go in through `receive_data()`, events come out of `next_event()`; `initiate()`, `terminate()`, `send_normal()`
and `send_log()` return the wire bytes to send, and `data_to_send()` returns what the layer decided to send
by itself (the START_REPLY of a responder). Retries and timeouts belong to the caller (`client.py`).
Malformed or unexpected messages are not errors here: they are dropped and reported as
`MessageDropped(reason)`, because on a noisy link they are expected and the session survives them.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

from utvm.errors import LocalProtocolError
from utvm.rpc.framing import (
    MAX_LENGTH_FIELD,
    NEED_DATA,
    Framer,
    PacketEnd,
    PacketStart,
    PayloadChunk,
    Unframer,
)

__all__ = [
    "NEED_DATA",
    "SESSION_HEADER_SIZE",
    "SESSION_VERSION",
    "TRANSITIONS",
    "LogMessage",
    "MessageDropped",
    "MessageType",
    "NormalMessage",
    "SessionEstablished",
    "SessionEvent",
    "SessionProtocol",
    "SessionTerminated",
    "State",
    "encode_message",
    "next_nonce",
]

SESSION_VERSION = 0x01
SESSION_HEADER_SIZE = 3
_HEADER = struct.Struct("<HB")


class MessageType(enum.IntEnum):
    START_INIT = 0x00
    START_REPLY = 0x01
    TERMINATE = 0x02
    LOG = 0x03
    NORMAL = 0x10


class State(enum.Enum):
    RESET = "RESET"  # no session: at start, after TERMINATE (either way)
    INIT_SENT = "INIT_SENT"  # we sent START_INIT and await the START_REPLY carrying our nonce
    ESTABLISHED = "ESTABLISHED"  # NORMAL traffic flows with `session_id`


# Actions (what happens to an incoming message):
#   reply      answer a START_INIT: pick our nonce, queue START_REPLY, emit SessionEstablished (responder)
#   arbitrate  simultaneous inits: the peer's nonce lower than ours -> reply; otherwise drop theirs
#   accept     a START_REPLY carrying our nonce -> emit SessionEstablished(initiator=True); else drop
#   deliver    a NORMAL message with our session id -> emit NormalMessage; else drop
#   log        emit LogMessage
#   terminated emit SessionTerminated(was_established=True)
#   peer_reset emit SessionTerminated(was_established=False): the peer (re)booted; nothing of ours is lost
#   drop       emit MessageDropped(reason)
# TRANSITIONS[state][incoming type] = (action, next state if the action goes through).
TRANSITIONS: dict[State, dict[MessageType, tuple[str, State]]] = {
    State.RESET: {
        MessageType.START_INIT: ("reply", State.ESTABLISHED),
        MessageType.START_REPLY: ("drop", State.RESET),
        MessageType.TERMINATE: ("peer_reset", State.RESET),
        MessageType.LOG: ("log", State.RESET),
        MessageType.NORMAL: ("drop", State.RESET),
    },
    State.INIT_SENT: {
        MessageType.START_INIT: ("arbitrate", State.ESTABLISHED),
        MessageType.START_REPLY: ("accept", State.ESTABLISHED),
        MessageType.TERMINATE: ("peer_reset", State.INIT_SENT),  # our init may still be answered
        MessageType.LOG: ("log", State.INIT_SENT),
        MessageType.NORMAL: ("drop", State.INIT_SENT),
    },
    State.ESTABLISHED: {
        MessageType.START_INIT: ("reply", State.ESTABLISHED),  # the peer restarted the session
        MessageType.START_REPLY: ("drop", State.ESTABLISHED),  # a late reply to an earlier init
        MessageType.TERMINATE: ("terminated", State.RESET),
        MessageType.LOG: ("log", State.ESTABLISHED),
        MessageType.NORMAL: ("deliver", State.ESTABLISHED),
    },
}
# Local operations: which states allow them, and the state they lead to.
LOCAL_TRANSITIONS: dict[str, tuple[frozenset[State], State | None]] = {
    "initiate": (frozenset(State), State.INIT_SENT),
    "terminate": (frozenset(State), State.RESET),
    "send_normal": (frozenset({State.ESTABLISHED}), None),  # None: state unchanged
    "send_log": (frozenset(State), None),
}


_MESSAGE_TYPES = {int(t): t for t in MessageType}
_NORMAL = int(MessageType.NORMAL)
_JOIN_LIMIT = 1 << 14  # send_normal copies bodies up to this size once to frame them as one part


def next_nonce(nonce: int) -> int:
    """The nonce after `nonce`: ((n << 5) | (n >> 5)) + 1 mod 256, skipping the invalid 0."""
    n = nonce & 0xFF
    while True:
        n = ((((n << 5) & 0xFF) | (n >> 5)) + 1) & 0xFF
        if n:
            return n


@dataclass(frozen=True, slots=True)
class SessionEstablished:
    session_id: int
    initiator: bool  # True: we sent the START_INIT

    def __post_init__(self) -> None:
        lo, hi = self.session_id & 0xFF, self.session_id >> 8
        if not (0 < lo and 0 < hi <= 0xFF):
            raise LocalProtocolError(f"session id 0x{self.session_id:04X} must carry two non-zero nonces")


@dataclass(frozen=True, slots=True)
class SessionTerminated:
    was_established: bool


@dataclass(frozen=True, slots=True)
class LogMessage:
    text: bytes


@dataclass(frozen=True, slots=True)
class NormalMessage:
    body: bytes


@dataclass(frozen=True, slots=True)
class MessageDropped:
    reason: str
    corrupt: bool = False  # True: the framing layer rejected the packet (CRC, restart, invalid escape)


SessionEvent = SessionEstablished | SessionTerminated | LogMessage | NormalMessage | MessageDropped


def encode_message(session_id: int, message_type: int, body: bytes = b"") -> bytes:
    """The packet payload of one session message (unframed)."""
    return _HEADER.pack(session_id, message_type) + body


class SessionProtocol:
    """One end of the session layer (either end: the rules are symmetric).

    `nonce` seeds this side's nonce sequence (1..255; 0 is replaced by its successor): the first
    `initiate()` or `reply` uses it, later ones the next nonce. `max_packet_size` bounds incoming packets
    (the payload, session header included) and outgoing ones.
    """

    def __init__(self, nonce: int = 1, max_packet_size: int = MAX_LENGTH_FIELD) -> None:
        nonce &= 0xFF
        self._nonce = nonce or next_nonce(0)
        self._nonce_used = False
        self.max_packet_size = max_packet_size
        self.state = State.RESET
        self.session_id = 0
        self.framer = Framer(max_packet_size)
        self.unframer = Unframer(max_packet_size)
        self._rx: bytearray | None = None  # payload of the packet being received
        self._out = bytearray()
        self.dropped = 0

    # --- local operations -----------------------------------------------------------------------------------
    def _local(self, op: str) -> None:
        allowed, nxt = LOCAL_TRANSITIONS[op]
        if self.state not in allowed:
            raise LocalProtocolError(f"cannot {op.replace('_', ' ')} in session state {self.state.value}")
        if nxt is not None:
            self.state = nxt

    def _take_nonce(self) -> int:
        if self._nonce_used:
            self._nonce = next_nonce(self._nonce)
        self._nonce_used = True
        return self._nonce

    @property
    def nonce(self) -> int:
        return self._nonce

    def initiate(self) -> bytes:
        """Start (or restart) a session as initiator with a fresh nonce; returns START_INIT wire bytes."""
        self._local("initiate")
        self.session_id = self._take_nonce()
        return self.framer.send(encode_message(self.session_id, MessageType.START_INIT, bytes([SESSION_VERSION])))

    def terminate(self) -> bytes:
        """End any session; returns TERMINATE wire bytes."""
        self._local("terminate")
        self.session_id = 0
        return self.framer.send(encode_message(0, MessageType.TERMINATE))

    def send_normal(self, body: bytes | bytearray | memoryview) -> bytes:
        """Wire bytes of one NORMAL message (one whole RPC packet) in the established session."""
        if self.state is not State.ESTABLISHED:
            self._local("send_normal")  # raises
        if len(body) <= _JOIN_LIMIT and type(body) is bytes:
            return self.framer.send(_HEADER.pack(self.session_id, _NORMAL) + body)  # one part: the fast path
        return self.framer.send(_HEADER.pack(self.session_id, _NORMAL), body)

    def send_log(self, text: bytes | str) -> bytes:
        self._local("send_log")
        if isinstance(text, str):
            text = text.encode("utf-8")
        return self.framer.send(encode_message(0, MessageType.LOG, text))

    def data_to_send(self) -> bytes:
        """Bytes the layer queued by itself (a START_REPLY); empty if none."""
        out, self._out = bytes(self._out), bytearray()
        return out

    # --- receiving ------------------------------------------------------------------------------------------
    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        self.unframer.receive_data(data)

    def next_event(self) -> SessionEvent | type[NEED_DATA]:
        unframer = self.unframer
        if unframer._pos >= len(unframer._buf):
            return NEED_DATA  # nothing buffered (what the unframer would say, without asking it twice)
        while True:
            payload = unframer.whole_packet()  # the common case, without the per-event overhead
            if payload is not None:
                if (  # the commonest message: NORMAL in our established session
                    len(payload) >= SESSION_HEADER_SIZE
                    and payload[2] == _NORMAL
                    and self.state is State.ESTABLISHED
                    and payload[0] | (payload[1] << 8) == self.session_id
                ):
                    return NormalMessage(payload[SESSION_HEADER_SIZE:])
                out = self._handle(payload)
                if out is not None:
                    return out
                continue
            if unframer.partial_packet():
                return NEED_DATA  # the rest of a clean packet is on its way: take it whole, then
            ev = unframer.next_event()
            t = type(ev)
            if t is PayloadChunk:
                if self._rx is not None:
                    self._rx += ev.data  # type: ignore[union-attr]
            elif t is PacketStart:
                self._rx = bytearray()
            elif t is PacketEnd:
                payload, self._rx = self._rx, None
                if not ev.crc_ok:  # type: ignore[union-attr]
                    return self._drop(ev.reason, corrupt=True)  # type: ignore[union-attr]
                out = self._handle(bytes(payload or b""))
                if out is not None:
                    return out
            else:
                return NEED_DATA

    def events(self) -> list[SessionEvent]:
        out: list[SessionEvent] = []
        while (ev := self.next_event()) is not NEED_DATA:
            out.append(ev)  # type: ignore[arg-type]
        return out

    def _drop(self, reason: str, corrupt: bool = False) -> MessageDropped:
        self.dropped += 1
        return MessageDropped(reason, corrupt)

    def _handle(self, payload: bytes) -> SessionEvent | None:
        if len(payload) < SESSION_HEADER_SIZE:
            return self._drop(f"message of {len(payload)} bytes is shorter than the session header (3 bytes)")
        session_id, raw_type = _HEADER.unpack_from(payload)
        mtype = _MESSAGE_TYPES.get(raw_type)
        if mtype is None:
            return self._drop(f"unknown session message type 0x{raw_type:02X}")
        action, nxt = TRANSITIONS[self.state][mtype]
        return getattr(self, "_on_" + action)(session_id, mtype, payload[SESSION_HEADER_SIZE:], nxt)

    # Each handler gets (session id, type, body, next state) and returns an event or None.
    def _check_version(self, mtype: MessageType, body: bytes) -> str | None:
        if body[:1] != bytes([SESSION_VERSION]):
            return f"{mtype.name} with unsupported session version {body[:1].hex() or '(none)'}"
        return None

    def _on_reply(self, session_id: int, mtype: MessageType, body: bytes, nxt: State) -> SessionEvent | None:
        bad = self._check_version(mtype, body)
        peer = session_id & 0xFF
        if bad is None and peer == 0:
            bad = "START_INIT with the invalid initiator nonce 0"
        if bad is not None:
            return self._drop(bad)
        self.session_id = peer | (self._take_nonce() << 8)
        self.state = nxt
        self._out += self.framer.send(
            encode_message(self.session_id, MessageType.START_REPLY, bytes([SESSION_VERSION]))
        )
        return SessionEstablished(self.session_id, initiator=False)

    def _on_arbitrate(self, session_id: int, mtype: MessageType, body: bytes, nxt: State) -> SessionEvent | None:
        if (session_id & 0xFF) < self.session_id & 0xFF:
            return self._on_reply(session_id, mtype, body, nxt)
        return self._drop(
            f"simultaneous START_INIT: the peer's nonce 0x{session_id & 0xFF:02X} is not lower "
            f"than ours 0x{self.session_id & 0xFF:02X}"
        )

    def _on_accept(self, session_id: int, mtype: MessageType, body: bytes, nxt: State) -> SessionEvent | None:
        bad = self._check_version(mtype, body)
        if bad is None and (session_id & 0xFF) != (self.session_id & 0xFF):
            bad = (
                f"START_REPLY for initiator nonce 0x{session_id & 0xFF:02X}, ours is "
                f"0x{self.session_id & 0xFF:02X} (a reply to an earlier init)"
            )
        if bad is None and session_id >> 8 == 0:
            bad = "START_REPLY with the invalid responder nonce 0"
        if bad is not None:
            return self._drop(bad)
        self.session_id = session_id
        self.state = nxt
        return SessionEstablished(session_id, initiator=True)

    def _on_deliver(self, session_id: int, mtype: MessageType, body: bytes, nxt: State) -> SessionEvent | None:
        if session_id != self.session_id:
            return self._drop(f"NORMAL message for session 0x{session_id:04X}, the session is 0x{self.session_id:04X}")
        return NormalMessage(body)

    def _on_log(self, session_id: int, mtype: MessageType, body: bytes, nxt: State) -> SessionEvent | None:
        return LogMessage(body)

    def _on_terminated(self, session_id: int, mtype: MessageType, body: bytes, nxt: State) -> SessionEvent | None:
        self.state = nxt
        self.session_id = 0
        return SessionTerminated(was_established=True)

    def _on_peer_reset(self, session_id: int, mtype: MessageType, body: bytes, nxt: State) -> SessionEvent | None:
        self.state = nxt
        return SessionTerminated(was_established=False)

    def _on_drop(self, session_id: int, mtype: MessageType, body: bytes, nxt: State) -> SessionEvent | None:
        return self._drop(f"{mtype.name} message unexpected in session state {self.state.value}")
