"""``/configz`` on the Kubelet API port of a node built with its options (the daemon's wiring)."""

from __future__ import annotations

from pathlib import Path

import trio
import trustme

from kubelet_trio.clock import WallClock
from kubelet_trio.config.podconfig import PodConfig
from kubelet_trio.configz import configz_body
from kubelet_trio.fsio import run_inline
from kubelet_trio.kubelet import KubeletConfig
from kubelet_trio.kubelet_builder import KubeletDeps, open_kubelet
from kubelet_trio.options import component_configs, load_options
from kubelet_trio.sim.runtime import SimRuntime
from tests.kubeletapi.test_kubelet_api import free_port, server_files, tls_client


async def test_configz_over_tls_is_the_daemons_configuration(tmp_path: Path) -> None:
    ca = trustme.CA()
    alice = ca.issue_cert("alice@example", common_name="alice")
    files = server_files(ca, tmp_path)
    options, _ = load_options(
        [
            "--hostname-override=node-a",
            f"--port={free_port()}",
            "--address=127.0.0.1",
            "--healthz-port=0",
            f"--root-dir={tmp_path / 'root'}",
            f"--tls-cert-file={files['tls_cert_file']}",
            f"--tls-private-key-file={files['tls_private_key_file']}",
            f"--client-ca-file={files['client_ca_file']}",
            "--max-pods=7",
            "--eviction-hard=memory.available<1Gi",
        ]
    )
    config: KubeletConfig = component_configs(options).kubelet
    clock = WallClock()
    deps = KubeletDeps(
        runtime=SimRuntime(clock=clock, run_sync=run_inline),
        pod_config=PodConfig(sources=("test",), now=clock.now),
        clock=clock,
        run_sync=run_inline,
        configz=configz_body(options),
    )
    with trio.fail_after(30):
        async with open_kubelet(config, deps) as node:
            url = node.kubelet.http_urls["api"]
            async with tls_client(ca, alice, base_url=url) as client:
                response = await client.get("/configz")
    assert response.status_code == 200
    body = response.json()
    assert body == configz_body(options)
    assert body["kubeletconfig"]["maxPods"] == 7
    assert body["kubeletconfig"]["evictionHard"] == {"memory.available": "1Gi"}
