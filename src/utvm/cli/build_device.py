"""`utvm build-device`: build evaluation firmware (CRT + RPC server [+ test functions]) for a platform.

    utvm build-device --platform host --with-test-functions -o PATH
        [--crt-config TVM_CRT_NAME=VALUE ...] [--source FILE.c ...] [--sanitize]

The host executable speaks the link on stdin/stdout when started with no arguments.
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
    p.add_argument("--with-test-functions", action="store_true",
                   help="link the testing.* globals (add_one, fail, log, sleep_ms)")
    p.add_argument("-o", "--output", required=True, type=A.nonempty_path,
                   help="where to write the firmware (a file, or an existing directory to write it into)")
    p.add_argument("--crt-config", action="append", default=[], metavar="NAME=VALUE", type=_config_item,
                   help="override a crt_config.h limit, e.g. TVM_CRT_MAX_PACKET_SIZE_BYTES=4096 (repeatable)")
    p.add_argument("--source", action="append", default=[], type=Path, metavar="FILE",
                   help="an extra C source to link (repeatable)")
    p.add_argument("--sanitize", action="store_true", help="build with ASan+UBSan (host only)")
    p.set_defaults(func=run)


def _config_item(item: str) -> tuple[str, str]:
    name, sep, value = item.partition("=")
    name, value = name.strip(), value.strip()
    if not sep or not re.fullmatch(r"TVM_CRT_[A-Z0-9_]+", name):
        raise argparse.ArgumentTypeError(f"{item!r}: expected TVM_CRT_NAME=VALUE")
    if not re.fullmatch(r"(0x[0-9a-fA-F]+|[0-9]+)[uUlL]*", value):
        raise argparse.ArgumentTypeError(f"{item!r}: the value must be a non-negative integer")
    return name, value


def run(args: argparse.Namespace) -> int:
    from utvm.platform import get_platform
    from utvm.support.files import check_output_file, write_file_atomic

    if args.sanitize and args.platform != "host":
        raise UsageError(f"--sanitize builds with ASan+UBSan, which only the host platform has (not {args.platform})")
    for src in args.source:
        if not src.is_file():
            raise UsageError(f"--source {src}: no such file")
    names = [name for name, _ in args.crt_config]
    for name in names:
        if names.count(name) > 1:
            raise UsageError(f"--crt-config {name} is given twice")
    given = Path(args.output)
    if not (given.is_dir() and not given.is_symlink()):
        check_output_file(given, "-o")  # before the build, not after it
    platform = get_platform(args.platform)
    kwargs = {}
    if args.sanitize:
        kwargs["sanitize"] = True
    built = Path(platform.build(with_test_functions=args.with_test_functions, crt_config=dict(args.crt_config),
                                extra_sources=args.source, **kwargs))
    out = Path(args.output)
    if out.is_dir() and not out.is_symlink():
        out = out / built.name
    executable = os.access(built, os.X_OK)
    out = write_file_atomic(out, lambda tmp: shutil.copyfile(built, tmp), "-o", mode=0o777 if executable else 0o666)
    print(out)
    return 0
