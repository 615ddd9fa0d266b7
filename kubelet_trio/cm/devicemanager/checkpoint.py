"""The device manager's checkpoint, ``<root-dir>/device-plugins/kubelet_internal_checkpoint``
(Go: ``checkpoint/checkpoint.go``): which devices each container holds, so that a restarted kubelet
gives running pods their devices again and never hands them to another pod.

The file is Go's, byte for byte in layout and checksum, so a Go kubelet reads ours and we read its:
``{"Data":{"PodDeviceEntries":[...],"RegisteredDevices":{...}},"Checksum":N}``, device IDs grouped by NUMA
node (``"-1"``: no topology), the plugin's ``Allocate`` answer as base64 protobuf (``null`` until it was
called). The checksum is Go's ``checkpointmanager/checksum``: FNV-32a over go-spew's ``%#v`` rendering
of the ``Data`` struct, which :func:`go_spew` reproduces for these types.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
from typing import Any

from kubelet_trio.cm.devicemanager.errors import DeviceManagerError
from kubelet_trio.cm.devicemanager.pod_devices import DeviceEntry, PodDevices
from kubelet_trio.cri.gen import v1beta1 as dp

__all__ = [
    "CHECKPOINT_NAME",
    "CorruptCheckpoint",
    "DeviceEntry",
    "PodDevices",
    "checksum",
    "decode",
    "encode",
    "go_spew",
    "read",
    "write",
]

CHECKPOINT_NAME = "kubelet_internal_checkpoint"
NO_TOPOLOGY = "-1"

_FNV32_OFFSET, _FNV32_PRIME = 0x811C9DC5, 0x01000193


class CorruptCheckpoint(DeviceManagerError):
    """The file does not parse or its checksum does not match: it is discarded."""


# --- Go's checksum ---------------------------------------------------------------------------------


def _nil_or(value: Any, render: str) -> str:
    return "<nil>" if value is None else render


def _strings(values: list[str] | None) -> str:
    """A ``[]string`` inside a map: no type prefix, elements unquoted."""
    return _nil_or(values, "[" + " ".join(values or ()) + "]")


def _entry(entry: dict[str, Any]) -> str:
    per_numa: dict[str, list[str] | None] | None = entry["DeviceIDs"]
    numa = _nil_or(
        per_numa,
        "map["
        + " ".join(f"{k}:{_strings(v)}" for k, v in sorted((per_numa or {}).items(), key=lambda i: int(i[0])))
        + "]",
    )
    alloc: bytes | None = entry["AllocResp"]
    return (
        f"{{PodUID:(string){entry['PodUID']} ContainerName:(string){entry['ContainerName']} "
        f"ResourceName:(string){entry['ResourceName']} DeviceIDs:(checkpoint.DevicesPerNUMA){numa} "
        f"AllocResp:([]uint8){_nil_or(alloc, '[' + ' '.join(map(str, alloc or b'')) + ']')}}}"
    )


def go_spew(entries: list[dict[str, Any]] | None, registered: dict[str, list[str] | None] | None) -> str:
    """What ``spew.ConfigState{SortKeys, DisableMethods, SpewKeys}.Sprintf("%#v", data)`` prints for Go's
    ``checkpointData``. ``None`` is a nil slice or map (``<nil>``), distinct from an empty one (``[]``);
    entries hold the decoded values (``AllocResp`` as bytes, ``DeviceIDs`` keyed by the decimal NUMA id)."""
    rendered_entries = _nil_or(entries, "[" + " ".join(_entry(e) for e in entries or ()) + "]")
    rendered_registered = _nil_or(
        registered,
        "map[" + " ".join(f"{k}:{_strings(v)}" for k, v in sorted((registered or {}).items())) + "]",
    )
    return (
        f"(checkpoint.checkpointData){{PodDeviceEntries:([]checkpoint.PodDevicesEntry){rendered_entries} "
        f"RegisteredDevices:(map[string][]string){rendered_registered}}}"
    )


def checksum(entries: list[dict[str, Any]] | None, registered: dict[str, list[str] | None] | None) -> int:
    """Go ``checksum.New(data)``: FNV-32a of :func:`go_spew`."""
    value = _FNV32_OFFSET
    for byte in go_spew(entries, registered).encode():
        value = ((value ^ byte) * _FNV32_PRIME) & 0xFFFFFFFF
    return value


# --- the file --------------------------------------------------------------------------------------


def encode(pods: PodDevices, registered: dict[str, list[str]]) -> bytes:
    """Go's ``MarshalCheckpoint``: compact JSON, map keys sorted, no entries written as ``null``."""
    entries: list[dict[str, Any]] = [
        {
            "PodUID": uid,
            "ContainerName": container,
            "ResourceName": resource,
            "DeviceIDs": {NO_TOPOLOGY: list(entry.device_ids)},
            "AllocResp": None if entry.response is None else bytes(entry.response),
        }
        for uid, container, resource, entry in pods.entries()
    ]
    devices: dict[str, list[str] | None] = {k: list(v) for k, v in sorted(registered.items())}
    as_json = [e | {"AllocResp": _base64(e["AllocResp"])} for e in entries]
    document = {
        "Data": {"PodDeviceEntries": as_json or None, "RegisteredDevices": devices},
        "Checksum": checksum(entries or None, devices),
    }
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode()


def _base64(raw: bytes | None) -> str | None:
    """Go's JSON for a ``[]byte``: base64, ``null`` for nil."""
    return None if raw is None else base64.b64encode(raw).decode()


def _string(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise CorruptCheckpoint(f"cannot unmarshal {type(value).__name__} into {what} of type string")
    return value


def _string_list(value: Any, what: str) -> list[str] | None:
    if value is None:
        return None
    if not isinstance(value, list):
        raise CorruptCheckpoint(f"cannot unmarshal {type(value).__name__} into {what} of type []string")
    return [_string(v, what) for v in value]


def _map(value: Any, what: str) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise CorruptCheckpoint(f"cannot unmarshal {type(value).__name__} into {what}")
    return value


def _go_entry(raw: Any) -> dict[str, Any]:
    """One ``PodDevicesEntry`` as Go's ``json.Unmarshal`` leaves it (absent fields: zero values)."""
    raw = _map(raw, "PodDevicesEntry") or {}
    per_numa = _map(raw.get("DeviceIDs"), "DevicesPerNUMA")
    if per_numa is not None:
        try:
            per_numa = {str(int(k)): _string_list(v, "DevicesPerNUMA") for k, v in per_numa.items()}
        except ValueError as err:
            raise CorruptCheckpoint(f"invalid NUMA node in DeviceIDs: {err}") from err
    alloc = raw.get("AllocResp")
    if alloc is not None:
        try:
            alloc = base64.b64decode(_string(alloc, "AllocResp"), validate=True)
        except binascii.Error as err:
            raise CorruptCheckpoint(f"invalid AllocResp: {err}") from err
    return {
        "PodUID": _string(raw.get("PodUID", ""), "PodUID"),
        "ContainerName": _string(raw.get("ContainerName", ""), "ContainerName"),
        "ResourceName": _string(raw.get("ResourceName", ""), "ResourceName"),
        "DeviceIDs": per_numa,
        "AllocResp": alloc,
    }


def decode(raw: bytes) -> tuple[PodDevices, dict[str, list[str]]]:
    """Read a checkpoint (ours or a Go kubelet's); raises :class:`CorruptCheckpoint` when ``raw`` is not
    one or its checksum does not match."""
    try:
        document = _map(json.loads(raw), "checkpoint") or {}
        data = _map(document.get("Data", {}), "checkpointData") or {}
        # Go decodes into an empty slice and map: an absent field stays empty, an explicit null is nil
        raw_entries = data.get("PodDeviceEntries", [])
        if raw_entries is not None and not isinstance(raw_entries, list):
            raise CorruptCheckpoint("cannot unmarshal PodDeviceEntries")
        entries = None if raw_entries is None else [_go_entry(e) for e in raw_entries]
        raw_registered = _map(data.get("RegisteredDevices", {}), "RegisteredDevices")
        registered = (
            None
            if raw_registered is None
            else {k: _string_list(v, "RegisteredDevices") for k, v in raw_registered.items()}
        )
        stored = document.get("Checksum", 0)
        if type(stored) is not int or stored != checksum(entries, registered):
            raise CorruptCheckpoint("checkpoint is corrupted")
        pods = PodDevices()
        for entry in entries or ():
            ids = [
                i
                for _, per_node in sorted((entry["DeviceIDs"] or {}).items(), key=lambda i: int(i[0]))
                for i in per_node or ()
            ]
            response = entry["AllocResp"]
            pods.insert(
                entry["PodUID"],
                entry["ContainerName"],
                entry["ResourceName"],
                DeviceEntry(
                    tuple(ids), None if response is None else dp.ContainerAllocateResponse.parse(response)
                ),
            )
    except CorruptCheckpoint:
        raise
    except Exception as err:  # any shape or encoding problem of the file
        raise CorruptCheckpoint(f"failed to read checkpoint: {err}") from err
    return pods, {k: list(v or ()) for k, v in (registered or {}).items()}


def write(path: str, raw: bytes) -> None:
    """Atomically: a crash leaves the old checkpoint or the new one."""
    tmp = f"{path}.tmp"
    with open(tmp, "wb") as f:
        f.write(raw)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None
