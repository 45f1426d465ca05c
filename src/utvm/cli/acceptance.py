"""`utvm acceptance --platform P`: the board acceptance kit (docs/acceptance.md).

    utvm acceptance --platform qemu-cortex-m4
    utvm acceptance --platform serial-board --board-config board.toml --json

Builds the conformance firmware for the platform (its normal RPC firmware, a tiny model and the kit's
conformance module) and runs the checks over the platform's link, in an order where a broken port fails the
check named after what is broken first: link, registries, allocator, ndarray, recovery, timer, model, logging.
One line per check (`PASS name: what was shown`, `FAIL name: what is at fault`, `SKIP name: why not run`), then
a summary; --json prints one JSON object instead. Exit status 0 when every check passes, 7 when one fails (the
device is at fault), 6 when the firmware cannot be built.

--link-timeout S (default 5) is how long each small request of the link, packet and recovery checks may go
unanswered (a lost byte costs this long); --timeout S bounds every other call (default: the platform's).
--model FILE runs another model than TFLM's hello_world bit-exact; --seed N changes its inputs and the data of
the round trips.
"""

from __future__ import annotations

import argparse
import sys

from utvm.cli import EXIT_DEVICE, EXIT_OK
from utvm.cli import _args as A


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("acceptance", help="check a platform's port with the board acceptance kit",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--platform", default="host", type=A.platform_name,
                   help="the platform (board) to check (default: host)")
    A.add_board_config_option(p)
    p.add_argument("--json", action="store_true", help="print one JSON object instead of lines")
    p.add_argument("--model", type=A.model_file, metavar="FILE",
                   help="the model run bit-exact (default: models/tflm/hello_world_int8.tflite)")
    p.add_argument("--seed", type=A.seed, default=1, help="the model's inputs and the round trips' data (default 1)")
    p.add_argument("--link-timeout", type=A.positive_seconds, default=5.0, metavar="S",
                   help="seconds each small request of the link checks may go unanswered (default 5)")
    p.add_argument("--timeout", type=A.positive_seconds, default=None, metavar="S",
                   help="seconds every other call may take (default: the platform's)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import utvm.acceptance as kit
    from utvm.support import jsonout
    from utvm.support.text import shown

    options = kit.Options(link_timeout_s=args.link_timeout, call_timeout_s=args.timeout, seed=args.seed)

    def show(result: kit.CheckResult) -> None:
        if not args.json:  # each line as its check ends: a slow board shows where it is
            print(shown(result.line()), flush=True)

    report = kit.run_acceptance(args.platform, board_config=args.board_config, model=args.model, options=options,
                                on_result=show)
    if args.json:
        print(jsonout.dumps(report.to_json()))
    else:
        print(shown(report.summary()))
    sys.stdout.flush()
    return EXIT_OK if report.ok else EXIT_DEVICE
