"""System OOM kills as Node events (Go: ``pkg/kubelet/oom/oom_watcher_linux.go`` over cAdvisor's
``utils/oomparser``).

The kernel logs each OOM kill to ``/dev/kmsg``: a line with "invoked oom-killer:", then (kernels 5.0+)
an ``oom-kill:constraint=...,oom_memcg=...,task_memcg=...`` summary, then "Killed process <pid>
(<name>)". A kill whose OOM cgroup is the root ``/`` was the whole machine running out of memory, and
becomes a Warning ``SystemOOM`` event on the Node; kills inside a container's limit are the runtime's
to report (the container's ``OOMKilled`` reason). Like Go, the watcher reads the kernel's whole ring
buffer, so OOM kills logged before it started are reported too.
"""

from __future__ import annotations

import errno
import logging
import os
import re
from collections.abc import Callable

import attrs
import trio

from kubelet_trio.logs import kv

__all__ = ["KMSG", "SYSTEM_OOM_EVENT", "OOMWatcher", "OomInstance", "OomParser", "system_oom_message"]

logger = logging.getLogger(__name__)

KMSG = "/dev/kmsg"
SYSTEM_OOM_EVENT = "SystemOOM"
ROOT_CONTAINER = "/"
MAX_RECORD = 8192  # bytes; the kernel's records are at most 1 KiB of text plus the prefix

_FIRST_LINE = re.compile(r"invoked oom-killer:")
_LEGACY_CONTAINER = re.compile(r"Task in (.*) killed as a result of limit of (.*)")
_CONTAINER = re.compile(
    r"oom-kill:constraint=(.*),nodemask=(.*),cpuset=(.*),mems_allowed=(.*),oom_memcg=(.*),"
    r"task_memcg=(.*),task=(.*),pid=(.*),uid=(.*)"
)
_LAST_LINE = re.compile(r"Killed process ([0-9]+) \((.+)\)")

#: (event type, reason, message) on the Node
NodeEventRecorder = Callable[[str, str, str], None]


@attrs.frozen
class OomInstance:
    """One OOM kill: the victim, the cgroup of the killed task, and the cgroup that ran out."""

    pid: int
    process_name: str
    container_name: str = ROOT_CONTAINER
    victim_container_name: str = ROOT_CONTAINER


def system_oom_message(oom: OomInstance) -> str:
    message = "System OOM encountered"
    if oom.process_name and oom.pid:
        message += f", victim process: {oom.process_name}, pid: {oom.pid}"
    return message


def _message(record: str) -> str:
    """The text of a ``/dev/kmsg`` record (``prio,seq,usec,flags;text``)."""
    head, sep, text = record.partition(";")
    return text.strip() if sep and "," in head else record.strip()


@attrs.define(eq=False)
class OomParser:
    """Kernel log lines in, OOM kills out."""

    _current: dict[str, str] | None = None

    def feed(self, line: str) -> OomInstance | None:
        if _FIRST_LINE.search(line):
            self._current = {"container": ROOT_CONTAINER, "victim": ROOT_CONTAINER}
            return None
        if self._current is None:
            return None
        if match := _CONTAINER.search(line):
            self._current["container"], self._current["victim"] = match.group(6), match.group(5)
        elif match := _LEGACY_CONTAINER.search(line):
            self._current["container"], self._current["victim"] = match.group(1), match.group(2)
        if match := _LAST_LINE.search(line):
            oom = OomInstance(
                pid=int(match.group(1)),
                process_name=match.group(2),
                container_name=self._current["container"],
                victim_container_name=self._current["victim"],
            )
            self._current = None
            return oom
        return None


@attrs.define(eq=False)
class OOMWatcher:
    """Reads ``kmsg`` and records a ``SystemOOM`` Node event for every system OOM kill."""

    record: NodeEventRecorder
    kmsg: str = KMSG
    parser: OomParser = attrs.Factory(OomParser)

    def handle(self, record: str) -> None:
        oom = self.parser.feed(_message(record))
        if oom is None:
            return
        logger.info(
            "OOM kill",
            extra=kv(
                pid=oom.pid,
                process=oom.process_name,
                container=oom.container_name,
                victim=oom.victim_container_name,
            ),
        )
        if oom.victim_container_name == ROOT_CONTAINER:
            self.record("Warning", SYSTEM_OOM_EVENT, system_oom_message(oom))

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Watch until cancelled; without a readable ``kmsg`` (no privilege, no device), log and return."""
        try:
            fd = os.open(self.kmsg, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as err:
            logger.warning("cannot watch for system OOMs", extra=kv(path=self.kmsg, err=err))
            task_status.started()
            return
        try:
            task_status.started()
            while True:
                try:
                    data = os.read(fd, MAX_RECORD)
                except BlockingIOError:
                    await trio.lowlevel.wait_readable(fd)
                    continue
                except OSError as err:
                    if err.errno == errno.EPIPE:  # records overwritten before we read them: skip on
                        continue
                    raise
                if not data:  # a plain file standing in for the device: its end is the end
                    await trio.sleep_forever()
                for record in data.decode("utf-8", "replace").split("\n"):
                    if record and not record.startswith(" "):  # " KEY=value" lines continue a record
                        self.handle(record)
                await trio.lowlevel.checkpoint()
        finally:
            os.close(fd)
