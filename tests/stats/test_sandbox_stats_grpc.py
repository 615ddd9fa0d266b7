"""ListPodSandboxStats over gRPC (``kubelet-trio sim-cri``): the CRI messages added for pod-level usage
travel intact."""

from __future__ import annotations

import trio

from kubelet_trio.cri.gen.runtime import v1 as pb
from kubelet_trio.cri.remote import open_cri_runtime
from kubelet_trio.sim.usage import USAGE_ANNOTATION_PREFIX

IMAGE = "registry.sim/kubelet-trio/busybox:1.36"


async def test_pod_sandbox_stats_over_grpc(sim_cri_endpoint: str) -> None:
    with trio.fail_after(30):
        async with open_cri_runtime(sim_cri_endpoint, request_timeout=10) as rt:
            config = pb.PodSandboxConfig(
                metadata=pb.PodSandboxMetadata(name="stats", namespace="default", uid="stats-uid"),
                labels={"test": "sandbox-stats"},
                annotations={USAGE_ANNOTATION_PREFIX + "app": "memory=3Mi processes=2 cpu=2"},
            )
            sandbox = await rt.run_pod_sandbox(config)
            try:
                await rt.pull_image(pb.ImageSpec(image=IMAGE))
                container = await rt.create_container(
                    sandbox,
                    pb.ContainerConfig(
                        metadata=pb.ContainerMetadata(name="app"), image=pb.ImageSpec(image=IMAGE)
                    ),
                    config,
                )
                await rt.start_container(container)
                (stats,) = await rt.list_pod_sandbox_stats(
                    pb.PodSandboxStatsFilter(label_selector={"test": "sandbox-stats"})
                )
                assert stats.attributes is not None and stats.attributes.id == sandbox
                assert stats.attributes.metadata == config.metadata
                linux = stats.linux
                assert linux is not None and linux.memory is not None and linux.process is not None
                assert linux.memory.working_set_bytes == pb.UInt64Value(value=3 * 1024**2)
                assert linux.process.process_count == pb.UInt64Value(value=2)
                assert linux.cpu is not None and linux.cpu.usage_nano_cores == pb.UInt64Value(value=2 * 10**9)
                assert linux.network is not None and linux.network.default_interface is not None
                assert linux.network.default_interface.name == "eth0"
                assert [c.attributes.id for c in linux.containers if c.attributes] == [container]
                assert await rt.list_pod_sandbox_stats(pb.PodSandboxStatsFilter(id="nothing-like-it")) == []
            finally:
                await rt.stop_pod_sandbox(sandbox)
                await rt.remove_pod_sandbox(sandbox)
                assert await rt.list_pod_sandbox_stats(pb.PodSandboxStatsFilter(id=sandbox)) == []
