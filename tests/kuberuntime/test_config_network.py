"""The sandbox's DNS configuration per dnsPolicy/dnsConfig and the managed /etc/hosts (Go: dns_test.go,
kubelet_pods_test.go TestManagedHostsFileContent)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kubelet_trio.api import HostAlias, Pod, default_pod
from kubelet_trio.fsio import run_inline
from kubelet_trio.network.dns import DnsConfigurer, parse_resolv_conf
from kubelet_trio.network.hosts import hosts_file_content, managed_hosts_file_content

RESOLV = """# generated
nameserver 192.0.2.53
nameserver 192.0.2.54
search corp.example. lab.example
options ndots:2 timeout:1
"""


def pod(**spec: Any) -> Pod:
    return default_pod(
        Pod.from_dict(
            {
                "metadata": {"name": "web", "namespace": "shop", "uid": "u"},
                "spec": {"containers": [{"name": "a"}], **spec},
            }
        )
    )


def configurer(tmp_path: Path, events: list[tuple[str, str]] | None = None, **kwargs: Any) -> DnsConfigurer:
    resolv = tmp_path / "resolv.conf"
    resolv.write_text(RESOLV)

    def record(pod: Pod, type_: str, reason: str, message: str) -> None:
        if events is not None:
            events.append((reason, message))

    return DnsConfigurer(resolv_conf=str(resolv), events=record, run_sync=run_inline, **kwargs)


def test_parse_resolv_conf() -> None:
    assert parse_resolv_conf(RESOLV) == (
        ["192.0.2.53", "192.0.2.54"],
        ["corp.example", "lab.example"],
        ["ndots:2", "timeout:1"],
    )


async def test_default_policy_uses_the_node_file(tmp_path: Path) -> None:
    config = await configurer(tmp_path).pod_dns_config(pod(dnsPolicy="Default"))
    assert config.servers == ["192.0.2.53", "192.0.2.54"]
    assert config.searches == ["corp.example", "lab.example"]
    assert config.options == ["ndots:2", "timeout:1"]


async def test_cluster_first(tmp_path: Path) -> None:
    dns = configurer(tmp_path, cluster_dns=("10.96.0.10",), cluster_domain="cluster.local")
    config = await dns.pod_dns_config(pod())
    assert config.servers == ["10.96.0.10"]
    assert config.searches == [
        "shop.svc.cluster.local",
        "svc.cluster.local",
        "cluster.local",
        "corp.example",
        "lab.example",
    ]
    assert config.options == ["ndots:5"]
    host_net = await dns.pod_dns_config(pod(hostNetwork=True))
    assert host_net.servers == ["192.0.2.53", "192.0.2.54"]  # ClusterFirst on the host network is Default
    with_host_net = await dns.pod_dns_config(pod(hostNetwork=True, dnsPolicy="ClusterFirstWithHostNet"))
    assert with_host_net.servers == ["10.96.0.10"]


async def test_cluster_first_without_cluster_dns_falls_back(tmp_path: Path) -> None:
    events: list[tuple[str, str]] = []
    config = await configurer(tmp_path, events).pod_dns_config(pod())
    assert config.servers == ["192.0.2.53", "192.0.2.54"]
    assert events and events[0][0] == "MissingClusterDNS"


async def test_none_policy_and_dns_config_merge(tmp_path: Path) -> None:
    dns = configurer(tmp_path)
    none = await dns.pod_dns_config(
        pod(
            dnsPolicy="None",
            dnsConfig={
                "nameservers": ["1.1.1.1"],
                "searches": ["a.example"],
                "options": [{"name": "ndots", "value": "1"}],
            },
        )
    )
    assert (none.servers, none.searches, none.options) == (["1.1.1.1"], ["a.example"], ["ndots:1"])
    merged = await dns.pod_dns_config(
        pod(
            dnsPolicy="Default",
            dnsConfig={
                "nameservers": ["192.0.2.53", "1.1.1.1"],
                "searches": ["lab.example", "b.example"],
                "options": [{"name": "ndots", "value": "3"}, {"name": "edns0"}],
            },
        )
    )
    assert merged.servers == ["192.0.2.53", "192.0.2.54", "1.1.1.1"]
    assert merged.searches == ["corp.example", "lab.example", "b.example"]
    assert merged.options == ["ndots:3", "timeout:1", "edns0"]


async def test_limits(tmp_path: Path) -> None:
    events: list[tuple[str, str]] = []
    dns = configurer(tmp_path, events)
    config = await dns.pod_dns_config(
        pod(
            dnsPolicy="None",
            dnsConfig={
                "nameservers": ["1.1.1.1", "1.0.0.1", "8.8.8.8", "8.8.4.4"],
                "searches": [f"d{i}.example" for i in range(40)] + ["x" * 254],
            },
        )
    )
    assert config.servers == ["1.1.1.1", "1.0.0.1", "8.8.8.8"]
    assert config.searches == [f"d{i}.example" for i in range(32)]
    assert [reason for reason, _ in events] == ["DNSConfigForming", "DNSConfigForming"]
    assert events[0][1].startswith("Nameserver limits were exceeded")
    long_names = await dns.pod_dns_config(
        pod(dnsPolicy="None", dnsConfig={"searches": [f"{i:02d}" + "y" * 250 for i in range(10)]})
    )
    assert len(" ".join(long_names.searches)) <= 2048 and len(long_names.searches) == 8


async def test_no_resolv_conf_means_the_node_itself(tmp_path: Path) -> None:
    dns = DnsConfigurer(resolv_conf="", node_ips=("192.0.2.10",), run_sync=run_inline)
    config = await dns.pod_dns_config(pod(dnsPolicy="Default"))
    assert (config.servers, config.searches) == (["127.0.0.1"], ["."])


def test_managed_hosts_file() -> None:
    content = managed_hosts_file_content(
        ["10.88.0.5"], "web", "", [HostAlias(ip="192.0.2.7", hostnames=("db", "db.local"))]
    )
    assert content == (
        "# Kubernetes-managed hosts file.\n"
        "127.0.0.1\tlocalhost\n"
        "::1\tlocalhost ip6-localhost ip6-loopback\n"
        "fe00::0\tip6-localnet\n"
        "fe00::0\tip6-mcastprefix\n"
        "fe00::1\tip6-allnodes\n"
        "fe00::2\tip6-allrouters\n"
        "10.88.0.5\tweb\n"
        "\n"
        "# Entries added by HostAliases.\n"
        "192.0.2.7\tdb\tdb.local\n"
    )


def test_hosts_file_hostname_and_subdomain() -> None:
    content = hosts_file_content(pod(hostname="api", subdomain="backend"), ["10.88.0.9"], "cluster.local")
    assert "10.88.0.9\tapi.backend.shop.svc.cluster.local\tapi\n" in content
    host_net = hosts_file_content(pod(hostNetwork=True), [], "", node_hosts="127.0.0.1 localhost\n")
    assert host_net == "# Kubernetes-managed hosts file (host network).\n127.0.0.1 localhost\n"
