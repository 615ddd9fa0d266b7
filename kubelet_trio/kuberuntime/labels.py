"""Labels and annotations the kubelet puts on sandboxes and containers (Go: ``kuberuntime/labels.go``).

Labels identify (pod name/namespace/uid, container name, and our ownership label
``kubelet-trio.io/node``); annotations carry what the kubelet needs back from a container it finds later
(spec hash, restart count, termination message settings, grace periods, preStop handler, ports), so a new
kubelet process — or a kill after the pod object is gone — can act on containers from their labels alone.
Two nodes sharing one runtime never see each other's objects: every list filters on the node label.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs

from kubelet_trio.logs import kv

if TYPE_CHECKING:
    from kubelet_trio.api import Container, ContainerPort, LifecycleHandler, Pod

__all__ = [
    "CONTAINER_HASH_ANNOTATION",
    "CONTAINER_NAME_LABEL",
    "CONTAINER_PORTS_ANNOTATION",
    "CONTAINER_PRE_STOP_HANDLER_ANNOTATION",
    "CONTAINER_RESTART_COUNT_ANNOTATION",
    "CONTAINER_TERMINATION_MESSAGE_PATH_ANNOTATION",
    "CONTAINER_TERMINATION_MESSAGE_POLICY_ANNOTATION",
    "NODE_LABEL",
    "POD_DELETION_GRACE_PERIOD_ANNOTATION",
    "POD_NAMESPACE_LABEL",
    "POD_NAME_LABEL",
    "POD_TERMINATION_GRACE_PERIOD_ANNOTATION",
    "POD_UID_LABEL",
    "AnnotatedContainerInfo",
    "LabeledContainerInfo",
    "container_annotations",
    "container_labels",
    "node_selector",
    "parse_container_annotations",
    "parse_container_labels",
    "pod_annotations",
    "pod_labels",
]

logger = logging.getLogger(__name__)

POD_NAME_LABEL = "io.kubernetes.pod.name"
POD_NAMESPACE_LABEL = "io.kubernetes.pod.namespace"
POD_UID_LABEL = "io.kubernetes.pod.uid"
CONTAINER_NAME_LABEL = "io.kubernetes.container.name"
NODE_LABEL = "kubelet-trio.io/node"  # ours: which kubelet (node) created the object

POD_DELETION_GRACE_PERIOD_ANNOTATION = "io.kubernetes.pod.deletionGracePeriod"
POD_TERMINATION_GRACE_PERIOD_ANNOTATION = "io.kubernetes.pod.terminationGracePeriod"
CONTAINER_HASH_ANNOTATION = "io.kubernetes.container.hash"
CONTAINER_RESTART_COUNT_ANNOTATION = "io.kubernetes.container.restartCount"
CONTAINER_TERMINATION_MESSAGE_PATH_ANNOTATION = "io.kubernetes.container.terminationMessagePath"
CONTAINER_TERMINATION_MESSAGE_POLICY_ANNOTATION = "io.kubernetes.container.terminationMessagePolicy"
CONTAINER_PRE_STOP_HANDLER_ANNOTATION = "io.kubernetes.container.preStopHandler"
CONTAINER_PORTS_ANNOTATION = "io.kubernetes.container.ports"


def _compact_json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def node_selector(node_name: str, **extra: str) -> dict[str, str]:
    """A CRI label selector for objects of this node (plus ``extra`` labels, e.g. a pod uid)."""
    return {NODE_LABEL: node_name, **extra}


def pod_labels(pod: Pod, node_name: str) -> dict[str, str]:
    """Sandbox labels: the pod's labels, overridden by the kubelet's (``newPodLabels``) and ours."""
    labels = dict((pod.metadata.labels if pod.metadata else None) or {})
    labels[POD_NAME_LABEL] = pod.name
    labels[POD_NAMESPACE_LABEL] = pod.namespace
    labels[POD_UID_LABEL] = pod.uid
    labels[NODE_LABEL] = node_name
    return labels


def pod_annotations(pod: Pod) -> dict[str, str]:
    """Sandbox annotations: the pod's annotations (``newPodAnnotations``)."""
    return pod.annotations


def container_labels(container: Container, pod: Pod, node_name: str) -> dict[str, str]:
    """Container labels (``newContainerLabels``) plus our node label; pod labels are not copied."""
    return {
        POD_NAME_LABEL: pod.name,
        POD_NAMESPACE_LABEL: pod.namespace,
        POD_UID_LABEL: pod.uid,
        CONTAINER_NAME_LABEL: container.name or "",
        NODE_LABEL: node_name,
    }


def container_annotations(container: Container, pod: Pod, restart_count: int) -> dict[str, str]:
    """Container annotations (``newContainerAnnotations``)."""
    from kubelet_trio.container.hash import hash_container  # the API types: only when a container is made

    annotations = {
        CONTAINER_HASH_ANNOTATION: hash_container(container),
        CONTAINER_RESTART_COUNT_ANNOTATION: str(restart_count),
        CONTAINER_TERMINATION_MESSAGE_PATH_ANNOTATION: container.termination_message_path or "",
        CONTAINER_TERMINATION_MESSAGE_POLICY_ANNOTATION: container.termination_message_policy or "",
    }
    meta = pod.metadata
    if meta is not None and meta.deletion_grace_period_seconds is not None:
        annotations[POD_DELETION_GRACE_PERIOD_ANNOTATION] = str(meta.deletion_grace_period_seconds)
    spec = pod.spec
    if spec is not None and spec.termination_grace_period_seconds is not None:
        annotations[POD_TERMINATION_GRACE_PERIOD_ANNOTATION] = str(spec.termination_grace_period_seconds)
    lifecycle = container.lifecycle
    if lifecycle is not None and lifecycle.pre_stop is not None:
        annotations[CONTAINER_PRE_STOP_HANDLER_ANNOTATION] = _compact_json(lifecycle.pre_stop.to_dict())
    if container.ports:
        annotations[CONTAINER_PORTS_ANNOTATION] = _compact_json([p.to_dict() for p in container.ports])
    return annotations


@attrs.frozen
class LabeledContainerInfo:
    pod_name: str
    pod_namespace: str
    pod_uid: str
    container_name: str
    node: str


@attrs.frozen
class AnnotatedContainerInfo:
    hash: str = ""
    restart_count: int = 0
    termination_message_path: str = ""
    termination_message_policy: str = ""
    pod_deletion_grace_period: int | None = None
    pod_termination_grace_period: int | None = None
    pre_stop_handler: LifecycleHandler | None = None
    ports: tuple[ContainerPort, ...] = ()


def parse_container_labels(labels: Mapping[str, str]) -> LabeledContainerInfo:
    return LabeledContainerInfo(
        pod_name=labels.get(POD_NAME_LABEL, ""),
        pod_namespace=labels.get(POD_NAMESPACE_LABEL, ""),
        pod_uid=labels.get(POD_UID_LABEL, ""),
        container_name=labels.get(CONTAINER_NAME_LABEL, ""),
        node=labels.get(NODE_LABEL, ""),
    )


def _int(annotations: Mapping[str, str], key: str) -> int | None:
    raw = annotations.get(key)
    if raw is None:
        return None
    try:
        return int(raw)
    except ValueError:
        logger.warning("unparsable container annotation", extra=kv(key=key, value=raw))
        return None


def parse_container_annotations(annotations: Mapping[str, str]) -> AnnotatedContainerInfo:
    """Best effort, like Go: a bad value is logged and read as absent (hash "", restart count 0)."""
    from kubelet_trio.api import ContainerPort, LifecycleHandler  # a file of constants loads no API types

    pre_stop: LifecycleHandler | None = None
    raw_pre_stop = annotations.get(CONTAINER_PRE_STOP_HANDLER_ANNOTATION)
    if raw_pre_stop:
        try:
            pre_stop = LifecycleHandler.from_dict(json.loads(raw_pre_stop))
        except ValueError as err:  # JSONDecodeError and DecodeError are ValueErrors
            logger.warning("unparsable preStop annotation", extra=kv(err=err))
    ports: tuple[ContainerPort, ...] = ()
    raw_ports = annotations.get(CONTAINER_PORTS_ANNOTATION)
    if raw_ports:
        try:
            ports = tuple(ContainerPort.from_dict(p) for p in json.loads(raw_ports))
        except (ValueError, TypeError) as err:
            logger.warning("unparsable ports annotation", extra=kv(err=err))
    return AnnotatedContainerInfo(
        hash=annotations.get(CONTAINER_HASH_ANNOTATION, ""),
        restart_count=_int(annotations, CONTAINER_RESTART_COUNT_ANNOTATION) or 0,
        termination_message_path=annotations.get(CONTAINER_TERMINATION_MESSAGE_PATH_ANNOTATION, ""),
        termination_message_policy=annotations.get(CONTAINER_TERMINATION_MESSAGE_POLICY_ANNOTATION, ""),
        pod_deletion_grace_period=_int(annotations, POD_DELETION_GRACE_PERIOD_ANNOTATION),
        pod_termination_grace_period=_int(annotations, POD_TERMINATION_GRACE_PERIOD_ANNOTATION),
        pre_stop_handler=pre_stop,
        ports=ports,
    )
