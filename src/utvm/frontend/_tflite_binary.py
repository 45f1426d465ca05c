"""TFLite import of the binary operator family (registered into utvm.frontend.tflite with `converter`)."""

from __future__ import annotations
