"""Typed CRI errors, and the one mapping between them and gRPC statuses.

gRPC status codes (and transport failures) are translated into these at the CRI boundary so that sync
code can branch on *what* went wrong without importing grpclib. The mapping lives here, by status name
(``NOT_FOUND``, as grpclib's ``Status`` and the gRPC spec spell it), for both directions: the CRI client
(:func:`kubelet_trio.cri.remote.translate_error`, whatever transport the status came over) turns a status
into an error with :func:`from_status`, and ``sim-cri`` turns an error back into the status it answers
with :func:`status_name`; :func:`go_status_text` is how Go's gRPC clients print a status, for the
clients that report a plugin's failure in Go's words (CSI).
"""

from __future__ import annotations

from typing import Final

from kubelet_trio.boundary import MAX_MESSAGE, truncate


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


#: The statuses with a type of their own; any other is a :class:`CriCallError` carrying its name.
STATUS_ERRORS: Final[dict[str, type[CriError]]] = {
    cls.code: cls for cls in (NotFoundError, UnavailableError, DeadlineExceededError, InvalidArgumentError)
}


def from_status(op: str, code: str, message: str) -> CriError:
    """The typed error of a gRPC status ``code`` (its name) and ``message``, as the runtime answered ``op``.

    The message is the runtime's text, truncated (it came in a header block of up to 16 MiB). Two of
    containerd's answers that carry no telling status are recognised by their words: a missing image on
    pull (UNKNOWN "...: not found") and the CRI plugin still starting ("server is not initialized yet")."""
    message = truncate(message or code, MAX_MESSAGE)
    cls = STATUS_ERRORS.get(code, CriCallError)
    if op == "PullImage" and cls is CriCallError and "not found" in message:
        cls = NotFoundError
    if cls is CriCallError and "server is not initialized yet" in message:
        cls = UnavailableError
    return cls(op, message, code=code)


def status_name(err: CriError) -> str:
    """The gRPC status (by name) that answers ``err``: its type's, else UNKNOWN (the status grpc-go gives
    a handler's plain error), so that ``from_status`` on the other side gives back the same type."""
    for code, cls in STATUS_ERRORS.items():
        if isinstance(err, cls):
            return code
    return "UNKNOWN"


#: Go's ``codes.Code.String()`` for the names that are not plain CamelCase of the gRPC spec's.
_GO_CODE_NAMES: Final = {"CANCELLED": "Canceled"}


def go_code(code: str) -> str:
    """A status name as Go's ``codes.Code`` prints it (``FAILED_PRECONDITION``: ``FailedPrecondition``)."""
    return _GO_CODE_NAMES.get(code) or "".join(part.capitalize() for part in code.split("_"))


def go_status_text(code: str, message: str) -> str:
    """A gRPC status as Go's ``status.Error(...).Error()`` prints it: ``rpc error: code = X desc = Y``."""
    return f"rpc error: code = {go_code(code)} desc = {message}"
