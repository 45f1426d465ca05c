"""TFLite import of the conv operator family (registered into utvm.frontend.tflite with `converter`)."""

from __future__ import annotations
