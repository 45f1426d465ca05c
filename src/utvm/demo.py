"""`python -m utvm.demo` (what `make demo` runs): the runtime system at work, until the compiler lands.

1. registers a Python function in utvm's global registry;
2. builds the C runtime (CRT) for the host as a shared library (cached by content hash), with progress;
3. loads it, and registers the Python function as a C global;
4. calls a C function through TVMFuncCall that looks the Python function up and calls it back, and prints
   the result; then a C loop over Python, a tensor handed to C, and a Python exception crossing C.
"""

from __future__ import annotations

import sys
import time

import numpy as np

import utvm
import utvm.nd as nd
from utvm.errors import BuildError, CRTError
from utvm.runtime import local

PY_NAME = "demo.py_square"


def _step(n: int, text: str) -> None:
    print(f"[{n}/4] {text}", flush=True)


def _detail(text: str) -> None:
    print(f"      {text}", flush=True)


def main() -> int:
    print("utvm demo: the host runtime system calling the C runtime, and the C runtime calling Python\n")

    _step(1, f"registering the Python function {PY_NAME!r} in utvm's global registry")

    @utvm.register_func(PY_NAME, override=True)
    def py_square(x: int) -> int:
        _detail(f"  [python] {PY_NAME}({x}) -> {x * x}")
        return x * x

    _detail(f"utvm.get_global_func({PY_NAME!r})(9) = {utvm.get_global_func(PY_NAME)(9)}")

    _step(2, "building the C runtime (CRT common + memory + host port + demo globals) for the host")
    start = time.perf_counter()
    try:
        path = local.build(progress=_detail)
    except BuildError as exc:
        print(f"\nutvm demo: building the CRT failed:\n{exc}", file=sys.stderr)
        return 1
    _detail(f"ready in {time.perf_counter() - start:.2f} s")

    _step(3, "loading it with ctypes: TVMPlatformInitialize(), TVMInitializeRuntime()")
    rt = local.load()  # the build above is cached: this only loads and initializes
    _detail(f"loaded {path.name}")
    rt.register_func(PY_NAME, utvm.get_global_func(PY_NAME), override=True)
    _detail(f"registered {PY_NAME!r} as a C global (a TVMBackendPackedCFunc that enters Python)")

    _step(4, "calling C through TVMFuncCall")
    call_global = rt.get_global_func("utvm.local.call_global")
    _detail(f"Python -> TVMFuncCall(utvm.local.call_global, {PY_NAME!r}, 12)")
    _detail(f"  which in C does TVMFuncGetGlobal({PY_NAME!r}), then TVMFuncCall(that handle, 12):")
    result = call_global(PY_NAME, 12)
    print(f"\n      RESULT: C called Python and returned {result}  (12 * 12 = 144)\n", flush=True)
    if result != 144:
        print("utvm demo: wrong result", file=sys.stderr)
        return 1

    accumulate = rt.get_global_func("utvm.local.accumulate")
    quiet = lambda i: i * i  # noqa: E731 - the same function, without the print
    _detail(f"a C loop calling Python: utvm.local.accumulate(square, 10) = {accumulate(quiet, 10)}"
            f"  (sum of i*i for i < 10 = {sum(i * i for i in range(10))})")

    arr = nd.array(np.arange(6, dtype="float32").reshape(2, 3))
    total = rt.get_global_func("utvm.local.tensor_sum")(arr)
    _detail(f"an NDArray passed to C as a DLTensor*: utvm.local.tensor_sum({arr.numpy().tolist()}) = {total}")

    def fails(x: int) -> int:
        raise ValueError(f"{x} is not welcome here")

    rt.register_func("demo.py_fails", fails, override=True)
    try:
        call_global("demo.py_fails", 13)
    except CRTError as exc:
        _detail(f"a Python exception crossed C and came back as {type(exc).__name__}: {exc}")
    else:
        print("utvm demo: the exception did not come back", file=sys.stderr)
        return 1
    print("\nutvm demo: done.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
