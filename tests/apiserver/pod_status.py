"""Pod status as the (fake) API server holds it: phase and container states of a pod by name."""

from __future__ import annotations

from typing import Any

from kubelet_trio.testing.fakeapi import FakeApi


def phase(api: FakeApi, name: str) -> str | None:
    return api.pod(name).get("status", {}).get("phase") if api.has_pod(name) else None


def container_status(api: FakeApi, pod: str, container: str = "app") -> dict[str, Any] | None:
    """The published status of one container, or None while the pod or its status is missing."""
    if not api.has_pod(pod):
        return None
    for c in api.pod(pod).get("status", {}).get("containerStatuses") or ():
        if c["name"] == container:
            return c
    return None


def api_container(api: FakeApi, name: str, container: str) -> dict[str, Any]:
    """The published status of one container; AssertionError when there is none."""
    status = container_status(api, name, container)
    if status is None:
        raise AssertionError(f"no status for {container} in {api.pod(name).get('status')}")
    return status


def running(api: FakeApi, pod: str, container: str = "app") -> bool:
    status = container_status(api, pod, container)
    return status is not None and "running" in status.get("state", {})
