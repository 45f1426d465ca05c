"""Fixtures of the link tests: the shared byte vectors, and `link_device`, a connected Session per platform.

`link_device` is parametrised by platform name; each platform has a starter in `PLATFORM_STARTERS` that
returns a connected `utvm.rpc.Session` to a device built with the test functions (testing.add_one, fail,
log, sleep_ms) and TVM_CRT_MAX_PACKET_SIZE_BYTES = 2048. Platforms that need an emulator add their starter
(and their name to LINK_PLATFORMS) here, marked slow.
"""

from __future__ import annotations

import json
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
PLATFORM_STARTERS: dict[str, Callable[..., Session]] = {"host": start_host}
LINK_PLATFORMS = [pytest.param("host", id="host")]


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
