"""Admission's memo of each pod spec's requests holds the live specs only: a node whose pods come and go
must not keep every spec it ever admitted."""

from __future__ import annotations

import gc

from kubelet_trio.api import Pod
from kubelet_trio.lifecycle import predicate


def pod(i: int, cpu: str) -> Pod:
    container = {"name": "app", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}
    return Pod.from_dict(
        {"metadata": {"name": f"p-{i}", "uid": f"u-{i}"}, "spec": {"containers": [container]}}
    )


def test_requests_are_remembered_while_the_spec_lives_and_forgotten_after() -> None:
    gc.collect()
    before = len(predicate._REQUESTS)
    pods = [pod(i, f"{i + 1}00m") for i in range(200)]
    assert [predicate.pod_requests(p)["cpu"] for p in pods[:3]] == [100, 200, 300]
    for p in pods:
        predicate.pod_requests(p)
    assert len(predicate._REQUESTS) == before + 200
    assert predicate.pod_requests(pods[5]) is predicate.pod_requests(pods[5])  # the memo answers
    del pods, p
    gc.collect()
    assert len(predicate._REQUESTS) == before
    again = pod(0, "700m")  # a new spec, maybe at a freed spec's address: its own requests
    assert predicate.pod_requests(again)["cpu"] == 700
