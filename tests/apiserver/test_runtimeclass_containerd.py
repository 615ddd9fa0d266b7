"""RuntimeClass on real containerd behind the fake API server (real clock, absolute deadline): the
handler goes through CRI (containerd's ``runc`` runtime is accepted and reported on the sandbox), an
unknown handler fails with containerd's own error in a FailedCreatePodSandBox event."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from kubelet_trio.cri.gen.runtime import v1 as pb
from kubelet_trio.kuberuntime.labels import POD_UID_LABEL
from kubelet_trio.testing.env import LocalCriEnvironment
from tests.apiserver.harness import open_containerd_api_node
from tests.apiserver.pod_status import phase, running
from tests.apiserver.test_runtimeclass import sandbox_events, waiting_reason

pytestmark = pytest.mark.containerd

NODE = "ctr-rc-node"
SERVE = "trap 'exit 0' TERM; sleep 3600 & wait"


def manifest(name: str, image: str, runtime_class: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {
            "nodeName": NODE,
            "runtimeClassName": runtime_class,
            "terminationGracePeriodSeconds": 5,
            "containers": [{"name": "app", "image": image, "command": ["sh", "-c", SERVE]}],
        },
    }


async def test_runtime_handler_through_cri_on_containerd(
    cri_env: LocalCriEnvironment, tmp_path: Path
) -> None:
    image = cri_env.images.busybox
    with trio.fail_after(120):
        async with open_containerd_api_node(cri_env, tmp_path, NODE) as (api, _client, runtime, _node):
            api.create_runtime_class("native", "runc")
            api.create_runtime_class("sandboxed", "nosuchhandler")
            api.create_pod(manifest("web", image, "native"))
            api.create_pod(manifest("vm", image, "sandboxed"))

            await api.wait_for(lambda: running(api, "web") and bool(sandbox_events(api, "vm")))
            uid = api.pod("web")["metadata"]["uid"]
            (sandbox,) = await runtime.list_pod_sandbox(
                pb.PodSandboxFilter(label_selector={POD_UID_LABEL: uid})
            )
            assert sandbox.runtime_handler == "runc"
            status = (await runtime.pod_sandbox_status(sandbox.id)).status
            assert status is not None and status.runtime_handler == "runc"
            assert phase(api, "web") == "Running"

            (event,) = sandbox_events(api, "vm")
            assert event["type"] == "Warning"
            assert event["message"] == (
                "Failed to create pod sandbox: RunPodSandbox: failed to get sandbox runtime: "
                'no runtime for "nosuchhandler" is configured'
            )
            assert phase(api, "vm") == "Pending"
            assert waiting_reason(api, "vm") == "ContainerCreating"
            vm_uid = api.pod("vm")["metadata"]["uid"]
            assert (
                await runtime.list_pod_sandbox(pb.PodSandboxFilter(label_selector={POD_UID_LABEL: vm_uid}))
                == []
            )
