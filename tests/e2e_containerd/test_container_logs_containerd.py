"""Output without a trailing newline on real containerd: containerd writes it as a ``P`` record, and the
kubelet serves it (and falls back to it for termination messages) as printed, no newline added."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from kubelet_trio.api import PodStatus
from kubelet_trio.cri.remote import open_cri_runtime
from kubelet_trio.server import read_only_app
from kubelet_trio.testing.env import LocalCriEnvironment, remove_all_pods
from kubelet_trio.testing.node import SimNode, open_node

pytestmark = pytest.mark.containerd

NODE = "partial-lines"


@pytest.fixture
async def node(cri_env: LocalCriEnvironment, tmp_path: Path) -> AsyncIterator[SimNode]:
    try:
        async with (
            open_cri_runtime(cri_env.endpoint, request_timeout=30) as runtime,
            open_node(
                runtime, NODE, pod_logs_dir=str(tmp_path / "logs"), root_dir=str(tmp_path / "root")
            ) as node,
        ):
            yield node
    finally:
        with trio.move_on_after(60, shield=True):
            await remove_all_pods(cri_env.endpoint, NODE)


def job(name: str, image: str, script: str, **container: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "app", "image": image, "command": ["sh", "-c", script], **container}],
        },
    }


def message(status: PodStatus) -> str | None:
    (container,) = status.container_statuses or ()
    assert container.state is not None and container.state.terminated is not None
    return container.state.terminated.message


async def test_printf_is_served_without_a_newline(node: SimNode, cri_env: LocalCriEnvironment) -> None:
    (pod,) = await node.apply(job("printf", cri_env.images.busybox, "echo first; printf value-1"))
    with trio.fail_after(60):
        await node.wait_for_phase(pod, "Succeeded")
    transport = httpx.ASGITransport(app=read_only_app(node.kubelet))
    async with httpx.AsyncClient(transport=transport, base_url="http://kubelet") as client:
        url = "/containerLogs/default/printf/app"
        assert (await client.get(url)).text == "first\nvalue-1"
        assert (await client.get(url, params={"tailLines": 1})).text == "value-1"
    (log,) = (Path(node.kubelet.config.pod_logs_dir) / f"default_printf_{pod.uid}" / "app").iterdir()
    assert log.read_text().endswith(" stdout P value-1\n")  # what containerd wrote


async def test_termination_message_falls_back_to_output_as_printed(
    node: SimNode, cri_env: LocalCriEnvironment
) -> None:
    fallback = {"terminationMessagePolicy": "FallbackToLogsOnError"}
    done, lines_then_done = await node.apply(
        job("done", cri_env.images.busybox, "echo -n DONE; false", **fallback),
        job("lines", cri_env.images.busybox, "echo a; echo b; printf DONE; false", **fallback),
    )
    with trio.fail_after(60):
        assert message(await node.wait_for_phase(done, "Failed")) == "DONE"
        assert message(await node.wait_for_phase(lines_then_done, "Failed")) == "a\nb\nDONE"
