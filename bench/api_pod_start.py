"""Pod create → Ready and delete → gone through an API server: kubelet-trio against the CRI floor and the
Go kubelet. Prints JSON.

- Control plane: etcd + kube-apiserver from the envtest binaries (``kubelet_trio.testing.envtest``);
  without them, the fake API server (``kubelet-trio fake-apiserver``) over loopback, labelled as such.
- kubelet-trio as a subprocess (``python -m kubelet_trio --kubeconfig ...``) on a private containerd,
  node Ready before anything is timed.
- Pods: busybox running ``COMMAND`` (exits 0 on SIGTERM), an exec readiness probe every second,
  ``spec.nodeName`` set, a 5 s grace period. For each N: N pods created concurrently; the time until a
  watch (opened before the creates) has seen condition Ready=True for all; then all deleted (default
  grace) and the time until the watch has seen DELETED for all. ``--runs`` runs per N, each reported,
  and the median.
- The CRI floor in the same run, on a private containerd of its own: the same pods straight through the
  CRI (``_common.floor_run``: sandbox, create, start, one successful ExecSync of the readiness command =
  Ready; stop container, stop and remove sandbox); and ``cri_floor_probing``: the same, with every ready
  pod going on running its readiness command every second until all are ready (what the pods' 1 s
  readiness probes ask of the runtime meanwhile, under any kubelet).
- The Go kubelet (:data:`GO_KUBELET`, when built) on its own private containerd,
  joined to the same API server as another node, with kubelet-trio's default client limits
  (``kubeAPIQPS`` 50, ``kubeAPIBurst`` 100, ``eventRecordQPS`` 50, ``eventBurst`` 100: Go's own defaults
  since 1.27) and, once per N at the end, with its 1.24 defaults (QPS 5, events 5 a second).
- Interleaved: both kubelets are up from the start, and the runs go in rounds (per N and round, one run
  each of the floor, the probing floor, kubelet-trio and the Go kubelet), so that what drifts on a shared
  machine over the minutes of a benchmark falls on all of them alike; each kubelet idles while the
  others are measured.
- Steady state of each kubelet with 30 running pods with 10 s exec probes: CPU (% of one core) and RSS
  over ``--steady-seconds``, measured first (right after the nodes are Ready), so no earlier pods remain
  to be cleaned up.
- Per run, where the time went as a client sees it: all pods reported running, then (median per pod)
  running → Ready reported; all reported terminated after the delete, then gone. Medians are per key.
- After each kubelet's run, untimed, until its runtime holds no container (at most 30 s:
  ``gone_to_runtime_empty_s``), so that its removals of the deleted pods' containers fall on no other
  subject's run.
- Per run, a timeline from the watch: when the pods' containers started (the runtime's ``startedAt``,
  whole seconds), were reported running and were reported Ready, each as the first, 10th, 50th and 90th
  percentile and last pod (``started_p50_s``...), seconds after the creates.
- Per run, the API server's own count of requests on pods and events from the creates to all Ready
  (``to_ready_apiserver_<verb>_<resource>[_<subresource>]``, this benchmark's creates left out): the
  same measure for both kubelets.
- Each kubelet's runtime has the pods' image before the first run (as the floor's), so that no run
  includes its pull.
- ``--profile FILE``: extra (untimed) create → Ready → gone runs of kubelet-trio (``--profile-size``
  pods, 30 by default, ``--profile-rounds`` times, once by default) under one ``py-spy record --format
  raw`` (collapsed stacks in FILE, a summary in the JSON).

Usage: python bench/api_pod_start.py [--runs 3] [--sizes 10,30] [--steady-seconds 60] [--skip-go]
       [--api {auto,envtest,fake}] [--profile /tmp/profile.txt] [--background-load N]
Needs root, containerd, runc and busybox (as the containerd test tier does).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import platform
import re
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import attrs
import httpx
import trio
from _common import (
    COMMAND,
    GO_KUBELET,
    GO_NODE,
    READY_COMMAND,
    TRIO_NODE,
    ControlPlane,
    KubeletProcess,
    control_plane,
    cpu_by_command,
    cpu_delta,
    cpu_model,
    floor_run,
    go_info,
    go_kubelet,
    is_ready,
    machine_busy_seconds,
    measure_process,
    medians,
    proc_cpu_seconds,
    py_spy_record,
    ratio,
    summarize_raw_profile,
    trio_kubelet,
)

from kubelet_trio.api.timefmt import parse_rfc3339
from kubelet_trio.apimode import open_kubeconfig_client
from kubelet_trio.client import ApiClient, ApiClientError
from kubelet_trio.cri.gen.runtime import v1 as pb
from kubelet_trio.cri.remote import open_cri_runtime
from kubelet_trio.testing.env import LocalCriEnvironment, missing_prerequisites

NAMESPACE = "default"
GRACE_SECONDS = 5
PHASE_TIMEOUT = 300.0  # seconds for one create → Ready or delete → gone phase
WATCH_REOPENS = 20  # how many times a run's watch may be opened again before the run gives up
STEADY_PODS = 30
STEADY_PROBE_PERIOD = 10
#: The readiness probe period of the timed runs' pods (seconds).
PROBE_PERIOD = 1
SETTLE_SECONDS = 5.0  # after the steady pods are Ready, before measuring
#: After a kubelet's run, how long to wait at most for its runtime to hold no container (seconds).
SETTLE_TIMEOUT = 30.0
ORDER = (
    "interleaved: both kubelets up from the start (each idle while the other is measured); per size and "
    "round one run each of the CRI floor, the probing floor, kubelet-trio and the Go kubelet"
)


# -- one API run ----------------------------------------------------------------------------------------


def pod_manifest(name: str, node: str, image: str, run_id: str, probe_period: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"bench-run": run_id}},
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": GRACE_SECONDS,
            "containers": [
                {
                    "name": "app",
                    "image": image,
                    "imagePullPolicy": "IfNotPresent",
                    "command": COMMAND,
                    "readinessProbe": {"exec": {"command": READY_COMMAND}, "periodSeconds": probe_period},
                }
            ],
        },
    }


def app_state(pod: dict[str, Any]) -> dict[str, Any]:
    statuses = pod.get("status", {}).get("containerStatuses") or ()
    return next((dict(c.get("state") or {}) for c in statuses if c.get("name") == "app"), {})


class PodWatch:
    """One watch over a run's pods (by label), opened before the creates: when each was first reported
    running, then Ready; when it was first reported terminated, then DELETED."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.running_at: dict[str, float] = {}
        self.started_at: dict[str, float] = {}  # the runtime's startedAt (whole seconds), on this clock
        self.terminated_at: dict[str, float] = {}
        self.ready_at: dict[str, float] = {}
        self.deleted_at: dict[str, float] = {}
        self.all_ready = trio.Event()
        self.all_deleted = trio.Event()

    async def run(
        self, client: ApiClient, path: str, selector: str, *, task_status: trio.TaskStatus[None]
    ) -> None:
        """Until every pod is DELETED; a watch the server (or a client bound) ends early is opened again
        from the last resource version seen (an API server drops a watcher that falls behind)."""
        listed = await client.get(path, {"labelSelector": selector})
        version = listed["metadata"]["resourceVersion"]
        started = False
        for _ in range(WATCH_REOPENS):
            params = {
                "labelSelector": selector,
                "resourceVersion": version,
                "timeoutSeconds": str(int(PHASE_TIMEOUT * 3)),
            }
            async with client.open_watch(path, params) as events:
                if not started:
                    task_status.started()
                    started = True
                async for event in events:
                    if event.type == "ERROR":
                        raise RuntimeError(f"watch error: {event.object}")
                    version = event.object.get("metadata", {}).get("resourceVersion", version)
                    if self._seen(event.type, event.object, time.perf_counter()):
                        return
        raise RuntimeError(f"the watch ended {WATCH_REOPENS} times before all pods were deleted")

    def _seen(self, kind: str, pod: dict[str, Any], now: float) -> bool:
        """Record one watch event; True once every pod is DELETED."""
        name = pod.get("metadata", {}).get("name", "")
        if kind in ("ADDED", "MODIFIED"):
            state = app_state(pod)
            if "running" in state:
                self.running_at.setdefault(name, now)
                if name not in self.started_at and (started := state["running"].get("startedAt")):
                    self.started_at[name] = now - (time.time() - parse_rfc3339(started).timestamp())
            if "terminated" in state:
                self.terminated_at.setdefault(name, now)
            if is_ready(pod) and name not in self.ready_at:
                self.ready_at[name] = now
                if len(self.ready_at) == self.n:
                    self.all_ready.set()
        elif kind == "DELETED":
            if "terminated" in app_state(pod):
                self.terminated_at.setdefault(name, now)
            self.deleted_at.setdefault(name, now)
            if len(self.deleted_at) == self.n:
                self.all_deleted.set()
                return True
        return False


_RUNTIME_OPERATIONS = re.compile(r'^kubelet_runtime_operations_total\{operation_type="(\w+)"\} (\S+)$', re.M)
_REST_REQUESTS = re.compile(r"^rest_client_requests_total\{([^}]*)\} (\S+)$", re.M)
_METHOD = re.compile(r'method="(\w+)"')


def kubelet_work(port: int) -> dict[str, float]:
    """What the kubelet has asked so far, from its ``/metrics``: CRI calls per operation (``cri_<op>``,
    and ``cri_calls`` in all) and API requests per method (``api_<METHOD>``, and ``api_requests``)."""
    text = httpx.get(f"https://127.0.0.1:{port}/metrics", verify=False, timeout=120).raise_for_status().text
    work: collections.defaultdict[str, float] = collections.defaultdict(float)
    for operation, value in _RUNTIME_OPERATIONS.findall(text):
        work[f"cri_{operation}"] += float(value)
        work["cri_calls"] += float(value)
    for labels, value in _REST_REQUESTS.findall(text):
        if method := _METHOD.search(labels):
            work[f"api_{method.group(1)}"] += float(value)
            work["api_requests"] += float(value)
    return dict(work)


_APISERVER_REQUESTS = re.compile(r"^apiserver_request_total\{([^}]*)\} (\S+)$", re.M)
_LABEL = re.compile(r'(\w+)="([^"]*)"')


async def apiserver_pod_requests(client: ApiClient) -> dict[str, float]:
    """The API server's own count of requests on pods and events so far, by verb and resource
    (``PATCH_pods_status``, ``GET_pods``, ``POST_events``...): the same measure for both kubelets (the Go
    kubelet's ``/metrics`` has no client request counts). Zero without a real API server."""
    try:
        text = await client.get_text("/metrics")
    except ApiClientError:
        return {}
    counts: collections.defaultdict[str, float] = collections.defaultdict(float)
    for labels, value in _APISERVER_REQUESTS.findall(text):
        fields = dict(_LABEL.findall(labels))
        if fields.get("resource") in ("pods", "events"):
            sub = fields.get("subresource")
            counts[f"{fields.get('verb')}_{fields['resource']}" + (f"_{sub}" if sub else "")] += float(value)
    return dict(counts)


async def api_run(
    kubeconfig: Path,
    node: str,
    image: str,
    n: int,
    *,
    kubelet: KubeletProcess | None = None,
    probe_period: int = PROBE_PERIOD,
) -> dict[str, float]:
    """Create N pods concurrently, time all Ready; delete them all, time all DELETED. With the
    ``kubelet``, also per phase the CPU time it used (on two cores its CPU competes with the runtime's),
    the whole machine's, and the work it asked of the runtime and the API server (from its metrics)."""
    pid = kubelet.pid if kubelet is not None else None
    work0 = kubelet_work(kubelet.port) if kubelet is not None else {}
    machine0 = machine_busy_seconds()
    by_command0 = cpu_by_command()
    run_id = secrets.token_hex(4)
    path = f"/api/v1/namespaces/{NAMESPACE}/pods"
    async with open_kubeconfig_client(str(kubeconfig), qps=1000, burst=1000) as client:
        watch = PodWatch(n)
        async with trio.open_nursery() as nursery:
            await nursery.start(watch.run, client, path, f"bench-run={run_id}")
            names = [f"{node}-{n}-{run_id}-{i}" for i in range(n)]
            requests0 = await apiserver_pod_requests(client)
            cpu0 = proc_cpu_seconds(pid) if pid is not None else 0.0
            t0 = time.perf_counter()
            async with trio.open_nursery() as creates:
                for name in names:
                    creates.start_soon(
                        client.create, path, pod_manifest(name, node, image, run_id, probe_period)
                    )
            created = time.perf_counter() - t0
            with trio.move_on_after(PHASE_TIMEOUT) as scope:
                await watch.all_ready.wait()
            if scope.cancelled_caught:
                raise RuntimeError(f"{node}: {len(watch.ready_at)}/{n} pods Ready after {PHASE_TIMEOUT:g}s")
            ready = max(watch.ready_at.values()) - t0
            cpu1 = proc_cpu_seconds(pid) if pid is not None else 0.0
            requests1 = await apiserver_pod_requests(client)
            machine1 = machine_busy_seconds()
            by_command1 = cpu_by_command()
            work1 = kubelet_work(kubelet.port) if kubelet is not None else {}
            # the delete phase counts from here: serving the scrape above is neither phase's work
            cpu_gone0 = proc_cpu_seconds(pid) if pid is not None else 0.0
            machine_gone0 = machine_busy_seconds()
            t1 = time.perf_counter()
            async with trio.open_nursery() as deletes:
                for name in names:
                    deletes.start_soon(client.delete, f"{path}/{name}")
            with trio.move_on_after(PHASE_TIMEOUT) as scope:
                await watch.all_deleted.wait()
            if scope.cancelled_caught:
                raise RuntimeError(f"{node}: {len(watch.deleted_at)}/{n} pods gone after {PHASE_TIMEOUT:g}s")
            gone = max(watch.deleted_at.values()) - t1
            cpu2 = proc_cpu_seconds(pid) if pid is not None else 0.0
            machine2 = machine_busy_seconds()
    out = {
        "creates_s": round(created, 3),
        "create_to_ready_s": round(ready, 3),
        "delete_to_gone_s": round(gone, 3),
        "machine_cpu_create_to_ready_s": round(machine1 - machine0, 2),
        "machine_cpu_delete_to_gone_s": round(machine2 - machine_gone0, 2),
        **{f"to_ready_cpu_{name}": cpu for name, cpu in cpu_delta(by_command0, by_command1).items()},
    }
    requests1["POST_pods"] = requests1.get("POST_pods", 0.0) - n  # this benchmark's creates
    for key in sorted(requests1):
        if (count := requests1[key] - requests0.get(key, 0.0)) > 0:
            out[f"to_ready_apiserver_{key}"] = count
    if kubelet is not None:
        out["kubelet_cpu_create_to_ready_s"] = round(cpu1 - cpu0, 2)
        out["kubelet_cpu_per_pod_to_ready_ms"] = round(1000 * (cpu1 - cpu0) / n, 1)
        out["kubelet_cpu_delete_to_gone_s"] = round(cpu2 - cpu_gone0, 2)
        work2 = kubelet_work(kubelet.port)
        for phase, before, after in (("to_ready", work0, work1), ("to_gone", work1, work2)):
            for key in sorted(after):
                if (count := after[key] - before.get(key, 0.0)) > 0:
                    out[f"{phase}_{key}"] = count
    # where the time went, as a client sees it: running reported, then the readiness probe's success
    # reported; terminated reported, then the object deleted
    if len(watch.running_at) == n:
        out["create_to_running_reported_s"] = round(max(watch.running_at.values()) - t0, 3)
        out["running_to_ready_reported_median_s"] = round(
            statistics.median(watch.ready_at[p] - watch.running_at[p] for p in names), 3
        )
    for stage, times in (
        ("started", watch.started_at),
        ("running_reported", watch.running_at),
        ("ready_reported", watch.ready_at),
    ):
        out.update(timeline(stage, [at - t0 for at in times.values()]))
    if len(watch.terminated_at) == n:
        out["delete_to_terminated_reported_s"] = round(max(watch.terminated_at.values()) - t1, 3)
    return out


def timeline(stage: str, after_create: list[float]) -> dict[str, float]:
    """When the pods reached ``stage``, seconds after the creates: the first, the 10th, 50th and 90th
    percentiles and the last (``<stage>_p0_s`` ... ``<stage>_p100_s``), to see where a run's time went."""
    if not after_create:
        return {}
    ordered = sorted(after_create)
    return {
        f"{stage}_p{q}_s": round(ordered[min(len(ordered) - 1, len(ordered) * q // 100)], 3)
        for q in (0, 10, 50, 90, 100)
    }


def steady_state(plane: ControlPlane, node: str, image: str, pid: int, seconds: float) -> dict[str, Any]:
    """30 Ready pods with 10 s exec probes: the kubelet's CPU share and RSS while nothing changes."""
    run_id = secrets.token_hex(4)
    path = f"/api/v1/namespaces/{NAMESPACE}/pods"
    names = [f"{node}-steady-{run_id}-{i}" for i in range(STEADY_PODS)]

    async def create_and_wait() -> None:
        async with open_kubeconfig_client(str(plane.kubeconfig), qps=1000, burst=1000) as client:
            async with trio.open_nursery() as nursery:
                for name in names:
                    manifest = pod_manifest(name, node, image, run_id, STEADY_PROBE_PERIOD)
                    nursery.start_soon(client.create, path, manifest)
            with trio.fail_after(PHASE_TIMEOUT):
                while True:
                    listed = await client.get(path, {"labelSelector": f"bench-run={run_id}"})
                    if sum(is_ready(p) for p in listed["items"]) == STEADY_PODS:
                        return
                    await trio.sleep(0.5)

    async def delete_and_wait() -> None:
        async with open_kubeconfig_client(str(plane.kubeconfig), qps=1000, burst=1000) as client:
            async with trio.open_nursery() as nursery:
                for name in names:
                    nursery.start_soon(client.delete, f"{path}/{name}")
            with trio.fail_after(PHASE_TIMEOUT):
                selector = {"labelSelector": f"bench-run={run_id}"}
                while (await client.get(path, selector))["items"]:  # noqa: ASYNC110 (an outside observer)
                    await trio.sleep(0.5)

    trio.run(create_and_wait)
    try:
        time.sleep(SETTLE_SECONDS)
        return {"pods": STEADY_PODS, "probe_period_s": STEADY_PROBE_PERIOD, **measure_process(pid, seconds)}
    finally:
        trio.run(delete_and_wait)


# -- profile ---------------------------------------------------------------------------------------------


def profiled_run(
    kubeconfig: Path, image: str, pid: int, out: Path, n: int, rounds: int = 1
) -> dict[str, Any]:
    """``rounds`` untimed N-pod runs of kubelet-trio under one ``py-spy record`` (raw collapsed stacks):
    more rounds, more samples of a small N."""
    timings: list[dict[str, float]] = []
    with py_spy_record(pid, out) as problem:
        if problem is None:
            timings = [trio.run(api_run, kubeconfig, TRIO_NODE, image, n) for _ in range(rounds)]
    if problem is not None:
        return {"skipped": problem}
    return {
        "pods": n,
        "rounds": rounds,
        "timing": medians(timings),
        "raw": str(out),
        **summarize_raw_profile(out),
    }


# -- main --------------------------------------------------------------------------------------------------


def series(runs: list[dict[str, float]]) -> dict[str, Any]:
    return {"runs": runs, "median": medians(runs)}


def pull_image(endpoint: str, image: str) -> None:
    """Pull ``image`` into the runtime at ``endpoint`` before any run: every run of a kubelet starts with
    its image present, as the floor's do (else its first run alone would pull it, once per pod)."""

    async def pull() -> None:
        async with open_cri_runtime(endpoint) as runtime:
            await runtime.pull_image(pb.ImageSpec(image=image))

    trio.run(pull)


def floor_once(
    endpoint: str, image: str, n: int, *, workdir: Path, probe_period: float | None
) -> dict[str, float]:
    async def one() -> dict[str, float]:
        async with open_cri_runtime(endpoint) as runtime:
            run_dir = workdir / f"floor-{n}-{secrets.token_hex(3)}-{probe_period}"
            return await floor_run(runtime, image, n, run_dir, READY_COMMAND, probe_period)

    return trio.run(one)


@attrs.define
class Subject:
    """One measured thing of the interleaved rounds: how to do one N-pod run of it."""

    key: str  # its key in the JSON
    run: Callable[[int], dict[str, float]]


@contextmanager
def busy_processes(count: int) -> Iterator[None]:
    """``count`` processes spinning on a core each (a busy machine), ended when the block exits."""
    spinners = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
        for _ in range(count)
    ]
    try:
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--sizes",
        default="10,30,110",
        help="pod counts, comma-separated (default 10,30,110: 110 is a full node)",
    )
    parser.add_argument("--steady-seconds", type=float, default=60.0, help="0 skips the steady state")
    parser.add_argument("--skip-go", action="store_true", help="do not run the Go kubelet even when built")
    parser.add_argument("--skip-trio", action="store_true", help="no floor and no kubelet-trio (debugging)")
    parser.add_argument("--skip-floor", action="store_true", help="no CRI floor runs (investigation)")
    parser.add_argument("--skip-go-default-qps", action="store_true", help="no Go kubelet run at QPS 5")
    parser.add_argument("--api", choices=("auto", "envtest", "fake"), default="auto")
    parser.add_argument("--log-dir", type=Path, default=None, help="keep the kubelets' logs here")
    parser.add_argument(
        "--trio-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="one more argument for kubelet-trio (repeatable), e.g. --trio-arg=--v=4 with --log-dir",
    )
    parser.add_argument("--profile", type=Path, default=None, help="py-spy raw output of an extra run")
    parser.add_argument("--profile-size", type=int, default=30, help="pods of the profiled run")
    parser.add_argument("--profile-rounds", type=int, default=1, help="profiled runs, under one py-spy")
    parser.add_argument(
        "--background-load",
        type=int,
        default=0,
        metavar="N",
        help="N busy processes (a core each) beside every timed run, the same for every subject",
    )
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    if args.log_dir is not None:
        args.log_dir.mkdir(parents=True, exist_ok=True)
    missing = missing_prerequisites()
    if missing:
        print(json.dumps({"skipped": missing}))
        return 1
    go_reason = (
        "--skip-go" if args.skip_go else None if os.access(GO_KUBELET, os.X_OK) else f"{GO_KUBELET} not built"
    )
    out: dict[str, Any] = {
        "machine": {
            "cpus": os.cpu_count(),
            "cpu": cpu_model(),
            "kernel": platform.release(),
            "python": sys.version.split()[0],
            "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        },
        "runs_per_size": args.runs,
        "background_load": args.background_load,
        "order": ORDER,
        "pod": "busybox, sh trap TERM + sleep, exec readiness probe `cat /etc/hostname` every 1 s, grace 5 s",
    }
    results: dict[int, dict[str, Any]] = {}
    steady: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="kubelet-trio-api-bench-") as tmp, ExitStack() as stack:
        workdir = Path(tmp)
        plane = stack.enter_context(control_plane(args.api, workdir))
        out["control_plane"] = plane.label
        subjects: list[Subject] = []
        mine: KubeletProcess | None = None
        trio_image = ""
        if not args.skip_trio:
            if not args.skip_floor:
                floor = stack.enter_context(LocalCriEnvironment(workdir / "cri-floor"))
                floor_of = partial(floor_once, floor.endpoint, floor.images.busybox, workdir=workdir)
                subjects += [
                    Subject("cri_floor", partial(floor_of, probe_period=None)),
                    Subject("cri_floor_probing", partial(floor_of, probe_period=PROBE_PERIOD)),
                ]
            cri = stack.enter_context(LocalCriEnvironment(workdir / "cri-trio"))
            pull_image(cri.endpoint, cri.images.busybox)
            mine = stack.enter_context(
                trio_kubelet(plane, cri, workdir / "trio", args.log_dir, args.trio_arg)
            )
            trio_image = cri.images.busybox
            subjects.append(
                Subject("kubelet_trio", partial(_api_once, plane.kubeconfig, TRIO_NODE, trio_image, mine))
            )
            if args.steady_seconds > 0:  # first: no leftovers of earlier pods for the kubelet to clean up
                steady["kubelet_trio"] = steady_state(
                    plane, TRIO_NODE, trio_image, mine.pid, args.steady_seconds
                )
        go_cri: LocalCriEnvironment | None = None
        if go_reason is None:
            out["go_kubelet"] = go_info()
            go_cri = stack.enter_context(LocalCriEnvironment(workdir / "cri-go"))
            pull_image(go_cri.endpoint, go_cri.images.busybox)
        else:
            out["go_kubelet"] = {"skipped": go_reason}
        go_stack = stack.enter_context(ExitStack())  # the QPS 50 kubelet, stopped for the default-QPS runs
        if go_cri is not None:
            try:
                go = go_stack.enter_context(go_kubelet(plane, go_cri, workdir / "go", args.log_dir, qps=True))
                if args.steady_seconds > 0:
                    steady["go_kubelet"] = steady_state(
                        plane, GO_NODE, go_cri.images.busybox, go.pid, args.steady_seconds
                    )
                go_run = partial(_api_once, plane.kubeconfig, GO_NODE, go_cri.images.busybox, go)
                subjects.append(Subject("go_kubelet", go_run))
            except RuntimeError as err:
                out["go_kubelet"] = {"error": str(err)}
        if args.background_load:  # started once every kubelet is up, so that the runs alone see it
            stack.enter_context(busy_processes(args.background_load))
        for n in sizes:
            runs: dict[str, list[dict[str, float]]] = {subject.key: [] for subject in subjects}
            for _ in range(args.runs):  # one run of each per round: what drifts over the rounds hits all
                for subject in list(subjects):
                    try:
                        runs[subject.key].append(subject.run(n))
                    except RuntimeError as err:
                        if subject.key != "go_kubelet":
                            raise
                        out["go_kubelet"] = {"error": str(err)}
                        subjects.remove(subject)
            results[n] = {key: series(values) for key, values in runs.items() if values}
        if args.profile is not None and mine is not None:
            out["profile"] = profiled_run(
                plane.kubeconfig, trio_image, mine.pid, args.profile, args.profile_size, args.profile_rounds
            )
        go_stack.close()
        if go_cri is not None and "error" not in out["go_kubelet"] and not args.skip_go_default_qps:
            with go_kubelet(plane, go_cri, workdir / "go", args.log_dir, qps=False) as default_go:
                for n in sizes:
                    results[n]["go_kubelet_default_qps"] = series(
                        [_api_once(plane.kubeconfig, GO_NODE, go_cri.images.busybox, default_go, n)]
                    )
    for n in sizes:
        r = results[n]
        floor_m, probing, trio_k, go_k = (
            r.get(k, {}).get("median", {})
            for k in ("cri_floor", "cri_floor_probing", "kubelet_trio", "go_kubelet")
        )
        r["ratios"] = {
            "trio_over_floor_ready": ratio(trio_k.get("create_to_ready_s"), floor_m.get("all_ready_s")),
            "trio_over_probing_floor_ready": ratio(
                trio_k.get("create_to_ready_s"), probing.get("all_ready_s")
            ),
            "trio_over_floor_gone": ratio(trio_k.get("delete_to_gone_s"), floor_m.get("all_gone_s")),
            "trio_over_go_ready": ratio(trio_k.get("create_to_ready_s"), go_k.get("create_to_ready_s")),
            "trio_over_go_gone": ratio(trio_k.get("delete_to_gone_s"), go_k.get("delete_to_gone_s")),
            "trio_over_go_cpu_per_pod": ratio(
                trio_k.get("kubelet_cpu_per_pod_to_ready_ms"), go_k.get("kubelet_cpu_per_pod_to_ready_ms")
            ),
        }
        out[f"n_{n}"] = r
    if steady:
        out["steady_state"] = steady
    print(json.dumps(out, indent=2))
    return 0


def _api_once(kubeconfig: Path, node: str, image: str, kubelet: KubeletProcess, n: int) -> dict[str, float]:
    try:
        out = trio.run(partial(api_run, kubeconfig, node, image, n, kubelet=kubelet))
    except BaseExceptionGroup as group:  # a timeout raised within the run's nursery
        timeouts = group.subgroup(RuntimeError)
        if timeouts is None:
            raise
        raise RuntimeError("; ".join(str(e) for e in timeouts.exceptions)) from group
    if (settled := trio.run(runtime_emptied, kubelet.cri_endpoint)) is not None:
        out["gone_to_runtime_empty_s"] = settled
    return out


async def runtime_emptied(endpoint: str) -> float | None:
    """Seconds until the kubelet's runtime holds no container (its removals of the deleted pods' dead
    containers done), at most :data:`SETTLE_TIMEOUT` (None then): untimed, so that what a kubelet still
    does after a run falls on no other subject's run."""
    started = time.perf_counter()
    async with open_cri_runtime(endpoint) as runtime:
        with trio.move_on_after(SETTLE_TIMEOUT):
            while await runtime.list_containers():  # noqa: ASYNC110 (an outside observer)
                await trio.sleep(0.2)
            return round(time.perf_counter() - started, 2)
    return None


if __name__ == "__main__":
    sys.exit(main())
