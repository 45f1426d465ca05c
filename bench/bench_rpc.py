"""Benchmarks of the link (issue 3): each figure is printed beside a baseline measured in the same run.

1. Python framing: encode (`Framer.send`) and decode (`Unframer` events, and the session layer's
   whole-packet path) of 2 KiB random payloads in MB/s, against `binascii.crc_hqx` over the same bytes
   (the CRC is the least work any implementation does per byte).
2. C framing: the CRT's framing speed from bench_framing_c (if present), beside Python's.
3. No-op call round trip over host pipes: median microseconds of a call to tvm.rpc.server.GetCRTMaxPacketSize
   on the host device (goal <= 10 us), against a raw round trip of the same bytes through `cat`.
4. Upload / download throughput of a float32 tensor (default 16 MiB) through 2 KiB packets (and 64 KiB ones,
   to show the per-packet cost), against raw pipe throughput (`cat > /dev/null`, `head -c N /dev/zero`)
   through the same transport code (goal >= 0.9x).

    python -m bench rpc [-- --quick] [-- --size-mib N] [-- --json PATH]
"""

from __future__ import annotations

import argparse
import binascii
import json
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from utvm.rpc import Session, connect_subprocess
from utvm.rpc import protocol as P
from utvm.rpc.framing import Framer, Unframer
from utvm.rpc.session import NormalMessage, SessionProtocol, State
from utvm.rpc.transport import SubprocessTransport

MB = 1e6


def _best_rate(nbytes: int, fn: Callable[[], Any], repeat: int = 5) -> float:
    """Bytes per second of the fastest of `repeat` runs of fn (which processes nbytes)."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return nbytes / best


def bench_python_framing(quick: bool) -> dict[str, float]:
    rng = np.random.default_rng(0)
    payloads = [rng.bytes(2048) for _ in range(100 if quick else 500)]
    total = sum(map(len, payloads))
    framer = Framer()
    wire = b"".join(framer.send(p) for p in payloads)

    def encode() -> None:
        f = Framer()
        for p in payloads:
            f.send(p)

    def decode_events() -> None:
        u = Unframer()
        u.receive_data(wire)
        u.events()

    sess_wire = b"".join(Framer().send(b"\x82\x66\x10" + p) for p in payloads)

    def decode_session() -> None:
        s = SessionProtocol(0x82)
        s.state, s.session_id = State.ESTABLISHED, 0x6682
        s.receive_data(sess_wire)
        assert all(type(ev) is NormalMessage for ev in s.events())

    def crc_only() -> None:
        for p in payloads:
            binascii.crc_hqx(p, 0xFFFF)

    out = {
        "crc_hqx_MBps": _best_rate(total, crc_only) / MB,
        "encode_MBps": _best_rate(total, encode) / MB,
        "decode_events_MBps": _best_rate(total, decode_events) / MB,
        "decode_session_MBps": _best_rate(total, decode_session) / MB,
    }
    base = out["crc_hqx_MBps"]
    print(f"python framing, 2 KiB random payloads (baseline crc_hqx over the payloads: {base:.0f} MB/s)")
    for key in ("encode_MBps", "decode_events_MBps", "decode_session_MBps"):
        print(f"  {key[:-5]:<16} {out[key]:8.1f} MB/s   {out[key] / base:5.2f}x crc_hqx")
    return out


def bench_c_framing(python: dict[str, float]) -> dict[str, Any]:
    """The CRT's framing speed from bench_framing_c (helper benchmark), beside Python's."""
    try:
        from bench import bench_framing_c
    except ImportError:
        print("C framing: bench/bench_framing_c.py is not present")
        return {}
    r = bench_framing_c.run(["2048", "32"])
    print(
        f"C framing (bench_framing_c, 2048-byte payloads): encode {r['encode_MBps']:.0f} MB/s, decode "
        f"{r['decode_MBps']:.0f} MB/s -> Python is {python['encode_MBps'] / r['encode_MBps']:.3f}x (encode) and "
        f"{python['decode_events_MBps'] / r['decode_MBps']:.3f}x (decode) of C"
    )
    return r


def _median_us(samples: list[float]) -> float:
    return statistics.median(samples) * 1e6


def bench_round_trip(exe: Path, quick: bool) -> dict[str, float]:
    n = 2000 if quick else 10000
    sess = connect_subprocess([exe])
    try:
        f = sess.get_function("tvm.rpc.server.GetCRTMaxPacketSize")
        request = sess.proto.framer.send(b"\0\0\x10" + P.encode_call_func(f.handle, []))
        reply = sess.proto.framer.send(b"\0\0\x10" + P.encode_return([(0, 0), (0, 2037)]))
        for _ in range(200):
            f()
        samples = []
        for _ in range(n):
            t0 = time.perf_counter()
            f()
            samples.append(time.perf_counter() - t0)
    finally:
        sess.close()
    # Baseline: the same number of bytes each way through a pipe to `cat` and back, same transport code.
    cat = SubprocessTransport(["cat"])
    size = max(len(request), len(reply))
    msg = bytes(size)
    try:
        base = []
        for i in range(n + 200):
            t0 = time.perf_counter()
            cat.write(msg)
            got = 0
            while got < size:
                got += len(cat.read(size - got, 5.0))
            if i >= 200:
                base.append(time.perf_counter() - t0)
    finally:
        cat.close()
    out = {
        "noop_call_us": _median_us(samples),
        "noop_call_p90_us": statistics.quantiles(samples, n=10)[-1] * 1e6,
        "raw_pipe_round_trip_us": _median_us(base),
        "request_wire_bytes": len(request),
    }
    print(f"no-op call round trip over host pipes (GetCRTMaxPacketSize, {n} calls):")
    print(
        f"  median {out['noop_call_us']:.1f} us (p90 {out['noop_call_p90_us']:.1f} us), goal <= 10 us; "
        f"raw {size}-byte round trip through cat: {out['raw_pipe_round_trip_us']:.1f} us "
        f"-> {out['noop_call_us'] / out['raw_pipe_round_trip_us']:.1f}x the raw pipe"
    )
    return out


def raw_pipe_rates(nbytes: int) -> tuple[float, float]:
    """(upload, download) bytes/s of plain pipes through SubprocessTransport: into `cat > /dev/null`,
    and out of `head -c N /dev/zero`."""
    data = os.urandom(1 << 20) * (nbytes >> 20) + os.urandom(nbytes & ((1 << 20) - 1))
    best_up = best_down = 0.0
    for _ in range(3):
        sink = SubprocessTransport(["sh", "-c", "cat > /dev/null"])
        t0 = time.perf_counter()
        sink.write(data, 60)
        sink.proc.stdin.close()  # type: ignore[union-attr]
        sink.proc.wait(60)
        best_up = max(best_up, nbytes / (time.perf_counter() - t0))
        sink.close()
        src = SubprocessTransport(["head", "-c", str(nbytes), "/dev/zero"])
        t0 = time.perf_counter()
        got = 0
        while got < nbytes:
            got += len(src.read(1 << 16, 60))
        best_down = max(best_down, nbytes / (time.perf_counter() - t0))
        src.close()
    return best_up, best_down


def bench_throughput(exe: Path, nbytes: int, label: str, raw: tuple[float, float], repeat: int = 3) -> dict[str, Any]:
    src = np.random.default_rng(1).random(nbytes // 4, dtype=np.float64).astype("float32")
    sess: Session = connect_subprocess([exe], reply_timeout_s=60.0)
    try:
        arr = sess.empty(src.shape, "float32")
        up = down = 0.0
        for _ in range(repeat):
            t0 = time.perf_counter()
            arr.copyfrom(src)
            t1 = time.perf_counter()
            out = arr.numpy()
            t2 = time.perf_counter()
            up, down = max(up, nbytes / (t1 - t0)), max(down, nbytes / (t2 - t1))
        if not np.array_equal(out, src):
            raise AssertionError("the downloaded tensor differs from the uploaded one")
        chunk, depth = P.copy_chunk_size(sess.max_packet_size, 1), sess.pipeline_depth
    finally:
        sess.close()
    res = {
        "upload_MBps": up / MB,
        "download_MBps": down / MB,
        "upload_ratio": up / raw[0],
        "download_ratio": down / raw[1],
        "chunk_bytes": chunk,
        "pipeline_depth": depth,
    }
    print(
        f"  {label:<24} upload {res['upload_MBps']:7.1f} MB/s ({res['upload_ratio']:.3f}x raw)   "
        f"download {res['download_MBps']:7.1f} MB/s ({res['download_ratio']:.3f}x raw)   "
        f"[{chunk}-byte chunks, {depth} in flight]"
    )
    return res


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m bench rpc", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--quick", action="store_true", help="smaller sizes and fewer calls")
    ap.add_argument("--size-mib", type=int, default=None, help="tensor size for the throughput figures")
    ap.add_argument("--json", type=Path, default=None, help="also write the figures to this file")
    ns = ap.parse_args(argv)
    size = (ns.size_mib or (4 if ns.quick else 16)) << 20
    from utvm.platform.host import build_device

    results: dict[str, Any] = {"python_framing": bench_python_framing(ns.quick)}
    results["c_framing"] = bench_c_framing(results["python_framing"])
    exe_2k = build_device(with_test_functions=True)
    exe_64k = build_device(with_test_functions=True, crt_config={"TVM_CRT_MAX_PACKET_SIZE_BYTES": 65536})
    results["round_trip"] = bench_round_trip(exe_2k, ns.quick)
    raw = raw_pipe_rates(size)
    results["raw_pipe"] = {"upload_MBps": raw[0] / MB, "download_MBps": raw[1] / MB}
    print(
        f"throughput of a {size >> 20} MiB float32 tensor (raw pipe: upload {raw[0] / MB:.0f} MB/s, "
        f"download {raw[1] / MB:.0f} MB/s; goal >= 0.9x):"
    )
    results["throughput_2k"] = bench_throughput(exe_2k, size, "2 KiB packets", raw)
    results["throughput_64k"] = bench_throughput(exe_64k, size, "64 KiB packets", raw)
    if ns.json:
        ns.json.write_text(json.dumps(results, indent=1, default=str))
    return 0
