"""The pod cgroup tree against the Go kubelet 1.24 (``kubelet-go``): both build their tree for the same
pods and settings on the same machine, each under a cgroup root of its own, and the kernel's files must
hold the same values (kubepods from allocatable, the tiers' shares, each pod's shares, quota, memory
limit and pids limit, and the kube-reserved cgroup limited to the reservation).

The Go kubelet runs standalone on the private containerd with static pods; kubelet-trio's container
manager builds its tree directly (no containers: the values are the manager's alone). Go's pod cgroups
are matched to ours by pod name through the runtime's sandbox metadata.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from kubelet_trio.cm.cgroup_manager import CGROUP_ROOT, CgroupManager, cgroup_version
from kubelet_trio.cm.container_manager import ContainerManager, NodeConfig
from kubelet_trio.cri.gen.runtime import v1 as pb
from kubelet_trio.cri.remote import open_cri_runtime
from kubelet_trio.testing.env import LocalCriEnvironment, stop_and_remove_sandbox
from kubelet_trio.testing.registry import free_port
from tests.cm.fakes import pod
from tests.reference.test_go_kubelet_on_sim_cri import BUILD_HINT, kubelet_go

pytestmark = [
    pytest.mark.reference,
    pytest.mark.skipif(cgroup_version() != 1, reason="compares cgroup v1 files"),
]

SYSFS = Path(CGROUP_ROOT)
BOTH = {"cpu": "100m", "memory": "64Mi"}
RESOURCES: dict[str, dict[str, Any]] = {
    "guaranteed": {"requests": BOTH, "limits": BOTH},
    "burstable": {"requests": {"cpu": "250m", "memory": "32Mi"}},
    "besteffort": {},
    "burstable-limited": {"requests": {"cpu": "100m"}, "limits": {"cpu": "200m", "memory": "64Mi"}},
}
KUBE_RESERVED = {"cpu": "500m", "memory": "1Gi", "pid": "1000"}
ENFORCE = "pods,kube-reserved"
RESERVED_CGROUP = "kube-reserved"  # made under each root before the kubelet starts, as an operator would
PIDS = 64
NODE = "go-cgroups"
FILES = {
    "cpu": ("cpu.shares", "cpu.cfs_quota_us", "cpu.cfs_period_us"),
    "memory": ("memory.limit_in_bytes",),
    "pids": ("pids.max",),
}


def dump(root: str, names: dict[str, str]) -> dict[str, dict[str, str]]:
    """``kubepods``, its tiers and pod cgroups (pods by name), and the kube-reserved cgroup → file →
    value."""
    values: dict[str, dict[str, str]] = {
        RESERVED_CGROUP: {
            filename: (SYSFS / hierarchy / root.lstrip("/") / RESERVED_CGROUP / filename).read_text().strip()
            for hierarchy, files in FILES.items()
            for filename in files
        }
    }
    for hierarchy, files in FILES.items():
        base = SYSFS / hierarchy / root.lstrip("/") / "kubepods"
        for directory in [base, *sorted(base.rglob("*"))]:
            if not directory.is_dir():
                continue
            relative = directory.relative_to(base).parts
            if relative and not (
                relative[-1].startswith("pod") or relative[-1] in ("burstable", "besteffort")
            ):
                continue  # a container's cgroup
            key = "/".join(names.get(part.removeprefix("pod"), part) for part in relative) or "kubepods"
            for filename in files:
                values.setdefault(key, {})[filename] = (directory / filename).read_text().strip()
    return values


@pytest.fixture
def roots() -> Iterator[tuple[str, str]]:
    manager = CgroupManager(root=CGROUP_ROOT)
    names = (f"/kt-go-{secrets.token_hex(3)}", f"/kt-trio-{secrets.token_hex(3)}")
    for name in names:
        manager.create((name[1:],))
        manager.create((name[1:], RESERVED_CGROUP))
    yield names
    for name in names:
        for pid in manager.pids((name[1:],)):  # anything the Go kubelet's pods left behind
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        manager.destroy((name[1:],))


def run_go_kubelet(env: LocalCriEnvironment, work: Path, root: str) -> subprocess.Popen[bytes]:
    manifests = work / "manifests"
    manifests.mkdir(parents=True)
    for name, resources in RESOURCES.items():
        container = {"name": "c", "image": env.images.busybox, "command": ["sh", "-c", "sleep 3600 & wait"]}
        manifest = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"containers": [{**container, "resources": resources}]},
        }
        (manifests / f"{name}.json").write_text(json.dumps(manifest))
    reserved = ",".join(f"{k}={v}" for k, v in KUBE_RESERVED.items())
    command = [
        str(kubelet_go()),
        f"--pod-manifest-path={manifests}",
        f"--root-dir={work / 'root'}",
        f"--cert-dir={work / 'pki'}",
        f"--hostname-override={NODE}",
        "--container-runtime=remote",
        f"--container-runtime-endpoint={env.endpoint}",
        "--cgroups-per-qos=true",
        f"--cgroup-root={root}",
        "--cgroup-driver=cgroupfs",
        f"--enforce-node-allocatable={ENFORCE}",
        f"--kube-reserved={reserved}",
        f"--kube-reserved-cgroup={root}/{RESERVED_CGROUP}",
        f"--pod-max-pids={PIDS}",
        "--fail-swap-on=false",
        "--make-iptables-util-chains=false",
        "--address=127.0.0.1",
        f"--port={free_port()}",
        "--read-only-port=0",
        f"--healthz-port={free_port()}",
        "--v=2",
    ]
    with (work / "kubelet.log").open("wb") as out:  # the child keeps its own descriptor
        return subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)


async def go_pod_names(env: LocalCriEnvironment) -> dict[str, str]:
    async with open_cri_runtime(env.endpoint, request_timeout=30) as rt:
        sandboxes = await rt.list_pod_sandbox(pb.PodSandboxFilter())
    suffix = f"-{NODE}"  # a static pod's name ends with its node's
    return {
        s.metadata.uid: s.metadata.name.removesuffix(suffix)
        for s in sandboxes
        if s.metadata and s.metadata.name.removesuffix(suffix) in RESOURCES
    }


async def remove_go_pods(env: LocalCriEnvironment) -> None:
    async with open_cri_runtime(env.endpoint, request_timeout=30) as rt:
        for sandbox in await rt.list_pod_sandbox(pb.PodSandboxFilter()):
            if sandbox.metadata and sandbox.metadata.name.removesuffix(f"-{NODE}") in RESOURCES:
                await stop_and_remove_sandbox(rt, sandbox.id)


async def test_the_same_tree_as_the_go_kubelet(
    cri_env: LocalCriEnvironment, roots: tuple[str, str], tmp_path: Path
) -> None:
    if kubelet_go() is None:
        pytest.skip(f"reference tier skipped: no kubelet-go; build it: {BUILD_HINT}")
    go_root, trio_root = roots
    pods = [pod(name, resources, uid=secrets.token_hex(16)) for name, resources in RESOURCES.items()]
    cm = ContainerManager(
        config=NodeConfig(
            cgroup_root=trio_root,
            enforce_node_allocatable=frozenset(ENFORCE.split(",")),
            kube_reserved=KUBE_RESERVED,
            kube_reserved_cgroup=f"{trio_root}/{RESERVED_CGROUP}",
            pod_pids_limit=PIDS,
        ),
        active_pods=lambda: pods,
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(cm.run)
        for p in pods:
            await cm.ensure_pod_cgroup(p)
        ours = dump(trio_root, {p.uid: p.name for p in pods})
        nursery.cancel_scope.cancel()

    proc = run_go_kubelet(cri_env, tmp_path, go_root)
    try:
        theirs: dict[str, dict[str, str]] = {}
        with trio.move_on_after(120):
            while theirs != ours:  # until Go made every pod cgroup and its tiers' shares count them
                await trio.sleep(1)
                assert proc.poll() is None, (tmp_path / "kubelet.log").read_text()[-4000:]
                theirs = dump(go_root, await go_pod_names(cri_env))
        assert theirs == ours
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        with trio.move_on_after(60, shield=True):
            await remove_go_pods(cri_env)
        # the Go kubelet bind-mounts its root directory onto itself
        with trio.move_on_after(30, shield=True):
            await trio.run_process(["umount", "-l", str(tmp_path / "root")], check=False, capture_stderr=True)
