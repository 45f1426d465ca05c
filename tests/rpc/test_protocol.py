"""The RPC codec: the shared packet vectors (typed from docs/architecture.md §5.3 with struct, independently of the
codec), every type code round-tripping, reply layouts, copy chunking, and a fuzz test: the decoders raise
RemoteProtocolError and nothing else on any input."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from utvm.errors import LocalProtocolError, RemoteProtocolError
from utvm.rpc import protocol as P
from utvm.rpc.protocol import DLDataType, DLDevice, DLTensorRef, RPCCode
from utvm.runtime.typecodes import TypeCode

F32 = DLDataType(2, 32, 1)
CPU = DLDevice(1, 0)
T4 = DLTensorRef(0x10000040, CPU, F32, (4,), 8)
H_ADD = 0x80028003


def _vec(rpc_vectors, name):
    (v,) = [v for v in rpc_vectors["packets"] if v["name"] == name]
    return bytes.fromhex(v["packet"])


def test_codes_match_abi_vectors():
    from utvm.rpc.session import MessageType

    from .conftest import load_vectors

    abi = load_vectors("abi")
    names = {c.name.replace("_", ""): c for c in RPCCode}
    for name, value in abi["rpc_codes"].items():
        assert names[name[1:].upper()] == value, name
    assert len(abi["rpc_codes"]) == len(RPCCode)
    assert sorted(int(m) for m in MessageType) == sorted(abi["session_message_types"].values())
    assert abi["rpc_protocol_version"] == P.RPC_PROTOCOL_VERSION


def test_every_vector_decodes(rpc_vectors):
    for v in rpc_vectors["packets"]:
        packet = bytes.fromhex(v["packet"])
        decode = P.decode_request if v["direction"] == "request" else P.decode_reply
        decode(packet)  # must not raise
        assert struct.unpack_from("<Qi", packet) == (len(packet) - 8, v["code"]), v["name"]


def test_request_vectors_encode(rpc_vectors):
    v = lambda name: _vec(rpc_vectors, name)  # noqa: E731
    assert P.encode_init_server() == v("init_server")
    assert P.encode_shutdown() == v("shutdown")
    assert P.encode_syscall(RPCCode.GET_GLOBAL_FUNC, [(TypeCode.STR, "testing.add_one")]) == v("get_global_func")
    a = DLTensorRef(0x10000000, CPU, F32, (4,))
    b = DLTensorRef(0x10000040, CPU, F32, (4,))
    assert P.encode_call_func(H_ADD, [(TypeCode.DLTENSOR_HANDLE, a), (TypeCode.DLTENSOR_HANDLE, b)]) == v(
        "call_func_add_one"
    )
    assert P.encode_copy_to_remote(T4, struct.pack("<2f", 1.0, 2.0)) == v("copy_to_remote")
    assert P.encode_copy_from_remote(T4, 8) == v("copy_from_remote")
    assert P.encode_syscall(
        RPCCode.DEV_ALLOC_DATA,
        [(TypeCode.DEVICE, CPU), (TypeCode.INT, 16), (TypeCode.INT, 64), (TypeCode.DATA_TYPE, F32)],
    ) == v("dev_alloc_data")
    assert P.encode_syscall(RPCCode.DEV_FREE_DATA, [(TypeCode.DEVICE, CPU), (TypeCode.OPAQUE_HANDLE, 0x10000040)]) == v(
        "dev_free_data"
    )
    assert P.encode_syscall(RPCCode.FREE_HANDLE, [(TypeCode.OPAQUE_HANDLE, H_ADD), (TypeCode.INT, 10)]) == v(
        "free_handle"
    )


EVERY = [
    (TypeCode.INT, -1),
    (TypeCode.UINT, 2**64 - 1),
    (TypeCode.FLOAT, 1.5),
    (TypeCode.OPAQUE_HANDLE, 0x1234),
    (TypeCode.NULL, None),
    (TypeCode.DATA_TYPE, F32),
    (TypeCode.DEVICE, CPU),
    (TypeCode.DLTENSOR_HANDLE, T4),
    (TypeCode.OBJECT_HANDLE, 5),
    (TypeCode.MODULE_HANDLE, 0xA0000000),
    (TypeCode.PACKED_FUNC_HANDLE, H_ADD),
    (TypeCode.STR, "h\u00e9"),
    (TypeCode.BYTES, b"\x00\xff"),
    (TypeCode.NDARRAY_HANDLE, 0x99),
]


def test_every_type_code_vector(rpc_vectors):
    assert [tc for tc, _ in EVERY] == list(TypeCode)
    packet = _vec(rpc_vectors, "call_func_every_type_code")
    assert P.encode_call_func(H_ADD, EVERY) == packet
    assert P.decode_request(packet) == P.CallFunc(H_ADD, tuple(EVERY))


def test_reply_vectors_decode(rpc_vectors):
    v = lambda name: P.decode_reply(_vec(rpc_vectors, name))  # noqa: E731
    assert v("return_handle") == P.Return(((TypeCode.OPAQUE_HANDLE, H_ADD),))
    assert v("return_null_handle") == P.Return(((TypeCode.OPAQUE_HANDLE, 0),))
    assert v("return_void") == P.Return(((TypeCode.NULL, None),))
    assert P.unpack_call_return(v("call_return_void").values) == (TypeCode.NULL, None)
    assert P.unpack_call_return(v("call_return_int").values) == (TypeCode.INT, 2037)
    assert P.unpack_call_return(v("call_return_func").values) == (TypeCode.PACKED_FUNC_HANDLE, 0xFFFF8001)
    assert P.unpack_call_return(v("call_return_module").values) == (TypeCode.MODULE_HANDLE, 0xA0000000)
    assert P.unpack_call_return(v("call_return_bytes").values) == (
        TypeCode.BYTES,
        struct.pack("<2d", 1e-3, 2e-3),
    )
    assert v("exception") == P.ExceptionReply("boom")
    assert v("copy_ack") == P.CopyAck(struct.pack("<2f", 1.0, 2.0))
    # ... and the encoders produce the same bytes
    assert P.encode_return([(TypeCode.INT, 0), (TypeCode.NULL, None)]) != _vec(rpc_vectors, "call_return_void")
    assert P.encode_return([(TypeCode.INT, 4), (TypeCode.NULL, None)]) == _vec(rpc_vectors, "call_return_void")
    assert P.encode_exception("boom") == _vec(rpc_vectors, "exception")
    assert P.encode_copy_ack(struct.pack("<2f", 1.0, 2.0)) == _vec(rpc_vectors, "copy_ack")


def test_copy_chunking_fills_the_packet_limit(rpc_vectors):
    ex = rpc_vectors["copy_overhead"]["example"]
    assert P.copy_chunk_size(ex["max_transfer"], ex["ndim"]) == ex["chunk"]
    for ndim in range(0, 5):
        t = DLTensorRef(0x1000, CPU, F32, (1,) * ndim)
        n = P.copy_chunk_size(2037, ndim)
        packet = P.encode_copy_to_remote(t, bytes(n))
        assert len(packet) - 8 == 2037  # exactly the negotiated maximum
        assert 3 + len(packet) == 2048  # session header + packet: TVM_CRT_MAX_PACKET_SIZE_BYTES
    with pytest.raises(LocalProtocolError, match="leaves no room"):
        P.copy_chunk_size(52, 1)


def test_unpack_call_return_rejects_bad_layouts():
    with pytest.raises(RemoteProtocolError, match="first value"):
        P.unpack_call_return(((TypeCode.STR, "x"),))
    with pytest.raises(RemoteProtocolError, match="expected 2 values"):
        P.unpack_call_return(((TypeCode.INT, 0),))
    with pytest.raises(RemoteProtocolError, match="carried as"):
        P.unpack_call_return(((TypeCode.INT, 0), (TypeCode.FLOAT, 1.0)))
    with pytest.raises(RemoteProtocolError, match="unknown return type code"):
        P.unpack_call_return(((TypeCode.INT, 99), (TypeCode.INT, 1)))
    nd = ((TypeCode.INT, 13), (TypeCode.DLTENSOR_HANDLE, T4), (TypeCode.OPAQUE_HANDLE, 7))
    assert P.unpack_call_return(nd) == (TypeCode.NDARRAY_HANDLE, (T4, 7))


@pytest.mark.parametrize(
    ("arg", "match"),
    [
        ((TypeCode.INT, 2**63), "INT value"),
        ((TypeCode.UINT, -1), "UINT value"),
        ((TypeCode.FLOAT, "1"), "FLOAT value"),
        ((TypeCode.NULL, 0), "NULL value"),
        ((TypeCode.STR, b"x"), "STR value"),
        ((TypeCode.BYTES, "x"), "BYTES value"),
        ((TypeCode.DATA_TYPE, "float32"), "DATA_TYPE value"),
        ((TypeCode.DEVICE, (1, 0)), "DEVICE value"),
        ((TypeCode.DLTENSOR_HANDLE, 5), "DLTENSOR_HANDLE value"),
        ((TypeCode.OPAQUE_HANDLE, -5), "handle value"),
        ((42, 0), "unknown type code 42"),
    ],
)
def test_encoder_rejects_values_the_wire_cannot_carry(arg, match):
    with pytest.raises(LocalProtocolError, match=match):
        P.encode_packed_seq([arg])


def test_to_packed_arg():
    assert P.to_packed_arg(True) == (TypeCode.INT, 1)
    assert P.to_packed_arg(2.5) == (TypeCode.FLOAT, 2.5)
    assert P.to_packed_arg(None) == (TypeCode.NULL, None)
    assert P.to_packed_arg(bytearray(b"a")) == (TypeCode.BYTES, b"a")
    with pytest.raises(LocalProtocolError, match="no RPC type code for a list"):
        P.to_packed_arg([1])


u64 = st.integers(0, 2**64 - 1)
dtypes = st.builds(DLDataType, st.integers(0, 255), st.integers(0, 255), st.integers(0, 0xFFFF))
devices = st.builds(DLDevice, st.integers(-(2**31), 2**31 - 1), st.integers(-(2**31), 2**31 - 1))
tensors = st.builds(
    DLTensorRef, u64, devices, dtypes, st.lists(st.integers(-(2**63), 2**63 - 1), max_size=6).map(tuple), u64
)
VALUES = {
    TypeCode.INT: st.integers(-(2**63), 2**63 - 1),
    TypeCode.UINT: u64,
    TypeCode.FLOAT: st.floats(allow_nan=False),
    TypeCode.OPAQUE_HANDLE: u64,
    TypeCode.NULL: st.none(),
    TypeCode.DATA_TYPE: dtypes,
    TypeCode.DEVICE: devices,
    TypeCode.DLTENSOR_HANDLE: tensors,
    TypeCode.OBJECT_HANDLE: u64,
    TypeCode.MODULE_HANDLE: u64,
    TypeCode.PACKED_FUNC_HANDLE: u64,
    TypeCode.STR: st.text(max_size=40),
    TypeCode.BYTES: st.binary(max_size=40),
    TypeCode.NDARRAY_HANDLE: u64,
}
args = st.lists(st.sampled_from(list(TypeCode)).flatmap(lambda tc: st.tuples(st.just(tc), VALUES[tc])), max_size=8)


@given(args)
def test_packed_sequence_roundtrip_every_type_code(seq):
    data = P.encode_packed_seq(seq)
    decoded, end = P.decode_packed_seq(data)
    assert end == len(data) and decoded == tuple(seq)


@given(u64, args)
def test_request_and_reply_roundtrip(handle, seq):
    assert P.decode_request(P.encode_call_func(handle, seq)) == P.CallFunc(handle, tuple(seq))
    assert P.decode_reply(P.encode_return(seq)) == P.Return(tuple(seq))
    for code in P.SYSCALL_CODES:
        assert P.decode_request(P.encode_syscall(code, seq)) == P.Syscall(code, tuple(seq))


@given(tensors, st.binary(max_size=100))
def test_copy_roundtrip(t, data):
    assert P.decode_request(P.encode_copy_to_remote(t, data)) == P.CopyToRemote(t, data)
    assert P.decode_request(P.encode_copy_from_remote(t, len(data))) == P.CopyFromRemote(t, len(data))
    assert P.decode_reply(P.encode_copy_ack(data)) == P.CopyAck(data)


def test_decoder_errors_name_the_field(rpc_vectors):
    packet = _vec(rpc_vectors, "call_func_add_one")
    with pytest.raises(RemoteProtocolError, match="length field says"):
        P.decode_request(packet[:-1])
    short = struct.pack("<Qi", 4 + 8 + 4, 3) + struct.pack("<Qi", 1, 1)  # one type code missing
    with pytest.raises(RemoteProtocolError, match="argument count 1 does not fit"):
        P.decode_request(short)
    bad_tc = struct.pack("<Qi", 4 + 8 + 8, 3) + struct.pack("<Qii", 1, 1, 77)
    with pytest.raises(RemoteProtocolError, match="argument 0 has unknown type code 77"):
        P.decode_request(bad_tc)
    with pytest.raises(RemoteProtocolError, match="is not a reply"):
        P.decode_reply(P.encode_shutdown())
    with pytest.raises(RemoteProtocolError, match="is not a request"):
        P.decode_request(P.encode_copy_ack(b""))
    with pytest.raises(RemoteProtocolError, match="trailing bytes"):
        P.decode_reply(
            _vec(rpc_vectors, "return_void")[:0] + struct.pack("<Qi", 4 + 8 + 1, 4) + struct.pack("<ii", 1, 4) + b"\x00"
        )


def _mutations(rpc_vectors):
    return [bytes.fromhex(v["packet"]) for v in rpc_vectors["packets"]]


@settings(max_examples=400)
@given(st.data())
def test_fuzz_decoders_raise_only_remote_protocol_error(rpc_vectors, data):
    """Random bytes, and vectors with bytes flipped, cut or inserted: decoded, or RemoteProtocolError."""
    base = data.draw(st.sampled_from(_mutations(rpc_vectors)) | st.binary(max_size=64))
    buf = bytearray(base)
    for _ in range(data.draw(st.integers(0, 4))):
        op = data.draw(st.sampled_from(["flip", "cut", "insert"]))
        if op == "flip" and buf:
            buf[data.draw(st.integers(0, len(buf) - 1))] ^= data.draw(st.integers(1, 255))
        elif op == "cut" and buf:
            del buf[data.draw(st.integers(0, len(buf) - 1)) :]
        else:
            buf[data.draw(st.integers(0, len(buf))) : 0] = data.draw(st.binary(min_size=1, max_size=8))
    if data.draw(st.booleans()) and len(buf) >= 8:
        buf[:8] = struct.pack("<Q", len(buf) - 8)  # keep the length right so the body parser is reached
    for decode in (P.decode_request, P.decode_reply):
        try:
            decode(bytes(buf))
        except RemoteProtocolError:
            pass


@given(tensors, st.binary(max_size=300), st.integers(1, 120))
def test_bulk_copy_packets_equal_the_plain_encoders(t, data, chunk):
    t = DLTensorRef(t.data, t.device, t.dtype, t.shape, t.byte_offset % 2**32)
    ups = list(P.copy_to_remote_packets(t, data, chunk))
    downs = list(P.copy_from_remote_packets(t, len(data), chunk))
    assert [(o, n) for o, n, _ in ups] == [(o, min(chunk, len(data) - o)) for o in range(0, len(data), chunk)]
    assert [(o, n) for o, n, _ in downs] == [(o, n) for o, n, _ in ups]
    for (off, n, up), (_, _, down) in zip(ups, downs, strict=True):
        at = DLTensorRef(t.data, t.device, t.dtype, t.shape, t.byte_offset + off)
        assert up == P.encode_copy_to_remote(at, data[off : off + n])
        assert down == P.encode_copy_from_remote(at, n)
