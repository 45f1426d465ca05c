"""TFLite import of the signal operator family (registered into utvm.frontend.tflite with `converter`)."""

from __future__ import annotations
