"""The RPC client: a session with a device over any Transport (docs/architecture.md §5).

    sess = connect_subprocess([path_to_device])      # or Session(transport)
    add_one = sess.get_function("testing.add_one")
    a = sess.array(np.arange(4, dtype="float32")); b = sess.empty((4,), "float32")
    add_one(a, b); b.numpy()
    ev = sess.time_evaluator("fn", number=10, repeat=3); ev(a, b) -> [seconds per call, ...]

A Session is a `utvm.runtime.Backend` like the local runtime, and its functions are PackedFuncs: arguments
are converted and checked by `utvm.runtime.convert_arg` (the same rules and errors as the local backend),
and `_call` only maps each converted (type code, value) to its wire form.

The layers below are sans-IO (`session.py`, `framing.py`, `protocol.py`); this module owns the clock and
the transport. Three timeouts, each failing with a `SessionTimeoutError` that names what was awaited:
`handshake_retry_s` (resend START_INIT with a new nonce), `handshake_timeout_s` (give up on the handshake)
and `reply_timeout_s` (one request's reply). A TERMINATE from the device, or the link closing, raises
`SessionTerminatedError`; the session then refuses calls until `reconnect()`. An Exception reply raises
`RemoteError` with the device's text. Device log messages go to the logger "utvm.device".

Every request is checked before anything is sent: one that cannot fit the device's packet (the session
payload must be at most TVM_CRT_MAX_PACKET_SIZE_BYTES = max_packet_size + 11; copies are split to fit) is
refused with a `LocalProtocolError` naming the request, its size and the limit, and a function name or str
argument holding a NUL (which the device, reading C strings, would cut short) with an `ArgumentError`
naming the byte. A refused request leaves the session as it was.

Out of step: after a reply timeout, a corrupt reply, or an interruption (KeyboardInterrupt) between a request
and its reply, the link may hold stale bytes and the device may still be busy. The next request first starts
a fresh session (new session id), so a late reply to a failed request can never be taken for the answer to a
later one; the device frees the memory allocated over RPC when that session starts, so the session's remote
arrays are gone from the moment it falls out of step. Until then nothing waits on the device for cleanup:
`free()` of an array only marks it freed (a function handle's release is sent after the restart) and
`close()` sends no Shutdown and stops the transport at once (`Transport.abort()`: a device process is killed
by its PID), as does leaving `with Session(...)` by an exception.
"""

from __future__ import annotations

import ctypes
import logging
import random
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NoReturn

from utvm.errors import (
    ArgumentError,
    DataTypeError,
    FunctionNotFoundError,
    LinkClosedError,
    LocalProtocolError,
    RemoteError,
    RemoteProtocolError,
    SessionTerminatedError,
    SessionTimeoutError,
    TransportError,
    UtvmError,
)
from utvm.rpc import protocol as P
from utvm.rpc.protocol import DLDataType, DLDevice, RPCCode
from utvm.rpc.remote import (
    CPU,
    RemoteFunction,
    RemoteModule,
    RemoteNDArray,
    TimeEvaluator,
    brief_repr,
    c_contiguous,
    c_string_problem,
    dl_dtype,
)
from utvm.rpc.session import (
    NEED_DATA,
    SESSION_HEADER_SIZE,
    LogMessage,
    MessageDropped,
    NormalMessage,
    SessionEstablished,
    SessionProtocol,
    SessionTerminated,
    State,
)
from utvm.rpc.transport import SubprocessTransport, Transport
from utvm.runtime.backend import Backend
from utvm.runtime.datatype import DataType
from utvm.runtime.device import Device
from utvm.runtime.ndarray_base import NDArrayBase
from utvm.runtime.typecodes import TypeCode

__all__ = ["RemoteFunction", "RemoteModule", "RemoteNDArray", "Session", "TimeEvaluator", "connect_subprocess"]

log = logging.getLogger("utvm.rpc")
device_log = logging.getLogger("utvm.device")

#: Incoming packets larger than this are skipped by the host's unframer (a corrupt length field).
HOST_RECEIVE_LIMIT = 1 << 24
#: Copy chunk budget when the device has no tvm.rpc.server.GetCRTMaxPacketSize.
DEFAULT_MAX_TRANSFER_SIZE = 1 << 16
#: What a session payload holds besides the RPC packet's body: the session header and the packet's u64 length.
#: max_packet_size (GetCRTMaxPacketSize) + PACKET_OVERHEAD = TVM_CRT_MAX_PACKET_SIZE_BYTES.
PACKET_OVERHEAD = SESSION_HEADER_SIZE + 8
_LENGTH_FIELD = 8  # an RPC packet's u64 length: len(packet) <= max_packet_size + _LENGTH_FIELD
#: What an error that leaves the link out of step says comes next.
_RESTART_NOTE = (
    "the session will be restarted before the next request, and the arrays allocated in this session are gone"
)
ALLOC_ALIGNMENT = 64
_READ_SIZE = 1 << 16
_MEMO_LIMIT = 64  # reply bodies up to this size are remembered with their decoded reply
#: A batch of pipelined requests is written once it holds this many bytes (a pipe's capacity).
_BATCH_BYTES = 1 << 16
# Type codes whose converted value is already its wire value.
_PLAIN_CODES = frozenset((TypeCode.INT, TypeCode.FLOAT, TypeCode.NULL, TypeCode.STR, TypeCode.BYTES))
# Return type codes whose value _call wraps in an object (the others are returned as they are).
_WRAPPED_RETURNS = frozenset((
    TypeCode.PACKED_FUNC_HANDLE,
    TypeCode.MODULE_HANDLE,
    TypeCode.NDARRAY_HANDLE,
    TypeCode.DATA_TYPE,
    TypeCode.DEVICE,
    TypeCode.OPAQUE_HANDLE,
))


class Session(Backend):
    """An RPC session with one device over `transport` (see the module docstring).

    `max_packet_size`: the largest RPC transfer used for copies (what tvm.rpc.server.GetCRTMaxPacketSize
    returns: TVM_CRT_MAX_PACKET_SIZE_BYTES - 11); None asks the device. `pipeline_depth`: copy requests in
    flight at once (None: what the transport allows). `nonce`: the first session nonce (None: random).
    """

    def __init__(
        self,
        transport: Transport,
        handshake_retry_s: float = 1.0,
        handshake_timeout_s: float = 10.0,
        reply_timeout_s: float = 30.0,
        max_packet_size: int | None = None,
        pipeline_depth: int | None = None,
        nonce: int | None = None,
    ) -> None:
        if max_packet_size is not None and (
            isinstance(max_packet_size, bool)
            or not isinstance(max_packet_size, int)
            or max_packet_size <= P.COPY_OVERHEAD_BASE + 8
        ):
            raise ArgumentError(
                f"Session: max_packet_size must be an int > {P.COPY_OVERHEAD_BASE + 8} (what "
                f"tvm.rpc.server.GetCRTMaxPacketSize returns), got {max_packet_size!r}"
            )
        self.transport = transport
        self.handshake_retry_s = handshake_retry_s
        self.handshake_timeout_s = handshake_timeout_s
        self.reply_timeout_s = reply_timeout_s
        self._requested_max = max_packet_size
        self.max_packet_size = max_packet_size or DEFAULT_MAX_TRANSFER_SIZE
        # Where max_packet_size comes from, for the error refusing a request too large for it.
        self._limit_source = (
            f"TVM_CRT_MAX_PACKET_SIZE_BYTES, from max_packet_size={max_packet_size}"
            if max_packet_size
            else "assumed: the device does not report TVM_CRT_MAX_PACKET_SIZE_BYTES"
        )
        self.pipeline_depth = max(1, pipeline_depth or getattr(transport, "pipeline_depth", 1))
        self._rng = random.Random()
        self._nonce = nonce if nonce else self._rng.randrange(1, 256)
        self._generation = 0  # bumped by reconnect(): every remote object dies
        self._memory_epoch = 0  # bumped by every new session: remote arrays die (the CRT frees them)
        self._closed = False
        self._terminated: str | None = None
        # Out of step (see the module docstring): _need_resync is set by an error (with _resync_cause saying
        # which); _in_flight holds the request between its write and its reply (set by a request that was
        # interrupted, e.g. by KeyboardInterrupt), "" otherwise.
        self._need_resync = False
        self._resync_cause = ""
        self._in_flight = ""
        self._functions: dict[str, RemoteFunction] = {}
        self._system_libs: dict[str, RemoteModule] = {}  # model name ('' = the default) -> module
        self._pending_frees: list[tuple[str, int, int]] = []  # (kind, value, epoch or generation)
        self.proto = SessionProtocol(self._nonce, HOST_RECEIVE_LIMIT)
        self.stats = {"requests": 0, "resyncs": 0, "dropped": 0}
        self._last_body: bytes | None = None  # the last small reply body and its decoded reply
        self._last_reply: P.Reply | None = None
        self._start(first=True)

    # --- life cycle -----------------------------------------------------------------------------------------
    def _start(self, first: bool, restarting_after: str | None = None) -> None:
        """Handshake (TERMINATE + START_INIT, retried), then InitServer and the max packet size.
        `restarting_after`: why the session is restarted (named if the handshake times out)."""
        proto = self.proto
        if first:
            wire = proto.terminate() + proto.initiate()
        else:
            wire = proto.initiate()
        # Until the handshake completes the link is out of step: an interrupted or failed handshake is redone
        # before the next request (and close() does not wait for the device).
        self._need_resync = True
        if restarting_after is None:
            self._resync_cause = "the session could not be started"
        self._handshake(wire, restarting_after)
        self._need_resync = False
        self._resync_cause = ""
        self._in_flight = ""
        self._terminated = None
        reply = self._exchange(P.encode_init_server(), "InitServer")
        self._expect_return(reply, "InitServer")
        if first and self._requested_max is None:
            getter = self.get_function("tvm.rpc.server.GetCRTMaxPacketSize", allow_missing=True)
            if getter is not None:
                size = getter()
                if not isinstance(size, int) or size <= P.COPY_OVERHEAD_BASE + 8:
                    raise RemoteProtocolError(f"tvm.rpc.server.GetCRTMaxPacketSize returned {size!r}")
                self.max_packet_size = size
                self._limit_source = "TVM_CRT_MAX_PACKET_SIZE_BYTES"

    def _handshake(self, wire: bytes, restarting_after: str | None = None) -> None:
        t0 = time.monotonic()
        deadline = t0 + self.handshake_timeout_s
        self._write(wire, "a session START_INIT", self.handshake_timeout_s)
        inits = 1
        next_retry = t0 + self.handshake_retry_s
        proto = self.proto
        while True:
            ev = proto.next_event()
            t = type(ev)
            if t is SessionEstablished:
                log.debug("session 0x%04x established with %s", ev.session_id, self._peer)
                return
            if ev is NEED_DATA:
                now = time.monotonic()
                if now >= deadline:
                    why = (
                        f" while restarting the session because {restarting_after} (the device may still be "
                        "busy with it or hung; the next request tries again)"
                        if restarting_after
                        else ""
                    )
                    raise SessionTimeoutError(
                        f"timed out after {self.handshake_timeout_s:.3g} s waiting for the session "
                        f"START_REPLY from {self._peer} ({inits} START_INIT sent){why}"
                    )
                if now >= next_retry:
                    self._write(proto.initiate(), "a session START_INIT", deadline - now)
                    inits += 1
                    next_retry = now + self.handshake_retry_s
                    continue
                self._receive(min(deadline, next_retry) - now, "the session START_REPLY")
            elif t is LogMessage:
                self._device_log(ev.text)
            elif t is MessageDropped:
                self.stats["dropped"] += 1
                log.debug("dropped during the handshake: %s", ev.reason)
            # SessionTerminated (the device's boot-time TERMINATE) is expected here and ignored.

    def reconnect(self) -> None:
        """Start a fresh session on the same transport (after the device reset). Remote objects from the
        previous session become invalid."""
        self._check_open()
        self._generation += 1
        self._memory_epoch += 1
        self._functions.clear()
        self._system_libs.clear()
        self._pending_frees.clear()
        self.proto = SessionProtocol(self._rng.randrange(1, 256), HOST_RECEIVE_LIMIT)
        self._start(first=True)

    @property
    def out_of_step(self) -> bool:
        """True while the link is out of step (see the module docstring): the next request restarts the
        session first, and close() will not wait for the device."""
        return bool(self._need_resync or self._in_flight)

    def close(self, force: bool = False) -> None:
        """End the session. Normally: send Shutdown and close the transport, which lets the device exit by
        itself. With `force`, or when the device may be busy (the link is out of step, the session was
        terminated, the Shutdown could not be written): no Shutdown, and the transport is stopped at once
        (`Transport.abort()`: a device process is killed by its PID). Never raises for the link."""
        if self._closed:
            return
        self._closed = True
        graceful = False
        try:
            if (
                not force
                and self._terminated is None
                and not (self._need_resync or self._in_flight)
                and self.proto.state is State.ESTABLISHED
            ):
                self._write(self.proto.send_normal(P.encode_shutdown()), "Shutdown", 1.0)
                graceful = True
        except UtvmError as exc:
            log.debug("no Shutdown sent to %s: %s", self._peer, exc)
        finally:  # also after a KeyboardInterrupt in the write: then graceful is False
            if graceful:
                self.transport.close()
            else:
                _abort_transport(self.transport)

    def __enter__(self) -> Session:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        # Leaving by an exception (KeyboardInterrupt included): do not wait for the device.
        self.close(force=exc_type is not None)

    @property
    def device(self) -> Device:
        """The device's memory as its CRT names it: cpu(0)."""
        return Device(CPU.device_type, CPU.device_id)

    @property
    def _peer(self) -> str:  # any object with write/read/close works as a transport; describe() is optional
        describe = getattr(self.transport, "describe", None)
        return describe() if describe else type(self.transport).__name__

    # --- the request/reply engine ---------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise SessionTerminatedError("the session is closed")

    def _check_generation(self, generation: int, what: str) -> None:
        if generation != self._generation:
            raise SessionTerminatedError(f"{what} belongs to an earlier session (the device was reconnected)")

    def _check_epoch(self, epoch: int, what: str) -> None:
        if epoch != self._memory_epoch:
            if self._need_resync:  # not restarted yet: it will be before the next request
                raise SessionTerminatedError(
                    f"{what} is gone: {self._resync_cause}, so the session will be restarted before the next "
                    "request, and the device frees the memory allocated over RPC when a new session starts"
                )
            raise SessionTerminatedError(
                f"{what} is gone: the session was restarted after a link error, and the device frees the "
                "memory allocated over RPC when a new session starts"
            )

    def _lose_step(self, cause: str) -> None:
        """The link is out of step because of `cause` (a reply may still be on its way, the device may still be
        busy): the next request restarts the session, and the device frees the memory allocated over RPC when
        it does, so this session's arrays are gone from now on (freeing one needs no request)."""
        if not self._need_resync:
            self._memory_epoch += 1
            self._pending_frees = [f for f in self._pending_frees if f[0] != "data"]
        self._need_resync = True
        self._resync_cause = cause

    def _ready(self) -> None:
        if not (self._closed or self._need_resync or self._in_flight or self._pending_frees) and (
            self._terminated is None
        ):
            return  # the common case: nothing to do before the next request
        self._check_open()
        if self._terminated is not None:
            raise SessionTerminatedError(f"{self._terminated}; call reconnect() to start a new session")
        if self._need_resync or self._in_flight:
            if not self._need_resync:  # a request was interrupted between its write and its reply
                self._lose_step(f"{self._in_flight} was interrupted")
            self.stats["resyncs"] += 1
            log.info("restarting the session because %s", self._resync_cause)
            self._start(first=False, restarting_after=self._resync_cause)
        if self._pending_frees:
            frees, self._pending_frees = self._pending_frees, []
            for i, (kind, value, stamp) in enumerate(frees):
                try:
                    if kind == "data":
                        self._free_data(value, stamp)
                    else:
                        self._free_handle(value, stamp)
                except RemoteError as exc:
                    log.warning("freeing remote %s 0x%x failed: %s", kind, value, exc)
                except BaseException:
                    self._pending_frees[:0] = frees[i + 1 :]  # the rest stay due
                    raise

    def _refuse(self, packet_size: int, what: str, detail: str = "") -> NoReturn:
        """Refuse the request `what` (an RPC packet of `packet_size` bytes) that cannot fit the device's packet."""
        raise LocalProtocolError(
            f"{what}: the request is {packet_size + SESSION_HEADER_SIZE:,} bytes; the device takes at most "
            f"{self.max_packet_size + PACKET_OVERHEAD:,} bytes per packet ({self._limit_source}){detail}; "
            "nothing was sent"
        )

    def _write(self, wire: bytes, what: str, timeout: float | None, prefix: str = "") -> None:
        """Write `wire`; errors name `prefix + what` (built only then)."""
        try:
            self.transport.write(wire, timeout)
        except SessionTimeoutError as exc:
            self._lose_step(f"writing {prefix}{what} timed out")
            raise SessionTimeoutError(
                f"timed out writing {prefix}{what} to {self._peer}: {exc}; the device is not reading (busy or "
                f"hung); {_RESTART_NOTE}"
            ) from exc
        except TransportError as exc:  # LinkClosedError, or any transport failure
            self._terminated = f"the link closed while sending {prefix}{what}"
            raise LinkClosedError(f"{self._terminated}: {exc}") from exc

    def _receive(self, timeout: float, what: str) -> None:
        try:
            data = self.transport.read(_READ_SIZE, max(0.0, timeout))
        except SessionTimeoutError:
            return  # the caller checks its deadline
        except TransportError as exc:
            self._terminated = f"the link closed while waiting for {what}"
            raise LinkClosedError(f"{self._terminated}: {exc}") from exc
        self.proto.receive_data(data)

    def _send(self, packet: bytes, what: str) -> None:
        self.stats["requests"] += 1
        self._write(self.proto.send_normal(packet), what, self.reply_timeout_s, "the request ")

    def _await_reply(self, what: str) -> P.Reply:
        deadline = time.monotonic() + self.reply_timeout_s
        proto = self.proto
        while True:
            ev = proto.next_event()
            t = type(ev)
            if t is NormalMessage:
                body = ev.body
                if body == self._last_body and self._last_reply is not None:  # the same small reply again
                    return self._last_reply  # (decoded replies are immutable)
                try:
                    reply = P.decode_reply(body)
                except RemoteProtocolError as exc:
                    self._lose_step(f"the reply to {what} was malformed")
                    raise RemoteProtocolError(f"bad reply to {what}: {exc}; {_RESTART_NOTE}") from exc
                if len(body) <= _MEMO_LIMIT:
                    self._last_body, self._last_reply = body, reply
                return reply
            if ev is NEED_DATA:
                left = deadline - time.monotonic()
                if left <= 0:
                    self._lose_step(f"{what} timed out")
                    within = f"{self.reply_timeout_s:.3g} s"
                    raise SessionTimeoutError(
                        f"timed out after {within} waiting for the reply to {what} from {self._peer}: it did not "
                        f"return within {within}, so the device is busy or hung; {_RESTART_NOTE}"
                    )
                self._receive(left, f"the reply to {what}")
            elif t is LogMessage:
                self._device_log(ev.text)
            elif t is SessionTerminated:
                if ev.was_established:
                    self._terminated = "the device terminated the session (it reset)"
                    raise SessionTerminatedError(f"{self._terminated} while we waited for the reply to {what}")
            elif t is MessageDropped:
                self.stats["dropped"] += 1
                log.debug("dropped a message while waiting for the reply to %s: %s", what, ev.reason)
                if ev.corrupt:
                    # A packet from the device was corrupted: it may have been our reply. Fail now rather than
                    # at the timeout; the next request starts a fresh session.
                    self._lose_step(f"a packet was corrupted while we waited for the reply to {what}")
                    raise RemoteProtocolError(
                        f"a packet from the device was corrupted while we waited for the reply to {what} "
                        f"({ev.reason}); {_RESTART_NOTE}"
                    )
            elif t is SessionEstablished:  # the device restarted the session: our request is lost
                self._lose_step(f"the device started a new session during {what}")
                raise SessionTerminatedError(
                    f"the device started a new session while we waited for the reply to {what}; {_RESTART_NOTE}"
                )

    def _exchange(self, packet: bytes, what: str) -> P.Reply:
        """One request and its reply. The caller has checked that `packet` fits (see _request); the requests
        sent without that check (InitServer, FreeHandle, DevFreeData) are under 64 bytes, and max_packet_size
        is always more than that."""
        # Whatever interrupts us between the request and its reply (an error, KeyboardInterrupt) leaves the
        # link out of step: the next request starts a new session first. (A try costs nothing until it raises.)
        self._in_flight = what
        try:
            self._send(packet, what)
            reply = self._await_reply(what)
        except BaseException:
            if not self._need_resync and self._terminated is None:
                self._lose_step(f"{what} was interrupted")
            raise
        self._in_flight = ""
        return reply

    def _request(self, packet: bytes, what: str) -> P.Reply:
        if len(packet) > self.max_packet_size + _LENGTH_FIELD:
            self._refuse(len(packet), what)  # before _ready: a refused request changes nothing
        self._ready()
        return self._exchange(packet, what)

    def _expect_return(self, reply: P.Reply, what: str) -> tuple[P.PackedArg, ...]:
        if type(reply) is P.Return:
            return reply.values
        if type(reply) is P.ExceptionReply:
            err = RemoteError(f"{what} failed on the device: {reply.message}")
            err.device_message = reply.message  # type: ignore[attr-defined]
            raise err
        self._lose_step(f"the device answered {what} with {type(reply).__name__}")
        raise RemoteProtocolError(
            f"the device answered {what} with {type(reply).__name__}, expected Return; {_RESTART_NOTE}"
        )

    def _syscall(self, code: RPCCode, args: Sequence[P.PackedArg], what: str) -> P.PackedArg:
        values = self._expect_return(self._request(P.encode_syscall(code, args), what), what)
        if len(values) != 1:
            self._lose_step(f"the reply to {what} was malformed")
            raise RemoteProtocolError(
                f"the reply to {what} carries {len(values)} values, expected 1; {_RESTART_NOTE}"
            )
        return values[0]

    def _device_log(self, text: bytes) -> None:
        device_log.info("%s", text.decode("utf-8", errors="replace").rstrip("\r\n\0"))

    def _pipeline(
        self, requests: Iterable[tuple[bytes, str]], on_reply: Callable[[P.Reply, str], None], label: str
    ) -> None:
        """Send requests with up to `pipeline_depth` in flight; every reply is awaited (in order) even after
        a RemoteError, so the link stays in step; the first error is raised at the end. `label` names the
        whole (e.g. "CopyToRemote of <array>") if it is interrupted.

        Requests go out in batches, one write each: the window is filled, then drained to half before the
        next half-window of requests is written (fewer syscalls and wake-ups of the device per request).
        Every request is built to fit the device's packet (copies are split by copy_chunk_size)."""
        self._ready()
        self._in_flight = label
        inflight: deque[str] = deque()
        first_error: RemoteError | None = None
        depth = self.pipeline_depth
        refill = depth - max(1, depth // 2)  # drain to this many in flight before writing the next batch
        batch: list[bytes] = []  # framed requests not yet written
        batch_bytes = 0
        batch_what = ""
        wrote = False  # anything written: an error from now on leaves the link out of step
        send_normal = self.proto.send_normal
        stats = self.stats

        def flush() -> None:
            nonlocal batch_bytes, wrote
            if batch:
                wrote = True
                what = f"the request {batch_what}" if len(batch) == 1 else (
                    f"the requests {batch_what} and {len(batch) - 1} more")
                wire = batch[0] if len(batch) == 1 else b"".join(batch)
                batch.clear()
                batch_bytes = 0
                self._write(wire, what, self.reply_timeout_s)

        def settle() -> None:
            nonlocal first_error
            what = inflight.popleft()
            reply = self._await_reply(what)
            try:
                on_reply(reply, what)
            except RemoteError as exc:
                first_error = first_error or exc

        try:
            for packet, what in requests:
                if len(inflight) >= depth:
                    flush()
                    while len(inflight) > refill:
                        settle()
                stats["requests"] += 1
                wire = send_normal(packet)
                if not batch:
                    batch_what = what
                batch.append(wire)
                batch_bytes += len(wire)
                inflight.append(what)
                if batch_bytes >= _BATCH_BYTES:
                    flush()
            flush()
            while inflight:
                settle()
        except BaseException:
            if wrote and not self._need_resync and self._terminated is None:
                self._lose_step(f"{label} was interrupted")
            elif not wrote:
                self._in_flight = ""
            raise
        self._in_flight = ""
        if first_error is not None:
            raise first_error

    # --- functions and modules ------------------------------------------------------------------------------
    def _wire_arg(self, fname: str, i: int, code: TypeCode, v: Any) -> P.PackedArg:
        """The wire form of argument `i`, already converted by utvm.runtime.convert_arg to (code, value)."""
        if code in _PLAIN_CODES:
            return (code, v)
        if code == TypeCode.DLTENSOR_HANDLE:
            if isinstance(v, RemoteNDArray):
                if v.session is not self:
                    raise ArgumentError(f"{fname}: argument {i} is an array of another session")
                if v.freed:
                    raise ArgumentError(f"{fname}: argument {i} is an array that was freed ({v!r})")
                return (code, v.tensor())
            what = f"a {type(v).__name__} in {v.device} memory" if isinstance(v, NDArrayBase) else "a host DLTensor"
            raise ArgumentError(f"{fname}: argument {i} is {what}; the device takes its own arrays: "
                                "upload it with session.array(...)")
        if code == TypeCode.PACKED_FUNC_HANDLE:
            if isinstance(v, RemoteFunction) and v.session is self:
                return (code, v.handle)
            raise ArgumentError(f"{fname}: argument {i} is {v!r}, not a function of this session "
                                "(a device cannot call back into the host over RPC)")
        if code == TypeCode.MODULE_HANDLE:
            if isinstance(v, RemoteModule) and v.session is self:
                return (code, v.handle)
            raise ArgumentError(f"{fname}: argument {i} is {v!r}, not a module of this session")
        if code == TypeCode.DATA_TYPE:
            return (code, DLDataType(int(v.code), v.bits, v.lanes))
        if code == TypeCode.DEVICE:
            return (code, DLDevice(v.device_type, v.device_id))
        if code == TypeCode.OPAQUE_HANDLE:
            return (code, v.value or 0)
        raise ArgumentError(f"{fname}: argument {i} has type code {int(code)}, which RPC cannot carry")

    def _call(self, handle: int, args: Sequence[tuple[TypeCode, Any]], fname: str) -> Any:
        packed = [self._wire_arg(fname, i, code, v) for i, (code, v) in enumerate(args)] if args else ()
        try:
            packet = P.encode_call_func(handle, packed)
        except LocalProtocolError as exc:
            raise ArgumentError(f"{fname}: {exc}") from exc
        what = f"CallFunc {fname}"
        if len(packet) > self.max_packet_size + _LENGTH_FIELD:
            self._refuse(len(packet), what, _largest_argument(packed))  # before _ready: nothing changes
        self._ready()
        values = self._expect_return(self._exchange(packet, what), what)
        try:
            rtc, v = P.unpack_call_return(values)
        except RemoteProtocolError as exc:
            self._lose_step(f"the reply to {what} was malformed")
            raise RemoteProtocolError(f"bad reply to {what}: {exc}; {_RESTART_NOTE}") from exc
        if rtc not in _WRAPPED_RETURNS:  # int, float, str, bytes, None: the value as it came
            return v
        if rtc == TypeCode.PACKED_FUNC_HANDLE:
            return RemoteFunction(self, v, f"<function returned by {fname}>", owned=True)
        if rtc == TypeCode.MODULE_HANDLE:
            return RemoteModule(self, v, f"<module returned by {fname}>")
        if rtc == TypeCode.NDARRAY_HANDLE:
            tensor, _handle = v
            return RemoteNDArray(self, tensor.data, tensor.shape, tensor.dtype, tensor.device, owned=False)
        if rtc == TypeCode.DATA_TYPE:  # the runtime's value types, as the local backend returns them
            try:
                return DataType(v.code, v.bits, v.lanes)
            except DataTypeError as exc:
                raise RemoteProtocolError(f"bad reply to {what}: {exc}") from None
        if rtc == TypeCode.DEVICE:
            try:
                return Device(v.device_type, v.device_id)
            except ArgumentError as exc:
                raise RemoteProtocolError(f"bad reply to {what}: {exc}") from None
        if rtc == TypeCode.OPAQUE_HANDLE:
            return ctypes.c_void_p(v or None)
        return v

    def get_function(self, name: str, allow_missing: bool = False) -> RemoteFunction | None:
        """The device's global function `name` (GetGlobalFunc). A missing name raises FunctionNotFoundError
        (or returns None with allow_missing=True). A name the device cannot look up as it is (not a str, a NUL
        in it, not UTF-8) raises ArgumentError, one too long for a packet LocalProtocolError; nothing is sent."""
        if not isinstance(name, str):
            raise ArgumentError(f"get_function: a function name is a str, got {type(name).__name__} {name!r:.60}")
        f = self._functions.get(name)
        if f is not None:
            return f
        what = f"GetGlobalFunc({brief_repr(name)})"
        bad = c_string_problem(name, "the function name")
        if bad:
            raise ArgumentError(f"{what}: {bad}; nothing was sent")
        tc, handle = self._syscall(RPCCode.GET_GLOBAL_FUNC, [(TypeCode.STR, name)], what)
        if tc == TypeCode.NULL or (tc == TypeCode.OPAQUE_HANDLE and handle == 0):
            if allow_missing:
                return None
            raise FunctionNotFoundError(f"the device has no global function {brief_repr(name)}")
        if tc not in (TypeCode.OPAQUE_HANDLE, TypeCode.PACKED_FUNC_HANDLE):
            self._lose_step(f"the reply to {what} was malformed")
            raise RemoteProtocolError(
                f"the reply to {what} carries a {TypeCode(tc).name}, expected a handle; {_RESTART_NOTE}"
            )
        f = RemoteFunction(self, handle, name)
        self._functions[name] = f
        return f

    def system_lib(self, name: str | None = None) -> RemoteModule:
        """The device's system library module (runtime.SystemLib): with no name the firmware's default (its
        only model, or the first of several); with a name, that model's (runtime.SystemLib(name); a name
        the firmware does not link is a RemoteError listing the models it does)."""
        key = name or ""
        if key not in self._system_libs:
            fn = self.get_function("runtime.SystemLib")
            mod = fn(key) if key else fn()  # type: ignore[misc]
            if not isinstance(mod, RemoteModule):
                raise RemoteProtocolError(f"runtime.SystemLib returned {mod!r}, not a module")
            mod.name = f"system_lib:{key}" if key else "system_lib"
            self._system_libs[key] = mod
        return self._system_libs[key]

    # --- remote arrays --------------------------------------------------------------------------------------
    def empty(self, shape: Sequence[int] | int, dtype: Any = "float32") -> RemoteNDArray:
        """Allocate an uninitialised tensor in device memory (DevAllocData)."""
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        if any(isinstance(d, bool) or not isinstance(d, int) or d < 0 for d in shape):
            raise ArgumentError(f"empty: shape must hold non-negative ints, got {shape}")
        dt = dl_dtype(dtype)
        n = 1
        for d in shape:
            n *= d
        nbytes = n * dt.itemsize
        what = f"DevAllocData({nbytes} bytes for a {shape} tensor)"
        tc, handle = self._syscall(
            RPCCode.DEV_ALLOC_DATA,
            [
                (TypeCode.DEVICE, CPU),
                (TypeCode.INT, nbytes),
                (TypeCode.INT, ALLOC_ALIGNMENT),
                (TypeCode.DATA_TYPE, dt),
            ],
            what,
        )
        if tc != TypeCode.OPAQUE_HANDLE or handle == 0:
            raise RemoteError(f"{what} returned no memory ({TypeCode(tc).name} {handle!r})")
        return RemoteNDArray(self, handle, shape, dt)

    def array(self, source: Any, dtype: Any = None) -> RemoteNDArray:
        """Upload a numpy array (or anything np.asarray takes) into a new remote tensor."""
        import numpy as np

        src = c_contiguous(np.asarray(source, dtype=dtype))
        arr = self.empty(src.shape, src.dtype)
        try:
            arr.copyfrom(src)
        except BaseException:
            try:
                arr.free()
            except UtvmError as exc:  # the upload's error is the one to report
                log.debug("freeing %r after a failed upload failed too: %s", arr, exc)
            raise
        return arr

    def _defer_free(self, data: int, epoch: int) -> None:  # called by the GC: must not do I/O
        if epoch == self._memory_epoch and not self._closed:
            self._pending_frees.append(("data", data, epoch))

    def _defer_free_handle(self, handle: int, generation: int) -> None:  # called by the GC: no I/O
        if generation == self._generation and not self._closed:
            self._pending_frees.append(("function", handle, generation))

    def _free_handle(self, handle: int, generation: int) -> None:
        if self._closed or self._terminated is not None or generation != self._generation:
            return
        if self._need_resync or self._in_flight:
            # Out of step: the device may be busy. Handles outlive a session restart (time evaluators hold
            # device slots), so the release is sent after the restart, before the next request.
            self._pending_frees.append(("function", handle, generation))
            return
        self._ready()
        what = f"FreeHandle(0x{handle:x})"
        args = [(TypeCode.OPAQUE_HANDLE, handle), (TypeCode.INT, int(TypeCode.PACKED_FUNC_HANDLE))]
        self._expect_return(self._exchange(P.encode_syscall(RPCCode.FREE_HANDLE, args), what), what)

    def _free_data(self, data: int, epoch: int) -> None:
        # Memory of an earlier epoch was freed by the device when a session started, and while the link is out
        # of step the next session start frees it: no request (and no waiting on a busy device) either way.
        if self._closed or self._terminated is not None or epoch != self._memory_epoch:
            return
        if self._need_resync or self._in_flight:  # (_lose_step bumps the epoch; _in_flight alone: interrupted)
            return
        self._ready()
        if epoch != self._memory_epoch:
            return
        what = f"DevFreeData(0x{data:x})"
        args = [(TypeCode.DEVICE, CPU), (TypeCode.OPAQUE_HANDLE, data)]
        self._expect_return(self._exchange(P.encode_syscall(RPCCode.DEV_FREE_DATA, args), what), what)

    def _copy_chunk(self, arr: RemoteNDArray, what: str) -> int:
        try:
            return P.copy_chunk_size(self.max_packet_size, len(arr.shape))
        except LocalProtocolError as exc:
            raise LocalProtocolError(f"{what}: {exc}; nothing was sent") from None

    def _copy_to_remote(self, arr: RemoteNDArray, data: memoryview) -> None:
        tensor, label = arr.tensor(), repr(arr)
        chunk = self._copy_chunk(arr, f"CopyToRemote to {label}")

        def requests() -> Iterable[tuple[bytes, str]]:
            for off, n, packet in P.copy_to_remote_packets(tensor, data, chunk):
                yield packet, f"CopyToRemote(bytes {off}..{off + n} of {label})"

        def on_reply(reply: P.Reply, what: str) -> None:
            self._expect_return(reply, what)

        self._pipeline(requests(), on_reply, f"CopyToRemote to {label}")

    def _copy_from_remote(self, arr: RemoteNDArray, out: memoryview) -> None:
        tensor, label = arr.tensor(), repr(arr)
        chunk = self._copy_chunk(arr, f"CopyFromRemote from {label}")
        spans: deque[tuple[int, int]] = deque()

        def requests() -> Iterable[tuple[bytes, str]]:
            for off, n, packet in P.copy_from_remote_packets(tensor, len(out), chunk):
                spans.append((off, n))
                yield packet, f"CopyFromRemote(bytes {off}..{off + n} of {label})"

        def on_reply(reply: P.Reply, what: str) -> None:
            off, n = spans.popleft()  # replies come in request order
            if type(reply) is not P.CopyAck:
                self._expect_return(reply, what)  # raises RemoteError for an Exception
                self._lose_step(f"the device answered {what} with Return")
                raise RemoteProtocolError(
                    f"the device answered {what} with Return, expected CopyAck; {_RESTART_NOTE}"
                )
            if len(reply.data) != n:
                self._lose_step(f"the reply to {what} was malformed")
                raise RemoteProtocolError(
                    f"the device answered {what} with {len(reply.data)} bytes, expected {n}; {_RESTART_NOTE}"
                )
            out[off : off + n] = reply.data

        self._pipeline(requests(), on_reply, f"CopyFromRemote from {label}")


def _largest_argument(packed: Sequence[P.PackedArg]) -> str:
    """For the error refusing an oversized CallFunc: which argument takes most of the packet."""
    if not packed:
        return ""
    sizes = [len(P.encode_packed_seq([arg])) - 8 for arg in packed]  # minus the count and the type code
    i = max(range(len(sizes)), key=sizes.__getitem__)
    kind = _ARG_KINDS.get(packed[i][0], TypeCode(packed[i][0]).name)
    return f"; its largest argument, {i} ({kind}), takes {sizes[i]:,} bytes"


_ARG_KINDS = {TypeCode.STR: "a str", TypeCode.BYTES: "bytes", TypeCode.DLTENSOR_HANDLE: "a tensor"}


def _abort_transport(transport: Any) -> None:
    """Stop `transport` at once (Transport.abort(); close() for a transport without one)."""
    abort = getattr(transport, "abort", None)
    if abort is not None:
        abort()
    else:
        transport.close()


def connect_subprocess(
    argv: Sequence[Any], cwd: Any = None, env: dict[str, str] | None = None, **session_kwargs: Any
) -> Session:
    """Start the device program `argv` and open a session over its stdin/stdout. Closing the session
    shuts the device down."""
    transport = SubprocessTransport(argv, cwd=cwd, env=env)
    try:
        return Session(transport, **session_kwargs)
    except BaseException:
        transport.abort()  # no session: nothing to wait for (a Ctrl-C during the handshake ends at once)
        raise
