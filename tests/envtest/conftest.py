"""The envtest tier: a real etcd + kube-apiserver (``kubelet_trio.testing.envtest``) with in-process API-mode
nodes on SimRuntime. Skipped with a build hint when the binaries are absent, never faked; in CI with the
binaries present a skip fails the session (tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kubelet_trio.testing.envtest import EnvtestCluster, assets, skip_reason, start_envtest

__all__ = ["EnvtestCluster", "envtest"]


@pytest.fixture(scope="session")
def envtest() -> Iterator[EnvtestCluster]:
    directory = assets()
    if directory is None:
        pytest.skip(skip_reason("envtest"))
    with start_envtest(directory) as cluster:
        yield cluster
