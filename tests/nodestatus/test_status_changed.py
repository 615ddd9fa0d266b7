"""When the kubelet must PATCH its Node status besides the periodic report (Go: ``nodeStatusHasChanged``)."""

from __future__ import annotations

from kubelet_trio.nodestatus.setters import status_changed

READY = {
    "type": "Ready",
    "status": "True",
    "lastHeartbeatTime": "2026-01-01T00:00:00Z",
    "reason": "KubeletReady",
}


def test_a_new_heartbeat_alone_is_no_change() -> None:
    later = {**READY, "lastHeartbeatTime": "2026-01-01T00:00:10Z"}
    assert not status_changed({"conditions": [READY]}, {"conditions": [later]})


def test_an_empty_image_list_equals_none_as_the_api_server_stores_it() -> None:
    """The API server drops an empty ``images`` (omitempty): a node without images must not PATCH its
    status every ``nodeStatusUpdateFrequency``."""
    stored = {"conditions": [READY], "capacity": {"pods": "110"}}
    computed = {"conditions": [READY], "capacity": {"pods": "110"}, "images": []}
    assert not status_changed(stored, computed)


def test_a_first_image_or_a_condition_change_is_a_change() -> None:
    stored = {"conditions": [READY]}
    assert status_changed(stored, {"conditions": [READY], "images": [{"names": ["busybox"], "sizeBytes": 1}]})
    assert status_changed(stored, {"conditions": [{**READY, "status": "False"}]})
