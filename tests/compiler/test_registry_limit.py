"""A model with hundreds of operators: the system library's function registry outgrows C99's limit on a
string literal (4095 characters, which -pedantic -Werror enforces) and is written as a byte list; the
firmware still finds every function by name over RPC."""

from __future__ import annotations

import numpy as np

from utvm import evaluate
from utvm.compiler import compile
from utvm.compiler.codegen import registry_names_literal
from utvm.ir import run_reference
from utvm.ir.graph import Graph, Node, Tensor
from utvm.platform import get_platform


def _chain(n: int) -> Graph:
    tensors = {"x": Tensor("x", (1, 8), "float32")}
    nodes = []
    prev = "x"
    for i in range(n):
        name = f"layer_with_a_rather_long_descriptive_name_{i:04d}"
        tensors[name] = Tensor(name, (1, 8), "float32")
        nodes.append(Node("relu6" if i % 2 else "relu", (prev,), (name,), {}, name))
        prev = name
    return Graph(tensors, tuple(nodes), ("x",), (prev,), "chain")


def test_registry_past_the_c99_string_limit_is_a_byte_list() -> None:
    short = registry_names_literal(["a", "b"])
    assert short.startswith('"')
    names = [f"tvmgen_m_fused_op_number_{i:05d}" for i in range(300)]  # 300 * 31 bytes > 4095
    blob = registry_names_literal(names)
    assert blob.startswith("{") and "0x2c, 0x01" in blob  # count 300 = 0x012c, little endian


def test_a_model_with_hundreds_of_operators_builds_strictly_and_runs_over_rpc() -> None:
    graph = _chain(160)
    compiled = compile(graph, passes=False)  # every op its own function: 162 registry entries
    lib_src = next(v for k, v in compiled.sources.items() if k.endswith("_system_lib.c"))
    assert "func_names[] =\n    {\n    (char)0xa2, 0x00," in lib_src  # 162 names: a count byte past 0x7f
    firmware = evaluate.build_firmware(compiled, "host")
    x = np.linspace(-9, 9, 8, dtype=np.float32).reshape(1, 8)
    with get_platform("host").start(firmware) as session:
        (got,), _ = evaluate.run_on_device(session, compiled, [x])
        lib = session.system_lib()
        assert lib.get_function(f"tvmgen_{compiled.model_name}___tvm_main__") is not None
    np.testing.assert_array_equal(got, run_reference(graph, {"x": x})[graph.outputs[0]])
