"""What the checks share: the platform, the conformance firmware, the session (with a byte-counting transport and
the device's log messages collected), and how a request that gets no answer is explained.

A check returns a one-line detail (PASS) or raises CheckFailed with one naming what is at fault (FAIL).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from utvm.errors import (
    FunctionNotFoundError,
    LinkClosedError,
    RemoteError,
    RemoteProtocolError,
    SessionTerminatedError,
    SessionTimeoutError,
    UtvmError,
)

T = TypeVar("T")

#: The device's framing verdicts (tvm/runtime/crt/error_codes.h), as its session log reports a dropped packet.
FRAMING_ERRORS: dict[int, str] = {
    0x0202: "an invalid escape",
    0x0204: "a packet that arrived incomplete",
    0x0205: "a CRC mismatch",
    0x0206: "a packet longer than TVM_CRT_MAX_PACKET_SIZE_BYTES",
}
_FRAMING_CODE = re.compile(r"framing (?:error |check \(error )0x([0-9a-fA-F]+)")


class CheckFailed(Exception):
    """A check found the port (or the CRT on it) at fault; the message is the report's detail."""


@dataclass(frozen=True)
class Options:
    """How the kit talks to the device.

    `link_timeout_s`: the time each request of the link, packet and recovery checks (small ones) has to be
    answered; a lost byte costs this long. `call_timeout_s`: every other call's (None: the platform's default,
    e.g. a board.toml's [link] call_timeout_s). `seed`: the model's inputs and the round trips' data."""

    link_timeout_s: float = 5.0
    call_timeout_s: float | None = None
    seed: int = 1


class DeviceLog(logging.Handler):
    """Collects the device's session log messages (logger "utvm.device") while the kit runs."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.texts: list[str] = []
        self._logger = logging.getLogger("utvm.device")
        self._saved_level = self._logger.level

    def emit(self, record: logging.LogRecord) -> None:
        self.texts.append(record.getMessage())

    def attach(self) -> None:
        if self._logger.getEffectiveLevel() > logging.INFO:
            self._logger.setLevel(logging.INFO)  # the client logs device text at INFO
        self._logger.addHandler(self)

    def detach(self) -> None:
        self._logger.removeHandler(self)
        self._logger.setLevel(self._saved_level)

    def mark(self) -> int:
        return len(self.texts)

    def since(self, mark: int) -> list[str]:
        return self.texts[mark:]


class CountingTransport:
    """A session's transport that counts the bytes each way (the link check names a request by where its bytes
    lie in the stream); everything else is the wrapped transport's."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.sent = 0
        self.received = 0

    def write(self, data: bytes | bytearray | memoryview, timeout: float | None = None) -> None:
        self.inner.write(data, timeout)
        self.sent += len(data)

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        data = self.inner.read(max_bytes, timeout)
        self.received += len(data)
        return data

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def device_message(exc: BaseException) -> str:
    """The device's own text of a RemoteError (without the client's "CallFunc x failed on the device: ")."""
    return str(getattr(exc, "device_message", None) or exc)


def explain_drops(texts: list[str]) -> str:
    """What the device's log says about packets it dropped, e.g. "the device reported 'session: dropped a
    malformed packet, framing error 0x0204' (a packet that arrived incomplete)"; "" if it said nothing of it."""
    for text in texts:
        m = _FRAMING_CODE.search(text)
        if m:
            what = FRAMING_ERRORS.get(int(m.group(1), 16), "a framing error")
            return f"the device reported {text!r} ({what})"
    return ""


class Context:
    """The state of one run of the kit over one platform."""

    def __init__(self, plat: Any, firmware: Any, options: Options) -> None:
        self.plat = plat
        self.firmware = firmware
        self.options = options
        self.session: Any = None
        self.counter: CountingTransport | None = None
        self.info: dict[str, int] = {}
        self.logs = DeviceLog()
        self.requests = 0
        #: How long a request the device is expected to drop is waited for (set by the link check from the
        #: slowest round trip it measured).
        self.quiet_s = 0.5

    # --- the session ------------------------------------------------------------------------------------------
    def start(self) -> None:
        """Start the firmware (build nothing; a board is flashed) and open the session."""
        self._open(self.plat.start)

    def reopen(self) -> bool:
        """A new session over a link that closed, without starting the firmware again: the platform's
        `connect()` (a board whose USB serial port goes away and comes back when it resets). False when the
        platform has none."""
        connect = getattr(self.plat, "connect", None)
        if connect is None:
            return False
        self.close()
        self._open(connect)
        return True

    def _open(self, opener: Callable[..., Any]) -> None:
        kwargs: dict[str, Any] = {}
        if self.options.call_timeout_s is not None:
            kwargs["reply_timeout_s"] = self.options.call_timeout_s
        self.session = opener(self.firmware.path, **kwargs)
        self.counter = CountingTransport(self.session.transport)
        self.session.transport = self.counter

    def close(self) -> None:
        sess, self.session = self.session, None
        if sess is None:
            return
        if self.counter is not None and sess.transport is self.counter:
            sess.transport = self.counter.inner  # the platform's own transport closes as it does (a board resets)
        try:
            sess.close()
        except UtvmError as exc:
            logging.getLogger("utvm.acceptance").debug("closing the session: %s", exc)

    def revive(self) -> str:
        """After a check that left the session broken: a working session again (the same one restarted, a
        reconnection after a reset, or the firmware started anew); "" when it works, else why not."""
        try:
            return self._revive()
        except CheckFailed as exc:  # the conformance module lacks acceptance.tick
            return str(exc)

    def _revive(self) -> str:
        try:
            self.call("acceptance.tick", 1)
            return ""
        except LinkClosedError:
            pass
        except SessionTerminatedError:
            try:
                self.session.reconnect()
                self.call("acceptance.tick", 1)
                return ""
            except UtvmError:
                pass
        except UtvmError:
            try:  # out of step: this request restarts the session
                self.call("acceptance.tick", 1)
                return ""
            except UtvmError:
                pass
        self.close()
        try:
            self.start()
            self.call("acceptance.tick", 1)
        except UtvmError as exc:
            return f"no session with the device after the previous check: {exc}"
        return ""

    # --- calls ------------------------------------------------------------------------------------------------
    def fn(self, name: str) -> Any:
        """The device's global `name`; a missing one fails the check (the conformance module is not there)."""
        try:
            return self.session.get_function(name)
        except FunctionNotFoundError:
            raise CheckFailed(f"the device has no global {name!r}: the conformance module did not register it "
                              "(is utvm_user_init called, and is TVM_CRT_GLOBAL_FUNC_REGISTRY_SIZE_BYTES big "
                              "enough?)") from None

    def call(self, name: str, *args: Any) -> Any:
        return self.fn(name)(*args)

    def remote(self, what: str, action: Callable[[], T]) -> T:
        """`action()`, a RemoteError of the device's (a check in C failed) becoming the check's failure."""
        try:
            return action()
        except RemoteError as exc:
            raise CheckFailed(f"{what}: {device_message(exc)}") from None

    def probe(self, what: str, action: Callable[[], T]) -> T:
        """One request of the link test. No reply, a corrupted reply or a reset fails the check naming the
        request, the bytes of the host->device stream it occupied and what the device said about it."""
        self.requests += 1
        number = self.requests
        first = self.counter.sent if self.counter is not None else 0
        mark = self.logs.mark()
        try:
            return action()
        except SessionTimeoutError:
            last = self.counter.sent if self.counter is not None else 0
            why = self._after_loss(mark)
            raise CheckFailed(
                f"request {number} ({what}, bytes {first}..{last - 1} of the host->device stream counted after the "
                f"handshake) got no reply within {self.session.reply_timeout_s:g} s; {why}") from None
        except RemoteProtocolError as exc:
            why = self._after_loss(mark)
            raise CheckFailed(f"request {number} ({what}): the reply came back damaged ({exc}); {why}") from None
        except SessionTerminatedError as exc:
            raise CheckFailed(f"request {number} ({what}): the session ended: {exc}") from None

    def _after_loss(self, mark: int) -> str:
        """Once a request got no proper answer: a new session (which also flushes what the device holds of the
        lost packet) and what the device logged meanwhile."""
        try:
            self.call("acceptance.tick", 1)
            after = "a new session then worked"
        except UtvmError as exc:
            after = f"a new session failed too ({exc})"
        said = explain_drops(self.logs.since(mark))
        if said:
            return f"{said}: bytes were lost or corrupted on the way to the device; {after}"
        return (f"the device reported no dropped packet (a lost packet start leaves no trace; a busy or hung device "
                f"looks the same); {after}")
