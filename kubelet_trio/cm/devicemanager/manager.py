"""The device manager (Go: ``pkg/kubelet/cm/devicemanager/manager.go``): device plugins register on
``<root-dir>/device-plugins/kubelet.sock``, report their devices over ``ListAndWatch``, and are asked to
``Allocate`` them to containers.

- **Capacity.** Per resource: capacity counts every device a plugin lists, allocatable the healthy ones. A
  plugin that goes away leaves its devices unhealthy (allocatable 0) and keeps its capacity for
  :data:`ENDPOINT_STOP_GRACE_PERIOD`, then reports 0 (not absent: the resource stays known as a device
  plugin's). :attr:`DeviceManager.generation` counts the changes, so node status reports it at once.
- **Admission** (:meth:`DeviceManager.admit`, synchronous like the kubelet's other admit handlers) picks
  the devices of each container, init containers first, so that an init container's devices are reused by
  the containers after it; a pod that cannot get them is rejected with Go's ``UnexpectedAdmissionError``.
- **Container start** (:meth:`DeviceManager.container_options`) calls the plugin's ``Allocate`` for devices
  not allocated yet (``GetPreferredAllocation`` first, when the plugin offers it, to let it choose among the
  free devices) and ``PreStartContainer`` when the plugin asks for it, and returns what the answers add to
  the container's CRI config.
- **Pod resources API.** Given the kubelet's pods, :meth:`DeviceManager.run` also serves
  ``<root-dir>/pod-resources/kubelet.sock`` (:mod:`kubelet_trio.apis.podresources`) on the same asyncio
  thread, the manager answering for the devices.
- **Checkpoint.** Who holds which devices is written to ``kubelet_internal_checkpoint``, so that after a
  restart running pods keep their devices and nothing is handed out twice; a corrupt one is reported and
  discarded. It is Go's file, checksum included, so a Go kubelet's is read and ours is read by it.

Each plugin is a peer: whatever its stream does is contained at the ``grpc`` boundary, never the node's,
and nothing it sends costs the node more than a bounded amount. A registration is checked before anything
is done with it (its endpoint must name a socket in the plugin directory: the kubelet dials nothing a
plugin points it to elsewhere); what a plugin chose is truncated wherever it is echoed; a plugin whose
devices flap costs one log line per resource per :data:`DEVICE_REPORT_PERIOD` and one checkpoint write per
:data:`CHECKPOINT_PERIOD`, the last state always written.
"""

from __future__ import annotations

import functools
import logging
import os
import re
import stat
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

import attrs
import trio
import trio_util

from kubelet_trio.aiobridge import LazyAsyncioThread, open_lazy_asyncio_thread
from kubelet_trio.api import Pod
from kubelet_trio.api.container import Container
from kubelet_trio.apis.podresources import PodResourcesServer, PodsProvider, serve_pod_resources, socket_path
from kubelet_trio.boundary import BoundaryErrors, LogBudget, contain, refused, summarise_refusals, truncate
from kubelet_trio.cm.devicemanager import checkpoint
from kubelet_trio.cm.devicemanager.errors import AllocationError, PluginCallError, RegistrationError
from kubelet_trio.cm.devicemanager.pod_devices import DeviceEntry, DeviceRunOptions, PodDevices, run_options
from kubelet_trio.cm.devicemanager.server import BOUNDARY, serve_registration
from kubelet_trio.cri.gen import v1beta1 as dp
from kubelet_trio.fsio import RunSync, run_in_thread
from kubelet_trio.lifecycle.predicate import AdmitResult
from kubelet_trio.logs import go_quote, kobj, kv

if TYPE_CHECKING:
    from kubelet_trio.cm.devicemanager.endpoint import Endpoint

__all__ = [
    "CHECKPOINT_PERIOD",
    "DEVICE_REPORT_PERIOD",
    "ENDPOINT_STOP_GRACE_PERIOD",
    "HEALTHY",
    "KUBELET_SOCKET",
    "SUPPORTED_VERSIONS",
    "UNEXPECTED_ADMISSION_ERROR",
    "UNHEALTHY",
    "DeviceManager",
    "is_extended_resource_name",
]

logger = logging.getLogger(__name__)

KUBELET_SOCKET = "kubelet.sock"
SUPPORTED_VERSIONS = ("v1beta1",)
HEALTHY, UNHEALTHY = "Healthy", "Unhealthy"
UNEXPECTED_ADMISSION_ERROR = "UnexpectedAdmissionError"
ENDPOINT_STOP_GRACE_PERIOD = 300.0  # seconds a gone plugin's capacity is still reported (Go: 5 min)
DIAL_TIMEOUT = 10.0  # seconds to reach a registering plugin and read its options (Go: 10 s)
PLUGIN_CALL_TIMEOUT = 30.0  # seconds for Allocate, GetPreferredAllocation, PreStartContainer
#: seconds between two writes of the checkpoint for device changes (an allocation is written at once)
CHECKPOINT_PERIOD = 1.0
#: seconds between two log lines about one resource's devices: a flapping plugin is summarised
DEVICE_REPORT_PERIOD = 10.0
_MAX_ENDPOINT = 255  # bytes of a file name (NAME_MAX); a socket path is shorter still

_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def is_extended_resource_name(name: str) -> bool:
    """Go ``IsExtendedResourceName``: ``domain/name`` outside ``kubernetes.io``, valid as a quota name."""
    if "/" not in name or "kubernetes.io/" in name or name.startswith("requests."):
        return False
    prefix, _, short = f"requests.{name}".rpartition("/")
    return (
        0 < len(short) <= 63
        and bool(_NAME.match(short))
        and len(prefix) <= 253
        and bool(_DNS1123_SUBDOMAIN.match(prefix))
    )


def _endpoint_error(endpoint: str, plugin_dir: str) -> str | None:
    """Why ``endpoint`` is not a plain file name in ``plugin_dir``, if it is not."""
    if (
        not endpoint
        or endpoint in (".", "..")
        or "/" in endpoint
        or "\x00" in endpoint
        or len(endpoint.encode("utf-8", "surrogatepass")) > _MAX_ENDPOINT
    ):
        return (
            f"the Endpoint {go_quote(truncate(endpoint))} is invalid: "
            f"it must be the file name of a socket in {plugin_dir}"
        )
    return None


def _limits(container: Container) -> dict[str, int]:
    """Extended resources are never overcommitted (requests equal limits): the limits say it all."""
    res = container.resources
    return {name: q.int_value() for name, q in ((res.limits if res else None) or {}).items()}


@attrs.define(eq=False)
class _Resource:
    """One device plugin resource: its devices (id → health) and the plugin serving it, if any."""

    devices: dict[str, str] = attrs.Factory(dict)
    endpoint: Endpoint | None = None
    scope: trio.CancelScope | None = None  # the task following the plugin's stream
    stopped_at: float | None = None  # when the plugin went away (or was not back after a restart)

    def healthy(self) -> set[str]:
        return {i for i, health in self.devices.items() if health == HEALTHY}


@attrs.define(eq=False)
class DeviceManager:
    """Start with ``nursery.start(manager.run)``; ``started`` once plugins can register."""

    root_dir: str
    boundary_errors: BoundaryErrors | None = None
    run_sync: RunSync = run_in_thread
    #: the kubelet's pods (Go: the pod manager's): set, the pod resources API is served too
    pods: PodsProvider | None = None
    #: the admitted pods still running, and whether every pod source has spoken: the pod resources API
    #: releases the devices of the others before it answers (Go ``UpdateAllocatedDevices``)
    active_pods: Callable[[], Iterable[Pod]] | None = None
    sources_ready: Callable[[], bool] = attrs.field(default=lambda: True)
    #: Go's KubeletPodResourcesGet gate
    pod_resources_get: bool = False
    #: counts the changes of capacity or allocatable (node status waits for it to move)
    generation: trio_util.AsyncValue[int] = attrs.Factory(lambda: trio_util.AsyncValue(0))
    _resources: dict[str, _Resource] = attrs.Factory(dict)
    _pods: PodDevices = attrs.field(init=False, factory=PodDevices)  # who holds which devices
    _dirty: trio.Event = attrs.Factory(trio.Event)  # the checkpoint is stale
    _reports: Counter[str] = attrs.Factory(Counter)  # resource -> device changes not logged yet
    _report_wanted: trio.Event = attrs.Factory(trio.Event)
    _refusals: LogBudget = attrs.Factory(LogBudget)  # log lines for refused registrations
    _refusals_held: bool = False  # a summary of the refusals the budget held back is due
    _write_lock: trio.Lock = attrs.Factory(trio.Lock)
    _nursery: trio.Nursery | None = None
    _threads: LazyAsyncioThread | None = None  # gRPC's asyncio thread, started when a plugin comes

    @property
    def plugin_dir(self) -> str:
        return os.path.join(self.root_dir, "device-plugins")

    @property
    def socket_path(self) -> str:
        return os.path.join(self.plugin_dir, KUBELET_SOCKET)

    @property
    def pod_resources_socket(self) -> str:
        return socket_path(self.root_dir)

    @property
    def checkpoint_path(self) -> str:
        return os.path.join(self.plugin_dir, checkpoint.CHECKPOINT_NAME)

    # --- running -----------------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        raw = await self.run_sync(self._prepare_directory)
        self._restore(raw)
        try:
            async with open_lazy_asyncio_thread() as threads, trio.open_nursery() as nursery:
                self._threads, self._nursery = threads, nursery
                nursery.start_soon(self._write_checkpoints)
                nursery.start_soon(self._report_devices)
                await nursery.start(
                    functools.partial(
                        serve_registration,
                        threads,
                        self.socket_path,
                        self.register,
                        boundary_errors=self.boundary_errors,
                    )
                )
                if self.pods is not None:
                    server = PodResourcesServer(self.pods, self, get_enabled=self.pod_resources_get)
                    await nursery.start(
                        functools.partial(
                            serve_pod_resources,
                            threads,
                            self.pod_resources_socket,
                            server,
                            boundary_errors=self.boundary_errors,
                            run_sync=self.run_sync,
                        )
                    )
                task_status.started()
        finally:
            self._nursery = self._threads = None
            with trio.move_on_after(5, shield=True):
                await self._write_checkpoint()

    def _prepare_directory(self) -> bytes | None:
        """Make the directory and remove the sockets in it (so plugins see ``kubelet.sock`` re-created
        and register again); return the checkpoint's bytes, if any."""
        os.makedirs(self.plugin_dir, mode=0o750, exist_ok=True)
        for name in os.listdir(self.plugin_dir):
            path = os.path.join(self.plugin_dir, name)
            try:
                if stat.S_ISSOCK(os.lstat(path).st_mode):
                    os.unlink(path)
            except FileNotFoundError:
                pass
        return checkpoint.read(self.checkpoint_path)

    def _restore(self, raw: bytes | None) -> None:
        if raw is None:
            return
        try:
            pods, registered = checkpoint.decode(raw)
        except checkpoint.CorruptCheckpoint as err:
            logger.error(
                "Continue after failing to read checkpoint file. "
                "Device allocation info may NOT be up-to-date",
                extra=kv(path=self.checkpoint_path, err=str(err)),
            )
            self._mark_dirty()  # replaced by a sound one
            return
        self._pods = pods
        now = trio.current_time()
        for resource in registered:
            # no devices until the plugin registers again; its grace period runs from now
            self._resources.setdefault(resource, _Resource(stopped_at=now))
        logger.info("Restored device allocations from checkpoint", extra=kv(pods=len(pods.pods())))

    def _encode(self) -> bytes:
        registered = {name: sorted(r.healthy()) for name, r in self._resources.items()}
        return checkpoint.encode(self._pods, registered)

    async def _write_checkpoints(self) -> None:
        """Write the checkpoint when it is stale, at most once per :data:`CHECKPOINT_PERIOD`: changes
        meanwhile are written together, from the state at the time of writing, so the last one is."""
        while True:
            await self._dirty.wait()
            self._dirty = trio.Event()
            await self._write_checkpoint()
            await trio.sleep(CHECKPOINT_PERIOD)

    async def _report_devices(self) -> None:
        """Log each resource whose devices changed, at most once per :data:`DEVICE_REPORT_PERIOD`: the
        first change at once, the ones after it in one line at the end of the period, with their count."""
        while True:
            await self._report_wanted.wait()
            self._report_wanted = trio.Event()
            reports, self._reports = self._reports, Counter()
            for resource, changes in sorted(reports.items()):
                state = self._resources.get(resource)
                if state is None:
                    continue
                logger.info(
                    "Device plugin reported devices",
                    extra=kv(
                        resource=resource,
                        devices=len(state.devices),
                        healthy=len(state.healthy()),
                        changes=changes,
                    ),
                )
            await trio.sleep(DEVICE_REPORT_PERIOD)

    def _mark_dirty(self) -> None:
        self._dirty.set()

    def _changed(self) -> None:
        self.generation.value += 1

    async def _write_checkpoint(self) -> None:
        """One writer at a time (the file is replaced through a fixed temporary name)."""
        async with self._write_lock:
            try:
                await self.run_sync(checkpoint.write, self.checkpoint_path, self._encode())
            except OSError as err:
                logger.error("Failed to write device manager checkpoint", extra=kv(err=err))

    # --- plugins -----------------------------------------------------------------------------------

    async def register(self, request: dp.RegisterRequest) -> None:
        """The ``Register`` RPC: check it, reach the plugin, follow its devices; raise
        :class:`RegistrationError` to refuse it.

        The request is checked before anything is logged or dialled, and its text is truncated where it
        is echoed; a refused one is counted at the registration boundary."""
        try:
            self._check(request)
        except RegistrationError as err:
            logged = refused(
                BOUNDARY,
                self.boundary_errors,
                "invalid registration request",
                budget=self._refusals,
                now=trio.current_time(),
                resource=request.resource_name,
                err=str(err),
            )
            if not logged and not self._refusals_held and self._nursery is not None:
                self._refusals_held = True
                self._nursery.start_soon(self._summarise_refusals)
            raise
        resource = request.resource_name
        logger.info("Got registration request from device plugin with resource", extra=kv(resource=resource))
        if self._threads is None or self._nursery is None:
            raise RegistrationError("device manager is not running")
        from kubelet_trio.cm.devicemanager.endpoint import Endpoint  # gRPC: loaded with the first plugin

        socket = os.path.join(self.plugin_dir, request.endpoint)
        try:
            with trio.fail_after(DIAL_TIMEOUT):
                endpoint = await Endpoint.connect(self._threads.get(), resource, socket)
        except (PluginCallError, trio.TooSlowError) as err:
            raise RegistrationError(f"failed to dial device plugin: {err}") from err
        await self._nursery.start(self._follow, resource, endpoint)

    async def _summarise_refusals(self) -> None:
        await trio.sleep(self._refusals.period)
        self._refusals_held = False
        summarise_refusals(BOUNDARY, self._refusals, trio.current_time())

    def _check(self, request: dp.RegisterRequest) -> None:
        """Go's checks of a registration (version, resource name), and its endpoint's."""
        if request.version not in SUPPORTED_VERSIONS:
            supported = "[" + " ".join(f'"{v}"' for v in SUPPORTED_VERSIONS) + "]"
            raise RegistrationError(
                f"requested API version {go_quote(truncate(request.version))} is not supported by kubelet. "
                f"Supported version is {supported}"
            )
        if not is_extended_resource_name(request.resource_name):
            raise RegistrationError(
                f"the ResourceName {go_quote(truncate(request.resource_name))} is invalid"
            )
        error = _endpoint_error(request.endpoint, self.plugin_dir)
        if error is not None:
            raise RegistrationError(error)

    async def _follow(
        self,
        resource: str,
        endpoint: Endpoint,
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Follow one plugin's ``ListAndWatch`` until it ends or a newer registration replaces it."""
        state = self._resources.setdefault(resource, _Resource())
        if state.scope is not None:
            state.scope.cancel()  # the plugin registered again: its newer endpoint takes over
        state.endpoint, state.stopped_at = endpoint, None
        self._changed()  # the resource is (again) a plugin's, with capacity even before it lists devices
        self._mark_dirty()
        with trio.CancelScope() as scope:
            state.scope = scope
            task_status.started()
            logger.info(
                "Registered device plugin",
                extra=kv(resource=resource, socket=endpoint.socket, options=endpoint.options.to_dict()),
            )
            try:
                with contain("grpc", self.boundary_errors, resource=resource, socket=endpoint.socket):
                    try:
                        await endpoint.list_and_watch(functools.partial(self._update_devices, resource))
                    except PluginCallError as err:
                        logger.warning(
                            "Device plugin stream failed", extra=kv(resource=resource, err=str(err))
                        )
            finally:
                await endpoint.aclose()
            self._disconnected(resource, endpoint)
            await trio.sleep(ENDPOINT_STOP_GRACE_PERIOD)
            logger.info("Device plugin grace period expired", extra=kv(resource=resource))
            self._changed()

    def _update_devices(self, resource: str, devices: Sequence[dp.Device]) -> None:
        state = self._resources.setdefault(resource, _Resource())
        new = {d.id: d.health for d in devices}
        if new == state.devices:
            return
        state.devices = new
        self._reports[resource] += 1
        self._report_wanted.set()
        self._changed()
        self._mark_dirty()

    def _disconnected(self, resource: str, endpoint: Endpoint | None) -> None:
        """The plugin's stream ended: its devices are unhealthy now, its capacity lasts the grace period."""
        state = self._resources.get(resource)
        if state is None or state.endpoint is not endpoint:
            return
        logger.info("Device plugin disconnected", extra=kv(resource=resource))
        state.endpoint, state.stopped_at = None, trio.current_time()
        state.devices = dict.fromkeys(state.devices, UNHEALTHY)
        self._changed()
        self._mark_dirty()

    def capacity(self) -> tuple[dict[str, str], dict[str, str]]:
        """(capacity, allocatable) of the device plugin resources, as node status quantities."""
        now = trio.current_time()
        capacity: dict[str, str] = {}
        allocatable: dict[str, str] = {}
        for resource, state in self._resources.items():
            expired = state.stopped_at is not None and now - state.stopped_at >= ENDPOINT_STOP_GRACE_PERIOD
            capacity[resource] = "0" if expired else str(len(state.devices))
            allocatable[resource] = "0" if expired else str(len(state.healthy()))
        return capacity, allocatable

    # --- admission ---------------------------------------------------------------------------------

    def _is_plugin_resource(self, resource: str) -> bool:
        return resource in self._resources or resource in self._pods.resources()

    def admit(self, pod: Pod, active: Iterable[Pod], *, sources_ready: bool = True) -> AdmitResult | None:
        """Choose the devices of ``pod``'s containers, or say why not (Go's resource allocator admit
        handler). ``active``: the other admitted pods; once every pod source has spoken, devices of pods
        not among them are released first."""
        spec = pod.spec
        containers = [*(spec.init_containers or ()), *(spec.containers or ())] if spec else []
        if not any(self._is_plugin_resource(r) for c in containers for r in _limits(c)):
            return None
        if sources_ready:
            gone = self._pods.pods() - {p.uid for p in active} - {pod.uid}
            if gone:
                self._pods.remove_pods(gone)
        try:
            self._allocate_pod(pod)
        except AllocationError as err:
            self._pods.remove_pods([pod.uid])
            self._mark_dirty()
            message = f"Allocate failed due to {err}, which is unexpected"
            logger.warning("Device allocation failed", extra=kv(pod=kobj(pod), uid=pod.uid, err=str(err)))
            return AdmitResult(UNEXPECTED_ADMISSION_ERROR, message)
        self._mark_dirty()
        return None

    def _allocate_pod(self, pod: Pod) -> None:
        spec = pod.spec
        assert spec is not None
        reuse: dict[str, set[str]] = {}
        for container in spec.init_containers or ():
            self._allocate_container(pod.uid, container, reuse)
            held = self._pods.container(pod.uid, container.name or "")
            for resource, entry in held.items():
                if container.restart_policy == "Always":  # a sidecar keeps its devices
                    reuse.get(resource, set()).difference_update(entry.device_ids)
                else:
                    reuse.setdefault(resource, set()).update(entry.device_ids)
        for container in spec.containers or ():
            self._allocate_container(pod.uid, container, reuse)
            for resource, entry in self._pods.container(pod.uid, container.name or "").items():
                reuse.get(resource, set()).difference_update(entry.device_ids)

    def _allocate_container(self, uid: str, container: Container, reuse: dict[str, set[str]]) -> None:
        name = container.name or ""
        for resource, required in sorted(_limits(container).items()):
            if not self._is_plugin_resource(resource):
                continue
            chosen = self._devices_to_allocate(uid, name, resource, required, reuse.get(resource, set()))
            if chosen:
                self._pods.insert(uid, name, resource, DeviceEntry(chosen))

    def _devices_to_allocate(
        self, uid: str, container: str, resource: str, required: int, reusable: set[str]
    ) -> tuple[str, ...]:
        """Go ``devicesToAllocate``: the devices to give (empty: it already has them)."""
        held = self._pods.get(uid, container, resource)
        if held is not None:
            if len(held.device_ids) != required:
                raise AllocationError(
                    f'pod "{uid}" container "{container}" changed request for resource "{resource}" '
                    f"from {len(held.device_ids)} to {required}"
                )
            return ()  # already given (a restart, or a pod re-admitted after a kubelet restart)
        state = self._resources.get(resource)
        if state is None:
            raise AllocationError(f"cannot allocate unregistered device {resource}")
        healthy = state.healthy()
        if not healthy:
            raise AllocationError(f"no healthy devices present; cannot allocate unhealthy devices {resource}")
        chosen = sorted(reusable & healthy)[:required]
        needed = required - len(chosen)
        if needed == 0:
            return tuple(chosen)
        available = sorted(healthy - self._pods.in_use(resource) - set(chosen))
        if len(available) < needed:
            raise AllocationError(
                f"requested number of devices unavailable for {resource}. "
                f"Requested: {needed}, Available: {len(available)}"
            )
        return (*chosen, *available[:needed])

    # --- container start ---------------------------------------------------------------------------

    async def container_options(self, pod: Pod, container: Container) -> DeviceRunOptions:
        """What the plugins add to ``container``'s config; calls ``Allocate`` (and
        ``PreStartContainer``) as needed. Raises :class:`AllocationError`: the start fails and is retried."""
        name = container.name or ""
        entries = self._pods.container(pod.uid, name)
        if not entries:
            return DeviceRunOptions()
        responses: list[tuple[str, dp.ContainerAllocateResponse]] = []
        allocated = False
        for resource, entry in sorted(entries.items()):
            state = self._resources.get(resource)
            endpoint = state.endpoint if state is not None else None
            if entry.response is None:
                if endpoint is None:
                    raise AllocationError(f"unknown Device Plugin {resource}")
                await self._allocate(pod, name, resource, entry, endpoint)
                allocated = True
            if endpoint is not None and endpoint.options.pre_start_required:
                try:
                    with trio.fail_after(PLUGIN_CALL_TIMEOUT):
                        await endpoint.pre_start_container(entry.device_ids)
                except (PluginCallError, trio.TooSlowError) as err:
                    raise AllocationError(
                        f"device plugin PreStartContainer rpc failed with err: {err}"
                    ) from err
            assert entry.response is not None
            responses.append((resource, entry.response))
        if allocated:  # on disk before the container runs with them
            await self._write_checkpoint()
        return run_options(responses)

    async def _allocate(
        self, pod: Pod, container: str, resource: str, entry: DeviceEntry, endpoint: Endpoint
    ) -> None:
        try:
            with trio.fail_after(PLUGIN_CALL_TIMEOUT):
                if endpoint.options.get_preferred_allocation_available:
                    self._prefer(resource, entry, await self._preferred(resource, entry, endpoint))
                entry.response = await endpoint.allocate(entry.device_ids)
        except trio.TooSlowError as err:
            raise AllocationError(f"device plugin {resource} did not answer Allocate in time") from err
        except PluginCallError as err:
            raise AllocationError(str(err)) from err
        logger.info(
            "Allocated devices",
            extra=kv(
                pod=kobj(pod),
                uid=pod.uid,
                container=container,
                resource=resource,
                devices=truncate(",".join(entry.device_ids)),  # the plugin's IDs, any length
            ),
        )

    async def _preferred(self, resource: str, entry: DeviceEntry, endpoint: Endpoint) -> list[str]:
        state = self._resources[resource]
        free = state.healthy() - self._pods.in_use(resource)
        available = sorted(free | set(entry.device_ids))
        return await endpoint.preferred_allocation(available, [], len(entry.device_ids))

    def _prefer(self, resource: str, entry: DeviceEntry, preferred: Sequence[str]) -> None:
        """Take the plugin's choice when it is still free (the awaited call let others allocate)."""
        state = self._resources.get(resource)
        if state is None or len(set(preferred)) != len(entry.device_ids):
            return
        free = state.healthy() - (self._pods.in_use(resource) - set(entry.device_ids))
        if set(preferred) <= free:
            entry.device_ids = tuple(preferred)

    # --- what is held ------------------------------------------------------------------------------

    def update_allocated_devices(self) -> None:
        """Release the devices of pods no longer active, once every pod source has spoken."""
        if self.active_pods is None or not self.sources_ready():
            return
        gone = self._pods.pods() - {p.uid for p in self.active_pods()}
        if gone:
            logger.info("Releasing the devices of pods no longer active", extra=kv(pods=sorted(gone)))
            self._pods.remove_pods(gone)
            self._mark_dirty()

    def container_devices(self, uid: str, container: str) -> dict[str, tuple[str, ...]]:
        """resource → device IDs held by one container (the pod resources API reads it)."""
        return {r: e.device_ids for r, e in self._pods.container(uid, container).items()}

    def allocatable_devices(self) -> dict[str, tuple[str, ...]]:
        """resource → the healthy device IDs."""
        return {r: tuple(sorted(s.healthy())) for r, s in self._resources.items()}
