"""The pod sandbox's DNS configuration (Go: ``pkg/kubelet/network/dns/dns.go`` ``Configurer.GetPodDNS``).

The kubelet does not write ``/etc/resolv.conf`` itself: it puts servers, search domains and options into
the CRI ``PodSandboxConfig.dns_config`` and the runtime writes the sandbox's resolv.conf, which every
container of the pod shares.

- ``Default``: the node's resolver file (``--resolv-conf``, default ``/etc/resolv.conf``); with
  ``resolv_conf=""`` the node itself (``127.0.0.1`` / ``::1``) and search ``.``.
- ``ClusterFirst`` (and ``ClusterFirstWithHostNet``): the cluster DNS servers, search
  ``<ns>.svc.<domain> svc.<domain> <domain>`` before the node's, ``ndots:5``. Without cluster DNS it
  falls back to ``Default`` (event ``MissingClusterDNS``); a host-network pod with ``ClusterFirst`` uses
  ``Default``.
- ``None``: only ``dnsConfig``.

``dnsConfig`` is appended last; then the limits: 3 nameservers, 32 search domains, each at most 253
characters, 2048 characters in all (event ``DNSConfigForming`` when something is dropped).
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Callable, Sequence

import attrs

from kubelet_trio import defaults
from kubelet_trio.api import Pod, PodDNSConfig
from kubelet_trio.cri.gen.runtime import v1 as pb
from kubelet_trio.fsio import RunSync, run_in_thread
from kubelet_trio.logs import kobj, kv

__all__ = [
    "MAX_DNS_NAMESERVERS",
    "MAX_DNS_SEARCH_LIST_CHARS",
    "MAX_DNS_SEARCH_PATHS",
    "DnsConfigurer",
    "parse_resolv_conf",
]

logger = logging.getLogger(__name__)

MAX_DNS_NAMESERVERS = 3
MAX_DNS_SEARCH_PATHS = 32
MAX_DNS_SEARCH_LIST_CHARS = 2048
DNS1123_SUBDOMAIN_MAX_LENGTH = 253
MAX_RESOLV_CONF_LENGTH = 10 * 1024 * 1024
DEFAULT_DNS_OPTIONS = ("ndots:5",)

PodEvent = Callable[[Pod, str, str, str], None]


def parse_resolv_conf(text: str) -> tuple[list[str], list[str], list[str]]:
    """``(nameservers, searches, options)``: nameservers accumulate; the last search/options line wins;
    a trailing dot on a search domain is dropped."""
    nameservers: list[str] = []
    searches: list[str] = []
    options: list[str] = []
    for line in text.split("\n"):
        trimmed = line.strip()
        if trimmed.startswith("#"):
            continue
        fields = trimmed.split()
        if not fields:
            continue
        if fields[0] == "nameserver" and len(fields) >= 2:
            nameservers.append(fields[1])
        elif fields[0] == "search":
            searches = [s.removesuffix(".") for s in fields[1:]]
        elif fields[0] == "options":
            options = fields[1:]
    return nameservers, searches, options


def _read_resolv_conf(path: str) -> str:
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read(MAX_RESOLV_CONF_LENGTH)


def _omit_duplicates(values: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(values))


def _merge_options(existing: Sequence[str], extra: PodDNSConfig) -> list[str]:
    """Options by name; ``dnsConfig.options`` override the existing ones."""
    merged: dict[str, str] = {}
    for option in existing:
        name, _, value = option.partition(":")
        merged[name] = value
    for dns_option in extra.options or ():
        merged[dns_option.name or ""] = dns_option.value or ""
    return [f"{name}:{value}" if value else name for name, value in merged.items()]


@attrs.define(eq=False, kw_only=True)
class DnsConfigurer:
    """Builds a pod's CRI ``DnsConfig``. ``events`` receives ``(pod, type, reason, message)``."""

    cluster_dns: Sequence[str] = ()
    cluster_domain: str = ""
    resolv_conf: str = defaults.RESOLV_CONF
    node_ips: Sequence[str] = ()
    events: PodEvent | None = None
    run_sync: RunSync = run_in_thread

    def _event(self, pod: Pod, reason: str, message: str) -> None:
        logger.info("pod DNS event", extra=kv(reason=reason, pod=kobj(pod), uid=pod.uid, message=message))
        if self.events is not None:
            self.events(pod, "Warning", reason, message)

    async def _host_config(self) -> tuple[list[str], list[str], list[str]]:
        if not self.resolv_conf:
            return [], [], []
        text = await self.run_sync(_read_resolv_conf, self.resolv_conf)
        return parse_resolv_conf(text)

    def _pod_dns_type(self, pod: Pod) -> str:
        spec = pod.spec
        policy = (spec.dns_policy if spec else None) or "ClusterFirst"
        if policy == "None":
            return "none"
        if policy == "ClusterFirstWithHostNet":
            return "cluster"
        if policy == "ClusterFirst":
            return "host" if spec is not None and spec.host_network else "cluster"
        if policy == "Default":
            return "host"
        logger.error("invalid DNSPolicy; using ClusterFirst", extra=kv(DNSPolicy=policy, pod=kobj(pod)))
        return "cluster"

    async def pod_dns_config(self, pod: Pod) -> pb.DnsConfig:
        """``GetPodDNS``. Raises OSError when the node's resolver file cannot be read."""
        servers, searches, options = await self._host_config()
        dns_type = self._pod_dns_type(pod)
        if dns_type == "none":
            servers, searches, options = [], [], []
        elif dns_type == "cluster" and self.cluster_dns:
            servers = [str(ipaddress.ip_address(ip)) for ip in self.cluster_dns]
            if self.cluster_domain:
                domain = self.cluster_domain
                cluster = [f"{pod.namespace}.svc.{domain}", f"svc.{domain}", domain]
                searches = _omit_duplicates([*cluster, *searches])
            options = list(DEFAULT_DNS_OPTIONS)
        else:
            if dns_type == "cluster":
                message = (
                    "kubelet does not have ClusterDNS IP configured and cannot create Pod using "
                    '"ClusterFirst" policy. Falling back to "Default" policy.'
                )
                self._event(
                    pod, "MissingClusterDNS", f'pod: "{pod.name}_{pod.namespace}({pod.uid})". {message}'
                )
            if not self.resolv_conf:
                servers = ["::1" if ":" in ip else "127.0.0.1" for ip in self.node_ips] or ["127.0.0.1"]
                searches = ["."]
        extra = pod.spec.dns_config if pod.spec else None
        if extra is not None:
            servers = _omit_duplicates([*servers, *(extra.nameservers or ())])
            searches = _omit_duplicates([*searches, *(extra.searches or ())])
            options = _merge_options(options, extra)
        return pb.DnsConfig(
            servers=self._fit_nameservers(pod, servers),
            searches=self._fit_searches(pod, searches),
            options=options,
        )

    def _fit_nameservers(self, pod: Pod, servers: list[str]) -> list[str]:
        if len(servers) > MAX_DNS_NAMESERVERS:
            servers = servers[:MAX_DNS_NAMESERVERS]
            self._event(
                pod,
                "DNSConfigForming",
                "Nameserver limits were exceeded, some nameservers have been omitted, "
                f"the applied nameserver line is: {' '.join(servers)}",
            )
        return servers

    def _fit_searches(self, pod: Pod, searches: list[str]) -> list[str]:
        exceeded = len(searches) > MAX_DNS_SEARCH_PATHS
        searches = searches[:MAX_DNS_SEARCH_PATHS]
        kept = [s for s in searches if len(s) <= DNS1123_SUBDOMAIN_MAX_LENGTH]
        exceeded = exceeded or len(kept) != len(searches)
        while kept and len(" ".join(kept)) > MAX_DNS_SEARCH_LIST_CHARS:
            kept.pop()
            exceeded = True
        if exceeded:
            self._event(
                pod,
                "DNSConfigForming",
                "Search Line limits were exceeded, some search paths have been omitted, "
                f"the applied search line is: {' '.join(kept)}",
            )
        return kept
