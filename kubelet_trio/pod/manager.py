"""The desired pods, by UID (Go: ``pkg/kubelet/pod/pod_manager.go``): what the config sources asked for,
which the sync loop and housekeeping compare against what runs."""

from __future__ import annotations

import attrs

from kubelet_trio.api import Pod

__all__ = ["PodManager"]


@attrs.define(eq=False)
class PodManager:
    """The desired pods, by UID (Go: pkg/kubelet/pod.Manager)."""

    _pods: dict[str, Pod] = attrs.Factory(dict)

    def add_or_update(self, pod: Pod) -> None:
        self._pods[pod.uid] = pod

    def remove(self, pod: Pod) -> None:
        self._pods.pop(pod.uid, None)

    def get(self, uid: str) -> Pod | None:
        return self._pods.get(uid)

    def pods(self) -> list[Pod]:
        return list(self._pods.values())

    def by_uid(self) -> dict[str, Pod]:
        return dict(self._pods)
