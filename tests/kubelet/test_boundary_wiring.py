"""What meets outside input counts what it contains on the node's boundary counter
(``KubeletMetrics.boundary_errors``, exported as ``kubelet_trio_boundary_errors_total``): the daemon hands
it to the pod sources and the runtime it builds, the builder to the API client and its reflectors."""

from __future__ import annotations

from pathlib import Path

from kubelet_trio import KubeletDeps, SimRuntime
from kubelet_trio.apimode import ApiModeOptions
from kubelet_trio.boundary import BoundaryErrors
from kubelet_trio.clock import WallClock
from kubelet_trio.cmd.kubelet import build_sources
from kubelet_trio.config import FileSource, HttpSource
from kubelet_trio.config.podconfig import PodConfig
from kubelet_trio.config.types import API_SOURCE
from kubelet_trio.fsio import run_inline
from kubelet_trio.kubelet_builder import build_kubelet
from kubelet_trio.options import component_configs, load_options
from kubelet_trio.testing.fakeapi import open_fake_api
from tests.apiserver.harness import MACHINE
from tests.kubelet.test_kubelet_builder import _config


async def test_the_node_counts_what_its_reflectors_contain(tmp_path: Path) -> None:
    clock = WallClock()
    pod_config = PodConfig(sources=(API_SOURCE,), now=clock.now)
    async with open_fake_api() as api, api.client() as client:
        deps = KubeletDeps(
            runtime=SimRuntime(clock=clock, run_sync=run_inline),
            pod_config=pod_config,
            clock=clock,
            run_sync=run_inline,
            api_client=client,
            api_options=ApiModeOptions(machine=MACHINE),
        )
        node = build_kubelet(_config(tmp_path), deps)
    counted = deps.metrics.boundary_errors
    assert node.api is not None
    assert node.api.source.boundary_errors is counted
    assert node.api.node_informer.boundary_errors is counted
    assert client.boundary_errors is counted  # the reflectors of object and RuntimeClass caches


def test_the_daemon_hands_its_sources_the_counter(tmp_path: Path) -> None:
    options, _ = load_options(
        ["--pod-manifest-path", str(tmp_path), "--manifest-url", "http://config.example/pods"]
    )
    counted = BoundaryErrors()
    _, sources = build_sources(component_configs(options).sources, counted)
    assert [type(source) for source in sources] == [FileSource, HttpSource]
    assert all(source.boundary_errors is counted for source in sources)
