"""The API-server pod source hands PodConfig the pods without the server's field-ownership records."""

from __future__ import annotations

import trio
import trio.testing

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
