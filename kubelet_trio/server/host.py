"""What the kubelet's HTTP servers and run-once ask of the kubelet (Go: ``server.HostInterface``).

Verbs, not parts: each answers with pods, statuses or other values (or does one thing, for run-once), so
the servers never hold a manager and the Kubelet keeps its components private. The Kubelet satisfies the
protocol; a test can serve a stand-in. ``tests/test_kubelet_fields.py`` checks that no module other than
the Kubelet's own and the builder reads anything of a Kubelet but these verbs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from kubelet_trio.api import Pod
    from kubelet_trio.api.status import PodStatus as ApiPodStatus
    from kubelet_trio.boundary import BoundaryErrors
    from kubelet_trio.container.types import ContainerStatus, RuntimePod
    from kubelet_trio.kubelet import KubeletConfig
    from kubelet_trio.stats import Summary
    from kubelet_trio.stats.cadvisor import CadvisorSnapshot

__all__ = ["HostInterface"]


class HostInterface(Protocol):
    """Read access to one node (settings, desired pods and their statuses, what the runtime runs, health,
    statistics), its streaming URLs, and the few requests run-once makes."""

    # -- settings and plumbing -----------------------------------------------------------------------

    def kubelet_config(self) -> KubeletConfig:
        """The node's settings: ports, TLS and authentication (Go passes ``kubeCfg`` beside the host)."""
        ...

    def auth_client(self) -> Any:
        """The API client of the Kubelet API's webhooks (TokenReview, SubjectAccessReview); None
        without one."""
        ...

    def wall_ns(self) -> int:
        """The node clock's wall time in nanoseconds (``sinceSeconds`` of log requests)."""
        ...

    async def run_blocking(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` off the event loop, as the node runs its small file operations."""
        ...

    def boundary_errors(self) -> BoundaryErrors:
        """Where failures contained at a server's boundary are counted."""
        ...

    # -- pods ------------------------------------------------------------------------------------------

    def pods(self) -> list[Pod]:
        """Go ``GetPods``: every desired pod, with the status the kubelet reports for it."""
        ...

    def pod_by_name(self, namespace: str, name: str) -> Pod | None:
        """Go ``GetPodByName``: the desired pod (its spec as given, no status) or None."""
        ...

    def status_of(self, uid: str) -> ApiPodStatus | None:
        """The status the kubelet reports for the pod, None before the first."""
        ...

    async def wait_for_status(self, uid: str, predicate: Callable[[ApiPodStatus], bool]) -> ApiPodStatus:
        """The pod's first status (the current one included) that satisfies ``predicate``."""
        ...

    async def wait_status_change(self, seen: int) -> int:
        """Wait until some pod's status changed since version ``seen`` (at once if it already has; -1:
        any version); returns the version now."""
        ...

    def container_instances(self, uid: str, name: str | None = None) -> list[ContainerStatus]:
        """The pod's container instances in the pod cache (all, or those of container ``name``),
        newest first."""
        ...

    async def running_pods(self) -> list[RuntimePod]:
        """Go ``GetRunningPods``: the runtime's ready sandboxes and running containers, by pod."""
        ...

    # -- streaming and commands ----------------------------------------------------------------------

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
        """Go ``GetExec``: the runtime's streaming URL for ``cmd`` in the running instance of
        ``container``. LookupError when none runs; the runtime's errors as they are."""
        ...

    async def attach_url(self, pod: Pod, container: str, *, stdin: bool, stdout: bool, stderr: bool) -> str:
        """Go ``GetAttach``, with the TTY setting of the container's spec (a running process's terminal
        cannot change). LookupError for a container not in the spec or not running."""
        ...

    async def port_forward_url(self, pod: Pod, ports: Sequence[int]) -> str:
        """Go ``GetPortForward``: into the pod's ready sandbox (else its newest). LookupError without one."""
        ...

    async def run_in_container(self, pod: Pod, container: str, cmd: Sequence[str]) -> tuple[int, bytes]:
        """Go ``RunInContainer``: ``(exit code, stdout + stderr)`` of ``cmd`` in the running instance.
        LookupError when none runs."""
        ...

    async def container_log_path(self, container_id: str) -> str:
        """Where the runtime writes the instance's log ("" when it names no file); the runtime's errors
        (NotFoundError for an instance it no longer has) as they are."""
        ...

    # -- statistics and metrics ----------------------------------------------------------------------

    async def stats_summary(self, *, cpu_and_memory_only: bool = False) -> Summary:
        """``/stats/summary`` (Go: the stats provider the host embeds)."""
        ...

    async def cadvisor_snapshot(self) -> CadvisorSnapshot:
        """The containers' and the machine's figures for ``/metrics/cadvisor``."""
        ...

    def render_metrics(self) -> bytes:
        """``/metrics``, caught up with the pod cache and the statuses."""
        ...

    def render_probe_metrics(self) -> bytes:
        """``/metrics/probes``."""
        ...

    # -- health ----------------------------------------------------------------------------------------

    def resync_interval(self) -> float:
        """Go ``ResyncInterval``: ``syncFrequency``, from which the sync loop's health threshold follows."""
        ...

    def latest_loop_entry_time(self) -> float:
        """Go ``LatestLoopEntryTime``: when (Trio time) the sync loop last iterated; -inf before."""
        ...

    def pleg_health(self) -> tuple[bool, str]:
        """Whether the PLEG relisted recently enough, and why not."""
        ...

    def runtime_health(self) -> str | None:
        """The container runtime's last error (down, or not RuntimeReady); None while healthy."""
        ...

    # -- run-once ----------------------------------------------------------------------------------------

    def request_sync(self, uid: str) -> Pod | None:
        """Have the desired pod synced again (run-once's retries); the pod, or None if not desired."""
        ...

    async def wait_pod_finished(self, uid: str) -> None:
        """Until the pod's worker has terminated it and cleaned up. KeyError if it has no worker."""
        ...

    async def purge_pods(self, uids: Iterable[str]) -> None:
        """For pods removed from their sources: wait until their workers finished them, then delete
        what the runtime still holds of them (stopped containers, sandboxes, log directories)."""
        ...
