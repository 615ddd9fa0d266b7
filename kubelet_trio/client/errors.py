"""The API client's exceptions: one hierarchy, translated at the boundary from the transport's errors
and HTTP statuses.

Callers act on the type (``NotFound`` → create, ``Conflict`` → re-read and retry, ``Gone`` → relist),
never on status codes or transport exceptions. The API ``Status`` body (reason, message) is kept. The
transport's own errors (:class:`TransportError`, :class:`InvalidRequest`) are defined here, beside what
the client turns them into, so that a process without an API server never imports the transport (and
h11 with it).
"""

from __future__ import annotations

import errno
import json
from typing import Any

__all__ = [
    "AlreadyExists",
    "AnswerTooLarge",
    "ApiClientError",
    "ApiUnavailable",
    "BadRequest",
    "Conflict",
    "Forbidden",
    "Gone",
    "Invalid",
    "InvalidRequest",
    "NotFound",
    "ServerError",
    "StatusError",
    "TooManyRequests",
    "TransportError",
    "Unauthorized",
    "describe",
    "error_from_response",
    "status_error",
]


class ApiClientError(Exception):
    """Anything the API client raises."""


class ApiUnavailable(ApiClientError):
    """No answer from the API server: connection refused or reset, TLS failure, or no reply in time."""


class TransportError(Exception):
    """The request got no usable HTTP answer: connection, TLS or protocol failure, or a bound exceeded."""


class AnswerTooLarge(TransportError):
    """An answer's body (decompressed) exceeds the request's bound: asking again would not help."""


class InvalidRequest(ValueError):
    """The request cannot be written as HTTP/1.1 (a header value with CR or LF, a non-ASCII field):
    refused before anything is sent, so no field can smuggle in another."""


class StatusError(ApiClientError):
    """The API server answered with an error status; ``status`` is its ``metav1.Status`` body."""

    def __init__(self, code: int, reason: str, message: str, status: dict[str, Any] | None = None) -> None:
        super().__init__(f"{code} {reason}: {message}")
        self.code = code
        self.reason = reason
        self.message = message
        self.status = status or {}


class BadRequest(StatusError):
    """400."""


class Unauthorized(StatusError):
    """401."""


class Forbidden(StatusError):
    """403."""


class NotFound(StatusError):
    """404."""


class Conflict(StatusError):
    """409: a write lost a race (resourceVersion) or a precondition (UID) failed."""


class AlreadyExists(Conflict):
    """409 with reason AlreadyExists: a create of a name that is taken."""


class Gone(StatusError):
    """410: the resourceVersion is too old (compacted); the watcher must relist."""


class Invalid(StatusError):
    """422: the object failed validation."""


class TooManyRequests(StatusError):
    """429: the server asks the client to slow down (``Retry-After``)."""


class ServerError(StatusError):
    """5xx."""


_BY_CODE: dict[int, type[StatusError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    410: Gone,
    422: Invalid,
    429: TooManyRequests,
}


def status_error(code: int, status: dict[str, Any] | None, fallback_message: str = "") -> StatusError:
    """The typed error for an HTTP status code and its (possibly absent) ``Status`` body."""
    status = status if isinstance(status, dict) else {}
    reason = str(status.get("reason") or "")
    message = str(status.get("message") or fallback_message or "")
    if code == 409 and reason == "AlreadyExists":
        cls: type[StatusError] = AlreadyExists
    elif code >= 500:
        cls = ServerError
    else:
        cls = _BY_CODE.get(code, StatusError)
    return cls(code, reason or _default_reason(code), message, status)


def error_from_response(code: int, body: bytes) -> StatusError:
    try:
        decoded = json.loads(body) if body else None
    except ValueError:
        decoded = None
    text = body[:512].decode("utf-8", "replace").strip() if decoded is None else ""
    return status_error(code, decoded if isinstance(decoded, dict) else None, text)


def _default_reason(code: int) -> str:
    return {
        400: "BadRequest",
        401: "Unauthorized",
        403: "Forbidden",
        404: "NotFound",
        409: "Conflict",
        410: "Gone",
        422: "Invalid",
        429: "TooManyRequests",
    }.get(code, "InternalError" if code >= 500 else "Unknown")


def describe(err: BaseException) -> str:
    """``Type: message`` of a transport error. When its own text is empty (TLS failures under Trio, an
    ``OSError`` with only a number), the first text along its causes, or the OS error's name."""
    seen: BaseException | None = err
    while seen is not None:
        text = str(seen)
        if not text and isinstance(seen, OSError) and seen.errno:
            text = errno.errorcode.get(seen.errno, str(seen.errno))
        if text:
            return f"{type(err).__name__}: {text}"
        seen = seen.__cause__ or seen.__context__
    return type(err).__name__
