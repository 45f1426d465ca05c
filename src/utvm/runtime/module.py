"""Module: a named collection of PackedFuncs (seed 004). Backends subclass it and override only the lookup
hook `_get_function` (`local.LocalModule`, `rpc.RemoteModule`); PyModule holds Python functions."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal, overload

from utvm.errors import FunctionNotFoundError

if TYPE_CHECKING:
    from utvm.runtime.packed_func import PackedFunc


class Module:
    """Base of every module. Subclasses implement `_get_function(name)` returning a PackedFunc or None."""

    type_key = "module"

    @overload
    def get_function(self, name: str, query_imports: bool = False,
                     allow_missing: Literal[False] = False) -> PackedFunc: ...
    @overload
    def get_function(self, name: str, query_imports: bool = False, *,
                     allow_missing: bool) -> PackedFunc | None: ...

    def get_function(self, name: str, query_imports: bool = False,
                     allow_missing: bool = False) -> PackedFunc | None:
        """The function `name`; FunctionNotFoundError naming the module and the function if absent
        (None instead with allow_missing=True)."""
        if not isinstance(name, str):
            raise FunctionNotFoundError(f"{self!r}: function names are str, got {type(name).__name__}")
        func = self._get_function(name, query_imports)
        if func is None:
            if allow_missing:
                return None
            raise FunctionNotFoundError(self._not_found(name))
        return func

    def implements_function(self, name: str, query_imports: bool = False) -> bool:
        return isinstance(name, str) and self._get_function(name, query_imports) is not None

    def __getitem__(self, name: str) -> PackedFunc:
        return self.get_function(name)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.implements_function(name)

    def _get_function(self, name: str, query_imports: bool) -> PackedFunc | None:
        raise NotImplementedError

    def _not_found(self, name: str) -> str:
        return f"{self!r} has no function {name!r}"

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.type_key}>"


class PyModule(Module):
    """A module of Python functions: `PyModule("mylib", {"add": lambda a, b: a + b})`."""

    type_key = "python"

    def __init__(self, name: str, functions: Mapping[str, Callable[..., Any]] | None = None,
                 imports: tuple[Module, ...] = ()) -> None:
        from utvm.runtime.packed_func import PackedFunc

        self.name = name
        self._funcs = {k: f if isinstance(f, PackedFunc) else PackedFunc(f, f"{name}.{k}")
                       for k, f in dict(functions or {}).items()}
        self.imports = tuple(imports)

    def _get_function(self, name: str, query_imports: bool) -> PackedFunc | None:
        if name in self._funcs:
            return self._funcs[name]
        if query_imports:
            for m in self.imports:
                if m.implements_function(name, True):
                    return m.get_function(name, True)
        return None

    def _not_found(self, name: str) -> str:
        msg = f"module {self.name!r} has no function {name!r}"
        close = difflib.get_close_matches(name, list(self._funcs), n=3)
        return msg + (f"; did you mean {', '.join(map(repr, close))}?" if close else "")

    def __repr__(self) -> str:
        return f"<PyModule {self.name!r}: {', '.join(sorted(self._funcs))}>"
