"""Image GC on real containerd with real disk figures: containerd's root is a small tmpfs, the images are
distinct busybox images (each with its own incompressible padding) pulled from the loopback registry, and
the image filesystem is filled past the high threshold by a plain file beside them, as anything else on
the disk would. The kubelet's own image GC manager (statvfs of the mountpoint ImageFsInfo names) then
removes unused images least recently used first until the real usage is below the low threshold; the
image in use and the sandbox image stay.

Real: containerd, its CRI, pulls, the tmpfs and its statvfs figures, RemoveImage. Driven by the test: the
moments images are detected (Go detects on a timer) and the filler file.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import subprocess
import tarfile
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import attrs
import pytest
import trio

from kubelet_trio.cri.gen.runtime import v1 as pb
from kubelet_trio.cri.remote import open_cri_runtime
from kubelet_trio.images.gc import ImageGCManager
from kubelet_trio.kuberuntime.gc import GCPolicy
from kubelet_trio.logs import FIELDS_ATTR
from kubelet_trio.testing.containerd import PrivateContainerd
from kubelet_trio.testing.env import LocalCriEnvironment, remove_all_pods
from kubelet_trio.testing.images import build_image, busybox_layer, push_image
from kubelet_trio.testing.node import SimNode, open_node
from tests.apiserver.harness import eventually

pytestmark = pytest.mark.containerd

NODE = "image-gc"
TMPFS_SIZE = 256 * 1024 * 1024
PADDING = 6 * 1024 * 1024  # random bytes per image: gzip cannot shrink them
NAMES = ("a", "b", "c", "d", "e")


def padded_image(name: str) -> bytes:
    """busybox plus ``/padding-<name>`` of random bytes, as one uncompressed layer tar."""
    buf = io.BytesIO(busybox_layer())
    with tarfile.open(fileobj=buf, mode="a") as tar:
        data = os.urandom(PADDING)
        info = tarfile.TarInfo(f"padding-{name}")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


@contextlib.contextmanager
def tmpfs(size: int) -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="kt-imagegc-"))
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], check=True)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)
        path.rmdir()


@attrs.frozen
class Setup:
    node: SimNode
    images: dict[str, str]  # name -> reference
    disk: Path
    pause: str


@pytest.fixture
async def setup(cri_env: LocalCriEnvironment, tmp_path: Path) -> AsyncIterator[Setup]:
    registry = cri_env.registry.address
    images = {}
    for name in NAMES:
        push_image(
            registry, f"kubelet-trio/gc-{name}", "1", build_image(padded_image(name), cmd=["sleep", "3600"])
        )
        images[name] = f"{registry}/kubelet-trio/gc-{name}:1"
    with tmpfs(TMPFS_SIZE) as disk:
        containerd = PrivateContainerd(
            disk / "containerd", sandbox_image=cri_env.images.pause, registries=[registry]
        )
        try:
            await trio.to_thread.run_sync(containerd.start)
            async with (
                open_cri_runtime(containerd.endpoint, request_timeout=60) as runtime,
                open_node(
                    runtime,
                    NODE,
                    root_dir=str(tmp_path / "root"),
                    pod_logs_dir=str(tmp_path / "logs"),
                    image_gc_high_threshold_percent=85,
                    image_gc_low_threshold_percent=80,
                    image_minimum_gc_age=0.0,
                ) as node,
            ):
                yield Setup(node, images, disk, cri_env.images.pause)
        finally:
            with trio.move_on_after(60, shield=True):
                if containerd.running:
                    await remove_all_pods(containerd.endpoint)
            containerd.stop()
            containerd.kill_shims()
            containerd.unmount_all()
            containerd.release_network()


def usage_percent(path: Path) -> float:
    st = os.statvfs(path)
    return 100.0 * (st.f_blocks - st.f_bavail) / st.f_blocks


async def image_id(setup: Setup, name: str) -> str:
    found = await setup.node.kubelet.runtime.image_status(pb.ImageSpec(image=setup.images[name]))
    assert found is not None
    return found.id


async def use_image(setup: Setup, name: str, *, keep: bool = False) -> None:
    """Run a pod of the image until the GC has seen it in use; then (unless ``keep``) remove the pod and
    its dead container, so that the image is merely cached again."""
    node, gc = setup.node, setup.node.kubelet._image_gc_manager
    [pod] = await node.apply({"metadata": {"name": f"use-{name}"}, "spec": {"containers": [
        {"name": "app", "image": setup.images[name], "imagePullPolicy": "IfNotPresent"}
    ]}})  # fmt: skip
    await node.wait_for_phase(pod, "Running")
    await gc.detect_images()
    if keep:
        return
    await node.remove(pod)
    await node.wait_terminated(pod)
    workers = node.kubelet._pod_workers
    # a removed pod's content may go once housekeeping (every 2 s) has forgotten it, as in Go
    await eventually(lambda: not workers.is_known(pod.uid), 30, 0.1)
    await node.kubelet._kube_runtime.garbage_collect(GCPolicy(), workers, all_sources_ready=True)


async def test_above_the_high_threshold_unused_images_go_lru_first_down_to_the_low_one(
    setup: Setup, caplog: pytest.LogCaptureFixture
) -> None:
    kubelet = setup.node.kubelet
    runtime, gc = kubelet.runtime, kubelet._image_gc_manager
    assert isinstance(gc, ImageGCManager)
    # a and b are pulled at different detections and never used; c, d and e are used in that order
    for name in NAMES:
        await runtime.pull_image(pb.ImageSpec(image=setup.images[name]))
        if name in ("a", "b"):
            await gc.detect_images()
    await gc.detect_images()
    for name in ("c", "d"):
        await use_image(setup, name)
    await use_image(setup, "e", keep=True)
    ids = {name: await image_id(setup, name) for name in NAMES}
    records = gc.records()
    first_detected = {n: records[ids[n]][0] for n in NAMES}
    last_used = {n: records[ids[n]][1] for n in NAMES}
    assert first_detected["a"] < first_detected["b"] < first_detected["c"]
    assert (
        last_used["a"] == last_used["b"] == float("-inf") and last_used["c"] < last_used["d"] < last_used["e"]
    )

    # fill the disk with a plain file so that the low threshold is 2.5 images away (by their CRI sizes)
    stats = await gc.image_fs.image_fs_stats()
    assert stats.mountpoint.startswith(str(setup.disk))  # the tmpfs, measured for real
    size = {n: records[ids[n]][2] for n in NAMES}
    to_free = size["a"] + size["b"] + size["c"] // 2
    target_available = stats.capacity * 20 // 100 - to_free
    filler = setup.disk / "filler"
    with filler.open("wb") as out:
        out.truncate(0)
        remaining = stats.available - target_available
        while remaining > 0:
            chunk = min(remaining, 4 * 1024 * 1024)
            out.write(b"\0" * chunk)
            remaining -= chunk
    before = usage_percent(setup.disk)
    assert before >= 85

    caplog.set_level(logging.INFO, logger="kubelet_trio.images.gc")
    await gc.garbage_collect()
    order = [
        getattr(record, FIELDS_ATTR)["image"]
        for record in caplog.records
        if record.getMessage() == "removing image to free bytes"
    ]
    assert order == [ids["a"], ids["b"], ids["c"]]  # least recently used first, until the sizes cover it
    left = {image.id for image in await runtime.list_images()}
    assert not left & set(order)
    assert ids["d"] in left and ids["e"] in left  # d: used most recently of the idle ones; e: in use
    assert await runtime.image_status(pb.ImageSpec(image=setup.pause)) is not None  # the sandbox image
    after = usage_percent(setup.disk)
    assert after <= 80, (before, after)  # the real disk, not the sizes the runtime reports
    filler.unlink()
