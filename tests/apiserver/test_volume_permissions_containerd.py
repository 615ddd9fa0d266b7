"""Secret, projected (service account token), configMap and downwardAPI volumes on real containerd
behind the fake API server: another local user cannot read a pod's files on the host, while the pod
itself - run as root, or as a non-root user that reads through its fsGroup - still reads them.

The node's ``--root-dir`` does not exist before it starts and sits in a directory everyone may walk
through, so only the kubelet's own modes (Go's: 0750 directories above every volume) keep uid 65534 out.
A control file next to it shows that uid 65534 does read what is open to it.
"""

from __future__ import annotations

import base64
import contextlib
import os
import shutil
import stat
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from kubelet_trio.testing.env import LocalCriEnvironment
from kubelet_trio.testing.fakeapi import FakeApi
from kubelet_trio.volumemanager.mounter import unmount_all_under
from tests.apiserver.harness import node_ready, open_containerd_api_node
from tests.apiserver.pod_status import running
from tests.apiserver.test_objects_containerd import pod_log, wait_for_log

pytestmark = pytest.mark.containerd

NODE = "ctr-perm-node"
NOBODY = 65534
USER, GROUP, FS_GROUP = 1000, 3000, 2000
NON_ROOT = {"runAsUser": USER, "runAsGroup": GROUP, "fsGroup": FS_GROUP}
DONE = "all files tried"  # no token, certificate or value read here contains it
# Prints the uid and its groups, then the first line of each file (or that it was denied), then DONE.
READ = (
    'echo "uid=$(id -u) groups=$(id -G)"; '
    'for f in "$@"; do if v=$(head -n1 "$f" 2>&1); then echo "read $f=$v"; else echo "denied $f"; fi; done; '
    "echo all files tried; sleep 3600"
)
PLUGINS = {
    "secret": "kubernetes.io~secret",
    "projected": "kubernetes.io~projected",
    "configMap": "kubernetes.io~configmap",
    "downwardAPI": "kubernetes.io~downward-api",
}


@contextlib.contextmanager
def open_base() -> Iterator[Path]:
    """A directory every user may walk into (mode 0755), removed with any mount left below it."""
    base = Path(tempfile.mkdtemp(prefix="kt-perm-"))
    try:
        os.chmod(base, 0o755)
        yield base
    finally:
        unmount_all_under(str(base))
        shutil.rmtree(base, ignore_errors=True)


@contextlib.asynccontextmanager
async def open_node(cri_env: LocalCriEnvironment, tmp_path: Path) -> AsyncIterator[tuple[FakeApi, Any, Path]]:
    with open_base() as base:
        root = base / "kt"  # not there yet: the kubelet makes it
        control = base / "control"
        control.write_text("open to all\n")
        os.chmod(control, 0o644)
        async with open_containerd_api_node(cri_env, tmp_path, NODE, root_dir=str(root)) as (
            api,
            _c,
            _r,
            node,
        ):
            await api.wait_for(lambda: node_ready(api, NODE))
            assert await as_nobody(str(control)) == (0, "open to all\n")  # setpriv works, the base is open
            yield api, node, root


async def as_nobody(path: str) -> tuple[int, str]:
    """``cat path`` as uid/gid 65534 without supplementary groups: (exit status, stdout or stderr)."""
    result = await trio.run_process(
        ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "cat", path],
        check=False,
        capture_stdout=True,
        capture_stderr=True,
    )
    return result.returncode, (result.stdout if result.returncode == 0 else result.stderr).decode()


def reader(
    name: str, image: str, volume: dict[str, Any], files: list[str], **security: Any
) -> dict[str, Any]:
    """A pod mounting ``volume`` at /v and printing the first line of each of ``files`` (under /v)."""
    spec: dict[str, Any] = {
        "nodeName": NODE,
        "terminationGracePeriodSeconds": 1,
        "volumes": [volume],
        "containers": [
            {
                "name": "app",
                "image": image,
                "command": ["sh", "-c", READ, "sh", *(f"/v/{f}" for f in files)],
                "volumeMounts": [{"name": volume["name"], "mountPath": "/v", "readOnly": True}],
            }
        ],
    }
    if security:
        spec["securityContext"] = security
    return {"metadata": {"name": name}, "spec": spec}


async def read_in_pod(api: FakeApi, node: Any, name: str) -> dict[str, str]:
    """What the pod printed: ``{"uid": ..., "groups": ..., "/v/<file>": first line or "denied"}``."""
    await api.wait_for(lambda: running(api, name))
    logs_dir = node.kubelet.config.pod_logs_dir
    await wait_for_log(logs_dir, DONE, name)
    lines = [
        line.split(" ", 3)[-1]
        for line in (await trio.to_thread.run_sync(pod_log, logs_dir, name)).splitlines()
    ]
    seen: dict[str, str] = {}
    for line in lines:
        if line.startswith("uid="):
            uid, _, groups = line.partition(" groups=")
            seen["uid"], seen["groups"] = uid.removeprefix("uid="), groups
        elif line.startswith("read "):
            path, _, value = line.removeprefix("read ").partition("=")
            seen[path] = value
        elif line.startswith("denied "):
            seen[line.removeprefix("denied ")] = "denied"
    return seen


def mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


async def check_host(
    api: FakeApi,
    root: Path,
    name: str,
    kind: str,
    volume: str,
    files: dict[str, int],
    *,
    fs_group: bool = False,
) -> None:
    """On the host: every directory from ``root`` down to the plugin's is 0750; the volume root is what Go
    leaves (tmpfs 1777 or 0777 on disk, plus setgid and the group with an fsGroup); each file has the mode
    asked for; and uid 65534 is refused each one."""
    uid = api.pod(name)["metadata"]["uid"]
    plugin_dir = root / "pods" / uid / "volumes" / PLUGINS[kind]
    for directory in (
        root,
        root / "pods",
        root / "plugins",
        root / "pods" / uid,
        plugin_dir.parent,
        plugin_dir,
    ):
        assert mode(directory) == 0o750, directory
    volume_root = plugin_dir / volume
    expected_root = 0o777 if kind == "configMap" else 0o1777
    if fs_group:
        expected_root |= stat.S_ISGID
        assert os.stat(volume_root).st_gid == FS_GROUP
    assert mode(volume_root) == expected_root
    for file, file_mode in files.items():
        path = volume_root / file
        assert path.is_file() and mode(path) == file_mode, (file, oct(mode(path)))
        status, output = await as_nobody(str(path))
        assert status != 0 and "Permission denied" in output, (path, status, output)


async def test_secret_volume(cri_env: LocalCriEnvironment, tmp_path: Path) -> None:
    with trio.fail_after(120):
        async with open_node(cri_env, tmp_path) as (api, node, root):
            password = base64.b64encode(b"hunter2").decode()
            api.store.create(
                "secrets", "default", {"metadata": {"name": "creds"}, "data": {"password": password}}
            )
            image = cri_env.images.busybox
            as_root = {"name": "creds", "secret": {"secretName": "creds"}}
            group_only = {"name": "creds", "secret": {"secretName": "creds", "defaultMode": 0o440}}
            api.create_pod(reader("root-reader", image, as_root, ["password"]))
            api.create_pod(reader("user-reader", image, group_only, ["password"], **NON_ROOT))

            seen = await read_in_pod(api, node, "root-reader")
            assert (seen["uid"], seen["/v/password"]) == ("0", "hunter2")
            seen = await read_in_pod(api, node, "user-reader")
            assert (seen["uid"], seen["/v/password"]) == (str(USER), "hunter2")  # through the fsGroup
            assert seen["groups"].split() == [str(GROUP), str(FS_GROUP)]

            await check_host(api, root, "root-reader", "secret", "creds", {"password": 0o644})
            await check_host(api, root, "user-reader", "secret", "creds", {"password": 0o440}, fs_group=True)


KUBE_API_ACCESS = {
    "name": "kube-api-access",
    "projected": {  # what the ServiceAccount admission plugin adds to every pod
        "defaultMode": 0o644,
        "sources": [
            {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}},
            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
            {
                "downwardAPI": {
                    "items": [{"path": "namespace", "fieldRef": {"fieldPath": "metadata.namespace"}}]
                }
            },
        ],
    },
}


async def test_projected_service_account_token(cri_env: LocalCriEnvironment, tmp_path: Path) -> None:
    with trio.fail_after(120):
        async with open_node(cri_env, tmp_path) as (api, node, root):
            api.seed_namespace("default")
            image = cri_env.images.busybox
            files = ["token", "ca.crt", "namespace"]
            api.create_pod(reader("root-reader", image, KUBE_API_ACCESS, files))
            api.create_pod(reader("user-reader", image, KUBE_API_ACCESS, files, **NON_ROOT))
            await api.wait_for(lambda: len(api.app.issuer.issued) >= 2)
            tokens = {answer["status"]["token"] for answer in api.app.issuer.issued}

            for name, uid in (("root-reader", "0"), ("user-reader", str(USER))):
                seen = await read_in_pod(api, node, name)
                assert (seen["uid"], seen["/v/namespace"]) == (uid, "default")
                assert seen["/v/token"] in tokens
                assert seen["/v/ca.crt"] == "-----BEGIN CERTIFICATE-----"

            # The default mode for a root pod; for a non-root one the pod's user (Go's FsUser) and, with
            # an fsGroup, its group (0600 widened by the fsGroup walk, as in Go).
            await check_host(
                api,
                root,
                "root-reader",
                "projected",
                "kube-api-access",
                {"token": 0o644, "ca.crt": 0o644, "namespace": 0o644},
            )
            await check_host(
                api,
                root,
                "user-reader",
                "projected",
                "kube-api-access",
                {"token": 0o640, "ca.crt": 0o644, "namespace": 0o644},
                fs_group=True,
            )
            uid = api.pod("user-reader")["metadata"]["uid"]
            token = root / "pods" / uid / "volumes" / PLUGINS["projected"] / "kube-api-access" / "token"
            assert os.stat(token).st_uid == USER


async def test_config_map_volume(cri_env: LocalCriEnvironment, tmp_path: Path) -> None:
    with trio.fail_after(120):
        async with open_node(cri_env, tmp_path) as (api, node, root):
            api.store.create(
                "configmaps", "default", {"metadata": {"name": "settings"}, "data": {"mode": "fast"}}
            )
            image = cri_env.images.busybox
            as_root = {"name": "cfg", "configMap": {"name": "settings"}}
            owner_only = {"name": "cfg", "configMap": {"name": "settings", "defaultMode": 0o400}}
            api.create_pod(reader("root-reader", image, as_root, ["mode"]))
            api.create_pod(reader("user-reader", image, owner_only, ["mode"], **NON_ROOT))

            seen = await read_in_pod(api, node, "root-reader")
            assert (seen["uid"], seen["/v/mode"]) == ("0", "fast")
            seen = await read_in_pod(api, node, "user-reader")
            assert (seen["uid"], seen["/v/mode"]) == (str(USER), "fast")  # 0400 widened to 0440 by fsGroup

            await check_host(api, root, "root-reader", "configMap", "cfg", {"mode": 0o644})
            await check_host(api, root, "user-reader", "configMap", "cfg", {"mode": 0o440}, fs_group=True)


async def test_downward_api_volume(cri_env: LocalCriEnvironment, tmp_path: Path) -> None:
    with trio.fail_after(120):
        async with open_node(cri_env, tmp_path) as (api, node, root):
            image = cri_env.images.busybox
            items = [
                {"path": "name", "fieldRef": {"fieldPath": "metadata.name"}},
                {"path": "sub/uid", "fieldRef": {"fieldPath": "metadata.uid"}, "mode": 0o400},
            ]
            info = {"name": "info", "downwardAPI": {"items": items}}
            api.create_pod(reader("root-reader", image, info, ["name", "sub/uid"]))
            api.create_pod(reader("user-reader", image, info, ["name", "sub/uid"], **NON_ROOT))

            for name, uid in (("root-reader", "0"), ("user-reader", str(USER))):
                seen = await read_in_pod(api, node, name)
                pod_uid = api.pod(name)["metadata"]["uid"]
                assert (seen["uid"], seen["/v/name"], seen["/v/sub/uid"]) == (uid, name, pod_uid)

            await check_host(
                api, root, "root-reader", "downwardAPI", "info", {"name": 0o644, "sub/uid": 0o400}
            )
            await check_host(
                api,
                root,
                "user-reader",
                "downwardAPI",
                "info",
                {"name": 0o644, "sub/uid": 0o440},
                fs_group=True,
            )
