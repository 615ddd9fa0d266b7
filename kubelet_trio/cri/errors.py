"""Typed CRI errors.

gRPC status codes (and grpclib/asyncio transport failures) are translated into these at the CRI
boundary so that sync code can branch on *what* went wrong without importing grpclib.
"""

from __future__ import annotations


class CriError(Exception):
    """A CRI call failed. ``op`` names the RPC, ``code`` the gRPC status name."""

    code: str = "UNKNOWN"

    def __init__(self, op: str, message: str, *, code: str | None = None) -> None:
        super().__init__(f"{op}: {message}")
        self.op = op
        self.message = message
        if code is not None:
            self.code = code


class NotFoundError(CriError):
    """The sandbox, container or image does not exist (gRPC NOT_FOUND)."""

    code = "NOT_FOUND"


class UnavailableError(CriError):
    """The runtime cannot be reached right now (gRPC UNAVAILABLE, socket missing, connection reset)."""

    code = "UNAVAILABLE"


class DeadlineExceededError(CriError):
    """The call ran past its deadline (gRPC DEADLINE_EXCEEDED or the client-side timeout)."""

    code = "DEADLINE_EXCEEDED"


class InvalidArgumentError(CriError):
    """The runtime rejected the request as malformed (gRPC INVALID_ARGUMENT)."""

    code = "INVALID_ARGUMENT"


class CriCallError(CriError):
    """Any other failure reported by the runtime (UNKNOWN, INTERNAL, FAILED_PRECONDITION, ...)."""
