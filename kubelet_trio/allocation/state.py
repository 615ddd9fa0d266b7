"""Resources per pod and container, checkpointed (Go: ``pkg/kubelet/allocation/state``).

Two files under ``<root-dir>`` use it: ``allocated_pods_state`` (what the kubelet admitted: the allocation
manager's) and ``actuated_pods_state`` (what it last applied to each container: the runtime manager's).

The file is Go's, in layout and checksum, so a Go kubelet reads ours and we read its::

    {"data":"{\\"entries\\":{\\"<uid>\\":{\\"ContainerResources\\":{\\"c\\":{\\"limits\\":{\\"cpu\\":\\"1\\"}}},
     \\"PodLevelResources\\":null}}}","checksum":N}

``data`` is the JSON of Go's ``PodResourceCheckpointInfo`` (``v1.ResourceRequirements`` per container,
quantities in canonical form, map keys sorted) as a string; ``checksum`` is Go's ``checksum.New(data)``:
FNV-32a over go-spew's ``%#v`` of that string, ``(string)<data>``. Pod-level resources
(``InPlacePodLevelResourcesVerticalScaling``, alpha) are not kept: written ``null``, ignored when read.

Writes are synchronous (the sync loop's admission writes, as Go's under its lock), atomic (a temporary
file renamed over the old one) and skipped when the checksum did not change. A file that does not parse or
whose checksum does not match is an error at start: Go refuses to start then ("please drain this node and
delete ... before restarting Kubelet"); here it is logged and the state starts empty.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import attrs

from kubelet_trio.api import Quantity
from kubelet_trio.api.container import ResourceRequirements
from kubelet_trio.logs import kv

__all__ = [
    "ACTUATED_PODS_STATE_FILE",
    "ALLOCATED_PODS_STATE_FILE",
    "CorruptCheckpoint",
    "ResourceState",
    "checksum",
    "decode",
    "encode",
    "go_json",
    "requirements_equal",
    "requirements_json",
]

logger = logging.getLogger(__name__)

ALLOCATED_PODS_STATE_FILE = "allocated_pods_state"
ACTUATED_PODS_STATE_FILE = "actuated_pods_state"

_FNV32_OFFSET, _FNV32_PRIME = 0x811C9DC5, 0x01000193

#: container name -> resources, per pod UID
PodResources = dict[str, ResourceRequirements]


class CorruptCheckpoint(Exception):
    """The file does not parse or its checksum does not match."""


def go_json(value: Any) -> str:
    """Go ``json.Marshal``'s text: compact, UTF-8, with ``<``, ``>`` and ``&`` escaped."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _fnv(value: int, text: str) -> int:
    """FNV-32a from ``value`` over ``text``'s UTF-8 (a stream: text may come in pieces)."""
    for byte in text.encode():
        value = ((value ^ byte) * _FNV32_PRIME) & 0xFFFFFFFF
    return value


_SPEW_PREFIX = _fnv(_FNV32_OFFSET, "(string)")


def checksum(data: str) -> int:
    """Go ``checksum.New(data)`` for a string: FNV-32a of ``(string)<data>``."""
    return _fnv(_SPEW_PREFIX, data)


def _resource_list(values: Mapping[str, Quantity] | None) -> dict[str, str] | None:
    if not values:
        return None
    return {name: values[name].canonical() for name in sorted(values)}


def requirements_json(res: ResourceRequirements) -> dict[str, Any]:
    """Go's ``json.Marshal`` of ``v1.ResourceRequirements`` (empty lists omitted)."""
    out: dict[str, Any] = {}
    if (limits := _resource_list(res.limits)) is not None:
        out["limits"] = limits
    if (requests := _resource_list(res.requests)) is not None:
        out["requests"] = requests
    if res.claims:
        out["claims"] = res.claims
    return out


def requirements_equal(a: ResourceRequirements | None, b: ResourceRequirements | None) -> bool:
    """Go ``apiequality.Semantic.DeepEqual`` of two requirements: quantities by value, an empty list as
    an absent one (the API server drops empty lists, so both read back the same)."""
    a = a or ResourceRequirements()
    b = b or ResourceRequirements()
    return (
        dict(a.limits or {}) == dict(b.limits or {})
        and dict(a.requests or {}) == dict(b.requests or {})
        and (a.claims or None) == (b.claims or None)
    )


def _same_pod(a: Mapping[str, ResourceRequirements], b: Mapping[str, ResourceRequirements]) -> bool:
    return a.keys() == b.keys() and all(requirements_equal(a[name], b[name]) for name in a)


def _pod_json(containers: PodResources) -> str:
    """One pod's entry of the checkpoint's ``data``, as Go marshals it."""
    return go_json(
        {
            "ContainerResources": {name: requirements_json(res) for name, res in sorted(containers.items())},
            "PodLevelResources": None,
        }
    )


_HEAD, _TAIL = '{"entries":{', "}}"


def _entry(uid: str, containers: PodResources) -> str:
    """One pod's ``"uid":{...}`` in the checkpoint's ``data``, as Go marshals it."""
    return f"{go_json(uid)}:{_pod_json(containers)}"


def _data(parts: Sequence[str]) -> str:
    """The checkpoint's ``data``, Go's marshalling of ``{"entries": ...}`` with the pods' entries in UID
    order (compact JSON is the concatenation of its parts)."""
    return _HEAD + ",".join(parts) + _TAIL if parts else "{}"


def _file(data: str, value: int | None = None) -> bytes:
    value = checksum(data) if value is None else value
    return json.dumps({"data": data, "checksum": value}, separators=(",", ":")).encode()


def encode(entries: Mapping[str, PodResources]) -> bytes:
    """The checkpoint file for ``entries`` (pod UID -> container name -> resources)."""
    return _file(_data([_entry(uid, entries[uid]) for uid in sorted(entries)]))


def _quantities(raw: Any, what: str) -> dict[str, Quantity] | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise CorruptCheckpoint(f"{what}: not an object")
    return {str(k): Quantity.from_json(v) for k, v in raw.items()}


def decode(raw: bytes) -> dict[str, PodResources]:
    """Read a checkpoint (ours or a Go kubelet's); :class:`CorruptCheckpoint` when it is not one."""
    try:
        document = json.loads(raw)
        data = document["data"]
        stored = document.get("checksum", 0)
        if not isinstance(data, str) or type(stored) is not int or stored != checksum(data):
            raise CorruptCheckpoint("checkpoint is corrupted")
        entries = json.loads(data).get("entries") or {}
        result: dict[str, PodResources] = {}
        for uid, info in entries.items():
            containers = (info or {}).get("ContainerResources") or {}
            result[str(uid)] = {
                str(name): ResourceRequirements(
                    limits=_quantities((res or {}).get("limits"), "limits"),
                    requests=_quantities((res or {}).get("requests"), "requests"),
                    claims=(res or {}).get("claims"),
                )
                for name, res in containers.items()
            }
    except CorruptCheckpoint:
        raise
    except Exception as err:  # any shape or encoding problem of the file
        raise CorruptCheckpoint(f"failed to read checkpoint: {err}") from err
    return result


@attrs.define(eq=False)
class ResourceState:
    """Resources per pod UID and container name, written to ``<directory>/<name>`` on each change
    (``directory`` None: in memory only, Go's ``NewStateMemory``)."""

    directory: str | None
    name: str
    _entries: dict[str, PodResources] = attrs.field(init=False, factory=dict)
    #: each pod's part of the file, kept between writes: a change re-encodes one pod, not the node's
    _pod_json: dict[str, str] = attrs.field(init=False, factory=dict)
    #: the parts of the last checksum, in order, each with the checksum's state after it: the next one
    #: starts at the first part that differs (FNV is a stream; the sum of the whole file took a byte loop)
    _summed: list[tuple[str, int]] = attrs.field(init=False, factory=list)
    _last_data: str | None = attrs.field(init=False, default=None)  # what the file holds
    _batches: int = attrs.field(init=False, default=0)  # open :meth:`batch` blocks
    _unwritten: bool = attrs.field(init=False, default=False)  # a change inside them

    def __attrs_post_init__(self) -> None:
        path = self.path
        if path is None:
            return
        try:
            with open(path, "rb") as file:
                raw = file.read()
        except FileNotFoundError:
            return  # written at the first change (the root dir is the kubelet's to make, 0750)
        try:
            self._entries = decode(raw)
        except CorruptCheckpoint as err:
            logger.error("could not restore state from checkpoint", extra=kv(path=path, error=err))
            return
        self._last_data = json.loads(raw)["data"]
        logger.info("restored pod resource state from checkpoint", extra=kv(path=path))

    @property
    def path(self) -> str | None:
        return None if self.directory is None else os.path.join(self.directory, self.name)

    def get_container(self, uid: str, container: str) -> ResourceRequirements | None:
        return self._entries.get(uid, {}).get(container)

    def get_pod(self, uid: str) -> Mapping[str, ResourceRequirements] | None:
        return self._entries.get(uid)

    def uids(self) -> list[str]:
        return list(self._entries)

    def set_container(self, uid: str, container: str, resources: ResourceRequirements) -> None:
        pod = self._entries.setdefault(uid, {})
        if container in pod and requirements_equal(pod[container], resources):
            return  # the file would not change (quantities are written canonically)
        pod[container] = resources
        self._pod_json.pop(uid, None)
        self._store()

    def set_pod(self, uid: str, resources: Mapping[str, ResourceRequirements]) -> None:
        old = self._entries.get(uid)
        if old is not None and _same_pod(old, resources):
            return
        self._entries[uid] = dict(resources)
        self._pod_json.pop(uid, None)
        self._store()

    def remove_pod(self, uid: str) -> None:
        self._pod_json.pop(uid, None)
        if self._entries.pop(uid, None) is not None:
            self._store()

    def remove_orphaned_pods(self, remaining: Iterable[str]) -> None:
        keep = set(remaining)
        gone = [uid for uid in self._entries if uid not in keep]
        for uid in gone:
            del self._entries[uid]
            self._pod_json.pop(uid, None)
        if gone:
            self._store()

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """The changes made inside are written once, at the end: admitting or removing n pods together
        takes one checksum and one fsync, not n (each sums the whole file, and an fsync stalls the event
        loop). The caller does not yield inside, so no task acts on a change before it is on disk."""
        self._batches += 1
        try:
            yield
        finally:
            self._batches -= 1
            if not self._batches and self._unwritten:
                self._store()

    def _pod_part(self, uid: str) -> str:
        part = self._pod_json.get(uid)
        if part is None:
            part = self._pod_json[uid] = _entry(uid, self._entries[uid])
        return part

    def _checksum(self, parts: list[str]) -> int:
        """:func:`checksum` of ``_data(parts)``, resumed after the parts the last one shares."""
        if not parts:
            return checksum("{}")
        summed, same = self._summed, 0
        while same < min(len(parts), len(summed)) and summed[same][0] is parts[same]:
            same += 1
        del summed[same:]
        state = summed[-1][1] if summed else _fnv(_SPEW_PREFIX, _HEAD)
        for i in range(same, len(parts)):
            state = _fnv(state, "," + parts[i] if i else parts[i])
            summed.append((parts[i], state))
        return _fnv(state, _TAIL)

    def _store(self) -> None:
        path = self.path
        if path is None:
            return
        if self._batches:
            self._unwritten = True
            return
        self._unwritten = False
        parts = [self._pod_part(uid) for uid in sorted(self._entries)]
        data = _data(parts)
        if data == self._last_data:
            return  # Go: no changes, no write
        blob = _file(data, self._checksum(parts))
        try:
            os.makedirs(os.path.dirname(path), mode=0o750, exist_ok=True)
            temporary = path + ".tmp"
            with open(temporary, "wb") as file:
                file.write(blob)
                file.flush()
                os.fsync(file.fileno())
            os.replace(temporary, path)
        except OSError as err:
            logger.error("failed to save pod resource checkpoint", extra=kv(path=path, error=err))
            return
        self._last_data = data
