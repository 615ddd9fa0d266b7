"""Node registration and status reporting (``kubelet_node_status.go``: ``registerWithAPIServer``,
``syncNodeStatus``, ``fastStatusUpdateOnce``).

Registration creates the Node (backing off 100 ms doubling to 7 s until it works). If the name is taken,
the existing Node is read and only what the kubelet owns is reconciled - its default labels and the
attach/detach annotation - with a merge patch, so labels and taints others set are kept. Then the status
is computed every ``update_frequency`` (10 s) and PATCHed (``nodes/<name>/status``, merge patch) only when
it changed - heartbeat times alone do not count - or when ``report_frequency`` (5 min) has passed since the
last report. Until the first report with Ready=True, readiness is checked every 100 ms (for at most 120 s)
so the node turns Ready as soon as it is.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Collection, Mapping
from typing import Any, Protocol

import attrs
import trio
import trio_util

from kubelet_trio import defaults
from kubelet_trio.api import rfc3339
from kubelet_trio.client import AlreadyExists, ApiClient, ApiClientError, NotFound, merge_patch_diff
from kubelet_trio.client.backoff import DoublingBackoff
from kubelet_trio.clock import WallClock
from kubelet_trio.cri.runtime import Runtime
from kubelet_trio.fsio import RunSync, run_in_thread
from kubelet_trio.logs import kv
from kubelet_trio.nodestatus.machine import MachineInfo, read_machine_info
from kubelet_trio.nodestatus.setters import (
    CONTROLLER_ATTACH_DETACH,
    NodeStatusConfig,
    build_status,
    default_labels,
    initial_node,
    node_images,
    status_changed,
)

__all__ = ["NodeHost", "NodeStatusManager"]

logger = logging.getLogger(__name__)

NODE_STATUS_UPDATE_FREQUENCY = defaults.NODE_STATUS_UPDATE_FREQUENCY
NODE_STATUS_REPORT_FREQUENCY = defaults.NODE_STATUS_REPORT_FREQUENCY
REGISTER_BACKOFF_INITIAL = 0.1
REGISTER_BACKOFF_MAX = 7.0
FAST_STATUS_PERIOD = 0.1
NODE_READY_GRACE_PERIOD = 120.0
RUNTIME_CALL_TIMEOUT = 10.0

NodeEventSink = Callable[[str, str, str], None]  # (type, reason, message)


class NodeHost(Protocol):
    """What node status reads from the kubelet."""

    runtime: Runtime
    clock: WallClock

    def health_errors(self) -> list[str]: ...

    def node_pressure(self) -> Collection[str]:
        """The pressure conditions that hold (MemoryPressure, DiskPressure, PIDPressure)."""
        ...

    def extended_resources(self) -> tuple[Mapping[str, str], Mapping[str, str]]:
        """(capacity, allocatable) of the device plugins' resources."""
        ...

    async def extended_resources_changed(self) -> None:
        """Return once the device plugins' resources changed (never, without device plugins)."""
        ...


#: condition type -> (event reason when it turns True, when it turns False), in Go's setter order.
_TRANSITION_EVENTS = {
    "MemoryPressure": ("NodeHasInsufficientMemory", "NodeHasSufficientMemory"),
    "DiskPressure": ("NodeHasDiskPressure", "NodeHasNoDiskPressure"),
    "PIDPressure": ("NodeHasInsufficientPID", "NodeHasSufficientPID"),
    "Ready": ("NodeReady", "NodeNotReady"),
}


def _condition_status(status: dict[str, Any] | None, type_: str) -> str | None:
    for condition in (status or {}).get("conditions") or ():
        if condition.get("type") == type_:
            return str(condition.get("status"))
    return None


def _ready(status: dict[str, Any] | None) -> str | None:
    return _condition_status(status, "Ready")


@attrs.define(eq=False)
class NodeStatusManager:
    """Start with ``nursery.start(manager.run)``; :attr:`node` holds the Node as last returned by the API
    server (None until registered)."""

    client: ApiClient
    host: NodeHost
    config: NodeStatusConfig
    root_dir: str = defaults.ROOT_DIR
    machine: MachineInfo | None = None  # read from the host at start when not given
    register: bool = True  # registerNode: create the Node (False: someone else does; only report status)
    update_frequency: float = NODE_STATUS_UPDATE_FREQUENCY
    report_frequency: float = NODE_STATUS_REPORT_FREQUENCY
    events: NodeEventSink | None = None
    run_sync: RunSync = run_in_thread
    node: trio_util.AsyncValue[dict[str, Any] | None] = attrs.Factory(lambda: trio_util.AsyncValue(None))
    reports: int = 0  # status PATCHes sent
    _runtime_version: str = ""
    _images: list[dict[str, Any]] | None = None
    _last_report: float = float("-inf")

    @property
    def path(self) -> str:
        return f"/api/v1/nodes/{self.config.node_name}"

    @property
    def node_uid(self) -> str | None:
        node = self.node.value
        return node["metadata"].get("uid") if node else None

    def observe(self, node: dict[str, Any] | None) -> None:
        """The Node as the node informer saw it (labels and taints others set, the TTL annotation)."""
        self.node.value = node

    def current_node(self) -> dict[str, Any] | None:
        """The Node as the API server has it, else as this kubelet would register it (admission needs a
        node even before registration, like Go's ``getNodeAnyWay``); None before the machine is known."""
        known: dict[str, Any] | None = self.node.value  # trio_util is untyped
        if known is not None:
            return known
        if self.machine is None:
            return None
        status = build_status(
            None,
            config=self.config,
            machine=self.machine,
            runtime_version=self._runtime_version,
            errors=[],
            now=rfc3339(self.host.clock.now()),
        )
        return initial_node(self.config, self.machine, status)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        if self.machine is None:
            self.machine = await self.run_sync(read_machine_info, self.root_dir)
        task_status.started()
        if self.register:
            await self._register()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._fast_until_ready)
            nursery.start_soon(self._sync_on_device_changes)
            async with contextlib.aclosing(trio_util.periodic(self.update_frequency)) as ticks:
                async for _ in ticks:
                    await self.sync()

    def _event(self, type_: str, reason: str, message: str) -> None:
        if self.events is not None:
            self.events(type_, reason, message)

    async def _refresh_runtime_info(self) -> None:
        runtime = self.host.runtime
        if not self._runtime_version:
            try:
                with trio.fail_after(RUNTIME_CALL_TIMEOUT):
                    version = await runtime.version()
                self._runtime_version = f"{version.runtime_name}://{version.runtime_version}"
            except Exception as err:
                logger.warning("cannot read the container runtime version", extra=kv(error=err))
        try:
            with trio.fail_after(RUNTIME_CALL_TIMEOUT):
                images = await runtime.list_images()
            self._images = node_images(
                (list(i.repo_digests) + list(i.repo_tags), int(i.size or 0)) for i in images
            )
        except Exception as err:
            logger.debug("cannot list images for node status", extra=kv(error=err))

    async def _compute(self, old_status: dict[str, Any] | None) -> dict[str, Any]:
        await self._refresh_runtime_info()
        assert self.machine is not None
        return build_status(
            old_status,
            config=self.config,
            machine=self.machine,
            runtime_version=self._runtime_version,
            errors=self.host.health_errors(),
            now=rfc3339(self.host.clock.now()),
            images=self._images,
            pressure=self.host.node_pressure(),
            extended=self.host.extended_resources(),
        )

    async def _register(self) -> None:
        backoff = DoublingBackoff(REGISTER_BACKOFF_INITIAL, REGISTER_BACKOFF_MAX)
        assert self.machine is not None
        while True:
            try:
                status = await self._compute(None)
                try:
                    node = await self.client.create(
                        "/api/v1/nodes", initial_node(self.config, self.machine, status)
                    )
                    logger.info("registered node", extra=kv(node=self.config.node_name))
                    self._last_report = trio.current_time()
                    self._report_transitions(None, node.get("status"))
                except AlreadyExists:
                    node = await self._reconcile_existing(await self.client.get(self.path))
                    logger.info("node already registered, reconciled", extra=kv(node=self.config.node_name))
                self.node.value = node
                if node is not None and _ready(node.get("status")) is None:
                    await self.sync(force=True)
                return
            except ApiClientError as err:
                delay = backoff.next()
                logger.warning(
                    "unable to register node, retrying",
                    extra=kv(delay=round(delay, 1), node=self.config.node_name, error=err),
                )
                await trio.sleep(delay)

    async def _reconcile_existing(self, existing: dict[str, Any]) -> dict[str, Any]:
        """Set the labels and annotation the kubelet owns; leave everything else alone."""
        assert self.machine is not None
        meta = existing.get("metadata") or {}
        labels = meta.get("labels") or {}
        annotations = meta.get("annotations") or {}
        wanted_labels = {
            k: v for k, v in default_labels(self.config, self.machine).items() if labels.get(k) != v
        }
        patch: dict[str, Any] = {}
        if wanted_labels:
            patch["labels"] = wanted_labels
        if annotations.get(CONTROLLER_ATTACH_DETACH) != "true":
            patch["annotations"] = {CONTROLLER_ATTACH_DETACH: "true"}
        if not patch:
            return existing
        return dict(await self.client.merge_patch(self.path, {"metadata": patch}))

    async def sync(self, *, force: bool = False) -> None:
        """Compute the status; PATCH it when changed, when a report is due, or when forced."""
        try:
            node = self.node.value
            if node is None:
                node = await self.client.get(self.path)
                self.node.value = node
            assert node is not None
            old = node.get("status") or {}
            new = await self._compute(old)
            due = trio.current_time() - self._last_report >= self.report_frequency
            if not (force or due or status_changed(old, new)):
                return
            patch = merge_patch_diff({"status": old}, {"status": new})
            updated = await self.client.merge_patch(f"{self.path}/status", patch)
            self.node.value = updated
            self._last_report = trio.current_time()
            self.reports += 1
            self._report_transitions(old, new)
        except NotFound:
            logger.error("node object not found, cannot report status", extra=kv(node=self.config.node_name))
            self.node.value = None
        except ApiClientError as err:
            logger.warning("error updating node status", extra=kv(node=self.config.node_name, error=err))
            self.node.value = None  # read it afresh next time

    def _report_transitions(self, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        """Go's condition setters: an event when a pressure condition appears or changes status, and when
        Ready changes status (not when it first appears)."""
        for type_, (when_true, when_false) in _TRANSITION_EVENTS.items():
            before, after = _condition_status(old, type_), _condition_status(new, type_)
            if type_ == "Ready" and before is None:
                continue
            if after != before and after is not None:
                reason = when_true if after == "True" else when_false
                self._event("Normal", reason, f"Node {self.config.node_name} status is now: {reason}")

    async def _sync_on_device_changes(self) -> None:
        """A device plugin's devices appear in the Node at once, not at the next periodic sync."""
        while True:
            await self.host.extended_resources_changed()
            await self.sync()

    async def _fast_until_ready(self) -> None:
        """``fastStatusUpdateOnce``: report at once when the node first becomes ready."""
        with trio.move_on_after(NODE_READY_GRACE_PERIOD):
            async with contextlib.aclosing(trio_util.periodic(FAST_STATUS_PERIOD)) as ticks:
                async for _ in ticks:
                    node = self.node.value
                    if node is not None and _ready(node.get("status")) == "True":
                        return
                    if not self.host.health_errors():
                        await self.sync(force=True)
