"""`utvm build-device`: build evaluation firmware (CRT + RPC server [+ test functions]) for a platform.

    utvm build-device --platform host --with-test-functions -o PATH
        [--crt-config TVM_CRT_NAME=VALUE ...] [--source FILE.c ...] [--sanitize]

The host executable speaks the link on stdin/stdout when started with no arguments.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from utvm.errors import PlatformError


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("build-device", help="build evaluation firmware (CRT + RPC server) for a platform",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--platform", default="host", help="platform name (default: host)")
    p.add_argument("--with-test-functions", action="store_true",
                   help="link the testing.* globals (add_one, fail, log, sleep_ms)")
    p.add_argument("-o", "--output", required=True, type=Path, help="where to write the firmware")
    p.add_argument("--crt-config", action="append", default=[], metavar="NAME=VALUE",
                   help="override a crt_config.h limit, e.g. TVM_CRT_MAX_PACKET_SIZE_BYTES=4096 (repeatable)")
    p.add_argument("--source", action="append", default=[], type=Path, metavar="FILE",
                   help="an extra C source to link (repeatable)")
    p.add_argument("--sanitize", action="store_true", help="build with ASan+UBSan (host only)")
    p.set_defaults(func=run)


def _parse_config(items: list[str]) -> dict[str, str]:
    config = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name or not value:
            raise PlatformError(f"--crt-config {item!r}: expected NAME=VALUE")
        config[name.strip()] = value.strip()
    return config


def run(args: argparse.Namespace) -> int:
    from utvm.platform import get_platform

    platform = get_platform(args.platform)
    kwargs = {}
    if args.sanitize:
        kwargs["sanitize"] = True
    out = platform.build(with_test_functions=args.with_test_functions, crt_config=_parse_config(args.crt_config),
                         extra_sources=args.source, output=args.output, **kwargs)
    print(out)
    return 0
