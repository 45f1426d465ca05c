"""`utvm run` whose model call never returns: a stand-in for an operator that hangs on the device.

    python tests/cli/hang_driver.py run MODEL --platform host [--timeout S] ...

The firmware is the usual evaluation firmware plus the test functions; the model call is replaced by
`testing.sleep_ms(10 minutes)`. Before that call the driver prints `DEVICE_PID <pid>` and `READY` on
stdout, so a test can interrupt it (SIGINT) at the right moment or wait for --timeout to expire.
"""

from __future__ import annotations

import sys
from typing import Any

import utvm.cli.run as run_cmd
from utvm.cli import main
from utvm.evaluate import build_firmware as evaluation_firmware


def build_firmware(compiled: Any, platform: str = "host", *args: Any, **kw: Any) -> Any:
    return evaluation_firmware(compiled, platform, *args, with_test_functions=True, **kw)


def run_on_device(session: Any, compiled: Any, inputs: Any, repeat: int = 0) -> Any:
    sleep = session.get_function("testing.sleep_ms")
    proc = getattr(session.transport, "proc", None)
    print(f"DEVICE_PID {proc.pid if proc is not None else -1}", flush=True)
    print("READY", flush=True)
    sleep(600_000)
    raise AssertionError("testing.sleep_ms returned early")


run_cmd.build_firmware = build_firmware
run_cmd.run_on_device = run_on_device

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
