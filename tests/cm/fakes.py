"""Stand-ins for /sys/fs/cgroup (v1 and v2 layouts) and pods of each QoS class."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kubelet_trio.api import Pod

MI = 1 << 20
#: the v1 hierarchies of this kind of machine; ``unified`` is the hybrid layout's v2 mount
V1_HIERARCHIES = ("blkio", "cpu", "cpuacct", "cpuset", "devices", "freezer", "memory", "pids", "systemd")
V2_CONTROLLERS = "cpuset cpu io memory hugetlb pids"


def v1_root(tmp: Path) -> Path:
    root = tmp / "cgroup-v1"
    for hierarchy in (*V1_HIERARCHIES, "unified"):
        (root / hierarchy).mkdir(parents=True)
    (root / "cpuset" / "cpuset.cpus").write_text("0-1\n")
    (root / "cpuset" / "cpuset.mems").write_text("0\n")
    return root


def v2_root(tmp: Path) -> Path:
    root = tmp / "cgroup-v2"
    root.mkdir()
    (root / "cgroup.controllers").write_text(V2_CONTROLLERS + "\n")
    return root


def read(path: Path) -> str:
    return path.read_text().strip()


def pod(
    name: str,
    *containers: Mapping[str, Any],
    uid: str | None = None,
    init: tuple[Mapping[str, Any], ...] = (),
    **spec: Any,
) -> Pod:
    """A pod whose containers have the given ``resources`` (each a {"requests": ..., "limits": ...})."""
    body: dict[str, Any] = {
        "containers": [
            {"name": f"c{i}", "image": "busybox", "resources": dict(r)} for i, r in enumerate(containers)
        ],
        **spec,
    }
    if init:
        body["initContainers"] = [
            {"name": f"init{i}", "image": "busybox", "resources": dict(r)} for i, r in enumerate(init)
        ]
    uid = uid or f"{name}-0000-1111-2222"
    return Pod.from_dict({"metadata": {"name": name, "namespace": "default", "uid": uid}, "spec": body})


def guaranteed(name: str = "guaranteed", **kw: Any) -> Pod:
    both = {"cpu": "100m", "memory": "64Mi"}
    return pod(name, {"requests": both, "limits": both}, **kw)


def burstable(name: str = "burstable", cpu: str = "250m", **kw: Any) -> Pod:
    return pod(name, {"requests": {"cpu": cpu, "memory": "32Mi"}}, **kw)


def best_effort(name: str = "besteffort", **kw: Any) -> Pod:
    return pod(name, {}, **kw)
