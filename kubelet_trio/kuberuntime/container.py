"""Container config generation, and starting and killing one container (Go: ``kuberuntime_container.go``).

Seams:

- :class:`RunContainerOptions` / ``RunOptionsProvider`` — what the kubelet adds to a container (env
  from ``valueFrom``/``envFrom``, volume mounts, ``$(VAR)`` expansion of command and args, resources);
  the kubelet's is :class:`kubelet_trio.kuberuntime.mounts.RunOptionsGenerator`. The default provider,
  :func:`plain_run_options`, passes ``env[].value`` through and nothing else; a provider error (and a
  ``runAsNonRoot`` violation) becomes ``CreateContainerConfigError``.
- :class:`HookRunner` — postStart / preStop handlers (exec, httpGet, sleep). Without one, hooks are not
  run. preStop runs bounded by the grace period and its duration is subtracted from it; a postStart
  failure kills the container (``FailedPostStartHook``) and fails the start with ``PostStartHookError``.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Protocol

import attrs
import trio

from kubelet_trio.api import Container, EphemeralContainer, Lifecycle, ObjectMeta, Pod, PodSpec
from kubelet_trio.container.types import ContainerState, ContainerStatus, PodStatus, RuntimeContainer
from kubelet_trio.cri import errors as cri_errors
from kubelet_trio.cri.gen.runtime import v1 as pb
from kubelet_trio.fsio import RunSync, run_in_thread
from kubelet_trio.kuberuntime.actions import (
    REASON_FAILED_POST_START_HOOK,
    REASON_LIVENESS_PROBE,
    REASON_STARTUP_PROBE,
)
from kubelet_trio.kuberuntime.images import EventSink, ImageError, ImageManager
from kubelet_trio.kuberuntime.labels import (
    container_annotations,
    container_labels,
    parse_container_annotations,
    parse_container_labels,
)
from kubelet_trio.kuberuntime.logs import (
    container_log_path,
    container_logs_directory,
    make_dirs,
    remove_container_log,
    restart_count_from_log_dir,
)
from kubelet_trio.kuberuntime.resources import linux_container_resources
from kubelet_trio.kuberuntime.security import (
    ImageUser,
    linux_container_security_context,
    verify_run_as_non_root,
)
from kubelet_trio.logs import kobj, kv

if TYPE_CHECKING:
    from kubelet_trio.api import LifecycleHandler
    from kubelet_trio.credentialprovider import PullSecret
    from kubelet_trio.cri.runtime import Runtime

__all__ = [
    "ERR_CREATE_CONTAINER",
    "ERR_CREATE_CONTAINER_CONFIG",
    "ERR_POST_START_HOOK",
    "ERR_RUN_CONTAINER",
    "MINIMUM_GRACE_PERIOD_SECONDS",
    "ContainerLifecycle",
    "HookRunner",
    "RunContainerOptions",
    "RunOptionsProvider",
    "StartContainerError",
    "TerminationOrdering",
    "find_container_spec",
    "format_pod",
    "generate_container_config",
    "plain_run_options",
    "termination_grace_period",
]

logger = logging.getLogger(__name__)

MINIMUM_GRACE_PERIOD_SECONDS = 2  # "a minimal shutdown window for avoiding unnecessary SIGKILLs"
ERR_CREATE_CONTAINER_CONFIG = "CreateContainerConfigError"
ERR_CREATE_CONTAINER = "CreateContainerError"
ERR_RUN_CONTAINER = "RunContainerError"
ERR_POST_START_HOOK = "PostStartHookError"


def format_pod(pod: Pod) -> str:
    """Go's ``format.Pod``: ``name_namespace(uid)``."""
    return f"{pod.name}_{pod.namespace}({pod.uid})"


def _pod_ctx(pod: Pod) -> dict[str, object]:
    return {"pod": kobj(pod), "uid": pod.uid}


@attrs.frozen
class RunContainerOptions:
    """What the kubelet adds to a container beyond its spec (Go: ``RunContainerOptions``)."""

    envs: tuple[tuple[str, str], ...] = ()
    mounts: tuple[pb.Mount, ...] = ()
    command: tuple[str, ...] | None = None  # None: the spec's (after $(VAR) expansion, when done)
    args: tuple[str, ...] | None = None
    linux_resources: pb.LinuxContainerResources | None = None  # None: from the spec, no node capacity
    #: ``(reason, message)`` warnings about the options, recorded as events on the pod
    warnings: tuple[tuple[str, str], ...] = ()
    # from device plugins' Allocate answers: host devices, annotations (the kubelet's own win), CDI names
    devices: tuple[pb.Device, ...] = ()
    annotations: tuple[tuple[str, str], ...] = ()
    cdi_devices: tuple[str, ...] = ()


RunOptionsProvider = Callable[[Pod, Container, str], Awaitable[RunContainerOptions]]
"""``(pod, container, pod_ip) → options``; raising fails the start with CreateContainerConfigError."""


def _plain_envs(container: Container) -> tuple[tuple[str, str], ...]:
    return tuple((e.name or "", e.value or "") for e in container.env or () if e.value_from is None)


async def plain_run_options(pod: Pod, container: Container, pod_ip: str) -> RunContainerOptions:
    """Plain ``env[].value`` variables only; ``valueFrom``/``envFrom``/mounts/expansion come later."""
    return RunContainerOptions(envs=_plain_envs(container))


class HookRunner(Protocol):
    async def run(self, pod: Pod, container: Container, container_id: str, handler: LifecycleHandler) -> None:
        """Run a lifecycle handler; raise on failure. Cancellation bounds it."""
        ...


class StartContainerError(Exception):
    """Starting a container failed; ``reason`` is its waiting reason (ErrImagePull, CreateContainerError…)."""

    def __init__(self, reason: str, message: str, backoff_until: float | None = None) -> None:
        super().__init__(f"{reason}: {message}")
        self.reason = reason
        self.message = message
        self.backoff_until = backoff_until


def _linux_container_config(
    pod: Pod, container: Container, options: RunContainerOptions, user: ImageUser | None, target_id: str
) -> pb.LinuxContainerConfig:
    resources = options.linux_resources
    if resources is None:
        resources = linux_container_resources(pod, container)
    return pb.LinuxContainerConfig(
        resources=resources,
        security_context=linux_container_security_context(pod, container, user, target_id=target_id),
    )


def generate_container_config(
    pod: Pod,
    container: Container,
    restart_count: int,
    *,
    image_ref: str,
    node_name: str = "",
    options: RunContainerOptions | None = None,
    image_user: ImageUser | None = None,
    target_id: str = "",
) -> pb.ContainerConfig:
    """The CRI ``ContainerConfig`` of instance ``restart_count`` of ``container``.

    ``image_ref`` is the runtime's image id ``ensure_image_exists`` returned;
    ``user_specified_image`` keeps the spec's spelling. Command and args pass through unexpanded unless
    ``options`` says otherwise. ``image_user`` is who the image runs as (used when the security context
    sets no ``runAsUser``). ``target_id``: the container whose PID namespace an ephemeral container joins.
    """
    opts = options if options is not None else RunContainerOptions(envs=_plain_envs(container))
    command = opts.command if opts.command is not None else tuple(container.command or ())
    args = opts.args if opts.args is not None else tuple(container.args or ())
    return pb.ContainerConfig(
        metadata=pb.ContainerMetadata(name=container.name or "", attempt=restart_count),
        image=pb.ImageSpec(image=image_ref, user_specified_image=container.image or ""),
        command=list(command),
        args=list(args),
        working_dir=container.working_dir or "",
        envs=[pb.KeyValue(key=k, value=v) for k, v in opts.envs],
        mounts=list(opts.mounts),
        devices=list(opts.devices),
        labels=container_labels(container, pod, node_name),
        annotations={**dict(opts.annotations), **container_annotations(container, pod, restart_count)},
        log_path=container_log_path(container.name or "", restart_count),
        stdin=bool(container.stdin),
        stdin_once=bool(container.stdin_once),
        tty=bool(container.tty),
        linux=_linux_container_config(pod, container, opts, image_user, target_id),
        CDI_devices=[pb.CdiDevice(name=name) for name in opts.cdi_devices],
    )


def termination_grace_period(pod: Pod, container: Container | None, reason: str) -> int:
    """``setTerminationGracePeriod``: deletionGracePeriodSeconds, else the spec's (or the probe's, for
    probe kills), else 2."""
    meta, spec = pod.metadata, pod.spec
    if meta is not None and meta.deletion_grace_period_seconds is not None:
        return meta.deletion_grace_period_seconds
    if spec is not None and spec.termination_grace_period_seconds is not None:
        probe = None
        if container is not None and reason == REASON_STARTUP_PROBE:
            probe = container.startup_probe
        elif container is not None and reason == REASON_LIVENESS_PROBE:
            probe = container.liveness_probe
        if probe is not None and probe.termination_grace_period_seconds is not None:
            return probe.termination_grace_period_seconds
        return spec.termination_grace_period_seconds
    return MINIMUM_GRACE_PERIOD_SECONDS


def find_container_spec(pod: Pod, name: str) -> Container | None:
    containers = pod.spec.all_containers() if pod.spec else ()
    return next((c for c in containers if c.name == name), None)


ContainerRef = ContainerStatus | RuntimeContainer


def _prepare_log_dir(log_dir: str, count: bool) -> int | OSError:
    """The restart count the log directory implies (when ``count``; 0 otherwise, or the OSError that
    prevented counting), then the directory made. Raises OSError when it cannot be made."""
    counted: int | OSError = 0
    if count:
        try:
            counted = restart_count_from_log_dir(log_dir)
        except OSError as err:
            counted = err
    make_dirs(log_dir)
    return counted


@attrs.define(eq=False, kw_only=True)
class ContainerLifecycle:
    """Start, kill and remove single containers of a pod; shared by the manager's sync and kill paths."""

    runtime: Runtime
    images: ImageManager
    node_name: str
    pod_logs_dir: str
    events: EventSink | None = None
    hooks: HookRunner | None = None
    run_options: RunOptionsProvider = plain_run_options
    run_sync: RunSync = run_in_thread  # file operations on log directories (see kubelet_trio.fsio)
    # ``(pod uid, container name, container id, pod IP)`` once a container has started (and its postStart
    # hook ran): the probe manager checks it at once
    on_started: Callable[[str, str, str, str], None] | None = None
    # ``(pod uid, container id)`` once StopContainer has returned (the probe manager stops exec'ing)
    on_stopped: Callable[[str, str], None] | None = None

    def event(self, pod: Pod | None, type_: str, reason: str, message: str) -> None:
        if self.events is not None and pod is not None:
            self.events(pod, type_, reason, message)

    # --- start ----------------------------------------------------------------------------------

    async def start_container(
        self,
        pod: Pod,
        container: Container,
        status: PodStatus,
        *,
        sandbox_id: str,
        sandbox_config: pb.PodSandboxConfig,
        pod_ip: str = "",
        pull_secrets: Sequence[PullSecret] = (),
    ) -> str:
        """Ensure the image, create, start, run postStart; return the new container id.

        Raises :class:`StartContainerError`. The restart count continues from the newest known instance
        (+1), or from the largest ``<n>.log`` in the container's log directory when none is known.
        """
        name = container.name or ""
        ctx = {**_pod_ctx(pod), "container": name}
        try:
            ensured = await self.images.ensure_image_exists(
                pod, container, sandbox_config, pull_secrets=pull_secrets
            )
        except ImageError as err:
            self.event(pod, "Warning", "Failed", f"Error: {err.reason}")
            raise StartContainerError(err.reason, err.message, err.backoff_until) from err

        previous = status.find(name)
        log_dir = container_logs_directory(self.pod_logs_dir, pod.namespace, pod.name, pod.uid, name)
        target_id = self._target_id(pod, container, status)
        try:
            image_user = (
                ImageUser.from_image(ensured.image)
                if ensured.image is not None
                else await self._image_user(ensured.ref)
            )
            verify_run_as_non_root(pod, container, image_user)
            options = await self.run_options(pod, container, pod_ip)
            # the restart count from the logs and the log directory: one file-system (thread) hop for both
            counted = await self.run_sync(_prepare_log_dir, log_dir, previous is None)
        except Exception as err:
            self.event(pod, "Warning", "Failed", f"Error: {err}")
            raise StartContainerError(ERR_CREATE_CONTAINER_CONFIG, str(err)) from err
        if previous is not None:
            restart_count = previous.restart_count + 1
        elif isinstance(counted, OSError):
            logger.info("cannot derive restart count from logs", extra=kv(**ctx, dir=log_dir, err=counted))
            restart_count = 0
        else:
            restart_count = counted
        for reason, message in options.warnings:
            self.event(pod, "Warning", reason, message)
        config = generate_container_config(
            pod,
            container,
            restart_count,
            image_ref=ensured.ref,
            node_name=self.node_name,
            options=options,
            image_user=image_user,
            target_id=target_id,
        )

        try:
            container_id = await self.runtime.create_container(sandbox_id, config, sandbox_config)
        except cri_errors.CriError as err:
            self.event(pod, "Warning", "Failed", f"Error: {err.message}")
            raise StartContainerError(ERR_CREATE_CONTAINER, err.message) from err
        self.event(pod, "Normal", "Created", f"Created container: {name}")

        try:
            await self.runtime.start_container(container_id)
        except cri_errors.CriError as err:
            message = err.message.replace(container_id, name)
            self.event(pod, "Warning", "Failed", f"Error: {message}")
            raise StartContainerError(ERR_RUN_CONTAINER, err.message) from err
        self.event(pod, "Normal", "Started", f"Started container {name}")
        # V(4) as Go's start path logs it (the Started event is what operators see)
        logger.debug("container started", extra=kv(**ctx, id=container_id, restart_count=restart_count))

        await self._post_start(pod, container, container_id)
        if self.on_started is not None:
            self.on_started(pod.uid, name, container_id, pod_ip)
        return container_id

    def _target_id(self, pod: Pod, container: Container, status: PodStatus) -> str:
        """The ID of an ephemeral container's ``targetContainerName`` ("" when none is named); a target
        that has no instance is a CreateContainerConfigError (Go: ``getTargetID``)."""
        if not isinstance(container, EphemeralContainer) or not container.target_container_name:
            return ""
        target = status.find(container.target_container_name)
        if target is None:
            message = f"unable to find target container {container.target_container_name}"
            self.event(pod, "Warning", "Failed", f"Error: {message}")
            raise StartContainerError(ERR_CREATE_CONTAINER_CONFIG, message)
        return target.id

    async def _image_user(self, image_ref: str) -> ImageUser:
        """``getImageUser``: who the image runs as (root when it names no user)."""
        return ImageUser.from_image(await self.runtime.image_status(pb.ImageSpec(image=image_ref)))

    async def _post_start(self, pod: Pod, container: Container, container_id: str) -> None:
        handler = container.lifecycle.post_start if container.lifecycle else None
        if handler is None or self.hooks is None:
            return
        try:
            await self.hooks.run(pod, container, container_id, handler)
        except Exception as err:
            logger.warning(
                "postStart hook failed", extra=kv(**_pod_ctx(pod), container=container.name, err=err)
            )
            # The message is not put in the event: it may carry secrets.
            self.event(pod, "Warning", "FailedPostStartHook", "PostStartHook failed")
            ref = RuntimeContainer(id=container_id, name=container.name or "", state=ContainerState.RUNNING)
            try:
                await self.kill_container(
                    pod, ref, None, REASON_FAILED_POST_START_HOOK, "FailedPostStartHook"
                )
            except cri_errors.CriError as kill_err:
                logger.warning(
                    "kill after postStart failure failed", extra=kv(container=container_id, err=kill_err)
                )
            raise StartContainerError(ERR_POST_START_HOOK, str(err)) from err

    # --- kill -----------------------------------------------------------------------------------

    async def _restore_specs(self, container_id: str) -> tuple[Pod, Container] | None:
        """Pod and container specs good enough to kill a container, from its labels and annotations."""
        try:
            response = await self.runtime.container_status(container_id)
        except cri_errors.NotFoundError:
            return None
        status = response.status
        if status is None:
            return None
        labels = parse_container_labels(status.labels)
        annotations = parse_container_annotations(status.annotations)
        pod = Pod(
            metadata=ObjectMeta(
                name=labels.pod_name,
                namespace=labels.pod_namespace,
                uid=labels.pod_uid,
                deletion_grace_period_seconds=annotations.pod_deletion_grace_period,
            ),
            spec=PodSpec(termination_grace_period_seconds=annotations.pod_termination_grace_period),
        )
        container = Container(
            name=labels.container_name,
            ports=annotations.ports or None,
            termination_message_path=annotations.termination_message_path or None,
            lifecycle=Lifecycle(pre_stop=annotations.pre_stop_handler)
            if annotations.pre_stop_handler
            else None,
        )
        return pod, container

    async def kill_container(
        self,
        pod: Pod | None,
        target: ContainerRef,
        grace_override: int | None = None,
        reason: str = "",
        message: str = "",
        *,
        ordering: TerminationOrdering | None = None,
    ) -> None:
        """Stop one container with its grace period (§3.3): override, else the pod's deletion grace,
        else its termination grace (probe-specific for probe kills), else 2; minus the preStop hook's
        duration (and, for sidecars, the wait for their turn); at least 2 s. NotFound is success.

        Raises :class:`~kubelet_trio.cri.errors.CriError` when StopContainer fails.
        """
        event_pod = pod
        spec = find_container_spec(pod, target.name) if pod is not None else None
        if pod is None or spec is None:
            # A kubelet restarted, or the spec no longer names the container: use what we stamped on it.
            restored = await self._restore_specs(target.id)
            if restored is None:
                return  # the container is gone
            restored_pod, spec = restored
            pod = pod if pod is not None else restored_pod
        grace = termination_grace_period(pod, spec, reason)
        ctx = {"pod": kobj(pod), "uid": pod.uid, "container": target.name, "id": target.id}

        self.event(event_pod, "Normal", "Killing", message or f"Stopping container {target.name}")
        if grace_override is not None:
            grace = grace_override

        pre_stop = spec.lifecycle.pre_stop if spec.lifecycle else None
        if pre_stop is not None and self.hooks is not None and grace > 0:
            grace -= await self._pre_stop(pod, spec, target.id, pre_stop, grace, event_pod)
        if ordering is not None and grace > 0:
            grace -= int(await ordering.wait_for_turn(target.name, grace))
        grace = max(grace, MINIMUM_GRACE_PERIOD_SECONDS)

        logger.info("killing container", extra=kv(**ctx, grace_period=grace))
        with contextlib.suppress(cri_errors.NotFoundError):
            await self.runtime.stop_container(target.id, grace)
        if self.on_stopped is not None:
            self.on_stopped(pod.uid, target.id)
        if ordering is not None:
            ordering.terminated(target.name)

    async def _pre_stop(
        self,
        pod: Pod,
        container: Container,
        container_id: str,
        handler: LifecycleHandler,
        grace: int,
        event_pod: Pod | None,
    ) -> int:
        """Run preStop bounded by ``grace``; return the whole seconds it took."""
        assert self.hooks is not None
        start = trio.current_time()
        with trio.move_on_after(grace):
            try:
                await self.hooks.run(pod, container, container_id, handler)
            except Exception as err:
                logger.warning(
                    "preStop hook failed", extra=kv(**_pod_ctx(pod), container=container.name, err=err)
                )
                self.event(event_pod, "Warning", "FailedPreStopHook", "PreStopHook failed")
        return int(trio.current_time() - start)

    # --- remove ---------------------------------------------------------------------------------

    async def remove_container(self, container_id: str) -> None:
        """Remove a (non-running) container: its log file first, then the container. Gone is fine, also
        when it goes meanwhile (a concurrent removal of the same dead container)."""
        try:
            response = await self.runtime.container_status(container_id)
            if response.status is not None:
                await self.run_sync(remove_container_log, response.status.log_path)
            await self.runtime.remove_container(container_id)
        except cri_errors.NotFoundError:
            return
        logger.debug("container removed", extra=kv(id=container_id))


@attrs.define(eq=False)
class TerminationOrdering:
    """Kill order for pods with sidecars (Go: ``terminationOrdering``): regular containers first, then
    sidecars in reverse spec order. Each sidecar waits for every running regular container and for the
    running sidecars after it, within its own grace period."""

    _terminated: dict[str, trio.Event] = attrs.Factory(dict)
    _prereqs: dict[str, list[trio.Event]] = attrs.Factory(dict)

    @classmethod
    def for_pod(cls, pod: Pod, running_names: set[str]) -> TerminationOrdering:
        ordering = cls()

        def event(name: str) -> trio.Event:
            done = ordering._terminated[name] = trio.Event()
            if name not in running_names:
                done.set()  # nothing to wait for
            return done

        main = [event(c.name or "") for c in (pod.spec.containers if pod.spec else None) or ()]
        later_sidecar: str | None = None
        for init in reversed((pod.spec.init_containers if pod.spec else None) or ()):
            name = init.name or ""
            event(name)
            if init.is_sidecar:
                prereqs = ordering._prereqs.setdefault(name, [])
                prereqs.extend(main)
                if later_sidecar is not None:
                    prereqs.append(ordering._terminated[later_sidecar])
                later_sidecar = name
        return ordering

    async def wait_for_turn(self, name: str, grace: float) -> float:
        """Wait (at most ``grace`` seconds) for the containers ``name`` must outlive; return the wait."""
        start = trio.current_time()
        with trio.move_on_after(grace):
            for prereq in self._prereqs.get(name, ()):
                await prereq.wait()
        return trio.current_time() - start

    def terminated(self, name: str) -> None:
        done = self._terminated.get(name)
        if done is not None:
            done.set()
