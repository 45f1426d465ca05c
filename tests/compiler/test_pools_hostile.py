"""Hostile memory pools (issue 19, "silent memory corruption"): a pool either receives buffers or is empty,
and an empty pool owns no offset (no buffer is ever addressed from it, in any convention or consumer); pool
names never collide with generated symbols; a repeated attribute in one --memory-pool is refused; the
planner places every buffer inside a pool that exists and has room, or refuses in one line."""

from __future__ import annotations

import ctypes
import io
import json
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from utvm.cli import main
from utvm.compiler import compile, memory
from utvm.compiler.driver import CompiledModel, system_lib_name
from utvm.compiler.header import header_macros
from utvm.compiler.local import LocalModel, aligned_empty, random_inputs
from utvm.errors import CompileError
from utvm.frontend import load
from utvm.mlf import export_model_library_format
from utvm.mlf import load as load_mlf
from utvm.platform.qemu.deploy import parse_deploy_output
from utvm.support import cc
from utvm.support.models import models_dir

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tflite_builder import TFLiteBuilder  # noqa: E402

HELLO = models_dir() / "tflm" / "hello_world_int8.tflite"
CONVENTIONS = [{}, {"unpacked_api": True}, {"unpacked_api": True, "interface_api": "c"},
               {"unpacked_api": True, "interface_api": "c", "workspace": "user"}]
CONV_IDS = ["packed", "unpacked", "c-static", "c-user"]
CONV_ARGS = {"packed": [], "unpacked": ["--unpacked-api"], "c-static": ["--unpacked-api", "--interface-api", "c"],
             "c-user": ["--unpacked-api", "--interface-api", "c", "--workspace", "user"]}
# hello_world has two 16-byte buffers live together at step 1: `tiny` (first) and `none` (between) are too
# small for any buffer, `mid` takes one, `big` the other.
POOLS = (memory.PoolSpec("tiny", 8), memory.PoolSpec("mid", 16), memory.PoolSpec("none", 8),
         memory.PoolSpec("big", 64 * 1024))
POOL_ARGS = [a for p in POOLS for a in ("--memory-pool", p.to_option())]
EMPTY = {"tiny": 0, "none": 2}  # name -> index of the pools that must receive nothing


@pytest.fixture(scope="module")
def hello():  # noqa: ANN201
    graph = load(HELLO)
    single = compile(graph, model_name="hw")
    x = random_inputs(single, np.random.default_rng(11))
    return graph, x, LocalModel(single, opt="-O1").run(x)


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


def check_plan_in_pools(c: CompiledModel) -> None:
    """Every buffer inside a pool that received it (located there, aligned, within what it uses, which is
    within its capacity); every pool that received nothing uses 0 bytes and owns no offset."""
    plan = c.plan
    items = [memory.Interval(b.id, b.size, b.start, b.end) for b in plan.buffers]
    memory.check_pooled(items, {b.id: b.offset for b in plan.buffers}, plan.pools)
    for b in plan.buffers:
        k, local = memory.locate(plan.pools, b.offset)
        use = plan.pools[k]
        assert b.id in use.ids and use.used > 0
        assert local % memory.ALIGNMENT == 0 and local + memory.extent(b.size) <= use.used <= use.spec.size
    for off in {*plan.scratch.values(), *plan.persistent.values(),
                *(w for kind, w in plan.locations.values() if kind == "workspace")}:
        assert plan.pools[memory.locate(plan.pools, off)[0]].used > 0


def _structs(c: CompiledModel, ins: list[np.ndarray], outs: list[np.ndarray]) -> tuple[ctypes.Structure, ...]:
    def make(xs: tuple, arrays: list[np.ndarray]) -> ctypes.Structure:
        cls = type("S", (ctypes.Structure,), {"_fields_": [(x.field, ctypes.c_void_p) for x in xs]})
        return cls(*(a.ctypes.data for a in arrays))

    return make(c.interface.inputs, ins), make(c.interface.outputs, outs)


def run_with_workspaces(m: LocalModel, c: CompiledModel, x: list[np.ndarray],
                        slots: list[np.ndarray | None]) -> tuple[int, list[np.ndarray]]:
    """Call tvmgen_<m>_run (interface c, --workspace user) with a TVMContext whose workspaces are `slots`
    (None: a NULL pointer)."""
    ins = [np.ascontiguousarray(a) for a in x]
    outs = [np.zeros(o.shape, dtype=o.dtype) for o in c.interface.outputs]
    s_in, s_out = _structs(c, ins, outs)
    ptrs = (ctypes.c_void_p * len(slots))(*(None if s is None else s.ctypes.data for s in slots))
    ctx_cls = type("TVMContext", (ctypes.Structure,), {"_fields_": [("workspace", ctypes.c_void_p)]})
    ctx = ctx_cls(ctypes.cast(ptrs, ctypes.c_void_p))
    fn = getattr(m.lib, f"{c.prefix}_run")
    fn.restype = ctypes.c_int32
    return int(fn(ctypes.byref(s_in), ctypes.byref(s_out), ctypes.byref(ctx))), outs


# --- a pool either receives buffers or owns nothing ---------------------------------------------------------

@pytest.mark.parametrize("conv", CONVENTIONS, ids=CONV_IDS)
def test_pools_too_small_for_any_buffer_own_nothing_in_every_convention(hello, conv: dict) -> None:  # noqa: ANN001
    graph, x, want = hello
    c = compile(graph, model_name="hw", memory_pools=POOLS, **conv)
    check_plan_in_pools(c)
    assert [(u.spec.name, u.used, len(u.ids)) for u in c.plan.pools] == [
        ("tiny", 0, 0), ("mid", 16, 1), ("none", 0, 0), ("big", 16, 1)]
    # Declared everywhere with size 0: header, metadata.json, the TVMModel.
    macros = header_macros(c.metadata, "hw")
    for name, k in EMPTY.items():
        assert macros[f"TVMGEN_HW_{name.upper()}_WORKSPACE_SIZE"] == 0
        assert macros[f"TVMGEN_HW_{name.upper()}_WORKSPACE_INDEX"] == k
    meta = c.metadata["modules"]["hw"]["memory"]["pools"]
    assert [(p["name"], p["size_bytes"], p["buffers"]) for p in meta if p["name"] in EMPTY] == [
        ("tiny", 0, []), ("none", 0, [])]
    # Nothing in the C is addressed from an empty pool.
    main_c = c.sources["tvmgen_hw_main.c"]
    for name, k in EMPTY.items():
        assert f"(ws{k} + " not in main_c and f"const ws{k} =" not in main_c
        assert memory.pool_array_name("tvmgen_hw", name) not in main_c
        assert f"context->workspace[{k}]" not in main_c
    if conv.get("workspace") == "user":  # the RPC adapter gives an empty pool no memory either
        adapter = c.rpc_sources[system_lib_name("hw")]
        assert "{NULL, tvmgen_hw_rpc_workspace1, NULL, tvmgen_hw_rpc_workspace3}" in adapter
    # Built with the strict flags (LocalModel), run bit-exact through every entry point.
    assert {"-Wall", "-Wextra", "-Werror", "-pedantic"} <= set(cc.WARNING_FLAGS)
    m = LocalModel(c, opt="-O1")
    for got in (m.run(x), m.run_system_lib(x)):
        assert all(np.array_equal(a, b) for a, b in zip(got, want, strict=True))
    if conv.get("interface_api") == "c":
        d = m.model_descriptor()
        assert d.num_workspaces == 4 and [int(d.workspace_size[k]) for k in range(4)] == [0, 16, 0, 16]
        got = m.run_model_descriptor(x)
        assert all(np.array_equal(a, b) for a, b in zip(got, want, strict=True))
    if conv.get("workspace") == "user":
        # The application's workspaces: an empty pool's slot is never read or written. A canary there stays
        # intact, and NULL there is accepted (nothing is addressed from it).
        canary = [np.full(256, 0xA5, np.uint8) if k in EMPTY.values() else aligned_empty(16) for k in range(4)]
        err, got = run_with_workspaces(m, c, x, canary)
        assert err == 0 and all(np.array_equal(a, b) for a, b in zip(got, want, strict=True))
        assert all((canary[k] == 0xA5).all() for k in EMPTY.values())
        err, got = run_with_workspaces(m, c, x, [None if k in EMPTY.values() else aligned_empty(16)
                                                 for k in range(4)])
        assert err == 0 and all(np.array_equal(a, b) for a, b in zip(got, want, strict=True))
        err, _got = run_with_workspaces(m, c, x, [aligned_empty(16), None, aligned_empty(16), aligned_empty(16)])
        assert err != 0  # a pool that received buffers must be given


def test_empty_pools_compile_and_run_from_the_cli(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "hw.tar"
    assert main(["compile", str(HELLO), "-o", str(out), "--model-name", "hw", *CONV_ARGS["c-user"],
                 *POOL_ARGS]) == 0
    cap = capsys.readouterr()
    assert "tiny 0/8 bytes (0 buffers)" in cap.out and "none 0/8 bytes (0 buffers)" in cap.out
    back = load_mlf(out)
    assert [(u.spec.name, u.used, u.ids) for u in back.plan.pools][::2] == [("tiny", 0, ()), ("none", 0, ())]
    # Over RPC on the host (the RPC adapter's workspaces) and from the archive: bit-exact.
    for model in (str(HELLO), str(out)):
        extra = [*CONV_ARGS["c-user"], *POOL_ARGS] if model == str(HELLO) else []
        assert main(["run", model, "--platform", "host", "--seed", "3", "--json", "--repeat", "1", "--check",
                     "-q", *extra]) == 0
        assert json.loads(capsys.readouterr().out)["bit_exact"] is True


def test_a_zero_byte_buffer_still_gets_an_address_inside_its_pool() -> None:
    """A 0-byte buffer at the end of a plan would point into the next pool (or past a workspace of 0 bytes):
    it occupies ALIGNMENT bytes, so a pool holding only it is not empty."""
    items = [memory.Interval(0, 0, 0, 1), memory.Interval(1, 16, 1, 2)]
    placement, uses = memory.place_pools(items, [memory.PoolSpec("a", 16), memory.PoolSpec("b", 64)])
    memory.check_pooled(items, placement.offsets, uses)
    assert all(u.used > 0 for u in uses if u.ids)
    single = memory.place([memory.Interval(0, 0, 0, 0)])
    assert single.size == memory.ALIGNMENT and single.offsets == {0: 0}


def test_the_plan_check_refuses_an_offset_mapped_into_an_empty_pool() -> None:
    """What the code generator relies on, checked on every pooled plan: the old mapping (an empty pool at the
    same base as the next one claimed its offsets) is refused."""
    spec = [memory.PoolSpec("tiny", 8), memory.PoolSpec("big", 64)]
    items = [memory.Interval(0, 16, 0, 0)]
    empty, full = memory.PoolUse(spec[0], 0, 0, ()), memory.PoolUse(spec[1], 0, 16, (0,))
    assert memory.locate([empty, full], 0) == (1, 0)
    with pytest.raises(CompileError, match="in no pool"):
        memory.locate([empty, memory.PoolUse(spec[1], 16, 16, (0,))], 0)
    with pytest.raises(CompileError, match="tiny"):  # a pool that received nothing but claims bytes
        memory.check_pooled(items, {0: 0}, [memory.PoolUse(spec[0], 0, 1, ()), full])
    with pytest.raises(CompileError, match="in no pool"):
        memory.check_pooled(items, {0: 48}, [empty, full])
    a = memory.PoolUse(memory.PoolSpec("a", 64), 0, 16, (0,))
    b = memory.PoolUse(memory.PoolSpec("b", 64), 16, 16, (1,))
    two = [memory.Interval(0, 16, 0, 0), memory.Interval(1, 16, 0, 0)]
    memory.check_pooled(two, {0: 0, 1: 16}, [a, b])
    with pytest.raises(CompileError, match="not inside its pool 'a'"):
        memory.check_pooled(two, {0: 16, 1: 16}, [a, b])


# --- property-based: the pool planner ----------------------------------------------------------------------

def _check_pooled_placement(items: list[memory.Interval], pools: list[memory.PoolSpec]) -> None:
    try:
        placement, uses = memory.place_pools(items, pools)
    except CompileError as exc:
        msg = str(exc)
        assert "\n" not in msg and "over by" in msg and f"peak of the model {memory.lower_bound(items)} bytes" in msg
        return
    assert [u.spec for u in uses] == pools
    memory.check_pooled(items, placement.offsets, uses)
    by_id = {it.id: it for it in items}
    where: dict[int, tuple[int, int]] = {}
    for it in items:
        k, local = memory.locate(uses, placement.offsets[it.id])
        u = uses[k]
        assert it.id in u.ids and u.used > 0  # a pool that exists and received it
        assert local % memory.ALIGNMENT == 0 and local + memory.extent(it.size) <= u.used <= u.spec.size
        where[it.id] = (k, local)
    assert sorted(i for u in uses for i in u.ids) == sorted(by_id)
    for u in uses:
        assert (u.used == 0) == (not u.ids)
    for i, a in enumerate(items):
        for b in items[i + 1:]:
            if a.conflicts(b) and where[a.id][0] == where[b.id][0]:
                oa, ob = where[a.id][1], where[b.id][1]
                assert oa + memory.extent(a.size) <= ob or ob + memory.extent(b.size) <= oa, (a, b)
    assert placement.size == sum(memory.align(u.used) for u in uses)
    # The last pool as large as all buffers without reuse: never refused (checked above by reaching here).


buffers = st.lists(st.tuples(st.integers(0, 700), st.integers(0, 8), st.integers(0, 8)), min_size=0, max_size=10)
pool_sizes = st.lists(st.one_of(st.integers(1, 40), st.integers(1, 3000)), min_size=1, max_size=4)


@settings(max_examples=120)
@given(buffers, pool_sizes)
def test_pooled_plans_put_every_buffer_inside_a_pool_with_room_or_refuse(
        raw: list[tuple[int, int, int]], sizes: list[int]) -> None:
    items = [memory.Interval(i, size, min(a, b), max(a, b)) for i, (size, a, b) in enumerate(raw)]
    _check_pooled_placement(items, [memory.PoolSpec(f"p{k}", s) for k, s in enumerate(sizes)])


@settings(max_examples=40)
@given(buffers, pool_sizes, st.randoms(use_true_random=False))
def test_a_roomy_last_pool_is_never_refused_whatever_comes_before(
        raw: list[tuple[int, int, int]], sizes: list[int], rnd) -> None:  # noqa: ANN001
    items = [memory.Interval(i, size, min(a, b), max(a, b)) for i, (size, a, b) in enumerate(raw)]
    roomy = max(1, sum(memory.extent(it.size) for it in items))
    pools = [memory.PoolSpec(f"p{k}", s) for k, s in enumerate([*sizes, roomy])]
    rnd.shuffle(pools[:-1])
    placement, uses = memory.place_pools(items, pools)  # no CompileError
    memory.check_pooled(items, placement.offsets, uses)
    _check_pooled_placement(items, pools)


def test_pools_from_the_cli_are_placed_or_refused_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    cases = [(["--memory-pool", "a:1", "--memory-pool", "b:1"], 5),
             (["--memory-pool", "a:15", "--memory-pool", "b:31"], 5),
             (["--memory-pool", "a:1", "--memory-pool", "b:1", "--memory-pool", "c:32"], 0),
             (["--memory-pool", "a:32", "--memory-pool", "b:1"], 0),
             (["--memory-pool", "a:17", "--memory-pool", "b:17"], 0)]
    for args, status in cases:
        out = tmp_path / "m.tar"
        out.unlink(missing_ok=True)
        rc = main(["compile", str(HELLO), "-o", str(out), "-q", "--model-name", "hw", *CONV_ARGS["c-user"], *args])
        err = capsys.readouterr().err
        assert rc == status, (args, err)
        if status:
            assert "over by" in one_line(err) and not out.exists()
        else:
            check_plan_in_pools(load_mlf(out))


# --- pool names never collide with generated symbols ----------------------------------------------------------

def test_reserved_names_are_the_generated_symbols_in_the_pools_name_space(hello) -> None:  # noqa: ANN001
    """Every `tvmgen_<m>_workspace_<X>` the generator writes besides the pools' arrays is reserved, and every
    reserved name is such a symbol: the check and the generator share one definition."""
    graph, _x, _want = hello
    c = compile(graph, model_name="hw", unpacked_api=True, interface_api="c", memory_pools=POOLS)
    main_c = c.sources["tvmgen_hw_main.c"]
    suffixes = set(re.findall(r"\btvmgen_hw_workspace_(\w+)", main_c))
    assert suffixes - {p.name for p in POOLS} == set(memory.RESERVED_POOL_NAMES)
    assert memory.workspace_sizes_name("tvmgen_hw") in main_c


@pytest.mark.parametrize("name", sorted(memory.RESERVED_POOL_NAMES | {n.upper() for n in memory.RESERVED_POOL_NAMES}))
def test_a_reserved_pool_name_is_refused(name: str, tmp_path: Path, capsys: pytest.CaptureFixture,
                                         hello) -> None:  # noqa: ANN001
    with pytest.raises(ValueError, match="reserved"):
        memory.parse_pool(f"{name}:1K")
    rc = main(["compile", str(HELLO), "-o", str(tmp_path / "m.tar"), "-q", *CONV_ARGS["c-static"],
               "--memory-pool", f"{name}:64K"])
    line = one_line(capsys.readouterr().err)
    assert rc == 2 and "--memory-pool" in line and f"'{name}'" in line and "reserved" in line
    assert not (tmp_path / "m.tar").exists()
    with pytest.raises(CompileError, match="reserved"):  # the Python API checks the same
        compile(hello[0], model_name="hw", memory_pools=(memory.PoolSpec(name, 65536),))


def test_pool_names_next_to_generated_names_build(hello) -> None:  # noqa: ANN001
    """Names that resemble what the generator writes (locals, parameters, tables) compile under -Werror."""
    graph, x, want = hello
    pools = (memory.PoolSpec("size", 16), memory.PoolSpec("sizes_", 8), memory.PoolSpec("ws1", 16),
             memory.PoolSpec("context", 8), memory.PoolSpec("NULL", 65536))
    for conv in CONVENTIONS[2:]:
        c = compile(graph, model_name="hw", memory_pools=pools, **conv)
        check_plan_in_pools(c)
        got = LocalModel(c, opt="-O1").run(x)
        assert all(np.array_equal(a, b) for a, b in zip(got, want, strict=True))


def test_a_tensor_and_a_pool_defining_one_macro_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    b = TFLiteBuilder()
    x = b.tensor("x", (1, 64), "int8", scale=0.05, zero_point=0)
    t = b.tensor("t", (1, 64), "int8", scale=0.05, zero_point=0)
    y = b.tensor("big_workspace", (1, 64), "int8", scale=0.05, zero_point=0)
    b.op("RELU", [x], [t])
    b.op("RELU", [t], [y])
    model = tmp_path / "clash.tflite"
    model.write_bytes(b.build(inputs=[x], outputs=[y]))
    rc = main(["compile", str(model), "-o", str(tmp_path / "m.tar"), "-q", "--memory-pool", "big:1K"])
    line = one_line(capsys.readouterr().err)
    assert rc == 5 and "'big_workspace'" in line and "pool 'big'" in line and "BIG_WORKSPACE_SIZE" in line


@pytest.mark.parametrize("spec, needle", [
    (memory.PoolSpec("a b", 64), "not a C identifier"),
    (memory.PoolSpec("p", 0), "size 0"),
    (memory.PoolSpec("p", True), "size True"),  # type: ignore[arg-type]
    (memory.PoolSpec("p", 2**31), "size 2147483648"),
    (memory.PoolSpec("p", 64, align=8), "align 8"),
    (memory.PoolSpec("p", 64, align=48), "align 48"),
    (memory.PoolSpec("p", 64, section="a\nb"), "section"),
    (memory.PoolSpec("p", 64, section=".text"), "not for a workspace"),
    (memory.PoolSpec("x" * 33, 64), "at most 32"),
])
def test_python_api_pools_are_checked_like_the_cli(hello, spec: memory.PoolSpec, needle: str) -> None:  # noqa: ANN001
    with pytest.raises(CompileError) as info:
        compile(hello[0], model_name="hw", memory_pools=(spec,))
    assert needle in str(info.value) and "\n" not in str(info.value)


# --- one --memory-pool value: every attribute at most once ----------------------------------------------------

@pytest.mark.parametrize("value, key", [
    ("p:1K:section=.a,section=.b", "section"),
    ("p:1K:rw,section=.a,section=.a", "section"),
    ("p:1K:align=32,align=64", "align"),
    ("p:1K:align=32,rw,align=32", "align"),
    ("p:1K:rw,rw", "rw"),
])
def test_a_repeated_attribute_is_refused(value: str, key: str, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(ValueError, match="given twice"):
        memory.parse_pool(value)
    rc = main(["compile", str(HELLO), "-o", str(tmp_path / "m.tar"), "-q", "--memory-pool", value])
    line = one_line(capsys.readouterr().err)
    assert rc == 2 and f"attribute '{key}' is given twice" in line and "--memory-pool" in line


pool_text = st.one_of(
    st.text(max_size=40),
    st.builds(lambda n, s, a: f"{n}:{s}" + (f":{a}" if a is not None else ""),
              st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,3}", fullmatch=True) | st.text(max_size=5),
              st.from_regex(r"[0-9]{1,4}[kKmM]?", fullmatch=True) | st.text(max_size=5),
              st.none() | st.lists(st.sampled_from(["rw", "section=.dtcm", "section=.text", "align=32", "align=3",
                                                    "section=", "x", ""]), max_size=3).map(",".join)))


@settings(max_examples=200)
@given(pool_text)
def test_any_pool_text_is_a_valid_pool_or_one_value_error(text: str) -> None:
    try:
        spec = memory.parse_pool(text)
    except ValueError as exc:
        assert str(exc) and "\n" not in str(exc)
        return
    spec.validate()
    assert memory.parse_pool(spec.to_option()) == spec
    memory.check_pools([spec])


@pytest.mark.parametrize("value, needle", [
    ("p:1K:align=\u00b2", "align"),  # a Unicode digit is no number
    ("p:\u0661K", "size"),
    ("p\x1b[2J:1K", "pool name"),
    ("p:1K\n", "size"),
    ("p:99999999999999999999999999", "size"),
    ("p:1K:section=.text", "not for a workspace"),  # a workspace in code or read-only data
    ("p:1K:section=.rodata.pool", "not for a workspace"),
    ("p:1K:rw,section=.isr_vector", "not for a workspace"),
    ("p:1K:section=.heap", "not for a workspace"),
])
def test_odd_pool_values_are_one_escaped_line(value: str, needle: str, tmp_path: Path,
                                              capsys: pytest.CaptureFixture) -> None:
    rc = main(["compile", str(HELLO), "-o", str(tmp_path / "m.tar"), "-q", "--memory-pool", value])
    line = one_line(capsys.readouterr().err)
    assert rc == 2 and needle in line and "\x1b" not in line


def test_a_pool_in_the_constants_section_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """A writable array in the weights' section makes that section writable: on a board it leaves flash and
    the weights are garbage (seen on QEMU: a --check mismatch)."""
    rc = main(["compile", str(HELLO), "-o", str(tmp_path / "m.tar"), "-q", "--memory-pool", "a:16",
               "--memory-pool", "b:1K:section=.x", "--constants-section", ".x"])
    line = one_line(capsys.readouterr().err)
    assert rc == 2 and "'b'" in line and "'.x'" in line and "--constants-section" in line
    assert not (tmp_path / "m.tar").exists()


# --- archives: the pools of metadata.json are checked on load ------------------------------------------------

def _tampered(src: Path, dst: Path, edit) -> None:  # noqa: ANN001
    with tarfile.open(src) as tin, tarfile.open(dst, "w") as tout:
        for member in tin.getmembers():
            data = tin.extractfile(member).read() if member.isfile() else None
            if member.name.endswith("metadata.json"):
                meta = json.loads(data)
                edit(meta["modules"]["hw"]["memory"]["pools"])
                data = json.dumps(meta).encode()
                member.size = len(data)
            tout.addfile(member, io.BytesIO(data) if data is not None else None)


@pytest.mark.parametrize("what", ["buffers-in-empty-pool", "used-over-capacity", "reserved-name", "bad-align"])
def test_archives_with_inconsistent_pools_are_refused(hello, what: str, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture) -> None:  # noqa: ANN001
    c = compile(hello[0], model_name="hw", unpacked_api=True, interface_api="c", workspace="user", memory_pools=POOLS)
    export_model_library_format(c, tmp_path / "ok.tar")

    def edit(pools: list[dict]) -> None:
        if what == "buffers-in-empty-pool":
            pools[0]["buffers"] = [0]
        elif what == "used-over-capacity":
            pools[1]["size_bytes"] = pools[1]["capacity_bytes"] + 16
        elif what == "reserved-name":
            pools[0]["name"] = "sizes"
        else:
            pools[0]["attrs"]["align"] = 3

    _tampered(tmp_path / "ok.tar", tmp_path / "bad.tar", edit)
    rc = main(["run", str(tmp_path / "bad.tar"), "--platform", "host", "-q", "--repeat", "1"])
    line = one_line(capsys.readouterr().err)
    assert rc == 4 and "metadata.json" in line


# --- on a board ---------------------------------------------------------------------------------------------

@pytest.mark.slow
def test_empty_pools_on_qemu_run_and_deploy(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    for workspace in ("user", "static"):
        conv = [*CONV_ARGS["c-static"], "--workspace", workspace]
        assert main(["run", str(HELLO), "--platform", "qemu-cortex-m4", "--seed", "4", "--json", "--repeat", "1",
                     "--check", "-q", *conv, *POOL_ARGS]) == 0
        res = json.loads(capsys.readouterr().out)
        assert res["bit_exact"] is True
        project = tmp_path / f"fw_{workspace}"
        assert main(["deploy", str(HELLO), "--platform", "qemu-cortex-m4", "-o", str(project), "-q", "--seed", "4",
                     *conv, *POOL_ARGS]) == 0
        capsys.readouterr()
        subprocess.run(["make", "-s", "-C", str(project)], check=True, capture_output=True)
        proc = subprocess.run(["make", "-s", "-C", str(project), "run"], stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=300)
        dep = parse_deploy_output(proc.stdout)
        assert proc.returncode == 0 and dep.status == 0, proc.stdout
        assert dep.outputs["StatefulPartitionedCall:0"].tolist() == res["outputs"]["StatefulPartitionedCall:0"]
