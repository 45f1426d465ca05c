"""C framing throughput: TVMFramer encode and TVMUnframer decode MB/s (bench/c/bench_framing.c), as ratios
against memcpy of the same bytes in the same run (and crc16 alone, the floor of both).

    python -m bench framing_c [-- PAYLOAD_BYTES [TOTAL_MB]]      (defaults 2037 and 64)

The program is built with -O2 against the CRT's librpc_common (through utvm.support.cc, cached).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from utvm.support import cc

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "c" / "bench_framing.c"
CONFIG = HERE.parent / "tests" / "crt" / "configs" / "default"


def build() -> Path:
    def builder(tmp: Path) -> Path:
        libs = cc.make_crt_libs(tmp / "crt", CONFIG, ("rpc_common",), cflags=["-O2"])
        return cc.compile_link([SOURCE], tmp / "bench_framing", include_dirs=[CONFIG, cc.crt_dir() / "include"],
                               cflags=[*cc.WARNING_FLAGS, "-O2"], libs=[libs["rpc_common"]])

    crt = cc.crt_dir()
    return cc.cached_build([SOURCE, CONFIG, crt / "include", crt / "src" / "rpc_common", crt / "Makefile"],
                           ["-O2", cc.compiler_version("gcc")], "bench_framing", builder)


def run(args: list[str]) -> dict[str, float]:
    out = subprocess.run([str(build()), *args], capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def main(argv: list[str]) -> int:
    try:
        r = run(argv)
    except subprocess.CalledProcessError as exc:
        print(f"bench_framing failed (exit {exc.returncode}): {exc.stderr}", file=sys.stderr)
        return 1
    base, crc = r["memcpy_MBps"], r["crc16_MBps"]
    print(f"C framing, {r['payload_bytes']}-byte payloads x {r['packets']} "
          f"({r['wire_bytes_per_packet']} bytes on the wire each), best of 5:")
    for key, label in (("memcpy_MBps", "memcpy (baseline)"), ("crc16_MBps", "crc16 alone"),
                       ("encode_MBps", "encode (TVMFramer)"), ("decode_MBps", "decode (TVMUnframer)")):
        print(f"  {label:22s} {r[key]:10.1f} MB/s   {r[key] / base:8.4f} x memcpy   {r[key] / crc:6.3f} x crc16")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
