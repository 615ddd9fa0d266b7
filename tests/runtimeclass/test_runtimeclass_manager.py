"""The RuntimeClass informer against the fake API server (MockClock): list, watch, relist, lookups."""

from __future__ import annotations

import contextlib
import random
from collections.abc import AsyncIterator

import pytest
import trio
import trio.testing

from kubelet_trio.client import NotFound
from kubelet_trio.clock import WallClock
from kubelet_trio.kuberuntime.manager import RuntimeHandlerError
from kubelet_trio.runtimeclass import (
    RUNTIME_CLASSES_PATH,
    RuntimeClassesUnavailable,
    RuntimeClassManager,
    RuntimeClassNotFound,
)
from kubelet_trio.runtimeclass import manager as manager_module
from kubelet_trio.testing.fakeapi import FakeApi, FakeApiError, open_fake_api
from tests.apiserver.harness import eventually

LIST = rf"^{RUNTIME_CLASSES_PATH}$"


@contextlib.asynccontextmanager
async def running_manager(api: FakeApi) -> AsyncIterator[RuntimeClassManager]:
    """A started manager on a client of ``api``; its tasks end before the client closes."""
    async with api.client() as client, trio.open_nursery() as nursery:
        manager = RuntimeClassManager(client, rng=random.Random(7))
        await nursery.start(manager.run)
        yield manager
        nursery.cancel_scope.cancel()


async def settle(manager: RuntimeClassManager, expected: dict[str, str]) -> None:
    """Let the watch deliver what the store has (everything runs in-process), then compare."""
    await trio.testing.wait_all_tasks_blocked()
    assert manager.handlers() == expected


def list_requests(api: FakeApi) -> list[dict[str, str]]:
    return [r.query for r in api.app.requests_for("GET", LIST) if r.query.get("watch") != "true"]


def watch_requests(api: FakeApi) -> list[dict[str, str]]:
    return [r.query for r in api.app.requests_for("GET", LIST) if r.query.get("watch") == "true"]


async def test_lookups_follow_the_api(autojump_clock: trio.testing.MockClock) -> None:
    async with open_fake_api(now=WallClock().now) as api:
        api.create_runtime_class("gvisor", "runsc")
        async with running_manager(api) as manager:
            with trio.fail_after(5):
                await manager.wait_synced()
            assert manager.lookup_runtime_handler("gvisor") == "runsc"
            assert manager.lookup_runtime_handler(None) == ""
            assert manager.lookup_runtime_handler("") == ""
            with pytest.raises(RuntimeClassNotFound, match=r'^runtimeclass\.node\.k8s\.io "kata" not found$'):
                manager.lookup_runtime_handler("kata")

            api.create_runtime_class("kata", "kata-qemu")
            await settle(manager, {"gvisor": "runsc", "kata": "kata-qemu"})
            assert manager.lookup_runtime_handler("kata") == "kata-qemu"

            api.store.delete("runtimeclasses", None, "gvisor")
            await settle(manager, {"kata": "kata-qemu"})
            with pytest.raises(RuntimeHandlerError, match='"gvisor" not found'):
                manager.lookup_runtime_handler("gvisor")

            # One list, then one watch from its resourceVersion carried every change.
            assert manager.lists == 1 and len(list_requests(api)) == 1
            (watch,) = watch_requests(api)
            assert watch["resourceVersion"] == "1" and watch["allowWatchBookmarks"] == "true"


async def test_unknown_until_the_first_list(autojump_clock: trio.testing.MockClock) -> None:
    async with open_fake_api(now=WallClock().now) as api:
        api.create_runtime_class("gvisor", "runsc")
        forbidden = 'runtimeclasses.node.k8s.io is forbidden: User "system:node:node-1" cannot list'
        api.app.inject("GET", LIST, 403, times=3, reason="Forbidden", message=forbidden)
        async with running_manager(api) as manager:
            await trio.sleep(5)  # three failed lists: backoff from 0.8 s, doubling, stretched up to 100 %
            assert not manager.synced.value and len(list_requests(api)) == 3
            assert manager.last_error is not None and forbidden in manager.last_error
            with pytest.raises(RuntimeClassesUnavailable) as caught:
                manager.lookup_runtime_handler("gvisor")
            assert str(caught.value) == (
                "failed to lookup RuntimeClass gvisor: RuntimeClasses have not been listed from the API "
                f"server yet: {manager.last_error}"
            )
            assert manager.lookup_runtime_handler(None) == ""  # no class needs no API

            with trio.fail_after(10):
                await manager.wait_synced()
            assert manager.lookup_runtime_handler("gvisor") == "runsc"
            assert manager.last_error is None


async def test_stale_cache_through_an_outage_then_relist_after_gone(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_fake_api(now=WallClock().now) as api:
        api.create_runtime_class("gvisor", "runsc")
        async with running_manager(api) as manager:
            with trio.fail_after(5):
                await manager.wait_synced()
            api.go_down()
            api.store.stop_all_watches()
            await trio.sleep(60)
            assert manager.lookup_runtime_handler("gvisor") == "runsc"  # stale beats nothing
            # Meanwhile the history moves past the watch's resourceVersion: 410 Gone, then a relist.
            api.store.delete("runtimeclasses", None, "gvisor")
            api.create_runtime_class("kata", "kata-qemu")
            api.store.compact()
            api.come_back()
            await eventually(lambda: manager.lists == 2, limit=120)
            assert manager.handlers() == {"kata": "kata-qemu"}
            with pytest.raises(RuntimeClassNotFound):
                manager.lookup_runtime_handler("gvisor")


async def test_list_is_paged(autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(manager_module, "LIST_PAGE_SIZE", 2)
    async with open_fake_api(now=WallClock().now) as api:
        for name in "abcde":
            api.create_runtime_class(name, f"h-{name}")
        async with running_manager(api) as manager:
            with trio.fail_after(5):
                await manager.wait_synced()
            assert manager.handlers() == {n: f"h-{n}" for n in "abcde"}
            lists = list_requests(api)
            assert [q.get("limit") for q in lists] == ["2", "2", "2"]
            assert [bool(q.get("continue")) for q in lists] == [False, True, True]


async def test_fake_api_serves_runtime_classes_as_a_real_one(autojump_clock: trio.testing.MockClock) -> None:
    async with open_fake_api() as api, api.client() as client:
        api.create_runtime_class("gvisor", "runsc")
        answer = await client.get(f"{RUNTIME_CLASSES_PATH}/gvisor")
        assert (answer["apiVersion"], answer["kind"], answer["handler"]) == (
            "node.k8s.io/v1",
            "RuntimeClass",
            "runsc",
        )
        assert "namespace" not in answer["metadata"]  # cluster-scoped
        with pytest.raises(
            FakeApiError, match=r'^RuntimeClass.node.k8s.io "x" is invalid: handler: Required'
        ):
            api.store.create("runtimeclasses", None, {"metadata": {"name": "x"}})
        with pytest.raises(FakeApiError, match='handler: Invalid value: "Bad_Handler": a lowercase RFC 1123'):
            api.create_runtime_class("y", "Bad_Handler")
        with pytest.raises(FakeApiError, match='handler: Invalid value: "runc": field is immutable'):
            api.store.patch("runtimeclasses", None, "gvisor", {"handler": "runc"})
        with pytest.raises(NotFound, match=r'runtimeclasses\.node\.k8s\.io "nope" not found'):
            await client.get(f"{RUNTIME_CLASSES_PATH}/nope")
        with pytest.raises(NotFound, match="could not find the requested resource"):
            await client.get("/api/v1/runtimeclasses")  # only under its own group
