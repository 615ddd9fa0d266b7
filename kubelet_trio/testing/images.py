"""Build small OCI images from the host's static busybox and push them to a registry.

An OCI image is a gzip'd layer tar, a config JSON and a manifest JSON, all content-addressed by sha256.
Building them locally (rather than pulling) is what lets every machine here run real containers.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import platform
import shutil
import subprocess
import tarfile
from pathlib import Path

import attrs
import httpx

BUSYBOX = "/bin/busybox"
MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"
CONFIG_TYPE = "application/vnd.oci.image.config.v1+json"
LAYER_TYPE = "application/vnd.oci.image.layer.v1.tar+gzip"
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@attrs.frozen
class ImageBlob:
    """One content-addressed blob."""

    media_type: str
    data: bytes

    @property
    def digest(self) -> str:
        return "sha256:" + hashlib.sha256(self.data).hexdigest()


@attrs.frozen
class OciImage:
    """A built image: its layer, config and manifest blobs."""

    layer: ImageBlob
    config: ImageBlob
    manifest: ImageBlob


def _oci_arch() -> str:
    machine = platform.machine()
    return {"x86_64": "amd64", "aarch64": "arm64", "armv7l": "arm"}.get(machine, machine)


def busybox_applets(busybox: str = BUSYBOX) -> list[str]:
    out = subprocess.run([busybox, "--list"], check=True, capture_output=True, text=True).stdout
    return sorted({name for name in out.split() if name and "/" not in name and name != "busybox"})


def _add_dir(tar: tarfile.TarFile, name: str) -> None:
    info = tarfile.TarInfo(name)
    info.type = tarfile.DIRTYPE
    info.mode = 0o755
    tar.addfile(info)


def busybox_layer(busybox: str = BUSYBOX) -> bytes:
    """An uncompressed layer tar: /bin/busybox, one symlink per applet, and the usual empty dirs."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for d in ("bin", "etc", "tmp", "var", "var/www", "root", "proc", "sys", "dev"):
            _add_dir(tar, d)
        data = Path(busybox).read_bytes()
        info = tarfile.TarInfo("bin/busybox")
        info.size = len(data)
        info.mode = 0o755
        tar.addfile(info, io.BytesIO(data))
        for applet in busybox_applets(busybox):
            link = tarfile.TarInfo(f"bin/{applet}")
            link.type = tarfile.SYMTYPE
            link.linkname = "busybox"
            link.mode = 0o777
            tar.addfile(link)
        for name, text in (
            ("etc/passwd", "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n"),
            ("etc/group", "root:x:0:\nnogroup:x:65534:\n"),
        ):
            raw = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(raw)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(raw))
    return buf.getvalue()


def build_image(
    layer_tar: bytes, *, cmd: list[str] | None = None, entrypoint: list[str] | None = None
) -> OciImage:
    """Wrap one uncompressed layer into an OCI image with the given default command."""
    layer = ImageBlob(LAYER_TYPE, gzip.compress(layer_tar, compresslevel=1, mtime=0))
    image_config: dict[str, object] = {"Env": [f"PATH={DEFAULT_PATH}"], "WorkingDir": "/"}
    if cmd is not None:
        image_config["Cmd"] = cmd
    if entrypoint is not None:
        image_config["Entrypoint"] = entrypoint
    config_doc = {
        "architecture": _oci_arch(),
        "os": "linux",
        "config": image_config,
        "rootfs": {"type": "layers", "diff_ids": ["sha256:" + hashlib.sha256(layer_tar).hexdigest()]},
    }
    config = ImageBlob(CONFIG_TYPE, json.dumps(config_doc, sort_keys=True).encode())
    manifest_doc = {
        "schemaVersion": 2,
        "mediaType": MANIFEST_TYPE,
        "config": {"mediaType": CONFIG_TYPE, "digest": config.digest, "size": len(config.data)},
        "layers": [{"mediaType": LAYER_TYPE, "digest": layer.digest, "size": len(layer.data)}],
    }
    manifest = ImageBlob(MANIFEST_TYPE, json.dumps(manifest_doc, sort_keys=True).encode())
    return OciImage(layer=layer, config=config, manifest=manifest)


def push_image(
    registry: str, repository: str, tag: str, image: OciImage, *, auth: tuple[str, str] | None = None
) -> str:
    """Push through the OCI distribution API (blob upload then manifest PUT); return the digest ref.
    ``auth``: a user and password for a registry that needs basic auth."""
    base = f"http://{registry}/v2/{repository}"
    with httpx.Client(timeout=30, auth=auth) as client:
        for blob in (image.layer, image.config):
            if client.head(f"{base}/blobs/{blob.digest}").status_code == 200:
                continue
            start = client.post(f"{base}/blobs/uploads/")
            start.raise_for_status()
            location = httpx.URL(start.headers["location"])
            if not location.is_absolute_url:
                location = httpx.URL(f"http://{registry}").join(location)
            put = client.put(
                location.copy_merge_params({"digest": blob.digest}),
                content=blob.data,
                headers={"content-type": "application/octet-stream"},
            )
            put.raise_for_status()
        resp = client.put(
            f"{base}/manifests/{tag}",
            content=image.manifest.data,
            headers={"content-type": MANIFEST_TYPE},
        )
        resp.raise_for_status()
    return f"{registry}/{repository}@{image.manifest.digest}"


@attrs.frozen
class TestImages:
    """The references of the images a harness provides."""

    busybox: str
    pause: str
    #: The same busybox, as manifests name it; resolved through the registry as the docker.io mirror.
    docker_busybox: str = "docker.io/library/busybox:1.36"


def push_test_images(registry: str) -> TestImages:
    """Build and push busybox (default command ``sh``) and a pause image (sleeps forever)."""
    if shutil.which(BUSYBOX) is None and not Path(BUSYBOX).exists():
        raise FileNotFoundError(f"{BUSYBOX} is missing: install busybox-static")
    layer = busybox_layer()
    busybox = build_image(layer, cmd=["sh"])
    pause = build_image(layer, entrypoint=["/bin/sleep", "2147483647"])
    push_image(registry, "kubelet-trio/busybox", "1.36", busybox)
    push_image(registry, "library/busybox", "1.36", busybox)  # docker.io/library/busybox:1.36 (mirror)
    push_image(registry, "kubelet-trio/pause", "3.9", pause)
    return TestImages(
        busybox=f"{registry}/kubelet-trio/busybox:1.36", pause=f"{registry}/kubelet-trio/pause:3.9"
    )
