"""`utvm report` on the host: the JSON document's figures are the ones `utvm run --profile --json`, `utvm
compile` (metadata.json) and `utvm info --json` give for the same build, run through the very command lines
the page names; a tuning log's schedule and gain per layer; the page is static (no script, nothing fetched);
bad input is one line; -o is written atomically and never replaces what it must not. The charts' own
figures (the memory timeline of issue 21's metadata, the firmware bytes per operator) are checked on
synthetic input. The QEMU board and the browser: test_report_browser.py (slow)."""

from __future__ import annotations

import contextlib
import copy
import io
import json
import os
import re
import shlex
import tarfile
from pathlib import Path
from typing import Any

import pytest

from utvm.cli import EXIT_MISMATCH, EXIT_MODEL, EXIT_USAGE, main
from utvm.compiler import compile
from utvm.compiler.footprint import task_footprint
from utvm.frontend import load
from utvm.platform.qemu.footprint import MapEntry
from utvm.report import build_document, render
from utvm.report.firmware import attribute, c_name
from utvm.report.svg import CHART_BACKGROUND
from utvm.support.models import models_dir
from utvm.tune import log as tlog
from utvm.tune.tasks import extract_tasks

HELLO = models_dir() / "tflm" / "hello_world_int8.tflite"
SEED = 7
DEFAULT_COST, TUNED_COST = 2e-6, 1e-6  # seconds: the tuned point is twice as fast


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    """Status, stdout and stderr of `utvm ARGV` run in this process."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main([str(a) for a in argv])
    return status, out.getvalue(), err.getvalue()


def write_log(path: Path) -> tuple[str, dict[str, Any]]:
    """A tuning log for hello_world on the host: every dense task's default point, and for one task another
    point twice as fast (the report applies the log without budgets). (task, its point)."""
    records = []
    tuned: tuple[str, dict[str, Any]] | None = None
    for t in extract_tasks(HELLO, "host"):
        base = task_footprint(t.graph, t.key, t.space.default, "host", t.rounding)
        records.append(tlog.Record(t.key, "host", dict(t.space.default), DEFAULT_COST, "seconds", None, "0.1.0",
                                   dict(t.workload), "", True, "host", 1000, base.weights, base.scratch))
        if tuned is not None:
            continue
        for point in t.space.points():
            if point == t.space.default:
                continue
            fp = task_footprint(t.graph, t.key, point, "host", t.rounding)
            if fp.weights == base.weights:
                records.append(tlog.Record(t.key, "host", dict(point), TUNED_COST, "seconds", None, "0.1.0",
                                           dict(t.workload), "", False, "host", 1000, fp.weights, fp.scratch))
                tuned = (t.key, dict(point))
                break
    assert tuned is not None, "no dense point of hello_world has the default's weights"
    tlog.append(path, records)
    return tuned


@pytest.fixture(scope="module")
def host_report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The report of hello_world on the host with a tuning log and --check: its JSON, its page, where."""
    d = tmp_path_factory.mktemp("report")
    log = d / "hello.jsonl"
    tuned = write_log(log)
    page = d / "out" / "hello.html"
    page.parent.mkdir()
    page.write_text("an older report")  # replaced whole
    status, out, err = run_cli(["report", HELLO, "--platform", "host", "--seed", SEED, "--check", "--tuning-log",
                                log, "--max-flash-growth", "none", "--max-ram-growth", "none", "-q", "--json",
                                "-o", page])
    assert status == 0, err
    return {"doc": json.loads(out), "page": page, "log": log, "tuned": tuned, "dir": d}


def test_figures_equal_what_run_compile_and_info_give(host_report: dict[str, Any], tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    doc = host_report["doc"]
    cmds = doc["commands"]
    assert set(cmds) == {"report", "compile", "info", "run"}  # no `size`: the host has no firmware image
    monkeypatch.chdir(tmp_path)  # `utvm compile ... -o hello_world_int8.tar` writes here
    runs = {}
    for name in ("run", "compile", "info"):
        words = shlex.split(cmds[name])
        assert words[:2] == ["utvm", name] and words[2] == str(HELLO)
        if name != "info":  # the compile flags that differ from their defaults, as given
            assert words[words.index("--tuning-log") + 1] == str(host_report["log"])
            assert words[words.index("--max-flash-growth") + 1] == "none"
        status, out, err = run_cli(words[1:])
        assert status == 0, err
        runs[name] = out
    run = json.loads(runs["run"])
    with tarfile.open(tmp_path / "hello_world_int8.tar") as tar:
        metadata = json.load(tar.extractfile("metadata.json"))  # type: ignore[arg-type]
    info = json.loads(runs["info"])

    # run --profile --json: the same outputs, verdict and operators (host times differ from run to run)
    mine = doc["sources"]["run"]
    assert set(mine) == set(run) == {"outputs", "bit_exact", "max_abs_err", "latency_s", "seed", "profile"}
    assert (mine["outputs"], mine["bit_exact"], mine["max_abs_err"], mine["seed"]) == \
        (run["outputs"], run["bit_exact"], run["max_abs_err"], run["seed"]) == (run["outputs"], True, 0.0, SEED)
    key = ("function", "op", "node")
    assert sorted(tuple(p[k] for k in key) for p in mine["profile"]) == sorted(tuple(p[k] for k in key)
                                                                              for p in run["profile"])
    assert doc["checks"]["check"] == {"oracle": "TFLite reference kernels (ai-edge-litert)", "ok": True,
                                      "bit_exact": True, "max_abs_err": 0.0, "seed": SEED}
    assert doc["summary"]["inference"]["latency_s"] == mine["latency_s"] > 0

    # one row per operator function of metadata.json, in its order, with its schedule; times from the run
    module = metadata["modules"]["default"]
    functions = module["memory"]["functions"]["operator_functions"]
    layers = doc["layers"]
    assert [r["function"] for r in layers] == [f["function_name"] for f in functions]
    seconds = {p["function"]: p["seconds"] for p in mine["profile"]}
    for r, f in zip(layers, functions, strict=True):
        assert (r["op"], r["node"], r["schedule"], r["task"]) == (f["op"], f["node"], f["schedule"], f["task"])
        assert r["schedule_source"] == {"default": "default", "given": "tuning log", "": "none"}[f["schedule_source"]]
        assert r["seconds"] == seconds[r["function"]] and r["instructions"] is None
        assert r["code_bytes"] is None and r["weight_bytes"] is None  # no firmware image on the host
    task, point = host_report["tuned"]
    tuned = [r for r in layers if r["tuning"] is not None]
    assert [(r["task"], r["schedule"], r["schedule_source"]) for r in tuned] == [(task, point, "tuning log")]
    assert tuned[0]["tuning"]["speedup"] == pytest.approx(DEFAULT_COST / TUNED_COST)
    assert tuned[0]["tuning"]["unit"] == "seconds"

    # MACs as `utvm info` counts them
    assert doc["model"]["macs"] == doc["summary"]["macs"] == info["macs"] == sum(r["macs"] for r in layers) > 0

    # the memory plan of metadata.json, step by step
    main_fn = module["memory"]["functions"]["main"][0]
    plan = module["memory"]["plan"]
    mem = doc["memory"]
    assert [(b["id"], b["bytes"], b["offset"], b["live"]) for b in mem["buffers"]] == \
        [(b["id"], b["size"], b["offset"], b["live"]) for b in plan["buffers"]]
    assert mem["workspace_bytes"] == plan["workspace_bytes"] == main_fn["workspace_size_bytes"]
    assert mem["live_peak_bytes"] == max(mem["live_bytes"]) == plan["lower_bound_bytes"]
    assert len(mem["live_bytes"]) == len(functions)
    ram = {p["key"]: p["bytes"] for p in doc["summary"]["ram"]["parts"]}
    assert set(ram) == {"workspace", "persistent"} and sum(ram.values()) == main_fn["workspace_size_bytes"]
    assert doc["summary"]["flash"] is None and "utvm size" in doc["summary"]["flash_note"]
    assert doc["sources"]["metadata"] == {k: main_fn[k] for k in ("workspace_size_bytes", "constants_size_bytes",
                                                                  "io_size_bytes")}
    assert (doc["model"]["hash"], doc["target"]["convention"]) == (module["utvm"]["model_hash"], "packed")


def test_the_page_is_static_and_replaced_atomically(host_report: dict[str, Any]) -> None:
    page: Path = host_report["page"]
    text = page.read_text()
    doc = host_report["doc"]
    assert text.startswith("<!DOCTYPE html>") and text.count('<tr class="layer"') == len(doc["layers"]) == 3
    assert "<script" not in text.lower() and not re.search(r"\b(src|href)\s*=", text, re.IGNORECASE)
    assert "default-src 'none'" in text  # the browser is told to fetch nothing
    # RAM, time per layer, the memory plan, and each plan of issue 21's timeline when metadata.json has one
    charts = 3 + len(doc["memory"]["timeline"] or {})
    assert text.count('<svg class="chart"') == charts and CHART_BACKGROUND in text
    for cmd in doc["commands"].values():  # every command named, escaped as HTML
        assert cmd.replace("'", "&#x27;").replace('"', "&quot;") in text
    assert sorted(os.listdir(page.parent)) == [page.name]  # the older report replaced, no temporary file left


def test_bad_input_is_one_line_and_writes_nothing(host_report: dict[str, Any], tmp_path: Path) -> None:
    good = tmp_path / "r.html"
    not_a_model = tmp_path / "m.tflite"
    not_a_model.write_bytes(b"TFL3 but not a flatbuffer")
    fifo = tmp_path / "fifo.html"
    os.mkfifo(fifo)
    link = tmp_path / "link.html"
    link.symlink_to(tmp_path / "elsewhere.html")
    not_a_log = tmp_path / "log.jsonl"
    not_a_log.write_text("hello\n")
    cases = [
        (["report", tmp_path / "none.tflite", "-o", good], EXIT_USAGE, "no such model file"),
        (["report", HELLO, "--platform", "nowhere", "-o", good], EXIT_USAGE, "unknown platform 'nowhere'"),
        (["report", not_a_model, "--platform", "host", "-o", good], EXIT_MODEL, "not a TFLite model"),
        (["report", HELLO, "--platform", "host", "-o", tmp_path], EXIT_USAGE, "is a directory, not a regular file"),
        (["report", HELLO, "--platform", "host", "-o", fifo], EXIT_USAGE, "is a FIFO"),
        (["report", HELLO, "--platform", "host", "-o", link], EXIT_USAGE, "is a symbolic link"),
        (["report", HELLO, "--platform", "host", "-o", "/dev/null"], EXIT_USAGE, "is a character device"),
        (["report", HELLO, "--platform", "host", "-o", str(tmp_path) + "/"], EXIT_USAGE, "names a directory"),
        (["report", HELLO, "--platform", "host", "-o", host_report["log"], "--tuning-log", host_report["log"]],
         EXIT_USAGE, "is the input"),
        (["report", HELLO, "--platform", "host", "-o", good, "--tuning-log", not_a_log], EXIT_USAGE, str(not_a_log)),
        (["report", HELLO, "--platform", "host", "-o", good, "--repeat", "0"], EXIT_USAGE, "--repeat"),
    ]
    before = sorted(os.listdir(tmp_path))
    for argv, status, needle in cases:
        got, out, err = run_cli([*argv, "-q"])
        assert (got, out) == (status, ""), (argv, err)
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("utvm report: error:") and needle in lines[0], (argv, err)
    assert sorted(os.listdir(tmp_path)) == before  # nothing written, nothing left behind
    assert fifo.is_fifo() and link.is_symlink() and not link.exists()


def _fake_run(compiled: Any) -> dict[str, Any]:
    return {"outputs": {}, "bit_exact": None, "max_abs_err": None, "latency_s": 1e-3, "seed": 1,
            "profile": [{"function": op.name, "op": op.op, "node": op.node, "seconds": 1e-4 * (i + 1),
                         "cycles": None, "instructions": None, "cycles_est": None}
                        for i, op in enumerate(compiled.operators)]}


def test_both_plans_of_a_timeline_side_by_side_and_names_escaped() -> None:
    compiled = compile(load(HELLO), target="host")
    compiled.metadata = copy.deepcopy(compiled.metadata)
    mem = compiled.metadata["modules"]["default"]["memory"]
    hostile = "<img src=x onerror=alert(1)>"
    mem["plan"]["buffers"][0]["tensors"] = [hostile]
    steps = [op.name for op in compiled.operators]
    mem["timeline"] = {  # issue 21's format: both plans, a step each, live buffers and the patch in progress
        "layer_by_layer": [{"step": s, "function": f, "live": [{"buffer": 0, "bytes": 64}, {"buffer": 1, "bytes": 32}],
                            "patch": None} for s, f in enumerate(steps)],
        "plan": [{"step": s, "function": f, "live": [{"buffer": 0, "bytes": 16 * (s + 1)}], "patch": [s, len(steps)]}
                 for s, f in enumerate(steps)],
    }
    mem["peak_bytes"], mem["layer_by_layer_bound_bytes"], mem["extra_macs"] = 48, 96, 123
    doc = build_document(compiled, "host", {"run": "utvm run x"}, _fake_run(compiled))
    tl = doc["memory"]["timeline"]
    assert [r["live_bytes"] for r in tl["layer_by_layer"]] == [96] * len(steps)
    assert [r["live_bytes"] for r in tl["plan"]] == [16 * (s + 1) for s in range(len(steps))]
    assert (doc["memory"]["peak_bytes"], doc["memory"]["layer_by_layer_bound_bytes"]) == (48, 96)
    text = render(doc)
    assert 'data-chart="timeline-layer_by_layer"' in text and 'data-chart="timeline-plan"' in text
    assert "123 extra MACs (recomputed halos) for a peak of 48 B against the layer-by-layer bound 96 B" in text
    assert hostile not in text and html_escaped(hostile) in text
    # without the timeline (metadata.json today) one chart of the plan, no side-by-side plans
    del mem["timeline"]
    text = render(build_document(compiled, "host", {}, _fake_run(compiled)))
    assert "timeline-" not in text and text.count('<svg class="chart"') == 3


def html_escaped(text: str) -> str:
    import html

    return html.escape(text, quote=True)


def test_firmware_bytes_by_operator_function() -> None:
    compiled = compile(load(HELLO), target="host")
    f0, f1, f2 = (op.name for op in compiled.operators)
    node2 = compiled.graph.nodes[int(compiled.operators[2].node.split()[1])]
    const2 = next(t for t in node2.inputs if t and compiled.graph.tensors[t].is_constant)
    ops_o = "build/obj/codegen/host/src/tvmgen_default_ops.o"
    main_o = "build/obj/codegen/host/src/tvmgen_default_main.o"
    entries = [
        MapEntry(".text", f".text.{f0}", 0, 100, ops_o), MapEntry(".text", f".text.{f0}_compute", 0, 50, ops_o),
        MapEntry(".text", f".text.{f1}", 0, 40, ops_o), MapEntry(".text", ".text.tvmgen_default_gemm", 0, 30, ops_o),
        MapEntry(".text", f".text.{f2}", 0, 20, ops_o), MapEntry(".text", ".text.tvmgen_default_run", 0, 12, main_o),
        MapEntry(".text", f".rodata.{f0}_wi8", 0, 64, ops_o),
        MapEntry(".text", f".rodata.{c_name('tvmgen_default_const_' + const2)}", 0, 48, ops_o),
        MapEntry(".text", f".rodata.{f1}.str1.4", 0, 9, ops_o),  # the packed checks' strings
        MapEntry(".text", ".rodata.tvmgen_default_ops_shape0", 0, 16, ops_o),
        MapEntry(".text", ".text.memcpy", 0, 300, "/usr/lib/libc_nano.a(lib_a-memcpy.o)"),  # the runtime's
        MapEntry(".bss", ".bss.tvmgen_default_workspace", 0, 512, main_o),  # RAM, not flash
    ]
    callees = {f0: [f"{f0}_compute"], f"{f0}_compute": ["tvmgen_default_gemm", "memcpy"],
               f1: ["tvmgen_default_gemm"], "tvmgen_default_run": [f0, f1, f2]}
    fb = attribute(entries, {".text": "text", ".bss": "bss"}, compiled.operators, compiled.graph, "tvmgen_default",
                   callees)
    got = {f: (o.code, o.weights, o.shared_code) for f, o in fb.operators.items()}
    assert got == {f0: (150, 64, ["tvmgen_default_gemm"]), f1: (40, 0, ["tvmgen_default_gemm"]), f2: (20, 48, [])}
    assert [(p.name, p.bytes, p.users) for p in fb.shared_code] == [("tvmgen_default_gemm", 30, [f0, f1])]
    assert (fb.executor_code, fb.other_constants, fb.operators_text, fb.constants_text) == (12, 25, 252, 137)


def test_a_difference_is_reported_on_the_page_and_by_the_status(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    import utvm.cli.report as report_cli
    from utvm.compiler.kernels import C_TYPES

    compiled = compile(load(HELLO), target="host", unpacked_api=True)
    op = compiled.operators[1]  # its C adds 1 to its first output element after computing it
    name = f"{compiled.prefix}_ops.c"
    m = re.search(rf"(static )?int32_t {re.escape(op.name)}\(([^)]*)\) \{{", compiled.sources[name])
    assert m is not None
    params, ctype = m.group(2), C_TYPES[op.outputs[0].dtype]
    args = ", ".join(p.split("*")[-1].strip() for p in params.split(","))
    wrapper = (f"static int32_t {op.name}_orig({params});\n{m.group(1) or ''}int32_t {op.name}({params}) {{\n"
               f"  int32_t r = {op.name}_orig({args});\n  out0[0] = ({ctype})(out0[0] + 1);\n  return r;\n}}\n"
               f"static int32_t {op.name}_orig({params}) {{")
    text = compiled.sources[name]
    compiled.sources[name] = text[:m.start()] + wrapper + text[m.end():]
    monkeypatch.setattr(report_cli, "_load", lambda _args, _say: (compiled, None))
    page = tmp_path / "r.html"
    status, out, err = run_cli(["report", HELLO, "--platform", "host", "--unpacked-api", "--seed", 1, "--debug-layers",
                                "--repeat", 1, "-q", "-o", page])
    assert status == EXIT_MISMATCH and out.strip().endswith("open it in a browser")
    assert err.strip().splitlines() == [f"utvm report: error: --debug-layers: operator 1 ({op.name}) is the first "
                                        f"whose output differs from the reference, tensor {op.outputs[0].name!r}"]
    text = page.read_text()  # written before the status says what it found
    assert "First layer that differs</span>: #1 " in text and f"<code>{op.name}</code>" in text
    rows = re.findall(r'<tr class="layer" id="layer-(\d)">(.*?)</tr>', text)
    marks = {int(i): ("\u2713" in row, "\u2717" in row) for i, row in rows}
    assert marks[0] == (True, False) and marks[1] == (False, True)  # the row of the altered operator is marked
