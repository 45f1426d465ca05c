"""The host platform: `utvm build-device`, the executable on its own (raw bytes, no RPC client), the
platform registry, and a session through `HostPlatform().start()` calling the testing.* globals."""

from __future__ import annotations

import binascii
import json
import logging
import os
import shutil
import stat
import struct
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from utvm.cli import EXIT_USAGE
from utvm.cli import main as cli_main
from utvm.errors import PlatformError, RemoteError
from utvm.platform import available_platforms, get_platform, get_platform_class
from utvm.platform.host import HostPlatform, build_device, render_crt_config

VECTORS = Path(__file__).resolve().parent.parent / "vectors"
SESSION = {"handshake_retry_s": 0.5, "handshake_timeout_s": 20.0, "reply_timeout_s": 30.0}


def _session_vector(name: str) -> bytes:
    messages = json.loads((VECTORS / "session.json").read_text())["messages"]
    return bytes.fromhex(next(m["wire"] for m in messages if m["name"] == name))


def _unframe(data: bytes) -> list[bytes]:
    """Minimal independent decoder for the device's output: payloads of good frames, in order."""
    payloads, i = [], 0
    while True:
        start = data.find(b"\xff\xfd", i)
        if start < 0:
            return payloads
        j, raw, out = start + 2, bytearray(b"\xff\xfd"), bytearray()

        def take(n: int) -> bytes:
            nonlocal j
            got = bytearray()
            while len(got) < n:
                b = data[j]
                if b == 0xFF:
                    assert data[j + 1] == 0xFF, f"unexpected escape FF {data[j + 1]:02x} at byte {j}"
                    j += 2
                else:
                    j += 1
                got.append(b)
            return bytes(got)

        before = j
        length = struct.unpack("<I", take(4))[0]
        out += take(length)
        raw += data[before:j]
        crc = struct.unpack("<H", take(2))[0]
        assert crc == binascii.crc_hqx(bytes(raw), 0xFFFF), f"bad CRC in the frame at byte {start}"
        payloads.append(bytes(out))
        i = j


@pytest.fixture(scope="module")
def device(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`utvm build-device --platform host --with-test-functions -o PATH` (the CLI, in process)."""
    out = tmp_path_factory.mktemp("device") / "utvm_device"
    assert cli_main(["build-device", "--platform", "host", "--with-test-functions", "-o", str(out)]) == 0
    return out


def test_cli_writes_an_executable(device: Path) -> None:
    assert device.is_file()
    assert device.stat().st_mode & stat.S_IXUSR
    assert device.read_bytes()[:4] == b"\x7fELF"


def test_cli_bad_arguments(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["build-device", "--platform", "nope", "-o", str(tmp_path / "x")]) == EXIT_USAGE
    assert "unknown platform 'nope'" in capsys.readouterr().err
    assert cli_main(["build-device", "--crt-config", "TVM_CRT_MAX_ARGS", "-o", str(tmp_path / "x")]) == EXIT_USAGE
    assert "NAME=VALUE" in capsys.readouterr().err
    assert cli_main(["build-device", "--source", str(tmp_path / "missing.c"), "-o", str(tmp_path / "x")]) == EXIT_USAGE
    assert "missing.c" in capsys.readouterr().err


def test_raw_handshake_without_a_client(device: Path) -> None:
    """Bytes in, bytes out: the session-init vector gets a start-reply; end of input ends the program."""
    init = _session_vector("start_init")
    proc = subprocess.run([str(device)], input=init, capture_output=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert out[:1] == b"\xfe"  # first packet after boot is preceded by a raw FE
    assert out[1:].startswith(_session_vector("terminate"))  # ... and it is a terminate
    payloads = _unframe(out)
    assert len(payloads) == 2
    reply = payloads[1]
    assert reply[0] == 0x82 and reply[1] != 0  # initiator nonce echoed, a responder nonce chosen
    assert reply[2:] == b"\x01\x01"  # start-reply, version 1


def test_raw_shutdown_ends_the_program(device: Path) -> None:
    init = _session_vector("start_init")
    proc = subprocess.Popen([str(device)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        proc.stdin.write(init)
        proc.stdin.flush()
        head = b""
        while len(_unframe(head)) < 2:
            chunk = os.read(proc.stdout.fileno(), 4096)
            assert chunk, "device closed its output before replying"
            head += chunk
        sid = _unframe(head)[1][:2]
        shutdown = struct.pack("<Qi", 4, 1)  # RPC packet: nbytes 4, code 1 (Shutdown)
        payload = sid + b"\x10" + shutdown
        body = struct.pack("<I", len(payload)) + payload
        wire = b"\xff\xfd" + body.replace(b"\xff", b"\xff\xff")
        wire += struct.pack("<H", binascii.crc_hqx(wire, 0xFFFF)).replace(b"\xff", b"\xff\xff")
        proc.stdin.write(wire)
        proc.stdin.flush()
        assert proc.wait(timeout=30) == 0  # exits without waiting for end of input
        assert proc.stdout.read() == b""  # Shutdown gets no reply
    finally:
        proc.kill()
        proc.wait()
        proc.stdin.close()
        proc.stdout.close()
        proc.stderr.close()


def _frame(payload: bytes) -> bytes:
    wire = b"\xff\xfd" + (struct.pack("<I", len(payload)) + payload).replace(b"\xff", b"\xff\xff")
    return wire + struct.pack("<H", binascii.crc_hqx(wire, 0xFFFF)).replace(b"\xff", b"\xff\xff")


def _rpc(code: int, body: bytes) -> bytes:
    return struct.pack("<Qi", 4 + len(body), code) + body


def _seq(*items: tuple[int, bytes]) -> bytes:
    return struct.pack("<i", len(items)) + b"".join(struct.pack("<i", t) for t, _ in items) + b"".join(
        v for _, v in items)


def _str(text: str) -> bytes:
    return struct.pack("<Q", len(text)) + text.encode()


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")
def test_raw_rpc_under_valgrind(device: Path) -> None:
    """A whole RPC exchange in raw bytes (no client), under valgrind: no memory error, no leak, right answers.

    Requests are sent in one go after the handshake (the device answers them in order): InitServer,
    GetGlobalFunc, CallFunc, DevAllocData, CopyToRemote, CopyFromRemote, DevFreeData, Shutdown."""
    proc = subprocess.Popen(
        ["valgrind", "-q", "--error-exitcode=9", "--leak-check=full", "--errors-for-leak-kinds=definite",
         str(device)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        proc.stdin.write(_session_vector("start_init"))
        proc.stdin.flush()
        head = b""
        while len(_unframe(head)) < 2:
            chunk = os.read(proc.stdout.fileno(), 4096)
            assert chunk, f"device closed its output: {proc.stderr.read().decode()}"
            head += chunk
        sid = _unframe(head)[1][:2]
        normal = lambda rpc: _frame(sid + b"\x10" + rpc)  # noqa: E731
        payload = bytes(range(256)) * 2
        cpu = struct.pack("<ii", 1, 0)
        f32 = bytes([2, 32, 1, 0])
        requests = [
            _rpc(2, _str("0.8.0") + _seq()),
            _rpc(9, _seq((11, _str("testing.sleep_ms")))),
            _rpc(13, _seq((6, cpu), (0, struct.pack("<q", 512)), (0, struct.pack("<q", 64)), (5, f32 + bytes(4)))),
        ]
        proc.stdin.write(b"".join(normal(r) for r in requests))
        proc.stdin.flush()
        out = b""
        while len(_unframe(out)) < 3:
            chunk = os.read(proc.stdout.fileno(), 65536)
            assert chunk, f"device closed its output: {proc.stderr.read().decode()}"
            out += chunk
        init, func, alloc = (r[3:] for r in _unframe(out)[:3])
        assert init == struct.pack("<Qiii", 12, 4, 1, 4)  # Return void
        code, n, tc, handle = struct.unpack("<iiiQ", func[8:])
        assert (code, n, tc) == (4, 1, 3) and handle >> 16 == 0x8000 | 2  # global registry of 2 modules
        code, n, tc, data = struct.unpack("<iiiQ", alloc[8:])
        assert (code, n, tc) == (4, 1, 3) and data % 64 == 0 and data != 0
        tensor = struct.pack("<Q", data) + cpu + struct.pack("<i", 1) + f32 + struct.pack("<qQ", 128, 0)
        more = [
            _rpc(3, struct.pack("<Q", handle) + _seq((0, struct.pack("<q", 3)))),
            _rpc(7, tensor + struct.pack("<Q", len(payload)) + payload),
            _rpc(6, tensor + struct.pack("<Q", len(payload))),
            _rpc(14, _seq((6, cpu), (3, struct.pack("<Q", data)))),
            _rpc(1, b""),
        ]
        proc.stdin.write(b"".join(normal(r) for r in more))
        proc.stdin.flush()
        assert proc.wait(timeout=60) == 0, proc.stderr.read().decode()
        replies = [r[3:] for r in _unframe(out + proc.stdout.read())[3:]]
        assert len(replies) == 4  # Shutdown gets none
        assert replies[0] == struct.pack("<Qiiiiqq", 32, 4, 2, 0, 0, 0, 3)  # sleep_ms(3) -> int 3
        assert replies[1] == struct.pack("<Qiii", 12, 4, 1, 4)
        assert replies[2] == struct.pack("<Qi", 4 + len(payload), 8) + payload  # CopyAck + the bytes
        assert replies[3] == struct.pack("<Qiii", 12, 4, 1, 4)
    finally:
        proc.kill()
        proc.wait()
        for f in (proc.stdin, proc.stdout, proc.stderr):
            f.close()


def test_registry() -> None:
    from importlib import metadata

    eps = {ep.name: ep for ep in metadata.entry_points(group="utvm.platforms")}
    assert eps["host"].load() is HostPlatform  # the plugin route (pyproject) finds the same class
    assert "host" in available_platforms()
    assert get_platform_class("host") is HostPlatform
    assert isinstance(get_platform("host"), HostPlatform)
    with pytest.raises(PlatformError, match=r"unknown platform 'qemu-z80'.*host"):
        get_platform("qemu-z80")


def test_crt_config_rendering() -> None:
    text = render_crt_config({"TVM_CRT_MAX_PACKET_SIZE_BYTES": 512, "TVM_CRT_MY_NEW_LIMIT": 3})
    assert "#define TVM_CRT_MAX_PACKET_SIZE_BYTES 512\n" in text
    assert "#define TVM_CRT_MY_NEW_LIMIT 3\n" in text
    assert "#define TVM_CRT_FRAMER_BUFFER_SIZE_BYTES 1056\n" in text  # a whole escaped packet
    assert text.count("TVM_CRT_MAX_PACKET_SIZE_BYTES") == 1
    with pytest.raises(PlatformError, match="not a TVM_CRT_"):
        render_crt_config({"MAX": 1})
    with pytest.raises(PlatformError, match="TVM_CRT_MAX_ARGS = '1; evil' is not an integer"):
        render_crt_config({"TVM_CRT_MAX_ARGS": "1; evil"})


def test_session_with_the_test_functions(device: Path, caplog: pytest.LogCaptureFixture) -> None:
    with HostPlatform().start(device, **SESSION) as sess:
        a = np.arange(24, dtype="float32").reshape(2, 3, 4) - 7.5
        ra, rb = sess.array(a), sess.empty(a.shape, "float32")
        sess.get_function("testing.add_one")(ra, rb)
        np.testing.assert_array_equal(rb.numpy(), a + 1)
        with pytest.raises(RemoteError, match="something went wrong on purpose"):
            sess.get_function("testing.fail")("something went wrong on purpose")
        with pytest.raises(RemoteError, match="float32"):
            sess.get_function("testing.add_one")(sess.empty((3,), "int32"), rb)
        with caplog.at_level(logging.INFO, logger="utvm.device"):
            assert sess.get_function("testing.log")("a message from the device") == 0
            deadline = time.monotonic() + 5
            while "a message from the device" not in caplog.text and time.monotonic() < deadline:
                sess.get_function("tvm.rpc.server.GetCRTMaxPacketSize")()
        assert any(r.name == "utvm.device" and "a message from the device" in r.getMessage() for r in caplog.records)
        t0 = time.monotonic()
        assert sess.get_function("testing.sleep_ms")(30) == 30
        assert time.monotonic() - t0 >= 0.03
        assert sess.get_function("tvm.rpc.server.GetCRTMaxPacketSize")() == 2048 - 11


def test_config_override_and_system_library(tmp_path: Path) -> None:
    """crt_config overrides reach the firmware; a system library source is linked and reachable."""
    lib = tmp_path / "answer_lib.c"
    lib.write_text(
        "#include <tvm/runtime/c_runtime_api.h>\n#include <tvm/runtime/crt/module.h>\n"
        "static int answer(TVMValue* a, int* t, int n, TVMValue* r, int* rt, void* h) {\n"
        "  (void)a; (void)t; (void)n; (void)h; r->v_int64 = 42; *rt = kTVMArgInt; return 0; }\n"
        "static const TVMBackendPackedCFunc funcs[] = {answer};\n"
        'static const TVMFuncRegistry reg = {"\\001\\000answer\\000", funcs};\n'
        "static const TVMModule mod = {&reg};\n"
        "const TVMModule* TVMSystemLibEntryPoint(void) { return &mod; }\n"
    )
    plat = get_platform("host")
    exe = plat.build(with_test_functions=False, crt_config={"TVM_CRT_MAX_PACKET_SIZE_BYTES": 512},
                     system_lib_sources=[lib], output=tmp_path / "fw")
    assert exe == tmp_path / "fw"
    with plat.start(exe, **SESSION) as sess:
        assert sess.get_function("tvm.rpc.server.GetCRTMaxPacketSize")() == 512 - 11
        assert sess.system_lib().get_function("answer")() == 42
        assert sess.get_function("testing.add_one", allow_missing=True) is None
        x = np.random.default_rng(0).standard_normal(3000).astype("float32")  # > one 512-byte packet
        np.testing.assert_array_equal(sess.array(x).numpy(), x)


def test_build_errors(tmp_path: Path) -> None:
    with pytest.raises(PlatformError, match="does_not_exist.c"):
        build_device(extra_sources=[tmp_path / "does_not_exist.c"])
    bad = tmp_path / "bad.c"
    bad.write_text("int broken( {\n")
    from utvm.errors import BuildError

    with pytest.raises(BuildError, match="bad.c"):
        build_device(extra_sources=[bad])
    with pytest.raises(PlatformError, match="does not exist"):
        HostPlatform().start(tmp_path / "no_firmware")


def test_sanitized_build_serves_requests(tmp_path: Path) -> None:
    exe = build_device(with_test_functions=True, sanitize=True)
    with HostPlatform().start(exe, **SESSION) as sess:
        a = np.linspace(-1, 1, 1000, dtype="float32")
        rb = sess.empty(a.shape, "float32")
        sess.get_function("testing.add_one")(sess.array(a), rb)
        np.testing.assert_array_equal(rb.numpy(), a + 1)
        with pytest.raises(RemoteError, match="expects 2 arguments"):
            sess.get_function("testing.add_one")(rb)
