"""Pod sandbox config and the "must the sandbox be recreated" rule (Go: ``kuberuntime_sandbox.go``,
``kuberuntime/util/util.go``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kubelet_trio.cri.gen.runtime import v1 as pb
from kubelet_trio.kuberuntime.labels import pod_annotations, pod_labels
from kubelet_trio.kuberuntime.logs import pod_logs_directory
from kubelet_trio.network.hosts import pod_hostname

if TYPE_CHECKING:
    from kubelet_trio.api import Container, Pod
    from kubelet_trio.container.types import PodStatus

__all__ = [
    "generate_pod_sandbox_config",
    "is_host_network_pod",
    "namespaces_for_pod",
    "pod_sandbox_changed",
    "pod_sysctls",
    "port_mappings",
    "sysctl_dotted_name",
]

_PROTOCOLS = {"TCP": pb.Protocol.TCP, "UDP": pb.Protocol.UDP, "SCTP": pb.Protocol.SCTP}


def is_host_network_pod(pod: Pod) -> bool:
    return bool(pod.spec and pod.spec.host_network)


def namespaces_for_pod(pod: Pod) -> pb.NamespaceOption:
    """``NamespacesForPod``: network/IPC NODE or POD; PID NODE, POD (shareProcessNamespace) or CONTAINER."""
    spec = pod.spec
    host_network = bool(spec and spec.host_network)
    host_ipc = bool(spec and spec.host_ipc)
    host_pid = bool(spec and spec.host_pid)
    if host_pid:
        pid = pb.NamespaceMode.NODE
    elif spec is not None and spec.share_process_namespace:
        pid = pb.NamespaceMode.POD
    else:
        pid = pb.NamespaceMode.CONTAINER
    return pb.NamespaceOption(
        network=pb.NamespaceMode.NODE if host_network else pb.NamespaceMode.POD,
        ipc=pb.NamespaceMode.NODE if host_ipc else pb.NamespaceMode.POD,
        pid=pid,
    )


def _container_port_mappings(container: Container) -> list[pb.PortMapping]:
    """``MakePortMappings``: every declared port, de-duplicated by generated port name."""
    mappings: list[pb.PortMapping] = []
    names: set[str] = set()
    for port in container.ports or ():
        protocol = port.protocol or "TCP"
        family = "IPv6" if port.host_ip and ":" in port.host_ip else "IPv4"
        name = (
            f"{container.name}-{port.name}"
            if port.name
            else f"{container.name}-{family}-{protocol}:{port.container_port or 0}"
        )
        if name in names:
            continue
        names.add(name)
        mappings.append(
            pb.PortMapping(
                protocol=_PROTOCOLS.get(protocol, pb.Protocol.TCP),
                container_port=port.container_port or 0,
                host_port=port.host_port or 0,
                host_ip=port.host_ip or "",
            )
        )
    return mappings


def port_mappings(pod: Pod) -> list[pb.PortMapping]:
    return [m for c in (pod.spec.containers if pod.spec else None) or () for m in _container_port_mappings(c)]


def sysctl_dotted_name(name: str) -> str:
    """A sysctl name with ``/`` separators (``kernel/shm_rmid_forced``) in the ``.`` form the runtime
    expects; dots inside a component of a slashed name become slashes (``net/ipv4/conf/eth0.100/x`` →
    ``net.ipv4.conf.eth0/100.x``). Names that start with a dot-separated component are kept."""
    first = next((ch for ch in name if ch in "./"), ".")
    if first == ".":
        return name
    return name.translate(str.maketrans("./", "/."))


def pod_sysctls(pod: Pod) -> dict[str, str]:
    """``securityContext.sysctls`` as the sandbox's ``LinuxPodSandboxConfig.sysctls`` (the runtime sets
    them in the pod's namespaces; the API server has already checked they are namespaced and allowed)."""
    sc = pod.spec.security_context if pod.spec else None
    return {sysctl_dotted_name(s.name or ""): s.value or "" for s in (sc.sysctls if sc else None) or ()}


def generate_pod_sandbox_config(
    pod: Pod,
    attempt: int,
    *,
    node_name: str,
    pod_logs_dir: str,
    cgroup_parent: str = "",
) -> pb.PodSandboxConfig:
    """The CRI ``PodSandboxConfig`` for ``attempt`` of ``pod``.

    ``cgroup_parent`` is the pod cgroup the container manager made (its literal path under the cgroup
    driver); "" leaves the pod in the runtime's default cgroup.

    A host-network pod gets no hostname: it shares the node's UTS namespace, where a runtime cannot set
    one (runc: "unable to set hostname without a private UTS namespace"). DNS config is added by the
    caller.
    """
    host_network = is_host_network_pod(pod)
    return pb.PodSandboxConfig(
        metadata=pb.PodSandboxMetadata(name=pod.name, namespace=pod.namespace, uid=pod.uid, attempt=attempt),
        hostname="" if host_network else pod_hostname(pod),
        log_directory=pod_logs_directory(pod_logs_dir, pod.namespace, pod.name, pod.uid),
        port_mappings=port_mappings(pod),
        labels=pod_labels(pod, node_name),
        annotations=pod_annotations(pod),
        linux=pb.LinuxPodSandboxConfig(
            cgroup_parent=cgroup_parent,
            security_context=pb.LinuxSandboxSecurityContext(
                namespace_options=namespaces_for_pod(pod),
                privileged=_has_privileged_container(pod),
            ),
            sysctls=pod_sysctls(pod),
        ),
    )


def _has_privileged_container(pod: Pod) -> bool:
    containers = pod.spec.all_containers() if pod.spec else ()
    return any(c.security_context is not None and c.security_context.privileged for c in containers)


def pod_sandbox_changed(pod: Pod, status: PodStatus) -> tuple[bool, int, str]:
    """``PodSandboxChanged`` → ``(changed, attempt, sandbox_id)`` from the newest sandbox.

    - no sandbox → ``(True, 0, "")``;
    - more than one ready sandbox, or the newest not ready → ``(True, attempt + 1, newest id)``;
    - network mode differs from ``hostNetwork`` → ``(True, attempt + 1, "")``;
    - not host network and no IP → ``(True, attempt + 1, newest id)``;
    - else ``(False, attempt, newest id)``.
    """
    sandboxes = status.sandbox_statuses
    if not sandboxes:
        return True, 0, ""
    newest = sandboxes[0]
    ready = sum(1 for s in sandboxes if s.ready)
    if ready > 1 or not newest.ready:
        return True, newest.attempt + 1, newest.id
    host_network = is_host_network_pod(pod)
    if newest.host_network != host_network:
        return True, newest.attempt + 1, ""
    if not host_network and not newest.ip:
        return True, newest.attempt + 1, newest.id
    return False, newest.attempt, newest.id
