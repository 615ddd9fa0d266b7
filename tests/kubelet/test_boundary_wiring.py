"""The builder hands the node's boundary counter (``KubeletMetrics.boundary_errors``, exported as
``kubelet_trio_boundary_errors_total``) to what meets outside input: the pod sources, built before the
node, and the API-mode reflectors; a component given a counter of its own keeps it."""

from __future__ import annotations

from pathlib import Path

import httpx

from kubelet_trio import KubeletDeps, SimRuntime
from kubelet_trio.apimode import ApiModeOptions
from kubelet_trio.boundary import BoundaryErrors
from kubelet_trio.clock import WallClock
from kubelet_trio.config import FileSource, HttpSource
from kubelet_trio.config.podconfig import PodConfig
from kubelet_trio.config.types import API_SOURCE, FILE_SOURCE, HTTP_SOURCE
from kubelet_trio.fsio import run_inline
from kubelet_trio.kubelet_builder import build_kubelet
from kubelet_trio.testing.fakeapi import open_fake_api
from tests.apiserver.harness import MACHINE
from tests.kubelet.test_kubelet_builder import _config


async def test_the_node_counts_what_its_sources_and_reflectors_contain(tmp_path: Path) -> None:
    clock = WallClock()
    pod_config = PodConfig(sources=(FILE_SOURCE, HTTP_SOURCE, API_SOURCE), now=clock.now)
    file_source = FileSource(str(tmp_path), "node-1", pod_config.source_channel(FILE_SOURCE))
    own = BoundaryErrors()
    http_source = HttpSource(
        "http://config.example/pods",
        "node-1",
        pod_config.source_channel(HTTP_SOURCE),
        transport=httpx.MockTransport(lambda request: httpx.Response(404)),
        boundary_errors=own,
    )
    async with open_fake_api() as api, api.client() as client:
        deps = KubeletDeps(
            runtime=SimRuntime(clock=clock, run_sync=run_inline),
            pod_config=pod_config,
            sources=(file_source, http_source),
            clock=clock,
            run_sync=run_inline,
            api_client=client,
            api_options=ApiModeOptions(machine=MACHINE),
        )
        node = build_kubelet(_config(tmp_path), deps)
    counted = deps.metrics.boundary_errors
    assert file_source.boundary_errors is counted
    assert http_source.boundary_errors is own
    assert node.api is not None
    assert node.api.source.boundary_errors is counted
    assert node.api.node_informer.boundary_errors is counted
    assert client.boundary_errors is counted  # the reflectors of object and RuntimeClass caches
