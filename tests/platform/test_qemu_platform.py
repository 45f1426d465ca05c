"""The QEMU platforms as utvm platforms: registry, RPC firmware over the emulated UART, the TVMPlatform hooks
(timer determinism, per-boot randomness, abort that reports and resets) and a clean shutdown.
The generic link tests run against this firmware too (tests/rpc/conftest.py's link_device)."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from utvm.errors import PlatformError, RemoteError, SessionTerminatedError
from utvm.platform import available_platforms, get_platform
from utvm.platform.qemu.platform import QemuPlatform
from utvm.target import get_target, platform_target

SESSION_KWARGS = {"handshake_retry_s": 0.5, "handshake_timeout_s": 20.0, "reply_timeout_s": 60.0}


def test_registered_under_six_names() -> None:
    names = {"qemu-cortex-m0": ("mps2-an385", "cortex-m0"), "qemu-cortex-m3": ("mps2-an385", "cortex-m3"),
             "qemu-cortex-m4": ("mps2-an386", "cortex-m4"), "qemu-cortex-m7": ("mps2-an500", "cortex-m7"),
             "qemu-cortex-m33": ("mps2-an505", "cortex-m33"), "qemu-cortex-m55": ("mps3-an547", "cortex-m55")}
    assert set(names) <= set(available_platforms())
    for name, (machine, target) in names.items():
        plat = get_platform(name)
        assert isinstance(plat, QemuPlatform)
        assert plat.name == name and plat.board.machine == machine
        # Code is generated for the platform's target, and every object is compiled for that CPU.
        assert platform_target(name).name == target and plat.board.cpu == get_target(target).mcpu
    with pytest.raises(PlatformError, match="abstract: use one of qemu-cortex-m0, .*qemu-cortex-m33, qemu-cortex-m55"):
        QemuPlatform()


def test_build_rejects_bad_inputs(tmp_path) -> None:
    plat = get_platform("qemu-cortex-m3")
    with pytest.raises(PlatformError, match="nope.c"):
        plat.build(extra_sources=[tmp_path / "nope.c"])
    with pytest.raises(PlatformError, match="sanitize"):
        plat.build(sanitize=True)
    with pytest.raises(PlatformError, match="TVM_CRT_MAX_ARGS"):
        plat.build(crt_config={"TVM_CRT_MAX_ARGS": "lots"})


def start(name: str):
    plat = get_platform(name)
    return plat.start(plat.build(with_test_functions=True), **SESSION_KWARGS)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["qemu-cortex-m0", "qemu-cortex-m3", "qemu-cortex-m4", "qemu-cortex-m7",
                                  "qemu-cortex-m33", "qemu-cortex-m55"])
def test_rpc_firmware(name: str, caplog: pytest.LogCaptureFixture) -> None:
    randoms = []
    sleeps = []
    for _boot in range(2):
        with start(name) as sess:
            a = sess.array(np.linspace(-3, 3, 700, dtype="float32"))
            b = sess.empty((700,), "float32")
            sess.get_function("testing.add_one")(a, b)
            np.testing.assert_array_equal(b.numpy(), np.linspace(-3, 3, 700, dtype="float32") + 1)
            with pytest.raises(RemoteError, match="as requested"):
                sess.get_function("testing.fail")("as requested")
            with caplog.at_level(logging.INFO, logger="utvm.device"):
                assert sess.get_function("testing.log")("hello from the host") == 0
            assert "hello from the host" in caplog.text
            r = sess.empty((32,), "uint8")
            sess.get_function("tvm.contrib.random.random_fill")(r)
            randoms.append(bytes(r.numpy()))
            sleeps.append(sess.time_evaluator("testing.sleep_ms", number=1, repeat=2)(3))
            transport = sess.transport
        # Shutdown ends the emulation through semihosting with status 0.
        assert transport.proc.returncode == 0
    assert randoms[0] != randoms[1], "TVMPlatformGenerateRandom must differ on every boot"
    # sleep_ms runs 3 * 10^6 instructions; under -icount that reads 3 ms (+ call overhead), identically on
    # both repeats and both boots, whatever the board's clock (25 MHz; the AN505's 20 MHz, the AN547's 32 MHz).
    assert sleeps[0] == sleeps[1]
    assert sleeps[0][0] == sleeps[0][1]
    assert 3e-3 <= sleeps[0][0] < 3e-3 + 20e-6


@pytest.mark.slow
# The AN547 boots again from its ITCM's boot table after the reset (QEMU reloads the image).
@pytest.mark.parametrize("name", ["qemu-cortex-m3", "qemu-cortex-m55"])
def test_abort_reports_over_the_link_then_resets(name: str, caplog: pytest.LogCaptureFixture) -> None:
    with start(name) as sess:
        abort = sess.get_function("testing.abort")
        with caplog.at_level(logging.INFO, logger="utvm.device"):
            with pytest.raises(SessionTerminatedError):
                abort(0x0505)
        assert "TVMPlatformAbort: error 0x00000505" in caplog.text
        # The board reset and the firmware is serving again: a new session works.
        sess.reconnect()
        assert sess.get_function("testing.log")("after the reset") == 0
