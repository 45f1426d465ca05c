"""The RPC layer of the link (docs/architecture.md §5.3): MinRPC codes and the packed-sequence codec, sans-IO.

A packet is `u64 nbytes (bytes after this field) | i32 code | body`; every integer is little-endian. The
encoders build packets from plain values; the decoders take one whole packet (the body of one NORMAL
session message) and return a frozen request or reply, raising `RemoteProtocolError` — and nothing else —
on any malformed input (fuzzed in `tests/rpc/test_protocol.py`). Encoders raise `LocalProtocolError` when
given a value the wire cannot carry.

A packed sequence is `i32 n | i32 type_code[n] | values`; in Python it is a sequence of
`(type_code, value)` pairs. Values per type code:

    0 INT, 1 UINT, 2 FLOAT    8 bytes (i64, u64, f64)            -> int, int, float
    3 OPAQUE_HANDLE, 8 OBJECT, 9 MODULE, 10 PACKED_FUNC, 13 NDARRAY_HANDLE   u64 handle  -> int
    4 NULL                    0 bytes                            -> None
    5 DATA_TYPE               u8 code, u8 bits, u16 lanes, i32 pad -> DLDataType
    6 DEVICE                  i32 device_type, i32 device_id      -> DLDevice
    7 DLTENSOR_HANDLE         u64 data, Device, i32 ndim, DataType (4 bytes), i64 shape[ndim],
                              u64 byte_offset (strides are always NULL) -> DLTensorRef
    11 STR, 12 BYTES          u64 length + bytes                  -> str (UTF-8), bytes
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from utvm.errors import LocalProtocolError, RemoteProtocolError
from utvm.runtime.typecodes import TypeCode

__all__ = [
    "COPY_OVERHEAD_BASE",
    "RPC_PROTOCOL_VERSION",
    "SYSCALL_CODES",
    "CallFunc",
    "CopyAck",
    "CopyFromRemote",
    "CopyToRemote",
    "DLDataType",
    "DLDevice",
    "DLTensorRef",
    "ExceptionReply",
    "InitServer",
    "PackedArg",
    "RPCCode",
    "Return",
    "Shutdown",
    "Syscall",
    "copy_chunk_size",
    "copy_from_remote_packets",
    "copy_to_remote_packets",
    "decode_packed_seq",
    "decode_reply",
    "decode_request",
    "encode_call_func",
    "encode_copy_ack",
    "encode_copy_from_remote",
    "encode_copy_to_remote",
    "encode_exception",
    "encode_init_server",
    "encode_packed_seq",
    "encode_return",
    "encode_shutdown",
    "encode_syscall",
    "to_packed_arg",
    "unpack_call_return",
]

RPC_PROTOCOL_VERSION = "0.8.0"
MAX_NDIM = 32  # a sanity bound on decoded tensors (the CRT's limit is far lower)


class RPCCode(enum.IntEnum):
    NONE = 0
    SHUTDOWN = 1
    INIT_SERVER = 2
    CALL_FUNC = 3
    RETURN = 4
    EXCEPTION = 5
    COPY_FROM_REMOTE = 6
    COPY_TO_REMOTE = 7
    COPY_ACK = 8
    GET_GLOBAL_FUNC = 9
    FREE_HANDLE = 10
    DEV_SET_DEVICE = 11
    DEV_GET_ATTR = 12
    DEV_ALLOC_DATA = 13
    DEV_FREE_DATA = 14
    DEV_STREAM_SYNC = 15
    COPY_AMONG_REMOTE = 16
    DEV_ALLOC_DATA_WITH_SCOPE = 17
    DEV_CREATE_STREAM = 18
    DEV_FREE_STREAM = 19
    DEV_SET_STREAM = 20


SYSCALL_CODES = frozenset(c for c in RPCCode if RPCCode.GET_GLOBAL_FUNC <= c <= RPCCode.DEV_SET_STREAM)
# Bytes of a CopyToRemote/CopyFromRemote packet besides the data and the shape (TVM's overhead formula):
# i32 code + u64 data + Device(8) + i32 ndim + DataType(4) + u64 byte_offset + u64 nbytes.
COPY_OVERHEAD_BASE = 44


def copy_chunk_size(max_transfer_size: int, ndim: int) -> int:
    """Data bytes per copy packet so that the RPC packet (minus its u64 length) fits `max_transfer_size`."""
    size = max_transfer_size - (COPY_OVERHEAD_BASE + 8 * ndim)
    if size <= 0:
        raise LocalProtocolError(
            f"max transfer size {max_transfer_size} leaves no room for data in a copy "
            f"of a {ndim}-d tensor (overhead {COPY_OVERHEAD_BASE + 8 * ndim} bytes)"
        )
    return size


def _check_int(name: str, v: object, lo: int, hi: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise LocalProtocolError(f"{name} must be an int in {lo}..{hi}, got {v!r}")
    return v


@dataclass(frozen=True, slots=True)
class DLDataType:
    code: int
    bits: int
    lanes: int = 1

    def __post_init__(self) -> None:
        _check_int("DLDataType.code", self.code, 0, 0xFF)
        _check_int("DLDataType.bits", self.bits, 0, 0xFF)
        _check_int("DLDataType.lanes", self.lanes, 0, 0xFFFF)

    @property
    def itemsize(self) -> int:
        return (self.bits * self.lanes + 7) // 8


@dataclass(frozen=True, slots=True)
class DLDevice:
    device_type: int
    device_id: int = 0

    def __post_init__(self) -> None:
        _check_int("DLDevice.device_type", self.device_type, -(2**31), 2**31 - 1)
        _check_int("DLDevice.device_id", self.device_id, -(2**31), 2**31 - 1)


@dataclass(frozen=True, slots=True)
class DLTensorRef:
    """A DLTensor as it travels: `data` is a device address; strides are always NULL (compact)."""

    data: int
    device: DLDevice
    dtype: DLDataType
    shape: tuple[int, ...]
    byte_offset: int = 0

    def __post_init__(self) -> None:
        _check_int("DLTensor.data", self.data, 0, 2**64 - 1)
        _check_int("DLTensor.byte_offset", self.byte_offset, 0, 2**64 - 1)
        if not isinstance(self.device, DLDevice) or not isinstance(self.dtype, DLDataType):
            raise LocalProtocolError("DLTensor.device/dtype must be DLDevice/DLDataType")
        if not isinstance(self.shape, tuple) or len(self.shape) > 2**31 - 1:
            raise LocalProtocolError(f"DLTensor.shape must be a tuple, got {self.shape!r}")
        for d in self.shape:
            _check_int("DLTensor.shape[i]", d, -(2**63), 2**63 - 1)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def nbytes(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n * self.dtype.itemsize


PackedArg = tuple[int, Any]  # (type code, value)

# --- encoding -------------------------------------------------------------------------------------------
_I32x2 = struct.Struct("<ii")
_U64 = struct.Struct("<Q")
_I64 = struct.Struct("<q")
_F64 = struct.Struct("<d")
_DTYPE_VALUE = struct.Struct("<BBHi")
_DTYPE = struct.Struct("<BBH")
_HEADER = struct.Struct("<Qi")
_TENSOR_HEAD = struct.Struct("<QiiiBBH")  # data, device type, device id, ndim, dtype code/bits/lanes


def _enc_int(v: Any) -> bytes:
    return _I64.pack(_check_int("INT value", v, -(2**63), 2**63 - 1))


def _enc_uint(v: Any) -> bytes:
    return _U64.pack(_check_int("UINT value", v, 0, 2**64 - 1))


def _enc_float(v: Any) -> bytes:
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise LocalProtocolError(f"FLOAT value must be a float, got {v!r}")
    return _F64.pack(float(v))


def _enc_handle(v: Any) -> bytes:
    return _U64.pack(_check_int("handle value", v, 0, 2**64 - 1))


def _enc_null(v: Any) -> bytes:
    if v is not None:
        raise LocalProtocolError(f"NULL value must be None, got {v!r}")
    return b""


def _enc_dtype(v: Any) -> bytes:
    if not isinstance(v, DLDataType):
        raise LocalProtocolError(f"DATA_TYPE value must be a DLDataType, got {v!r}")
    return _DTYPE_VALUE.pack(v.code, v.bits, v.lanes, 0)


def _enc_device(v: Any) -> bytes:
    if not isinstance(v, DLDevice):
        raise LocalProtocolError(f"DEVICE value must be a DLDevice, got {v!r}")
    return _I32x2.pack(v.device_type, v.device_id)


def encode_tensor(t: DLTensorRef) -> bytes:
    if not isinstance(t, DLTensorRef):
        raise LocalProtocolError(f"DLTENSOR_HANDLE value must be a DLTensorRef, got {t!r}")
    n = len(t.shape)
    return b"".join(
        (
            _TENSOR_HEAD.pack(
                t.data, t.device.device_type, t.device.device_id, n, t.dtype.code, t.dtype.bits, t.dtype.lanes
            ),
            struct.pack(f"<{n}q", *t.shape),
            _U64.pack(t.byte_offset),
        )
    )


def _enc_str(v: Any) -> bytes:
    if not isinstance(v, str):
        raise LocalProtocolError(f"STR value must be a str, got {v!r}")
    try:
        b = v.encode("utf-8")
    except UnicodeEncodeError as exc:  # a lone surrogate
        raise LocalProtocolError(
            f"STR value {v[:40]!r} cannot be sent: the character at index {exc.start} is not valid in UTF-8"
        ) from None
    return _U64.pack(len(b)) + b


def _enc_bytes(v: Any) -> bytes:
    if not isinstance(v, bytes | bytearray | memoryview):
        raise LocalProtocolError(f"BYTES value must be bytes, got {type(v).__name__}")
    b = bytes(v)
    return _U64.pack(len(b)) + b


_ENCODERS = {
    TypeCode.INT: _enc_int,
    TypeCode.UINT: _enc_uint,
    TypeCode.FLOAT: _enc_float,
    TypeCode.OPAQUE_HANDLE: _enc_handle,
    TypeCode.NULL: _enc_null,
    TypeCode.DATA_TYPE: _enc_dtype,
    TypeCode.DEVICE: _enc_device,
    TypeCode.DLTENSOR_HANDLE: encode_tensor,
    TypeCode.OBJECT_HANDLE: _enc_handle,
    TypeCode.MODULE_HANDLE: _enc_handle,
    TypeCode.PACKED_FUNC_HANDLE: _enc_handle,
    TypeCode.STR: _enc_str,
    TypeCode.BYTES: _enc_bytes,
    TypeCode.NDARRAY_HANDLE: _enc_handle,
}
_ENCODERS_BY_INT = {int(k): v for k, v in _ENCODERS.items()}


def to_packed_arg(value: Any) -> PackedArg:
    """The (type code, value) pair for a plain Python value (handles must be given as pairs)."""
    if value is None:
        return (TypeCode.NULL, None)
    if isinstance(value, bool | int):
        return (TypeCode.INT, int(value))
    if isinstance(value, float):
        return (TypeCode.FLOAT, value)
    if isinstance(value, str):
        return (TypeCode.STR, value)
    if isinstance(value, bytes | bytearray | memoryview):
        return (TypeCode.BYTES, bytes(value))
    if isinstance(value, DLDataType):
        return (TypeCode.DATA_TYPE, value)
    if isinstance(value, DLDevice):
        return (TypeCode.DEVICE, value)
    if isinstance(value, DLTensorRef):
        return (TypeCode.DLTENSOR_HANDLE, value)
    raise LocalProtocolError(f"no RPC type code for a {type(value).__name__} value {value!r:.60}")


_EMPTY_SEQ = b"\0\0\0\0"
_SEQ_HEADS = [struct.Struct(f"<i{n}i") for n in range(9)]  # `i32 n | i32 type_code[n]` for small n


def encode_packed_seq(args: Sequence[PackedArg]) -> bytes:
    n = len(args)
    if not n:
        return _EMPTY_SEQ
    codes = [int(tc) for tc, _ in args]
    head = _SEQ_HEADS[n] if n < len(_SEQ_HEADS) else struct.Struct(f"<i{n}i")
    parts = [head.pack(n, *codes)]
    encoders = _ENCODERS_BY_INT
    for i, (tc, v) in enumerate(args):
        enc = encoders.get(codes[i])
        if enc is None:
            raise LocalProtocolError(f"argument {i}: unknown type code {tc}")
        try:
            parts.append(enc(v))
        except LocalProtocolError as exc:  # name the argument (a try costs nothing until it raises)
            raise LocalProtocolError(f"argument {i}: {exc}") from None
    return b"".join(parts)


def _packet(code: int, *parts: bytes) -> bytes:
    body = b"".join(parts)
    return _HEADER.pack(4 + len(body), code) + body


def encode_init_server(version: str = RPC_PROTOCOL_VERSION, args: Sequence[PackedArg] = ()) -> bytes:
    v = version.encode("utf-8")
    return _packet(RPCCode.INIT_SERVER, _U64.pack(len(v)), v, encode_packed_seq(args))


def encode_shutdown() -> bytes:
    return _packet(RPCCode.SHUTDOWN)


_CALL_HEAD = struct.Struct("<QiQ")  # nbytes, code, function handle
_CALL_FUNC = int(RPCCode.CALL_FUNC)


def encode_call_func(handle: int, args: Sequence[PackedArg]) -> bytes:
    if type(handle) is not int or not 0 <= handle <= 0xFFFFFFFFFFFFFFFF:
        _enc_handle(handle)  # raises the usual error
    seq = encode_packed_seq(args)
    return _CALL_HEAD.pack(12 + len(seq), _CALL_FUNC, handle) + seq


def encode_syscall(code: int, args: Sequence[PackedArg]) -> bytes:
    if code not in SYSCALL_CODES:
        raise LocalProtocolError(f"RPC code {code} is not a syscall (9..20)")
    return _packet(code, encode_packed_seq(args))


def encode_copy_to_remote(tensor: DLTensorRef, data: bytes | bytearray | memoryview) -> bytes:
    return _packet(RPCCode.COPY_TO_REMOTE, encode_tensor(tensor), _U64.pack(len(data)), bytes(data))


def encode_copy_from_remote(tensor: DLTensorRef, nbytes: int) -> bytes:
    return _packet(RPCCode.COPY_FROM_REMOTE, encode_tensor(tensor), _enc_uint(nbytes))


def copy_to_remote_packets(
    tensor: DLTensorRef, data: bytes | bytearray | memoryview, chunk: int
) -> Iterator[tuple[int, int, bytes]]:
    """The CopyToRemote packets writing `data` into `tensor` in chunks of `chunk` bytes, stepping
    byte_offset: yields (offset, size, packet). The tensor is encoded once (this is the bulk path)."""
    head = encode_tensor(tensor)[:-8]  # everything before byte_offset
    code = struct.pack("<i", RPCCode.COPY_TO_REMOTE)
    total = len(data)
    for off in range(0, total, chunk):
        n = min(chunk, total - off)
        nbytes = 4 + len(head) + 16 + n
        yield (
            off,
            n,
            b"".join(
                (_U64.pack(nbytes), code, head, _U64.pack(tensor.byte_offset + off), _U64.pack(n), data[off : off + n])
            ),
        )


def copy_from_remote_packets(tensor: DLTensorRef, total: int, chunk: int) -> Iterator[tuple[int, int, bytes]]:
    """The CopyFromRemote packets reading `total` bytes of `tensor` in chunks: yields (offset, size, packet)."""
    head = _HEADER.pack(4 + len(encode_tensor(tensor)) + 8, RPCCode.COPY_FROM_REMOTE) + encode_tensor(tensor)[:-8]
    for off in range(0, total, chunk):
        n = min(chunk, total - off)
        yield off, n, head + _U64.pack(tensor.byte_offset + off) + _U64.pack(n)


def encode_return(args: Sequence[PackedArg]) -> bytes:
    return _packet(RPCCode.RETURN, encode_packed_seq(args))


def encode_exception(message: str) -> bytes:
    return _packet(RPCCode.EXCEPTION, encode_packed_seq([(TypeCode.STR, message)]))


def encode_copy_ack(data: bytes | bytearray | memoryview) -> bytes:
    return _packet(RPCCode.COPY_ACK, bytes(data))


# --- decoding -------------------------------------------------------------------------------------------
_I32 = struct.Struct("<i")
_TC = tuple(TypeCode)  # TypeCode by number, without the enum call


class _Reader:
    """Bounds-checked reads from one packet; a failure is a RemoteProtocolError naming the field."""

    __slots__ = ("buf", "pos", "kind", "code")

    def __init__(self, buf: bytes, pos: int, kind: str, code: int | None = None) -> None:
        self.buf, self.pos, self.kind, self.code = buf, pos, kind, code

    @property
    def what(self) -> str:  # built only for an error message
        return self.kind if self.code is None else f"{self.kind} ({_code_name(self.code)})"

    def need(self, n: int, field: str) -> int:
        """Claim the next n bytes; returns their offset."""
        pos = self.pos
        end = pos + n
        if n < 0 or end > len(self.buf):
            raise RemoteProtocolError(
                f"{self.what}: truncated {field}: needs {n} bytes at offset {pos}, {len(self.buf) - pos} left"
            )
        self.pos = end
        return pos

    def take(self, n: int, field: str) -> bytes:
        pos = self.need(n, field)
        return self.buf[pos : pos + n]

    def u64(self, field: str) -> int:
        return _U64.unpack_from(self.buf, self.need(8, field))[0]

    def end(self) -> None:
        if self.pos != len(self.buf):
            raise RemoteProtocolError(
                f"{self.what}: {len(self.buf) - self.pos} unexpected trailing bytes at offset {self.pos}"
            )


def _dec_tensor(r: _Reader, field: str = "DLTensor") -> DLTensorRef:
    data, dev_type, dev_id, ndim, code, bits, lanes = _TENSOR_HEAD.unpack_from(r.buf, r.need(_TENSOR_HEAD.size, field))
    if not 0 <= ndim <= MAX_NDIM:
        raise RemoteProtocolError(f"{r.what}: {field} has ndim {ndim}, outside 0..{MAX_NDIM}")
    shape = struct.unpack_from(f"<{ndim}q", r.buf, r.need(8 * ndim, f"{field} shape"))
    byte_offset = r.u64(f"{field} byte_offset")
    return DLTensorRef(data, DLDevice(dev_type, dev_id), DLDataType(code, bits, lanes), shape, byte_offset)


def _dec_i64(r: _Reader) -> int:
    return _I64.unpack_from(r.buf, r.need(8, "value"))[0]


def _dec_u64(r: _Reader) -> int:
    return _U64.unpack_from(r.buf, r.need(8, "value"))[0]


def _dec_f64(r: _Reader) -> float:
    return _F64.unpack_from(r.buf, r.need(8, "value"))[0]


def _dec_null(r: _Reader) -> None:
    return None


def _dec_dtype(r: _Reader) -> DLDataType:
    code, bits, lanes, _pad = _DTYPE_VALUE.unpack_from(r.buf, r.need(8, "value"))
    return DLDataType(code, bits, lanes)


def _dec_device(r: _Reader) -> DLDevice:
    return DLDevice(*_I32x2.unpack_from(r.buf, r.need(8, "value")))


def _dec_bytes(r: _Reader) -> bytes:
    n = r.u64("length")
    return r.take(n, f"value ({n} bytes)")


def _dec_str(r: _Reader) -> str:
    return _dec_bytes(r).decode("utf-8", errors="replace")


# The value decoder of each type code, indexed by the code.
_DECODERS = (
    _dec_i64,  # INT
    _dec_u64,  # UINT
    _dec_f64,  # FLOAT
    _dec_u64,  # OPAQUE_HANDLE
    _dec_null,  # NULL
    _dec_dtype,  # DATA_TYPE
    _dec_device,  # DEVICE
    _dec_tensor,  # DLTENSOR_HANDLE
    _dec_u64,  # OBJECT_HANDLE
    _dec_u64,  # MODULE_HANDLE
    _dec_u64,  # PACKED_FUNC_HANDLE
    _dec_str,  # STR
    _dec_bytes,  # BYTES
    _dec_u64,  # NDARRAY_HANDLE
)
assert len(_DECODERS) == len(TypeCode)


# Type codes whose values are one fixed-size scalar: a sequence of only these decodes with one struct call.
_SCALAR_FORMAT = {0: "q", 1: "Q", 2: "d", 3: "Q", 4: "", 8: "Q", 9: "Q", 10: "Q", 13: "Q"}
_scalar_structs: dict[tuple[int, ...], struct.Struct | None] = {}


def _scalar_struct(codes: tuple[int, ...]) -> struct.Struct | None:
    st = _scalar_structs.get(codes, False)
    if st is False:
        fmts = [_SCALAR_FORMAT.get(tc) for tc in codes]
        st = None if None in fmts else struct.Struct("<" + "".join(fmts))  # type: ignore[arg-type]
        if len(_scalar_structs) < 256:
            _scalar_structs[codes] = st
    return st  # type: ignore[return-value]


def _dec_seq(r: _Reader) -> tuple[PackedArg, ...]:
    buf = r.buf
    (n,) = _I32.unpack_from(buf, r.need(4, "argument count"))
    if n < 0 or 4 * n > len(buf) - r.pos:
        raise RemoteProtocolError(f"{r.what}: argument count {n} does not fit the {len(buf) - r.pos} bytes left")
    codes = struct.unpack_from(f"<{n}i", buf, r.need(4 * n, "type codes"))
    st = _scalar_struct(codes) if n <= 4 else None
    if st is not None and len(buf) - r.pos >= st.size:  # the fast path: scalars only
        values = iter(st.unpack_from(buf, r.need(st.size, "values")))
        return tuple((_TC[tc], None if tc == 4 else next(values)) for tc in codes)
    out = []
    for i, tc in enumerate(codes):
        if not 0 <= tc <= 13:
            raise RemoteProtocolError(f"{r.what}: argument {i} has unknown type code {tc}")
        try:
            out.append((_TC[tc], _DECODERS[tc](r)))
        except RemoteProtocolError as exc:
            raise RemoteProtocolError(f"argument {i} ({_TC[tc].name}): {exc}") from None
    return tuple(out)


def decode_packed_seq(buf: bytes, offset: int = 0, what: str = "packed sequence") -> tuple[tuple[PackedArg, ...], int]:
    """Decode one packed sequence at `offset`; returns (args, offset after it)."""
    r = _Reader(bytes(buf), offset, what)
    args = _dec_seq(r)
    return args, r.pos


@dataclass(frozen=True, slots=True)
class InitServer:
    version: str
    args: tuple[PackedArg, ...] = ()


@dataclass(frozen=True, slots=True)
class Shutdown:
    pass


@dataclass(frozen=True, slots=True)
class CallFunc:
    handle: int
    args: tuple[PackedArg, ...]


@dataclass(frozen=True, slots=True)
class Syscall:
    code: RPCCode
    args: tuple[PackedArg, ...]


@dataclass(frozen=True, slots=True)
class CopyToRemote:
    tensor: DLTensorRef
    data: bytes


@dataclass(frozen=True, slots=True)
class CopyFromRemote:
    tensor: DLTensorRef
    nbytes: int


@dataclass(frozen=True, slots=True)
class Return:
    values: tuple[PackedArg, ...]


@dataclass(frozen=True, slots=True)
class ExceptionReply:
    message: str


@dataclass(frozen=True, slots=True)
class CopyAck:
    data: bytes


Request = InitServer | Shutdown | CallFunc | Syscall | CopyToRemote | CopyFromRemote
Reply = Return | ExceptionReply | CopyAck


def _open_packet(buf: bytes | bytearray | memoryview, what: str) -> tuple[int, _Reader]:
    data = bytes(buf)
    if len(data) < _HEADER.size:
        raise RemoteProtocolError(f"{what}: packet of {len(data)} bytes is shorter than its 12-byte header")
    nbytes, code = _HEADER.unpack_from(data)
    if nbytes != len(data) - 8:
        raise RemoteProtocolError(
            f"{what}: length field says {nbytes} bytes follow it, the message holds {len(data) - 8}"
        )
    return code, _Reader(data, _HEADER.size, what, code)


def _code_name(code: int) -> str:
    try:
        return RPCCode(code).name
    except ValueError:
        return f"code {code}"


def decode_request(buf: bytes | bytearray | memoryview) -> Request:
    """Decode one whole RPC request packet (what a device receives)."""
    code, r = _open_packet(buf, "RPC request")
    req: Request
    if code == RPCCode.INIT_SERVER:
        n = r.u64("version length")
        version = r.take(n, "version").decode("utf-8", errors="replace")
        req = InitServer(version, _dec_seq(r))
    elif code == RPCCode.SHUTDOWN:
        req = Shutdown()
    elif code == RPCCode.CALL_FUNC:
        handle = r.u64("function handle")
        req = CallFunc(handle, _dec_seq(r))
    elif code in SYSCALL_CODES:
        req = Syscall(RPCCode(code), _dec_seq(r))
    elif code == RPCCode.COPY_TO_REMOTE:
        tensor = _dec_tensor(r, "tensor")
        n = r.u64("nbytes")
        req = CopyToRemote(tensor, r.take(n, f"data ({n} bytes)"))
    elif code == RPCCode.COPY_FROM_REMOTE:
        req = CopyFromRemote(_dec_tensor(r, "tensor"), r.u64("nbytes"))
    else:
        raise RemoteProtocolError(f"RPC request: {_code_name(code)} is not a request")
    r.end()
    return req


# Fast path of decode_reply for the commonest reply, a Return of at most 4 scalars (a CallFunc's
# `[(INT, type code), (code, value)]`): the packet's first bytes (length, code, count, type codes) map to the
# struct of its values. Anything else, or anything malformed, takes the general path.
_RETURN = int(RPCCode.RETURN)
_RETURN_HEAD = struct.Struct("<Qii")  # nbytes, code, argument count
_ReturnShape = tuple[int, struct.Struct, tuple[Any, ...], bool]
_return_shapes: dict[bytes, _ReturnShape | None] = {}


def _return_shape(key: bytes) -> _ReturnShape | None:
    """(packet size, values struct, type codes, any NULL) for a scalar-only Return whose head is `key`, else None."""
    nbytes, _code, n = _RETURN_HEAD.unpack_from(key)
    codes = struct.unpack_from(f"<{n}i", key, _RETURN_HEAD.size)
    st = _scalar_struct(codes)
    shape = None
    if st is not None and nbytes == len(key) - 8 + st.size:
        shape = (len(key) + st.size, st, tuple(_TC[tc] for tc in codes), 4 in codes)
    if len(_return_shapes) < 256:
        _return_shapes[key] = shape
    return shape


def _decode_return_fast(data: bytes) -> Return | None:
    if len(data) < 16:
        return None
    _nbytes, code, n = _RETURN_HEAD.unpack_from(data)
    if code != _RETURN or not 0 <= n <= 4 or len(data) < 16 + 4 * n:
        return None
    key = data[: 16 + 4 * n]
    shape = _return_shapes[key] if key in _return_shapes else _return_shape(key)
    if shape is None or len(data) != shape[0]:
        return None
    if not shape[3]:  # no NULL: one value per code
        return Return(tuple(zip(shape[2], shape[1].unpack_from(data, len(key)), strict=True)))
    values = iter(shape[1].unpack_from(data, len(key)))
    return Return(tuple((tc, None if tc is _NULL else next(values)) for tc in shape[2]))


_NULL = TypeCode.NULL


def decode_reply(buf: bytes | bytearray | memoryview) -> Reply:
    """Decode one whole RPC reply packet (what the host receives)."""
    if type(buf) is bytes:
        fast = _decode_return_fast(buf)
        if fast is not None:
            return fast
    code, r = _open_packet(buf, "RPC reply")
    rep: Reply
    if code == RPCCode.RETURN:
        rep = Return(_dec_seq(r))
    elif code == RPCCode.EXCEPTION:
        values = _dec_seq(r)
        if not values:
            raise RemoteProtocolError("RPC reply (EXCEPTION): carries no message")
        tc, v = values[0]
        rep = ExceptionReply(v if tc == TypeCode.STR else f"(exception value {TypeCode(tc).name} {v!r})")
    elif code == RPCCode.COPY_ACK:
        rep = CopyAck(r.take(len(r.buf) - r.pos, "data"))
    else:
        raise RemoteProtocolError(f"RPC reply: {_code_name(code)} is not a reply")
    r.end()
    return rep


def unpack_call_return(values: Sequence[PackedArg]) -> tuple[TypeCode, Any]:
    """The (type code, value) a CallFunc returned, from the Return's values `[(INT, tc), value...]`.

    Functions and modules travel as OPAQUE_HANDLE with their real code in the first value; an NDArray
    as (DLTENSOR, OPAQUE_HANDLE): its value is then (DLTensorRef, handle)."""
    if not values or values[0][0] != TypeCode.INT:
        raise RemoteProtocolError(f"CallFunc reply: first value must be the INT return type code, got {values!r:.80}")
    rtc = values[0][1]
    if not 0 <= rtc <= 13:
        raise RemoteProtocolError(f"CallFunc reply: unknown return type code {rtc}")
    rtc = _TC[rtc]
    if rtc == TypeCode.NDARRAY_HANDLE:
        if len(values) != 3 or values[1][0] != TypeCode.DLTENSOR_HANDLE or values[2][0] != TypeCode.OPAQUE_HANDLE:
            raise RemoteProtocolError(
                f"CallFunc reply: an NDArray return needs (DLTENSOR, OPAQUE) values, got "
                f"{[int(tc) for tc, _ in values]}"
            )
        return rtc, (values[1][1], values[2][1])
    if len(values) != 2:
        raise RemoteProtocolError(f"CallFunc reply: expected 2 values, got {len(values)}")
    tc, v = values[1]
    expected = TypeCode.OPAQUE_HANDLE if rtc in (TypeCode.PACKED_FUNC_HANDLE, TypeCode.MODULE_HANDLE) else rtc
    if tc not in (expected, rtc):
        raise RemoteProtocolError(f"CallFunc reply: return type {rtc.name} carried as {_TC[tc].name}")
    return rtc, v
