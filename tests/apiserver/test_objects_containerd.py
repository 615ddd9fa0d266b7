"""A configMap volume on real containerd behind the fake API server (real clock, absolute deadline): a
container that reads the mounted file in a loop sees a PATCH of the ConfigMap within a few sync periods."""

from __future__ import annotations

import contextlib
import glob
import os
from pathlib import Path

import pytest
import trio
import trio_util

from kubelet_trio.apimode import ApiModeOptions, open_kubeconfig_client
from kubelet_trio.cri.remote import open_cri_runtime
from kubelet_trio.fsio import run_in_thread
from kubelet_trio.testing.env import LocalCriEnvironment, remove_all_pods
from tests.apiserver.harness import MACHINE, open_api_node
from tests.apiserver.test_containerd import write_kubeconfig
from tests.apiserver.test_pods import running
from tests.fakeapi import FakeApi, open_fake_api, serve_fake_api

pytestmark = pytest.mark.containerd

NODE = "ctr-objects-node"
SYNC_FREQUENCY = 2.0
READ_LOOP = 'while true; do echo "mode=$(cat /etc/cfg/mode)"; sleep 0.5; done'


def node_ready(api: FakeApi) -> bool:
    try:
        conditions = api.node(NODE)["status"]["conditions"]
    except Exception:
        return False
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def pod_log(logs_dir: str) -> str:
    text = ""
    for path in glob.glob(os.path.join(logs_dir, "default_reader_*", "app", "*.log")):
        with open(path, encoding="utf-8", errors="replace") as f:
            text += f.read()
    return text


async def wait_for_log(logs_dir: str, needle: str) -> None:
    async with contextlib.aclosing(trio_util.periodic(0.25)) as ticks:
        async for _ in ticks:
            if needle in await trio.to_thread.run_sync(pod_log, logs_dir):
                return


async def test_config_map_volume_update_reaches_a_running_container(
    cri_env: LocalCriEnvironment, tmp_path: Path
) -> None:
    image = cri_env.images.busybox
    try:
        with trio.fail_after(120):
            async with open_fake_api() as api, serve_fake_api(api.app) as url:
                api.app.token = "node-token"
                kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", url, "node-token")
                async with (
                    open_kubeconfig_client(str(kubeconfig)) as client,
                    open_cri_runtime(cri_env.endpoint, request_timeout=30) as runtime,
                    open_api_node(
                        api,
                        NODE,
                        sim=runtime,
                        client=client,
                        run_sync=run_in_thread,
                        options=ApiModeOptions(machine=MACHINE),
                        sync_frequency=SYNC_FREQUENCY,
                    ) as node,
                ):
                    await api.wait_for(lambda: node_ready(api))
                    api.store.create(
                        "configmaps", "default", {"metadata": {"name": "settings"}, "data": {"mode": "fast"}}
                    )
                    api.create_pod(
                        {
                            "metadata": {"name": "reader"},
                            "spec": {
                                "nodeName": NODE,
                                "terminationGracePeriodSeconds": 1,
                                "volumes": [{"name": "cfg", "configMap": {"name": "settings"}}],
                                "containers": [
                                    {
                                        "name": "app",
                                        "image": image,
                                        "command": ["sh", "-c", READ_LOOP],
                                        "volumeMounts": [{"name": "cfg", "mountPath": "/etc/cfg"}],
                                    }
                                ],
                            },
                        }
                    )
                    await api.wait_for(lambda: running(api, "reader"))
                    logs_dir = node.kubelet.config.pod_logs_dir
                    await wait_for_log(logs_dir, "mode=fast")

                    await client.merge_patch(
                        "/api/v1/namespaces/default/configmaps/settings", {"data": {"mode": "slow"}}
                    )
                    patched_at = trio.current_time()
                    await wait_for_log(logs_dir, "mode=slow")
                    # The cache TTL (the sync frequency) plus the next resync, with slack for a real node.
                    assert trio.current_time() - patched_at < 4 * SYNC_FREQUENCY + 5
    finally:
        with trio.move_on_after(60, shield=True):
            await remove_all_pods(cri_env.endpoint)
