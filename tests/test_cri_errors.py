"""The one table between gRPC statuses and the typed CRI errors, read both ways."""

from __future__ import annotations

import pytest
from grpclib import Status

from kubelet_trio.cri import errors
from kubelet_trio.sim.server import grpc_status


@pytest.mark.parametrize("cls", [*errors.STATUS_ERRORS.values(), errors.CriCallError])
def test_a_status_answered_by_sim_cri_maps_back_to_the_same_type(cls: type[errors.CriError]) -> None:
    """What sim-cri answers for an error (``status_name``) is what the client maps to that error's type."""
    sent = cls("StopContainer", "gone")
    received = errors.from_status("StopContainer", grpc_status(sent).name, sent.message)
    assert type(received) is cls
    assert (received.op, received.message) == ("StopContainer", "gone")


def test_other_statuses_keep_their_name() -> None:
    err = errors.from_status("Version", Status.FAILED_PRECONDITION.name, "not yet")
    assert type(err) is errors.CriCallError and err.code == "FAILED_PRECONDITION"
    assert errors.from_status("Version", "INTERNAL", "").message == "INTERNAL"  # no message: the code


def test_containerd_words() -> None:
    missing = 'failed to resolve reference "r/x:1": r/x:1: not found'
    assert type(errors.from_status("PullImage", "UNKNOWN", missing)) is errors.NotFoundError
    assert type(errors.from_status("ListImages", "UNKNOWN", missing)) is errors.CriCallError
    starting = "server is not initialized yet"
    assert type(errors.from_status("Version", "UNKNOWN", starting)) is errors.UnavailableError


def test_the_runtimes_message_is_truncated() -> None:
    """A grpc-message may be as long as the header list cap (16 MiB): what goes on into logs and pod
    status is cut to a bounded length that still says how long it was."""
    err = errors.from_status("Version", "INTERNAL", "x" * 100_000)
    assert len(err.message) < 1100 and err.message.endswith("... (100000 bytes)")


def test_go_status_text() -> None:
    assert (
        errors.go_status_text("FAILED_PRECONDITION", "disk")
        == "rpc error: code = FailedPrecondition desc = disk"
    )
    assert errors.go_code("CANCELLED") == "Canceled"
    assert errors.go_code("DEADLINE_EXCEEDED") == "DeadlineExceeded"
