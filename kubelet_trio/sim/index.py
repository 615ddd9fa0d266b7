"""A label index for the simulated runtime, so label-selector lists cost O(matches), not O(all).

The kubelet asks for one pod's sandboxes and containers by the ``io.kubernetes.pod.uid`` label on every
relist; with a thousand pods a linear scan per call made each relist quadratic.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import attrs


@attrs.define(eq=False)
class LabelIndex:
    """``(key, value) -> ids``, plus the insertion order of ids (which is creation order)."""

    _by_pair: dict[tuple[str, str], set[str]] = attrs.Factory(dict)
    _order: dict[str, int] = attrs.Factory(dict)
    _next: int = 0

    def add(self, object_id: str, labels: Mapping[str, str]) -> None:
        self._order[object_id] = self._next
        self._next += 1
        for pair in labels.items():
            self._by_pair.setdefault(pair, set()).add(object_id)

    def remove(self, object_id: str, labels: Mapping[str, str]) -> None:
        self._order.pop(object_id, None)
        for pair in labels.items():
            ids = self._by_pair.get(pair)
            if ids is not None:
                ids.discard(object_id)
                if not ids:
                    del self._by_pair[pair]

    def select(self, selector: Mapping[str, str]) -> list[str] | None:
        """Ids carrying every pair of ``selector``, in creation order; None for an empty selector."""
        if not selector:
            return None
        sets = sorted((self._by_pair.get(pair, set()) for pair in selector.items()), key=len)
        found: Iterable[str] = set.intersection(*sets) if len(sets) > 1 else sets[0]
        return sorted(found, key=self._order.__getitem__)
