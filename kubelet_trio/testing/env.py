"""One call to get a real CRI to test against: registry + images + private containerd.

``LocalCriEnvironment`` is synchronous on purpose: it runs from pytest session fixtures, benchmarks and
the demo before any Trio loop exists.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import attrs
import trio

if TYPE_CHECKING:
    from kubelet_trio.cri.gen.runtime import v1 as pb
    from kubelet_trio.cri.runtime import Runtime

from kubelet_trio.testing.containerd import PrivateContainerd
from kubelet_trio.testing.images import TestImages, push_test_images
from kubelet_trio.testing.registry import LocalRegistry

REQUIRED_BINARIES = ("containerd", "runc", "ctr", "docker-registry", "ip")


def missing_prerequisites() -> list[str]:
    """What stops a real-containerd run here (empty when it can run)."""
    missing = [f"{b} not installed" for b in REQUIRED_BINARIES if shutil.which(b) is None]
    if not Path("/bin/busybox").exists():
        missing.append("/bin/busybox not installed (busybox-static)")
    if os.geteuid() != 0:
        missing.append("not running as root")
    return missing


REMOVE_ATTEMPTS = 4


@contextlib.contextmanager
def private_cgroup_root(prefix: str = "kubelet-trio-test") -> Iterator[str]:
    """A cgroup root of one test daemon's own (pass it as ``--cgroup-root``): daemons that share one
    ``/kubepods`` take each other's pod cgroups for orphans and kill their processes, as two Go kubelets on
    one machine would. On exit whatever still runs below it is killed and the tree removed."""
    import signal

    from kubelet_trio.cm.cgroup_manager import CgroupError, CgroupManager

    name = f"{prefix}-{secrets.token_hex(4)}"
    manager = CgroupManager()
    manager.create((name,))
    try:
        yield f"/{name}"
    finally:
        for _ in range(REMOVE_ATTEMPTS):
            pids = {
                pid
                for top in manager.paths((name,)).values()
                for procs in Path(top).rglob("cgroup.procs")
                for pid in procs.read_text().split()
            }
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, ValueError):
                    os.kill(int(pid), signal.SIGKILL)
            try:
                manager.destroy((name,))
                break
            except CgroupError:
                time.sleep(0.5)


async def stop_and_remove_sandbox(rt: Runtime, sandbox_id: str) -> None:
    """Stop and remove one sandbox, asking again when containerd answers "ttrpc: closed": it does so
    while it notices that the sandbox's shim went away (a stop that was cancelled half-way, a shim
    lost under load); a moment later the same stop succeeds."""
    from kubelet_trio.cri.errors import CriError, NotFoundError

    for attempt in range(REMOVE_ATTEMPTS):
        try:
            with contextlib.suppress(NotFoundError):
                await rt.stop_pod_sandbox(sandbox_id)
            await rt.remove_pod_sandbox(sandbox_id)
            return
        except CriError:
            if attempt == REMOVE_ATTEMPTS - 1:
                raise
            await trio.sleep(0.5 * 2**attempt)


async def remove_all_pods(endpoint: str, node: str | None = None) -> None:
    """Stop and remove every sandbox (and so every container) the runtime has, or one node's."""
    from kubelet_trio.cri.gen.runtime import v1 as pb
    from kubelet_trio.cri.remote import open_cri_runtime
    from kubelet_trio.kuberuntime.labels import node_selector

    selector = node_selector(node) if node else {}
    async with open_cri_runtime(endpoint, request_timeout=30) as rt:
        for sandbox in await rt.list_pod_sandbox(pb.PodSandboxFilter(label_selector=selector)):
            await stop_and_remove_sandbox(rt, sandbox.id)


async def running_containers(endpoint: str, node: str) -> list[pb.Container]:
    """The running containers one node (kubelet) started, as the runtime lists them."""
    from kubelet_trio.cri.gen.runtime import v1 as pb
    from kubelet_trio.cri.remote import open_cri_runtime
    from kubelet_trio.kuberuntime.labels import node_selector

    running = pb.ContainerStateValue(state=pb.ContainerState.CONTAINER_RUNNING)
    async with open_cri_runtime(endpoint, request_timeout=30) as rt:
        return await rt.list_containers(pb.ContainerFilter(state=running, label_selector=node_selector(node)))


@attrs.define(eq=False)
class LocalCriEnvironment:
    """Start with :meth:`start`, tear down with :meth:`close` (which also removes all pods)."""

    workdir: Path = attrs.field(factory=lambda: Path(tempfile.mkdtemp(prefix="kubelet-trio-cri-")))
    registry: LocalRegistry = attrs.field(init=False)
    containerd: PrivateContainerd = attrs.field(init=False)
    images: TestImages = attrs.field(init=False)

    @property
    def endpoint(self) -> str:
        return self.containerd.endpoint

    @property
    def pod_subnet(self) -> str:
        """The subnet pods get their IPs from (a claimed /24, never the host's own networks)."""
        assert self.containerd.network is not None
        return self.containerd.network.subnet

    @property
    def missing_image(self) -> str:
        """A reference on the live registry that does not exist."""
        return f"{self.registry.address}/kubelet-trio/does-not-exist:1"

    def start(self) -> LocalCriEnvironment:
        self.registry = LocalRegistry(self.workdir / "registry")
        self.registry.start()
        self.images = push_test_images(self.registry.address)
        self.containerd = PrivateContainerd(
            self.workdir / "containerd",
            sandbox_image=self.images.pause,
            registries=[self.registry.address],
        )
        self.containerd.start()
        return self

    def close(self) -> None:
        try:
            if self.containerd.running:
                trio.run(remove_all_pods, self.endpoint)
        finally:
            self.containerd.stop()
            self.containerd.kill_shims()
            self.containerd.unmount_all()
            self.containerd.release_network()
            self.registry.stop()
            subprocess.run(["rm", "-rf", str(self.workdir)], check=False)

    def __enter__(self) -> LocalCriEnvironment:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
