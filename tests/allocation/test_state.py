"""The allocation checkpoint: Go's file, checksum included, and a restart reading it back."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

from kubelet_trio.allocation.state import (
    ALLOCATED_PODS_STATE_FILE,
    CorruptCheckpoint,
    ResourceState,
    checksum,
    decode,
    encode,
)
from kubelet_trio.api import Quantity
from kubelet_trio.api.container import ResourceRequirements

# pkg/kubelet/allocation/state/state_checkpoint_test.go
GO_CHECKPOINT = (
    b'{"data":"{\\"entries\\":{\\"pod1\\":{\\"ContainerResources\\":{\\"container1\\":{\\"requests\\":'
    b'{\\"cpu\\":\\"1Ki\\",\\"memory\\":\\"1Ki\\"}}}}}}","checksum":1178570812}'
)


def req(**requests: str) -> ResourceRequirements:
    return ResourceRequirements(requests={k: Quantity(v) for k, v in requests.items()})


def test_reads_go_checkpoint() -> None:
    assert decode(GO_CHECKPOINT) == {"pod1": {"container1": req(cpu="1Ki", memory="1Ki")}}


def test_checksum_is_go_fnv32a_of_spew_string() -> None:
    data = json.loads(GO_CHECKPOINT)["data"]
    assert checksum(data) == 1178570812


def test_written_file_is_go_shaped() -> None:
    blob = encode(
        {
            "u1": {
                "app": ResourceRequirements(
                    limits={"memory": Quantity("128Mi"), "cpu": Quantity("500m")},
                    requests={"cpu": Quantity("0.25")},
                )
            }
        }
    )
    document = json.loads(blob)
    assert document["data"] == (
        '{"entries":{"u1":{"ContainerResources":{"app":{"limits":{"cpu":"500m","memory":"128Mi"},'
        '"requests":{"cpu":"250m"}}},"PodLevelResources":null}}}'
    )
    assert document["checksum"] == checksum(document["data"])
    assert decode(blob)["u1"]["app"].requests == {"cpu": Quantity("250m")}


def test_corrupt_checksum_is_refused() -> None:
    with pytest.raises(CorruptCheckpoint):
        decode(GO_CHECKPOINT.replace(b"1178570812", b"1178570813"))


def test_state_survives_a_restart(tmp_path: Path) -> None:
    state = ResourceState(str(tmp_path), ALLOCATED_PODS_STATE_FILE)
    assert not (tmp_path / ALLOCATED_PODS_STATE_FILE).exists()
    state.set_pod("u1", {"app": req(cpu="1")})
    state.set_container("u2", "db", req(memory="1Gi"))
    again = ResourceState(str(tmp_path), ALLOCATED_PODS_STATE_FILE)
    assert again.get_container("u1", "app") == req(cpu="1")
    assert again.get_container("u2", "db") == req(memory="1Gi")
    again.remove_orphaned_pods({"u2"})
    assert ResourceState(str(tmp_path), ALLOCATED_PODS_STATE_FILE).uids() == ["u2"]


def test_a_go_kubelets_file_is_read(tmp_path: Path) -> None:
    (tmp_path / ALLOCATED_PODS_STATE_FILE).write_bytes(GO_CHECKPOINT)
    state = ResourceState(str(tmp_path), ALLOCATED_PODS_STATE_FILE)
    assert state.get_container("pod1", "container1") == req(cpu="1Ki", memory="1Ki")


def test_the_file_follows_every_change_and_an_unchanged_set_writes_nothing(tmp_path: Path) -> None:
    """Each pod's part of the file is kept between writes; after any sequence of changes the file is what
    encoding the whole state gives, and setting what is already there (the same quantities written
    differently) does not touch the file."""
    path = tmp_path / ALLOCATED_PODS_STATE_FILE
    state = ResourceState(str(tmp_path), ALLOCATED_PODS_STATE_FILE)
    state.set_pod("u2", {"app": req(cpu="1"), "side": req(memory="64Mi")})
    state.set_pod("u1", {"app": req(cpu="250m")})
    state.set_container("u2", "app", req(cpu="2"))
    state.set_container("u3", "db", req(memory="1Gi"))
    state.remove_pod("u1")
    expected = {
        "u2": {"app": req(cpu="2"), "side": req(memory="64Mi")},
        "u3": {"db": req(memory="1Gi")},
    }
    assert path.read_bytes() == encode(expected)
    before = path.stat().st_mtime_ns, path.stat().st_ino
    state.set_container("u2", "app", req(cpu="2000m"))
    state.set_pod("u3", {"db": req(memory="1024Mi")})
    assert (path.stat().st_mtime_ns, path.stat().st_ino) == before
    state.set_pod("u3", {"db": req(memory="2Gi")})
    assert decode(path.read_bytes())["u3"] == {"db": req(memory="2Gi")}
    state.remove_orphaned_pods(set())
    assert path.read_bytes() == encode({})


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(("set_pod", "set_container", "remove_pod", "remove_orphaned")),
            st.sampled_from([f"uid-{i}" for i in range(6)]),
            st.sampled_from(("100m", "250m", "1", "2")),
        ),
        max_size=25,
    )
)
def test_the_checksum_resumed_from_unchanged_pods_is_the_whole_files(ops: list[tuple[str, str, str]]) -> None:
    """The file's checksum is resumed after the entries the last write shares; whatever the changes, the
    file is byte for byte what encoding the whole state from scratch gives."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / ALLOCATED_PODS_STATE_FILE
        state = ResourceState(tmp, ALLOCATED_PODS_STATE_FILE)
        expected: dict[str, dict[str, ResourceRequirements]] = {}
        for op, uid, cpu in ops:
            if op == "set_pod":
                state.set_pod(uid, {"app": req(cpu=cpu)})
                expected[uid] = {"app": req(cpu=cpu)}
            elif op == "set_container":
                state.set_container(uid, "side", req(cpu=cpu))
                expected.setdefault(uid, {})["side"] = req(cpu=cpu)
            elif op == "remove_pod":
                state.remove_pod(uid)
                expected.pop(uid, None)
            else:
                state.remove_orphaned_pods(u for u in list(expected) if u != uid)
                expected.pop(uid, None)
            if path.exists():
                assert path.read_bytes() == encode(expected)


def test_a_batch_of_changes_is_written_once_at_its_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / ALLOCATED_PODS_STATE_FILE
    writes: list[str] = []
    replace = os.replace
    monkeypatch.setattr(os, "replace", lambda src, dst: (writes.append(str(dst)), replace(src, dst))[1])
    state = ResourceState(str(tmp_path), ALLOCATED_PODS_STATE_FILE)
    state.set_pod("u1", {"app": req(cpu="1")})
    assert writes == [str(path)]
    with state.batch():
        state.set_pod("u2", {"app": req(cpu="2")})
        with state.batch():  # nested: still one write, at the outer end
            state.set_pod("u3", {"app": req(cpu="3")})
        state.remove_pod("u1")
        assert writes == [str(path)] and decode(path.read_bytes()) == {"u1": {"app": req(cpu="1")}}
    assert writes == [str(path)] * 2
    assert path.read_bytes() == encode({"u2": {"app": req(cpu="2")}, "u3": {"app": req(cpu="3")}})
    with state.batch():  # nothing changed: nothing written
        state.set_pod("u2", {"app": req(cpu="2000m")})
    assert len(writes) == 2
    with pytest.raises(RuntimeError), state.batch():  # a failure inside still writes what changed
        state.remove_pod("u3")
        raise RuntimeError
    assert decode(path.read_bytes()) == {"u2": {"app": req(cpu="2")}}
