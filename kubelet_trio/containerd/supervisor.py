"""A containerd of the kubelet's own, started and supervised as a child (``--container-runtime managed``).

As k3s does, the node agent brings its runtime: :class:`ManagedContainerd` writes containerd's
configuration under ``<root-dir>/containerd`` (config, socket, root, state, CNI configuration, a log
file), claims a pod network (:mod:`.network`), starts containerd and restarts it with exponential backoff
whenever it exits. ``run`` reports started once the CRI plugin answers. Cancelling ``run`` stops
containerd (SIGTERM, SIGKILL after a grace period); its shims and so the pods keep running, as with the
Go kubelet, and the next start adopts them — the network claim survives while its state directory does.

Registry settings are containerd's own ``hosts.toml`` files under ``<root-dir>/containerd/certs.d``
(``config_path``); files already there are kept. ``<root-dir>/containerd/images`` is created for image
archives (:mod:`kubelet_trio.images.importer`; the default ``--image-import-dir`` of this runtime).
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

import attrs
import trio
import trio_util

from kubelet_trio.containerd.config import DEFAULT_SANDBOX_IMAGE, ContainerdLayout, write_config
from kubelet_trio.containerd.network import PodNetwork, claim_network
from kubelet_trio.fsio import RunSync, run_in_thread
from kubelet_trio.logs import kv

__all__ = ["ManagedContainerd", "RestartBackoff", "cri_plugin_ready"]

logger = logging.getLogger(__name__)

#: How often readiness is checked while containerd starts, and how long it may take.
READY_POLL = 0.2
READY_TIMEOUT = 60.0
#: SIGTERM, then SIGKILL after this long.
STOP_GRACE = 10.0


@attrs.frozen
class RestartBackoff:
    """Delay before restart ``n`` (0-based): ``initial * 2**n`` capped at ``maximum``; a process that ran
    for ``reset_after`` seconds starts the count again."""

    initial: float = 1.0
    maximum: float = 30.0
    reset_after: float = 60.0

    def delay(self, restarts: int) -> float:
        return min(self.initial * 2.0**restarts, self.maximum)


def cri_plugin_ready(socket: Path) -> bool:
    """containerd answers on ``socket`` and its CRI plugin loaded (``ctr plugins ls``). Blocking."""
    if not socket.exists():
        return False
    res = subprocess.run(
        ["ctr", "--address", str(socket), "plugins", "ls"], capture_output=True, text=True, check=False
    )
    return any(
        "io.containerd.grpc.v1" in line and " cri " in f" {line} " and line.rstrip().endswith("ok")
        for line in res.stdout.splitlines()
    )


@attrs.define(eq=False)
class ManagedContainerd:
    """Run with ``await nursery.start(managed.run)``; :attr:`endpoint` is the CRI socket."""

    workdir: Path
    sandbox_image: str = DEFAULT_SANDBOX_IMAGE
    registries: Sequence[str] = ()
    subnet: str | None = None
    #: NAT for pod egress (the bridge plugin's ipMasq), as a node's pods expect.
    ip_masq: bool = True
    backoff: RestartBackoff = attrs.Factory(RestartBackoff)
    stop_grace: float = STOP_GRACE
    ready_timeout: float = READY_TIMEOUT
    #: True while a containerd answers; tests and the node wait on its transitions.
    ready: trio_util.AsyncBool = attrs.Factory(trio_util.AsyncBool)
    #: The running containerd's pid (None between runs).
    pid: trio_util.AsyncValue[int | None] = attrs.Factory(lambda: trio_util.AsyncValue(None))
    restarts: int = 0
    network: PodNetwork | None = None
    #: The command (default: containerd with this layout's flags), its readiness check, and how blocking
    #: calls leave the event loop: replaceable for tests.
    argv: Sequence[str] | None = None
    ready_check: Callable[[Path], bool] = cri_plugin_ready
    run_sync: RunSync = run_in_thread
    _reported: bool = False

    @property
    def layout(self) -> ContainerdLayout:
        return ContainerdLayout(self.workdir)

    @property
    def endpoint(self) -> str:
        return self.layout.endpoint

    def _prepare(self) -> PodNetwork:
        self.workdir.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.layout.images_dir.mkdir(exist_ok=True, mode=0o700)
        network = claim_network(
            str(self.workdir.resolve()), subnet=self.subnet, keep_while=self.layout.root, adopt=True
        )
        write_config(
            self.layout,
            network,
            sandbox_image=self.sandbox_image,
            registries=self.registries,
            ip_masq=self.ip_masq,
        )
        return network

    async def run(
        self, *, task_status: trio.TaskStatus[ManagedContainerd] = trio.TASK_STATUS_IGNORED
    ) -> None:
        network = await self.run_sync(self._prepare)
        self.network = network
        logger.info(
            "managed containerd",
            extra=kv(workdir=str(self.workdir), bridge=network.bridge, subnet=network.subnet),
        )
        failures = 0
        code = await self._run_once(task_status)
        if not self._reported:
            raise RuntimeError(
                f"managed containerd exited with {code} before it was ready; see {self.layout.log}"
            )
        while True:
            delay = self.backoff.delay(failures)
            logger.warning(
                "containerd exited; restarting",
                extra=kv(exit_code=code, delay=delay, log=str(self.layout.log)),
            )
            await trio.sleep(delay)
            self.restarts += 1
            began = trio.current_time()
            code = await self._run_once(None)
            failures = 0 if trio.current_time() - began >= self.backoff.reset_after else failures + 1

    async def _run_once(self, task_status: trio.TaskStatus[ManagedContainerd] | None) -> int:
        """Start containerd, report ready, return its exit code; stop it when cancelled."""
        layout = self.layout
        layout.socket.unlink(missing_ok=True)
        with layout.log.open("ab") as log:  # the child keeps its own descriptor
            process = await trio.lowlevel.open_process(
                list(self.argv or layout.command()), stdout=log, stderr=log, start_new_session=True
            )
        try:
            assert self.network is not None
            network = self.network
            self.network = await self.run_sync(
                lambda: network.with_containerd(process.pid, str(layout.socket))
            )
            self.pid.value = process.pid
            with trio.move_on_after(self.ready_timeout) as waiting:
                while process.returncode is None:
                    if await self.run_sync(self.ready_check, layout.socket):
                        break
                    await trio.sleep(READY_POLL)
            if process.returncode is None and waiting.cancelled_caught:
                message = f"managed containerd not ready after {self.ready_timeout:g}s; see {layout.log}"
                if task_status is not None:  # the first start: the node cannot run
                    raise RuntimeError(message)
                logger.error("containerd not ready; restarting it", extra=kv(log=str(layout.log)))
                return -1  # stopped below, restarted after the backoff
            if process.returncode is None:
                self.ready.value = True
                logger.info("containerd ready", extra=kv(pid=process.pid, endpoint=self.endpoint))
                if task_status is not None:
                    task_status.started(self)
                    self._reported = True
            return await process.wait()
        finally:
            self.ready.value = False
            self.pid.value = None
            if process.returncode is None:
                with trio.move_on_after(self.stop_grace + 5, shield=True):
                    await _stop(process, self.stop_grace)

    def kill(self) -> None:
        """Kill the running containerd (SIGKILL), as a crash would: the supervisor restarts it."""
        pid = self.pid.value
        if pid is not None:
            os.kill(pid, signal.SIGKILL)


async def _stop(process: trio.Process, grace: float) -> None:
    process.terminate()
    with trio.move_on_after(grace):
        await process.wait()
        return
    logger.warning("containerd did not stop in time; killing it", extra=kv(pid=process.pid))
    process.kill()
    await process.wait()
