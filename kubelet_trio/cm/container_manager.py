"""The container manager's cgroup side (Go: ``pkg/kubelet/cm/container_manager_linux.go``).

With ``cgroupsPerQOS`` the node's pods live in a tree the kubelet owns::

    <cgroupRoot>/kubepods                  capacity or allocatable (node_container_manager)
        pod<uid>                           Guaranteed pods
        burstable/pod<uid>                 shares = the Burstable pods' CPU requests
        besteffort/pod<uid>                shares = 2

:class:`ContainerManager` checks the configuration against the machine and the runtime (the cgroup
root exists; the runtime uses the same cgroup driver), creates ``kubepods`` and the tiers, then keeps the
tiers' CPU shares current once a minute. The kubelet asks it for each pod's cgroup parent, creates the
pod cgroup before the sandbox (:meth:`ContainerManager.ensure_pod_cgroup`) and removes pod cgroups
whose pods are gone (:meth:`ContainerManager.cleanup_orphaned_pod_cgroups`).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Collection, Mapping, Sequence
from contextlib import aclosing
from typing import TYPE_CHECKING, Any

import attrs
import trio
import trio_util

from kubelet_trio import defaults
from kubelet_trio.api import Pod, Quantity
from kubelet_trio.cm.allocatable import read_node_capacity
from kubelet_trio.cm.cgroup_manager import (
    CGROUP_ROOT,
    CGROUPFS,
    HUGEPAGES_DIR,
    SYSTEMD,
    CgroupDriver,
    CgroupError,
    CgroupManager,
    CgroupName,
    machine_hugepage_sizes,
    new_cgroup_name,
    parse_cgroupfs_to_cgroup_name,
)
from kubelet_trio.cm.helpers import ResourceConfig
from kubelet_trio.cm.node_container_manager import (
    FAILED_NODE_ALLOCATABLE_ENFORCEMENT,
    KUBE_RESERVED_ENFORCEMENT_KEY,
    KUBEPODS_CGROUP,
    NODE_ALLOCATABLE_ENFORCED,
    PODS_ENFORCEMENT_KEY,
    SYSTEM_RESERVED_ENFORCEMENT_KEY,
    NodeCapacity,
    kubepods_resource_config,
    reserved_resource_config,
)
from kubelet_trio.cm.pod_container_manager import PodContainerManager
from kubelet_trio.cm.qos_container_manager import (
    PERIODIC_QOS_CGROUP_UPDATE_INTERVAL,
    QOSContainerManager,
    QOSContainersInfo,
)
from kubelet_trio.fsio import RunSync, run_in_thread
from kubelet_trio.logs import go_quote, kv

if TYPE_CHECKING:
    from kubelet_trio.cri.runtime import RuntimeService

__all__ = [
    "FAILED_TO_CREATE_POD_CONTAINER",
    "CgroupDriverMismatch",
    "ContainerManager",
    "NodeConfig",
    "read_cgroup_capacity",
    "runtime_cgroup_driver",
]

logger = logging.getLogger(__name__)

#: Warning event on a pod whose cgroup could not be made (Go: ``events.FailedToCreatePodContainer``)
FAILED_TO_CREATE_POD_CONTAINER = "FailedCreatePodContainer"
#: Go retries enforcing allocatable on ``kubepods`` this often until it succeeds
ENFORCE_RETRY_INTERVAL = 60.0  # seconds
PID_MAX = "/proc/sys/kernel/pid_max"
SYSTEMD_RUNNING = "/run/systemd/system"  # sd_booted()
#: v1 hierarchies the kubelet cannot do without (Go: ``validateSystemRequirements``)
REQUIRED_V1_CONTROLLERS = ("cpu", "cpuacct", "cpuset", "memory")

NodeEventRecorder = Callable[[str, str, str], None]  # (type, reason, message)
#: (operation, seconds): ``create``, ``update`` and ``destroy`` of a cgroup, as Go's
#: ``kubelet_cgroup_manager_duration_seconds`` counts them
OperationObserver = Callable[[str, float], None]


class CgroupDriverMismatch(CgroupError):
    """The kubelet's ``cgroupDriver`` is not the runtime's: pods would land in two different trees."""


@attrs.frozen
class NodeConfig:
    """The settings that shape the pod cgroup tree (KubeletConfiguration names in comments)."""

    cgroups_per_qos: bool = defaults.CGROUPS_PER_QOS  # cgroupsPerQOS
    cgroup_driver: CgroupDriver = CGROUPFS  # cgroupDriver
    cgroup_root: str = "/"  # cgroupRoot
    enforce_node_allocatable: frozenset[str] = frozenset(defaults.ENFORCE_NODE_ALLOCATABLE)
    pod_pids_limit: int = defaults.POD_PIDS_LIMIT  # podPidsLimit
    kube_reserved: Mapping[str, str] = attrs.field(factory=dict)  # kubeReserved
    system_reserved: Mapping[str, str] = attrs.field(factory=dict)  # systemReserved
    kube_reserved_cgroup: str = defaults.KUBE_RESERVED_CGROUP  # kubeReservedCgroup
    system_reserved_cgroup: str = defaults.SYSTEM_RESERVED_CGROUP  # systemReservedCgroup
    cpu_cfs_quota: bool = defaults.CPU_CFS_QUOTA  # cpuCFSQuota
    cpu_cfs_quota_period: int = round(defaults.CPU_CFS_QUOTA_PERIOD * 1e6)  # cpuCFSQuotaPeriod, µs


def _binary_size(size: int) -> str:
    """``hugepages-<size>``'s size as the API names it (2097152 → ``2Mi``)."""
    for suffix in ("Ti", "Gi", "Mi", "Ki"):
        unit = 1 << {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40}[suffix]
        if size % unit == 0:
            return f"{size // unit}{suffix}"
    return str(size)


def _hugepages_capacity() -> dict[str, Quantity]:
    capacity: dict[str, Quantity] = {}
    for size in machine_hugepage_sizes(HUGEPAGES_DIR):
        try:
            with open(f"{HUGEPAGES_DIR}/hugepages-{size // 1024}kB/nr_hugepages", encoding="ascii") as f:
                count = int(f.read().strip())
        except (OSError, ValueError):
            count = 0
        capacity[f"hugepages-{_binary_size(size)}"] = Quantity(str(count * size))
    return capacity


def read_cgroup_capacity(root_dir: str = "/") -> NodeCapacity:
    """The machine's CPUs, memory, ``kernel.pid_max`` and preallocated huge pages; blocking, small."""
    machine = read_node_capacity(root_dir)
    try:
        with open(PID_MAX, encoding="ascii") as f:
            pids = int(f.read().strip())
    except (OSError, ValueError):
        pids = 0
    return NodeCapacity(
        milli_cpu=machine.milli_cpu, memory=machine.memory, pids=pids, hugepages=_hugepages_capacity()
    )


def _systemd_cgroup(config: Mapping[str, Any]) -> bool | None:
    """containerd's CRI config (``Status`` verbose ``info["config"]``): the default runtime's
    ``SystemdCgroup`` option, or the legacy top-level ``systemdCgroup``; None when it says neither."""
    containerd = config.get("containerd")
    if isinstance(containerd, Mapping):
        runtimes = containerd.get("runtimes")
        default = containerd.get("defaultRuntimeName") or "runc"
        runtime = runtimes.get(default) if isinstance(runtimes, Mapping) else None
        options = runtime.get("options") if isinstance(runtime, Mapping) else None
        if isinstance(options, Mapping) and "SystemdCgroup" in options:
            return bool(options["SystemdCgroup"])
    legacy = config.get("systemdCgroup")
    return bool(legacy) if isinstance(legacy, bool) else None


async def runtime_cgroup_driver(runtime: RuntimeService) -> CgroupDriver | None:
    """The runtime's cgroup driver from its verbose ``Status``; None when it does not say."""
    response = await runtime.status(verbose=True)
    text = (response.info or {}).get("config")
    if not text:
        return None
    try:
        config = json.loads(text)
    except ValueError:
        return None
    systemd = _systemd_cgroup(config) if isinstance(config, Mapping) else None
    if systemd is None:
        return None
    return SYSTEMD if systemd else CGROUPFS


@attrs.define(eq=False)
class ContainerManager:
    """Sets up and maintains the pod cgroup tree; constructible from plain values.

    ``active_pods`` lists the pods admitted and not yet terminated (for the Burstable tier's shares);
    ``runtime``, when given, is asked for its cgroup driver at start; ``record_node_event`` receives
    the Node's allocatable-enforcement events; ``observe_operation`` the time each cgroup create,
    update and destroy took."""

    config: NodeConfig = attrs.Factory(NodeConfig)
    capacity: NodeCapacity | None = None  # None: read from this machine at start
    active_pods: Callable[[], Sequence[Pod]] = list
    runtime: RuntimeService | None = None
    record_node_event: NodeEventRecorder | None = None
    observe_operation: OperationObserver | None = None
    cgroup_fs_root: str = CGROUP_ROOT
    run_sync: RunSync = run_in_thread
    cgroups: CgroupManager = attrs.field(init=False)
    qos: QOSContainerManager = attrs.field(init=False)
    pods: PodContainerManager = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self.cgroups = CgroupManager(driver=self.config.cgroup_driver, root=self.cgroup_fs_root)
        if self.observe_operation is not None:
            self.run_sync = _timed(self.run_sync, self.cgroups, self.observe_operation)
        info = QOSContainersInfo.under(self.node_allocatable_root)
        self.qos = QOSContainerManager(
            self.cgroups, info, active_pods=self.active_pods, run_sync=self.run_sync
        )
        self.pods = PodContainerManager(
            self.cgroups,
            info,
            pod_pids_limit=self.config.pod_pids_limit,
            enforce_cpu_limits=self.config.cpu_cfs_quota,
            cpu_period=self.config.cpu_cfs_quota_period,
            run_sync=self.run_sync,
        )

    @property
    def cgroup_root(self) -> CgroupName:
        return parse_cgroupfs_to_cgroup_name(self.config.cgroup_root)

    @property
    def node_allocatable_root(self) -> CgroupName:
        """``<cgroupRoot>/kubepods`` with ``cgroupsPerQOS``, else the cgroup root itself."""
        if self.config.cgroups_per_qos:
            return new_cgroup_name(self.cgroup_root, KUBEPODS_CGROUP)
        return self.cgroup_root

    # --- what the kubelet asks ----------------------------------------------------------------------

    def node_allocatable_paths(self) -> dict[str, str]:
        """Where ``kubepods`` is, hierarchy → path (``""`` for v2), as the stats readers take it; {}
        before it exists or without cgroupsPerQOS; blocking. Its counters are every pod's usage together
        and its limit (allocatable with ``enforceNodeAllocatable: [pods]``): Go's summary reports them as
        the ``pods`` system container, and its eviction manager's ``allocatableMemory.available`` is that
        limit less their working set."""
        if not self.config.cgroups_per_qos or not self.cgroups.exists(self.node_allocatable_root):
            return {}
        name = self.cgroups.name(self.node_allocatable_root)
        return {"": name} if self.cgroups.version == 2 else dict.fromkeys(self.cgroups.hierarchies(), name)

    def pod_cgroup_parent(self, pod: Pod) -> str:
        """The sandbox's ``cgroup_parent``: the pod cgroup's literal path; "" (the runtime's default)
        without ``cgroupsPerQOS`` and with the default root."""
        if not self.config.cgroups_per_qos:
            return "" if not self.cgroup_root else self.cgroups.name(self.cgroup_root)
        return self.pods.pod_container_name(pod)[1]

    async def update_qos_cgroups(self) -> None:
        if self.config.cgroups_per_qos:
            await self.qos.update_cgroups()

    async def ensure_pod_cgroup(self, pod: Pod) -> None:
        """Before the pod's sandbox: a new pod cgroup (after the tiers' shares count the pod)."""
        if not self.config.cgroups_per_qos or await self.pods.exists(pod):
            return
        await self.update_qos_cgroups()
        await self.pods.ensure_exists(pod)

    async def cleanup_orphaned_pod_cgroups(
        self,
        possibly_running: Collection[str],
        volumes_exist: Callable[[str], bool] = lambda uid: False,
    ) -> list[str]:
        """Remove the cgroups of pods not possibly running (uids), killing what is left in them; a
        pod whose volumes still exist keeps its cgroup with minimal CPU until they are gone. Returns
        the uids whose cgroups were removed."""
        if not self.config.cgroups_per_qos:
            return []
        removed: list[str] = []
        for uid, name in (await self.pods.get_all_pods_from_cgroups()).items():
            if uid in possibly_running:
                continue
            try:
                if volumes_exist(uid):
                    await self.pods.reduce_cpu_limits(name)
                    continue
                await self.pods.destroy(name)
            except CgroupError as err:  # the next housekeeping tries again
                logger.warning("cleaning up an orphaned pod cgroup failed", extra=kv(uid=uid, err=err))
                continue
            removed.append(uid)
        return removed

    # --- running ------------------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Validate, create ``kubepods`` and the tiers, then reconcile the tiers once a minute."""
        await self._validate()
        if not self.config.cgroups_per_qos:
            task_status.started()
            await trio.sleep_forever()
        capacity = self.capacity or await self.run_sync(read_cgroup_capacity)
        enforce = PODS_ENFORCEMENT_KEY in self.config.enforce_node_allocatable
        kubepods = kubepods_resource_config(
            capacity, enforce_pods=enforce, reserved=(self.config.kube_reserved, self.config.system_reserved)
        )
        root = self.node_allocatable_root
        if not await self.run_sync(self.cgroups.exists, root):
            await self.run_sync(self.cgroups.create, root, kubepods)
        async with trio.open_nursery() as nursery:
            await nursery.start(self._enforce_node_allocatable, kubepods)
            await self.qos.start()
            await self._enforce_reserved_cgroups()
            task_status.started()
            async with aclosing(trio_util.periodic(PERIODIC_QOS_CGROUP_UPDATE_INTERVAL)) as ticks:
                async for _ in ticks:
                    try:
                        await self.qos.update_cgroups()
                    except CgroupError as err:
                        logger.warning("failed to reserve QoS requests", extra=kv(err=err))

    async def _validate(self) -> None:
        version = self.cgroups.version
        if self.runtime is not None:
            driver = await runtime_cgroup_driver(self.runtime)
            if driver is not None and driver != self.config.cgroup_driver:
                raise CgroupDriverMismatch(
                    f'misconfiguration: kubelet cgroup driver: "{self.config.cgroup_driver}" is different'
                    f' from the container runtime cgroup driver: "{driver}"'
                )
        if self.config.cgroup_driver == SYSTEMD and not await self.run_sync(os.path.isdir, SYSTEMD_RUNNING):
            logger.warning("the systemd cgroup driver without systemd running: slices are plain directories")
        if version == 1:
            mounted = set(await self.run_sync(self.cgroups.hierarchies))
            missing = sorted(set(REQUIRED_V1_CONTROLLERS) - mounted)
            if missing:
                subsystems = " ".join(missing)
                raise CgroupError(
                    f"system validation failed - Following Cgroup subsystem not mounted: [{subsystems}]"
                )
        if self.cgroup_root and not await self.run_sync(self.cgroups.exists, self.cgroup_root):
            raise CgroupError(f"invalid configuration: cgroup-root {self.config.cgroup_root!r} doesn't exist")
        logger.info(
            "container manager",
            extra=kv(
                cgroups_per_qos=self.config.cgroups_per_qos,
                driver=self.config.cgroup_driver,
                cgroup_version=version,
                root=self.config.cgroup_root,
            ),
        )

    async def _enforce_node_allocatable(
        self, kubepods: ResourceConfig, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Apply ``kubepods``' values until it succeeds (usage above a lowered limit fails until
        eviction frees memory), recording the outcome on the Node."""
        task_status.started()
        root = self.node_allocatable_root
        if not root:
            return
        while True:
            try:
                await self.run_sync(self.cgroups.update, root, kubepods)
            except CgroupError as err:
                message = (
                    f"Failed to update Node Allocatable Limits {go_quote(self.cgroups.name(root))}: {err}"
                )
                logger.warning("failed to enforce node allocatable", extra=kv(err=err))
                self._node_event("Warning", FAILED_NODE_ALLOCATABLE_ENFORCEMENT, message)
                await trio.sleep(ENFORCE_RETRY_INTERVAL)
                continue
            self._node_event(
                "Normal", NODE_ALLOCATABLE_ENFORCED, "Updated Node Allocatable limit across pods"
            )
            return

    async def _enforce_reserved_cgroups(self) -> None:
        """Limit the existing system-reserved and kube-reserved cgroups to their reservations when
        ``enforceNodeAllocatable`` names them; one that is missing or refuses fails the start (Go:
        ``enforceExistingCgroup``), so the operator learns at once that the daemons are not contained."""
        enforce = self.config.enforce_node_allocatable
        for key, title, path, reserved in (
            (SYSTEM_RESERVED_ENFORCEMENT_KEY, "System Reserved", self.config.system_reserved_cgroup,
             self.config.system_reserved),
            (KUBE_RESERVED_ENFORCEMENT_KEY, "Kube Reserved", self.config.kube_reserved_cgroup,
             self.config.kube_reserved),
        ):  # fmt: skip
            if key not in enforce:
                continue
            name = self.cgroups.cgroup_name(path)
            try:
                await self.run_sync(self.cgroups.validate, name)
                await self.run_sync(self.cgroups.update, name, reserved_resource_config(reserved))
            except CgroupError as err:
                message = f"Failed to enforce {title} Cgroup Limits on {go_quote(path)}: {err}"
                self._node_event("Warning", FAILED_NODE_ALLOCATABLE_ENFORCEMENT, message)
                raise CgroupError(message) from err
            logger.info("reserved cgroup limited", extra=kv(cgroup=path, limits=dict(reserved)))
            self._node_event(
                "Normal", NODE_ALLOCATABLE_ENFORCED, f"Updated limits on {title.lower()} cgroup {path}"
            )

    def _node_event(self, kind: str, reason: str, message: str) -> None:
        if self.record_node_event is not None:
            self.record_node_event(kind, reason, message)


def _timed(run_sync: RunSync, cgroups: CgroupManager, observe: OperationObserver) -> RunSync:
    """``run_sync`` that reports how long each create, update and destroy of ``cgroups`` took (the
    thread hop included: the time as the kubelet waits for it), failed ones too, as Go's does."""
    operations = {cgroups.create: "create", cgroups.update: "update", cgroups.destroy: "destroy"}

    async def run(fn: Callable[..., Any], *args: Any) -> Any:
        operation = operations.get(fn)
        if operation is None:
            return await run_sync(fn, *args)
        began = trio.current_time()
        try:
            return await run_sync(fn, *args)
        finally:
            observe(operation, trio.current_time() - began)

    return run
