"""utvm: a Python-driven, pure-C-on-device implementation of microTVM."""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__", "debug_layers", "get_global_func", "list_global_func_names", "register_func"]


def __getattr__(name: str):  # lazy: importing utvm stays cheap and never drags numpy in
    if name in ("register_func", "get_global_func", "list_global_func_names"):
        from utvm import runtime

        return getattr(runtime, name)
    if name == "debug_layers":  # utvm.layer_debug.debug_layers: run a model op by op on a device, compare
        from utvm.layer_debug import debug_layers

        return debug_layers
    raise AttributeError(f"module 'utvm' has no attribute {name!r}")
