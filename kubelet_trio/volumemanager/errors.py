"""Volume errors, shaped like the Go volume manager's events."""

from __future__ import annotations

__all__ = ["MountError", "VolumeError"]


class VolumeError(Exception):
    """Setting up or tearing down one volume failed; ``str()`` is the ``FailedMount`` event text."""

    def __init__(self, volume: str, message: str, *, operation: str = "MountVolume.SetUp") -> None:
        super().__init__(f'{operation} failed for volume "{volume}" : {message}')
        self.volume = volume
        self.message = message
        self.operation = operation


class MountError(Exception):
    """Some volumes of a pod are not mounted (Go: ``WaitForAttachAndMount``); the pod cannot start."""

    def __init__(self, errors: list[VolumeError]) -> None:
        names = " ".join(sorted(e.volume for e in errors))
        details = "; ".join(str(e) for e in errors)
        super().__init__(f"unmounted volumes=[{names}]: {details}")
        self.errors = errors
