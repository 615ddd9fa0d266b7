"""Runtime-manager behaviour a real cluster exposed: ephemeral containers (computePodActions'
``EphemeralContainersToStart``, their start with a target PID namespace), pod sysctls in the sandbox
config, and host-network sandboxes without a hostname."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import trio
from trio.testing import MockClock

from kubelet_trio import nodestatus
from kubelet_trio.api import Quantity
from kubelet_trio.cm.allocatable import (
    DEFAULT_EVICTION_HARD,
    NodeAllocatable,
    node_allocatable,
    read_node_allocatable,
    read_node_capacity,
)
from kubelet_trio.cri import errors as cri_errors
from kubelet_trio.cri.gen.runtime import v1 as pb
from kubelet_trio.kuberuntime import KubeRuntimeManager, PodActions, compute_pod_actions
from kubelet_trio.kuberuntime.envvars import make_environment_variables
from kubelet_trio.kuberuntime.sandbox import generate_pod_sandbox_config
from tests.kuberuntime.conftest import (
    NODE,
    WALL_START_NS,
    Env,
    EnvFactory,
    RecordingSim,
    app,
    make_pod,
    spec_of,
)
from tests.kuberuntime.test_actions import EXITED, RUNNING, cs, pod, status

# --- computePodActions ---------------------------------------------------------------------------


def debug(name: str = "debugger", **extra: Any) -> dict[str, Any]:
    return app(name, **extra)


def with_debuggers(*names: str, inits: tuple[str, ...] = (), **spec: Any) -> Any:
    return pod("a", inits=inits, ephemeralContainers=[debug(n) for n in names], **spec)


def test_ephemeral_container_starts_beside_running_containers() -> None:
    got = compute_pod_actions(with_debuggers("d0", "d1"), status(cs("a", RUNNING), cs("d0", RUNNING)))
    assert got == PodActions(sandbox_id="sb0", ephemeral_containers_to_start=(1,))


def test_ephemeral_container_is_never_restarted() -> None:
    for code in (0, 1):
        got = compute_pod_actions(
            with_debuggers("d0"), status(cs("a", RUNNING), cs("d0", EXITED, exit_code=code))
        )
        assert got == PodActions(sandbox_id="sb0")


def test_ephemeral_container_starts_while_an_init_container_fails() -> None:
    got = compute_pod_actions(with_debuggers("d0", inits=("i0",)), status(cs("i0", EXITED, exit_code=1)))
    assert got == PodActions(
        sandbox_id="sb0", next_init_container_to_start=0, ephemeral_containers_to_start=(0,)
    )


def test_ephemeral_container_waits_for_a_new_sandbox() -> None:
    """Go returns early when the sandbox must be (re)created; the next sync starts the debugger."""
    got = compute_pod_actions(with_debuggers("d0"), status(sandboxes=()))
    assert got.create_sandbox and got.ephemeral_containers_to_start == ()


def test_ephemeral_container_does_not_keep_a_finished_pod_alive() -> None:
    got = compute_pod_actions(
        with_debuggers("d0", restartPolicy="Never"),
        status(cs("a", EXITED, exit_code=0), cs("d0", RUNNING)),
    )
    assert got.kill_pod and got.containers_to_start == () and got.ephemeral_containers_to_start == ()


# --- SyncPod --------------------------------------------------------------------------------------


async def test_ephemeral_container_joins_its_target_without_restarting_the_pod(
    env: Env, autojump_clock: MockClock
) -> None:
    base = make_pod([app()], scripts={"app": "run", "debugger": "exit 0 after 3s"})
    assert (await env.sync(base)).ok
    [app_status] = (await env.status(base)).container_statuses

    debugged = make_pod(  # the same pod with a debugger added through the API
        [app()],
        scripts={"app": "run", "debugger": "exit 0 after 3s"},
        ephemeralContainers=[debug(targetContainerName="app", stdin=True, tty=True)],
    )
    result = await env.sync(debugged)
    assert [(s.action, s.target, s.error) for s in result.steps] == [("StartContainer", "debugger", "")]
    runtime_status = await env.status(debugged)
    by_name = {c.name: c for c in runtime_status.container_statuses}
    assert by_name["app"].id == app_status.id and by_name["app"].restart_count == 0
    config = env.sim.container_config(by_name["debugger"].id)
    assert config.stdin and config.tty
    assert config.linux is not None and config.linux.security_context is not None
    namespaces = config.linux.security_context.namespace_options
    assert namespaces is not None
    assert (namespaces.pid, namespaces.target_id) == (pb.NamespaceMode.TARGET, app_status.id)
    assert "Started" in env.event_reasons()

    # It exits after 3 s and is never started again, whatever the pod's restartPolicy (Always).
    await trio.sleep(10)
    assert (await env.sync(debugged)).steps == ()
    instances = [c for c in (await env.status(debugged)).container_statuses if c.name == "debugger"]
    assert len(instances) == 1 and instances[0].exit_code == 0


async def test_ephemeral_container_in_a_shared_pid_namespace_keeps_it(
    env: Env, autojump_clock: MockClock
) -> None:
    shared = make_pod(
        [app()],
        shareProcessNamespace=True,
        ephemeralContainers=[debug(targetContainerName="app")],
    )
    assert (await env.sync(shared)).ok  # the sandbox and the app; the debugger on the next sync
    assert (await env.sync(shared)).ok
    debugger = next(c for c in (await env.status(shared)).container_statuses if c.name == "debugger")
    config = env.sim.container_config(debugger.id)
    assert config.linux is not None and config.linux.security_context is not None
    namespaces = config.linux.security_context.namespace_options
    assert namespaces is not None
    assert (namespaces.pid, namespaces.target_id) == (pb.NamespaceMode.POD, "")


async def test_ephemeral_container_with_a_missing_target(env: Env, autojump_clock: MockClock) -> None:
    broken = make_pod([app()], ephemeralContainers=[debug(targetContainerName="nope")])
    assert (await env.sync(broken)).ok  # the sandbox and the app; the debugger on the next sync
    result = await env.sync(broken)
    failures = {s.target: (s.error, s.message) for s in result.steps if s.error}
    assert failures == {"debugger": ("CreateContainerConfigError", "unable to find target container nope")}
    assert ("uid-1", "Warning", "Failed", "Error: unable to find target container nope") in env.events
    assert env.mgr.reasons("uid-1") == {
        "debugger": ("CreateContainerConfigError", "unable to find target container nope")
    }
    # The regular container started regardless.
    assert [c.name for c in (await env.status(broken)).container_statuses] == ["app"]


# --- the sandbox config ----------------------------------------------------------------------------


def test_pod_sysctls_reach_the_sandbox_config() -> None:
    p = make_pod(
        [app()],
        securityContext={
            "sysctls": [
                {"name": "kernel.shm_rmid_forced", "value": "1"},
                {"name": "net/ipv4/ip_local_port_range", "value": "1024 65535"},
                {"name": "net/ipv4/conf/eth0.100/forwarding", "value": "0"},
            ]
        },
    )
    config = generate_pod_sandbox_config(p, 0, node_name="node-a", pod_logs_dir="/logs")
    assert config.linux is not None
    assert config.linux.sysctls == {
        "kernel.shm_rmid_forced": "1",
        "net.ipv4.ip_local_port_range": "1024 65535",
        "net.ipv4.conf.eth0/100.forwarding": "0",  # a slashed name's dots are part of a component
    }


@attrs.define(eq=False, kw_only=True)
class RuncLikeSim(RecordingSim):
    """Refuses a sandbox hostname in the node's UTS namespace, as containerd with runc does."""

    sandbox_configs: list[pb.PodSandboxConfig] = attrs.field(factory=list, init=False)

    async def run_pod_sandbox(self, config: pb.PodSandboxConfig, runtime_handler: str = "") -> str:
        self.sandbox_configs.append(config)
        security = config.linux.security_context if config.linux else None
        namespaces = security.namespace_options if security else None
        if namespaces is not None and namespaces.network is pb.NamespaceMode.NODE and config.hostname:
            raise cri_errors.CriCallError(
                "RunPodSandbox",
                "failed to create containerd task: OCI runtime create failed: runc create failed: "
                "unable to set hostname without a private UTS namespace",
            )
        return await super().run_pod_sandbox(config, runtime_handler)


async def test_host_network_pod_starts_on_a_runtime_that_refuses_a_hostname(
    make_env: EnvFactory, autojump_clock: MockClock
) -> None:
    env = await make_env()
    runtime = RuncLikeSim(wall_clock_start_ns=WALL_START_NS, id_seed=7)
    mgr = KubeRuntimeManager(runtime, node_name=NODE, clock=env.clock, pod_logs_dir=str(env.logs))
    host = make_pod([app()], hostNetwork=True, hostname="ignored")
    result = await mgr.sync_pod(host, await mgr.get_pod_status(host.uid, host.name, host.namespace))
    assert result.ok, result.failed
    [config] = runtime.sandbox_configs
    assert config.hostname == ""
    pod_status = await mgr.get_pod_status(host.uid, host.name, host.namespace)
    assert [(c.name, c.state.value) for c in pod_status.container_statuses] == [("app", "running")]


# --- the downward API's defaults for unset limits ---------------------------------------------------

CAPACITY = NodeAllocatable(
    milli_cpu=2000, memory=25_276_510_208, ephemeral_storage=100 * 2**30, memory_capacity=25_276_510_208
)


def test_allocatable_leaves_out_the_default_eviction_thresholds() -> None:
    """The numbers of the cluster run: MemTotal 25276510208, the Go kubelet's limits.memory default
    25171652608 (less the 100Mi memory.available threshold); nodefs.available 10 %; CPU unchanged."""
    allocatable = node_allocatable(CAPACITY)
    assert allocatable == NodeAllocatable(
        milli_cpu=2000,
        memory=25_171_652_608,
        ephemeral_storage=90 * 2**30,
        memory_capacity=25_276_510_208,
    )
    assert allocatable.oom_memory_capacity == 25_276_510_208  # OOM scores scale with the machine's memory


def test_allocatable_leaves_out_reserved_resources() -> None:
    allocatable = node_allocatable(
        CAPACITY,
        reserved=({"cpu": "100m", "memory": "1Gi"}, {"cpu": "150m", "ephemeral-storage": "1Gi"}),
        eviction_hard={"memory.available": "5%"},
    )
    assert (allocatable.milli_cpu, allocatable.memory, allocatable.ephemeral_storage) == (
        1750,
        25_276_510_208 - 2**30 - int(25_276_510_208 * 0.05),
        99 * 2**30,
    )
    assert node_allocatable(CAPACITY, reserved=({"memory": "1Ti"},)).memory == 0


def test_allocatable_matches_the_node_status() -> None:
    """The downward API default and the Node's status.allocatable come from the same rule."""
    assert dict(DEFAULT_EVICTION_HARD) == dict(nodestatus.DEFAULT_EVICTION_HARD)
    machine = nodestatus.MachineInfo(
        num_cores=2, memory_bytes=25_276_510_208, ephemeral_storage_bytes=100 * 2**30
    )
    reserved = {"cpu": "250m", "memory": "300Mi"}
    config = nodestatus.NodeStatusConfig(node_name="n", kubelet_version="v", kube_reserved=reserved)
    _, reported = nodestatus.node_resources(config, machine)
    ours = node_allocatable(CAPACITY, reserved=(reserved,))
    assert Quantity(reported["cpu"]).milli_value() == ours.milli_cpu
    assert Quantity(reported["memory"]).int_value() == ours.memory
    assert Quantity(reported["ephemeral-storage"]).int_value() == ours.ephemeral_storage


def test_limits_default_to_allocatable_in_env() -> None:
    p = make_pod(
        [
            app(
                env=[
                    {"name": "MEM", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory"}}},
                    {"name": "CPU", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}},
                    {
                        "name": "DISK",
                        "valueFrom": {
                            "resourceFieldRef": {"resource": "limits.ephemeral-storage", "divisor": "1Gi"}
                        },
                    },
                ]
            )
        ]
    )
    env = dict(make_environment_variables(p, spec_of(p), allocatable=node_allocatable(CAPACITY)))
    assert (env["MEM"], env["CPU"], env["DISK"]) == ("25171652608", "2", "90")


def test_read_node_allocatable_is_the_machine_less_the_thresholds(tmp_path: Path) -> None:
    capacity = read_node_capacity(str(tmp_path / "not" / "yet"))  # a root dir that does not exist yet
    assert capacity.memory > 0 and capacity.ephemeral_storage > 0
    assert read_node_allocatable(str(tmp_path)) == node_allocatable(capacity)
    assert read_node_allocatable(str(tmp_path)).memory == capacity.memory - 100 * 2**20
