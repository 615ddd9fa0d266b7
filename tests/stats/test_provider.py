"""The stats provider on the simulated runtime: exact usage of containers, pods and the node under
MockClock, which instances count, and ephemeral storage on disk."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import trio
import trio.testing

from kubelet_trio.cri import errors as cri_errors
from kubelet_trio.cri.gen.runtime import v1 as pb
from kubelet_trio.kuberuntime.labels import node_selector
from kubelet_trio.sim.usage import USAGE_ANNOTATION_PREFIX, ContainerUsage, UsageError, parse_usage
from kubelet_trio.stats import HostSample, PodStats, disk_usage, fixed_host_sample, summary_json
from kubelet_trio.testing.pods import pod_manifest as sim_pod_manifest
from kubelet_trio.volumemanager.paths import EMPTY_DIR_PLUGIN, pod_volume_dir
from tests.server.harness import IMAGE, HttpNode, open_test_node, pod_manifest

MiB = 1024**2
GiB = 1024**3
HOST = HostSample(
    cpu_core_nano_seconds=123_000_000_000,
    memory_total_bytes=8 * GiB,
    memory_available_bytes=6 * GiB,
    memory_free_bytes=5 * GiB,
    fs_capacity_bytes=100 * GiB,
    fs_available_bytes=60 * GiB,
    fs_free_bytes=70 * GiB,
    fs_inodes=1000,
    fs_inodes_free=400,
    max_pid=4194304,
    processes=321,
    boot_time_s=1_700_000_000,
)


def write_file(path: str, size: int) -> None:
    with open(path, "wb") as f:
        f.write(b"x" * size)
        f.flush()
        os.fsync(f.fileno())


def with_usage(manifest: dict, **usage: str) -> dict:  # type: ignore[type-arg]
    annotations = manifest["metadata"]["annotations"]
    for container, text in usage.items():
        annotations[USAGE_ANNOTATION_PREFIX + container] = text
    return manifest


async def container_ids(node: HttpNode, pod_uid: str) -> dict[str, pb.Container]:
    """The pod's containers by name (the newest instance of each)."""
    listed = await node.sim.list_containers(
        pb.ContainerFilter(label_selector=node_selector("test-node", **{"io.kubernetes.pod.uid": pod_uid}))
    )
    return {c.metadata.name: c for c in sorted(listed, key=lambda c: c.created_at) if c.metadata}


async def started_ns(node: HttpNode, container_id: str) -> int:
    status = (await node.sim.container_status(container_id)).status
    assert status is not None
    return status.started_at


def only(pods: list[PodStats], name: str) -> PodStats:
    (found,) = [p for p in pods if p.pod_ref.name == name]
    return found


async def test_container_pod_and_node_usage_are_exact(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    async with open_test_node(tmp_path, host_stats=fixed_host_sample(HOST)) as node:
        (web,) = await node.apply(
            with_usage(
                pod_manifest("web", {"app": "run", "side": "run"}),
                app="cpu=250m memory=64Mi rootfs=10Mi rootfs-inodes=12 processes=3",
                side="cpu=50m memory=16Mi",
            )
        )
        await node.wait_running(web)
        await trio.sleep(10)
        provider = node.kubelet._stats_provider
        containers = await container_ids(node, web.uid)
        now = node.kubelet.clock.wall_ns()
        app_ran = now - await started_ns(node, containers["app"].id)
        side_ran = now - await started_ns(node, containers["side"].id)
        assert app_ran >= 10 * 10**9

        summary = await provider.summary()
        pod = only(list(summary.pods), "web")
        app, side = pod.containers
        assert (app.name, side.name) == ("app", "side")
        assert app.start_time_ns == containers["app"].created_at
        assert app.cpu is not None and side.cpu is not None
        assert (app.cpu.usage_core_nano_seconds, app.cpu.usage_nano_cores) == (
            250 * app_ran // 1000,
            250 * 10**6,
        )
        assert side.cpu.usage_core_nano_seconds == 50 * side_ran // 1000
        assert app.memory is not None and app.memory.working_set_bytes == 64 * MiB
        assert app.memory.usage_bytes == app.memory.rss_bytes == 64 * MiB
        assert app.rootfs is not None and (app.rootfs.used_bytes, app.rootfs.inodes_used) == (10 * MiB, 12)
        # The pod cgroup (ListPodSandboxStats): the sum of its containers in the simulation.
        assert pod.cpu is not None and pod.memory is not None
        assert pod.cpu.usage_core_nano_seconds == 250 * app_ran // 1000 + 50 * side_ran // 1000
        assert pod.cpu.usage_nano_cores == 300 * 10**6
        assert pod.memory.working_set_bytes == 80 * MiB
        assert pod.process_stats is not None and pod.process_stats.process_count == 4
        assert pod.network is not None and pod.network.default is not None
        assert (pod.network.default.name, pod.network.default.rx_bytes) == ("eth0", 0)
        assert pod.start_time_ns is not None and pod.start_time_ns <= app.start_time_ns

        node_stats = summary.node
        assert node_stats.cpu is not None and node_stats.memory is not None and node_stats.fs is not None
        assert node_stats.cpu.usage_core_nano_seconds == 123_000_000_000
        assert node_stats.cpu.usage_nano_cores is None  # one reading so far
        assert (node_stats.memory.working_set_bytes, node_stats.memory.usage_bytes) == (2 * GiB, 3 * GiB)
        assert node_stats.memory.available_bytes == 6 * GiB
        assert (node_stats.fs.used_bytes, node_stats.fs.inodes_used) == (30 * GiB, 600)
        assert node_stats.rlimit is not None
        assert (node_stats.rlimit.max_pid, node_stats.rlimit.num_of_running_processes) == (4194304, 321)
        assert node_stats.start_time_ns == 1_700_000_000 * 10**9
        image_fs = (await node.sim.image_fs_info()).image_filesystems[0]
        assert node_stats.image_fs is not None and image_fs.used_bytes is not None
        assert node_stats.image_fs.used_bytes == image_fs.used_bytes.value

        await trio.sleep(5)  # the node's CPU did not move: 0 nanocores from the second reading on
        again = (await provider.summary()).node
        assert again.cpu is not None and again.cpu.usage_nano_cores == 0


async def test_summary_json_has_the_v1alpha1_shape(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    async with open_test_node(tmp_path, host_stats=fixed_host_sample(HOST)) as node, node.client() as client:
        (web,) = await node.apply(with_usage(pod_manifest("web", {"app": "run"}), app="cpu=1 memory=1Gi"))
        await node.wait_running(web)
        body = (await client.get("/stats/summary")).json()
        assert body == summary_json(await node.kubelet._stats_provider.summary())  # same instant
        (pod,) = body["pods"]
        assert set(pod) == {
            "podRef", "startTime", "containers", "cpu", "memory", "network", "ephemeral-storage",
            "process_stats",
        }  # fmt: skip
        assert pod["podRef"] == {"name": "web", "namespace": "default", "uid": web.uid}
        assert pod["memory"]["workingSetBytes"] == GiB
        assert pod["process_stats"] == {"process_count": 1}
        (app,) = pod["containers"]
        assert app["cpu"]["usageNanoCores"] == 10**9
        assert app["startTime"].endswith("Z") and "." not in app["startTime"]
        assert body["node"]["rlimit"] == {
            "time": body["node"]["cpu"]["time"],
            "maxpid": 4194304,
            "curproc": 321,
        }
        assert body["node"]["fs"]["capacityBytes"] == 100 * GiB
        light = (await client.get("/stats/summary", params={"only_cpu_and_memory": "true"})).json()
        (light_pod,) = light["pods"]
        assert "ephemeral-storage" not in light_pod and "logs" not in light_pod["containers"][0]
        assert light_pod["memory"] == pod["memory"]


async def test_only_the_live_instance_of_a_restarting_container_counts(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    async with open_test_node(tmp_path, host_stats=fixed_host_sample(HOST)) as node:
        (crashy,) = await node.apply(
            with_usage(
                pod_manifest("crashy", {"app": "exit 1 after 5s"}), app="cpu=100m memory=8Mi rootfs=1Mi"
            )
        )
        await node.kubelet.wait_for_status(
            crashy.uid,
            lambda s: any((c.restart_count or 0) >= 2 for c in s.container_statuses or ()),
        )
        listed = await node.sim.list_containers(pb.ContainerFilter(label_selector=node_selector("test-node")))
        assert len(listed) >= 2  # exited instances are still there
        newest = max(listed, key=lambda c: c.created_at)
        (pod,) = await node.kubelet._stats_provider.pod_stats()
        (app,) = pod.containers
        assert app.start_time_ns == newest.created_at
        assert newest.state is pb.ContainerState.CONTAINER_RUNNING  # the third run, just started
        ran = node.kubelet.clock.wall_ns() - await started_ns(node, newest.id)
        assert app.cpu is not None and app.cpu.usage_core_nano_seconds == 100 * ran // 1000
        assert app.rootfs is not None and app.rootfs.used_bytes == MiB  # one writable layer, not three


async def test_ephemeral_storage_is_layers_logs_and_empty_dirs(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    async with open_test_node(tmp_path, host_stats=fixed_host_sample(HOST)) as node:
        manifest = with_usage(
            sim_pod_manifest(
                "writer",
                {"app": 'print "a line" "another line"; run'},
                image=IMAGE,
                volumes=[{"name": "scratch", "emptyDir": {}}],
            ),
            app="rootfs=4Mi rootfs-inodes=3",
        )
        manifest["spec"]["containers"][0]["volumeMounts"] = [{"name": "scratch", "mountPath": "/scratch"}]
        (writer,) = await node.apply(manifest)
        await node.wait_running(writer)
        scratch = pod_volume_dir(str(tmp_path / "root"), writer.uid, EMPTY_DIR_PLUGIN, "scratch")
        write_file(os.path.join(scratch, "blob"), 256 * 1024)
        (pod,) = await node.kubelet._stats_provider.pod_stats()
        (volume,) = pod.volume_stats
        assert volume.name == "scratch"
        assert volume.fs.used_bytes is not None and volume.fs.used_bytes >= 256 * 1024
        assert volume.fs.inodes_used == 2  # the directory and the file
        (app,) = pod.containers
        assert app.logs is not None and app.logs.used_bytes is not None and app.logs.used_bytes > 0
        assert app.rootfs is not None and app.rootfs.used_bytes == 4 * MiB
        parts = [app.rootfs.used_bytes, app.logs.used_bytes, volume.fs.used_bytes]
        assert pod.ephemeral_storage is not None and pod.ephemeral_storage.used_bytes is not None
        assert pod.ephemeral_storage.used_bytes >= sum(parts)  # plus etc-hosts and pod-level log files
        # Growing the volume grows the pod's ephemeral storage by as much.
        write_file(os.path.join(scratch, "more"), 1024 * 1024)
        (grown,) = await node.kubelet._stats_provider.pod_stats()
        assert grown.ephemeral_storage is not None and grown.ephemeral_storage.used_bytes is not None
        assert (
            grown.ephemeral_storage.used_bytes - pod.ephemeral_storage.used_bytes
            == (grown.volume_stats[0].fs.used_bytes or 0) - volume.fs.used_bytes
        )


async def test_set_usage_changes_a_running_container(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    async with open_test_node(tmp_path, host_stats=fixed_host_sample(HOST)) as node:
        (web,) = await node.apply(pod_manifest("web", {"app": "run"}))
        await node.wait_running(web)
        containers = await container_ids(node, web.uid)
        (before,) = await node.kubelet._stats_provider.pod_stats()
        assert before.memory is not None and before.memory.working_set_bytes == 0
        node.sim.set_usage(containers["app"].id, ContainerUsage(memory_bytes=300 * MiB))
        (after,) = await node.kubelet._stats_provider.pod_stats()
        assert after.memory is not None and after.memory.working_set_bytes == 300 * MiB


async def test_sandbox_stats_failure_falls_back_to_container_sums(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    async with open_test_node(tmp_path, host_stats=fixed_host_sample(HOST)) as node:
        (web,) = await node.apply(
            with_usage(
                pod_manifest("web", {"a": "run", "b": "run"}), a="memory=5Mi processes=2", b="memory=7Mi"
            )
        )
        await node.wait_running(web)
        node.sim.sandbox_stats_broken = True
        (pod,) = await node.kubelet._stats_provider.pod_stats()
        assert pod.memory is not None and pod.memory.working_set_bytes == 12 * MiB
        assert pod.process_stats is None and pod.network is None
        asked = node.sim.sandbox_stats_calls
        await trio.sleep(299)
        await node.kubelet._stats_provider.pod_stats()
        assert node.sim.sandbox_stats_calls == asked  # not asked again for SANDBOX_STATS_RETRY
        node.sim.sandbox_stats_broken = False
        await trio.sleep(1)
        (pod,) = await node.kubelet._stats_provider.pod_stats()
        assert pod.process_stats is not None and pod.process_stats.process_count == 3


def test_disk_usage_counts_blocks_and_hard_links_once(tmp_path: Path) -> None:
    top = tmp_path / "d"
    (top / "sub").mkdir(parents=True)
    (top / "sub" / "f").write_bytes(b"z" * 10000)
    os.link(top / "sub" / "f", top / "link")
    (top / "sym").symlink_to("/usr")
    usage = disk_usage(str(top))
    assert usage is not None
    stats = [os.lstat(p) for p in (top, top / "sub", top / "sub" / "f", top / "sym")]
    assert usage.inodes_used == 4
    assert usage.used_bytes == sum(s.st_blocks * 512 for s in stats)
    assert disk_usage(str(tmp_path / "missing")) is None


def test_usage_annotation_parses_quantities_and_names_bad_keys() -> None:
    usage = parse_usage("cpu=1.5 memory=1Gi rootfs=100M rootfs-inodes=7 processes=2")
    assert usage == ContainerUsage(1500, GiB, 100_000_000, 7, 2)
    assert usage.cpu_core_nano_seconds(2 * 10**9) == 3 * 10**9
    with pytest.raises(UsageError, match="'gpu=1': expected one of cpu, memory"):
        parse_usage("gpu=1")
    with pytest.raises(UsageError, match="memory: "):
        parse_usage("memory=lots")


async def test_bad_usage_annotation_fails_create_container(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    async with open_test_node(tmp_path) as node:
        config = pb.PodSandboxConfig(
            metadata=pb.PodSandboxMetadata(name="p", namespace="default", uid="u1"),
            annotations={USAGE_ANNOTATION_PREFIX + "app": "cpu=fast"},
        )
        sandbox = await node.sim.run_pod_sandbox(config)
        container = pb.ContainerConfig(
            metadata=pb.ContainerMetadata(name="app"), image=pb.ImageSpec(image="registry.sim/busybox:1.36")
        )
        with pytest.raises(
            cri_errors.InvalidArgumentError, match=f"annotation {USAGE_ANNOTATION_PREFIX}app: cpu"
        ):
            await node.sim.create_container(sandbox, container, config)
