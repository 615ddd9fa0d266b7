"""Image references and the simulated image store.

References are normalized the way containerd's CRI does (``busybox`` → ``docker.io/library/busybox:latest``)
so that a pull, a status lookup and a container create agree on which image they mean, whichever
spelling (or image id) the caller used.

Identity is by content, as in a registry: the same repository path and tag pulled from two registries
(``registry.k8s.io/pause:3.9``, ``k8s.gcr.io/pause:3.9``) is one image with two tags, and so are the tags
``_SAME_CONTENT`` lists (critest pushes one image under several tags). Removing an image by any of its
references removes all of them. What an image's config says (user, default command) comes from
``_CONFIGS``: the images critest and the e2e suites use; anything else is a busybox-like image run as root.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import Generic, TypeVar

import attrs

from kubelet_trio.cri.gen.runtime import v1 as pb

T = TypeVar("T")

DEFAULT_DOMAIN = "docker.io"
IMAGE_SIZE_BASE = 1_099_575  # about what a busybox image weighs


@attrs.frozen
class ImageRef:
    """A parsed reference: ``repository[:tag][@digest]`` with the repository fully qualified."""

    repository: str
    tag: str = ""
    digest: str = ""

    def __str__(self) -> str:
        if self.digest:
            return f"{self.repository}@{self.digest}"
        return f"{self.repository}:{self.tag}" if self.tag else self.repository


def parse_ref(ref: str) -> ImageRef:
    """Parse and normalize like containerd's ``ParseDockerRef`` (a digest wins over a tag)."""
    name, _, digest = ref.partition("@")
    domain, slash, path = name.partition("/")
    if not slash or not ("." in domain or ":" in domain or domain == "localhost"):
        domain, path = DEFAULT_DOMAIN, name
    if domain == DEFAULT_DOMAIN and "/" not in path:
        path = f"library/{path}"
    head, _, last = path.rpartition("/")
    last, _, tag = last.partition(":")
    repository = f"{domain}/{head}/{last}" if head else f"{domain}/{last}"
    if digest:
        return ImageRef(repository, digest=digest)
    return ImageRef(repository, tag=tag or "latest")


def normalize(ref: str) -> str:
    return str(parse_ref(ref))


@attrs.frozen
class ImageConfig:
    """The parts of an image's config the simulator uses: its ``User``, its default command, the users and
    groups its ``/etc/passwd`` and ``/etc/group`` define, and where its server listens."""

    user: str = ""
    entrypoint: tuple[str, ...] = ()
    cmd: tuple[str, ...] = ("sh",)
    users: Mapping[str, int] = attrs.field(factory=lambda: {"root": 0})
    #: uid -> the groups /etc/group puts that user in (besides its primary group)
    member_of: Mapping[int, tuple[int, ...]] = attrs.field(factory=dict)
    #: the ports the image's own server (nginx, httpd) listens on, which its config file decides
    ports: tuple[int, ...] = ()

    @property
    def uid_and_name(self) -> tuple[int | None, str]:
        """What ImageStatus reports: a numeric ``User`` as uid, else the user name."""
        user = self.user.partition(":")[0]
        if not user:
            return None, ""
        return (int(user), "") if user.isdigit() else (None, user)


NNP = "/usr/local/bin/nnp"  # the nonewprivs image's set-uid-root entrypoint
_BUSYBOX_USERS = {"root": 0, "daemon": 1, "www-data": 33, "nobody": 65534}
HTTP_PORT = 80  # where the nginx and httpd images listen
HOSTNET_NGINX_PORT = 12003  # cri-tools' hostnet-nginx image: nginx configured for a host-network pod
_NGINX = ImageConfig(entrypoint=("nginx",), cmd=("-g", "daemon off;"), ports=(HTTP_PORT,))
_HTTPD = ImageConfig(cmd=("httpd-foreground",), ports=(HTTP_PORT,))
_HOSTNET_NGINX = attrs.evolve(_NGINX, ports=(HOSTNET_NGINX_PORT,))
_CONFIGS: dict[str, ImageConfig] = {
    "k8s-staging-cri-tools/test-image-user-uid": ImageConfig(user="1002", users=_BUSYBOX_USERS),
    "k8s-staging-cri-tools/test-image-user-username": ImageConfig(user="www-data", users=_BUSYBOX_USERS),
    "k8s-staging-cri-tools/test-image-user-uid-group": ImageConfig(user="1003:users", users=_BUSYBOX_USERS),
    "k8s-staging-cri-tools/test-image-user-username-group": ImageConfig(
        user="www-data:www-data", users=_BUSYBOX_USERS
    ),
    "k8s-staging-cri-tools/test-image-predefined-group": ImageConfig(
        user="1000", users={**_BUSYBOX_USERS, "user1": 1000}, member_of={1000: (50000,)}
    ),
    "e2e-test-images/nginx": _NGINX,
    "library/nginx": _NGINX,
    "e2e-test-images/httpd": _HTTPD,
    "library/httpd": _HTTPD,
    **{
        f"k8s-staging-cri-tools/hostnet-nginx-{arch}": _HOSTNET_NGINX
        for arch in ("amd64", "arm64", "ppc64le", "s390x")
    },
    "pause": ImageConfig(cmd=("/pause",)),
    "e2e-test-images/nonewprivs": ImageConfig(entrypoint=(NNP,), cmd=()),
}
_SAME_CONTENT = ("k8s-staging-cri-tools/test-image-tags",)


def _path(repository: str) -> str:
    """The repository without its registry host."""
    return repository.partition("/")[2]


def image_config(ref: str) -> ImageConfig:
    path = _path(parse_ref(ref).repository)
    for key, config in _CONFIGS.items():
        if path == key or path.endswith("/" + key):
            return config
    return ImageConfig(users=_BUSYBOX_USERS)


def _content_key(parsed: ImageRef) -> str:
    path = _path(parsed.repository)
    if parsed.digest:
        return f"{path}@{parsed.digest}"
    if path in _SAME_CONTENT:
        return path
    return f"{path}:{parsed.tag}"


def _has_tag_or_digest(ref: str) -> bool:
    return "@" in ref or ":" in ref.rpartition("/")[2]


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@attrs.frozen
class SimImage:
    """One image: id ``sha256:<sha256 of its content key>``, its tags and digests, a plausible size."""

    id: str
    repo_tags: tuple[str, ...]
    repo_digests: tuple[str, ...]
    size: int
    config: ImageConfig = ImageConfig()

    @classmethod
    def for_ref(cls, ref: str) -> SimImage:
        parsed = parse_ref(ref)
        key = _content_key(parsed)
        return cls(
            id=f"sha256:{_sha256(key)}",
            repo_tags=(),
            repo_digests=(),
            size=IMAGE_SIZE_BASE + int(_sha256(f"manifest:{key}")[:4], 16),
            config=image_config(ref),
        ).with_ref(ref)

    def with_ref(self, ref: str) -> SimImage:
        """The same image also known as ``ref`` (a tag, or a digest of its repository)."""
        parsed = parse_ref(ref)
        normalized = str(parsed)
        if parsed.digest:
            tags, digest = self.repo_tags, normalized
        else:
            tags = self.repo_tags if normalized in self.repo_tags else (*self.repo_tags, normalized)
            digest = f"{parsed.repository}@sha256:{_sha256(f'manifest:{self.id}')}"
        digests = self.repo_digests if digest in self.repo_digests else (*self.repo_digests, digest)
        return attrs.evolve(self, repo_tags=tags, repo_digests=digests)

    @property
    def refs(self) -> tuple[str, ...]:
        return self.repo_tags + self.repo_digests

    def to_pb(self) -> pb.Image:
        uid, username = self.config.uid_and_name
        return pb.Image(
            id=self.id,
            repo_tags=list(self.repo_tags),
            repo_digests=list(self.repo_digests),
            size=self.size,
            uid=pb.Int64Value(value=uid) if uid is not None else None,
            username=username,
        )


@attrs.define(eq=False)
class ImageStore:
    """Present images by id; lookups accept a reference in any spelling or the image id."""

    _images: dict[str, SimImage] = attrs.Factory(dict)

    def add(self, ref: str) -> SimImage:
        image = self.find(ref)
        if image is None:
            new = SimImage.for_ref(ref)
            present = self._images.get(new.id)
            image = present.with_ref(ref) if present is not None else new
        self._images[image.id] = image
        return image

    def find(self, ref_or_id: str) -> SimImage | None:
        if not ref_or_id:
            return None
        if ref_or_id.startswith("sha256:"):
            return self._images.get(ref_or_id)
        normalized = normalize(ref_or_id)
        for image in self._images.values():
            if normalized in image.refs:
                return image
        return None

    def remove(self, ref_or_id: str) -> None:
        image = self.find(ref_or_id)
        if image is not None:
            del self._images[image.id]

    def list(self) -> list[SimImage]:
        return list(self._images.values())

    @property
    def total_size(self) -> int:
        return sum(image.size for image in self._images.values())


@attrs.frozen
class RefTable(Generic[T]):
    """Per-image settings keyed by reference: an exact (normalized) match wins, then a key without
    tag or digest matches any tag or digest of that repository."""

    _entries: tuple[tuple[str, T], ...]

    @classmethod
    def of(cls, mapping: Mapping[str, T] | None) -> RefTable[T]:
        return cls(tuple((mapping or {}).items()))

    def lookup(self, candidates: Iterable[str]) -> T | None:
        refs = [ref for ref in dict.fromkeys(candidates) if ref]
        for ref in refs:
            for key, value in self._entries:
                if key == ref or normalize(key) == normalize(ref):
                    return value
        for ref in refs:
            repository = parse_ref(ref).repository
            for key, value in self._entries:
                if not _has_tag_or_digest(key) and parse_ref(key).repository == repository:
                    return value
        return None
