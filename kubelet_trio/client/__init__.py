"""A Kubernetes API client on Trio: kubeconfig loading, rate limit, retries, typed errors, watches."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kubelet_trio.lazy import lazy_exports

if TYPE_CHECKING:
    from kubelet_trio.client.client import (
        IDLE_CONNECTION_TIMEOUT,
        JSON,
        MERGE_PATCH,
        REQUEST_TIMEOUT,
        ApiClient,
        RetryPolicy,
        open_api_client,
    )
    from kubelet_trio.client.errors import (
        AlreadyExists,
        ApiClientError,
        ApiUnavailable,
        BadRequest,
        Conflict,
        Forbidden,
        Gone,
        Invalid,
        NotFound,
        ServerError,
        StatusError,
        TooManyRequests,
        Unauthorized,
    )
    from kubelet_trio.client.kubeconfig import KubeConfig, KubeConfigError, load_kubeconfig, make_ssl_context
    from kubelet_trio.client.merge import merge_patch_diff
    from kubelet_trio.client.ratelimit import DEFAULT_BURST, DEFAULT_QPS, TokenBucket
    from kubelet_trio.client.watch import ADDED, BOOKMARK, DELETED, ERROR, MODIFIED, WatchEvent

#: public name -> the module that defines it
_EXPORTS: dict[str, str] = {
    "IDLE_CONNECTION_TIMEOUT": "kubelet_trio.client.client",
    "JSON": "kubelet_trio.client.client",
    "MERGE_PATCH": "kubelet_trio.client.client",
    "REQUEST_TIMEOUT": "kubelet_trio.client.client",
    "ApiClient": "kubelet_trio.client.client",
    "RetryPolicy": "kubelet_trio.client.client",
    "open_api_client": "kubelet_trio.client.client",
    "AlreadyExists": "kubelet_trio.client.errors",
    "ApiClientError": "kubelet_trio.client.errors",
    "ApiUnavailable": "kubelet_trio.client.errors",
    "BadRequest": "kubelet_trio.client.errors",
    "Conflict": "kubelet_trio.client.errors",
    "Forbidden": "kubelet_trio.client.errors",
    "Gone": "kubelet_trio.client.errors",
    "Invalid": "kubelet_trio.client.errors",
    "NotFound": "kubelet_trio.client.errors",
    "ServerError": "kubelet_trio.client.errors",
    "StatusError": "kubelet_trio.client.errors",
    "TooManyRequests": "kubelet_trio.client.errors",
    "Unauthorized": "kubelet_trio.client.errors",
    "KubeConfig": "kubelet_trio.client.kubeconfig",
    "KubeConfigError": "kubelet_trio.client.kubeconfig",
    "load_kubeconfig": "kubelet_trio.client.kubeconfig",
    "make_ssl_context": "kubelet_trio.client.kubeconfig",
    "merge_patch_diff": "kubelet_trio.client.merge",
    "DEFAULT_BURST": "kubelet_trio.client.ratelimit",
    "DEFAULT_QPS": "kubelet_trio.client.ratelimit",
    "TokenBucket": "kubelet_trio.client.ratelimit",
    "ADDED": "kubelet_trio.client.watch",
    "BOOKMARK": "kubelet_trio.client.watch",
    "DELETED": "kubelet_trio.client.watch",
    "ERROR": "kubelet_trio.client.watch",
    "MODIFIED": "kubelet_trio.client.watch",
    "WatchEvent": "kubelet_trio.client.watch",
}

__all__ = [
    "ADDED",
    "BOOKMARK",
    "DEFAULT_BURST",
    "DEFAULT_QPS",
    "DELETED",
    "ERROR",
    "IDLE_CONNECTION_TIMEOUT",
    "JSON",
    "MERGE_PATCH",
    "MODIFIED",
    "REQUEST_TIMEOUT",
    "AlreadyExists",
    "ApiClient",
    "ApiClientError",
    "ApiUnavailable",
    "BadRequest",
    "Conflict",
    "Forbidden",
    "Gone",
    "Invalid",
    "KubeConfig",
    "KubeConfigError",
    "NotFound",
    "RetryPolicy",
    "ServerError",
    "StatusError",
    "TokenBucket",
    "TooManyRequests",
    "Unauthorized",
    "WatchEvent",
    "load_kubeconfig",
    "make_ssl_context",
    "merge_patch_diff",
    "open_api_client",
]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
