"""The composition root (``kubelet_trio.kubelet_builder``): one construction site, standalone vs API mode
decided inside, nothing rewired afterwards."""

from __future__ import annotations

import re
from pathlib import Path

import trio
import trio.testing

from kubelet_trio import KubeletConfig, KubeletDeps, SimRuntime, open_kubelet
from kubelet_trio.apimode import ApiModeOptions
from kubelet_trio.clock import WallClock
from kubelet_trio.config.podconfig import PodConfig
from kubelet_trio.config.types import API_SOURCE, SourceSet
from kubelet_trio.cri.instrumented import InstrumentedRuntime
from kubelet_trio.fsio import run_inline
from kubelet_trio.kubelet_builder import build_kubelet
from kubelet_trio.lifecycle.predicate import PredicateAdmitHandler, admit_standalone
from kubelet_trio.testing.fakeapi import open_fake_api
from kubelet_trio.testing.node import as_pod
from tests.apiserver.harness import MACHINE

REPO = Path(__file__).resolve().parents[2]


def _config(tmp_path: Path) -> KubeletConfig:
    return KubeletConfig(
        node_name="node-1",
        root_dir=str(tmp_path / "root"),
        pod_logs_dir=str(tmp_path / "logs"),
        node_ips=("192.0.2.10",),
        memory_backed_volumes=False,
    )


async def test_standalone_node_runs_a_pod(autojump_clock: trio.testing.MockClock, tmp_path: Path) -> None:
    clock = WallClock()
    sim = SimRuntime(clock=clock, run_sync=run_inline)
    pod_config = PodConfig(sources=("test",), now=clock.now)
    source = pod_config.source_channel("test")
    deps = KubeletDeps(runtime=sim, pod_config=pod_config, clock=clock, run_sync=run_inline)
    pod = as_pod({"metadata": {"name": "web"}, "spec": {"containers": [{"name": "app", "image": "img"}]}})
    async with source, open_kubelet(_config(tmp_path), deps) as node:
        assert node.api is None
        assert node.kubelet.ready.value
        assert node.kubelet.api_client is None
        await source.send(SourceSet("test", (pod,)))
        status = await node.kubelet.wait_for_status(pod.uid, lambda s: s.phase == "Running")
        assert status.phase == "Running"


async def test_api_mode_is_decided_inside_the_builder(tmp_path: Path) -> None:
    clock = WallClock()
    async with open_fake_api() as api, api.client() as client:
        pod_config = PodConfig(sources=(API_SOURCE,), now=clock.now)
        deps = KubeletDeps(
            runtime=SimRuntime(clock=clock, run_sync=run_inline),
            pod_config=pod_config,
            clock=clock,
            run_sync=run_inline,
            instrument_runtime=True,
            api_client=client,
            api_options=ApiModeOptions(machine=MACHINE),
        )
        node = build_kubelet(_config(tmp_path), deps)
        assert node.api is not None
        kubelet = node.kubelet
        assert isinstance(kubelet.runtime, InstrumentedRuntime)
        assert list(kubelet._pod_sources) == [node.api.source]  # the api source, added by the builder
        assert kubelet.api_client is client
        assert kubelet.event_sink == node.api.recorder.record
        assert kubelet._admit is node.api.admit and isinstance(kubelet._admit, PredicateAdmitHandler)
        assert kubelet._volume_manager.tokens is node.api.tokens
        assert kubelet._kube_runtime.runtime_classes is node.api.runtime_classes
        assert kubelet._volume_manager.objects is node.api.objects


def test_standalone_defaults(tmp_path: Path) -> None:
    clock = WallClock()
    deps = KubeletDeps(runtime=SimRuntime(clock=clock), pod_config=PodConfig(sources=()), clock=clock)
    kubelet = build_kubelet(_config(tmp_path), deps).kubelet
    assert kubelet._admit is admit_standalone
    assert kubelet.event_sink is None
    assert kubelet._volume_manager.tokens is None
    assert kubelet._kube_runtime.runtime_classes is None


def test_one_construction_site() -> None:
    """``grep -rn "Kubelet(" kubelet_trio bench`` finds the builder only."""
    sites = [
        f"{path.relative_to(REPO)}:{n}"
        for top in ("kubelet_trio", "bench")
        for path in sorted((REPO / top).rglob("*.py"))
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"\bKubelet\(", line) and not line.lstrip().startswith("class ")
    ]
    assert len(sites) == 1 and sites[0].startswith("kubelet_trio/kubelet_builder.py:"), sites


def test_nothing_assigns_to_a_kubelet_from_outside() -> None:
    """Collaborators go in through ``KubeletDeps``; no ``kubelet.<field> = ...`` rewiring anywhere."""
    assignment = re.compile(r"\bkubelet\.\w+\s*=[^=]")
    offenders = [
        f"{path.relative_to(REPO)}:{n}"
        for top in ("kubelet_trio", "bench", "tests")
        for path in sorted((REPO / top).rglob("*.py"))
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if assignment.search(line)
    ]
    assert offenders == []
