"""CSI driver registration with real parts: the upstream hostpath CSI driver and its node-driver-registrar
sidecar register through kubelet-trio's plugin manager, and the node's CSI record lands in a real
kube-apiserver: the ``CSINode`` driver entry with its topology key, the node-ID annotation and the topology
label. Without these the external-provisioner finds "no available topology"."""

from __future__ import annotations

import json
from pathlib import Path

import trio

from kubelet_trio.apimode import open_kubeconfig_client
from kubelet_trio.client import ApiClient
from kubelet_trio.volume.csi import NODE_ID_ANNOTATION
from tests.envtest.conftest import EnvtestCluster
from tests.envtest.csi_parts import (
    DRIVER,
    TOPOLOGY_KEY,
    csinode_drivers,
    hostpath_driver,
    node_object,
    root,
    stop,
)
from tests.envtest.test_envtest import poll

__all__ = ["root"]  # the fixture

NODE = "csi-node"


async def test_hostpath_driver_registers_through_the_plugin_registry(
    envtest: EnvtestCluster, root: Path
) -> None:
    with trio.fail_after(90):
        async with (
            open_kubeconfig_client(str(envtest.kubeconfig)) as client,
            node_object(client, NODE) as node,
            hostpath_driver(client, root, NODE) as hostpath,
        ):
            csinode = await client.get(f"/apis/storage.k8s.io/v1/csinodes/{NODE}")
            owners = [(o["kind"], o["name"], o["uid"]) for o in csinode["metadata"]["ownerReferences"]]
            assert owners == [("Node", NODE, node["metadata"]["uid"])]
            [entry] = await csinode_drivers(client, NODE)
            assert (entry["name"], entry["nodeID"], entry["topologyKeys"]) == (DRIVER, NODE, [TOPOLOGY_KEY])
            got = await client.get(f"/api/v1/nodes/{NODE}")
            assert json.loads(got["metadata"]["annotations"][NODE_ID_ANNOTATION]) == {DRIVER: NODE}
            assert got["metadata"]["labels"][TOPOLOGY_KEY] == NODE
            found = hostpath.drivers.get(DRIVER)
            assert found is not None and found.endpoint == str(hostpath.csi_sock)
            assert found.version[0] == 1

            # The registrar goes and takes its socket with it: the driver is deregistered.
            stop(hostpath.registrar)
            for sock in hostpath.registry.glob("*.sock"):  # a registrar killed hard leaves it behind
                sock.unlink()

            async def deregistered(c: ApiClient) -> bool:
                return not await csinode_drivers(c, NODE)

            await poll(deregistered, client)
            got = await client.get(f"/api/v1/nodes/{NODE}")
            assert NODE_ID_ANNOTATION not in (got["metadata"].get("annotations") or {})
            assert hostpath.drivers.get(DRIVER) is None
