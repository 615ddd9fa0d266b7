"""Pod manifests for SimRuntime nodes, and questions about the pod statuses they produce.

``pod_manifest("web", {"app": "run", "job": "exit 1 after 5s"})`` is a pod whose containers follow those
SimRuntime scripts; feed it to ``open_sim_node(...).apply`` or to a (fake) API server.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from kubelet_trio.api import ContainerStatus, PodStatus
from kubelet_trio.sim.runtime import SIM_ANNOTATION_PREFIX, SimRuntime

SIM_IMAGE = "registry.sim/busybox:1.36"


def pod_manifest(
    name: str,
    containers: Mapping[str, str],
    *,
    restart_policy: str = "Always",
    init: Mapping[str, str] | None = None,
    image: str = SIM_IMAGE,
    grace: int | None = None,
    node: str | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """A pod whose (init) containers behave as the given SimRuntime scripts; ``spec`` adds pod spec fields."""
    scripts = {**(init or {}), **containers}
    body: dict[str, Any] = {
        "restartPolicy": restart_policy,
        "containers": [{"name": c, "image": image} for c in containers],
        **spec,
    }
    if init:
        body["initContainers"] = [{"name": c, "image": image} for c in init]
    if grace is not None:
        body["terminationGracePeriodSeconds"] = grace
    if node is not None:
        body["nodeName"] = node
    return {
        "metadata": {"name": name, "annotations": {SIM_ANNOTATION_PREFIX + c: s for c, s in scripts.items()}},
        "spec": body,
    }


def container_status(status: PodStatus, name: str = "app") -> ContainerStatus:
    """The status of the (init) container ``name``; AssertionError when the pod status has none."""
    for c in (status.container_statuses or ()) + (status.init_container_statuses or ()):
        if c.name == name:
            return c
    raise AssertionError(f"no status for container {name}: {status}")


def is_running(status: PodStatus, name: str = "app") -> bool:
    """Whether the pod status shows container ``name`` running."""
    try:
        c = container_status(status, name)
    except AssertionError:
        return False
    return c.state is not None and c.state.running is not None


@attrs.define(eq=False, kw_only=True)
class ExitZeroOnTerm(SimRuntime):
    """A SimRuntime whose containers exit 0 on SIGTERM (a shell with ``trap 'exit 0' TERM``, most servers)."""

    async def stop_container(self, container_id: str, timeout_seconds: int) -> None:
        status = (await self.container_status(container_id)).status
        if status is not None and status.state.name == "CONTAINER_RUNNING":
            self.crash_container(container_id, 0)
