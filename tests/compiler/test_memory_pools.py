"""Memory pools (`--memory-pool NAME:SIZE[:ATTRS]`, `--constants-section`): the planner spreads the buffers
over the pools in order of preference without crossing a pool, the generated code (every convention, the
in-process runtime, RPC, deploy) takes one workspace per pool and computes what the single-pool build does."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from utvm.cli import main
from utvm.compiler import compile, memory
from utvm.compiler.local import LocalModel, random_inputs
from utvm.compiler.lower import MemoryPlan
from utvm.errors import CompileError
from utvm.frontend import load
from utvm.mlf import export_model_library_format
from utvm.mlf import load as load_mlf
from utvm.platform.qemu.deploy import parse_deploy_output
from utvm.platform.qemu.footprint import read_elf_sections
from utvm.support.models import models_dir

MODELS = models_dir()
KWS = MODELS / "mlperf_tiny" / "kws_ref_model.tflite"
CONVENTIONS = [{}, {"unpacked_api": True}, {"unpacked_api": True, "interface_api": "c"},
               {"unpacked_api": True, "interface_api": "c", "workspace": "user"}]
CONV_IDS = ["packed", "unpacked", "c", "c-user"]


@pytest.fixture(scope="module")
def kws():  # noqa: ANN201
    graph = load(KWS)
    single = compile(graph, model_name="kws")
    x = random_inputs(single, np.random.default_rng(7))
    return graph, single, x, LocalModel(single, opt="-O1").run(x)


def check_pooled_plan(plan: MemoryPlan) -> None:
    """Every buffer in exactly one pool and inside it, every pool within its capacity, no two buffers live
    at the same step overlapping within a pool."""
    where: dict[int, tuple[int, int]] = {}
    for b in plan.buffers:
        k, local = memory.locate(plan.pools, b.offset)
        use = plan.pools[k]
        assert b.id in use.ids
        assert local % memory.ALIGNMENT == 0
        assert local + b.size <= use.used <= use.spec.size, (b, use)
        where[b.id] = (k, local)
    assert sorted(where) == sorted(i for u in plan.pools for i in u.ids)
    for i, a in enumerate(plan.buffers):
        for b in plan.buffers[i + 1:]:
            if a.start <= b.end and b.start <= a.end and where[a.id][0] == where[b.id][0]:
                oa, ob = where[a.id][1], where[b.id][1]
                assert oa + a.size <= ob or ob + b.size <= oa, (a, b)
    assert plan.workspace_bytes == sum(memory.align(u.used) for u in plan.pools)


@pytest.mark.parametrize("conv", CONVENTIONS, ids=CONV_IDS)
def test_two_pools_on_kws_are_bit_exact_with_one(kws, conv: dict) -> None:  # noqa: ANN001
    graph, single, x, want = kws
    half = single.plan.workspace_bytes // 2
    pools = (memory.PoolSpec("sram", half, ".dtcm"), memory.PoolSpec("dram", 64 * 1024))
    c = compile(graph, model_name="kws", memory_pools=pools, **conv)
    check_pooled_plan(c.plan)
    assert [u.spec.name for u in c.plan.pools] == ["sram", "dram"]
    assert c.plan.pools[0].ids and c.plan.pools[1].ids  # the model's peak does not fit the first pool
    header = " ".join(c.includes["tvmgen_kws.h"].split())
    for k, u in enumerate(c.plan.pools):
        name = u.spec.name.upper()
        assert f"#define TVMGEN_KWS_{name}_WORKSPACE_SIZE {u.used} " in header
        assert f"#define TVMGEN_KWS_{name}_WORKSPACE_INDEX {k} " in header
    assert "#define TVMGEN_KWS_NUM_WORKSPACE_POOLS 2 " in header
    assert f"#define TVMGEN_KWS_WORKSPACE_SIZE {c.plan.workspace_bytes} " in header
    meta = c.metadata["modules"]["kws"]["memory"]["pools"]
    assert [(p["name"], p["size_bytes"], p["capacity_bytes"]) for p in meta] == [
        (u.spec.name, u.used, u.spec.size) for u in c.plan.pools]
    assert meta[0]["attrs"]["section"] == ".dtcm" and sorted(meta[0]["buffers"]) == list(c.plan.pools[0].ids)
    main_c = c.sources["tvmgen_kws_main.c"]
    if conv.get("workspace") == "user":
        assert "context->workspace[1]" in main_c and "static uint8_t tvmgen_kws_workspace" not in main_c
    else:
        assert 'section(".dtcm")' in main_c and "tvmgen_kws_workspace_dram[" in main_c
    m = LocalModel(c, opt="-O1")
    for got in (m.run(x), m.run_system_lib(x)):
        assert all(np.array_equal(a, b) for a, b in zip(got, want, strict=True))
    if conv.get("interface_api") == "c":
        assert [int(m.model_descriptor().workspace_size[k]) for k in range(2)] == [u.used for u in c.plan.pools]
        assert m.model_descriptor().num_workspaces == 2
        got = m.run_model_descriptor(x)
        assert all(np.array_equal(a, b) for a, b in zip(got, want, strict=True))


def test_without_pools_the_output_is_unchanged(kws) -> None:  # noqa: ANN001
    graph, single, _x, _want = kws
    again = compile(graph, model_name="kws")
    assert not again.plan.pools and "pools" not in again.metadata["modules"]["kws"]["memory"]
    assert again.sources == single.sources
    assert "WORKSPACE_POOLS" not in single.includes["tvmgen_kws.h"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 900), st.integers(0, 9), st.integers(0, 9)), min_size=1, max_size=12),
       st.lists(st.integers(16, 2000), min_size=1, max_size=3))
def test_pooled_placement_is_valid_or_refused(raw: list[tuple[int, int, int]], sizes: list[int]) -> None:
    items = [memory.Interval(i, size, min(a, b), max(a, b)) for i, (size, a, b) in enumerate(raw)]
    pools = [memory.PoolSpec(f"p{k}", s) for k, s in enumerate(sizes)]
    try:
        placement, uses = memory.place_pools(items, pools)
    except CompileError as exc:
        assert "over by" in str(exc) and f"peak of the model {memory.lower_bound(items)} bytes" in str(exc)
        return
    by_id = {it.id: it for it in items}
    assert sorted(i for u in uses for i in u.ids) == sorted(by_id)
    for u in uses:
        assert u.used <= u.spec.size
        local = {i: placement.offsets[i] - u.base for i in u.ids}
        memory.check([by_id[i] for i in u.ids], local)
        for i in u.ids:
            assert 0 <= local[i] and local[i] + memory.align(by_id[i].size) <= u.used


def test_spill_order_honours_preference() -> None:
    """Fast pool first: it is filled before anything goes to the next; what fits in the first stays there."""
    items = [memory.Interval(0, 256, 0, 1), memory.Interval(1, 256, 1, 2), memory.Interval(2, 512, 2, 3),
             memory.persistent(3, 64, 4)]
    placement, uses = memory.place_pools(items, [memory.PoolSpec("fast", 320), memory.PoolSpec("slow", 4096)])
    assert uses[0].spec.name == "fast" and 3 in uses[0].ids  # the state block is placed too
    assert uses[0].used <= 320 and set(uses[1].ids) == set(range(4)) - set(uses[0].ids)
    assert 2 in uses[1].ids  # 512 bytes never fit the fast pool
    # With the pools the other way round everything fits the (now first) large pool.
    _p, uses = memory.place_pools(items, [memory.PoolSpec("slow", 4096), memory.PoolSpec("fast", 320)])
    assert set(uses[0].ids) == set(range(4)) and uses[1].ids == () and uses[1].used == 0
    # A single pool large enough: the plain plan's size.
    _p, uses = memory.place_pools(items, [memory.PoolSpec("only", 4096)])
    assert uses[0].used == memory.place(items).size


def test_state_blocks_in_pools_stream_and_reset() -> None:
    from test_persistent_state import _svdf_graph

    g = _svdf_graph()
    plain = compile(g, model_name="sp0", unpacked_api=True, interface_api="c")
    c = compile(g, model_name="sp", unpacked_api=True, interface_api="c", workspace="user",
                memory_pools=(memory.PoolSpec("a", 96), memory.PoolSpec("b", 4096)))
    check_pooled_plan(c.plan)
    assert "void tvmgen_sp_reset_state(void* const* workspaces);" in c.includes["tvmgen_sp.h"]
    x = np.random.default_rng(2).uniform(-2, 2, (2, 5)).astype(np.float32)
    c2 = compile(g, model_name="sq", unpacked_api=True, interface_api="c",
                 memory_pools=(memory.PoolSpec("a", 96), memory.PoolSpec("b", 4096)))
    m, ref = LocalModel(c2, opt="-O1"), LocalModel(plain, opt="-O1")
    for _ in range(3):  # the state streams from run to run as in the single-pool build
        np.testing.assert_array_equal(m.run([x])[0], ref.run([x])[0])
    m.lib.tvmgen_sq_reset_state()
    ref.lib.tvmgen_sp0_reset_state()
    np.testing.assert_array_equal(m.run([x])[0], ref.run([x])[0])


def test_pools_survive_the_mlf(kws, tmp_path: Path) -> None:  # noqa: ANN001
    graph, _single, _x, _want = kws
    pools = (memory.PoolSpec("sram", 4096, ".dtcm", 64), memory.PoolSpec("dram", 64 * 1024))
    c = compile(graph, model_name="kws", unpacked_api=True, interface_api="c", workspace="user",
                memory_pools=pools, constants_section=".my_weights")
    export_model_library_format(c, tmp_path / "m.tar")
    back = load_mlf(tmp_path / "m.tar")
    assert back.plan == c.plan and back.options == c.options
    assert back.rpc_sources == c.rpc_sources


def test_constants_section_holds_the_weights(kws, tmp_path: Path) -> None:  # noqa: ANN001
    graph, _single, x, want = kws
    c = compile(graph, model_name="kws", unpacked_api=True, constants_section=".my_weights")
    ops = c.sources["tvmgen_kws_ops.c"]
    assert '__attribute__((section(".my_weights")))' in ops
    assert ops.count("TVMGEN_CONSTANTS =") == ops.count("static const ") - ops.count("static const int64_t")
    m = LocalModel(c, opt="-O1")
    assert all(np.array_equal(a, b) for a, b in zip(m.run(x), want, strict=True))
    # objdump -h: "Idx Name Size VMA ..." per section
    table = subprocess.run(["objdump", "-h", str(m.path)], capture_output=True, text=True, check=True).stdout
    sizes = {f[1]: int(f[2], 16) for f in (ln.split() for ln in table.splitlines()) if len(f) > 2 and f[0].isdigit()}
    assert sizes[".my_weights"] >= c.constant_bytes


@pytest.mark.parametrize("argv, needle", [
    (["--memory-pool", "sram"], "NAME:SIZE"),
    (["--memory-pool", "sram:0"], "at least 1 byte"),
    (["--memory-pool", "sram:12Q"], "'12Q'"),
    (["--memory-pool", "9sram:1K"], "'9sram'"),
    (["--memory-pool", "sram:1K:rx"], "'rx'"),
    (["--memory-pool", "sram:1K:align=3"], "align '3'"),
    (["--memory-pool", "sram:1K:section=a b"], "section 'a b'"),
    (["--memory-pool", "sram:1K", "--memory-pool", "SRAM:2K"], "'SRAM' is given twice"),
    (["--constants-section", "my weights"], "'my weights'"),
])
def test_bad_pool_options_are_usage_errors(argv: list[str], needle: str, tmp_path: Path,
                                           capsys: pytest.CaptureFixture) -> None:
    assert main(["compile", str(KWS), "-o", str(tmp_path / "m.tar"), "-q", *argv]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and needle in err and argv[0] in err


def test_sizes_take_binary_suffixes() -> None:
    assert [memory.parse_size(t) for t in ("100", "1K", "2kb", "3KiB", "1M", "1MiB")] == [
        100, 1024, 2048, 3072, 1 << 20, 1 << 20]
    assert memory.parse_pool("dtcm:64K:rw,section=.dtcm,align=32") == memory.PoolSpec("dtcm", 65536, ".dtcm", 32)


def test_too_small_pools_fail_with_one_line_naming_peak_pools_and_overflow(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    rc = main(["compile", str(KWS), "-o", str(tmp_path / "m.tar"), "-q",
               "--memory-pool", "sram:1K", "--memory-pool", "dtcm:1K"])
    assert rc == 5
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "peak of the model 16000 bytes" in err
    assert "sram 1024 bytes" in err and "dtcm 1024 bytes (would need" in err and "over by" in err
    need = int(err.split("would need ")[1].split(")")[0])
    assert f"over by {need - 1024} bytes" in err
    assert not (tmp_path / "m.tar").exists()


def test_run_over_rpc_on_host_with_pools(kws, capsys: pytest.CaptureFixture) -> None:  # noqa: ANN001
    pools = ["--memory-pool", "sram:8K:section=.dtcm", "--memory-pool", "dram:1M"]
    outs = []
    for extra in ([], pools):
        assert main(["run", str(KWS), "--platform", "host", "--seed", "5", "--json", "--repeat", "1", "--check",
                     "-q", "--unpacked-api", "--interface-api", "c", "--workspace", "user", *extra]) == 0
        res = json.loads(capsys.readouterr().out)
        assert res["bit_exact"] is True
        outs.append(res["outputs"])
    assert outs[0] == outs[1]


@pytest.mark.slow
def test_deploy_two_pools_on_qemu_is_bit_exact(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    pools = ["--memory-pool", "sram:8K:rw,section=.dtcm", "--memory-pool", "dram:1M",
             "--constants-section", ".my_weights"]
    common = ["--seed", "21", "--unpacked-api", "--interface-api", "c"]
    for workspace in ("user", "static"):
        project = tmp_path / f"fw_{workspace}"
        assert main(["deploy", str(KWS), "--platform", "qemu-cortex-m4", "-o", str(project), "-q",
                     "--workspace", workspace, *common, *pools]) == 0
        capsys.readouterr()
        subprocess.run(["make", "-s", "-C", str(project)], check=True, capture_output=True)
        elf = project / "build" / "firmware.elf"
        sections = {s.name: s for s in read_elf_sections(elf)}
        assert 0 < sections[".dtcm"].size <= 8192
        assert sections[".dtcm"].addr >= 0x20000000  # RAM
        assert sections[".my_weights"].addr < 0x20000000 and sections[".my_weights"].size >= 20000  # flash
        proc = subprocess.run(["make", "-s", "-C", str(project), "run"], stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=300)
        dep = parse_deploy_output(proc.stdout)
        assert proc.returncode == 0 and dep.status == 0, proc.stdout
        assert main(["run", str(KWS), "--platform", "qemu-cortex-m4", "--json", "--repeat", "1", "--check",
                     "-q", *common, *pools]) == 0
        res = json.loads(capsys.readouterr().out)
        assert res["bit_exact"] is True
        assert dep.outputs["Identity"].tolist() == res["outputs"]["Identity"]
