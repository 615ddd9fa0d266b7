"""The registered CSI drivers by name, and Go's rule for which CSI versions a driver may speak."""

from __future__ import annotations

import re
from collections.abc import Sequence

import attrs

__all__ = ["CsiDriver", "CsiDrivers", "UnsupportedVersions", "highest_supported_version"]

_GENERIC_VERSION = re.compile(r"^\s*v?(\d+)(?:\.(\d+))?(?:\.(\d+))?")


class UnsupportedVersions(ValueError):
    pass


def _parse(version: str) -> tuple[int, int, int]:
    """Go's ``ParseGeneric``: ``v``-prefix allowed, missing minor/patch are 0, a suffix is ignored."""
    match = _GENERIC_VERSION.match(version)
    if match is None:
        raise ValueError(f"could not parse {version!r} as version")
    return int(match[1]), int(match[2] or 0), int(match[3] or 0)


def highest_supported_version(versions: Sequence[str]) -> tuple[int, int, int]:
    """The highest 1.x version of ``versions`` (2.x and above are ignored; 0.x is no longer supported)."""
    if not versions:
        raise UnsupportedVersions("CSI driver reporting empty array for supported versions")
    highest: tuple[int, int, int] | None = None
    last_error: Exception | None = None
    for version in reversed(versions):
        try:
            parsed = _parse(version)
        except ValueError as err:
            last_error = err
            continue
        if parsed[0] > 1:
            continue
        if highest is None or highest < parsed:
            highest = parsed
    if highest is None:
        raise UnsupportedVersions(
            f"could not find a highest supported version from versions ({list(versions)}) reported by this"
            f" driver: {last_error}"
        )
    if highest[0] != 1:
        raise UnsupportedVersions(
            f"highest supported version reported by driver is {'.'.join(map(str, highest))}, must be v1.x"
        )
    return highest


@attrs.frozen
class CsiDriver:
    name: str
    endpoint: str  # the driver's Node service socket
    version: tuple[int, int, int]


@attrs.define(eq=False)
class CsiDrivers:
    """Shared by the registration handler (writes) and the volume plugin (reads the endpoint)."""

    _drivers: dict[str, CsiDriver] = attrs.Factory(dict)

    def get(self, name: str) -> CsiDriver | None:
        return self._drivers.get(name)

    def set(self, driver: CsiDriver) -> None:
        self._drivers[driver.name] = driver

    def delete(self, name: str) -> None:
        self._drivers.pop(name, None)

    def names(self) -> list[str]:
        return sorted(self._drivers)
