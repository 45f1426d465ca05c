"""TFLite import of the recurrent operator family (registered into utvm.frontend.tflite with `converter`)."""

from __future__ import annotations
