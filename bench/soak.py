"""A long churn soak of a full node: does a kubelet's memory, descriptor or task count creep while pods
come and go for an hour, and what does each churned pod cost it in CPU? kubelet-trio, the Go kubelet, or
both side by side. Prints JSON; ``--plot FILE`` draws the samples.

Set-up (as ``bench/api_pod_start.py``, from ``_common``): etcd + kube-apiserver from the envtest binaries
(``kubelet_trio.testing.envtest``, Kubernetes 1.36 in /tmp/k136/bin; ``--api fake``: the fake API
server), and each kubelet on a private containerd of its own (``LocalCriEnvironment``) with its pod
cgroups under a root of its own (``private_cgroup_root``), joined to the same API server as its own node
(``bench-trio``, ``bench-go``), Ready before anything starts. The Go kubelet gets kubelet-trio's client
limits (QPS 50, burst 100). Both get ``maxPods`` = ``--max-pods`` (default 130): a node holding 110 pods
also holds the few that are still terminating after their deletes, which a ``maxPods`` of 110 would
answer with OutOfpods rejections of the replacements.

The soak, per kubelet (all kubelets at once when there are two):

1. Fill: ``--pods`` (110) busybox pods in namespace ``default``, ``spec.nodeName`` set, grace period
   5 s, each named ``soak-<kubelet>-<run>-<kind>-<seq>``. Kinds, by sequence number modulo 10: 1 in 10
   ``crash`` (``sleep 3; exit 1``, restartPolicy Always, no probe: restarts and back-off entries),
   2 in 10 ``volumes`` (a ConfigMap and a Secret volume, one ConfigMap and one Secret shared by all of
   them, created for the run; the readiness probe reads both files), the rest ``sleep`` (a
   ``sleep``-ing shell that exits 0 on SIGTERM, exec readiness probe ``cat /etc/hostname``). All probes
   run every 10 s. Filled when every non-crash pod is Ready (or after ``--fill-timeout``, noted).
2. Baseline: ``--baseline-seconds`` (60) of the full node without churn: the kubelet's CPU rate there.
3. Churn for ``--minutes`` (60): every 1/``--rate`` s (1 s), delete the oldest pod (default grace) and
   create a new one of the same kind, so the node keeps ~110 pods (plus the terminating ones).
4. Drain (``--drain-seconds``, 120; 0: none): every pod of the run deleted (default grace), until the API
   server has none (at most ``--cleanup-timeout``), then ``--drain-seconds`` more with no pods, for the
   kubelet's housekeeping and container GC (once a minute) to finish; then a last sample (``drained``),
   compared with the ``idle`` one taken before the fill.
5. Clean-up, also on Ctrl-C or SIGTERM (after which the samples so far are still reported): all the
   run's pods deleted through the API (forced after ``--cleanup-timeout``), the ConfigMap and Secret,
   then the kubelets stopped, their containerds' sandboxes removed and containerd stopped, the Node
   objects and their leases deleted, the control plane stopped.

Samples, every ``--sample-seconds`` (30) from the start of the fill, and at the start and end of the
churn; ``t_s`` is seconds since the churn started (negative before):

- the kubelet process: RSS (``VmRSS`` of ``/proc/<pid>/status``), CPU seconds (utime + stime of
  ``/proc/<pid>/stat``) and the CPU % of one core since the previous sample, open descriptors
  (``/proc/<pid>/fd``), OS threads; and the machine's busy CPU % (all cores);
- from the kubelet's ``/metrics`` (its Kubelet API port, anonymous): ``tasks`` (``go_goroutines``:
  kubelet-trio's count of live Trio tasks, the Go kubelet's goroutines), ``kubelet_running_pods``,
  running containers (and all containers, any state), volumes mounted (``volume_manager_total_volumes``,
  actual state); from ``/metrics/probes``: the pods with probe series (``pod_uid`` values of
  ``prober_probe_total``); from ``/pods``: the pods the kubelet holds as desired (its pod manager); and
  how long these three requests took (``scrape_s``; one that fails loses only its own figures; a kubelet
  still answering the previous sample's requests is not asked again: ``scrape_skipped``);
- from the API server: the run's pods bound to the node, Ready, terminating (deletion requested) and
  Failed (e.g. rejected at admission); and the creates and deletes so far (and failed ones).

Whether the node keeps up: ``api_terminating`` stays at a few pods when the kubelet (and its runtime)
finish the deletes as fast as they come; when it grows, the pods on the node grow with it (and with a
``maxPods`` that counts terminating pods, as the Go kubelet's does, replacements are rejected:
``api_failed``). Two kubelets side by side, 220 pods with exec probes, nearly saturate a two-core
machine before any churn (``machine_cpu_percent`` 80-100 in the baseline), and neither keeps up with
the churn there: compare kubelets one at a time on such a machine, or read a side-by-side run on it as
a run under overload.

The per-pod bookkeeping maps inside kubelet-trio (pod workers, status manager, probe workers, back-off,
volume and secret/ConfigMap managers) are not exposed by any endpoint, and exposing their sizes needs a
new :class:`~kubelet_trio.server.host.HostInterface` verb implemented by the Kubelet (the servers may
read a Kubelet through its verbs only: ``tests/test_kubelet_fields.py``); the scraped figures above are
their outward proxies (a map that leaks a pod's entry usually leaks its series, task or mount too).
The scrapes cost the kubelets a little CPU every sample, both alike.

Summary per kubelet, over the churn window: RSS at the churn's start, at minute 10 of the churn (the
first sample at or after 600 s; null when the churn is shorter) and at the end, and end/minute-10;
descriptors, threads, tasks and the other scraped figures at the churn's start and end (a scraped figure
missing from the last sample is taken from the last one that has it, whose time is ``<figure>_end_t_s``);
creates and deletes (and errors); the kubelet's CPU seconds over the churn and **CPU per churned pod** =
kubelet CPU seconds over the churn window / ((creates + deletes) / 2), i.e. per create + delete pair,
reported in ms, together with the same less the baseline's CPU rate times the churn's length (the
churn's own cost over a full idle node); the pods, terminating pods and Failed pods at the end; the
machine's busy CPU % over the baseline and the churn; after a drain, ``before_fill`` (the first sample,
no pods yet) and ``drained`` (the last): RSS, descriptors, threads, tasks, desired and probed pods,
running pods and containers, all containers and mounted volumes, which should be back where they began
but for RSS. Then kubelet-trio over the Go kubelet for those figures.

``--plot FILE``: a PNG of RSS, CPU %, descriptors, tasks and the pods on the node over time per kubelet
(matplotlib: not a dependency of the project, and there is no ``bench`` extra in pyproject.toml:
``pip install matplotlib``).

Usage: python bench/soak.py [--kubelets trio,go] [--minutes 60] [--sample-seconds 30] [--pods 110]
       [--drain-seconds 120]
       [--rate 1] [--baseline-seconds 60] [--plot /tmp/soak.png] [--log-dir DIR] [--api {auto,envtest,fake}]
Needs root, containerd, runc and busybox (as the containerd test tier does).
"""

from __future__ import annotations

import argparse
import base64
import collections
import json
import os
import platform
import re
import secrets
import signal
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager, suppress
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
    cpu_model,
    go_info,
    go_kubelet,
    is_ready,
    machine_busy_seconds,
    proc_cpu_seconds,
    proc_fd_count,
    proc_rss_mb,
    proc_threads,
    ratio,
    trio_kubelet,
)

from kubelet_trio.apimode import open_kubeconfig_client
from kubelet_trio.client import ApiClient, ApiClientError
from kubelet_trio.testing.env import LocalCriEnvironment, missing_prerequisites, remove_all_pods

NAMESPACE = "default"
PODS_PATH = f"/api/v1/namespaces/{NAMESPACE}/pods"
GRACE_SECONDS = 5
PROBE_PERIOD = 10
CRASH_AFTER_SECONDS = 3
#: Pod kinds by sequence number modulo 10: 1 in 10 crash-loops, 2 in 10 mount a ConfigMap and a Secret.
KIND_CYCLE = ("crash", "volumes", "volumes", "sleep", "sleep", "sleep", "sleep", "sleep", "sleep", "sleep")
FILL_CONCURRENCY = 10
CHURN_CONCURRENCY = 16  # API calls of the churn in flight per kubelet (a slow answer delays no tick)
CRI_REMOVE_ATTEMPTS = 6  # an overloaded containerd takes a while to let go of stopped tasks
RECENT_SAMPLE = 1.0  # seconds: a phase's first sample is a periodic one taken this recently
SCRAPE_TIMEOUT = 20.0  # a saturated two-core machine answers slowly
MINUTE_10 = 600.0
IDLE_SCRAPE_WAIT = 5.0  # seconds before the idle sample (no pods yet), and after it before the fill
SUMMARY_FIELDS = ("rss_mb", "fds", "threads", "tasks", "desired_pods", "probe_pods", "running_containers")
#: Compared between the first sample (no pods yet) and the drained one.
DRAIN_FIELDS = (*SUMMARY_FIELDS, "running_pods", "all_containers", "volumes")


def kind_of(seq: int) -> str:
    return KIND_CYCLE[seq % len(KIND_CYCLE)]


# -- the pods ------------------------------------------------------------------------------------------------


def pod_manifest(
    name: str, node: str, image: str, kind: str, labels: Mapping[str, str], config: str
) -> dict[str, Any]:
    """One soak pod of ``kind`` (``sleep``, ``crash`` or ``volumes``); ``config``: the name of the run's
    ConfigMap and Secret."""
    container: dict[str, Any] = {"name": "app", "image": image, "imagePullPolicy": "IfNotPresent"}
    spec: dict[str, Any] = {
        "nodeName": node,
        "terminationGracePeriodSeconds": GRACE_SECONDS,
        "restartPolicy": "Always",
        "containers": [container],
    }
    if kind == "crash":
        container["command"] = ["sh", "-c", f"sleep {CRASH_AFTER_SECONDS}; exit 1"]
    else:
        container["command"] = COMMAND
        probe = list(READY_COMMAND)
        if kind == "volumes":
            container["volumeMounts"] = [
                {"name": "config", "mountPath": "/etc/soak-config", "readOnly": True},
                {"name": "secret", "mountPath": "/etc/soak-secret", "readOnly": True},
            ]
            spec["volumes"] = [
                {"name": "config", "configMap": {"name": config}},
                {"name": "secret", "secret": {"secretName": config}},
            ]
            probe = ["cat", "/etc/soak-config/greeting", "/etc/soak-secret/token"]
        container["readinessProbe"] = {"exec": {"command": probe}, "periodSeconds": PROBE_PERIOD}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {**labels, "soak-kind": kind}},
        "spec": spec,
    }


def config_objects(name: str, labels: Mapping[str, str]) -> list[tuple[str, dict[str, Any]]]:
    """The run's ConfigMap and Secret, as (collection path, object)."""
    meta = {"name": name, "labels": dict(labels)}
    token = base64.b64encode(b"soak-secret\n").decode()
    return [
        (
            f"/api/v1/namespaces/{NAMESPACE}/configmaps",
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"greeting": "hello\n"}},
        ),
        (
            f"/api/v1/namespaces/{NAMESPACE}/secrets",
            {"apiVersion": "v1", "kind": "Secret", "metadata": meta, "data": {"token": token}},
        ),
    ]


# -- one kubelet under soak ----------------------------------------------------------------------------------


@attrs.define(eq=False)
class SoakNode:
    """A kubelet under soak: its pods (oldest first), counts, samples and the phase readings."""

    key: str  # "trio" or "go": its key in the JSON and in its pods' names
    node: str
    kubelet: KubeletProcess
    image: str
    run_id: str
    live: collections.deque[tuple[str, str]] = attrs.Factory(collections.deque)  # (name, kind)
    seq: int = 0
    creates: int = 0
    deletes: int = 0
    create_errors: int = 0
    delete_errors: int = 0
    scrape_errors: int = 0
    skipped_scrapes: int = 0  # samples without the kubelet's figures: it was still answering
    errors: list[str] = attrs.Factory(list)  # the first few, verbatim
    samples: list[dict[str, Any]] = attrs.Factory(list)
    readings: dict[str, float] = attrs.Factory(dict)  # CPU seconds and times at the phase boundaries
    fill: dict[str, Any] = attrs.Factory(dict)
    _previous: tuple[float, float] | None = None  # (time, CPU seconds) of the last sample

    @property
    def labels(self) -> dict[str, str]:
        return {"soak-run": self.run_id, "soak-node": self.key}

    @property
    def selector(self) -> str:
        return f"soak-run={self.run_id},soak-node={self.key}"

    def next_pod(self, kind: str | None = None) -> tuple[str, str]:
        """A new pod's (name, kind): of ``kind``, else the next in the mix."""
        seq = self.seq
        self.seq += 1
        kind = kind or kind_of(seq)
        return f"soak-{self.key}-{self.run_id}-{kind}-{seq:05d}", kind

    def error(self, what: str, err: BaseException) -> None:
        if len(self.errors) < 10:
            self.errors.append(f"{what}: {err}")

    def read_process(self, now: float) -> dict[str, Any]:
        """This kubelet's process figures now, and its CPU % of one core since the previous sample."""
        pid = self.kubelet.pid
        cpu = proc_cpu_seconds(pid)
        out: dict[str, Any] = {
            "rss_mb": round(proc_rss_mb(pid), 1),
            "cpu_s": round(cpu, 2),
            "cpu_percent": None,
            "fds": proc_fd_count(pid),
            "threads": proc_threads(pid),
        }
        if self._previous is not None and now > self._previous[0]:
            out["cpu_percent"] = round(100 * (cpu - self._previous[1]) / (now - self._previous[0]), 1)
        self._previous = (now, cpu)
        return out


# -- scraping ------------------------------------------------------------------------------------------------

_SAMPLE_LINE = re.compile(r"^([A-Za-z_:][\w:]*)(?:\{([^}]*)\})?\s+(\S+)", re.M)
_LABEL = re.compile(r'(\w+)="([^"]*)"')


def parse_metrics(text: str) -> Iterator[tuple[str, dict[str, str], float]]:
    """``(name, labels, value)`` of each sample of a Prometheus text exposition."""
    for name, labels, value in _SAMPLE_LINE.findall(text):
        try:
            number = float(value)
        except ValueError:
            continue
        yield name, dict(_LABEL.findall(labels)), number


def _metrics_figures(text: str) -> dict[str, int]:
    out: dict[str, int] = {}
    running_containers = all_containers = volumes = 0.0
    for name, labels, value in parse_metrics(text):
        if name == "go_goroutines":
            out["tasks"] = int(value)
        elif name == "kubelet_running_pods":
            out["running_pods"] = int(value)
        elif name == "kubelet_running_containers":
            all_containers += value
            if labels.get("container_state") == "running":
                running_containers += value
        elif name == "volume_manager_total_volumes" and labels.get("state") == "actual_state_of_world":
            volumes += value
    out.update(
        running_containers=int(running_containers), all_containers=int(all_containers), volumes=int(volumes)
    )
    return out


def _probe_pods(text: str) -> dict[str, int]:
    uids = {labels.get("pod_uid") for name, labels, _ in parse_metrics(text) if name == "prober_probe_total"}
    return {"probe_pods": len(uids)}


def _desired_pods(text: str) -> dict[str, int]:
    return {"desired_pods": len(json.loads(text).get("items") or ())}


#: What is read from each endpoint of the Kubelet API.
SCRAPES = (("/metrics", _metrics_figures), ("/metrics/probes", _probe_pods), ("/pods", _desired_pods))


def scrape_kubelet(port: int) -> tuple[dict[str, Any], list[str]]:
    """The kubelet's own figures from its Kubelet API (see the module docstring), each endpoint on its
    own (one that times out loses only its figures), and the errors. Blocking."""
    out: dict[str, Any] = {}
    errors: list[str] = []
    t0 = time.monotonic()
    with httpx.Client(base_url=f"https://127.0.0.1:{port}", verify=False, timeout=SCRAPE_TIMEOUT) as http:
        for path, figures in SCRAPES:
            try:
                out.update(figures(http.get(path).raise_for_status().text))
            except (httpx.HTTPError, ValueError) as err:
                errors.append(f"{path}: {err or type(err).__name__}")
    out["scrape_s"] = round(time.monotonic() - t0, 2)
    return out, errors


async def api_view(client: ApiClient, node: SoakNode) -> dict[str, int]:
    """The run's pods of ``node`` as the API server has them."""
    items = (await client.get(PODS_PATH, {"labelSelector": node.selector}))["items"]
    return {
        "api_pods": len(items),
        "api_ready": sum(is_ready(p) for p in items),
        "api_terminating": sum(bool(p["metadata"].get("deletionTimestamp")) for p in items),
        "api_failed": sum(p.get("status", {}).get("phase") == "Failed" for p in items),
    }


class Sampler:
    """Samples every kubelet every ``period`` seconds (:meth:`run`), and on demand (:meth:`sample_now`,
    which restarts the period from then). The process figures of all kubelets are read on time, at one
    instant; the kubelet's endpoints and the API server are asked in the background, each kubelet's
    figures filled in when they come (a kubelet still answering an earlier sample's requests is not asked
    again: that sample lacks them), so a kubelet that answers slowly delays no process reading."""

    def __init__(self, client: ApiClient, nodes: Sequence[SoakNode], period: float) -> None:
        self.client = client
        self.nodes = nodes
        self.period = period
        self.phase = "fill"
        self.next = 0.0
        self._nursery: trio.Nursery | None = None
        self._asking: set[str] = set()  # the nodes (keys) with requests in flight
        self._ticking = trio.CancelScope()
        self._last = -float("inf")  # when the last sample was taken
        self._machine: tuple[float, float] | None = None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Sample until :meth:`stop`, then return once the requests in flight are answered."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            self.next = trio.current_time()
            task_status.started()
            with self._ticking:
                while True:
                    await trio.sleep_until(self.next)
                    if trio.current_time() < self.next:  # a sample_now meanwhile: its period runs
                        continue
                    self._sample()
                    while self.next <= trio.current_time():  # fell behind: skip, not burst
                        self.next += self.period

    def sample_now(self, *, last: bool = False) -> None:
        """A sample now (the phase's first or the last), unless one was taken within the last second:
        then that one is it (relabelled with the phase). ``last``: ask every kubelet for its figures for
        it, even one still answering an earlier sample's requests."""
        now = trio.current_time()
        self.next = now + self.period
        if now - self._last < RECENT_SAMPLE:
            for node in self.nodes:
                node.samples[-1]["phase"] = self.phase
        else:
            self._sample()
        if last:
            assert self._nursery is not None
            for node in self.nodes:
                if node.samples[-1].pop("scrape_skipped", False):
                    node.skipped_scrapes -= 1
                    self._nursery.start_soon(self._ask, node, node.samples[-1])

    def stop(self) -> None:
        self._ticking.cancel()

    def _sample(self) -> None:
        assert self._nursery is not None, "Sampler.run first"
        now = self._last = trio.current_time()
        busy = machine_busy_seconds()
        machine = None
        if self._machine is not None and now > self._machine[0]:
            cores = os.cpu_count() or 1
            machine = round(100 * (busy - self._machine[1]) / (now - self._machine[0]) / cores, 1)
        self._machine = (now, busy)
        for node in self.nodes:
            if (code := node.kubelet.proc.poll()) is not None:
                raise RuntimeError(f"kubelet {node.key} exited with {code}")
            sample: dict[str, Any] = {"time": now, "phase": self.phase, **node.read_process(now)}
            sample.update(
                machine_cpu_percent=machine,
                creates=node.creates,
                deletes=node.deletes,
                create_errors=node.create_errors,
                delete_errors=node.delete_errors,
            )
            node.samples.append(sample)
            if node.key in self._asking:
                node.skipped_scrapes += 1
                sample["scrape_skipped"] = True
            else:
                self._asking.add(node.key)
                self._nursery.start_soon(self._ask, node, sample)

    async def _ask(self, node: SoakNode, sample: dict[str, Any]) -> None:
        try:
            figures, errors = await trio.to_thread.run_sync(
                scrape_kubelet, node.kubelet.port, abandon_on_cancel=True
            )
            sample.update(figures)
            for error in errors:
                node.scrape_errors += 1
                node.error("scrape", RuntimeError(error))
            try:
                sample.update(await api_view(self.client, node))
            except ApiClientError as err:
                node.error("list pods", err)
        finally:
            self._asking.discard(node.key)


# -- the phases ----------------------------------------------------------------------------------------------


async def create_pod(client: ApiClient, node: SoakNode, name: str, kind: str, config: str) -> None:
    manifest = pod_manifest(name, node.node, node.image, kind, node.labels, config)
    try:
        await client.create(PODS_PATH, manifest)
    except ApiClientError as err:
        node.create_errors += 1
        node.error(f"create {name}", err)
        return
    node.creates += 1
    node.live.append((name, kind))


async def delete_pod(client: ApiClient, node: SoakNode, name: str) -> None:
    try:
        await client.delete(f"{PODS_PATH}/{name}")
    except ApiClientError as err:
        node.delete_errors += 1
        node.error(f"delete {name}", err)
        return
    node.deletes += 1


async def fill(client: ApiClient, node: SoakNode, pods: int, config: str, wait_s: float) -> None:
    """``pods`` pods on the node, until every one that is not a crash-looper is Ready."""
    t0 = trio.current_time()
    limiter = trio.CapacityLimiter(FILL_CONCURRENCY)

    async def one(name: str, kind: str) -> None:
        async with limiter:
            await create_pod(client, node, name, kind, config)

    async with trio.open_nursery() as nursery:
        for _ in range(pods):
            nursery.start_soon(one, *node.next_pod())
    created = trio.current_time() - t0
    # an outside observer of the API: polling is all there is
    want = sum(kind != "crash" for _, kind in node.live)
    ready = 0
    with trio.move_on_after(wait_s) as scope:
        while True:
            try:
                ready = (await api_view(client, node))["api_ready"]
            except ApiClientError as err:
                node.error("list pods", err)
            if ready >= want:
                break
            await trio.sleep(2)
    # the pod's sequence numbers are the creation order, which the concurrent creates may have mixed
    node.live = collections.deque(sorted(node.live, key=lambda pod: pod[0].rsplit("-", 1)[1]))
    node.fill = {
        "pods": len(node.live),
        "creates_s": round(created, 1),
        "ready_s": round(trio.current_time() - t0, 1),
        "ready": ready,
        "ready_wanted": want,
        "timed_out": scope.cancelled_caught,
    }


async def churn(client: ApiClient, node: SoakNode, until: float, rate: float, config: str) -> None:
    """Every 1/rate s: delete the oldest pod, create one of the same kind; until ``until``."""
    limiter = trio.CapacityLimiter(CHURN_CONCURRENCY)

    async def limited(fn: Any, *args: Any) -> None:
        async with limiter:
            await fn(*args)

    async with trio.open_nursery() as nursery:
        tick = trio.current_time()
        while tick < until:
            await trio.sleep_until(tick)
            if node.live:
                old, kind = node.live.popleft()
                nursery.start_soon(limited, delete_pod, client, node, old)
                nursery.start_soon(limited, create_pod, client, node, *node.next_pod(kind), config)
            tick += 1 / rate


async def drain(client: ApiClient, nodes: Sequence[SoakNode], wait_s: float) -> None:
    """Delete every pod of the run and wait until the API server has none left (at most ``wait_s``)."""
    limiter = trio.CapacityLimiter(CHURN_CONCURRENCY)

    async def limited(node: SoakNode, name: str) -> None:
        async with limiter:
            await delete_pod(client, node, name)

    async with trio.open_nursery() as nursery:
        for node in nodes:
            while node.live:
                nursery.start_soon(limited, node, node.live.popleft()[0])
    with trio.move_on_after(wait_s):
        for node in nodes:
            while (await api_view(client, node))["api_pods"]:  # noqa: ASYNC110 (an outside observer)
                await trio.sleep(2)


def mark(nodes: Sequence[SoakNode], name: str) -> None:
    """The kubelets' CPU seconds, the machine's busy seconds, the time and the creates and deletes so far,
    as ``<name>_cpu``, ``<name>_machine``, ``<name>_time``..."""
    now = trio.current_time()
    busy = machine_busy_seconds()
    for node in nodes:
        node.readings[f"{name}_machine"] = busy
        node.readings[f"{name}_cpu"] = proc_cpu_seconds(node.kubelet.pid)
        node.readings[f"{name}_time"] = now
        node.readings[f"{name}_creates"] = node.creates
        node.readings[f"{name}_deletes"] = node.deletes


async def soak(plane: ControlPlane, nodes: Sequence[SoakNode], args: argparse.Namespace, config: str) -> None:
    async with open_kubeconfig_client(str(plane.kubeconfig), qps=1000, burst=1000) as client:
        labels = {"soak-run": nodes[0].run_id}
        for path, obj in config_objects(config, labels):
            await client.create(path, obj)
        sampler = Sampler(client, nodes, args.sample_seconds)
        async with trio.open_nursery() as nursery:
            sampler.phase = "idle"
            await nursery.start(sampler.run)
            await trio.sleep(IDLE_SCRAPE_WAIT)  # the Kubelet API may still be starting at the first
            sampler.sample_now()
            await trio.sleep(IDLE_SCRAPE_WAIT)
            sampler.phase = "fill"
            async with trio.open_nursery() as fills:
                for node in nodes:
                    fills.start_soon(fill, client, node, args.pods, config, args.fill_timeout)
            sampler.phase = "baseline"
            mark(nodes, "baseline_start")
            sampler.sample_now()
            await trio.sleep(args.baseline_seconds)
            mark(nodes, "baseline_end")
            sampler.phase = "churn"
            mark(nodes, "churn_start")
            sampler.sample_now()
            until = trio.current_time() + 60 * args.minutes
            async with trio.open_nursery() as churns:
                for node in nodes:
                    churns.start_soon(churn, client, node, until, args.rate, config)
            mark(nodes, "churn_end")
            sampler.phase = "end"
            if args.drain_seconds > 0:
                sampler.sample_now()
                await trio.sleep(IDLE_SCRAPE_WAIT)  # the end sample's figures, before any pod goes
                await drain(client, nodes, args.cleanup_timeout)
                sampler.phase = "drain"
                sampler.sample_now()
                await trio.sleep(args.drain_seconds)
                sampler.phase = "drained"
            sampler.sample_now(last=True)
            sampler.stop()  # the nursery waits for the last figures


# -- clean-up ------------------------------------------------------------------------------------------------


async def delete_run_objects(kubeconfig: Path, run_id: str, config: str, wait_s: float) -> dict[str, int]:
    """Delete the run's pods (waiting for the kubelets to finish them; forced after ``wait_s``), then
    its ConfigMap and Secret."""
    out = {"deleted": 0, "forced": 0}
    selector = {"labelSelector": f"soak-run={run_id}"}
    async with open_kubeconfig_client(str(kubeconfig), qps=1000, burst=1000) as client:
        limiter = trio.CapacityLimiter(20)

        async def delete(name: str, grace: int | None) -> None:
            async with limiter:
                with suppress(ApiClientError):  # gone meanwhile
                    await client.delete(f"{PODS_PATH}/{name}", grace_period_seconds=grace)

        async def delete_all(grace: int | None) -> int:
            items = (await client.get(PODS_PATH, selector))["items"]
            async with trio.open_nursery() as nursery:
                for pod in items:
                    nursery.start_soon(delete, pod["metadata"]["name"], grace)
            return len(items)

        out["deleted"] = await delete_all(None)
        with trio.move_on_after(wait_s):
            while (await client.get(PODS_PATH, selector))["items"]:  # noqa: ASYNC110 (an outside observer)
                await trio.sleep(1)
        out["forced"] = await delete_all(0)
        for path, _ in config_objects(config, {}):
            with suppress(ApiClientError):
                await client.delete(f"{path}/{config}")
    return out


@contextmanager
def private_containerd(workdir: Path, problems: list[str]) -> Iterator[LocalCriEnvironment]:
    """A :class:`LocalCriEnvironment` whose sandboxes are removed patiently on exit: an overloaded
    containerd refuses to delete a task for a while after its processes were killed ("cannot delete
    running task"). What still fails is noted in ``problems``; containerd, its shims, mounts, network
    and directory go in any case (``LocalCriEnvironment.close``)."""
    cri = LocalCriEnvironment(workdir).start()
    try:
        yield cri
    finally:
        for attempt in range(CRI_REMOVE_ATTEMPTS):
            try:
                trio.run(remove_all_pods, cri.endpoint)
                break
            except Exception as err:  # a CriError, in an ExceptionGroup from the channel's nursery
                if attempt == CRI_REMOVE_ATTEMPTS - 1:
                    problems.append(f"{workdir.name}: removing the sandboxes: {err!r}"[:500])
                else:
                    time.sleep(5)
        try:
            cri.close()
        except Exception as err:
            problems.append(f"{workdir.name}: close: {err!r}"[:500])


def delete_nodes(plane: ControlPlane, names: Sequence[str]) -> None:
    """The Node objects and their leases (the kubelets are stopped by then: they would register again)."""
    try:
        with plane.http_client() as http:
            for name in names:
                http.delete(f"/api/v1/nodes/{name}")
                http.delete(f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{name}")
    except httpx.HTTPError as err:
        print(f"soak: deleting the nodes failed: {err}", file=sys.stderr)


# -- the summary and the plot --------------------------------------------------------------------------------


def _at(samples: Sequence[dict[str, Any]], key: str, index: int) -> Any:
    values = [s[key] for s in samples if s.get(key) is not None]
    return values[index] if values else None


def summarize(node: SoakNode, zero: float) -> dict[str, Any]:
    """The figures of the module docstring for one kubelet (``zero``: the churn's start)."""
    r = node.readings
    churn = [s for s in node.samples if s["phase"] in ("churn", "end")]
    out: dict[str, Any] = {}
    if not churn or "churn_end_cpu" not in r:
        out["incomplete"] = True
    if churn:
        minute_10 = next((s for s in churn if s["t_s"] >= MINUTE_10), None)
        out["rss_mb_churn_start"] = churn[0]["rss_mb"]
        out["rss_mb_minute_10"] = minute_10["rss_mb"] if minute_10 is not None else None
        out["rss_mb_end"] = churn[-1]["rss_mb"]
        out["rss_end_over_minute_10"] = ratio(out["rss_mb_end"], out["rss_mb_minute_10"])
        for field in SUMMARY_FIELDS[1:]:
            out[f"{field}_churn_start"] = _at(churn, field, 0)
            out[f"{field}_end"] = _at(churn, field, -1)
            if churn[-1].get(field) is None and out[f"{field}_end"] is not None:  # from an earlier sample
                out[f"{field}_end_t_s"] = _at([s for s in churn if s.get(field) is not None], "t_s", -1)
        # keeping up: pods on the node, those still terminating (growing: the deletes fall behind the
        # churn), Failed ones (rejected at admission)
        out["api_pods_end"] = _at(churn, "api_pods", -1)
        out["api_terminating_end"] = _at(churn, "api_terminating", -1)
        out["api_terminating_max"] = max((s.get("api_terminating") or 0) for s in churn)
        out["api_failed_end"] = _at(churn, "api_failed", -1)
    if "baseline_end_cpu" in r:
        base_wall = r["baseline_end_time"] - r["baseline_start_time"]
        base_rate = (r["baseline_end_cpu"] - r["baseline_start_cpu"]) / base_wall if base_wall > 0 else 0.0
        out["baseline_cpu_percent"] = round(100 * base_rate, 1)
        if base_wall > 0:
            busy = r["baseline_end_machine"] - r["baseline_start_machine"]
            out["baseline_machine_cpu_percent"] = round(100 * busy / base_wall / (os.cpu_count() or 1), 1)
    else:
        base_rate = None
    end = "churn_end" if "churn_end_cpu" in r else None
    if "churn_start_cpu" in r:
        if end is None:  # interrupted: up to the last sample
            last = node.samples[-1]
            cpu_end, time_end = last["cpu_s"], zero + last["t_s"]
            creates_end, deletes_end = last["creates"], last["deletes"]
        else:
            cpu_end, time_end = r["churn_end_cpu"], r["churn_end_time"]
            creates_end, deletes_end = int(r["churn_end_creates"]), int(r["churn_end_deletes"])
        creates = creates_end - int(r["churn_start_creates"])
        deletes = deletes_end - int(r["churn_start_deletes"])
        cpu = cpu_end - r["churn_start_cpu"]
        wall = time_end - r["churn_start_time"]
        pairs = (creates + deletes) / 2
        if end is not None and wall > 0:
            busy = r["churn_end_machine"] - r["churn_start_machine"]
            out["churn_machine_cpu_percent"] = round(100 * busy / wall / (os.cpu_count() or 1), 1)
        out.update(
            churn_s=round(wall, 1),
            creates=creates,
            deletes=deletes,
            create_errors=node.create_errors,
            delete_errors=node.delete_errors,
            churn_cpu_s=round(cpu, 2),
            churn_cpu_percent=round(100 * cpu / wall, 1) if wall > 0 else None,
            cpu_ms_per_churned_pod=round(1000 * cpu / pairs, 1) if pairs else None,
            cpu_ms_per_churned_pod_over_baseline=(
                round(1000 * (cpu - base_rate * wall) / pairs, 1) if pairs and base_rate is not None else None
            ),
        )
    drained = [s for s in node.samples if s["phase"] == "drained"]
    if drained and node.samples:
        idle = [s for s in node.samples if s["phase"] == "idle"] or node.samples[:1]
        out["before_fill"] = {field: idle[-1].get(field) for field in DRAIN_FIELDS}
        out["drained"] = {field: drained[-1].get(field) for field in DRAIN_FIELDS}
    out["scrape_errors"] = node.scrape_errors
    out["skipped_scrapes"] = node.skipped_scrapes
    if node.errors:
        out["first_errors"] = node.errors
    return out


def comparison(summaries: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    trio_s, go_s = summaries.get("trio"), summaries.get("go")
    if trio_s is None or go_s is None:
        return {}
    keys = (
        "rss_mb_end",
        "rss_end_over_minute_10",
        "fds_end",
        "churn_cpu_percent",
        "cpu_ms_per_churned_pod",
        "cpu_ms_per_churned_pod_over_baseline",
        "baseline_cpu_percent",
    )
    return {f"trio_over_go_{key}": ratio(trio_s.get(key), go_s.get(key)) for key in keys}


def plot(nodes: Sequence[SoakNode], path: Path, title: str) -> str | None:
    """RSS, CPU %, descriptors, tasks and pods over time per kubelet into ``path``; None, or why not."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib not installed (pip install matplotlib)"
    panels = (
        ("rss_mb", "RSS (MB)"),
        ("cpu_percent", "CPU (% of one core)"),
        ("fds", "open descriptors"),
        ("tasks", "Trio tasks / goroutines"),
        ("api_pods", "pods on the node\n(dotted: terminating)"),
    )
    figure, axes = plt.subplots(len(panels), 1, sharex=True, figsize=(10, 13))
    baseline = min(
        (s["t_s"] / 60 for n in nodes for s in n.samples if s["phase"] == "baseline"), default=None
    )
    for ax, (key, label) in zip(axes, panels, strict=True):
        for node in nodes:
            points = [(s["t_s"] / 60, s[key]) for s in node.samples if s.get(key) is not None]
            if points:
                xs, ys = zip(*points, strict=True)
                (line,) = ax.plot(xs, ys, marker=".", label=f"{node.key} ({node.node})")
                if key == "api_pods":
                    terminating = [
                        (s["t_s"] / 60, s["api_terminating"]) for s in node.samples if "api_terminating" in s
                    ]
                    if terminating:
                        ax.plot(*zip(*terminating, strict=True), linestyle=":", color=line.get_color())
        if baseline is not None:
            ax.axvspan(baseline, 0, color="grey", alpha=0.1, linewidth=0)  # the baseline; before it, the fill
        ax.axvline(0, color="grey", linestyle="--", linewidth=0.8)
        ax.set_ylabel(label)
        ax.grid(True, alpha=0.3)
        ax.legend(loc="best", fontsize="small")
    axes[-1].set_xlabel("minutes since the churn started (before: the fill, then the shaded baseline)")
    figure.suptitle(title)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return None


# -- main ----------------------------------------------------------------------------------------------------


def _interrupted(err: BaseException) -> bool:
    if isinstance(err, KeyboardInterrupt):
        return True
    return isinstance(err, BaseExceptionGroup) and err.subgroup(KeyboardInterrupt) is not None


def _sigterm(signum: int, frame: object) -> None:
    signal.raise_signal(signal.SIGINT)  # the clean-up path of Ctrl-C, inside Trio or out


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--kubelets", default="trio", help="trio, go or trio,go (side by side)")
    parser.add_argument("--minutes", type=float, default=60.0, help="length of the churn")
    parser.add_argument("--sample-seconds", type=float, default=30.0)
    parser.add_argument("--pods", type=int, default=110, help="pods per node")
    parser.add_argument("--max-pods", type=int, default=130, help="the kubelets' maxPods")
    parser.add_argument("--rate", type=float, default=1.0, help="creates (and deletes) a second per kubelet")
    parser.add_argument("--baseline-seconds", type=float, default=60.0, help="full node without churn")
    parser.add_argument("--fill-timeout", type=float, default=600.0)
    parser.add_argument("--cleanup-timeout", type=float, default=180.0)
    parser.add_argument(
        "--drain-seconds", type=float, default=120.0, help="no pods after the churn, before the last sample"
    )
    parser.add_argument("--plot", type=Path, default=None, help="PNG of the samples")
    parser.add_argument("--api", choices=("auto", "envtest", "fake"), default="auto")
    parser.add_argument("--log-dir", type=Path, default=None, help="keep the kubelets' logs here")
    parser.add_argument(
        "--trio-arg", action="append", default=[], metavar="ARG", help="one more kubelet-trio argument"
    )
    args = parser.parse_args()
    kinds = [k for k in args.kubelets.split(",") if k]
    if not kinds or set(kinds) - {"trio", "go"} or len(set(kinds)) != len(kinds):
        parser.error("--kubelets: trio, go or trio,go")
    missing = missing_prerequisites()
    if "go" in kinds and not os.access(GO_KUBELET, os.X_OK):
        missing.append(f"{GO_KUBELET} not built")
    if missing:
        print(json.dumps({"skipped": missing}))
        return 1
    if args.log_dir is not None:
        args.log_dir.mkdir(parents=True, exist_ok=True)
    # Ctrl-C's clean-up also when started in the background (a shell starts those with SIGINT ignored,
    # and Trio then leaves it so), and for SIGTERM
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _sigterm)
    run_id = secrets.token_hex(3)
    config = f"soak-{run_id}"
    out: dict[str, Any] = {
        "machine": {
            "cpus": os.cpu_count(),
            "cpu": cpu_model(),
            "kernel": platform.release(),
            "python": sys.version.split()[0],
            "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        },
        "settings": {
            "kubelets": kinds,
            "pods_per_node": args.pods,
            "max_pods": args.max_pods,
            "minutes": args.minutes,
            "rate_per_s": args.rate,
            "sample_seconds": args.sample_seconds,
            "baseline_seconds": args.baseline_seconds,
            "mix": "1/10 crash (sleep 3; exit 1), 2/10 ConfigMap + Secret volumes, 7/10 sleep; "
            f"exec readiness probes every {PROBE_PERIOD} s, grace {GRACE_SECONDS} s",
            "cpu_per_churned_pod": "kubelet CPU over the churn / ((creates + deletes) / 2)",
        },
    }
    nodes: list[SoakNode] = []
    problems: list[str] = []  # of the clean-up
    status = 0
    with tempfile.TemporaryDirectory(prefix="kubelet-trio-soak-") as tmp, ExitStack() as stack:
        workdir = Path(tmp)
        plane = stack.enter_context(control_plane(args.api, workdir))
        out["control_plane"] = plane.label
        names = [TRIO_NODE if k == "trio" else GO_NODE for k in kinds]
        stack.callback(delete_nodes, plane, names)  # runs after the kubelets are stopped
        for key in kinds:
            cri = stack.enter_context(private_containerd(workdir / f"cri-{key}", problems))
            kubelet: KubeletProcess
            if key == "trio":
                extra = ["--max-pods", str(args.max_pods), *args.trio_arg]
                kubelet = stack.enter_context(trio_kubelet(plane, cri, workdir / "trio", args.log_dir, extra))
                node_name = TRIO_NODE
            else:
                out["go_kubelet"] = go_info()
                kubelet = stack.enter_context(
                    go_kubelet(
                        plane,
                        cri,
                        workdir / "go",
                        args.log_dir,
                        qps=True,
                        extra_config={"maxPods": args.max_pods},
                    )
                )
                node_name = GO_NODE
            nodes.append(SoakNode(key, node_name, kubelet, cri.images.busybox, run_id))
        # before the kubelets stop: they finish their pods
        cleanup: dict[str, Any] = {}
        stack.callback(
            lambda: cleanup.update(
                trio.run(delete_run_objects, plane.kubeconfig, run_id, config, args.cleanup_timeout)
            )
        )
        t0 = time.monotonic()
        try:
            trio.run(soak, plane, nodes, args, config)
        except BaseException as err:
            if not _interrupted(err):
                if not isinstance(err, Exception):
                    raise
                out["error"] = repr(err)
                status = 1
            else:
                out["interrupted_after_s"] = round(time.monotonic() - t0, 1)
                status = 130
        zero = next(
            (n.readings["churn_start_time"] for n in nodes if "churn_start_time" in n.readings),
            max((s["time"] for n in nodes for s in n.samples), default=0.0),
        )
        for node in nodes:
            for sample in node.samples:
                sample["t_s"] = round(sample.pop("time") - zero, 1)
        summaries = {node.key: summarize(node, zero) for node in nodes}
        out["kubelets"] = {
            node.key: {
                "node": node.node,
                "pid": node.kubelet.pid,
                "fill": node.fill,
                "summary": summaries[node.key],
                "samples": node.samples,
            }
            for node in nodes
        }
        if comparison(summaries):
            out["comparison"] = comparison(summaries)
        if args.plot is not None:
            title = f"kubelet soak: {args.pods} pods, churn {args.rate:g}/s for {args.minutes:g} min"
            problem = plot(nodes, args.plot, title)
            out["plot"] = str(args.plot) if problem is None else {"skipped": problem}
        out["cleanup"] = cleanup
        try:
            stack.close()
        finally:
            if problems:
                cleanup["problems"] = problems
            print(json.dumps(out, indent=2))
    return status


if __name__ == "__main__":
    sys.exit(main())
