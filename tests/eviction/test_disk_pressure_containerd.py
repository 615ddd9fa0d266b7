"""Real disk pressure on real containerd behind the fake API server: the kubelet's root and pod-log
directories live on a small tmpfs (the node's ``nodefs``, measured with statvfs); a pod filling its
emptyDir there is evicted (Failed, ``Evicted``, an event), the other pods keep running, and the Node
reports DiskPressure, which clears once the pod's volume is gone and the transition period has passed.
Real clock, absolute deadlines; the eviction manager looks every 10 s as in Go."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from kubelet_trio.apimode import ApiModeOptions
from kubelet_trio.testing.apinode import MACHINE
from kubelet_trio.testing.env import LocalCriEnvironment
from kubelet_trio.testing.fakeapi import FakeApi
from kubelet_trio.volumemanager.mounter import unmount_all_under
from tests.apiserver.harness import eventually, node_ready, open_containerd_api_node

pytestmark = pytest.mark.containerd

NODE = "disk-pressure-node"
NODEFS_SIZE_MI = 64
FILL_MI = 40  # leaves less than the threshold's half of the filesystem
TRANSITION = 5.0


@pytest.fixture
def nodefs(tmp_path: Path) -> Iterator[Path]:
    """A 64Mi tmpfs for the kubelet's root and pod-log directories."""
    mountpoint = tmp_path / "nodefs"
    mountpoint.mkdir()
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={NODEFS_SIZE_MI}m,mode=0755", "tmpfs", str(mountpoint)],
        check=True,
    )
    try:
        yield mountpoint
    finally:
        unmount_all_under(str(mountpoint))  # volumes of pods left running, then the tmpfs itself
        subprocess.run(["umount", "-l", str(mountpoint)], check=False)


def manifest(name: str, image: str, script: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {
            "nodeName": NODE,
            "terminationGracePeriodSeconds": 30,
            "containers": [
                {
                    "name": name,
                    "image": image,
                    "command": ["sh", "-c", script],
                    "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}],
                }
            ],
            "volumes": [{"name": "scratch", "emptyDir": {}}],
        },
    }


def phase(api: FakeApi, name: str) -> str | None:
    return api.pod(name).get("status", {}).get("phase") if api.has_pod(name) else None


def disk_pressure(api: FakeApi) -> str | None:
    for condition in api.node(NODE).get("status", {}).get("conditions") or ():
        if condition["type"] == "DiskPressure":
            return str(condition["status"])
    return None


async def test_filling_the_pods_disk_evicts_the_pod_that_filled_it(
    cri_env: LocalCriEnvironment, tmp_path: Path, nodefs: Path
) -> None:
    image = cri_env.images.busybox
    sleeper = "trap 'exit 0' TERM; while true; do sleep 1; done"
    options = ApiModeOptions(machine=MACHINE, node_status_update_frequency=1.0)
    with trio.fail_after(240):
        async with open_containerd_api_node(
            cri_env,
            tmp_path,
            NODE,
            options=options,
            root_dir=str(nodefs / "root"),
            pod_logs_dir=str(nodefs / "pod-logs"),
            eviction_hard={"nodefs.available": "50%"},
            eviction_pressure_transition_period=TRANSITION,
        ) as (api, _client, _runtime, node):
            await eventually(lambda: node_ready(api, NODE), 60, 0.2)
            assert disk_pressure(api) == "False"
            for name in ("quiet-a", "quiet-b"):
                api.create_pod(manifest(name, image, sleeper))
            # the quiet pods run before the filler exists: it may be evicted in the first round after its
            # dd, which on a busy machine can come before a pod started beside it is running
            await eventually(lambda: all(phase(api, n) == "Running" for n in ("quiet-a", "quiet-b")), 90, 0.2)
            api.create_pod(
                manifest(
                    "filler", image, f"dd if=/dev/zero of=/scratch/fill bs=1M count={FILL_MI}; " + sleeper
                )
            )

            await eventually(lambda: disk_pressure(api) == "True", 60, 0.2)
            await eventually(lambda: phase(api, "filler") == "Failed", 30, 0.2)
            status = api.pod("filler")["status"]
            assert status["reason"] == "Evicted"
            assert status["message"].startswith(
                "The node was low on resource: ephemeral-storage. Threshold quantity: 32Mi, available: "
            )
            events = [e for e in api.events() if e.get("involvedObject", {}).get("name") == "filler"]
            assert any(e["reason"] == "Evicted" and e["type"] == "Warning" for e in events)
            node_events = [
                e["reason"] for e in api.events() if e.get("involvedObject", {}).get("kind") == "Node"
            ]
            assert "NodeHasDiskPressure" in node_events
            reclaim = [e for e in api.events() if e["reason"] == "EvictionThresholdMet"]
            assert [(e["type"], e["message"]) for e in reclaim[:1]] == [
                ("Warning", "Attempting to reclaim ephemeral-storage")
            ]

            # the emptyDir goes with the pod; the pressure clears after the transition period
            await eventually(lambda: disk_pressure(api) == "False", 40, 0.2)
            assert "NodeHasNoDiskPressure" in [
                e["reason"] for e in api.events() if e.get("involvedObject", {}).get("kind") == "Node"
            ]
            assert phase(api, "quiet-a") == phase(api, "quiet-b") == "Running"
            assert node.kubelet._eviction_manager.evictions == {"nodefs.available": 1}  # and no other


async def test_a_pod_over_its_emptydir_size_limit_is_evicted_without_node_pressure(
    cri_env: LocalCriEnvironment, tmp_path: Path
) -> None:
    image = cri_env.images.busybox
    sleeper = "trap 'exit 0' TERM; while true; do sleep 1; done"
    writer = manifest("writer", image, "dd if=/dev/zero of=/scratch/fill bs=1M count=8; " + sleeper)
    writer["spec"]["volumes"] = [{"name": "scratch", "emptyDir": {"sizeLimit": "4Mi"}}]
    modest = manifest("modest", image, "dd if=/dev/zero of=/scratch/fill bs=1M count=1; " + sleeper)
    modest["spec"]["volumes"] = [{"name": "scratch", "emptyDir": {"sizeLimit": "4Mi"}}]
    with trio.fail_after(180):
        async with open_containerd_api_node(cri_env, tmp_path, NODE) as (api, _client, _runtime, node):
            await eventually(lambda: node_ready(api, NODE), 60, 0.2)
            api.create_pod(writer)
            api.create_pod(modest)
            await eventually(lambda: phase(api, "writer") == "Failed", 60, 0.2)
            status = api.pod("writer")["status"]
            assert (status["reason"], status["message"]) == (
                "Evicted",
                'Usage of EmptyDir volume "scratch" exceeds the limit "4Mi". ',
            )
            assert phase(api, "modest") == "Running"
            assert disk_pressure(api) == "False"
            manager = node.kubelet._eviction_manager  # counted once the pod is killed
            await eventually(lambda: manager.evictions == {"emptydirfs.limit": 1}, 30, 0.2)
