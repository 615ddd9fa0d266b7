"""Shared pieces of the benchmarks: the pod's command, the CRI floor, process CPU/RSS/fds, medians, daemons,
and the API benchmarks' control plane and kubelets under test (kubelet-trio and the Go kubelet, each on a
private containerd, joined as nodes).

The benchmarks are scripts (``python bench/<name>.py``), so this module is imported as ``_common`` from
the script's own directory.
"""

from __future__ import annotations

import collections
import os
import platform
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import attrs
import httpx
import trio
import yaml

from kubelet_trio import defaults
from kubelet_trio.cri.gen.runtime import v1 as pb
from kubelet_trio.cri.runtime import Runtime
from kubelet_trio.testing.env import LocalCriEnvironment, private_cgroup_root
from kubelet_trio.testing.envtest import DEFAULT_ASSETS, assets, start_envtest
from kubelet_trio.testing.registry import free_port

#: A long-running busybox container that exits 0 on SIGTERM (busybox `sh` as PID 1 ignores it otherwise).
COMMAND = ["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"]
#: The exec readiness check of the API benchmark's pods, and of the floor's one "Ready" exec.
READY_COMMAND = ["cat", "/etc/hostname"]
#: What the floor gives StopContainer (the pods' terminationGracePeriodSeconds).
STOP_TIMEOUT = 5
#: The Go kubelet: 1.24's ``kubelet-go`` (build-envtest.sh) or 1.36's ``kubelet`` (build-k136.sh).
GO_KUBELET = next(
    (p for p in (DEFAULT_ASSETS / "kubelet-go", DEFAULT_ASSETS / "kubelet") if p.exists()),
    DEFAULT_ASSETS / "kubelet",
)
TRIO_NODE = "bench-trio"
GO_NODE = "bench-go"
NODE_READY_TIMEOUT = 120.0


async def floor_run(
    runtime: Runtime,
    image: str,
    n: int,
    workdir: Path,
    ready_command: Sequence[str] | None = None,
    probe_period: float | None = None,
) -> dict[str, float]:
    """N pods straight through the Runtime, no kubelet: the least any kubelet can take.

    Start is RunPodSandbox + CreateContainer + StartContainer, all pods concurrently (then, with
    ``ready_command``, ONE successful ExecSync per pod, as a readiness probe's first success); stop is
    StopContainer + StopPodSandbox + RemovePodSandbox, all pods concurrently. ``probe_period``: a ready
    pod goes on running ``ready_command`` every period until all are ready, the load a kubelet's
    readiness probes put on the runtime meanwhile.
    """
    await runtime.pull_image(pb.ImageSpec(image=image))
    pods: list[tuple[str, str]] = []
    running_at: list[float] = []
    ready_at: list[float] = []
    all_ready = trio.Event()

    async def start(i: int) -> None:
        uid = secrets.token_hex(8)
        sandbox = pb.PodSandboxConfig(
            metadata=pb.PodSandboxMetadata(name=f"floor-{i}", namespace="bench", uid=uid),
            log_directory=str(workdir / "floor-logs" / uid),
        )
        sandbox_id = await runtime.run_pod_sandbox(sandbox)
        container = pb.ContainerConfig(
            metadata=pb.ContainerMetadata(name="app"),
            image=pb.ImageSpec(image=image),
            command=COMMAND,
            log_path="app/0.log",
        )
        container_id = await runtime.create_container(sandbox_id, container, sandbox)
        pods.append((sandbox_id, container_id))
        await runtime.start_container(container_id)
        running_at.append(time.perf_counter())
        if ready_command is not None:
            # an outside observer of the runtime: polling is all there is
            while (await runtime.exec_sync(container_id, list(ready_command), 5)).exit_code != 0:  # noqa: ASYNC110
                await trio.sleep(0.01)
            ready_at.append(time.perf_counter())
            if len(ready_at) == n:
                all_ready.set()
            while probe_period is not None and not all_ready.is_set():
                with trio.move_on_after(probe_period):
                    await all_ready.wait()
                if not all_ready.is_set():
                    await runtime.exec_sync(container_id, list(ready_command), 5)

    async def stop(sandbox_id: str, container_id: str) -> None:
        await runtime.stop_container(container_id, STOP_TIMEOUT)
        await runtime.stop_pod_sandbox(sandbox_id)
        await runtime.remove_pod_sandbox(sandbox_id)

    cpu0, machine0 = cpu_by_command(), machine_busy_seconds()
    t0 = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for i in range(n):
            nursery.start_soon(start, i)
    started = max(running_at) - t0
    start_cpu, machine1 = cpu_delta(cpu0, cpu_by_command()), machine_busy_seconds()
    t1 = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for sandbox_id, container_id in pods:
            nursery.start_soon(stop, sandbox_id, container_id)
    out = {"all_running_s": round(started, 3), "all_gone_s": round(time.perf_counter() - t1, 3)}
    if ready_command is not None:
        out["all_ready_s"] = round(max(ready_at) - t0, 3)
    out["machine_cpu_start_s"] = round(machine1 - machine0, 2)
    out.update({f"start_cpu_{name}": seconds for name, seconds in start_cpu.items()})
    return out


def proc_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def machine_busy_seconds() -> float:
    """CPU seconds all cores of this machine have spent busy (not idle, not waiting for I/O) since boot."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def cpu_by_command() -> dict[str, float]:
    """CPU seconds so far of every process on the machine but this one, summed by command name, each
    with its reaped children's (so a containerd shim carries the ``runc`` runs it waited for)."""
    clock_tick = os.sysconf("SC_CLK_TCK")
    out: collections.defaultdict[str, float] = collections.defaultdict(float)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            text = (entry / "stat").read_text()
        except OSError:
            continue  # gone meanwhile
        name, _, rest = text.partition(" (")[2].rpartition(")")
        fields = rest.split()
        out[name] += sum(int(f) for f in fields[11:15]) / clock_tick
    return dict(out)


def cpu_delta(
    before: Mapping[str, float], after: Mapping[str, float], least: float = 0.05
) -> dict[str, float]:
    """Per command, the CPU seconds used between two :func:`cpu_by_command` readings (``least`` or more)."""
    deltas = {name: round(after[name] - before.get(name, 0.0), 2) for name in after}
    return {name: d for name, d in sorted(deltas.items(), key=lambda kv: -kv[1]) if d >= least}


def proc_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def proc_threads(pid: int) -> int:
    """The OS threads of process ``pid`` (``Threads:`` of its ``/proc/<pid>/status``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    return 0


def proc_fd_count(pid: int) -> int:
    """The open file descriptors of process ``pid`` (entries of ``/proc/<pid>/fd``)."""
    return len(os.listdir(f"/proc/{pid}/fd"))


def measure_process(pid: int, seconds: float) -> dict[str, float]:
    """CPU share (% of one core) over ``seconds`` of wall time, and RSS at the end (and its peak)."""
    cpu0, t0 = proc_cpu_seconds(pid), time.monotonic()
    rss_max = 0.0
    deadline = t0 + seconds
    while (left := deadline - time.monotonic()) > 0:
        time.sleep(min(1.0, left))
        rss_max = max(rss_max, proc_rss_mb(pid))
    cpu1, t1 = proc_cpu_seconds(pid), time.monotonic()
    return {
        "seconds": round(t1 - t0, 1),
        "cpu_percent_of_one_core": round(100 * (cpu1 - cpu0) / (t1 - t0), 2),
        "rss_mb": round(proc_rss_mb(pid), 1),
        "rss_max_mb": round(rss_max, 1),
    }


def medians(runs: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """Per key, the median over the runs that have it."""
    keys = dict.fromkeys(k for run in runs for k in run)
    return {k: round(statistics.median(run[k] for run in runs if k in run), 3) for k in keys}


def ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or b == 0 else round(a / b, 2)


def stop_process(proc: subprocess.Popen[Any], timeout: float = 20) -> int:
    """SIGTERM, then SIGKILL after ``timeout``; the exit status."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode


def unmount_under(directory: Path) -> None:
    """Lazily unmount everything mounted at or below ``directory`` (the Go kubelet bind-mounts its root
    directory onto itself, and pod volumes below it), deepest first."""
    prefix = str(directory.resolve())
    points = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4].replace("\\040", " ")
        if point == prefix or point.startswith(prefix + "/"):
            points.append(point)
    for point in sorted(points, key=len, reverse=True):
        subprocess.run(["umount", "-l", point], check=False, capture_output=True)


def log_tail(path: Path, chars: int = 3000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return ""


# -- profile ---------------------------------------------------------------------------------------------


def _function(frame: str) -> str:
    """``name (file.py:123)`` → ``name (file.py)``: one entry per function, whatever the line."""
    name, sep, where = frame.partition(" (")
    return f"{name} ({where.rsplit(':', 1)[0]})" if sep else frame


def summarize_raw_profile(path: Path, top: int = 15) -> dict[str, Any]:
    """From py-spy's collapsed stacks (sampled with ``--gil``: on-CPU Python only): the functions with the
    most samples at the top of the stack (self) and anywhere on it (inclusive), as % of all samples."""
    own: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    total = 0
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        total += count
        frames = [_function(f) for f in stack.split(";") if f]
        if frames:
            own[frames[-1]] += count
        for frame in set(frames):
            inclusive[frame] += count

    def pct(c: int) -> float:
        return round(100 * c / total, 1) if total else 0.0

    return {
        "samples": total,
        "self_top": [{"function": f, "percent": pct(c)} for f, c in own.most_common(top)],
        "inclusive_top": [{"function": f, "percent": pct(c)} for f, c in inclusive.most_common(top * 3)],
    }


@contextmanager
def py_spy_record(pid: int, out: Path) -> Iterator[str | None]:
    """Sample process ``pid`` with ``py-spy record`` (raw collapsed stacks, on-CPU Python only) into ``out``
    while the block runs. Yields None, or why there is no profile (then the block should not bother)."""
    py_spy = shutil.which("py-spy")
    if py_spy is None:
        yield "py-spy not installed (pip install py-spy)"
        return
    log = out.with_suffix(".log")
    with log.open("wb") as err:
        spy = subprocess.Popen(
            [
                *(py_spy, "record", "--gil", "--format", "raw", "--rate", "100"),
                "-o",
                str(out),
                "--pid",
                str(pid),
            ],
            stdout=err,
            stderr=err,
        )
    try:
        time.sleep(1.0)  # py-spy attaches
        yield None
    finally:
        spy.send_signal(signal.SIGINT)  # py-spy writes its output and exits
        try:
            spy.wait(30)
        except subprocess.TimeoutExpired:
            spy.kill()
    if not out.exists():
        raise RuntimeError(f"py-spy wrote nothing: {log_tail(log, 800)}")


# -- the control plane --------------------------------------------------------------------------------


class ControlPlane:
    """A kubeconfig to an API server, its label, and an admin httpx client for sync set-up."""

    def __init__(self, label: str, kubeconfig: Path, client: Callable[[], httpx.Client]) -> None:
        self.label = label
        self.kubeconfig = kubeconfig
        self.http_client = client


@contextmanager
def control_plane(kind: str, workdir: Path) -> Iterator[ControlPlane]:
    """The real kube-apiserver when its binaries are here (or ``kind == "envtest"``), else the fake."""
    directory = assets()
    if kind == "envtest" and directory is None:
        raise SystemExit(
            "--api envtest: no etcd + kube-apiserver in KUBEBUILDER_ASSETS or " + str(DEFAULT_ASSETS)
        )
    if kind != "fake" and directory is not None:
        version = subprocess.run(
            [str(directory / "kube-apiserver"), "--version"], capture_output=True, text=True, check=False
        ).stdout.strip()
        extra = ["--kubelet-preferred-address-types=InternalIP,Hostname"]
        with start_envtest(directory, extra_args=extra) as api:
            yield ControlPlane(
                f"kube-apiserver ({version}, envtest binaries)", api.kubeconfig, api.http_client
            )
        return
    kubeconfig = workdir / "fake-kubeconfig"
    log = workdir / "fake-apiserver.log"
    with log.open("wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "kubelet_trio", "fake-apiserver", "--kubeconfig-out", str(kubeconfig)],
            stdout=subprocess.PIPE,
            stderr=err,
        )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().decode().strip()
        if not url:
            raise RuntimeError(f"fake-apiserver did not start:\n{log_tail(log)}")
        yield ControlPlane(
            "fake API server (kubelet_trio.testing.fakeapi, NOT a real kube-apiserver) over loopback",
            kubeconfig,
            lambda: httpx.Client(base_url=url, timeout=10),
        )
    finally:
        stop_process(proc)


def node_ready(client: httpx.Client, node: str) -> bool:
    response = client.get(f"/api/v1/nodes/{node}")
    if response.status_code != 200:
        return False
    conditions = response.json().get("status", {}).get("conditions") or ()
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def wait_node_ready(
    plane: ControlPlane, node: str, proc: subprocess.Popen[bytes], log: Path, port: int
) -> float:
    """Seconds until the node object says Ready and the kubelet's server on ``port`` accepts (a node can
    be Ready before its kubelet listens); the daemon's log tail when it exits or times out."""
    t0 = time.monotonic()

    def serving() -> bool:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
        except OSError:
            return False
        return True

    with plane.http_client() as client:
        while not (node_ready(client, node) and serving()):
            if proc.poll() is not None or time.monotonic() - t0 > NODE_READY_TIMEOUT:
                raise RuntimeError(f"node {node} not Ready (exit {proc.poll()}); log tail:\n{log_tail(log)}")
            time.sleep(0.25)
    return round(time.monotonic() - t0, 2)


# -- the kubelets -------------------------------------------------------------------------------------


@attrs.frozen
class KubeletProcess:
    """A kubelet process under test, the port of its Kubelet API (``/metrics`` over TLS) and the CRI
    endpoint of its runtime."""

    proc: subprocess.Popen[bytes]
    port: int
    cri_endpoint: str

    @property
    def pid(self) -> int:
        return self.proc.pid


@contextmanager
def trio_kubelet(
    plane: ControlPlane,
    cri: LocalCriEnvironment,
    workdir: Path,
    log_dir: Path | None,
    extra_args: Sequence[str] = (),
) -> Iterator[KubeletProcess]:
    """``python -m kubelet_trio --kubeconfig`` as users run it, until its node is Ready; its pod cgroups
    under a root of its own (two kubelets sharing ``/kubepods`` remove each other's pods as orphans)."""
    workdir.mkdir(parents=True, exist_ok=True)
    log = (log_dir or workdir) / "kubelet-trio.log"
    port = free_port()
    command = [
        sys.executable, "-m", "kubelet_trio",
        "--kubeconfig", str(plane.kubeconfig),
        "--container-runtime-endpoint", cri.endpoint,
        "--hostname-override", TRIO_NODE,
        "--root-dir", str(workdir / "root"),
        "--pod-logs-dir", str(workdir / "pods"),
        "--healthz-port", "0",
        "--port", str(port),
        "--anonymous-auth=true",  # /metrics for the benchmark, as the Go kubelet's configuration has it
        "--fail-swap-on=false",
        *extra_args,
    ]  # fmt: skip
    with private_cgroup_root("bench-trio") as cgroup_root:
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [*command, "--cgroup-root", cgroup_root],
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        try:
            wait_node_ready(plane, TRIO_NODE, proc, log, port)
            yield KubeletProcess(proc, port, cri.endpoint)
        finally:
            stop_process(proc)


def go_kubelet_minor() -> int:
    """The Go kubelet's minor version (``Kubernetes v1.36.2`` → 36)."""
    out = subprocess.run([str(GO_KUBELET), "--version"], capture_output=True, text=True, check=True).stdout
    return int(out.split("v1.", 1)[1].split(".", 1)[0])


def go_kubelet_config(
    workdir: Path,
    port: int,
    cgroup_root: str,
    endpoint: str,
    *,
    qps: bool,
    extra: Mapping[str, Any] | None = None,
) -> Path:
    """A KubeletConfiguration for running the Go kubelet as root in this (cgroup v1, no systemd) box;
    ``extra``: more fields (``{"maxPods": 130}``), over the others."""
    config: dict[str, Any] = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": cgroup_root,
        "failSwapOn": False,
        "port": port,
        "readOnlyPort": 0,
        "healthzPort": 0,
        "authentication": {"anonymous": {"enabled": True}, "webhook": {"enabled": False}},
        "authorization": {"mode": "AlwaysAllow"},
        "resolvConf": "/etc/resolv.conf",
    }
    if go_kubelet_minor() >= 27:  # the runtime endpoint moved into the config; 1.35 refuses cgroup v1
        config.update(containerRuntimeEndpoint=endpoint, failCgroupV1=False)
    if qps:  # the same client limits as kubelet-trio's: both kubelets then do the same API work
        config.update(
            kubeAPIQPS=defaults.KUBE_API_QPS,
            kubeAPIBurst=defaults.KUBE_API_BURST,
            eventRecordQPS=defaults.EVENT_RECORD_QPS,
            eventBurst=defaults.EVENT_BURST,
        )
    config.update(extra or {})
    path = workdir / ("config.yaml" if qps else "config-default-qps.yaml")
    path.write_text(yaml.safe_dump(config))
    return path


@contextmanager
def go_kubelet(
    plane: ControlPlane,
    cri: LocalCriEnvironment,
    workdir: Path,
    log_dir: Path | None,
    *,
    qps: bool,
    extra_config: Mapping[str, Any] | None = None,
) -> Iterator[KubeletProcess]:
    """The Go kubelet on its own containerd, until its node is Ready (``extra_config``: more
    KubeletConfiguration fields)."""
    workdir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    log = (log_dir or workdir) / ("kubelet-go.log" if qps else "kubelet-go-default-qps.log")
    with private_cgroup_root("bench-go") as cgroup_root:
        command = [
            str(GO_KUBELET),
            "--config="
            + str(go_kubelet_config(workdir, port, cgroup_root, cri.endpoint, qps=qps, extra=extra_config)),
            f"--kubeconfig={plane.kubeconfig}",
            f"--hostname-override={GO_NODE}",
            f"--root-dir={workdir / 'root'}",
            f"--cert-dir={workdir / 'pki'}",
            "--v=2",
        ]
        if go_kubelet_minor() < 27:
            command += [
                "--container-runtime=remote",
                f"--container-runtime-endpoint={cri.endpoint}",
                f"--pod-infra-container-image={cri.images.pause}",
            ]
        with log.open("wb") as out:
            proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            wait_node_ready(plane, GO_NODE, proc, log, port)
            yield KubeletProcess(proc, port, cri.endpoint)
        finally:
            stop_process(proc)
            unmount_under(workdir / "root")


def is_ready(pod: dict[str, Any]) -> bool:
    conditions = pod.get("status", {}).get("conditions") or ()
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def go_info() -> dict[str, Any]:
    return {
        "binary": str(GO_KUBELET),
        "version": subprocess.run(
            [str(GO_KUBELET), "--version"], capture_output=True, text=True
        ).stdout.strip(),
        "client_limits": {
            "kubeAPIQPS": defaults.KUBE_API_QPS,
            "kubeAPIBurst": defaults.KUBE_API_BURST,
            "eventRecordQPS": defaults.EVENT_RECORD_QPS,
            "eventBurst": defaults.EVENT_BURST,
            "note": "kubelet-trio's defaults (Go's since 1.27); go_kubelet_default_qps: its 1.24 ones",
        },
        "config": "cgroupDriver cgroupfs, failSwapOn false, remote CRI",
    }


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()
