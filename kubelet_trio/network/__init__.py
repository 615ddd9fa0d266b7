"""Pod networking files the kubelet manages: DNS resolver configuration and ``/etc/hosts`` (Go:
``pkg/kubelet/network/dns``, ``kubelet_pods.go`` ``ensureHostsFile``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kubelet_trio.lazy import lazy_exports

if TYPE_CHECKING:
    from kubelet_trio.network.dns import DnsConfigurer, parse_resolv_conf
    from kubelet_trio.network.hosts import (
        ETC_HOSTS_PATH,
        hosts_file_content,
        managed_hosts_file_content,
        pod_hostname_and_domain,
    )

#: public name -> the module that defines it
_EXPORTS: dict[str, str] = {
    "DnsConfigurer": "kubelet_trio.network.dns",
    "parse_resolv_conf": "kubelet_trio.network.dns",
    "ETC_HOSTS_PATH": "kubelet_trio.network.hosts",
    "hosts_file_content": "kubelet_trio.network.hosts",
    "managed_hosts_file_content": "kubelet_trio.network.hosts",
    "pod_hostname_and_domain": "kubelet_trio.network.hosts",
}

__all__ = [
    "ETC_HOSTS_PATH",
    "DnsConfigurer",
    "hosts_file_content",
    "managed_hosts_file_content",
    "parse_resolv_conf",
    "pod_hostname_and_domain",
]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
