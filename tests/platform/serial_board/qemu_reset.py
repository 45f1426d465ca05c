"""`[link] reset_command` of the QEMU stand-in board: press its reset button.

    python qemu_reset.py PORT

Sends `system_reset` to the monitor of the QEMU that qemu_flash.py started for PORT (unix socket PORT.mon)
and waits for the monitor's next prompt, so the board is resetting when this returns.
"""

from __future__ import annotations

import socket
import sys
from pathlib import Path

TIMEOUT_S = 10.0


def read_prompt(sock: socket.socket) -> bytes:
    data = b""
    while not data.endswith(b"(qemu) "):
        chunk = sock.recv(4096)
        if not chunk:
            raise ConnectionError(f"the monitor closed the connection; it said {data[-200:]!r}")
        data += chunk
    return data


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: qemu_reset.py PORT", file=sys.stderr)
        return 2
    port = Path(argv[0])
    monitor = port.with_name(port.name + ".mon")
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(TIMEOUT_S)
            sock.connect(str(monitor))
            read_prompt(sock)
            sock.sendall(b"system_reset\n")
            read_prompt(sock)
    except OSError as exc:
        print(f"cannot reset the board through {monitor}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
