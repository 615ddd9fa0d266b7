"""A Kubernetes API client on Trio: kubeconfig loading, rate limit, retries, typed errors, watches."""

from __future__ import annotations

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
