"""Volumes through a whole node on SimRuntime (autojump MockClock): set up before the first container,
updated in place, torn down after the pod; a failure blocks only its pod."""

from __future__ import annotations

import os
from pathlib import Path

import trio
import trio.testing

from kubelet_trio.testing.pods import container_status, is_running
from tests.prober.nodes import bare_id, container, open_probe_node, pod_manifest


async def test_empty_dir_shared_and_downward_api_updated_in_place(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_probe_node() as env:
        node = env.node
        manifest = pod_manifest(
            "shared",
            [
                container("writer", volumeMounts=[{"name": "scratch", "mountPath": "/out"}]),
                container(
                    "reader",
                    volumeMounts=[
                        {"name": "scratch", "mountPath": "/in", "readOnly": True},
                        {"name": "info", "mountPath": "/etc/podinfo"},
                    ],
                ),
            ],
            labels={"app": "shared", "version": "1"},
            volumes=[
                {"name": "scratch", "emptyDir": {}},
                {
                    "name": "info",
                    "downwardAPI": {
                        "items": [{"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}]
                    },
                },
            ],
        )
        (pod,) = await node.apply(manifest)
        status = await node.wait_for(pod, lambda s: is_running(s, "writer") and is_running(s, "reader"))
        writer = {m.container_path: m for m in env.sim.container_config(bare_id(status, "writer")).mounts}
        reader = {m.container_path: m for m in env.sim.container_config(bare_id(status, "reader")).mounts}
        assert writer["/out"].host_path == reader["/in"].host_path
        assert (writer["/out"].readonly, reader["/in"].readonly) == (False, True)
        assert reader["/etc/podinfo"].readonly  # downward API volumes are mounted read-only
        info = Path(reader["/etc/podinfo"].host_path)
        assert (info / "labels").read_text() == 'app="shared"\nversion="1"'
        first_data = os.readlink(info / "..data")

        manifest["metadata"]["labels"]["version"] = "2"
        await node.apply(manifest)
        await trio.sleep(2)
        assert (info / "labels").read_text() == 'app="shared"\nversion="2"'
        assert os.readlink(info / "..data") != first_data
        status = node.status(pod)
        # updated, not restarted
        assert status is not None and container_status(status, "reader").restart_count == 0

        volumes_dir = Path(node.kubelet.config.root_dir) / "pods" / pod.uid / "volumes"
        assert volumes_dir.is_dir()
        await node.delete(pod, grace_period_seconds=2)
        await node.wait_terminated(pod)
        assert not volumes_dir.exists()  # torn down after the containers stopped
        await node.remove(pod)
        await trio.sleep(5)
        assert not (Path(node.kubelet.config.root_dir) / "pods" / pod.uid).exists()  # housekeeping


async def test_host_path_failure_blocks_only_its_pod(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    async with open_probe_node() as env:
        node = env.node
        missing = tmp_path / "not-there"
        bad, good = await node.apply(
            pod_manifest(
                "needs-dir",
                [container(volumeMounts=[{"name": "host", "mountPath": "/host"}])],
                volumes=[{"name": "host", "hostPath": {"path": str(missing), "type": "Directory"}}],
            ),
            pod_manifest(
                "makes-dir",
                [container(volumeMounts=[{"name": "host", "mountPath": "/host"}])],
                volumes=[
                    {
                        "name": "host",
                        "hostPath": {"path": str(tmp_path / "made"), "type": "DirectoryOrCreate"},
                    }
                ],
            ),
        )
        status = await node.wait_for(good, is_running)
        mounts = {m.container_path: m.host_path for m in env.sim.container_config(bare_id(status)).mounts}
        assert mounts["/host"] == str(tmp_path / "made") and (tmp_path / "made").is_dir()
        await trio.sleep(30)
        bad_status = node.status(bad)
        assert bad_status is not None and bad_status.phase == "Pending"
        assert container_status(bad_status).state.waiting.reason == "ContainerCreating"
        failed = env.events.reasons("FailedMount", "needs-dir")
        assert len(failed) >= 2  # retried
        assert failed[0] == (
            0,
            f'MountVolume.SetUp failed for volume "host" : hostPath type check failed: {missing} '
            "is not a directory",
        )
        assert not [
            c for c in await env.sim.list_containers() if c.labels["io.kubernetes.pod.name"] == "needs-dir"
        ]
        missing.mkdir()
        status = await node.wait_for(bad, is_running)  # the next retry mounts it
        assert status.phase == "Running"
        good_status = node.status(good)
        assert (
            good_status is not None
            and is_running(good_status)
            and container_status(good_status).restart_count == 0
        )
