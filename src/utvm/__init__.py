"""utvm: a Python-driven, pure-C-on-device implementation of microTVM."""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__", "get_global_func", "list_global_func_names", "register_func"]


def __getattr__(name: str):  # lazy: importing utvm stays cheap and never drags numpy in
    if name in ("register_func", "get_global_func", "list_global_func_names"):
        from utvm import runtime

        return getattr(runtime, name)
    raise AttributeError(f"module 'utvm' has no attribute {name!r}")
