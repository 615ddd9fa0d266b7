"""The conformance tier: sig-node behaviours of the Kubernetes conformance suite, checked through a real
kube-apiserver exactly as a client sees them.

One session-wide cluster (fixture ``cluster``): etcd + kube-apiserver 1.24
(``kubelet_trio.testing.envtest``), a private containerd with busybox on a loopback registry
(``LocalCriEnvironment``), and ONE ``kubelet-trio --kubeconfig`` daemon (a subprocess, as users run it)
joined as node :data:`NODE`. There is no scheduler, controller manager or exec: pods carry
``spec.nodeName``; nothing creates service accounts; logs come from ``pods/<name>/log`` (the API server
dials the kubelet, authenticated by a client certificate). The kubelet runs with ``--sync-frequency
SYNC_FREQUENCY`` and otherwise the defaults. Skipped (with a build hint) without the binaries or containerd;
in CI with the binaries present a skip fails the session (tests/conftest.py).

How to write a scenario::

    async def test_something(ns: Namespace) -> None:
        pod = await ns.create_pod(ns.pod("p", containers=[ns.container("c", "echo hi; sleep 3600")]))
        running = await ns.wait_pod("p", container_running("c"), deadline=after(60))
        assert running["status"]["hostIP"] == ns.cluster.node_ip
        assert await ns.logs("p", "c") == "hi\\n"

- ``ns`` (function scope) is a fresh namespace named after the test; its pods are force-deleted at the end.
  ``ns.client`` is an :class:`~kubelet_trio.client.ApiClient` with admin rights for anything else
  (configMaps, secrets, ``ns.path("configmaps")``); ``ns.cluster`` has the node name, node IP, images,
  kubeconfig (for ``kubectl --kubeconfig``) and the kubelet's log file.
- ``ns.pod`` / ``ns.container`` build manifests (busybox, ``sh -c <script>``, ``nodeName`` set, a short
  grace period); edit the dicts freely before ``create_pod``.
- ``wait_pod(name, predicate, deadline=after(60))`` follows a watch until ``predicate(pod)`` holds, under
  an absolute deadline (default 60 s from the call); past it, it fails with the last pod status seen.
  Predicates are plain functions of the pod dict; ready-made ones: :func:`phase_is`,
  :func:`container_running`, :func:`container_terminated`, :func:`condition_is`, :func:`restarted` (and
  :func:`both`); :func:`container_status` finds one container's status.
- Tests in one session run one after another (pytest-trio), so a scenario that waits should run its cases
  concurrently: several pods in one test, checked in a ``trio.open_nursery()`` (see test_pods.py).
  Keep every test within ~2 minutes; the whole tier must stay a few minutes on 2 cores.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import attrs
import httpx
import pytest
import trio

from kubelet_trio.apimode import open_kubeconfig_client
from kubelet_trio.client import ApiClient, NotFound, StatusError
from kubelet_trio.testing.env import LocalCriEnvironment, missing_prerequisites, private_cgroup_root
from kubelet_trio.testing.envtest import EnvtestCluster, assets, skip_reason, start_envtest
from kubelet_trio.testing.registry import free_port

NODE = "conformance-node"
SYNC_FREQUENCY = "10s"
NODE_READY_TIMEOUT = 90.0
WAIT = 60.0  # seconds: wait_pod's default deadline from now
DEFAULT_GRACE = 5  # seconds; busybox `sh` ignores SIGTERM as PID 1, so this bounds every deletion
PodPredicate = Callable[[dict[str, Any]], bool]

__all__ = [
    "NODE",
    "Cluster",
    "Namespace",
    "after",
    "both",
    "condition_is",
    "container_running",
    "container_status",
    "container_terminated",
    "phase_is",
    "restarted",
]


# -- the session cluster ------------------------------------------------------------------------------


@attrs.frozen
class Cluster:
    """What a scenario may need to know about the session's control plane and node."""

    api: EnvtestCluster
    cri: LocalCriEnvironment
    node: str
    node_ip: str  # the node's InternalIP, as the kubelet registered it
    kubelet_log: Path
    kubelet_port: int

    @property
    def busybox(self) -> str:
        return self.cri.images.busybox

    @property
    def kubeconfig(self) -> Path:
        return self.api.kubeconfig

    def kubelet_log_tail(self, chars: int = 4000) -> str:
        try:
            return self.kubelet_log.read_text(errors="replace")[-chars:]
        except OSError:
            return ""


def _node_ready_ip(client: httpx.Client) -> str | None:
    response = client.get(f"/api/v1/nodes/{NODE}")
    if response.status_code != 200:
        return None
    status = response.json().get("status", {})
    ready = any(c["type"] == "Ready" and c["status"] == "True" for c in status.get("conditions", ()))
    ips = [a["address"] for a in status.get("addresses", ()) if a["type"] == "InternalIP"]
    return ips[0] if ready and ips else None


@contextlib.contextmanager
def _kubelet_daemon(api: EnvtestCluster, cri: LocalCriEnvironment, workdir: Path) -> Iterator[Cluster]:
    """``kubelet-trio --kubeconfig`` in a subprocess, until the node is Ready; SIGTERM at the end."""
    port = free_port()
    log = workdir / "kubelet.log"
    cgroups = contextlib.ExitStack()  # a cgroup root of its own: other tests' daemons run meanwhile
    cgroup_root = cgroups.enter_context(private_cgroup_root())
    command = [
        sys.executable, "-m", "kubelet_trio",
        "--kubeconfig", str(api.kubeconfig),
        "--container-runtime-endpoint", cri.endpoint,
        "--hostname-override", NODE,
        "--root-dir", str(workdir / "root"),
        "--cgroup-root", cgroup_root,
        "--pod-logs-dir", str(workdir / "pods"),
        "--sync-frequency", SYNC_FREQUENCY,
        "--healthz-port", "0",
        "--port", str(port),
        "--client-ca-file", str(api.ca_file),
        "--authentication-token-webhook=true",
        "--authorization-mode", "Webhook",
        "--v", "2",
    ]  # fmt: skip
    with log.open("wb") as out:  # the child keeps its own descriptor
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + NODE_READY_TIMEOUT
        with api.http_client() as client:
            while (node_ip := _node_ready_ip(client)) is None:
                if proc.poll() is not None or time.monotonic() > deadline:
                    tail = log.read_text(errors="replace")[-4000:]
                    raise RuntimeError(f"node {NODE} did not become Ready (exit {proc.poll()}):\n{tail}")
                time.sleep(0.25)
        yield Cluster(api, cri, NODE, node_ip, log, port)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        cgroups.close()


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    """The tier's control plane, containerd and kubelet-trio node, for the whole session."""
    directory = assets()
    if directory is None:
        pytest.skip(skip_reason("conformance"))
    missing = missing_prerequisites()
    if missing:
        reason = "conformance tier unavailable: " + "; ".join(missing)
        if os.environ.get("CI") == "true":
            pytest.fail(reason + " (CI=true with kube-apiserver present: the conformance tier must run)")
        pytest.skip(reason)
    workdir = Path(tempfile.mkdtemp(prefix="kubelet-trio-conformance-"))
    # The API server reaches the kubelet (logs) at its InternalIP, as kubeadm configures it.
    extra = ["--kubelet-preferred-address-types=InternalIP,Hostname"]
    with (
        start_envtest(directory, extra_args=extra) as api,
        LocalCriEnvironment(workdir=workdir / "cri") as cri,
        _kubelet_daemon(api, cri, workdir) as node,
    ):
        yield node
    subprocess.run(["rm", "-rf", str(workdir)], check=False)


# -- per-test namespaces and helpers --------------------------------------------------------------------


def container_status(pod: Mapping[str, Any], name: str) -> dict[str, Any] | None:
    """The status of container ``name`` (regular, init or ephemeral), or None."""
    status = pod.get("status", {})
    for key in ("containerStatuses", "initContainerStatuses", "ephemeralContainerStatuses"):
        for entry in status.get(key) or ():
            if entry.get("name") == name:
                return dict(entry)
    return None


def phase_is(*phases: str) -> PodPredicate:
    return lambda pod: pod.get("status", {}).get("phase") in phases


def container_running(name: str, *, ready: bool | None = None) -> PodPredicate:
    """Container ``name`` is running (and has the given readiness, when given)."""

    def check(pod: dict[str, Any]) -> bool:
        status = container_status(pod, name)
        if status is None or "running" not in status.get("state", {}):
            return False
        return ready is None or status.get("ready") is ready

    return check


def container_terminated(name: str, *, exit_code: int | None = None) -> PodPredicate:
    def check(pod: dict[str, Any]) -> bool:
        status = container_status(pod, name)
        terminated = (status or {}).get("state", {}).get("terminated")
        return terminated is not None and (exit_code is None or terminated.get("exitCode") == exit_code)

    return check


def restarted(name: str, count: int) -> PodPredicate:
    """Container ``name`` has restarted at least ``count`` times."""

    def check(pod: dict[str, Any]) -> bool:
        return int((container_status(pod, name) or {}).get("restartCount", 0)) >= count

    return check


def condition_is(type_: str, status: str = "True") -> PodPredicate:
    def check(pod: dict[str, Any]) -> bool:
        conditions = pod.get("status", {}).get("conditions") or ()
        return any(c.get("type") == type_ and c.get("status") == status for c in conditions)

    return check


def both(*predicates: PodPredicate) -> PodPredicate:
    return lambda pod: all(p(pod) for p in predicates)


def after(seconds: float) -> float:
    """An absolute deadline ``seconds`` from now, for ``wait_pod(..., deadline=...)`` (share one deadline
    between several waits to bound a whole scenario)."""
    return trio.current_time() + seconds


class WaitTimeout(AssertionError):
    """A condition did not hold by its deadline (the message has the last object seen)."""


@attrs.define(eq=False)
class Namespace:
    """A namespace of the session cluster for one test, with the calls scenarios make."""

    name: str
    client: ApiClient
    cluster: Cluster

    def path(self, resource: str, name: str = "", subresource: str = "") -> str:
        """The API path of a core/v1 ``resource`` in this namespace (``pods``, ``configmaps``, ...)."""
        out = f"/api/v1/namespaces/{self.name}/{resource}"
        if name:
            out += f"/{name}"
        if subresource:
            out += f"/{subresource}"
        return out

    # -- manifests --

    def container(self, name: str, script: str | None = None, **fields: Any) -> dict[str, Any]:
        """A busybox container; ``script`` runs under ``sh -c`` (None: the image's default command)."""
        out: dict[str, Any] = {"name": name, "image": self.cluster.busybox}
        if script is not None:
            out["command"] = ["sh", "-c", script]
        out.update(fields)
        return out

    def pod(self, name: str, *, containers: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
        """A pod bound to the node (``spec.nodeName``) with a short grace period; ``spec`` adds fields
        (``restartPolicy=...``, ``initContainers=[...]``); ``metadata`` may be passed as a key of spec."""
        metadata = {"name": name, **spec.pop("metadata", {})}
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": metadata,
            "spec": {
                "nodeName": self.cluster.node,
                "terminationGracePeriodSeconds": DEFAULT_GRACE,
                "containers": containers,
                **spec,
            },
        }

    # -- pods --

    async def create_pod(self, manifest: Mapping[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = await self.client.create(self.path("pods"), manifest)
        return result

    async def get_pod(self, name: str) -> dict[str, Any]:
        result: dict[str, Any] = await self.client.get(self.path("pods", name))
        return result

    async def patch_pod(self, name: str, patch: Mapping[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = await self.client.merge_patch(self.path("pods", name), patch)
        return result

    async def delete_pod(self, name: str, *, grace_period_seconds: int | None = None) -> dict[str, Any]:
        """DELETE (graceful unless 0); the answer is the pod with its deletionTimestamp, or a Status."""
        result: dict[str, Any] = await self.client.delete(
            self.path("pods", name), grace_period_seconds=grace_period_seconds
        )
        return result

    async def wait_pod(
        self,
        name: str,
        predicate: PodPredicate,
        *,
        deadline: float | None = None,
        what: str = "",
        seen: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """The pod once ``predicate`` holds, following a watch; fails at ``deadline`` (absolute Trio time;
        default :data:`WAIT` seconds from now; see :func:`after`) with the last status seen. Every version
        observed on the way is appended to ``seen`` (for invariants over the whole history)."""
        found = await self._wait(name, lambda pod: pod is not None and predicate(pod), deadline, what, seen)
        assert found is not None
        return found

    async def wait_pod_gone(
        self, name: str, *, deadline: float | None = None, seen: list[dict[str, Any]] | None = None
    ) -> None:
        """Until the pod object is deleted from the API server (``seen`` gets the versions before)."""
        await self._wait(name, lambda pod: pod is None, deadline, "pod deleted", seen)

    async def _wait(
        self,
        name: str,
        done: Callable[[dict[str, Any] | None], bool],
        deadline: float | None,
        what: str,
        seen: list[dict[str, Any]] | None,
    ) -> dict[str, Any] | None:
        seen = [] if seen is None else seen
        last: dict[str, Any] | None = None
        start = trio.current_time()
        deadline = start + WAIT if deadline is None else deadline
        with trio.move_on_at(deadline):
            while True:
                listed = await self.client.get(self.path("pods"), {"fieldSelector": f"metadata.name={name}"})
                items = listed.get("items") or []
                last = items[0] if items else None
                if last is not None and (not seen or seen[-1] != last):
                    seen.append(last)
                if done(last):
                    return last
                params = {
                    "fieldSelector": f"metadata.name={name}",
                    "resourceVersion": listed["metadata"]["resourceVersion"],
                    "timeoutSeconds": "30",
                }
                async with self.client.open_watch(self.path("pods"), params) as events:
                    async for event in events:
                        if event.type in ("ADDED", "MODIFIED"):
                            last = event.object
                            seen.append(last)
                        elif event.type == "DELETED":
                            last = None
                        else:
                            break  # ERROR (expired resourceVersion, broken stream): list again
                        if done(last):
                            return last
        shown = {"metadata": (last or {}).get("metadata"), "status": (last or {}).get("status")}
        raise WaitTimeout(
            f"pod {self.name}/{name}: {what or 'condition'} did not hold within {deadline - start:.0f}s; "
            f"last seen: "
            f"{shown if last else 'no pod'}"
        )

    async def logs(self, name: str, container: str | None = None, **params: Any) -> str:
        """``GET pods/<name>/log`` through the API server (the kubelet serves it); ``params`` are the
        query (``previous=True``, ``tailLines=2``, ``timestamps=True``, ``sinceSeconds=5``...)."""
        query = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in params.items()}
        if container:
            query["container"] = container
        try:
            return await self.client.get_text(self.path("pods", name, "log"), query)
        except StatusError as err:  # callers poll on it: the container may not have started yet
            raise AssertionError(f"GET {self.path('pods', name, 'log')}: {err}") from None

    async def events(self, name: str) -> list[dict[str, Any]]:
        """The events recorded for the object ``name`` in this namespace."""
        listed = await self.client.get(self.path("events"))
        return [e for e in listed.get("items") or () if e["involvedObject"].get("name") == name]


def _namespace_name(test_name: str) -> str:
    base = re.sub(r"[^a-z0-9-]+", "-", test_name.lower().removeprefix("test_").replace("_", "-")).strip("-")
    return f"{base[:50].rstrip('-')}-{secrets.token_hex(3)}"


@pytest.fixture
async def ns(cluster: Cluster, request: pytest.FixtureRequest) -> AsyncIterator[Namespace]:
    """A new namespace for this test; its pods are force-deleted afterwards."""
    async with open_kubeconfig_client(str(cluster.kubeconfig), qps=200, burst=400) as client:
        name = _namespace_name(request.node.name)
        await client.create("/api/v1/namespaces", {"metadata": {"name": name}})
        namespace = Namespace(name, client, cluster)
        try:
            yield namespace
        finally:
            with trio.move_on_after(30, shield=True):
                pods = await client.get(namespace.path("pods"))
                for pod in pods.get("items") or ():
                    with contextlib.suppress(NotFound):
                        await client.delete(
                            namespace.path("pods", pod["metadata"]["name"]), grace_period_seconds=0
                        )
