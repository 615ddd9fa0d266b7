"""API-backed volumes on real containerd behind the fake API server (real clock, absolute deadlines): a
container that reads a mounted configMap file in a loop sees a PATCH of the ConfigMap within a few sync
periods; a projected service account token (with kube-root-ca.crt and the namespace) is in the container
and replaced when it nears expiry; secret and projected volumes are tmpfs mounts."""

from __future__ import annotations

import contextlib
import glob
import hashlib
import os
from pathlib import Path
from typing import Any

import pytest
import trio
import trio_util

from kubelet_trio.testing.env import LocalCriEnvironment
from tests.apiserver.harness import node_ready, open_containerd_api_node
from tests.apiserver.pod_status import running

pytestmark = pytest.mark.containerd

NODE = "ctr-objects-node"
SYNC_FREQUENCY = 2.0
READ_LOOP = 'while true; do echo "mode=$(cat /etc/cfg/mode)"; sleep 0.5; done'


def pod_log(logs_dir: str, pod: str = "reader") -> str:
    text = ""
    for path in glob.glob(os.path.join(logs_dir, f"default_{pod}_*", "app", "*.log")):
        with open(path, encoding="utf-8", errors="replace") as f:
            text += f.read()
    return text


async def wait_for_log(logs_dir: str, needle: str, pod: str = "reader") -> None:
    async with contextlib.aclosing(trio_util.periodic(0.25)) as ticks:
        async for _ in ticks:
            if needle in await trio.to_thread.run_sync(pod_log, logs_dir, pod):
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


SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
TOKEN_LOOP = (
    f"cat {SA_DIR}/namespace; echo; head -1 {SA_DIR}/ca.crt; "
    f"grep -E ' ({SA_DIR}|/etc/creds) ' /proc/mounts | cut -d' ' -f2,3; "
    f'while true; do echo "token=$(md5sum < {SA_DIR}/token | cut -d" " -f1)"; sleep 0.5; done'
)


async def test_projected_token_is_refreshed_in_a_running_container(
    cri_env: LocalCriEnvironment, tmp_path: Path
) -> None:
    with trio.fail_after(120):
        async with open_containerd_api_node(cri_env, tmp_path, NODE, sync_frequency=SYNC_FREQUENCY) as (
            api,
            _client,
            _runtime,
            node,
        ):
            await api.wait_for(lambda: node_ready(api, NODE))
            api.seed_namespace("default")
            # A server maximum of 20 s (--service-account-max-token-expiration) makes the kubelet refresh
            # within seconds instead of the 48 minutes of a default 1 h token.
            api.app.issuer.max_expiration_seconds = 20
            api.store.create("secrets", "default", {"metadata": {"name": "creds"}, "data": {"k": "dg=="}})
            api.create_pod(
                {
                    "metadata": {"name": "tokens"},
                    "spec": {
                        "nodeName": NODE,
                        "terminationGracePeriodSeconds": 1,
                        "volumes": [
                            {
                                "name": "kube-api-access",
                                "projected": {
                                    "sources": [
                                        {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}},
                                        {
                                            "configMap": {
                                                "name": "kube-root-ca.crt",
                                                "items": [{"key": "ca.crt", "path": "ca.crt"}],
                                            }
                                        },
                                        {
                                            "downwardAPI": {
                                                "items": [
                                                    {
                                                        "path": "namespace",
                                                        "fieldRef": {"fieldPath": "metadata.namespace"},
                                                    }
                                                ]
                                            }
                                        },
                                    ]
                                },
                            },
                            {"name": "creds", "secret": {"secretName": "creds"}},
                        ],
                        "containers": [
                            {
                                "name": "app",
                                "image": cri_env.images.busybox,
                                "command": ["sh", "-c", TOKEN_LOOP],
                                "volumeMounts": [
                                    {"name": "kube-api-access", "mountPath": SA_DIR, "readOnly": True},
                                    {"name": "creds", "mountPath": "/etc/creds"},
                                ],
                            }
                        ],
                    },
                }
            )
            await api.wait_for(lambda: running(api, "tokens"))
            logs_dir = node.kubelet.config.pod_logs_dir
            await api.wait_for(lambda: len(api.app.issuer.issued) >= 1)
            first = api.app.issuer.issued[0]
            assert first["spec"]["expirationSeconds"] == 20
            await wait_for_log(logs_dir, f"token={md5(first)}", "tokens")
            await api.wait_for(lambda: len(api.app.issuer.issued) >= 2)
            await wait_for_log(logs_dir, f"token={md5(api.app.issuer.issued[1])}", "tokens")

            lines = (await trio.to_thread.run_sync(pod_log, logs_dir, "tokens")).splitlines()
            output = [line.split(" ", 3)[-1] for line in lines]  # CRI log lines: time stream tag text
            assert output[:2] == ["default", "-----BEGIN CERTIFICATE-----"]
            assert sorted(output[2:4]) == ["/etc/creds tmpfs", f"{SA_DIR} tmpfs"]
            status = next(c for c in api.pod("tokens")["status"]["containerStatuses"] if c["name"] == "app")
            assert status["restartCount"] == 0


def md5(answer: dict[str, Any]) -> str:
    return hashlib.md5(answer["status"]["token"].encode()).hexdigest()
