"""Static pod identity (``pkg/kubelet/config/common.go`` ``applyDefaults``): name, namespace, node,
UID and annotations for pods that come from files or a URL instead of the API server.

The UID is the first 32 hex digits of SHA-256 over the canonical JSON (sorted keys) of the defaulted
manifest, then ``host:<node>`` and ``file:<path>`` or ``url:<url>``. So, as upstream, any edit of the
manifest or a move to another path gives a new UID - but the value differs from the Go kubelet's, which
hashes a Go-specific dump of the object with FNV-128a; the two are not interchangeable.
"""

from __future__ import annotations

import hashlib
import json

import attrs

from kubelet_trio.api import ObjectMeta, Pod, PodSpec, PodStatus, Toleration
from kubelet_trio.config.types import CONFIG_HASH_ANNOTATION, CONFIG_SOURCE_ANNOTATION, FILE_SOURCE

__all__ = ["DEFAULT_NAMESPACE", "generate_pod_name", "make_static_pod", "static_pod_uid"]

DEFAULT_NAMESPACE = "default"


def generate_pod_name(name: str, node_name: str) -> str:
    """``<name>-<lowercase node name>``, so static pods of different nodes do not collide."""
    return f"{name}-{node_name.lower()}"


def static_pod_uid(pod: Pod, *, node_name: str, origin: str) -> str:
    """A stable UID for ``pod`` (defaulted, as read) on ``node_name`` from ``origin``
    (``file:<path>`` or ``url:<url>``)."""
    canonical = json.dumps(pod.to_dict(), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    digest = hashlib.sha256()
    digest.update(canonical.encode())
    digest.update(f"\nhost:{node_name}\n{origin}".encode())
    return digest.hexdigest()[:32]


def make_static_pod(pod: Pod, *, node_name: str, source: str, origin: str) -> Pod:
    """Apply static-pod identity to a defaulted pod; ``source`` is ``file`` or ``http``."""
    meta = pod.metadata or ObjectMeta()
    uid = meta.uid or static_pod_uid(pod, node_name=node_name, origin=origin)
    annotations = dict(meta.annotations or {})
    annotations[CONFIG_HASH_ANNOTATION] = uid
    annotations[CONFIG_SOURCE_ANNOTATION] = source
    meta = attrs.evolve(
        meta,
        uid=uid,
        name=generate_pod_name(meta.name or "", node_name),
        namespace=meta.namespace or DEFAULT_NAMESPACE,
        annotations=annotations,
    )
    spec = attrs.evolve(pod.spec or PodSpec(), node_name=node_name)
    if source == FILE_SOURCE:
        tolerations = (*(spec.tolerations or ()), Toleration(operator="Exists", effect="NoExecute"))
        spec = attrs.evolve(spec, tolerations=tolerations)
    status = attrs.evolve(pod.status or PodStatus(), phase="Pending")
    return attrs.evolve(pod, metadata=meta, spec=spec, status=status)
