"""A third-party client: the host device driven by a minimal MinRPC client written here from docs/architecture.md §5
with nothing but `struct` and `binascii` (no utvm.rpc), over the device's stdin/stdout.

If this passes, the wire format is what the documents say: framing (escapes, the reset FE, CRC over the
raw wire bytes), the session handshake and ids, and the RPC layouts of InitServer, GetGlobalFunc,
DevAllocData, CopyToRemote, CallFunc, CopyFromRemote, Exception and Shutdown."""

from __future__ import annotations

import binascii
import os
import select
import struct
import subprocess
import time

import pytest

from .conftest import host_device_path

# docs/architecture.md §5: session types, RPC codes and type codes, spelled out here on purpose (not imported).
START_INIT, START_REPLY, TERMINATE, LOG, NORMAL = 0x00, 0x01, 0x02, 0x03, 0x10
SHUTDOWN, INIT_SERVER, CALL_FUNC, RETURN, EXCEPTION = 1, 2, 3, 4, 5
COPY_FROM_REMOTE, COPY_TO_REMOTE, COPY_ACK, GET_GLOBAL_FUNC, DEV_ALLOC_DATA = 6, 7, 8, 9, 13
TC_INT, TC_HANDLE, TC_NULL, TC_DTYPE, TC_DEVICE, TC_DLTENSOR, TC_STR = 0, 3, 4, 5, 6, 7, 11
FLOAT32 = struct.pack("<BBH", 2, 32, 1)
CPU = struct.pack("<ii", 1, 0)


def _escape(data: bytes) -> bytes:
    return data.replace(b"\xff", b"\xff\xff")


def frame(payload: bytes) -> bytes:
    """FF FD · u32 length · payload · u16 CRC, escaped; the CRC covers the raw wire bytes before it."""
    wire = b"\xff\xfd" + _escape(struct.pack("<I", len(payload)) + payload)
    return wire + _escape(struct.pack("<H", binascii.crc_hqx(wire, 0xFFFF)))


def unframe(buf: bytearray) -> bytes | None:
    """Take one whole packet's payload off the front of `buf` (None: not all there yet). Bytes before
    `FF FD` (the device's reset FE) are skipped; a bad CRC or escape fails the test."""
    start = buf.find(b"\xff\xfd")
    if start < 0:
        return None
    body, i, need, crc_end = bytearray(), start + 2, None, 0
    while i < len(buf):
        if buf[i] == 0xFF:
            if i + 1 == len(buf):
                return None
            assert buf[i + 1] in (0xFF, 0xFE), f"invalid escape FF {buf[i + 1]:02x} at byte {i}"
            if buf[i + 1] == 0xFF:
                body.append(0xFF)
            i += 2
        else:
            body.append(buf[i])
            i += 1
        if need is None and len(body) == 4:
            need = struct.unpack("<I", body)[0]
        if need is not None and len(body) == 4 + need and not crc_end:
            crc_end = i
        if need is not None and len(body) == 4 + need + 2:
            (crc,) = struct.unpack("<H", body[-2:])
            assert crc == binascii.crc_hqx(bytes(buf[start:crc_end]), 0xFFFF), "CRC mismatch"
            del buf[:i]
            return bytes(body[4:-2])
    return None


def seq(*values: tuple[int, bytes]) -> bytes:
    """A packed sequence: i32 n · i32 type_code[n] · values."""
    return struct.pack(f"<i{len(values)}i", len(values), *(tc for tc, _ in values)) + b"".join(v for _, v in values)


def string(s: str) -> tuple[int, bytes]:
    return TC_STR, struct.pack("<Q", len(s)) + s.encode()


def dltensor(data: int, shape: tuple[int, ...]) -> bytes:
    """u64 data · Device · i32 ndim · DataType · i64 shape[ndim] · u64 byte_offset (strides NULL)."""
    return (struct.pack("<Q", data) + CPU + struct.pack("<i", len(shape)) + FLOAT32
            + struct.pack(f"<{len(shape)}q", *shape) + struct.pack("<Q", 0))


class Client:
    def __init__(self, argv: list[str], nonce: int = 0x5A) -> None:
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.buf = bytearray()
        self.logs: list[bytes] = []
        # The host initiates: one raw FE (first packet after a reset), terminate (id 0), init (version 1).
        self._write(b"\xfe" + frame(struct.pack("<HB", 0, TERMINATE))
                    + frame(struct.pack("<HBB", nonce, START_INIT, 0x01)))
        while True:
            payload = self._packet()
            sid, kind = struct.unpack_from("<HB", payload)
            if kind == START_REPLY and sid & 0xFF == nonce:
                assert payload[3:] == b"\x01" and sid >> 8 != 0, payload.hex(" ")
                self.session_id = sid
                break
            assert kind in (TERMINATE, LOG), f"unexpected session packet {payload.hex(' ')}"

    def _write(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def _packet(self, timeout: float = 30.0) -> bytes:
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        while (payload := unframe(self.buf)) is None:
            ready, _, _ = select.select([self.proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
            assert ready, "the device sent no packet in time"
            data = os.read(self.proc.stdout.fileno(), 65536)
            assert data, "the device closed its stdout"
            self.buf += data
        return payload

    def send_rpc(self, code: int, body: bytes) -> None:
        packet = struct.pack("<qi", 4 + len(body), code) + body
        self._write(frame(struct.pack("<HB", self.session_id, NORMAL) + packet))

    def rpc(self, code: int, body: bytes) -> tuple[int, bytes]:
        """One request; returns (reply code, reply body) after checking the u64 byte count."""
        self.send_rpc(code, body)
        while True:
            payload = self._packet()
            sid, kind = struct.unpack_from("<HB", payload)
            if kind == LOG:
                self.logs.append(payload[3:])
                continue
            assert (sid, kind) == (self.session_id, NORMAL), payload.hex(" ")
            nbytes, reply = struct.unpack_from("<qi", payload, 3)
            assert nbytes == len(payload) - 3 - 8, f"u64 byte count {nbytes}, packet holds {len(payload) - 11}"
            return reply, payload[15:]

    def syscall_handle(self, code: int, *args: tuple[int, bytes]) -> int:
        """A syscall whose Return carries exactly one handle."""
        reply, body = self.rpc(code, seq(*args))
        assert reply == RETURN, (reply, body)
        n, tc, value = struct.unpack("<iiQ", body)
        assert (n, tc) == (1, TC_HANDLE), body.hex(" ")
        return value

    def call(self, handle: int, *args: tuple[int, bytes]) -> tuple[int, bytes]:
        return self.rpc(CALL_FUNC, struct.pack("<Q", handle) + seq(*args))


@pytest.fixture
def client() -> Client:
    c = Client([str(host_device_path())])
    yield c
    if c.proc.poll() is None:
        c.proc.kill()
    c.proc.wait(10)


def test_add_one_through_a_struct_and_binascii_client(client: Client) -> None:
    version = b"0.8.0"
    reply, body = client.rpc(INIT_SERVER, struct.pack("<Q", len(version)) + version + seq())
    assert (reply, body) == (RETURN, struct.pack("<ii", 1, TC_NULL))

    add_one = client.syscall_handle(GET_GLOBAL_FUNC, string("testing.add_one"))
    assert add_one >> 31 and add_one & 0x8000, f"{add_one:#x} is not a (module | 0x8000, func | 0x8000) handle"
    assert client.syscall_handle(GET_GLOBAL_FUNC, string("no.such.function")) == 0

    alloc = ((TC_DEVICE, CPU), (TC_INT, struct.pack("<q", 16)), (TC_INT, struct.pack("<q", 64)),
             (TC_DTYPE, FLOAT32 + b"\0\0\0\0"))
    a, b = client.syscall_handle(DEV_ALLOC_DATA, *alloc), client.syscall_handle(DEV_ALLOC_DATA, *alloc)
    # FF bytes in the payload (3.4028235e38 is 7F 7F FF FF; -1.5 has none) exercise the escapes and the CRC.
    values = (1.5, -2.0, 3.4028235e38, -1.5)
    data = struct.pack("<4f", *values)
    assert b"\xff" in data
    reply, body = client.rpc(COPY_TO_REMOTE, dltensor(a, (4,)) + struct.pack("<Q", len(data)) + data)
    assert (reply, body) == (RETURN, struct.pack("<ii", 1, TC_NULL)), body.hex(" ")

    reply, body = client.call(add_one, (TC_DLTENSOR, dltensor(a, (4,))), (TC_DLTENSOR, dltensor(b, (4,))))
    # void: type codes [0 int, 4 null], values [i64 4] (the null carries no bytes)
    assert (reply, body) == (RETURN, struct.pack("<iiiq", 2, TC_INT, TC_NULL, TC_NULL)), body.hex(" ")

    reply, body = client.rpc(COPY_FROM_REMOTE, dltensor(b, (4,)) + struct.pack("<Q", 16))
    assert reply == COPY_ACK
    assert struct.unpack("<4f", body) == tuple(struct.unpack("<f", struct.pack("<f", v + 1))[0] for v in values)


def test_errors_logs_and_shutdown(client: Client) -> None:
    fail = client.syscall_handle(GET_GLOBAL_FUNC, string("testing.fail"))
    reply, body = client.call(fail, string("out of cheese"))
    assert reply == EXCEPTION
    n, tc, length = struct.unpack_from("<iiQ", body)
    assert (n, tc) == (1, TC_STR) and b"out of cheese" in body[16:16 + length] and len(body) == 16 + length

    log = client.syscall_handle(GET_GLOBAL_FUNC, string("testing.log"))
    reply, _ = client.call(log, string("hello from the device"))
    assert reply == RETURN and any(b"hello from the device" in m for m in client.logs), client.logs

    client.send_rpc(SHUTDOWN, b"")  # no reply: the device leaves its loop and exits cleanly
    assert client.proc.wait(10) == 0
