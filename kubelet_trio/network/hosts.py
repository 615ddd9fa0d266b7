"""The kubelet-managed ``/etc/hosts`` of a pod (Go: ``kubelet_pods.go`` ``makeHostsMount`` /
``ensureHostsFile`` / ``managedHostsFileContent`` / ``GeneratePodHostNameAndDomain``).

One file per pod at ``<root>/pods/<uid>/etc-hosts``, rewritten before each container start and
bind-mounted at ``/etc/hosts`` into every container that does not mount something there itself. It
lists localhost, the pod's IPs with its hostname (and FQDN when the pod has a subdomain) and the
``hostAliases``. A host-network pod gets a copy of the node's ``/etc/hosts`` plus its ``hostAliases``
(its IPs are the node's, so the kubelet does not write entries of its own).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from kubelet_trio.api import HostAlias, Pod

__all__ = [
    "ETC_HOSTS_MOUNT_NAME",
    "ETC_HOSTS_PATH",
    "HOSTNAME_MAX_LENGTH",
    "MANAGED_HOSTS_HEADER",
    "hosts_file_content",
    "managed_hosts_file_content",
    "pod_hostname",
    "pod_hostname_and_domain",
    "write_hosts_file",
]

ETC_HOSTS_PATH = "/etc/hosts"
ETC_HOSTS_MOUNT_NAME = "k8s-managed-etc-hosts"
MANAGED_HOSTS_HEADER = "# Kubernetes-managed hosts file.\n"
MANAGED_HOSTS_HEADER_HOST_NETWORK = "# Kubernetes-managed hosts file (host network).\n"
HOSTNAME_MAX_LENGTH = 63


def pod_hostname(pod: Pod) -> str:
    """``spec.hostname`` or the pod name, cut to 63 characters without a trailing ``-``/``.``."""
    hostname = (pod.spec.hostname if pod.spec else None) or pod.name
    if len(hostname) > HOSTNAME_MAX_LENGTH:
        hostname = hostname[:HOSTNAME_MAX_LENGTH].rstrip("-.")
    return hostname


def pod_hostname_and_domain(pod: Pod, cluster_domain: str) -> tuple[str, str]:
    """``(hostname, domain)``: the hostname (``spec.hostname`` or the name, at most 63 characters) and,
    with ``spec.subdomain``, ``<subdomain>.<namespace>.svc.<cluster domain>``."""
    hostname = pod_hostname(pod)
    subdomain = pod.spec.subdomain if pod.spec else None
    domain = f"{subdomain}.{pod.namespace}.svc.{cluster_domain}" if subdomain else ""
    return hostname, domain


def _alias_entries(aliases: Sequence[HostAlias] | None) -> str:
    if not aliases:
        return ""
    lines = [f"{a.ip or ''}\t" + "\t".join(a.hostnames or ()) for a in aliases]
    return "\n# Entries added by HostAliases.\n" + "".join(line + "\n" for line in lines)


def managed_hosts_file_content(
    ips: Sequence[str], hostname: str, domain: str, aliases: Sequence[HostAlias] | None = None
) -> str:
    lines = [
        MANAGED_HOSTS_HEADER,
        "127.0.0.1\tlocalhost\n",
        "::1\tlocalhost ip6-localhost ip6-loopback\n",
        "fe00::0\tip6-localnet\n",
        "fe00::0\tip6-mcastprefix\n",
        "fe00::1\tip6-allnodes\n",
        "fe00::2\tip6-allrouters\n",
    ]
    for ip in ips:
        lines.append(f"{ip}\t{hostname}.{domain}\t{hostname}\n" if domain else f"{ip}\t{hostname}\n")
    return "".join(lines) + _alias_entries(aliases)


def hosts_file_content(pod: Pod, ips: Sequence[str], cluster_domain: str, node_hosts: str = "") -> str:
    """The pod's hosts file; for a host-network pod, ``node_hosts`` (the node's) plus the aliases."""
    aliases = pod.spec.host_aliases if pod.spec else None
    if pod.spec is not None and pod.spec.host_network:
        return MANAGED_HOSTS_HEADER_HOST_NETWORK + node_hosts + _alias_entries(aliases)
    hostname, domain = pod_hostname_and_domain(pod, cluster_domain)
    return managed_hosts_file_content(ips, hostname, domain, aliases)


def write_hosts_file(path: str, content: str) -> None:
    """Write (mode 0644) only when the content changed; in place, because running containers have the
    file's inode bind-mounted. Blocking."""
    try:
        with open(path, encoding="utf-8") as f:
            if f.read() == content:
                return
    except FileNotFoundError:
        os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(content)
    os.chmod(path, 0o644)
