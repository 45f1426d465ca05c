"""`utvm run MODEL_OR_MLF --platform host`: build evaluation firmware with the model, run it over RPC.

    utvm run kws_ref_model.tflite --check            # compile, run on random inputs, compare with TFLite
    utvm run kws.tar --input input_1=x.npy --json    # an MLF from `utvm compile`, a given input

Given a model (.tflite/.onnx) it compiles it first (same flags as `utvm compile`); given an MLF tar (or an
extracted MLF directory) it uses that. The firmware is the CRT + the RPC server + the model's generated
sources as the system library; the host uploads the inputs, calls `tvmgen_<m>_run` over RPC, downloads
the outputs and times the call with the device's time evaluator. Inputs not given with --input are
random (integers over the dtype's range, floats ~ N(0, 1)) from a seed that is printed. Each --input is
a .npy file (numpy.save) of the input's exact dtype and shape; NAME may itself contain '='.

--check compares with the reference interpreter: for .tflite, TensorFlow Lite Micro's own kernels
(tflite-micro) when the model is compiled with --rounding double (TFLM's arithmetic) and TFLite's
reference kernels (ai-edge-litert) with single rounding, or the one --oracle tflm|litert names;
onnxruntime for .onnx (for an MLF, on the model file it keeps under src/), and utvm's own reference
semantics (utvm.ir.run_reference) for an MLF made without one. int8
outputs must be bit-exact, float outputs within 1e-5 of the reference (relative to its magnitude); a
mismatch exits with status 3. NaN in an output equals NaN at the same place in the reference. --json prints
one strict JSON object {outputs, bit_exact, max_abs_err, latency_s, seed}, where a NaN or an infinity is
null and the object then also holds "nonfinite": true, plus
`cycles` and `instructions` (the same number: instructions per run) on platforms whose clock counts
instructions (QEMU under -icount: two runs of the same firmware report the same number), and `cycles_est`
(estimated cycles per run) with `timing_model` on boards with a timing model (docs/timing.md). --profile
times every fused operator on the device through the system library and prints them sorted by cost
(utvm.cli.run_profile); --profile-plot FILE.png draws it.
--debug-layers then runs the model operator by operator on the device and compares every intermediate
tensor with utvm's reference interpreter, printing a row per operator and the first that differs (exit
status 3 then; under "debug_layers" with --json; utvm.layer_debug). Both work in every calling convention
(a packed wrapper per operator in the firmware, never in the MLF: utvm.compiler.debug).
--timeout S bounds every call on the device: a call that does not return within S seconds is reported as
such (which function, after how long), and the device is stopped; it bounds each call of a --custom-op-py
twin too (run in a child process, docs/custom_ops.md). --extra-source FILE.c / -I DIR compile
your C into the firmware beside the model (docs/platforms.md). The workflow itself is a library API,
utvm.evaluate; this module only parses arguments and prints.
"""

from __future__ import annotations

import argparse
import secrets
from pathlib import Path
from typing import Any

import numpy as np

from utvm.cli import EXIT_MISMATCH
from utvm.cli import _args as A
from utvm.cli._progress import progress_printer
from utvm.errors import UsageError
from utvm.evaluate import build_firmware, compare, is_mlf, read_inputs, reference, run_on_device
from utvm.support import jsonout

#: Seconds a call on the device may take before it is reported as not returning (--timeout).
DEFAULT_TIMEOUT_S = 60.0


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    from utvm.cli.compile import add_compile_options

    p = subparsers.add_parser("run", help="run a model on a device over RPC (and check it)",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", type=A.model_or_mlf, help="a .tflite/.onnx model or an MLF tar / directory")
    p.add_argument("--platform", default="host", type=A.platform_name, help="where to run (default: host)")
    A.add_board_config_option(p)
    A.add_crt_config_options(p)
    p.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy",
                   help="an input tensor from a .npy file (repeatable); others are random")
    p.add_argument("--seed", type=A.seed, help="seed of the random inputs (default: a fresh one, printed)")
    p.add_argument("--check", action="store_true", help="compare with the reference interpreter")
    p.add_argument("--oracle", choices=("tflm", "litert", "onnxruntime"),
                   help="the reference interpreter of --check (implies it; default: tflm for a TFLite model "
                        "compiled with --rounding double, litert for single, onnxruntime for ONNX)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    p.add_argument("--repeat", type=A.repeat_count, default=5,
                   help="time evaluator repeats for the latency (1 to 64, the evaluation firmware's "
                        "TVM_CRT_MAX_TIME_EVALUATOR_REPEAT; default 5)")
    p.add_argument("--timeout", type=A.positive_seconds, default=DEFAULT_TIMEOUT_S, metavar="S",
                   help=f"seconds a call on the device, or of a --custom-op-py twin, may take (default "
                        f"{DEFAULT_TIMEOUT_S:g})")
    p.add_argument("--profile", action="store_true",
                   help="also time every fused operator on the device (system library; any convention)")
    p.add_argument("--profile-plot", metavar="FILE.png", type=A.nonempty_path,
                   help="write the --profile table as a bar chart (implies it)")
    p.add_argument("--debug-layers", action="store_true",
                   help="also run the model operator by operator on the device and compare every intermediate "
                        "tensor with utvm's reference interpreter (exit 3 when one differs)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    A.add_user_code_options(p)
    add_compile_options(p)
    p.set_defaults(func=run)


def load_model_or_mlf(args: argparse.Namespace, say: Any) -> Any:
    """The CompiledModel of args.model: an MLF as is, a model compiled with the compile flags in args."""
    from utvm import mlf
    from utvm.cli.compile import bind_custom_ops, compile_from_args

    model = Path(args.model)
    if not model.exists():
        raise UsageError(f"{model}: no such model or MLF")
    bind_custom_ops(args)  # an MLF's user operators still need their Python twins for --check
    if is_mlf(model):
        if getattr(args, "custom_op", None):  # else it would be ignored: the archive carries its C
            raise UsageError(f"--custom-op: {model} is already compiled (an MLF carries the C of its user "
                             "operators); --custom-op-py gives their Python twins")
        say(f"loading the Model Library Format archive {model}")
        compiled = mlf.load(model)
        if getattr(args, "custom_op_py", None):
            from utvm import custom_ops

            custom_ops.check_all_used(compiled.graph)  # a twin the archive has no operator for is not ignored
        platform = getattr(args, "platform", None)
        if getattr(args, "target", None) or getattr(args, "tuning_log", None):
            raise UsageError(f"{model} is already compiled: --target and --tuning-log apply to a model file")
        if platform:
            from utvm.target import get_target, platform_target

            reason = get_target(compiled.options.target).runs_on(platform_target(platform))
            if reason:
                raise UsageError(f"{model}: {reason} (platform {platform}); recompile the model with "
                                 f"--target {platform_target(platform).name}")
        return compiled
    return compile_from_args(args, model, say)


def run(args: argparse.Namespace) -> int:
    from utvm.custom_ops import time_limit

    with time_limit(args.timeout):  # --timeout bounds each call of a --custom-op-py twin too (docs/custom_ops.md)
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    from utvm.support.files import check_output_file

    say = progress_printer(args.quiet)
    if args.profile_plot:
        check_output_file(args.profile_plot, "--profile-plot", A.input_paths(args))  # before the work, not after it

    model = Path(args.model)
    compiled = load_model_or_mlf(args, say)
    if args.check or args.oracle:  # a user operator without its Python twin: say so before the device work
        from utvm.custom_ops import check_reference

        check_reference(compiled.graph)
    seed = args.seed if args.seed is not None else secrets.randbelow(2**31)
    inputs = read_inputs(compiled, args.input, seed)
    n_random = len(inputs) - len(args.input)
    if n_random:
        say(f"{n_random} random input(s), seed {seed} (rerun with --seed {seed})")
    say(f"building {args.platform} firmware (CRT + RPC server + {len(compiled.firmware_sources)} generated sources)")
    # Single operators over RPC (--profile, --debug-layers): a packed wrapper per operator where the
    # convention has none (utvm.compiler.debug; firmware only).
    firmware = build_firmware(compiled, args.platform,
                              debug=bool(args.profile or args.profile_plot or args.debug_layers),
                              extra_sources=[Path(s) for s in args.extra_source],
                              include_dirs=[Path(d) for d in args.include_dir],
                              crt_config=dict(args.crt_config),
                              **({} if args.crt_config_file is None
                                 else {"crt_config_file": Path(args.crt_config_file)}))

    say(f"starting {firmware.name} and running {compiled.run_function} over RPC")
    outputs, latency, result, timings, layers = measure(
        args, compiled, firmware, inputs, seed, say, profile=bool(args.profile or args.profile_plot))
    if timings is not None and args.profile_plot:
        from utvm.cli.run_profile import plot_profile

        plot_profile(timings, args.profile_plot, f"{compiled.model_name} on {args.platform}")
        say(f"wrote the profile plot {args.profile_plot}")
    outputs_ok, checked_by = check(args, model, compiled, inputs, outputs, result, layers, say)
    ok = outputs_ok is not False and (layers is None or layers.ok)
    if args.json:
        print(jsonout.dumps(result))
    else:
        _print_text(compiled, outputs, result, checked_by, ok, args.check or bool(args.oracle))
        if "cycles" in result:
            print(f"instructions: {result['cycles']} per run (deterministic instruction clock)")
        if "cycles_est" in result:
            print(f"estimated cycles: {result['cycles_est']} per run ({result['timing_model']} timing model, "
                  "docs/timing.md)")
        if timings is not None:
            from utvm.cli.run_profile import format_profile

            print(format_profile(timings, latency))
        if layers is not None:
            from utvm.layer_debug import format_layers

            print(format_layers(layers))
    return 0 if ok else EXIT_MISMATCH


def measure(args: argparse.Namespace, compiled: Any, firmware: Path, inputs: list[Any], seed: int, say: Any,
            profile: bool) -> tuple[list[Any], float | None, dict[str, Any], list[Any] | None, Any]:
    """Run `compiled` in `firmware` on `args.platform` as `utvm run` does (the calls and their order, which the
    figures depend on): the outputs, the latency, the --json object without the check's fields, the per-operator
    timings (with `profile`) and the layer comparison (with --debug-layers). `utvm report` measures through
    this too, so its figures are `run`'s."""
    from utvm.platform import get_platform

    plat = get_platform(args.platform)
    # Platforms with an instruction-counting clock (QEMU under -icount) also report instructions ("cycles").
    ips = getattr(plat, "instructions_per_second", None)
    timings = None
    layers = None
    with plat.start(firmware, reply_timeout_s=args.timeout) as session:
        seen = session.timing_regions()  # the board's timing model (docs/timing.md), None without one
        outputs, latency = run_on_device(session, compiled, inputs, repeat=args.repeat)
        cycles_est = _model_cycles_est(session, seen, latency, ips)
        if profile:
            from utvm.cli.run_profile import profile_operators

            say(f"profiling {len(compiled.operators)} operators on the device")
            timings = profile_operators(session, compiled, instructions_per_second=ips)
        if args.debug_layers:
            from utvm.layer_debug import debug_layers

            say(f"running {len(compiled.operators)} operators one by one and comparing every intermediate")
            layers = debug_layers(compiled, inputs, session=session)
    result: dict[str, Any] = {"outputs": {x.name: y.tolist() for x, y in zip(compiled.interface.outputs, outputs,
                                                                            strict=True)},
                              "bit_exact": None, "max_abs_err": None, "latency_s": latency, "seed": seed}
    if ips and latency is not None:
        result["cycles"] = round(latency * ips)  # instructions (the historical key)
        result["instructions"] = result["cycles"]
    if cycles_est is not None:
        result["cycles_est"] = round(cycles_est)
        result["timing_model"] = getattr(plat, "timing_model", None)
    if timings is not None:
        result["profile"] = [t.to_json() for t in timings]
    return outputs, latency, result, timings, layers


def check(args: argparse.Namespace, model: Path, compiled: Any, inputs: list[Any], outputs: list[Any],
          result: dict[str, Any], layers: Any, say: Any) -> tuple[bool | None, str]:
    """--check / --oracle and --debug-layers: their fields added to `result` (as `utvm run --json` prints
    them); (whether the outputs agree with the reference, None without --check; the reference's name)."""
    ok: bool | None = None
    checked_by = ""
    if args.check or args.oracle:
        say("running the reference interpreter")
        refs, checked_by = reference(None if is_mlf(model) else model, compiled, inputs, args.oracle)
        verdict = compare(outputs, refs)
        ok = verdict.ok
        result.update(bit_exact=verdict.bit_exact, max_abs_err=verdict.max_abs_err)
    if layers is not None:
        result["debug_layers"] = layers.to_json()
    return ok, checked_by


def _model_cycles_est(session: Any, seen: list[Any] | None, latency: float | None,
                      ips: float | None) -> float | None:
    """The whole model's estimated cycles per run: its instructions (latency x ips) at the cycles per
    instruction of the last span the timing model closed while run_on_device timed it (every repeat times the
    same call); None without a timing model or a timing."""
    from utvm.runtime.backend import estimate_cycles

    if seen is None or latency is None or not ips:
        return None
    regions = (session.timing_regions() or [])[len(seen):]
    if not regions:
        return None
    est = estimate_cycles([latency], regions[-1:], ips)
    return None if est is None else est[0]


def _print_text(compiled: Any, outputs: list[np.ndarray], result: dict[str, Any], checked_by: str, ok: bool,
                checked: bool) -> None:
    from utvm.support.text import shown as escaped

    for x, y in zip(compiled.interface.outputs, outputs, strict=True):
        text = np.array2string(y, threshold=64, edgeitems=6, max_line_width=100)
        print(f"output {escaped(repr(x.name))} {x.dtype}{list(x.shape)}:\n{text}")  # the model's name, escaped
    if result["latency_s"] is not None:
        lat = result["latency_s"]
        shown = f"{lat * 1e3:.3f} ms" if lat >= 1e-3 else f"{lat * 1e6:.2f} us"
        print(f"latency: {shown} per run (device timer, median)")
    if checked:
        verdict = "bit-exact" if result["bit_exact"] else f"max abs error {result['max_abs_err']:.3g}"
        print(f"check against {checked_by}: {'OK' if ok else 'MISMATCH'} ({verdict})")
