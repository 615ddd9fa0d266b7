"""Unknown fields of a decoded manifest, found the way the API server's strict field validation finds them.

Decoding (:mod:`kubelet_trio.api.serialize`) keeps members a model does not define in ``extra`` so that they
pass through untouched, and types some subtrees only as opaque JSON (``affinity``, ``seccompProfile``,
volume sources the kubelet does not mount). Whether a member is *unknown* - a typo such as ``restartPolcy``
rather than a field of a newer API or one the models leave opaque - is decided here instead, against the
complete field table of core/v1 Pod (:mod:`kubelet_trio.api.openapi_fields`). The paths are the ones the
API server names (``spec.containers[0].comand``). The same walk finds values of the wrong JSON type
everywhere, opaque subtrees included (``affinity: []``), which Go's decoding of the typed structs refuses.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from kubelet_trio.api.errors import DecodeError, FieldPath, MapKey
from kubelet_trio.api.openapi_fields import KUBERNETES_VERSION, TYPES

__all__ = ["KUBERNETES_VERSION", "type_errors", "unknown_fields"]

#: Members typed ``string`` in the table that are quantities, which JSON may also give as numbers
#: (``cpu: 1``): the members themselves and the values of maps of them.
QUANTITY_FIELDS = frozenset(
    {
        "limits",
        "requests",
        "overhead",
        "sizeLimit",
        "divisor",
        "capacity",
        "allocatable",
        "allocatedResources",
    }
)
_LEAVES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
}


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _fits(value: Any, tp: str, quantity: bool) -> bool:
    if quantity and tp == "string":
        return isinstance(value, str | int | float) and not isinstance(value, bool)
    kinds = _LEAVES[tp]
    return isinstance(value, kinds) and (bool in kinds or not isinstance(value, bool))


def _walk(data: Any, type_name: str, path: FieldPath) -> Iterator[tuple[FieldPath, str | None]]:
    """(path, None) for an unknown member, (path, message) for a value of the wrong type."""
    stack: list[tuple[Any, str, FieldPath, bool]] = [(data, type_name, path, False)]
    while stack:
        value, tp, where, quantity = stack.pop()
        if not tp:
            yield where, None  # an unknown member, reported in document order
            continue
        if value is None or tp == "any":
            continue  # null is every type's zero value
        children: list[tuple[Any, str, FieldPath, bool]] = []
        if tp.startswith("list["):
            if not isinstance(value, list):
                yield where, f"expected array, got {_json_type(value)}"
                continue
            children = [(v, tp[5:-1], (*where, i), quantity) for i, v in enumerate(value)]
        elif tp.startswith("map["):
            if not isinstance(value, dict):
                yield where, f"expected object, got {_json_type(value)}"
                continue
            children = [(v, tp[4:-1], (*where, MapKey(k)), quantity) for k, v in value.items()]
        elif tp in _LEAVES:
            if not _fits(value, tp, quantity):
                yield where, f"expected {tp}, got {_json_type(value)}"
        elif not isinstance(value, dict):
            yield where, f"expected object, got {_json_type(value)}"
        else:
            fields = TYPES[tp]
            for key, member in value.items():
                member_type = fields.get(key, "")
                children.append((member, member_type, (*where, key), key in QUANTITY_FIELDS))
        stack.extend(reversed(children))


def unknown_fields(data: Any, type_name: str = "Pod", path: FieldPath = ()) -> list[FieldPath]:
    """Paths of the object members in ``data`` that type ``type_name`` (a key of ``TYPES``, a
    ``list[T]``/``map[T]`` spelling or a leaf kind) does not define, in document order."""
    return [where for where, problem in _walk(data, type_name, path) if problem is None]


def type_errors(data: Any, type_name: str = "Pod", path: FieldPath = ()) -> list[DecodeError]:
    """Every value in ``data`` whose JSON type does not fit the API's (Go's JSON decoding would refuse
    it), including inside the subtrees the models keep opaque; in document order."""
    return [DecodeError(where, problem) for where, problem in _walk(data, type_name, path) if problem]
