"""TFLite import of the gather operator family (utvm.ops.gather).

GATHER, GATHER_ND, EMBEDDING_LOOKUP, DEPTH_TO_SPACE, SPACE_TO_DEPTH, BATCH_TO_SPACE_ND, SPACE_TO_BATCH_ND,
RESIZE_BILINEAR and RESIZE_NEAREST_NEIGHBOR (see utvm.ops.gather). Constant operands (resize sizes, block
shapes, crops and paddings) become attributes; index operands stay inputs (they may be runtime data).
"""

from __future__ import annotations

from utvm.errors import ModelFormatError, UnsupportedModelError
from utvm.frontend._tflite_core import Importer, RawOp, arity, converter, label


@converter("GATHER")
def _gather(imp: Importer, op: RawOp, ins: list[str], outs: list[str]) -> None:
    arity(imp, op, ins, 2, 2)
    o = op.options
    imp.emit("gather", ins, outs, axis=int(o.get("Axis", 0)), batch_dims=int(o.get("BatchDims", 0)))


@converter("GATHER_ND")
def _gather_nd(imp: Importer, op: RawOp, ins: list[str], outs: list[str]) -> None:
    arity(imp, op, ins, 2, 2)
    imp.emit("gather_nd", ins, outs)


@converter("EMBEDDING_LOOKUP")
def _embedding_lookup(imp: Importer, op: RawOp, ins: list[str], outs: list[str]) -> None:
    arity(imp, op, ins, 2, 2)
    imp.emit("embedding_lookup", ins, outs)


@converter("DEPTH_TO_SPACE", "SPACE_TO_DEPTH")
def _depth_space(imp: Importer, op: RawOp, ins: list[str], outs: list[str]) -> None:
    arity(imp, op, ins, 1, 1)
    if "BlockSize" not in op.options:
        raise ModelFormatError(f"{label(op)} has no block size (its builtin options are missing)")
    imp.emit(op.code.lower(), ins, outs, block_size=int(op.options["BlockSize"]))


@converter("BATCH_TO_SPACE_ND", "SPACE_TO_BATCH_ND")
def _batch_space(imp: Importer, op: RawOp, ins: list[str], outs: list[str]) -> None:
    arity(imp, op, ins, 3, 3)
    block = imp.const_ints(op.inputs[1], "block_shape")
    key = "crops" if op.code == "BATCH_TO_SPACE_ND" else "paddings"
    pads = imp.const_ints(op.inputs[2], key)
    if block.ndim != 1 or pads.shape != (block.size, 2):
        raise ModelFormatError(f"{label(op)}: block_shape {ins[1]!r} of shape {list(block.shape)} and {key} "
                               f"{ins[2]!r} of shape {list(pads.shape)} do not fit ([M] and [M, 2])")
    imp.emit(op.code.lower(), [ins[0]], outs, block_shape=tuple(int(b) for b in block),
             **{key: tuple(int(p) for p in pads.ravel())})


@converter("RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR")
def _resize(imp: Importer, op: RawOp, ins: list[str], outs: list[str]) -> None:
    arity(imp, op, ins, 2, 2)
    size = imp.const_ints(op.inputs[1], "size")
    if imp.tensors[ins[1]].dtype != "int32":
        raise UnsupportedModelError(f"{label(op)}: size {ins[1]!r} is {imp.tensors[ins[1]].dtype}; TFLite Micro "
                                    "takes int32 only")
    if size.shape != (2,):
        raise ModelFormatError(f"{label(op)}: size {ins[1]!r} must hold 2 values (height, width), got shape "
                               f"{list(size.shape)}")
    o = op.options
    imp.emit(op.code.lower(), [ins[0]], outs, size=(int(size[0]), int(size[1])),
             align_corners=bool(o.get("AlignCorners", False)),
             half_pixel_centers=bool(o.get("HalfPixelCenters", False)))


_DETECTION_DEFAULTS = {"detections_per_class": 100, "use_regular_nms": False}
_DETECTION_FIELDS = ("max_detections", "max_classes_per_detection", "detections_per_class", "use_regular_nms",
                     "nms_score_threshold", "nms_iou_threshold", "num_classes", "y_scale", "x_scale", "h_scale",
                     "w_scale")


@converter("CUSTOM:TFLite_Detection_PostProcess")
def _detection_postprocess(imp: Importer, op: RawOp, ins: list[str], outs: list[str]) -> None:
    """The custom op's options are a flexbuffer map; detections_per_class (100) and use_regular_nms (false)
    are optional, as in TFLM."""
    import numpy as np
    from flatbuffers import flexbuffers

    arity(imp, op, ins, 3, 3)
    if len(outs) != 4:
        raise ModelFormatError(f"{label(op)} has {len(outs)} outputs; expected 4")
    try:
        opts = flexbuffers.Loads(op.custom_options) if op.custom_options else None
    except Exception as exc:  # the flexbuffer reader raises anything on a corrupt buffer
        raise ModelFormatError(f"{label(op)}: its custom options are not a flexbuffer: {exc}") from exc
    if not isinstance(opts, dict):
        raise ModelFormatError(f"{label(op)}: its custom options are not a flexbuffer map")
    attrs: dict[str, bool | float | int] = {}
    for key in _DETECTION_FIELDS:
        value = opts.get(key, _DETECTION_DEFAULTS.get(key))
        if value is None:
            raise ModelFormatError(f"{label(op)}: custom option {key!r} is missing")
        try:
            if key == "use_regular_nms":
                attrs[key] = bool(value)
            elif key.endswith(("_scale", "_threshold")):
                attrs[key] = float(np.float32(float(value)))  # TFLM reads them AsFloat into float fields
            else:
                attrs[key] = int(value)
        except (TypeError, ValueError, OverflowError) as exc:
            raise ModelFormatError(f"{label(op)}: custom option {key!r} = {value!r} is not a number") from exc
    imp.emit("detection_postprocess", ins, outs, **attrs)
