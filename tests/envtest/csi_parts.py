"""The upstream CSI parts for the envtest tier: the hostpath CSI driver and node-driver-registrar
(``build-node-parts.sh``), run as plain processes next to an in-process plugin manager."""

from __future__ import annotations

import contextlib
import shutil
import signal
import subprocess
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from kubelet_trio.aiobridge import LazyAsyncioThread, open_lazy_asyncio_thread
from kubelet_trio.client import ApiClient, NotFound
from kubelet_trio.pluginmanager import CSI_PLUGIN, PluginManager
from kubelet_trio.volume.csi import CsiDrivers, CsiRegistrationHandler, NodeInfoManager
from tests.critest.conftest import find_binary
from tests.envtest.test_envtest import poll

DRIVER = "hostpath.csi.k8s.io"
TOPOLOGY_KEY = "topology.hostpath.csi/node"
#: the driver's CSIDriver object as its deployment has it: no attach, pod info and both lifecycle modes
HOSTPATH_CSI_DRIVER: dict[str, Any] = {
    "apiVersion": "storage.k8s.io/v1",
    "kind": "CSIDriver",
    "metadata": {"name": DRIVER},
    "spec": {
        "attachRequired": False,
        "podInfoOnMount": True,
        "volumeLifecycleModes": ["Persistent", "Ephemeral"],
        "fsGroupPolicy": "File",
    },
}
BUILD_HINT = (
    "bash ../shared/tools/build-node-parts.sh <git dirs of kubernetes-csi/csi-driver-host-path and"
    " kubernetes-csi/node-driver-registrar>"
)


@pytest.fixture
def root() -> Iterator[Path]:
    """A short root dir (unix socket paths must fit in 107 bytes)."""
    path = Path(tempfile.mkdtemp(prefix="csi-"))
    yield path
    subprocess.run(["umount", "-R", "-q", str(path)], check=False)  # whatever a failed test left mounted
    shutil.rmtree(path, ignore_errors=True)


def binary(name: str) -> Path:
    found = find_binary(name)
    if found is None:
        pytest.skip(f"{name} missing: {BUILD_HINT}")
    return found


def start(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:  # the child keeps its own descriptor
        return subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def print_logs(root: Path) -> None:
    for log in sorted(root.glob("*.log")):
        print(f"--- {log.name}\n{log.read_text(errors='replace')[-3000:]}")


async def csinode_drivers(client: ApiClient, node: str) -> list[dict[str, Any]]:
    try:
        csinode = await client.get(f"/apis/storage.k8s.io/v1/csinodes/{node}")
    except NotFound:
        return []
    return list(csinode["spec"].get("drivers") or [])


@attrs.frozen
class RegisteredDriver:
    drivers: CsiDrivers
    bridge: LazyAsyncioThread
    node_info: NodeInfoManager
    csi_sock: Path
    registry: Path
    driver: subprocess.Popen[bytes]
    registrar: subprocess.Popen[bytes]


@contextlib.asynccontextmanager
async def hostpath_driver(client: ApiClient, root: Path, node: str) -> AsyncIterator[RegisteredDriver]:
    """The hostpath driver registered through a plugin manager on ``root/plugins_registry``; the Node
    object must exist. Yields once the CSINode lists the driver."""
    hostpath, registrar_bin = binary("hostpathplugin"), binary("csi-node-driver-registrar")
    registry = root / "plugins_registry"
    driver_dir = root / "plugins" / "csi-hostpath"
    driver_dir.mkdir(parents=True)
    csi_sock = driver_dir / "csi.sock"
    driver = start(
        [str(hostpath), f"--endpoint=unix://{csi_sock}", f"--nodeid={node}", f"--statedir={root / 'state'}",
         f"--drivername={DRIVER}", "--v=5"],
        root / "hostpath.log",
    )  # fmt: skip
    registrar = None
    try:
        async with open_lazy_asyncio_thread() as bridge, trio.open_nursery() as nursery:
            node_info = NodeInfoManager(client, node)
            await node_info.initialize()
            drivers = CsiDrivers()
            manager = PluginManager(str(registry))
            manager.add_handler(CSI_PLUGIN, CsiRegistrationHandler(drivers, bridge, node_info))
            await nursery.start(manager.run)
            registrar = start(
                [str(registrar_bin), f"--csi-address={csi_sock}", f"--kubelet-registration-path={csi_sock}",
                 f"--plugin-registration-path={registry}", "--v=5"],
                root / "registrar.log",
            )  # fmt: skip

            async def registered(c: ApiClient) -> bool:
                return bool(await csinode_drivers(c, node))

            await poll(registered, client)
            yield RegisteredDriver(drivers, bridge, node_info, csi_sock, registry, driver, registrar)
            nursery.cancel_scope.cancel()
    except BaseException:
        print_logs(root)
        raise
    finally:
        if registrar is not None:
            stop(registrar)
        stop(driver)


@contextlib.asynccontextmanager
async def node_object(client: ApiClient, node: str) -> AsyncIterator[dict[str, Any]]:
    """A Node object (no kubelet behind it) and its CSINode, deleted afterwards."""
    created: dict[str, Any] = await client.create(
        "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}}
    )
    try:
        yield created
    finally:
        with trio.CancelScope(shield=True):
            for path in (f"/apis/storage.k8s.io/v1/csinodes/{node}", f"/api/v1/nodes/{node}"):
                with contextlib.suppress(NotFound):
                    await client.delete(path)
