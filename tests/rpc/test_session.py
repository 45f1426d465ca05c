"""The session layer: docs/architecture.md §5.2 vectors, the handshake over an in-memory pair, the nonce rule,
simultaneous inits, stale traffic, termination, malformed input, and round-trip properties."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from utvm.errors import LocalProtocolError
from utvm.rpc.framing import encode_packet
from utvm.rpc.session import (
    TRANSITIONS,
    LogMessage,
    MessageDropped,
    MessageType,
    NormalMessage,
    SessionEstablished,
    SessionProtocol,
    SessionTerminated,
    State,
    encode_message,
    next_nonce,
)

from .helpers import tr


class Pair:
    """Two in-memory peers (h11's ConnectionPair): `send(side, wire)` delivers to the other side."""

    def __init__(self, nonce_a: int = 0x82, nonce_b: int = 0x66) -> None:
        self.a, self.b = SessionProtocol(nonce_a), SessionProtocol(nonce_b)

    def peer(self, side: SessionProtocol) -> SessionProtocol:
        return self.b if side is self.a else self.a

    def send(self, side: SessionProtocol, wire: bytes) -> list:
        """Deliver `wire` to the peer; pump automatic replies back and forth; return the peer's events."""
        other = self.peer(side)
        other.receive_data(wire)
        events = other.events()
        auto = other.data_to_send()
        if auto:
            self.back = self.send(other, auto)
        return events


def _no_reset_prefix(*sides: SessionProtocol) -> None:
    for s in sides:
        s.framer._after_reset = False


def test_message_vectors_encode(session_vectors):
    host, dev = (
        SessionProtocol(session_vectors["initiator_nonce"]),
        SessionProtocol(session_vectors["responder_nonce"]),
    )
    _no_reset_prefix(host, dev)
    wires = {m["name"]: bytes.fromhex(m["wire"]) for m in session_vectors["messages"]}
    assert host.initiate() == wires["start_init"]
    dev.receive_data(wires["start_init"])
    assert dev.events() == [SessionEstablished(0x6682, initiator=False)]
    assert dev.data_to_send() == wires["start_reply"]
    with pytest.raises(LocalProtocolError, match="INIT_SENT"):
        host.send_normal(b"hello")  # not established yet
    for m in session_vectors["messages"]:
        assert encode_packet(encode_message(m["session_id"], m["type"], bytes.fromhex(m["body"]))) == wires[m["name"]]


def test_design_vectors_verbatim():
    # docs/architecture.md §5.2, typed in from the text (nonces 0x82 / 0x66).
    host, dev = SessionProtocol(0x82), SessionProtocol(0x66)
    _no_reset_prefix(host, dev)
    assert host.initiate() == bytes.fromhex("FF FD 04 00 00 00 82 00 00 01 7B E9")
    dev.receive_data(bytes.fromhex("FF FD 04 00 00 00 82 00 00 01 7B E9"))
    dev.events()
    assert dev.data_to_send() == bytes.fromhex("FF FD 04 00 00 00 82 66 01 01 81 F3")
    host.receive_data(bytes.fromhex("FF FD 04 00 00 00 82 66 01 01 81 F3"))
    assert host.events() == [SessionEstablished(0x6682, initiator=True)]
    assert host.send_normal(b"hello") == bytes.fromhex("FF FD 08 00 00 00 82 66 10 68 65 6C 6C 6F 90 28")


def test_host_receives_vectors_split_every_way(session_vectors):
    wires = {m["name"]: bytes.fromhex(m["wire"]) for m in session_vectors["messages"]}

    def feed(chunks):
        host = SessionProtocol(session_vectors["initiator_nonce"])
        host.initiate()
        events = []
        for c in chunks:
            host.receive_data(c)
            events += host.events()
        return events

    stream = wires["log"] + wires["start_reply"] + wires["normal_hello"] + wires["terminate"]
    tr(
        feed,
        stream,
        [
            LogMessage(b"hi"),
            SessionEstablished(0x6682, True),
            NormalMessage(b"hello"),
            SessionTerminated(was_established=True),
        ],
    )


def test_nonce_sequence(session_vectors):
    n, seq = 1, []
    for _ in range(len(session_vectors["nonce_sequence_from_1"])):
        seq.append(n)
        n = next_nonce(n)
    assert seq == session_vectors["nonce_sequence_from_1"]
    assert all(1 <= next_nonce(x) <= 255 for x in range(256))


def test_handshake_and_traffic_over_a_pair():
    p = Pair()
    assert p.send(p.a, p.a.terminate() + p.a.initiate()) == [
        SessionTerminated(was_established=False),
        SessionEstablished(0x6682, initiator=False),
    ]
    assert p.back == [SessionEstablished(0x6682, initiator=True)]
    assert p.a.state is p.b.state is State.ESTABLISHED
    assert p.send(p.a, p.a.send_normal(b"request")) == [NormalMessage(b"request")]
    assert p.send(p.b, p.b.send_normal(b"reply") + p.b.send_log("note")) == [
        NormalMessage(b"reply"),
        LogMessage(b"note"),
    ]
    assert p.send(p.b, p.b.terminate()) == [SessionTerminated(was_established=True)]
    assert p.a.state is State.RESET
    with pytest.raises(LocalProtocolError, match="cannot send normal in session state RESET"):
        p.a.send_normal(b"x")


def test_retry_uses_a_new_nonce_and_stale_reply_is_dropped():
    p = Pair()
    first = p.a.initiate()
    p.b.receive_data(first)
    p.b.events()
    stale_reply = p.b.data_to_send()
    second = p.a.initiate()  # the retry, sent before the first reply arrived
    assert p.a.session_id == next_nonce(0x82)
    p.a.receive_data(stale_reply)
    (ev,) = p.a.events()
    assert type(ev) is MessageDropped and "reply to an earlier init" in ev.reason
    p.send(p.a, second)
    assert p.back == [SessionEstablished(p.b.session_id, initiator=True)] and p.a.session_id == p.b.session_id


def test_simultaneous_inits_lower_nonce_wins():
    p = Pair(nonce_a=0x30, nonce_b=0x90)
    init_a, init_b = p.a.initiate(), p.b.initiate()
    events_b = p.send(p.a, init_a)  # b (0x90) sees a's lower nonce: b answers
    assert events_b == [SessionEstablished(p.b.session_id, initiator=False)]
    assert p.back == [SessionEstablished(p.b.session_id, initiator=True)]
    (ev,) = p.send(p.b, init_b)  # a (now established) sees b's init: answers, restarting the session
    assert ev == SessionEstablished(p.a.session_id, initiator=False)
    assert p.a.session_id & 0xFF == 0x90


def test_simultaneous_inits_higher_nonce_ignored():
    p = Pair(nonce_a=0x90, nonce_b=0x30)
    p.a.initiate()
    init_b = p.b.initiate()
    p.a.receive_data(init_b)  # a is waiting with 0x90 > 0x30: b's init wins, a answers it
    assert p.a.events() == [SessionEstablished(0x30 | (next_nonce(0x90) << 8), initiator=False)]
    q = Pair(nonce_a=0x30, nonce_b=0x90)
    q.a.initiate()
    q.a.receive_data(q.b.initiate())  # a waits with 0x30 < 0x90: b's init is ignored
    (ev,) = q.a.events()
    assert type(ev) is MessageDropped and "not lower" in ev.reason and q.a.state is State.INIT_SENT


def test_normal_with_wrong_session_id_is_dropped():
    p = Pair()
    p.send(p.a, p.a.initiate())
    forged = encode_packet(encode_message(p.a.session_id ^ 0x0100, MessageType.NORMAL, b"x"))
    (ev,) = p.send(p.b, forged)
    assert type(ev) is MessageDropped and not ev.corrupt and "session 0x" in ev.reason


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        (b"\x01\x02", "shorter than the session header"),
        (b"\x00\x00\x42", "unknown session message type 0x42"),
        (b"\x82\x00\x00\x02", "unsupported session version 02"),
        (b"\x00\x00\x00\x01", "invalid initiator nonce 0"),
    ],
)
def test_malformed_messages_are_dropped(payload, reason):
    s = SessionProtocol(5)
    s.receive_data(encode_packet(payload))
    (ev,) = s.events()
    assert type(ev) is MessageDropped and reason in ev.reason and s.state is State.RESET


def test_corrupt_packet_is_reported_as_corrupt():
    s = SessionProtocol(5)
    wire = bytearray(encode_packet(encode_message(0, MessageType.LOG, b"hello")))
    wire[-4] ^= 1
    s.receive_data(bytes(wire))
    (ev,) = s.events()
    assert type(ev) is MessageDropped and ev.corrupt and "CRC" in ev.reason


def test_transition_table_is_complete():
    for state in State:
        assert set(TRANSITIONS[state]) == set(MessageType), state


def test_session_established_validates():
    with pytest.raises(LocalProtocolError):
        SessionEstablished(0x0082, initiator=True)  # responder nonce 0


bodies = st.lists(st.tuples(st.booleans(), st.binary(max_size=200)), max_size=8)


@given(bodies, st.integers(1, 50), st.integers(1, 255), st.integers(1, 255))
def test_roundtrip_property(messages, cut, nonce_a, nonce_b):
    """Any mix of NORMAL and LOG messages, cut anywhere, arrives in order and intact."""
    p = Pair(nonce_a, nonce_b)
    p.send(p.a, p.a.terminate() + p.a.initiate())
    assert p.a.state is p.b.state is State.ESTABLISHED and p.a.session_id == p.b.session_id
    wire = b"".join(p.a.send_log(body) if is_log else p.a.send_normal(body) for is_log, body in messages)
    got = []
    for i in range(0, len(wire), cut):
        p.b.receive_data(wire[i : i + cut])
        got += p.b.events()
    assert got == [LogMessage(b) if is_log else NormalMessage(b) for is_log, b in messages]


@settings(max_examples=300)
@given(st.binary(max_size=300))
def test_fuzz_session_never_raises(data):
    p = Pair()
    p.send(p.a, p.a.initiate())
    for side in (p.a, p.b):
        side.receive_data(data)
        for ev in side.events():
            assert type(ev) in (
                SessionEstablished,
                SessionTerminated,
                LogMessage,
                NormalMessage,
                MessageDropped,
            )
