"""Eviction signals and thresholds (Go: ``pkg/kubelet/eviction/api/types.go`` and ``ParseThresholdConfig``
in ``eviction/helpers.go``).

A threshold is ``signal < value``: the value is a quantity (``100Mi``, ``1000`` inodes) or a percentage
of the signal's capacity. A hard threshold has no grace period; a soft one must be observed for its grace
period before it evicts. ``minimum reclaim`` asks the manager to keep reclaiming until the signal is that
far beyond the threshold, so a node does not bounce on its edge.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from kubelet_trio.api import Quantity, QuantityError

__all__ = [
    "ALLOCATABLE_MEMORY_AVAILABLE",
    "ALL_SIGNALS",
    "IMAGEFS_AVAILABLE",
    "IMAGEFS_INODES_FREE",
    "MEMORY_AVAILABLE",
    "MEMORY_SIGNALS",
    "NODEFS_AVAILABLE",
    "NODEFS_INODES_FREE",
    "PID_AVAILABLE",
    "EvictionConfigError",
    "Threshold",
    "ThresholdValue",
    "parse_thresholds",
]

MEMORY_AVAILABLE = "memory.available"
#: allocatable less what the pods together use (``kubepods``' limit less its working set)
ALLOCATABLE_MEMORY_AVAILABLE = "allocatableMemory.available"
NODEFS_AVAILABLE = "nodefs.available"
NODEFS_INODES_FREE = "nodefs.inodesFree"
IMAGEFS_AVAILABLE = "imagefs.available"
IMAGEFS_INODES_FREE = "imagefs.inodesFree"
PID_AVAILABLE = "pid.available"
#: The signals this kubelet observes (Go also has containerfs.*).
ALL_SIGNALS = (
    MEMORY_AVAILABLE,
    ALLOCATABLE_MEMORY_AVAILABLE,
    NODEFS_AVAILABLE,
    NODEFS_INODES_FREE,
    IMAGEFS_AVAILABLE,
    IMAGEFS_INODES_FREE,
    PID_AVAILABLE,
)
#: memory pressure's signals: evicted for first, ranked alike
MEMORY_SIGNALS = (MEMORY_AVAILABLE, ALLOCATABLE_MEMORY_AVAILABLE)


class EvictionConfigError(ValueError):
    """An invalid eviction setting; the message names the setting and the signal."""


@attrs.frozen
class ThresholdValue:
    """A quantity (``quantity``, in bytes / inodes / pids) or a fraction of capacity (``percentage``)."""

    quantity: Quantity | None = None
    percentage: float = 0.0

    def amount(self, capacity: int) -> int:
        """Go ``GetThresholdQuantity``: the quantity, or the percentage of ``capacity``."""
        if self.quantity is not None:
            return self.quantity.int_value()
        return int(capacity * self.percentage)

    def __str__(self) -> str:
        if self.quantity is not None:
            return self.quantity.canonical()
        return f"{self.percentage * 100:g}%"


@attrs.frozen
class Threshold:
    """``signal < value``; hard when ``grace_period`` is 0 (seconds)."""

    signal: str
    value: ThresholdValue
    grace_period: float = 0.0
    min_reclaim: ThresholdValue | None = None

    @property
    def hard(self) -> bool:
        return self.grace_period == 0


def _parse_value(setting: str, signal: str, text: str, *, minimum_reclaim: bool = False) -> ThresholdValue:
    text = str(text).strip()
    if text.endswith("%"):
        try:
            percentage = float(text[:-1]) / 100
        except ValueError:
            raise EvictionConfigError(f"{setting}: {signal}: {text!r} is not a percentage") from None
        if minimum_reclaim and percentage <= 0:
            raise EvictionConfigError(f"{setting}: {signal}: percentage {text} must be positive")
        if not 0 <= percentage <= 1:
            raise EvictionConfigError(f"{setting}: {signal}: percentage {text} must be within 0% and 100%")
        return ThresholdValue(percentage=percentage)
    try:
        quantity = Quantity(text)
    except QuantityError:
        raise EvictionConfigError(
            f"{setting}: {signal}: {text!r} is not a quantity or a percentage"
        ) from None
    if quantity.value < 0 or (not minimum_reclaim and quantity.is_zero()):
        raise EvictionConfigError(f"{setting}: {signal}: {text} must be positive")
    return ThresholdValue(quantity=quantity)


def _check_signal(setting: str, signal: str) -> None:
    if signal not in ALL_SIGNALS:
        raise EvictionConfigError(
            f"{setting}: unsupported eviction signal {signal!r} (expected {', '.join(ALL_SIGNALS)})"
        )


def _statements(setting: str, statements: Mapping[str, str]) -> list[Threshold]:
    out = []
    for signal, text in statements.items():
        _check_signal(setting, signal)
        if str(text).strip() in ("0%", "100%"):
            continue  # Go ignores them: never met / always met
        out.append(Threshold(signal, _parse_value(setting, signal, text)))
    return out


def parse_thresholds(
    hard: Mapping[str, str],
    soft: Mapping[str, str] = {},
    soft_grace_periods: Mapping[str, float] = {},
    minimum_reclaim: Mapping[str, str] = {},
    *,
    enforce_node_allocatable: bool = False,
) -> tuple[Threshold, ...]:
    """Go ``ParseThresholdConfig``: hard thresholds, then soft ones with their grace periods (seconds,
    each required), each with its signal's minimum reclaim; with ``enforce_node_allocatable`` (``pods``
    in ``enforceNodeAllocatable``) each hard ``memory.available`` threshold also holds for
    ``allocatableMemory.available``, so pods are evicted before they reach ``kubepods``' limit, where the
    kernel would kill at random."""
    results = _statements("evictionHard", hard)
    for signal, period in soft_grace_periods.items():
        _check_signal("evictionSoftGracePeriod", signal)
        if period < 0:
            raise EvictionConfigError(f"evictionSoftGracePeriod: {signal}: {period}s must not be negative")
    for threshold in _statements("evictionSoft", soft):
        if threshold.signal not in soft_grace_periods:
            raise EvictionConfigError(
                "evictionSoftGracePeriod: a grace period must be given for the soft threshold "
                + threshold.signal
            )
        results.append(attrs.evolve(threshold, grace_period=float(soft_grace_periods[threshold.signal])))
    reclaims = {}
    for signal, text in minimum_reclaim.items():
        _check_signal("evictionMinimumReclaim", signal)
        reclaims[signal] = _parse_value("evictionMinimumReclaim", signal, text, minimum_reclaim=True)
    results = [
        attrs.evolve(t, min_reclaim=reclaims[t.signal]) if t.signal in reclaims else t for t in results
    ]
    if enforce_node_allocatable:
        results += [
            attrs.evolve(t, signal=ALLOCATABLE_MEMORY_AVAILABLE)
            for t in results
            if t.signal == MEMORY_AVAILABLE and t.hard
        ]
    return tuple(results)
