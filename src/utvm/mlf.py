"""Model Library Format: a compiled model as one tar (docs/architecture.md §8), and reading it back.

Layout (paths inside the tar):

    metadata.json                          MLF version 7 layout (utvm.compiler.driver.build_metadata)
    codegen/host/src/tvmgen_<m>_ops.c      operators (+ the constants they bake in)
    codegen/host/src/tvmgen_<m>_main.c     AOT main, entry point, model descriptor
    codegen/host/src/tvmgen_<m>_system_lib.c   function registry for runtime.SystemLib (RPC firmware only;
                                           not with --interface-api c, whose codegen/ holds no DLTensor or
                                           TVMValue code: its packed RPC adapter is firmware-only,
                                           CompiledModel.rpc_sources, and `load` regenerates it)
    codegen/host/include/tvmgen_<m>.h      the model header (embedded C interface)
    parameters/<m>.npz                     the model's constants by tensor name (numpy .npz)
    parameters/params.bin                  --params external: the parameter blob the code reads through the
                                           TVMContext (utvm.compiler.params; metadata.json's
                                           modules.<m>.utvm.params is its layout)
    src/<m>.json                           the compiled graph in utvm's IR (utvm.ir.Graph.to_json)
    src/<model file>                       the .tflite/.onnx it was compiled from, when known (for --check);
                                           named in metadata.json at modules.<m>.utvm.source_model
    runtime/                               the C runtime (include/, src/, host/, templates/, Makefile)
    templates/crt_config.h.template        the CRT configuration to copy into a firmware project
    templates/platform.c.template          a TVMPlatform* port skeleton

`export_model_library_format(compiled, path)` writes it; `load(path)` (a tar or an extracted directory)
returns an equal `CompiledModel`. metadata.json's `modules.<m>.utvm.model_hash` is the SHA-256 of
src/<m>.json (utvm.compiler.header.model_hash); `load` refuses an archive where they differ.
"""

from __future__ import annotations

import copy
import io
import json
import os
import tarfile
from pathlib import Path

import numpy as np

from utvm.compiler import memory
from utvm.compiler import params as param_blob
from utvm.compiler.driver import CompiledModel, CompileOptions, OperatorInfo, TensorInfo, rpc_sources, system_lib_name
from utvm.compiler.header import graph_hash, model_interface
from utvm.compiler.lower import MemoryPlan
from utvm.compiler.params import ParamsLayout
from utvm.errors import ArchiveError, CompileError, ModelFormatError
from utvm.ir.graph import Graph
from utvm.support import cc
from utvm.support.archive import read_tar, read_tree, safe_file_name, safe_name
from utvm.support.files import write_file_atomic

MLF_VERSION = 7
_RUNTIME_PARTS = ("include", "src", "host", "templates", "Makefile", "MISRA.md")
_SKIP_SUFFIXES = (".o", ".a", ".so", ".d", ".pyc")


def _runtime_files() -> list[tuple[str, Path]]:
    crt = cc.crt_dir()
    out = []
    for part in _RUNTIME_PARTS:
        p = crt / part
        if p.is_file():
            out.append((f"runtime/{part}", p))
        elif p.is_dir():
            for f in sorted(p.rglob("*")):
                if f.is_file() and "__pycache__" not in f.parts and not f.name.endswith(_SKIP_SUFFIXES):
                    out.append((f"runtime/{f.relative_to(crt).as_posix()}", f))
    return out


def _params_npz(graph: Graph) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **{name: t.data for name, t in graph.constants.items()})
    return buf.getvalue()


def _source_arcname(compiled: CompiledModel) -> str:
    """File name under src/ for the original model: its own name, never clashing with src/<m>.json."""
    if compiled.source_model_bytes is None or not compiled.source_model_name:
        return ""
    name = Path(compiled.source_model_name).name
    return f"model_{name}" if name == f"{compiled.model_name}.json" else name


def model_library_files(compiled: CompiledModel) -> dict[str, bytes]:
    """Every file of the archive (path inside the tar -> bytes), in archive order."""
    m = compiled.model_name
    metadata = compiled.metadata
    source_name = _source_arcname(compiled)
    if source_name:
        metadata = copy.deepcopy(metadata)
        metadata["modules"][m]["utvm"]["source_model"] = source_name
    files: dict[str, bytes] = {"metadata.json": json.dumps(metadata, indent=2, sort_keys=True).encode()}
    for name, text in sorted(compiled.sources.items()):
        files[f"codegen/host/src/{name}"] = text.encode()
    for name, text in sorted(compiled.includes.items()):
        files[f"codegen/host/include/{name}"] = text.encode()
    files[f"parameters/{m}.npz"] = _params_npz(compiled.graph)
    if compiled.params_blob is not None:
        files[param_blob.MLF_PATH] = compiled.params_blob
    files[f"src/{m}.json"] = compiled.graph.to_json().encode()
    if source_name and compiled.source_model_bytes is not None:
        files[f"src/{source_name}"] = compiled.source_model_bytes
    for arcname, path in _runtime_files():
        files[arcname] = path.read_bytes()
    templates = cc.crt_dir() / "templates"
    for t in ("crt_config.h.template", "platform.c.template"):
        if (templates / t).exists():
            files[f"templates/{t}"] = (templates / t).read_bytes()
    for arcname in files:  # every archive utvm writes is one `load` (and tar) reads back
        try:
            safe_name(arcname, "member")
        except ArchiveError as exc:
            raise CompileError(f"the Model Library Format cannot hold {exc}") from None
    return files


def export_model_library_format(compiled: CompiledModel, path: str | os.PathLike) -> Path:
    """Write `compiled` as a Model Library Format tar at `path`; returns the path. The tar is written to a
    temporary file beside it and renamed into place; an existing non-regular file (a device, FIFO,
    directory or symbolic link) at `path` is refused (utvm.support.files)."""

    def write(tmp: Path) -> None:
        with tarfile.open(tmp, "w", format=tarfile.PAX_FORMAT) as tar:
            for arcname, data in model_library_files(compiled).items():
                info = tarfile.TarInfo(arcname)
                info.size = len(data)
                info.mode = 0o644
                tar.addfile(info, io.BytesIO(data))

    return write_file_atomic(path, write, "MLF output")


# --- reading -----------------------------------------------------------------------------------------------

def _read_all(path: Path) -> dict[str, bytes]:
    """Every file of the archive (checked by utvm.support.archive before anything is read)."""
    return read_tree(path) if path.is_dir() else read_tar(path, kind="Model Library Format tar")


def load(path: str | os.PathLike) -> CompiledModel:
    """Read an MLF tar (or an extracted MLF directory) back into a CompiledModel."""
    path = Path(path)
    if not path.exists():
        raise ModelFormatError(f"{path}: no such Model Library Format archive")
    files = _read_all(path)
    if "metadata.json" not in files:
        raise ModelFormatError(f"{path}: metadata.json is missing (not a Model Library Format archive)")
    try:
        metadata = json.loads(files["metadata.json"])
    except ValueError as exc:
        raise ModelFormatError(f"{path}: metadata.json is not valid JSON ({exc})") from exc
    if not isinstance(metadata, dict):
        raise ModelFormatError(f"{path}: metadata.json is a JSON {type(metadata).__name__}, not an object")
    if metadata.get("version") != MLF_VERSION:
        raise ModelFormatError(f"{path}: metadata.json version {metadata.get('version')!r} is not {MLF_VERSION}")
    try:
        (m, mod), = metadata["modules"].items()
        extra = mod["utvm"]
        o = extra["options"]
        opts = CompileOptions(m, o["executor"], bool(o["unpacked_api"]), o["interface_api"], o["workspace"],
                              o["memory_planner"], o["rounding"], str(o.get("target", "host")),
                              tuple(memory.parse_pool(str(v)) for v in o.get("memory_pools", ())),
                              str(o.get("constants_section", "")), params=str(o.get("params", "embedded")))
        main = mod["memory"]["functions"]["main"][0]
        plan = MemoryPlan.from_json(mod["memory"]["plan"], mod["memory"].get("pools", ()))

        def infos(xs: list) -> tuple[TensorInfo, ...]:
            return tuple(TensorInfo(x["name"], tuple(x["shape"]), x["dtype"]) for x in xs)

        operators = tuple(OperatorInfo(f["function_name"], f["op"], f["node"], infos(f["inputs"]),
                                       infos(f["outputs"]), int(f["scratch_bytes"]), bool(f["inplace"]),
                                       str(f.get("task", "")), dict(f.get("schedule") or {}),
                                       str(f.get("schedule_source", "")), int(f.get("persistent_bytes", 0)))
                          for f in mod["memory"]["functions"]["operator_functions"])
        sys_funcs = tuple(extra["system_lib"]["functions"])
        source_names = list(extra["sources"])
        header = extra["header"]
        log = [(p["name"], int(p["nodes"])) for p in extra["passes"]]
        constant_bytes = int(main["constants_size_bytes"])
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ModelFormatError(f"{path}: metadata.json lacks or garbles {exc} (not written by utvm?)") from exc
    # Every name metadata.json gives is joined to directories later (firmware builds, deploy projects):
    # each must be a plain file name, and the model name a C identifier of bounded length.
    try:
        opts.validate()
    except CompileError as exc:
        raise ArchiveError(f"{path}: metadata.json: {exc}") from exc
    for name in source_names:
        safe_file_name(name, f"{path}: metadata.json source")
    safe_file_name(header, f"{path}: metadata.json header")
    if f"src/{m}.json" not in files:
        raise ModelFormatError(f"{path}: src/{m}.json (the model's IR) is missing")
    recorded = extra.get("model_hash")
    if recorded is not None:  # archives written before utvm recorded it have none
        actual = graph_hash(files[f"src/{m}.json"])
        if recorded != actual:
            raise ArchiveError(f"{path}: metadata.json model_hash {str(recorded)[:64]!r} does not match "
                               f"src/{m}.json (SHA-256 {actual}): the graph or the metadata was changed")
    graph = Graph.from_json(files[f"src/{m}.json"])
    def text(key: str) -> str:
        try:
            return files[key].decode()
        except UnicodeDecodeError as exc:
            raise ModelFormatError(f"{path}: {key} is not UTF-8 text ({exc.reason} at byte {exc.start})") from exc

    sources = {}
    for name in source_names:
        key = f"codegen/host/src/{name}"
        if key not in files:
            raise ModelFormatError(f"{path}: {key} is listed in metadata.json but missing")
        sources[name] = text(key)
    if f"codegen/host/include/{header}" not in files:
        raise ModelFormatError(f"{path}: codegen/host/include/{header} is missing")
    includes = {header: text(f"codegen/host/include/{header}")}
    source_name = extra.get("source_model") or ""
    source_bytes = None
    if source_name:
        safe_file_name(source_name, f"{path}: metadata.json source_model")
        if f"src/{source_name}" not in files:
            raise ModelFormatError(f"{path}: src/{source_name} is named in metadata.json but missing")
        source_bytes = files[f"src/{source_name}"]
    iface = model_interface(graph, m)
    layout, blob = _params_blob(path, files, opts, extra, sources.get(f"tvmgen_{m}_ops.c", ""))
    # The firmware-only sources (with interface c, the packed RPC adapter) are not in codegen/: regenerate
    # them; an older archive that still holds the adapter in codegen/ gets it moved out.
    rpc = rpc_sources(opts, iface, plan.workspace_bytes, plan.pools, bool(extra.get("operator_context")))
    for name in rpc:
        sources.pop(name, None)
    if rpc and system_lib_name(m) in source_names:
        metadata = copy.deepcopy(metadata)
        extra = metadata["modules"][m]["utvm"]
        extra["sources"] = sorted(sources)
        extra["rpc_sources"] = sorted(rpc)
    return CompiledModel(opts, graph, graph, sources, includes, metadata, plan, operators, iface, sys_funcs, log,
                         constant_bytes, source_name, source_bytes, rpc_sources=rpc, params_blob=blob,
                         params_layout=layout)


def _params_blob(path: Path, files: dict[str, bytes], opts: CompileOptions, extra: dict, ops: str
                 ) -> tuple[ParamsLayout | None, bytes | None]:
    """--params external: the blob's layout (metadata.json) and the blob, which must be valid for it and for
    the operators file `ops` (the code hash)."""
    if opts.params != "external":
        return None, None
    try:
        layout = ParamsLayout.from_json(extra["params"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ModelFormatError(f"{path}: metadata.json lacks or garbles the parameter blob's layout ({exc})") from exc
    if param_blob.MLF_PATH not in files:
        raise ModelFormatError(f"{path}: {param_blob.MLF_PATH} (the parameter blob of --params external) is missing")
    blob = files[param_blob.MLF_PATH]
    if param_blob.code_hash(ops) != layout.model_hash:
        raise ArchiveError(f"{path}: metadata.json's parameter blob hash {layout.model_hash.hex()[:16]}... is not "
                           "the SHA-256 of the operators file's code: the code or the metadata was changed")
    try:
        param_blob.validate(blob, layout)
    except param_blob.ParamsBlobError as exc:
        raise ArchiveError(f"{path}: {param_blob.MLF_PATH}: {exc}") from exc
    return layout, blob
