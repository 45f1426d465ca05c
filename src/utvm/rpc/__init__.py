"""The host side of the link to a device (docs/architecture.md §5): framing, session and RPC, plus the client.

`framing`, `session` and `protocol` are sans-IO (bytes in, events out); `transport` moves bytes;
`client` puts them together: `Session(transport)` or `connect_subprocess(argv)`.
"""

from __future__ import annotations

from utvm.rpc.client import (
    RemoteFunction,
    RemoteModule,
    RemoteNDArray,
    Session,
    TimeEvaluator,
    connect_subprocess,
)

__all__ = ["RemoteFunction", "RemoteModule", "RemoteNDArray", "Session", "TimeEvaluator", "connect_subprocess"]
