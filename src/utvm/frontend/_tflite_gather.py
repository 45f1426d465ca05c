"""TFLite import of the gather operator family (registered into utvm.frontend.tflite with `converter`)."""

from __future__ import annotations
