"""What a probe handler says (Go: ``pkg/probe`` ``Result``)."""

from __future__ import annotations

import enum

__all__ = ["MAX_OUTPUT_LENGTH", "ProbeError", "Result"]

MAX_OUTPUT_LENGTH = 10 * 1024  # exec output and HTTP bodies are read up to 10 KiB


class Result(enum.Enum):
    SUCCESS = "success"
    WARNING = "warning"  # a success worth an event (an HTTP redirect that was not followed)
    FAILURE = "failure"
    UNKNOWN = "unknown"


class ProbeError(Exception):
    """The probe could not be run (no container, a bad port name): its result is not counted."""
