"""The status publisher writes without reading first: against what the API answered its own last write
while the watch lags behind it, against the watched copy once someone else wrote, and with the
resourceVersion as a precondition, so a stale guess costs one 409 and a re-read, never a lost update."""

from __future__ import annotations

from typing import Any

import attrs
import trio

from kubelet_trio.api import Pod, PodStatus
from kubelet_trio.status.manager import StatusManager
from kubelet_trio.status.sync import StatusPublisher
from kubelet_trio.testing.fakeapi import FakeApi, open_fake_api

PATH = "/api/v1/namespaces/default/pods/web"


@attrs.define
class _Watched:
    """The pod as the (lagging) watch last showed it: what the test says, not what the API holds."""

    pod: Pod | None = None

    def get(self, uid: str) -> Pod | None:
        return self.pod if self.pod is not None and self.pod.uid == uid else None


@attrs.define
class _Workers:
    def is_finished(self, uid: str) -> bool:
        return False

    def could_have_running_containers(self, uid: str) -> bool:
        return True

    async def wait_finished(self, uid: str) -> None:
        await trio.sleep_forever()


@attrs.define
class _Host:
    status_manager: StatusManager = attrs.Factory(StatusManager)
    pod_manager: _Watched = attrs.Factory(_Watched)
    pod_workers: _Workers = attrs.Factory(_Workers)


def _calls(api: FakeApi) -> list[tuple[str, Any]]:
    wanted = {("GET", PATH), ("PATCH", f"{PATH}/status")}
    return [(r.method, r.body) for r in api.app.requests if (r.method, r.path) in wanted]


async def _publish(publisher: StatusPublisher, host: _Host, pod: Pod, message: str) -> None:
    host.status_manager.set_pod_status(pod, PodStatus(phase="Pending", message=message))
    await publisher.sync_batch(full=False)


async def test_writes_follow_our_own_answers_then_the_watch() -> None:
    async with open_fake_api() as api, api.client() as client:
        created = api.create_pod({"metadata": {"name": "web"}, "spec": {"nodeName": "n1", "containers": []}})
        pod = Pod.from_dict(created)
        host = _Host(pod_manager=_Watched(pod))
        publisher = StatusPublisher(client, host)

        # The watch never moves: each write goes against the answer to the one before, without a read.
        for i in range(3):
            await _publish(publisher, host, pod, f"m{i}")
        calls = _calls(api)
        assert [method for method, _ in calls] == ["PATCH"] * 3
        versions = [body["metadata"]["resourceVersion"] for _, body in calls]
        assert versions[0] == created["metadata"]["resourceVersion"]
        assert len(set(versions)) == 3
        assert api.pod("web")["status"]["message"] == "m2"

        # Someone else writes, and the watch shows it: the next write goes against that copy.
        theirs = api.store.patch(
            "pods", "default", "web", {"status": {"reason": "Theirs"}}, subresource="status"
        )
        host.pod_manager.pod = Pod.from_dict(theirs)
        await _publish(publisher, host, pod, "m3")
        method, body = _calls(api)[-1]
        assert (method, body["metadata"]["resourceVersion"]) == (
            "PATCH",
            theirs["metadata"]["resourceVersion"],
        )
        assert api.pod("web")["status"]["message"] == "m3"

        # Someone else writes and the watch has not shown it: one 409, one read, then the write lands and
        # keeps what they wrote that we do not own.
        gate = {"type": "example.com/Gate", "status": "True"}
        api.store.patch("pods", "default", "web", {"status": {"conditions": [gate]}}, subresource="status")
        before = len(api.app.requests_for("PATCH", r"/status$"))
        await _publish(publisher, host, pod, "m4")
        assert [m for m, _ in _calls(api)[-3:]] == ["PATCH", "GET", "PATCH"]
        assert len(api.app.requests_for("PATCH", r"/status$")) == before + 2
        status = api.pod("web")["status"]
        assert (status["message"], status["conditions"]) == ("m4", [gate])
