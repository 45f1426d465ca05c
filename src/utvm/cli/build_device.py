"""`utvm build-device`: build evaluation firmware (CRT + RPC server [+ test functions]) for a platform.

    utvm build-device --platform host --with-test-functions -o PATH
        [--crt-config TVM_CRT_NAME=VALUE ...] [--crt-config-file crt_config.h] [--sanitize]
        [--extra-source FILE.c ...] [-I DIR ...] [--model [NAME=]MODEL_OR_MLF ...]

The host executable speaks the link on stdin/stdout when started with no arguments.

--extra-source FILE.c (also --source) compiles the user's C into the firmware, with the firmware's own
warning flags; a `void utvm_user_init(void)` in it runs once at boot, before RPC is served, and may
TVMFuncRegisterGlobal functions the host then calls as session.get_function(name). -I DIR adds a header
directory. --model (repeatable) links models as system libraries: a .tflite/.onnx compiled with the default
flags for the platform (NAME, default the file's stem, is its model name), or an MLF from `utvm compile`
(its own name); on the host, session.system_lib(NAME) returns a model's module, session.system_lib() the
first. Two models of one name are a usage error. --custom-op binds a user operator of the --model files
(docs/custom_ops.md): without a model file to use it, or unused by every one, it is refused.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
from pathlib import Path

from utvm.cli import _args as A
from utvm.errors import UsageError


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("build-device", help="build evaluation firmware (CRT + RPC server) for a platform",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--platform", default="host", type=A.platform_name, help="platform name (default: host)")
    A.add_board_config_option(p)
    p.add_argument("--with-test-functions", action="store_true",
                   help="link the testing.* globals (add_one, fail, log, sleep_ms)")
    p.add_argument("-o", "--output", required=True, type=A.nonempty_path,
                   help="where to write the firmware (a file, or an existing directory to write it into)")
    A.add_crt_config_options(p)
    A.add_user_code_options(p, "--source")
    p.add_argument("--model", action="append", default=[], metavar="[NAME=]MODEL", type=A.nonempty_path,
                   help="link a model (.tflite/.onnx, or an MLF) as a named system library (repeatable)")
    p.add_argument("--custom-op", action="append", default=[], metavar="NAME=FILE.c:symbol", type=A.custom_op,
                   help="a user operator of the --model files (docs/custom_ops.md; repeatable)")
    p.add_argument("--sanitize", action="store_true", help="build with ASan+UBSan (host only)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from utvm.platform import get_platform
    from utvm.support.files import check_output_file, write_file_atomic

    if args.sanitize and args.platform != "host":
        raise UsageError(f"--sanitize builds with ASan+UBSan, which only the host platform has (not {args.platform})")
    from utvm.cli.compile import bind_custom_ops

    if args.custom_op and not args.model:  # else the binding would be ignored
        raise UsageError("--custom-op binds an operator of a --model file; no --model is given")
    bind_custom_ops(args)  # before the --model files are compiled
    given = Path(args.output)
    if not (given.is_dir() and not given.is_symlink()):
        check_output_file(given, "-o", A.input_paths(args))  # before the build, not after it
    platform = get_platform(args.platform)
    kwargs: dict[str, object] = {}
    if args.sanitize:
        kwargs["sanitize"] = True
    if args.crt_config_file is not None:
        kwargs["crt_config_file"] = Path(args.crt_config_file)
    if args.include_dir:
        kwargs["include_dirs"] = [Path(d) for d in args.include_dir]
    sources = [Path(s) for s in args.extra_source]
    if args.model:
        from utvm.evaluate import build_firmware

        models = _load_models(args.model, args.platform, bool(args.custom_op))
        built = Path(build_firmware(models, args.platform, with_test_functions=args.with_test_functions,
                                    crt_config=dict(args.crt_config), extra_sources=sources, **kwargs))
    else:
        built = Path(platform.build(with_test_functions=args.with_test_functions, crt_config=dict(args.crt_config),
                                    extra_sources=sources, **kwargs))
    out = Path(args.output)
    if out.is_dir() and not out.is_symlink():
        out = out / built.name
    executable = os.access(built, os.X_OK)
    out = write_file_atomic(out, lambda tmp: shutil.copyfile(built, tmp), "-o", mode=0o777 if executable else 0o666)
    print(out)
    return 0


def _load_models(specs: list[str], platform: str, custom_ops_given: bool = False) -> list[object]:
    """The CompiledModels of --model [NAME=]FILE: an MLF as it is, a model file compiled with the default
    flags for `platform` under NAME (default: its file stem made a C identifier). With `custom_ops_given`,
    every --custom-op must be an operator of a model file compiled here (an MLF carries its own C)."""
    from utvm.cli import _args as A
    from utvm.cli.compile import add_compile_options, compile_from_args
    from utvm.evaluate import is_mlf

    models = []
    graphs = []  # of the model files compiled here
    for spec in specs:
        name, sep, file = spec.partition("=")
        if not sep or Path(spec).exists():  # a file whose name holds '='
            name, file = "", spec
        path = Path(file)
        if not path.exists():
            raise UsageError(f"--model {file}: no such model or MLF")
        if is_mlf(path):
            if name:
                raise UsageError(f"--model {spec}: an MLF keeps the name it was compiled with; give it without NAME=")
            from utvm import mlf

            models.append(mlf.load(path))
            continue
        name = name or re.sub(r"[^A-Za-z0-9_]", "_", path.stem)
        if not re.match(r"[A-Za-z_]", name):
            name = f"m_{name}"
        try:
            A.model_name(name)
        except argparse.ArgumentTypeError as exc:
            raise UsageError(f"--model {spec}: model name {name!r}: {exc}") from None
        flags = argparse.ArgumentParser(add_help=False)
        add_compile_options(flags)  # every compile flag at its default
        defaults = flags.parse_args([])
        defaults.model_name, defaults.platform = name, platform
        models.append(compile_from_args(defaults, path))
        graphs.append(models[-1].source_graph)
    if custom_ops_given:
        from utvm import custom_ops

        if not graphs:
            raise UsageError("--custom-op: every --model is an MLF, which carries the C of its user operators "
                             "already; give the model file to bind an operator")
        custom_ops.check_all_used(*graphs)  # a binding no model uses is never silently ignored
    names = [m.model_name for m in models]
    for n in names:
        if names.count(n) > 1:
            raise UsageError(f"--model: two models are named {n!r}; name them apart with --model NAME=FILE")
    return models
