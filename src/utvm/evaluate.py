"""Evaluating a compiled model on a device: the steps `utvm run`, the demo, the tuner and the tests share.

    from utvm import evaluate
    inputs = evaluate.read_inputs(compiled, {"input_1": "x.npy"}, seed=1)   # given + random inputs
    firmware = evaluate.build_firmware(compiled, "host")                   # CRT + RPC server + the model
    with get_platform("host").start(firmware) as session:
        outputs, latency = evaluate.run_on_device(session, compiled, inputs, repeat=5)
    refs, oracle = evaluate.reference(model_path, compiled, inputs)        # TFLite / onnxruntime / utvm
    verdict = evaluate.compare(outputs, refs)                              # bit-exact / within tolerance

Nothing here parses arguments or prints: errors are UtvmErrors naming the tensor, file or option at
fault (`UsageError` for what the user gave: an input file that is not a .npy, a tensor of the wrong
shape).
"""

from __future__ import annotations

import math
import stat
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from utvm.errors import UsageError
from utvm.support import cc

FLOAT_TOLERANCE = 1e-5
NPY_MAGIC = b"\x93NUMPY"
ZIP_MAGIC = b"PK\x03\x04"
#: An input file may be this much larger than its tensor's bytes (the .npy header).
_NPY_HEADER_SLACK = 1 << 16


def is_mlf(path: Path) -> bool:
    """An MLF tar or an extracted MLF directory (else a model file)."""
    return (path.is_dir() and (path / "metadata.json").exists()) or path.suffix == ".tar"


# --- inputs -------------------------------------------------------------------------------------------------

def load_npy(path: str | Path, expect_nbytes: int | None = None, what: str = "input") -> np.ndarray:
    """One array from a .npy file, never unpickling; a .npz, a pickle, text or a file far larger than
    `expect_nbytes` is refused with a UsageError naming the file."""
    p = Path(path)
    try:
        st = p.stat()
        if not stat.S_ISREG(st.st_mode):  # a FIFO would block, a device never end
            raise UsageError(f"{what}: {str(p)!r} is not a regular file")
        size = st.st_size
        with p.open("rb") as f:
            head = f.read(len(NPY_MAGIC))
            if head[:4] == ZIP_MAGIC:
                raise UsageError(f"{what}: {str(p)!r} is a .npz archive; give each tensor as its own .npy file "
                                 "(numpy.save)")
            if head != NPY_MAGIC:
                raise UsageError(f"{what}: {str(p)!r} is not a .npy file (it does not start with the NumPy "
                                 "magic \\x93NUMPY); write it with numpy.save")
            if expect_nbytes is not None and size > expect_nbytes + _NPY_HEADER_SLACK:
                raise UsageError(f"{what}: {str(p)!r} holds {size:,} bytes, far more than the tensor's "
                                 f"{expect_nbytes:,}")
            f.seek(0)
            arr = np.load(f, allow_pickle=False)
    except UsageError:
        raise
    except (OSError, ValueError, EOFError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc).splitlines()[0]
        if "allow_pickle" in reason or "pickle" in reason:
            reason = "it holds Python objects (an object array), not numbers"
        raise UsageError(f"{what}: cannot read {str(p)!r}: {reason}") from exc
    if not isinstance(arr, np.ndarray):
        raise UsageError(f"{what}: {str(p)!r} does not hold one array")
    return arr


def split_input_spec(spec: str, names: Sequence[str]) -> tuple[str, str]:
    """`NAME=FILE` -> (NAME, FILE), where NAME is one of the model's input `names` (which may contain '=':
    the longest name followed by '=' wins)."""
    matches = [n for n in names if spec.startswith(n + "=")]
    if matches:
        name = max(matches, key=len)
        return name, spec[len(name) + 1:]
    name, sep, file = spec.partition("=")
    if not sep or not name or not file:
        raise UsageError(f"--input {spec!r}: expected NAME=FILE.npy")
    raise UsageError(f"--input {name!r}: the model has no such input; inputs: {', '.join(names)}")


def read_inputs(compiled: Any, given: Mapping[str, str | Path] | Sequence[str], seed: int) -> list[np.ndarray]:
    """The model's inputs in order: those in `given` (name -> .npy path, or `NAME=FILE` strings as on the
    command line) loaded and checked against the model's shape and dtype, the rest random from `seed`
    (integers over the dtype's range, floats ~ N(0, 1))."""
    from utvm.compiler.local import random_inputs

    iface = compiled.interface
    names = [x.name for x in iface.inputs]
    if isinstance(given, Mapping):
        pairs = [(str(k), str(v)) for k, v in given.items()]
    else:
        pairs = [split_input_spec(spec, names) for spec in given]
    files: dict[str, str] = {}
    for name, file in pairs:
        if name not in names:
            raise UsageError(f"--input {name!r}: the model has no such input; inputs: {', '.join(names)}")
        if name in files:  # else one would be dropped silently (and the random-input count go wrong)
            raise UsageError(f"--input {name!r} is given twice")
        files[name] = file
    rand = random_inputs(compiled, np.random.default_rng(seed))
    out = []
    for x, r in zip(iface.inputs, rand, strict=True):
        if x.name in files:
            a = load_npy(files[x.name], r.nbytes, f"--input {x.name}")
            if str(a.dtype) != x.dtype or tuple(a.shape) != x.shape:
                raise UsageError(f"--input {x.name}: the model takes {x.dtype}{list(x.shape)}, "
                                 f"{files[x.name]!r} holds {a.dtype}{list(a.shape)}")
        else:
            a = r
        out.append(np.asarray(a, order="C"))  # keeps a scalar (rank-0) input 0-d; ascontiguousarray makes it 1-d
    return out


# --- firmware and the device --------------------------------------------------------------------------------

def firmware_sources(compiled: Any) -> list[Path]:
    """The model's generated C and header in one content-addressed directory (so firmware builds cache);
    the header sits beside the sources, on the include path of platforms that add each source's folder.
    The firmware-only sources (`CompiledModel.rpc_sources`: the C interface's packed RPC adapter) are in."""
    from utvm.support.archive import safe_file_name

    sources = {**compiled.sources, **getattr(compiled, "rpc_sources", {})}
    files = {safe_file_name(name, "generated file"): text for name, text in {**sources,
                                                                              **compiled.includes}.items()}
    d = cc.cached_sources(compiled.prefix, files)
    return sorted(d / name for name in sources)


#: The CRT's defaults of the limits a model's run call depends on (crt_config.h.template).
_CRT_DEFAULT_ARGS = 16
_CRT_DEFAULT_NDARRAYS = 16
_CRT_DEFAULT_PACKET = 2048
_CRT_DEFAULT_NDIM = 6
#: The time evaluator's most repeats in every evaluation firmware (`utvm run --repeat` is bounded by it):
#: 8 bytes of RAM each.
EVAL_MAX_REPEAT = 64


def firmware_crt_config(compiled: Any) -> dict[str, int]:
    """crt_config.h values the model's run needs beyond the defaults: one call argument and one RPC array
    per input and output (a model with 40 outputs must still run), with room to spare for the time
    evaluator and a few more arrays; the rank of its highest-rank input or output (a rank-7 tensor must
    still travel); EVAL_MAX_REPEAT time evaluator repeats on every platform."""
    tensors = [*compiled.interface.inputs, *compiled.interface.outputs]
    nio = len(tensors)
    out: dict[str, int] = {"TVM_CRT_MAX_TIME_EVALUATOR_REPEAT": EVAL_MAX_REPEAT}
    rank = max((len(t.shape) for t in tensors), default=0)
    if rank > _CRT_DEFAULT_NDIM:
        out["TVM_CRT_MAX_NDIM"] = rank
    if nio + 4 > _CRT_DEFAULT_ARGS:
        out["TVM_CRT_MAX_ARGS"] = nio + 4
    if nio + 8 > _CRT_DEFAULT_NDARRAYS:
        out["TVM_CRT_MAX_NDARRAYS"] = nio + 8
    # The CallFunc of the run function carries every tensor (docs/architecture.md §5.3: type code + 36 + 8 * ndim
    # bytes each) after a 27-byte header; the copies are split to fit whatever the packet size is.
    call = 27 + sum(4 + 36 + 8 * len(t.shape) for t in tensors) + 64
    if call > _CRT_DEFAULT_PACKET:
        out["TVM_CRT_MAX_PACKET_SIZE_BYTES"] = (call + 255) // 256 * 256
    return out


def debug_firmware_sources(compiled: Any) -> list[Path]:
    """firmware_sources with every operator a packed function of the system library, in any convention
    (utvm.compiler.debug: a wrapper per operator of an unpacked / C-interface model, in the firmware only),
    in their own content-addressed directory; the model's own files where no wrapper is needed."""
    from utvm.compiler.debug import debug_firmware_sources as with_wrappers
    from utvm.compiler.debug import needs_wrappers

    paths = firmware_sources(compiled)
    if not needs_wrappers(compiled):
        return paths
    return _rewritten(paths, with_wrappers(compiled, {p.name: p.read_text() for p in paths}),
                      f"{compiled.prefix}-debug")


def build_firmware(compiled: Any | Sequence[Any], platform: str = "host", debug: bool = False, *,
                   extra_sources: Sequence[str | Path] = (), include_dirs: Sequence[str | Path] = (),
                   **build_kwargs: Any) -> Path:
    """Evaluation firmware for `compiled` (one CompiledModel, or a list of them): CRT + RPC server + each
    model's system library; with `debug`, every operator also callable over RPC in any convention
    (debug_firmware_sources). The firmware names its models (TVMSystemLibTable: `session.system_lib(name)`);
    with several, each model's entry point becomes `tvmgen_<m>_system_lib` and the first is the default
    (`session.system_lib()`). Two models of one name are a UsageError. `extra_sources` (the user's C, e.g.
    defining utvm_user_init) and `include_dirs` are compiled in with the firmware's own warning flags."""
    from utvm.compiler import codegen
    from utvm.compiler.debug import rename_entry_point
    from utvm.platform import get_platform

    models = list(compiled) if isinstance(compiled, list | tuple) else [compiled]
    if not models:
        raise UsageError("build_firmware: no model to build into the firmware")
    names = [m.model_name for m in models]
    for name in names:
        if names.count(name) > 1:
            raise UsageError(f"two models are named {name!r}: each model of one firmware needs its own name "
                             "(--model-name when compiling; it prefixes every generated symbol)")
    config = _merged_crt_config([firmware_crt_config(m) for m in models])
    # one module slot per model, one per packed model with user operators (the module its operators resolve
    # them from, docs/custom_ops.md), one to spare
    slots = len(models) + sum(1 for m in models if _packed_user_ops(m)) + 1
    if slots > _CRT_DEFAULT_MODULES:
        config["TVM_CRT_MAX_REGISTERED_MODULES"] = slots
    config.update(dict(build_kwargs.pop("crt_config", None) or {}))
    sources: list[Path] = []
    renamed = len(models) > 1
    for m in models:
        paths = debug_firmware_sources(m) if debug else firmware_sources(m)
        if renamed:  # every model's TVMSystemLibEntryPoint becomes its own tvmgen_<m>_system_lib
            texts = rename_entry_point(m, {q.name: q.read_text() for q in paths},
                                       codegen.model_system_lib_name(m.model_name))
            paths = _rewritten(paths, texts, f"{m.prefix}-multi")
        sources += paths
    sources = _shared_user_sources_once(sources)
    table = cc.cached_sources("system-libs", {"utvm_system_libs.c": codegen.system_lib_table_source(names,
                                                                                                    renamed)})
    sources.append(table / "utvm_system_libs.c")
    if extra_sources:
        build_kwargs["extra_sources"] = list(extra_sources)
    if include_dirs:
        build_kwargs["include_dirs"] = list(include_dirs)
    build_kwargs.setdefault("with_test_functions", False)
    return get_platform(platform).build(system_lib_sources=sources, crt_config=config or None, **build_kwargs)


#: The CRT's default number of module slots (crt_config.h.template: TVM_CRT_MAX_REGISTERED_MODULES).
_CRT_DEFAULT_MODULES = 2


def _shared_user_sources_once(sources: list[Path]) -> list[Path]:
    """Models using the same user operator file (--custom-op: `utvm_user_<stem>.c`, the one source a model
    does not prefix with its name) link it once; two different files of one name are a UsageError."""
    seen: dict[str, Path] = {}
    out: list[Path] = []
    for path in sources:
        if not path.name.startswith("utvm_user_"):
            out.append(path)
        elif path.name not in seen:
            seen[path.name] = path
            out.append(path)
        elif path.read_bytes() != seen[path.name].read_bytes():
            raise UsageError(f"two models bring different user operator files named {path.name!r} "
                             f"({seen[path.name]} and {path}); rename one (--custom-op NAME=FILE.c:symbol)")
    return out


def _packed_user_ops(compiled: Any) -> bool:
    """Whether `compiled` is a packed-API model calling user operators through its own CRT module."""
    ops = compiled.metadata.get("modules", {}).get(compiled.model_name, {}).get("utvm", {}).get("custom_ops")
    return bool(ops) and not compiled.options.unpacked_api


def _merged_crt_config(configs: Sequence[Mapping[str, int]]) -> dict[str, int]:
    """The largest value of every limit over several models' firmware_crt_config."""
    out: dict[str, int] = {}
    for config in configs:
        for key, value in config.items():
            out[key] = max(out.get(key, value), value)
    return out


def _rewritten(paths: Sequence[Path], texts: Mapping[str, str], label: str) -> list[Path]:
    """The sources `paths` with some replaced by `texts` (name -> new text), in a cached directory of their
    own beside copies of the other files of their directory (the model's header); the paths of `texts`."""
    others = {f.name: f.read_text() for f in paths[0].parent.iterdir() if f.is_file() and f.name not in texts}
    d = cc.cached_sources(label, {**others, **texts})
    return sorted(d / name for name in texts)


#: session -> {model name: (its parameter blob, the device array holding it)}: install_params's uploads, kept
#: on the device for the session's life (the model reads them at every run)
_INSTALLED_PARAMS: weakref.WeakKeyDictionary[Any, dict[str, tuple[bytes, Any]]] = weakref.WeakKeyDictionary()


def install_params(session: Any, compiled: Any, blob: bytes | None = None) -> None:
    """--params external: upload `blob` (default: the model's own, `compiled.params_blob`) and install it with
    the system library's `tvmgen_<m>_set_params` (which validates it; a refusal is the device's error). The
    array stays allocated while the session lives, since the model reads it at every run; installing the same
    blob again does nothing. Nothing to do for a model with embedded parameters."""
    blob = getattr(compiled, "params_blob", None) if blob is None else blob
    if blob is None:
        return
    installed = _INSTALLED_PARAMS.setdefault(session, {})
    if installed.get(compiled.model_name, (None,))[0] == blob:
        return
    from utvm.compiler.codegen import set_params_function

    arr = session.array(np.frombuffer(blob, np.uint8))
    session.system_lib(compiled.model_name).get_function(set_params_function(compiled.prefix))(arr)
    old = installed.pop(compiled.model_name, None)
    installed[compiled.model_name] = (blob, arr)
    if old is not None:
        old[1].free()


def run_on_device(session: Any, compiled: Any, inputs: Sequence[np.ndarray], repeat: int = 0
                  ) -> tuple[list[np.ndarray], float | None]:
    """Upload `inputs`, call the model's packed run function from the system library, download the
    outputs; with repeat > 0 also time it (median seconds per call over `repeat` measurements). A model
    compiled with --params external gets its parameter blob first (install_params)."""
    install_params(session, compiled)
    mod = session.system_lib()
    run = mod.get_function(compiled.run_function)
    ins = [session.array(np.asarray(a, order="C")) for a in inputs]  # 0-d stays 0-d (a scalar input)
    outs = [session.empty(o.shape, o.dtype) for o in compiled.interface.outputs]
    try:
        run(*ins, *outs)
        results = [o.numpy() for o in outs]
        latency = None
        if repeat > 0:
            timer = session.time_evaluator(compiled.run_function, module=mod, number=1, repeat=repeat,
                                           min_repeat_ms=1)
            latency = float(np.median(timer(*ins, *outs)))
    finally:
        for a in (*ins, *outs):
            a.free()
    return results, latency


# --- checking -----------------------------------------------------------------------------------------------

#: `--oracle` name -> (model kind it checks, what it is called in reports)
ORACLES: dict[str, tuple[str, str]] = {
    "tflm": ("tflite", "TFLite Micro's kernels (tflite-micro)"),
    "litert": ("tflite", "TFLite reference kernels (ai-edge-litert)"),
    "onnxruntime": ("onnx", "onnxruntime"),
}


def default_oracle(kind: str, rounding: str) -> str:
    """TFLM for a TFLite model compiled with --rounding double (TFLM's arithmetic), LiteRT's reference
    kernels for single rounding (theirs); onnxruntime for ONNX."""
    if kind == "onnx":
        return "onnxruntime"
    return "tflm" if rounding == "double" else "litert"


def reference(model: Path | None, compiled: Any, inputs: Sequence[np.ndarray],
              oracle: str | None = None) -> tuple[list[np.ndarray], str]:
    """The reference outputs and which interpreter produced them: the model file's own (for TFLite, TFLM
    or LiteRT's reference kernels: `oracle`, by default the one whose rounding the model was compiled
    with; onnxruntime for ONNX), else the one an MLF keeps under src/, else utvm's reference semantics."""
    if oracle is not None and oracle not in ORACLES:
        raise UsageError(f"unknown oracle {oracle!r}; choose one of {', '.join(ORACLES)}")
    source: Path | bytes | None = None
    kind = ""
    user_ops = sorted({str(n.attrs.get("name")) for n in compiled.graph.nodes if n.op == "custom"})
    if user_ops:  # TFLite's and onnxruntime's interpreters do not know them: utvm's own, with their Python twins
        if oracle is not None:
            raise UsageError(f"--oracle {oracle}: the model has user operators ({', '.join(user_ops)}), which "
                             "only utvm's reference semantics can run (with --custom-op-py)")
    elif model is not None and not is_mlf(model):
        from utvm.frontend import model_kind

        source, kind = model, model_kind(model)
    elif getattr(compiled, "source_model_bytes", None) is not None:
        source = compiled.source_model_bytes
        kind = "onnx" if compiled.source_model_name.lower().endswith(".onnx") else "tflite"
    if source is not None:
        from utvm.compiler.oracle import reference_outputs

        name = oracle or default_oracle(kind, compiled.options.rounding)
        if ORACLES[name][0] != kind:
            fits = ", ".join(k for k, (mk, _) in ORACLES.items() if mk == kind)
            raise UsageError(f"--oracle {name} checks {ORACLES[name][0]} models; this is a {kind} model "
                             f"(use {fits})")
        (outs,) = reference_outputs(source, [list(inputs)], kind="tflm" if name == "tflm" else kind)
        return outs, ORACLES[name][1]
    if oracle is not None:
        raise UsageError(f"--oracle {oracle}: there is no model file to run it on (this MLF keeps no source "
                         "model); the check uses utvm's reference semantics")
    from utvm.ir import run_reference

    res = run_reference(compiled.graph, dict(zip(compiled.graph.inputs, inputs, strict=True)),
                        rounding=compiled.options.rounding)
    return [res[name] for name in compiled.graph.outputs], "utvm reference semantics"


@dataclass(frozen=True)
class Verdict:
    """How outputs compare with the reference. NaN equals NaN (at the same place, in both), an infinity
    equals the same infinity; `max_abs_err` is over the finite values both have, and inf where one side
    has a NaN or infinity the other lacks (or a shape differs)."""

    bit_exact: bool
    max_abs_err: float
    ok: bool


def differences(got: np.ndarray, want: np.ndarray) -> tuple[np.ndarray, float]:
    """(mask of the elements of `got` that differ from `want`, max abs difference) of two arrays of one
    shape: integers must be equal; floats may differ by FLOAT_TOLERANCE relative to the reference's
    magnitude, NaN equals NaN and an infinity equals itself (a special value against anything else: inf)."""
    got, want = np.asarray(got), np.asarray(want)
    g, w = got.astype(np.float64), want.astype(np.float64)
    if got.dtype.kind == "f" or want.dtype.kind == "f":
        special = ~np.isfinite(g) | ~np.isfinite(w)
        bad_special = special & ~(np.isnan(g) & np.isnan(w) | (g == w) & special)
        finite = ~special
        with np.errstate(invalid="ignore", over="ignore"):  # inf - inf: not a difference that counts here
            diff = np.where(finite, np.abs(g - w), 0.0)
        magnitude = float(np.abs(w[finite]).max()) if finite.any() else 1.0
        differs = bad_special | (diff > FLOAT_TOLERANCE * max(1.0, magnitude))
        max_abs = math.inf if bad_special.any() else float(diff.max()) if diff.size else 0.0
    else:
        differs = got.astype(np.int64) != want.astype(np.int64) if got.dtype.kind != "b" else got != want
        max_abs = float(np.abs(g - w).max()) if g.size else 0.0
    return differs, max_abs


def compare(outputs: Sequence[np.ndarray], refs: Sequence[np.ndarray]) -> Verdict:
    """int outputs must be bit-exact, float ones within FLOAT_TOLERANCE relative to the reference's
    magnitude; NaN-aware (see Verdict and `differences`)."""
    bit_exact, max_err, ok = True, 0.0, True
    for got, want in zip(outputs, refs, strict=True):
        got, want = np.asarray(got), np.asarray(want)
        if got.shape != want.shape:
            return Verdict(False, math.inf, False)
        differs, err = differences(got, want)
        max_err = max(max_err, err)
        ok &= not differs.any()
        if not np.array_equal(got, want.astype(got.dtype), equal_nan=got.dtype.kind == "f"):
            bit_exact = False
    return Verdict(bit_exact, max_err, bool(ok))
