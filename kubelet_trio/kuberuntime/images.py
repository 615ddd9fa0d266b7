"""The image manager: pull policy, reference defaulting and pull backoff (Go: ``images/image_manager.go``).

``ensure_image_exists`` returns the image reference to create the container from (with the image's
ImageStatus when it was already present, which names the image's user), or raises
:class:`ImageError` whose ``reason`` is what the container's ``waiting.reason`` shows:

- ``InvalidImageName``: the reference does not parse;
- ``ErrImageNeverPull``: policy ``Never`` and the image is absent;
- ``ImagePullBackOff``: a previous pull of this image for this pod failed and its backoff has not
  expired; no pull is attempted;
- ``ErrImagePull`` (or ``RegistryUnavailable``, ``SignatureValidationFailed``): the pull failed; the
  message includes the CRI error(s); also when an image pull secret does not parse (no pull attempted);
- ``ImageInspectError``: ImageStatus itself failed.

Pull backoff is keyed ``<podUID>_<image>`` (10 s doubling to 300 s); ``backoff_until`` on the error is
the Trio time it expires; during it the message is ``Back-off pulling image "X": <reason>: <message>``
of the last failure (Go ≥ 1.32). Pulls are plain awaited CRI calls, so the caller's cancel scope cancels
them (a pod deleted during a slow pull); a cancelled pull does not count as a failure.

Pullers (Go: ``images/puller.go``): pulls are serialised by default like the Go kubelet's
``serializeImagePulls=true``; with it false they run in parallel, at most ``max_parallel_pulls`` at once
(``maxParallelImagePulls``; None: no limit). A pull waiting for its turn is counted in the Pulled event's
"including waiting". Once its turn comes, a pull takes a token of the ``registryPullQPS``/``registryBurst``
bucket (Go's ``throttledImageService``); when there is none it fails at once with Go's
``pull QPS exceeded`` (an ``ErrImagePull``, backed off like any failed pull).

Credentials (Go: ``image_manager.go`` ``makeLookupPullCredentialsFunc``, ``kuberuntime_image.go``
``PullImage``): when a pull is due, the image's repository (``docker.io/library/busybox`` for
``busybox``) is looked up in the pod's pull secrets (``pull_secrets``, the Secret objects the caller
fetched for ``spec.imagePullSecrets``), then in the manager's ``keyring`` (the node's docker config and
credential provider plugins: :func:`kubelet_trio.credentialprovider.node_keyring`). Each credential
found is tried in order until one pull succeeds; when all fail the error aggregates theirs. Only when
none is found is the image pulled anonymously.
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import attrs
import trio

from kubelet_trio import defaults
from kubelet_trio.api import default_image_pull_policy
from kubelet_trio.clock import go_duration
from kubelet_trio.credentialprovider import AuthConfig, PullSecretError, make_docker_keyring
from kubelet_trio.cri import errors as cri_errors
from kubelet_trio.cri.gen.runtime import v1 as pb
from kubelet_trio.flowcontrol import TokenBucket
from kubelet_trio.kuberuntime.backoff import Backoff
from kubelet_trio.logs import kobj, kv, vlevel

if TYPE_CHECKING:
    from kubelet_trio.api import Container, Pod
    from kubelet_trio.credentialprovider import DockerKeyring, PullSecret
    from kubelet_trio.cri.runtime import ImageService

__all__ = [
    "ERR_IMAGE_INSPECT",
    "ERR_IMAGE_NEVER_PULL",
    "ERR_IMAGE_PULL",
    "ERR_IMAGE_PULL_BACKOFF",
    "ERR_INVALID_IMAGE_NAME",
    "ERR_REGISTRY_UNAVAILABLE",
    "ERR_SIGNATURE_VALIDATION_FAILED",
    "PULL_QPS_EXCEEDED",
    "EnsuredImage",
    "EventSink",
    "ImageError",
    "ImageManager",
    "InvalidImageNameError",
    "apply_default_image_tag",
    "parse_image_name",
    "repository_to_pull",
    "should_pull_image",
]

logger = logging.getLogger(__name__)

ERR_IMAGE_PULL = "ErrImagePull"
ERR_IMAGE_PULL_BACKOFF = "ImagePullBackOff"
ERR_IMAGE_NEVER_PULL = "ErrImageNeverPull"
ERR_INVALID_IMAGE_NAME = "InvalidImageName"
ERR_IMAGE_INSPECT = "ImageInspectError"
ERR_REGISTRY_UNAVAILABLE = "RegistryUnavailable"
ERR_SIGNATURE_VALIDATION_FAILED = "SignatureValidationFailed"

#: Go's ``errPullQPSExceeded``: no token of the registry pull rate limit was left.
PULL_QPS_EXCEEDED = "pull QPS exceeded"

IMAGE_BACKOFF_INITIAL = 10.0
IMAGE_BACKOFF_MAX = 300.0
DEFAULT_IMAGE_TAG = "latest"
DEFAULT_DOMAIN = "docker.io"
LEGACY_DEFAULT_DOMAIN = "index.docker.io"
OFFICIAL_REPOSITORIES = "library"

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
    if slash and not _is_domain(first) and first != first.lower():
        raise InvalidImageNameError(f"couldn't parse image name {image!r}: repository name must be lowercase")
    if _HEX64.fullmatch(name):
        raise InvalidImageNameError(
            f"couldn't parse image name {image!r}: invalid repository name ({name}), "
            "cannot specify 64-byte hexadecimal strings"
        )
    return name, match["tag"] or "", match["digest"] or ""


def _is_domain(component: str) -> bool:
    return "." in component or ":" in component or component == "localhost"


def repository_to_pull(image: str) -> str:
    """The normalised repository of a reference, what credentials are looked up for (Go:
    ``parsers.ParseImageName``): ``busybox`` → ``docker.io/library/busybox``, ``index.docker.io/x/y`` →
    ``docker.io/x/y``, ``reg.io:5000/a/b:1`` → ``reg.io:5000/a/b``."""
    name, _, _ = parse_image_name(image)
    first, slash, rest = name.partition("/")
    domain, path = (first, rest) if slash and _is_domain(first) else (DEFAULT_DOMAIN, name)
    if domain == LEGACY_DEFAULT_DOMAIN:
        domain = DEFAULT_DOMAIN
    if domain == DEFAULT_DOMAIN and "/" not in path:
        path = f"{OFFICIAL_REPOSITORIES}/{path}"
    return f"{domain}/{path}"


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


#: gRPC status names as Go's ``codes.Code.String()`` spells the ones that differ from CamelCase.
_GO_CODE_NAMES = {"CANCELLED": "Canceled"}


def _go_error_text(err: cri_errors.CriError) -> str:
    """A failed PullImage as Go's CRI client reports it: an UNKNOWN status is its message alone (the
    client strips the code), any other ``rpc error: code = <Code> desc = <message>``."""
    if err.code == "UNKNOWN":
        return err.message
    name = _GO_CODE_NAMES.get(err.code) or "".join(part.capitalize() for part in err.code.split("_"))
    return f"rpc error: code = {name} desc = {err.message}"


def _aggregate(errors: Sequence[cri_errors.CriError]) -> str:
    """``utilerrors.NewAggregate(errs).Error()``: one message as it is, several de-duplicated in brackets."""
    unique = list(dict.fromkeys(_go_error_text(err) for err in errors))
    return unique[0] if len(unique) == 1 else "[" + ", ".join(unique) + "]"


def _pull_error(image: str, errors: Sequence[cri_errors.CriError]) -> tuple[str, str]:
    """``evalCRIPullErr``: RegistryUnavailable or SignatureValidationFailed when the (one) runtime error
    says so, else ErrImagePull with the aggregated errors."""
    text = errors[0].message if len(errors) == 1 else _aggregate(errors)
    for reason, what in (
        (ERR_REGISTRY_UNAVAILABLE, "the registry is unavailable"),
        (ERR_SIGNATURE_VALIDATION_FAILED, "the signature validation failed"),
    ):
        if text.startswith(reason):
            return reason, f"image pull failed for {image} because {what}{text[len(reason) :]}"
    return ERR_IMAGE_PULL, _aggregate(errors)


def _truncated_duration(seconds: float) -> str:
    """Go's ``Duration.Truncate(time.Millisecond).String()``."""
    ns = round(seconds * 1e9)
    return go_duration(ns // 1_000_000 / 1e3)


@attrs.frozen
class EnsuredImage:
    """What the container is created from: the runtime's image id, and the ImageStatus that found it
    present (or that read its size after the pull; None when that failed), so the image's user need not
    be asked for again."""

    ref: str
    image: pb.Image | None = None


class _PullFailed(Exception):
    """The pull failed: the runtime's errors (one per credential tried), or none when the pull was not
    attempted (``message`` says why)."""

    def __init__(self, errors: list[cri_errors.CriError], message: str = "") -> None:
        super().__init__(message or _aggregate(errors))
        self.errors = errors

    def reason_and_message(self, image: str) -> tuple[str, str]:
        return _pull_error(image, self.errors) if self.errors else (ERR_IMAGE_PULL, str(self))


@attrs.frozen
class _Pulled:
    ref: str
    image: pb.Image | None
    size: int
    duration: float


@attrs.define(eq=False)
class ImageManager:
    """Pull policy, credentials, backoff, concurrency and rate of image pulls.

    ``keyring`` holds the node's credentials (its docker config file and credential provider plugins:
    :func:`kubelet_trio.credentialprovider.node_keyring`); None means the pod's pull secrets only.
    ``serialize_pulls`` / ``max_parallel_pulls``: one pull at a time, or at most that many (None: no
    limit). ``pull_qps`` / ``pull_burst``: pulls started per second and their burst (``pull_qps`` 0: no
    limit; ``pull_burst`` below 1 with a limit refuses every pull, as Go's limiter does).
    """

    runtime: ImageService
    backoff: Backoff = attrs.Factory(lambda: Backoff(IMAGE_BACKOFF_INITIAL, IMAGE_BACKOFF_MAX))
    events: EventSink | None = None
    serialize_pulls: bool = defaults.SERIALIZE_IMAGE_PULLS
    keyring: DockerKeyring | None = None
    max_parallel_pulls: int | None = None
    pull_qps: float = 0.0
    pull_burst: int = defaults.REGISTRY_BURST
    _pull_slots: trio.CapacityLimiter | None = attrs.field(init=False)
    _pull_tokens: TokenBucket | None = attrs.field(init=False)
    # the last pull failure per backoff key, "<reason>: <message>", repeated while backing off
    _last_failure: dict[str, str] = attrs.field(factory=dict, init=False)

    def __attrs_post_init__(self) -> None:
        slots = 1 if self.serialize_pulls else self.max_parallel_pulls
        self._pull_slots = trio.CapacityLimiter(slots) if slots is not None and slots >= 1 else None
        limited = self.pull_qps > 0 and self.pull_burst >= 1
        self._pull_tokens = TokenBucket(self.pull_qps, self.pull_burst) if limited else None

    def _may_pull(self) -> bool:
        """Go's ``throttledImageService``: a token now, or the pull fails."""
        if self.pull_qps <= 0:
            return True
        return self._pull_tokens is not None and self._pull_tokens.try_acquire()

    def _event(self, pod: Pod, type_: str, reason: str, message: str) -> None:
        if self.events is not None:
            self.events(pod, type_, reason, message)

    @staticmethod
    def backoff_key(pod: Pod, container: Container) -> str:
        return f"{pod.uid}_{container.image or ''}"

    async def pull_credentials(self, image: str, pull_secrets: Sequence[PullSecret] = ()) -> list[AuthConfig]:
        """The credentials to try for ``image``, in order: the pod's pull secrets', then the node's (Go:
        ``makeLookupPullCredentialsFunc``). Raises :class:`~kubelet_trio.credentialprovider.PullSecretError`
        when a secret's docker config does not parse."""
        keyring = make_docker_keyring(pull_secrets, self.keyring)
        if keyring is None:
            return []
        return await keyring.lookup(repository_to_pull(image))

    async def _pull_with(
        self, spec: pb.ImageSpec, credentials: list[AuthConfig], sandbox_config: pb.PodSandboxConfig | None
    ) -> str:
        """Go's ``PullImage``: anonymously when there is no credential, else each in turn until one
        works. Raises :class:`_PullFailed` with every attempt's error."""
        if not credentials:
            try:
                return await self.runtime.pull_image(spec, None, sandbox_config)
            except cri_errors.CriError as err:
                raise _PullFailed([err]) from err
        errors: list[cri_errors.CriError] = []
        for attempt, credential in enumerate(credentials):
            try:
                return await self.runtime.pull_image(spec, credential.to_cri(), sandbox_config)
            except cri_errors.CriError as err:
                ctx = kv(image=spec.image, attempt=attempt, err=err)
                logger.log(vlevel(4), "image pull with a credential failed", extra=ctx)
                errors.append(err)
        raise _PullFailed(errors)

    async def _puller(
        self, spec: pb.ImageSpec, credentials: list[AuthConfig], sandbox_config: pb.PodSandboxConfig | None
    ) -> _Pulled:
        """One pull as Go's image puller runs it, once its turn came: the rate limit, the pull, then the
        image's size (best effort)."""
        if not self._may_pull():
            raise _PullFailed([], PULL_QPS_EXCEEDED)
        started_at = trio.current_time()
        ref = await self._pull_with(spec, credentials, sandbox_config)
        status = None
        try:
            status = await self.runtime.image_status(spec)
        except cri_errors.CriError as err:
            logger.log(vlevel(4), "cannot read the pulled image's size", extra=kv(image=spec.image, err=err))
        size = status.size if status is not None else 0
        reusable = status if status is not None and status.id == ref else None
        return _Pulled(ref, reusable, size, trio.current_time() - started_at)

    async def ensure_image_exists(
        self,
        pod: Pod,
        container: Container,
        sandbox_config: pb.PodSandboxConfig | None = None,
        *,
        pull_secrets: Sequence[PullSecret] = (),
    ) -> EnsuredImage:
        """Make sure the container's image is present per its pull policy; return its image ref (id).

        ``pull_secrets``: the pod's ``spec.imagePullSecrets`` as fetched by the caller (those it could
        not fetch left out: the caller reports them), in the pod's order."""
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

        # Go looks the credentials up before the backoff check (plugins run even while backing off)
        try:
            credentials = await self.pull_credentials(image, pull_secrets)
        except PullSecretError as err:
            logger.warning("cannot read the image pull secrets", extra=kv(**ctx, err=str(err)))
            raise ImageError(ERR_IMAGE_PULL, str(err)) from None

        key = self.backoff_key(pod, container)
        if self.backoff.is_in_backoff_since_update(key, trio.current_time()):
            msg = f'Back-off pulling image "{user_image}"'
            self._event(pod, "Normal", "BackOff", msg)
            last = self._last_failure.get(key)
            if last is not None:
                msg = f"{msg}: {last}"
            raise ImageError(ERR_IMAGE_PULL_BACKOFF, msg, self.backoff.expiry(key))
        self._last_failure.pop(key, None)

        self._event(pod, "Normal", "Pulling", f'Pulling image "{user_image}"')
        if credentials:
            logger.info("pulling image", extra=kv(**ctx, credentials=len(credentials)))
        else:
            logger.info("pulling image without credentials", extra=kv(**ctx))
        queued_at = trio.current_time()
        try:
            async with self._pull_slots or contextlib.nullcontext():
                pulled = await self._puller(spec, credentials, sandbox_config)
        except _PullFailed as failed:
            logger.warning("image pull failed", extra=kv(**ctx, err=str(failed)))
            self._event(pod, "Warning", "Failed", f'Failed to pull image "{user_image}": {failed}')
            self.backoff.next(key, trio.current_time())
            reason, msg = failed.reason_and_message(user_image)
            self._last_failure[key] = f"{reason}: {msg}"
            raise ImageError(reason, msg, self.backoff.expiry(key)) from (
                failed.errors[-1] if failed.errors else None
            )
        waited = trio.current_time() - queued_at
        self._event(
            pod,
            "Normal",
            "Pulled",
            f'Successfully pulled image "{user_image}" in {_truncated_duration(pulled.duration)} '
            f"({_truncated_duration(waited)} including waiting). Image size: {pulled.size} bytes.",
        )
        logger.info("pulled image", extra=kv(**ctx, ref=pulled.ref))
        self.backoff.gc()
        # Go keeps the last failures until the next pull of that key; forget those whose backoff is gone too
        for stale in [k for k in self._last_failure if not self.backoff.get(k)]:
            del self._last_failure[stale]
        return EnsuredImage(pulled.ref, pulled.image)
