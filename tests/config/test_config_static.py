"""Static pod identity: name, namespace, node, UID, annotations, toleration, phase."""

from __future__ import annotations

import attrs

from kubelet_trio.api import ObjectMeta, Toleration, default_pod, validate_pod
from kubelet_trio.config import (
    CONFIG_HASH_ANNOTATION,
    CONFIG_SOURCE_ANNOTATION,
    generate_pod_name,
    make_static_pod,
    static_pod_uid,
)
from tests.config.conftest import api_pod


def _manifest(**meta: object):  # type: ignore[no-untyped-def]
    pod = api_pod("web", "", **meta)
    return default_pod(attrs.evolve(pod, metadata=attrs.evolve(pod.metadata, uid=None, namespace=None)))


def test_static_file_pod() -> None:
    pod = make_static_pod(_manifest(), node_name="Node-A", source="file", origin="file:/etc/m/web.yaml")
    meta = pod.metadata
    assert meta is not None and pod.spec is not None and pod.status is not None
    assert (meta.name, meta.namespace, pod.spec.node_name) == ("web-node-a", "default", "Node-A")
    assert len(meta.uid or "") == 32 and int(meta.uid or "", 16) >= 0
    assert meta.annotations == {CONFIG_HASH_ANNOTATION: meta.uid, CONFIG_SOURCE_ANNOTATION: "file"}
    assert pod.spec.tolerations == (Toleration(operator="Exists", effect="NoExecute"),)
    assert pod.status.phase == "Pending"
    assert validate_pod(attrs.evolve(pod, spec=attrs.evolve(pod.spec, node_name="node-a"))) == []


def test_http_pod_has_no_toleration_and_keeps_namespace() -> None:
    manifest = attrs.evolve(_manifest(), metadata=ObjectMeta(name="web", namespace="edge"))
    pod = make_static_pod(manifest, node_name="n1", source="http", origin="url:http://x/pods")
    assert pod.spec is not None and pod.spec.tolerations is None
    assert pod.namespace == "edge" and pod.name == "web-n1"


def test_uid_is_stable_and_depends_on_content_node_and_origin() -> None:
    manifest = _manifest()
    uid = static_pod_uid(manifest, node_name="n1", origin="file:/a.yaml")
    assert uid == static_pod_uid(_manifest(), node_name="n1", origin="file:/a.yaml")
    assert uid != static_pod_uid(manifest, node_name="n2", origin="file:/a.yaml")
    assert uid != static_pod_uid(manifest, node_name="n1", origin="file:/b.yaml")
    changed = _manifest(labels={"v": "2"})
    assert uid != static_pod_uid(changed, node_name="n1", origin="file:/a.yaml")


def test_explicit_uid_is_kept() -> None:
    manifest = attrs.evolve(_manifest(), metadata=ObjectMeta(name="web", uid="fixed"))
    assert make_static_pod(manifest, node_name="n", source="file", origin="file:x").uid == "fixed"


def test_generate_pod_name() -> None:
    assert generate_pod_name("etcd", "Control-Plane-1") == "etcd-control-plane-1"
