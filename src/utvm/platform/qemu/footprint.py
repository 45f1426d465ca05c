"""Footprint of a built firmware: flash/RAM by category, and worst-case stack.

Sizes. The ELF's allocated sections give the Berkeley text/data/bss totals (what `arm-none-eabi-size`
prints); the linker map attributes every byte of them to the input section and object file it came from,
and each object file falls in one category:

- `runtime`: everything linked from libraries: the utvm C runtime (the CRT static libraries), the
  TVMPlatform hooks (board/platform.c), the C library and libgcc;
- `operators`: the model's generated code (codegen/host/src): its code, data and the workspace pool;
- `constants`: read-only data of the generated code, i.e. the weights and quantisation tables, and the
  parameter blob of a model compiled with `--params external` (the deploy firmware's flash section
  `utvm_params`, linked from src/params.c: the weights and tables are there, not in the code);
- `application`: the application (src/), the board support (startup + vector table, UART, timer,
  semihosting) and the linker's alignment padding.

The categories add up exactly to the ELF's totals (`Footprint.check_against_elf` proves it).

Stack. GCC's `-fstack-usage` (.su: each function's frame) and `-fcallgraph-info=su` (.ci: call edges) are
read for every object of the project; functions without them (the C library, libgcc) get their frame and
calls from the disassembly (push/vpush/sub sp prologue, bl/b.w targets). The worst case is the heaviest
path from `Reset_Handler`, plus the heaviest exception handler path and the hardware exception frame
(32 bytes, 104 with the FPU context). Indirect calls, recursion and dynamic frames make the figure a lower
bound; they are flagged by name.
"""

from __future__ import annotations

import re
import struct
import subprocess
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from utvm.errors import PlatformError
from utvm.platform.qemu.boards import cross_tool

CATEGORIES = ("runtime", "operators", "constants", "application")
COLUMNS = ("text", "data", "bss")

SHT_NOBITS = 8
SHF_WRITE = 0x1
SHF_ALLOC = 0x2


# --- ELF sections -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ElfSection:
    name: str
    type: int
    flags: int
    addr: int
    size: int

    @property
    def column(self) -> str | None:
        """Berkeley column (as `size` counts it): bss = allocated without contents, data = writable."""
        if not self.flags & SHF_ALLOC:
            return None
        if self.type == SHT_NOBITS:
            return "bss"
        return "data" if self.flags & SHF_WRITE else "text"


def read_elf_sections(elf: Path) -> list[ElfSection]:
    """Section headers of a 32-bit little-endian ELF file."""
    blob = Path(elf).read_bytes()
    if blob[:4] != b"\x7fELF" or blob[4] != 1 or blob[5] != 1:
        raise PlatformError(f"{elf} is not a 32-bit little-endian ELF file")
    shoff = struct.unpack_from("<I", blob, 0x20)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", blob, 0x2E)
    headers = [struct.unpack_from("<IIIIIIIIII", blob, shoff + i * shentsize) for i in range(shnum)]
    strtab_off = headers[shstrndx][4]

    def name_at(off: int) -> str:
        end = blob.index(b"\0", strtab_off + off)
        return blob[strtab_off + off : end].decode()

    return [ElfSection(name_at(h[0]), h[1], h[2], h[3], h[5]) for h in headers[1:]]


def _elf_headers(blob: bytes) -> list[tuple[int, ...]]:
    shoff = struct.unpack_from("<I", blob, 0x20)[0]
    shentsize, shnum = struct.unpack_from("<HH", blob, 0x2E)
    return [struct.unpack_from("<IIIIIIIIII", blob, shoff + i * shentsize) for i in range(shnum)]


def elf_symbols(elf: Path) -> dict[str, tuple[int, int, int]]:
    """Symbols of the ELF (.symtab): name -> (value, size, type: 1 object, 2 function)."""
    blob = Path(elf).read_bytes()
    headers = _elf_headers(blob)
    out: dict[str, tuple[int, int, int]] = {}
    for h in headers:
        if h[1] != 2:  # SHT_SYMTAB
            continue
        strtab = headers[h[6]]  # sh_link
        for off in range(h[4], h[4] + h[5], 16):
            st_name, st_value, st_size, st_info = struct.unpack_from("<IIIB", blob, off)
            if st_info & 0xF not in (1, 2):
                continue
            end = blob.index(b"\0", strtab[4] + st_name)
            out[blob[strtab[4] + st_name : end].decode()] = (st_value, st_size, st_info & 0xF)
    return out


def function_symbols(elf: Path) -> dict[str, tuple[int, int]]:
    """Function symbols: name -> (address without the Thumb bit, size)."""
    return {name: (v & ~1, size) for name, (v, size, kind) in elf_symbols(elf).items() if kind == 2}


def address_taken_functions(elf: Path, exclude_ranges: Iterable[tuple[int, int]] = ()) -> set[str]:
    """Functions whose address is stored somewhere in the image (literal pools, tables, initialised data):
    the possible targets of an indirect call. Words inside `exclude_ranges` (e.g. the vector table) are
    not counted."""
    blob = Path(elf).read_bytes()
    funcs = function_symbols(elf)
    by_thumb_addr = {addr | 1: name for name, (addr, _size) in funcs.items()}
    excluded = list(exclude_ranges)
    taken: set[str] = set()
    for h in _elf_headers(blob)[1:]:
        sh_type, flags, addr, offset, size = h[1], h[2], h[3], h[4], h[5]
        if not flags & SHF_ALLOC or sh_type == SHT_NOBITS:
            continue
        start = (4 - addr % 4) % 4
        for i in range(start, size - 3, 4):
            word_addr = addr + i
            if any(lo <= word_addr < hi for lo, hi in excluded):
                continue
            value = struct.unpack_from("<I", blob, offset + i)[0]
            name = by_thumb_addr.get(value)
            if name is not None:
                taken.add(name)
    return taken


def berkeley_sizes(elf: Path) -> dict[str, int]:
    """text/data/bss of an ELF, as `arm-none-eabi-size` (Berkeley format) reports them."""
    out = dict.fromkeys(COLUMNS, 0)
    for sec in read_elf_sections(elf):
        if sec.column is not None:
            out[sec.column] += sec.size
    return out


# --- linker map ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class MapEntry:
    output_section: str
    input_section: str  # "*fill*" for the linker's padding
    addr: int
    size: int
    origin: str  # object file, "archive.a(member.o)", "linker stubs" or "" for padding


_OUT_SECTION = re.compile(r"^(\S+)(?:\s+0x([0-9a-fA-F]+)\s+0x([0-9a-fA-F]+))?(?:\s+load address 0x[0-9a-fA-F]+)?\s*$")
_IN_SECTION = re.compile(r"^ (\S+)(?:\s+0x([0-9a-fA-F]+)\s+0x([0-9a-fA-F]+)(?:\s+(.*))?)?\s*$")
_CONTINUATION = re.compile(r"^\s+0x([0-9a-fA-F]+)\s+0x([0-9a-fA-F]+)(?:\s+(.*))?$")


def parse_map(text: str) -> list[MapEntry]:
    """Input sections (with their object files) and padding of a GNU ld map file, by output section."""
    start = text.find("Linker script and memory map")
    if start < 0:
        raise PlatformError("not a GNU ld map file (no 'Linker script and memory map' part)")
    entries: list[MapEntry] = []
    out_section = ""
    pending: str | None = None  # an input section whose address/size/origin are on the next line
    for line in text[start:].splitlines()[1:]:
        if pending is not None:
            m = _CONTINUATION.match(line)
            if m:
                entries.append(MapEntry(out_section, pending, int(m[1], 16), int(m[2], 16), (m[3] or "").strip()))
            pending = None
            if m:
                continue
        if not line.strip() or line.startswith(("LOAD ", "START GROUP", "END GROUP", "OUTPUT(")):
            continue
        if not line[0].isspace():
            m = _OUT_SECTION.match(line)
            if m:
                out_section = m[1]
            continue
        if line.startswith(" *fill*"):
            parts = line.split()
            entries.append(MapEntry(out_section, "*fill*", int(parts[1], 16), int(parts[2], 16), ""))
            continue
        if line.startswith(" *") or line.startswith("  "):
            continue  # an input-section pattern, a symbol or an assignment
        m = _IN_SECTION.match(line)
        if not m:
            continue
        if m[2] is None:
            pending = m[1]
        else:
            entries.append(MapEntry(out_section, m[1], int(m[2], 16), int(m[3], 16), (m[4] or "").strip()))
    return entries


#: the flash section of the deploy firmware's parameter blob (utvm.platform.qemu.deploy.PARAMS_SECTION)
PARAMS_SECTION = "utvm_params"


def categorize(entry: MapEntry) -> str:
    origin = entry.origin.replace("\\", "/")
    if entry.input_section == PARAMS_SECTION:  # --params external: the weights, linked by the application
        return "constants"
    if "/codegen/" in origin or origin.startswith("codegen/"):
        return "constants" if entry.input_section.startswith(".rodata") else "operators"
    if re.search(r"\.a\([^)]*\)$", origin) or origin.endswith("board/platform.o"):
        return "runtime"
    return "application"


# --- sizes by category --------------------------------------------------------------------------------------
@dataclass
class Footprint:
    elf: str
    #: category -> column -> bytes
    categories: dict[str, dict[str, int]]
    #: the ELF's own Berkeley totals
    elf_totals: dict[str, int]
    #: object file -> column -> bytes (the detail behind the categories)
    objects: dict[str, dict[str, int]] = field(default_factory=dict)

    def totals(self) -> dict[str, int]:
        return {c: sum(cat[c] for cat in self.categories.values()) for c in COLUMNS}

    def check_against_elf(self) -> None:
        if self.totals() != self.elf_totals:
            raise PlatformError(
                f"footprint of {self.elf} does not add up: categories {self.totals()} vs ELF {self.elf_totals}"
            )

    def to_json(self) -> dict:
        return asdict(self) | {"totals": self.totals()}


def size_footprint(elf: Path, map_file: Path | None = None) -> Footprint:
    """Text/data/bss of a firmware split by category; the parts add up to the ELF's totals."""
    elf = Path(elf)
    map_file = Path(map_file) if map_file else elf.with_suffix(".map")
    if not map_file.is_file():
        raise PlatformError(f"no linker map {map_file} beside {elf} (link with -Wl,-Map=...)")
    entries = parse_map(map_file.read_text(errors="replace"))
    by_out: dict[str, list[MapEntry]] = {}
    for e in entries:
        by_out.setdefault(e.output_section, []).append(e)
    categories = {cat: dict.fromkeys(COLUMNS, 0) for cat in CATEGORIES}
    objects: dict[str, dict[str, int]] = {}
    for sec in read_elf_sections(elf):
        column = sec.column
        if column is None or sec.size == 0:
            continue
        attributed = 0
        for e in by_out.get(sec.name, []):
            if e.size == 0:
                continue
            cat = categorize(e)
            categories[cat][column] += e.size
            key = _short_origin(e.origin) if e.origin else "(linker padding)"
            objects.setdefault(key, dict.fromkeys(COLUMNS, 0))[column] += e.size
            attributed += e.size
        if attributed != sec.size:
            # Bytes the map does not attribute (should not happen with GNU ld): count them, visibly.
            categories["application"][column] += sec.size - attributed
            key = f"(unattributed in {sec.name})"
            objects.setdefault(key, dict.fromkeys(COLUMNS, 0))[column] += sec.size - attributed
    fp = Footprint(str(elf), categories, berkeley_sizes(elf), objects)
    fp.check_against_elf()
    return fp


def _short_origin(origin: str) -> str:
    m = re.match(r"^(.*/)?([^/]+\.a)\((.+)\)$", origin)
    if m:
        return f"{m[2]}({m[3]})"
    idx = origin.find("build/obj/")
    return origin[idx + len("build/obj/") :] if idx >= 0 else origin


# --- stack ------------------------------------------------------------------------------------------------
@dataclass
class Function:
    name: str
    frame: int | None  # bytes; None = unknown
    qualifier: str  # static | dynamic | dynamic,bounded | disassembly | unknown
    unit: str  # translation unit (or "<binary>" for functions known only from the disassembly)
    callees: list[str] = field(default_factory=list)
    indirect: bool = False


_CI_NODE = re.compile(r'node: \{ title: "([^"]+)" label: "([^"]*)"( shape : ellipse)? \}')
_CI_EDGE = re.compile(r'edge: \{ sourcename: "([^"]+)" targetname: "([^"]+)"')
_SU_LINE = re.compile(r"^(.*):(\d+):(\d+):(\S+)\t(\d+)\t(\S+)$")


def load_callgraph(build_dir: Path) -> dict[str, Function]:
    """Functions defined by the project's objects (from every .ci/.su under build_dir), by symbol name."""
    funcs: dict[str, Function] = {}
    for ci in sorted(Path(build_dir).rglob("*.ci")):
        unit = str(ci.relative_to(build_dir).with_suffix(""))
        text = ci.read_text(errors="replace")
        frames: dict[str, tuple[int, str]] = {}
        su = ci.with_suffix(".su")
        if su.is_file():
            for line in su.read_text(errors="replace").splitlines():
                m = _SU_LINE.match(line)
                if m:
                    frames[m[4]] = (int(m[5]), m[6])
        local: dict[str, Function] = {}
        for m in _CI_NODE.finditer(text):
            title, label, external = _bare(m[1]), m[2], m[3]
            if external:
                continue
            frame_m = re.search(r"(\d+) bytes \(([^)]+)\)", label)
            frame, qual = (int(frame_m[1]), frame_m[2]) if frame_m else frames.get(title, (None, "unknown"))
            local[title] = Function(title, frame, qual, unit)
        for m in _CI_EDGE.finditer(text):
            src, dst = _bare(m[1]), _bare(m[2])
            if src not in local:
                continue
            if dst == "__indirect_call":
                local[src].indirect = True
            elif dst not in local[src].callees:
                local[src].callees.append(dst)
        for name, fn in local.items():
            # Two units defining the same (static) name: keep the larger frame, the analysis stays an upper bound.
            prev = funcs.get(name)
            if prev is None or (fn.frame or 0) > (prev.frame or 0):
                if prev is not None:
                    fn.callees = list(dict.fromkeys(prev.callees + fn.callees))
                    fn.indirect = fn.indirect or prev.indirect
                funcs[name] = fn
    return funcs


def _bare(title: str) -> str:
    """GCC names a static function `path/to/file.c:name` in .ci files; the ELF calls it `name`."""
    return title.rsplit(":", 1)[-1] if ".c:" in title else title


_FUNC_HEADER = re.compile(r"^([0-9a-f]+) <([^>]+)>:$")
_INSN = re.compile(r"^\s*[0-9a-f]+:\s+(?:[0-9a-f]{4}(?: [0-9a-f]{4})?\s+)?(\S+)\s*(.*)$")
_CALL_TARGET = re.compile(r"<([^+>]+)>")


def disassembly_functions(elf: Path) -> dict[str, Function]:
    """Frame size (prologue) and calls of every function in the ELF, from arm-none-eabi-objdump -d."""
    out = subprocess.run(
        [cross_tool("objdump"), "-d", "--no-show-raw-insn", str(elf)], capture_output=True, text=True, check=True
    ).stdout
    funcs: dict[str, Function] = {}
    current: Function | None = None
    prologue = 0
    for line in out.splitlines():
        m = _FUNC_HEADER.match(line)
        if m:
            current = Function(m[2], 0, "disassembly", "<binary>")
            funcs[current.name] = current
            prologue = 0
            continue
        if current is None:
            continue
        m = _INSN.match(line)
        if not m:
            continue
        op, args = m[1].split(".")[0], m[2]
        prologue += 1
        if prologue <= 8 and op in ("push", "stmdb") and ("sp!" in args or op == "push"):
            regs = re.search(r"\{([^}]*)\}", args)
            if regs:
                current.frame = (current.frame or 0) + 4 * _count_regs(regs[1])
        elif prologue <= 8 and op == "vpush":
            regs = re.search(r"\{([^}]*)\}", args)
            if regs:
                width = 8 if regs[1].strip().startswith("d") else 4
                current.frame = (current.frame or 0) + width * _count_regs(regs[1])
        elif prologue <= 8 and op in ("sub", "subw") and args.startswith("sp, ") and "#" in args:
            imm = re.search(r"#(\d+)", args)
            if imm:
                current.frame = (current.frame or 0) + int(imm[1])
        elif op in ("bl", "blx"):
            t = _CALL_TARGET.search(args)
            if t:
                if t[1] not in current.callees:
                    current.callees.append(t[1])
            else:
                current.indirect = True  # blx rN
        elif op == "b" and "<" in args:
            t = _CALL_TARGET.search(args)
            if t and t[1] != current.name and t[1] not in current.callees:
                current.callees.append(t[1])  # a tail call to another function
    return funcs


def _count_regs(reglist: str) -> int:
    n = 0
    for part in reglist.split(","):
        part = part.strip()
        if "-" in part:
            lo, hi = (int(re.sub(r"\D", "", x)) for x in part.split("-"))
            n += hi - lo + 1
        elif part:
            n += 1
    return n


@dataclass
class StackReport:
    worst_case: int  # bytes = thread_cost + exception_frame + handler_cost
    thread_cost: int  # bytes of the heaviest path from the root
    handler_cost: int  # bytes of the heaviest exception handler path
    path: list[str]  # the heaviest call path from the root
    handler_path: list[str]  # the heaviest exception handler path (added on top)
    exception_frame: int
    indirect_calls: list[str]  # functions making calls through pointers (followed to every address-taken one)
    recursion: list[str]  # functions on a call cycle (counted once)
    dynamic: list[str]  # functions with a dynamic (alloca/VLA) frame
    from_disassembly: list[str]  # functions whose frame comes from the disassembly, not GCC
    unknown: list[str]  # called functions with no information at all (counted as 0)

    def to_json(self) -> dict:
        return asdict(self)


def stack_analysis(
    elf: Path, build_dir: Path, root: str = "Reset_Handler", handlers: Iterable[str] = (), fpu: bool = False
) -> StackReport:
    """Worst-case stack of the firmware, summed along its call graph (see the module docstring)."""
    funcs = disassembly_functions(elf)
    # Aliases (newlib's vsnprintf is vsniprintf): objdump labels an address with one of its names.
    by_addr: dict[int, str] = {}
    symbols = function_symbols(elf)
    for name, (addr, _size) in symbols.items():
        if name in funcs:
            by_addr.setdefault(addr, name)
    for name, (addr, _size) in symbols.items():
        if name not in funcs and addr in by_addr:
            funcs[name] = funcs[by_addr[addr]]
    linked = set(funcs)
    for name, fn in load_callgraph(build_dir).items():
        if name in linked:  # the linker may have dropped it (--gc-sections)
            funcs[name] = fn
    if root not in funcs:
        raise PlatformError(f"stack analysis: root function {root!r} is not in {elf}")
    # An indirect call may reach any function whose address the image stores (not counting the vector
    # table, whose entries are the roots): follow all of them, an upper bound.
    table = elf_symbols(elf).get("utvm_vector_table")
    vectors = [(table[0], table[0] + table[1])] if table else []
    targets = sorted(address_taken_functions(elf, vectors) & set(funcs))
    for fn in funcs.values():
        if fn.indirect:
            fn.callees = list(dict.fromkeys([*fn.callees, *(t for t in targets if t != fn.name)]))
    memo: dict[str, tuple[int, list[str]]] = {}
    on_stack: set[str] = set()
    recursion: set[str] = set()
    unknown: set[str] = set()
    seen: set[str] = set()

    def worst(name: str) -> tuple[int, list[str]]:
        if name in memo:
            return memo[name]
        fn = funcs.get(name)
        if fn is None:
            unknown.add(name)
            return 0, [name]
        if name in on_stack:
            recursion.add(name)
            return 0, [name]
        on_stack.add(name)
        seen.add(name)
        best, best_path = 0, []
        for callee in fn.callees:
            cost, path = worst(callee)
            if cost > best or not best_path:
                best, best_path = cost, path
        on_stack.discard(name)
        result = ((fn.frame or 0) + best, [name, *best_path])
        memo[name] = result
        return result

    total, path = worst(root)
    handler_cost, handler_path = 0, []
    for h in handlers:
        if h in funcs:
            cost, hp = worst(h)
            if cost > handler_cost or not handler_path:
                handler_cost, handler_path = cost, hp
    frame = (104 if fpu else 32) + 4  # hardware-stacked context + alignment padding
    exception = frame if handler_path else 0
    reached = [funcs[n] for n in sorted(seen)]
    return StackReport(
        worst_case=total + handler_cost + exception,
        thread_cost=total,
        handler_cost=handler_cost,
        path=path,
        handler_path=handler_path,
        exception_frame=exception,
        indirect_calls=[f.name for f in reached if f.indirect],
        recursion=sorted(recursion),
        dynamic=[f.name for f in reached if f.qualifier.startswith("dynamic")],
        from_disassembly=[f.name for f in reached if f.qualifier == "disassembly"],
        unknown=sorted(unknown),
    )


# --- the footprint of a model's deploy firmware -----------------------------------------------------------
@dataclass
class FirmwareReport:
    board: str
    convention: str
    project: str
    footprint: Footprint
    stack: StackReport
    measured_stack: int | None  # stack-painting high-water mark from a run in QEMU (None: not run)
    #: --params external: the parameter blob in flash ({"mode", "section", "address", "bytes"}, counted in the
    #: constants' text); None when the weights are in the code
    params: dict[str, Any] | None = None

    @property
    def stack_consistent(self) -> bool | None:
        """The static worst case must bound what a run actually used."""
        return None if self.measured_stack is None else self.stack.worst_case >= self.measured_stack

    def to_json(self) -> dict:
        return {
            "board": self.board,
            "convention": self.convention,
            "project": self.project,
            "sizes": {
                cat: {**cols, "total": sum(cols.values())} for cat, cols in self.footprint.categories.items()
            },
            "totals": {**self.footprint.totals(), "total": sum(self.footprint.totals().values())},
            "elf_totals": self.footprint.elf_totals,
            "objects": self.footprint.objects,
            "stack": {**self.stack.to_json(), "measured_high_water": self.measured_stack,
                      "consistent": self.stack_consistent},
            "params": self.params if self.params is not None else {"mode": "embedded"},
        }


#: The object of the deploy firmware that links the parameter blob (footprint `objects` key).
PARAMS_OBJECT = "src/params.o"

#: Exception handlers whose stack use may land on top of the deepest thread-mode path.
HANDLERS = ("SysTick_Handler", "Default_Handler")


def firmware_report(compiled, board_name: str, inputs=None, measure: bool = True) -> FirmwareReport:  # noqa: ANN001
    """Build the deploy firmware of `compiled` (cached) and measure it: sizes by category, static worst-case
    stack, and (measure=True) the stack high-water mark of one run in QEMU."""
    import numpy as np

    from utvm.platform.qemu.boards import get_board
    from utvm.platform.qemu.deploy import deploy_spec, run_deploy_firmware
    from utvm.platform.qemu.project import build_firmware

    board = get_board(board_name)
    if inputs is None:
        rng = np.random.default_rng(0)
        inputs = []
        for x in compiled.interface.inputs:
            if x.dtype.startswith("float"):
                inputs.append(rng.standard_normal(x.shape).astype(x.dtype))
            else:
                info = np.iinfo(x.dtype)
                inputs.append(rng.integers(info.min, info.max, x.shape, endpoint=True).astype(x.dtype))
    spec = deploy_spec(compiled, board_name, inputs, note="Random values (seed 0), for footprint measurement")
    project = build_firmware(spec, "deploy")
    build = project / "build"
    elf = build / "firmware.elf"
    fp = size_footprint(elf)
    fpu = any(f.startswith("-mfloat-abi=hard") for f in board.cpu_flags)
    stack = stack_analysis(elf, build, root="Reset_Handler", handlers=HANDLERS, fpu=fpu)
    measured = None
    if measure:
        out = run_deploy_firmware(board_name, elf)
        if out.status != 0:
            raise PlatformError(f"the deploy firmware of {compiled.model_name!r} returned status {out.status}")
        measured = out.stack_high_water
    params = params_in_flash(elf, fp) if getattr(compiled, "params_blob", None) is not None else None
    return FirmwareReport(board_name, compiled.options.convention, str(project), fp, stack, measured, params)


def params_in_flash(elf: Path, fp: Footprint) -> dict[str, Any]:
    """The parameter blob of a deploy firmware (--params external): its section, address and bytes, from the
    symbols src/params.c defines; PlatformError when the image has none or the footprint left it out of the
    constants (the flash totals would then hide the weights)."""
    syms = elf_symbols(elf)
    if "utvm_params_start" not in syms:
        raise PlatformError(f"{elf}: no parameter blob (symbol utvm_params_start) in a --params external firmware")
    address, size, _kind = syms["utvm_params_start"]
    blob = fp.objects.get(PARAMS_OBJECT, {}).get("text", 0)
    if size == 0 or blob < size or fp.categories["constants"]["text"] < size:
        raise PlatformError(f"{elf}: the parameter blob ({size} bytes at {address:#010x}) is not counted in "
                            f"the constants ({fp.categories['constants']['text']} bytes of text)")
    return {"mode": "external", "section": PARAMS_SECTION, "address": address, "bytes": size}
