"""The Kubelet's ``HostInterface`` verbs behind the streaming routes: what they cannot find is the Go
kubelet's 500, found before the runtime is asked."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
import trio.testing

from kubelet_trio.httpserver.asgi import App
from kubelet_trio.httpserver.http11 import UPGRADE_EXTENSION
from kubelet_trio.server.app import kubelet_api_app
from tests.server.harness import open_test_node, pod_manifest


async def _upgrade(app: App, path: str, query: bytes) -> tuple[int, bytes]:
    """An upgrade request straight into the ASGI app: (status, body)."""
    scope = {
        "type": "http",
        "method": "POST",
        "path": path,
        "query_string": query,
        "headers": [(b"connection", b"Upgrade"), (b"upgrade", b"SPDY/3.1")],
        "extensions": {UPGRADE_EXTENSION: {}},
    }
    sent: list[dict[str, object]] = []

    async def receive() -> dict[str, object]:
        return {"type": "http.request", "body": b""}

    async def send(message: dict[str, object]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    status, body = sent[0]["status"], b"".join(bytes(m.get("body", b"")) for m in sent[1:])  # type: ignore[call-overload]
    assert isinstance(status, int)
    return status, body


async def test_streaming_to_what_is_not_there_is_a_500(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    async with open_test_node(tmp_path, max_pods=2) as node:
        web, done, full = await node.apply(
            pod_manifest("web", {"app": "run"}),
            pod_manifest("done", {"app": "exit 0"}, restart_policy="Never"),
            pod_manifest("full", {"app": "run"}),  # OutOfpods: never gets a sandbox
        )
        await node.wait_running(web)
        await node.kubelet.wait_for_status(done.uid, lambda s: s.phase == "Succeeded")
        await node.kubelet.wait_for_status(full.uid, lambda s: s.phase == "Failed")
        app = kubelet_api_app(node.kubelet)

        exited = await _upgrade(app, "/exec/default/done/app", b"command=true&output=1")
        assert exited == (500, b'container not found ("app")\n')
        not_in_spec = await _upgrade(app, "/attach/default/web/sidecar", b"output=1")
        assert not_in_spec == (500, b'container not found ("sidecar")\n')
        no_sandbox = await _upgrade(app, "/portForward/default/full", b"")
        assert no_sandbox == (500, b'failed to find sandbox for pod "full"\n')

        with pytest.raises(LookupError, match=r'container not found \("app"\)'):
            await node.kubelet.run_in_container(done, "app", ["true"])
        [instance] = node.kubelet.container_instances(done.uid, "app")
        assert instance.id and node.kubelet.container_instances(done.uid) == [instance]


async def test_pods_carry_their_status_and_a_name_finds_the_desired_pod(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    async with open_test_node(tmp_path) as node:
        (web,) = await node.apply(pod_manifest("web", {"app": "run"}))
        await node.wait_running(web)
        [listed] = node.kubelet.pods()
        assert listed.status == node.kubelet.status_of(web.uid) and listed.status is not None
        assert listed.status.phase == "Running"
        found = node.kubelet.pod_by_name("default", "web")
        assert found is not None and found.uid == web.uid
        assert node.kubelet.pod_by_name("other", "web") is None
        [running] = await node.kubelet.running_pods()
        assert (running.uid, [c.name for c in running.containers]) == (web.uid, ["app"])
