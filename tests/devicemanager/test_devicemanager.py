"""The device manager against an in-process device plugin served with grpclib on a real socket:
registration, ListAndWatch health changes, admission (with Go's texts), Allocate at container start,
the checkpoint across a restart. Real I/O, so each test has an absolute deadline."""

from __future__ import annotations

import functools
import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from grpclib import GRPCError

from kubelet_trio.api import Pod
from kubelet_trio.cm.devicemanager import (
    ENDPOINT_STOP_GRACE_PERIOD,
    HEALTHY,
    UNHEALTHY,
    AllocationError,
    DeviceManager,
    checkpoint,
    is_extended_resource_name,
)
from kubelet_trio.cm.devicemanager.sim import SimDevicePlugin
from kubelet_trio.cri.gen import v1beta1 as dp

WIDGET = "example.com/widget"
DEADLINE = 10.0


def pod(name: str, count: int, *, uid: str | None = None, init: int = 0) -> Pod:
    limits = {"limits": {WIDGET: str(count)}}
    spec: dict[str, Any] = {"containers": [{"name": "app", "image": "busybox", "resources": limits}]}
    if init:
        spec["initContainers"] = [
            {"name": "init", "image": "busybox", "resources": {"limits": {WIDGET: str(init)}}}
        ]
    return Pod.from_dict(
        {"metadata": {"name": name, "namespace": "default", "uid": uid or f"uid-{name}"}, "spec": spec}
    )


async def wait_for(predicate: Callable[[], bool], manager: DeviceManager) -> None:
    while not predicate():
        await manager.generation.wait_value(functools.partial(int.__lt__, manager.generation.value))


@pytest.fixture
async def manager(tmp_path: Path, nursery: trio.Nursery) -> AsyncIterator[DeviceManager]:
    dm = DeviceManager(str(tmp_path))
    await nursery.start(dm.run)
    yield dm


async def test_registration_reports_capacity_and_health_changes(
    manager: DeviceManager, nursery: trio.Nursery
) -> None:
    with trio.fail_after(DEADLINE):
        plugin = SimDevicePlugin.with_devices(WIDGET, manager.plugin_dir, 3)
        await nursery.start(plugin.run)
        await wait_for(lambda: manager.capacity()[0].get(WIDGET) == "3", manager)
        assert manager.capacity() == ({WIDGET: "3"}, {WIDGET: "3"})

        await plugin.set_health(["dev-1"], UNHEALTHY)
        await wait_for(lambda: manager.capacity()[1][WIDGET] == "2", manager)
        assert manager.capacity() == ({WIDGET: "3"}, {WIDGET: "2"})

        await plugin.set_health(["dev-1", "dev-3"], HEALTHY)
        await wait_for(lambda: manager.capacity()[0][WIDGET] == "4", manager)
        assert manager.capacity() == ({WIDGET: "4"}, {WIDGET: "4"})


async def test_registration_is_refused_with_gos_messages(
    manager: DeviceManager, nursery: trio.Nursery
) -> None:
    with trio.fail_after(DEADLINE):
        old = SimDevicePlugin.with_devices(WIDGET, manager.plugin_dir, 1, version="v1alpha")
        await nursery.start(functools.partial(old.run, register=False))
        with pytest.raises(GRPCError) as exc:
            await old.register()
        assert exc.value.message == (
            'requested API version "v1alpha" is not supported by kubelet. Supported version is ["v1beta1"]'
        )
        bad = SimDevicePlugin.with_devices("widget", manager.plugin_dir, 1)
        await nursery.start(functools.partial(bad.run, register=False))
        with pytest.raises(GRPCError) as exc:
            await bad.register()
        assert exc.value.message == 'the ResourceName "widget" is invalid'
        assert manager.capacity() == ({}, {})


def test_extended_resource_names() -> None:
    assert is_extended_resource_name("example.com/widget")
    assert not is_extended_resource_name("widget")
    assert not is_extended_resource_name("kubernetes.io/widget")
    assert not is_extended_resource_name("example.com/-widget")


async def test_admission_allocation_and_run_options(manager: DeviceManager, nursery: trio.Nursery) -> None:
    with trio.fail_after(DEADLINE):
        plugin = SimDevicePlugin.with_devices(
            WIDGET, manager.plugin_dir, 3, options=dp.DevicePluginOptions(pre_start_required=True)
        )
        await nursery.start(plugin.run)
        await wait_for(lambda: manager.capacity()[1].get(WIDGET) == str(len(plugin.devices)), manager)

        first = pod("first", 2)
        assert manager.admit(first, []) is None
        second = pod("second", 2)
        rejection = manager.admit(second, [first])
        assert rejection is not None
        assert rejection.reason == "UnexpectedAdmissionError"
        assert rejection.message == (
            "Allocate failed due to requested number of devices unavailable for example.com/widget. "
            "Requested: 2, Available: 1, which is unexpected"
        )

        app = first.spec.containers[0]  # type: ignore[union-attr]
        options = await manager.container_options(first, app)
        assert plugin.allocations == [["dev-0", "dev-1"]]
        assert plugin.pre_starts == [["dev-0", "dev-1"]]
        assert options.envs == (("WIDGETS", "dev-0,dev-1"),)
        assert [(m.container_path, m.host_path, m.readonly) for m in options.mounts] == [
            (f"/dev-info/dev-{i}", os.path.join(manager.plugin_dir, f"dev-{i}"), True) for i in (0, 1)
        ]
        # a restart of the container is given the same answer, without a second Allocate
        assert await manager.container_options(first, app) == options
        assert plugin.allocations == [["dev-0", "dev-1"]]

        # the first pod is gone once it is no longer among the active pods: its devices are free again
        assert manager.admit(pod("third", 3), []) is None


async def test_init_container_devices_are_reused(manager: DeviceManager, nursery: trio.Nursery) -> None:
    with trio.fail_after(DEADLINE):
        plugin = SimDevicePlugin.with_devices(WIDGET, manager.plugin_dir, 2)
        await nursery.start(plugin.run)
        await wait_for(lambda: manager.capacity()[1].get(WIDGET) == str(len(plugin.devices)), manager)
        p = pod("p", 2, init=2)
        assert manager.admit(p, []) is None
        assert manager.container_devices(p.uid, "init") == {WIDGET: ("dev-0", "dev-1")}
        assert manager.container_devices(p.uid, "app") == {WIDGET: ("dev-0", "dev-1")}


async def test_preferred_allocation_and_allocate_failure(
    manager: DeviceManager, nursery: trio.Nursery
) -> None:
    with trio.fail_after(DEADLINE):
        options = dp.DevicePluginOptions(get_preferred_allocation_available=True)
        plugin = SimDevicePlugin.with_devices(
            WIDGET, manager.plugin_dir, 3, options=options, prefer_last=True
        )
        await nursery.start(plugin.run)
        await wait_for(lambda: manager.capacity()[1].get(WIDGET) == str(len(plugin.devices)), manager)
        p = pod("p", 1)
        assert manager.admit(p, []) is None
        await manager.container_options(p, p.spec.containers[0])  # type: ignore[union-attr]
        assert plugin.allocations == [["dev-2"]]

        plugin.allocate_error = "no widgets today"
        q = pod("q", 1)
        assert manager.admit(q, [p]) is None
        with pytest.raises(AllocationError, match="rpc error: code = UNKNOWN desc = no widgets today"):
            await manager.container_options(q, q.spec.containers[0])  # type: ignore[union-attr]


async def test_gone_plugin_keeps_capacity_for_the_grace_period(
    manager: DeviceManager, nursery: trio.Nursery
) -> None:
    with trio.fail_after(DEADLINE):
        plugin = SimDevicePlugin.with_devices(WIDGET, manager.plugin_dir, 2)
        scope = trio.CancelScope()

        async def serve(task_status: trio.TaskStatus[None]) -> None:
            with scope:
                await plugin.run(task_status=task_status)

        await nursery.start(serve)
        await wait_for(lambda: manager.capacity()[0].get(WIDGET) == "2", manager)
        scope.cancel()
        await wait_for(lambda: manager.capacity()[1][WIDGET] == "0", manager)
        assert manager.capacity() == ({WIDGET: "2"}, {WIDGET: "0"})
        rejection = manager.admit(pod("p", 1), [])
        assert (
            rejection is not None
            and "no healthy devices present; cannot allocate unhealthy devices" in rejection.message
        )


async def test_capacity_goes_to_zero_after_the_grace_period(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    dm = DeviceManager(str(tmp_path))
    dm._update_devices(WIDGET, [dp.Device(id="dev-0", health=HEALTHY)])
    state = dm._resources[WIDGET]
    state.endpoint = object()  # type: ignore[assignment]
    dm._disconnected(WIDGET, state.endpoint)
    start = trio.current_time()
    assert dm.capacity() == ({WIDGET: "1"}, {WIDGET: "0"})
    await trio.sleep(ENDPOINT_STOP_GRACE_PERIOD - 1)
    assert dm.capacity() == ({WIDGET: "1"}, {WIDGET: "0"})
    await trio.sleep(1)
    assert trio.current_time() - start == ENDPOINT_STOP_GRACE_PERIOD
    assert dm.capacity() == ({WIDGET: "0"}, {WIDGET: "0"})


async def test_checkpoint_survives_a_restart(tmp_path: Path) -> None:
    with trio.fail_after(DEADLINE):
        first = pod("first", 2)
        async with trio.open_nursery() as nursery:
            dm = DeviceManager(str(tmp_path))
            await nursery.start(dm.run)
            plugin = SimDevicePlugin.with_devices(WIDGET, dm.plugin_dir, 3)
            await nursery.start(plugin.run)
            await wait_for(lambda: dm.capacity()[1].get(WIDGET) == "3", dm)
            assert dm.admit(first, []) is None
            await dm.container_options(first, first.spec.containers[0])  # type: ignore[union-attr]
            nursery.cancel_scope.cancel()

        async with trio.open_nursery() as nursery:
            dm = DeviceManager(str(tmp_path))
            await nursery.start(dm.run)
            assert dm.capacity() == ({WIDGET: "0"}, {WIDGET: "0"})  # until the plugin is back
            assert dm.container_devices(first.uid, "app") == {WIDGET: ("dev-0", "dev-1")}
            plugin = SimDevicePlugin.with_devices(WIDGET, dm.plugin_dir, 3)
            await nursery.start(plugin.run)
            await wait_for(lambda: dm.capacity()[1].get(WIDGET) == "3", dm)
            assert dm.admit(first, []) is None  # re-admitted with the devices it holds
            rejection = dm.admit(pod("second", 2), [first])
            assert rejection is not None and "Requested: 2, Available: 1" in rejection.message
            options = await dm.container_options(first, first.spec.containers[0])  # type: ignore[union-attr]
            assert options.envs == (("WIDGETS", "dev-0,dev-1"),)
            assert plugin.allocations == []  # the checkpointed answer is used
            nursery.cancel_scope.cancel()


async def test_corrupt_checkpoint_is_discarded(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with trio.fail_after(DEADLINE):
        plugin_dir = tmp_path / "device-plugins"
        plugin_dir.mkdir()
        (plugin_dir / checkpoint.CHECKPOINT_NAME).write_text(
            '{"Data": {"PodDeviceEntries": []}, "Checksum": 1}'
        )
        async with trio.open_nursery() as nursery:
            dm = DeviceManager(str(tmp_path))
            await nursery.start(dm.run)
            assert "Continue after failing to read checkpoint file" in caplog.text
            await trio.testing.wait_all_tasks_blocked()
            nursery.cancel_scope.cancel()
        checkpoint.decode((plugin_dir / checkpoint.CHECKPOINT_NAME).read_bytes())  # rewritten, sound


def test_checkpoint_round_trip_and_checksum() -> None:
    pods = checkpoint.PodDevices()
    response = dp.ContainerAllocateResponse(envs={"A": "1"})
    pods.insert("u", "c", WIDGET, checkpoint.DeviceEntry(("dev-0",), response))
    raw = checkpoint.encode(pods, {WIDGET: ["dev-0", "dev-1"]})
    decoded, registered = checkpoint.decode(raw)
    entry = decoded.get("u", "c", WIDGET)
    assert entry is not None and entry.device_ids == ("dev-0",) and entry.response == response
    assert registered == {WIDGET: ["dev-0", "dev-1"]}
    with pytest.raises(checkpoint.CorruptCheckpoint):
        checkpoint.decode(raw.replace(b"dev-1", b"dev-9"))
