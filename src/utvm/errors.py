"""The one exception hierarchy of utvm.

Every error utvm raises on purpose derives from `UtvmError`, and says whose fault it was:
`Local*` errors are misuse of the API by the caller, `Remote*` errors are a peer (the device, a model file)
misbehaving. Add new classes here, next to their family; never define exception roots elsewhere.
"""

from __future__ import annotations


class UtvmError(Exception):
    """Root of every error utvm raises on purpose."""


# --- runtime system -------------------------------------------------------------------------------------
class RuntimeSystemError(UtvmError):
    """Misuse of the runtime system: unknown global, bad argument type, wrong arity."""


class FunctionNotFoundError(RuntimeSystemError, KeyError):
    """A global function or module function name that is not registered."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


class ArgumentError(RuntimeSystemError, TypeError):
    """A PackedFunc argument of an unsupported type or a wrong number of arguments."""


class CRTError(UtvmError):
    """A C runtime call returned an error code; carries the code and TVMGetLastError()'s text."""

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code


class BuildError(UtvmError):
    """A C build (CRT, firmware, generated code) failed; the message carries the compiler output."""


# --- the link (framing, session, RPC) ---------------------------------------------------------------------
class ProtocolError(UtvmError):
    """A violation of the wire protocol (framing, session or RPC)."""


class LocalProtocolError(ProtocolError):
    """We tried to do something the protocol does not allow (API misuse)."""


class RemoteProtocolError(ProtocolError):
    """The peer sent bytes that break the protocol."""


class SessionError(UtvmError):
    """A session-level failure."""


class SessionTerminatedError(SessionError):
    """The peer terminated the session (e.g. the device reset)."""


class SessionTimeoutError(SessionError, TimeoutError):
    """A wait on the link timed out; the message names what was awaited."""


LinkTimeoutError = SessionTimeoutError


class RemoteError(UtvmError):
    """The device answered with an Exception; carries the device's text."""


class TransportError(UtvmError):
    """The byte transport failed (closed pipe, serial error, process exited)."""


# --- models and compilation ------------------------------------------------------------------------------
class ModelError(UtvmError):
    """A problem with a model given to utvm."""


class ModelNotFoundError(ModelError, FileNotFoundError):
    """A model of the corpus (utvm.support.models) is missing; the message names the file and the folder."""


class ModelFormatError(ModelError):
    """A model file that is truncated, corrupt or not what it claims to be."""


class UnsupportedModelError(ModelError):
    """A well-formed model that uses something utvm does not support."""


class UnsupportedOperatorError(UnsupportedModelError):
    """An operator utvm cannot import; names the op, the node index and the supported set."""

    def __init__(self, op: str, node: int | str, supported: list[str] | tuple[str, ...] = (), *,
                 reason: str = "") -> None:
        self.op = op
        self.node = node
        self.supported = tuple(sorted(supported))
        self.reason = reason
        msg = f"unsupported operator {op!r} at node {node}"
        if reason:
            msg += f": {reason}"
        elif self.supported:
            msg += f"; supported operators: {', '.join(self.supported)}"
        super().__init__(msg)


class GraphError(ModelError):
    """An ill-formed graph (shape or dtype mismatch); the message names the node."""


class CompileError(UtvmError):
    """The compiler could not generate code for a graph."""


class PlatformError(UtvmError):
    """A platform could not generate, build or start firmware."""


class ArchiveError(ModelFormatError):
    """An archive (Model Library Format tar or directory) that is malformed or unsafe to unpack: a member
    outside the archive (absolute, `..`), a link or device node, or sizes over the limits; names the member."""


# --- the command line -------------------------------------------------------------------------------------
class UsageError(UtvmError):
    """A command-line argument that cannot be used: a bad value, a missing or unreadable input file, an
    output path that must not be written; the message names the option."""


# --- runtime system (appended by the runtime; keep with its family above when merging) -------------------
class DataTypeError(RuntimeSystemError, ValueError):
    """A data type string or DLDataType that is malformed or unsupported; the message names it."""


class ArrayError(RuntimeSystemError, ValueError):
    """An NDArray operation that cannot be done: mismatched shape, unsupported dtype or device."""


class CRTArgumentError(CRTError, ArgumentError):
    """A C function rejected its arguments (wrong number or type); names the function."""


# --- the link (appended by the RPC client; keep with its family above when merging) -----------------------
class LinkClosedError(SessionTerminatedError, TransportError):
    """The byte stream ended: the device process exited, the socket or serial port closed."""


# --- checking (appended by the oracle; keep with its family above when merging) ----------------------------
class OracleError(UtvmError):
    """A reference interpreter (TFLite, onnxruntime) is missing, failed on a model or crashed."""
