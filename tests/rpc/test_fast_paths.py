"""The receive fast paths (Unframer.whole_packet / partial_packet, used by the session layer) against the
general event path: on any stream -- escapes, NOPs, restarts, invalid escapes, flipped and lost bytes, reset
prefixes, packets small and large, cut at any point -- a session that takes whole packets must emit the same
events and count the same statistics as one that only streams events through Unframer.next_event()."""

from __future__ import annotations

import random

import pytest

from utvm.rpc.framing import Framer, Unframer, encode_packet
from utvm.rpc.session import SessionProtocol, State

SID = 0x6682


def _session(fast: bool) -> SessionProtocol:
    s = SessionProtocol(0x82, 1 << 24)
    s.state, s.session_id = State.ESTABLISHED, SID
    if not fast:  # the general path only
        s.unframer.whole_packet = lambda: None  # type: ignore[method-assign]
        s.unframer.partial_packet = lambda limit=0: False  # type: ignore[method-assign]
    return s


def _stream(rng: random.Random) -> bytes:
    framer = Framer()
    parts = []
    for _ in range(rng.randrange(1, 6)):
        size = rng.choice([0, 1, 5, 252, 253, 2000, 20000, 65475]) if rng.random() < 0.3 else rng.randrange(300)
        body = bytes(rng.choice([0, 0xFF, 0xFE, 0xFD, 1, rng.randrange(256)]) for _ in range(min(size, 300)))
        body += rng.randbytes(max(0, size - 300))
        kind = rng.random()
        sid = SID if kind < 0.9 else SID ^ 1
        mtype = 0x10 if kind < 0.8 or kind >= 0.9 else 0x03
        if rng.random() < 0.2:
            framer.reset()
        parts.append(framer.send(sid.to_bytes(2, "little") + bytes([mtype]) + body))
    wire = bytearray(b"".join(parts))
    if rng.random() < 0.5:
        for _ in range(rng.randrange(1, 4)):
            op, j = rng.random(), rng.randrange(len(wire))
            if op < 0.4:
                wire[j] ^= 1 << rng.randrange(8)
            elif op < 0.6:
                del wire[j]
            elif op < 0.8:
                wire[j:j] = rng.choice([b"\xff\xfe", b"\xff\xfd", b"\xff", b"\xfe", b"\xff\x01"])
            else:
                wire[j:j] = wire[j : j + rng.randrange(1, 50)]
    return bytes(wire)


def _run(s: SessionProtocol, wire: bytes, rng: random.Random) -> tuple[object, ...]:
    events = []
    i = 0
    while i < len(wire):
        k = rng.choice([1, 3, 8, 100, 4096, 65536])
        s.receive_data(wire[i : i + k])
        i += k
        events += s.events()
    return (tuple(events), s.state, s.dropped, s.unframer.stats)


@pytest.mark.parametrize("seed", range(4))
def test_session_fast_path_matches_the_event_path(seed: int) -> None:
    rng = random.Random(seed)
    for trial in range(150):
        wire = _stream(rng)
        fast = _run(_session(True), wire, random.Random(trial))
        general = _run(_session(False), wire, random.Random(trial + 1))  # other chunk boundaries too
        assert fast == general, f"seed {seed} trial {trial}: wire {wire[:60].hex()}..."


@pytest.mark.parametrize("size", [0, 1, 255, 0xFF00, 0xFFC6, 0x100FF])
@pytest.mark.parametrize("fill", ["random", "zeros", "all_ff"])
def test_whole_packet_takes_clean_packets_and_nothing_partial(size: int, fill: str) -> None:
    rng = random.Random(size)
    payload = {"random": rng.randbytes(size), "zeros": bytes(size), "all_ff": b"\xff" * size}[fill]
    wire = encode_packet(payload)
    u = Unframer()
    u.receive_data(wire + wire[:7])
    assert u.whole_packet() == payload
    assert u.whole_packet() is None  # the next packet is incomplete
    assert u.stats.packets_ok == 1
    for cut in (1, 2, 3, len(wire) // 2):
        u = Unframer()
        u.receive_data(wire[:-cut])
        assert u.whole_packet() is None
        # a packet whose header has arrived may be awaited whole (a cut header goes the general way)
        header = 6 + size.to_bytes(4, "little").count(0xFF)  # FF FD, the length field with its escapes
        assert u.partial_packet() == (len(wire) - cut >= header)
        assert u.stats.packets_ok == 0
