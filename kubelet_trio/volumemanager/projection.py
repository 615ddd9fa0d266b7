"""Volumes whose files the kubelet writes: downwardAPI, configMap, secret and projected (Go:
``pkg/volume/{downwardapi,configmap,secret,projected}``). Each builds a payload (path → bytes + mode) that
the :class:`~kubelet_trio.volumemanager.atomic_writer.AtomicWriter` projects, so a change (new labels,
an updated ConfigMap) is swapped in atomically while containers run.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from kubelet_trio.api import (
    ConfigMapVolumeSource,
    DownwardAPIVolumeFile,
    KeyToPath,
    Pod,
    ProjectedVolumeSource,
    SecretVolumeSource,
)
from kubelet_trio.cm.allocatable import NodeAllocatable
from kubelet_trio.fieldpath import container_resource_value, extract_field_path
from kubelet_trio.objects import EnvError, ObjectStore
from kubelet_trio.securitycontext import effective_security_context
from kubelet_trio.token import TokenRequest
from kubelet_trio.volumemanager.atomic_writer import FileProjection

__all__ = [
    "config_map_payload",
    "downward_api_payload",
    "projected_payload",
    "secret_payload",
    "token_requests",
]

DEFAULT_MODE = 0o644
_KEY_KIND = {"configmap": "config", "secret": "secret"}


def downward_api_payload(
    pod: Pod,
    items: Sequence[DownwardAPIVolumeFile] | None,
    default_mode: int | None,
    allocatable: NodeAllocatable | None,
) -> dict[str, FileProjection]:
    """``CollectData``: every item's field or resource value; errors are collected and raised together."""
    payload: dict[str, FileProjection] = {}
    errors: list[str] = []
    mode_default = DEFAULT_MODE if default_mode is None else default_mode
    for item in items or ():
        path = os.path.normpath(item.path or "")
        mode = mode_default if item.mode is None else item.mode
        data = ""
        try:
            if item.field_ref is not None:
                data = extract_field_path(pod, item.field_ref.field_path or "")
            elif item.resource_field_ref is not None:
                data = container_resource_value(item.resource_field_ref, pod, None, allocatable)
        except (EnvError, ValueError) as err:
            errors.append(str(err))
        payload[path] = FileProjection(data.encode(), mode)
    if errors:
        raise ValueError("; ".join(errors))
    return payload


def _key_payload(
    data: Mapping[str, bytes],
    items: Sequence[KeyToPath] | None,
    default_mode: int | None,
    optional: bool,
    what: str,
) -> dict[str, FileProjection]:
    mode_default = DEFAULT_MODE if default_mode is None else default_mode
    if not items:
        return {key: FileProjection(value, mode_default) for key, value in data.items()}
    payload: dict[str, FileProjection] = {}
    for item in items:
        key = item.key or ""
        if key not in data:
            if optional:
                continue
            raise ValueError(f"{what} references non-existent {_KEY_KIND[what]} key: {key}")
        mode = mode_default if item.mode is None else item.mode
        payload[item.path or key] = FileProjection(data[key], mode)
    return payload


def config_map_payload(
    pod: Pod,
    name: str,
    items: Sequence[KeyToPath] | None,
    default_mode: int | None,
    optional: bool,
    objects: ObjectStore,
) -> dict[str, FileProjection]:
    found = objects.get_config_map(pod.namespace, name)
    if found is None:
        if optional:
            return {}
        raise ValueError(f'configmap "{name}" not found')
    data = {k: v.encode() for k, v in found.data.items()}
    data.update(found.binary_data)
    return _key_payload(data, items, default_mode, optional, "configmap")


def secret_payload(
    pod: Pod,
    name: str,
    items: Sequence[KeyToPath] | None,
    default_mode: int | None,
    optional: bool,
    objects: ObjectStore,
) -> dict[str, FileProjection]:
    found = objects.get_secret(pod.namespace, name)
    if found is None:
        if optional:
            return {}
        raise ValueError(f'secret "{name}" not found')
    return _key_payload(dict(found.data), items, default_mode, optional, "secret")


def config_map_volume_payload(
    pod: Pod, source: ConfigMapVolumeSource, objects: ObjectStore
) -> dict[str, FileProjection]:
    return config_map_payload(
        pod, source.name or "", source.items, source.default_mode, bool(source.optional), objects
    )


def secret_volume_payload(
    pod: Pod, source: SecretVolumeSource, objects: ObjectStore
) -> dict[str, FileProjection]:
    return secret_payload(
        pod, source.secret_name or "", source.items, source.default_mode, bool(source.optional), objects
    )


def fs_user_from(pod: Pod) -> int | None:
    """Go's ``FsUserFrom``: the effective runAsUser when every init and app container has one and they
    are all the same, else None."""
    spec = pod.spec
    users = {
        effective_security_context(pod, c).run_as_user
        for c in (*(spec.init_containers or ()), *(spec.containers or ()))
    } if spec else set()  # fmt: skip
    if len(users) != 1:
        return None
    return next(iter(users))


def projected_payload(
    pod: Pod,
    source: ProjectedVolumeSource,
    objects: ObjectStore,
    allocatable: NodeAllocatable | None,
    tokens: Sequence[str | None] = (),
    fs_group: int | None = None,
) -> dict[str, FileProjection]:
    """All sources merged in order. ``tokens[i]`` is the service account token for source ``i`` (fetched
    beforehand: :func:`token_requests`). As in Go, a token file is mode 0600 and owned by the pods' common
    runAsUser when there is one, or 0600 widened to 0640 when an fsGroup is set; else the default mode."""
    fs_user = fs_user_from(pod)
    payload: dict[str, FileProjection] = {}
    mode = source.default_mode
    for index, projection in enumerate(source.sources or ()):
        if projection.config_map is not None:
            cm = projection.config_map
            payload.update(config_map_payload(pod, cm.name or "", cm.items, mode, bool(cm.optional), objects))
        elif projection.secret is not None:
            sec = projection.secret
            payload.update(secret_payload(pod, sec.name or "", sec.items, mode, bool(sec.optional), objects))
        elif projection.downward_api is not None:
            payload.update(downward_api_payload(pod, projection.downward_api.items, mode, allocatable))
        elif projection.service_account_token is not None:
            token = tokens[index] if index < len(tokens) else None
            if token is None:
                raise ValueError(f"no service account token for source {index}")
            restricted = fs_group is not None or fs_user is not None
            token_mode = 0o600 if restricted else (DEFAULT_MODE if mode is None else mode)
            path = projection.service_account_token.path or ""
            payload[path] = FileProjection(token.encode(), token_mode, fs_user)
        else:
            raise ValueError("unsupported projected volume source")
    return payload


def token_requests(pod: Pod, source: ProjectedVolumeSource) -> dict[int, TokenRequest]:
    """Source index -> the TokenRequest of each ``serviceAccountToken`` source: bound to the pod, for
    the pod's service account (``default`` when unset), with the source's audience (none: the API
    server's own) and ``expirationSeconds``."""
    account = (pod.spec.service_account_name if pod.spec else None) or "default"
    requests: dict[int, TokenRequest] = {}
    for index, projection in enumerate(source.sources or ()):
        token = projection.service_account_token
        if token is None:
            continue
        requests[index] = TokenRequest(
            namespace=pod.namespace,
            service_account=account,
            audiences=(token.audience,) if token.audience else (),
            expiration_seconds=token.expiration_seconds,
            pod_name=pod.name,
            pod_uid=pod.uid,
        )
    return requests
