"""`[flash] command` of the QEMU stand-in board: "flash" = (re)start QEMU on the ELF, UART0 on a pty.

    python qemu_flash.py FIRMWARE.elf PORT

Kills the QEMU a previous flash of PORT started (its pid is in PORT.pid), starts qemu-system-arm
(mps2-an386) in the background with UART0 on a new pty and its monitor on the unix socket PORT.mon (for
qemu_reset.py), waits for QEMU's "char device redirected to /dev/pts/N" line, and points the symbolic link
PORT at that pty, as a board's /dev/ttyACM0 would appear. QEMU's output goes to PORT.log. Exit status 0 when
the board is up; 1 with a one-line reason otherwise. The test that uses it kills QEMU by the pid in PORT.pid.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

MACHINE = "mps2-an386"
START_TIMEOUT_S = 20.0
_REDIRECTED = re.compile(rb"char device redirected to (/dev/pts/\d+)")


def kill_previous(pid_file: Path) -> None:
    """Stop the QEMU of an earlier flash (only if the pid is still a qemu-system-arm)."""
    try:
        pid = int(pid_file.read_text())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError):
        return
    if b"qemu-system-arm" not in cmdline:
        return
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10.0
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        try:  # our child only if this process started it; otherwise wait for /proc to drop it
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
        state = Path(f"/proc/{pid}/stat")
        try:
            if state.read_text().split(") ", 1)[1].startswith("Z"):
                return  # a zombie of another parent holds no pty
        except (OSError, IndexError):
            return
        time.sleep(0.01)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: qemu_flash.py FIRMWARE.elf PORT", file=sys.stderr)
        return 2
    elf, port = Path(argv[0]), Path(argv[1])
    pid_file, monitor, log = (port.with_name(port.name + ext) for ext in (".pid", ".mon", ".log"))
    kill_previous(pid_file)
    for p in (monitor, port):
        p.unlink(missing_ok=True)
    cmd = ["qemu-system-arm", "-M", MACHINE, "-display", "none", "-nodefaults", "-nic", "none",
           "-chardev", "pty,id=uart0", "-serial", "chardev:uart0",
           "-monitor", f"unix:{monitor},server=on,wait=off",
           "-semihosting-config", "enable=on,target=native", "-kernel", str(elf)]
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    pid_file.write_text(str(proc.pid))
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        m = _REDIRECTED.search(log.read_bytes())
        if m and monitor.exists():
            break
        if proc.poll() is not None:
            print(f"qemu exited with {proc.returncode}: {log.read_text(errors='replace').strip()}", file=sys.stderr)
            return 1
        if time.monotonic() > deadline:
            print(f"qemu did not report its pty within {START_TIMEOUT_S:g} s", file=sys.stderr)
            return 1
        time.sleep(0.01)  # QEMU writes the line once, right after it starts
    tmp_link = port.with_name(port.name + ".new")
    tmp_link.unlink(missing_ok=True)
    tmp_link.symlink_to(m.group(1).decode())
    os.replace(tmp_link, port)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
