"""Pod sysctls at admission (Go: pkg/kubelet/sysctl): the safe ones always, unsafe ones only when the node
allows them, none that would change the host's namespaces; ``--allowed-unsafe-sysctls``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from kubelet_trio.api import Pod, PodSecurityContext, PodSpec, Sysctl
from kubelet_trio.kubelet import Kubelet
from kubelet_trio.options import OptionsError, load_options
from kubelet_trio.sysctl import (
    SYSCTL_FORBIDDEN,
    SysctlAllowlist,
    SysctlNamespace,
    namespaced_by,
    safe_sysctls,
)
from kubelet_trio.testing.node import open_sim_node
from kubelet_trio.testing.pods import is_running, pod_manifest


def pod(*sysctls: str, **spec: Any) -> Pod:
    context = PodSecurityContext(sysctls=tuple(Sysctl(name=name, value="1") for name in sysctls))
    return Pod(spec=PodSpec(security_context=context, **spec))


def test_safe_sysctls_follow_the_kernel() -> None:
    assert "net.ipv4.tcp_rmem" in safe_sysctls("6.1.0-13-amd64")
    old = safe_sysctls("4.4.0")
    assert "net.ipv4.tcp_rmem" not in old and "net.ipv4.ip_local_reserved_ports" in old
    assert "net.ipv4.ip_local_reserved_ports" not in safe_sysctls("3.10.0-1160.el7.x86_64")
    assert "kernel.shm_rmid_forced" in safe_sysctls("3.10.0") and "kernel.shm_rmid_forced" in safe_sysctls("")


def test_namespaces() -> None:
    assert namespaced_by("kernel.sem") is SysctlNamespace.IPC
    assert namespaced_by("kernel.msgmax") is SysctlNamespace.IPC
    assert namespaced_by("fs.mqueue.msg_max") is SysctlNamespace.IPC
    assert namespaced_by("net.core.somaxconn") is SysctlNamespace.NET
    assert namespaced_by("kernel.panic") is None and namespaced_by("vm.swappiness") is None


def test_admission() -> None:
    default = SysctlAllowlist.build(kernel_release="6.1.0")
    assert default.admit(pod("kernel.shm_rmid_forced", "net/ipv4/ip_local_port_range")) is None
    assert default.admit(Pod(spec=PodSpec())) is None
    rejected = default.admit(pod("kernel.shm_rmid_forced", "kernel.msgmax"))
    assert rejected is not None
    assert (rejected.reason, rejected.message) == (
        SYSCTL_FORBIDDEN,
        'forbidden sysctl: "kernel.msgmax" not allowlisted',
    )
    # A network sysctl would change the node's own settings in a host-network pod; IPC ones likewise.
    host_net = default.admit(pod("net.ipv4.tcp_syncookies", host_network=True))
    assert host_net is not None
    assert host_net.message == 'forbidden sysctl: "net.ipv4.tcp_syncookies" not allowed with host net enabled'
    host_ipc = default.admit(pod("kernel.shm_rmid_forced", host_ipc=True))
    assert host_ipc is not None and host_ipc.message.endswith("not allowed with host ipc enabled")

    unsafe = SysctlAllowlist.build(["kernel.msg*", "net/core/somaxconn"], kernel_release="6.1.0")
    assert unsafe.admit(pod("kernel.msgmax", "kernel.msgmnb", "net.core.somaxconn")) is None
    assert unsafe.admit(pod("kernel.sem")) is not None


@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        ("vm.swappiness", "sysctl 'vm.swappiness' is not known to be namespaced"),
        ("kernel.*", "sysctl 'kernel.*' is not known to be namespaced"),
        ("Net.Core", "sysctl 'Net.Core' must have at most 253 characters"),
        ("net..core", "sysctl 'net..core' must have at most 253 characters"),
    ],
)
def test_bad_unsafe_patterns(pattern: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SysctlAllowlist.build([pattern])


def test_allowed_unsafe_sysctls_setting(tmp_path: Path) -> None:
    options, _ = load_options(["--allowed-unsafe-sysctls", "kernel.msg*,net.core.somaxconn"])
    assert options.allowed_unsafe_sysctls == ("kernel.msg*", "net.core.somaxconn")
    config = tmp_path / "kubelet.yaml"
    config.write_text(
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
        "allowedUnsafeSysctls: [kernel.sem]\n"
    )
    options, _ = load_options(["--config", str(config)])
    assert options.allowed_unsafe_sysctls == ("kernel.sem",)
    with pytest.raises(OptionsError, match=r"--allowed-unsafe-sysctls.*'vm\.swappiness' is not known"):
        load_options(["--allowed-unsafe-sysctls", "vm.swappiness"])
    config.write_text(
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
        "allowedUnsafeSysctls: kernel.sem\n"
    )
    with pytest.raises(OptionsError, match="allowedUnsafeSysctls"):
        load_options(["--config", str(config)])


async def test_unsafe_sysctl_pod_is_rejected_and_never_started(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_sim_node() as node:
        unsafe = pod_manifest("unsafe", {"app": "run"}, restart_policy="Never")
        unsafe["spec"]["securityContext"] = {"sysctls": [{"name": "kernel.msgmax", "value": "65536"}]}
        safe = pod_manifest("safe", {"app": "run"})
        safe["spec"]["securityContext"] = {"sysctls": [{"name": "kernel.shm_rmid_forced", "value": "1"}]}
        rejected, accepted = await node.apply(unsafe, safe)
        status = await node.wait_for_phase(rejected, "Failed")
        assert (status.reason, status.message) == (
            SYSCTL_FORBIDDEN,
            'Pod was rejected: forbidden sysctl: "kernel.msgmax" not allowlisted',
        )
        await node.wait_for(accepted, lambda s: is_running(s, "app"))
        await trio.sleep(5)
        names = {c.labels.get("io.kubernetes.pod.name") for c in await node.sim.list_containers()}
        assert names == {"safe"}


async def test_allowed_unsafe_sysctl_runs(autojump_clock: trio.testing.MockClock) -> None:
    async with open_sim_node(allowed_unsafe_sysctls=("kernel.msg*",)) as node:
        assert isinstance(node.kubelet, Kubelet)
        manifest = pod_manifest("tuned", {"app": "run"})
        manifest["spec"]["securityContext"] = {"sysctls": [{"name": "kernel.msgmax", "value": "65536"}]}
        (tuned,) = await node.apply(manifest)
        await node.wait_for(tuned, lambda s: is_running(s, "app"))
