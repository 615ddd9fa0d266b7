"""The device plugin scenario on a real kube-apiserver, for any kubelet (kubelet-trio on containerd, the
Go kubelet on sim-cri): Go's ``sample-device-plugin`` serves three ``example.com/widget`` devices and
each step checks the Node, the pods' statuses and the pod resources API against Go's answers.

1. The plugin registers: capacity and allocatable say 3 within :data:`ADVERTISE_TIMEOUT`.
2. A pod asking for 2 runs (where containers run commands: it sees ``WIDGETS`` naming two devices and a
   file under ``/dev-info/`` for each); a second asking for 2 is Failed, ``UnexpectedAdmissionError``,
   Go's message; ``List`` shows the first pod's two devices (each its own ``ContainerDevices``, Go's shape)
   and the second pod with none.
3. The kubelet is killed (SIGKILL) and started again: the plugin registers again, the first pod keeps its
   devices, a pod asking for 1 gets the remaining one.
4. The plugin stops: allocatable drops to 0 while capacity stays (Go's 5-minute grace period, whose end
   the device manager's MockClock tests cover); the running pods are untouched.

Real processes and the wall clock: each wait has its own timeout.
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, TypeVar

import httpx
import pytest
import trio
from grpclib.client import Channel

from kubelet_trio.aiobridge import open_asyncio_thread
from kubelet_trio.cri.gen import v1 as pr
from kubelet_trio.cri.gen.v1 import services

WIDGET = "example.com/widget"
DEVICES = {"dev-0", "dev-1", "dev-2"}
NAMESPACE = "default"
ADVERTISE_TIMEOUT = 15.0  # from the plugin's start to the Node showing its devices: within one status period
# (10 s) and a margin for a loaded machine
WAIT = 90.0
POLL = 0.2
REJECTION = (
    "Allocate failed due to requested number of devices unavailable for example.com/widget. "
    "Requested: 2, Available: 1, which is unexpected"
)

PLUGIN_BUILD_HINT = (
    "build it with `bash ../shared/tools/build-node-parts.sh <git dir of github.com/kubegc/liteKube>` "
    "(installs sample-device-plugin next to the envtest binaries)"
)

T = TypeVar("T")


class Harness(Protocol):
    """One kubelet on a real API server, as the scenario drives it."""

    api: httpx.Client
    node: str
    root_dir: Path
    #: where plugins register: kubelet-trio ``<root-dir>/device-plugins``, Go always
    #: ``/var/lib/kubelet/device-plugins`` (``pluginapi.DevicePluginPath``, whatever ``--root-dir`` says)
    plugin_dir: Path
    image: str
    #: what the status message puts before the admit handler's message (Go 1.24: ``"Pod "``)
    rejection_prefix: str
    #: what the Warning event's message puts before it (Go: nothing)
    #: the fields of the rejected pod's status
    rejected_status_keys: frozenset[str]

    def start_kubelet(self) -> None: ...

    def kill_kubelet(self) -> None:
        """SIGKILL, and wait for the process to be gone."""

    def output(self, pod: dict[str, Any]) -> str | None:
        """What the pod's container printed so far; None where containers do not run commands."""

    def logs(self) -> str: ...


def wait_for(what: str, timeout: float, probe: Callable[[], T | None], log: Callable[[], str]) -> T:
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value is not None:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:g}s waiting for {what}\n{log()}")
        time.sleep(POLL)


# -- the pod resources API -------------------------------------------------------------------------------


def call_pod_resources(root_dir: Path) -> tuple[pr.ListPodResourcesResponse, pr.AllocatableResourcesResponse]:
    """``List`` and ``GetAllocatableResources`` on ``<root-dir>/pod-resources/kubelet.sock``."""

    async def call() -> tuple[pr.ListPodResourcesResponse, pr.AllocatableResourcesResponse]:
        async with open_asyncio_thread() as bridge:
            channel = await bridge.run_sync(Channel, path=str(root_dir / "pod-resources" / "kubelet.sock"))
            try:
                stub = services.PodResourcesListerStub(channel)
                with trio.fail_after(10):
                    listed = await bridge.call(stub.list, pr.ListPodResourcesRequest())
                    allocatable = await bridge.call(
                        stub.get_allocatable_resources, pr.AllocatableResourcesRequest()
                    )
            finally:
                await bridge.run_sync(channel.close)
        return listed, allocatable

    return trio.run(call)


def devices_by_pod(listed: pr.ListPodResourcesResponse) -> dict[str, dict[str, set[str]]]:
    """pod → container → the widget IDs; every ``ContainerDevices`` names one device (Go's shape)."""
    answer: dict[str, dict[str, set[str]]] = {}
    for pod in listed.pod_resources:
        assert pod.namespace == NAMESPACE
        containers = answer.setdefault(pod.name, {})
        for container in pod.containers:
            ids = containers.setdefault(container.name, set())
            for entry in container.devices:
                assert entry.resource_name == WIDGET and len(entry.device_ids) == 1 and entry.topology is None
                ids.update(entry.device_ids)
            assert not container.cpu_ids and not container.memory
    return answer


def allocatable_ids(allocatable: pr.AllocatableResourcesResponse) -> set[str]:
    return {i for entry in allocatable.devices if entry.resource_name == WIDGET for i in entry.device_ids}


def try_pod_resources(
    root_dir: Path,
) -> tuple[pr.ListPodResourcesResponse, pr.AllocatableResourcesResponse] | None:
    try:
        return call_pod_resources(root_dir)
    except Exception:  # the socket is not there yet, or not answering yet
        return None


# -- the API ---------------------------------------------------------------------------------------------


def pod_manifest(node: str, name: str, image: str, widgets: int) -> dict[str, Any]:
    script = 'echo "WIDGETS=$WIDGETS"; for f in /dev-info/*; do echo "file=$f"; done; sleep 3600'
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {
                    "name": "app",
                    "image": image,
                    "command": ["sh", "-c", script],
                    "resources": {"limits": {WIDGET: str(widgets)}},
                }
            ],
        },
    }


def get_pod(api: httpx.Client, name: str) -> dict[str, Any]:
    response = api.get(f"/api/v1/namespaces/{NAMESPACE}/pods/{name}")
    response.raise_for_status()
    pod: dict[str, Any] = response.json()
    return pod


def widgets(api: httpx.Client, node: str) -> tuple[str | None, str | None]:
    """The Node's (capacity, allocatable) of the widget."""
    response = api.get(f"/api/v1/nodes/{node}")
    if response.status_code != 200:
        return None, None
    status = response.json().get("status", {})
    return status.get("capacity", {}).get(WIDGET), status.get("allocatable", {}).get(WIDGET)


def node_ready(api: httpx.Client, node: str) -> bool | None:
    response = api.get(f"/api/v1/nodes/{node}")
    if response.status_code != 200:
        return None
    conditions = response.json().get("status", {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions) or None


def running(pod: dict[str, Any]) -> bool:
    statuses = pod.get("status", {}).get("containerStatuses") or [{}]
    return pod.get("status", {}).get("phase") == "Running" and "running" in statuses[0].get("state", {})


def failed(pod: dict[str, Any]) -> dict[str, Any] | None:
    return pod if pod.get("status", {}).get("phase") == "Failed" else None


def rejection_event(api: httpx.Client) -> dict[str, Any] | None:
    response = api.get(f"/api/v1/namespaces/{NAMESPACE}/events")
    response.raise_for_status()
    for event in response.json()["items"]:
        if event["involvedObject"].get("name") == "second" and event["reason"] == "UnexpectedAdmissionError":
            found: dict[str, Any] = event
            return found
    return None


def seen_widgets(harness: Harness, name: str, count: int) -> set[str] | None:
    """The devices a running pod's container reports (``WIDGETS`` and its ``/dev-info`` files), once it
    printed them; None where containers do not run commands."""
    pod = get_pod(harness.api, name)
    output = harness.output(pod)
    if output is None:
        return None
    lines = output.splitlines()
    env = [line.removeprefix("WIDGETS=") for line in lines if line.startswith("WIDGETS=")]
    files = {line.removeprefix("file=/dev-info/") for line in lines if line.startswith("file=")}
    if not env or len(files) < count:
        return None
    ids = set(env[0].split(","))
    assert len(ids) == count and ids <= DEVICES and files == ids, output
    return ids


# -- the scenario ----------------------------------------------------------------------------------------


def start_plugin(binary: Path, plugin_dir: Path, log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:  # the child keeps its own descriptor
        return subprocess.Popen(
            [str(binary), WIDGET, str(len(DEVICES)), str(plugin_dir)], stdout=out, stderr=subprocess.STDOUT
        )


def run_scenario(harness: Harness, plugin_binary: Path, workdir: Path) -> None:
    api, node = harness.api, harness.node
    wait_for("the node to be Ready", WAIT, lambda: node_ready(api, node), harness.logs)

    # 1. registration
    plugin_log = workdir / "plugin.log"
    plugin = start_plugin(plugin_binary, harness.plugin_dir, plugin_log)
    try:
        wait_for(
            "the Node to advertise 3 widgets",
            ADVERTISE_TIMEOUT,
            lambda: widgets(api, node) == ("3", "3") or None,
            harness.logs,
        )

        # 2. allocation and admission
        api.post(f"/api/v1/namespaces/{NAMESPACE}/pods", json=pod_manifest(node, "first", harness.image, 2))
        wait_for("the first pod to run", WAIT, lambda: running(get_pod(api, "first")) or None, harness.logs)
        first_seen = wait_for_seen(harness, "first", 2)
        api.post(f"/api/v1/namespaces/{NAMESPACE}/pods", json=pod_manifest(node, "second", harness.image, 2))
        second = wait_for(
            "the second pod to be rejected",
            WAIT,
            lambda: failed(get_pod(api, "second")),
            harness.logs,
        )
        status = second["status"]
        assert status["reason"] == "UnexpectedAdmissionError"
        assert status["message"] == harness.rejection_prefix + REJECTION
        assert set(status) == harness.rejected_status_keys
        event = wait_for("the rejection's event", WAIT, lambda: rejection_event(api), harness.logs)
        assert (event["type"], event["message"]) == ("Warning", REJECTION)  # the bare message, in both

        listed, allocatable = call_pod_resources(harness.root_dir)
        held = devices_by_pod(listed)
        first_ids = held["first"]["app"]
        assert len(first_ids) == 2 and first_ids <= DEVICES
        assert first_seen is None or first_seen == first_ids
        assert held["second"] == {"app": set()}
        assert allocatable_ids(allocatable) == DEVICES

        # 3. the kubelet killed and started again
        harness.kill_kubelet()
        # The sample plugin polls kubelet.sock every second and knows a new one by its inode, which the
        # new socket may reuse: take the old one away and let the plugin see it gone before the kubelet
        # starts again (the kubelet clears the directory).
        waiting = plugin_log.read_text().count("waiting for")
        (harness.plugin_dir / "kubelet.sock").rename(harness.plugin_dir / "kubelet.sock.killed")
        wait_for(
            "the plugin to see the kubelet gone",
            WAIT,
            lambda: plugin_log.read_text().count("waiting for") > waiting or None,
            harness.logs,
        )
        harness.start_kubelet()

        def plugin_back() -> dict[str, dict[str, set[str]]] | None:
            answer = try_pod_resources(harness.root_dir)
            if answer is None or allocatable_ids(answer[1]) != DEVICES:
                return None
            held = devices_by_pod(answer[0])
            return held if "first" in held else None  # once the kubelet has its pods again

        held = wait_for("the plugin to register again", WAIT, plugin_back, harness.logs)
        assert held["first"]["app"] == first_ids
        api.post(f"/api/v1/namespaces/{NAMESPACE}/pods", json=pod_manifest(node, "third", harness.image, 1))
        wait_for("the third pod to run", WAIT, lambda: running(get_pod(api, "third")) or None, harness.logs)
        third_seen = wait_for_seen(harness, "third", 1)
        listed, _ = call_pod_resources(harness.root_dir)
        held = devices_by_pod(listed)
        assert held["first"]["app"] == first_ids
        assert held["third"]["app"] == DEVICES - first_ids
        assert third_seen is None or third_seen == DEVICES - first_ids
        assert running(get_pod(api, "first"))

        # 4. the plugin gone
        plugin.send_signal(signal.SIGTERM)
        plugin.wait(20)
        wait_for("allocatable to drop to 0", WAIT, lambda: widgets(api, node)[1] == "0" or None, harness.logs)
        assert widgets(api, node) == ("3", "0")  # capacity is kept for the grace period
        for name in ("first", "third"):
            pod = get_pod(api, name)
            assert running(pod), pod["status"]
            assert pod["status"]["containerStatuses"][0]["restartCount"] == 0
        listed, allocatable = call_pod_resources(harness.root_dir)
        assert devices_by_pod(listed)["first"]["app"] == first_ids
        assert allocatable_ids(allocatable) == set()
    finally:
        if plugin.poll() is None:
            plugin.kill()
            plugin.wait()


def wait_for_seen(harness: Harness, name: str, count: int) -> set[str] | None:
    if harness.output(get_pod(harness.api, name)) is None:
        return None
    return wait_for(
        f"{name}'s container to report its devices",
        WAIT,
        lambda: seen_widgets(harness, name, count),
        harness.logs,
    )
