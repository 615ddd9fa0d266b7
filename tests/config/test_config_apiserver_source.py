"""The API-server pod source hands PodConfig the pods without the server's field-ownership records."""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

from kubelet_trio.api import Pod
from kubelet_trio.api.pod import CONFIG_MIRROR_ANNOTATION
from kubelet_trio.clock import WallClock
from kubelet_trio.config.apiserver import ApiserverSource
from kubelet_trio.config.types import SourceSet
from kubelet_trio.testing.fakeapi import open_fake_api
from tests.apiserver.harness import pod_manifest

MANAGED = [{"manager": "kubectl", "operation": "Update", "apiVersion": "v1", "fieldsV1": {"f:spec": {}}}]


async def test_pods_arrive_without_managed_fields(autojump_clock: trio.testing.MockClock) -> None:
    clock = WallClock()
    async with open_fake_api(now=clock.now) as api, api.client() as client:
        manifest = pod_manifest("web", {"app": "run"})
        manifest["metadata"]["managedFields"] = MANAGED
        manifest["metadata"]["annotations"] = {"keep": "me"}
        api.create_pod(manifest)
        assert api.pod("web")["metadata"]["managedFields"] == MANAGED
        send, receive = trio.open_memory_channel[SourceSet](10)
        source = ApiserverSource(client, "node-1", send)
        async with trio.open_nursery() as nursery:
            await nursery.start(source.run)
            with trio.fail_after(10):
                listed = await receive.receive()
            (pod,) = listed.pods
            assert pod.metadata is not None and "managedFields" not in pod.metadata.extra
            assert pod.annotations == {"keep": "me"} and pod.uid == api.pod("web")["metadata"]["uid"]
            # a change through the watch, too
            api.store.patch("pods", "default", "web", {"metadata": {"labels": {"v": "2"}}})
            with trio.fail_after(10):
                watched = await receive.receive()
            (pod,) = watched.pods
            assert pod.metadata is not None and pod.metadata.labels == {"v": "2"}
            assert "managedFields" not in pod.metadata.extra
            nursery.cancel_scope.cancel()


def _decoded(manifest: dict[str, Any]) -> Pod:
    meta = {k: v for k, v in manifest["metadata"].items() if k != "managedFields"}
    return Pod.from_dict({**manifest, "metadata": meta})


async def test_watched_changes_decode_as_a_whole_pod(autojump_clock: trio.testing.MockClock) -> None:
    """A status-only change keeps the decoded spec object (equal to decoding it again); a spec change
    decodes the new one; a pod that becomes a mirror pod leaves the set for ``mirror_pods``."""
    clock = WallClock()
    async with open_fake_api(now=clock.now) as api, api.client() as client:
        api.create_pod(pod_manifest("web", {"app": "run"}))
        send, receive = trio.open_memory_channel[SourceSet](10)
        source = ApiserverSource(client, "node-1", send)
        async with trio.open_nursery() as nursery:
            await nursery.start(source.run)
            with trio.fail_after(10):
                (listed,) = (await receive.receive()).pods
            api.store.patch("pods", "default", "web", {"status": {"phase": "Running"}}, "status")
            with trio.fail_after(10):
                (running,) = (await receive.receive()).pods
            assert running.status is not None and running.status.phase == "Running"
            assert running.spec is listed.spec
            assert running == _decoded(api.pod("web"))
            api.store.patch("pods", "default", "web", {"spec": {"activeDeadlineSeconds": 30}})
            with trio.fail_after(10):
                (changed,) = (await receive.receive()).pods
            assert changed.spec is not None and changed.spec.active_deadline_seconds == 30
            assert changed == _decoded(api.pod("web"))
            mirror = {"metadata": {"annotations": {CONFIG_MIRROR_ANNOTATION: "hash"}}}
            api.store.patch("pods", "default", "web", mirror)
            with trio.fail_after(10):
                assert (await receive.receive()).pods == ()
            assert source.mirror_pods.value == {"web_default": _decoded(api.pod("web"))}
            nursery.cancel_scope.cancel()
