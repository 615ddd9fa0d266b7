"""The node Lease heartbeat (``component-helpers/apimachinery/lease/controller.go``).

Every ``renew_interval`` (10 s = 40 s x 0.25) the Lease ``kube-node-lease/<node>`` gets ``renewTime = now``.
With a cached Lease that is an update (PUT, optimistic concurrency on its resourceVersion) without a GET;
a Conflict re-reads the Lease and tries again, up to 5 attempts. Without one, the Lease is read and
created if missing, retrying with backoff (100 ms doubling to 7 s) until it works; creation waits for
the Node because the Lease carries an ownerReference to it (so it is collected with the Node).
"""

from __future__ import annotations

import contextlib
import copy
import logging
from collections.abc import Callable
from typing import Any

import attrs
import trio
import trio_util

from kubelet_trio import defaults
from kubelet_trio.api.timefmt import micro_time
from kubelet_trio.client import ApiClient, ApiClientError, Conflict, NotFound
from kubelet_trio.client.backoff import DoublingBackoff
from kubelet_trio.clock import WallClock
from kubelet_trio.logs import kv

__all__ = ["LEASE_NAMESPACE", "NodeLeaseController"]

logger = logging.getLogger(__name__)

LEASE_NAMESPACE = "kube-node-lease"
LEASE_DURATION_SECONDS = defaults.NODE_LEASE_DURATION_SECONDS
RENEW_INTERVAL_FRACTION = 0.25
MAX_UPDATE_RETRIES = 5
ENSURE_BACKOFF_INITIAL = 0.1
ENSURE_BACKOFF_MAX = 7.0


@attrs.define(eq=False)
class NodeLeaseController:
    client: ApiClient
    node_name: str
    clock: WallClock
    node_uid: Callable[[], str | None]  # the registered Node's UID, None while there is none
    lease_duration_seconds: int = LEASE_DURATION_SECONDS
    renew_interval: float = LEASE_DURATION_SECONDS * RENEW_INTERVAL_FRACTION
    lease: dict[str, Any] | None = None
    renewals: int = 0

    @property
    def path(self) -> str:
        return f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NAMESPACE}/leases/{self.node_name}"

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        async with contextlib.aclosing(trio_util.periodic(self.renew_interval)) as ticks:
            async for _ in ticks:
                if self.lease is not None:
                    await self._renew()
                else:
                    await self._ensure()

    def _owner_references(self) -> list[dict[str, Any]] | None:
        uid = self.node_uid()
        if not uid:
            return None
        return [{"apiVersion": "v1", "kind": "Node", "name": self.node_name, "uid": uid}]

    def _renewed(self, base: dict[str, Any]) -> dict[str, Any]:
        lease = copy.deepcopy(base)
        spec = lease.setdefault("spec", {})
        spec["holderIdentity"] = self.node_name
        spec["leaseDurationSeconds"] = self.lease_duration_seconds
        spec["renewTime"] = micro_time(self.clock.now())
        meta = lease.setdefault("metadata", {})
        if not meta.get("ownerReferences"):
            owners = self._owner_references()
            if owners:
                meta["ownerReferences"] = owners
        return lease

    async def _ensure(self) -> None:
        """GET the Lease, creating it when missing; retry with backoff until one exists."""
        backoff = DoublingBackoff(ENSURE_BACKOFF_INITIAL, ENSURE_BACKOFF_MAX)
        while True:
            try:
                try:
                    current = await self.client.get(self.path)
                except NotFound:
                    owners = self._owner_references()
                    if owners is None:
                        raise ApiClientError("the Node does not exist yet; not creating its Lease") from None
                    lease = {
                        "apiVersion": "coordination.k8s.io/v1",
                        "kind": "Lease",
                        "metadata": {
                            "name": self.node_name,
                            "namespace": LEASE_NAMESPACE,
                            "ownerReferences": owners,
                        },
                    }
                    self.lease = await self.client.create(
                        f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NAMESPACE}/leases",
                        self._renewed(lease),
                    )
                    self.renewals += 1
                    logger.info("created node lease", extra=kv(node=self.node_name))
                    return
                self.lease = current
                await self._renew()
                return
            except ApiClientError as err:
                delay = backoff.next()
                logger.warning(
                    "failed to ensure node lease, retrying", extra=kv(delay=round(delay, 1), error=err)
                )
                await trio.sleep(delay)

    async def _renew(self) -> None:
        assert self.lease is not None
        for attempt in range(MAX_UPDATE_RETRIES):
            try:
                self.lease = await self.client.replace(self.path, self._renewed(self.lease))
                self.renewals += 1
                return
            except Conflict:
                logger.debug("lease update conflict, re-reading", extra=kv(attempt=attempt + 1))
                try:
                    self.lease = await self.client.get(self.path)
                except ApiClientError as err:
                    logger.warning("failed to re-read node lease", extra=kv(error=err))
            except NotFound:
                self.lease = None
                await self._ensure()
                return
            except ApiClientError as err:
                logger.warning("failed to update node lease", extra=kv(attempt=attempt + 1, error=err))
        logger.error(
            "failed to update node lease, will retry",
            extra=kv(attempts=MAX_UPDATE_RETRIES, retry_after=self.renew_interval),
        )
