"""The downward API in env and in volumes (upstream: test/e2e/common/node/downwardapi.go,
test/e2e/common/storage/downwardapi_volume.go, projected_downwardapi.go): pod fields, resource fields
rounded up to the divisor, limits defaulting to the node's allocatable, file modes and fsGroup."""

from __future__ import annotations

import math
from typing import Any

from kubelet_trio.api.quantity import Quantity
from tests.conformance._helpers_f import gather, last_values, node_allocatable, output_of
from tests.conformance.conftest import Namespace, after

RESOURCES = {"requests": {"cpu": "250m", "memory": "32Mi"}, "limits": {"cpu": "1250m", "memory": "64Mi"}}


def field_env(name: str, path: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}


def resource_env(name: str, resource: str, divisor: str | None = None) -> dict[str, Any]:
    ref: dict[str, Any] = {"resource": resource}
    if divisor:
        ref["divisor"] = divisor
    return {"name": name, "valueFrom": {"resourceFieldRef": ref}}


def rounded_up(quantity: str, divisor: str = "1") -> str:
    return str(math.ceil(Quantity(quantity).value / Quantity(divisor).value))


async def test_downward_api_env(ns: Namespace) -> None:
    print_env = "env | grep -E '^(POD|HOST|NODE|SA|CPU|MEMORY)_' | sort"
    pod_fields = [
        field_env("POD_NAME", "metadata.name"),
        field_env("POD_NAMESPACE", "metadata.namespace"),
        field_env("POD_UID", "metadata.uid"),
        field_env("POD_LABEL", "metadata.labels['app']"),
        field_env("POD_ANNOTATION", "metadata.annotations['note']"),
        field_env("POD_IP", "status.podIP"),
        field_env("POD_IPS", "status.podIPs"),
        field_env("HOST_IP", "status.hostIP"),
        field_env("NODE_NAME", "spec.nodeName"),
        field_env("SA_NAME", "spec.serviceAccountName"),
    ]
    resource_fields = [
        resource_env("CPU_LIMIT", "limits.cpu"),
        resource_env("CPU_LIMIT_MILLI", "limits.cpu", "1m"),
        resource_env("CPU_REQUEST", "requests.cpu"),
        resource_env("MEMORY_LIMIT", "limits.memory"),
        resource_env("MEMORY_LIMIT_MI", "limits.memory", "1Mi"),
        resource_env("MEMORY_REQUEST", "requests.memory"),
    ]
    deadline = after(90)
    fields_log, resources_log, defaults_log = await gather(
        lambda: output_of(
            ns,
            ns.pod(
                "fields",
                containers=[ns.container("c", print_env, env=pod_fields)],
                metadata={"labels": {"app": "dapi"}, "annotations": {"note": "hello"}},
                serviceAccountName="builder",
                automountServiceAccountToken=False,
            ),
            deadline=deadline,
        ),
        lambda: output_of(
            ns,
            ns.pod(
                "resources",
                containers=[ns.container("c", print_env, env=resource_fields, resources=RESOURCES)],
            ),
            deadline=deadline,
        ),
        lambda: output_of(
            ns,
            ns.pod("defaults", containers=[ns.container("c", print_env, env=resource_fields)]),
            deadline=deadline,
        ),
    )
    fields = await ns.get_pod("fields")
    assert last_values(fields_log) == {
        "POD_NAME": "fields",
        "POD_NAMESPACE": ns.name,
        "POD_UID": fields["metadata"]["uid"],
        "POD_LABEL": "dapi",
        "POD_ANNOTATION": "hello",
        "POD_IP": fields["status"]["podIP"],
        "POD_IPS": ",".join(ip["ip"] for ip in fields["status"]["podIPs"]),
        "HOST_IP": ns.cluster.node_ip,
        "NODE_NAME": ns.cluster.node,
        "SA_NAME": "builder",
    }
    assert last_values(resources_log) == {
        "CPU_LIMIT": "2",
        "CPU_LIMIT_MILLI": "1250",
        "CPU_REQUEST": "1",
        "MEMORY_LIMIT": "67108864",
        "MEMORY_LIMIT_MI": "64",
        "MEMORY_REQUEST": "33554432",
    }
    # No limits: the node's allocatable; no requests: 0 (rounded up: cpu 0).
    allocatable = await node_allocatable(ns)
    assert last_values(defaults_log) == {
        "CPU_LIMIT": rounded_up(allocatable["cpu"]),
        "CPU_LIMIT_MILLI": rounded_up(allocatable["cpu"], "1m"),
        "CPU_REQUEST": "0",
        "MEMORY_LIMIT": rounded_up(allocatable["memory"]),
        "MEMORY_LIMIT_MI": rounded_up(allocatable["memory"], "1Mi"),
        "MEMORY_REQUEST": "0",
    }


def downward_volume(**source: Any) -> dict[str, Any]:
    items = [
        {"path": "podname", "fieldRef": {"fieldPath": "metadata.name"}},
        {"path": "namespace", "fieldRef": {"fieldPath": "metadata.namespace"}},
        {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
        {"path": "annotations", "fieldRef": {"fieldPath": "metadata.annotations"}},
        {"path": "cpu_limit", "resourceFieldRef": {"containerName": "c", "resource": "limits.cpu"}},
        {
            "path": "cpu_request",
            "resourceFieldRef": {"containerName": "c", "resource": "requests.cpu", "divisor": "1m"},
        },
        {"path": "memory_limit", "resourceFieldRef": {"containerName": "c", "resource": "limits.memory"}},
        {
            "path": "sub/memory_request",
            "resourceFieldRef": {"containerName": "c", "resource": "requests.memory", "divisor": "1Mi"},
            "mode": 0o600,
        },
    ]
    return {"name": "podinfo", "downwardAPI": {"items": items, **source}}


SHOW_FILES = (
    "cd /etc/podinfo; for f in podname namespace cpu_limit cpu_request memory_limit sub/memory_request; do"
    ' echo "$f=$(cat $f)"; done; echo "labels=$(cat labels | tr "\\n" ",")";'
    ' echo "annotation=$(grep note= annotations)";'
    " for f in podname sub/memory_request; do echo \"mode:$f=$(stat -L -c '%a %u %g' $f)\"; done"
)


async def test_downward_api_volumes(ns: Namespace) -> None:
    """Files with fields and rounded-up resources; defaultMode and per-item mode; with fsGroup the files
    belong to the group and are group-readable; the same through a projected volume."""
    mount = [{"name": "podinfo", "mountPath": "/etc/podinfo"}]
    metadata = {"labels": {"app": "dapi", "tier": "web"}, "annotations": {"note": "hello"}}

    def pod(name: str, volume: dict[str, Any], **spec: Any) -> dict[str, Any]:
        return ns.pod(
            name,
            containers=[ns.container("c", SHOW_FILES, resources=RESOURCES, volumeMounts=mount)],
            volumes=[volume],
            metadata=metadata,
            **spec,
        )

    projected = {
        "name": "podinfo",
        "projected": {
            "defaultMode": 0o400,
            "sources": [{"downwardAPI": {"items": downward_volume()["downwardAPI"]["items"]}}],
        },
    }
    deadline = after(90)
    plain, non_root, via_projected = await gather(
        lambda: output_of(ns, pod("plain", downward_volume(defaultMode=0o400)), deadline=deadline),
        lambda: output_of(
            ns,
            pod(
                "non-root",
                downward_volume(defaultMode=0o440),
                securityContext={"runAsUser": 1001, "fsGroup": 1234},
            ),
            deadline=deadline,
        ),
        lambda: output_of(ns, pod("projected", projected), deadline=deadline),
    )
    common = {
        "namespace": ns.name,
        "cpu_limit": "2",
        "cpu_request": "250",
        "memory_limit": "67108864",
        "sub/memory_request": "32",
        "labels": 'app="dapi",tier="web"',
        "annotation": 'note="hello"',
    }
    assert last_values(plain) == {
        **common,
        "podname": "plain",
        "mode:podname": "400 0 0",
        "mode:sub/memory_request": "600 0 0",
    }
    assert last_values(non_root) == {
        **common,
        "podname": "non-root",
        "mode:podname": "440 0 1234",
        "mode:sub/memory_request": "640 0 1234",
    }
    assert last_values(via_projected) == {
        **common,
        "podname": "projected",
        "mode:podname": "400 0 0",
        "mode:sub/memory_request": "600 0 0",
    }
