"""`utvm run MODEL_OR_MLF --platform host`: build evaluation firmware with the model, run it over RPC.

    utvm run kws_ref_model.tflite --check            # compile, run on random inputs, compare with TFLite
    utvm run kws.tar --input input_1=x.npy --json    # an MLF from `utvm compile`, a given input

Given a model (.tflite/.onnx) it compiles it first (same flags as `utvm compile`); given an MLF tar (or an
extracted MLF directory) it uses that. The firmware is the CRT + the RPC server + the model's generated
sources as the system library; the host uploads the inputs, calls `tvmgen_<m>_run` over RPC, downloads
the outputs and times the call with the device's time evaluator. Inputs not given with --input are
random (integers over the dtype's range, floats ~ N(0, 1)) from a seed that is printed.

--check compares with the reference interpreter: TFLite's reference kernels (ai-edge-litert) for .tflite,
onnxruntime for .onnx (for an MLF, on the model file it keeps under src/), and utvm's own reference
semantics (utvm.ir.run_reference) for an MLF made without one. int8
outputs must be bit-exact, float outputs within 1e-5 of the reference (relative to its magnitude); a
mismatch exits with status 3. --json prints {outputs, bit_exact, max_abs_err, latency_s, seed}, plus
`cycles` (instructions per run) on platforms whose clock counts instructions (QEMU under -icount: two runs
of the same firmware report the same number). --profile times every fused operator on the device through
the system library and prints them sorted by cost (utvm.cli.run_profile); --profile-plot FILE.png draws it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import secrets
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from utvm.cli._progress import progress_printer
from utvm.errors import ArgumentError

EXIT_MISMATCH = 3
FLOAT_TOLERANCE = 1e-5


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    from utvm.cli.compile import add_compile_options

    p = subparsers.add_parser("run", help="run a model on a device over RPC (and check it)",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", help="a .tflite/.onnx model or an MLF tar / directory")
    p.add_argument("--platform", default="host", help="where to run (default: host)")
    p.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy",
                   help="an input tensor from a .npy file (repeatable); others are random")
    p.add_argument("--seed", type=int, help="seed of the random inputs (default: a fresh one, printed)")
    p.add_argument("--check", action="store_true", help="compare with the reference interpreter")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    p.add_argument("--repeat", type=int, default=5, help="time evaluator repeats for the latency (default 5)")
    p.add_argument("--profile", action="store_true",
                   help="also time every fused operator on the device (system library; packed convention)")
    p.add_argument("--profile-plot", metavar="FILE.png", help="write the --profile table as a bar chart (implies it)")
    add_compile_options(p)
    p.set_defaults(func=run)


# --- reusable steps (tests and the demo use them) ---------------------------------------------------------

def is_mlf(path: Path) -> bool:
    return (path.is_dir() and (path / "metadata.json").exists()) or path.suffix == ".tar"


def firmware_sources(compiled: Any) -> list[Path]:
    """The model's generated C and header in one content-addressed directory (so firmware builds cache);
    the header sits beside the sources, on the include path of platforms that add each source's folder."""
    from utvm.support import cc

    blob = json.dumps([sorted(compiled.sources.items()), sorted(compiled.includes.items())]).encode()
    key = hashlib.sha256(blob).hexdigest()[:20]
    d = cc.cache_dir() / "model-src" / f"{compiled.prefix}-{key}"
    if not d.exists():
        d.mkdir(parents=True, exist_ok=True)
        for name, text in {**compiled.sources, **compiled.includes}.items():
            (d / name).write_text(text)
    return sorted(d / name for name in compiled.sources)


def build_firmware(compiled: Any, platform: str = "host", **build_kwargs: Any) -> Path:
    """Evaluation firmware for `compiled`: CRT + RPC server + the model as the system library."""
    from utvm.platform import get_platform

    return get_platform(platform).build(with_test_functions=False, system_lib_sources=firmware_sources(compiled),
                                        **build_kwargs)


def run_on_device(session: Any, compiled: Any, inputs: Sequence[np.ndarray], repeat: int = 0
                  ) -> tuple[list[np.ndarray], float | None]:
    """Upload `inputs`, call the model's packed run function from the system library, download the
    outputs; with repeat > 0 also time it (median seconds per call over `repeat` measurements)."""
    mod = session.system_lib()
    run = mod.get_function(compiled.run_function)
    ins = [session.array(np.ascontiguousarray(a)) for a in inputs]
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


def reference(model: Path | None, compiled: Any, inputs: Sequence[np.ndarray]) -> tuple[list[np.ndarray], str]:
    """The reference outputs and which interpreter produced them."""
    source: Path | bytes | None = None
    kind = ""
    if model is not None and not is_mlf(model):
        from utvm.frontend import model_kind

        source, kind = model, model_kind(model)
    elif getattr(compiled, "source_model_bytes", None) is not None:
        source = compiled.source_model_bytes
        kind = "onnx" if compiled.source_model_name.lower().endswith(".onnx") else "tflite"
    if source is not None:
        from utvm.compiler.oracle import reference_outputs

        (outs,) = reference_outputs(source, [list(inputs)], kind=kind)
        return outs, "TFLite reference kernels (ai-edge-litert)" if kind == "tflite" else "onnxruntime"
    from utvm.ir import run_reference

    res = run_reference(compiled.graph, dict(zip(compiled.graph.inputs, inputs, strict=True)),
                        rounding=compiled.options.rounding)
    return [res[name] for name in compiled.graph.outputs], "utvm reference semantics"


def compare(outputs: Sequence[np.ndarray], refs: Sequence[np.ndarray]) -> tuple[bool, float, bool]:
    """(bit_exact, max_abs_err, ok): int outputs must be bit-exact, float ones within tolerance."""
    bit_exact, max_err, ok = True, 0.0, True
    for got, want in zip(outputs, refs, strict=True):
        want = np.asarray(want)
        if got.shape != want.shape:
            return False, float("inf"), False
        diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
        err = float(diff.max()) if diff.size else 0.0
        max_err = max(max_err, err)
        if not np.array_equal(got, want.astype(got.dtype)):
            bit_exact = False
        if got.dtype.kind == "f":
            scale = max(1.0, float(np.abs(want).max()) if want.size else 1.0)
            ok &= err <= FLOAT_TOLERANCE * scale
        else:
            ok &= err == 0.0
    return bit_exact, max_err, ok


def _read_inputs(compiled: Any, specs: Sequence[str], seed: int) -> list[np.ndarray]:
    from utvm.compiler.local import random_inputs

    iface = compiled.interface
    given: dict[str, np.ndarray] = {}
    names = [spec.partition("=")[0] for spec in specs]
    for name in names:  # else one would be dropped silently (and the random-input count go wrong)
        if names.count(name) > 1:
            raise ArgumentError(f"--input {name!r} is given twice")
    for spec in specs:
        name, sep, file = spec.partition("=")
        if not sep:
            raise ArgumentError(f"--input {spec!r}: expected NAME=FILE.npy")
        if name not in [x.name for x in iface.inputs]:
            raise ArgumentError(f"--input {name!r}: the model has no such input; inputs: "
                                f"{', '.join(x.name for x in iface.inputs)}")
        try:
            given[name] = np.load(file)
        except (OSError, ValueError) as exc:
            raise ArgumentError(f"--input {name}: cannot read {file!r}: {exc}") from exc
    rand = random_inputs(compiled, np.random.default_rng(seed))
    out = []
    for x, r in zip(iface.inputs, rand, strict=True):
        a = given.get(x.name, r)
        if str(a.dtype) != x.dtype or tuple(a.shape) != x.shape:
            raise ArgumentError(f"input {x.name!r} must be {x.dtype}{list(x.shape)}, "
                                f"the file holds {a.dtype}{list(a.shape)}")
        out.append(np.ascontiguousarray(a))
    return out


# --- the command ------------------------------------------------------------------------------------------

def run(args: argparse.Namespace) -> int:
    from utvm import mlf
    from utvm.cli.compile import compile_from_args

    say = progress_printer(getattr(args, "quiet", False))

    model = Path(args.model)
    if not model.exists():
        raise ArgumentError(f"{model}: no such model or MLF")
    if is_mlf(model):
        say(f"loading the Model Library Format archive {model}")
        compiled = mlf.load(model)
    else:
        compiled = compile_from_args(args, model, say)
    seed = args.seed if args.seed is not None else secrets.randbelow(2**31)
    inputs = _read_inputs(compiled, args.input, seed)
    n_random = len(inputs) - len(args.input)
    if n_random:
        say(f"{n_random} random input(s), seed {seed} (rerun with --seed {seed})")
    say(f"building {args.platform} firmware (CRT + RPC server + {len(compiled.sources)} generated sources)")
    firmware = build_firmware(compiled, args.platform)
    from utvm.platform import get_platform

    say(f"starting {firmware.name} and running {compiled.run_function} over RPC")
    plat = get_platform(args.platform)
    # Platforms with an instruction-counting clock (QEMU under -icount) also report instructions ("cycles").
    ips = getattr(plat, "instructions_per_second", None)
    timings = None
    with plat.start(firmware) as session:
        outputs, latency = run_on_device(session, compiled, inputs, repeat=args.repeat)
        if args.profile or args.profile_plot:
            from utvm.cli.run_profile import profile_operators

            say(f"profiling {len(compiled.operators)} operators on the device")
            timings = profile_operators(session, compiled, instructions_per_second=ips)
    result: dict[str, Any] = {"outputs": {x.name: y.tolist() for x, y in zip(compiled.interface.outputs, outputs,
                                                                            strict=True)},
                              "bit_exact": None, "max_abs_err": None, "latency_s": latency, "seed": seed}
    if ips and latency is not None:
        result["cycles"] = round(latency * ips)
    if timings is not None:
        from utvm.cli.run_profile import format_profile, plot_profile

        result["profile"] = [t.to_json() for t in timings]
        if args.profile_plot:
            plot_profile(timings, args.profile_plot, f"{compiled.model_name} on {args.platform}")
            say(f"wrote the profile plot {args.profile_plot}")
    ok = True
    checked_by = ""
    if args.check:
        say("running the reference interpreter")
        refs, checked_by = reference(None if is_mlf(model) else model, compiled, inputs)
        bit_exact, max_err, ok = compare(outputs, refs)
        result.update(bit_exact=bit_exact, max_abs_err=max_err)
    if args.json:
        print(json.dumps(result))
    else:
        _print_text(compiled, outputs, result, checked_by, ok, args.check)
        if "cycles" in result:
            print(f"instructions: {result['cycles']} per run (deterministic instruction clock)")
        if timings is not None:
            print(format_profile(timings, latency))
    return 0 if ok else EXIT_MISMATCH


def _print_text(compiled: Any, outputs: list[np.ndarray], result: dict[str, Any], checked_by: str, ok: bool,
                checked: bool) -> None:
    for x, y in zip(compiled.interface.outputs, outputs, strict=True):
        text = np.array2string(y, threshold=64, edgeitems=6, max_line_width=100)
        print(f"output {x.name!r} {x.dtype}{list(x.shape)}:\n{text}")
    if result["latency_s"] is not None:
        lat = result["latency_s"]
        shown = f"{lat * 1e3:.3f} ms" if lat >= 1e-3 else f"{lat * 1e6:.2f} us"
        print(f"latency: {shown} per run (device timer, median)")
    if checked:
        verdict = "bit-exact" if result["bit_exact"] else f"max abs error {result['max_abs_err']:.3g}"
        print(f"check against {checked_by}: {'OK' if ok else 'MISMATCH'} ({verdict})")

