"""Persistent storage end to end, with the real parts: containerd, a real kube-apiserver and
kube-controller-manager (PV binder, ephemeral-volume controller), the upstream hostpath CSI driver with its
node-driver-registrar and external-provisioner, and the ``kubelet-trio --kubeconfig`` daemon.

- A claim provisioned for this node: one pod writes a file, is deleted, the next pod on the claim reads it;
  after the last pod the driver has unpublished and unstaged the volume and nothing is left mounted.
- An inline ephemeral CSI volume and a generic ephemeral volume work and go with their pods.
- A local PV and a hostPath PV, bound by the controller, are mounted; ``subPath`` into a claim works.
- kill -9 of the kubelet with two claim pods running, one deleted meanwhile: after the restart the running
  pod is untouched (no unpublish, no second publish) and the deleted pod's volume is unpublished.

Needs the envtest binaries with kube-controller-manager and the CSI parts (``build-node-parts.sh``).
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import attrs
import httpx
import pytest
import trio

from kubelet_trio.apimode import open_kubeconfig_client
from kubelet_trio.client import ApiClient, NotFound
from kubelet_trio.testing.env import LocalCriEnvironment, private_cgroup_root, remove_all_pods
from kubelet_trio.testing.envtest import EnvtestCluster, assets, skip_reason, start_envtest
from kubelet_trio.testing.gokubelet import go_kubelet_command
from kubelet_trio.testing.registry import free_port
from tests.critest.conftest import find_binary
from tests.envtest.csi_parts import BUILD_HINT, DRIVER, HOSTPATH_CSI_DRIVER, print_logs, start, stop
from tests.envtest.test_envtest import poll

pytestmark = pytest.mark.containerd

NODE = "storage-node"
WAIT = 120.0


@attrs.frozen
class Storage:
    api: EnvtestCluster
    work: Path
    root: Path  # the kubelet's --root-dir
    logs: Path  # --pod-logs-dir
    busybox: str
    daemon: list[str]
    procs: dict[str, subprocess.Popen[bytes]]
    read_only_port: int  # /stats/summary and /metrics

    def hostpath_log(self) -> str:
        return (self.work / "hostpath.log").read_text(errors="replace")


def _binary(name: str) -> Path:
    found = find_binary(name)
    if found is None:
        if name == "kubelet-go":  # the Go kubelet 1.24 of the reference runs
            pytest.skip("kubelet-go missing: BUILD_ALL=1 bash ../shared/tools/build-envtest.sh <liteKube>")
        pytest.skip(f"{name} missing: {BUILD_HINT} (and kubernetes-csi/external-provisioner)")
    return found


def start_kubelet(storage: Storage) -> None:
    storage.procs["kubelet"] = start(storage.daemon, storage.work / f"kubelet-{time.monotonic_ns()}.log")


def wait_ready(storage: Storage) -> None:
    deadline = time.monotonic() + 90
    with storage.api.http_client() as client:
        while True:
            node = client.get(f"/api/v1/nodes/{NODE}")
            if node.status_code == 200 and any(
                c["type"] == "Ready" and c["status"] == "True"
                for c in node.json()["status"].get("conditions", ())
            ):
                return
            if storage.procs["kubelet"].poll() is not None or time.monotonic() > deadline:
                print_logs(storage.work)
                raise RuntimeError("the kubelet did not become Ready")
            time.sleep(0.25)


def go_kubelet(api: EnvtestCluster, work: Path, endpoint: str, root: Path, read_only_port: int) -> list[str]:
    """The Go kubelet 1.24 in kubelet-trio's place."""
    return go_kubelet_command(
        _binary("kubelet-go"),
        kubeconfig=api.kubeconfig,
        root_dir=root,
        cert_dir=work / "pki",
        node=NODE,
        endpoint=endpoint,
        port=free_port(),
        healthz_port=free_port(),
        read_only_port=read_only_port,
        extra=["--sync-frequency=10s", "--v=4"],
    )


@pytest.fixture(
    scope="module", params=["kubelet-trio", pytest.param("kubelet-go", marks=pytest.mark.reference)]
)
def storage(request: pytest.FixtureRequest, cri_env: LocalCriEnvironment) -> Iterator[Storage]:
    """The whole stack with kubelet-trio, or (the reference run) with the Go kubelet 1.24 in its place."""
    directory = assets()
    if directory is None:
        pytest.skip(skip_reason("storage"))
    controller_manager = Path(directory) / "kube-controller-manager"
    if not controller_manager.exists():
        pytest.skip("storage tier: no kube-controller-manager (BUILD_ALL=1 build-envtest.sh)")
    hostpath, registrar, provisioner = (
        _binary("hostpathplugin"), _binary("csi-node-driver-registrar"), _binary("csi-provisioner")
    )  # fmt: skip
    work = Path(tempfile.mkdtemp(prefix="kt-storage-"))
    root = work / "root"
    csi_sock = work / "csi" / "csi.sock"
    csi_sock.parent.mkdir(parents=True)
    procs: dict[str, subprocess.Popen[bytes]] = {}
    try:
        with start_envtest(directory) as api, private_cgroup_root() as cgroup_root:
            procs["controller-manager"] = start(
                [str(controller_manager), f"--kubeconfig={api.kubeconfig}", "--leader-elect=false",
                 "--secure-port=0", "--controllers=persistentvolume-binder,ephemeral-volume,attachdetach",
                 "--v=2"],
                work / "controller-manager.log",
            )  # fmt: skip
            procs["hostpath"] = start(
                [str(hostpath), f"--endpoint=unix://{csi_sock}", f"--nodeid={NODE}", f"--drivername={DRIVER}",
                 f"--statedir={work / 'hostpath-state'}", "--v=5"],
                work / "hostpath.log",
            )  # fmt: skip
            procs["provisioner"] = start(
                [str(provisioner), f"--csi-address={csi_sock}", f"--kubeconfig={api.kubeconfig}",
                 "--feature-gates=Topology=true", "--leader-election=false", "--v=5"],
                work / "provisioner.log",
            )  # fmt: skip
            go = request.param == "kubelet-go"
            read_only_port = free_port()
            daemon = go_kubelet(api, work, cri_env.endpoint, root, read_only_port) if go else [
                sys.executable, "-m", "kubelet_trio",
                "--kubeconfig", str(api.kubeconfig),
                "--container-runtime-endpoint", cri_env.endpoint,
                "--hostname-override", NODE,
                "--root-dir", str(root),
                "--cgroup-root", cgroup_root,  # not the session's other daemons' /kubepods
                "--pod-logs-dir", str(work / "pod-logs"),
                "--sync-frequency", "10s",
                "--healthz-port", "0", "--port", "0", "--read-only-port", str(read_only_port),
                "-v", "4",
            ]  # fmt: skip
            logs = (
                Path("/var/log/pods") if request.param == "kubelet-go" else work / "pod-logs"
            )  # Go 1.24: fixed
            storage = Storage(api, work, root, logs, cri_env.images.busybox, daemon, procs, read_only_port)
            start_kubelet(storage)
            wait_ready(storage)
            procs["registrar"] = start(
                [str(registrar), f"--csi-address={csi_sock}", f"--kubelet-registration-path={csi_sock}",
                 f"--plugin-registration-path={root / 'plugins_registry'}", "--v=5"],
                work / "registrar.log",
            )  # fmt: skip
            trio.run(_setup_objects, api)
            yield storage
            trio.run(remove_all_pods, cri_env.endpoint, NODE)
    except BaseException:
        print_logs(work)
        raise
    finally:
        for name in ("kubelet", "registrar", "provisioner", "hostpath", "controller-manager"):
            if name in procs:
                stop(procs[name])
        subprocess.run(["umount", "-R", "-q", str(work)], check=False)
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            point = line.split()[4]
            if point.startswith(str(work)):
                subprocess.run(["umount", "-l", point], check=False)
        subprocess.run(["rm", "-rf", str(work)], check=False)


async def _setup_objects(api: EnvtestCluster) -> None:
    async with open_kubeconfig_client(str(api.kubeconfig)) as client:
        with trio.fail_after(60):

            async def registered(c: ApiClient) -> bool:
                try:
                    csinode = await c.get(f"/apis/storage.k8s.io/v1/csinodes/{NODE}")
                except NotFound:
                    return False
                return any(d["name"] == DRIVER for d in csinode["spec"].get("drivers") or ())

            await poll(registered, client)
        await client.create("/apis/storage.k8s.io/v1/csidrivers", HOSTPATH_CSI_DRIVER)
        for name, mode in (("hostpath-wffc", "WaitForFirstConsumer"), ("hostpath", "Immediate")):
            await client.create(
                "/apis/storage.k8s.io/v1/storageclasses",
                {
                    "apiVersion": "storage.k8s.io/v1",
                    "kind": "StorageClass",
                    "metadata": {"name": name},
                    "provisioner": DRIVER,
                    "volumeBindingMode": mode,
                    "reclaimPolicy": "Delete",
                },
            )


# -- helpers ----------------------------------------------------------------------------------------------

PODS = "/api/v1/namespaces/default/pods"
CLAIMS = "/api/v1/namespaces/default/persistentvolumeclaims"


@contextlib.asynccontextmanager
async def api_client(storage: Storage) -> AsyncIterator[ApiClient]:
    async with open_kubeconfig_client(str(storage.api.kubeconfig)) as client:
        yield client


def claim(name: str, storage_class: str | None, *, volume_name: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Mi"}}}
    spec["storageClassName"] = storage_class if storage_class is not None else ""
    if volume_name:
        spec["volumeName"] = volume_name
    metadata: dict[str, Any] = {"name": name}
    if storage_class == "hostpath-wffc":  # no scheduler here: the node is chosen as it would have
        metadata["annotations"] = {"volume.kubernetes.io/selected-node": NODE}
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": metadata, "spec": spec}


def pod(
    storage: Storage,
    name: str,
    script: str,
    volume: dict[str, Any],
    *,
    sub_path: str | None = None,
    keep: bool = False,
) -> dict[str, Any]:
    mount: dict[str, Any] = {"name": "v", "mountPath": "/data"}
    if sub_path:
        mount["subPath"] = sub_path
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "nodeName": NODE,
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 1,
            "automountServiceAccountToken": False,
            "containers": [
                {
                    "name": "c",
                    "image": storage.busybox,
                    "command": ["sh", "-c", script + ("; sleep 3600" if keep else "")],
                    "volumeMounts": [mount],
                }
            ],
            "volumes": [{"name": "v", **volume}],
        },
    }


async def wait_phase(client: ApiClient, name: str, *phases: str) -> dict[str, Any]:
    result: dict[str, Any] = {}

    async def reached(c: ApiClient) -> bool:
        nonlocal result
        result = await c.get(f"{PODS}/{name}")
        return result.get("status", {}).get("phase") in phases

    with trio.fail_after(WAIT):
        await poll(reached, client)
    return result


async def delete_and_wait(client: ApiClient, path: str) -> None:
    with contextlib.suppress(NotFound):
        await client.delete(path)

    async def gone(c: ApiClient) -> bool:
        try:
            await c.get(path)
        except NotFound:
            return True
        return False

    with trio.fail_after(WAIT):
        await poll(gone, client)


def container_log(storage: Storage, name: str) -> str:
    logs = sorted(storage.logs.glob(f"default_{name}_*/c/*.log"))
    return "".join(p.read_text(errors="replace") for p in logs)


def mounted_under(path: Path) -> list[str]:
    points = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()]
    return [p for p in points if p.startswith(str(path) + "/")]


def volume_handle(pv: dict[str, Any]) -> str:
    return str(pv["spec"]["csi"]["volumeHandle"])


async def bound_pv(client: ApiClient, name: str) -> dict[str, Any]:
    async def bound(c: ApiClient) -> bool:
        return (await c.get(f"{CLAIMS}/{name}")).get("status", {}).get("phase") == "Bound"

    with trio.fail_after(WAIT):
        await poll(bound, client)
    volume = (await client.get(f"{CLAIMS}/{name}"))["spec"]["volumeName"]
    pv: dict[str, Any] = await client.get(f"/api/v1/persistentvolumes/{volume}")
    return pv


# -- scenarios ----------------------------------------------------------------------------------------------


async def test_a_claim_outlives_its_pods_and_is_unstaged_after_the_last(storage: Storage) -> None:
    async with api_client(storage) as client:
        await client.create(CLAIMS, claim("data", "hostpath-wffc"))
        await client.create(
            PODS,
            pod(storage, "writer", "echo kept > /data/f", {"persistentVolumeClaim": {"claimName": "data"}}),
        )
        await wait_phase(client, "writer", "Succeeded")
        handle = volume_handle(await bound_pv(client, "data"))
        await delete_and_wait(client, f"{PODS}/writer")
        await client.create(
            PODS, pod(storage, "reader", "cat /data/f", {"persistentVolumeClaim": {"claimName": "data"}})
        )
        await wait_phase(client, "reader", "Succeeded")
        assert "kept" in container_log(storage, "reader")
        await delete_and_wait(client, f"{PODS}/reader")
        log = storage.hostpath_log()
        assert log.count("NodePublishVolume") >= 2 and log.count("NodeUnpublishVolume") >= 2
        assert handle in log
        assert mounted_under(storage.root / "pods") == []
        assert mounted_under(storage.root / "plugins") == []


async def test_inline_and_generic_ephemeral_volumes_go_with_their_pods(storage: Storage) -> None:
    async with api_client(storage) as client:
        inline = {"csi": {"driver": DRIVER, "volumeAttributes": {"size": "1Mi"}}}
        await client.create(PODS, pod(storage, "inline", "echo in > /data/f && cat /data/f", inline))
        generic = {
            "ephemeral": {
                "volumeClaimTemplate": {
                    "spec": {
                        "accessModes": ["ReadWriteOnce"],
                        "storageClassName": "hostpath",
                        "resources": {"requests": {"storage": "1Mi"}},
                    }
                }
            }
        }
        await client.create(PODS, pod(storage, "generic", "echo gen > /data/f && cat /data/f", generic))
        await wait_phase(client, "inline", "Succeeded")
        await wait_phase(client, "generic", "Succeeded")
        assert "in" in container_log(storage, "inline")
        assert "gen" in container_log(storage, "generic")
        await client.get(f"{CLAIMS}/generic-v")  # the controller's claim, owned by the pod
        await delete_and_wait(client, f"{PODS}/inline")
        await delete_and_wait(client, f"{PODS}/generic")
        assert mounted_under(storage.root / "pods") == []


async def test_local_and_host_path_volumes_and_sub_path(storage: Storage) -> None:
    local, host = storage.work / "local-disk", storage.work / "host-dir"
    local.mkdir()
    host.mkdir()
    async with api_client(storage) as client:
        affinity = {
            "required": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": "kubernetes.io/hostname", "operator": "In", "values": [NODE]}
                        ]
                    }
                ]
            }
        }
        for name, source in (("pv-local", {"local": {"path": str(local)}, "nodeAffinity": affinity}),
                             ("pv-host", {"hostPath": {"path": str(host)}})):  # fmt: skip
            await client.create(
                "/api/v1/persistentvolumes",
                {
                    "apiVersion": "v1",
                    "kind": "PersistentVolume",
                    "metadata": {"name": name},
                    "spec": {
                        "capacity": {"storage": "1Mi"},
                        "accessModes": ["ReadWriteOnce"],
                        "storageClassName": "",
                        **source,
                    },
                },
            )
        await client.create(CLAIMS, claim("local", None, volume_name="pv-local"))
        await client.create(CLAIMS, claim("host", None, volume_name="pv-host"))
        await client.create(
            PODS,
            pod(
                storage,
                "local",
                "echo loc > /data/f",
                {"persistentVolumeClaim": {"claimName": "local"}},
                sub_path="sub",
            ),
        )
        await client.create(
            PODS, pod(storage, "host", "echo hst > /data/f", {"persistentVolumeClaim": {"claimName": "host"}})
        )
        await wait_phase(client, "local", "Succeeded")
        await wait_phase(client, "host", "Succeeded")
        assert (local / "sub" / "f").read_text() == "loc\n"
        assert (host / "f").read_text() == "hst\n"
        await delete_and_wait(client, f"{PODS}/local")
        await delete_and_wait(client, f"{PODS}/host")


async def test_kill_9_and_restart_adopts_mounted_volumes(storage: Storage) -> None:
    async with api_client(storage) as client:
        for name in ("keep", "gone"):
            await client.create(CLAIMS, claim(f"claim-{name}", "hostpath-wffc"))
            await client.create(
                PODS,
                pod(
                    storage,
                    name,
                    "echo up",
                    {"persistentVolumeClaim": {"claimName": f"claim-{name}"}},
                    keep=True,
                ),
            )
        for name in ("keep", "gone"):
            await wait_phase(client, name, "Running")
        keep_handle = volume_handle(await bound_pv(client, "claim-keep"))
        gone_handle = volume_handle(await bound_pv(client, "claim-gone"))
        before = (await client.get(f"{PODS}/keep"))["status"]["containerStatuses"][0]["containerID"]

        storage.procs["kubelet"].send_signal(signal.SIGKILL)
        storage.procs["kubelet"].wait()
        await client.delete(f"{PODS}/gone", grace_period_seconds=0)  # deleted while the kubelet is down
        mark = len(storage.hostpath_log())
        start_kubelet(storage)
        await trio.to_thread.run_sync(wait_ready, storage)

        async def cleaned(_: ApiClient) -> bool:
            after = storage.hostpath_log()[mark:]
            return "NodeUnpublishVolume" in after and gone_handle in after

        with trio.fail_after(WAIT):
            await poll(cleaned, client)
        after = storage.hostpath_log()[mark:]
        published_again = [
            line for line in after.splitlines() if "NodePublishVolume" in line and keep_handle in line
        ]
        assert published_again == []
        unpublished_keep = [
            line for line in after.splitlines() if "NodeUnpublishVolume" in line and keep_handle in line
        ]
        assert unpublished_keep == []
        status = await client.get(f"{PODS}/keep")
        assert status["status"]["phase"] == "Running"
        assert status["status"]["containerStatuses"][0]["containerID"] == before
        pv = (await client.get(f"{CLAIMS}/claim-keep"))["spec"]["volumeName"]  # Go names the directory so
        target = storage.root / f"pods/{status['metadata']['uid']}/volumes/kubernetes.io~csi/{pv}/mount"
        assert str(target) in mounted_under(storage.root / "pods")
        await delete_and_wait(client, f"{PODS}/keep")


async def test_claim_volume_stats_in_the_summary_and_metrics(storage: Storage) -> None:
    """The driver's figures for a claim-backed volume: ``pvcRef`` in ``/stats/summary`` and
    ``kubelet_volume_stats_*`` labelled by namespace and claim on ``/metrics``."""
    base = f"http://127.0.0.1:{storage.read_only_port}"
    async with api_client(storage) as client, httpx.AsyncClient(base_url=base) as http:
        await client.create(CLAIMS, claim("measured", "hostpath-wffc"))
        volume = {"persistentVolumeClaim": {"claimName": "measured"}}
        await client.create(PODS, pod(storage, "measured", "echo up", volume, keep=True))
        uid = (await wait_phase(client, "measured", "Running"))["metadata"]["uid"]
        found: dict[str, Any] = {}

        async def in_summary(_: ApiClient) -> bool:
            nonlocal found
            summary = (await http.get("/stats/summary")).json()
            pods = [p for p in summary.get("pods", ()) if p["podRef"]["uid"] == uid]
            claims = [v for p in pods for v in p.get("volume") or () if "pvcRef" in v]
            found = claims[0] if claims else {}
            return bool(claims)

        async def in_metrics(_: ApiClient) -> bool:
            text = (await http.get("/metrics")).text
            return (
                'kubelet_volume_stats_capacity_bytes{namespace="default",persistentvolumeclaim="measured"}'
                in text
            )

        with trio.fail_after(WAIT):
            await poll(in_summary, client)
            await poll(in_metrics, client)
        assert found["pvcRef"] == {"name": "measured", "namespace": "default"}
        assert found["capacityBytes"] > 0 and found["availableBytes"] <= found["capacityBytes"]
        await delete_and_wait(client, f"{PODS}/measured")
