"""ConfigMaps and Secrets as a pod's containers and volumes see them (Go: the ``pkg/kubelet/configmap``
and ``secret`` managers' interfaces): the :class:`ObjectStore` protocol and the objects it returns.

A standalone kubelet uses :data:`NO_OBJECTS`; an API-mode node one of the stores in
:mod:`kubelet_trio.apiobjects`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

import attrs

__all__ = ["NO_OBJECTS", "ConfigMap", "EnvError", "ObjectStore", "ObjectUnavailable", "Secret"]


class EnvError(Exception):
    """The container's environment cannot be built (a missing object or key, a bad field path)."""


@attrs.frozen
class ConfigMap:
    namespace: str
    name: str
    data: Mapping[str, str] = attrs.field(factory=dict)
    binary_data: Mapping[str, bytes] = attrs.field(factory=dict)


@attrs.frozen
class Secret:
    """A Secret's data (never in its repr) and ``type`` (``kubernetes.io/dockerconfigjson``, ``Opaque``,
    ...; "" when unknown)."""

    namespace: str
    name: str
    data: Mapping[str, bytes] = attrs.field(factory=dict, repr=False)
    type: str = ""


class ObjectUnavailable(EnvError, ValueError):
    """The object's existence is unknown (the API server could not be asked): unlike "not found", this
    fails even an ``optional`` reference, as in Go. Volume setup reports it as FailedMount."""


class ObjectStore(Protocol):
    """Where ConfigMaps and Secrets come from (Go: the configMap/secret managers). None = not found;
    :class:`ObjectUnavailable` = unknown."""

    def get_config_map(self, namespace: str, name: str) -> ConfigMap | None: ...

    def get_secret(self, namespace: str, name: str) -> Secret | None: ...


@attrs.frozen
class _NoObjects:
    """A standalone kubelet's store: no API server, so no object exists."""

    def get_config_map(self, namespace: str, name: str) -> ConfigMap | None:
        return None

    def get_secret(self, namespace: str, name: str) -> Secret | None:
        return None


NO_OBJECTS: ObjectStore = _NoObjects()
