"""The pytest plugin of ``kubelet-trio[testing]``, run the way a harness author runs it (pytester)."""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parents[2]
PLUGIN = "kubelet_trio.testing.pytest_plugin"
INI = "[pytest]\ntrio_mode = true\naddopts = -p no:asyncio -p no:cacheprovider\n"


@pytest.fixture
def harness(pytester: pytest.Pytester) -> pytest.Pytester:
    """A harness author's project: Trio tests, the plugin given by name (the entry point when installed)."""
    pytester.makeini(INI)
    return pytester


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("-p", PLUGIN, *args)


def test_the_entry_point_names_the_plugin_module() -> None:
    """``pip install kubelet-trio[testing]`` loads the plugin; named as ``-p`` names it, both can be used."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["entry-points"]["pytest11"] == {PLUGIN: PLUGIN}
    assert {"pytest-trio>=0.8"} <= set(project["optional-dependencies"]["testing"])


def test_fixtures_are_listed_with_their_docs(harness: pytest.Pytester) -> None:
    result = run(harness, "--fixtures")
    assert result.ret == 0
    result.stdout.fnmatch_lines(
        [
            "*fixtures defined from kubelet_trio.testing.pytest_plugin*",
            "kubelet_clock -- *",
            "    The wall clock shared*",
            "sim_node -- *",
            "    A factory of nodes on the simulated runtime*",
            "fake_apiserver -- *",
            "    The fake API server, in-process and on a loopback port*",
            "api_node -- *",
            "    A factory of API-mode nodes joined to ``fake_apiserver``*",
        ]
    )


def test_the_containerd_marker_is_registered(harness: pytest.Pytester) -> None:
    harness.makepyfile(
        """
        import pytest

        @pytest.mark.containerd
        def test_marked():
            pass
        """
    )
    run(harness, "--strict-markers").assert_outcomes(passed=1)
    result = run(harness, "--markers")
    result.stdout.fnmatch_lines(["@pytest.mark.containerd: the test needs a private containerd*"])
    # Without the plugin the marker is unknown: the plugin is what registers it.
    blocked = harness.runpytest_subprocess("--strict-markers", "-p", f"no:{PLUGIN}")
    assert blocked.ret == pytest.ExitCode.INTERRUPTED


def test_sim_node_runs_nodes_on_the_mock_clock(harness: pytest.Pytester) -> None:
    harness.makepyfile(
        """
        import trio
        import pytest
        from kubelet_trio.testing.pods import container_status, pod_manifest

        async def test_two_nodes_and_a_crash_loop(sim_node, autojump_clock):
            a = await sim_node("a")
            b = await sim_node("b")
            assert a.kubelet.config.node_name == "a" and b.kubelet.config.node_name == "b"
            assert sorted(sim_node.nodes) == ["a", "b"]
            [pod] = await a.apply(pod_manifest("crasher", {"app": "exit 2 after 1s"}))
            start = trio.current_time()
            status = await a.wait_for(pod, lambda s: container_status(s).restart_count >= 3)
            assert 10 + 20 <= trio.current_time() - start < 3600  # back-off: virtual time, not real
            assert container_status(status).last_state.terminated.exit_code == 2
            assert b.kubelet.status_of(pod.uid) is None  # nodes are independent

        async def test_the_node_name_is_unique_per_test(sim_node):
            await sim_node("a")
            with pytest.raises(ValueError, match="'a' is already running"):
                await sim_node("a")
        """
    )
    run(harness, "-v").assert_outcomes(passed=2)


def test_fake_apiserver_is_in_process_and_on_loopback_with_a_kubeconfig(harness: pytest.Pytester) -> None:
    harness.makepyfile(
        """
        import httpx
        import yaml

        async def test_both_ways_see_one_store(fake_apiserver, tmp_path):
            fake_apiserver.create_pod({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}})
            config = yaml.safe_load(fake_apiserver.kubeconfig.read_text())
            server = config["clusters"][0]["cluster"]["server"]
            assert server == fake_apiserver.url and server.startswith("http://127.0.0.1:")
            async with httpx.AsyncClient() as http:
                answer = (await http.get(f"{server}/api/v1/namespaces/default/pods")).json()
            assert [p["metadata"]["name"] for p in answer["items"]] == ["p"]
            async with fake_apiserver.client() as client:  # in-process, on Trio's clock
                await client.create("/api/v1/nodes", {"metadata": {"name": "n"}})
            assert fake_apiserver.node("n")["metadata"]["name"] == "n"
        """
    )
    run(harness).assert_outcomes(passed=1)


def test_api_node_joins_the_fake_apiserver_and_runs_its_pods(harness: pytest.Pytester) -> None:
    harness.makepyfile(
        """
        import trio
        from kubelet_trio.testing.apinode import node_ready
        from kubelet_trio.testing.pods import pod_manifest

        def phase(api, name):
            return api.pod(name).get("status", {}).get("phase")

        async def test_registers_and_runs_a_bound_pod(fake_apiserver, api_node, autojump_clock):
            node = await api_node("worker-1", sync_frequency=5.0)
            assert node.name == "worker-1"
            with trio.fail_after(60):
                await fake_apiserver.wait_for(lambda: node_ready(fake_apiserver, "worker-1"))
            fake_apiserver.seed_namespace()
            fake_apiserver.create_pod(pod_manifest("job", {"app": "exit 0 after 3s"}, node="worker-1",
                                                   restart_policy="Never"))
            with trio.fail_after(60):
                await fake_apiserver.wait_for(lambda: phase(fake_apiserver, "job") == "Succeeded")
            assert fake_apiserver.lease("worker-1")["spec"]["holderIdentity"] == "worker-1"
        """
    )
    run(harness).assert_outcomes(passed=1)


def test_the_worked_example_passes(harness: pytest.Pytester) -> None:
    """``examples/harness`` as a user runs it: its own pytest.ini (which names the plugin)."""
    example = REPO / "examples" / "harness"
    for name in ("test_harness_example.py", "pytest.ini"):
        shutil.copy(example / name, harness.path / name)
    result = harness.runpytest("-v")
    result.assert_outcomes(passed=4)
