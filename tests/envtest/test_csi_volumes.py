"""CSI volumes published and torn down through the real hostpath CSI driver, against a real kube-apiserver:
an inline ephemeral volume (the driver creates it at ``NodePublishVolume`` from the pod info the
``CSIDriver`` asks for), with Go's paths and ``vol_data.json``, adopted as-is by a second set-up (a
restarted kubelet), and gone from the mount table after teardown."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

import trio

from kubelet_trio.api import Pod, Volume
from kubelet_trio.apimode import open_kubeconfig_client
from kubelet_trio.client import NotFound
from kubelet_trio.volume.csi.plugin import CsiVolumePlugin, ephemeral_volume_handle
from kubelet_trio.volume.persistent import ExternalVolumes
from kubelet_trio.volumemanager.mounter import SystemMounter
from tests.envtest.conftest import EnvtestCluster
from tests.envtest.csi_parts import DRIVER, HOSTPATH_CSI_DRIVER, hostpath_driver, node_object, root

__all__ = ["root"]  # the fixture

NODE = "csi-volume-node"
UID = "0b8f3f4e-5d5a-4c1e-9a57-6c0fbf7c0001"


def mounts() -> set[str]:
    with open("/proc/self/mountinfo", encoding="utf-8") as info:
        return {line.split()[4] for line in info}


def inline_pod() -> tuple[Pod, Volume]:
    pod = Pod.from_dict(
        {
            "metadata": {"name": "web", "namespace": "default", "uid": UID},
            "spec": {
                "serviceAccountName": "default",
                "containers": [
                    {
                        "name": "c",
                        "image": "busybox",
                        "volumeMounts": [{"name": "scratch", "mountPath": "/d"}],
                    }
                ],
                "volumes": [
                    {"name": "scratch", "csi": {"driver": DRIVER, "volumeAttributes": {"size": "1Mi"}}}
                ],
            },
        }
    )
    assert pod.spec is not None and pod.spec.volumes
    return pod, pod.spec.volumes[0]


async def test_inline_ephemeral_volume_is_published_adopted_and_torn_down(
    envtest: EnvtestCluster, root: Path
) -> None:
    mounter = SystemMounter()
    with trio.fail_after(90):
        async with (
            open_kubeconfig_client(str(envtest.kubeconfig)) as client,
            node_object(client, NODE),
            hostpath_driver(client, root, NODE) as hostpath,
        ):
            await client.create("/apis/storage.k8s.io/v1/csidrivers", HOSTPATH_CSI_DRIVER)
            try:
                plugin = CsiVolumePlugin(
                    root_dir=str(root / "kubelet"),
                    node_name=NODE,
                    drivers=hostpath.drivers,
                    bridge=hostpath.bridge,
                    is_mount_point=mounter.is_mount_point,
                )
                external = ExternalVolumes(api=client, csi=plugin)
                pod, volume = inline_pod()
                assert external.handles(volume)
                mount = await external.set_up(pod, volume)
                target = (
                    root / "kubelet" / "pods" / UID / "volumes" / "kubernetes.io~csi" / "scratch" / "mount"
                )
                assert (mount.kind, mount.host_path, mount.read_only, mount.apply_fs_group) == (
                    "csi",
                    str(target),
                    False,
                    True,  # fsGroupPolicy File
                )
                assert str(target) in mounts()
                data = json.loads((target.parent / "vol_data.json").read_text())
                assert data == {
                    "specVolID": "scratch",
                    "volumeHandle": ephemeral_volume_handle(UID, "scratch"),
                    "driverName": DRIVER,
                    "nodeName": NODE,
                    "attachmentID": data["attachmentID"],
                    "volumeLifecycleMode": "Ephemeral",
                }
                (target / "hello").write_text("from the pod")

                # A second set-up (a restarted kubelet) adopts the published volume: no new publish.
                log = (root / "hostpath.log").read_text()
                again = await external.set_up(pod, volume)
                assert again.host_path == mount.host_path
                assert (target / "hello").read_text() == "from the pod"
                assert (root / "hostpath.log").read_text().count("NodePublishVolume") == log.count(
                    "NodePublishVolume"
                )

                await external.tear_down(str(target.parent))
                assert str(target) not in mounts()
                assert not target.parent.exists()
                assert "NodeUnpublishVolume" in (root / "hostpath.log").read_text()
            finally:
                with trio.CancelScope(shield=True), contextlib.suppress(NotFound):
                    await client.delete(f"/apis/storage.k8s.io/v1/csidrivers/{DRIVER}")
    assert not any(m.startswith(os.fspath(root)) for m in mounts())
