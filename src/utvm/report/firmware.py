"""Where the deploy firmware's generated code and constants go, operator function by operator function.

`utvm report` on a QEMU board reads the firmware `utvm size` builds and measures (the same project, the same
linker map: utvm.platform.qemu.footprint). The firmware is compiled with one section per function and per
array, so every input section the map attributes to the generated code (`codegen/host/src/...` objects) is
one function's machine code (`.text.<function>`) or one array's bytes (`.rodata.<array>`). Each is given to
the operator functions it belongs to:

- code: the operator function F itself and every function named after it (`F_compute`, the body behind the
  packed wrapper), then every other function of the model's code that F calls, directly or not (the call
  graph GCC writes with -fcallgraph-info, footprint.load_callgraph). A function one operator reaches is that
  operator's code; one that several reach is a **shared kernel** (a GEMM several layers call, the packed
  convention's argument checker), listed with each of them and counted once; one no operator reaches (the
  AOT main, the entry point, the model descriptor) is the executor's.
- constants: arrays named after F (`F_wi8`, `F_rq`: weights re-laid out for the kernel, requantization
  tables) and the model's constants (`<prefix>_const_<tensor>`) of the tensors F's node reads are F's
  **weights**; a constant several nodes read is shared. String literals (`.str`: the packed convention's
  error messages), shape tables and the AOT main's data are `other`.

Every byte of `utvm size`'s `operators` category that is code (its text column) lands in exactly one of
operator code, shared code or executor code, and every byte of its `constants` category in operator
weights, shared weights or other constants (`FirmwareBytes.check`, called on every result).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from utvm.errors import PlatformError

#: The label of an operator function's node (ir.graph.Node.label): `node 3 (conv2d 'name')`.
_NODE_LABEL = re.compile(r"^node (\d+) \(")
#: A string-literal section GCC makes of a function's strings: `.rodata.<function>.str1.4`.
_STRINGS = re.compile(r"\.str\d+\.\d+$")


def node_index(label: str) -> int | None:
    """The node index in an operator function's node label (OperatorInfo.node), or None."""
    m = _NODE_LABEL.match(label)
    return int(m[1]) if m else None


def c_name(text: str) -> str:
    """A name as the code generator makes it a C identifier (kernels.FileScope.unique)."""
    return re.sub(r"[^A-Za-z0-9_]", "_", text)


@dataclass
class SharedPiece:
    """A function or array of the generated code that several operator functions use."""

    name: str
    bytes: int
    users: list[str]  # operator functions, in execution order

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "bytes": self.bytes, "users": list(self.users)}


@dataclass
class OperatorBytes:
    """One operator function's own bytes in the firmware."""

    code: int = 0  # machine code only it runs
    weights: int = 0  # constant arrays only it reads
    shared_code: list[str] = field(default_factory=list)  # shared kernels it calls (SharedPiece names)
    shared_weights: list[str] = field(default_factory=list)  # constants it reads with other operators

    def to_json(self) -> dict[str, Any]:
        return {"code_bytes": self.code, "weight_bytes": self.weights, "shared_code": list(self.shared_code),
                "shared_weights": list(self.shared_weights)}


@dataclass
class FirmwareBytes:
    """The generated code's bytes of a deploy firmware, by operator function (module docstring)."""

    operators: dict[str, OperatorBytes]
    shared_code: list[SharedPiece]
    shared_weights: list[SharedPiece]
    executor_code: int  # code no operator reaches: the AOT main, entry point, descriptor
    other_code: int  # other non-constant bytes of the generated objects in the text column (none expected)
    other_constants: int  # strings, shape tables, the executor's constants
    operators_text: int  # `utvm size`'s sizes.operators.text, what the code figures add up to
    constants_text: int  # `utvm size`'s sizes.constants.text, what the constant figures add up to

    def check(self) -> None:
        """Every byte is counted once: raise PlatformError if the parts do not add up to the totals."""
        code = (sum(o.code for o in self.operators.values()) + sum(p.bytes for p in self.shared_code)
                + self.executor_code + self.other_code)
        consts = (sum(o.weights for o in self.operators.values()) + sum(p.bytes for p in self.shared_weights)
                  + self.other_constants)
        if code != self.operators_text or consts != self.constants_text:
            raise PlatformError(f"the generated code's bytes do not add up: code {code} against {self.operators_text}, "
                                f"constants {consts} against {self.constants_text} (text column)")

    def to_json(self) -> dict[str, Any]:
        return {"operators": {k: v.to_json() for k, v in self.operators.items()},
                "shared_code": [p.to_json() for p in self.shared_code],
                "shared_weights": [p.to_json() for p in self.shared_weights],
                "executor_code_bytes": self.executor_code, "other_code_bytes": self.other_code,
                "other_constant_bytes": self.other_constants, "operators_text": self.operators_text,
                "constants_text": self.constants_text}


def _owner(name: str, functions: Sequence[str]) -> str | None:
    """The operator function a section is named after: the longest F with name == F or name = F_..."""
    best = None
    for f in functions:
        if (name == f or name.startswith(f + "_") or name.startswith(f + ".")) and (best is None or len(f) > len(best)):
            best = f
    return best


def _reach(start: str, callees: Mapping[str, Iterable[str]], inside: set[str]) -> set[str]:
    """The functions of `inside` that `start` calls, directly or not (itself included when inside)."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        f = todo.pop()
        if f in seen:
            continue
        seen.add(f)
        todo.extend(c for c in callees.get(f, ()) if c in inside and c not in seen)
    return seen & inside


def attribute(entries: Iterable[Any], columns: Mapping[str, str], operators: Sequence[Any], graph: Any,
              prefix: str, callees: Mapping[str, Iterable[str]]) -> FirmwareBytes:
    """FirmwareBytes of the map `entries` (footprint.MapEntry) of one firmware. `columns`: output section ->
    Berkeley column (footprint.ElfSection.column); `operators`: the model's OperatorInfo in execution order;
    `graph`: its compiled graph (which constants each node reads); `callees`: function -> functions it calls
    (footprint.load_callgraph)."""
    from utvm.platform.qemu.footprint import categorize

    functions = [op.name for op in operators]
    order = {f: i for i, f in enumerate(functions)}
    # the C name of each model constant -> the operator functions whose node reads it
    readers: dict[str, list[str]] = {}
    for op in operators:
        i = node_index(op.node)
        if i is None or not 0 <= i < len(graph.nodes):
            continue
        for t in graph.nodes[i].inputs:
            if t and t in graph.tensors and graph.tensors[t].is_constant:
                users = readers.setdefault(c_name(f"{prefix}_const_{t}"), [])
                if op.name not in users:
                    users.append(op.name)
    executor_objects = (f"{prefix}_main.o", f"{prefix}_system_lib.o")
    code: dict[str, int] = {}  # function name -> bytes (text column, operator objects)
    executor = other_code = 0
    arrays: dict[str, int] = {}
    other_consts = 0
    operators_text = constants_text = 0
    for e in entries:
        if e.size == 0 or columns.get(e.output_section) != "text":
            continue
        category = categorize(e)
        if category not in ("operators", "constants"):
            continue
        in_executor = e.origin.replace("\\", "/").endswith(executor_objects)
        if category == "operators":
            operators_text += e.size
            if e.input_section.startswith(".text.") and not in_executor:
                name = e.input_section[len(".text."):]
                code[name] = code.get(name, 0) + e.size
            elif e.input_section.startswith(".text") or in_executor:
                executor += e.size
            else:
                other_code += e.size
        else:
            constants_text += e.size
            name = e.input_section[len(".rodata."):] if e.input_section.startswith(".rodata.") else ""
            if not name or in_executor or _STRINGS.search(name):
                other_consts += e.size
            else:
                arrays[name] = arrays.get(name, 0) + e.size
    result = {f: OperatorBytes() for f in functions}
    inside = set(code)
    reached = {f: _reach(f, callees, inside) for f in functions}
    shared_code: list[SharedPiece] = []
    for name, size in code.items():
        users = {f for f in functions if name in reached[f]}
        owner = _owner(name, functions)
        if owner is not None:
            users.add(owner)
        if not users:
            executor += size
        elif len(users) == 1:
            result[users.pop()].code += size
        else:
            ordered = sorted(users, key=order.__getitem__)
            shared_code.append(SharedPiece(name, size, ordered))
            for f in ordered:
                result[f].shared_code.append(name)
    shared_weights: list[SharedPiece] = []
    for name, size in arrays.items():
        users_list = readers.get(name)
        if users_list is None:
            owner = _owner(name, functions)
            users_list = [owner] if owner is not None else []
        if not users_list:
            other_consts += size
        elif len(users_list) == 1:
            result[users_list[0]].weights += size
        else:
            ordered = sorted(users_list, key=order.__getitem__)
            shared_weights.append(SharedPiece(name, size, ordered))
            for f in ordered:
                result[f].shared_weights.append(name)
    out = FirmwareBytes(result, shared_code, shared_weights, executor, other_code, other_consts, operators_text,
                        constants_text)
    out.check()
    return out


def firmware_bytes(project: str | Path, compiled: Any) -> FirmwareBytes:
    """FirmwareBytes of the deploy firmware project `project` (footprint.FirmwareReport.project: its
    build/firmware.elf, .map and call-graph files) built for `compiled`."""
    from utvm.platform.qemu.footprint import load_callgraph, parse_map, read_elf_sections

    build = Path(project) / "build"
    elf, map_file = build / "firmware.elf", build / "firmware.map"
    if not map_file.is_file():
        raise PlatformError(f"no linker map {map_file} beside {elf} (the deploy firmware links with -Wl,-Map=...)")
    columns = {s.name: s.column for s in read_elf_sections(elf) if s.column is not None}
    graph = load_callgraph(build)
    callees = {name: fn.callees for name, fn in graph.items()}
    return attribute(parse_map(map_file.read_text(errors="replace")), columns, compiled.operators, compiled.graph,
                     compiled.prefix, callees)
