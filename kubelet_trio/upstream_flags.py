"""The Go kubelet's flag names, to tell a flag this kubelet does not implement from a typing mistake.

Taken from ``cmd/kubelet/app/options/options.go`` (``KubeletFlags.AddFlags`` and
``AddKubeletConfigFlags``), ``cmd/kubelet/app/options/globalflags*.go``, ``pkg/kubelet/config/flags.go``
and ``component-base/logs`` (the logging flags), plus flags removed in earlier releases that deployment
tools still pass (dockershim's, klog's). A flag named here but not declared in
:mod:`kubelet_trio.options` is refused with a message naming it as an upstream flag not supported here.
"""

from __future__ import annotations

__all__ = ["REMOVED_IN", "UPSTREAM_FLAGS", "unsupported_message"]

_CURRENT = """
address allowed-unsafe-sysctls anonymous-auth authentication-token-webhook
authentication-token-webhook-cache-ttl authorization-mode authorization-webhook-cache-authorized-ttl
authorization-webhook-cache-unauthorized-ttl bootstrap-kubeconfig cert-dir cgroup-driver cgroup-root
cgroups-per-qos client-ca-file cloud-config cloud-provider cluster-dns cluster-domain config config-dir
container-log-max-files container-log-max-size container-runtime-endpoint containerd containerd-namespace
contention-profiling cpu-cfs-quota cpu-cfs-quota-period cpu-manager-policy cpu-manager-policy-options
cpu-manager-reconcile-period enable-controller-attach-detach enable-debugging-handlers enable-server
enforce-node-allocatable event-burst event-qps eviction-hard eviction-max-pod-grace-period
eviction-minimum-reclaim eviction-pressure-transition-period eviction-soft eviction-soft-grace-period
exit-on-lock-contention fail-swap-on feature-gates file-check-frequency hairpin-mode healthz-bind-address
healthz-port help hostname-override http-check-frequency image-credential-provider-bin-dir
image-credential-provider-config image-gc-high-threshold image-gc-low-threshold image-service-endpoint
iptables-drop-bit iptables-masquerade-bit kernel-memcg-notification kube-api-burst kube-api-content-type
kube-api-qps kube-reserved kube-reserved-cgroup kubeconfig kubelet-cgroups local-storage-capacity-isolation
lock-file log-flush-frequency log-json-info-buffer-size log-json-split-stream log-text-info-buffer-size
log-text-split-stream logging-format make-iptables-util-chains manifest-url manifest-url-header max-open-files
max-pods maximum-dead-containers maximum-dead-containers-per-container memory-manager-policy
minimum-container-ttl-duration minimum-image-ttl-duration node-ip node-labels node-status-max-images
node-status-update-frequency oom-score-adj pod-cidr pod-infra-container-image pod-manifest-path
pod-max-pids pods-per-core port protect-kernel-defaults provider-id qos-reserved read-only-port
register-node register-with-taints registry-burst registry-qps reserved-cpus reserved-memory resolv-conf
root-dir rotate-certificates rotate-server-certificates runonce runtime-cgroups runtime-request-timeout
seccomp-default serialize-image-pulls streaming-connection-idle-timeout sync-frequency system-cgroups
system-reserved system-reserved-cgroup tls-cert-file tls-cipher-suites tls-min-version tls-private-key-file
topology-manager-policy topology-manager-policy-options topology-manager-scope v version volume-plugin-dir
volume-stats-agg-period vmodule
"""

#: Flags the Go kubelet had and removed, and the release that removed them (tools still pass them).
REMOVED_IN: dict[str, str] = {
    **dict.fromkeys(
        (
            "network-plugin",
            "network-plugin-mtu",
            "cni-conf-dir",
            "cni-bin-dir",
            "cni-cache-dir",
            "docker-endpoint",
            "image-pull-progress-deadline",
            "experimental-dockershim-root-directory",
            "non-masquerade-cidr",
            "dynamic-config-dir",
        ),
        "1.24",
    ),
    **dict.fromkeys(
        (
            "log-dir",
            "log-file",
            "log-file-max-size",
            "logtostderr",
            "alsologtostderr",
            "one-output",
            "stderrthreshold",
            "skip-headers",
            "skip-log-headers",
            "add-dir-header",
            "log-backtrace-at",
        ),
        "1.26",
    ),
    "container-runtime": "1.27",
    **dict.fromkeys(
        (
            "master-service-namespace",
            "register-schedulable",
            "keep-terminated-pod-volumes",
            "experimental-mounter-path",
            "experimental-allocatable-ignore-eviction",
            "experimental-kernel-memcg-notification",
            "azure-container-registry-config",
        ),
        "",
    ),
}

UPSTREAM_FLAGS: frozenset[str] = frozenset(_CURRENT.split()) | frozenset(REMOVED_IN)


def unsupported_message(name: str) -> str | None:
    """The error for ``--name`` when it is an upstream flag this kubelet does not declare, else None."""
    if name not in UPSTREAM_FLAGS:
        return None
    message = f"flag --{name} is an upstream kubelet flag not supported by kubelet-trio"
    removed = REMOVED_IN.get(name)
    if removed is not None:
        message += (
            f" (removed from the Go kubelet in {removed})" if removed else " (removed from the Go kubelet)"
        )
    return message
