"""Graph passes: each is a function `Graph -> Graph` in its own module, never mutating its argument.

The compile pipeline (`utvm.compiler.pipeline.PIPELINE`) runs them in order:

- `validate`: shape/dtype/structure checks (utvm.ir.verify), errors naming the node;
- `fuse_requantize`: dequantize -> float conv2d/depthwise_conv2d/dense -> quantize (QDQ) becomes the int8 op;
- `fold_constants`: nodes whose inputs are all constants are evaluated at compile time;
- `fuse_bias`: a float conv2d/depthwise_conv2d/dense followed by an add/sub of a per-channel constant
  takes it as its bias;
- `fold_batch_norm`: batch_norm folded into the conv/dense before it;
- `fuse_activation`: relu/relu6/clip after conv/dense/pool/add/sub/mul becomes the fused activation;
- `remove_noop_reshapes`: identity reshapes/transposes vanish, reshape chains collapse;
- `remove_qdq_pairs`: dequantize -> quantize with the same parameters, identity requantizations vanish;
- `eliminate_dead_nodes`: nodes whose outputs nobody uses are dropped.

A fused operator keeps its op name, its attributes and its name; only `inputs`, `outputs` and the
`activation` attribute change.
"""
