"""The QoS tiers under ``kubepods`` (Go: ``pkg/kubelet/cm/qos_container_manager_linux.go``).

Guaranteed pods sit directly in ``kubepods``; Burstable and BestEffort pods in ``kubepods/burstable`` and
``kubepods/besteffort``. The tiers compete for CPU by shares: BestEffort always has the minimum (2), and
Burstable the sum of its pods' CPU requests, recomputed whenever a pod is added and once a minute
(``UpdateCgroups``), so Burstable pods keep their requested share against Guaranteed ones. Huge pages
are left unlimited at the tiers (and, on each update, at ``kubepods`` too, as Go does): the pod cgroups
bound them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

import attrs

from kubelet_trio.api import Pod
from kubelet_trio.cm.cgroup_manager import CgroupManager, CgroupName, new_cgroup_name
from kubelet_trio.cm.helpers import MIN_SHARES, ResourceConfig, milli_cpu_to_shares, pod_requests_and_limits
from kubelet_trio.fsio import RunSync, run_in_thread
from kubelet_trio.logs import kv
from kubelet_trio.status.qos import BURSTABLE, pod_qos

__all__ = [
    "BEST_EFFORT_CGROUP",
    "BURSTABLE_CGROUP",
    "PERIODIC_QOS_CGROUP_UPDATE_INTERVAL",
    "QOSContainerManager",
    "QOSContainersInfo",
    "burstable_cpu_shares",
]

logger = logging.getLogger(__name__)

BURSTABLE_CGROUP = "burstable"
BEST_EFFORT_CGROUP = "besteffort"
PERIODIC_QOS_CGROUP_UPDATE_INTERVAL = 60.0  # seconds


@attrs.frozen
class QOSContainersInfo:
    """The tier cgroups; Guaranteed pods use the node-allocatable root (``kubepods``) itself."""

    guaranteed: CgroupName
    burstable: CgroupName
    best_effort: CgroupName

    @classmethod
    def under(cls, root: CgroupName) -> QOSContainersInfo:
        return cls(
            guaranteed=root,
            burstable=new_cgroup_name(root, BURSTABLE_CGROUP),
            best_effort=new_cgroup_name(root, BEST_EFFORT_CGROUP),
        )


def burstable_cpu_shares(pods: Sequence[Pod]) -> int:
    """Shares of the Burstable tier: its pods' CPU requests together."""
    milli = 0
    for pod in pods:
        if pod_qos(pod) != BURSTABLE:
            continue
        requests, _ = pod_requests_and_limits(pod)
        cpu = requests.get("cpu")
        milli += cpu.milli_value() if cpu is not None else 0
    return milli_cpu_to_shares(milli)


@attrs.define(eq=False)
class QOSContainerManager:
    """Creates the Burstable and BestEffort tiers and keeps their CPU shares current."""

    cgroups: CgroupManager
    info: QOSContainersInfo
    active_pods: Callable[[], Sequence[Pod]] = list
    run_sync: RunSync = run_in_thread

    async def start(self) -> None:
        """Create the two tiers (or bring existing ones back to their settings)."""
        tiers = {
            self.info.burstable: ResourceConfig(hugepages_unbounded=True),
            self.info.best_effort: ResourceConfig(cpu_shares=MIN_SHARES, hugepages_unbounded=True),
        }
        for name, config in tiers.items():
            if await self.run_sync(self.cgroups.exists, name):
                await self.run_sync(self.cgroups.update, name, config)
            else:
                await self.run_sync(self.cgroups.create, name, config)
        await self.update_cgroups()

    async def update_cgroups(self) -> None:
        """Set the tiers' CPU shares from the active pods (Go: ``UpdateCgroups``)."""
        shares = burstable_cpu_shares(self.active_pods())
        tiers = {
            self.info.guaranteed: ResourceConfig(hugepages_unbounded=True),
            self.info.burstable: ResourceConfig(cpu_shares=shares, hugepages_unbounded=True),
            self.info.best_effort: ResourceConfig(cpu_shares=MIN_SHARES, hugepages_unbounded=True),
        }
        for name, config in tiers.items():
            await self.run_sync(self.cgroups.update, name, config)
        logger.debug("updated QoS cgroups", extra=kv(burstable_shares=shares))
