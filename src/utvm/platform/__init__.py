"""Platforms: where evaluation firmware is built and run (docs/architecture.md §9).

A platform turns the CRT + the RPC server + optional extra C sources (test functions, a generated system
library) into firmware, starts it, and opens an RPC session to it. Every platform offers the same two
calls (the `Platform` protocol):

    plat = get_platform("host")
    firmware = plat.build(with_test_functions=True, crt_config={...}, extra_sources=..., system_lib_sources=...)
    with plat.start(firmware) as sess:          # a connected utvm.rpc.Session
        sess.get_function("testing.add_one")

Platforms are found by name: the built-ins below, then the entry-point group ``utvm.platforms`` (a
plugin package declares ``[project.entry-points."utvm.platforms"] myboard = "pkg.mod:MyPlatform"``).
Names are case-sensitive; an unknown name raises PlatformError listing the known ones.
"""

from __future__ import annotations

import importlib
import shutil
from collections.abc import Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from utvm.errors import PlatformError

ENTRY_POINT_GROUP = "utvm.platforms"

#: Platforms shipped with utvm: name -> "module:attribute" of the platform class.
BUILTIN_PLATFORMS: dict[str, str] = {
    "host": "utvm.platform.host:HostPlatform",
    # Cortex-M0 code (Armv6-M, proven so on every build) on the AN385's Cortex-M3: QEMU has no M0 machine.
    "qemu-cortex-m0": "utvm.platform.qemu.platform:QemuCortexM0Platform",
    "qemu-cortex-m3": "utvm.platform.qemu.platform:QemuCortexM3Platform",
    "qemu-cortex-m4": "utvm.platform.qemu.platform:QemuCortexM4Platform",
    "qemu-cortex-m7": "utvm.platform.qemu.platform:QemuCortexM7Platform",
    "qemu-cortex-m33": "utvm.platform.qemu.platform:QemuCortexM33Platform",
    "qemu-cortex-m55": "utvm.platform.qemu.platform:QemuCortexM55Platform",
    # A real board described by a board.toml (--board-config / $UTVM_BOARD_CONFIG), over its serial port.
    "serial-board": "utvm.platform.serial_board.platform:SerialBoardPlatform",
}


@runtime_checkable
class Platform(Protocol):
    """What every platform class provides (instances are cheap; construct with no arguments)."""

    name: str
    # Optional: `target`, the CPU (utvm.target) the platform's firmware runs on; code is generated for it.
    # A plugin without one gets portable C (the `host` target).

    def build(
        self,
        *,
        with_test_functions: bool = True,
        crt_config: Mapping[str, int] | None = None,
        extra_sources: Sequence[Path] = (),
        system_lib_sources: Sequence[Path] = (),
        output: Path | None = None,
    ) -> Path:
        """Build evaluation firmware (CRT + RPC server [+ test functions] [+ sources]); return its path.

        Optional keyword of the built-in platforms: `crt_config_file`, a user's crt_config.h
        (utvm's or upstream microTVM's) used as the base configuration (utvm.crt_config).
        """
        ...

    def start(self, firmware: Path, **session_kwargs: Any) -> Any:
        """Start `firmware` and return a connected utvm.rpc.Session (closing it stops the firmware)."""
        ...


def deliver(built: Path, output: Path | str | None) -> Path:
    """A platform build's result where the caller asked for it: `built` itself when `output` is None, else a
    copy at `output` (into it, under the same name, when it is a directory)."""
    if output is None:
        return built
    out = Path(output)
    if out.is_dir():
        out = out / built.name
    out.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(built, out)
    return out


def _load(spec: str, name: str) -> type:
    module_name, _, attr = spec.partition(":")
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise PlatformError(f"platform {name!r}: cannot load {spec!r}: {exc}") from exc


def _entry_points() -> dict[str, metadata.EntryPoint]:
    return {ep.name: ep for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)}


def available_platforms() -> list[str]:
    """Names of every platform: built-ins and installed plugins."""
    return sorted(set(BUILTIN_PLATFORMS) | set(_entry_points()))


def get_platform_class(name: str) -> type:
    """The platform class registered under `name`."""
    if name in BUILTIN_PLATFORMS:
        return _load(BUILTIN_PLATFORMS[name], name)
    eps = _entry_points()
    if name in eps:
        try:
            return eps[name].load()
        except Exception as exc:  # a broken plugin must name itself, not crash the caller
            raise PlatformError(f"platform {name!r}: entry point {eps[name].value!r} failed to load: {exc}") from exc
    raise PlatformError(f"unknown platform {name!r}; known platforms: {', '.join(available_platforms())}")


def get_platform(name: str) -> Platform:
    """An instance of the platform registered under `name`."""
    return get_platform_class(name)()
