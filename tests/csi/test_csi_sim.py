"""CSI registration and volume set-up/teardown against the in-process simulated CSI driver (the harness
feature): staging once per volume, publishing per pod, unstaging after the last pod, adoption of published
volumes, Go's error texts, and a driver that goes away."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import attrs
import pytest
import trio
from grpclib import Status

from kubelet_trio.aiobridge import LazyAsyncioThread, open_lazy_asyncio_thread
from kubelet_trio.pluginmanager import CSI_PLUGIN, PluginManager
from kubelet_trio.volume.csi import CsiDrivers, CsiError, CsiRegistrationHandler
from kubelet_trio.volume.csi.plugin import (
    CsiVolumePlugin,
    CsiVolumeSpec,
    DriverSettings,
    PodInfo,
    VolumeNotReady,
    VolumeUsage,
    global_mount_path,
)
from kubelet_trio.volume.csi.sim import SimCsiDriver

DRIVER = "sim.csi.example.com"


@pytest.fixture
def root() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="csim-"))  # unix socket paths must stay short
    yield path
    shutil.rmtree(path, ignore_errors=True)


@attrs.define
class Node:
    driver: SimCsiDriver
    drivers: CsiDrivers
    plugin: CsiVolumePlugin
    manager: PluginManager


async def until(condition: object) -> None:
    with trio.fail_after(20):  # a hang guard
        while not condition():  # type: ignore[operator]  # noqa: ASYNC110 (gRPC answers arrive on the asyncio thread)
            await trio.sleep(0.02)


@pytest.fixture
async def node(root: Path, nursery: trio.Nursery) -> AsyncIterator[Node]:
    driver = SimCsiDriver(DRIVER, str(root / "plugins_registry"), str(root / "sim"), topology={"zone": "z1"})
    async with open_lazy_asyncio_thread() as bridge:
        drivers = CsiDrivers()
        manager = PluginManager(str(root / "plugins_registry"))
        manager.add_handler(CSI_PLUGIN, CsiRegistrationHandler(drivers, bridge, node_info=None))
        await nursery.start(manager.run)
        await nursery.start(driver.run)
        await until(lambda: driver.registrations)
        plugin = CsiVolumePlugin(
            root_dir=str(root / "kubelet"),
            node_name="sim-node",
            drivers=drivers,
            bridge=bridge,
            # the simulator mounts nothing: "mounted" is what it has published or staged
            is_mount_point=lambda path: path in driver.published or path in driver.staged.values(),
        )
        yield Node(driver, drivers, plugin, manager)


def pod(uid: str) -> PodInfo:
    return PodInfo(f"pod-{uid}", "default", uid, "default")


def pv_spec(volume: str = "data", handle: str = "vol-1") -> CsiVolumeSpec:
    return CsiVolumeSpec(
        volume_name=volume, spec_name="pv-1", driver=DRIVER, volume_handle=handle, fs_type="ext4"
    )


async def test_registration_is_notified_and_recorded(node: Node) -> None:
    assert node.driver.registrations == [(True, "")]
    registered = node.drivers.get(DRIVER)
    assert registered is not None and registered.endpoint == node.driver.socket
    assert ("NodeGetInfo", "") in node.driver.calls


async def test_one_stage_two_publishes_unstage_after_the_last(node: Node, root: Path) -> None:
    settings = DriverSettings(attach_required=False)
    a = await node.plugin.set_up(pod("a"), pv_spec(), settings)
    b = await node.plugin.set_up(pod("b"), pv_spec(), settings)
    staging = global_mount_path(str(root / "kubelet"), DRIVER, "vol-1")
    assert [c for c in node.driver.calls if c[0] != "NodeGetCapabilities"][-3:] == [
        ("NodeStageVolume", "vol-1"),
        ("NodePublishVolume", "vol-1"),
        ("NodePublishVolume", "vol-1"),
    ]
    assert node.driver.staged == {"vol-1": staging}
    assert node.driver.published == {a: "vol-1", b: "vol-1"}
    assert a.endswith("/pods/a/volumes/kubernetes.io~csi/pv-1/mount")  # named after the PV, as Go

    # adopted, not published again (a restarted kubelet)
    calls = len(node.driver.calls)
    assert await node.plugin.set_up(pod("a"), pv_spec(), settings) == a
    assert node.driver.calls[calls:] == []

    node.driver.capacity = (1 << 30, 4096)
    usage = await node.plugin.usage(str(Path(a).parent))
    assert usage == VolumeUsage(capacity_bytes=1 << 30, available_bytes=(1 << 30) - 4096, used_bytes=4096)
    assert node.driver.calls[-1] == ("NodeGetVolumeStats", "vol-1")

    await node.plugin.tear_down(str(Path(a).parent))
    assert await node.plugin.usage(str(Path(a).parent)) is None
    assert node.driver.staged == {"vol-1": staging}  # pod b still has it
    await node.plugin.tear_down(str(Path(b).parent))
    assert node.driver.staged == {}
    assert node.driver.calls[-1] == ("NodeUnstageVolume", "vol-1")
    assert not Path(staging).parent.exists() and not Path(a).parent.exists()


async def test_pod_info_on_mount_and_publish_errors_in_gos_words(node: Node) -> None:
    node.driver.fail_next("NodePublishVolume", "disk on fire", Status.FAILED_PRECONDITION)
    settings = DriverSettings(attach_required=False, pod_info_on_mount=True)
    with pytest.raises(CsiError, match=r"^rpc error: code = FailedPrecondition desc = disk on fire$"):
        await node.plugin.set_up(pod("a"), pv_spec(), settings)
    target = await node.plugin.set_up(pod("a"), pv_spec(), settings)  # retried: works
    assert node.driver.contexts[target] == {
        "csi.storage.k8s.io/pod.name": "pod-a",
        "csi.storage.k8s.io/pod.namespace": "default",
        "csi.storage.k8s.io/pod.uid": "a",
        "csi.storage.k8s.io/serviceAccount.name": "default",
        "csi.storage.k8s.io/ephemeral": "false",
    }


async def test_a_driver_that_goes_away_is_deregistered(node: Node) -> None:
    await node.driver.disappear()
    await until(lambda: node.drivers.get(DRIVER) is None)
    with pytest.raises(
        VolumeNotReady, match=f"driver name {DRIVER} not found in the list of registered CSI drivers"
    ):
        await node.plugin.set_up(pod("a"), pv_spec(), DriverSettings(attach_required=False))


async def test_unsupported_versions_are_refused(root: Path, nursery: trio.Nursery) -> None:
    async with open_lazy_asyncio_thread() as bridge:
        handler = CsiRegistrationHandler(CsiDrivers(), bridge, node_info=None)
        with pytest.raises(
            Exception,
            match=r'ValidatePlugin for CSI driver "d" failed. None of the versions specified \["0.3.0"\]',
        ):
            handler.validate_plugin("d", "/x.sock", ["0.3.0"])
        with pytest.raises(Exception, match="Plugin returned an empty list for supported versions"):
            handler.validate_plugin("d", "/x.sock", [])
        handler.validate_plugin("d", "/x.sock", ["1.2.0", "2.0.0"])  # 2.x ignored, 1.2 used
        assert isinstance(bridge, LazyAsyncioThread)
