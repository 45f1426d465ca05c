"""The graph IR: tensors (shape, dtype, quantization), nodes (op + attributes) and graphs.

A `Graph` is a value: passes take a graph and return a new one (`Graph.replace(...)`), never mutate the
one they were given. Tensors are referred to by name; node inputs and outputs are tensor names, an empty
string marks an absent optional input. Constant tensors carry their numpy data.

Op names are canonical, lower-case and frontend-neutral (e.g. "conv2d", "depthwise_conv2d", "dense",
"add", "softmax"); `utvm.ops` defines the set and the attributes each op takes.
"""

from __future__ import annotations

import base64
import dataclasses
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from utvm.errors import GraphError, ModelFormatError

DTYPES = ("int8", "uint8", "int16", "int32", "int64", "float32", "bool", "uint32", "uint64")
IR_VERSION = 1


@dataclass(frozen=True, slots=True)
class Quantization:
    """Affine quantization: real = scale * (q - zero_point).

    Per-tensor when `axis` is None (one scale and zero point); per-channel along `axis` otherwise.
    """

    scale: tuple[float, ...]
    zero_point: tuple[int, ...]
    axis: int | None = None

    def __post_init__(self) -> None:
        if not self.scale:
            raise GraphError("quantization needs at least one scale")
        if len(self.zero_point) not in (1, len(self.scale)):
            raise GraphError(f"quantization has {len(self.scale)} scales but {len(self.zero_point)} zero points")
        if self.axis is None and len(self.scale) != 1:
            raise GraphError(f"per-tensor quantization with {len(self.scale)} scales (axis missing)")

    @property
    def per_channel(self) -> bool:
        return self.axis is not None

    def to_json(self) -> dict[str, Any]:
        return {"scale": list(self.scale), "zero_point": list(self.zero_point), "axis": self.axis}

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> Quantization:
        d = _json_obj(d, "quantization")
        scale, zp, axis = d.get("scale"), d.get("zero_point"), d.get("axis")
        if (not isinstance(scale, list) or not all(isinstance(s, int | float) and not isinstance(s, bool)
                                                   for s in scale)
                or not isinstance(zp, list) or not all(type(z) is int for z in zp)
                or not (axis is None or type(axis) is int)):
            raise _malformed(f"quantization {json.dumps(d)[:200]}: needs a list of numbers 'scale', "
                                   "a list of integers 'zero_point' and an integer or null 'axis'")
        return Quantization(tuple(float(s) for s in scale), tuple(zp), axis)


@dataclass(frozen=True, slots=True, eq=False)
class Tensor:
    """A named tensor. `data` is set for constants (weights, biases, shapes)."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    quant: Quantization | None = None
    data: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.dtype not in DTYPES:
            raise GraphError(f"tensor {self.name!r}: unsupported dtype {self.dtype!r} (supported: {', '.join(DTYPES)})")
        if any((not isinstance(d, int)) or d < 0 for d in self.shape):
            raise GraphError(f"tensor {self.name!r}: shape {self.shape} must be non-negative integers "
                             "(no dynamic dims)")
        if self.data is not None:
            if tuple(self.data.shape) != tuple(self.shape):
                raise GraphError(f"tensor {self.name!r}: data shape {self.data.shape} != declared {self.shape}")
            if str(self.data.dtype) != self.dtype:
                raise GraphError(f"tensor {self.name!r}: data dtype {self.data.dtype} != declared {self.dtype}")

    @property
    def is_constant(self) -> bool:
        return self.data is not None

    @property
    def size(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def nbytes(self) -> int:
        return self.size * np.dtype(self.dtype).itemsize

    def replace(self, **changes: Any) -> Tensor:
        return dataclasses.replace(self, **changes)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Tensor):
            return NotImplemented
        same_data = (self.data is None and other.data is None) or (
            self.data is not None and other.data is not None and np.array_equal(self.data, other.data)
        )
        mine = (self.name, self.shape, self.dtype, self.quant)
        return mine == (other.name, other.shape, other.dtype, other.quant) and same_data

    def __hash__(self) -> int:
        return hash((self.name, self.shape, self.dtype))

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"name": self.name, "shape": list(self.shape), "dtype": self.dtype}
        if self.quant is not None:
            d["quant"] = self.quant.to_json()
        if self.data is not None:
            little = np.ascontiguousarray(self.data).astype(f"<{self.data.dtype.str[1:]}")
            d["data"] = base64.b64encode(little.tobytes()).decode()
        return d

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> Tensor:
        where = f"tensor {d.get('name')!r}" if isinstance(d, Mapping) else "tensor"
        d = _json_obj(d, where)
        name, dtype, shape = _json_str(d, "name", where), _json_str(d, "dtype", where), _json_shape(d, where)
        if dtype not in DTYPES:
            raise GraphError(f"tensor {name!r}: unsupported dtype {dtype!r} (supported: {', '.join(DTYPES)})")
        data = None
        if "data" in d:
            if not isinstance(d["data"], str):
                raise _malformed(f"{where}: 'data' must be a base64 string")
            np_dt = np.dtype(dtype).newbyteorder("<")
            n = 1
            for dim in shape:
                n *= dim
            if len(d["data"]) > 4 * (-(-n * np_dt.itemsize // 3)) + 4:  # before decoding it
                raise _malformed(f"{where}: data of {len(d['data'])} base64 characters is more than shape "
                                       f"{list(shape)} of {dtype} holds")
            try:
                raw = base64.b64decode(d["data"], validate=True)
            except ValueError as exc:
                raise _malformed(f"{where}: 'data' is not base64 ({exc})") from None
            if len(raw) != n * np_dt.itemsize:
                raise _malformed(f"{where}: data holds {len(raw)} bytes, shape {list(shape)} of {dtype} "
                                       f"needs {n * np_dt.itemsize}")
            data = np.frombuffer(raw, dtype=np_dt).astype(dtype).reshape(shape)
        quant = Quantization.from_json(_json_obj(d["quant"], f"{where} quant")) if d.get("quant") else None
        return Tensor(name, shape, dtype, quant, data)


def _malformed(msg: str) -> ModelFormatError:
    return ModelFormatError(f"malformed IR JSON: {msg}")


def _json_obj(v: Any, where: str) -> dict[str, Any]:
    if not isinstance(v, dict):
        raise _malformed(f"{where} is a JSON {type(v).__name__}, not an object")
    return v


def _json_list(d: Mapping[str, Any], key: str, where: str) -> list[Any]:
    if key not in d:
        raise _malformed(f"{where} has no {key!r}")
    if not isinstance(d[key], list):
        raise _malformed(f"{where}: {key!r} is a JSON {type(d[key]).__name__}, not a list")
    return d[key]


def _json_str(d: Mapping[str, Any], key: str, where: str) -> str:
    if not isinstance(d.get(key), str):
        raise _malformed(f"{where}: {key!r} must be a string, not {d.get(key)!r:.60}")
    return d[key]


def _json_shape(d: Mapping[str, Any], where: str) -> tuple[int, ...]:
    shape = _json_list(d, "shape", where)
    if not all(type(x) is int for x in shape):
        raise _malformed(f"{where}: shape {shape!r:.100} must be a list of integers")
    return tuple(shape)


def _freeze_attr(v: Any) -> Any:
    if isinstance(v, list):
        return tuple(_freeze_attr(x) for x in v)
    return v


@dataclass(frozen=True, slots=True)
class Node:
    """One operator application. `attrs` values are JSON-able scalars, strings or (nested) tuples."""

    op: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attrs: Mapping[str, Any] = field(default_factory=dict)
    name: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "inputs", tuple(self.inputs))
        object.__setattr__(self, "outputs", tuple(self.outputs))
        object.__setattr__(self, "attrs", {k: _freeze_attr(v) for k, v in dict(self.attrs).items()})

    def replace(self, **changes: Any) -> Node:
        return dataclasses.replace(self, **changes)

    def label(self, index: int | None = None) -> str:
        """How errors name this node: `node 3 (conv2d 'model/conv1')`."""
        where = f"node {index} " if index is not None else "node "
        return f"{where}({self.op} {self.name!r})" if self.name else f"{where}({self.op})"

    def to_json(self) -> dict[str, Any]:
        def enc(v: Any) -> Any:
            return [enc(x) for x in v] if isinstance(v, tuple) else v

        return {"op": self.op, "name": self.name, "inputs": list(self.inputs), "outputs": list(self.outputs),
                "attrs": {k: enc(v) for k, v in self.attrs.items()}}

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> Node:
        return Node(d["op"], tuple(d["inputs"]), tuple(d["outputs"]), dict(d.get("attrs", {})), d.get("name", ""))


@dataclass(frozen=True, slots=True)
class Graph:
    """A model: tensors by name, nodes in a valid execution (topological) order, graph inputs/outputs."""

    tensors: Mapping[str, Tensor]
    nodes: tuple[Node, ...]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    name: str = "default"
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "tensors", dict(self.tensors))
        object.__setattr__(self, "nodes", tuple(self.nodes))
        object.__setattr__(self, "inputs", tuple(self.inputs))
        object.__setattr__(self, "outputs", tuple(self.outputs))

    # --- queries -----------------------------------------------------------------------------------------
    def tensor(self, name: str) -> Tensor:
        try:
            return self.tensors[name]
        except KeyError:
            raise GraphError(f"graph {self.name!r} has no tensor named {name!r}") from None

    def producer(self, tensor_name: str) -> int | None:
        for i, n in enumerate(self.nodes):
            if tensor_name in n.outputs:
                return i
        return None

    def consumers(self, tensor_name: str) -> list[int]:
        return [i for i, n in enumerate(self.nodes) if tensor_name in n.inputs]

    @property
    def constants(self) -> dict[str, Tensor]:
        return {k: t for k, t in self.tensors.items() if t.is_constant}

    def replace(self, **changes: Any) -> Graph:
        return dataclasses.replace(self, **changes)

    def with_nodes(self, nodes: Iterable[Node], extra_tensors: Iterable[Tensor] = ()) -> Graph:
        """A new graph with these nodes; tensors no longer referenced (and not graph I/O) are dropped."""
        nodes = tuple(nodes)
        tensors = dict(self.tensors)
        for t in extra_tensors:
            tensors[t.name] = t
        used = set(self.inputs) | set(self.outputs)
        for n in nodes:
            used.update(x for x in n.inputs if x)
            used.update(n.outputs)
        return self.replace(nodes=nodes, tensors={k: v for k, v in tensors.items() if k in used})

    # --- serialisation -------------------------------------------------------------------------------------
    def to_json(self) -> str:
        return json.dumps({
            "ir_version": IR_VERSION,
            "name": self.name,
            "inputs": list(self.inputs),
            "outputs": list(self.outputs),
            "metadata": dict(self.metadata),
            "tensors": [t.to_json() for t in self.tensors.values()],
            "nodes": [n.to_json() for n in self.nodes],
        }, indent=1)

    @staticmethod
    def from_json(text: str | bytes) -> Graph:
        """The graph `to_json` wrote. Anything else raises ModelFormatError naming the item at fault (or
        GraphError for a tensor or quantization the IR refuses); tensors over `utvm.limits` raise
        UnsupportedModelError before their data is decoded."""
        from utvm import limits

        try:
            d = json.loads(text)
        except (ValueError, RecursionError) as exc:  # RecursionError: arrays nested thousands deep
            raise ModelFormatError(f"malformed IR JSON: {type(exc).__name__}: {str(exc)[:200]}") from None
        d = _json_obj(d, "the document")
        if d.get("ir_version") != IR_VERSION:
            raise ModelFormatError(f"IR JSON version {d.get('ir_version')!r} is not {IR_VERSION}")
        tally = limits.Tally(model="the IR JSON graph")
        tensors: dict[str, Tensor] = {}
        for i, t in enumerate(_json_list(d, "tensors", "the document")):
            where = f"tensor {i}"
            t = _json_obj(t, where)
            name = _json_str(t, "name", where)
            where = f"{where} ({name!r})"
            if name in tensors:
                raise _malformed(f"{where}: a second tensor of that name")
            tally.add(name, _json_shape(t, where), _json_str(t, "dtype", where), where)
            tensors[name] = Tensor.from_json(t)
        nodes = []
        for i, n in enumerate(_json_list(d, "nodes", "the document")):
            where = f"node {i}"
            n = _json_obj(n, where)
            _json_str(n, "op", where)
            for key in ("inputs", "outputs"):
                if not all(isinstance(x, str) for x in _json_list(n, key, where)):
                    raise _malformed(f"{where}: {key} must be a list of tensor names")
            if not isinstance(n.get("name", ""), str) or not isinstance(n.get("attrs", {}), dict):
                raise _malformed(f"{where}: 'name' must be a string and 'attrs' an object")
            nodes.append(Node.from_json(n))
        io = {}
        for key in ("inputs", "outputs"):
            io[key] = _json_list(d, key, "the document")
            if not all(isinstance(x, str) for x in io[key]):
                raise _malformed(f"graph {key} must be a list of tensor names")
        name, metadata = d.get("name", "default"), d.get("metadata", {})
        if not isinstance(name, str) or not isinstance(metadata, dict):
            raise _malformed("graph 'name' must be a string and 'metadata' an object")
        return Graph(tensors, tuple(nodes), tuple(io["inputs"]), tuple(io["outputs"]), name, metadata)

    # --- text dump -------------------------------------------------------------------------------------------
    def dump(self) -> str:
        """A readable listing: one line per graph input, node and output. The model's names are escaped
        (utvm.support.text.shown): a name holding a newline or an escape sequence stays on its line, inert."""
        from utvm.support.text import shown

        def ty(name: str) -> str:
            if not name:
                return "<none>"
            t = self.tensors.get(name)
            if t is None:
                return f"%{shown(name)}:?"
            s = f"%{shown(name)}: {t.dtype}{list(t.shape)}"
            if t.quant is not None:
                q = t.quant
                s += (f" q(s={q.scale[0]:.6g}, z={q.zero_point[0]})" if not q.per_channel
                      else f" q(per-channel axis={q.axis}, {len(q.scale)} scales)")
            if t.is_constant:
                s += " const"
            return s

        lines = [f"graph {shown(self.name)} {{"]
        lines += [f"  input  {ty(n)}" for n in self.inputs]
        for i, node in enumerate(self.nodes):
            attrs = ", ".join(shown(f"{k}={v}") for k, v in node.attrs.items())
            outs = ", ".join(ty(o) for o in node.outputs)
            ins = ", ".join(f"%{shown(x)}" if x else "<none>" for x in node.inputs)
            lines.append(f"  [{i}] {outs} = {shown(node.op)}({ins}){' {' + attrs + '}' if attrs else ''}")
        lines += [f"  output {ty(n)}" for n in self.outputs]
        lines.append("}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.dump()


def tensor_names(nodes: Sequence[Node]) -> set[str]:
    out: set[str] = set()
    for n in nodes:
        out.update(x for x in n.inputs if x)
        out.update(n.outputs)
    return out
