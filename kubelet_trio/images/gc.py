"""Image garbage collection (Go: ``pkg/kubelet/images/image_gc_manager.go`` and ``StartGarbageCollection``).

The manager keeps a record per image: when it was first detected and when a container (running or not)
last used it. Every :data:`IMAGE_GC_PERIOD` it reads the image filesystem; at or above
``high_threshold_percent`` it frees ``capacity * (100 - low) / 100 - available`` bytes by removing images
least recently used first (ties: first detected first), skipping

- images a container uses (they were just marked used),
- images younger than ``min_age`` (just pulled, about to be used),
- the sandbox ("pause") image and images the runtime pins.

It stops once the sizes of the removed images add up to the amount. Freeing less is a Warning event
``FreeDiskSpaceFailed`` on the Node; a collection that fails twice in a row is ``ImageGCFailed``.
:meth:`ImageGCManager.delete_unused_images` frees every eligible image: the eviction manager's reclaim.

Detection runs every :data:`IMAGE_DETECTION_PERIOD` (30 s; Go detects every 5 min and refreshes its image
list every 30 s): the finer the last-used times, the better the LRU order. Images present at the first
detection count as detected long ago, as in Go, so a restart does not reset their age.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
from collections.abc import Callable, Collection

import attrs
import trio
import trio_util

from kubelet_trio import defaults
from kubelet_trio.cri import errors as cri_errors
from kubelet_trio.cri.gen.runtime import v1 as pb
from kubelet_trio.cri.runtime import Runtime
from kubelet_trio.images.imagefs import ImageFsError, ImageFsNotVisible, ImageFsStatsProvider
from kubelet_trio.logs import kv

__all__ = [
    "DEFAULT_HIGH_THRESHOLD_PERCENT",
    "DEFAULT_LOW_THRESHOLD_PERCENT",
    "DEFAULT_MIN_AGE",
    "FREE_DISK_SPACE_FAILED",
    "IMAGE_DETECTION_PERIOD",
    "IMAGE_GC_FAILED",
    "IMAGE_GC_PERIOD",
    "INVALID_DISK_CAPACITY",
    "ImageGCError",
    "ImageGCManager",
    "ImageGCPolicy",
    "NodeEventSink",
]

logger = logging.getLogger(__name__)

IMAGE_GC_PERIOD = 300.0  # Go: ImageGCPeriod
IMAGE_DETECTION_PERIOD = 30.0
DEFAULT_HIGH_THRESHOLD_PERCENT = defaults.IMAGE_GC_HIGH_THRESHOLD_PERCENT
DEFAULT_LOW_THRESHOLD_PERCENT = defaults.IMAGE_GC_LOW_THRESHOLD_PERCENT
DEFAULT_MIN_AGE = defaults.IMAGE_MINIMUM_GC_AGE
FREE_DISK_SPACE_FAILED = "FreeDiskSpaceFailed"
IMAGE_GC_FAILED = "ImageGCFailed"
INVALID_DISK_CAPACITY = "InvalidDiskCapacity"

NodeEventSink = Callable[[str, str, str], None]
"""``(type, reason, message)`` of an event about the Node."""


class ImageGCError(Exception):
    """A collection that could not run or could not free enough; the message says which."""


def _percent(name: str) -> Callable[[object, attrs.Attribute[int], int], None]:
    def check(_: object, __: attrs.Attribute[int], value: int) -> None:
        if not 0 <= value <= 100:
            raise ValueError(f"{name}: {value} must be in the range 0-100")

    return check


@attrs.frozen
class ImageGCPolicy:
    """The band the image filesystem's usage is kept in (percent) and the youngest removable image (s)."""

    high_threshold_percent: int = attrs.field(
        default=DEFAULT_HIGH_THRESHOLD_PERCENT, validator=_percent("imageGCHighThresholdPercent")
    )
    low_threshold_percent: int = attrs.field(
        default=DEFAULT_LOW_THRESHOLD_PERCENT, validator=_percent("imageGCLowThresholdPercent")
    )
    min_age: float = DEFAULT_MIN_AGE

    def __attrs_post_init__(self) -> None:
        if self.low_threshold_percent > self.high_threshold_percent:
            raise ValueError(
                f"imageGCLowThresholdPercent ({self.low_threshold_percent}) must not be greater than "
                f"imageGCHighThresholdPercent ({self.high_threshold_percent})"
            )
        if self.min_age < 0:
            raise ValueError(f"imageMinimumGCAge: {self.min_age} must not be negative")

    @property
    def enabled(self) -> bool:
        """Go: a high threshold of 100 turns disk-usage collection off."""
        return self.high_threshold_percent < 100


@attrs.define
class _ImageRecord:
    first_detected: float  # trio time; -inf: present at the first detection
    last_used: float = -math.inf
    size: int = 0
    pinned: bool = False
    names: tuple[str, ...] = ()


def _config_sandbox_image(status: pb.StatusResponse) -> str:
    """containerd's verbose Status carries its CRI config, whose ``sandboxImage`` is the pause image."""
    try:
        config = json.loads(status.info.get("config", "") or "{}")
    except ValueError:
        return ""
    image = config.get("sandboxImage", "") if isinstance(config, dict) else ""
    return image if isinstance(image, str) else ""


@attrs.define(eq=False)
class ImageGCManager:
    """Image GC for one node's runtime; ``run`` is its detection and collection loops."""

    runtime: Runtime
    image_fs: ImageFsStatsProvider
    policy: ImageGCPolicy = attrs.Factory(ImageGCPolicy)
    events: NodeEventSink | None = None
    #: images never collected besides the runtime's sandbox image and pinned images (references or ids)
    keep: Collection[str] = ()
    gc_period: float = IMAGE_GC_PERIOD
    detection_period: float = IMAGE_DETECTION_PERIOD
    _records: dict[str, _ImageRecord] = attrs.field(init=False, factory=dict)
    _initialized: bool = attrs.field(init=False, default=False)
    _lock: trio.Lock = attrs.field(init=False, factory=trio.Lock)
    _failed_before: bool = attrs.field(init=False, default=False)
    _not_visible_logged: bool = attrs.field(init=False, default=False)

    def _event(self, type_: str, reason: str, message: str) -> None:
        if self.events is not None:
            self.events(type_, reason, message)

    # -- the loops ----------------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Detect images now and every ``detection_period``; collect every ``gc_period``."""
        async with trio.open_nursery() as nursery:
            await nursery.start(self._detection_loop)
            if self.policy.enabled:
                nursery.start_soon(self._gc_loop)
            task_status.started()

    async def _detection_loop(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        started = False
        async with contextlib.aclosing(trio_util.periodic(self.detection_period)) as ticks:
            async for _ in ticks:
                try:
                    await self.detect_images()
                except cri_errors.CriError as err:
                    logger.warning("failed to detect images", extra=kv(err=err))
                if not started:
                    started = True
                    task_status.started()

    async def _gc_loop(self) -> None:
        async with contextlib.aclosing(trio_util.periodic(self.gc_period)) as ticks:
            async for _ in ticks:
                await self.garbage_collect_once()

    async def garbage_collect_once(self) -> bool:
        """One collection as the kubelet's loop runs it: errors logged, an event from the second in a row."""
        try:
            await self.garbage_collect()
        except ImageGCError as err:
            if self._failed_before:
                logger.error("image garbage collection failed multiple times in a row", extra=kv(err=err))
                self._event("Warning", IMAGE_GC_FAILED, str(err))
            else:
                logger.error("image garbage collection failed once", extra=kv(err=err))
            self._failed_before = True
            return False
        self._failed_before = False
        return True

    # -- detection ----------------------------------------------------------------------------------

    async def detect_images(self) -> None:
        """One detection (the loop's): new images are recorded, used ones marked used now."""
        async with self._lock:
            await self._detect_images(trio.current_time() if self._initialized else -math.inf)
        self._initialized = True

    async def _images_in_use(self) -> set[str]:
        """Ids and references of the images any container of the runtime uses, running or not."""
        used: set[str] = set()
        for container in await self.runtime.list_containers():
            if container.image_ref:
                used.add(container.image_ref)
            if container.image is not None and container.image.image:
                used.add(container.image.image)
        return used

    async def _never_collected(self) -> set[str]:
        keep = set(self.keep)
        try:
            sandbox_image = _config_sandbox_image(await self.runtime.status(verbose=True))
        except cri_errors.CriError as err:
            logger.debug("runtime status unavailable", extra=kv(err=err))
            sandbox_image = ""
        if sandbox_image:
            keep.add(sandbox_image)
        return keep

    async def _detect_images(self, detect_time: float) -> set[str]:
        """Record new images, mark the used ones used now, forget removed ones; returns the ids in use."""
        images = await self.runtime.list_images()
        used_refs = await self._images_in_use()
        now = trio.current_time()
        current: set[str] = set()
        in_use: set[str] = set()
        for image in images:
            current.add(image.id)
            record = self._records.get(image.id)
            if record is None:
                record = self._records[image.id] = _ImageRecord(first_detected=detect_time)
                logger.debug("image detected", extra=kv(image=image.id, size=image.size))
            names = (image.id, *image.repo_tags, *image.repo_digests)
            if any(name in used_refs for name in names):
                record.last_used = now
                in_use.add(image.id)
            record.size = image.size
            record.pinned = image.pinned
            record.names = names
        for gone in set(self._records) - current:
            del self._records[gone]
        return in_use

    # -- collection ---------------------------------------------------------------------------------

    async def garbage_collect(self) -> None:
        """Bring the image filesystem below the low threshold if it is at or above the high one (nothing to
        do when its mountpoint does not exist here)."""
        try:
            fs = await self.image_fs.image_fs_stats()
        except ImageFsNotVisible as err:
            if not self._not_visible_logged:  # once: it will not change
                self._not_visible_logged = True
                logger.info("image filesystem not visible, no disk-usage image collection", extra=kv(err=err))
            return
        except ImageFsError as err:
            raise ImageGCError(f"failed to get image filesystem stats: {err}") from err
        capacity, available = fs.capacity, fs.available
        if available > capacity:
            logger.warning(
                "image filesystem available exceeds capacity",
                extra=kv(available=available, capacity=capacity),
            )
            available = capacity
        if capacity <= 0:
            message = f"invalid capacity {capacity} on image filesystem at mount point {fs.mountpoint!r}"
            self._event("Warning", INVALID_DISK_CAPACITY, message)
            raise ImageGCError(message)
        usage = 100 - available * 100 // capacity
        if usage < self.policy.high_threshold_percent:
            return
        to_free = capacity * (100 - self.policy.low_threshold_percent) // 100 - available
        logger.info(
            "image filesystem over the high threshold, freeing space",
            extra=kv(
                mountpoint=fs.mountpoint,
                usage=usage,
                high_threshold=self.policy.high_threshold_percent,
                low_threshold=self.policy.low_threshold_percent,
                amount_to_free=to_free,
            ),
        )
        freed = await self._free_space(to_free)
        if freed < to_free:
            message = (
                f"Failed to garbage collect required amount of images. Attempted to free {to_free} bytes, "
                f"but only found {freed} bytes eligible to free."
            )
            self._event("Warning", FREE_DISK_SPACE_FAILED, message)
            raise ImageGCError(message)

    async def delete_unused_images(self) -> int:
        """Remove every image eligible for collection; returns the bytes freed (Go: DeleteUnusedImages)."""
        return await self._free_space(None)

    async def _free_space(self, to_free: int | None) -> int:
        """Remove eligible images, least recently used first, until ``to_free`` bytes (None: all)."""
        async with self._lock:
            free_time = trio.current_time()
            try:
                in_use = await self._detect_images(free_time)
            except cri_errors.CriError as err:
                raise ImageGCError(f"failed to detect images: {err}") from err
            keep = await self._never_collected()
            candidates = sorted(
                self._records.items(), key=lambda item: (item[1].last_used, item[1].first_detected)
            )
            freed = 0
            errors: list[str] = []
            for image_id, record in candidates:
                if image_id in in_use or record.last_used >= free_time:
                    continue
                if record.pinned or any(name in keep for name in record.names):
                    continue
                if free_time - record.first_detected < self.policy.min_age:
                    continue
                logger.info("removing image to free bytes", extra=kv(image=image_id, size=record.size))
                try:
                    await self.runtime.remove_image(pb.ImageSpec(image=image_id))
                except cri_errors.CriError as err:
                    logger.warning("failed to remove image", extra=kv(image=image_id, err=err))
                    errors.append(f"{image_id}: {err}")
                    continue
                del self._records[image_id]
                freed += record.size
                if to_free is not None and freed >= to_free:
                    break
        if errors:
            wanted = "all unused images" if to_free is None else f"{to_free} bytes"
            raise ImageGCError(
                f"wanted to free {wanted}, but freed {freed} bytes with errors in image deletion: "
                + "; ".join(errors)
            )
        return freed

    def records(self) -> dict[str, tuple[float, float, int]]:
        """Image id -> (first detected, last used, size): what the LRU order is computed from."""
        return {i: (r.first_detected, r.last_used, r.size) for i, r in self._records.items()}
