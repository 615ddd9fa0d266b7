"""The Kubelet's ``HostInterface`` verbs: what its HTTP servers and run-once ask of the node.

Go: ``pkg/kubelet/server.HostInterface`` as ``*Kubelet`` implements it (``GetPods``, ``GetRunningPods``,
``GetExec``, ``ResyncInterval``, ... spread over ``kubelet.go``, ``kubelet_pods.go`` and
``kubelet_getters.go``); the protocol is :class:`kubelet_trio.server.host.HostInterface`. The verbs answer
with values (pods, statuses, URLs, figures), so no module but the Kubelet's own and the builder holds a
component of the Kubelet.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from kubelet_trio.container.types import ContainerState
from kubelet_trio.pod_workers import UpdatePodOptions, UpdateType

if TYPE_CHECKING:
    from kubelet_trio.api import Pod
    from kubelet_trio.api.status import PodStatus as ApiPodStatus
    from kubelet_trio.boundary import BoundaryErrors
    from kubelet_trio.clock import WallClock
    from kubelet_trio.container.cache import PodCache
    from kubelet_trio.container.types import ContainerStatus, RuntimePod
    from kubelet_trio.cri.runtime import Runtime
    from kubelet_trio.fsio import RunSync
    from kubelet_trio.kubelet_config import KubeletConfig
    from kubelet_trio.kuberuntime.manager import KubeRuntimeManager
    from kubelet_trio.metrics import KubeletMetrics
    from kubelet_trio.pleg.generic import GenericPLEG
    from kubelet_trio.pod.manager import PodManager
    from kubelet_trio.pod_workers import PodWorkers
    from kubelet_trio.stats import CriStatsProvider, Summary
    from kubelet_trio.stats.cadvisor import CadvisorSnapshot
    from kubelet_trio.status.manager import StatusManager


class HostInterfaceMixin:
    """The 28 verbs of :class:`~kubelet_trio.server.host.HostInterface`, as methods of the
    :class:`~kubelet_trio.kubelet.Kubelet` (whose fields the annotations below declare for the type
    checker; attrs defines them on the Kubelet)."""

    __slots__ = ()

    config: KubeletConfig
    runtime: Runtime
    clock: WallClock
    run_sync: RunSync
    metrics: KubeletMetrics
    runtime_error: str | None
    sync_loop_last_iteration: float
    _api_client: Any
    _cache: PodCache
    _pod_manager: PodManager
    _status_manager: StatusManager
    _kube_runtime: KubeRuntimeManager
    _pleg: GenericPLEG
    _pod_workers: PodWorkers
    _stats_provider: CriStatsProvider

    def kubelet_config(self) -> KubeletConfig:
        return self.config

    def auth_client(self) -> Any:
        return self._api_client

    def wall_ns(self) -> int:
        return self.clock.wall_ns()

    async def run_blocking(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await self.run_sync(fn, *args)

    def boundary_errors(self) -> BoundaryErrors:
        return self.metrics.boundary_errors

    def pods(self) -> list[Pod]:
        """Go ``GetPods``: the desired pods, each with the status this kubelet reports for it."""
        pods = []
        for pod in self._pod_manager.pods():
            status = self._status_manager.get(pod.uid)
            pods.append(pod if status is None else attrs.evolve(pod, status=status))
        return pods

    def pod_by_name(self, namespace: str, name: str) -> Pod | None:
        for pod in self._pod_manager.pods():
            if pod.namespace == namespace and pod.name == name:
                return pod
        return None

    def status_of(self, uid: str) -> ApiPodStatus | None:
        return self._status_manager.get(uid)

    async def wait_for_status(self, uid: str, predicate: Callable[[ApiPodStatus], bool]) -> ApiPodStatus:
        return await self._status_manager.wait_for(uid, predicate)

    async def wait_status_change(self, seen: int) -> int:
        version: int = await self._status_manager.version.wait_value(lambda value: value != seen)
        return version

    def container_instances(self, uid: str, name: str | None = None) -> list[ContainerStatus]:
        status = self._cache.get(uid)
        return list(status.container_statuses) if name is None else status.instances(name)

    async def running_pods(self) -> list[RuntimePod]:
        return await self._kube_runtime.get_pods(all=False)

    def _running_instance(self, pod: Pod, container: str) -> str:
        """The id of the running instance of ``container`` in the pod cache (Go's error otherwise)."""
        for status in self._cache.get(pod.uid).instances(container):
            if status.state is ContainerState.RUNNING:
                return status.id
        raise LookupError(f'container not found ("{container}")')

    async def exec_url(
        self,
        pod: Pod,
        container: str,
        cmd: Sequence[str],
        *,
        stdin: bool,
        stdout: bool,
        stderr: bool,
        tty: bool,
    ) -> str:
        from kubelet_trio.cri.gen.runtime import v1 as pb

        container_id = self._running_instance(pod, container)
        request = pb.ExecRequest(
            container_id=container_id, cmd=list(cmd), tty=tty, stdin=stdin, stdout=stdout, stderr=stderr
        )
        return await self.runtime.exec(request)

    async def attach_url(self, pod: Pod, container: str, *, stdin: bool, stdout: bool, stderr: bool) -> str:
        from kubelet_trio.cri.gen.runtime import v1 as pb

        spec = next((c for c in pod.spec.all_containers() if c.name == container), None) if pod.spec else None
        if spec is None:
            raise LookupError(f'container not found ("{container}")')
        tty = bool(spec.tty)
        container_id = self._running_instance(pod, container)
        request = pb.AttachRequest(
            container_id=container_id, stdin=stdin, tty=tty, stdout=stdout, stderr=stderr and not tty
        )
        return await self.runtime.attach(request)

    async def port_forward_url(self, pod: Pod, ports: Sequence[int]) -> str:
        from kubelet_trio.cri.gen.runtime import v1 as pb

        sandboxes = self._cache.get(pod.uid).sandbox_statuses  # newest first
        ready = [s for s in sandboxes if s.ready]
        if not (ready or sandboxes):
            raise LookupError(f'failed to find sandbox for pod "{pod.name}"')
        sandbox_id = (ready or list(sandboxes))[0].id
        return await self.runtime.port_forward(
            pb.PortForwardRequest(pod_sandbox_id=sandbox_id, port=list(ports))
        )

    async def run_in_container(self, pod: Pod, container: str, cmd: Sequence[str]) -> tuple[int, bytes]:
        answer = await self.runtime.exec_sync(self._running_instance(pod, container), list(cmd), 0)
        return answer.exit_code, bytes(answer.stdout) + bytes(answer.stderr)

    async def container_log_path(self, container_id: str) -> str:
        response = await self.runtime.container_status(container_id)
        return response.status.log_path if response.status else ""

    async def stats_summary(self, *, cpu_and_memory_only: bool = False) -> Summary:
        return await self._stats_provider.summary(cpu_and_memory_only=cpu_and_memory_only)

    async def cadvisor_snapshot(self) -> CadvisorSnapshot:
        from kubelet_trio.stats.cadvisor import cadvisor_snapshot  # with the first /metrics/cadvisor

        return await cadvisor_snapshot(self.runtime, self.config.node_name, self.run_sync)

    def render_metrics(self) -> bytes:
        self.metrics.update_running(self._cache)
        self.metrics.note_statuses(self._status_manager, self.clock.now())  # catch up with the watcher
        return self.metrics.render()

    def render_probe_metrics(self) -> bytes:
        return self.metrics.render_probes()

    def resync_interval(self) -> float:
        return self.config.sync_frequency

    def latest_loop_entry_time(self) -> float:
        return self.sync_loop_last_iteration

    def pleg_health(self) -> tuple[bool, str]:
        return self._pleg.healthy()

    def runtime_health(self) -> str | None:
        return self.runtime_error

    def request_sync(self, uid: str) -> Pod | None:
        pod = self._pod_manager.get(uid)
        if pod is not None:
            self._pod_workers.update_pod(UpdatePodOptions(UpdateType.SYNC, pod=pod))
        return pod

    async def wait_pod_finished(self, uid: str) -> None:
        await self._pod_workers.wait_finished(uid)

    async def purge_pods(self, uids: Iterable[str]) -> None:
        purged = set(uids)
        for uid in purged:
            if self._pod_workers.is_known(uid):
                await self._pod_workers.wait_finished(uid)
        leftovers = [p for p in await self._kube_runtime.get_pods(all=True) if p.uid in purged]
        await self._kube_runtime.gc.collect_orphans(leftovers, ())
