"""The device manager's checkpoint, ``<root-dir>/device-plugins/kubelet_internal_checkpoint``
(Go: ``checkpoint/checkpoint.go``): which devices each container holds, so that a restarted kubelet
gives running pods their devices again and never hands them to another pod.

The layout is Go's JSON: ``{"Data": {"PodDeviceEntries": [...], "RegisteredDevices": {...}},
"Checksum": N}``, device IDs grouped by NUMA node (``"-1"``: no topology) and the plugin's ``Allocate``
answer as base64 protobuf (``null`` until it was called). The checksum is FNV-32a over a canonical
rendering of ``Data``; it catches a damaged file, it is not Go's own value (see :func:`checksum`).
"""

from __future__ import annotations

import base64
import json
import os
from typing import Any

from kubelet_trio.cm.devicemanager.errors import DeviceManagerError
from kubelet_trio.cm.devicemanager.pod_devices import DeviceEntry, PodDevices
from kubelet_trio.cri.gen import v1beta1 as dp

__all__ = ["CHECKPOINT_NAME", "CorruptCheckpoint", "checksum", "decode", "encode", "read", "write"]

CHECKPOINT_NAME = "kubelet_internal_checkpoint"
NO_TOPOLOGY = "-1"


class CorruptCheckpoint(DeviceManagerError):
    """The file does not parse or its checksum does not match: it is discarded."""


def checksum(data: Any) -> int:
    """FNV-32a of ``data`` as sorted, compact JSON. Go hashes a spew dump of its structs, which a
    Python kubelet cannot reproduce faithfully; a Go kubelet reading this file reports it corrupt and
    starts afresh, as after any corrupt checkpoint."""
    value = 0x811C9DC5
    for byte in json.dumps(data, sort_keys=True, separators=(",", ":")).encode():
        value = ((value ^ byte) * 0x01000193) & 0xFFFFFFFF
    return value


def encode(pods: PodDevices, registered: dict[str, list[str]]) -> bytes:
    entries = [
        {
            "PodUID": uid,
            "ContainerName": container,
            "ResourceName": resource,
            "DeviceIDs": {NO_TOPOLOGY: list(entry.device_ids)},
            "AllocResp": None if entry.response is None else base64.b64encode(bytes(entry.response)).decode(),
        }
        for uid, container, resource, entry in pods.entries()
    ]
    data = {"PodDeviceEntries": entries, "RegisteredDevices": {k: sorted(v) for k, v in registered.items()}}
    return json.dumps({"Data": data, "Checksum": checksum(data)}).encode()


def decode(raw: bytes) -> tuple[PodDevices, dict[str, list[str]]]:
    """Raises :class:`CorruptCheckpoint` when ``raw`` is not a checkpoint with a matching checksum."""
    try:
        document = json.loads(raw)
        data = document["Data"]
        if document["Checksum"] != checksum(data):
            raise CorruptCheckpoint("checkpoint is corrupted")
        pods = PodDevices()
        for entry in data.get("PodDeviceEntries") or ():
            ids = [i for per_node in (entry.get("DeviceIDs") or {}).values() for i in per_node]
            response = entry.get("AllocResp")
            pods.insert(
                str(entry["PodUID"]),
                str(entry["ContainerName"]),
                str(entry["ResourceName"]),
                DeviceEntry(
                    tuple(ids),
                    None
                    if response is None
                    else dp.ContainerAllocateResponse.parse(base64.b64decode(response)),
                ),
            )
        registered = {
            str(k): [str(i) for i in v or ()] for k, v in (data.get("RegisteredDevices") or {}).items()
        }
    except CorruptCheckpoint:
        raise
    except Exception as err:  # any shape or encoding problem of the file
        raise CorruptCheckpoint(f"failed to read checkpoint: {err}") from err
    return pods, registered


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
