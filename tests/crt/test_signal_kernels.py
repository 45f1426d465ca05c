"""The signal kernels' fixed C (src/utvm/crt/src/kernels/signal), exactly as the code generator emits it, built
with the strict flags (plain and under ASan+UBSan) and checked against utvm.ops.signal's Python definitions
(bit for bit) and numpy's FFT (approximately). test_signal_kernels.c is the C side; the end-to-end check of
the kernels against TFLM's own is tests/tflm/test_tflm_signal.py."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Sequence
from pathlib import Path

import cbuild
import numpy as np
import pytest

from utvm.compiler.kernels import helper_source
from utvm.compiler.kernels.signal import FFT_TEMPLATES, RUNTIME_DIR, RUNTIME_HELPERS
from utvm.ops import signal as sig
from utvm.support import cc

SIGNAL_DIR = cc.crt_dir() / RUNTIME_DIR
_SAN_VARIANTS = [False, True]
_FFT_SUFFIX = {"int16": "i16", "int32": "i32", "float32": "f32"}
# even fft lengths whose half uses every radix KISS FFT has a butterfly for (2, 3, 4, 5) alone and mixed
FFT_LENGTHS = (4, 6, 8, 10, 12, 16, 20, 24, 30, 40, 48, 60, 64, 120, 128, 480, 512)


def _emitted(keys: Sequence[str]) -> str:
    """What a generated source holds for helpers `keys` (each after its dependencies, once each)."""
    order: list[str] = []
    for key in keys:
        for k in (*RUNTIME_HELPERS[key].deps, key):
            if k not in order:
                order.append(k)
    return "\n".join(helper_source(k) for k in order)


@pytest.fixture(scope="module", params=_SAN_VARIANTS, ids=["plain", "asan"])
def runner(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    sanitize: bool = request.param
    tmp = tmp_path_factory.mktemp("signal_kernels")
    (tmp / "signal_kernels.h").write_text(_emitted(list(RUNTIME_HELPERS)) + "\n")
    san = list(cc.SANITIZE_FLAGS) if sanitize else []
    return cc.compile_link([cbuild.HERE / "test_signal_kernels.c"], tmp / "test_signal_kernels", include_dirs=[tmp],
                           cflags=[*cc.WARNING_FLAGS, "-O1", "-g", *san], ldflags=san)


def _run(exe: Path, requests: list[str]) -> list[list[str]]:
    req = exe.parent / "requests.txt"
    req.write_text("\n".join(requests) + "\n")
    out = cbuild.run_test(exe, args=[str(req)], timeout=300).splitlines()
    assert len(out) == len(requests)
    return [line.split() for line in out]


def _ints(values: np.ndarray | Sequence[int]) -> str:
    return " ".join(str(int(v)) for v in np.asarray(values).reshape(-1).tolist())


def _u32_all_magnitudes(rng: np.random.Generator, n: int) -> list[int]:
    bits = rng.integers(1, 33, size=n)
    return [int(rng.integers(1 << (int(b) - 1), 1 << int(b), dtype=np.uint64)) for b in bits]


# ---- TFLM's integer helpers ---------------------------------------------------------------------------
def test_integer_helpers(runner: Path) -> None:
    rng = np.random.default_rng(0)
    edges32 = [0, 1, 2, 3, 4, 255, 256, 65535, 65536, (1 << 31) - 1, 1 << 31, (1 << 32) - 1]
    u32 = edges32 + _u32_all_magnitudes(rng, 3000)
    squares = [k * k + d for k in (1, 2, 65535, 65536, (1 << 32) - 1, 3037000499) for d in (-1, 0, 1)]
    u64 = [0, 1, 2, (1 << 32) - 1, 1 << 32, (1 << 64) - 1, (1 << 63), *[s for s in squares if 0 <= s < 1 << 64]]
    u64 += [int(rng.integers(0, 1 << min(b, 63), dtype=np.uint64)) << max(0, b - 63) for b in range(1, 65)
            for _ in range(40)]
    # log32 is called with x > 1 (the kernel tests it); cover every segment of the table at several octaves
    logs = [x for x in u32 if x > 1] + [(1 << e) + (k << max(0, e - 7)) for e in (1, 7, 16, 24, 31) for k in range(128)]
    logs = [x for x in logs if 1 < x < 1 << 32]
    scales = (1, 1600, 65535, (1 << 32) - 1)
    # gain LUTs: a decreasing one of the magnitudes PCAN's has, and any int16 values
    luts = (np.sort(rng.integers(0, 1 << 13, size=sig.PCAN_LUT_MIN))[::-1].astype(np.int16),
            rng.integers(-32768, 32768, size=sig.PCAN_LUT_MIN).astype(np.int16))
    requests = [f"msb32 {len(u32)} {_ints(u32)}", f"sqrt64 {len(u64)} {_ints(u64)}",
                f"shrink {len(u32)} {_ints(u32)}"]
    requests += [f"log32 {s} {len(logs)} {_ints(logs)}" for s in scales]
    requests += [f"wdf {len(t)} {_ints(t)} {len(u32)} {_ints(u32)}" for t in luts]
    out = _run(runner, requests)
    got = [[int(v) for v in line] for line in out]
    assert got[0] == [sig.msb32(x) for x in u32]
    assert got[1] == [sig.sqrt64(x) for x in u64]
    assert got[2] == [sig.pcan_shrink(x) for x in u32]
    for line, s in zip(got[3:3 + len(scales)], scales, strict=True):
        assert line == [sig.log32(x, s) for x in logs], f"log32 with out_scale {s}"
    for line, t in zip(got[3 + len(scales):], luts, strict=True):
        assert line == [sig.wide_dynamic_function(x, t) & 0xFFFFFFFF for x in u32]


# ---- KISS FFT -------------------------------------------------------------------------------------------
def _fft_request(dtype: str, inverse: bool, nfft: int, row: np.ndarray) -> str:
    """A request carrying the tables signal_rfft / signal_irfft get from the kernel (kernels/signal.py)."""
    ncfft = nfft // 2
    stages = sig.fft_stages(ncfft)
    tw = [v for pair in sig.fft_twiddles(ncfft, inverse, dtype) for v in pair]
    stw = [v for pair in sig.fft_super_twiddles(nfft, inverse, dtype) for v in pair]

    def text(values: Sequence[float] | np.ndarray) -> str:
        if dtype == "float32":
            return " ".join(f"{float(np.float32(v)):.9g}" for v in np.asarray(values).reshape(-1).tolist())
        return _ints(values)

    return (f"{'irfft' if inverse else 'rfft'} {_FFT_SUFFIX[dtype]} {nfft} {len(stages)} "
            f"{_ints(sig.fft_leaf_order(ncfft))} {_ints(stages)} {text(tw)} {text(stw)} {text(row)}")


def _fft_rows(rng: np.random.Generator, dtype: str, n: int, full: bool) -> np.ndarray:
    if dtype == "float32":
        return rng.uniform(-1, 1, size=n).astype(np.float32)
    bits = (15 if dtype == "int16" else 31) - (0 if full else 2)
    return rng.integers(-(1 << bits), 1 << bits, size=n, dtype=np.int64).astype(dtype)


@pytest.mark.parametrize("dtype", ["int16", "int32", "float32"])
def test_fft(runner: Path, dtype: str) -> None:
    """Forward and inverse real FFTs of every supported length: int16 / int32 bit for bit against
    utvm.ops.signal's KISS FFT model (full-range rows) and, with their 1 / nfft scaling, close to numpy
    (rows kept from wrapping); float32 close to numpy."""
    rng = np.random.default_rng(1)
    cases = []  # (inverse, nfft, row, exact)
    for nfft in FFT_LENGTHS:
        for full in ((True, False) if dtype != "float32" else (False,)):
            cases.append((False, nfft, _fft_rows(rng, dtype, nfft, full), full))
            cases.append((True, nfft, _fft_rows(rng, dtype, nfft + 2, full), full))
    out = _run(runner, [_fft_request(dtype, inv, n, x) for inv, n, x, _ in cases])
    for (inverse, nfft, x, full), line in zip(cases, out, strict=True):
        what = f"{'irfft' if inverse else 'rfft'} {dtype} nfft={nfft}"
        got = np.array([float(v) for v in line]) if dtype == "float32" else np.array([int(v) for v in line])
        p = sig.FftParams("signal_irfft" if inverse else "signal_rfft", dtype, nfft, 1, len(x))
        if dtype != "float32":
            np.testing.assert_array_equal(got, np.asarray(sig.reference(p, x[None, :])).reshape(-1), err_msg=what)
            if full:
                continue
            # KISS FFT's fixed point divides by each radix: rfft gives X / nfft, irfft gives numpy's irfft
            if inverse:
                spec = x[0::2].astype(np.float64) + 1j * x[1::2].astype(np.float64)
                want = np.fft.irfft(spec, n=nfft)
            else:
                f = np.fft.rfft(x.astype(np.float64), n=nfft) / nfft
                want = np.empty(nfft + 2)
                want[0::2], want[1::2] = f.real, f.imag
            tol = len(sig.fft_factors(nfft // 2)) + 2  # an LSB or so per stage (and kiss_fftr's own pass)
            assert np.abs(got - want).max() <= tol, f"{what}: off by {np.abs(got - want).max()} (tolerance {tol})"
        else:
            if inverse:
                spec = x[0::2].astype(np.float64) + 1j * x[1::2].astype(np.float64)
                want = np.fft.irfft(spec, n=nfft) * nfft  # the C function is unscaled (the kernel divides)
            else:
                f = np.fft.rfft(x.astype(np.float64), n=nfft)
                want = np.empty(nfft + 2)
                want[0::2], want[1::2] = f.real, f.imag
            np.testing.assert_allclose(got, want, atol=2e-6 * np.log2(nfft) * np.abs(want).max(), rtol=0, err_msg=what)


# ---- the files themselves ---------------------------------------------------------------------------------
def test_every_runtime_file_is_used_and_has_no_include() -> None:
    """A file not named by any helper would be dead; an #include would make generated code depend on an
    include path (the README's rules)."""
    files = {p.name for p in SIGNAL_DIR.glob("*.h")}
    used = {f for h in RUNTIME_HELPERS.values() for f in h.files}
    assert used == files, f"unused: {sorted(files - used)}, missing: {sorted(used - files)}"
    assert set(FFT_TEMPLATES) <= files
    for f in sorted(files):
        text = (SIGNAL_DIR / f).read_text()
        assert not re.search(r"^\s*#\s*include", text, re.M), f"{f} includes a header"


@pytest.mark.parametrize("key", sorted(RUNTIME_HELPERS))
def test_each_helper_compiles_alone(key: str, tmp_path: Path) -> None:
    """Each helper with only its dependencies compiles with the strict flags and defines its function, and no
    external symbol (two models in one firmware cannot clash)."""
    src = tmp_path / f"{key}.c"
    src.write_text("#include <stdint.h>\n" + _emitted([key]) + "\n")
    obj = tmp_path / f"{key}.o"
    cc.run(["gcc", *cc.WARNING_FLAGS, "-Wno-unused-function", "-fkeep-inline-functions", "-O0", "-c", str(src),
            "-o", str(obj)], what=f"compiling helper {key}")
    nm = subprocess.run(["nm", "--defined-only", str(obj)], capture_output=True, text=True, check=True).stdout
    symbols = dict(reversed(line.split()[1:]) for line in nm.splitlines() if len(line.split()) == 3)
    assert symbols.get(RUNTIME_HELPERS[key].name) == "t", f"{key}: {RUNTIME_HELPERS[key].name} not defined:\n{nm}"
    external = {name for name, kind in symbols.items() if kind.isupper()}
    assert not external, f"{key} defines external symbols {sorted(external)}"
