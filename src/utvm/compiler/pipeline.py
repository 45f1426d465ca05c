"""The compile pipeline: the passes, in the order they run (each `Graph -> Graph`, named for --dump-ir).

Order matters: QDQ fusion needs the dequantize nodes that constant folding would fold away; biases are
fused before batch norms are folded (conv -> add -> batch_norm), and activations last (conv ->
batch_norm -> relu). Validation runs on the imported graph and on the result.
"""

from __future__ import annotations

from collections.abc import Callable

from utvm.compiler.passes.eliminate_dead_nodes import eliminate_dead_nodes
from utvm.compiler.passes.fold_batch_norm import fold_batch_norm
from utvm.compiler.passes.fold_constants import fold_constants
from utvm.compiler.passes.fuse_activation import fuse_activation
from utvm.compiler.passes.fuse_bias import fuse_bias
from utvm.compiler.passes.fuse_requantize import fuse_requantize
from utvm.compiler.passes.remove_noop_reshapes import remove_noop_reshapes
from utvm.compiler.passes.remove_qdq_pairs import remove_qdq_pairs
from utvm.compiler.passes.validate import validate
from utvm.ir.graph import Graph

Pass = Callable[[Graph], Graph]

PIPELINE: list[tuple[str, Pass]] = [
    ("validate", validate),                          # the imported graph is well formed
    ("fuse_requantize", fuse_requantize),            # dequantize -> float op -> quantize  =>  int8 op
    ("fold_constants", fold_constants),              # constant subgraphs evaluated once
    ("remove_noop_reshapes", remove_noop_reshapes),  # identity reshapes/transposes, reshape chains
    ("remove_qdq_pairs", remove_qdq_pairs),          # exact quantize/dequantize round trips
    ("fuse_bias", fuse_bias),                        # conv/dense + add(constant) => bias
    ("fold_batch_norm", fold_batch_norm),            # conv/dense + batch_norm => scaled weights
    ("fuse_activation", fuse_activation),            # op + relu/relu6/clip => fused activation
    ("eliminate_dead_nodes", eliminate_dead_nodes),  # what nothing reads any more
    ("validate", validate),                          # the result is well formed
]


def run_pipeline(graph: Graph, passes: list[tuple[str, Pass]] | None = None,
                 on_pass: Callable[[str, Graph], None] | None = None) -> Graph:
    """Run the passes in order; `on_pass(name, graph)` sees the graph after each (for --dump-ir)."""
    for name, fn in PIPELINE if passes is None else passes:
        graph = fn(graph)
        if on_pass is not None:
            on_pass(name, graph)
    return graph
