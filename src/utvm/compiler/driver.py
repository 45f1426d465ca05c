"""`utvm.compiler.compile`: Graph -> CompiledModel (C sources, model header, metadata, memory plan).

Stages, each reported through `progress(message)`:
  passes (compiler/pipeline.py PIPELINE, printed after each pass with dump_ir) -> lowering (one kernel
  per node, aliases, in-place) -> static memory plan -> C for the chosen convention -> header + metadata.
"""

from __future__ import annotations

import datetime
import importlib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import utvm
from utvm import custom_ops, limits
from utvm.compiler import codegen, memory, patch
from utvm.compiler import params as param_blob
from utvm.compiler.fit import lower_within
from utvm.compiler.header import ModelInterface, header_source, model_hash, model_interface, version_parts
from utvm.compiler.kernels import custom as custom_kernel
from utvm.compiler.lower import Lowered, MemoryPlan
from utvm.compiler.params import ParamsLayout
from utvm.compiler.schedule import Schedule
from utvm.errors import CompileError
from utvm.ir.graph import Graph
from utvm.target import TARGETS, Target, get_target

EXECUTORS = ("aot",)
INTERFACE_APIS = ("packed", "c")
WORKSPACES = ("static", "user")
ROUNDINGS = ("single", "double")
PARAMS = ("embedded", "external")
MLF_VERSION = 7
#: The longest model name: it prefixes every generated symbol and file name (tvmgen_<name>_system_lib.c must
#: stay a valid file name everywhere, and C99 promises only 63 significant characters in an identifier).
MAX_MODEL_NAME = 40

Progress = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class CompileOptions:
    model_name: str = "default"
    executor: str = "aot"
    unpacked_api: bool = False
    interface_api: str = "packed"
    workspace: str = "static"
    memory_planner: str = memory.DEFAULT_ALGORITHM
    rounding: str = "single"
    target: str = "host"
    # --memory-pool NAME:SIZE[:ATTRS], in order of preference (none: one workspace pool, the plain plan)
    memory_pools: tuple[memory.PoolSpec, ...] = ()
    constants_section: str = ""  # --constants-section: the linker section of the weights/constant arrays
    #: --params: the weights as const arrays in the code ("embedded") or in a blob read through the
    #: TVMContext ("external"; utvm.compiler.params)
    params: str = "embedded"
    #: --memory-limit: None (the layer-by-layer build), a workspace limit in bytes, or "min" (the smallest
    #: peak); --patch-overhead: the extra work row patches may add, over the model's MACs (utvm.compiler.patch)
    memory_limit: int | str | None = None
    patch_overhead: float = patch.DEFAULT_OVERHEAD

    def validate(self) -> None:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", self.model_name):
            raise CompileError(f"model name {self.model_name!r} must be a C identifier ([A-Za-z_][A-Za-z0-9_]*)")
        if len(self.model_name) > MAX_MODEL_NAME:
            raise CompileError(f"model name {self.model_name[:20]!r}... is {len(self.model_name)} characters long; "
                               f"at most {MAX_MODEL_NAME} (it prefixes every generated symbol and file name)")
        if self.executor not in EXECUTORS:
            raise CompileError(f"executor {self.executor!r} is not supported; choose one of {', '.join(EXECUTORS)}")
        if self.interface_api not in INTERFACE_APIS:
            raise CompileError(f"interface API {self.interface_api!r}: choose one of {', '.join(INTERFACE_APIS)}")
        if self.interface_api == "c" and not self.unpacked_api:
            raise CompileError("--interface-api c requires --unpacked-api (the C interface calls unpacked operators)")
        if self.workspace not in WORKSPACES:
            raise CompileError(f"workspace {self.workspace!r}: choose one of {', '.join(WORKSPACES)}")
        if self.workspace == "user" and self.interface_api != "c":
            raise CompileError("--workspace user requires --interface-api c (the workspace comes from the "
                               "TVMContext given to TVMExecute)")
        if self.memory_planner not in memory.ALGORITHMS:
            raise CompileError(f"memory planner {self.memory_planner!r}: choose one of {', '.join(memory.ALGORITHMS)}")
        if self.rounding not in ROUNDINGS:
            raise CompileError(f"rounding {self.rounding!r}: choose one of {', '.join(ROUNDINGS)}")
        if self.target not in TARGETS:
            raise CompileError(f"target {self.target!r}: choose one of {', '.join(TARGETS)}")
        if self.params not in PARAMS:
            raise CompileError(f"params {self.params!r}: choose one of {', '.join(PARAMS)}")
        if self.memory_limit is not None and self.memory_limit != "min" and (
                type(self.memory_limit) is not int or self.memory_limit < 1):
            raise CompileError(f"memory limit {self.memory_limit!r}: a number of bytes >= 1, or 'min'")
        if not isinstance(self.patch_overhead, (int, float)) or not 0 <= self.patch_overhead <= 10:
            raise CompileError(f"patch overhead {self.patch_overhead!r}: a fraction of the model's MACs from 0 to 10")
        memory.check_pools(self.memory_pools)
        if self.constants_section:
            try:
                memory.check_section(self.constants_section, "constants section")
            except ValueError as exc:
                raise CompileError(str(exc)) from None
        for p in self.memory_pools:  # a writable array in the weights' section makes the section writable
            if p.section and p.section == self.constants_section:
                raise CompileError(f"memory pool {p.name!r}: section {p.section!r} is also the --constants-section: "
                                   "the weights (read-only, in flash) and a workspace (written) need sections "
                                   "of their own")

    @property
    def convention(self) -> str:
        """'packed', 'unpacked' or 'c' (the RFC's three conventions)."""
        if self.interface_api == "c":
            return "c"
        return "unpacked" if self.unpacked_api else "packed"


@dataclass(frozen=True, slots=True)
class TensorInfo:
    name: str
    shape: tuple[int, ...]
    dtype: str

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "shape": list(self.shape), "dtype": self.dtype}


@dataclass(frozen=True, slots=True)
class OperatorInfo:
    """One generated operator function: what it computes and the arguments of its packed form."""

    name: str
    op: str
    node: str  # the node's label
    inputs: tuple[TensorInfo, ...]  # run-time inputs (constants are baked in)
    outputs: tuple[TensorInfo, ...]
    scratch_bytes: int
    inplace: bool
    task: str = ""  # tuning task key ("" for kernels without choices)
    schedule: Schedule = field(default_factory=dict)
    schedule_source: str = ""  # "default" | "given" (a tuning log) | ""
    persistent_bytes: int = 0  # state kept across runs (KernelCode.persistent_bytes)

    @property
    def args(self) -> tuple[TensorInfo, ...]:
        """Packed arguments in order: inputs, outputs, then the scratch buffer and the state block (uint8) if any."""
        extra = (TensorInfo("scratch", (self.scratch_bytes,), "uint8"),) if self.scratch_bytes else ()
        if self.persistent_bytes:
            extra += (TensorInfo("state", (self.persistent_bytes,), "uint8"),)
        return (*self.inputs, *self.outputs, *extra)

    def to_json(self) -> dict[str, Any]:
        return {"function_name": self.name, "op": self.op, "node": self.node,
                "inputs": [t.to_json() for t in self.inputs], "outputs": [t.to_json() for t in self.outputs],
                "scratch_bytes": self.scratch_bytes, "inplace": self.inplace,
                "workspace": [{"device": 1, "workspace_size_bytes": self.scratch_bytes}],
                "task": self.task, "schedule": dict(self.schedule), "schedule_source": self.schedule_source,
                "persistent_bytes": self.persistent_bytes}


@dataclass
class CompiledModel:
    """Everything `compile` produces; `export_model_library_format` writes it as an MLF tar."""

    options: CompileOptions
    graph: Graph  # after the passes (what the C computes)
    source_graph: Graph  # as imported
    sources: dict[str, str]  # codegen/host/src/<name> -> C
    includes: dict[str, str]  # codegen/host/include/<name> -> C
    metadata: dict[str, Any]
    plan: MemoryPlan
    operators: tuple[OperatorInfo, ...]
    interface: ModelInterface
    system_lib_functions: tuple[str, ...]
    pass_log: list[tuple[str, int]] = field(default_factory=list)
    constant_bytes: int = 0
    # The model file it was compiled from (kept in the MLF so `utvm run --check` can use the real oracle).
    source_model_name: str = ""
    source_model_bytes: bytes | None = None
    # Firmware-only C (name -> text), never exported to the MLF's codegen/: with --interface-api c, the
    # packed adapter that lets the RPC firmware run the model (`rpc_sources`; mlf.load regenerates it).
    rpc_sources: dict[str, str] = field(default_factory=dict)
    # --params external: the parameter blob (params.bin, utvm.compiler.params) and where everything is in it
    params_blob: bytes | None = None
    params_layout: ParamsLayout | None = None

    @property
    def model_name(self) -> str:
        return self.options.model_name

    @property
    def prefix(self) -> str:
        return f"tvmgen_{self.model_name}"

    @property
    def run_function(self) -> str:
        """Name of the packed run function in the system library (inputs..., outputs... as DLTensors)."""
        return f"{self.prefix}_run"

    @property
    def main_function(self) -> str:
        return f"{self.prefix}___tvm_main__"

    @property
    def header_name(self) -> str:
        return f"{self.prefix}.h"

    @property
    def libm_functions(self) -> tuple[str, ...]:
        """The <math.h> functions the generated C calls (expf, tanhf, sqrtf, ...), sorted; empty when it links
        without a libm. Recorded in metadata.json as `modules.<m>.utvm.libm_functions` (and, when not empty,
        a `libm` entry of `external_dependencies`) and read from there, so a model loaded from an MLF carries
        it; only an archive written before utvm recorded it gets it by reading its sources' text."""
        extra = self.metadata.get("modules", {}).get(self.model_name, {}).get("utvm", {})
        if isinstance(extra, dict) and isinstance(extra.get("libm_functions"), list):
            return tuple(str(f) for f in extra["libm_functions"])
        return codegen.libm_functions(self.sources)

    @property
    def uses_libm(self) -> bool:
        """True when a firmware linking the generated code must link a libm (`-lm`)."""
        return bool(self.libm_functions)

    @property
    def firmware_sources(self) -> dict[str, str]:
        """Every generated C file an RPC (evaluation) firmware links: `sources` plus `rpc_sources`."""
        return {**self.sources, **self.rpc_sources}

    def write_sources(self, directory: Path, rpc: bool = True) -> tuple[list[Path], Path]:
        """Write src/*.c and include/*.h under `directory` (with `rpc`, also the firmware-only
        `rpc_sources`); returns (C files, include dir)."""
        src, inc = Path(directory) / "src", Path(directory) / "include"
        src.mkdir(parents=True, exist_ok=True)
        inc.mkdir(parents=True, exist_ok=True)
        files = []
        for name, text in (self.firmware_sources if rpc else self.sources).items():
            (src / name).write_text(text)
            files.append(src / name)
        for name, text in self.includes.items():
            (inc / name).write_text(text)
        return files, inc

    def _memory_summary(self) -> list[str]:
        """The planner's three figures (metadata.json's memory.layer_by_layer_bound_bytes, peak_bytes, extra_macs)
        when the build has them."""
        mem = self.metadata.get("modules", {}).get(self.model_name, {}).get("memory", {})
        if "peak_bytes" not in mem:
            return []
        aware = mem.get("memory_aware", {})
        n = len(aware.get("stages", []))
        how = (f"{n} row-patch stage{'' if n == 1 else 's'}, {len(aware.get('inplace_nodes', []))} in-place "
               f"depthwise" if aware.get("stages") or aware.get("inplace_nodes") else "layer by layer")
        return [f"memory plan: peak {mem['peak_bytes']} bytes, layer-by-layer bound "
                f"{mem['layer_by_layer_bound_bytes']} bytes, extra MACs {mem['extra_macs']} ({how})"]

    def summary(self) -> str:
        p = self.plan
        n_in = self.pass_log[0][1] if self.pass_log else len(self.source_graph.nodes)
        lines = [
            f"model {self.model_name}: {n_in} ops imported -> {len(self.operators)} operator functions "
            f"({n_in - (self.pass_log[-1][1] if self.pass_log else len(self.graph.nodes))} fused or folded away, "
            f"{p.aliases} reshape aliases, "
            f"{p.inplace} in place)",
            f"convention: {self.options.convention} (executor {self.options.executor}, "
            f"{'unpacked' if self.options.unpacked_api else 'packed'} API, interface {self.options.interface_api}, "
            f"workspace {self.options.workspace}, rounding {self.options.rounding}, target {self.options.target})",
            f"workspace: {p.workspace_bytes} bytes, lower bound {p.lower_bound_bytes} bytes "
            f"({p.algorithm}{', optimal' if p.optimal else ''}; without reuse {p.no_reuse_bytes} bytes)",
            *self._memory_summary(),
            *([("memory pools: " + ", ".join(
                f"{u.spec.name} {u.used}/{u.spec.size} bytes ({len(u.ids)} buffers"
                + (f", section {u.spec.section})" if u.spec.section else ")") for u in p.pools))] if p.pools else []),
            f"constants: {self.constant_bytes} bytes" + (f" (section {self.options.constants_section})"
                                                         if self.options.constants_section else ""),
            *([f"params: external, a blob of {len(self.params_blob)} bytes ({param_blob.MLF_PATH} in the archive; "
               "TVMSetParameters)"] if self.params_blob is not None else []),
            f"io: {sum(x.size for x in self.interface.inputs)} bytes in, "
            f"{sum(x.size for x in self.interface.outputs)} bytes out",
        ]
        return "\n".join(lines)


# --- passes ---------------------------------------------------------------------------------------------------

def _pipeline() -> list[tuple[str, Callable[[Graph], Graph]]]:
    try:
        pipeline = importlib.import_module("utvm.compiler.pipeline")
    except ModuleNotFoundError as exc:
        if exc.name != "utvm.compiler.pipeline":
            raise
        return []
    out = []
    for p in pipeline.PIPELINE:
        if isinstance(p, tuple):
            out.append((str(p[0]), p[1]))
        else:
            out.append((getattr(p, "name", None) or getattr(p, "__name__", repr(p)), p))
    return out


def run_passes(graph: Graph, progress: Progress | None = None,
               dump_ir: Callable[[str, Graph], None] | None = None) -> tuple[Graph, list[tuple[str, int]]]:
    log = [("import", len(graph.nodes))]
    if dump_ir:
        dump_ir("import", graph)
    for name, fn in _pipeline():
        if progress:
            progress(f"pass {name}")
        graph = fn(graph)
        log.append((name, len(graph.nodes)))
        if dump_ir:
            dump_ir(name, graph)
    return graph, log


# --- compile ------------------------------------------------------------------------------------------------

def compile(  # noqa: A001 - the public name the docs use (docs/architecture.md §13)
    graph: Graph,
    model_name: str = "default",
    executor: str = "aot",
    unpacked_api: bool = False,
    interface_api: str = "packed",
    workspace: str = "static",
    memory_planner: str = memory.DEFAULT_ALGORITHM,
    rounding: str = "single",
    progress: Progress | None = None,
    dump_ir: Callable[[str, Graph], None] | None = None,
    passes: bool = True,
    target: str | Target = "host",
    schedules: Mapping[str, Schedule] | None = None,
    task_counts: Mapping[str, int] | None = None,
    memory_pools: tuple[memory.PoolSpec, ...] = (),
    constants_section: str = "",
    params: str = "embedded",
    memory_limit: int | str | None = None,
    patch_overhead: float = patch.DEFAULT_OVERHEAD,
) -> CompiledModel:
    """Compile `graph` to C for the AOT executor (docs/architecture.md §6-8) on `target` (utvm.target; the portable
    `host` by default). `schedules` maps tuning task keys to schedules (utvm.tune.log.best_schedules of a
    tuning log); kernels of other tasks use their default point. `task_counts` (task key -> nodes) makes
    a kernel choose as if the graph had that many nodes of the task (the tuner compiles one node of a task
    the model holds n of). `memory_limit` (bytes, or "min") and `patch_overhead` choose a memory-aware plan
    below the layer-by-layer bound (utvm.compiler.patch: row-patch stages, in-place depthwise)."""
    target = get_target(target)
    opts = CompileOptions(model_name, executor, unpacked_api, interface_api, workspace, memory_planner, rounding,
                          target.name, tuple(memory_pools), constants_section, params, memory_limit,
                          float(patch_overhead))
    opts.validate()
    source = graph
    if passes:
        graph, log = run_passes(graph, progress, dump_ir)
    else:
        log = [("import", len(graph.nodes))]
        limits.check_graph(graph, error=CompileError)  # what the validate pass checks, for this path too
    if progress:
        progress("lowering")

    def lower_fit(g: Graph, peak_limit: int | None, **kw: Any) -> Lowered:
        return lower_within(g, model_name, rounding, memory_planner, progress, target, schedules, task_counts,
                            opts.memory_pools, peak_limit=peak_limit, **kw)

    choice = patch.choose(graph, lower_fit, memory_limit, opts.patch_overhead, share=params == "embedded",
                          progress=progress)
    lowered = choice.lowered
    if lowered.plan.workspace_bytes > limits.MAX_TENSOR_BYTES:
        raise CompileError(f"the workspace pool needs {lowered.plan.workspace_bytes:,} bytes, over the "
                           f"{limits.MAX_TENSOR_BYTES:,} the generated C can address (utvm.limits)")
    if progress:
        p = lowered.plan
        progress(f"memory plan ({memory_planner}): {p.workspace_bytes} bytes, lower bound {p.lower_bound_bytes}")
        progress(choice.summary())
    compiled = _emit(source, lowered, opts, log)
    compiled.metadata["modules"][model_name]["memory"].update(choice.report())
    return compiled


def _emit(source: Graph, lowered: Lowered, opts: CompileOptions, log: list[tuple[str, int]]) -> CompiledModel:
    graph = lowered.graph
    iface = model_interface(graph, opts.model_name)
    context = takes_context(opts, graph)
    cg_opts = codegen_options(opts, context)
    prefix = f"tvmgen_{opts.model_name}"
    ops = codegen.ops_source(lowered, cg_opts)
    layout = blob = None
    if opts.params == "external":  # the operators file's arrays go to the blob; its hash names the code
        arrays, total = codegen.param_arrays(lowered.ops_file)
        layout = ParamsLayout(param_blob.code_hash(ops), arrays, total)
        blob = param_blob.write_blob(layout, {n: raw for n, (_c, raw, _d) in lowered.ops_file.data_arrays.items()})
    sources = {
        f"{prefix}_ops.c": ops,
        f"{prefix}_main.c": codegen.main_source(lowered, cg_opts, iface, layout),
    }
    # The C files of user operators (--custom-op) travel with the generated code: MLF, firmware, deploy.
    user_sources = custom_ops.user_sources(graph)
    sources.update(user_sources)
    rpc = rpc_sources(opts, iface, lowered.plan.workspace_bytes, lowered.plan.pools, context)
    if not rpc:  # the packed interface's system library is the model's own packed code
        sources[system_lib_name(opts.model_name)] = codegen.system_lib_source(lowered, cg_opts, iface)
    operators = tuple(
        OperatorInfo(
            f.name, f.node.op, f.node.label(f.node_index),
            tuple(TensorInfo(t, graph.tensor(t).shape, graph.tensor(t).dtype) for t in f.inputs),
            tuple(TensorInfo(t, graph.tensor(t).shape, graph.tensor(t).dtype) for t in f.outputs),
            f.code.scratch_bytes,
            any(lowered.plan.locations.get(f.outputs[0]) == lowered.plan.locations.get(x) for x in f.inputs)
            if f.outputs else False,
            f.task, dict(f.schedule), f.schedule_source, f.code.persistent_bytes,
        )
        for f in lowered.funcs)
    constant_bytes = lowered.ops_file.constant_bytes + sum(
        graph.tensor(n).nbytes for n in lowered.output_consts.values())
    sys_funcs = tuple(r for r, _c in codegen.system_lib_entries(lowered, cg_opts))
    libm = codegen.model_libm_functions(lowered, user_sources)
    metadata = build_metadata(opts, iface, lowered.plan, operators, constant_bytes, sources, sys_funcs, log,
                              graph, rpc, libm=libm, operator_context=context, layout=layout)
    user_ops = custom_ops.describe(graph, packed=not opts.unpacked_api)
    if user_ops:  # what the C files under codegen/host/src/utvm_user_*.c provide (docs/custom_ops.md)
        metadata["modules"][opts.model_name]["utvm"]["custom_ops"] = user_ops
    includes = {f"{prefix}.h": header_source(iface, metadata, opts.interface_api, opts.unpacked_api, opts.workspace,
                                             utvm.__version__)}
    return CompiledModel(opts, graph, source, sources, includes, metadata, lowered.plan, operators, iface, sys_funcs,
                         log, constant_bytes, rpc_sources=rpc, params_blob=blob, params_layout=layout)


def codegen_options(opts: CompileOptions, operator_context: bool = False) -> codegen.Options:
    """What the code generator takes of the compile options; `operator_context`: every operator takes the
    context (`takes_context`; metadata.json's `operator_context` for a loaded MLF)."""
    return codegen.Options(opts.model_name, opts.unpacked_api, opts.interface_api, opts.workspace, opts.rounding,
                           utvm.__version__, opts.constants_section, opts.params, operator_context)


def takes_context(opts: CompileOptions, graph: Graph) -> bool:
    """Whether every operator of `graph` takes the context: with --params external (they read the weights
    through it), or when a user operator takes it (custom.graph_takes_context)."""
    return opts.params == "external" or custom_kernel.graph_takes_context(graph.nodes)


def system_lib_name(model_name: str) -> str:
    return f"tvmgen_{model_name}_system_lib.c"


def rpc_sources(opts: CompileOptions, iface: ModelInterface, workspace_bytes: int,
                pools: tuple[memory.PoolUse, ...] = (), operator_context: bool = False) -> dict[str, str]:
    """The firmware-only sources of `opts`' convention (CompiledModel.rpc_sources): with interface c, the
    system library holding the packed RPC adapter (codegen.rpc_adapter_source); nothing otherwise."""
    if opts.interface_api != "c":
        return {}
    cg_opts = codegen_options(opts, operator_context)
    pool_bytes = tuple((u.used, u.spec.align) for u in pools)
    return {system_lib_name(opts.model_name): codegen.rpc_adapter_source(cg_opts, iface, workspace_bytes, pool_bytes)}


def build_metadata(opts: CompileOptions, iface: ModelInterface, plan: MemoryPlan, operators: tuple[OperatorInfo, ...],
                   constant_bytes: int, sources: dict[str, str], sys_funcs: tuple[str, ...],
                   log: list[tuple[str, int]], graph: Graph | None = None,
                   rpc: Mapping[str, str] | None = None, *, libm: Sequence[str], operator_context: bool = False,
                   layout: ParamsLayout | None = None) -> dict[str, Any]:
    """metadata.json in MLF version 7 layout (docs/architecture.md §8), with utvm's additions under `utvm`: among
    them the model hash of `graph` (the compiled graph, header.model_hash), the names of the firmware-only
    `rpc` sources (CompiledModel.rpc_sources, not in codegen/) and `libm`, the <math.h> functions the C calls
    (codegen.model_libm_functions: what the kernels reported); only when set, `operator_context` (every
    operator takes the context) and, --params external, `params` (the blob's `layout`)."""
    io_bytes = sum(x.size for x in (*iface.inputs, *iface.outputs))

    def io(xs: tuple) -> dict[str, Any]:
        return {x.name: x.to_json() for x in xs}

    m = opts.model_name
    deps = [{
        "short_name": "tvm_standalone_crt",
        "url": "./runtime",
        "url_type": "mlf_path",
        "version_spec": utvm.__version__,
    }]
    if libm:  # the C library's <math.h> part: link -lm (newlib's libm on the boards, glibc's on the host)
        deps.append({"short_name": "libm", "url": "-lm", "url_type": "system_library", "version_spec": "C99",
                     "functions": list(libm)})
    return {
        "version": MLF_VERSION,
        "modules": {
            m: {
                "model_name": m,
                "export_datetime": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M:%SZ"),
                "target": [get_target(opts.target).mlf_string()],
                "executors": [opts.executor],
                "style": "full-model",
                "memory": {
                    "functions": {
                        "main": [{
                            "device": 1,
                            "workspace_size_bytes": plan.workspace_bytes,
                            "constants_size_bytes": constant_bytes,
                            "io_size_bytes": io_bytes,
                            "inputs": io(iface.inputs),
                            "outputs": io(iface.outputs),
                        }],
                        "operator_functions": [op.to_json() for op in operators],
                    },
                    "plan": plan.to_json(),
                    # --memory-pool: one entry per pool, in order of preference (TVMContext.workspace order)
                    **({"pools": [memory.pool_to_json(u) for u in plan.pools]} if plan.pools else {}),
                },
                "external_dependencies": deps,
                "utvm": {
                    "generator": f"utvm {utvm.__version__}",
                    "utvm_version": {"string": utvm.__version__, **version_parts(utvm.__version__)},
                    **({"model_hash": model_hash(graph)} if graph is not None else {}),
                    "options": {
                        "executor": opts.executor,
                        "unpacked_api": opts.unpacked_api,
                        "interface_api": opts.interface_api,
                        "workspace": opts.workspace,
                        "memory_planner": opts.memory_planner,
                        "rounding": opts.rounding,
                        "target": opts.target,
                        **({"memory_pools": [p.to_option() for p in opts.memory_pools]} if opts.memory_pools
                           else {}),
                        **({"constants_section": opts.constants_section} if opts.constants_section else {}),
                        **({"memory_limit": opts.memory_limit, "patch_overhead": opts.patch_overhead}
                           if opts.memory_limit is not None else {}),
                        **({"params": opts.params} if opts.params != "embedded" else {}),
                    },
                    **({"operator_context": True} if operator_context else {}),
                    **({"params": layout.to_json()} if layout is not None else {}),
                    "convention": opts.convention,
                    "inputs": [x.name for x in iface.inputs],
                    "outputs": [x.name for x in iface.outputs],
                    "sources": sorted(sources),
                    "rpc_sources": sorted(rpc or {}),
                    "libm_functions": list(libm),
                    "header": f"tvmgen_{m}.h",
                    "run_function": f"tvmgen_{m}_run",
                    "main_function": f"tvmgen_{m}___tvm_main__",
                    "system_lib": {"source": system_lib_name(m), "functions": list(sys_funcs)},
                    "passes": [{"name": n, "nodes": k} for n, k in log],
                },
            }
        },
    }
