"""Errors raised while decoding, checking and loading Kubernetes objects.

Everything here subclasses :class:`ValueError`, so callers that only care about "bad input" can catch one
type, while code that reports problems (the file source, ``check-manifests``) gets the field path and,
for files, the file name and line.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs


class MapKey(str):
    """A path step that is a key of a map field (labels, resources): rendered ``requests[cpu]``."""

    __slots__ = ()


#: One step of a field path: a JSON object key (a model field or a :class:`MapKey`) or a list index.
PathElement = str | int
FieldPath = tuple[PathElement, ...]


def format_path(path: Iterable[PathElement]) -> str:
    """Render a path the way the API server does: ``spec.containers[1].ports[0].containerPort``."""
    out: list[str] = []
    for element in path:
        if isinstance(element, int | MapKey):
            out.append(f"[{element}]")
        elif out:
            out.append(f".{element}")
        else:
            out.append(element)
    return "".join(out)


class ApiError(ValueError):
    """Base class of the api package's errors."""


class QuantityError(ApiError):
    """A string is not a valid Kubernetes quantity."""


class DecodeError(ApiError):
    """A JSON value does not fit the model (wrong type), at ``path``."""

    def __init__(self, path: FieldPath, message: str) -> None:
        super().__init__(f"{format_path(path) or '<root>'}: {message}")
        self.path = path
        self.message = message


@attrs.frozen
class FieldError:
    """One validation finding, as the API server reports it (``field.Error``)."""

    path: FieldPath
    message: str

    def __str__(self) -> str:
        return f"{format_path(self.path)}: {self.message}"


class ManifestError(ApiError):
    """A problem in a manifest file or body: where (file, line, field path) and what."""

    def __init__(self, file: str, line: int, path: FieldPath, message: str) -> None:
        self.file = file
        self.line = line
        self.path = path
        self.message = message
        super().__init__(str(self))

    @property
    def field(self) -> str:
        """The field path as the API server writes it (``spec.containers[0].image``), or ``""``."""
        return format_path(self.path)

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}"
        field = format_path(self.path)
        return f"{where}: {field}: {self.message}" if field else f"{where}: {self.message}"

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.file, self.line, self.path, self.message))
