"""The image manager: pull policy, reference defaulting and pull backoff (Go: ``images/image_manager.go``).

``ensure_image_exists`` returns the image reference to create the container from (with the image's
ImageStatus when it was already present, which names the image's user), or raises
:class:`ImageError` whose ``reason`` is what the container's ``waiting.reason`` shows:

- ``InvalidImageName``: the reference does not parse;
- ``ErrImageNeverPull``: policy ``Never`` and the image is absent;
- ``ImagePullBackOff``: a previous pull of this image for this pod failed and its backoff has not
  expired; no pull is attempted;
- ``ErrImagePull`` (or ``RegistryUnavailable``): the pull failed; the message includes the CRI error;
- ``ImageInspectError``: ImageStatus itself failed.

Pull backoff is keyed ``<podUID>_<image>`` (10 s doubling to 300 s); ``backoff_until`` on the error is
the Trio time it expires. Pulls are plain awaited CRI calls, so the caller's cancel scope cancels them
(a pod deleted during a slow pull); a cancelled pull does not count as a failure. Pulls are serialised
by default like the Go kubelet's ``serializeImagePulls=true``.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import TYPE_CHECKING

import attrs
import trio

from kubelet_trio.api import default_image_pull_policy
from kubelet_trio.clock import go_duration
from kubelet_trio.cri import errors as cri_errors
from kubelet_trio.cri.gen.runtime import v1 as pb
from kubelet_trio.kuberuntime.backoff import Backoff
from kubelet_trio.logs import kobj, kv

if TYPE_CHECKING:
    from kubelet_trio.api import Container, Pod
    from kubelet_trio.cri.runtime import ImageService

__all__ = [
    "ERR_IMAGE_INSPECT",
    "ERR_IMAGE_NEVER_PULL",
    "ERR_IMAGE_PULL",
    "ERR_IMAGE_PULL_BACKOFF",
    "ERR_INVALID_IMAGE_NAME",
    "ERR_REGISTRY_UNAVAILABLE",
    "EnsuredImage",
    "EventSink",
    "ImageError",
    "ImageManager",
    "InvalidImageNameError",
    "apply_default_image_tag",
    "parse_image_name",
    "should_pull_image",
]

logger = logging.getLogger(__name__)

ERR_IMAGE_PULL = "ErrImagePull"
ERR_IMAGE_PULL_BACKOFF = "ImagePullBackOff"
ERR_IMAGE_NEVER_PULL = "ErrImageNeverPull"
ERR_INVALID_IMAGE_NAME = "InvalidImageName"
ERR_IMAGE_INSPECT = "ImageInspectError"
ERR_REGISTRY_UNAVAILABLE = "RegistryUnavailable"

IMAGE_BACKOFF_INITIAL = 10.0
IMAGE_BACKOFF_MAX = 300.0
DEFAULT_IMAGE_TAG = "latest"

EventSink = Callable[["Pod", str, str, str], None]
"""``(pod, type, reason, message)``; type is ``Normal`` or ``Warning``."""

# The docker/distribution reference grammar (reference/regexp.go).
_ALNUM = r"[a-z0-9]+"
_SEPARATOR = r"(?:[._]|__|[-]+)"
_PATH_COMPONENT = rf"{_ALNUM}(?:{_SEPARATOR}{_ALNUM})*"
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|\[[a-fA-F0-9:]+\])(?::[0-9]+)?"
_TAG = r"[\w][\w.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
_REFERENCE = re.compile(
    rf"(?P<name>(?:{_DOMAIN}/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*)"
    rf"(?::(?P<tag>{_TAG}))?(?:@(?P<digest>{_DIGEST}))?",
    re.ASCII,
)
_HEX64 = re.compile(r"[a-f0-9]{64}")
_NAME_TOTAL_LENGTH_MAX = 255


class InvalidImageNameError(ValueError):
    pass


class ImageError(Exception):
    """Ensuring the image failed; ``reason`` is the container's waiting reason."""

    def __init__(self, reason: str, message: str, backoff_until: float | None = None) -> None:
        super().__init__(f"{reason}: {message}")
        self.reason = reason
        self.message = message
        self.backoff_until = backoff_until


def parse_image_name(image: str) -> tuple[str, str, str]:
    """``(repository, tag, digest)`` of a reference, validated like docker's ``ParseNormalizedNamed``."""
    match = _REFERENCE.fullmatch(image)
    if match is None:
        raise InvalidImageNameError(f"couldn't parse image name {image!r}: invalid reference format")
    name = match["name"]
    if len(name) > _NAME_TOTAL_LENGTH_MAX:
        raise InvalidImageNameError(
            f"couldn't parse image name {image!r}: repository name must not be more than 255 characters"
        )
    first, slash, _ = name.partition("/")
    is_domain = bool(slash) and ("." in first or ":" in first or first == "localhost")
    if slash and not is_domain and first != first.lower():
        raise InvalidImageNameError(f"couldn't parse image name {image!r}: repository name must be lowercase")
    if _HEX64.fullmatch(name):
        raise InvalidImageNameError(
            f"couldn't parse image name {image!r}: invalid repository name ({name}), "
            "cannot specify 64-byte hexadecimal strings"
        )
    return name, match["tag"] or "", match["digest"] or ""


def apply_default_image_tag(image: str) -> str:
    """Append ``:latest`` to a reference with neither tag nor digest (without qualifying the name)."""
    _, tag, digest = parse_image_name(image)
    if not tag and not digest:
        return f"{image}:{DEFAULT_IMAGE_TAG}"
    return image


def should_pull_image(policy: str, present: bool) -> bool:
    if policy == "Never":
        return False
    if policy == "Always":
        return True
    return not present  # IfNotPresent


def _pull_error(container: Container, err: cri_errors.CriError) -> tuple[str, str]:
    """``evalCRIPullErr``: RegistryUnavailable when the runtime says so, else ErrImagePull."""
    text = err.message
    if text.startswith(ERR_REGISTRY_UNAVAILABLE):
        rest = text[len(ERR_REGISTRY_UNAVAILABLE) :]
        return (
            ERR_REGISTRY_UNAVAILABLE,
            f"image pull failed for {container.image} because the registry is unavailable{rest}",
        )
    return ERR_IMAGE_PULL, str(err)


@attrs.frozen
class EnsuredImage:
    """What the container is created from: the runtime's image id, and the ImageStatus that found it
    present (None after a pull), so the image's user need not be asked for again."""

    ref: str
    image: pb.Image | None = None


@attrs.define(eq=False)
class ImageManager:
    runtime: ImageService
    backoff: Backoff = attrs.Factory(lambda: Backoff(IMAGE_BACKOFF_INITIAL, IMAGE_BACKOFF_MAX))
    events: EventSink | None = None
    serialize_pulls: bool = True
    _pull_lock: trio.Lock = attrs.field(factory=trio.Lock, init=False)

    def _event(self, pod: Pod, type_: str, reason: str, message: str) -> None:
        if self.events is not None:
            self.events(pod, type_, reason, message)

    @staticmethod
    def backoff_key(pod: Pod, container: Container) -> str:
        return f"{pod.uid}_{container.image or ''}"

    async def ensure_image_exists(
        self, pod: Pod, container: Container, sandbox_config: pb.PodSandboxConfig | None = None
    ) -> EnsuredImage:
        """Make sure the container's image is present per its pull policy; return its image ref (id)."""
        user_image = container.image or ""
        ctx = {"pod": kobj(pod), "uid": pod.uid, "container": container.name, "image": user_image}
        try:
            image = apply_default_image_tag(user_image)
        except InvalidImageNameError as err:
            msg = f'Failed to apply default image tag "{user_image}": {err}'
            logger.warning("invalid image name", extra=kv(**ctx, err=err))
            self._event(pod, "Warning", "InspectFailed", msg)
            raise ImageError(ERR_INVALID_IMAGE_NAME, msg) from None

        spec = pb.ImageSpec(image=image, user_specified_image=user_image, annotations=dict(pod.annotations))
        try:
            found = await self.runtime.image_status(spec)
        except cri_errors.CriError as err:
            msg = f'Failed to inspect image "{user_image}": {err}'
            logger.warning("image status failed", extra=kv(**ctx, err=err))
            self._event(pod, "Warning", "InspectFailed", msg)
            raise ImageError(ERR_IMAGE_INSPECT, msg) from err
        image_ref = found.id if found is not None else ""
        present = bool(image_ref)

        policy = container.image_pull_policy or default_image_pull_policy(user_image)
        if not should_pull_image(policy, present):
            if present:
                self._event(
                    pod, "Normal", "Pulled", f'Container image "{user_image}" already present on machine'
                )
                return EnsuredImage(image_ref, found)
            msg = f'Container image "{user_image}" is not present with pull policy of Never'
            logger.warning("image absent with pull policy Never", extra=kv(**ctx))
            self._event(pod, "Warning", ERR_IMAGE_NEVER_PULL, msg)
            raise ImageError(ERR_IMAGE_NEVER_PULL, msg)

        key = self.backoff_key(pod, container)
        if self.backoff.is_in_backoff_since_update(key, trio.current_time()):
            msg = f'Back-off pulling image "{user_image}"'
            self._event(pod, "Normal", "BackOff", msg)
            raise ImageError(ERR_IMAGE_PULL_BACKOFF, msg, self.backoff.expiry(key))

        self._event(pod, "Normal", "Pulling", f'Pulling image "{user_image}"')
        logger.info("pulling image", extra=kv(**ctx))
        queued_at = trio.current_time()
        try:
            if self.serialize_pulls:
                async with self._pull_lock:
                    started_at = trio.current_time()
                    ref = await self.runtime.pull_image(spec, None, sandbox_config)
            else:
                started_at = queued_at
                ref = await self.runtime.pull_image(spec, None, sandbox_config)
        except cri_errors.CriError as err:
            logger.warning("image pull failed", extra=kv(**ctx, err=err))
            self._event(pod, "Warning", "Failed", f'Failed to pull image "{user_image}": {err}')
            self.backoff.next(key, trio.current_time())
            reason, msg = _pull_error(container, err)
            raise ImageError(reason, msg, self.backoff.expiry(key)) from err
        done_at = trio.current_time()
        self._event(
            pod,
            "Normal",
            "Pulled",
            f'Successfully pulled image "{user_image}" in {go_duration(done_at - started_at)} '
            f"({go_duration(done_at - queued_at)} including waiting)",
        )
        logger.info("pulled image", extra=kv(**ctx, ref=ref))
        self.backoff.gc()
        return EnsuredImage(ref)
