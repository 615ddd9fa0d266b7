"""The pytest plugin of ``kubelet-trio[testing]``: simulated nodes and a fake API server as fixtures.

Loaded through the ``pytest11`` entry point when the package is installed with the ``testing`` extra (or
explicitly: ``pytest -p kubelet_trio.testing.pytest_plugin``). Tests are Trio tests (pytest-trio, e.g.
``trio_mode = true``); every fixture reads Trio's clock, so with pytest-trio's ``autojump_clock`` hours
of kubelet behaviour take milliseconds::

    async def test_crash_loop(sim_node):
        node = await sim_node("node-1")
        [pod] = await node.apply(pod_manifest("web", {"app": "exit 1 after 1s"}))
        await node.wait_for(pod, lambda s: s.container_statuses[0].restart_count >= 3)

Fixtures:

- ``kubelet_clock``: the :class:`~kubelet_trio.clock.WallClock` the fixtures share (timestamps agree).
- ``sim_node``: a factory, ``await sim_node(name, **KubeletConfig fields)`` -> a running
  :class:`~kubelet_trio.testing.node.SimNode` on its own simulated runtime, stopped after the test.
- ``fake_apiserver``: a :class:`~kubelet_trio.testing.fakeapi.ServedFakeApi`: the fake API server
  in-process (``.store``, ``.client()``, ``.create_pod`` ...) and served on a loopback port (``.url``)
  with a kubeconfig file (``.kubeconfig``) for other clients.
- ``api_node``: a factory, ``await api_node(name, **KubeletConfig fields)`` -> a running
  :class:`~kubelet_trio.testing.apinode.ApiNode` joined to ``fake_apiserver``.

Marker: ``containerd`` (the test needs a real containerd; see :mod:`kubelet_trio.testing.env`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from kubelet_trio.clock import WallClock
from kubelet_trio.testing.apinode import ApiNode, open_api_node
from kubelet_trio.testing.fakeapi import ServedFakeApi, open_served_fake_api
from kubelet_trio.testing.node import SimNode, open_sim_node

__all__ = ["ApiNodeFactory", "SimNodeFactory"]

MARKERS = ("containerd: the test needs a private containerd (kubelet_trio.testing.env); a skip fails CI",)


def pytest_configure(config: pytest.Config) -> None:
    for line in MARKERS:
        config.addinivalue_line("markers", line)


@attrs.define(eq=False)
class SimNodeFactory:
    """``await factory(name, **config)``: start a node that runs until the test ends.

    Each node runs as a task of the fixture's nursery, so a node that crashes fails the test."""

    _nursery: trio.Nursery
    _clock: WallClock
    nodes: dict[str, SimNode] = attrs.Factory(dict)

    async def __call__(self, name: str = "sim-node", **config: Any) -> SimNode:
        if name in self.nodes:
            raise ValueError(f"sim_node: a node named {name!r} is already running")
        config.setdefault("clock", self._clock)
        node: SimNode = await self._nursery.start(self._run, name, config)
        self.nodes[name] = node
        return node

    async def _run(self, name: str, config: dict[str, Any], *, task_status: trio.TaskStatus[SimNode]) -> None:
        async with open_sim_node(name, **config) as node:
            task_status.started(node)
            await trio.sleep_forever()


@attrs.define(eq=False)
class ApiNodeFactory:
    """``await factory(name, **config)``: start an API-mode node joined to ``fake_apiserver``, running
    until the test ends (``options=ApiModeOptions(...)`` sets registration and reporting)."""

    _nursery: trio.Nursery
    _clock: WallClock
    api: ServedFakeApi
    nodes: dict[str, ApiNode] = attrs.Factory(dict)

    async def __call__(self, name: str = "node-1", **config: Any) -> ApiNode:
        if name in self.nodes:
            raise ValueError(f"api_node: a node named {name!r} is already running")
        config.setdefault("clock", self._clock)
        node: ApiNode = await self._nursery.start(self._run, name, config)
        self.nodes[name] = node
        return node

    async def _run(self, name: str, config: dict[str, Any], *, task_status: trio.TaskStatus[ApiNode]) -> None:
        async with open_api_node(self.api, name, **config) as node:
            task_status.started(node)
            await trio.sleep_forever()


@pytest.fixture
def kubelet_clock() -> WallClock:
    """The wall clock shared by this plugin's fixtures, anchored to Trio's clock (MockClock-friendly)."""
    return WallClock()


@pytest.fixture
async def sim_node(kubelet_clock: WallClock) -> AsyncIterator[SimNodeFactory]:
    """A factory of nodes on the simulated runtime: ``node = await sim_node("node-1")``."""
    async with trio.open_nursery() as nursery:
        yield SimNodeFactory(nursery, kubelet_clock)
        nursery.cancel_scope.cancel()


@pytest.fixture
async def fake_apiserver(kubelet_clock: WallClock, tmp_path: Path) -> AsyncIterator[ServedFakeApi]:
    """The fake API server, in-process and on a loopback port, with ``.kubeconfig`` written to tmp_path."""
    async with open_served_fake_api(tmp_path / "fake-apiserver.kubeconfig", now=kubelet_clock.now) as api:
        yield api


@pytest.fixture
async def api_node(kubelet_clock: WallClock, fake_apiserver: ServedFakeApi) -> AsyncIterator[ApiNodeFactory]:
    """A factory of API-mode nodes joined to ``fake_apiserver``: ``node = await api_node("node-1")``."""
    async with trio.open_nursery() as nursery:
        yield ApiNodeFactory(nursery, kubelet_clock, fake_apiserver)
        nursery.cancel_scope.cancel()
