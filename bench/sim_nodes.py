"""Many simulated nodes in one process against a real kube-apiserver. Prints JSON.

``kubelet-trio sim-nodes --nodes 100`` joins a real etcd + kube-apiserver (envtest binaries, see
:mod:`kubelet_trio.testing.envtest`; ``kubelet-trio fake-apiserver`` when they are absent, labelled
``"apiserver": "fake"``). Measured:

- idle: CPU (% of one core) and RSS of the sim-nodes process while its nodes run with no pods, over
  ``--idle-seconds``; the API server's (kube-apiserver + etcd) CPU over the same window, separately;
- start: ``--pods`` pods bound to the nodes (``spec.nodeName``, ``--pods-per-node`` each: one
  busybox-like container running until stopped, with an exec readiness probe), created at once; the
  time from the first create until a pod watch has seen every pod Running with Ready=True;
- loaded: CPU and RSS again with all those pods running (their probes too);
- the API floor, first, before sim-nodes starts: the same pods created by this process, each given its
  Running + Ready status in one write right after its create (no kubelet), timed through the same watch,
  with the API server's CPU and this process's: the least the start's API traffic takes on this machine.

``--processes N`` is passed to sim-nodes (its default: one worker per core); the kubelet side's CPU is the
supervisor's and its workers' together, over the start (``kubelet_cpu_per_pod``: per pod, and its ratio
to the API floor's API server CPU per pod measured in the same run) and over the whole run (from
``RUSAGE_CHILDREN`` once sim-nodes has exited, its workers included).

With ``--profile PREFIX``, the sim-nodes process is sampled by py-spy during the start and the loaded
window (raw collapsed stacks in PREFIX-start.txt and PREFIX-loaded.txt; the top functions in the JSON).

Usage: python bench/sim_nodes.py [--nodes 100] [--pods-per-node 100] [--idle-seconds 30] [--kube-api-qps 0]
       [--processes N] [--profile /tmp/sim-nodes] [--skip-api-floor]
Run it on an otherwise quiet machine; the JSON carries the load average before and after.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import math
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import trio
from _common import proc_cpu_seconds, proc_rss_mb, py_spy_record, summarize_raw_profile

from kubelet_trio.client import ApiClient, ApiClientError, StatusError, load_kubeconfig, open_api_client
from kubelet_trio.testing.envtest import EnvtestCluster, assets, start_envtest

CREATE_CONCURRENCY = 50


def usage(groups: dict[str, list[int]]) -> dict[str, float]:
    return {name: sum(proc_cpu_seconds(p) for p in pids) for name, pids in groups.items()}


def child_pids(parent: int) -> list[int]:
    """The processes whose parent is ``parent`` (sim-nodes' workers)."""
    children = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == parent:
                children.append(int(entry.name))
    return children


def measure(
    groups: dict[str, list[int]], since: dict[str, float], start: float
) -> dict[str, dict[str, float]]:
    """CPU (% of one core) of each group of processes since ``since`` (at monotonic ``start``), and RSS."""
    elapsed = time.monotonic() - start
    now = usage(groups)
    return {
        name: {
            "cpu_s": round(now[name] - since[name], 2),
            "cpu_percent": round(100 * (now[name] - since[name]) / elapsed, 1),
            "rss_mb": round(sum(proc_rss_mb(p) for p in pids), 1),
        }
        for name, pids in groups.items()
    }


def sample(groups: dict[str, list[int]], seconds: float) -> dict[str, dict[str, float]]:
    since, start = usage(groups), time.monotonic()
    time.sleep(seconds)
    return measure(groups, since, start)


def bench_pod(name: str, node: str, app: str = "bench") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": {"app": app},
            "annotations": {"sim.kubelet-trio.io/app": 'exec cat /tmp/ready -> 0 "ok"'},
        },
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "app",
                    "image": "busybox:1.36",
                    "command": ["sh", "-c", "touch /tmp/ready; sleep 3600"],
                    "readinessProbe": {"exec": {"command": ["cat", "/tmp/ready"]}},  # every 10 s
                }
            ],
        },
    }


def _running_ready(pod: dict[str, Any]) -> bool:
    status = pod.get("status") or {}
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or []
    )
    return status.get("phase") == "Running" and ready


async def wait_nodes_ready(client: ApiClient, names: set[str], limit: float) -> float:
    start = trio.current_time()
    with trio.fail_after(limit):
        while True:
            nodes = await client.get("/api/v1/nodes")
            ready = {
                n["metadata"]["name"]
                for n in nodes["items"]
                if any(
                    c["type"] == "Ready" and c["status"] == "True" for c in n["status"].get("conditions", [])
                )
            }
            if names <= ready:
                return trio.current_time() - start
            await trio.sleep(0.5)


FLOOR_APP = "bench-floor"


def pod_names(app: str, nodes: list[str], per_node: int) -> dict[str, str]:
    """The benchmark's pod names (``app`` label value as prefix), each with its node."""
    return {f"{app}-{n}-{i}": n for n in nodes for i in range(per_node)}


async def concurrently(fn: Callable[..., Awaitable[None]], items: Iterable[tuple[str, ...]]) -> None:
    """``fn(*item)`` for every item, ``CREATE_CONCURRENCY`` at a time."""
    send, receive = trio.open_memory_channel[tuple[str, ...]](math.inf)
    for item in items:
        send.send_nowait(item)
    send.close()

    async def worker(work: trio.MemoryReceiveChannel[tuple[str, ...]]) -> None:
        async for item in work:
            await fn(*item)

    async with trio.open_nursery() as nursery:
        for _ in range(CREATE_CONCURRENCY):
            nursery.start_soon(worker, receive.clone())


def running_ready_status(pod: dict[str, Any]) -> dict[str, Any]:
    """The one status write that takes a created pod to Running and Ready: the least any kubelet sends."""
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    (container,) = pod["spec"]["containers"]
    conditions = [
        {"type": kind, "status": "True", "lastTransitionTime": now}
        for kind in ("Initialized", "Ready", "ContainersReady", "PodScheduled")
    ]
    running = {"running": {"startedAt": now}}
    statuses = [
        {
            "name": container["name"],
            "image": container["image"],
            "imageID": "",
            "ready": True,
            "restartCount": 0,
            "started": True,
            "state": running,
        }
    ]
    return {
        "status": {
            "phase": "Running",
            "startTime": now,
            "conditions": conditions,
            "containerStatuses": statuses,
        }
    }


async def start_pods(
    client: ApiClient, nodes: list[str], per_node: int, limit: float, *, api_floor: bool = False
) -> dict[str, Any]:
    """Create the pods and follow a watch until every one is Running and Ready.

    ``api_floor``: no kubelet; this process writes each pod's status once, right after creating it (the
    least API work the start of these pods can cause on this control plane)."""
    app = FLOOR_APP if api_floor else "bench"
    names = pod_names(app, nodes, per_node)
    initial = await client.get("/api/v1/namespaces/default/pods", {"labelSelector": f"app={app}"})
    ready: set[str] = set()
    first_ready: float | None = None
    start = trio.current_time()
    created_at: float | None = None

    async def create_all() -> None:
        nonlocal created_at

        async def create(name: str, node: str) -> None:
            try:
                pod = await client.create("/api/v1/namespaces/default/pods", bench_pod(name, node, app))
                if api_floor:
                    path = f"/api/v1/namespaces/default/pods/{name}/status"
                    await client.merge_patch(path, running_ready_status(pod))
            except ApiClientError as err:
                raise RuntimeError(f"creating pod {name}: {err}") from err

        await concurrently(create, names.items())
        created_at = trio.current_time() - start

    with trio.move_on_after(limit) as deadline:
        params = {"labelSelector": f"app={app}", "resourceVersion": initial["metadata"]["resourceVersion"]}
        params["allowWatchBookmarks"] = "true"
        async with (
            client.open_watch("/api/v1/namespaces/default/pods", params) as events,
            trio.open_nursery() as nursery,
        ):
            nursery.start_soon(create_all)
            async for event in events:
                if event.type not in ("ADDED", "MODIFIED"):
                    continue
                name = event.object["metadata"]["name"]
                if name in names and _running_ready(event.object):
                    if first_ready is None:
                        first_ready = trio.current_time() - start
                    ready.add(name)
                    if len(ready) == len(names):
                        break
            nursery.cancel_scope.cancel()
    done = not deadline.cancelled_caught
    return {
        "pods": len(names),
        "all_created_s": round(created_at or 0.0, 1),
        "first_ready_s": round(first_ready or 0.0, 1),
        # None: not all within --limit; "ready_seen" says how many were
        "all_running_and_ready_s": round(trio.current_time() - start, 1) if done else None,
        "ready_seen": len(ready),
        "kubelet_timeline_s": await timeline(client) if done and not api_floor else None,
    }


def _seconds(stamp: str) -> float:
    return dt.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


async def timeline(client: ApiClient) -> dict[str, dict[str, float]]:
    """Percentiles (50/90/100) of when, after its creation, the pods' kubelets first saw them (startTime),
    started the container, saw it Ready and last wrote the status (whole seconds, as the API stores them)."""
    pods = (await client.get("/api/v1/namespaces/default/pods", {"labelSelector": "app=bench"}))["items"]
    marks: dict[str, list[float]] = {"seen": [], "started": [], "ready": [], "ready_published": []}
    for pod in pods:
        created = _seconds(pod["metadata"]["creationTimestamp"])
        status = pod.get("status") or {}
        marks["seen"].append(_seconds(status["startTime"]) - created)
        running = (status["containerStatuses"][0].get("state") or {}).get("running") or {}
        marks["started"].append(_seconds(running["startedAt"]) - created)
        [ready] = [c for c in status["conditions"] if c["type"] == "Ready"]
        marks["ready"].append(_seconds(ready["lastTransitionTime"]) - created)
        updates = [
            f["time"] for f in pod["metadata"].get("managedFields", []) if f.get("subresource") == "status"
        ]
        if updates:  # the fake API server keeps no managedFields
            marks["ready_published"].append(max(_seconds(t) for t in updates) - created)
    out = {}
    for name, values in marks.items():
        if not values:
            continue
        values.sort()
        pick = [values[min(len(values) - 1, int(len(values) * q))] for q in (0.5, 0.9)] + [values[-1]]
        out[name] = dict(zip(("p50", "p90", "max"), pick, strict=True))
    return out


def _sample(line: str) -> tuple[str, dict[str, str], float]:
    """``name{k="v",...} value`` → (name, labels, value)."""
    name, _, rest = line.partition("{")
    inside, _, value = rest.rpartition("}")
    labels = dict(part.split("=", 1) for part in inside.split(",") if "=" in part)
    return name, {k: v.strip('"') for k, v in labels.items()}, float(value)


async def pod_requests(client: ApiClient) -> dict[str, tuple[int, float]]:
    """The API server's own count of pod requests so far (``apiserver_request_total``) and the seconds it
    spent on them (``apiserver_request_duration_seconds_sum``), by verb, subresource and code: what each
    pod cost in requests, whoever sent them. Empty for the fake."""
    try:
        text = await client.get_text("/metrics")
    except StatusError:
        return {}
    counts: dict[str, tuple[int, float]] = {}
    for line in text.splitlines():
        if 'resource="pods"' not in line or not line.startswith(
            ("apiserver_request_total{", "apiserver_request_duration_seconds_sum{")
        ):
            continue
        name, labels, value = _sample(line)
        key = " ".join(x for x in (labels.get("verb"), labels.get("subresource")) if x)
        count, seconds = counts.get(key, (0, 0.0))
        if name == "apiserver_request_total":
            counts[key] = (count + int(value), seconds)
        else:
            counts[key] = (count, seconds + value)
    return counts


def request_delta(
    before: dict[str, tuple[int, float]], after: dict[str, tuple[int, float]]
) -> dict[str, dict[str, float]]:
    """Requests per verb between two samples, with the API server's mean time per request (ms)."""
    out = {}
    for key, (count, seconds) in sorted(after.items()):
        count0, seconds0 = before.get(key, (0, 0.0))
        if count > count0:
            out[key] = {
                "requests": count - count0,
                "mean_ms": round(1000 * (seconds - seconds0) / (count - count0), 1),
            }
    return out


async def run_api(
    kubeconfig: Path, nodes: list[str], per_node: int, limit: float
) -> tuple[float, dict[str, Any]]:
    config = load_kubeconfig(str(kubeconfig))
    async with open_api_client(config, qps=0, request_timeout=60) as client:
        registered = await wait_nodes_ready(client, set(nodes), 300)
        if per_node == 0:
            return registered, {}
        before = await pod_requests(client)
        result = await start_pods(client, nodes, per_node, limit)
        after = await pod_requests(client)
        result["pod_requests"] = request_delta(before, after)
        return registered, result


async def run_api_floor(
    kubeconfig: Path, nodes: list[str], per_node: int, limit: float, groups: dict[str, list[int]]
) -> dict[str, Any]:
    """The same pods with no kubelet: created, one status write each, seen Running and Ready through the
    watch, with the CPU of ``groups`` over that start; then removed (grace 0, no kubelet to wait for)."""
    config = load_kubeconfig(str(kubeconfig))
    async with open_api_client(config, qps=0, request_timeout=600) as client:
        before = await pod_requests(client)
        since, t0 = usage(groups), time.monotonic()
        result = await start_pods(client, nodes, per_node, limit, api_floor=True)
        result["usage"] = measure(groups, since, t0)
        result["pod_requests"] = request_delta(before, await pod_requests(client))

        async def remove(name: str, _node: str) -> None:
            await client.delete(f"/api/v1/namespaces/default/pods/{name}", grace_period_seconds=0)

        await concurrently(remove, pod_names(FLOOR_APP, nodes, per_node).items())
        return result


def cpu_per_pod(result: dict[str, Any], pods: int) -> dict[str, Any]:
    """The kubelet side's CPU per pod over the start (sim-nodes: the supervisor and its workers), and its
    ratio to the API floor's: the API server's CPU per pod when the same pods start with no kubelet."""
    kubelet_ms = 1000 * result["start"]["usage"]["sim_nodes"]["cpu_s"] / pods
    out: dict[str, Any] = {"kubelet_ms": round(kubelet_ms, 2)}
    floor = result.get("api_floor")
    if floor is not None and floor["usage"]["apiserver"]["cpu_s"] > 0:
        floor_ms = 1000 * floor["usage"]["apiserver"]["cpu_s"] / floor["pods"]
        out["api_floor_apiserver_ms"] = round(floor_ms, 2)
        out["api_floor_client_ms"] = round(1000 * floor["usage"]["bench"]["cpu_s"] / floor["pods"], 2)
        out["ratio_to_api_floor"] = round(kubelet_ms / floor_ms, 2)
    return out


@contextlib.contextmanager
def profiled(pid: int, prefix: Path | None, phase: str, result: dict[str, Any]) -> Iterator[None]:
    """Sample ``pid`` with py-spy while the block runs (when ``prefix`` is given) into the result."""
    if prefix is None:
        yield
        return
    out = prefix.with_name(f"{prefix.name}-{phase}.txt")
    with py_spy_record(pid, out) as problem:
        yield
    result.setdefault("profile", {})[phase] = {"skipped": problem} if problem else summarize_raw_profile(out)


def start_fake(work: Path) -> tuple[subprocess.Popen[str], Path]:
    kubeconfig = work / "fake-kubeconfig"
    proc = subprocess.Popen(
        [sys.executable, "-m", "kubelet_trio", "fake-apiserver", "--kubeconfig-out", str(kubeconfig)],
        stdout=subprocess.PIPE,
        stderr=(work / "fake-apiserver.log").open("wb"),
        text=True,
    )
    assert proc.stdout is not None
    if not proc.stdout.readline():
        raise RuntimeError(f"fake-apiserver did not start: {(work / 'fake-apiserver.log').read_text()}")
    return proc, kubeconfig


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--pods-per-node", type=int, default=100)
    parser.add_argument("--idle-seconds", type=float, default=30.0)
    parser.add_argument("--kube-api-qps", default="0", help="sim-nodes' shared limit (0: none)")
    parser.add_argument(
        "--event-qps", default=None, help="sim-nodes' shared event limit (default: sim-nodes' own default)"
    )
    parser.add_argument(
        "--processes", type=int, default=None, help="sim-nodes' worker processes (default: sim-nodes' own)"
    )
    parser.add_argument("--limit", type=float, default=600.0, help="give up on the start after this long")
    parser.add_argument(
        "--profile", type=Path, default=None, help="py-spy raw output: PREFIX-start.txt, PREFIX-loaded.txt"
    )
    parser.add_argument(
        "--fake", action="store_true", help="use the fake API server even with envtest present"
    )
    parser.add_argument(
        "--skip-api-floor", action="store_true", help="no API floor run before sim-nodes starts"
    )
    args = parser.parse_args()

    load_before = os.getloadavg()
    work = Path(tempfile.mkdtemp(prefix="bench-sim-nodes-"))
    directory = None if args.fake else assets()
    cluster: EnvtestCluster | None = None
    fake: subprocess.Popen[str] | None = None
    if directory is not None:
        cluster = start_envtest(
            directory, extra_args=["--max-requests-inflight=800", "--max-mutating-requests-inflight=400"]
        )
        kubeconfig, apiserver_pids, label = (
            cluster.kubeconfig,
            [p.pid for p in cluster._procs],
            "kube-apiserver",
        )
    else:
        fake, kubeconfig = start_fake(work)
        apiserver_pids, label = [fake.pid], "fake"
    result: dict[str, Any] = {
        "apiserver": label,
        "nodes": args.nodes,
        "processes": args.processes or "default",
        "cores": os.cpu_count(),
        "kube_api_qps": args.kube_api_qps,
        "event_qps": args.event_qps or "default",
    }
    if not args.skip_api_floor:
        floor_nodes = [f"floor-{i}" for i in range(args.nodes)]
        groups = {"bench": [os.getpid()], "apiserver": apiserver_pids}
        args_floor = (kubeconfig, floor_nodes, args.pods_per_node, args.limit, groups)
        result["api_floor"] = trio.run(run_api_floor, *args_floor)
        time.sleep(5)  # the removal settles
    log = (work / "sim-nodes.log").open("wb")
    sim = subprocess.Popen(
        [
            *(sys.executable, "-m", "kubelet_trio", "sim-nodes", "--kubeconfig", str(kubeconfig)),
            *("--nodes", str(args.nodes), "--kube-api-qps", args.kube_api_qps),
            *(("--event-qps", args.event_qps) if args.event_qps is not None else ()),
            *(("--processes", str(args.processes)) if args.processes is not None else ()),
        ],
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
    )
    try:
        assert sim.stdout is not None
        t0 = time.monotonic()
        if not sim.stdout.readline():
            raise RuntimeError(f"sim-nodes exited: {(work / 'sim-nodes.log').read_text()[-3000:]}")
        names = [f"sim-{i}" for i in range(args.nodes)]
        trio.run(run_api, kubeconfig, names, 0, args.limit)
        result["nodes_ready_s"] = round(time.monotonic() - t0, 1)
        time.sleep(5)  # start-up work settles (first status reports, lease creation)
        workers = child_pids(sim.pid)  # none when it runs its nodes itself
        result["sim_nodes_pids"] = {"supervisor": sim.pid, "workers": workers} if workers else sim.pid
        groups = {"sim_nodes": [sim.pid, *workers], "apiserver": apiserver_pids}
        result["idle"] = sample(groups, args.idle_seconds)
        since, t1 = usage(groups), time.monotonic()
        with profiled(sim.pid, args.profile, "start", result):
            _, start = trio.run(run_api, kubeconfig, names, args.pods_per_node, args.limit)
        result["start"] = {**start, "usage": measure(groups, since, t1)}
        result["kubelet_cpu_per_pod"] = cpu_per_pod(result, args.nodes * args.pods_per_node)
        time.sleep(5)
        with profiled(sim.pid, args.profile, "loaded", result):
            result["loaded"] = sample(groups, args.idle_seconds)
    finally:
        children_before = resource.getrusage(resource.RUSAGE_CHILDREN)
        sim.send_signal(signal.SIGTERM)
        try:
            sim.wait(60)
        except subprocess.TimeoutExpired:
            sim.kill()
            sim.wait()
        children_after = resource.getrusage(resource.RUSAGE_CHILDREN)
        log.close()
        if cluster is not None:
            cluster.stop()
        if fake is not None:
            fake.terminate()
            fake.wait(10)
    total = sum(getattr(children_after, f) - getattr(children_before, f) for f in ("ru_utime", "ru_stime"))
    result["sim_nodes_total_cpu_s"] = round(total, 2)  # the whole run, its workers included
    if args.pods_per_node:
        pods = args.nodes * args.pods_per_node
        result["sim_nodes_total_cpu_ms_per_pod"] = round(1000 * total / pods, 2)
    result["load_average_before"] = [round(x, 2) for x in load_before]
    result["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
