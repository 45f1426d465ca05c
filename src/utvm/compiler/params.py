"""Field-updatable parameters (`--params external`): the parameter blob, its writer and its Python reader.

With `--params external` the generated operators keep no constant array of their own: every array the
operators file would declare (`FileScope.data_arrays`: the model's weights and biases, and the tables the
kernels derive from them) lives in one binary blob, `params.bin` (`parameters/params.bin` in the Model
Library Format). The code reads it through the `TVMContext` (`context->params`), so a firmware can take new
weights without being rebuilt: the application validates a blob with `TVMSetParameters` (header-only,
tvm/runtime/crt/tvm_micro_runtime.h), which refuses a wrong or corrupt one with its own error code and never
lets the model run on it. The blob may live anywhere the CPU can read: a linker section of flash, an address
the application learns at run time, RAM.

Layout (every integer little-endian; offsets count from the blob's first byte):

    offset  bytes   field
    0       4       magic "UTVP"
    4       4       format version (FORMAT_VERSION, 1)
    8       32      model hash: SHA-256 of the code that reads the blob (`code_hash`)
    40      4       total size of the blob in bytes, CRC included
    44      4       number of arrays N
    48      8 * N   per array: u32 offset, u32 size in bytes (in the order of the operators file)
    ...             the arrays, each at an offset that is a multiple of ALIGNMENT (16), zero padding between
    total-4 4       CRC-32 (IEEE 802.3: reflected polynomial 0xEDB88320, initial value and final XOR
                    0xFFFFFFFF, i.e. zlib.crc32) of bytes [0, total - 4)

The model hash identifies the compiled code, not the weights: it is the SHA-256 of the generated operators
file (whose text fixes each array's place, type and use) without its comments, after a fixed prefix. Two
trainings of one model compiled alike have the same code and so the same hash, and each other's blobs fit; a
blob of another model, or of the same model compiled so that its code differs (other options, quantization
parameters or shapes, which the code bakes in, or weights that make a kernel choose other code), is refused.
Comments are left out because kernels write facts about the compiled weights in them (the bound that proves
an accumulator cannot overflow), which are not code. A blob for new weights is made by compiling the model
with them (`utvm compile --params external`): that compile proves its own bounds, and its blob fits every
firmware whose code is the same. The blob must start at an address that is a multiple of ALIGNMENT.

Validation order (the C side, `TVMValidateParameters`, and `validate` here are the same): the blob is
16-byte aligned (`kTvmErrorParamsMisaligned`); it holds the magic and version (`kTvmErrorParamsTruncated`
when shorter than 8 bytes), the magic is right (`kTvmErrorParamsBadMagic`), the version is this one
(`kTvmErrorParamsBadVersion`); the whole header is there (`...Truncated`); the model hash is the model's
(`kTvmErrorParamsOtherModel`); the blob is as long as it says (`...Truncated`), its size and every array's
offset and size are the model's (`kTvmErrorParamsSizeMismatch`); the CRC is right (`kTvmErrorParamsCrcMismatch`).
"""

from __future__ import annotations

import hashlib
import re
import struct
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from utvm.errors import ModelFormatError

MAGIC = b"UTVP"
FORMAT_VERSION = 1
HASH_BYTES = 32
HEADER_BYTES = 48
ENTRY_BYTES = 8
CRC_BYTES = 4
ALIGNMENT = 16
#: what `code_hash` puts before the operators file's text
HASH_PREFIX = b"utvm parameter blob v1\n"
#: the name of the blob in the Model Library Format
MLF_PATH = "parameters/params.bin"

#: The errors a blob is refused with (tvm/runtime/crt/error_codes.h, category 10): name -> code.
ERRORS: dict[str, int] = {
    "kTvmErrorParamsBadMagic": 0x0A00,
    "kTvmErrorParamsBadVersion": 0x0A01,
    "kTvmErrorParamsOtherModel": 0x0A02,
    "kTvmErrorParamsTruncated": 0x0A03,
    "kTvmErrorParamsSizeMismatch": 0x0A04,
    "kTvmErrorParamsCrcMismatch": 0x0A05,
    "kTvmErrorParamsMisaligned": 0x0A06,
    "kTvmErrorParamsMissing": 0x0A07,
}
#: what each error means, in the words the generated code and `validate` use
MEANINGS: dict[str, str] = {
    "kTvmErrorParamsBadMagic": "not a utvm parameter blob (bad magic)",
    "kTvmErrorParamsBadVersion": "a parameter blob of another format version",
    "kTvmErrorParamsOtherModel": "the parameter blob of another model (model hash differs)",
    "kTvmErrorParamsTruncated": "the parameter blob is truncated",
    "kTvmErrorParamsSizeMismatch": "the parameter blob's sizes differ from the model's",
    "kTvmErrorParamsCrcMismatch": "the parameter blob is corrupt (CRC-32 mismatch)",
    "kTvmErrorParamsMisaligned": "the parameter blob is not 16-byte aligned",
    "kTvmErrorParamsMissing": "no parameter blob in the context (TVMSetParameters)",
}


class ParamsBlobError(ModelFormatError):
    """A parameter blob refused: `code_name` is the C error (`ERRORS`) the device would return."""

    def __init__(self, code_name: str, detail: str) -> None:
        super().__init__(f"{MEANINGS[code_name]}: {detail} ({code_name}, {ERRORS[code_name]:#06x})")
        self.code_name = code_name
        self.code = ERRORS[code_name]


def _align(n: int) -> int:
    return (n + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT


@dataclass(frozen=True, slots=True)
class ParamArray:
    """One array of the blob: the C name the operators file gives it, its element type, offset and bytes."""

    name: str
    ctype: str
    offset: int
    size: int

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "c_type": self.ctype, "offset": self.offset, "size": self.size}


@dataclass(frozen=True, slots=True)
class ParamsLayout:
    """Where everything is in a model's blob, and the hash of the code that reads it."""

    model_hash: bytes
    arrays: tuple[ParamArray, ...]
    total_size: int

    def to_json(self) -> dict[str, Any]:
        """metadata.json's `modules.<m>.utvm.params` (with the mode and the blob's place in the archive)."""
        return {"mode": "external", "file": MLF_PATH, "format_version": FORMAT_VERSION,
                "model_hash": self.model_hash.hex(), "size_bytes": self.total_size, "alignment": ALIGNMENT,
                "arrays": [a.to_json() for a in self.arrays]}

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> ParamsLayout:
        arrays = tuple(ParamArray(str(a["name"]), str(a["c_type"]), int(a["offset"]), int(a["size"]))
                       for a in d["arrays"])
        h = bytes.fromhex(str(d["model_hash"]))
        if len(h) != HASH_BYTES:
            raise ValueError(f"model_hash of {len(h)} bytes")
        return ParamsLayout(h, arrays, int(d["size_bytes"]))


def place_arrays(arrays: Sequence[tuple[str, str, int]]) -> tuple[tuple[ParamArray, ...], int]:
    """(name, C type, bytes) of every array, in order -> their places in the blob and its total size. Every
    array starts on ALIGNMENT and owns at least one aligned block (an empty array is declared with one zero
    element in C: its block is zeros too)."""
    pos = _align(HEADER_BYTES + ENTRY_BYTES * len(arrays))
    placed = []
    for name, ctype, size in arrays:
        placed.append(ParamArray(name, ctype, pos, size))
        pos = _align(pos + max(size, 1))
    return tuple(placed), pos + CRC_BYTES


#: a C comment, or a string or character literal (kept: it is code)
_COMMENT_OR_LITERAL = re.compile(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)


def code_text(source: str) -> str:
    """C `source` without its comments (each becomes one space; string and character literals stay)."""
    return _COMMENT_OR_LITERAL.sub(lambda m: " " if m.group(0)[0] == "/" else m.group(0), source)


def code_hash(ops_source: str) -> bytes:
    """The model hash of a blob: SHA-256 of HASH_PREFIX + the code of the generated operators file that reads
    it, its comments left out (`code_text`; see the module docstring)."""
    return hashlib.sha256(HASH_PREFIX + code_text(ops_source).encode()).digest()


def write_blob(layout: ParamsLayout, data: Mapping[str, bytes]) -> bytes:
    """The blob of `layout` holding `data` (array name -> its bytes, every array of the layout)."""
    missing = [a.name for a in layout.arrays if a.name not in data]
    if missing:
        raise ValueError(f"parameter blob: no data for array {missing[0]!r}")
    buf = bytearray(layout.total_size)
    struct.pack_into("<4sI32sII", buf, 0, MAGIC, FORMAT_VERSION, layout.model_hash, layout.total_size,
                     len(layout.arrays))
    for k, a in enumerate(layout.arrays):
        raw = data[a.name]
        if len(raw) != a.size:
            raise ValueError(f"parameter blob: array {a.name!r} has {len(raw)} bytes, the layout says {a.size}")
        struct.pack_into("<II", buf, HEADER_BYTES + ENTRY_BYTES * k, a.offset, a.size)
        buf[a.offset:a.offset + a.size] = raw
    crc_at = layout.total_size - CRC_BYTES
    struct.pack_into("<I", buf, crc_at, zlib.crc32(bytes(buf[:crc_at])))
    return bytes(buf)


@dataclass(frozen=True, slots=True)
class BlobHeader:
    """What a blob says about itself (`read_header`)."""

    version: int
    model_hash: bytes
    total_size: int
    entries: tuple[tuple[int, int], ...]  # (offset, size) per array


def read_header(blob: bytes) -> BlobHeader:
    """The header of `blob`, checking only that it is there and has the magic (ParamsBlobError otherwise)."""
    if len(blob) < 8:
        raise ParamsBlobError("kTvmErrorParamsTruncated", f"{len(blob)} bytes, the header needs {HEADER_BYTES}")
    if blob[:4] != MAGIC:
        raise ParamsBlobError("kTvmErrorParamsBadMagic", f"the blob starts with {blob[:4].hex()}, not "
                                                         f"{MAGIC.hex()} ({MAGIC.decode()})")
    (version,) = struct.unpack_from("<I", blob, 4)
    if version != FORMAT_VERSION:
        raise ParamsBlobError("kTvmErrorParamsBadVersion", f"format version {version}, this code reads "
                                                           f"{FORMAT_VERSION}")
    if len(blob) < HEADER_BYTES:
        raise ParamsBlobError("kTvmErrorParamsTruncated", f"{len(blob)} bytes, the header needs {HEADER_BYTES}")
    _m, _v, h, total, n = struct.unpack_from("<4sI32sII", blob, 0)
    table_end = HEADER_BYTES + ENTRY_BYTES * n
    entries = tuple(struct.unpack_from("<II", blob, HEADER_BYTES + ENTRY_BYTES * k)
                    for k in range(n)) if table_end <= len(blob) else ()
    return BlobHeader(version, h, total, entries)


def validate(blob: bytes, layout: ParamsLayout) -> None:
    """Check `blob` against the model's `layout` as TVMValidateParameters does, in the same order (the module
    docstring); ParamsBlobError naming the first fault and its C error code."""
    head = read_header(blob)
    if head.model_hash != layout.model_hash:
        raise ParamsBlobError("kTvmErrorParamsOtherModel", f"its model hash is {head.model_hash.hex()[:16]}..., "
                                                           f"the model's {layout.model_hash.hex()[:16]}...")
    if head.total_size > len(blob):
        raise ParamsBlobError("kTvmErrorParamsTruncated", f"{len(blob)} bytes of the {head.total_size} its "
                                                          "header declares")
    if head.total_size != layout.total_size or len(head.entries) != len(layout.arrays):
        raise ParamsBlobError("kTvmErrorParamsSizeMismatch",
                              f"{head.total_size} bytes in {len(head.entries)} arrays, the model reads "
                              f"{layout.total_size} bytes in {len(layout.arrays)}")
    for (off, size), a in zip(head.entries, layout.arrays, strict=True):
        if (off, size) != (a.offset, a.size):
            raise ParamsBlobError("kTvmErrorParamsSizeMismatch", f"array {a.name!r} is at {off} ({size} bytes), "
                                                                 f"the model reads it at {a.offset} ({a.size} bytes)")
    crc_at = head.total_size - CRC_BYTES
    (stored,) = struct.unpack_from("<I", blob, crc_at)
    actual = zlib.crc32(blob[:crc_at])
    if stored != actual:
        raise ParamsBlobError("kTvmErrorParamsCrcMismatch", f"stored {stored:#010x}, computed {actual:#010x}")


def array_data(blob: bytes, layout: ParamsLayout) -> dict[str, bytes]:
    """The bytes of every array of a valid `blob` (validated first), by C name."""
    validate(blob, layout)
    return {a.name: blob[a.offset:a.offset + a.size] for a in layout.arrays}
