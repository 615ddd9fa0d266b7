"""The checkpoint is Go's file: a checkpoint written by Go's code is read, its checksum verified the way Go
does (FNV-32a over go-spew's rendering, nil and empty told apart), and Go verifies ours. The fixtures were
written by Go's ``checkpoint.New(...).MarshalCheckpoint()`` with go-spew 1.1.1, as vendored by Kubernetes."""

from __future__ import annotations

import pytest

from kubelet_trio.cm.devicemanager import checkpoint
from kubelet_trio.cri.gen import v1beta1 as dp

WIDGET = "example.com/widget"

# two entries (one with an Allocate answer, one with a nil device list for NUMA -1 and none), a resource
# with a nil device list
GO_WRITTEN = (
    b'{"Data":{"PodDeviceEntries":[{"PodUID":"uid-1","ContainerName":"app","ResourceName":"example.com/widget",'
    b'"DeviceIDs":{"-1":["dev-0","dev-1"]},"AllocResp":"CgNhYmM="},{"PodUID":"uid-2","ContainerName":"c",'
    b'"ResourceName":"example.com/b","DeviceIDs":{"-1":null,"0":["x"]},"AllocResp":null}],'
    b'"RegisteredDevices":{"a/b":null,"example.com/widget":["dev-1","dev-0"]}},"Checksum":2016519883}'
)

# written by kubelet-go 1.24 (the reference tier's run of the device plugin scenario)
GO_KUBELET_WRITTEN = (
    b'{"Data":{"PodDeviceEntries":[{"PodUID":"79907f9a-6f51-48e2-a124-3da2aad62a35","ContainerName":"a'
    b'pp","ResourceName":"example.com/widget","DeviceIDs":{"-1":["dev-0","dev-1"]},"AllocResp":"ChYKB1'
    b"dJREdFVFMSC2Rldi0wLGRldi0xEjoKDy9kZXYtaW5mby9kZXYtMBIlL3Zhci9saWIva3ViZWxldC9kZXZpY2UtcGx1Z2lucy"
    b'9kZXYtMBgBEjoKDy9kZXYtaW5mby9kZXYtMRIlL3Zhci9saWIva3ViZWxldC9kZXZpY2UtcGx1Z2lucy9kZXYtMRgB"}],"R'
    b'egisteredDevices":{"example.com/widget":["dev-2","dev-0","dev-1"]}},"Checksum":2008118161}'
)
GO_WRITTEN_EMPTY = b'{"Data":{"PodDeviceEntries":null,"RegisteredDevices":{}},"Checksum":3467439661}'


def test_a_go_checkpoint_is_read() -> None:
    pods, registered = checkpoint.decode(GO_WRITTEN)
    first = pods.get("uid-1", "app", WIDGET)
    assert first is not None and first.device_ids == ("dev-0", "dev-1")
    assert first.response == dp.ContainerAllocateResponse.parse(b"\n\x03abc")
    second = pods.get("uid-2", "c", "example.com/b")
    assert second is not None and second.device_ids == ("x",) and second.response is None
    assert registered == {"a/b": [], WIDGET: ["dev-1", "dev-0"]}
    empty, registered = checkpoint.decode(GO_WRITTEN_EMPTY)
    assert list(empty.entries()) == [] and registered == {}


def test_a_go_kubelets_checkpoint_is_read() -> None:
    pods, registered = checkpoint.decode(GO_KUBELET_WRITTEN)
    ((uid, container, resource, entry),) = pods.entries()
    assert (uid, container, resource) == ("79907f9a-6f51-48e2-a124-3da2aad62a35", "app", WIDGET)
    assert entry.device_ids == ("dev-0", "dev-1")
    assert entry.response is not None and entry.response.envs == {"WIDGETS": "dev-0,dev-1"}
    assert [m.container_path for m in entry.response.mounts] == ["/dev-info/dev-0", "/dev-info/dev-1"]
    assert registered == {WIDGET: ["dev-2", "dev-0", "dev-1"]}


def test_go_spew_rendering_tells_nil_from_empty() -> None:
    entry = {
        "PodUID": "u",
        "ContainerName": "c",
        "ResourceName": WIDGET,
        "DeviceIDs": {"0": ["b"], "-1": None},
        "AllocResp": b"",
    }
    assert checkpoint.go_spew([entry], None) == (
        "(checkpoint.checkpointData){PodDeviceEntries:([]checkpoint.PodDevicesEntry)[{PodUID:(string)u "
        "ContainerName:(string)c ResourceName:(string)example.com/widget "
        "DeviceIDs:(checkpoint.DevicesPerNUMA)map[-1:<nil> 0:[b]] AllocResp:([]uint8)[]}] "
        "RegisteredDevices:(map[string][]string)<nil>}"
    )
    assert checkpoint.checksum(None, {}) == 3467439661  # Go's, above


def test_ours_is_gos_file() -> None:
    """The same data written by Go (the bytes below) and by us: the same file, checksum included."""
    pods = checkpoint.PodDevices()
    pods.insert("uid-1", "app", WIDGET, checkpoint.DeviceEntry(("dev-0", "dev-1")))
    assert checkpoint.encode(pods, {WIDGET: ["dev-1", "dev-0"]}) == (
        b'{"Data":{"PodDeviceEntries":[{"PodUID":"uid-1","ContainerName":"app",'
        b'"ResourceName":"example.com/widget","DeviceIDs":{"-1":["dev-0","dev-1"]},"AllocResp":null}],'
        b'"RegisteredDevices":{"example.com/widget":["dev-1","dev-0"]}},"Checksum":1403608560}'
    )
    assert checkpoint.encode(checkpoint.PodDevices(), {}) == GO_WRITTEN_EMPTY


@pytest.mark.parametrize(
    "raw",
    [
        GO_WRITTEN.replace(b"dev-1", b"dev-9"),  # a device changed
        GO_WRITTEN.replace(b'"AllocResp":null', b'"AllocResp":""'),  # nil became empty
        GO_WRITTEN.replace(b'"a/b":null', b'"a/b":[]'),
        GO_WRITTEN.replace(b"2016519883", b"2016519883.0"),
        GO_WRITTEN[:-5],  # truncated
        b'{"Data":{"PodDeviceEntries":[{"PodUID":7}]},"Checksum":1}',
        b"[]",
    ],
)
def test_a_damaged_checkpoint_is_corrupt(raw: bytes) -> None:
    with pytest.raises(checkpoint.CorruptCheckpoint):
        checkpoint.decode(raw)
