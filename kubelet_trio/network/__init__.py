"""Pod networking files the kubelet manages: DNS resolver configuration and ``/etc/hosts`` (Go:
``pkg/kubelet/network/dns``, ``kubelet_pods.go`` ``ensureHostsFile``)."""

from __future__ import annotations

from kubelet_trio.network.dns import DnsConfigurer, parse_resolv_conf
from kubelet_trio.network.hosts import (
    ETC_HOSTS_PATH,
    hosts_file_content,
    managed_hosts_file_content,
    pod_hostname_and_domain,
)

__all__ = [
    "ETC_HOSTS_PATH",
    "DnsConfigurer",
    "hosts_file_content",
    "managed_hosts_file_content",
    "parse_resolv_conf",
    "pod_hostname_and_domain",
]
