"""Pod cgroups made by the daemon on real containerd (cgroupfs driver): each QoS class in its place with
its values, ``--pod-max-pids`` containing fork bombs at pod level while the node stays healthy, the
cgroups adopted untouched across a kubelet restart and gone once the pods are deleted.

Each daemon gets a cgroup root of its own (``--cgroup-root``), removed afterwards, so that nothing else
on the machine (another kubelet's ``kubepods``, a concurrent test daemon) is touched.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from kubelet_trio.cm.cgroup_manager import CGROUP_ROOT, CgroupManager
from kubelet_trio.testing.env import LocalCriEnvironment, remove_all_pods
from kubelet_trio.testing.registry import free_port
from tests.cm.test_pod_cgroups_containerd import cgroup_dir, value

pytestmark = pytest.mark.containerd

MI = 1 << 20
PIDS_LIMIT = 64
SLEEP = ["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"]


def forks(count: int) -> list[str]:
    """A background shell starting ``count`` sleeping children until a fork fails (busybox sh exits
    then), under a first process that never forks, so the container keeps running at the limit."""
    loop = f"i=0; while [ $i -lt {count} ]; do sleep 3600 & i=$((i+1)); done; wait"
    return ["sh", "-c", f"sh -c '{loop}' & exec sleep 3600"]


def manifest(name: str, image: str, *containers: tuple[list[str], dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {"name": f"c{i}", "image": image, "command": command, "resources": resources}
                for i, (command, resources) in enumerate(containers)
            ],
        },
    }


@pytest.fixture
def cgroup_root() -> Iterator[str]:
    name = f"/kubelet-trio-daemon-{secrets.token_hex(4)}"
    manager = CgroupManager(root=CGROUP_ROOT)
    manager.create((name[1:],))
    yield name
    manager.destroy((name[1:],))


class Daemon:
    """The kubelet daemon on containerd, with its static pods in a directory and /pods on a port."""

    def __init__(self, tmp: Path, cri: LocalCriEnvironment, cgroup_root: str) -> None:
        self.tmp, self.cri, self.cgroup_root = tmp, cri, cgroup_root
        self.node = f"cgroups-{secrets.token_hex(3)}"
        self.manifests = tmp / "manifests"
        self.manifests.mkdir()
        self.healthz, self.read_only = free_port(), free_port()
        self.proc: subprocess.Popen[str] | None = None
        self.starts = 0

    def start(self, *flags: str) -> None:
        self.starts += 1
        log = (self.tmp / f"daemon-{self.starts}.log").open("w")
        with log:  # the child keeps its own descriptor
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "kubelet_trio", "--runtime", "cri",
                 "--container-runtime-endpoint", self.cri.endpoint, "--hostname-override", self.node,
                 "--root-dir", str(self.tmp / "root"), "--pod-logs-dir", str(self.tmp / "logs"),
                 "--pod-manifest-path", str(self.manifests), "--file-check-frequency", "1s",
                 "--port", "0", "--healthz-port", str(self.healthz), "--read-only-port", str(self.read_only),
                 "--address", "127.0.0.1", "--cgroup-root", self.cgroup_root,
                 "--pod-max-pids", str(PIDS_LIMIT), *flags],
                stdout=log, stderr=log, text=True,
            )  # fmt: skip

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(30)

    def log(self) -> str:
        return "\n".join(p.read_text() for p in sorted(self.tmp.glob("daemon-*.log")))

    def add(self, pod: dict[str, Any]) -> None:
        (self.manifests / f"{pod['metadata']['name']}.json").write_text(json.dumps(pod))

    def remove_all(self) -> None:
        for path in self.manifests.iterdir():
            path.unlink()

    def pods(self) -> dict[str, dict[str, Any]]:
        """Pod name (without the node suffix) → the pod as /pods shows it."""
        body = httpx.get(f"http://127.0.0.1:{self.read_only}/pods", timeout=5).json()
        suffix = f"-{self.node}"
        return {p["metadata"]["name"].removesuffix(suffix): p for p in body.get("items") or []}

    def healthy(self) -> bool:
        return httpx.get(f"http://127.0.0.1:{self.healthz}/healthz", timeout=5).text == "ok"

    def wait(self, check: Callable[[], Any], timeout: float = 120) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc is not None and self.proc.poll() is None, self.log()
            try:
                if result := check():
                    return result
            except (httpx.HTTPError, OSError, KeyError, ValueError):
                pass
            time.sleep(0.25)
        raise AssertionError(f"condition not met in {timeout}s:\n{self.log()}")

    def running(self, *names: str) -> dict[str, dict[str, Any]]:
        pods = self.pods()
        ok = all(pods.get(n, {}).get("status", {}).get("phase") == "Running" for n in names)
        return {n: pods[n] for n in names} if ok else {}


@pytest.fixture
def daemon(tmp_path: Path, cri_env: LocalCriEnvironment, cgroup_root: str) -> Iterator[Daemon]:
    d = Daemon(tmp_path, cri_env, cgroup_root)
    try:
        yield d
    finally:
        d.stop()
        trio.run(remove_all_pods, cri_env.endpoint, d.node)  # its cgroups go with the test's root


def pids_current(cgroup: str) -> int:
    path = cgroup_dir(cgroup, "pids") / "pids.current"
    return int(path.read_text())


def container_ids(pod: dict[str, Any]) -> list[str]:
    return sorted(s["containerID"] for s in pod["status"]["containerStatuses"])


def test_qos_classes_pid_limits_restart_and_deletion(daemon: Daemon, cri_env: LocalCriEnvironment) -> None:
    image = cri_env.images.busybox
    both = {"cpu": "100m", "memory": "64Mi"}
    daemon.add(manifest("guaranteed", image, (SLEEP, {"requests": both, "limits": both})))
    daemon.add(manifest("burstable", image, (SLEEP, {"requests": {"cpu": "250m", "memory": "32Mi"}})))
    daemon.add(manifest("besteffort", image, (SLEEP, {})))
    daemon.add(manifest("bomb", image, (forks(200), {})))
    daemon.add(manifest("pair", image, (forks(40), {}), (forks(40), {})))
    names = ("guaranteed", "burstable", "besteffort", "bomb", "pair")
    root = daemon.cgroup_root
    daemon.start()
    pods = daemon.wait(lambda: daemon.running(*names), timeout=180)

    # the kubelet's own OOM score (Go's --oom-score-adj default), or a warning where lowering it is not
    # permitted (no CAP_SYS_RESOURCE, as in some containers)
    assert daemon.proc is not None
    score = Path(f"/proc/{daemon.proc.pid}/oom_score_adj").read_text().strip()
    assert score == "-999" or (score == "0" and "cannot set oom_score_adj" in daemon.log())
    uid = {name: pod["metadata"]["uid"] for name, pod in pods.items()}
    assert {name: pods[name]["status"]["qosClass"] for name in names[:3]} == {
        "guaranteed": "Guaranteed",
        "burstable": "Burstable",
        "besteffort": "BestEffort",
    }
    cgroups = {
        "guaranteed": f"{root}/kubepods/pod{uid['guaranteed']}",
        "burstable": f"{root}/kubepods/burstable/pod{uid['burstable']}",
        **{n: f"{root}/kubepods/besteffort/pod{uid[n]}" for n in ("besteffort", "bomb", "pair")},
    }
    g = cgroups["guaranteed"]
    assert value(g, "memory", "memory.limit_in_bytes") == str(64 * MI)
    assert value(g, "cpu", "cpu.shares") == "102"
    assert value(g, "cpu", "cpu.cfs_quota_us") == "10000"
    assert value(cgroups["burstable"], "cpu", "cpu.shares") == "256"
    assert value(cgroups["besteffort"], "cpu", "cpu.shares") == "2"
    for cgroup in cgroups.values():
        assert value(cgroup, "pids", "pids.max") == str(PIDS_LIMIT)
    assert value(f"{root}/kubepods/burstable", "cpu", "cpu.shares") == "256"
    # every container of each pod runs in the pod's cgroup (the runtime put it there)
    for name, pod in pods.items():
        for container_id in container_ids(pod):
            procs = cgroup_dir(cgroups[name], "memory") / container_id.split("//")[-1] / "cgroup.procs"
            assert procs.read_text().split(), name

    # fork bombs stop at the pod's limit: one container forking 200, two forking 40 each (each under
    # the limit, together over it); the node stays healthy and the other pods run on
    daemon.wait(lambda: pids_current(cgroups["bomb"]) == PIDS_LIMIT)
    daemon.wait(lambda: pids_current(cgroups["pair"]) == PIDS_LIMIT)
    time.sleep(2)
    assert pids_current(cgroups["bomb"]) == pids_current(cgroups["pair"]) == PIDS_LIMIT
    assert daemon.healthy()
    assert daemon.running(*names)

    # a restart adopts the cgroups: same directories, same processes, same containers
    inodes = {n: os.stat(cgroup_dir(c, "memory")).st_ino for n, c in cgroups.items()}
    procs = {n: sorted(_procs_below(cgroup_dir(c, "memory"))) for n, c in cgroups.items()}
    daemon.stop()
    daemon.start()
    daemon.wait(daemon.healthy)
    time.sleep(6)  # a few syncs and housekeepings (every 2s)
    after = daemon.wait(lambda: daemon.running(*names))
    assert {n: container_ids(p) for n, p in after.items()} == {n: container_ids(p) for n, p in pods.items()}
    assert {n: os.stat(cgroup_dir(c, "memory")).st_ino for n, c in cgroups.items()} == inodes
    assert {n: sorted(_procs_below(cgroup_dir(c, "memory"))) for n, c in cgroups.items()} == procs

    # deleted pods lose their cgroups
    daemon.remove_all()
    daemon.wait(
        lambda: (
            not any(cgroup_dir(c, h).exists() for c in cgroups.values() for h in ("cpu", "memory", "pids"))
        )
    )
    assert cgroup_dir(f"{root}/kubepods/burstable", "memory").is_dir()  # the tiers stay, as in Go


def _procs_below(directory: Path) -> list[str]:
    return [pid for procs in directory.rglob("cgroup.procs") for pid in procs.read_text().split()]


def test_a_container_past_its_memory_limit_is_oom_killed_and_restarted(
    daemon: Daemon, cri_env: LocalCriEnvironment
) -> None:
    both = {"cpu": "100m", "memory": "64Mi"}
    hog = ["dd", "if=/dev/zero", "of=/dev/null", "bs=256M", "count=1"]  # the container's own process
    daemon.add(manifest("hog", cri_env.images.busybox, (hog, {"requests": both, "limits": both})))
    daemon.start()

    def restarted() -> dict[str, Any] | None:
        pod = daemon.pods().get("hog")
        statuses = (pod or {}).get("status", {}).get("containerStatuses") or []
        return statuses[0] if statuses and statuses[0].get("restartCount", 0) >= 1 else None

    status = daemon.wait(restarted, timeout=180)
    terminated = status["lastState"]["terminated"]
    assert (terminated["exitCode"], terminated["reason"]) == (137, "OOMKilled")
    uid = daemon.pods()["hog"]["metadata"]["uid"]

    # the kernel's OOM kill as the OOM watcher reads it (/dev/kmsg), naming the pod's cgroup, and the
    # crash loop's back-off after the restart
    def oom_and_back_off() -> str | None:
        text = daemon.log()
        return text if f"kubepods/pod{uid}" in text and "CrashLoopBackOff" in text else None

    log = daemon.wait(oom_and_back_off)
    assert any('"OOM kill"' in line and 'process="dd"' in line and uid in line for line in log.splitlines())
    assert daemon.healthy()


def test_the_reserved_cgroups_are_limited_and_a_missing_one_stops_the_start(
    daemon: Daemon, cgroup_root: str
) -> None:
    manager = CgroupManager(root=CGROUP_ROOT)
    kube, system = f"{cgroup_root}/kube-reserved", f"{cgroup_root}/system-reserved"
    for cgroup in (kube, system):  # inside the test's root: removed with it
        manager.create(manager.cgroup_name(cgroup))
    flags = (
        "--enforce-node-allocatable=pods,kube-reserved,system-reserved",
        *("--kube-reserved", "cpu=200m,memory=300Mi,pid=500", "--kube-reserved-cgroup", kube),
        *("--system-reserved", "memory=200Mi", "--system-reserved-cgroup", system),
    )
    daemon.start(*flags)
    daemon.wait(lambda: value(kube, "memory", "memory.limit_in_bytes") == str(300 * MI))
    assert value(kube, "cpu", "cpu.shares") == "204"
    assert value(kube, "pids", "pids.max") == "500"
    assert value(system, "memory", "memory.limit_in_bytes") == str(200 * MI)
    daemon.wait(daemon.healthy)
    with open("/proc/meminfo", encoding="ascii") as meminfo:
        total = int(meminfo.readline().split()[1]) * 1024  # MemTotal, the node's memory capacity
    limit = int(value(f"{cgroup_root}/kubepods", "memory", "memory.limit_in_bytes"))
    assert limit == total - 500 * MI
    # kubepods is the summary's "pods" system container: what the pods may still use is allocatable
    # less their working set (Go's allocatableMemory.available eviction signal)
    summary = httpx.get(f"http://127.0.0.1:{daemon.read_only}/stats/summary", timeout=10).json()
    [pods] = [c for c in summary["node"]["systemContainers"] if c["name"] == "pods"]
    assert pods["memory"]["availableBytes"] + pods["memory"]["workingSetBytes"] == limit
    assert pods["cpu"]["usageCoreNanoSeconds"] >= 0
    daemon.stop()

    manager.destroy(manager.cgroup_name(kube))
    daemon.start(*flags)
    assert daemon.proc is not None
    assert daemon.proc.wait(60) == 1
    assert f'Failed to enforce Kube Reserved Cgroup Limits on "{kube}": cgroup [' in daemon.log()
    assert "has some missing paths" in daemon.log()
