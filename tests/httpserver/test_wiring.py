"""The node's servers (healthz, read-only, Kubelet API over TLS) count a failed connection in the node's
``boundary_errors``, which ``/metrics`` exports."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
import trustme

from tests.kubeletapi.test_kubelet_api import api_node, free_port, server_files, tls_client


async def broken_app(scope: Any, receive: Any, send: Any) -> None:
    if scope["type"] == "http":
        raise LookupError("a handler bug")


async def test_every_port_counts_its_failures_for_the_node(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for target in (
        "kubelet_trio.server.serve.healthz_app",
        "kubelet_trio.server.app.read_only_app",
        "kubelet_trio.server.app.kubelet_api_app",
    ):
        monkeypatch.setattr(target, lambda *args, **kwargs: broken_app)
    ca = trustme.CA()
    alice = ca.issue_cert("alice@example", common_name="alice", organization_name="ops")
    config = {"healthz_port": free_port(), "read_only_port": free_port(), **server_files(ca, tmp_path)}
    with trio.fail_after(30):
        async with api_node(tmp_path, **config) as (node, api_url):
            urls = node.kubelet.http_urls
            async with httpx.AsyncClient(timeout=10) as client:
                assert (await client.get(urls["healthz"] + "/healthz")).status_code == 500
                assert (await client.get(urls["readonly"] + "/pods")).status_code == 500
            async with tls_client(ca, alice, base_url=api_url) as client:
                assert (await client.get("/pods")).status_code == 500
                assert (await client.get("/pods")).status_code == 500  # a new connection each time
            assert node.kubelet.metrics.boundary_errors.counts == {"http": 4}
            assert b'kubelet_trio_boundary_errors_total{boundary="http"} 4.0' in node.kubelet.metrics.render()
