"""`utvm deploy MODEL_OR_MLF --platform qemu-cortex-m4 -o DIR`: a standalone firmware project.

    utvm deploy kws_ref_model.tflite --platform qemu-cortex-m4 -o kws_fw --unpacked-api --interface-api c
    make -C kws_fw          # arm-none-eabi-gcc + newlib: build/firmware.elf
    make -C kws_fw run      # QEMU: prints the outputs over the UART, exits with the model's status

The project is self-contained (Makefile, board support, the model's generated code, the CRT when the
convention needs it) and links no RPC server and no function registry unless --with-rpc. Its src/main.c
fills the inputs from include/utvm_samples.h (random from --seed, or --input NAME=FILE.npy), calls the model
(TVMExecute for --interface-api c, tvmgen_<m>_run otherwise), prints every output and exits with a status.
Given a model it compiles it first (same flags as `utvm compile`); an MLF (tar or directory) is used as is.
With --params external the weights are the project's src/params.bin, linked into the flash section
utvm_params; main.c validates and installs the blob before the run (TVMSetParameters) and stops on a refusal.
Replace that file with another blob of the same code (and make) to run other weights; see the README.
"""

from __future__ import annotations

import argparse
import secrets
from pathlib import Path
from typing import Any

from utvm.cli import _args as A
from utvm.cli._progress import progress_printer
from utvm.errors import UsageError


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    from utvm.cli.compile import add_compile_options

    p = subparsers.add_parser("deploy", help="write a standalone firmware project for a board",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", type=A.model_or_mlf, help="a .tflite/.onnx model or an MLF tar / directory")
    p.add_argument("--platform", default="qemu-cortex-m4", type=A.platform_name,
                   help="the board (default: qemu-cortex-m4)")
    p.add_argument("-o", "--output", required=True, type=A.nonempty_path,
                   help="directory of the project (created; if it exists it must be an empty directory)")
    p.add_argument("--with-rpc", action="store_true",
                   help="also link the RPC server and the function registry (serves RPC after printing)")
    p.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy",
                   help="a sample input from a .npy file (repeatable); others are random")
    p.add_argument("--seed", type=A.seed, help="seed of the random sample inputs (default: a fresh one, printed)")
    p.add_argument("--build", action="store_true", help="also run make in the project")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    add_compile_options(p)
    p.set_defaults(func=run)


def qemu_board_name(platform: str) -> str:
    """The platform name if it is one of the QEMU boards, else a clear error."""
    from utvm.platform.qemu.boards import BOARDS

    if platform not in BOARDS:
        raise UsageError(f"--platform {platform!r} has no standalone firmware; choose one of {', '.join(BOARDS)}")
    return platform


def load_compiled(args: argparse.Namespace, say: Any) -> Any:
    """The CompiledModel of args.model: an MLF as is, a model compiled with the compile flags in args."""
    from utvm.cli.run import load_model_or_mlf

    return load_model_or_mlf(args, say)


def sample_inputs(args: argparse.Namespace, compiled: Any, say: Any) -> tuple[list[Any], int]:
    from utvm.evaluate import read_inputs

    seed = args.seed if args.seed is not None else secrets.randbelow(2**31)
    inputs = read_inputs(compiled, args.input, seed)
    if len(inputs) > len(args.input):
        say(f"{len(inputs) - len(args.input)} random sample input(s), seed {seed}")
    return inputs, seed


def run(args: argparse.Namespace) -> int:
    from utvm.platform.qemu.boards import get_board
    from utvm.platform.qemu.deploy import generate_deploy_project
    from utvm.platform.qemu.project import build_project
    from utvm.support.files import check_output_dir, write_dir_atomic

    say = progress_printer(args.quiet)

    board = qemu_board_name(args.platform)
    out = check_output_dir(args.output, "-o")
    compiled = load_compiled(args, say)
    inputs, seed = sample_inputs(args, compiled, say)
    from utvm.support.ctext import c_comment
    from utvm.support.text import shown

    # a comment of the generated header: what was typed (a path may hold "*/" or a newline) made inert C
    note = c_comment(f"Random values (utvm deploy --seed {seed})" if not args.input
                     else "From " + ", ".join(args.input))
    say(f"writing the {board} project ({compiled.options.convention} convention) to {out}")
    if compiled.params_blob is not None:
        say(f"the weights are src/params.bin ({len(compiled.params_blob)} bytes, --params external), "
            "in the flash section utvm_params")

    def fill(tmp: Path) -> None:
        generate_deploy_project(compiled, board, tmp, inputs, with_rpc=args.with_rpc, note=note)

    write_dir_atomic(out, fill, "-o")
    if args.build:  # in place: the build records absolute paths (the CRT's dependency files)
        say("building it (make)")
        build_project(out, get_board(board))  # make; a board's instruction-set check (qemu-cortex-m0) too
    print(shown(f"wrote {out}: build with `make -C {out}`, run in QEMU with `make -C {out} run`"))
    return 0
