"""End to end: the Python client against the real C device (utvm.platform.host, built with the test
functions and 2 KiB packets), through `link_device` / `link_starter` of conftest.py (one run per platform).

Covers add-one from 1 element to 16 MiB through the 2 KiB packet limit (bit-exact), the time evaluator,
remote errors and logs, a link that drops/flips/duplicates/delays bytes, a device that is killed or
stops answering mid-call, and reconnecting to a restarted device."""

from __future__ import annotations

import logging
import os
import signal
import threading
import time

import numpy as np
import pytest

from utvm.errors import FunctionNotFoundError, RemoteError, SessionTerminatedError, SessionTimeoutError, UtvmError
from utvm.rpc.framing import Unframer
from utvm.rpc.transport import FaultInjectingTransport, Transport

MiB = 1 << 20


def _add_one_check(sess, shape, rng):
    n = int(np.prod(shape))
    src = (rng.standard_normal(n) * 1e3).astype("float32").reshape(shape)
    src.flat[: min(n, 4)] = np.array([0.0, -1.0, 3.4e38, -0.0], dtype="float32")[: min(n, 4)]
    a = sess.array(src)
    b = sess.empty(shape, "float32")
    try:
        sess.get_function("testing.add_one")(a, b)
        got = b.numpy()
    finally:
        a.free()
        b.free()
    want = src + np.float32(1)
    assert got.shape == want.shape and got.dtype == np.float32
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), f"add_one of a {shape} tensor is not bit-exact"


@pytest.mark.parametrize(
    "shape",
    [(1,), (2,), (496,), (497,), (1985 // 4 + 1,), (3, 5, 7), (64, 1024), (MiB // 4,), (2, 2, MiB // 4)],
    ids=lambda s: "x".join(map(str, s)),
)
def test_add_one_small_to_large(link_device, shape):
    assert link_device.max_packet_size == 2048 - 11  # the device was built with 2 KiB packets
    _add_one_check(link_device, shape, np.random.default_rng(sum(shape)))


def test_add_one_16_mib(link_device):
    _add_one_check(link_device, (16 * MiB // 4,), np.random.default_rng(16))


class Recording(Transport):
    """Passes bytes through and keeps what the host wrote."""

    def __init__(self, inner: Transport) -> None:
        self.inner, self.pipeline_depth, self.written = inner, inner.pipeline_depth, bytearray()

    def write(self, data, timeout=None):
        self.written += data
        self.inner.write(data, timeout)

    def read(self, max_bytes, timeout=None):
        return self.inner.read(max_bytes, timeout)

    def close(self):
        self.inner.close()


def test_every_packet_fits_the_2_kib_limit(link_starter):
    sess = link_starter(wrap=Recording)
    try:
        src = np.arange(10_000, dtype="float32")
        np.testing.assert_array_equal(sess.array(src).numpy(), src)
        u = Unframer()
        u.receive_data(bytes(sess.transport.written))
        sizes = [ev.length for ev in u.events() if type(ev).__name__ == "PacketStart"]
        assert max(sizes) == 2048 and u.stats.packets_ok == len(sizes)
    finally:
        sess.close()


def test_time_evaluator_gives_plausible_times(link_device):
    sleep_times = link_device.time_evaluator("testing.sleep_ms", number=2, repeat=3)(2)
    assert len(sleep_times) == 3
    assert all(0.0019 <= t < 0.5 for t in sleep_times), sleep_times  # sleep_ms(2) takes >= 2 ms
    src = np.ones(4096, "float32")
    a, b = link_device.array(src), link_device.empty((4096,), "float32")
    fast = link_device.time_evaluator("testing.add_one", number=10, repeat=2, min_repeat_ms=5)(a, b)
    assert len(fast) == 2 and all(0.0 < t < 0.01 for t in fast), fast
    np.testing.assert_array_equal(b.numpy(), src + 1)


def test_time_evaluators_do_not_run_out(link_device):
    """The device has a few time-evaluator slots; each evaluator gives its slot back when freed or dropped."""
    for i in range(20):
        with link_device.time_evaluator("testing.sleep_ms", number=1) as ev:
            assert len(ev(0)) == 1
        link_device.time_evaluator("testing.sleep_ms", number=1)(i % 2)


def test_remote_error_carries_the_message(link_device):
    fail = link_device.get_function("testing.fail")
    with pytest.raises(RemoteError, match="failed on the device: .*the message \\(with detail 42\\)"):
        fail("the message (with detail 42)")
    assert link_device.get_function("testing.sleep_ms")(1) == 1  # the session goes on
    with pytest.raises(FunctionNotFoundError, match="no global function 'testing.nope'"):
        link_device.get_function("testing.nope")
    with pytest.raises(RemoteError, match="DevAllocData"):
        link_device.empty((1 << 40,), "float32")


def test_device_log_reaches_python_logging(link_device, caplog):
    with caplog.at_level(logging.DEBUG, logger="utvm.device"):
        assert link_device.get_function("testing.log")("a line from the device") == 0
    assert any(r.name == "utvm.device" and "a line from the device" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize(
    "faults",
    [
        {"drop": 3e-4},
        {"flip": 3e-4},
        {"duplicate": 3e-4},
        {"delay": 2e-3},
        {"drop": 1e-4, "flip": 1e-4, "duplicate": 1e-4},
    ],
    ids=["drop", "flip", "duplicate", "delay", "mixed"],
)
def test_faulty_link_gives_right_results_or_clear_errors(link_starter, faults):
    seed = sum(map(ord, "".join(faults)))
    timeouts = {"reply_timeout_s": 0.5, "handshake_retry_s": 0.1, "handshake_timeout_s": 3.0}
    sess = None
    for attempt in range(5):
        try:
            sess = link_starter(
                wrap=lambda t, a=attempt: FaultInjectingTransport(t, seed=seed + a, **faults), **timeouts
            )
            break
        except UtvmError:
            continue
    assert sess is not None, "no session could be started over the faulty link"
    rng = np.random.default_rng(seed)
    outcomes = []
    try:
        for i in range(24):
            try:
                if i % 2:
                    _add_one_check(sess, (int(rng.integers(1, 1500)),), rng)
                else:
                    assert sess.get_function("testing.sleep_ms")(i) == i
                outcomes.append("ok")
            except UtvmError as exc:
                assert str(exc), "an error without a message"
                outcomes.append(type(exc).__name__)
    finally:
        stats = sess.transport.stats
        sess.close()
    assert sum(stats[k] for k in faults) > 0, "no fault was injected"
    assert outcomes.count("ok") >= 6, outcomes


def _device_process(sess):
    t = sess.transport
    return getattr(t, "inner", t)


def test_killing_the_device_mid_call(link_starter):
    sess = link_starter(reply_timeout_s=10.0)
    sleep = sess.get_function("testing.sleep_ms")
    transport = _device_process(sess)
    t0 = time.monotonic()
    killer = threading.Timer(0.3, transport.kill)  # the device dies 0.3 s into a 5 s call
    killer.start()
    try:
        with pytest.raises((SessionTerminatedError, SessionTimeoutError)) as info:
            sleep(5000)
        assert "CallFunc testing.sleep_ms" in str(info.value)
        assert time.monotonic() - t0 < 3.0, "the error took longer than the device's death + the reply timeout"
    finally:
        killer.join()
        sess.close()
    again = link_starter()  # a restarted device reconnects
    try:
        assert again.get_function("testing.sleep_ms")(3) == 3
    finally:
        again.close()


def test_a_device_that_stops_answering_times_out_and_recovers(link_starter):
    sess = link_starter(reply_timeout_s=0.5)
    proc = _device_process(sess).proc
    sleep = sess.get_function("testing.sleep_ms")
    try:
        os.kill(proc.pid, signal.SIGSTOP)
        t0 = time.monotonic()
        with pytest.raises(SessionTimeoutError, match="after 0.5 s waiting for the reply to CallFunc testing.sleep_ms"):
            sleep(1)
        assert 0.45 < time.monotonic() - t0 < 2.0
        os.kill(proc.pid, signal.SIGCONT)  # its late reply is now on the way: it must not answer the next call
        assert sleep(7) == 7
        assert sleep(8) == 8
        assert sess.stats["resyncs"] == 1
    finally:
        os.kill(proc.pid, signal.SIGCONT)
        sess.close()


def test_reconnect_on_the_same_link(link_device):
    sess = link_device
    a = sess.array(np.arange(8, dtype="float32"))
    sess.reconnect()
    with pytest.raises(SessionTerminatedError, match="earlier session"):
        a.numpy()
    assert sess.get_function("testing.sleep_ms")(2) == 2
