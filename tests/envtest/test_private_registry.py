"""Image pull credentials end to end: a registry that needs them, a real kube-apiserver, containerd and the
``kubelet-trio --kubeconfig`` daemon (a subprocess at ``-v 10``, as users run it).

Registry A (Debian's ``docker-registry`` with an htpasswd file: basic auth, plain HTTP on loopback) holds
busybox for user ``puller``; registry B holds it for another user whose credentials only a credential
provider plugin knows; an anonymous registry holds the pause image (containerd pulls the sandbox image
itself, without the kubelet's credentials). Every pod pulls (``imagePullPolicy: Always``). Through the API
server:

(a) a pod naming a ``kubernetes.io/dockerconfigjson`` pull secret runs;
(b) without a secret, or with a wrong password, the pod shows ``ErrImagePull`` with containerd's 401 as
    the runtime's error (an UNKNOWN status: its message alone, as Go's CRI client strips the code),
    then ``ImagePullBackOff`` with Go 1.33's ``Back-off pulling image "X": ErrImagePull: <that error>``,
    and a ``Failed`` event ``Failed to pull image "X": <that error>``;
(c) the namespace's ``default`` ServiceAccount lists the secret in ``imagePullSecrets``: the API server's
    ServiceAccount admission (kept on for this cluster) copies it into a pod that names none, which runs;
(d) the plugin (``--image-credential-provider-config``/``-bin-dir``) supplies registry B's credentials.

Last, the daemon's whole ``-v 10`` log holds none of the passwords, nor their base64 in any alignment.
Needs the envtest binaries (skipped with the build command otherwise) and the containerd tier.
"""

from __future__ import annotations

import base64
import json
import math
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import httpx
import pytest
import trio

from kubelet_trio.apimode import open_kubeconfig_client
from kubelet_trio.client import ApiClient
from kubelet_trio.testing.containerd import PrivateContainerd
from kubelet_trio.testing.env import missing_prerequisites, private_cgroup_root, remove_all_pods
from kubelet_trio.testing.envtest import EnvtestCluster, assets, skip_reason, start_envtest
from kubelet_trio.testing.images import build_image, busybox_layer, push_image
from kubelet_trio.testing.registry import LocalRegistry, write_htpasswd
from tests.credentialprovider.plugins import calls, config_yaml, provider, write_plugin

pytestmark = pytest.mark.containerd

NODE = "private-registry-node"
USER = "puller"
PASSWORD = "sentinel-" + secrets.token_hex(12)
WRONG_PASSWORD = "wrong-sentinel-" + secrets.token_hex(12)
PLUGIN_USER = "plugin-puller"
PLUGIN_PASSWORD = "plugin-sentinel-" + secrets.token_hex(12)
NODE_READY_TIMEOUT = 90.0
WAIT = 90.0


@attrs.frozen
class Setup:
    api: EnvtestCluster
    registry: str  # A: USER/PASSWORD
    image: str  # busybox on A
    plugin_image: str  # busybox on B, whose credentials come from the plugin
    plugin_dir: Path
    kubelet_log: Path

    def log_tail(self, chars: int = 4000) -> str:
        return self.kubelet_log.read_text(errors="replace")[-chars:]


def _node_ready(client: httpx.Client) -> bool:
    response = client.get(f"/api/v1/nodes/{NODE}")
    if response.status_code != 200:
        return False
    conditions = response.json().get("status", {}).get("conditions", ())
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


@pytest.fixture(scope="module")
def setup() -> Iterator[Setup]:
    directory = assets()
    if directory is None:
        pytest.skip(skip_reason("private registry"))
    missing = missing_prerequisites()
    if missing:
        pytest.skip("containerd tier unavailable: " + "; ".join(missing))
    work = Path(tempfile.mkdtemp(prefix="kubelet-trio-private-registry-"))
    a = LocalRegistry(work / "a", htpasswd=write_htpasswd(work / "a.htpasswd", {USER: PASSWORD}))
    b = LocalRegistry(
        work / "b", htpasswd=write_htpasswd(work / "b.htpasswd", {PLUGIN_USER: PLUGIN_PASSWORD})
    )
    public = LocalRegistry(work / "public")
    registries = (a, b, public)
    containerd: PrivateContainerd | None = None
    proc: subprocess.Popen[bytes] | None = None
    try:
        for registry in registries:
            registry.start()
        layer = busybox_layer()
        busybox = build_image(layer, cmd=["sh"])
        push_image(a.address, "private/busybox", "1", busybox, auth=(USER, PASSWORD))
        push_image(b.address, "plugin/busybox", "1", busybox, auth=(PLUGIN_USER, PLUGIN_PASSWORD))
        pause = push_image(
            public.address,
            "kubelet-trio/pause",
            "3.9",
            build_image(layer, entrypoint=["/bin/sleep", "2147483647"]),
        )
        containerd = PrivateContainerd(
            work / "containerd",
            sandbox_image=pause,
            registries=[r.address for r in registries],
            docker_io_mirror=False,
        )
        containerd.start()
        plugins = work / "plugins"
        write_plugin(
            plugins,
            "registry-b-credentials",
            f"""
            respond(cacheKeyType="Registry", cacheDuration="0s",
                    auth={{{b.address!r}: {{"username": {PLUGIN_USER!r}, "password": {PLUGIN_PASSWORD!r}}}}})
            """,
        )
        plugin_config = work / "credential-providers.yaml"
        plugin_config.write_text(config_yaml(provider("registry-b-credentials", [b.address])))
        with (
            start_envtest(directory, service_account_admission=True) as api,
            private_cgroup_root() as cgroups,
        ):
            log = work / "kubelet.log"
            command = [
                sys.executable, "-m", "kubelet_trio",
                "--kubeconfig", str(api.kubeconfig),
                "--container-runtime-endpoint", containerd.endpoint,
                "--hostname-override", NODE,
                "--root-dir", str(work / "root"),
                "--cgroup-root", cgroups,  # not the session's other daemons' /kubepods
                "--pod-logs-dir", str(work / "pods"),
                "--sync-frequency", "10s",
                "--healthz-port", "0", "--port", "0",
                "--image-credential-provider-config", str(plugin_config),
                "--image-credential-provider-bin-dir", str(plugins),
                "-v", "10",
            ]  # fmt: skip
            with log.open("wb") as out:  # the child keeps its own descriptor
                proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
            deadline = time.monotonic() + NODE_READY_TIMEOUT
            with api.http_client() as client:
                while not _node_ready(client):
                    if proc.poll() is not None or time.monotonic() > deadline:
                        tail = log.read_text(errors="replace")[-4000:]
                        raise RuntimeError(f"node {NODE} did not become Ready (exit {proc.poll()}):\n{tail}")
                    time.sleep(0.25)
            yield Setup(
                api,
                a.address,
                f"{a.address}/private/busybox:1",
                f"{b.address}/plugin/busybox:1",
                plugins,
                log,
            )
            trio.run(remove_all_pods, containerd.endpoint, NODE)
    finally:
        if proc is not None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if containerd is not None:
            if containerd.running:
                trio.run(remove_all_pods, containerd.endpoint)
            containerd.stop()
            containerd.kill_shims()
            containerd.unmount_all()
            containerd.release_network()
        for registry in registries:
            registry.stop()
        subprocess.run(["rm", "-rf", str(work)], check=False)


# -- helpers ----------------------------------------------------------------------------------------------


def dockerconfigjson(registry: str, user: str, password: str) -> str:
    auth = base64.b64encode(f"{user}:{password}".encode()).decode()
    return json.dumps({"auths": {registry: {"auth": auth}}})


async def namespace(client: ApiClient, name: str, *, sa_pull_secrets: tuple[str, ...] = ()) -> None:
    """A namespace and its ``default`` ServiceAccount (no controller creates it here; ServiceAccount
    admission refuses pods without it), with no token to mount (no kube-root-ca.crt publisher either)."""
    await client.create(
        "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    )
    await client.create(
        f"/api/v1/namespaces/{name}/serviceaccounts",
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": "default"},
            "automountServiceAccountToken": False,
            "imagePullSecrets": [{"name": s} for s in sa_pull_secrets],
        },
    )


async def pull_secret(client: ApiClient, ns: str, name: str, registry: str, password: str) -> str:
    """A ``kubernetes.io/dockerconfigjson`` Secret; returns its ``.dockerconfigjson`` as stored (base64)."""
    data = base64.b64encode(dockerconfigjson(registry, USER, password).encode()).decode()
    await client.create(
        f"/api/v1/namespaces/{ns}/secrets",
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": name},
            "type": "kubernetes.io/dockerconfigjson",
            "data": {".dockerconfigjson": data},
        },
    )
    return data


async def create_pod(
    client: ApiClient, ns: str, name: str, image: str, pull_secrets: tuple[str, ...] = ()
) -> Any:
    spec: dict[str, Any] = {
        "nodeName": NODE,
        "terminationGracePeriodSeconds": 1,
        # Always: every case pulls, whatever an earlier case left in containerd's store
        "containers": [
            {
                "name": "app",
                "image": image,
                "imagePullPolicy": "Always",
                "command": ["sh", "-c", "sleep 3600"],
            }
        ],
    }
    if pull_secrets:
        spec["imagePullSecrets"] = [{"name": s} for s in pull_secrets]
    return await client.create(
        f"/api/v1/namespaces/{ns}/pods",
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec},
    )


def waiting(pod: dict[str, Any]) -> dict[str, Any]:
    statuses = pod.get("status", {}).get("containerStatuses") or [{}]
    return dict(statuses[0].get("state", {}).get("waiting") or {})


def running(pod: dict[str, Any]) -> bool:
    statuses = pod.get("status", {}).get("containerStatuses") or [{}]
    return pod.get("status", {}).get("phase") == "Running" and "running" in statuses[0].get("state", {})


async def wait_pod(
    client: ApiClient, setup: Setup, ns: str, name: str, predicate: Callable[[dict[str, Any]], bool]
) -> dict[str, Any]:
    pod: dict[str, Any] = {}
    with trio.move_on_after(WAIT):
        while True:
            pod = await client.get(f"/api/v1/namespaces/{ns}/pods/{name}")
            if predicate(pod):
                return pod
            await trio.sleep(0.2)
    raise AssertionError(f"{ns}/{name}: {json.dumps(pod.get('status'))}\n{setup.log_tail()}")


# -- the cases --------------------------------------------------------------------------------------------


async def test_a_pod_with_its_pull_secret_runs(setup: Setup) -> None:
    async with open_kubeconfig_client(str(setup.api.kubeconfig)) as client:
        await namespace(client, "with-secret")
        await pull_secret(client, "with-secret", "regcred", setup.registry, PASSWORD)
        await create_pod(client, "with-secret", "app", setup.image, ("regcred",))
        await wait_pod(client, setup, "with-secret", "app", running)


async def test_without_the_secret_or_with_a_wrong_password_the_pull_fails_then_backs_off(
    setup: Setup,
) -> None:
    ns = "without-secret"
    async with open_kubeconfig_client(str(setup.api.kubeconfig)) as client:
        await namespace(client, ns)
        await pull_secret(client, ns, "wrong", setup.registry, WRONG_PASSWORD)
        seen: dict[str, dict[str, str]] = {}

        async def follow(name: str, pull_secrets: tuple[str, ...]) -> None:
            await create_pod(client, ns, name, setup.image, pull_secrets)
            reasons: dict[str, str] = {}

            def backed_off(pod: dict[str, Any]) -> bool:
                state = waiting(pod)
                if state.get("reason") in ("ErrImagePull", "ImagePullBackOff"):
                    reasons.setdefault(state["reason"], state.get("message", ""))
                return "ImagePullBackOff" in reasons

            await wait_pod(client, setup, ns, name, backed_off)
            seen[name] = reasons

        async with trio.open_nursery() as nursery:
            nursery.start_soon(follow, "no-secret", ())
            nursery.start_soon(follow, "wrong-password", ("wrong",))

        events = (await client.get(f"/api/v1/namespaces/{ns}/events"))["items"]
    for name, reasons in seen.items():
        error = reasons["ErrImagePull"]
        assert error.startswith(
            f'failed to pull and unpack image "{setup.image}": failed to resolve reference "{setup.image}": '
        )
        assert "401 Unauthorized" in error, error
        assert reasons["ImagePullBackOff"] == f'Back-off pulling image "{setup.image}": ErrImagePull: {error}'
        failed = [
            e["message"] for e in events if e["involvedObject"]["name"] == name and e["reason"] == "Failed"
        ]
        assert f'Failed to pull image "{setup.image}": {error}' in failed, failed


async def test_the_default_service_accounts_pull_secrets_are_admitted_into_the_pod(setup: Setup) -> None:
    ns = "service-account"
    async with open_kubeconfig_client(str(setup.api.kubeconfig)) as client:
        await namespace(client, ns, sa_pull_secrets=("regcred",))
        await pull_secret(client, ns, "regcred", setup.registry, PASSWORD)
        created = await create_pod(client, ns, "app", setup.image)
        assert created["spec"]["serviceAccountName"] == "default"
        assert created["spec"]["imagePullSecrets"] == [{"name": "regcred"}]  # ServiceAccount admission
        await wait_pod(client, setup, ns, "app", running)


async def test_a_credential_provider_plugin_supplies_the_second_registrys_credentials(setup: Setup) -> None:
    ns = "plugin"
    async with open_kubeconfig_client(str(setup.api.kubeconfig)) as client:
        await namespace(client, ns)
        await create_pod(client, ns, "app", setup.plugin_image)
        await wait_pod(client, setup, ns, "app", running)
    repository = setup.plugin_image.rsplit(":", 1)[0]  # the repository to pull, as Go asks the keyring
    assert [call["request"]["image"] for call in calls(setup.plugin_dir)] == [repository]


def base64_forms(secret: str) -> set[str]:
    """The characters of ``secret``'s base64 that do not depend on its neighbours, at each of the three
    alignments it can have inside a longer base64 text (a token, a docker config, a Secret's data)."""
    raw = secret.encode()
    forms = set()
    for offset in range(3):
        encoded = base64.b64encode(b"\0" * offset + raw).decode()
        start, end = math.ceil(8 * offset / 6), (8 * (offset + len(raw))) // 6
        forms.add(encoded[start:end])
    return forms


def test_the_daemons_v10_log_holds_no_password(setup: Setup) -> None:
    """Runs last: the log has every pull above in it (secrets fetched, plugin called, pulls failed)."""
    text = setup.kubelet_log.read_text(errors="replace")
    assert "registry-b-credentials" in text and "Back-off pulling image" in text
    for password in (PASSWORD, WRONG_PASSWORD, PLUGIN_PASSWORD):
        assert password not in text
        for form in base64_forms(password):
            assert form not in text, "a password's base64 is in the kubelet log"
    for user, password in ((USER, PASSWORD), (USER, WRONG_PASSWORD), (PLUGIN_USER, PLUGIN_PASSWORD)):
        assert base64.b64encode(f"{user}:{password}".encode()).decode() not in text
    for ns_secret in (dockerconfigjson(setup.registry, USER, PASSWORD),):
        assert base64.b64encode(ns_secret.encode()).decode()[:40] not in text
