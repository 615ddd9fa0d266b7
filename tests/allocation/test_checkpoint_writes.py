"""The allocation checkpoint is written once per batch of admitted or removed pods, before any of their
workers runs (one checksum over the file and one fsync, not one per pod)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import trio
import trio.testing

from kubelet_trio.allocation.state import ALLOCATED_PODS_STATE_FILE, decode
from kubelet_trio.api import Pod
from kubelet_trio.testing.apinode import open_api_node
from kubelet_trio.testing.fakeapi import open_fake_api
from tests.apiserver.harness import pod_manifest


async def test_admitting_and_removing_pods_together_writes_the_checkpoint_once_each(
    autojump_clock: trio.testing.MockClock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "root" / ALLOCATED_PODS_STATE_FILE
    writes: list[set[str]] = []  # the pods in the file at each write
    replace = os.replace

    def counting(src: str, dst: str) -> None:
        replace(src, dst)
        if dst == str(path):
            writes.append(set(decode(path.read_bytes())))

    monkeypatch.setattr(os, "replace", counting)
    async with open_fake_api() as api, open_api_node(api, root_dir=str(tmp_path / "root")) as node:
        manifests = [pod_manifest(f"p{i}", {"app": "run"}) for i in range(3)]
        pods = [
            Pod.from_dict({**m, "metadata": {**m["metadata"], "uid": f"uid-{i}"}})
            for i, m in enumerate(manifests)
        ]
        uids = {"uid-0", "uid-1", "uid-2"}
        node.kubelet.handle_pod_additions(pods)
        assert writes == [uids]  # before this task yields: before any of the pods' workers has run
        await trio.sleep(5)
        assert len(writes) == 1
        node.kubelet.handle_pod_removes(pods)
        assert writes == [uids, set()]
