"""The device farm: `utvm tune --workers N`, `--farm farm.toml`, `--ray-address ADDR` (docs/tuning.md,
"Scaling out"). Candidates are built as Ray tasks on any node and measured by device actors, each owning
exactly one device; the driver (this process) plans the batches (utvm.tune.plan) and is the only writer of
the log (utvm.tune.driver's `take`).

    utvm tune kws.tflite --platform qemu-cortex-m4 --workers 2 -o kws.jsonl       # a local Ray, 2 QEMUs
    utvm tune kws.tflite --farm farm.toml --ray-address ray://head:10001 -o kws.jsonl

A farm file names groups of devices (TOML, `load_farm`):

    [[devices]]
    platform = "qemu-cortex-m4"      # emulators run on any node
    count = 4

    [[devices]]
    name = "nucleo"
    platform = "serial-board"
    board_config = "boards/nucleo.toml"        # relative to the farm file; read on the driver and the node
    resources = { "board:nucleo-f746zg" = 1 }  # the node with the board was started with this resource
    num_cpus = 0                                # CPUs reserved per device (default 0: Ray tasks build)

How it runs (`run`):

- Ray is imported only here (`import_ray`: without it, one line saying how to install it). No address: a
  local Ray is started (`ray.init()`) and shut down at the end; an address (or a Ray already initialised in
  this process) is joined and left running.
- Before anything is scheduled, the cluster's nodes are checked for the resources of every group and a CPU
  for the builds (`check_resources`): a farm that could never start fails at once with one line naming the
  group and the resource, instead of waiting on an actor no node can host.
- A device actor (`DeviceActor`) creates its platform and its sessions inside the actor, on its node. It is
  sent a firmware (the ELF's bytes, through Ray's object store) and the candidates in it, and measures them
  one call each (`Measurer.measure_candidate`), so each result comes back, and is logged, as soon as it is
  known. A device that hangs or crashes on a candidate is restarted by its actor (as the serial tuner does)
  and the candidate is measured again on another device; a candidate that took down devices STRIKES times
  is logged as an error with `error_kind` device (a resumed run tries it again). An actor that dies (its
  process killed, or stopped by the watchdog after `hang_limit(timeout)` seconds without an answer) is
  restarted by Ray (MAX_RESTARTS); the candidate it was measuring counts a strike, the ones after it are
  measured elsewhere, nothing measured is lost.
- Builds (`build_unit`: compile, code sizes, one firmware per batch) are Ray tasks of BUILD_CPUS CPUs each,
  kept one ahead of the devices; the learned strategy proposes the next batch from what has come back so
  far while the others are in flight.
- Ctrl-C, an error, or the end: the builds are cancelled, the actors killed, every device process this run
  started on this node killed by its pid (`kill_devices`: every process whose command line holds the run's
  directory), and a Ray this run started is shut down. The log holds every measurement that came back.
"""

from __future__ import annotations

import logging
import math
import os
import shutil
import socket
import tempfile
import time
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from utvm.errors import PlatformError, UsageError
from utvm.tune import log as tlog
from utvm.tune.measure import CandidateHook, Measurement, Measurer, _Candidate, one_line
from utvm.tune.plan import TaskPlan
from utvm.tune.strategy import point_key

RAY_EXTRA = "pip install 'utvm[distributed]'"
#: The largest farm file read, and the most devices a farm may have.
MAX_FARM_BYTES = 1 << 20
MAX_DEVICES = 1024
#: Times Ray restarts one device actor that died.
MAX_RESTARTS = 3
#: Device failures a candidate may cause before it is logged as an error (each on another device if there is one).
STRIKES = 2
#: CPUs of one build task (a C compiler at a time).
BUILD_CPUS = 1.0
#: Seconds between two looks at what has come back (and at the watchdog).
POLL_S = 1.0
#: Seconds to wait for an actor that is restarting to answer again before it counts as dead.
RESTART_WAIT_S = 120.0
_GROUP_KEYS = ("name", "platform", "board_config", "count", "resources", "num_cpus")


def hang_limit(timeout: float) -> float:
    """Seconds a device actor may go without an answer before the watchdog has Ray restart it: a candidate
    takes a handful of calls, each of which the session itself gives up on after `timeout`."""
    return 10.0 * timeout + 60.0


# --- configuration -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class DeviceGroup:
    """`count` devices of one platform (and board configuration), each needing `resources` of its node."""

    name: str
    platform: str
    count: int
    board_config: str | None = None
    resources: Mapping[str, float] = field(default_factory=dict)
    num_cpus: float = 0.0

    def needs(self) -> dict[str, float]:
        """What one device of the group needs of a node (Ray resources)."""
        out = dict(self.resources)
        if self.num_cpus > 0:
            out["CPU"] = self.num_cpus
        return out


@dataclass(frozen=True)
class FarmConfig:
    groups: tuple[DeviceGroup, ...]
    #: a Ray cluster to join (None: a local Ray, or the one this process has initialised)
    address: str | None = None
    #: what the farm came from, for error lines: "--workers 2", "--farm farm.toml"
    source: str = ""

    @property
    def devices(self) -> int:
        return sum(g.count for g in self.groups)

    def describe(self) -> str:
        groups = ", ".join(f"{g.count} {g.name}" for g in self.groups)
        return f"a farm of {self.devices} device(s) ({groups}) on Ray"


def import_ray(source: str) -> Any:
    """The `ray` module, or a UsageError `<source> needs Ray: pip install 'utvm[distributed]'`."""
    try:
        import ray
    except ImportError:
        raise UsageError(f"{source} needs Ray: {RAY_EXTRA}") from None
    return ray


def configure(platform: str, workers: int, farm: str | os.PathLike[str] | FarmConfig | None,
              address: str | None) -> FarmConfig:
    """The farm of a tuning run: `farm` (a FarmConfig, or a farm file: `load_farm`), else `workers` devices
    of `platform`; Ray must be importable (else one UsageError line saying how to install it)."""
    if isinstance(farm, FarmConfig):
        config = farm if address is None else FarmConfig(farm.groups, address, farm.source)
    elif farm is not None:
        if workers > 1:
            raise UsageError(f"--workers {workers} and --farm {farm}: give one (a farm file says how many devices)")
        config = load_farm(farm, address)
    else:
        config = local_farm(platform, workers, address)
    import_ray(config.source)
    return config


def local_farm(platform: str, workers: int, address: str | None = None) -> FarmConfig:
    """`workers` devices of `platform` (serial-board: of the board.toml in use)."""
    if workers > MAX_DEVICES:
        raise UsageError(f"--workers {workers}: at most {MAX_DEVICES} devices")
    board = None
    if platform == "serial-board":
        from utvm.platform.serial_board.config import active_board_config

        board = str(active_board_config().path)
    source = f"--workers {workers}" if address is None or workers > 1 else f"--ray-address {address}"
    return FarmConfig((DeviceGroup(platform, platform, workers, board),), address, source)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def load_farm(path: str | os.PathLike[str], address: str | None = None) -> FarmConfig:
    """The farm file at `path` (module docstring): `[[devices]]` tables of `platform` (required), `name`
    (default: the platform), `count` (default 1), `board_config` (serial-board: a board.toml, relative to
    the farm file), `resources` (Ray resources one device needs of its node) and `num_cpus` (CPUs reserved
    per device, default 0). Anything else is a UsageError naming the file, the table and the key."""
    from utvm.platform import available_platforms
    from utvm.support.files import read_regular_file

    p = Path(path)
    data, _st = read_regular_file(p, MAX_FARM_BYTES, lambda why: UsageError(f"farm {p}: {why}"))
    try:
        doc = tomllib.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise UsageError(f"farm {p}: not a TOML file: {one_line(exc, 200)}") from None
    extra = sorted(set(doc) - {"devices"})
    if extra:
        raise UsageError(f"farm {p}: unknown key {extra[0]!r} (a farm file holds [[devices]] tables)")
    tables = doc.get("devices")
    if not isinstance(tables, list) or not tables or not all(isinstance(t, dict) for t in tables):
        raise UsageError(f"farm {p}: no [[devices]] table (each names a platform and a count)")
    groups: list[DeviceGroup] = []
    platforms = available_platforms()
    for i, t in enumerate(tables, 1):
        where = f"farm {p}: [[devices]] {i}"
        unknown = sorted(set(t) - set(_GROUP_KEYS))
        if unknown:
            raise UsageError(f"{where}: unknown key {unknown[0]!r}; a device group has {', '.join(_GROUP_KEYS)}")
        platform = t.get("platform")
        if not isinstance(platform, str) or platform not in platforms:
            raise UsageError(f"{where}: 'platform' {platform!r} is not a platform; known: {', '.join(platforms)}")
        name = t.get("name", platform if all(x.get("platform") != platform for x in tables[:i - 1]) else
                     f"{platform}-{i}")
        if not isinstance(name, str) or not 0 < len(name) <= 64 or any(g.name == name for g in groups):
            raise UsageError(f"{where}: 'name' {name!r} must be a string of 1 to 64 characters, unique in the farm")
        count = t.get("count", 1)
        if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_DEVICES:
            raise UsageError(f"{where}: 'count' must be an integer from 1 to {MAX_DEVICES}, got {count!r}")
        board = t.get("board_config")
        if board is not None and (not isinstance(board, str) or platform != "serial-board"):
            raise UsageError(f"{where}: 'board_config' is a path, and only for platform serial-board")
        if platform == "serial-board" and board is None:
            raise UsageError(f"{where}: platform serial-board needs 'board_config' (its board.toml)")
        resources = t.get("resources", {})
        if not isinstance(resources, dict) or not all(
                isinstance(k, str) and 0 < len(k) <= 128 and k not in ("CPU", "GPU") and _number(v) and v > 0
                for k, v in resources.items()):
            raise UsageError(f"{where}: 'resources' must be a table of resource names (not CPU or GPU: num_cpus) "
                             "to amounts > 0")
        cpus = t.get("num_cpus", 0)
        if not _number(cpus) or cpus < 0:
            raise UsageError(f"{where}: 'num_cpus' must be a number >= 0, got {cpus!r}")
        board_path = None if board is None else str((p.parent / board) if not Path(board).is_absolute() else board)
        groups.append(DeviceGroup(name, platform, count, board_path, {k: float(v) for k, v in resources.items()},
                                  float(cpus)))
    if sum(g.count for g in groups) > MAX_DEVICES:
        raise UsageError(f"farm {p}: more than {MAX_DEVICES} devices")
    return FarmConfig(tuple(groups), address, f"--farm {p}")


def group_measurer(group: DeviceGroup, target: str | None, *, timeout: float = 20.0, seed: int = 0,
                   cost: str | None = None, on_candidate: CandidateHook | None = None) -> Measurer:
    """A Measurer of one device of `group` (its platform created here: on the driver, in a build task or in
    the device's actor)."""
    if group.board_config is None:
        return Measurer(group.platform, target, timeout=timeout, seed=seed, on_candidate=on_candidate, cost=cost)
    from utvm.platform import get_platform_class

    return Measurer(get_platform_class(group.platform)(group.board_config), target, timeout=timeout, seed=seed,
                    on_candidate=on_candidate, cost=cost)


def farm_measurers(config: FarmConfig, target: str | None, *, timeout: float, seed: int,
                   cost: str | None) -> list[Measurer]:
    """A Measurer per group, on the driver: the first one's target and unit every record gets, each one's
    platform name its records'. Every group must measure the same unit on the same target (a UsageError
    names the group that does not)."""
    ms = [group_measurer(g, target, timeout=timeout, seed=seed, cost=cost) for g in config.groups]
    for g, m in zip(config.groups[1:], ms[1:], strict=True):
        if (m.target, m.unit) != (ms[0].target, ms[0].unit):
            raise UsageError(f"{config.source}: device group {g.name} measures {m.unit} on {m.target}, group "
                             f"{config.groups[0].name} {ms[0].unit} on {ms[0].target}: a farm's devices must agree")
    return ms


# --- on the nodes ---------------------------------------------------------------------------------------
def kill_devices(marker: str) -> list[int]:
    """Kill (SIGKILL, by pid) every process of this machine whose command line holds `marker` (a device of
    the farm: its firmware lives in the run's directory), but this one; returns their pids."""
    import signal

    killed = []
    needle = marker.encode()
    for entry in Path("/proc").glob("[0-9]*"):
        pid = int(entry.name)
        if pid == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if needle in cmdline:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            except OSError:
                pass
    return killed


def _alive(pid: int) -> bool:
    """Is process `pid` of this machine running (not gone, not a zombie)?"""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[:1] != ["Z"]


@dataclass
class BuiltUnits:
    """What a build task returns: the candidates that failed to compile or build, and each firmware (its
    bytes) with the candidates it holds (resolved: `Measurer.resolve`)."""

    failed: list[Measurement]
    units: list[tuple[bytes, list[_Candidate]]]
    stats: dict[str, int]


def build_unit(task: Any, points: Sequence[dict], group: DeviceGroup, target: str, seed: int,
               cost: str | None) -> BuiltUnits:
    """A Ray task: compile `points` of `task` and build their firmware for `group`'s platform (the serial
    tuner's steps 1-2, `Measurer.compile`, `batches`, `build`), with each candidate's code size."""
    m = group_measurer(group, target, seed=seed, cost=cost)
    cands = m.compile(task, points)
    failed = [c for c in cands if c.error is not None]
    good = [c for c in cands if c.error is None]
    pool = m.code_sizes(task, good)
    units: list[tuple[bytes, list[_Candidate]]] = []
    try:
        for batch in m.batches(good):
            bad, groups = m.build(task, batch)
            failed += bad
            for firmware, cs in groups:
                data = Path(firmware).read_bytes()
                m.discard(Path(firmware))
                m.resolve(cs)
                units.append((data, cs))
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    return BuiltUnits([m.result_of(c) for c in failed], units, dict(m.stats))


class DeviceActor:
    """One device of the farm, in a Ray actor (module docstring): its platform and sessions are created
    here, its firmware written to `<workdir>/slot-<slot>/` of its node."""

    def __init__(self, slot: int, group: DeviceGroup, target: str, cost: str | None, timeout: float, seed: int,
                 workdir: str, on_candidate: CandidateHook | None) -> None:
        self.dir = Path(workdir) / f"slot-{slot}"
        self.error: BaseException | None = None
        self.dev: Any = None
        self.cands: dict[int, _Candidate] = {}
        self.loads = 0
        try:  # an error is raised by `ready`, where the driver reads it (Ray keeps only the text of __init__'s)
            kill_devices(f"{self.dir}{os.sep}")  # a device left by this slot's actor before Ray restarted it here
            self.dir.mkdir(parents=True, exist_ok=True)
            self.m = group_measurer(group, target, timeout=timeout, seed=seed, cost=cost, on_candidate=on_candidate)
        except Exception as exc:  # noqa: BLE001 - re-raised by ready()
            self.error = exc

    def ready(self) -> tuple[str, int]:
        """(host name, pid) of this actor, once its platform is made (else the error that prevented it)."""
        if self.error is not None:
            raise self.error
        return socket.gethostname(), os.getpid()

    def load(self, task: Any, firmware: bytes, cands: list[_Candidate]) -> None:
        """Start `firmware` (the bytes of a build's ELF) with the task's inputs uploaded."""
        self.unload()
        self.loads += 1
        path = self.dir / f"firmware-{self.loads}.elf"
        path.write_bytes(firmware)
        path.chmod(0o755)  # (the host platform's firmware is a program)
        self.dev = self.m.open_device(task, path)
        self.cands = {c.index: c for c in cands}

    def measure(self, index: int) -> tuple[Measurement, bool]:
        """Measure candidate `index` of the loaded firmware: (its Measurement, whether the device failed)."""
        if self.dev is None:
            raise PlatformError("the device actor has no firmware loaded (load it first)")
        return self.m.measure_candidate(self.dev, self.cands[index])

    def unload(self) -> None:
        """Stop the device and remove its firmware."""
        dev, self.dev = self.dev, None
        if dev is not None:
            dev.close()
        for f in self.dir.glob("firmware-*"):
            f.unlink(missing_ok=True)


# --- the driver -----------------------------------------------------------------------------------------
def _init(ray: Any, address: str | None) -> None:
    try:
        ray.init(address=address, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
    except (ConnectionError, ValueError, RuntimeError) as exc:
        where = f"the Ray cluster at {address}" if address else "a local Ray"
        raise PlatformError(f"cannot start or join {where}: {one_line(exc, 300)}") from None


def _room(node: Mapping[str, float], needs: Mapping[str, float]) -> float:
    """How many devices needing `needs` the node's resources hold."""
    if not needs:
        return math.inf
    return min(math.floor(node.get(k, 0.0) / v + 1e-9) for k, v in needs.items())


def check_resources(ray: Any, config: FarmConfig) -> None:
    """Every group's devices fit on the live nodes, and a CPU is left for the builds; else one UsageError
    line naming the group and what no node has (nothing has been scheduled yet)."""
    nodes = [n.get("Resources", {}) for n in ray.nodes() if n.get("Alive")]
    for g in config.groups:
        needs = g.needs()
        room = sum(_room(n, needs) for n in nodes)
        if room >= g.count:
            continue
        missing = [k for k, v in needs.items() if not any(n.get(k, 0.0) >= v for n in nodes)]
        what = ", ".join(f"{k} = {needs[k]:g}" for k in (missing or needs))
        why = (f"no node has {what}" if missing else f"the {len(nodes)} node(s) have room for {room:g}")
        raise UsageError(f"{config.source}: device group {g.name} needs {g.count} device(s), each with {what}; "
                         f"{why} (`ray status` lists the resources of each node)")
    cpus = sum(n.get("CPU", 0.0) for n in nodes) - sum(g.num_cpus * g.count for g in config.groups)
    if cpus < BUILD_CPUS:
        raise UsageError(f"{config.source}: no CPU is left for building candidates once the devices have theirs "
                         f"({cpus:g} of {BUILD_CPUS:g}): lower num_cpus")


@dataclass
class _Unit:
    """A firmware on its way to a device: its task, its group, its bytes (in Ray's object store) and its
    candidates; `pending`: the indices without a result yet, in the order the device measures them."""

    ti: int
    group: int
    data: Any
    cands: dict[int, _Candidate]
    avoid: set[int]
    pending: list[int] = field(default_factory=list)
    refs: dict[int, Any] = field(default_factory=dict)
    load: Any = None


@dataclass
class _Slot:
    index: int
    group: int
    handle: Any
    state: str = "starting"  # starting, free, busy, restarting, dead
    generation: int = 0
    unit: _Unit | None = None
    host: str = ""
    pid: int = 0
    since: float = 0.0
    unavailable_since: float = 0.0
    error: str = ""


class _Farm:
    def __init__(self, ray: Any, plans: list[TaskPlan], config: FarmConfig, workdir: Path, *,
                 take: Callable[[int, Any, str], None], line: Callable[[int], str], say: Callable[[str], None],
                 clock: dict[str, float], batch: int, target: str, unit: str, platform_names: list[str],
                 cost: str | None, timeout: float, seed: int, on_candidate: CandidateHook | None) -> None:
        self.ray = ray
        self.plans = plans
        self.config = config
        self.workdir = workdir
        self.take, self.line, self.say, self.clock = take, line, say, clock
        self.batch, self.target, self.unit, self.names = batch, target, unit, platform_names
        self.cost, self.timeout, self.seed, self.on_candidate = cost, timeout, seed, on_candidate
        self.slots: list[_Slot] = []
        self.outstanding: dict[Any, tuple] = {}
        self.builds = 0
        self.ready_units: list[_Unit] = []
        self.retries: list[tuple[int, dict, set[int]]] = []
        self.strikes: dict[tuple[int, str], int] = {}
        self.task_refs: dict[int, Any] = {}
        self.started_tasks: set[int] = set()
        self.stats = {"firmwares": 0, "restarts": 0, "build_failures": 0, "actor_restarts": 0}
        self.t0 = time.monotonic()

    # --- starting -------------------------------------------------------------------------------------
    def start(self) -> None:
        actor = self.ray.remote(DeviceActor)
        for gi, g in enumerate(self.config.groups):
            opts: dict[str, Any] = {"num_cpus": g.num_cpus, "max_restarts": MAX_RESTARTS, "max_task_retries": 0}
            if g.resources:
                opts["resources"] = dict(g.resources)
            for _ in range(g.count):
                index = len(self.slots)
                handle = actor.options(**opts).remote(index, g, self.target, self.cost, self.timeout, self.seed,
                                                      str(self.workdir), self.on_candidate)
                slot = _Slot(index, gi, handle)
                self.slots.append(slot)
                self._ask_ready(slot)
        self._build_fn = self.ray.remote(build_unit).options(num_cpus=BUILD_CPUS)

    def _ask_ready(self, slot: _Slot) -> None:
        self.outstanding[slot.handle.ready.remote()] = ("ready", slot.index, slot.generation, None, None)

    # --- the loop -------------------------------------------------------------------------------------
    def loop(self) -> None:
        while True:
            self._plan()
            self._dispatch()
            if not self.outstanding:
                if all(p.finished for p in self.plans) and not self.ready_units and not self.retries:
                    return
                raise PlatformError(f"{self.config.source}: no device is left to measure on")  # (never expected)
            done, _ = self.ray.wait(list(self.outstanding), num_returns=1, timeout=POLL_S)
            for ref in done:
                if ref in self.outstanding:
                    self._handle(ref, self.outstanding.pop(ref))
            self._watchdog()

    def _live(self, gi: int | None = None) -> list[_Slot]:
        return [s for s in self.slots if s.state != "dead" and (gi is None or s.group == gi)]

    def _plan(self) -> None:
        """Submit builds while fewer are coming than devices can take next (one ahead of each device)."""
        while self.builds + len(self.ready_units) < len(self._live()) + 1:
            job = self._next_job()
            if job is None:
                return
            ti, points, avoid = job
            gi = self._group_for(avoid)
            if ti not in self.task_refs:
                self.task_refs[ti] = self.ray.put(self.plans[ti].task)
            if ti not in self.started_tasks:
                self.started_tasks.add(ti)
                self.say(self.line(ti))
            ref = self._build_fn.remote(self.task_refs[ti], points, self.config.groups[gi], self.target, self.seed,
                                        self.cost)
            self.outstanding[ref] = ("build", None, 0, (ti, gi, avoid), None)
            self.builds += 1

    def _next_job(self) -> tuple[int, list[dict], set[int]] | None:
        """The next batch to build: retried candidates first (of one task, a batch at most), then the
        plans' next batch in task order."""
        if self.retries:
            ti = self.retries[0][0]
            mine = [r for r in self.retries if r[0] == ti][:self.batch]
            for r in mine:
                self.retries.remove(r)
            return ti, [p for _t, p, _a in mine], set().union(*(a for _t, _p, a in mine))
        for ti, plan in enumerate(self.plans):
            points = plan.next_batch(self.batch)
            if points:
                return ti, points, set()
        return None

    def _group_for(self, avoid: set[int]) -> int:
        """The group with the least work per live device (devices in `avoid` do not count)."""
        best, best_load = 0, math.inf
        for gi in range(len(self.config.groups)):
            live = [s for s in self._live(gi) if s.index not in avoid] or self._live(gi)
            if not live:
                continue
            queued = sum(1 for u in self.ready_units if u.group == gi)
            queued += sum(1 for v in self.outstanding.values() if v[0] == "build" and v[3][1] == gi)
            queued += sum(1 for s in live if s.unit is not None)
            load = queued / len(live)
            if load < best_load:
                best, best_load = gi, load
        return best

    def _dispatch(self) -> None:
        """Send each built firmware to a free device of its group (another than the ones it must avoid,
        unless the group has no other live one)."""
        for unit in list(self.ready_units):
            live = self._live(unit.group)
            if not live:
                name = self.config.groups[unit.group].name
                raise PlatformError(f"{self.config.source}: every device of group {name} failed (the last: "
                                    f"{self._last_error(unit.group)})")
            free = [s for s in live if s.state == "free"]
            others = [s for s in live if s.index not in unit.avoid]
            choice = [s for s in free if s.index not in unit.avoid] if others else free
            if choice:
                self.ready_units.remove(unit)
                self._send(unit, choice[0])

    def _last_error(self, gi: int) -> str:
        return next((s.error for s in self.slots if s.group == gi and s.error), "no answer")

    def _send(self, unit: _Unit, slot: _Slot) -> None:
        h, gen = slot.handle, slot.generation
        unit.load = h.load.remote(self.task_refs[unit.ti], unit.data, list(unit.cands.values()))
        self.outstanding[unit.load] = ("load", slot.index, gen, unit, None)
        unit.pending = list(unit.cands)
        unit.refs = {}
        for i in unit.pending:
            ref = h.measure.remote(i)
            unit.refs[i] = ref
            self.outstanding[ref] = ("measure", slot.index, gen, unit, i)
        self.outstanding[h.unload.remote()] = ("unload", slot.index, gen, None, None)
        slot.unit, slot.state, slot.since = unit, "busy", time.monotonic()

    # --- what comes back ------------------------------------------------------------------------------
    def _get(self, ref: Any) -> Any:
        """ray.get, an error raised by our code on the node re-raised as itself (one line, its exit status)."""
        try:
            return self.ray.get(ref)
        except self.ray.exceptions.RayTaskError as exc:
            cause = getattr(exc, "cause", None)
            if isinstance(cause, Exception):
                raise cause from None
            raise

    def _handle(self, ref: Any, entry: tuple) -> None:
        kind, si, gen, unit, index = entry
        if kind == "build":
            self.builds -= 1
            self._built(ref, *unit)
            return
        slot = self.slots[si]
        if gen != slot.generation:
            return  # a call of an earlier life of the actor: its end was handled
        errors = self.ray.exceptions
        if kind == "unload":  # (what it says matters only if the actor died)
            try:
                self.ray.get(ref)
            except (errors.RayActorError, errors.WorkerCrashedError) as exc:
                self._died(slot, exc)
            except Exception:  # noqa: BLE001 - a device that fails to close: the next load starts another
                pass
            return
        try:
            value = self._get(ref)
        except errors.ActorUnavailableError as exc:
            if kind == "ready":
                self._unavailable(slot, exc)
            else:
                self._died(slot, exc)
            return
        except (errors.RayActorError, errors.WorkerCrashedError, errors.ObjectLostError) as exc:
            if kind == "ready":
                slot.state, slot.error = "dead", _first_line(exc)
                self.say(f"device {si} ({self.config.groups[slot.group].name}) is gone: {slot.error}")
            else:
                self._died(slot, exc)
            return
        if kind == "ready":
            slot.host, slot.pid = value
            slot.state, slot.since, slot.unavailable_since = "free", time.monotonic(), 0.0
        elif kind == "load":
            slot.since = time.monotonic()
        elif kind == "measure":
            self._measured(slot, unit, index, *value)

    def _built(self, ref: Any, ti: int, gi: int, avoid: set[int]) -> None:
        out: BuiltUnits = self._get(ref)
        for k in ("firmwares", "build_failures"):
            self.stats[k] += out.stats.get(k, 0)
        for res in out.failed:
            self.take(ti, res, self.names[gi])
        for data, cands in out.units:
            self.ready_units.append(_Unit(ti, gi, self.ray.put(data), {c.index: c for c in cands}, set(avoid)))
        if not out.units:
            self._progress(ti)

    def _measured(self, slot: _Slot, unit: _Unit, index: int, res: Measurement, device_failed: bool) -> None:
        slot.since = time.monotonic()
        unit.pending.remove(index)
        if device_failed:
            self.stats["restarts"] += 1
            self._strike(unit, unit.cands[index], res, slot.index)
        else:
            self.take(unit.ti, res, self.names[unit.group])
        if not unit.pending:
            slot.unit, slot.state = None, "free"
            self._progress(unit.ti)

    def _strike(self, unit: _Unit, c: _Candidate, res: Measurement, slot: int) -> None:
        """A device failed while it measured `c`: measure it again on another device, or log `res` (an
        error of kind device) once it has failed STRIKES devices."""
        key = (unit.ti, point_key(c.schedule))
        self.strikes[key] = self.strikes.get(key, 0) + 1
        if self.strikes[key] >= STRIKES:
            self.take(unit.ti, res, self.names[unit.group])
        else:
            self.retries.append((unit.ti, dict(c.schedule), unit.avoid | {slot}))

    def _progress(self, ti: int) -> None:
        self.clock["seconds"] = time.monotonic() - self.t0
        self.say(self.line(ti))

    def _unavailable(self, slot: _Slot, exc: BaseException) -> None:
        """The actor is restarting: ask again (for RESTART_WAIT_S at most)."""
        now = time.monotonic()
        slot.unavailable_since = slot.unavailable_since or now
        if now - slot.unavailable_since > RESTART_WAIT_S:
            slot.state, slot.error = "dead", _first_line(exc)
            return
        time.sleep(0.2)
        self._ask_ready(slot)

    def _died(self, slot: _Slot, exc: BaseException) -> None:
        """The actor died (Ray restarts it): what came back before it counts; the candidate it was measuring
        gets a strike; the others of its firmware go to other devices."""
        unit = slot.unit
        if unit is not None:
            loaded = self._settle(unit, slot.index)
            if unit.pending:
                first = unit.pending.pop(0)
                if loaded:
                    why = (f"the device's worker died while it measured the candidate ({_first_line(exc)}); it was "
                           "restarted")
                    c = unit.cands[first]
                    self._strike(unit, c, Measurement(dict(c.schedule), None, self.unit, why,
                                                      error_kind=tlog.ERROR_DEVICE), slot.index)
                else:
                    unit.pending.insert(0, first)
                for i in unit.pending:
                    self.retries.append((unit.ti, dict(unit.cands[i].schedule), unit.avoid | {slot.index}))
                unit.pending = []
        slot.generation += 1
        slot.unit, slot.state = None, "restarting"
        slot.error = _first_line(exc)
        for ref in [r for r, v in self.outstanding.items() if v[0] != "build" and v[1] == slot.index]:
            del self.outstanding[ref]
        if slot.host == socket.gethostname():
            kill_devices(f"{self.workdir / f'slot-{slot.index}'}{os.sep}")  # its device, left without a parent
        self.stats["actor_restarts"] += 1
        self.say(f"device {slot.index} ({self.config.groups[slot.group].name}) failed and is restarted: "
                 f"{slot.error}")
        self._ask_ready(slot)

    def _settle(self, unit: _Unit, slot: int) -> bool:
        """Take the results of `unit` that came back before its actor died (in order, up to the first that
        did not); returns whether its firmware had been started."""
        wait = self.ray.wait
        loaded = False
        ready, _ = wait([unit.load], timeout=0)
        if ready:
            try:
                self.ray.get(unit.load)
                loaded = True
            except Exception:  # noqa: BLE001 - it died starting the firmware
                return False
        while unit.pending:
            i = unit.pending[0]
            ready, _ = wait([unit.refs[i]], timeout=0)
            if not ready:
                break
            try:
                res, device_failed = self._get(unit.refs[i])
            except self.ray.exceptions.RayError:
                break
            unit.pending.pop(0)
            if device_failed:
                self.stats["restarts"] += 1
                self._strike(unit, unit.cands[i], res, slot)
            else:
                self.take(unit.ti, res, self.names[unit.group])
        return loaded

    def _watchdog(self) -> None:
        """Have Ray restart an actor that has not answered for hang_limit(timeout) seconds."""
        now = time.monotonic()
        for s in self.slots:
            if s.state == "busy" and now - s.since > hang_limit(self.timeout):
                self.say(f"device {s.index} has not answered for {now - s.since:.0f} s: restarting it")
                s.since = now
                self.ray.kill(s.handle, no_restart=False)

    # --- stopping -------------------------------------------------------------------------------------
    def stop(self, graceful: bool) -> None:
        """Cancel the builds, stop every device (gracefully after a finished run: its actor closes it; else
        at once), kill the actors and then, by pid, every device process of this run left on this node."""
        ray = self.ray
        if graceful:
            unloads = [r for r, v in self.outstanding.items() if v[0] == "unload"]
            if unloads:
                ray.wait(unloads, num_returns=len(unloads), timeout=10.0)
        for ref, v in list(self.outstanding.items()):
            if v[0] == "build":
                _quietly(lambda ref=ref: ray.cancel(ref, force=True))
        for s in self.slots:
            _quietly(lambda s=s: ray.kill(s.handle, no_restart=True))
        here = socket.gethostname()
        deadline = time.monotonic() + 5.0
        for s in self.slots:
            while s.host == here and s.pid and _alive(s.pid) and time.monotonic() < deadline:
                time.sleep(0.05)
        kill_devices(f"{self.workdir}{os.sep}")


def _quietly(fn: Callable[[], Any]) -> None:
    try:
        fn()
    except Exception:  # noqa: BLE001 - stopping goes on whatever one step says
        pass


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return one_line(text[0] if text else type(exc).__name__, 200)


def run(plans: list[TaskPlan], config: FarmConfig, *, take: Callable[[int, Any, str], None],
        line: Callable[[int], str], say: Callable[[str], None], clock: dict[str, float], batch: int, target: str,
        unit: str, platform_names: list[str], cost: str | None, timeout: float, seed: int,
        on_candidate: CandidateHook | None) -> dict[str, int]:
    """Measure what `plans` propose on the farm `config` (module docstring); `take(task index, measurement,
    platform name)` logs each result (`platform_names`: each group's, as `farm_measurers` gives them),
    `line(task index)` is its progress line. Returns the run's stats."""
    ray = import_ray(config.source)
    started = False
    workdir: Path | None = None
    farm = None
    finished = False
    try:
        if not ray.is_initialized():
            started = True  # (a Ray interrupted while it starts is shut down too)
            _init(ray, config.address)
        workdir = Path(tempfile.mkdtemp(prefix="utvm-farm-"))
        check_resources(ray, config)
        farm = _Farm(ray, plans, config, workdir, take=take, line=line, say=say, clock=clock, batch=batch,
                     target=target, unit=unit, platform_names=platform_names, cost=cost, timeout=timeout, seed=seed,
                     on_candidate=on_candidate)
        farm.start()
        farm.loop()
        finished = True
        return farm.stats
    finally:
        try:
            if farm is not None:
                farm.stop(graceful=finished)
        finally:
            if started:
                _quietly(ray.shutdown)
            if workdir is not None:
                shutil.rmtree(workdir, ignore_errors=True)


__all__ = ["BuiltUnits", "DeviceActor", "DeviceGroup", "FarmConfig", "build_unit", "check_resources", "configure",
           "farm_measurers", "group_measurer", "import_ray", "kill_devices", "load_farm", "local_farm", "run"]
