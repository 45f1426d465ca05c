"""`utvm tune MODEL --platform P -o LOG.jsonl`: search operator schedules by timing candidates on a device.

    utvm tune kws_ref_model.tflite --platform qemu-cortex-m4 --rounding double -o kws.jsonl
    utvm compile kws_ref_model.tflite --target cortex-m4 --rounding double --tuning-log kws.jsonl
    utvm tune --summary kws.jsonl
    utvm tune --summary kws.jsonl kws_ref_model.tflite --target cortex-m4 --rounding double

The model's tasks (distinct workloads of kernels with a schedule space) are tuned one after another: the
kernel's default point first, then the strategy's proposals, --batch candidates per evaluation firmware,
until --trials points of the task are measured. Each candidate's output is checked bit-exact against the
reference before it is timed with the device's time evaluator; a wrong candidate, one that fails to build,
or one that hangs (--timeout) or crashes the device is logged with its error and never chosen (the device
is restarted and tuning goes on). --cost says what is minimised: `cycles` (estimated by the platform's
timing model of its core; the default on QEMU boards that have one) or `instructions` (QEMU under -icount;
the default on the others); off QEMU, seconds. Each record also holds the candidate's code, weights and
scratch bytes.

Every measured candidate is appended to LOG at once (JSON lines; an existing log is appended to, never
replaced): Ctrl-C keeps what was measured, and running the same command again resumes, skipping every (task,
schedule) already in the log but those whose error was the device's (error_kind device: measured again). An
existing LOG must be empty or a tuning log (every line a record): any other file is refused (exit 2) before
any work and left as it is. Progress goes to stderr, one line per batch; the table of default vs best per task
(best within the budgets per task) and the whole-model choice within --max-flash-growth and --max-ram-growth
(what `--tuning-log` will apply) go to stdout. Apply the log with `--tuning-log LOG` on compile, run, deploy
or size, with the same --target (or --platform) and --rounding: task keys include both.

Strategies: grid (every legal point in order), random (seeded sampling), model (a learned cost model,
gradient-boosted trees on the knobs; needs `pip install 'utvm[tune]'`), auto (the default: model when
scikit-learn is installed, else random; the first progress line says which).

Scaling out (needs `pip install 'utvm[distributed]'`, Ray): --workers N measures on N devices of --platform at
once, each in a Ray actor, the candidates' firmware built as Ray tasks in parallel; --ray-address ADDR joins a
Ray cluster instead of starting a local one; --farm farm.toml names the devices (groups of a platform, a
board.toml, a count and the Ray resources of the node each needs; docs/tuning.md, "Scaling out"). Only this
process writes LOG; with the grid and random strategies it ends up holding the records serial tuning writes.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from utvm.cli import _args as A
from utvm.cli._progress import progress_printer
from utvm.errors import UsageError


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    from utvm.tune.driver import DEFAULT_BATCH, DEFAULT_STRATEGY, DEFAULT_TIMEOUT_S, DEFAULT_TRIALS
    from utvm.tune.measure import COSTS
    from utvm.tune.strategy import AUTO, STRATEGIES

    p = subparsers.add_parser("tune", help="tune operator schedules on a device (writes a tuning log)",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", nargs="?", type=A.model_file, help="a .tflite or .onnx model")
    p.add_argument("--platform", default="host", type=A.platform_name, help="where to measure (default: host)")
    A.add_board_config_option(p)
    p.add_argument("-o", "--output", metavar="LOG.jsonl", type=A.nonempty_path,
                   help="the tuning log to append to (created if missing)")
    p.add_argument("--trials", type=A.positive_int, default=DEFAULT_TRIALS,
                   help=f"points measured per task, the default point included (default: {DEFAULT_TRIALS}; "
                        "fewer when a space has fewer legal points)")
    p.add_argument("--strategy", choices=(AUTO, *STRATEGIES), default=DEFAULT_STRATEGY,
                   help="how to choose candidates: grid, random, model (a learned cost model; needs the `tune` "
                        "extra) or auto (model when it is installed, else random; the default)")
    p.add_argument("--batch", type=A.positive_int, default=DEFAULT_BATCH,
                   help=f"candidates per evaluation firmware (default: {DEFAULT_BATCH})")
    p.add_argument("--timeout", type=A.positive_seconds, default=DEFAULT_TIMEOUT_S, metavar="S",
                   help=f"seconds a call on the device may take before the candidate counts as hung "
                        f"(default: {DEFAULT_TIMEOUT_S:g})")
    p.add_argument("--seed", type=A.seed, default=0, help="seed of the search and of the check inputs (default 0)")
    p.add_argument("--target", type=A.target_name, default=None,
                   help="the CPU to generate code for (default: the platform's target)")
    p.add_argument("--rounding", default="single", choices=("single", "double"),
                   help="requantization rounding the model will be compiled with (part of every task key)")
    p.add_argument("--cost", choices=tuple(COSTS), default=None,
                   help="what to minimise: cycles (estimated by the platform's timing model; the default where "
                        "it has one) or instructions (QEMU; the default elsewhere on QEMU); off QEMU, seconds. "
                        "With --summary: the records of that cost only")
    p.add_argument("--summary", metavar="LOG.jsonl", type=A.nonempty_path, default=None,
                   help="print the default vs best cost of every task in LOG and exit (no tuning); with a MODEL, "
                        "also the whole-model choice within the budgets")
    p.add_argument("--workers", type=A.positive_int, default=1, metavar="N",
                   help="devices of --platform measuring at once, on Ray (default 1: no Ray; needs the "
                        "`distributed` extra)")
    p.add_argument("--ray-address", metavar="ADDR", default=None,
                   help="a Ray cluster to join (default: start a local Ray when --workers > 1 or --farm)")
    p.add_argument("--farm", metavar="FARM.toml", type=A.nonempty_path, default=None,
                   help="the devices to measure on (platforms, counts, board configs, node resources), instead of "
                        "--platform and --workers")
    A.add_budget_options(p)
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    p.set_defaults(func=run)


def _budgets(args: argparse.Namespace):  # noqa: ANN202 - utvm.tune.log.Budgets
    from utvm.tune.log import Budgets

    return Budgets(args.max_code_growth, args.max_flash_growth, args.max_ram_growth)


def _target(args: argparse.Namespace) -> str:
    from utvm.target import get_target, platform_target

    cpu = platform_target(args.platform)
    target = get_target(args.target) if args.target else cpu
    reason = target.runs_on(cpu)
    if reason:
        raise UsageError(f"--target {target.name}: {reason} (platform {args.platform})")
    return target.name


def _print_choice(args: argparse.Namespace, model: Path, records: list, target: str, unit: str | None) -> None:
    """The whole-model choice of `records` for `model` within the budget flags (utvm.tune.budget)."""
    from utvm.support.text import shown
    from utvm.tune.budget import choose_for_model, format_choice

    choice = choose_for_model(model, records, target, args.rounding, _budgets(args), unit=unit,
                              name=f"tuning log {args.summary or args.output}")
    if choice.tasks:
        print(format_choice(choice))
    else:
        print(shown(f"whole-model choice: no usable record of this model's tasks on {target}"
                    + (f" in {unit}" if unit else "") + ": every task keeps its default schedule"))


def run(args: argparse.Namespace) -> int:
    from utvm.compiler.schedule import describe_workload
    from utvm.tune import log as tlog
    from utvm.tune.driver import format_summary
    from utvm.tune.measure import COSTS

    if args.summary is not None:
        if args.output is not None:
            raise UsageError("--summary LOG prints a log: give no -o with it (a MODEL adds the whole-model choice)")
        target = _target(args) if args.model is not None else ""
        contents = tlog.load(args.summary)
        contents.report()
        b = _budgets(args)
        unit = COSTS[args.cost] if args.cost else None
        print(format_summary(tlog.summarize(contents.records, describe_workload, b.code, max_flash_growth=b.flash,
                                            max_ram_growth=b.ram, unit=unit)))
        if args.model is not None:
            _print_choice(args, Path(args.model), contents.records, target, unit)
        return 0
    if args.model is None:
        raise UsageError("give a MODEL to tune (or --summary LOG to print a tuning log)")
    if args.output is None:
        raise UsageError("-o LOG.jsonl is required: the tuning log to append to")
    return _tune(args)


def _tune(args: argparse.Namespace) -> int:
    from utvm.support.files import check_output_file
    from utvm.support.text import shown
    from utvm.target import get_target
    from utvm.tune import log as tlog
    from utvm.tune.driver import format_duration, format_summary, tune
    from utvm.tune.strategy import check_strategy

    out = check_output_file(args.output, "-o", A.input_paths(args))
    model = Path(args.model)  # an existing, readable regular file (A.model_file)
    farm = None
    if args.workers > 1 or args.farm is not None or args.ray_address is not None:
        from utvm.tune.farm import configure

        if args.ray_address is not None and not args.ray_address.strip():
            raise UsageError("--ray-address: give the address of a Ray cluster (e.g. ray://head:10001)")
        # (Ray is checked for before any work: without it, one line saying how to install it)
        farm = configure(args.platform, args.workers, args.farm, args.ray_address)
        args.platform = farm.groups[0].platform  # the farm names the platforms
    target = get_target(_target(args))
    check_strategy(args.strategy)  # a missing optional dependency fails before any work
    say = progress_printer(args.quiet)
    result = tune(model, out, args.platform, target=target.name, rounding=args.rounding, trials=args.trials,
                  strategy=args.strategy, batch=args.batch, timeout=args.timeout, seed=args.seed, progress=say,
                  max_code_growth=args.max_code_growth, max_flash_growth=args.max_flash_growth,
                  max_ram_growth=args.max_ram_growth, cost=args.cost, farm=farm)
    if not result.tasks:
        print(shown(f"no operator of {model} has a schedule space on {target.name}: nothing to tune"))
        return 0
    print(format_summary(result.summaries))
    _print_choice(args, model, tlog.read(out), target.name, result.unit)
    print(shown(f"measured {result.measured} candidate(s) in {format_duration(result.seconds)}"
                + (f", {result.resumed} already in the log" if result.resumed else "")
                + f"; log {out}"))
    print(shown(f"apply it: utvm compile {model} --target {target.name} --rounding {args.rounding} "
                f"--tuning-log {out}"))
    return 0
