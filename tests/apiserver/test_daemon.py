"""``kubelet-trio --kubeconfig``: the daemon in a subprocess (simulated runtime) against the fake API
server on a loopback port (real clock, absolute deadline)."""

from __future__ import annotations

import functools
import signal
import subprocess
import sys
from pathlib import Path

import trio

from kubelet_trio.testing.fakeapi import open_fake_api, serve_fake_api
from tests.apiserver.harness import write_kubeconfig
from tests.apiserver.pod_status import phase, running

NODE = "cli-node"


async def test_daemon_registers_runs_api_pods_and_stops_on_sigterm(tmp_path: Path) -> None:
    with trio.fail_after(60), (tmp_path / "kubelet.log").open("wb") as log:
        async with open_fake_api() as api, serve_fake_api(api.app) as url, trio.open_nursery() as nursery:
            api.app.token = "cli-token"
            kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", url, "cli-token")
            command = [
                sys.executable, "-m", "kubelet_trio",
                "--kubeconfig", str(kubeconfig),
                "--runtime", "sim",
                "--hostname-override", NODE,
                "--node-labels", "role=edge",
                "--node-ip", "192.0.2.77",
                "--healthz-port", "0",
                "--port", "0",
                "--root-dir", str(tmp_path / "root"),
                "--pod-logs-dir", str(tmp_path / "logs"),
            ]  # fmt: skip
            run = functools.partial(
                trio.run_process, command, check=False, stdout=log, stderr=subprocess.STDOUT
            )
            process = await nursery.start(run)
            try:
                await api.wait_for(lambda: bool(api.store.list("leases", "kube-node-lease")["items"]))
                node = api.node(NODE)
                assert node["metadata"]["labels"]["role"] == "edge"
                assert {"type": "InternalIP", "address": "192.0.2.77"} in node["status"]["addresses"]
                api.create_pod(
                    {
                        "metadata": {"name": "web"},
                        "spec": {"nodeName": NODE, "containers": [{"name": "app", "image": "sim/busybox:1"}]},
                    }
                )
                await api.wait_for(lambda: running(api, "web") and phase(api, "web") == "Running")
            finally:
                process.send_signal(signal.SIGTERM)
            with trio.fail_after(20):
                await process.wait()
            assert process.returncode == 0, (tmp_path / "kubelet.log").read_text()[-3000:]
