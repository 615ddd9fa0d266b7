"""The node's CSI record in the API (Go: ``pkg/volume/csi/nodeinfomanager``).

For each registered driver: its node ID in the Node's ``csi.volume.kubernetes.io/nodeid`` annotation (a
JSON object of driver → node ID), its topology segments as Node labels, and an entry in the ``CSINode``
object named after the node (driver, node ID, topology keys, attach limit). The CSINode is created at start
with the Node as its owner; the provisioner and scheduler read topology from it ("no available topology"
without it). Writes are read-modify-write with the resourceVersion, retried on conflict as Go retries.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

import attrs
import trio

from kubelet_trio.client.errors import Conflict, NotFound
from kubelet_trio.logs import kv

if TYPE_CHECKING:
    from kubelet_trio.client import ApiClient

__all__ = ["NODE_ID_ANNOTATION", "NodeInfoError", "NodeInfoManager"]

logger = logging.getLogger(__name__)

NODE_ID_ANNOTATION = "csi.volume.kubernetes.io/nodeid"
_MAX_INT32 = 2**31 - 1
# Go's updateBackoff: 10 ms, x5, 4 steps
_RETRY_DELAYS = (0.01, 0.05, 0.25, 1.25)


class NodeInfoError(Exception):
    pass


@attrs.define(eq=False)
class NodeInfoManager:
    client: ApiClient
    node_name: str

    @property
    def _node_path(self) -> str:
        return f"/api/v1/nodes/{self.node_name}"

    @property
    def _csinode_path(self) -> str:
        return f"/apis/storage.k8s.io/v1/csinodes/{self.node_name}"

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """As a node component: started at once, the CSINode made in the background."""
        task_status.started()
        await self.initialize()

    async def initialize(self) -> None:
        """Make sure the CSINode exists (Go: ``InitializeCSINodeWithAnnotation``), retrying forever: the
        provisioner needs it before any pod of this node can get a topology-constrained volume."""
        delay = 0.1
        while True:
            try:
                await self._get_or_create_csinode()
                return
            except Exception as err:  # the API server may not be reachable yet
                logger.info("Failed to publish CSINode", extra=kv(err=str(err)))
            await trio.sleep(delay)
            delay = min(delay * 2, 30.0)

    async def install_driver(
        self, driver: str, node_id: str, max_attach: int, topology: Mapping[str, str]
    ) -> None:
        if not node_id:
            raise NodeInfoError("error adding CSI driver node info: driverNodeID must not be empty")
        try:
            await _retry(lambda: self._update_node(driver, node_id, topology))
        except Exception as err:
            raise NodeInfoError(f"error updating Node object with CSI driver node info: {err}") from None
        try:
            await _retry(lambda: self._install_in_csinode(driver, node_id, max_attach, topology))
        except Exception as err:
            raise NodeInfoError(f"error updating CSINode object with CSI driver node info: {err}") from None

    async def uninstall_driver(self, driver: str) -> None:
        try:
            await _retry(lambda: self._uninstall_from_csinode(driver))
        except Exception as err:
            raise NodeInfoError(f"error uninstalling CSI driver from CSINode object {err}") from None
        try:
            await _retry(lambda: self._remove_from_node(driver))
        except Exception as err:
            raise NodeInfoError(f"error removing CSI driver node info from Node object {err}") from None

    # -- Node ---------------------------------------------------------------------------------------

    async def _update_node(self, driver: str, node_id: str, topology: Mapping[str, str]) -> None:
        node = await self.client.get(self._node_path)
        metadata = node.get("metadata") or {}
        ids = _node_ids(metadata)
        labels = metadata.get("labels") or {}
        for key, value in topology.items():
            if key in labels and labels[key] != value:
                raise NodeInfoError(
                    f'detected topology value collision: driver reported "{key}":"{value}" but existing label'
                    f' is "{key}":"{labels[key]}"'
                )
        patch: dict[str, Any] = {}
        if ids.get(driver) != node_id:
            ids[driver] = node_id
            patch["annotations"] = {NODE_ID_ANNOTATION: _go_json(ids)}
        if any(labels.get(k) != v for k, v in topology.items()):
            patch["labels"] = dict(topology)
        if patch:
            patch["resourceVersion"] = metadata.get("resourceVersion")
            await self.client.merge_patch(f"{self._node_path}/status", {"metadata": patch})

    async def _remove_from_node(self, driver: str) -> None:
        node = await self.client.get(self._node_path)
        metadata = node.get("metadata") or {}
        ids = _node_ids(metadata)
        if driver not in ids:
            return
        del ids[driver]
        value = _go_json(ids) if ids else None
        patch = {
            "resourceVersion": metadata.get("resourceVersion"),
            "annotations": {NODE_ID_ANNOTATION: value},
        }
        await self.client.merge_patch(f"{self._node_path}/status", {"metadata": patch})

    # -- CSINode ------------------------------------------------------------------------------------

    async def _get_or_create_csinode(self) -> dict[str, Any]:
        try:
            csinode: dict[str, Any] = await self.client.get(self._csinode_path)
            return csinode
        except NotFound:
            pass
        node = await self.client.get(self._node_path)
        created: dict[str, Any] = await self.client.create(
            "/apis/storage.k8s.io/v1/csinodes",
            {
                "apiVersion": "storage.k8s.io/v1",
                "kind": "CSINode",
                "metadata": {
                    "name": self.node_name,
                    "ownerReferences": [
                        {
                            "apiVersion": "v1",
                            "kind": "Node",
                            "name": node["metadata"]["name"],
                            "uid": node["metadata"]["uid"],
                        }
                    ],
                },
                "spec": {"drivers": []},
            },
        )
        return created

    async def _install_in_csinode(
        self, driver: str, node_id: str, max_attach: int, topology: Mapping[str, str]
    ) -> None:
        csinode = await self._get_or_create_csinode()
        drivers = (csinode.get("spec") or {}).get("drivers") or []
        keys = sorted(topology)
        others = [d for d in drivers if d.get("name") != driver]
        for existing in drivers:
            same_keys = sorted(existing.get("topologyKeys") or []) == keys
            if existing.get("name") == driver and existing.get("nodeID") == node_id and same_keys:
                return
        entry: dict[str, Any] = {"name": driver, "nodeID": node_id, "topologyKeys": keys or None}
        if max_attach > 0:
            entry["allocatable"] = {"count": min(max_attach, _MAX_INT32)}
        else:
            logger.error(
                "Invalid attach limit value cannot be added to CSINode object",
                extra=kv(limit=max_attach, driver=driver),
            )
        csinode.setdefault("spec", {})["drivers"] = [*others, entry]
        await self.client.replace(self._csinode_path, csinode)

    async def _uninstall_from_csinode(self, driver: str) -> None:
        try:
            csinode = await self.client.get(self._csinode_path)
        except NotFound:
            return
        drivers = (csinode.get("spec") or {}).get("drivers") or []
        kept = [d for d in drivers if d.get("name") != driver]
        if len(kept) == len(drivers):
            return
        csinode["spec"]["drivers"] = kept
        await self.client.replace(self._csinode_path, csinode)


def _node_ids(metadata: Mapping[str, Any]) -> dict[str, str]:
    raw = (metadata.get("annotations") or {}).get(NODE_ID_ANNOTATION)
    if not raw:
        return {}
    try:
        ids = json.loads(raw)
    except ValueError as err:
        raise NodeInfoError(
            f'failed to parse node annotation "{NODE_ID_ANNOTATION}"="{raw}": {err}'
        ) from None
    if not isinstance(ids, dict):
        raise NodeInfoError(f'failed to parse node annotation "{NODE_ID_ANNOTATION}"="{raw}"')
    return {str(k): str(v) for k, v in ids.items()}


def _go_json(value: Mapping[str, str]) -> str:
    """``json.Marshal`` of a map: keys sorted, no spaces."""
    return json.dumps(dict(sorted(value.items())), separators=(",", ":"))


async def _retry(attempt: Callable[[], Awaitable[None]]) -> None:
    for delay in (*_RETRY_DELAYS, None):
        try:
            await attempt()
            return
        except Conflict:
            if delay is None:
                raise
            await trio.sleep(delay)
