"""A device written in Python, speaking the link exactly as docs/architecture.md §5 fixes it.

It is the executable definition the client tests run against (in memory, or as a subprocess with
`python fake_device.py [--max-packet-size N]` speaking on stdin/stdout), independent of the C device: the
session responder comes from `utvm.rpc.session`, requests are decoded with `utvm.rpc.protocol`, and the
server behaviour (reply layouts, handles, syscalls, copies, built-in globals, the test functions
testing.add_one/fail/log/sleep_ms) follows the MinRPC rules of §5.3. It imports nothing from this
directory so it also runs as a script.
"""

from __future__ import annotations

import argparse
import os
import struct
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from utvm.errors import RemoteProtocolError, SessionTimeoutError
from utvm.rpc import protocol as P
from utvm.rpc.protocol import DLDataType, DLTensorRef, RPCCode
from utvm.rpc.session import NEED_DATA, NormalMessage, SessionEstablished, SessionProtocol
from utvm.rpc.transport import Transport
from utvm.runtime.typecodes import TypeCode

MAX_REGISTERED_MODULES = 2
GLOBAL_MODULE = MAX_REGISTERED_MODULES  # the global registry's module index
SYSTEM_LIB_MODULE = 0
TIMER_MODULE = 0x7FFF


def function_handle(module_index: int, function_index: int) -> int:
    return ((module_index | 0x8000) << 16) | (function_index | 0x8000)


class FakeError(Exception):
    """A device-side failure: answered with an Exception carrying the text."""


class FakeDevice:
    """The device end of the link. Feed it wire bytes with `receive(data)`; it returns its wire output."""

    def __init__(
        self,
        max_packet_size: int = 2048,
        nonce: int = 0x66,
        boot_terminate: bool = True,
        memory_limit: int = 1 << 26,
    ) -> None:
        self.max_packet_size = max_packet_size  # TVM_CRT_MAX_PACKET_SIZE_BYTES: session payload limit
        self.session = SessionProtocol(nonce, max_packet_size)
        self.memory: dict[int, bytearray] = {}
        self.memory_limit = memory_limit
        self._next_addr = 0x1000_0000
        self.out = bytearray()
        self.shutdown = False
        self.requests: list[P.Request] = []
        self.rejected = 0  # requests answered with an Exception because they were malformed
        self.freed_handles: list[int] = []
        self.globals: dict[str, Callable[..., tuple[int, Any]]] = {
            "runtime.SystemLib": lambda: (TypeCode.MODULE_HANDLE, self.SYSTEM_LIB_HANDLE),
            "tvm.rpc.server.ModuleGetFunction": self._module_get_function,
            "tvm.rpc.server.GetCRTMaxPacketSize": lambda: (TypeCode.INT, self.max_packet_size - 11),
            "runtime.RPCTimeEvaluator": self._time_evaluator,
            "tvm.contrib.random.random_fill": self._random_fill,
            "testing.add_one": self._add_one,
            "testing.fail": self._fail,
            "testing.log": self._log,
            "testing.sleep_ms": self._sleep_ms,
            "testing.echo": lambda *args: args[0] if args else (TypeCode.NULL, None),
        }
        self._global_names = list(self.globals)
        self._system_lib = ["testing.add_one", "testing.sleep_ms"]
        self.max_timers = 4  # live time evaluators, like TVM_CRT_MAX_TIME_EVALUATORS
        self.timers: dict[int, tuple[Callable[..., tuple[int, Any]], int, int, int]] = {}
        self._timer_index = 0
        if boot_terminate:
            self.out += self.session.terminate()

    SYSTEM_LIB_HANDLE = 0xA0000000

    # --- the byte interface --------------------------------------------------------------------------------
    def receive(self, data: bytes) -> bytes:
        self.session.receive_data(data)
        while (ev := self.session.next_event()) is not NEED_DATA:
            self.out += self.session.data_to_send()
            if type(ev) is SessionEstablished:
                self.memory.clear()  # as utvm's CRT does: a new session frees what RPC allocated
            if type(ev) is NormalMessage:
                reply = self.handle(ev.body)
                if reply is not None:
                    self.out += self.session.send_normal(reply)
        self.out += self.session.data_to_send()
        out, self.out = bytes(self.out), bytearray()
        return out

    # --- the RPC server -------------------------------------------------------------------------------
    def handle(self, packet: bytes) -> bytes | None:
        try:
            req = P.decode_request(packet)
        except RemoteProtocolError as exc:
            self.rejected += 1
            return P.encode_exception(f"malformed request: {exc}")
        self.requests.append(req)
        try:
            return self._dispatch(req)
        except FakeError as exc:
            return P.encode_exception(str(exc))

    def _dispatch(self, req: P.Request) -> bytes | None:
        if isinstance(req, P.InitServer):
            if req.version != P.RPC_PROTOCOL_VERSION or req.args:
                raise FakeError(f"InitServer: unsupported protocol {req.version!r}")
            return P.encode_return([(TypeCode.NULL, None)])
        if isinstance(req, P.Shutdown):
            self.shutdown = True
            return None
        if isinstance(req, P.CallFunc):
            return self._call(req.handle, req.args)
        if isinstance(req, P.Syscall):
            return self._syscall(req.code, req.args)
        if isinstance(req, P.CopyToRemote):
            buf, off = self._region(req.tensor, len(req.data))
            buf[off : off + len(req.data)] = req.data
            return P.encode_return([(TypeCode.NULL, None)])
        if isinstance(req, P.CopyFromRemote):
            buf, off = self._region(req.tensor, req.nbytes)
            return P.encode_copy_ack(bytes(buf[off : off + req.nbytes]))
        raise FakeError(f"unsupported request {type(req).__name__}")

    def _region(self, t: DLTensorRef, nbytes: int) -> tuple[bytearray, int]:
        buf = self.memory.get(t.data)
        if buf is None:
            raise FakeError(f"tensor data 0x{t.data:x} is not an allocation")
        if t.byte_offset + nbytes > len(buf):
            raise FakeError(f"copy of {nbytes} bytes at offset {t.byte_offset} overruns the {len(buf)}-byte tensor")
        return buf, t.byte_offset

    def _syscall(self, code: RPCCode, args: tuple[P.PackedArg, ...]) -> bytes:
        codes = [int(tc) for tc, _ in args]
        if code == RPCCode.GET_GLOBAL_FUNC:
            if codes != [TypeCode.STR]:
                raise FakeError(f"GetGlobalFunc: expected one STR argument, got type codes {codes}")
            name = args[0][1]
            handle = function_handle(GLOBAL_MODULE, self._global_names.index(name)) if name in self.globals else 0
            return P.encode_return([(TypeCode.OPAQUE_HANDLE, handle)])
        if code == RPCCode.FREE_HANDLE:
            if codes != [TypeCode.OPAQUE_HANDLE, TypeCode.INT]:
                raise FakeError(f"FreeHandle: expected (handle, int), got type codes {codes}")
            handle = args[0][1]
            if (handle >> 16) & 0x7FFF == TIMER_MODULE:
                if self.timers.pop(handle & 0x7FFF, None) is None:
                    raise FakeError(f"FreeHandle: time evaluator 0x{handle:08x} is not live")
            self.freed_handles.append(handle)
            return P.encode_return([(TypeCode.NULL, None)])
        if code == RPCCode.DEV_ALLOC_DATA:
            if codes != [TypeCode.DEVICE, TypeCode.INT, TypeCode.INT, TypeCode.DATA_TYPE]:
                raise FakeError(f"DevAllocData: expected (device, int, int, dtype), got type codes {codes}")
            nbytes = args[1][1]
            if nbytes < 0 or sum(map(len, self.memory.values())) + nbytes > self.memory_limit:
                raise FakeError(f"DevAllocData: cannot allocate {nbytes} bytes")
            addr = self._next_addr
            self._next_addr += (max(nbytes, 1) + 63) // 64 * 64
            self.memory[addr] = bytearray(nbytes)
            return P.encode_return([(TypeCode.OPAQUE_HANDLE, addr)])
        if code == RPCCode.DEV_FREE_DATA:
            if codes != [TypeCode.DEVICE, TypeCode.OPAQUE_HANDLE] or args[1][1] not in self.memory:
                raise FakeError(f"DevFreeData: bad arguments {args!r}")
            del self.memory[args[1][1]]
            return P.encode_return([(TypeCode.NULL, None)])
        raise FakeError(f"syscall {code.name} is not supported")

    def _call(self, handle: int, args: tuple[P.PackedArg, ...]) -> bytes:
        module, index = (handle >> 16) & 0x7FFF, handle & 0x7FFF
        if handle >> 31 != 1 or not handle & 0x8000:
            raise FakeError(f"invalid function handle 0x{handle:08x}")
        if module == GLOBAL_MODULE and index < len(self._global_names):
            fn = self.globals[self._global_names[index]]
        elif module == SYSTEM_LIB_MODULE and index < len(self._system_lib):
            fn = self.globals[self._system_lib[index]]
        elif module == TIMER_MODULE and index in self.timers:
            fn = lambda *a: self._run_timer(index, *a)  # noqa: E731
        else:
            raise FakeError(f"no function for handle 0x{handle:08x}")
        try:
            rtc, value = fn(*args)
        except TypeError as exc:
            raise FakeError(f"bad arguments: {exc}") from exc
        if rtc in (TypeCode.PACKED_FUNC_HANDLE, TypeCode.MODULE_HANDLE):
            return P.encode_return([(TypeCode.INT, int(rtc)), (TypeCode.OPAQUE_HANDLE, value)])
        return P.encode_return([(TypeCode.INT, int(rtc)), (rtc, value)])

    # --- globals: each takes (type code, value) pairs and returns one --------------------------------------
    def _module_get_function(self, mod: P.PackedArg, name: P.PackedArg, query: P.PackedArg) -> tuple[int, Any]:
        if mod != (TypeCode.MODULE_HANDLE, self.SYSTEM_LIB_HANDLE) or name[0] != TypeCode.STR:
            raise FakeError(f"ModuleGetFunction: bad arguments {mod!r}, {name!r}")
        if name[1] not in self._system_lib:
            return (TypeCode.NULL, None)
        return (
            TypeCode.PACKED_FUNC_HANDLE,
            function_handle(SYSTEM_LIB_MODULE, self._system_lib.index(name[1])),
        )

    def _time_evaluator(self, *args: P.PackedArg) -> tuple[int, Any]:
        if len(args) < 7 or args[0][0] not in (TypeCode.MODULE_HANDLE, TypeCode.NULL) or args[1][0] != TypeCode.STR:
            raise FakeError(
                "RPCTimeEvaluator: expected (module or null, name, device_type, device_id, number, "
                "repeat, min_repeat_ms, ...)"
            )
        name = args[1][1]
        if name not in (self.globals if args[0][0] == TypeCode.NULL else self._system_lib):
            raise FakeError(f"RPCTimeEvaluator: no function {name!r} in the module")
        number, repeat, min_repeat_ms = (a[1] for a in args[4:7])
        if len(self.timers) >= self.max_timers:
            raise FakeError(f"RPCTimeEvaluator: all {self.max_timers} time evaluators are live")
        self._timer_index += 1
        self.timers[self._timer_index] = (self.globals[name], number, repeat, min_repeat_ms)
        return (TypeCode.PACKED_FUNC_HANDLE, function_handle(TIMER_MODULE, self._timer_index))

    def _run_timer(self, index: int, *args: P.PackedArg) -> tuple[int, Any]:
        fn, number, repeat, min_repeat_ms = self.timers[index]
        fn(*args)  # warm-up
        results = []
        for _ in range(repeat):
            n = number
            while True:
                t0 = time.perf_counter()
                for _ in range(n):
                    fn(*args)
                dt = time.perf_counter() - t0
                if dt * 1000 >= min_repeat_ms:
                    break
                n = max(int(n * 1.618), n + 1)
            results.append(dt / n)
        return (TypeCode.BYTES, struct.pack(f"<{repeat}d", *results))

    def _tensor(self, arg: P.PackedArg, what: str) -> np.ndarray:
        tc, t = arg
        if tc != TypeCode.DLTENSOR_HANDLE:
            raise FakeError(f"{what}: expected a DLTensor, got type code {int(tc)}")
        if t.dtype != DLDataType(2, 32, 1):
            raise FakeError(f"{what}: expected float32, got {t.dtype}")
        buf, off = self._region(t, t.nbytes)
        return np.frombuffer(buf, dtype="<f4", count=t.nbytes // 4, offset=off)

    def _add_one(self, a: P.PackedArg, b: P.PackedArg) -> tuple[int, Any]:
        x, y = self._tensor(a, "testing.add_one a"), self._tensor(b, "testing.add_one b")
        if x.size != y.size:
            raise FakeError(f"testing.add_one: a has {x.size} elements, b {y.size}")
        y[:] = x + np.float32(1)
        return (TypeCode.NULL, None)

    def _fail(self, msg: P.PackedArg) -> tuple[int, Any]:
        raise FakeError(str(msg[1]))

    def _log(self, msg: P.PackedArg) -> tuple[int, Any]:
        self.out += self.session.send_log(str(msg[1]))
        return (TypeCode.INT, 0)

    def _sleep_ms(self, n: P.PackedArg) -> tuple[int, Any]:
        time.sleep(n[1] / 1000)
        return (TypeCode.INT, n[1])

    def _random_fill(self, t: P.PackedArg) -> tuple[int, Any]:
        buf, off = self._region(t[1], t[1].nbytes)
        buf[off : off + t[1].nbytes] = os.urandom(t[1].nbytes)
        return (TypeCode.NULL, None)


class FakeDeviceTransport(Transport):
    """An in-memory transport to a FakeDevice: a write is processed at once, its output is read back."""

    pipeline_depth = 8

    def __init__(self, device: FakeDevice | None = None) -> None:
        self.device = device or FakeDevice()
        self._rx = bytearray(self.device.receive(b""))
        self.closed = False
        self.written = bytearray()

    def write(self, data: bytes | bytearray | memoryview, timeout: float | None = None) -> None:
        self.written += data
        self._rx += self.device.receive(bytes(data))

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        if not self._rx:
            if timeout is None:
                raise RuntimeError("FakeDeviceTransport.read would block for ever")
            time.sleep(timeout)
            raise SessionTimeoutError(f"no data from the fake device within {timeout:.3g} s")
        out = bytes(self._rx[:max_bytes])
        del self._rx[:max_bytes]
        return out

    def close(self) -> None:
        self.closed = True

    def describe(self) -> str:
        return "fake device"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--max-packet-size", type=int, default=2048)
    ns = ap.parse_args(argv)
    dev = FakeDevice(max_packet_size=ns.max_packet_size)
    rfd, wfd = sys.stdin.fileno(), sys.stdout.fileno()

    def write_all(data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(wfd, view) :]

    write_all(dev.receive(b""))
    while not dev.shutdown:
        data = os.read(rfd, 1 << 16)
        if not data:
            break
        write_all(dev.receive(data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
