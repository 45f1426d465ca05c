#!/usr/bin/env python3
"""Coverage-guided fuzzing (atheris, libFuzzer) of what reads untrusted model files.

Targets (the first argument):

    tflite        utvm.frontend.from_tflite on the raw bytes (libFuzzer's byte mutations of the flatbuffer)
    tflite-gen    from_tflite on a model *built* from the bytes (tests/tflite_builder.py driven by a
                  FuzzedDataProvider: supported and unsupported ops, odd shapes, dtypes, quantization,
                  options, constants, tensor/buffer indices), which reaches the operator converters
    onnx          utvm.frontend.from_onnx on the raw bytes (protobuf)
    onnx-proto    from_onnx with a structure-aware mutator: the input is parsed as a ModelProto and one
                  field is changed (a dim, an attribute, an op type, an input name, an opset, element types,
                  initializer data; a graph input frozen into an initializer or a Constant node), falling
                  back to byte mutations when it does not parse
    mlf           utvm.mlf.load on the bytes written to a file (a Model Library Format tar)

The invariant: every input imports or raises a utvm.errors.UtvmError; anything else is a finding, and so
is a UtvmError raised because an allocation failed (a MemoryError in its chain), a peak RSS growth over
the allowance (`--rss-allowance-mb`, default 768 MiB above the start; the importers are held to a small
host budget, UTVM_HOST_MEMORY_BUDGET=64 MiB, unless the environment sets one) and an input running longer
than libFuzzer's -timeout. The address space is capped (RLIMIT_AS) at the start plus the allowance plus
512 MiB, so a runaway allocation fails (MemoryError) instead of exhausting the machine.

    python tests/fuzz/fuzz_import.py seeds <target> <dir>          # write the seed corpus
    python tests/fuzz/fuzz_import.py <target> [libFuzzer flags] <corpus dirs...>
    python tests/fuzz/fuzz_import.py <target> <reproducer>         # rerun one input

Seeds come from the model corpus (the repository's models/, or $UTVM_MODELS_DIR; missing is an error)
and, for mlf, archives exported from a compiled hello_world_int8 model plus hand-made malicious tars (`..`, absolute
paths, links, device nodes, FIFOs, huge sizes, duplicates, compressed variants).
"""

from __future__ import annotations

import io
import json
import math
import os
import random
import resource
import sys
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path

from utvm.support.models import models_dir

HERE = Path(__file__).resolve().parent
TESTS = HERE.parent
ROOT = TESTS.parent
MODELS = models_dir()
TARGETS = ("tflite", "tflite-gen", "onnx", "onnx-proto", "mlf")
FUZZ_BUDGET = 64 << 20  # UTVM_HOST_MEMORY_BUDGET for the importers while fuzzing

if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))  # tflite_builder


def models_dir() -> Path:
    if not MODELS.is_dir():
        raise SystemExit(f"fuzz_import: the model corpus {MODELS} is missing; the seed corpora are "
                         "built from it (the repository's models/ folder, or $UTVM_MODELS_DIR)")
    return MODELS


# ============================================================================================ seed corpora
def _tar(members: list[tuple[tarfile.TarInfo, bytes | None]], mode: str = "w") -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode=mode, format=tarfile.GNU_FORMAT) as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return buf.getvalue()


def _file(name: str, data: bytes) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o644
    return info, data


def _special(name: str, kind: bytes, link: str = "") -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = link
    info.mode = 0o644
    return info, None


def mlf_files() -> dict[str, bytes]:
    """The files of the MLF archive of hello_world_int8 compiled with the default options."""
    from utvm.compiler import compile as compile_model
    from utvm.frontend import load
    from utvm.mlf import model_library_files

    compiled = compile_model(load(models_dir() / "tflm" / "hello_world_int8.tflite"), model_name="hello")
    return model_library_files(compiled)


def mlf_seeds() -> list[bytes]:
    files = mlf_files()
    needed = {k: v for k, v in files.items() if not k.startswith(("runtime/", "templates/", "parameters/"))}
    small = [_file(k, v) for k, v in needed.items()]
    meta = json.loads(files["metadata.json"])
    seeds = [_tar([_file(k, v) for k, v in files.items()]), _tar(small)]
    for mode in ("w:gz", "w:bz2", "w:xz"):
        seeds.append(_tar(small, mode))
    evil = [
        _file("../escape.txt", b"x"), _file("/abs/escape.txt", b"x"), _file("./metadata.json", needed["metadata.json"]),
        _file("a/../../escape", b"x"), _file("back\\slash", b"x"), _file("nul\0name", b"x"),
        _special("link", tarfile.SYMTYPE, "/etc/passwd"), _special("metadata.json", tarfile.SYMTYPE, "../../x"),
        _special("hard", tarfile.LNKTYPE, "/etc/passwd"), _special("src/hello.json", tarfile.LNKTYPE, "metadata.json"),
        _special("dev", tarfile.CHRTYPE), _special("blk", tarfile.BLKTYPE), _special("fifo", tarfile.FIFOTYPE),
        _special("dir", tarfile.DIRTYPE), _special("cont", tarfile.CONTTYPE),
    ]
    for member in evil:
        seeds.append(_tar([member, *small]))
    seeds.append(_tar([*small, _file("metadata.json", b"{}")]))  # a duplicate member
    seeds.append(_tar([_file("metadata.json", b"[1, 2")]))
    seeds.append(_tar([_file("metadata.json", json.dumps(meta | {"version": 6}).encode())]))
    m = next(iter(meta["modules"]))
    graph = json.loads(needed[f"src/{m}.json"])
    for t in graph["tensors"]:
        if "data" not in t:
            t["shape"] = [65536, 65536, 65536, 65536]
            break
    huge = {**needed, f"src/{m}.json": json.dumps(graph).encode()}
    seeds.append(_tar([_file(k, v) for k, v in huge.items()]))
    info, _ = _file("codegen/host/src/big.c", b"")
    info.size = 8 << 30  # a member whose header claims 8 GiB; the data is not there
    seeds.append(_raw_tar(small) + info.tobuf(tarfile.GNU_FORMAT) + bytes(1024))
    seeds.append(_tar(small)[:700])  # truncated in the middle of a member
    return seeds


def _raw_tar(members: list[tuple[tarfile.TarInfo, bytes]]) -> bytes:
    """Headers and data blocks without the end-of-archive marker (to append hand-made headers to)."""
    out = b""
    for info, data in members:
        out += info.tobuf(tarfile.GNU_FORMAT) + data + bytes(-len(data) % tarfile.BLOCKSIZE)
    return out


def gen_seeds(n: int = 16) -> list[bytes]:
    rng = random.Random(1234)
    return [bytes(rng.randrange(256) for _ in range(rng.choice((16, 64, 256, 1024)))) for _ in range(n)]


def seeds_for(target: str) -> list[bytes]:
    models = models_dir()
    if target == "tflite":
        return [p.read_bytes() for p in sorted(models.rglob("*.tflite"))]
    if target in ("onnx", "onnx-proto"):
        return [p.read_bytes() for p in sorted(models.rglob("*.onnx"))]
    if target == "tflite-gen":
        return gen_seeds()
    if target == "mlf":
        return mlf_seeds()
    raise SystemExit(f"fuzz_import: unknown target {target!r}; targets: {', '.join(TARGETS)}")


def write_seeds(target: str, directory: Path) -> int:
    seeds = seeds_for(target)
    if not seeds:
        raise SystemExit(f"fuzz_import: no seeds for {target} under {MODELS}")
    directory.mkdir(parents=True, exist_ok=True)
    for i, s in enumerate(seeds):
        (directory / f"seed{i:03d}").write_bytes(s)
    return len(seeds)


# ============================================================================================ tflite-gen
_DIMS = (1, 1, 1, 2, 2, 3, 4, 4, 5, 8, 16, 0, -1, 7, 10, 32, 2**31 - 1, 65536)
_DTYPES = ("float32", "int8", "int8", "uint8", "int32", "int16", "int64", "bool", "float16", "float64")
_SCALES = (0.05, 0.1, 1.0, 0.0, -1.0, 1e-3, 2.0**-20, 1e38, float("inf"), float("nan"), 1e-45, 0.5)
_ZPS = (0, 0, -128, 127, 255, -1, 5, 128, -129, 2**31 - 1, -2**31)
_BYTE = (0, 1, 2, 3, 4, 5, 6, 7, 127)
_INT = (1, 1, 2, 3, 0, -1, 4, 2**31 - 1, -2**31, 8, 65536)
_OPS: dict[str, tuple[str | None, dict[str, tuple], tuple[int, int]]] = {
    "CONV_2D": ("Conv2DOptions", {"Padding": _BYTE, "StrideW": _INT, "StrideH": _INT,
                                  "FusedActivationFunction": _BYTE, "DilationWFactor": _INT,
                                  "DilationHFactor": _INT}, (2, 3)),
    "DEPTHWISE_CONV_2D": ("DepthwiseConv2DOptions", {"Padding": _BYTE, "StrideW": _INT, "StrideH": _INT,
                                                     "DepthMultiplier": _INT, "FusedActivationFunction": _BYTE,
                                                     "DilationWFactor": _INT, "DilationHFactor": _INT}, (2, 3)),
    "FULLY_CONNECTED": ("FullyConnectedOptions", {"FusedActivationFunction": _BYTE, "WeightsFormat": _BYTE,
                                                  "KeepNumDims": (0, 1), "AsymmetricQuantizeInputs": (0, 1)},
                        (2, 3)),
    "AVERAGE_POOL_2D": ("Pool2DOptions", {"Padding": _BYTE, "StrideW": _INT, "StrideH": _INT,
                                          "FilterWidth": _INT, "FilterHeight": _INT,
                                          "FusedActivationFunction": _BYTE}, (1, 1)),
    "ADD": ("AddOptions", {"FusedActivationFunction": _BYTE}, (2, 2)),
    "SUB": ("SubOptions", {"FusedActivationFunction": _BYTE}, (2, 2)),
    "MUL": ("MulOptions", {"FusedActivationFunction": _BYTE}, (2, 2)),
    "SOFTMAX": ("SoftmaxOptions", {"Beta": (1.0, 0.0, -1.0, 1e30, float("nan"), 0.5)}, (1, 1)),
    "CONCATENATION": ("ConcatenationOptions", {"Axis": (0, 1, 2, 3, -1, -5, 7, 2**31 - 1),
                                               "FusedActivationFunction": _BYTE}, (1, 4)),
    "MEAN": ("ReducerOptions", {"KeepDims": (0, 1)}, (2, 2)),
    "BATCH_MATMUL": ("BatchMatMulOptions", {"AdjX": (0, 1), "AdjY": (0, 1)}, (2, 2)),
    "RESHAPE": (None, {}, (1, 2)), "SQUEEZE": (None, {}, (1, 1)), "EXPAND_DIMS": (None, {}, (1, 2)),
    "QUANTIZE": (None, {}, (1, 1)), "DEQUANTIZE": (None, {}, (1, 1)), "PAD": (None, {}, (2, 2)),
    "PADV2": (None, {}, (2, 3)), "LOGISTIC": (None, {}, (1, 1)), "TANH": (None, {}, (1, 1)),
    "RELU": (None, {}, (1, 1)), "RELU6": (None, {}, (1, 1)), "RELU_N1_TO_1": (None, {}, (1, 1)),
    "RELU_0_TO_1": (None, {}, (1, 1)), "TRANSPOSE": (None, {}, (2, 2)), "GATHER": (None, {}, (2, 2)),
}
_OPS["MAX_POOL_2D"] = _OPS["AVERAGE_POOL_2D"]
_OPTION_CLASSES = sorted({spec[0] for spec in _OPS.values() if spec[0]})


def gen_tflite(data: bytes) -> bytes | None:
    """A TFLite model built from `data` (None when the builder itself cannot write what was drawn).

    Mostly coherent: a few source tensors (graph inputs, constants), then operators whose outputs are
    usually new tensors shaped like their first input, the graph outputs usually the last ones; every
    choice is sometimes made wrong (odd dims and dtypes, dangling or -1 indices, missing or foreign options).
    """
    try:
        return _gen_tflite(data)
    except Exception:  # a value the builder cannot encode (e.g. an int out of range): not an importer input
        return None


def _gen_tflite(data: bytes) -> bytes:
    import atheris
    import numpy as np

    from tflite_builder import TFLiteBuilder

    fdp = atheris.FuzzedDataProvider(data)

    def pick(seq):  # noqa: ANN001, ANN202
        return seq[fdp.ConsumeIntInRange(0, len(seq) - 1)]

    def rare(n: int) -> bool:
        return fdp.ConsumeIntInRange(0, n - 1) == 0

    b = TFLiteBuilder()
    tensors: list[tuple[tuple[int, ...], str, dict]] = []  # shape, dtype, quantization kwargs

    def new_tensor(shape: tuple[int, ...], dtype: str, quant: dict, const: bool) -> int:
        kw: dict = dict(quant)
        rank = len(shape)
        size = math.prod(shape) if all(0 <= d <= 4096 for d in shape) else -1
        if const and 0 <= size <= 4096:
            itemsize = np.dtype(dtype).itemsize
            raw = fdp.ConsumeBytes(size * itemsize).ljust(size * itemsize, b"\1")
            kw["data"] = np.frombuffer(raw, dtype=np.dtype(dtype).newbyteorder("<")).reshape(shape)
            if dtype.startswith("float") and fdp.ConsumeBool():
                kw["data"] = np.nan_to_num(kw["data"])
        if rank and rare(8):
            sig = list(shape)
            sig[fdp.ConsumeIntInRange(0, rank - 1)] = -1
            kw["shape_signature"] = sig
        if rare(16):
            kw["type_code"] = fdp.ConsumeIntInRange(0, 20)
        b.tensor(f"t{len(tensors)}" if not rare(8) else "dup", shape, dtype, **kw)
        tensors.append((shape, dtype, quant))
        return len(tensors) - 1

    def random_quant(shape: tuple[int, ...], dtype: str) -> dict:
        q = fdp.ConsumeIntInRange(0, 3) if dtype != "float32" or rare(4) else 0
        if q in (1, 3) or (q == 2 and not shape):
            return {"scale": pick(_SCALES), "zero_point": pick(_ZPS)}
        if q == 2:
            axis = fdp.ConsumeIntInRange(0, len(shape) - 1)
            n = shape[axis] if 0 < shape[axis] <= 64 and not rare(4) else fdp.ConsumeIntInRange(2, 5)
            return {"scale": [pick(_SCALES) for _ in range(n)],
                    "zero_point": [pick(_ZPS) for _ in range(n)] if fdp.ConsumeBool() else 0,
                    "axis": axis if not rare(6) else pick([-1, len(shape), 99])}
        return {}

    def random_shape() -> tuple[int, ...]:
        rank = pick([0, 1, 2, 2, 3, 4, 4, 4, 5, 6])
        return tuple(pick(_DIMS) if rare(3) else fdp.ConsumeIntInRange(1, 6) for _ in range(rank))

    for _ in range(fdp.ConsumeIntInRange(1, 4)):
        shape = random_shape()
        dtype = pick(_DTYPES)
        new_tensor(shape, dtype, random_quant(shape, dtype), const=fdp.ConsumeBool())
    sources = len(tensors)

    def index(limit: int) -> int:
        if rare(16):
            return -1
        if rare(16):
            return len(tensors) + fdp.ConsumeIntInRange(0, 3)
        return fdp.ConsumeIntInRange(0, limit - 1)

    ops = sorted(_OPS)
    last_outputs: list[int] = []
    for _ in range(fdp.ConsumeIntInRange(1, 5)):
        code = pick(ops)
        cls, fields, (lo, hi) = _OPS[code]
        n_in = fdp.ConsumeIntInRange(lo, hi) if not rare(8) else fdp.ConsumeIntInRange(0, 5)
        ins = [index(len(tensors)) for _ in range(n_in)]
        if rare(3) or not ins or not 0 <= ins[0] < len(tensors):  # a constant operand made for this op
            shape = random_shape()
            dtype = pick(_DTYPES)
            ins.append(new_tensor(shape, dtype, random_quant(shape, dtype), const=True))
        first = tensors[ins[0]] if 0 <= ins[0] < len(tensors) else None
        outs = []
        for _ in range(1 if not rare(8) else fdp.ConsumeIntInRange(0, 2)):
            if first is not None and not rare(4):
                outs.append(new_tensor(first[0], first[1], first[2] if not rare(4) else
                                       random_quant(first[0], first[1]), const=False))
            elif not rare(4):
                shape = random_shape()
                dtype = pick(_DTYPES)
                outs.append(new_tensor(shape, dtype, random_quant(shape, dtype), const=False))
            else:
                outs.append(index(len(tensors)))
        last_outputs = outs
        if cls is not None and rare(10):
            cls = None  # options missing
        elif rare(16):
            cls = pick(_OPTION_CLASSES)  # options of another op
            fields = _OPS[next(c for c, s in _OPS.items() if s[0] == cls)][1]
        values = {f: pick(v) for f, v in fields.items() if not rare(6)}
        if cls is None:
            b.op(code, ins, outs)
        else:
            b.op(code, ins, outs, cls, **values)
    graph_in = [i for i in range(sources) if "data" not in b._tensors[i] or b._tensors[i]["buffer"] == 0]
    graph_in = [i for i in graph_in if not rare(8)] + [index(len(tensors)) for _ in range(rare(8))]
    graph_out = last_outputs if not rare(4) else [index(len(tensors)) for _ in range(fdp.ConsumeIntInRange(0, 2))]
    return b.build(inputs=graph_in, outputs=graph_out)


# ============================================================================================ onnx-proto
_INTS = (0, 1, 2, 3, 4, -1, -2, 7, 8, 16, 255, 256, 2**15, 2**31 - 1, 2**31, -2**31, 2**32, 2**62, 2**63 - 1,
         -2**63)
_FLOATS = (0.0, -0.0, 1.0, -1.0, 0.5, 1e-30, 1e30, 3.4e38, float("inf"), float("-inf"), float("nan"))
_STRINGS = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID", "constant", "reflect", "edge", "", "x" * 300)
_ATTRS = ("axis", "axes", "perm", "pads", "strides", "kernel_shape", "dilations", "group", "auto_pad", "ceil_mode",
          "count_include_pad", "keepdims", "transA", "transB", "alpha", "beta", "epsilon", "allowzero", "shape",
          "value", "value_float", "value_floats", "value_int", "value_ints", "training_mode", "spatial", "mode",
          "noop_with_empty_axes", "min", "max", "storage_order", "sparse_value", "value_string")
_ELEM_TYPES = (1, 1, 1, 2, 3, 5, 6, 7, 9, 10, 11, 16, 0, 8, 30)
_OPSETS = (1, 5, 6, 7, 9, 10, 11, 12, 13, 14, 17, 18, 21, 0, 9999)


def _pick_int(rng: random.Random) -> int:
    return rng.choice(_INTS) if rng.random() < 0.7 else rng.randint(-8, 64)


def _random_tensor(rng: random.Random, name: str, dims: list[int], elem_type: int | None = None):  # noqa: ANN202
    import numpy as np
    from onnx import TensorProto, helper

    et = elem_type if elem_type is not None else rng.choice((1, 1, 1, 7, 6, 3, 2, 9))
    size = math.prod(dims) if all(0 <= d for d in dims) else 0
    if 0 <= size <= 4096 and et in (1, 2, 3, 5, 6, 7, 9, 10, 11):
        np_type = helper.tensor_dtype_to_np_dtype(et)
        if et == 1:
            arr = np.asarray([rng.choice((0.0, 1.0, -2.5, 0.1, 3.0, 1e6)) for _ in range(size)], np.float32)
        else:
            arr = np.asarray([rng.choice((0, 1, 2, 3, -1, 4, 8, 127)) for _ in range(size)]).astype(np_type)
        t = helper.make_tensor(name, et, dims, arr.reshape(-1).tobytes(), raw=True) if rng.random() < 0.7 else \
            helper.make_tensor(name, et, dims, arr.reshape(-1).tolist())
        return t
    t = TensorProto(name=name, data_type=et, raw_data=bytes(rng.randrange(0, 64)))
    t.dims.extend(dims)
    return t


def _value_names(m) -> list[str]:  # noqa: ANN001
    g = m.graph
    names = [vi.name for vi in g.input] + [t.name for t in g.initializer]
    return names + [o for n in g.node for o in n.output]


def _mutate_attr(rng: random.Random, node) -> None:  # noqa: ANN001
    from onnx import AttributeProto, helper

    if node.attribute and rng.random() < 0.7:
        a = rng.choice(node.attribute)
        if a.type == AttributeProto.INT:
            a.i = _pick_int(rng)
        elif a.type == AttributeProto.INTS:
            vals = list(a.ints)
            op = rng.randrange(3)
            if op == 0 and vals:
                vals[rng.randrange(len(vals))] = _pick_int(rng)
            elif op == 1:
                vals.insert(rng.randrange(len(vals) + 1), _pick_int(rng))
            elif vals:
                vals.pop(rng.randrange(len(vals)))
            del a.ints[:]
            a.ints.extend(vals)
        elif a.type == AttributeProto.FLOAT:
            a.f = rng.choice(_FLOATS)
        elif a.type == AttributeProto.STRING:
            a.s = rng.choice(_STRINGS).encode()
        elif a.type == AttributeProto.TENSOR:
            dims = [rng.choice((0, 1, 2, 3, -1, 2**31)) for _ in range(rng.randrange(4))]
            a.t.CopyFrom(_random_tensor(rng, a.t.name, dims))
        else:
            node.attribute.remove(a)
        return
    name = rng.choice(_ATTRS)
    kind = rng.randrange(6)
    if kind == 0:
        value = _pick_int(rng)
    elif kind == 1:
        value = [_pick_int(rng) for _ in range(rng.randrange(6))]
    elif kind == 2:
        value = rng.choice(_FLOATS)
    elif kind == 3:
        value = rng.choice(_STRINGS)
    elif kind == 4:
        value = [rng.choice(_FLOATS) for _ in range(rng.randrange(4))]
    else:
        value = _random_tensor(rng, "", [rng.choice((1, 2, 4)) for _ in range(rng.randrange(3))])
    for old in [a for a in node.attribute if a.name == name]:
        node.attribute.remove(old)
    node.attribute.append(helper.make_attribute(name, value) if not isinstance(value, list) or value else
                          helper.make_attribute(name, value, attr_type=AttributeProto.INTS))


def _freeze_input(rng: random.Random, m, as_constant: bool) -> None:  # noqa: ANN001
    from onnx import helper

    g = m.graph
    inits = {t.name for t in g.initializer}
    cands = [vi for vi in g.input if vi.name not in inits and vi.type.HasField("tensor_type")]
    if not cands:
        return
    vi = rng.choice(cands)
    dims = [d.dim_value if d.HasField("dim_value") else 1 for d in vi.type.tensor_type.shape.dim]
    if rng.random() < 0.3:  # a shape-like int64 vector instead (Reshape/Pad/Unsqueeze inputs)
        dims, et = [rng.randrange(0, 6)], 7
    else:
        et = vi.type.tensor_type.elem_type
    t = _random_tensor(rng, vi.name, dims, et)
    if as_constant:
        g.input.remove(vi)
        g.node.insert(0, helper.make_node("Constant", [], [vi.name], value=t))
    else:
        g.initializer.append(t)
        if m.ir_version >= 4 or rng.random() < 0.5:
            g.input.remove(vi)


def mutate_onnx(m, rng: random.Random) -> None:  # noqa: ANN001
    """Change one field of ModelProto `m` in place."""
    from onnx import helper

    import utvm.frontend.onnx as uo

    g = m.graph
    k = rng.randrange(14)
    if k == 0 and (g.input or g.output):  # a dimension of a graph input/output
        vi = rng.choice(list(g.input) + list(g.output))
        dims = vi.type.tensor_type.shape.dim
        if dims and rng.random() < 0.8:
            d = rng.choice(dims)
            if rng.random() < 0.1:
                d.dim_param = "N"
            else:
                d.dim_value = _pick_int(rng)
        else:
            dims.add().dim_value = rng.choice((1, 2, 3))
    elif k in (1, 2, 3) and g.node:  # attributes
        _mutate_attr(rng, rng.choice(g.node))
    elif k == 4 and g.node:  # op type
        node = rng.choice(g.node)
        node.op_type = rng.choice(uo.SUPPORTED_OPS + ("Expand", "Slice", "Gather", "Cast"))
        if rng.random() < 0.1:
            node.domain = rng.choice(("", "ai.onnx", "com.microsoft"))
    elif k == 5 and g.node:  # wiring
        node = rng.choice(g.node)
        names = _value_names(m) + ["", "undefined"]
        ins = list(node.input)
        op = rng.randrange(3)
        if op == 0 and ins:
            ins[rng.randrange(len(ins))] = rng.choice(names)
        elif op == 1:
            ins.append(rng.choice(names))
        elif ins:
            ins.pop(rng.randrange(len(ins)))
        del node.input[:]
        node.input.extend(ins)
    elif k in (6, 7):
        _freeze_input(rng, m, as_constant=k == 7)
    elif k == 8 and g.initializer:  # initializer data and dims
        t = rng.choice(g.initializer)
        op = rng.randrange(4)
        if op == 0:
            t.data_type = rng.choice(_ELEM_TYPES)
        elif op == 1 and t.dims:
            t.dims[rng.randrange(len(t.dims))] = _pick_int(rng)
        elif op == 2:
            t.raw_data = t.raw_data[: rng.randrange(len(t.raw_data) + 1)]
        else:
            t.CopyFrom(_random_tensor(rng, t.name, [rng.choice((1, 2, 3, 4)) for _ in range(rng.randrange(5))]))
    elif k == 9:  # opsets and versions
        if m.opset_import and rng.random() < 0.8:
            rng.choice(m.opset_import).version = rng.choice(_OPSETS)
        elif rng.random() < 0.5:
            del m.opset_import[:]
        else:
            m.opset_import.append(helper.make_opsetid(rng.choice(("", "ai.onnx", "x")), rng.choice(_OPSETS)))
        if rng.random() < 0.2:
            m.ir_version = rng.choice((0, 3, 4, 7, 8, 9, 10, 99))
    elif k == 10 and (g.input or g.output):  # element types
        vi = rng.choice(list(g.input) + list(g.output))
        vi.type.tensor_type.elem_type = rng.choice(_ELEM_TYPES)
    elif k == 11 and g.node:  # node order and count
        nodes = list(g.node)
        op = rng.randrange(3)
        if op == 0:
            nodes.pop(rng.randrange(len(nodes)))
        elif op == 1:
            i = rng.randrange(len(nodes))
            nodes.insert(rng.randrange(len(nodes) + 1), nodes[i])
        else:
            rng.shuffle(nodes)
        del g.node[:]
        g.node.extend(nodes)
    elif k == 12 and g.node:  # a new node reading existing values
        names = _value_names(m)
        op = rng.choice(uo.SUPPORTED_OPS)
        ins = [rng.choice(names) for _ in range(rng.randrange(1, 4))] if names else []
        out = f"v{rng.randrange(1000)}"
        g.node.insert(rng.randrange(len(g.node) + 1), helper.make_node(op, ins, [out]))
        if rng.random() < 0.5 and g.output:
            g.output[0].name = out
    elif g.output:  # outputs: rename, drop the shape, or reuse another value
        vi = rng.choice(g.output)
        op = rng.randrange(3)
        if op == 0:
            vi.name = rng.choice(_value_names(m) or ["x"])
        elif op == 1:
            vi.type.tensor_type.ClearField("shape")
        else:
            g.output.remove(vi)


def onnx_mutator(data: bytes, max_size: int, seed: int) -> bytes:
    import atheris

    rng = random.Random(seed)
    if rng.random() < 0.15:
        return atheris.Mutate(data, max_size)
    try:
        import onnx

        m = onnx.ModelProto()
        m.ParseFromString(data)
        if not m.HasField("graph"):
            return atheris.Mutate(data, max_size)
        for _ in range(1 + (rng.random() < 0.3)):
            mutate_onnx(m, rng)
        out = m.SerializeToString()
    except Exception:  # a mutation the proto refuses (e.g. an out-of-range enum): mutate the bytes instead
        return atheris.Mutate(data, max_size)
    return out if len(out) <= max_size else atheris.Mutate(data, max_size)


# ============================================================================================ the harness
class Finding(AssertionError):
    """An input broke the invariant (raised out of TestOneInput: libFuzzer keeps it as crash-*)."""


def _memory_error_in_chain(exc: BaseException) -> bool:
    seen = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        if isinstance(e, MemoryError):
            return True
        seen.add(id(e))
        e = e.__cause__ or e.__context__
    return False


def _vm_kib(key: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


def make_target(name: str, rss_allowance_mb: int) -> tuple[Callable[[bytes], None], Callable | None]:
    """Import what `name` fuzzes under atheris' instrumentation; returns (TestOneInput, custom mutator)."""
    import atheris

    include = ["utvm"] + (["tflite", "flatbuffers"] if name.startswith("tflite") else [])
    with atheris.instrument_imports(include=include):
        import utvm.frontend.onnx
        import utvm.frontend.tflite
        import utvm.ir.verify
        import utvm.limits
        import utvm.mlf
        import utvm.ops
        from utvm.errors import UtvmError

        # what the importers import lazily must be imported (and instrumented) here too
        for op in utvm.ops.OP_MODULES:
            utvm.ops.op_module(op)
    mutator = None
    if name in ("tflite", "tflite-gen"):
        def run(data: bytes) -> None:
            utvm.frontend.tflite.from_tflite(data)
    elif name in ("onnx", "onnx-proto"):
        def run(data: bytes) -> None:
            utvm.frontend.onnx.from_onnx(data)
        mutator = onnx_mutator if name == "onnx-proto" else None
    elif name == "mlf":
        def run(data: bytes) -> None:
            with tempfile.NamedTemporaryFile(prefix="utvm-fuzz-", suffix=".tar") as f:  # removed on any exit
                f.write(data)
                f.flush()
                utvm.mlf.load(f.name)
    else:
        raise SystemExit(f"fuzz_import: unknown target {name!r}; targets: {', '.join(TARGETS)}")

    start_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    allowance = rss_allowance_mb * 1024

    def one_input(data: bytes) -> None:
        if name == "tflite-gen":
            built = gen_tflite(data)
            if built is None:
                return
            data = built
        try:
            run(data)
        except UtvmError as exc:
            if _memory_error_in_chain(exc):
                raise Finding(f"{name}: an allocation failed on the way to {type(exc).__name__}: {exc}") from exc
        except RecursionError as exc:
            raise Finding(f"{name}: unbounded recursion") from exc
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        if peak - start_peak > allowance:
            raise Finding(f"{name}: peak RSS grew by {(peak - start_peak) // 1024} MiB (allowance "
                          f"{rss_allowance_mb} MiB) on an input of {len(data)} bytes")

    return one_input, mutator


def main(argv: list[str]) -> int:
    if len(argv) >= 2 and argv[1] == "seeds":
        if len(argv) != 4:
            raise SystemExit("usage: fuzz_import.py seeds <target> <dir>")
        n = write_seeds(argv[2], Path(argv[3]))
        print(f"{n} seeds for {argv[2]} in {argv[3]}")
        return 0
    if len(argv) < 2 or argv[1] not in TARGETS:
        raise SystemExit(f"usage: fuzz_import.py <{'|'.join(TARGETS)}> [libFuzzer flags] [corpus dirs | input]\n"
                         "       fuzz_import.py seeds <target> <dir>")
    name, rest = argv[1], argv[2:]
    allowance = 768
    for a in list(rest):
        if a.startswith("--rss-allowance-mb="):
            allowance = int(a.split("=", 1)[1])
            rest.remove(a)
    os.environ.setdefault("UTVM_HOST_MEMORY_BUDGET", str(FUZZ_BUDGET))
    import atheris

    one_input, mutator = make_target(name, allowance)
    # cap the address space: a runaway allocation becomes a MemoryError (a finding), not a dead machine
    vm = _vm_kib("VmSize") * 1024
    cap = vm + (allowance + 512) * (1 << 20)
    _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard == resource.RLIM_INFINITY or hard > cap:
        resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    kwargs = {"custom_mutator": mutator} if mutator is not None else {}
    atheris.Setup([argv[0], *rest], one_input, **kwargs)
    atheris.Fuzz()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
