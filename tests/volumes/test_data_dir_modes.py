"""Modes of the kubelet's directories and volume files (Go: ``setupDataDirs``, ``makePodDataDirs``,
emptyDir ``setupDir``, the atomic writer): no other local user gets through to a pod's files, while the pod
keeps the modes it asked for. Fast tests on the local filesystem; tests/apiserver/
test_volume_permissions_containerd.py checks the same with real containers and an unprivileged user."""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from kubelet_trio.fsio import make_dirs
from kubelet_trio.testing.node import as_pod, open_sim_node
from kubelet_trio.volumemanager import (
    AtomicWriter,
    DataDirError,
    FileProjection,
    make_pod_data_dirs,
    setup_data_dirs,
)
from kubelet_trio.volumemanager.emptydir import setup_dir
from tests.volumes.test_volume_plugins import KUBE_API_ACCESS, Store, Tokens, manager, pod


def mode(path: str | Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@pytest.fixture
def umask() -> Iterator[Callable[[int], int]]:
    """Set the process umask for one test (restored after)."""
    old = os.umask(0o022)
    try:
        yield os.umask
    finally:
        os.umask(old)


def test_make_dirs_gives_every_created_parent_the_mode(tmp_path: Path, umask: Callable[[int], int]) -> None:
    umask(0)
    (tmp_path / "exists").mkdir(mode=0o755)
    target = tmp_path / "exists/a/b/c"
    assert make_dirs(str(target), 0o750) == [
        str(tmp_path / "exists/a"),
        str(tmp_path / "exists/a/b"),
        str(target),
    ]
    assert [mode(tmp_path / p) for p in ("exists", "exists/a", "exists/a/b", "exists/a/b/c")] == [
        0o755,  # already there: left alone
        0o750,
        0o750,
        0o750,
    ]
    assert make_dirs(str(target), 0o700) == []
    (tmp_path / "file").write_text("")
    with pytest.raises(NotADirectoryError):
        make_dirs(str(tmp_path / "file/sub"), 0o750)


def test_setup_data_dirs_creates_a_0750_tree(tmp_path: Path, umask: Callable[[int], int]) -> None:
    umask(0)  # modes do not depend on a permissive umask
    root = tmp_path / "missing/kt"
    assert setup_data_dirs(str(root)) == []
    for path in ("missing", "missing/kt", "missing/kt/pods", "missing/kt/plugins"):
        assert mode(tmp_path / path) == 0o750, path
    make_pod_data_dirs(str(root), "uid-1")
    for sub in ("", "/volumes", "/plugins", "/containers"):
        assert mode(f"{root}/pods/uid-1{sub}") == 0o750, sub


def test_loose_directories_are_tightened_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    root = tmp_path / "kt"
    loose = {
        "": 0o755,
        "pods": 0o777,
        "plugins": 0o755,
        "pods/u1": 0o755,
        "pods/u1/volumes": 0o751,
        "pods/u1/volumes/kubernetes.io~secret": 0o755,
        "pods/u1/containers": 0o700,  # already tighter: kept
    }
    for path, m in loose.items():
        (root / path).mkdir(exist_ok=True)
        os.chmod(root / path, m)
    volume = root / "pods/u1/volumes/kubernetes.io~secret/creds"
    volume.mkdir()
    os.chmod(volume, 0o777)  # a volume root: what the pod needs, not tightened
    (root / "pods/u1/etc-hosts").write_text("")
    os.chmod(root / "pods/u1/etc-hosts", 0o644)
    outside = tmp_path / "outside"
    outside.mkdir(mode=0o755)
    os.symlink(outside, root / "pods/u2")  # not followed

    caplog.set_level(logging.WARNING, logger="kubelet_trio.volumemanager.datadirs")
    tightened = setup_data_dirs(str(root))
    assert tightened == [
        str(root),
        str(root / "pods"),
        str(root / "plugins"),
        str(root / "pods/u1"),
        str(root / "pods/u1/volumes"),
        str(root / "pods/u1/volumes/kubernetes.io~secret"),
    ]
    assert [mode(p) for p in tightened] == [0o750] * 6
    assert mode(root / "pods/u1/containers") == 0o700
    assert mode(volume) == 0o777
    assert mode(root / "pods/u1/etc-hosts") == 0o644
    assert mode(outside) == 0o755
    logged = [(r.getMessage(), r.path, r.old_mode, r.mode) for r in caplog.records]  # type: ignore[attr-defined]
    assert logged == [
        ("tightened directory mode", str(root), "0755", "0750"),
        ("tightened directory mode", str(root / "pods"), "0777", "0750"),
        ("tightened directory mode", str(root / "plugins"), "0755", "0750"),
        ("tightened directory mode", str(root / "pods/u1"), "0755", "0750"),
        ("tightened directory mode", str(root / "pods/u1/volumes"), "0751", "0750"),
        ("tightened directory mode", str(root / "pods/u1/volumes/kubernetes.io~secret"), "0755", "0750"),
    ]
    caplog.clear()
    assert setup_data_dirs(str(root)) == []  # once per directory
    assert caplog.records == []


def test_shared_root_directory_is_left_alone(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)  # like /tmp
    caplog.set_level(logging.WARNING, logger="kubelet_trio.volumemanager.datadirs")
    assert setup_data_dirs(str(shared)) == []
    assert mode(shared) == 0o1777
    assert mode(shared / "pods") == 0o750  # what keeps others out is below it
    assert [r.getMessage() for r in caplog.records] == ["root directory is shared, not tightening it"]


def test_a_directory_that_cannot_be_made_is_named(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(
        DataDirError, match=f"error creating root directory {tmp_path}/file/kt: Not a directory"
    ):
        setup_data_dirs(str(tmp_path / "file/kt"))
    (tmp_path / "kt").mkdir()
    (tmp_path / "kt/pods").write_text("")
    with pytest.raises(
        DataDirError, match=f"error creating pods directory {tmp_path}/kt/pods: Not a directory"
    ):
        setup_data_dirs(str(tmp_path / "kt"))


def test_setup_dir_is_0777_whatever_the_umask_and_keeps_special_bits(
    tmp_path: Path, umask: Callable[[int], int]
) -> None:
    umask(0o077)
    volume = tmp_path / "pods/u/volumes/kubernetes.io~empty-dir/data"
    setup_dir(str(volume))
    assert (mode(volume.parent), mode(volume)) == (0o700, 0o777)  # a strict umask only tightens parents
    os.chmod(volume, 0o1777)  # a tmpfs mounted there
    setup_dir(str(volume))
    assert mode(volume) == 0o1777
    os.chmod(volume, 0o755)
    setup_dir(str(volume))
    assert mode(volume) == 0o777


def test_atomic_writer_modes_do_not_depend_on_the_umask(tmp_path: Path, umask: Callable[[int], int]) -> None:
    for mask in (0, 0o077):
        umask(mask)
        target = tmp_path / f"umask-{mask:o}"
        target.mkdir()
        AtomicWriter(str(target)).write(
            {
                "secret": FileProjection(b"s", 0o400),
                "shared": FileProjection(b"x", 0o644),
                "deep/er/file": FileProjection(b"d", 0o640),
            }
        )
        ts_dir = target / os.readlink(target / "..data")
        assert mode(ts_dir) == mode(ts_dir / "deep") == mode(ts_dir / "deep/er") == 0o755
        assert [mode(ts_dir / f) for f in ("secret", "shared", "deep/er/file")] == [0o400, 0o644, 0o640]


class TmpfsLikeMounter:
    """Mounting shows what a real tmpfs shows: a root of mode 1777."""

    def __init__(self) -> None:
        self.mounted: set[str] = set()

    def mount_tmpfs(self, path: str, size_bytes: int | None) -> None:
        os.chmod(path, 0o1777)
        self.mounted.add(path)

    def unmount(self, path: str) -> None:
        self.mounted.discard(path)

    def is_mount_point(self, path: str) -> bool:
        return path in self.mounted


async def test_volume_directories_and_files_per_type(tmp_path: Path, umask: Callable[[int], int]) -> None:
    umask(0)  # a permissive umask must not open anything up
    volumes = manager(
        tmp_path / "root", objects=Store(), tokens=Tokens(), mounter=TmpfsLikeMounter(), memory_backed=True
    )
    projected: dict[str, Any] = {
        "name": "proj",
        "projected": {
            "defaultMode": 0o440,
            "sources": [
                {"serviceAccountToken": {"path": "token"}},
                {"secret": {"name": "sec", "items": [{"key": "token", "path": "s/k", "mode": 0o400}]}},
            ],
        },
    }
    p = pod(
        [
            {"name": "sec", "secret": {"secretName": "sec", "defaultMode": 0o400}},
            {
                "name": "cfg",
                "configMap": {"name": "cfg", "items": [{"key": "a", "path": "a", "mode": 0o600}]},
            },
            {
                "name": "info",
                "downwardAPI": {
                    "defaultMode": 0o444,
                    "items": [{"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}],
                },
            },
            projected,
            {"name": "scratch", "emptyDir": {}},
        ]
    )
    make_pod_data_dirs(str(tmp_path / "root"), p.uid)
    mounted = await volumes.mount_pod(p)
    pod_root = tmp_path / "root/pods/uid-1"
    assert [mode(pod_root / d) for d in ("", "volumes", "plugins", "containers")] == [0o750] * 4
    for plugin in os.listdir(pod_root / "volumes"):
        assert mode(pod_root / "volumes" / plugin) == 0o750, plugin
    roots = {name: mode(v.host_path) for name, v in mounted.items()}
    # tmpfs roots stay 1777 (Go never chmods them after mounting); disk-backed roots are 0777
    assert roots == {"sec": 0o1777, "cfg": 0o777, "info": 0o1777, "proj": 0o1777, "scratch": 0o777}
    files = {
        "sec/token": 0o400,
        "cfg/a": 0o600,
        "info/labels": 0o444,
        "proj/token": 0o440,  # no runAsUser or fsGroup: the projection's defaultMode
        "proj/s/k": 0o400,
    }
    for path, expected in files.items():
        name, _, rel = path.partition("/")
        assert stat.S_IMODE(os.stat(Path(mounted[name].host_path) / rel).st_mode) == expected, path
    proj = Path(mounted["proj"].host_path)
    assert mode(proj / os.readlink(proj / "..data") / "s") == 0o755

    await volumes.mount_pod(p)  # a resync re-projects without touching the tmpfs root
    assert mode(mounted["sec"].host_path) == 0o1777


async def test_fs_group_reaches_the_projected_volume_root(tmp_path: Path) -> None:
    volumes = manager(tmp_path, objects=Store(), tokens=Tokens())
    mounted = await volumes.mount_pod(pod([KUBE_API_ACCESS], spec={"securityContext": {"fsGroup": 4242}}))
    root = os.stat(mounted["kube-api-access"].host_path)
    assert root.st_gid == 4242
    assert stat.S_IMODE(root.st_mode) == 0o777 | stat.S_ISGID  # Go walks the volume root too


async def test_kubelet_makes_its_directories_at_start_and_per_pod(
    autojump_clock: trio.testing.MockClock, tmp_path: Path, umask: Callable[[int], int]
) -> None:
    root = tmp_path / "not-yet/kt"
    async with open_sim_node(root_dir=str(root)) as node:
        assert [mode(root / d) for d in ("", "pods", "plugins")] == [0o750] * 3
        assert mode(tmp_path / "not-yet") == 0o750
        (p,) = await node.apply(
            {
                "metadata": {"name": "web"},
                "spec": {
                    "containers": [
                        {
                            "name": "app",
                            "image": "busybox",
                            "volumeMounts": [{"name": "d", "mountPath": "/d"}],
                        }
                    ],
                    "volumes": [{"name": "d", "emptyDir": {}}],
                },
            }
        )
        await node.wait_for_phase(p, "Running")
        pod_root = root / "pods" / p.uid
        assert [mode(pod_root / d) for d in ("", "volumes", "plugins", "containers")] == [0o750] * 4
        assert mode(pod_root / "volumes/kubernetes.io~empty-dir") == 0o750
        assert mode(pod_root / "volumes/kubernetes.io~empty-dir/d") == 0o777


async def test_pod_data_dir_failure_is_a_pod_event(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    manifest = {"metadata": {"name": "web"}, "spec": {"containers": [{"name": "app", "image": "busybox"}]}}
    uid = as_pod(manifest).uid
    events: list[tuple[str, str, str]] = []
    async with open_sim_node(
        root_dir=str(tmp_path / "kt"),
        event_sink=lambda pod, type_, reason, message: events.append((type_, reason, message)),
    ) as node:
        (tmp_path / "kt/pods" / uid).write_text("")  # in the way of the pod directory
        (p,) = await node.apply(manifest)
        await trio.sleep(5)
        status = node.status(p)
        assert status is not None and status.phase == "Pending"  # never started
    in_the_way = tmp_path / "kt/pods" / uid
    message = f"error making pod data directories: [Errno 20] Not a directory: '{in_the_way}'"
    failed = {e for e in events if e[1] == "Failed"}
    assert failed == {("Warning", "Failed", message)}  # the same event on every retry
