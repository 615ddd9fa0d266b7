"""Container configuration through a whole node on SimRuntime: what reaches the CRI, and the pod-level
failures (CreateContainerConfigError) that leave the node's other pods running."""

from __future__ import annotations

from pathlib import Path

import trio
import trio.testing

from kubelet_trio.cri.gen.runtime import v1 as pb
from kubelet_trio.testing.pods import container_status, is_running
from tests.prober.nodes import bare_id, container, open_probe_node, pod_manifest


def read(path: str) -> str:
    return Path(path).read_text()


def write(path: str, text: str) -> None:
    Path(path).write_text(text)


def waiting_reason(status: object, name: str = "app") -> str | None:
    try:
        waiting = container_status(status, name).state.waiting  # type: ignore[arg-type]
    except AssertionError:
        return None
    return waiting.reason if waiting is not None else None


async def test_cri_config_of_a_configured_container(autojump_clock: trio.testing.MockClock) -> None:
    async with open_probe_node(cluster_dns=("10.96.0.10",), cluster_domain="cluster.local") as env:
        (pod,) = await env.node.apply(
            pod_manifest(
                "conf",
                [
                    container(
                        command=["sh", "-c", "echo $(GREETING) $$HOME"],
                        workingDir="/srv",
                        env=[
                            {"name": "NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                            {"name": "GREETING", "value": "hi-$(NAME)"},
                        ],
                        resources={
                            "requests": {"cpu": "100m", "memory": "32Mi"},
                            "limits": {"cpu": "200m", "memory": "64Mi"},
                        },
                        securityContext={"runAsUser": 1000},
                    )
                ],
                hostAliases=[{"ip": "192.0.2.50", "hostnames": ["db"]}],
            )
        )
        status = await env.node.wait_for(pod, is_running)
        config = env.sim.container_config(bare_id(status))
        assert config.command == ["sh", "-c", "echo hi-conf $HOME"]
        assert config.working_dir == "/srv"
        assert {kv.key: kv.value for kv in config.envs} == {"NAME": "conf", "GREETING": "hi-conf"}
        assert config.linux is not None
        resources = config.linux.resources
        assert (resources.cpu_shares, resources.cpu_quota, resources.cpu_period) == (102, 20000, 100000)
        assert resources.memory_limit_in_bytes == 64 * 2**20
        assert config.linux.security_context.run_as_user == pb.Int64Value(value=1000)
        paths = {m.container_path: m.host_path for m in config.mounts}
        hosts = read(paths["/etc/hosts"])
        assert f"{status.pod_ip}\tconf\n" in hosts and "192.0.2.50\tdb\n" in hosts
        assert "/dev/termination-log" in paths
        assert status.qos_class == "Burstable"
        (sandbox,) = await env.sim.list_pod_sandbox()
        dns = env.sim._sandboxes[sandbox.id].config.dns_config  # what the runtime was given
        assert dns is not None and dns.servers == ["10.96.0.10"]
        assert dns.searches[:3] == ["default.svc.cluster.local", "svc.cluster.local", "cluster.local"]


async def test_config_errors_block_only_their_pod(autojump_clock: trio.testing.MockClock) -> None:
    async with open_probe_node() as env:
        missing_cm, root, good = await env.node.apply(
            pod_manifest(
                "needs-cm",
                [
                    container(
                        env=[
                            {"name": "X", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "x"}}}
                        ]
                    )
                ],
            ),
            pod_manifest("root", [container()], securityContext={"runAsNonRoot": True}),
            pod_manifest("good", [container()]),
        )
        status = await env.node.wait_for(
            missing_cm, lambda s: waiting_reason(s) == "CreateContainerConfigError"
        )
        assert 'configmap "settings" not found' in (container_status(status).state.waiting.message or "")
        assert status.phase == "Pending"
        status = await env.node.wait_for(root, lambda s: waiting_reason(s) == "CreateContainerConfigError")
        assert "container has runAsNonRoot and image will run as root" in (
            container_status(status).state.waiting.message or ""
        )
        await trio.sleep(60)
        good_status = env.node.status(good)
        assert good_status is not None and is_running(good_status) and good_status.phase == "Running"
        assert await env.sim.list_containers() and all(
            c.labels["io.kubernetes.pod.name"] == "good" for c in await env.sim.list_containers()
        )


async def test_termination_message_from_file(autojump_clock: trio.testing.MockClock) -> None:
    async with open_probe_node() as env:
        (pod,) = await env.node.apply(
            pod_manifest("msg", [container(terminationMessagePath="/tmp/last-words")], restartPolicy="Never")
        )
        status = await env.node.wait_for(pod, is_running)
        container_id = bare_id(status)
        config = env.sim.container_config(container_id)
        (host_path,) = [m.host_path for m in config.mounts if m.container_path == "/tmp/last-words"]
        write(host_path, "goodbye, cruel world")
        env.sim.crash_container(container_id, 3)
        status = await env.node.wait_for_phase(pod, "Failed")
        terminated = container_status(status).state.terminated
        assert (terminated.exit_code, terminated.message) == (3, "goodbye, cruel world")


async def test_host_network_pod_uses_the_node_ips_and_hosts(autojump_clock: trio.testing.MockClock) -> None:
    async with open_probe_node() as env:
        (pod,) = await env.node.apply(
            pod_manifest(
                "hostnet",
                [container(env=[{"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}])],
                hostNetwork=True,
                hostAliases=[{"ip": "192.0.2.99", "hostnames": ["extra"]}],
            )
        )
        status = await env.node.wait_for(pod, is_running)
        assert status.pod_ip == "192.0.2.10"  # the node's
        config = env.sim.container_config(bare_id(status))
        assert {kv.key: kv.value for kv in config.envs} == {"IP": "192.0.2.10"}
        hosts = read({m.container_path: m.host_path for m in config.mounts}["/etc/hosts"])
        assert hosts.startswith("# Kubernetes-managed hosts file (host network).\n")
        assert hosts.endswith("# Entries added by HostAliases.\n192.0.2.99\textra\n")
