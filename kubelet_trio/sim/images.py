"""Image references and the simulated image store.

References are normalized the way containerd's CRI does (``busybox`` → ``docker.io/library/busybox:latest``)
so that a pull, a status lookup and a container create agree on which image they mean, whichever
spelling (or image id) the caller used.
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


def _has_tag_or_digest(ref: str) -> bool:
    return "@" in ref or ":" in ref.rpartition("/")[2]


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@attrs.frozen
class SimImage:
    """One image: id ``sha256:<sha256 of the normalized ref>``, one tag or digest, a plausible size."""

    id: str
    repo_tags: tuple[str, ...]
    repo_digests: tuple[str, ...]
    size: int

    @classmethod
    def for_ref(cls, ref: str) -> SimImage:
        parsed = parse_ref(ref)
        normalized = str(parsed)
        digest_hex = _sha256(f"manifest:{normalized}")
        if parsed.digest:
            tags: tuple[str, ...] = ()
            digests = (normalized,)
        else:
            tags = (normalized,)
            digests = (f"{parsed.repository}@sha256:{digest_hex}",)
        size = IMAGE_SIZE_BASE + int(digest_hex[:4], 16)
        return cls(id=f"sha256:{_sha256(normalized)}", repo_tags=tags, repo_digests=digests, size=size)

    @property
    def refs(self) -> tuple[str, ...]:
        return self.repo_tags + self.repo_digests

    def to_pb(self) -> pb.Image:
        return pb.Image(
            id=self.id, repo_tags=list(self.repo_tags), repo_digests=list(self.repo_digests), size=self.size
        )


@attrs.define(eq=False)
class ImageStore:
    """Present images by id; lookups accept a reference in any spelling or the image id."""

    _images: dict[str, SimImage] = attrs.Factory(dict)

    def add(self, ref: str) -> SimImage:
        image = self.find(ref) or SimImage.for_ref(ref)
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
