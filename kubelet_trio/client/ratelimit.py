"""The API client's rate limit (client-go ``flowcontrol`` QPS/burst): the token bucket of
:mod:`kubelet_trio.flowcontrol` with the kubelet's ``kubeAPIQPS`` / ``kubeAPIBurst`` defaults."""

from __future__ import annotations

from kubelet_trio import defaults
from kubelet_trio.flowcontrol import TokenBucket

__all__ = ["DEFAULT_BURST", "DEFAULT_QPS", "TokenBucket"]

#: The kubelet's defaults (``kubeAPIQPS`` / ``kubeAPIBurst``).
DEFAULT_QPS = defaults.KUBE_API_QPS
DEFAULT_BURST = defaults.KUBE_API_BURST
