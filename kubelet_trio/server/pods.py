"""``/pods`` (the desired pods with their current status) and ``/runningpods`` (what the runtime runs).

Go: ``server.go`` ``getPods`` (``host.GetPods()``: the pod manager's pods; the Go kubelet fills statuses
from the status manager) and ``getRunningPods`` (runtime pods converted with ``ConvertToAPIPod``: only
metadata and container names and images).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kubelet_trio.httpserver.asgi import Handler, Request, Response

if TYPE_CHECKING:
    from kubelet_trio.server.host import HostInterface

__all__ = ["pod_list", "pods_handler", "running_pods", "running_pods_handler"]


def _list(items: list[dict[str, Any]]) -> dict[str, Any]:
    return {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items}


def pod_list(kubelet: HostInterface) -> dict[str, Any]:
    """Every desired pod (its latest spec), with the status the kubelet currently reports for it."""
    return _list([{"kind": "Pod", "apiVersion": "v1", **pod.to_dict()} for pod in kubelet.pods()])


async def running_pods(kubelet: HostInterface) -> dict[str, Any]:
    items = []
    for runtime_pod in await kubelet.running_pods():
        cached = {c.id: c for c in kubelet.container_instances(runtime_pod.uid)}
        containers = [
            {"name": c.name, "image": cached[c.id].image if c.id in cached else ""}
            for c in runtime_pod.containers
        ]
        items.append(
            {
                "metadata": {
                    "name": runtime_pod.name,
                    "namespace": runtime_pod.namespace,
                    "uid": runtime_pod.uid,
                    "creationTimestamp": None,
                },
                "spec": {"containers": containers},
                "status": {},
            }
        )
    return _list(items)


def pods_handler(kubelet: HostInterface) -> Handler:
    async def handle(request: Request) -> Response:
        return Response.json(pod_list(kubelet))

    return handle


def running_pods_handler(kubelet: HostInterface) -> Handler:
    async def handle(request: Request) -> Response:
        return Response.json(await running_pods(kubelet))

    return handle
