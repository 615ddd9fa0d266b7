"""The allocation manager (Go: ``pkg/kubelet/allocation/allocation_manager.go``, ``handlers.go``).

Since in-place pod resize, a pod's *allocated* resources are kept apart from its spec: admission sets them
from the spec (``add_pod``); afterwards a spec whose containers' resources differ from the allocation is a
*pending resize*. The kubelet runs the pod with its allocated resources (:meth:`update_pod_from_allocation`
before each sync), so nothing changes on the node until a resize is admitted.

A resize is admitted as a pod is, against the node's allocatable less the other active pods' *allocated*
requests (the resize admit handler first, then the kubelet's admission). The outcome is a
``PodResizePending`` condition: ``Infeasible`` (the resize admit handler: a Guaranteed pod's CPU under the
static CPU manager policy, memory under the static memory manager policy, swap) or ``Deferred`` (any other
refusal, with its message: "Node didn't have enough resource: cpu, requested: ..."), or, once admitted, the
allocation is updated and checkpointed and ``PodResizeInProgress`` is set until the runtime manager has
actuated it. Deferred resizes are retried, in Go's order (resizes that do not increase requests first, then
higher priority, then Guaranteed before other QoS classes, then the oldest pending first), whenever
resources may have freed up (a pod removed or terminated, another pod resized or added) and every 3 minutes
(the first after 30 s).

Go keeps the resize conditions in the status manager; here they live with the allocation manager, which
the status generation asks for them (:meth:`resize_conditions`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import attrs
import trio

from kubelet_trio.allocation.state import (
    ALLOCATED_PODS_STATE_FILE,
    ResourceState,
    go_json,
    requirements_equal,
    requirements_json,
)
from kubelet_trio.api import Pod
from kubelet_trio.api.container import Container, ResourceRequirements
from kubelet_trio.api.status import PodCondition
from kubelet_trio.cm.allocatable import NodeAllocatable
from kubelet_trio.lifecycle.predicate import AdmitResult, NodeView, fits, pod_requests
from kubelet_trio.logs import kobj, kv
from kubelet_trio.status.qos import GUARANTEED, pod_qos

__all__ = [
    "INITIAL_RETRY_DELAY",
    "POD_RESIZE_IN_PROGRESS",
    "POD_RESIZE_PENDING",
    "REASON_DEFERRED",
    "REASON_ERROR",
    "REASON_INFEASIBLE",
    "RETRY_DELAY",
    "TRIGGER_PODS_ADDED",
    "TRIGGER_PODS_REMOVED",
    "TRIGGER_POD_RESIZED",
    "TRIGGER_POD_TERMINATED",
    "TRIGGER_POD_UPDATED",
    "AllocationManager",
    "ResizeAdmitFunc",
    "allocated_pods_view",
    "is_resizable_container",
    "on_pod_admitted",
    "on_pod_reconciled",
    "on_pod_updated",
    "on_pods_removed",
    "record_resize_error",
    "resize_policy",
    "standalone_resize_fit",
    "track_resize_in_progress",
    "update_pod_from_allocation",
]

logger = logging.getLogger(__name__)

POD_RESIZE_PENDING = "PodResizePending"
POD_RESIZE_IN_PROGRESS = "PodResizeInProgress"
REASON_DEFERRED = "Deferred"
REASON_INFEASIBLE = "Infeasible"
REASON_ERROR = "Error"  # PodResizeInProgress when actuating failed

INITIAL_RETRY_DELAY = 30.0
RETRY_DELAY = 180.0

TRIGGER_POD_RESIZED = "pod_resized"
TRIGGER_POD_UPDATED = "pod_updated"
TRIGGER_PODS_ADDED = "pods_added"
TRIGGER_PODS_REMOVED = "pods_removed"
TRIGGER_POD_TERMINATED = "pod_terminated"
TRIGGER_PERIODIC = "periodic_retry"

#: (pod with the resize applied, the other active pods with their allocated resources) -> a refusal
ResizeAdmitFunc = Callable[[Pod, Sequence[Pod]], AdmitResult | None]


def is_resizable_container(container: Container, *, init: bool) -> bool:
    """Go ``IsResizableContainer``: app containers, and init containers only when restartable (sidecars;
    ``InPlacePodVerticalScalingInitContainers`` is off in 1.36)."""
    return container.is_sidecar if init else True


def resize_policy(container: Container, resource: str) -> str:
    """The container's ``resizePolicy`` restart policy for ``resource`` (default ``NotRequired``)."""
    for policy in container.extra.get("resizePolicy") or ():
        if isinstance(policy, Mapping) and policy.get("resourceName") == resource:
            return str(policy.get("restartPolicy") or "NotRequired")
    return "NotRequired"


def _resizable(pod: Pod) -> Iterable[tuple[Container, bool]]:
    spec = pod.spec
    for container in (spec.init_containers if spec else None) or ():
        if is_resizable_container(container, init=True):
            yield container, True
    for container in (spec.containers if spec else None) or ():
        yield container, False


def allocation_from_pod(pod: Pod) -> dict[str, ResourceRequirements]:
    """Go ``allocationFromPod``: each resizable container's resources."""
    return {c.name or "": c.resources or ResourceRequirements() for c, _ in _resizable(pod)}


def update_pod_from_allocation(
    pod: Pod, allocated: Mapping[str, ResourceRequirements] | None
) -> tuple[Pod, bool]:
    """Go ``updatePodFromAllocation``: the pod with its containers' allocated resources, and whether any
    differed from the spec."""
    if allocated is None or pod.spec is None:
        return pod, False
    updated = False

    def replace(containers: Sequence[Container] | None) -> tuple[Container, ...] | None:
        nonlocal updated
        if containers is None:
            return None
        result = []
        for container in containers:
            alloc = allocated.get(container.name or "")
            if alloc is not None and not requirements_equal(container.resources, alloc):
                container = attrs.evolve(container, resources=alloc)
                updated = True
            result.append(container)
        return tuple(result)

    spec = attrs.evolve(
        pod.spec, containers=replace(pod.spec.containers), init_containers=replace(pod.spec.init_containers)
    )
    if not updated:
        return pod, False
    return attrs.evolve(pod, spec=spec), True


@attrs.define(eq=False)
class _Conditions:
    pending: PodCondition | None = None
    in_progress: PodCondition | None = None
    pending_since: float = 0.0  # trio time of the pending condition's last transition, for ordering


def resize_message(pod: Pod, generation: int, error: str, prefix: str) -> str:
    """Go ``events.podResizeMessage``: ``<prefix>: <JSON of every container's resources>``."""
    summary: dict[str, Any] = {}
    spec = pod.spec
    for key, containers in (
        ("initContainers", (spec.init_containers if spec else None) or ()),
        ("containers", (spec.containers if spec else None) or ()),
    ):
        if containers:
            summary[key] = [
                {"name": c.name or "", "resources": requirements_json(c.resources or ResourceRequirements())}
                for c in containers
            ]
    summary["generation"] = generation
    if error:
        summary["error"] = error
    return f"{prefix}: {go_json(summary)}"


def _generation(pod: Pod) -> int:
    return (pod.metadata.generation if pod.metadata else None) or 0


@attrs.define(eq=False, kw_only=True)
class AllocationManager:
    """Allocated resources, resize admission and retries for one node.

    Args:
        checkpoint_dir: where ``allocated_pods_state`` is kept (the root dir; None: in memory only).
        admit: resize admission beyond the manager's own checks (the node's fit); None admits.
        active_pods: the pods admitted and not terminating (Go ``GetActivePods``).
        pod_by_uid: the desired pod by UID.
        trigger_sync: asks the pod's worker to sync (after a resize was allocated or its conditions
            changed).
        now: the wall time as RFC 3339 text, for the conditions' times.
        events: ``(pod, type, reason, message)`` for ResizeStarted/ResizeDeferred/ResizeInfeasible.
        cpu_manager_policy, memory_manager_policy: the node's policies (``static`` makes resizes of
            Guaranteed pods Infeasible).
    """

    checkpoint_dir: str | None
    admit: ResizeAdmitFunc | None = None
    active_pods: Callable[[], Sequence[Pod]] = lambda: ()
    pod_by_uid: Callable[[str], Pod | None] = lambda uid: None
    trigger_sync: Callable[[Pod], None] = lambda pod: None
    now: Callable[[], str] = lambda: ""
    events: Callable[[Pod, str, str, str], None] | None = None
    cpu_manager_policy: str = "none"
    memory_manager_policy: str = "None"
    sources_ready: Callable[[], bool] = lambda: True

    state: ResourceState = attrs.field(init=False)
    _conditions: dict[str, _Conditions] = attrs.field(init=False, factory=dict)
    _pending: list[str] = attrs.field(init=False, factory=list)
    _retry_at: float = attrs.field(init=False, default=INITIAL_RETRY_DELAY)
    _wakeup: trio.Event = attrs.field(init=False, factory=trio.Event)

    def __attrs_post_init__(self) -> None:
        self.state = ResourceState(self.checkpoint_dir, ALLOCATED_PODS_STATE_FILE)

    # -- allocation -------------------------------------------------------------------------------

    def update_pod_from_allocation(self, pod: Pod) -> tuple[Pod, bool]:
        return update_pod_from_allocation(pod, self.state.get_pod(pod.uid))

    def set_allocated_resources(self, pod: Pod) -> None:
        self.state.set_pod(pod.uid, allocation_from_pod(pod))

    def add_pod(self, pod: Pod) -> Pod:
        """Admission accepted ``pod``: its allocation is what was allocated before (a kubelet restart) or
        else its spec. Returns the pod with its allocated resources (Go ``AddPod``; the admission itself
        stays the kubelet's)."""
        allocated, _ = self.update_pod_from_allocation(pod)
        self.set_allocated_resources(allocated)
        return allocated

    def allocated_pods(self, pods: Iterable[Pod]) -> list[Pod]:
        """Go ``getAllocatedPods``: each pod with its allocated resources."""
        return [self.update_pod_from_allocation(p)[0] for p in pods]

    def remove_pod(self, uid: str) -> None:
        self.state.remove_pod(uid)
        self._conditions.pop(uid, None)

    def remove_orphaned_pods(self, remaining: Iterable[str]) -> None:
        keep = set(remaining)
        self.state.remove_orphaned_pods(keep)
        for uid in [u for u in self._conditions if u not in keep]:
            del self._conditions[uid]

    # -- conditions (Go: the status manager's) ------------------------------------------------------

    def resize_conditions(self, uid: str) -> list[PodCondition]:
        held = self._conditions.get(uid)
        if held is None:
            return []
        return [c for c in (held.pending, held.in_progress) if c is not None]

    def _updated(
        self, type_: str, old: PodCondition | None, reason: str, message: str, gen: int
    ) -> PodCondition:
        now = self.now()
        transition = now if old is None or (old.reason or "") != reason else old.last_transition_time
        return PodCondition(
            type=type_,
            status="True",
            observed_generation=gen or None,
            last_probe_time=now,
            last_transition_time=transition,
            reason=reason or None,
            message=message or None,
        )

    def set_pending(self, uid: str, reason: str, message: str, generation: int) -> bool:
        """Go ``SetPodResizePendingCondition``: any reason but Infeasible is Deferred; True when the reason
        or the generation changed."""
        if reason != REASON_INFEASIBLE:
            reason = REASON_DEFERRED
        held = self._conditions.setdefault(uid, _Conditions())
        previous = held.pending
        held.pending = self._updated(POD_RESIZE_PENDING, previous, reason, message, generation)
        if previous is None or previous.reason != reason:
            held.pending_since = trio.current_time()
        if previous is None:
            return True
        return previous.reason != reason or previous.observed_generation != held.pending.observed_generation

    def set_in_progress(self, uid: str, reason: str = "", message: str = "", generation: int = 0) -> bool:
        """Go ``SetPodResizeInProgressCondition``: an existing condition keeps its generation (and its
        reason and message unless new ones are given). True when it changed."""
        held = self._conditions.setdefault(uid, _Conditions())
        previous = held.in_progress
        if previous is not None:
            if not reason and not message:
                reason, message = previous.reason or "", previous.message or ""
            generation = previous.observed_generation or 0
        held.in_progress = self._updated(POD_RESIZE_IN_PROGRESS, previous, reason, message, generation)
        if previous is None:
            return True
        return (previous.reason, previous.message, previous.observed_generation) != (
            held.in_progress.reason,
            held.in_progress.message,
            held.in_progress.observed_generation,
        )

    def clear_pending(self, uid: str) -> None:
        held = self._conditions.get(uid)
        if held is not None:
            held.pending = None

    def clear_in_progress(self, uid: str) -> int | None:
        """Returns the cleared condition's generation, or None when there was none."""
        held = self._conditions.get(uid)
        if held is None or held.in_progress is None:
            return None
        generation = held.in_progress.observed_generation or 0
        held.in_progress = None
        return generation

    def is_deferred(self, uid: str) -> bool:
        held = self._conditions.get(uid)
        return held is not None and held.pending is not None and held.pending.reason == REASON_DEFERRED

    def is_infeasible(self, uid: str) -> bool:
        held = self._conditions.get(uid)
        return held is not None and held.pending is not None and held.pending.reason == REASON_INFEASIBLE

    def backfill(self, pods: Iterable[Pod]) -> None:
        """Go ``BackfillPodResizeConditions``: after a restart, the conditions the API server shows."""
        for pod in pods:
            for condition in (pod.status.conditions if pod.status else None) or ():
                if condition.type == POD_RESIZE_PENDING:
                    self._conditions.setdefault(pod.uid, _Conditions()).pending = condition
                elif condition.type == POD_RESIZE_IN_PROGRESS:
                    self._conditions.setdefault(pod.uid, _Conditions()).in_progress = condition

    # -- resize admission ---------------------------------------------------------------------------

    def _admit_resize(self, pod: Pod) -> AdmitResult | None:
        """Go ``podResizesAdmitHandler`` then the kubelet's handlers, against the other active pods'
        allocations."""
        if pod_qos(pod) == GUARANTEED:
            if self.cpu_manager_policy == "static" and self._request_changed(pod, "cpu"):
                return AdmitResult(
                    REASON_INFEASIBLE,
                    'Resize is infeasible for Guaranteed Pods alongside CPU Manager policy "static"',
                )
            if self.memory_manager_policy == "Static" and self._request_changed(pod, "memory"):
                return AdmitResult(
                    REASON_INFEASIBLE,
                    'Resize is infeasible for Guaranteed Pods alongside Memory Manager policy "Static"',
                )
        if self.admit is None:
            return None
        others = [p for p in self.allocated_pods(self.active_pods()) if p.uid != pod.uid]
        return self.admit(pod, others)

    def _request_changed(self, pod: Pod, resource: str) -> bool:
        for container, _ in _resizable(pod):
            allocated = self.state.get_container(pod.uid, container.name or "") or ResourceRequirements()
            wanted = (container.resources.requests if container.resources else None) or {}
            if wanted.get(resource) != (allocated.requests or {}).get(resource):
                return True
        return False

    def handle_resize(self, pod: Pod) -> bool:
        """Go ``handlePodResourcesResize``: True when the resize was allocated."""
        _, updated = self.update_pod_from_allocation(pod)
        if not updated:
            self.clear_pending(pod.uid)
            return False
        refusal = self._admit_resize(pod)
        generation = _generation(pod)
        if refusal is None:
            self.set_allocated_resources(pod)
            self.clear_pending(pod.uid)
            self.clear_in_progress(pod.uid)
            self.set_in_progress(pod.uid, "", "", generation)
            logger.info("pod resize allocated", extra=kv(pod=kobj(pod), uid=pod.uid, generation=generation))
            self._event(
                pod, "Normal", "ResizeStarted", resize_message(pod, generation, "", "Pod resize started")
            )
            return True
        logger.info(
            "pod resize admission denied",
            extra=kv(pod=kobj(pod), uid=pod.uid, reason=refusal.reason, message=refusal.message),
        )
        if self.set_pending(pod.uid, refusal.reason, refusal.message, generation):
            infeasible = refusal.reason == REASON_INFEASIBLE
            reason = REASON_INFEASIBLE if infeasible else REASON_DEFERRED
            message = resize_message(pod, generation, refusal.message, f"Pod resize {reason}")
            self._event(pod, "Warning", f"Resize{reason}", message)
        return False

    def _event(self, pod: Pod, type_: str, reason: str, message: str) -> None:
        if self.events is not None:
            self.events(pod, type_, reason, message)

    # -- pending resizes ----------------------------------------------------------------------------

    def push_pending_resize(self, uid: str) -> None:
        if uid not in self._pending:
            self._pending.append(uid)
        self._sort_pending()

    def has_pending_resizes(self) -> bool:
        return bool(self._pending)

    def _increasing(self, pod: Pod) -> bool:
        allocated, updated = self.update_pod_from_allocation(pod)
        if not updated:
            return False
        old, new = pod_requests(allocated), pod_requests(pod)
        return any(new.get(r, 0) > old.get(r, 0) for r in ("cpu", "memory"))

    def _sort_pending(self) -> None:
        pods = [p for uid in self._pending if (p := self.pod_by_uid(uid)) is not None]

        def key(pod: Pod) -> tuple[Any, ...]:
            held = self._conditions.get(pod.uid)
            pending = held is not None and held.pending is not None
            return (
                self._increasing(pod),
                -((pod.spec.priority if pod.spec else None) or 0),
                pod_qos(pod) != GUARANTEED,
                not pending,  # a pod without a pending condition goes after those with one
                held.pending_since if held is not None and pending else 0.0,
            )

        self._pending = [p.uid for p in sorted(pods, key=key)]

    def retry_pending_resizes(self, trigger: str) -> list[Pod]:
        """Go ``retryPendingResizes``: each pending resize in order; returns the pods now allocated."""
        if not self.sources_ready():
            self._retry_at = trio.current_time() + INITIAL_RETRY_DELAY
            return []
        self._retry_at = trio.current_time() + RETRY_DELAY
        still_pending: list[str] = []
        allocated: list[Pod] = []
        for uid in self._pending:
            pod = self.pod_by_uid(uid)
            if pod is None:
                continue
            before = self.resize_conditions(uid)
            try:
                resized = self.handle_resize(pod)
            except Exception as err:
                logger.error("handling pod resize failed", extra=kv(pod=kobj(pod), uid=uid, error=err))
                still_pending.append(uid)
                continue
            if self.is_deferred(uid):
                still_pending.append(uid)
            elif not self.is_infeasible(uid):
                allocated.append(pod)
            if resized or before != self.resize_conditions(uid):
                self.trigger_sync(pod)
        if allocated:
            logger.info(
                "pending resizes allocated", extra=kv(trigger=trigger, pods=[kobj(p) for p in allocated])
            )
        self._pending = still_pending
        return allocated

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Retry the deferred resizes every 3 minutes (the first after 30 s), as Go's ticker."""
        self._retry_at = trio.current_time() + INITIAL_RETRY_DELAY
        task_status.started()
        while True:
            await trio.sleep_until(self._retry_at)
            if trio.current_time() >= self._retry_at:
                self.retry_pending_resizes(TRIGGER_PERIODIC)


# -- the kubelet's calls (Go: kubelet.go HandlePod*, SyncPod), kept here so kubelet.py stays small -------


def on_pod_admitted(manager: AllocationManager, pod: Pod) -> None:
    """Go ``HandlePodAdditions`` after ``AddPod``: the allocation is set; a pod whose spec differs from
    what was allocated before a restart has a pending resize; its resize conditions are taken from the
    API status until re-evaluated (Go ``BackfillPodResizeConditions``)."""
    if not manager.resize_conditions(pod.uid):
        manager.backfill([pod])
    manager.add_pod(pod)
    if manager.update_pod_from_allocation(pod)[1]:
        manager.push_pending_resize(pod.uid)
        manager.retry_pending_resizes(TRIGGER_PODS_ADDED)


def on_pod_updated(manager: AllocationManager, old: Pod | None, pod: Pod) -> None:
    """Go ``HandlePodUpdates``: a changed spec resize is queued and tried at once; a reverted one clears
    its pending condition."""
    if old is None or _container_resources(old) == _container_resources(pod):
        return
    if manager.state.get_pod(pod.uid) is None:
        return  # not admitted (yet): admission allocates from the spec
    if manager.update_pod_from_allocation(pod)[1]:
        manager.push_pending_resize(pod.uid)
        manager.retry_pending_resizes(TRIGGER_POD_UPDATED)
    else:
        manager.clear_pending(pod.uid)


def _container_resources(pod: Pod) -> list[tuple[str, ResourceRequirements | None]]:
    return [(c.name or "", c.resources) for c, _ in _resizable(pod)]


def on_pods_removed(manager: AllocationManager, pods: Iterable[Pod]) -> None:
    """Go ``HandlePodRemoves``: the allocation goes, and pending resizes may fit now."""
    with manager.state.batch():
        for pod in pods:
            manager.remove_pod(pod.uid)
    manager.retry_pending_resizes(TRIGGER_PODS_REMOVED)


def on_pod_reconciled(manager: AllocationManager, old: Pod | None, pod: Pod) -> None:
    """Go ``HandlePodReconcile``: a pod became terminal, its resources are free."""
    if old is not None and pod.is_terminal and not old.is_terminal and manager.has_pending_resizes():
        manager.retry_pending_resizes(TRIGGER_POD_TERMINATED)


def track_resize_in_progress(manager: AllocationManager, pod: Pod, in_progress: bool) -> None:
    """Go ``SyncPod``: while the allocated resources are not all actuated, ``PodResizeInProgress``; once
    they are, it is cleared (a ResizeCompleted event)."""
    if in_progress:
        manager.set_in_progress(pod.uid, "", "", _generation(pod))
        return
    generation = manager.clear_in_progress(pod.uid)
    if generation is not None:
        message = resize_message(pod, generation, "", "Pod resize completed")
        manager._event(pod, "Normal", "ResizeCompleted", message)


def record_resize_error(manager: AllocationManager, pod: Pod, message: str) -> None:
    """Go ``SyncPod``: a failed in-place resize shows as ``PodResizeInProgress`` with reason Error (and a
    ResizeError event when that changed the condition)."""
    if manager.set_in_progress(pod.uid, REASON_ERROR, message, _generation(pod)):
        generation = next(
            (
                c.observed_generation or 0
                for c in manager.resize_conditions(pod.uid)
                if c.type == POD_RESIZE_IN_PROGRESS
            ),
            0,
        )
        manager._event(
            pod, "Warning", "ResizeError", resize_message(pod, generation, message, "Pod resize error")
        )


def allocated_pods_view(
    manager: AllocationManager, active_pods: Callable[[], list[Pod]]
) -> Callable[[], list[Pod]]:
    """``active_pods`` with their allocated resources, computed once (Go ``getAllocatedPods``)."""
    cached: list[Pod] | None = None

    def view() -> list[Pod]:
        nonlocal cached
        if cached is None:
            cached = manager.allocated_pods(active_pods())
        return cached

    return view


def standalone_resize_fit(node_name: str, allocatable: NodeAllocatable | None) -> ResizeAdmitFunc | None:
    """A kubelet without an API server fits resizes against this machine's allocatable CPU and memory
    (Go's standalone kubelet: its initial Node), with the predicates' reasons and messages."""
    if allocatable is None:
        return None
    node = NodeView(
        name=node_name,
        allocatable={"cpu": f"{allocatable.milli_cpu}m", "memory": str(allocatable.memory)},
    )

    def fit(pod: Pod, others: Sequence[Pod]) -> AdmitResult | None:
        return fits(pod, others, node)

    return fit
