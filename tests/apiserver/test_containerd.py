"""Done-when scenarios on real containerd behind the fake API server, reached over a real loopback HTTP
connection through a kubeconfig (real clock, absolute deadline)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from kubelet_trio.testing.env import LocalCriEnvironment
from tests.apiserver.harness import node_ready, open_containerd_api_node
from tests.apiserver.pod_status import api_container, phase, running

pytestmark = pytest.mark.containerd

NODE = "ctr-node"
SERVE = "trap 'echo got TERM; exit 0' TERM; echo started; sleep 3600 & wait"


def manifest(name: str, image: str, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "app", "image": image, "command": ["sh", "-c", SERVE]}], **spec},
    }


async def test_node_pods_mirror_and_events_on_containerd(
    cri_env: LocalCriEnvironment, tmp_path: Path
) -> None:
    image = cri_env.images.busybox
    with trio.fail_after(180):
        async with open_containerd_api_node(cri_env, tmp_path, NODE) as (api, _client, runtime, node):
            start = trio.current_time()
            await api.wait_for(lambda: node_ready(api, NODE))
            assert api.node(NODE)["status"]["nodeInfo"]["containerRuntimeVersion"].startswith("containerd://")

            # A pod created through the API runs; its status is published.
            api.create_pod(manifest("web", image, nodeName=NODE, terminationGracePeriodSeconds=10))
            await api.wait_for(lambda: running(api, "web") and phase(api, "web") == "Running")
            status = api.pod("web")["status"]
            assert {c["type"]: c["status"] for c in status["conditions"]}["Ready"] == "True"
            app = api_container(api, "web", "app")
            assert app["containerID"].startswith("containerd://") and app["ready"] is True

            # A label patch does not restart it.
            api.store.patch("pods", "default", "web", {"metadata": {"labels": {"rev": "2"}}})
            await trio.sleep(3)
            again = api_container(api, "web", "app")
            assert again["containerID"] == app["containerID"] and again["restartCount"] == 0

            # A static pod gets a mirror pod, with the static pod's status.
            await node.set_static_pods(manifest("static-web", image))
            await api.wait_for(lambda: running(api, f"static-web-{NODE}"))
            mirror = api.pod(f"static-web-{NODE}")
            assert "kubernetes.io/config.mirror" in mirror["metadata"]["annotations"]

            # A graceful delete stops the containers, then removes the pod object.
            api.store.delete("pods", "default", "web")
            await api.wait_for(lambda: not api.has_pod("web"))
            web_id = app["containerID"].split("://", 1)[1]
            (state,) = [c.state for c in await runtime.list_containers() if c.id == web_id] or [None]
            assert state != 1  # not running (exited, or already removed)

            # Events were recorded.
            await trio.sleep(2)
            reasons = {e["reason"] for e in api.events("default") if e["involvedObject"]["name"] == "web"}
            assert {"Pulled", "Created", "Started", "Killing"} <= reasons, reasons

            # The lease was renewed at least twice within 30 s.
            await trio.sleep_until(start + 30)
            assert len(api.app.requests_for("PUT", rf"/leases/{NODE}$")) >= 2
            assert node_ready(api, NODE)
