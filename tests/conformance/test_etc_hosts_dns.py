"""The kubelet-managed /etc/hosts and the pod's DNS configuration (upstream:
test/e2e/common/node/kubelet_etc_hosts.go, kubelet.go "should write entries to /etc/hosts",
test/e2e/network/dns.go "should support configurable pod DNS nameservers")."""

from __future__ import annotations

import socket

import trio

from tests.conformance._helpers_f import gather, output_of, wait_event
from tests.conformance.conftest import Namespace, after

HOST_ALIASES = [
    {"ip": "123.45.67.89", "hostnames": ["foo", "bar"]},
    {"ip": "123.45.67.90", "hostnames": ["baz"]},
]


def resolv_conf_lines(text: str) -> set[str]:
    return {" ".join(line.split()) for line in text.splitlines() if line.strip() and not line.startswith("#")}


async def test_kubelet_managed_etc_hosts(ns: Namespace) -> None:
    """The pod's own file (localhost, its IP and hostname, hostAliases); a container that mounts
    something at /etc/hosts keeps it; a host-network pod gets the node's file under its own header."""
    own_hosts = [{"name": "host-etc-hosts", "mountPath": "/etc/hosts"}]
    managed = ns.pod(
        "managed",
        containers=[
            ns.container("managed", "cat /etc/hosts; echo hostname=$(hostname)"),
            ns.container("own-mount", "cat /etc/hosts", volumeMounts=own_hosts),
        ],
        volumes=[{"name": "host-etc-hosts", "hostPath": {"path": "/etc/hosts", "type": "File"}}],
        hostname="myhost",
        hostAliases=HOST_ALIASES,
    )
    host_network = ns.pod(
        "host-network",
        containers=[ns.container("c", "cat /etc/hosts; echo hostname=$(hostname)")],
        hostNetwork=True,
        hostAliases=HOST_ALIASES[:1],
    )
    deadline = after(90)
    await gather(
        lambda: output_of(ns, managed, deadline=deadline),
        lambda: output_of(ns, host_network, deadline=deadline),
    )
    pod = await ns.get_pod("managed")
    assert await ns.logs("managed", "managed") == (
        "# Kubernetes-managed hosts file.\n"
        "127.0.0.1\tlocalhost\n"
        "::1\tlocalhost ip6-localhost ip6-loopback\n"
        "fe00::0\tip6-localnet\n"
        "fe00::0\tip6-mcastprefix\n"
        "fe00::1\tip6-allnodes\n"
        "fe00::2\tip6-allrouters\n"
        f"{pod['status']['podIP']}\tmyhost\n"
        "\n"
        "# Entries added by HostAliases.\n"
        "123.45.67.89\tfoo\tbar\n"
        "123.45.67.90\tbaz\n"
        "hostname=myhost\n"
    )
    node_hosts = await trio.Path("/etc/hosts").read_text()
    assert await ns.logs("managed", "own-mount") == node_hosts
    assert await ns.logs("host-network", "c") == (
        "# Kubernetes-managed hosts file (host network).\n"
        + node_hosts
        + "\n# Entries added by HostAliases.\n123.45.67.89\tfoo\tbar\n"
        + f"hostname={socket.gethostname()}\n"
    )


async def test_dns_policies(ns: Namespace) -> None:
    """None: only dnsConfig. Default: the node's resolv.conf. ClusterFirst on a node without cluster
    DNS: Default, with a MissingClusterDNS event."""
    dns_config = {
        "nameservers": ["1.1.1.1"],
        "searches": ["resolv.conf.local"],
        "options": [{"name": "ndots", "value": "2"}, {"name": "edns0"}],
    }
    show = "cat /etc/resolv.conf"
    deadline = after(90)
    none, default, cluster_first = await gather(
        lambda: output_of(
            ns,
            ns.pod("none", containers=[ns.container("c", show)], dnsPolicy="None", dnsConfig=dns_config),
            deadline=deadline,
        ),
        lambda: output_of(
            ns,
            ns.pod("default", containers=[ns.container("c", show)], dnsPolicy="Default"),
            deadline=deadline,
        ),
        lambda: output_of(
            ns,
            ns.pod("cluster-first", containers=[ns.container("c", show)], dnsPolicy="ClusterFirst"),
            deadline=deadline,
        ),
    )
    assert resolv_conf_lines(none) == {
        "search resolv.conf.local",
        "nameserver 1.1.1.1",
        "options ndots:2 edns0",
    }
    node = resolv_conf_lines(await trio.Path("/etc/resolv.conf").read_text())
    node_servers = {line for line in node if line.startswith("nameserver ")}
    assert {line for line in resolv_conf_lines(default) if line.startswith("nameserver ")} == node_servers
    assert resolv_conf_lines(cluster_first) == resolv_conf_lines(default)
    event = await wait_event(ns, "cluster-first", "MissingClusterDNS", deadline=deadline)
    uid = (await ns.get_pod("cluster-first"))["metadata"]["uid"]
    assert (event["type"], event["message"]) == (
        "Warning",
        f'pod: "cluster-first_{ns.name}({uid})". kubelet does not have ClusterDNS IP configured and cannot '
        'create Pod using "ClusterFirst" policy. Falling back to "Default" policy.',
    )
