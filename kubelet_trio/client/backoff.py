"""Retry delays for loops that talk to the API server: doubling from ``initial`` up to ``maximum``, each
stretched by up to 100 % when given a random source (so a fleet of nodes does not retry in step)."""

from __future__ import annotations

import random

import attrs

__all__ = ["DoublingBackoff"]


@attrs.define
class DoublingBackoff:
    initial: float
    maximum: float
    rng: random.Random | None = None
    _current: float = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self._current = self.initial

    def next(self) -> float:
        """The delay before the next attempt; the one after it doubles."""
        delay = self._current * (1 + self.rng.random()) if self.rng is not None else self._current
        self._current = min(self._current * 2, self.maximum)
        return delay

    def reset(self) -> None:
        """After a success: start again from ``initial``."""
        self._current = self.initial
