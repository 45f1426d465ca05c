"""The framing layer: shared vectors (whole, byte-at-a-time, trailing bytes), control sequences, limits,
round-trip properties, and a fuzz test: any byte stream gives well-formed events and never an exception."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from utvm.errors import LocalProtocolError
from utvm.rpc.framing import (
    NEED_DATA,
    Framer,
    PacketEnd,
    PacketStart,
    PayloadChunk,
    Unframer,
    encode_packet,
    escape,
)

from .helpers import payloads, tr, unframe


def test_packet_vectors_encode(framing_vectors):
    for v in framing_vectors["packets"]:
        assert encode_packet(bytes.fromhex(v["payload"])).hex() == v["wire"], v["name"]


def test_packet_vectors_decode(framing_vectors):
    for v in framing_vectors["packets"]:
        tr(payloads, bytes.fromhex(v["wire"]), [(bytes.fromhex(v["payload"]), True)])


def test_design_vectors_verbatim():
    # docs/architecture.md §5.1, typed in from the text.
    assert encode_packet(b"one") == bytes.fromhex("FF FD 03 00 00 00 6F 6E 65 58 F4")
    assert encode_packet(b"") == bytes.fromhex("FF FD 00 00 00 00 83 44")


def test_stream_vectors(framing_vectors):
    for v in framing_vectors["streams"]:
        wire = bytes.fromhex(v["wire"])
        limit = v.get("max_packet_size", 0xFFFFFFFF)
        expected = [(bytes.fromhex(p), ok) for p, ok in v["packets"]]

        def feed(chunks, limit=limit, v=v):
            got, u = unframe(chunks, limit)
            for key, want in v["stats"].items():
                assert getattr(u.stats, key) == want, f"{v['name']}: stats.{key}"
            return got

        tr(feed, wire, expected)


def test_framer_sends_fe_after_reset_only(framing_vectors):
    f = Framer()
    one = bytes.fromhex(framing_vectors["packets"][0]["wire"])
    assert f.send(b"one") == bytes.fromhex(framing_vectors["reset_prefix"]) + one
    assert f.send(b"one") == one
    f.reset()
    assert f.send(b"o", b"ne") == b"\xfe" + one  # payload given in parts


def test_framer_enforces_max_packet_size():
    f = Framer(max_packet_size=4)
    f.send(b"1234")
    with pytest.raises(LocalProtocolError, match="5 bytes exceeds the maximum packet size 4"):
        f.send(b"12345")


def test_length_over_limit_is_skipped_and_counted():
    wire = encode_packet(b"x" * 17) + encode_packet(b"ok")
    got, u = unframe([wire], max_packet_size=16)
    assert got == [(b"ok", True)]
    assert u.stats.too_long == 1 and u.stats.packets_ok == 1


def test_payload_streams_before_crc_verdict():
    wire = encode_packet(b"A" * 1000)
    u = Unframer()
    u.receive_data(wire[:600])
    evs = u.events()
    assert evs[0] == PacketStart(1000)
    assert type(evs[1]) is PayloadChunk and len(evs[1].data) == 600 - 6  # everything that arrived
    assert u.next_event() is NEED_DATA and u.in_packet
    u.receive_data(wire[600:])
    assert u.events()[-1] == PacketEnd(True)


def test_escape_pairs_split_across_reads():
    payload = b"\xff" * 5 + b"a\xffb"
    wire = encode_packet(payload)
    for cut in range(len(wire)):
        assert payloads([wire[:cut], wire[cut:]]) == [(payload, True)], cut


def test_corrupt_byte_is_caught_by_crc():
    wire = bytearray(encode_packet(b"hello world"))
    wire[9] ^= 0x10
    got, u = unframe([bytes(wire)])
    assert got == [(b"hel|o world", False)] and u.stats.crc_errors == 1


def test_event_constructors_validate():
    with pytest.raises(LocalProtocolError):
        PacketStart(-1)
    with pytest.raises(LocalProtocolError):
        PacketStart(2**32)
    with pytest.raises(LocalProtocolError):
        PayloadChunk(b"")
    with pytest.raises(LocalProtocolError):
        PacketEnd(True, "but why")
    with pytest.raises(LocalProtocolError):
        PacketEnd(False)
    assert type(NEED_DATA) is NEED_DATA and repr(NEED_DATA) == "NEED_DATA"
    with pytest.raises(AttributeError):
        PacketStart(1).length = 2  # type: ignore[misc]


payload_lists = st.lists(st.binary(max_size=300) | st.sampled_from([b"\xff" * 7, b"\xff\xfd\xff\xfe"]), max_size=6)


@given(payload_lists, st.lists(st.integers(1, 40), min_size=1, max_size=20))
def test_roundtrip_property(packets, cuts):
    """Whatever the payloads and however the stream is cut, the receiver gets exactly the payloads sent."""
    f = Framer()
    wire = b"".join(f.send(p) for p in packets)
    chunks, pos, i = [], 0, 0
    while pos < len(wire):
        n = cuts[i % len(cuts)]
        chunks.append(wire[pos : pos + n])
        pos, i = pos + n, i + 1
    assert payloads(chunks) == [(p, True) for p in packets]


@given(payload_lists, st.binary(max_size=20))
def test_garbage_before_packets_loses_at_most_the_first(packets, garbage):
    """After any junk, every packet but the first is received intact (its FF FD resynchronises); the first
    too unless the junk ends inside a packet with a dangling FF (then FF FF pairs up as a data byte)."""
    got = payloads([garbage + b"".join(encode_packet(p) for p in packets)])
    good = [p for p, ok in got if ok]
    if len(packets) > 1:
        assert good[len(good) - len(packets) + 1 :] == packets[1:]
    if b"\xff" not in garbage:
        assert good == packets


@settings(max_examples=300)
@given(st.binary(max_size=400), st.integers(0, 64))
def test_fuzz_any_bytes_give_well_formed_events(data, limit):
    """The decoder's only outputs are events in the right grammar; it never raises on any input."""
    got, u = unframe([data], limit)
    assert all(len(p) <= limit for p, _ in got)
    assert u.stats.packets_ok == sum(ok for _, ok in got)


def test_escape_helper():
    assert escape(b"\x00\xff\x01") == b"\x00\xff\xff\x01"
