"""The checks of `utvm acceptance`, in the order they run (CHECKS). Each builds on what the ones before proved,
so a broken port fails the check named after what is broken first:

1. link        the session handshake, then echo and digest round trips up to the largest packet: every byte
               value (0xFF and 0xFD are escaped on the wire) arrives intact both ways
2. registries  the CRT's global registry and handles: built-ins and the conformance module found, unknown
               names and invalid handles refused, a function registered at run time callable, the model's module
3. allocator   TVMPlatformMemoryAllocate/Free seen from C (alignment, no overlap, contents kept, reuse, a huge
               request refused, exhaustion and the memory given back) and over RPC (arrays apart and aligned,
               the RPC server's limit refused as an error)
4. ndarray     tensors at and around the copy chunk and the packet size, both ways, checked on the device;
               one request of exactly TVM_CRT_MAX_PACKET_SIZE_BYTES works and one byte more is refused
5. recovery    garbage bytes on the link, a new session (the device frees the old one's memory) and, on boards
               whose TVMPlatformAbort resets, a device reset
6. timer       TVMPlatformTimerStart/Stop's states, the time evaluator's number and repeat (calls counted on
               the device), times that grow with the work
7. model       a tiny model (TFLM's hello_world, int8) run bit-exact against the reference interpreter
8. logging     a TVMLogf message reaches the host, a long one truncated to TVM_CRT_MAX_LOG_MESSAGE_BYTES

The link check starts the session; when it fails, nothing else can run.
"""

from __future__ import annotations

import math
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from utvm.acceptance.context import CheckFailed, Context, device_message, explain_drops
from utvm.errors import (
    LinkClosedError,
    LocalProtocolError,
    OracleError,
    ProtocolError,
    RemoteError,
    SessionError,
    SessionTerminatedError,
    SessionTimeoutError,
    TransportError,
    UtvmError,
)

#: Globals every utvm RPC firmware has (docs/architecture.md §4.5).
BUILTINS = ("runtime.SystemLib", "tvm.rpc.server.ModuleGetFunction", "runtime.RPCTimeEvaluator",
            "tvm.contrib.random.random_fill", "tvm.rpc.server.GetCRTMaxPacketSize")
#: The conformance module's globals (c/utvm_acceptance.c).
CONFORMANCE = ("acceptance.info", "acceptance.echo", "acceptance.digest", "acceptance.fill",
               "acceptance.alloc_check", "acceptance.registry_check", "acceptance.tick", "acceptance.spin",
               "acceptance.timer_check", "acceptance.log", "acceptance.reset")
#: Payload sizes of the link check's echo round trips.
ECHO_SIZES = (0, 1, 7, 64, 255, 256, 1000)
#: A CallFunc of one bytes argument of n bytes is a session payload of n + this (header 3, u64 length 8,
#: code 4, handle 8, count 4, type code 4, u64 length 8).
DIGEST_OVERHEAD = 39
#: Handles that name nothing: no valid bits; a module handle (its function half lacks the valid bit); a
#: well-formed handle of an empty slot (docs/architecture.md §4.3).
INVALID_HANDLES = (0x12345678, 0x80000000, 0x8000FFF0)
#: Host-side allocator check: array sizes in bytes, allocated together.
ARRAY_SIZES = (1, 17, 100, 256, 1000, 64, 333, 4096)
#: Device-side allocator check: blocks, block size, big block size (exhaustion).
ALLOC_BLOCKS, ALLOC_SIZE, ALLOC_BIG = 8, 200, 64 * 1024
#: Time evaluator check: number and repeat of the counted calls; spin iterations of the heavier workload, tried
#: in turn until the timer reads more than 0 (a port whose timer ticks every millisecond needs the larger ones).
TE_NUMBER, TE_REPEAT = 3, 4
SPIN_WORK = (200_000, 2_000_000, 20_000_000)
#: Bytes the link is fed between two requests by the recovery check: (what, bytes). None ends in a lone 0xFF.
GARBAGE: tuple[tuple[str, bytes], ...] = (
    ("64 bytes of line noise", bytes(range(0x20, 0x60))),
    ("an invalid escape FF 00", b"\xff\x00"),
    ("a packet cut short", b"\xff\xfd\x28\x00\x00\x00" + b"x" * 14),
    ("a packet with a bad CRC", b"\xff\xfd\x0c\x00\x00\x00junk payload\x00\x00"),
    ("a length field of 2^31 - 1", b"\xff\xfd\xff\xff\xff\xff\xff\xff\xff\x7fabc"),
    ("a NOP", b"\xff\xfe"),
)


def pattern(size: int, salt: int = 0) -> bytes:
    """`size` bytes in which every byte value occurs once per 256 (167 is odd: a permutation of 0..255)."""
    return bytes((i * 167 + salt) & 0xFF for i in range(size))


def digest(data: bytes) -> int:
    """What acceptance.digest returns for `data`: (length << 32) | CRC-32."""
    return (len(data) << 32) | zlib.crc32(data)


def fill_pattern(size: int, seed: int) -> np.ndarray:
    """What acceptance.fill writes: byte i = (7 i + 13 seed + (i >> 8)) mod 256."""
    i = np.arange(size, dtype=np.int64)
    return ((i * 7 + seed * 13 + (i >> 8)) & 0xFF).astype(np.uint8)


def first_difference(got: bytes, want: bytes) -> str:
    """Where two byte strings first differ, e.g. "byte 17 is 0x12, 0x11 was sent"."""
    if len(got) != len(want):
        return f"{len(got)} bytes came back, {len(want)} were sent"
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        if g != w:
            return f"byte {k} is 0x{g:02x}, 0x{w:02x} was sent"
    return "no difference"


def _parse(text: object, what: str) -> dict[str, int]:
    """`key=value ...` (the conformance module's str results) as a dict of ints."""
    if not isinstance(text, str):
        raise CheckFailed(f"{what} returned {text!r:.60}, not a str")
    out: dict[str, int] = {}
    for item in text.split():
        key, sep, value = item.partition("=")
        try:
            out[key] = int(value, 0)
        except ValueError:
            raise CheckFailed(f"{what} returned {text!r:.80}: {item!r} is not key=integer") from None
        if not sep:
            raise CheckFailed(f"{what} returned {text!r:.80}: {item!r} is not key=integer")
    return out


# --- 1. link --------------------------------------------------------------------------------------------------

def check_link(ctx: Context) -> str:
    try:
        ctx.start()
    except (SessionError, TransportError, ProtocolError, RemoteError) as exc:  # (a PlatformError: not started)
        raise CheckFailed(f"no session with the device: {exc}") from None
    sess = ctx.session
    saved = sess.reply_timeout_s
    sess.reply_timeout_s = ctx.options.link_timeout_s
    try:
        info = ctx.probe("GetGlobalFunc acceptance.info", lambda: ctx.fn("acceptance.info"))
        ctx.info = _parse(ctx.probe("acceptance.info()", info), "acceptance.info")
        for key in ("max_packet", "alloc_alignment", "max_ndarrays", "echo_max", "log_bytes"):
            if key not in ctx.info:
                raise CheckFailed(f"acceptance.info() does not say {key}: {ctx.info}")
        max_packet = ctx.info["max_packet"]
        if sess.max_packet_size != max_packet - 11:
            raise CheckFailed(f"tvm.rpc.server.GetCRTMaxPacketSize says {sess.max_packet_size}, but the firmware "
                              f"was built with TVM_CRT_MAX_PACKET_SIZE_BYTES={max_packet} (expected {max_packet - 11})")
        echo = ctx.probe("GetGlobalFunc acceptance.echo", lambda: ctx.fn("acceptance.echo"))
        dig = ctx.probe("GetGlobalFunc acceptance.digest", lambda: ctx.fn("acceptance.digest"))
        rounds = 0
        slowest = 0.0
        for k, size in enumerate(s for s in ECHO_SIZES if s <= ctx.info["echo_max"]):
            payload = pattern(size, k)
            t0 = time.monotonic()
            got = ctx.probe(f"acceptance.echo of {size} bytes", lambda p=payload: echo(p))  # type: ignore[misc]
            slowest = max(slowest, time.monotonic() - t0)
            rounds += 1
            if got != payload:
                raise CheckFailed(f"acceptance.echo of {size} bytes (request {ctx.requests}) came back changed: "
                                  f"{first_difference(bytes(got), payload)}")
        largest = max_packet - DIGEST_OVERHEAD
        for size in (largest // 2, largest):
            payload = pattern(size, size)
            t0 = time.monotonic()
            got = ctx.probe(f"acceptance.digest of {size} bytes", lambda p=payload: dig(p))  # type: ignore[misc]
            slowest = max(slowest, time.monotonic() - t0)
            rounds += 1
            if got != digest(payload):
                raise CheckFailed(f"acceptance.digest of {size} bytes (request {ctx.requests}): the device received "
                                  f"{int(got) >> 32} bytes of CRC-32 0x{int(got) & 0xFFFFFFFF:08x}; the host sent "
                                  f"{size} bytes of CRC-32 0x{zlib.crc32(payload):08x}")
        ctx.quiet_s = min(ctx.options.link_timeout_s, max(0.5, 10 * slowest))
    finally:
        sess.reply_timeout_s = saved
    return (f"session up; {rounds} round trips of 0..{largest} bytes (every byte value, 0xFF and 0xFD escaped) "
            f"intact both ways; TVM_CRT_MAX_PACKET_SIZE_BYTES={max_packet}")


# --- 2. registries --------------------------------------------------------------------------------------------

def check_registries(ctx: Context) -> str:
    from utvm.rpc.remote import RemoteFunction

    sess = ctx.session
    handles: dict[str, int] = {}
    for name in (*BUILTINS, *CONFORMANCE):
        f = sess.get_function(name, allow_missing=True)
        if f is None:
            raise CheckFailed(f"GetGlobalFunc({name!r}) found nothing")
        h = f.handle
        if (h >> 32) != 0 or not (h >> 16) & 0x8000 or not h & 0x8000:
            raise CheckFailed(f"{name}: handle 0x{h:x} is not a CRT function handle (docs/architecture.md §4.3)")
        handles[name] = h
    modules = {h >> 16 for h in handles.values()}
    if len(modules) != 1:
        raise CheckFailed(f"the globals' handles name {len(modules)} modules: {sorted(hex(m) for m in modules)}")
    if len(set(handles.values())) != len(handles):
        raise CheckFailed("two globals share a handle: " + ", ".join(f"{n}=0x{h:08x}" for n, h in handles.items()))
    if sess.get_function("acceptance.no such function", allow_missing=True) is not None:
        raise CheckFailed("GetGlobalFunc found a function that was never registered")
    ctx.remote("acceptance.registry_check", lambda: ctx.call("acceptance.registry_check"))
    late = sess.get_function("acceptance.late", allow_missing=True)
    if late is None or late() != 42:
        raise CheckFailed("acceptance.late, registered on the device at run time, is not callable over RPC")
    for h in INVALID_HANDLES:
        try:
            RemoteFunction(sess, h, f"<invalid handle 0x{h:08x}>")(1)
        except RemoteError:
            continue
        raise CheckFailed(f"CallFunc with the invalid handle 0x{h:08x} was answered with a Return, not an error")
    ctx.call("acceptance.tick", 1)  # the refusals left the session in step
    lib = sess.system_lib()
    if lib.handle & 0xFFFF or not (lib.handle >> 16) & 0x8000:
        raise CheckFailed(f"runtime.SystemLib returned 0x{lib.handle:x}, not a CRT module handle")
    try:
        RemoteFunction(sess, lib.handle, "<the model's module handle>")(1)
    except RemoteError:
        pass
    else:
        raise CheckFailed(f"the module handle 0x{lib.handle:08x} was accepted as a function handle")
    run = ctx.firmware.compiled.run_function
    if not lib.implements_function(run):
        raise CheckFailed(f"the model's module has no {run!r} (tvm.rpc.server.ModuleGetFunction)")
    if lib.implements_function("acceptance.no such function"):
        raise CheckFailed("the model's module found a function it does not have")
    return (f"{len(handles)} globals found (module 0x{modules.pop() & 0x7FFF:x}), unknown names and "
            f"{len(INVALID_HANDLES) + 1} invalid handles refused, a global registered at run time callable, "
            f"the model's module has {run}")


# --- 3. allocator ---------------------------------------------------------------------------------------------

def check_allocator(ctx: Context) -> str:
    sess = ctx.session
    r = ctx.remote("TVMPlatformMemoryAllocate/Free",
                   lambda: ctx.call("acceptance.alloc_check", ALLOC_BLOCKS, ALLOC_SIZE, ALLOC_BIG))
    seen = _parse(r, "acceptance.alloc_check")
    align = ctx.info["alloc_alignment"]
    arrays = []
    try:
        for size in ARRAY_SIZES:
            arrays.append(sess.empty((size,), "uint8"))
        spans = sorted((a.data, a.data + a.nbytes, k) for k, a in enumerate(arrays))
        for a in arrays:
            if a.data % align:
                raise CheckFailed(f"DevAllocData gave an array of {a.nbytes} bytes at 0x{a.data:x}, not aligned to "
                                  f"{align} bytes (TVM_CRT_ALLOC_ALIGNMENT_BYTES)")
        for (s0, e0, k0), (s1, _e1, k1) in zip(spans, spans[1:], strict=False):
            if s1 < e0:
                raise CheckFailed(f"DevAllocData arrays {k0} [0x{s0:x}, +{ARRAY_SIZES[k0]}) and {k1} [0x{s1:x}, "
                                  f"+{ARRAY_SIZES[k1]}) overlap by {e0 - s1} bytes")
        for k, a in enumerate(arrays):
            a.copyfrom(np.full(a.shape, k + 1, dtype=np.uint8))
        for k, a in enumerate(arrays):
            back = a.numpy()
            bad = np.flatnonzero(back != k + 1)
            if bad.size:
                raise CheckFailed(f"array {k} at 0x{a.data:x}: byte {bad[0]} reads 0x{back[bad[0]]:02x} after the "
                                  f"other arrays were written, 0x{k + 1:02x} was (they share memory)")
    finally:
        for a in arrays:
            a.free()
    huge = 1 << 62
    try:
        sess.empty((huge,), "uint8")
    except RemoteError:
        pass
    else:
        raise CheckFailed(f"DevAllocData of {huge} bytes succeeded")
    held = []
    limit = ctx.info["max_ndarrays"]
    try:
        refused = ""
        for _ in range(limit + 1):
            try:
                held.append(sess.empty((16,), "uint8"))
            except RemoteError as exc:
                refused = device_message(exc)
                break
        if not refused:
            raise CheckFailed(f"{limit + 1} arrays were allocated over RPC, over TVM_CRT_MAX_NDARRAYS={limit}")
        ctx.call("acceptance.tick", 1)  # the refusal left the session serving
    finally:
        for a in held:
            a.free()
    fit = seen["big_blocks"]
    big = f"{fit} blocks of {ALLOC_BIG // 1024} KiB fit, then a clean refusal" if fit >= 0 else \
        f"no refusal within 32 blocks of {ALLOC_BIG // 1024} KiB"
    return (f"{ALLOC_BLOCKS} blocks aligned to {seen['alignment']} and apart, twice; a huge request refused "
            f"(0x{seen['huge_error']:04x}); {big}, all given back; {len(ARRAY_SIZES)} RPC arrays apart, aligned and "
            f"kept; array {len(held) + 1} refused: {refused}")


# --- 4. ndarray -----------------------------------------------------------------------------------------------

def check_ndarray(ctx: Context) -> str:
    from utvm.rpc.protocol import copy_chunk_size

    sess = ctx.session
    max_packet = ctx.info["max_packet"]
    chunk = copy_chunk_size(sess.max_packet_size, 1)
    sizes = sorted({1, 255, chunk - 1, chunk, chunk + 1, 2 * chunk + 1, max_packet - 1, max_packet, max_packet + 1,
                    3 * max_packet + 7})
    rng = np.random.default_rng(ctx.options.seed)
    shapes: list[tuple[tuple[int, ...], str]] = [((n,), "uint8") for n in sizes]
    shapes += [((17, 33), "float32"), ((3, 5, 71), "int16")]
    for shape, dtype in shapes:
        data = rng.integers(0, 256, size=int(np.prod(shape)) * np.dtype(dtype).itemsize, dtype=np.uint8)
        host = data.view(dtype).reshape(shape)
        with sess.array(host) as arr:
            label = f"a {dtype}{list(shape)} tensor ({host.nbytes} bytes)"
            got = ctx.call("acceptance.digest", arr)
            if got != digest(host.tobytes()):
                raise CheckFailed(f"{label} uploaded: the device holds {int(got) >> 32} bytes of CRC-32 "
                                  f"0x{int(got) & 0xFFFFFFFF:08x}, the host sent CRC-32 "
                                  f"0x{zlib.crc32(host.tobytes()):08x}")
            back = arr.numpy()
            if back.tobytes() != host.tobytes():
                raise CheckFailed(f"{label} downloaded: {first_difference(back.tobytes(), host.tobytes())}")
            seed = len(label)
            ctx.call("acceptance.fill", arr, seed)
            want = fill_pattern(host.nbytes, seed).tobytes()
            filled = arr.numpy().tobytes()
            if filled != want:
                raise CheckFailed(f"{label} written by the device, downloaded: {first_difference(filled, want)}")
    refused = _packet_limit(ctx, max_packet)
    return (f"{len(shapes)} tensors of 1..{max(sizes)} bytes (copy chunk {chunk}) intact both ways; a request of "
            f"exactly {max_packet} bytes served, one of {max_packet + 1} {refused}")


def _packet_limit(ctx: Context, max_packet: int) -> str:
    """A CallFunc of exactly TVM_CRT_MAX_PACKET_SIZE_BYTES works; one byte more is refused by the client and,
    sent anyway, dropped or refused by the device, which then serves the next session."""
    sess = ctx.session
    dig = ctx.fn("acceptance.digest")
    fits = pattern(max_packet - DIGEST_OVERHEAD, 3)
    if dig(fits) != digest(fits):
        raise CheckFailed(f"acceptance.digest of a request of exactly {max_packet} bytes came back wrong")
    over = pattern(max_packet - DIGEST_OVERHEAD + 1, 5)
    try:
        dig(over)
    except LocalProtocolError:
        pass
    else:
        raise CheckFailed(f"the client sent a request of {max_packet + 1} bytes, over the device's packet")
    saved = (sess.max_packet_size, sess.reply_timeout_s)
    sess.max_packet_size += 1  # past the client's own guard, as another client might send it
    sess.reply_timeout_s = ctx.quiet_s
    mark = ctx.logs.mark()
    try:
        got = dig(over)
    except SessionTimeoutError:
        outcome = "dropped"
    except RemoteError as exc:
        outcome = f"refused ({device_message(exc)[:60]})"
    except SessionTerminatedError as exc:
        raise CheckFailed(f"a request of {max_packet + 1} bytes ended the session: {exc}") from None
    else:
        raise CheckFailed(f"the device executed a request of {max_packet + 1} bytes, over its "
                          f"TVM_CRT_MAX_PACKET_SIZE_BYTES={max_packet} (it returned 0x{int(got):x})")
    finally:
        sess.max_packet_size, sess.reply_timeout_s = saved
    sess.reply_timeout_s = ctx.options.link_timeout_s
    try:
        ctx.call("acceptance.tick", 1)
    except UtvmError as exc:
        raise CheckFailed(f"after a request of {max_packet + 1} bytes the device did not serve a new session: "
                          f"{exc}") from None
    finally:
        sess.reply_timeout_s = saved[1]
    said = explain_drops(ctx.logs.since(mark))
    return f"{outcome} ({said})" if said and outcome == "dropped" else outcome


# --- 5. recovery ----------------------------------------------------------------------------------------------

def check_recovery(ctx: Context) -> str:
    from utvm.platform.qemu.platform import CortexMFirmware

    sess = ctx.session
    saved = sess.reply_timeout_s
    sess.reply_timeout_s = ctx.options.link_timeout_s
    try:
        resyncs = sess.stats["resyncs"]
        noise = b"".join(b for _, b in GARBAGE)
        assert ctx.counter is not None
        ctx.counter.write(noise, ctx.options.link_timeout_s)
        try:
            got = ctx.call("acceptance.echo", b"after garbage")
        except UtvmError as exc:
            raise CheckFailed(f"after {len(noise)} garbage bytes ({', '.join(w for w, _ in GARBAGE)}) the next "
                              f"request failed: {exc}") from None
        if got != b"after garbage" or sess.stats["resyncs"] != resyncs:
            raise CheckFailed(f"after {len(noise)} garbage bytes the next request needed a new session or came "
                              f"back changed ({got!r:.40})")
        limit = ctx.info["max_ndarrays"]
        old = [sess.empty((64,), "uint8") for _ in range(limit // 2)]
        sess.reconnect()
        del old  # they belonged to the ended session
        held = []
        try:
            for k in range(limit):
                try:
                    held.append(sess.empty((64,), "uint8"))
                except RemoteError as exc:
                    raise CheckFailed(f"after a new session only {k} of {limit} arrays could be allocated: the "
                                      f"device kept the old session's arrays ({device_message(exc)[:60]})") from None
        finally:
            for a in held:
                a.free()
        if not isinstance(ctx.plat, CortexMFirmware):
            reset = "device reset not tried (this platform's TVMPlatformAbort ends the device)"
        else:
            closed: LinkClosedError | None = None
            try:
                ctx.call("acceptance.reset")
            except LinkClosedError as exc:  # the emulator ended, or a USB serial port went away with the reset
                closed = exc
            except SessionTerminatedError:
                pass
            except SessionTimeoutError:
                raise CheckFailed(f"after TVMPlatformAbort the board did not reboot within {sess.reply_timeout_s:g} "
                                  "s (its boot sends a session TERMINATE): TVMPlatformAbort must reset") from None
            else:
                raise CheckFailed("acceptance.reset returned: TVMPlatformAbort came back")
            try:
                if closed is None:
                    sess.reconnect()
                elif not ctx.reopen():
                    raise CheckFailed(f"TVMPlatformAbort ended the device instead of resetting it: {closed}")
                ctx.call("acceptance.tick", 1)
            except UtvmError as exc:
                raise CheckFailed(f"after the board reset no new session started: {exc}") from None
            reset = "TVMPlatformAbort reset the board and a new session started"
    finally:
        sess.reply_timeout_s = saved
    return (f"{len(noise)} garbage bytes ignored, the session kept; a new session freed the old one's arrays; "
            f"{reset}")


# --- 6. timer -------------------------------------------------------------------------------------------------

def check_timer(ctx: Context) -> str:
    sess = ctx.session
    _parse(ctx.remote("TVMPlatformTimerStart/Stop", lambda: ctx.call("acceptance.timer_check")),
           "acceptance.timer_check")
    before = ctx.call("acceptance.tick", 1)
    with sess.time_evaluator("acceptance.tick", number=TE_NUMBER, repeat=TE_REPEAT, min_repeat_ms=0) as ev:
        times = ev(0)
    calls = ctx.call("acceptance.tick", 1) - before
    if calls != 1 + TE_NUMBER * TE_REPEAT:
        raise CheckFailed(f"a time evaluator of number={TE_NUMBER} repeat={TE_REPEAT} called the function {calls} "
                          f"times, not 1 + {TE_NUMBER} x {TE_REPEAT} = {1 + TE_NUMBER * TE_REPEAT}")
    if len(times) != TE_REPEAT or not all(math.isfinite(t) and t >= 0 for t in times):
        raise CheckFailed(f"the time evaluator returned {times}: expected {TE_REPEAT} finite times >= 0")
    with sess.time_evaluator("acceptance.spin", number=1, repeat=5, min_repeat_ms=0) as ev:
        idle = ev(0)
        for work in SPIN_WORK:  # a coarse timer (a 1 ms tick) reads 0 for little work: more until it reads some
            busy = ev(work)
            if min(busy) > 0:
                break
    if not (min(busy) > 0 and min(busy) > min(idle)):
        raise CheckFailed(f"{work} loop iterations measured {min(busy):.3g} s, no more than none "
                          f"({min(idle):.3g} s): the timer does not advance with the work")
    return (f"start/stop states refused as kTvmErrorPlatformTimerBadState; number={TE_NUMBER} repeat={TE_REPEAT} "
            f"made {calls} calls (one warm-up); {work} iterations {min(busy) * 1e6:.1f} us > an empty call "
            f"{min(idle) * 1e6:.2f} us")


# --- 7. model -------------------------------------------------------------------------------------------------

def check_model(ctx: Context) -> str:
    from utvm import evaluate

    fw = ctx.firmware
    compiled = fw.compiled
    inputs = evaluate.read_inputs(compiled, {}, seed=ctx.options.seed)
    outputs, _ = evaluate.run_on_device(ctx.session, compiled, inputs)
    try:
        refs, oracle = evaluate.reference(fw.model_path, compiled, inputs)
    except OracleError as exc:  # the model's own interpreter is not installed: utvm's reference semantics
        from utvm.ir import run_reference

        res = run_reference(compiled.graph, dict(zip(compiled.graph.inputs, inputs, strict=True)),
                            rounding=compiled.options.rounding)
        refs = [res[name] for name in compiled.graph.outputs]
        oracle = f"utvm's reference semantics ({exc})"
    for k, (got, want) in enumerate(zip(outputs, refs, strict=True)):
        got, want = np.asarray(got), np.asarray(want)
        if got.shape != want.shape or got.tobytes() != want.astype(got.dtype).tobytes():
            differs = np.flatnonzero(got.ravel() != want.astype(got.dtype).ravel()) if got.shape == want.shape else []
            where = (f"element {int(differs[0])} is {got.ravel()[differs[0]]}, the reference {want.ravel()[differs[0]]}"
                     if len(differs) else f"shape {got.shape}, the reference {want.shape}")
            raise CheckFailed(f"{fw.model_path.name} output {k} ({compiled.interface.outputs[k].name}) is not "
                              f"bit-exact with {oracle}: {where}")
    return f"{fw.model_path.name}: {len(outputs)} output(s) bit-exact with {oracle} (seed {ctx.options.seed})"


# --- 8. logging -----------------------------------------------------------------------------------------------

def check_logging(ctx: Context) -> str:
    token = f"utvm acceptance log check {ctx.options.seed:x}-{ctx.requests}"
    mark = ctx.logs.mark()
    ctx.call("acceptance.log", token)
    if token not in ctx.logs.since(mark):
        raise CheckFailed(f"TVMLogf({token!r}) on the device never reached the host (a session log message); "
                          f"it received {ctx.logs.since(mark)[:3]}")
    limit = ctx.info["log_bytes"]
    long = "".join(chr(0x41 + k % 26) for k in range(2 * limit + 10))
    mark = ctx.logs.mark()
    ctx.call("acceptance.log", long)
    got = ctx.logs.since(mark)
    if len(got) != 1 or not long.startswith(got[0]) or not 0 < len(got[0]) < limit:
        raise CheckFailed(f"a message of {len(long)} characters arrived as {[g[:20] + '...' for g in got]} "
                          f"(lengths {[len(g) for g in got]}), expected one cut to under {limit} "
                          "(TVM_CRT_MAX_LOG_MESSAGE_BYTES)")
    return f"a TVMLogf message reached the host; one of {len(long)} characters arrived cut to {len(got[0])}"


@dataclass(frozen=True)
class Check:
    name: str
    run: Callable[[Context], str]


#: Every check, in the order it runs.
CHECKS: tuple[Check, ...] = (
    Check("link", check_link),
    Check("registries", check_registries),
    Check("allocator", check_allocator),
    Check("ndarray", check_ndarray),
    Check("recovery", check_recovery),
    Check("timer", check_timer),
    Check("model", check_model),
    Check("logging", check_logging),
)
