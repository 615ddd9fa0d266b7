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

from kubelet_trio.testing.env import LocalCriEnvironment
from tests.apiserver.harness import node_ready, open_containerd_api_node
from tests.apiserver.test_pods import running

pytestmark = pytest.mark.containerd

NODE = "ctr-objects-node"
SYNC_FREQUENCY = 2.0
READ_LOOP = 'while true; do echo "mode=$(cat /etc/cfg/mode)"; sleep 0.5; done'


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
    with trio.fail_after(120):
        async with open_containerd_api_node(cri_env, tmp_path, NODE, sync_frequency=SYNC_FREQUENCY) as (
            api,
            client,
            _runtime,
            node,
        ):
            await api.wait_for(lambda: node_ready(api, NODE))
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
