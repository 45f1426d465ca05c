"""`utvm deploy --params external` and `utvm size` of such a firmware (issue 24, utvm.platform.qemu.deploy).

The deploy project carries the weights as `src/params.bin`, linked into the flash section `utvm_params` by
`src/params.c` (`.incbin`); its main.c validates and installs the blob before the run and stops on a refusal.
One project (micro_speech, C interface, qemu-cortex-m4) is deployed and built once; on it:

- the firmware prints where its blob is and runs bit-exact against the reference interpreter;
- a field update: the same image with another blob of the same code (the weights perturbed, compiled alike)
  written over the section runs bit-exact against the perturbed graph's reference;
- a corrupted params.bin dropped into the project: `make` rebuilds params.o only and the firmware refuses the
  blob with kTvmErrorParamsCrcMismatch, printing no output;
`utvm size` of a packed `--params external` firmware counts the blob in the constants and says so.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from utvm.cli import main
from utvm.compiler import compile, params
from utvm.frontend import load
from utvm.ir import Graph, run_reference
from utvm.platform.qemu.boards import cross_tool, get_board
from utvm.platform.qemu.deploy import (
    PARAMS_FILE,
    PARAMS_SECTION,
    generate_deploy_project,
    parse_deploy_output,
    run_deploy_firmware,
)
from utvm.platform.qemu.footprint import MapEntry, categorize, elf_symbols, read_elf_sections
from utvm.platform.qemu.project import build_project
from utvm.support.models import models_dir

MODEL = models_dir() / "tflm" / "micro_speech_quantized.tflite"
HELLO = models_dir() / "tflm" / "hello_world_int8.tflite"
BOARD = "qemu-cortex-m4"
C_IFACE = {"unpacked_api": True, "interface_api": "c"}
CRC = params.ERRORS["kTvmErrorParamsCrcMismatch"]


def perturbed(graph: Graph, seed: int = 11) -> Graph:
    """`graph` with every int8 weight moved by up to 3 and every quantized int32 bias by up to 20: other
    weights for the same code (a second training run)."""
    rng = np.random.default_rng(seed)
    tensors = dict(graph.tensors)
    for name, t in graph.constants.items():
        if t.dtype == "int8" and t.size > 1:
            moved = np.clip(t.data.astype(np.int32) + rng.integers(-3, 4, t.shape), -127, 127)
            tensors[name] = t.replace(data=moved.astype(np.int8))
        elif t.dtype == "int32" and t.size > 1 and t.quant is not None:
            tensors[name] = t.replace(data=(t.data + rng.integers(-20, 21, t.shape)).astype(np.int32))
    return graph.replace(tensors=tensors)


def reference(graph: Graph, x: np.ndarray) -> np.ndarray:
    (out,) = run_reference(graph, {graph.inputs[0]: x}).values()
    return out


@dataclass
class Deployed:
    project: Path
    graph: Graph
    x: np.ndarray
    blob: bytes  # what `compile` gives for the same model and options


@pytest.fixture(scope="module")
def deployed(tmp_path_factory: pytest.TempPathFactory) -> Deployed:
    """`utvm deploy --params external --build` of micro_speech (C interface) on qemu-cortex-m4, once."""
    tmp = tmp_path_factory.mktemp("deploy_params")
    graph = load(MODEL)
    (name,) = graph.inputs
    x = np.random.default_rng(4).integers(-128, 128, graph.tensor(name).shape).astype(np.int8)
    np.save(tmp / "x.npy", x)
    project = tmp / "ms_fw"
    assert main(["deploy", str(MODEL), "--platform", BOARD, "-o", str(project), "--model-name", "ms", "-q",
                 "--params", "external", "--unpacked-api", "--interface-api", "c", "--build",
                 "--input", f"{name}={tmp / 'x.npy'}"]) == 0
    blob = compile(graph, model_name="ms", params="external", target="cortex-m4", **C_IFACE).params_blob
    assert blob is not None
    return Deployed(project, graph, x, blob)


@pytest.mark.slow
def test_deployed_firmware_runs_its_blob_takes_another_and_refuses_a_corrupt_one(deployed: Deployed,
                                                                                 tmp_path: Path) -> None:
    board = get_board(BOARD)
    project = deployed.project
    elf = project / "build" / "firmware.elf"
    # the project carries the compiled blob as a file; the code keeps no weight array of its own
    assert (project / "src" / PARAMS_FILE).read_bytes() == deployed.blob
    ops = (project / "codegen" / "host" / "src" / "tvmgen_ms_ops.c").read_text()
    assert "tvmgen_params" in ops and not re.search(r"static const int8_t tvmgen_ms_const_\w+\[", ops)
    assert "PARAMS" in (project / "README.md").read_text()

    out = run_deploy_firmware(BOARD, elf)
    assert out.exit_status == 0 and out.status == 0, out
    start, size, _kind = elf_symbols(elf)["utvm_params_start"]
    assert out.params is not None and (out.params.address, out.params.size, out.params.status) == (
        start, len(deployed.blob), 0)
    assert start % params.ALIGNMENT == 0 and board.flash_origin <= start < board.ram_origin
    assert size == len(deployed.blob)
    sections = {s.name: s for s in read_elf_sections(elf)}  # board/mps2.ld: after the code, never before
    assert sections[PARAMS_SECTION].addr == start and start >= sections[".text"].addr + sections[".text"].size
    # the address a field update writes at is in the map too, on the section's own line
    map_text = (project / "build" / "firmware.map").read_text()
    assert re.search(rf"^{PARAMS_SECTION}\s+0x0*{start:x}\s+0x0*{size:x}$", map_text, re.M)
    ref_a = reference(deployed.graph, deployed.x)
    np.testing.assert_array_equal(out.outputs["labels_softmax"], ref_a)

    # a field update: the same program, the section rewritten with a blob of perturbed weights (same code)
    graph_b = perturbed(deployed.graph)
    blob_b = compile(graph_b, model_name="ms", params="external", target="cortex-m4", **C_IFACE).params_blob
    assert blob_b is not None and len(blob_b) == len(deployed.blob) and blob_b != deployed.blob
    assert blob_b[8:40] == deployed.blob[8:40]  # the same model hash: the same code reads both
    ref_b = reference(graph_b, deployed.x)
    assert not np.array_equal(ref_a, ref_b)
    (tmp_path / "b.bin").write_bytes(blob_b)
    updated = tmp_path / "updated.elf"
    subprocess.run([cross_tool("objcopy"), f"--update-section={PARAMS_SECTION}={tmp_path / 'b.bin'}", str(elf),
                    str(updated)], check=True, capture_output=True)
    assert elf_symbols(updated)["utvm_params_start"][0] == start  # nothing else moved
    out_b = run_deploy_firmware(BOARD, updated)
    assert out_b.exit_status == 0 and out_b.params is not None and out_b.params.status == 0
    np.testing.assert_array_equal(out_b.outputs["labels_softmax"], ref_b)

    # a corrupted params.bin dropped into the project: make rebuilds params.o (not main.o), the firmware
    # refuses the blob with the CRC code and never runs the model
    main_o, params_o = project / "build" / "obj" / "src" / "main.o", project / "build" / "obj" / "src" / "params.o"
    stamps = (main_o.stat().st_mtime_ns, params_o.stat().st_mtime_ns)
    bad = bytearray(deployed.blob)
    bad[len(bad) // 2] ^= 0x10
    (project / "src" / PARAMS_FILE).write_bytes(bytes(bad))
    os.utime(project / "src" / PARAMS_FILE, ns=(stamps[1] + 10**9, stamps[1] + 10**9))  # newer than params.o
    build_project(project, board)
    assert main_o.stat().st_mtime_ns == stamps[0] and params_o.stat().st_mtime_ns != stamps[1]
    refused = run_deploy_firmware(BOARD, elf)
    assert refused.params is not None and refused.params.status == CRC == refused.status
    assert refused.exit_status == 1 and refused.outputs == {}
    # and the project builds elsewhere with make alone (no path back into the package)
    shutil.rmtree(project / "build")
    moved = tmp_path / "moved"
    shutil.copytree(project, moved)
    (moved / "src" / PARAMS_FILE).write_bytes(deployed.blob)
    subprocess.run(["make", "-s", "-C", str(moved)], check=True, capture_output=True)
    again = run_deploy_firmware(BOARD, moved / "build" / "firmware.elf")
    assert again.status == 0 and again.params is not None and again.params.status == 0
    np.testing.assert_array_equal(again.outputs["labels_softmax"], ref_a)


@pytest.mark.slow
def test_size_counts_the_external_blob(capsys: pytest.CaptureFixture) -> None:
    """Packed convention (the firmware installs the blob with tvmgen_<m>_set_parameters, and the size run
    checks that the model returned 0): the blob's bytes are constants, and the report says the weights are
    external and where."""
    blob = compile(load(HELLO), params="external", target="cortex-m4").params_blob
    assert blob is not None
    assert main(["size", str(HELLO), "--platform", BOARD, "--params", "external", "--json", "-q"]) == 0
    res = json.loads(capsys.readouterr().out)
    p = res["params"]
    assert p["mode"] == "external" and p["section"] == PARAMS_SECTION and p["bytes"] == len(blob)
    assert res["objects"]["src/params.o"]["text"] == len(blob)
    assert res["sizes"]["constants"]["text"] >= len(blob)
    for col in ("text", "data", "bss"):  # still adding up to the ELF
        assert sum(res["sizes"][cat][col] for cat in res["sizes"]) == res["elf_totals"][col]
    assert res["stack"]["measured_high_water"] > 0  # the model ran (status 0) on the installed blob
    assert main(["size", str(HELLO), "--platform", BOARD, "--params", "external", "--no-run", "-q"]) == 0
    text = capsys.readouterr().out
    assert (f"weights: external (--params external), a parameter blob of {len(blob)} bytes in flash section "
            f"{PARAMS_SECTION} at {p['address']:#010x}, counted in the constants") in text
    assert main(["size", str(HELLO), "--platform", BOARD, "--json", "--no-run", "-q"]) == 0
    assert json.loads(capsys.readouterr().out)["params"] == {"mode": "embedded"}


def test_deploy_project_files_and_output_format(tmp_path: Path) -> None:
    """Without building: what an external-params project holds (packed: tvmgen_<m>_set_parameters), that an
    embedded one is unchanged, the map category of the blob and the `params` line of the output."""
    graph = load(HELLO)
    x = np.zeros(graph.tensor(graph.inputs[0]).shape, np.int8)
    ext = compile(graph, params="external")
    project = generate_deploy_project(ext, BOARD, tmp_path / "ext", [x])
    src = project / "src"
    assert (src / PARAMS_FILE).read_bytes() == ext.params_blob
    assert f'.incbin \\"src/{PARAMS_FILE}\\"' in (src / "params.c").read_text()
    main_c = (src / "main.c").read_text()
    assert "rc = tvmgen_default_set_parameters(utvm_params_start, UTVM_PARAMS_BYTES);" in main_c
    assert main_c.index("set_parameters") < main_c.index("tvmgen_default_run(")
    assert "utvm_params_start" in (project / "include" / "utvm_params.h").read_text()
    c_ext = compile(graph, params="external", **C_IFACE)
    main_c = (generate_deploy_project(c_ext, BOARD, tmp_path / "c", [x]) / "src" / "main.c").read_text()
    assert "TVMSetParameters(&utvm_context, &tvmgen_default_params_info" in main_c
    assert "TVMExecute(&tvmgen_default_model, &inputs, &outputs, &utvm_context)" in main_c
    plain = generate_deploy_project(compile(graph), BOARD, tmp_path / "plain", [x])
    assert not (plain / "src" / "params.c").exists() and not (plain / "src" / PARAMS_FILE).exists()
    assert "params" not in (plain / "src" / "main.c").read_text()
    assert categorize(MapEntry(PARAMS_SECTION, PARAMS_SECTION, 0x980, 0x244, "build/obj/src/params.o")) == "constants"
    refused = parse_deploy_output("utvm-deploy m qemu-cortex-m4\nparams 0x00000980 580 2565\nstatus 2565\n"
                                  "stack 72\nend\n")
    assert refused.params is not None and (refused.params.address, refused.params.size) == (0x980, 580)
    assert refused.params.status == refused.status == CRC and refused.outputs == {}
    with pytest.raises(Exception, match="bad params line"):
        parse_deploy_output("utvm-deploy m b\nparams 0x980\nstatus 0\nstack 1\nend\n")
    # --compare-conventions says which builds keep their weights in a blob (only those)
    from types import SimpleNamespace

    from utvm.cli.size import format_comparison

    def report(blob: int | None) -> SimpleNamespace:
        fp = SimpleNamespace(totals=lambda: {"text": 100, "data": 0, "bss": 8})
        return SimpleNamespace(footprint=fp, stack=SimpleNamespace(worst_case=64), measured_stack=None,
                               params=None if blob is None else {"bytes": blob})

    m = SimpleNamespace(model_name="hw")
    table = format_comparison([("packed", m, report(None)), ("unpacked", m, report(532))], BOARD)
    assert table.splitlines()[-1] == ("weights: external (--params external), parameter blobs in flash counted "
                                      "in text: hw unpacked 532 bytes")
