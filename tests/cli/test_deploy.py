"""`utvm deploy`: a self-contained QEMU firmware project that builds with make alone, runs with `make run`,
prints the same outputs as the RPC path, and links no RPC server or function registry unless asked."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from utvm.cli import EXIT_USAGE, main
from utvm.compiler import compile, export_model_library_format
from utvm.frontend import load
from utvm.platform.qemu.boards import get_board
from utvm.platform.qemu.deploy import parse_deploy_output
from utvm.platform.qemu.runner import QemuTransport
from utvm.rpc import Session
from utvm.support.models import models_dir

MODELS = models_dir()
KWS = MODELS / "mlperf_tiny" / "kws_ref_model.tflite"
HELLO = MODELS / "tflm" / "hello_world_int8.tflite"
HELLO_F = MODELS / "tflm" / "hello_world_float.tflite"


def symbols(elf: Path) -> set[str]:
    out = subprocess.run(["arm-none-eabi-nm", str(elf)], capture_output=True, text=True, check=True).stdout
    return {line.split()[-1] for line in out.splitlines() if line.strip()}


def make_run(project: Path) -> tuple[int, str]:
    proc = subprocess.run(["make", "-s", "-C", str(project), "run"], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=300)
    return proc.returncode, proc.stdout


@pytest.mark.slow
def test_kws_deploy_prints_what_the_rpc_path_computes(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    project = tmp_path / "kws_fw"
    argv = ["deploy", str(KWS), "--platform", "qemu-cortex-m4", "-o", str(project), "--seed", "21",
            "--unpacked-api", "--interface-api", "c", "-q"]
    assert main(argv) == 0
    assert f"make -C {project} run" in capsys.readouterr().out
    # Self-contained: copy it elsewhere (no path back into the package) and build with make alone.
    moved = tmp_path / "elsewhere"
    shutil.copytree(project, moved)
    shutil.rmtree(project)
    subprocess.run(["make", "-s", "-C", str(moved)], check=True, capture_output=True)
    elf = moved / "build" / "firmware.elf"
    syms = symbols(elf)
    assert "tvmgen_default_model" in syms and "main" in syms
    assert not {"MicroTVMRpcServerInit", "TVMFuncRegistry_Lookup", "TVMSystemLibEntryPoint"} & syms
    assert not (moved / "crt" / "src").exists()  # the C interface needs the CRT's headers only
    status, out = make_run(moved)
    assert status == 0, out
    dep = parse_deploy_output(out)
    assert dep.status == 0 and dep.board == "qemu-cortex-m4" and 0 < dep.stack_high_water < 0x10000
    # The same model, inputs and board over RPC (utvm run with the same seed).
    assert main(["run", str(KWS), "--platform", "qemu-cortex-m4", "--seed", "21", "--json", "--repeat", "1",
                 "--check", "--unpacked-api", "--interface-api", "c"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["bit_exact"] is True
    assert dep.outputs["Identity"].tolist() == res["outputs"]["Identity"]


@pytest.mark.slow
@pytest.mark.parametrize("convention", [[], ["--unpacked-api"]], ids=["packed", "unpacked"])
def test_packed_entry_point_deploy_from_an_mlf(tmp_path: Path, convention: list[str],
                                               capsys: pytest.CaptureFixture) -> None:
    compiled = compile(load(HELLO_F), model_name="sine", unpacked_api=bool(convention))
    tar = export_model_library_format(compiled, tmp_path / "sine.tar")
    x = np.array([[1.25]], np.float32)
    np.save(tmp_path / "x.npy", x)
    project = tmp_path / "fw"
    assert main(["deploy", str(tar), "--platform", "qemu-cortex-m3", "-o", str(project), "-q", "--build",
                 "--input", f"serving_default_dense_input:0={tmp_path / 'x.npy'}"]) == 0
    assert "Identity" not in capsys.readouterr().err
    syms = symbols(project / "build" / "firmware.elf")
    assert "tvmgen_sine_run" in syms and "TVMAPISetLastErrorf" in syms  # the packed convention's errors
    assert not {"MicroTVMRpcServerInit", "TVMFuncRegistry_Lookup", "tvmgen_sine_system_lib"} & syms
    status, out = make_run(project)
    assert status == 0, out
    dep = parse_deploy_output(out)
    from utvm.compiler.local import LocalModel

    want = LocalModel(compiled).run([x])[0]
    np.testing.assert_array_equal(dep.outputs["StatefulPartitionedCall:0"], want)  # float32 bits, exactly


@pytest.mark.slow
def test_with_rpc_prints_then_serves_the_system_library(tmp_path: Path) -> None:
    project = tmp_path / "fw"
    assert main(["deploy", str(HELLO), "--platform", "qemu-cortex-m3", "-o", str(project), "-q", "--build",
                 "--seed", "1", "--with-rpc"]) == 0
    elf = project / "build" / "firmware.elf"
    syms = symbols(elf)
    assert {"MicroTVMRpcServerInit", "TVMSystemLibEntryPoint", "tvmgen_default_run"} <= syms
    from utvm.evaluate import read_inputs

    (sample,) = read_inputs(compile(load(HELLO)), [], 1)  # what --seed 1 put in utvm_samples.h
    transport = QemuTransport(get_board("qemu-cortex-m3"), elf, first_bytes_timeout=10)
    text = transport.read_until(b"rpc\n", 10).decode()
    printed = parse_deploy_output(text).outputs["StatefulPartitionedCall:0"]
    with Session(transport, handshake_timeout_s=20.0) as sess:  # the same UART now speaks the RPC link
        run = sess.system_lib().get_function("tvmgen_default_run")
        x, y = sess.array(sample), sess.empty((1, 1), "int8")
        run(x, y)
        assert y.numpy().tolist() == printed.tolist()


def test_deploy_errors(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["deploy", str(HELLO), "--platform", "host", "-o", str(tmp_path / "a")]) == EXIT_USAGE
    assert "--platform 'host' has no standalone firmware" in capsys.readouterr().err
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep.txt").write_text("mine")
    assert main(["deploy", str(HELLO), "-o", str(tmp_path / "full")]) == EXIT_USAGE
    assert "the directory is not empty" in capsys.readouterr().err
    assert (tmp_path / "full" / "keep.txt").read_text() == "mine"
    assert main(["deploy", str(tmp_path / "nope.tflite"), "-o", str(tmp_path / "b")]) == EXIT_USAGE
    assert "nope.tflite" in capsys.readouterr().err


def test_parse_deploy_output_rejects_truncated_text() -> None:
    text = "utvm-deploy m qemu-cortex-m4\noutput 0 y int8 1x3 3\n1 2\n"
    with pytest.raises(Exception, match="output 'y': expected 3 values"):
        parse_deploy_output(text)
    ok = parse_deploy_output("noise\nutvm-deploy m qemu-cortex-m4\noutput 0 y float32 2 2\n0x3f800000 0xc0000000\n"
                             "status 0\nstack 320\nend\n")
    assert ok.outputs["y"].tolist() == [1.0, -2.0] and ok.stack_high_water == 320


@pytest.mark.slow
@pytest.mark.parametrize("convention", [{}, {"unpacked_api": True, "interface_api": "c"}], ids=["packed", "c"])
def test_tensor_names_hostile_to_c_deploy_and_print_verbatim(tmp_path: Path, convention: dict) -> None:
    """Quotes, backslashes, trigraphs, comment delimiters, a newline and non-ASCII in tensor names: the
    samples header and main.c compile (-Werror) and the firmware prints the output under its name."""
    from utvm.compiler.local import LocalModel
    from utvm.ir.graph import Graph, Node, Quantization, Tensor
    from utvm.platform.qemu.deploy import generate_deploy_project

    x_name, y_name = 'in"put\\??/\n*/', 'out */ /*??= é"\\'
    q = Quantization((0.05,), (3,))
    graph = Graph({x_name: Tensor(x_name, (2, 5), "int8", q), y_name: Tensor(y_name, (2, 5), "int8", q)},
                  [Node("relu", (x_name,), (y_name,), {}, "r")], (x_name,), (y_name,), "odd")
    compiled = compile(graph, **convention)
    x = np.arange(-5, 5, dtype=np.int8).reshape(2, 5)
    project = generate_deploy_project(compiled, "qemu-cortex-m3", tmp_path / "fw", [x])
    status, out = make_run(project)
    assert status == 0, out
    dep = parse_deploy_output(out)
    assert dep.status == 0 and list(dep.outputs) == [y_name]
    np.testing.assert_array_equal(dep.outputs[y_name], LocalModel(compiled).run([x])[0])
