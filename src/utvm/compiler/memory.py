"""Static memory planning: place buffers with known lifetimes in one workspace pool.

Input: buffers, each with a size (bytes) and a live interval [start, end] of execution steps (inclusive).
Two buffers *conflict* when their intervals intersect; conflicting buffers must not overlap in memory.
Output: an offset per buffer, every offset a multiple of `ALIGNMENT`, and the pool size.

A buffer occupies `extent(size)` bytes: its size aligned, at least ALIGNMENT (a buffer of 0 bytes still gets an
address of its own inside the workspace). The lower bound of any plan is the largest sum of extents of buffers
live at one step; on a chain (each buffer conflicts only with its neighbours) a plan that reaches it always
exists.

Algorithms (`ALGORITHMS`), all deterministic:
- `greedy_by_size`: largest buffer first, each at the lowest offset free of the conflicting buffers
  already placed (first fit).
- `greedy_by_conflicts`: the buffer with the most conflicting bytes first, then first fit.
- `branch_and_bound` (default): a depth-first search over placement orders with first fit. Any optimal
  plan can be brought to a form that first fit reproduces when buffers are placed in increasing
  (offset, id) order, so the search only explores orders whose offsets never decrease; it starts from the
  best of the greedy plans and the two-sided plan below, stops at the lower bound, and gives up after
  `NODE_BUDGET` search nodes (the plan is then the best found and `optimal` is False).

Persistent buffers (the state of stateful kernels, `KernelCode.persistent_bytes`) live for the whole run
and across runs: `persistent(id, size, steps)` makes one an interval over every step, so it conflicts with
every other buffer and is never shared (nothing else is in the workspace between runs). It must be all-zero
before the first run: the static workspace is in .bss; a workspace the application supplies must be zeroed
by it once before the first call and kept for the model afterwards (docs/compiler.md).

The two-sided plan: when no three buffers are live at once (the conflict graph of intervals is then
bipartite, e.g. a chain), every buffer of one side sits at offset 0 and every buffer of the other side
ends at the top of a pool as large as the largest conflicting pair. That is the lower bound, found in
linear time however long the chain, where a search could run out of budget.

Memory pools (`--memory-pool NAME:SIZE[:ATTRS]`, `PoolSpec`, `parse_pool`): `place_pools` places the buffers
over named pools of bounded size in order of preference, USMP-style: the first pool gets what the chosen
algorithm's plan of all remaining buffers puts below its size, then first fit adds what else fits; the
rest spills to the next pool; the last pool takes all that is left or the plan fails with one line naming
the peak (lower bound), each pool's size and need, and the overflow. No buffer crosses a pool; persistent
blocks are placed like the others. The offsets are in the pools' concatenation (`PoolUse.base`, `locate`).

A pool either receives buffers or is empty: an empty pool (`PoolUse.used == 0`, no `ids`) is still declared
everywhere (header macro 0, metadata.json, TVMModel size 0, a NULL-able TVMContext slot) but no offset ever
maps into it. To keep that unambiguous a buffer of 0 bytes occupies one (so every buffer has an address
strictly inside the pool that holds it, and a pool that holds one has `used` > 0), pool `k` owns exactly
the offsets [base, base + used), and `place_pools` checks every buffer's `locate` against the pool that
received it (`check_pooled`). Pool names share C and macro name spaces with generated symbols: the names
those symbols would take (`RESERVED_POOL_NAMES`, built from the same constants the generator uses) are
refused.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from utvm.errors import CompileError

ALIGNMENT = 16
NODE_BUDGET = 20000


@dataclass(frozen=True, slots=True)
class Interval:
    """A buffer to place: `size` bytes live from step `start` to step `end` (inclusive)."""

    id: int
    size: int
    start: int
    end: int

    def conflicts(self, other: Interval) -> bool:
        return self.start <= other.end and other.start <= self.end


def persistent(id: int, size: int, steps: int) -> Interval:
    """A buffer live at every step of a run of `steps` steps and between runs (state kept across runs)."""
    return Interval(id, size, 0, max(steps - 1, 0))


@dataclass(frozen=True, slots=True)
class Placement:
    algorithm: str
    offsets: dict[int, int]  # interval id -> byte offset
    size: int  # pool bytes
    lower_bound: int
    optimal: bool  # size == lower_bound, or proven minimal by the search


def align(n: int, a: int = ALIGNMENT) -> int:
    return (n + a - 1) // a * a


def extent(size: int) -> int:
    """The bytes a buffer of `size` bytes occupies in a plan: its size aligned, and at least ALIGNMENT for a
    buffer of 0 bytes, so every buffer has an address of its own strictly inside the memory that holds it (a
    0-byte buffer at the end of a workspace would point past it, or into the next pool)."""
    return align(max(size, 1))


def lower_bound(items: Sequence[Interval]) -> int:
    """Largest sum of aligned sizes of buffers live at the same step."""
    events: dict[int, int] = {}
    for it in items:
        events[it.start] = events.get(it.start, 0) + extent(it.size)
        events[it.end + 1] = events.get(it.end + 1, 0) - extent(it.size)
    live = best = 0
    for step in sorted(events):
        live += events[step]
        best = max(best, live)
    return best


def _first_fit(size: int, placed: Sequence[tuple[int, int]]) -> int:
    """Lowest aligned offset where [offset, offset + size) avoids every (offset, size) in `placed`."""
    offset = 0
    for off, sz in sorted(placed):
        if off >= offset + size:
            break
        offset = max(offset, align(off + sz))
    return offset


def _conflict_lists(items: Sequence[Interval]) -> dict[int, list[Interval]]:
    out: dict[int, list[Interval]] = {it.id: [] for it in items}
    for i, a in enumerate(items):
        for b in items[i + 1:]:
            if a.conflicts(b):
                out[a.id].append(b)
                out[b.id].append(a)
    return out


def _place_in_order(order: Sequence[Interval], conflicts: dict[int, list[Interval]]) -> dict[int, int]:
    offsets: dict[int, int] = {}
    for it in order:
        placed = [(offsets[o.id], extent(o.size)) for o in conflicts[it.id] if o.id in offsets]
        offsets[it.id] = _first_fit(extent(it.size), placed)
    return offsets


def _pool_size(items: Sequence[Interval], offsets: dict[int, int]) -> int:
    return max((offsets[it.id] + extent(it.size) for it in items), default=0)


def greedy_by_size(items: Sequence[Interval]) -> dict[int, int]:
    order = sorted(items, key=lambda it: (-extent(it.size), it.start, it.id))
    return _place_in_order(order, _conflict_lists(items))


def greedy_by_conflicts(items: Sequence[Interval]) -> dict[int, int]:
    conflicts = _conflict_lists(items)
    weight = {it.id: sum(extent(o.size) for o in conflicts[it.id]) + extent(it.size) for it in items}
    order = sorted(items, key=lambda it: (-weight[it.id], -extent(it.size), it.start, it.id))
    return _place_in_order(order, conflicts)


def two_sided(items: Sequence[Interval], conflicts: dict[int, list[Interval]]) -> dict[int, int] | None:
    """The two-sided plan of the module docstring, or None when the conflict graph is not bipartite."""
    side: dict[int, int] = {}
    for root in items:
        if root.id in side:
            continue
        side[root.id] = 0
        queue = [root]
        while queue:
            it = queue.pop()
            for o in conflicts[it.id]:
                if o.id not in side:
                    side[o.id] = 1 - side[it.id]
                    queue.append(o)
                elif side[o.id] == side[it.id]:
                    return None
    pool = max((extent(it.size) for it in items), default=0)
    for it in items:
        for o in conflicts[it.id]:
            pool = max(pool, extent(it.size) + extent(o.size))
    return {it.id: 0 if side[it.id] == 0 else pool - extent(it.size) for it in items}


def branch_and_bound(items: Sequence[Interval], budget: int = NODE_BUDGET) -> tuple[dict[int, int], bool]:
    """Exact search (see the module docstring); returns (offsets, proven_optimal)."""
    conflicts = _conflict_lists(items)
    bound = lower_bound(items)
    seeds = [greedy_by_size(items), greedy_by_conflicts(items)]
    bipartite = two_sided(items, conflicts)
    if bipartite is not None:
        seeds.append(bipartite)
    best = min(seeds, key=lambda o: _pool_size(items, o))
    best_size = _pool_size(items, best)
    if best_size <= bound or not items:
        return best, True
    sizes = {it.id: extent(it.size) for it in items}
    ids = sorted(it.id for it in items)
    nodes = 0
    exhausted = True

    def dfs(offsets: dict[int, int], last: tuple[int, int], peak: int) -> None:
        nonlocal best, best_size, nodes, exhausted
        if best_size <= bound:
            return
        if len(offsets) == len(ids):
            if peak < best_size:
                best, best_size = dict(offsets), peak
            return
        nodes += 1
        if nodes > budget:
            exhausted = False
            return
        candidates = []
        future_peak = peak
        for i in ids:
            if i in offsets:
                continue
            placed = [(offsets[o.id], sizes[o.id]) for o in conflicts[i] if o.id in offsets]
            off = _first_fit(sizes[i], placed)
            # First-fit offsets only grow as more buffers are placed, and canonical orders never go
            # below `last`: this buffer ends at least here in any completion.
            future_peak = max(future_peak, max(off, last[0]) + sizes[i])
            if (off, i) > last:
                candidates.append((off, -sizes[i], i))
        if future_peak >= best_size:
            return
        for off, _neg, i in sorted(candidates):
            end = off + sizes[i]
            if max(peak, end) >= best_size:
                continue
            offsets[i] = off
            dfs(offsets, (off, i), max(peak, end))
            del offsets[i]
            if best_size <= bound or nodes > budget:
                return

    dfs({}, (-1, -1), 0)
    return best, exhausted or best_size <= bound


def _bnb(items: Sequence[Interval]) -> dict[int, int]:
    return branch_and_bound(items)[0]


ALGORITHMS: dict[str, Callable[[Sequence[Interval]], dict[int, int]]] = {
    "greedy_by_size": greedy_by_size,
    "greedy_by_conflicts": greedy_by_conflicts,
    "branch_and_bound": _bnb,
}
DEFAULT_ALGORITHM = "branch_and_bound"


def place(items: Sequence[Interval], algorithm: str = DEFAULT_ALGORITHM) -> Placement:
    """Plan `items` with `algorithm`; the result is checked (no conflicting overlap, aligned)."""
    if algorithm not in ALGORITHMS:
        raise CompileError(f"unknown memory planner {algorithm!r}; choose one of {', '.join(ALGORITHMS)}")
    bound = lower_bound(items)
    if algorithm == "branch_and_bound":
        offsets, proven = branch_and_bound(items)
    else:
        offsets, proven = ALGORITHMS[algorithm](items), False
    size = _pool_size(items, offsets)
    check(items, offsets)
    return Placement(algorithm, offsets, size, bound, proven or size == bound)


def check(items: Sequence[Interval], offsets: dict[int, int]) -> None:
    """Raise CompileError if a plan overlaps two live buffers or misaligns one (a planner bug)."""
    for it in items:
        if it.id not in offsets:
            raise CompileError(f"memory plan: buffer {it.id} was not placed")
        if offsets[it.id] % ALIGNMENT:
            raise CompileError(f"memory plan: buffer {it.id} at offset {offsets[it.id]} is not {ALIGNMENT}-aligned")
    for i, a in enumerate(items):
        for b in items[i + 1:]:
            if a.conflicts(b):
                oa, ob = offsets[a.id], offsets[b.id]
                if oa < ob + extent(b.size) and ob < oa + extent(a.size):
                    raise CompileError(f"memory plan: buffers {a.id} and {b.id} are live together at steps "
                                       f"{max(a.start, b.start)}..{min(a.end, b.end)} but overlap in memory")


# --- memory pools (--memory-pool NAME:SIZE[:ATTRS]) -------------------------------------------------------

#: SIZE suffixes of `--memory-pool` (case-insensitive): binary multiples.
SIZE_SUFFIXES = {"": 1, "k": 1024, "kb": 1024, "kib": 1024, "m": 1024 * 1024, "mb": 1024 * 1024,
                 "mib": 1024 * 1024}
_POOL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
MAX_POOL_NAME = 32
_SECTION_NAME = re.compile(r"[A-Za-z0-9_.$]{1,64}")
MAX_POOL_BYTES = 2**31 - 1
MAX_POOL_ALIGN = 4096
POOL_ATTRS = "rw, section=NAME, align=N"


def check_section(value: str, what: str) -> None:
    """A linker section name (a pool's `section=`, --constants-section): ValueError naming `what` if not."""
    if not isinstance(value, str) or not _SECTION_NAME.fullmatch(value):
        raise ValueError(f"{what} {str(value)[:40]!r} is not a section name ([A-Za-z0-9_.$]+, at most 64 characters)")


#: Sections a workspace cannot live in: code, read-only data, startup tables, unwind, debug and link metadata,
#: and the heap and stack the startup code owns (each also with its `.NAME.*` subsections). A pool there is
#: written where the target cannot (flash, a read-only mapping) or over what the startup code and the linker
#: own (the board linker scripts start the heap at `.heap`).
NOT_WORKSPACE_SECTIONS = (".text", ".rodata", ".init", ".fini", ".init_array", ".fini_array", ".preinit_array",
                          ".ctors", ".dtors", ".isr_vector", ".vectors", ".ARM.exidx", ".ARM.extab",
                          ".ARM.attributes", ".eh_frame", ".eh_frame_hdr", ".gcc_except_table", ".comment",
                          ".debug", ".note", ".symtab", ".strtab", ".shstrtab", ".interp", ".dynamic", ".dynsym",
                          ".dynstr", ".got", ".plt", ".heap", ".stack")


def check_pool_section(value: str, what: str) -> None:
    """A pool's `section=`: a section name (check_section) the workspace can be written in; ValueError naming
    `what` if not."""
    check_section(value, what)
    for ro in NOT_WORKSPACE_SECTIONS:
        if value == ro or value.startswith(ro + "."):
            raise ValueError(f"{what} {value!r} is not for a workspace ({ro} holds code, read-only data or what the "
                             "startup code owns); use a RAM section of its own, e.g. .dtcm or .bss.pool")


# Generated symbols built from a pool name, and the generated symbols that share their name space. The code
# generator takes its names from these functions, and the pool names that would collide with one of them are
# RESERVED_POOL_NAMES, checked when a pool is given: the two cannot drift apart.
#: `tvmgen_<m>_workspace_sizes`: the TVMModel's table of pool sizes, beside the pools' static arrays.
WORKSPACE_SIZES_SUFFIX = "sizes"


def pool_array_name(prefix: str, pool: str) -> str:
    """The static array of pool `pool` in `<prefix>_main.c` (`--workspace static`)."""
    return f"{prefix}_workspace_{pool}"


def workspace_sizes_name(prefix: str) -> str:
    """The TVMModel's `size_t` table of workspace sizes in `<prefix>_main.c` (interface c)."""
    return pool_array_name(prefix, WORKSPACE_SIZES_SUFFIX)


def pool_param_name(pool: str) -> str:
    """The `uint8_t*` parameter / local of pool `pool` in the generated main and run (`--workspace user`)."""
    return f"workspace_{pool}"


def pool_macro_prefix(model_upper: str, pool: str) -> str:
    """`TVMGEN_<M>_<POOL>`: the prefix of the pool's header macros (`_WORKSPACE_SIZE`, `_WORKSPACE_INDEX`)."""
    return f"TVMGEN_{model_upper}_{pool.upper()}"


#: Pool names refused (compared ignoring case, as pool names are): their symbols are already generated.
RESERVED_POOL_NAMES = frozenset({WORKSPACE_SIZES_SUFFIX})


def check_pool_name(name: object) -> str:
    """`name` if it is a usable pool name: a C identifier of at most MAX_POOL_NAME characters, not reserved;
    ValueError naming it otherwise."""
    if not isinstance(name, str) or not _POOL_NAME.fullmatch(name) or len(name) > MAX_POOL_NAME:
        raise ValueError(f"pool name {str(name)[:40]!r} is not a C identifier of at most {MAX_POOL_NAME} characters")
    if name.lower() in RESERVED_POOL_NAMES:
        reserved = ", ".join(sorted(RESERVED_POOL_NAMES))
        raise ValueError(f"pool name {name!r} is reserved: its array would be the generated "
                         f"{pool_array_name('tvmgen_<m>', name.lower())} (reserved names, compared ignoring case: "
                         f"{reserved})")
    return name


@dataclass(frozen=True, slots=True)
class PoolSpec:
    """A memory pool the plan may use: `size` bytes (its capacity), `section` (the linker section its static
    array goes in, "" for the default .bss), `align` (its base alignment, at least ALIGNMENT)."""

    name: str
    size: int
    section: str = ""
    align: int = ALIGNMENT

    def attrs(self) -> dict[str, object]:
        out: dict[str, object] = {"access": "rw"}
        if self.section:
            out["section"] = self.section
        if self.align != ALIGNMENT:
            out["align"] = self.align
        return out

    def to_option(self) -> str:
        """The `--memory-pool` value that gives this pool."""
        extra = [f"section={self.section}"] if self.section else []
        extra += [f"align={self.align}"] if self.align != ALIGNMENT else []
        return f"{self.name}:{self.size}" + (f":rw,{','.join(extra)}" if extra else "")

    def validate(self) -> None:
        """ValueError naming the field of a pool that `parse_pool` would not give (the Python API, metadata)."""
        check_pool_name(self.name)
        if type(self.size) is not int:
            raise ValueError(f"pool {self.name}: size {self.size!r} is not an int number of bytes")
        if self.size < 1:
            raise ValueError(f"pool {self.name}: size {self.size} must be at least 1 byte")
        if self.size > MAX_POOL_BYTES:
            raise ValueError(f"pool {self.name}: size {self.size} is over {MAX_POOL_BYTES} bytes")
        if self.section:
            check_pool_section(self.section, f"pool {self.name}: section")
        elif not isinstance(self.section, str):
            raise ValueError(f"pool {self.name}: section {self.section!r} is not a section name")
        a = self.align
        if type(a) is not int or a < ALIGNMENT or a > MAX_POOL_ALIGN or a & (a - 1):
            raise ValueError(f"pool {self.name}: align {a!r} is not a power of two from {ALIGNMENT} to "
                             f"{MAX_POOL_ALIGN}")


def parse_size(text: str) -> int:
    """Bytes, or a number with a suffix K/KB/KiB (1024) or M/MB/MiB (1048576); ValueError naming the text."""
    m = re.fullmatch(r"[ \t]*([0-9]{1,20})[ \t]*([A-Za-z]*)[ \t]*", text)
    if not m or m.group(2).lower() not in SIZE_SUFFIXES:
        raise ValueError(f"size {text[:40]!r} is not a number of bytes (suffixes: K, KB, KiB, M, MB, MiB)")
    return int(m.group(1)) * SIZE_SUFFIXES[m.group(2).lower()]


def parse_pool(text: str) -> PoolSpec:
    """`NAME:SIZE[:ATTRS]` (ATTRS comma-separated: `rw`, `section=NAME`, `align=N`, each at most once);
    ValueError naming the part."""
    parts = text.split(":")
    if len(parts) not in (2, 3):
        raise ValueError(f"{text[:60]!r} is not NAME:SIZE[:ATTRS]")
    name, size_text = parts[0], parts[1]
    check_pool_name(name)  # before the rest, so every later message may name the pool
    size = parse_size(size_text)
    section, align_ = "", ALIGNMENT
    seen: set[str] = set()
    for attr in (parts[2].split(",") if len(parts) == 3 else []):
        key, eq, value = attr.strip().partition("=")
        if key in ("rw", "section", "align") and key in seen:
            raise ValueError(f"pool {name}: attribute {key!r} is given twice (each attribute at most once)")
        seen.add(key)
        if key == "rw" and not eq:
            continue
        if key == "section" and eq:
            check_pool_section(value, f"pool {name}: section")  # here: an empty `section=` is no section to validate
            section = value
        elif key == "align" and eq:
            if not re.fullmatch(r"[0-9]{1,5}", value) or int(value) < 1 or int(value) & (int(value) - 1) \
                    or int(value) > MAX_POOL_ALIGN:
                raise ValueError(f"pool {name}: align {value[:20]!r} is not a power of two from 1 to {MAX_POOL_ALIGN}")
            align_ = max(ALIGNMENT, int(value))  # below ALIGNMENT: every buffer is ALIGNMENT-aligned anyway
        else:
            raise ValueError(f"pool {name}: unknown attribute {attr[:40]!r} (known: {POOL_ATTRS})")
    spec = PoolSpec(name, size, section, align_)
    spec.validate()  # the one definition of a pool's ranges (the API and metadata go through it too)
    return spec


def check_pools(pools: Sequence[PoolSpec]) -> None:
    """CompileError for a pool `parse_pool` would refuse (a bad or reserved name, size, section or alignment)
    and for duplicate pool names."""
    seen: set[str] = set()
    for p in pools:
        if not isinstance(p, PoolSpec):
            raise CompileError(f"memory pool {str(p)[:40]!r} is not a PoolSpec (utvm.compiler.memory.parse_pool)")
        try:
            p.validate()
        except ValueError as exc:
            raise CompileError(f"memory pool: {exc}") from None
        if p.name.lower() in seen:  # the macros upper-case the name
            raise CompileError(f"memory pool {p.name!r} is given twice (names are compared ignoring case)")
        seen.add(p.name.lower())


@dataclass(frozen=True, slots=True)
class PoolUse:
    """One pool of a pooled plan: its buffers sit at [base, base + used) of the plan's concatenated offsets
    (pool offset = plan offset - base); `used` <= `spec.size`. A pool that received no buffer has `used` 0
    and no `ids`: it owns no offset and needs no memory (its TVMContext slot may be NULL)."""

    spec: PoolSpec
    base: int
    used: int
    ids: tuple[int, ...]


def _fit(items: Sequence[Interval], capacity: int, algorithm: str) -> tuple[dict[int, int], list[Interval]]:
    """Place as many of `items` as fit into `capacity` bytes: the algorithm's plan of all of them, keep those
    that end within the capacity, then first fit for the rest (largest first) below the capacity."""
    offsets = place(items, algorithm).offsets if items else {}
    kept = {it.id: offsets[it.id] for it in items if offsets[it.id] + extent(it.size) <= capacity}
    conflicts = _conflict_lists(items)
    rest = [it for it in items if it.id not in kept]
    spilled: list[Interval] = []
    for it in sorted(rest, key=lambda it: (-extent(it.size), it.start, it.id)):
        placed = [(kept[o.id], extent(o.size)) for o in conflicts[it.id] if o.id in kept]
        off = _first_fit(extent(it.size), placed)
        if off + extent(it.size) <= capacity:
            kept[it.id] = off
        else:
            spilled.append(it)
    return kept, sorted(spilled, key=lambda it: it.id)


def place_pools(items: Sequence[Interval], pools: Sequence[PoolSpec],
                algorithm: str = DEFAULT_ALGORITHM) -> tuple[Placement, tuple[PoolUse, ...]]:
    """USMP-style placement over `pools` in order of preference: fill the first pool as well as `algorithm`
    (then first fit) allows, spill what does not fit to the next, and so on; no buffer crosses a pool.
    Offsets in the returned Placement are in the pools' concatenation (PoolUse.base); a pool that receives
    nothing has `used` 0 and owns no offset. A plan that does not fit raises CompileError naming the peak,
    every pool with its size and need, and the overflow."""
    check_pools(pools)
    if not pools:
        raise CompileError("memory pools: none given (give at least one --memory-pool, or none for one workspace)")
    if algorithm not in ALGORITHMS:
        raise CompileError(f"unknown memory planner {algorithm!r}; choose one of {', '.join(ALGORITHMS)}")
    bound = lower_bound(items)
    rest = list(items)
    uses: list[PoolUse] = []
    offsets: dict[int, int] = {}
    base = 0
    for k, spec in enumerate(pools):
        if k == len(pools) - 1:
            local = place(rest, algorithm).offsets if rest else {}
            need = _pool_size(rest, local)
            if need > spec.size:
                needs = [f"{u.spec.name} {u.spec.size} bytes (uses {u.used})" for u in uses]
                needs.append(f"{spec.name} {spec.size} bytes (would need {need})")
                raise CompileError(
                    f"the workspace does not fit the memory pools: peak of the model {bound} bytes (lower bound); "
                    f"pools {', '.join(needs)}; over by {need - spec.size} bytes")
            chosen, rest = local, []
        else:
            chosen, rest = _fit(rest, spec.size, algorithm)
        ids = tuple(sorted(chosen))
        used = _pool_size([it for it in items if it.id in chosen], chosen)
        for i in ids:
            offsets[i] = base + chosen[i]
        uses.append(PoolUse(spec, base, used, ids))
        check([it for it in items if it.id in chosen], chosen)
        base += align(used)
    total = base
    result = tuple(uses)
    check_pooled(items, offsets, result)
    return Placement(algorithm, offsets, total, bound, total == bound), result


def check_pooled(items: Sequence[Interval], offsets: dict[int, int], pools: Sequence[PoolUse]) -> None:
    """Raise CompileError unless every buffer is in exactly one pool, inside it (aligned, within `used`, which
    is within the pool's capacity), `locate` maps its offset back to that pool, and a pool that received no
    buffer uses no byte (a planner bug; every consumer of the plan relies on it)."""
    owner: dict[int, int] = {}
    for k, use in enumerate(pools):
        if bool(use.ids) != (use.used > 0) or not 0 <= use.used <= use.spec.size:
            raise CompileError(f"memory plan: pool {use.spec.name!r} uses {use.used} of {use.spec.size} bytes "
                               f"for {len(use.ids)} buffers")
        for i in use.ids:
            if i in owner:
                raise CompileError(f"memory plan: buffer {i} is in pools {pools[owner[i]].spec.name!r} and "
                                   f"{use.spec.name!r}")
            owner[i] = k
    for it in items:
        if it.id not in owner or it.id not in offsets:
            raise CompileError(f"memory plan: buffer {it.id} is in no pool")
        k = owner[it.id]
        where, local = locate(pools, offsets[it.id])
        if where != k or local % ALIGNMENT or local + extent(it.size) > pools[k].used:
            raise CompileError(f"memory plan: buffer {it.id} ({it.size} bytes at offset {offsets[it.id]}) is not "
                               f"inside its pool {pools[k].spec.name!r}")


def pool_to_json(use: PoolUse) -> dict[str, object]:
    """A pool of a pooled plan in metadata.json (modules.<m>.memory.pools[i])."""
    return {"name": use.spec.name, "size_bytes": use.used, "capacity_bytes": use.spec.size,
            "attrs": use.spec.attrs(), "base": use.base, "buffers": list(use.ids)}


def pool_from_json(d: dict) -> PoolUse:
    """A pool of metadata.json (pool_to_json); ValueError for one `parse_pool` or `place_pools` would not give."""
    attrs = d.get("attrs", {})
    spec = PoolSpec(str(d["name"]), int(d["capacity_bytes"]), str(attrs.get("section", "")),
                    int(attrs.get("align", ALIGNMENT)))
    spec.validate()
    use = PoolUse(spec, int(d["base"]), int(d["size_bytes"]), tuple(int(i) for i in d["buffers"]))
    if use.base < 0 or use.base % ALIGNMENT or not 0 <= use.used <= spec.size or bool(use.ids) != (use.used > 0):
        raise ValueError(f"pool {spec.name}: base {use.base}, {use.used} of {spec.size} bytes used by "
                         f"{len(use.ids)} buffers")
    return use


def locate(pools: Sequence[PoolUse], offset: int) -> tuple[int, int]:
    """(pool index, offset in that pool) of a plan offset of a pooled plan: pool k owns [base, base + used),
    so a pool that received nothing (used 0) owns no offset."""
    for k, use in enumerate(pools):
        if use.base <= offset < use.base + use.used:
            return k, offset - use.base
    raise CompileError(f"memory plan: offset {offset} is in no pool")
