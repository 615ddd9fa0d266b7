"""An embeddable node for test harnesses: a ``Kubelet`` on the simulated runtime, driven from Python.

::

    async with open_sim_node("node-1") as node:
        pod = await node.apply({"metadata": {"name": "web"}, "spec": {"containers": [...]}})
        await node.wait_for_phase(pod, "Running")

Pods are fed through a pod config source named ``test`` (like an API server would feed them), so the
node sees the same ADD/UPDATE/DELETE/REMOVE stream as in production. Everything runs on Trio's clock:
under ``trio.testing.MockClock(autojump_threshold=0)`` hours of node behaviour take milliseconds.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from typing import Any

import attrs
import trio

from kubelet_trio.api import ObjectMeta, Pod, PodStatus, default_pod
from kubelet_trio.api.timefmt import rfc3339
from kubelet_trio.client import ApiClient
from kubelet_trio.clock import WallClock
from kubelet_trio.config.podconfig import PodConfig
from kubelet_trio.config.types import SourceSet
from kubelet_trio.cri.runtime import Runtime
from kubelet_trio.fsio import RunSync, run_in_thread, run_inline
from kubelet_trio.kubelet import EventSink, Kubelet, KubeletConfig
from kubelet_trio.kubelet_builder import KubeletDeps, open_kubelet
from kubelet_trio.sim.runtime import SimRuntime
from kubelet_trio.volumemanager.mounter import unmount_all_under

TEST_SOURCE = "test"


def _uid_for(namespace: str, name: str) -> str:
    digest = hashlib.sha256(f"{namespace}/{name}".encode()).hexdigest()
    return f"{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"


def as_pod(manifest: Pod | Mapping[str, Any]) -> Pod:
    """Decode and default a manifest; fill namespace ``default`` and a UID stable per namespace/name."""
    pod = manifest if isinstance(manifest, Pod) else Pod.from_dict(dict(manifest))
    meta = pod.metadata or ObjectMeta()
    namespace = meta.namespace or "default"
    meta = attrs.evolve(meta, namespace=namespace, uid=meta.uid or _uid_for(namespace, meta.name or ""))
    return default_pod(attrs.evolve(pod, metadata=meta))


@attrs.define(eq=False)
class SimNode:
    """A running node and its pod source (named for its main use; any runtime works)."""

    kubelet: Kubelet
    sim: Runtime
    _source: trio.MemorySendChannel[SourceSet]
    _pods: dict[str, Pod] = attrs.Factory(dict)
    clock: WallClock = attrs.Factory(WallClock)  # the node's: deletion timestamps

    async def _publish(self) -> None:
        await self._source.send(SourceSet(TEST_SOURCE, tuple(self._pods.values())))

    async def apply(self, *manifests: Pod | Mapping[str, Any]) -> list[Pod]:
        """Create or update pods (the whole desired set is re-sent, as a source does)."""
        pods = [as_pod(m) for m in manifests]
        for pod in pods:
            self._pods[pod.uid] = pod
        await self._publish()
        return pods

    async def remove(self, *pods: Pod) -> None:
        """Drop pods from the source (REMOVE): the node kills them without a grace-period negotiation."""
        for pod in pods:
            self._pods.pop(pod.uid, None)
        await self._publish()

    async def delete(self, pod: Pod, grace_period_seconds: int | None = None) -> Pod:
        """Request graceful deletion (DELETE): set deletionTimestamp (+ deletionGracePeriodSeconds)."""
        current = self._pods[pod.uid]
        assert current.metadata is not None
        meta = attrs.evolve(
            current.metadata,
            deletion_timestamp=rfc3339(self.clock.now()),
            deletion_grace_period_seconds=grace_period_seconds,
        )
        deleted = attrs.evolve(current, metadata=meta)
        self._pods[pod.uid] = deleted
        await self._publish()
        return deleted

    def status(self, pod: Pod) -> PodStatus | None:
        return self.kubelet.status_of(pod.uid)

    async def wait_for(self, pod: Pod, predicate: Callable[[PodStatus], bool]) -> PodStatus:
        return await self.kubelet.wait_for_status(pod.uid, predicate)

    async def wait_for_phase(self, pod: Pod, *phases: str) -> PodStatus:
        return await self.wait_for(pod, lambda s: s.phase in phases)

    async def wait_terminated(self, pod: Pod) -> None:
        """Until the pod worker has finished the pod (containers stopped, cleanup done)."""
        await self.kubelet.wait_pod_finished(pod.uid)


@contextlib.contextmanager
def temporary_root(prefix: str) -> Iterator[str]:
    """A temporary directory for a node's files; mounts left below it are detached before removal."""
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        try:
            yield tmp
        finally:
            if os.geteuid() == 0:
                unmount_all_under(tmp)


@contextlib.asynccontextmanager
async def open_node(
    runtime: Runtime,
    node_name: str = "test-node",
    *,
    clock: WallClock | None = None,
    run_sync: RunSync = run_in_thread,
    event_sink: EventSink | None = None,
    webhook_client: ApiClient | None = None,
    **config: Any,
) -> AsyncIterator[SimNode]:
    """Run a node on any ``Runtime`` until the block exits; pods are left as they are (like a kubelet),
    but the node's temporary root directory goes, tmpfs volumes and all.

    ``config`` is :class:`~kubelet_trio.kubelet.KubeletConfig` fields; ``event_sink`` gets the pod events;
    ``webhook_client`` answers the Kubelet API's TokenReview and SubjectAccessReview."""
    clock = clock or WallClock()
    with temporary_root("kubelet-trio-node-") as tmp:
        kubelet_config = KubeletConfig(
            node_name=node_name,
            pod_logs_dir=config.pop("pod_logs_dir", f"{tmp}/pod-logs"),
            root_dir=config.pop("root_dir", f"{tmp}/root"),
            node_ips=config.pop("node_ips", ("192.0.2.10",)),
            **config,
        )
        pod_config = PodConfig(sources=(TEST_SOURCE,), now=clock.now)
        source = pod_config.source_channel(TEST_SOURCE)
        deps = KubeletDeps(
            runtime=runtime,
            pod_config=pod_config,
            clock=clock,
            run_sync=run_sync,
            event_sink=event_sink,
            webhook_client=webhook_client,
        )
        async with source, open_kubelet(kubelet_config, deps) as built:
            node = SimNode(built.kubelet, runtime, source, clock=clock)
            await node._publish()  # an empty first SET: the source is ready
            yield node


@contextlib.asynccontextmanager
async def open_sim_node(
    node_name: str = "sim-node",
    *,
    sim: SimRuntime | None = None,
    clock: WallClock | None = None,
    **config: Any,
) -> AsyncIterator[SimNode]:
    """A node on a SimRuntime sharing its clock; file operations inline so MockClock stays exact; no tmpfs
    mounts (simulated containers cannot see them)."""
    config.setdefault("memory_backed_volumes", False)
    clock = clock or WallClock()
    sim = sim or SimRuntime(clock=clock, run_sync=run_inline)
    async with open_node(sim, node_name, clock=clock, run_sync=run_inline, **config) as node:
        yield node
