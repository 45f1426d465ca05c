"""Float semantics the ONNX frontend relies on, checked op by op against onnx's ReferenceEvaluator
(independently of the ONNX frontend): each case is one ONNX node in NCHW and the same op written as a
utvm graph in NHWC; outputs must agree within 1e-5 relative / 1e-5 absolute."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from utvm.ir import Graph, Node, Tensor, run_reference, verify

RNG = np.random.default_rng(8)


def onnx_run(op: str, inputs: dict[str, np.ndarray], out_shape_rank: int, consts: dict[str, np.ndarray] | None = None,
             **attrs) -> np.ndarray:  # noqa: ANN003
    consts = consts or {}
    names = list(inputs) + list(consts)
    node = helper.make_node(op, names, ["y"], **attrs)
    g = helper.make_graph([node], "t", [helper.make_tensor_value_info(k, TensorProto.FLOAT, v.shape)
                                        for k, v in inputs.items()],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None] * out_shape_rank)],
                          [onnx.numpy_helper.from_array(v, k) for k, v in consts.items()])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)])
    return ReferenceEvaluator(model).run(None, inputs)[0]


def utvm_run(op: str, xs: list[np.ndarray], out_shape: tuple[int, ...], attrs: dict,
             consts: list[np.ndarray] = ()) -> np.ndarray:  # type: ignore[assignment]
    tensors = [Tensor(f"x{i}", x.shape, "float32") for i, x in enumerate(xs)]
    tensors += [Tensor(f"c{i}", c.shape, "float32", None, c) for i, c in enumerate(consts)]
    tensors.append(Tensor("y", out_shape, "float32"))
    ins = tuple(t.name for t in tensors[:-1])
    g = Graph({t.name: t for t in tensors}, (Node(op, ins, ("y",), attrs, "n"),), ins[:len(xs)], ("y",))
    verify(g)
    return run_reference(g, {f"x{i}": x for i, x in enumerate(xs)})["y"]


def nchw(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x.transpose(0, 3, 1, 2))


def nhwc(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x.transpose(0, 2, 3, 1))


def close(a: np.ndarray, b: np.ndarray) -> None:
    assert a.shape == b.shape
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


POOLS = [
    dict(kernel_shape=[3, 3], strides=[2, 2]),
    dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
    dict(kernel_shape=[3, 2], strides=[2, 1], pads=[0, 1, 1, 0]),
    dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1),
    dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1),
    dict(kernel_shape=[2, 2], strides=[2, 2], dilations=[2, 2]),
    dict(kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1], count_include_pad=1),
    dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 0, 2, 1], count_include_pad=1, ceil_mode=1),
]


@pytest.mark.parametrize("kind", ["MaxPool", "AveragePool"])
@pytest.mark.parametrize("attrs", POOLS, ids=[str(i) for i in range(len(POOLS))])
def test_pool(kind: str, attrs: dict) -> None:
    if kind == "MaxPool" and "count_include_pad" in attrs:
        attrs = {k: v for k, v in attrs.items() if k != "count_include_pad"}
    x = RNG.standard_normal((1, 3, 10, 9)).astype(np.float32)
    want = onnx_run(kind, {"x": x}, 4, **attrs)
    pads = attrs.get("pads", [0, 0, 0, 0])
    ours = {"pool": tuple(attrs["kernel_shape"]), "strides": tuple(attrs["strides"]),
            "padding": (pads[0], pads[1], pads[2], pads[3]), "dilation": tuple(attrs.get("dilations", [1, 1])),
            "ceil_mode": bool(attrs.get("ceil_mode", 0)), "activation": "none"}
    if kind == "AveragePool":
        ours["count_include_pad"] = bool(attrs.get("count_include_pad", 0))
    op = "max_pool2d" if kind == "MaxPool" else "avg_pool2d"
    got = utvm_run(op, [nhwc(x)], nhwc(want).shape, ours)
    close(nchw(got), want)


CONVS = [
    dict(group=1, strides=[1, 1], pads=[1, 1, 1, 1], dilations=[1, 1], c_in=4, c_out=6),
    dict(group=2, strides=[2, 1], pads=[0, 1, 2, 0], dilations=[1, 2], c_in=4, c_out=6),
    dict(group=4, strides=[1, 2], pads=[1, 1, 1, 1], dilations=[2, 1], c_in=4, c_out=8),  # depthwise, M = 2
]


@pytest.mark.parametrize("attrs", CONVS, ids=[str(i) for i in range(len(CONVS))])
def test_conv(attrs: dict) -> None:
    attrs = dict(attrs)
    c_in, c_out, group = attrs.pop("c_in"), attrs.pop("c_out"), attrs["group"]
    x = RNG.standard_normal((1, c_in, 9, 8)).astype(np.float32)
    w = RNG.standard_normal((c_out, c_in // group, 3, 3)).astype(np.float32)
    b = RNG.standard_normal(c_out).astype(np.float32)
    want = onnx_run("Conv", {"x": x}, 4, {"w": w, "b": b}, kernel_shape=[3, 3], **attrs)
    p = attrs["pads"]
    common = {"strides": tuple(attrs["strides"]), "dilation": tuple(attrs["dilations"]), "padding": tuple(p),
              "activation": "none"}
    if group == c_in and group > 1:
        w_ours = np.ascontiguousarray(w.transpose(1, 2, 3, 0))  # [1, KH, KW, C*M]
        got = utvm_run("depthwise_conv2d", [nhwc(x)], nhwc(want).shape,
                       {**common, "depth_multiplier": c_out // c_in}, [w_ours, b])
    else:
        w_ours = np.ascontiguousarray(w.transpose(0, 2, 3, 1))  # OHWI
        got = utvm_run("conv2d", [nhwc(x)], nhwc(want).shape, {**common, "groups": group}, [w_ours, b])
    close(nchw(got), want)


@pytest.mark.parametrize(("a", "b"), [((2, 3, 4), (4, 5)), ((4,), (2, 4, 5)), ((3, 4), (4,)),
                                      ((2, 1, 3, 4), (5, 4, 2))])
def test_matmul_broadcasting(a: tuple, b: tuple) -> None:
    xa, xb = RNG.standard_normal(a).astype(np.float32), RNG.standard_normal(b).astype(np.float32)
    want = onnx_run("MatMul", {"a": xa, "b": xb}, len(np.matmul(xa, xb).shape))
    close(utvm_run("matmul", [xa, xb], want.shape, {}), want)


def test_global_average_pool_transpose_concat_pad_clip_sub() -> None:
    x = RNG.standard_normal((2, 3, 5, 4)).astype(np.float32)
    want = onnx_run("GlobalAveragePool", {"x": x}, 4)
    close(nchw(utvm_run("global_avg_pool2d", [nhwc(x)], (2, 1, 1, 3), {})), want)
    want = onnx_run("Transpose", {"x": x}, 4, perm=[2, 0, 3, 1])
    close(utvm_run("transpose", [x], want.shape, {"perm": (2, 0, 3, 1)}), want)
    z = RNG.standard_normal((2, 2, 5, 4)).astype(np.float32)
    want = onnx_run("Concat", {"x": x, "z": z}, 4, axis=1)
    close(utvm_run("concat", [x, z], want.shape, {"axis": 1}), want)
    want = onnx_run("Pad", {"x": x}, 4, {"p": np.array([0, 1, 2, 0, 1, 0, 0, 3]), "v": np.array(1.5, np.float32)})
    close(utvm_run("pad", [x], want.shape, {"pads": ((0, 1), (1, 0), (2, 0), (0, 3)), "value": 1.5}), want)
    want = onnx_run("Clip", {"x": x}, 4, {"lo": np.array(-0.5, np.float32), "hi": np.array(0.7, np.float32)})
    close(utvm_run("clip", [x], want.shape, {"min": -0.5, "max": 0.7}), want)
    s = RNG.standard_normal((1, 3, 1, 4)).astype(np.float32)
    want = onnx_run("Sub", {"s": s, "x": x}, 4)
    close(utvm_run("sub", [s, x], want.shape, {"activation": "none"}), want)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_softmax_and_mean_axes(axis: int) -> None:
    x = (RNG.standard_normal((3, 4, 5)) * 4).astype(np.float32)
    want = onnx_run("Softmax", {"x": x}, 3, axis=axis)
    close(utvm_run("softmax", [x], x.shape, {"axis": axis, "beta": 1.0}), want)
    want = onnx_run("ReduceMean", {"x": x}, 3, {"axes": np.array([axis])}, keepdims=1)
    close(utvm_run("mean", [x], want.shape, {"axes": (axis,), "keepdims": True}), want)
    want = onnx_run("ReduceMean", {"x": x}, 1, {"axes": np.array([0, 2])}, keepdims=0)
    close(utvm_run("mean", [x], want.shape, {"axes": (0, 2), "keepdims": False}), want)
    want = onnx_run("ReduceMean", {"x": x}, 1, {"axes": np.array([axis])}, keepdims=0)
    close(utvm_run("mean", [x], want.shape, {"axes": (axis,), "keepdims": False}), want)
