"""The node is built in one place, top to bottom (``kubelet_trio.kubelet_builder.build_kubelet``).

The Kubelet constructs nothing (it has no ``__attrs_post_init__`` and no field default builds a part),
only the builder instantiates the node's managers (and, for API mode, ``kubelet_trio.apimode``, which
only the builder calls), the builder adds API mode's pod source, runtime capabilities are declared rather
than sniffed, and API mode's components start in the Kubelet's tree in their order.
"""

from __future__ import annotations

import ast
from pathlib import Path

import attrs
import pytest
import trio
import trio.testing

from kubelet_trio import KubeletConfig, KubeletDeps, SimRuntime
from kubelet_trio.apimode import ApiModeOptions
from kubelet_trio.clock import WallClock
from kubelet_trio.config.podconfig import PodConfig
from kubelet_trio.config.types import API_SOURCE
from kubelet_trio.cri.runtime import RuntimeCapabilities, runtime_capabilities
from kubelet_trio.eviction import HostSignals, SimulatedSignals
from kubelet_trio.fsio import run_inline
from kubelet_trio.kubelet import Kubelet
from kubelet_trio.kubelet_builder import _KubeletCalls, build_kubelet
from kubelet_trio.sim.tracking import ChangeTrackingSimRuntime
from kubelet_trio.testing.fakeapi import open_fake_api
from tests.apiserver.harness import MACHINE

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "kubelet_trio"
BUILDER = PACKAGE / "kubelet_builder.py"
APIMODE = PACKAGE / "apimode.py"

#: The Kubelet's parts: made by build_kubelet, nowhere else.
NODE_PARTS = frozenset(
    {
        "PodCache",
        "PodManager",
        "StatusManager",
        "ProbeManager",
        "VolumeManager",
        "CriStatsProvider",
        "DeviceManager",
        "RunOptionsGenerator",
        "HandlerRunner",
        "DnsConfigurer",
        "KubeRuntimeManager",
        "GenericPLEG",
        "PodWorkers",
        "ImageGCManager",
        "NodeShutdownManager",
        "EvictionManager",
        "ContainerLogManager",
        "Kubelet",
    }
)
#: API mode's components: made by kubelet_trio.apimode for the builder.
API_PARTS = frozenset(
    {
        "ApiserverSource",
        "EventRecorder",
        "NodeStatusManager",
        "NodeLeaseController",
        "StatusPublisher",
        "MirrorPodManager",
        "TokenManager",
        "RuntimeClassManager",
        "PredicateAdmitHandler",
    }
)


def _constructed(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, class) of each ``Name(...)`` or ``Name.factory(...)`` call of a capitalised name."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name):
            name = func.id
        elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            name = func.value.id
        else:
            continue
        if name[:1].isupper():
            found.append((node.lineno, name))
    return found


def _class(tree: ast.Module, name: str) -> ast.ClassDef:
    return next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name)


def _function(tree: ast.Module, name: str) -> ast.FunctionDef:
    return next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)


def test_the_kubelet_constructs_nothing() -> None:
    tree = ast.parse((PACKAGE / "kubelet.py").read_text())
    kubelet = _class(tree, "Kubelet")
    methods = {n.name for n in kubelet.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
    assert "__attrs_post_init__" not in methods and "__init__" not in methods
    built = {name for _, name in _constructed(kubelet)}
    assert built & (NODE_PARTS | API_PARTS) == set()
    # a field default builds run state only (sets, dicts, the ready flag), never a part
    for field in attrs.fields(Kubelet):
        if isinstance(field.default, attrs.Factory):
            made = field.default.factory() if not field.default.takes_self else None
            assert type(made).__name__ in {"set", "dict", "AsyncBool"}, field.name


def test_build_kubelet_makes_every_part() -> None:
    tree = ast.parse(BUILDER.read_text())
    built = {name for _, name in _constructed(_function(tree, "build_kubelet"))}
    assert built >= NODE_PARTS


def test_only_the_builder_makes_the_parts() -> None:
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for line, name in _constructed(ast.parse(path.read_text())):
            allowed = {BUILDER} if name in NODE_PARTS else {APIMODE} if name in API_PARTS else None
            if allowed is not None and path not in allowed:
                offenders.append(f"{path.relative_to(REPO)}:{line} {name}")
    assert offenders == []


def test_only_the_builder_builds_api_mode() -> None:
    callers = [
        f"{path.relative_to(REPO)}:{node.lineno}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != BUILDER
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in {"build_api_mode_parts", "build_api_mode"}
    ]
    assert callers == []


def _config(tmp_path: Path) -> KubeletConfig:
    return KubeletConfig(
        node_name="node-1",
        root_dir=str(tmp_path / "root"),
        pod_logs_dir=str(tmp_path / "logs"),
        node_ips=("192.0.2.10",),
        memory_backed_volumes=False,
    )


def test_runtime_capabilities_are_declared() -> None:
    clock = WallClock()
    assert runtime_capabilities(SimRuntime(clock=clock)) == RuntimeCapabilities(simulated=True)
    tracking = ChangeTrackingSimRuntime(clock=clock)
    capabilities = runtime_capabilities(tracking)
    assert capabilities.simulated and capabilities.change_token == tracking.change_token
    assert runtime_capabilities(object()) == RuntimeCapabilities()  # a runtime that declares none


def test_a_simulated_runtime_gets_simulated_eviction_signals(tmp_path: Path) -> None:
    clock = WallClock()
    deps = KubeletDeps(runtime=SimRuntime(clock=clock), pod_config=PodConfig(sources=()), clock=clock)
    kubelet = build_kubelet(_config(tmp_path), deps).kubelet
    assert isinstance(kubelet._eviction_manager.signals, SimulatedSignals)
    assert kubelet._pleg.change_token is None


def test_a_change_tracking_runtime_gives_the_pleg_its_token(tmp_path: Path) -> None:
    clock = WallClock()
    runtime = ChangeTrackingSimRuntime(clock=clock)
    deps = KubeletDeps(
        runtime=runtime, pod_config=PodConfig(sources=()), clock=clock, instrument_runtime=True
    )
    kubelet = build_kubelet(_config(tmp_path), deps).kubelet
    assert kubelet._pleg.change_token == runtime.change_token  # read from the runtime, not the wrapper


def test_a_runtime_without_capabilities_reads_this_machine(tmp_path: Path) -> None:
    clock = WallClock()

    @attrs.define(eq=False)
    class Remote:
        """A runtime that declares nothing (as a CRI socket): every call goes to the SimRuntime."""

        inner: SimRuntime

        def __getattr__(self, name: str) -> object:
            if name == "capabilities":
                raise AttributeError(name)
            return getattr(self.inner, name)

    deps = KubeletDeps(
        runtime=Remote(SimRuntime(clock=clock)),  # type: ignore[arg-type]
        pod_config=PodConfig(sources=()),
        clock=clock,
    )
    kubelet = build_kubelet(_config(tmp_path), deps).kubelet
    assert isinstance(kubelet._eviction_manager.signals, HostSignals)


def test_the_calls_view_refuses_before_the_kubelet_is_built() -> None:
    clock = WallClock()
    calls = _KubeletCalls(SimRuntime(clock=clock), clock)
    with pytest.raises(RuntimeError, match="before it is built"):
        calls.active_pods()


def test_the_calls_view_is_bound_once(tmp_path: Path) -> None:
    clock = WallClock()
    deps = KubeletDeps(runtime=SimRuntime(clock=clock), pod_config=PodConfig(sources=()), clock=clock)
    kubelet = build_kubelet(_config(tmp_path), deps).kubelet
    calls = kubelet._pod_workers.syncer
    assert isinstance(calls, _KubeletCalls) and calls.kubelet is kubelet
    assert calls.active_pods() == [] and calls.sources_ready() == kubelet.sources_ready
    with pytest.raises(RuntimeError, match="bound already"):
        calls.bind(kubelet)


async def test_api_mode_adds_its_source_and_starts_its_components_in_order(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    clock = WallClock()
    async with open_fake_api() as api, api.client() as client:
        pod_config = PodConfig(sources=(), now=clock.now)  # the caller does not name the api source
        deps = KubeletDeps(
            runtime=SimRuntime(clock=clock, run_sync=run_inline),
            pod_config=pod_config,
            clock=clock,
            run_sync=run_inline,
            api_client=client,
            api_options=ApiModeOptions(machine=MACHINE),
        )
        node = build_kubelet(_config(tmp_path), deps)
        assert node.api is not None
        assert list(pod_config.sources) == [API_SOURCE]
        mode = node.api
        assert mode.components() == (
            mode.recorder,
            mode.node_status,
            mode.node_informer,
            mode.runtime_classes,
            mode.lease,
            mode.publisher,
            mode.mirrors,
            mode.tokens,
            mode.services,  # the service informer (the containers' service variables)
            mode.objects,  # the Watch strategy's store
        )
        # the components reading the Kubelet's pods see its own status manager, pods and workers
        kubelet = node.kubelet
        assert mode.publisher.host.status_manager is kubelet._status_manager
        assert mode.publisher.host.pod_manager is kubelet._pod_manager
        assert mode.mirrors.host.sources_ready is False
        async with trio.open_nursery() as nursery:
            await nursery.start(node.run)
            assert kubelet.ready.value
            nursery.cancel_scope.cancel()
