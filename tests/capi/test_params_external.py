"""Field-updatable parameters (`--params external`, utvm.compiler.params; docs/compiler.md).

The model is micro_speech (depthwise conv, dense, softmax) compiled with `--params external`; blob A holds
its weights and blob B the same model's weights perturbed (compiled from the graph with perturbed constants:
the same code, so the same model hash). Expected outputs come from the repo's reference interpreter on the
graph and on the perturbed graph. Checked:

- the blob format (header, table, CRC-32) and the Python validator, one fault at a time, each with its code;
- params_app.c on the host, then on qemu-cortex-m4 (slow): one firmware runs A (found in a linker section at run
  time), B and A again, bit-exact each time, and refuses another model's blob, a truncated one, a flipped
  bit, a bad magic and a misaligned copy with their own error codes, running on after each refusal with B;
- the packed and unpacked conventions in this process: `tvmgen_<m>_set_parameters` and the system library's
  `tvmgen_<m>_set_params` (RPC's way) install A and B, bit-exact, and refuse with a message naming the fault;
- `--params embedded` (the default) generates what it did without the option; the MLF carries params.bin and
  `load` refuses a damaged one; `utvm compile --params external` writes it.
"""

from __future__ import annotations

import ctypes
import io
import json
import re
import subprocess
import tarfile
import zlib
from pathlib import Path

import numpy as np
import pytest
from tests.capi.apps import run_host_app

from utvm.cli import EXIT_USAGE, main
from utvm.compiler import compile, params
from utvm.compiler.local import LocalModel, aligned_empty
from utvm.errors import ArchiveError, CRTError
from utvm.frontend import load
from utvm.ir import Graph, run_reference
from utvm.mlf import export_model_library_format
from utvm.mlf import load as load_mlf
from utvm.support.models import models_dir

HERE = Path(__file__).resolve().parent
MODEL = models_dir() / "tflm" / "micro_speech_quantized.tflite"
OTHER = models_dir() / "tflm" / "hello_world_int8.tflite"
C_IFACE = {"unpacked_api": True, "interface_api": "c"}
CODES = params.ERRORS
NUM_SETS = 2


def perturbed(graph: Graph, seed: int = 5) -> Graph:
    """`graph` with every int8 weight moved by up to 3 and every quantized int32 bias by up to 20."""
    rng = np.random.default_rng(seed)
    tensors = dict(graph.tensors)
    for name, t in graph.constants.items():
        if t.dtype == "int8" and t.size > 1:
            tensors[name] = t.replace(data=np.clip(t.data.astype(np.int32) + rng.integers(-3, 4, t.shape),
                                                   -127, 127).astype(np.int8))
        elif t.dtype == "int32" and t.size > 1 and t.quant is not None:
            tensors[name] = t.replace(data=(t.data + rng.integers(-20, 21, t.shape)).astype(np.int32))
    return graph.replace(tensors=tensors)


class Case:
    """The graphs, their references on NUM_SETS inputs, and the blobs A (weights), B (perturbed), other."""

    def __init__(self, target: str = "host", **conv: object) -> None:
        self.graph = load(MODEL)
        self.graph_b = perturbed(self.graph)
        self.a = compile(self.graph, model_name="pa", params="external", target=target, **conv)
        self.b = compile(self.graph_b, model_name="pa", params="external", target=target, **conv)
        self.other = compile(load(OTHER), model_name="pa", params="external", target=target, **conv)
        assert self.a.params_layout == self.b.params_layout, "perturbed weights changed the code"
        assert self.a.params_blob != self.b.params_blob
        rng = np.random.default_rng(3)
        (name,) = self.graph.inputs
        self.inputs = [rng.integers(-128, 128, self.graph.tensor(name).shape).astype(np.int8) for _ in range(NUM_SETS)]
        self.ref_a = [self._ref(self.graph, x) for x in self.inputs]
        self.ref_b = [self._ref(self.graph_b, x) for x in self.inputs]
        assert all(not np.array_equal(p, q) for p, q in zip(self.ref_a, self.ref_b, strict=True))

    def _ref(self, graph: Graph, x: np.ndarray) -> np.ndarray:
        (out,) = run_reference(graph, {graph.inputs[0]: x}).values()
        return out.reshape(-1)


@pytest.fixture(scope="module")
def case() -> Case:
    return Case(**C_IFACE)


# --- the blob format --------------------------------------------------------------------------------------------

def test_blob_layout_and_crc(case: Case) -> None:
    blob, layout = case.a.params_blob, case.a.params_layout
    assert blob[:4] == b"UTVP" and int.from_bytes(blob[4:8], "little") == params.FORMAT_VERSION
    assert blob[8:40] == layout.model_hash == params.code_hash(case.a.sources["tvmgen_pa_ops.c"])
    assert int.from_bytes(blob[40:44], "little") == len(blob) == layout.total_size
    assert int.from_bytes(blob[44:48], "little") == len(layout.arrays) > 0
    assert int.from_bytes(blob[-4:], "little") == zlib.crc32(blob[:-4])
    ops = case.a.sources["tvmgen_pa_ops.c"]
    for k, a in enumerate(layout.arrays):
        assert (int.from_bytes(blob[48 + 8 * k:52 + 8 * k], "little"),
                int.from_bytes(blob[52 + 8 * k:56 + 8 * k], "little")) == (a.offset, a.size)
        assert a.offset % params.ALIGNMENT == 0
        assert f"#define {a.name} ((const {a.ctype}*)(tvmgen_params + {a.offset}U))" in ops
        assert not re.search(rf"static const \w+ {a.name}\[", ops)  # no array of its own left in the code
    # the weights are the compiled graph's: its int8 weight tensors are in the blob byte for byte
    weights = [t for t in case.a.graph.constants.values() if t.dtype == "int8" and t.size > 100]
    assert weights and all(t.data.tobytes() in blob for t in weights)
    # comments are not code: the hash ignores them, nothing else
    assert params.code_hash(ops.replace("*/", " changed */", 1)) == layout.model_hash
    assert params.code_hash(ops.replace("return 0;", "return 1;", 1)) != layout.model_hash


@pytest.mark.parametrize(("fault", "code"), [
    ("truncated", "kTvmErrorParamsTruncated"), ("header_only", "kTvmErrorParamsTruncated"),
    ("magic", "kTvmErrorParamsBadMagic"), ("version", "kTvmErrorParamsBadVersion"),
    ("other", "kTvmErrorParamsOtherModel"), ("size", "kTvmErrorParamsSizeMismatch"),
    ("entry", "kTvmErrorParamsSizeMismatch"), ("flipped", "kTvmErrorParamsCrcMismatch"),
    ("crc", "kTvmErrorParamsCrcMismatch")])
def test_validator_names_each_fault(case: Case, fault: str, code: str) -> None:
    blob, layout = bytearray(case.b.params_blob), case.a.params_layout
    params.validate(bytes(blob), layout)  # B fits A's code
    if fault == "truncated":
        blob = blob[:-1]
    elif fault == "header_only":
        blob = blob[:20]
    elif fault == "magic":
        blob[1] ^= 0x20
    elif fault == "version":
        blob[4] = 2
    elif fault == "other":
        blob = bytearray(case.other.params_blob)
    elif fault == "size":
        blob[40:44] = (len(blob) - 16).to_bytes(4, "little")
    elif fault == "entry":
        blob[52] ^= 1
    elif fault == "flipped":
        blob[layout.arrays[-1].offset] ^= 0x08
    else:
        blob[-1] ^= 0xFF
    with pytest.raises(params.ParamsBlobError) as info:
        params.validate(bytes(blob), layout)
    assert info.value.code_name == code and info.value.code == CODES[code]
    assert code in str(info.value)


def test_c_and_python_validators_agree(case: Case) -> None:
    """TVMValidateParameters (through tvmgen_pa_set_parameters) and params.validate give the same verdict on
    blobs damaged at random: any byte of the header and table, data bytes, cut lengths."""
    model = LocalModel(case.a)
    set_c = model.lib.tvmgen_pa_set_parameters
    set_c.restype = ctypes.c_int32
    good, layout = case.b.params_blob, case.a.params_layout
    buf = aligned_empty(len(good) + 16)
    rng = np.random.default_rng(7)
    table_end = params.HEADER_BYTES + params.ENTRY_BYTES * len(layout.arrays)
    for k in range(300):
        blob = bytearray(good)
        where = int(rng.integers(0, table_end if k % 2 else len(blob)))
        blob[where] ^= int(rng.integers(1, 256))
        size = len(blob) if k % 3 else int(rng.integers(0, len(blob) + 1))
        try:
            params.validate(bytes(blob[:size]), layout)
            want = 0
        except params.ParamsBlobError as exc:
            want = exc.code
        buf[:len(blob)] = np.frombuffer(bytes(blob), np.uint8)
        assert set_c(ctypes.c_void_p(buf.ctypes.data), ctypes.c_size_t(size)) == want, (where, size)


# --- one program, several blobs: params_app.c ----------------------------------------------------------------------

def _bytes_c(name: str, data: bytes, attrs: str = "aligned(16)") -> str:
    rows = ",\n  ".join(", ".join(f"0x{b:02x}" for b in data[i:i + 24]) for i in range(0, len(data), 24))
    return f"static const uint8_t {name}[{len(data)}] __attribute__(({attrs})) = {{\n  {rows}\n}};\n"


def params_data_header(case: Case) -> str:
    """params_data.h for params_app.c: blob A in the linker section utvm_params, B and the other model's blob
    as const arrays, the input sets, the names of the model's input and output."""
    c = case.a
    (x,), (y,) = c.interface.inputs, c.interface.outputs
    flip = case.a.params_layout.arrays[0].offset + 3
    rows = ",\n  ".join("{" + ", ".join(str(int(v)) for v in a.reshape(-1)) + "}" for a in case.inputs)
    return "\n".join([
        "/* Generated by tests/capi/test_params_external.py. */", "#ifndef PARAMS_DATA_H_", "#define PARAMS_DATA_H_",
        "#include <stdint.h>",
        f"#define TVMGEN_PA_INPUT_C_TYPE {x.dtype}_t", f"#define TVMGEN_PA_INPUT_NUM_ELEMENTS {x.size}",
        f"#define TVMGEN_PA_INPUT_FIELD {x.field}",
        f"#define TVMGEN_PA_OUTPUT_C_TYPE {y.dtype}_t", f"#define TVMGEN_PA_OUTPUT_NUM_ELEMENTS {y.size}",
        f"#define TVMGEN_PA_OUTPUT_FIELD {y.field}",
        f"#define PARAMS_NUM_SETS {NUM_SETS}", f"#define PARAMS_B_SIZE {len(case.b.params_blob)}U",
        f"#define PARAMS_OTHER_SIZE {len(case.other.params_blob)}U",
        f"#define PARAMS_FLIP_BYTE {flip}U", "#define PARAMS_FLIP_BIT 5U",
        # blob A: only in its section, found through the linker's __start_/__stop_ symbols
        _bytes_c("params_a", case.a.params_blob, 'section("utvm_params"), aligned(16), used'),
        _bytes_c("params_b", case.b.params_blob), _bytes_c("params_other", case.other.params_blob),
        f"static const int8_t params_inputs[{NUM_SETS}][{x.size}] = {{\n  {rows}\n}};", "#endif", ""])


def check_app_output(text: str, case: Case) -> None:
    runs: dict[str, list[tuple[int, np.ndarray]]] = {}
    sets: dict[str, int] = {}
    lines = text.replace("\r", "").strip().splitlines()
    lines = lines[next(i for i, ln in enumerate(lines) if ln.startswith("run ")):]
    for line in lines:
        parts = line.split()
        if parts[0] == "run":
            runs.setdefault(parts[1], []).append((int(parts[3]), np.array([int(v) for v in parts[4:]])))
        elif parts[0] == "set":
            sets[parts[1]] = int(parts[2])
    assert lines[-1] == "end", text[-300:]
    assert [rc for rc, _ in runs["none"]] == [CODES["kTvmErrorParamsMissing"]] * NUM_SETS
    assert sets == {"A": 0, "B": 0, "other": CODES["kTvmErrorParamsOtherModel"],
                    "truncated": CODES["kTvmErrorParamsTruncated"], "flipped": CODES["kTvmErrorParamsCrcMismatch"],
                    "magic": CODES["kTvmErrorParamsBadMagic"], "misaligned": CODES["kTvmErrorParamsMisaligned"],
                    "A_again": 0}
    for tag, ref in (("A", case.ref_a), ("B", case.ref_b), ("after_refusals", case.ref_b), ("A_again", case.ref_a)):
        assert [rc for rc, _ in runs[tag]] == [0] * NUM_SETS, tag
        for k, (_rc, got) in enumerate(runs[tag]):
            np.testing.assert_array_equal(got, ref[k], err_msg=f"{tag}, input set {k}")


def write_app_sources(case: Case, root: Path) -> tuple[list[Path], Path]:
    srcs, inc = case.a.write_sources(root, rpc=False)
    (inc / "params_data.h").write_text(params_data_header(case))
    return srcs, inc


def test_params_app_on_the_host(case: Case, tmp_path: Path) -> None:
    srcs, inc = write_app_sources(case, tmp_path / "model")
    check_app_output(run_host_app(HERE / "params_app.c", srcs, inc, tmp_path), case)


@pytest.mark.slow
def test_params_app_on_qemu_cortex_m4(tmp_path: Path) -> None:
    """The Done-when test: one firmware (built once) runs blob A from a flash section and blob B, switching at
    run time, bit-exact, and refuses the others with their own codes (the code is the M4's: DSP kernels)."""
    from utvm.platform.qemu.boards import cross_tool, get_board
    from utvm.platform.qemu.project import FirmwareSpec, build_firmware
    from utvm.platform.qemu.runner import qemu_command

    case = Case(target="cortex-m4", **C_IFACE)
    board = get_board("qemu-cortex-m4")
    files = {f"src/{n}": t for n, t in case.a.sources.items()}
    files.update({f"include/{n}": t for n, t in case.a.includes.items()})
    spec = FirmwareSpec(board, {"main.c": (HERE / "params_app.c").read_text()}, codegen_files=files,
                        include_files={"params_data.h": params_data_header(case)}, defines=("PARAMS_APP_BOARD",))
    project = build_firmware(spec, "params_app")
    elf = project / "build" / "firmware.elf"
    # blob A is in flash, in its own section: the linker placed it there, not the application
    nm = subprocess.run([cross_tool("nm"), str(elf)], capture_output=True, text=True, check=True).stdout
    start = int(re.search(r"^([0-9a-f]+) \w __start_utvm_params$", nm, re.M)[1], 16)
    assert start % 16 == 0 and board.flash_origin <= start < board.ram_origin
    proc = subprocess.run(qemu_command(board, elf), stdin=subprocess.DEVNULL, capture_output=True, timeout=300)
    text = proc.stdout.decode("utf-8", errors="replace")
    assert proc.returncode == 0, text[-500:] + proc.stderr.decode(errors="replace")[-500:]
    check_app_output(text, case)


# --- packed and unpacked conventions, in this process ------------------------------------------------------------

@pytest.mark.parametrize("conv", [{}, {"unpacked_api": True}], ids=["packed", "unpacked"])
def test_packed_conventions_switch_blobs(conv: dict, tmp_path: Path) -> None:
    case = Case(**conv)
    model = LocalModel(case.a)
    set_c = model.lib.tvmgen_pa_set_parameters
    set_c.restype = ctypes.c_int32

    def install(blob: bytes, offset: int = 0, size: int | None = None) -> int:
        buf = aligned_empty(len(blob) + 16)[offset:offset + len(blob)]
        buf[:] = np.frombuffer(blob, np.uint8)
        install.keep.append(buf)  # the context points into it
        return int(set_c(ctypes.c_void_p(buf.ctypes.data), ctypes.c_size_t(len(blob) if size is None else size)))

    install.keep = []  # type: ignore[attr-defined]
    # LocalModel installed the model's own blob (A); without one, the run refuses to start
    np.testing.assert_array_equal(model.run([case.inputs[0]])[0].reshape(-1), case.ref_a[0])
    accessor = model.lib.tvmgen_pa_context
    accessor.restype = ctypes.c_void_p
    (ctypes.c_void_p * 3).from_address(accessor())[1] = None  # TVMContext.params
    with pytest.raises(CRTError, match="no parameter blob: install one with tvmgen_pa_set_params"):
        model.run([case.inputs[0]])
    for blob, refs in ((case.a.params_blob, case.ref_a), (case.b.params_blob, case.ref_b)):
        assert install(blob) == 0
        for x, ref in zip(case.inputs, refs, strict=True):
            np.testing.assert_array_equal(model.run([x])[0].reshape(-1), ref)
    for blob, offset, size, code in ((case.other.params_blob, 0, None, "kTvmErrorParamsOtherModel"),
                                     (case.a.params_blob, 0, len(case.a.params_blob) - 1, "kTvmErrorParamsTruncated"),
                                     (case.a.params_blob, 4, None, "kTvmErrorParamsMisaligned")):
        assert install(blob, offset, size) == CODES[code]
    np.testing.assert_array_equal(model.run([case.inputs[0]])[0].reshape(-1), case.ref_b[0])  # B still
    # the system library's packed setter (what RPC calls): a refusal names the fault
    flipped = bytearray(case.a.params_blob)
    flipped[case.a.params_layout.arrays[0].offset] ^= 1
    with pytest.raises(CRTError, match=r"tvmgen_pa_set_params: the parameter blob is corrupt \(CRC-32 mismatch\)"):
        model.call_system_lib("tvmgen_pa_set_params", [np.frombuffer(bytes(flipped), np.uint8).copy()])
    blob_a = aligned_empty(len(case.a.params_blob))
    blob_a[:] = np.frombuffer(case.a.params_blob, np.uint8)
    model.call_system_lib("tvmgen_pa_set_params", [blob_a])
    np.testing.assert_array_equal(model.run([case.inputs[1]])[0].reshape(-1), case.ref_a[1])


# --- the default, the archive and the command line -------------------------------------------------------------------

def test_embedded_is_the_default_and_unchanged(case: Case) -> None:
    for conv in ({}, {"unpacked_api": True}, C_IFACE):
        default = compile(case.graph, model_name="pa", **conv)
        embedded = compile(case.graph, model_name="pa", params="embedded", **conv)
        assert default.sources == embedded.sources and default.includes == embedded.includes
        assert default.params_blob is None and "params" not in default.metadata["modules"]["pa"]["utvm"]
        code = "\n".join(default.sources.values())
        if conv:  # unpacked operators keep their signature: no context
            assert "void* resource_handle" not in default.sources["tvmgen_pa_ops.c"]
        assert re.search(r"static const int8_t tvmgen_pa_const_\w+\[\d+\] = \{", code)  # weights in the code
        assert "tvmgen_params" not in code and "TVMSetParameters" not in code
        assert "PARAMS" not in default.includes["tvmgen_pa.h"]


def test_mlf_carries_the_blob(case: Case, tmp_path: Path) -> None:
    path = export_model_library_format(case.a, tmp_path / "pa.tar")
    with tarfile.open(path) as tar:
        assert tar.extractfile(params.MLF_PATH).read() == case.a.params_blob
        meta = json.load(tar.extractfile("metadata.json"))["modules"]["pa"]["utvm"]
        header = tar.extractfile("codegen/host/include/tvmgen_pa.h").read().decode()
    assert meta["options"]["params"] == "external" and meta["params"]["size_bytes"] == len(case.a.params_blob)
    assert f"#define TVMGEN_PA_PARAMS_SIZE {len(case.a.params_blob)}" in header
    assert f'#define TVMGEN_PA_PARAMS_HASH "{case.a.params_layout.model_hash.hex()}"' in header
    loaded = load_mlf(path)
    assert loaded.params_blob == case.a.params_blob and loaded.params_layout == case.a.params_layout
    assert loaded.options.params == "external" and loaded.rpc_sources == case.a.rpc_sources
    # a damaged params.bin is refused by name
    damaged = tmp_path / "damaged.tar"
    with tarfile.open(path) as src, tarfile.open(damaged, "w") as dst:
        for member in src.getmembers():
            data = src.extractfile(member).read()
            if member.name == params.MLF_PATH:
                data = data[:-8] + bytes(8)
            member.size = len(data)
            dst.addfile(member, io.BytesIO(data))
    with pytest.raises(ArchiveError, match="params.bin: the parameter blob is corrupt"):
        load_mlf(damaged)


def test_cli_compile_params(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "hw.tar"
    assert main(["compile", str(OTHER), "-o", str(out), "-q", "--params", "external", "--unpacked-api",
                 "--interface-api", "c"]) == 0
    assert "params: external, a blob of" in capsys.readouterr().out
    with tarfile.open(out) as tar:
        blob = tar.extractfile(params.MLF_PATH).read()
    assert blob[:4] == b"UTVP"
    assert main(["compile", str(OTHER), "-o", str(out), "--params", "linked"]) == EXIT_USAGE
    assert "--params" in capsys.readouterr().err


@pytest.mark.parametrize("conv", [[], ["--unpacked-api", "--interface-api", "c"]], ids=["packed", "c"])
def test_utvm_run_installs_the_blob_over_rpc(conv: list[str], capsys: pytest.CaptureFixture) -> None:
    """The host platform's evaluation firmware: `utvm run` uploads params.bin and installs it with the system
    library's tvmgen_<m>_set_params (evaluate.install_params) before running and checking."""
    status = main(["run", str(OTHER), "--params", "external", "--check", "--seed", "1", "--repeat", "1", "-q", *conv])
    out = capsys.readouterr().out
    assert status == 0 and "OK (bit-exact)" in out, out
