"""Volume plugins and the volume manager on the local filesystem (Go: atomic_writer_test.go,
host_path_test.go, empty_dir_test.go, downwardapi_test.go)."""

from __future__ import annotations

import errno
import os
import socket
import stat
from pathlib import Path
from typing import Any

import attrs
import pytest

from kubelet_trio.api import HostPathVolumeSource, Pod, default_pod
from kubelet_trio.cm.allocatable import NodeAllocatable
from kubelet_trio.fsio import run_inline
from kubelet_trio.objects import ConfigMap, Secret
from kubelet_trio.volumemanager import AtomicWriter, FileProjection, MountError, VolumeManager
from kubelet_trio.volumemanager.atomic_writer import PayloadError
from kubelet_trio.volumemanager.hostpath import check_host_path
from kubelet_trio.volumemanager.mounter import is_mount_point, mount_points_under


def test_atomic_writer_swaps_data_dir(tmp_path: Path) -> None:
    writer = AtomicWriter(str(tmp_path))
    assert writer.write({"labels": FileProjection(b"a=1"), "sub/name": FileProjection(b"web", 0o600)})
    first = os.readlink(tmp_path / "..data")
    assert first.startswith("..") and (tmp_path / first).is_dir()
    assert os.readlink(tmp_path / "labels") == "..data/labels"
    assert os.readlink(tmp_path / "sub") == "..data/sub"
    assert (tmp_path / "labels").read_text() == "a=1"
    assert stat.S_IMODE(os.stat(tmp_path / "sub/name").st_mode) == 0o600
    assert not writer.write({"labels": FileProjection(b"a=1"), "sub/name": FileProjection(b"web", 0o600)})
    assert os.readlink(tmp_path / "..data") == first  # unchanged payload: nothing written
    assert writer.write({"labels": FileProjection(b"a=2")})
    second = os.readlink(tmp_path / "..data")
    assert second != first and not (tmp_path / first).exists()
    assert (tmp_path / "labels").read_text() == "a=2"
    assert not os.path.lexists(tmp_path / "sub")  # gone from the payload: removed
    with pytest.raises(PayloadError):
        writer.write({"../escape": FileProjection(b"")})
    with pytest.raises(PayloadError):
        writer.write({"..hidden": FileProjection(b"")})


def test_host_path_types(tmp_path: Path) -> None:
    def check(path: Path | str, kind: str) -> str:
        return check_host_path(HostPathVolumeSource(path=str(path), type=kind))

    directory, file = tmp_path / "dir", tmp_path / "file"
    directory.mkdir()
    file.write_text("x")
    assert check(directory, "Directory") == str(directory)
    assert check(tmp_path / "any", "") == str(tmp_path / "any")  # no type: no check
    with pytest.raises(ValueError, match=f"hostPath type check failed: {file} is not a directory"):
        check(file, "Directory")
    with pytest.raises(ValueError, match="is not a directory"):
        check(tmp_path / "missing", "Directory")
    check(tmp_path / "new/deep", "DirectoryOrCreate")
    assert stat.S_IMODE(os.stat(tmp_path / "new/deep").st_mode) == 0o755
    assert check(file, "File") == str(file)
    with pytest.raises(ValueError, match="is not a file"):
        check(directory, "File")
    check(tmp_path / "created", "FileOrCreate")
    assert (tmp_path / "created").is_file()
    with pytest.raises(ValueError, match="No such file or directory"):
        check(tmp_path / "nodir/file", "FileOrCreate")  # parents are not created
    with pytest.raises(ValueError, match="is not a file"):
        check(directory, "FileOrCreate")
    assert check("/dev/null", "CharDevice") == "/dev/null"
    with pytest.raises(ValueError, match="is not a character device"):
        check(file, "CharDevice")
    with pytest.raises(ValueError, match="is not a block device"):
        check("/dev/null", "BlockDevice")
    sock_path = tmp_path / "s.sock"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(sock_path))
        assert check(sock_path, "Socket") == str(sock_path)
    with pytest.raises(ValueError, match="is not a socket file"):
        check(file, "Socket")
    with pytest.raises(ValueError, match="is an invalid volume type"):
        check(file, "Pipe")


def exists(path: str) -> bool:
    return os.path.exists(path)


def pod(volumes: list[dict[str, Any]], *, mounts: list[str] | None = None, **extra: Any) -> Pod:
    names = mounts if mounts is not None else [v["name"] for v in volumes]
    spec = {
        "containers": [
            {
                "name": "app",
                "image": "busybox",
                "resources": {"limits": {"memory": "64Mi", "cpu": "1"}},
                "volumeMounts": [{"name": n, "mountPath": f"/v/{n}"} for n in names],
            }
        ],
        "volumes": volumes,
        **extra.pop("spec", {}),
    }
    meta = {
        "name": "web",
        "namespace": "ns",
        "uid": "uid-1",
        "labels": {"app": "web"},
        **extra.pop("metadata", {}),
    }
    return default_pod(Pod.from_dict({"metadata": meta, "spec": spec}))


@attrs.define
class FakeMounter:
    mounted: dict[str, int | None] = attrs.Factory(dict)
    fail: bool = False

    def mount_tmpfs(self, path: str, size_bytes: int | None) -> None:
        if self.fail:
            raise PermissionError(errno.EPERM, "Operation not permitted")
        self.mounted[path] = size_bytes

    def unmount(self, path: str) -> None:
        self.mounted.pop(path)

    def is_mount_point(self, path: str) -> bool:
        return path in self.mounted


@attrs.define
class Store:
    def get_config_map(self, namespace: str, name: str) -> ConfigMap | None:
        return ConfigMap(namespace, name, {"a": "1", "b": "2"}) if name == "cfg" else None

    def get_secret(self, namespace: str, name: str) -> Secret | None:
        return Secret(namespace, name, {"token": b"s3cr3t"}) if name == "sec" else None


def manager(tmp_path: Path, **kwargs: Any) -> VolumeManager:
    kwargs.setdefault("memory_backed", False)
    return VolumeManager(
        root_dir=str(tmp_path),
        run_sync=run_inline,
        allocatable=NodeAllocatable(milli_cpu=2000, memory=2**30),
        **kwargs,
    )


async def test_mount_and_unmount(tmp_path: Path) -> None:
    mounter = FakeMounter()
    volumes = manager(tmp_path, mounter=mounter, objects=Store(), memory_backed=True)
    p = pod(
        [
            {"name": "scratch", "emptyDir": {}},
            {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Mi"}},
            {"name": "shm2", "emptyDir": {"medium": "Memory"}},
            {
                "name": "info",
                "downwardAPI": {
                    "items": [
                        {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
                        {
                            "path": "mem",
                            "resourceFieldRef": {
                                "containerName": "app",
                                "resource": "limits.memory",
                                "divisor": "1Mi",
                            },
                        },
                        {
                            "path": "cpu",
                            "resourceFieldRef": {
                                "containerName": "app",
                                "resource": "requests.cpu",
                                "divisor": "1m",
                            },
                            "mode": 0o400,
                        },
                    ]
                },
            },
            {"name": "cfg", "configMap": {"name": "cfg", "items": [{"key": "a", "path": "conf/a.txt"}]}},
            {"name": "sec", "secret": {"secretName": "sec", "defaultMode": 0o400}},
            {
                "name": "proj",
                "projected": {
                    "sources": [
                        {"configMap": {"name": "cfg"}},
                        {
                            "downwardAPI": {
                                "items": [{"path": "name", "fieldRef": {"fieldPath": "metadata.name"}}]
                            }
                        },
                    ]
                },
            },
            {"name": "unused", "emptyDir": {}},
        ],
        mounts=["scratch", "shm", "shm2", "info", "cfg", "sec", "proj"],
    )
    mounted = await volumes.mount_pod(p)
    assert set(mounted) == {"scratch", "shm", "shm2", "info", "cfg", "sec", "proj"}  # "unused": not set up
    volumes_dir = tmp_path / "pods/uid-1/volumes"
    scratch = volumes_dir / "kubernetes.io~empty-dir/scratch"
    assert mounted["scratch"].host_path == str(scratch)
    assert stat.S_IMODE(os.stat(scratch).st_mode) == 0o777
    pod_limit = 64 * 2**20  # tmpfs sizes: sizeLimit, else the pod's memory limit
    assert mounter.mounted == {
        mounted["shm"].host_path: 16 * 2**20,
        mounted["shm2"].host_path: pod_limit,
        # secret, downwardAPI and projected volumes are memory-backed; configMap volumes are not (Go)
        mounted["info"].host_path: pod_limit,
        mounted["sec"].host_path: pod_limit,
        mounted["proj"].host_path: pod_limit,
    }
    info = Path(mounted["info"].host_path)
    assert mounted["info"].read_only
    assert (info / "labels").read_text() == 'app="web"'
    assert (info / "mem").read_text() == "64"
    assert (info / "cpu").read_text() == "1000"
    assert stat.S_IMODE(os.stat(info / "cpu").st_mode) == 0o400
    assert (Path(mounted["cfg"].host_path) / "conf/a.txt").read_text() == "1"
    assert not (Path(mounted["cfg"].host_path) / "b").exists()
    assert (Path(mounted["sec"].host_path) / "token").read_bytes() == b"s3cr3t"
    projected = Path(mounted["proj"].host_path)
    assert set(os.listdir(projected)) == {"..data", os.readlink(projected / "..data"), "a", "b", "name"}

    relabeled = attrs.evolve(p, metadata=attrs.evolve(p.metadata, labels={"app": "web", "v": "2"}))
    await volumes.mount_pod(relabeled)
    assert (info / "labels").read_text() == 'app="web"\nv="2"'

    await volumes.unmount_pod("uid-1")
    assert mounter.mounted == {}
    assert not volumes_dir.exists()
    assert volumes.mounted_volumes("uid-1") == {}


async def test_mount_failures_name_the_volumes(tmp_path: Path) -> None:
    events: list[tuple[str, str]] = []
    volumes = manager(
        tmp_path,
        mounter=FakeMounter(fail=True),
        events=lambda pod, t, reason, message: events.append((reason, message)),
    )
    p = pod(
        [
            {"name": "ok", "emptyDir": {}},
            {"name": "host", "hostPath": {"path": str(tmp_path / "missing"), "type": "Directory"}},
            {"name": "mem", "emptyDir": {"medium": "Memory"}},
            {"name": "cm", "configMap": {"name": "nope"}},
            {"name": "cm-optional", "configMap": {"name": "nope", "optional": True}},
            {"name": "pvc", "persistentVolumeClaim": {"claimName": "data"}},
        ]
    )
    with pytest.raises(MountError) as caught:
        await volumes.mount_pod(p)
    assert str(caught.value).startswith("unmounted volumes=[cm host mem pvc]")
    messages = dict((m.split('"')[1], m) for _, m in events)
    assert [r for r, _ in events] == ["FailedMount"] * 4
    assert messages["host"] == (
        'MountVolume.SetUp failed for volume "host" : '
        f"hostPath type check failed: {tmp_path / 'missing'} is not a directory"
    )
    assert "the kubelet must run as root" in messages["mem"]
    assert messages["cm"].endswith('configmap "nope" not found')
    assert messages["pvc"].endswith("volume type persistentVolumeClaim is not supported by this kubelet")
    assert set(volumes.mounted_volumes("uid-1")) == {"ok", "cm-optional"}


async def test_fs_group_ownership(tmp_path: Path) -> None:
    volumes = manager(tmp_path)
    p = pod(
        [
            {"name": "data", "emptyDir": {}},
            {
                "name": "info",
                "downwardAPI": {"items": [{"path": "n", "fieldRef": {"fieldPath": "metadata.name"}}]},
            },
        ],
        spec={"securityContext": {"fsGroup": 4242}},
    )
    mounted = await volumes.mount_pod(p)
    data = os.stat(mounted["data"].host_path)
    assert data.st_gid == 4242 and data.st_mode & stat.S_ISGID
    info_file = os.stat(Path(mounted["info"].host_path) / "n")
    assert info_file.st_gid == 4242 and stat.S_IMODE(info_file.st_mode) & 0o040


async def test_orphaned_pod_dirs_are_removed(tmp_path: Path) -> None:
    volumes = manager(tmp_path)
    for uid in ("keep", "gone"):
        await volumes.mount_pod(pod([{"name": "d", "emptyDir": {}}], metadata={"uid": uid}))
    assert await volumes.cleanup_orphaned_pod_dirs({"keep"}) == ["gone"]
    assert sorted(os.listdir(tmp_path / "pods")) == ["keep"]


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting tmpfs needs root")
async def test_memory_medium_is_a_real_tmpfs(tmp_path: Path) -> None:
    volumes = manager(tmp_path)
    p = pod([{"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "8Mi"}}])
    mounted = await volumes.mount_pod(p)
    path = mounted["shm"].host_path
    try:
        assert is_mount_point(path)
        fs = os.statvfs(path)
        assert fs.f_blocks * fs.f_frsize == 8 * 2**20
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o1777  # the tmpfs root, as Go leaves it
    finally:
        await volumes.unmount_pod("uid-1")
    assert not is_mount_point(path) and not exists(path)


KUBE_API_ACCESS = {
    "name": "kube-api-access",
    "projected": {
        "defaultMode": 0o644,
        "sources": [
            {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}},
            {"configMap": {"name": "cfg", "items": [{"key": "a", "path": "ca.crt"}]}},
            {
                "downwardAPI": {
                    "items": [{"path": "namespace", "fieldRef": {"fieldPath": "metadata.namespace"}}]
                }
            },
            {"serviceAccountToken": {"path": "vault-token", "audience": "vault"}},
        ],
    },
}


@attrs.define
class Tokens:
    asked: list[Any] = attrs.Factory(list)
    deleted: list[str] = attrs.Factory(list)

    async def get_service_account_token(self, request: Any) -> str:
        self.asked.append(request)
        return f"token-for-{request.audiences or 'api'}-{len(self.asked)}"

    def delete_service_account_token(self, pod_uid: str) -> None:
        self.deleted.append(pod_uid)


async def test_projected_service_account_tokens(tmp_path: Path) -> None:
    tokens = Tokens()
    volumes = manager(tmp_path, objects=Store(), tokens=tokens)
    p = pod([KUBE_API_ACCESS], spec={"serviceAccountName": "builder"})
    mounted = await volumes.mount_pod(p)
    root = Path(mounted["kube-api-access"].host_path)
    assert (root / "token").read_text() == "token-for-api-1"
    assert (root / "vault-token").read_text() == "token-for-('vault',)-2"
    assert (root / "ca.crt").read_text() == "1"
    assert (root / "namespace").read_text() == "ns"
    assert stat.S_IMODE(os.stat(root / "token").st_mode) == 0o644
    first, second = tokens.asked
    assert (first.namespace, first.service_account, first.audiences, first.expiration_seconds) == (
        "ns",
        "builder",
        (),
        3607,
    )
    assert (first.pod_name, first.pod_uid) == ("web", "uid-1")
    assert second.audiences == ("vault",) and second.expiration_seconds == 3600  # defaulted

    await volumes.mount_pod(p)  # every sync asks the manager again (it decides about refreshing)
    assert (root / "token").read_text() == "token-for-api-3"
    await volumes.unmount_pod("uid-1")
    assert tokens.deleted == ["uid-1"]


async def test_projected_token_with_fs_group_is_group_readable_only(tmp_path: Path) -> None:
    volumes = manager(tmp_path, objects=Store(), tokens=Tokens())
    p = pod([KUBE_API_ACCESS], spec={"securityContext": {"fsGroup": 4242}})
    mounted = await volumes.mount_pod(p)
    token = os.stat(Path(mounted["kube-api-access"].host_path) / "token")
    assert stat.S_IMODE(token.st_mode) == 0o640 and token.st_gid == 4242  # 0600 widened by fsGroup
    ca = os.stat(Path(mounted["kube-api-access"].host_path) / "ca.crt")
    assert stat.S_IMODE(ca.st_mode) == 0o644


@pytest.mark.skipif(os.geteuid() != 0, reason="giving files to another user needs root")
async def test_projected_token_belongs_to_the_pods_common_user(tmp_path: Path) -> None:
    volumes = manager(tmp_path, objects=Store(), tokens=Tokens())
    p = pod([KUBE_API_ACCESS], spec={"securityContext": {"runAsUser": 1234}})
    mounted = await volumes.mount_pod(p)
    root = Path(mounted["kube-api-access"].host_path)
    token = os.stat(root / "token")
    assert (token.st_uid, stat.S_IMODE(token.st_mode)) == (1234, 0o600)  # Go's FsUser
    assert os.stat(root / "ca.crt").st_uid == 0
    mixed = pod(
        [KUBE_API_ACCESS],
        spec={"securityContext": {"runAsUser": 1234}, "initContainers": [
            {"name": "init", "image": "busybox", "securityContext": {"runAsUser": 5}}
        ]},
        metadata={"uid": "uid-2"},
    )  # fmt: skip
    mounted = await volumes.mount_pod(mixed)
    token = os.stat(Path(mounted["kube-api-access"].host_path) / "token")
    assert (token.st_uid, stat.S_IMODE(token.st_mode)) == (0, 0o644)  # no common user: the default


async def test_standalone_token_projection_fails_the_volume(tmp_path: Path) -> None:
    events: list[tuple[str, str]] = []
    volumes = manager(
        tmp_path, objects=Store(), events=lambda pod, t, reason, message: events.append((reason, message))
    )
    with pytest.raises(MountError, match="unmounted volumes=\\[kube-api-access\\]"):
        await volumes.mount_pod(pod([KUBE_API_ACCESS]))
    assert events == [
        (
            "FailedMount",
            'MountVolume.SetUp failed for volume "kube-api-access" : '
            "cannot use TokenManager when kubelet is in standalone mode; "
            "cannot use TokenManager when kubelet is in standalone mode",
        )
    ]


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting tmpfs needs root")
async def test_secret_volume_is_a_real_tmpfs(tmp_path: Path) -> None:
    volumes = manager(tmp_path, objects=Store(), memory_backed=None)  # root: on tmpfs
    p = pod([{"name": "sec", "secret": {"secretName": "sec"}}, {"name": "cfg", "configMap": {"name": "cfg"}}])
    mounted = await volumes.mount_pod(p)
    secret, config = mounted["sec"].host_path, mounted["cfg"].host_path
    try:
        assert is_mount_point(secret) and not is_mount_point(config)
        fs = os.statvfs(secret)
        assert fs.f_blocks * fs.f_frsize == 64 * 2**20  # the pod's memory limit
        assert (Path(secret) / "token").read_bytes() == b"s3cr3t"
        await volumes.mount_pod(p)  # resync: the mount is kept, not stacked
        assert mount_points_under(str(tmp_path)).count(secret) == 1
    finally:
        await volumes.unmount_pod("uid-1")
    assert not is_mount_point(secret) and not exists(secret)
