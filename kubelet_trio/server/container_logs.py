"""``/containerLogs/{namespace}/{pod}/{container}`` (Go: ``server.go`` ``getContainerLogs``,
``kuberuntime_logs.go`` / ``logs.ReadLogs``).

The container instance comes from the PLEG's pod cache (newest instance, or the one before it with
``previous``); its log file from the runtime's ContainerStatus ``log_path``. Query parameters are
``PodLogOptions``: ``tailLines`` (legacy ``tail``, ``tail=all``), ``limitBytes``, ``timestamps``,
``sinceSeconds``, ``sinceTime``, ``stream``, ``previous`` and ``follow``.

Every answer is streamed from a :class:`~kubelet_trio.kuberuntime.logs_reader.LogReader` in bounded chunks, so
a request costs what it returns: ``tailLines`` seeks back from the end, ``limitBytes`` stops the read, and the
files rotated out of the log are read first. At most :data:`MAX_REQUESTS_PER_CONTAINER` requests per container
instance run at once; past that the answer is 429 with ``Retry-After``.

``follow`` streams records as they are written until the client disconnects or the container stops
running. New data is noticed through inotify on the log directory (which also sees a rotation create the
new file), the end of the container through the status manager (a wait, not a poll); every
``FOLLOW_RECHECK`` seconds the pod cache is consulted as well, like the Go kubelet's 5 s state check,
which also covers a pod whose status disappears.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import trio

from kubelet_trio.api.status import PodStatus as ApiPodStatus
from kubelet_trio.config.inotify import IN_CREATE, IN_MODIFY, IN_MOVED_TO, Inotify
from kubelet_trio.container.types import ContainerState, ContainerStatus
from kubelet_trio.cri import errors as cri_errors
from kubelet_trio.httpserver.asgi import TEXT, Handler, HttpError, Request, Response, Write
from kubelet_trio.kuberuntime.logs_reader import LogOptions, LogReader, parse_timestamp
from kubelet_trio.logs import kobj, kv

if TYPE_CHECKING:
    from kubelet_trio.api import Pod
    from kubelet_trio.server.host import HostInterface

__all__ = ["FOLLOW_RECHECK", "MAX_REQUESTS_PER_CONTAINER", "container_logs_handler", "parse_log_options"]

logger = logging.getLogger(__name__)

FOLLOW_RECHECK = 5.0
FOLLOW_RECHECK_NO_INOTIFY = 1.0
MAX_REQUESTS_PER_CONTAINER = 10  # log requests served at once per container instance; more get 429
RETRY_AFTER_SECONDS = 1
_FOLLOW_EVENTS = IN_MODIFY | IN_CREATE | IN_MOVED_TO  # on the log directory: writes, and rotations


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
    since_ns: int | None = None
    if since_time is not None:
        try:
            since_ns = parse_timestamp(since_time)
        except ValueError:
            raise HttpError(422, f"sinceTime: Invalid value: {since_time!r}", as_json=True) from None
    if since_seconds is not None:
        since_ns = now_wall_ns - since_seconds * 10**9
    stream = request.arg("stream") or None
    if stream not in (None, "stdout", "stderr", "All"):
        raise HttpError(422, f"stream: Unsupported value: {stream!r}", as_json=True)
    return LogOptions(
        tail_lines=tail,
        limit_bytes=_int_arg(request, "limitBytes", 1),
        timestamps=request.flag("timestamps"),
        since_ns=since_ns,
        stream=None if stream == "All" else stream,
    )


def _find_pod(kubelet: HostInterface, namespace: str, name: str) -> Pod:
    pod = kubelet.pod_by_name(namespace, name)
    if pod is not None:
        return pod
    raise HttpError(404, f"pod {name!r} does not exist".replace("'", '"'))


def _instance(kubelet: HostInterface, pod: Pod, container: str, previous: bool) -> ContainerStatus:
    names = {c.name for c in pod.spec.all_containers()} if pod.spec else set()
    if container not in names:
        raise HttpError(404, f'container "{container}" not found in pod "{pod.name}"')
    instances = kubelet.container_instances(pod.uid, container)  # newest first
    index = 1 if previous else 0
    if len(instances) <= index:
        if previous:
            raise HttpError(400, f'previous terminated container "{container}" in pod "{pod.name}" not found')
        raise HttpError(400, f'container "{container}" in pod "{pod.name}" is waiting to start')
    return instances[index]


def _still_running(kubelet: HostInterface, uid: str, container_id: str) -> bool:
    for instance in kubelet.container_instances(uid):
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


async def _first_of(*waits: Callable[[], Awaitable[object]]) -> None:
    async with trio.open_nursery() as nursery:
        for wait in waits:

            async def run(wait: Callable[[], Awaitable[object]] = wait) -> None:
                await wait()
                nursery.cancel_scope.cancel()

            nursery.start_soon(run)


def container_logs_handler(kubelet: HostInterface) -> Handler:
    in_flight: dict[str, int] = {}  # container instance id -> requests being served

    async def handle(request: Request) -> Response:
        namespace, name, container = (request.params[k] for k in ("namespace", "pod", "container"))
        pod = _find_pod(kubelet, namespace, name)
        previous = request.flag("previous")
        options = parse_log_options(request, kubelet.wall_ns())
        instance = _instance(kubelet, pod, container, previous)
        try:
            path = await kubelet.container_log_path(instance.id)
        except cri_errors.NotFoundError:
            raise HttpError(400, f'container "{container}" in pod "{pod.name}" is not available') from None
        if not path:
            raise HttpError(400, f'container "{container}" in pod "{pod.name}" has no log file')
        if in_flight.get(instance.id, 0) >= MAX_REQUESTS_PER_CONTAINER:
            message = (
                f'too many log requests for container "{container}" in pod "{pod.name}" at once '
                f"(at most {MAX_REQUESTS_PER_CONTAINER}); try again later\n"
            )
            return Response(429, message.encode(), TEXT, [("Retry-After", str(RETRY_AFTER_SECONDS))])
        # Held from here until the stream ends (the app always runs the stream of a response it sent).
        in_flight[instance.id] = in_flight.get(instance.id, 0) + 1
        follow = request.flag("follow") and not previous

        async def stream(write: Write) -> None:
            try:
                await _serve(kubelet, pod, container, instance.id, path, options, follow, write)
            finally:
                left = in_flight.pop(instance.id) - 1
                if left:
                    in_flight[instance.id] = left

        return Response(200, b"", stream=stream)

    return handle


async def _drain(kubelet: HostInterface, reader: LogReader, write: Write) -> None:
    """Write what the files hold now, one bounded chunk at a time."""
    while True:
        await write(await kubelet.run_blocking(reader.read))
        if reader.at_end or reader.done:
            return


async def _serve(
    kubelet: HostInterface,
    pod: Pod,
    container: str,
    container_id: str,
    path: str,
    options: LogOptions,
    follow: bool,
    write: Write,
) -> None:
    try:
        reader = await kubelet.run_blocking(functools.partial(LogReader.open, path, options, follow=follow))
    except OSError as err:
        logger.warning(
            "cannot read container log",
            extra=kv(pod=kobj(pod), uid=pod.uid, container=container, path=path, error=err),
        )
        await write(f"error reading the log of container {container!r}: {err.strerror or err}\n".encode())
        return
    try:
        await _drain(kubelet, reader, write)
        if reader.done:
            return
        if follow:
            await _follow(kubelet, pod, container, container_id, path, reader, write)
        else:
            await write(await kubelet.run_blocking(reader.finish))
    finally:
        reader.close()


async def _follow(
    kubelet: HostInterface,
    pod: Pod,
    container: str,
    container_id: str,
    path: str,
    reader: LogReader,
    write: Write,
) -> None:
    """Write new records until the container stops (then drain the file) or the limit is spent."""
    inotify = Inotify.open()
    try:
        if inotify is not None and inotify.add_watch(os.path.dirname(path), _FOLLOW_EVENTS) is None:
            inotify.close()
            inotify = None
        recheck = FOLLOW_RECHECK if inotify is not None else FOLLOW_RECHECK_NO_INOTIFY
        running = True
        while True:
            await _drain(kubelet, reader, write)
            if reader.done:
                return
            if await kubelet.run_blocking(reader.follow_rotation):
                continue  # the rest of the rotated file, then the new one
            if not running:
                await write(await kubelet.run_blocking(reader.finish))
                return
            waits: list[Callable[[], Awaitable[object]]] = [
                functools.partial(trio.sleep, recheck),
                functools.partial(
                    kubelet.wait_for_status, pod.uid, _exited_in_status(container, container_id)
                ),
            ]
            if inotify is not None:
                waits.append(inotify.wait)
            await _first_of(*waits)
            running = _still_running(kubelet, pod.uid, container_id)
    finally:
        if inotify is not None:
            inotify.close()
