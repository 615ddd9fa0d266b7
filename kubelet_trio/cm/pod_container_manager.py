"""Pod cgroups (Go: ``pkg/kubelet/cm/pod_container_manager_linux.go``).

Each pod gets a cgroup ``pod<uid>`` in its QoS tier (Guaranteed pods directly under ``kubepods``),
sized by :func:`~kubelet_trio.cm.helpers.resource_config_for_pod` and ``podPidsLimit``, and handed to the
runtime as the sandbox's cgroup parent so every container of the pod lands inside it. It is created
before the sandbox and removed once the pod's containers are gone, after killing whatever is left in it.
"""

from __future__ import annotations

import logging
import os
import signal

import attrs
import trio

from kubelet_trio import defaults
from kubelet_trio.api import Pod
from kubelet_trio.cm.cgroup_manager import CgroupManager, CgroupName, new_cgroup_name
from kubelet_trio.cm.helpers import MIN_SHARES, QUOTA_PERIOD, ResourceConfig, resource_config_for_pod
from kubelet_trio.cm.qos_container_manager import QOSContainersInfo
from kubelet_trio.fsio import RunSync, run_in_thread
from kubelet_trio.logs import kv
from kubelet_trio.status.qos import BEST_EFFORT, BURSTABLE, pod_qos

__all__ = ["POD_CGROUP_NAME_PREFIX", "PodContainerManager", "pod_cgroup_name_suffix"]

logger = logging.getLogger(__name__)

POD_CGROUP_NAME_PREFIX = "pod"
#: Go retries killing a pod cgroup's processes this many times, a second apart
KILL_ATTEMPTS = 5
KILL_RETRY_INTERVAL = 1.0  # seconds


def pod_cgroup_name_suffix(uid: str) -> str:
    return POD_CGROUP_NAME_PREFIX + uid


def _kill(pids: list[int]) -> list[OSError]:
    errors: list[OSError] = []
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            continue
        except OSError as err:
            errors.append(err)
    return errors


@attrs.define(eq=False)
class PodContainerManager:
    """Creates, sizes, lists and removes pod cgroups under the QoS tiers ``qos``."""

    cgroups: CgroupManager
    qos: QOSContainersInfo
    pod_pids_limit: int = defaults.POD_PIDS_LIMIT  # <= 0: no pod-level limit
    enforce_cpu_limits: bool = True
    cpu_period: int = QUOTA_PERIOD
    run_sync: RunSync = run_in_thread

    def pod_container_name(self, pod: Pod) -> tuple[CgroupName, str]:
        """The pod's cgroup, as a name and as the driver's literal path (the sandbox's cgroup parent)."""
        qos = pod_qos(pod)
        parent = {BURSTABLE: self.qos.burstable, BEST_EFFORT: self.qos.best_effort}.get(
            qos, self.qos.guaranteed
        )
        name = new_cgroup_name(parent, pod_cgroup_name_suffix(pod.uid))
        return name, self.cgroups.name(name)

    def resource_config(self, pod: Pod) -> ResourceConfig:
        config = resource_config_for_pod(
            pod, enforce_cpu_limits=self.enforce_cpu_limits, cpu_period=self.cpu_period
        )
        if self.pod_pids_limit > 0:
            config = attrs.evolve(config, pids_limit=self.pod_pids_limit)
        return config

    async def exists(self, pod: Pod) -> bool:
        name, _ = self.pod_container_name(pod)
        return bool(await self.run_sync(self.cgroups.exists, name))

    async def ensure_exists(self, pod: Pod) -> None:
        """Create the pod's cgroup with its values unless it exists (Go leaves an existing one as is)."""
        name, literal = self.pod_container_name(pod)
        if await self.run_sync(self.cgroups.exists, name):
            return
        await self.run_sync(self.cgroups.create, name, self.resource_config(pod))
        logger.info(
            "created pod cgroup", extra=kv(pod=f"{pod.namespace}/{pod.name}", uid=pod.uid, cgroup=literal)
        )

    async def set_pod_cgroup_config(self, pod: Pod, config: ResourceConfig) -> None:
        """Write ``config``'s values to the pod's cgroup (in-place resize; Go ``SetPodCgroupConfig``)."""
        name, literal = self.pod_container_name(pod)
        await self.run_sync(self.cgroups.update, name, config)
        logger.info(
            "resized pod cgroup", extra=kv(pod=f"{pod.namespace}/{pod.name}", uid=pod.uid, cgroup=literal)
        )

    async def get_all_pods_from_cgroups(self) -> dict[str, CgroupName]:
        """Pod uid → pod cgroup, for every ``pod<uid>`` cgroup in the tiers."""
        found: dict[str, CgroupName] = {}
        for tier in (self.qos.guaranteed, self.qos.burstable, self.qos.best_effort):
            for child in await self.run_sync(self.cgroups.children, tier):
                last = child[-1] if child else ""
                if last.startswith(POD_CGROUP_NAME_PREFIX) and child[:-1] == tier:
                    found[last.removeprefix(POD_CGROUP_NAME_PREFIX)] = child
        return found

    async def destroy(self, name: CgroupName) -> None:
        """Kill what is left in the pod cgroup, then remove it (Go: ``tryKillingCgroupProcesses``)."""
        for attempt in range(KILL_ATTEMPTS):
            if attempt:
                await trio.sleep(KILL_RETRY_INTERVAL)
            pids: list[int] = await self.run_sync(self.cgroups.pids, name)
            if not pids:
                break
            logger.info(
                "killing processes left in a pod cgroup", extra=kv(cgroup=self.cgroups.name(name), pids=pids)
            )
            if not _kill(pids):
                break
        await self.run_sync(self.cgroups.destroy, name)
        logger.info("removed pod cgroup", extra=kv(cgroup=self.cgroups.name(name)))

    async def reduce_cpu_limits(self, name: CgroupName) -> None:
        """Leave a terminated pod whose volumes still exist only the minimum CPU shares."""
        await self.run_sync(self.cgroups.update, name, ResourceConfig(cpu_shares=MIN_SHARES))
