"""``--image-import-dir``: image archives imported into containerd before the first pod, and when added.

Without containerd: the archive kinds, and the decompression into ``ctr``'s standard input (a stand-in
``ctr`` that records what it was given): a ``.tar`` is passed by name, a ``.tar.gz`` and a ``.tar.zst``
arrive as the same tar bytes; a corrupt archive is an error naming the file and the others import. The
flag is refused for the simulated runtime (at the command line) and for a runtime that is not containerd.

With containerd (marked ``containerd``): busybox and pause are pushed to a loopback registry, pulled into
a throwaway containerd and exported with ``ctr images export``; the registry is then stopped, so nothing
after that can pull. A fresh containerd with an empty store imports the archives (plain, gzip, zstd; a
corrupt one beside them) and its CRI sees the images; an archive added later is imported through
inotify. And the real ``kubelet-trio --container-runtime managed --image-import-dir D`` runs a static pod
(``IfNotPresent`` and ``Never`` containers) with no registry in reach.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import logging
import os
import signal
import socket
import subprocess
import sys
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path

import attrs
import httpx
import pytest
import trio

from kubelet_trio.cmd.kubelet import containerd_socket, main
from kubelet_trio.containerd import ContainerdLayout, PodNetwork
from kubelet_trio.containerd.network import CLAIMS_DIR, bridge_name
from kubelet_trio.cri.gen.runtime import v1 as pb
from kubelet_trio.images.importer import ImageImporter, ImageImportError, archive_kind, list_archives
from kubelet_trio.logs import FIELDS_ATTR
from kubelet_trio.options import component_configs, load_options
from kubelet_trio.sim.runtime import SimRuntime
from kubelet_trio.testing import images as test_images
from kubelet_trio.testing.containerd import PrivateContainerd
from kubelet_trio.testing.env import missing_prerequisites, remove_all_pods
from kubelet_trio.testing.registry import LocalRegistry, free_port
from tests.managed.test_managed_runtime import containerd_pids

NODE = "import-1"


def small_tar(name: str) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        data = name.encode()
        info = tarfile.TarInfo(name)
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def zstd_compress(data: bytes) -> bytes:
    return subprocess.run(["zstd", "-q", "-c"], input=data, capture_output=True, check=True).stdout


# -- without containerd ---------------------------------------------------------------------------------


def test_archive_kinds_and_listing(tmp_path: Path) -> None:
    assert [archive_kind(n) for n in ("a.tar", "a.tar.gz", "a.tar.zst", "a.tgz", ".a.tar", ".tar", "a")] == [
        "tar", "gzip", "zstd", None, None, None, None,
    ]  # fmt: skip
    assert list_archives(tmp_path / "missing") == {}
    (tmp_path / "a.tar").write_bytes(b"x")
    (tmp_path / "notes.txt").write_text("no")
    (tmp_path / "sub.tar").mkdir()
    assert list(list_archives(tmp_path)) == [tmp_path / "a.tar"]


FAKE_CTR = """#!{python}
import hashlib, io, os, sys, tarfile
args = sys.argv[1:]
data = sys.stdin.buffer.read() if args[-1] == "-" else open(args[-1], "rb").read()
try:
    names = tarfile.open(fileobj=io.BytesIO(data)).getnames()
except tarfile.TarError as err:
    sys.exit("ctr: unrecognized image format: " + str(err))
record = os.path.join({record!r}, hashlib.sha256(data).hexdigest())
with open(record, "w") as out:
    out.write(" ".join(args))
for name in names:
    print("unpacking example.test/" + name + ":1 (sha256:0000)...done")
"""


@pytest.fixture
def fake_ctr(tmp_path: Path) -> tuple[Path, Path]:
    """A stand-in ``ctr``: records each import's arguments under a file named by the tar's sha256."""
    record = tmp_path / "record"
    record.mkdir()
    ctr = tmp_path / "ctr"
    ctr.write_text(FAKE_CTR.format(python=sys.executable, record=str(record)))
    ctr.chmod(0o755)
    return ctr, record


async def test_compressed_archives_reach_ctr_as_tar_and_a_corrupt_one_does_not_stop_the_others(
    fake_ctr: tuple[Path, Path], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ctr, record = fake_ctr
    images = tmp_path / "images"
    images.mkdir()
    tars = {name: small_tar(name) for name in ("plain", "gz", "zst")}
    (images / "1-plain.tar").write_bytes(tars["plain"])
    (images / "2-gz.tar.gz").write_bytes(gzip.compress(tars["gz"]))
    (images / "3-zst.tar.zst").write_bytes(zstd_compress(tars["zst"]))
    (images / "0-broken.tar.gz").write_bytes(b"\x1f\x8b" + os.urandom(64))
    (images / "0-broken.tar.zst").write_bytes(b"not zstd at all")
    (images / "0-broken.tar").write_bytes(b"not a tar")
    importer = ImageImporter(images, tmp_path / "containerd.sock", ctr=str(ctr), use_inotify=False)
    with caplog.at_level(logging.INFO, logger="kubelet_trio.images.importer"):
        await importer.scan()

    for name, data in tars.items():
        args = (record / hashlib.sha256(data).hexdigest()).read_text().split()
        assert args[:6] == ["--address", str(tmp_path / "containerd.sock"), "--namespace", "k8s.io",
                            "images", "import"]  # fmt: skip
        assert args[6] == (str(images / "1-plain.tar") if name == "plain" else "-")
    assert importer.outcomes[images / "2-gz.tar.gz"] == ["example.test/gz:1"]
    errors = {p.name: o for p, o in importer.outcomes.items() if isinstance(o, ImageImportError)}
    assert sorted(errors) == ["0-broken.tar", "0-broken.tar.gz", "0-broken.tar.zst"]
    assert "not a valid gzip file" in errors["0-broken.tar.gz"].reason
    assert errors["0-broken.tar.zst"].reason.startswith("zstd exited with")
    assert "unrecognized image format" in errors["0-broken.tar"].reason
    failed = [r for r in caplog.records if r.getMessage() == "image archive import failed"]
    assert sorted(Path(getattr(r, FIELDS_ATTR)["file"]).name for r in failed) == sorted(errors)
    assert all(r.levelno == logging.ERROR for r in failed)

    # Tried once per version of a file: a rescan imports nothing again; a changed file is tried again.
    count = len(list(record.iterdir()))
    await importer.scan()
    assert len(list(record.iterdir())) == count and importer.scans.value == 2
    (images / "0-broken.tar").write_bytes(small_tar("fixed"))
    await importer.scan()
    assert importer.outcomes[images / "0-broken.tar"] == ["example.test/fixed:1"]


async def test_an_added_archive_is_imported_promptly(fake_ctr: tuple[Path, Path], tmp_path: Path) -> None:
    ctr, _ = fake_ctr
    images = tmp_path / "images"
    images.mkdir()
    importer = ImageImporter(images, tmp_path / "sock", ctr=str(ctr), scan_period=3600)
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            await nursery.start(importer.run)
            assert importer.scans.value == 1 and importer.outcomes == {}
            part = images / "late.tar.part"
            part.write_bytes(small_tar("late"))
            part.rename(images / "late.tar")  # written aside, moved in
            await importer.scans.wait_value(lambda n: n >= 2)
            assert importer.outcomes == {images / "late.tar": ["example.test/late:1"]}
            nursery.cancel_scope.cancel()


def test_the_flag_is_refused_for_the_simulated_runtime(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code = main(
        ["--runtime", "sim", "--image-import-dir", str(tmp_path), "--pod-manifest-path", str(tmp_path)]
    )
    assert code == 2
    err = capsys.readouterr().err
    assert "--image-import-dir" in err and "simulated runtime" in err


async def test_the_flag_is_refused_for_a_runtime_that_is_not_containerd(tmp_path: Path) -> None:
    options, _ = load_options(["--image-import-dir", str(tmp_path)])
    with pytest.raises(RuntimeError, match=r"--image-import-dir needs containerd.*the runtime at unix://"):
        await containerd_socket(SimRuntime(), component_configs(options).runtime)


def test_the_key_and_the_managed_default(tmp_path: Path) -> None:
    config = tmp_path / "kubelet.yaml"
    config.write_text(
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nimageImportDir: images\n"
    )
    options, warnings = load_options(["--config", str(config)])
    assert options.image_import_dir == str(tmp_path / "images") and not warnings
    assert (
        ContainerdLayout(tmp_path / "root" / "containerd").images_dir == tmp_path / "root/containerd/images"
    )


# -- with containerd ------------------------------------------------------------------------------------


@attrs.frozen
class Exported:
    images: test_images.TestImages
    late: str  # a third image, for an archive added while running
    archives: Path  # busybox.tar, pause.tar, late.tar
    registry: str  # stopped: nothing answers there any more


def ctr(socket_path: Path, *args: str) -> str:
    return subprocess.run(
        ["ctr", "--address", str(socket_path), "-n", "k8s.io", *args],
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def cleanup_containerd(containerd: PrivateContainerd) -> None:
    if containerd.running:
        trio.run(remove_all_pods, containerd.endpoint)
    containerd.stop()
    containerd.kill_shims()
    containerd.unmount_all()
    containerd.release_network()


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Exported]:
    """busybox, pause and a late image exported with ``ctr images export``; their registry then stopped."""
    missing = missing_prerequisites()
    if missing:
        pytest.skip("containerd tier unavailable: " + "; ".join(missing))
    work = tmp_path_factory.mktemp("export")
    registry = LocalRegistry(work / "registry")
    registry.start()
    source = PrivateContainerd(work / "containerd", sandbox_image="unused.invalid/pause:1")
    try:
        images = test_images.push_test_images(registry.address)
        late_image = test_images.build_image(test_images.busybox_layer(), cmd=["sh"])
        test_images.push_image(registry.address, "kubelet-trio/late", "1", late_image)
        late = f"{registry.address}/kubelet-trio/late:1"
        source.start()
        archives = work / "archives"
        archives.mkdir()
        for name, ref in (("busybox", images.busybox), ("pause", images.pause), ("late", late)):
            ctr(source.socket, "images", "pull", "--plain-http", ref)
            ctr(source.socket, "images", "export", str(archives / f"{name}.tar"), ref)
    finally:
        cleanup_containerd(source)
        registry.stop()
    yield Exported(images, late, archives, registry.address)


def refused(address: str) -> bool:
    host, port = address.rsplit(":", 1)
    with socket.socket() as s:
        return s.connect_ex((host, int(port))) != 0


@pytest.mark.containerd
async def test_archives_are_imported_into_an_empty_containerd(exported: Exported, tmp_path: Path) -> None:
    from kubelet_trio.cri.remote import open_cri_runtime

    assert refused(exported.registry)
    images = tmp_path / "images"
    images.mkdir()
    (images / "busybox.tar.zst").write_bytes(zstd_compress((exported.archives / "busybox.tar").read_bytes()))
    (images / "pause.tar.gz").write_bytes(gzip.compress((exported.archives / "pause.tar").read_bytes(), 1))
    (images / "broken.tar").write_bytes((exported.archives / "busybox.tar").read_bytes()[:5000])
    containerd = PrivateContainerd(tmp_path / "containerd", sandbox_image=exported.images.pause)
    try:
        await trio.to_thread.run_sync(containerd.start)
        assert ctr(containerd.socket, "images", "ls", "-q").strip() == ""  # an empty store
        importer = ImageImporter(images, containerd.socket, scan_period=3600)
        with trio.fail_after(120):
            async with trio.open_nursery() as nursery, open_cri_runtime(containerd.endpoint) as rt:
                await nursery.start(importer.run)
                for ref in (exported.images.busybox, exported.images.pause):
                    assert await rt.image_status(pb.ImageSpec(image=ref)) is not None, ref
                assert importer.outcomes[images / "busybox.tar.zst"] == [exported.images.busybox]
                broken = importer.outcomes[images / "broken.tar"]
                assert isinstance(broken, ImageImportError) and str(images / "broken.tar") in str(broken)

                assert await rt.image_status(pb.ImageSpec(image=exported.late)) is None
                (images / ".late.tar").write_bytes((exported.archives / "late.tar").read_bytes())
                (images / ".late.tar").rename(images / "late.tar")
                await importer.scans.wait_value(lambda n: n >= 2)
                assert await rt.image_status(pb.ImageSpec(image=exported.late)) is not None
                nursery.cancel_scope.cancel()
    finally:
        await trio.to_thread.run_sync(cleanup_containerd, containerd)


STATIC_POD = """apiVersion: v1
kind: Pod
metadata:
  name: offline
spec:
  terminationGracePeriodSeconds: 2
  containers:
    - name: present
      image: {busybox}
      imagePullPolicy: IfNotPresent
      command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"]
    - name: never
      image: {busybox}
      imagePullPolicy: Never
      command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"]
"""


def wait_until_running(port: int, name: str, proc: subprocess.Popen[bytes], log: Path) -> dict[str, object]:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text(errors="replace")[-4000:]
        try:
            for item in httpx.get(f"http://127.0.0.1:{port}/pods", timeout=5).json()["items"]:
                if item["metadata"]["name"] == name and item["status"].get("phase") == "Running":
                    return dict(item)
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise AssertionError("pod not Running in 120 s:\n" + log.read_text(errors="replace")[-4000:])


@pytest.mark.containerd
def test_kubelet_trio_managed_runs_a_static_pod_from_imported_archives_without_a_registry(
    exported: Exported, tmp_path: Path
) -> None:
    assert refused(exported.registry)
    archives = tmp_path / "archives"
    archives.mkdir()
    for name in ("busybox.tar", "pause.tar"):
        (archives / name).write_bytes((exported.archives / name).read_bytes())
    (archives / "corrupt.tar.gz").write_bytes(gzip.compress(b"this is no image archive"))
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    (manifests / "offline.yaml").write_text(STATIC_POD.format(busybox=exported.images.busybox))
    root = tmp_path / "root"
    layout = ContainerdLayout(root / "containerd")
    read_only = free_port()
    log = tmp_path / "kubelet.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "kubelet_trio", "--container-runtime", "managed",
             "--image-import-dir", str(archives),
             "--root-dir", str(root), "--pod-manifest-path", str(manifests),
             "--pod-logs-dir", str(tmp_path / "logs"),
             "--pod-infra-container-image", exported.images.pause,
             "--hostname-override", NODE, "--healthz-port", "0", "--port", "0",
             "--read-only-port", str(read_only), "--address", "127.0.0.1"],
            stdout=out, stderr=out,
        )  # fmt: skip
    try:
        pod = wait_until_running(read_only, f"offline-{NODE}", proc, log)
        statuses = pod["status"]["containerStatuses"]  # type: ignore[index]
        assert sorted((s["name"], "running" in s["state"]) for s in statuses) == [
            ("never", True), ("present", True),
        ]  # fmt: skip
        text = log.read_text(errors="replace")
        assert "image archive import failed" in text and str(archives / "corrupt.tar.gz") in text
        assert "pulling image" not in text.lower()  # nothing was pulled: IfNotPresent found it imported
        assert layout.images_dir.is_dir()  # the managed runtime's default directory exists too
        trio.run(remove_all_pods, layout.endpoint, NODE)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0, log.read_text(errors="replace")[-4000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        private = PrivateContainerd(layout.workdir, sandbox_image=exported.images.pause)
        for pid in containerd_pids(layout.socket):
            os.kill(pid, signal.SIGKILL)
        private.kill_shims()
        private.unmount_all()
        claim = CLAIMS_DIR / f"{bridge_name(str(layout.workdir.resolve()))}.json"
        if claim.exists():
            PodNetwork.load(claim).release()
