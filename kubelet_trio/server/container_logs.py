"""``/containerLogs/{namespace}/{pod}/{container}`` (Go: ``server.go`` ``getContainerLogs``,
``kuberuntime_logs.go`` / ``logs.ReadLogs``).

The container instance comes from the PLEG's pod cache (newest instance, or the one before it with
``previous``); its log file from the runtime's ContainerStatus ``log_path``. Query parameters are
``PodLogOptions``: ``tailLines`` (legacy ``tail``, ``tail=all``), ``limitBytes``, ``timestamps``,
``sinceSeconds``, ``sinceTime``, ``stream``, ``previous`` and ``follow``.

``follow`` streams lines as they are written until the client disconnects or the container stops
running. New data is noticed through inotify on the file, the end of the container through the status
manager (a wait, not a poll); every ``FOLLOW_RECHECK`` seconds the pod cache is consulted as well, like
the Go kubelet's 5 s state check, which also covers a pod whose status disappears.
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import trio

from kubelet_trio.api.status import PodStatus as ApiPodStatus
from kubelet_trio.clock import rfc3339_nano
from kubelet_trio.config.inotify import IN_MODIFY, Inotify
from kubelet_trio.container.types import ContainerState, ContainerStatus
from kubelet_trio.cri import errors as cri_errors
from kubelet_trio.logs_reader import LogOptions, LogParser, format_lines, read_log_from, select_lines
from kubelet_trio.server.asgi import Handler, HttpError, Request, Response, Write

if TYPE_CHECKING:
    from kubelet_trio.api import Pod
    from kubelet_trio.kubelet import Kubelet

__all__ = ["FOLLOW_RECHECK", "container_logs_handler", "parse_log_options"]

logger = logging.getLogger(__name__)

FOLLOW_RECHECK = 5.0
FOLLOW_RECHECK_NO_INOTIFY = 1.0


def _int_arg(request: Request, name: str, minimum: int) -> int | None:
    value = request.arg(name)
    if value is None or value == "":
        return None
    try:
        number = int(value)
    except ValueError:
        raise HttpError(422, f"{name}: Invalid value: {value!r}: must be an integer", as_json=True) from None
    if number < minimum:
        raise HttpError(
            422, f"{name}: Invalid value: {number}: must be greater than or equal to {minimum}", as_json=True
        )
    return number


def parse_log_options(request: Request, now_wall_ns: int) -> LogOptions:
    """``PodLogOptions`` from the query string; 422 for invalid values (as the Go kubelet answers)."""
    tail = _int_arg(request, "tailLines", 0)
    legacy = request.arg("tail")
    if tail is None and legacy not in (None, "", "all"):
        tail = _int_arg(request, "tail", 0)
    since_time = request.arg("sinceTime") or None
    since_seconds = _int_arg(request, "sinceSeconds", 1)
    if since_time is not None and since_seconds is not None:
        raise HttpError(422, "at most one of sinceTime or sinceSeconds may be specified", as_json=True)
    if since_time is not None:
        try:
            parsed = dt.datetime.fromisoformat(since_time.replace("Z", "+00:00"))
        except ValueError:
            raise HttpError(422, f"sinceTime: Invalid value: {since_time!r}", as_json=True) from None
        since_time = rfc3339_nano(round(parsed.timestamp() * 1e9))
    if since_seconds is not None:
        since_time = rfc3339_nano(now_wall_ns - since_seconds * 10**9)
    stream = request.arg("stream") or None
    if stream not in (None, "stdout", "stderr", "All"):
        raise HttpError(422, f"stream: Unsupported value: {stream!r}", as_json=True)
    return LogOptions(
        tail_lines=tail,
        limit_bytes=_int_arg(request, "limitBytes", 1),
        timestamps=request.flag("timestamps"),
        since_time=since_time,
        stream=None if stream == "All" else stream,
    )


def _find_pod(kubelet: Kubelet, namespace: str, name: str) -> Pod:
    for pod in kubelet.pod_manager.pods():
        if pod.namespace == namespace and pod.name == name:
            return pod
    raise HttpError(404, f"pod {name!r} does not exist".replace("'", '"'))


def _instance(kubelet: Kubelet, pod: Pod, container: str, previous: bool) -> ContainerStatus:
    names = {c.name for c in pod.spec.all_containers()} if pod.spec else set()
    if container not in names:
        raise HttpError(404, f'container "{container}" not found in pod "{pod.name}"')
    instances = kubelet.cache.get(pod.uid).instances(container)  # newest first
    index = 1 if previous else 0
    if len(instances) <= index:
        if previous:
            raise HttpError(400, f'previous terminated container "{container}" in pod "{pod.name}" not found')
        raise HttpError(400, f'container "{container}" in pod "{pod.name}" is waiting to start')
    return instances[index]


def _still_running(kubelet: Kubelet, uid: str, container_id: str) -> bool:
    for instance in kubelet.cache.get(uid).container_statuses:
        if instance.id == container_id:
            return instance.state is ContainerState.RUNNING
    return False


def _exited_in_status(container: str, container_id: str) -> Callable[[ApiPodStatus], bool]:
    """The status shows *this* instance terminated (a lagging status that does not show it yet, or
    shows a newer instance, is left to the periodic re-check, so the wait never spins)."""

    def exited(status: ApiPodStatus) -> bool:
        for c in status.container_statuses or ():
            if c.name == container and c.container_id and c.container_id.endswith(container_id):
                return c.state is not None and c.state.running is None
        return False

    return exited


class _Budget:
    """What is left of ``limitBytes``."""

    def __init__(self, limit: int | None) -> None:
        self.left = limit

    def take(self, data: bytes) -> bytes:
        if self.left is None:
            return data
        data = data[: self.left]
        self.left -= len(data)
        return data

    @property
    def spent(self) -> bool:
        return self.left is not None and self.left <= 0


async def _first_of(*waits: Callable[[], Awaitable[object]]) -> None:
    async with trio.open_nursery() as nursery:
        for wait in waits:

            async def run(wait: Callable[[], Awaitable[object]] = wait) -> None:
                await wait()
                nursery.cancel_scope.cancel()

            nursery.start_soon(run)


def container_logs_handler(kubelet: Kubelet) -> Handler:
    async def handle(request: Request) -> Response:
        namespace, name, container = (request.params[k] for k in ("namespace", "pod", "container"))
        pod = _find_pod(kubelet, namespace, name)
        previous = request.flag("previous")
        options = parse_log_options(request, kubelet.clock.wall_ns())
        instance = _instance(kubelet, pod, container, previous)
        try:
            response = await kubelet.runtime.container_status(instance.id)
        except cri_errors.NotFoundError:
            raise HttpError(400, f'container "{container}" in pod "{pod.name}" is not available') from None
        path = response.status.log_path if response.status else ""
        if not path:
            raise HttpError(400, f'container "{container}" in pod "{pod.name}" has no log file')

        follow = request.flag("follow") and not previous
        budget = _Budget(options.limit_bytes)
        parser = LogParser()
        try:
            data, offset = await kubelet.run_sync(read_log_from, path, 0)
        except FileNotFoundError:
            data, offset = b"", 0
        first = parser.feed(data)
        if not follow:
            first += parser.flush()
        body = budget.take(format_lines(select_lines(first, options), options.timestamps))
        if not follow or budget.spent:
            return Response(200, body)

        async def stream(write: Write) -> None:
            await _follow(kubelet, pod, container, instance.id, path, offset, parser, options, budget, write)

        return Response(200, body, stream=stream)

    return handle


async def _follow(
    kubelet: Kubelet,
    pod: Pod,
    container: str,
    container_id: str,
    path: str,
    offset: int,
    parser: LogParser,
    options: LogOptions,
    budget: _Budget,
    write: Write,
) -> None:
    """Write new lines until the container stops (then drain the file) or the budget is spent."""
    tail_free = LogOptions(since_time=options.since_time, stream=options.stream)
    inotify = Inotify.open()
    try:
        if inotify is not None and inotify.add_watch(path, IN_MODIFY) is None:
            inotify.close()
            inotify = None
        recheck = FOLLOW_RECHECK if inotify is not None else FOLLOW_RECHECK_NO_INOTIFY
        running = True
        while True:
            data, offset = await kubelet.run_sync(read_log_from, path, offset)
            lines = parser.feed(data) + ([] if running else parser.flush())
            chunk = budget.take(format_lines(select_lines(lines, tail_free), options.timestamps))
            await write(chunk)
            if not running or budget.spent:
                return
            waits: list[Callable[[], Awaitable[object]]] = [
                functools.partial(trio.sleep, recheck),
                functools.partial(
                    kubelet.status_manager.wait_for, pod.uid, _exited_in_status(container, container_id)
                ),
            ]
            if inotify is not None:
                waits.append(inotify.wait)
            await _first_of(*waits)
            running = _still_running(kubelet, pod.uid, container_id)
    except FileNotFoundError:
        logger.info(
            "container log file vanished while following pod=%s/%s uid=%s container=%s",
            pod.namespace,
            pod.name,
            pod.uid,
            container,
        )
    finally:
        if inotify is not None:
            inotify.close()
