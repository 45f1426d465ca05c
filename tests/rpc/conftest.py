"""Fixtures of the link tests: the shared byte vectors, and `link_device`, a connected Session per platform.

`link_device` is parametrised by platform name; each platform has a starter in `PLATFORM_STARTERS` that
returns a connected `utvm.rpc.Session` to a device built with the test functions (testing.add_one, fail,
log, sleep_ms) and TVM_CRT_MAX_PACKET_SIZE_BYTES = 2048. Platforms that need an emulator add their starter
(and their name to LINK_PLATFORMS) here, marked slow.
"""

from __future__ import annotations

import functools
import json
import math
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from utvm.rpc import Session
from utvm.rpc.transport import SubprocessTransport, Transport

VECTORS = Path(__file__).resolve().parent.parent / "vectors"
FAKE_DEVICE = Path(__file__).resolve().parent / "fake_device.py"

# Timeouts of the end-to-end sessions: generous for a loaded 2-core machine, small enough to fail fast.
E2E_SESSION_KWARGS: dict[str, Any] = {
    "handshake_retry_s": 0.5,
    "handshake_timeout_s": 20.0,
    "reply_timeout_s": 30.0,
}


def load_vectors(name: str) -> dict[str, Any]:
    return json.loads((VECTORS / f"{name}.json").read_text())


@pytest.fixture(scope="session")
def framing_vectors() -> dict[str, Any]:
    return load_vectors("framing")


@pytest.fixture(scope="session")
def session_vectors() -> dict[str, Any]:
    return load_vectors("session")


@pytest.fixture(scope="session")
def rpc_vectors() -> dict[str, Any]:
    return load_vectors("rpc")


def host_device_path() -> Path:
    """The host device executable with the test functions (built once, cached by utvm.support.cc)."""
    from utvm.platform.host import build_device

    return Path(build_device(with_test_functions=True))


def fake_device_argv(max_packet_size: int = 2048) -> list[str]:
    return [sys.executable, str(FAKE_DEVICE), "--max-packet-size", str(max_packet_size)]


def start_host(wrap: Callable[[Transport], Transport] | None = None, **kwargs: Any) -> Session:
    """A session to a fresh host device; `wrap` may interpose a transport (fault injection, recording)."""
    transport = SubprocessTransport([host_device_path()])
    try:
        return Session(wrap(transport) if wrap else transport, **{**E2E_SESSION_KWARGS, **kwargs})
    except BaseException:
        transport.close(timeout=0.5)
        raise


# name -> starter(wrap=None, **session_kwargs) -> Session. Each starter leaves `session.transport` (or its
# `.inner` when wrapped) with a kill() that makes the device vanish as if it crashed.
def start_qemu(platform_name: str, wrap: Callable[[Transport], Transport] | None = None, **kwargs: Any) -> Session:
    """A session to the QEMU platform's RPC firmware (built once, cached by content) over its emulated UART."""
    from utvm.platform import get_platform
    from utvm.platform.qemu.platform import QemuTransport

    plat = get_platform(platform_name)
    transport = QemuTransport(plat.board, plat.build(with_test_functions=True))  # has kill() and proc
    try:
        return Session(wrap(transport) if wrap else transport, **{**E2E_SESSION_KWARGS, **kwargs})
    except BaseException:
        transport.close(timeout=0.0)
        raise


PLATFORM_STARTERS: dict[str, Callable[..., Session]] = {"host": start_host}
LINK_PLATFORMS = [pytest.param("host", id="host")]

# The same link tests against the Cortex-M firmware in QEMU (marked slow). The emulated UART takes about
# 30 KB/s towards the device and the boards have 4 MiB of RAM, so tests moving more than
# QEMU_MAX_TENSOR_BYTES in one tensor run on the host platform only (deselected below, by their size).
QEMU_LINK_PLATFORMS = ("qemu-cortex-m3", "qemu-cortex-m4")
QEMU_MAX_TENSOR_BYTES = 256 * 1024
QEMU_HOST_ONLY_TESTS = {"test_add_one_16_mib": 16 << 20}  # test -> bytes of its tensor
for _name in QEMU_LINK_PLATFORMS:
    PLATFORM_STARTERS[_name] = functools.partial(start_qemu, _name)
    LINK_PLATFORMS.append(pytest.param(_name, id=_name, marks=pytest.mark.slow))


def _tensor_bytes(item: pytest.Item) -> int:
    callspec = getattr(item, "callspec", None)
    shape = callspec.params.get("shape") if callspec else None
    if shape is not None:
        return 4 * math.prod(shape)  # float32 tensors
    return QEMU_HOST_ONLY_TESTS.get(getattr(item, "originalname", item.name), 0)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect QEMU runs of link tests whose tensors exceed what the emulated board can take."""
    keep, drop = [], []
    for item in items:
        callspec = getattr(item, "callspec", None)
        platform = callspec.params.get("link_device", callspec.params.get("link_starter")) if callspec else None
        if platform in QEMU_LINK_PLATFORMS and _tensor_bytes(item) > QEMU_MAX_TENSOR_BYTES:
            drop.append(item)
        else:
            keep.append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


@pytest.fixture(scope="session")
def _host_device_built() -> None:
    host_device_path()  # build (or find in the cache) before any timed step


@pytest.fixture(params=LINK_PLATFORMS)
def link_device(request: pytest.FixtureRequest, _host_device_built: None) -> Iterator[Session]:
    """A Session connected to a fresh device of the platform; closed (device shut down) afterwards."""
    sess = PLATFORM_STARTERS[request.param]()
    try:
        yield sess
    finally:
        sess.close()


@pytest.fixture(params=LINK_PLATFORMS)
def link_starter(request: pytest.FixtureRequest, _host_device_built: None) -> Callable[..., Session]:
    """For tests that start (wrap, kill, restart) devices themselves: the platform's starter."""
    return PLATFORM_STARTERS[request.param]
