"""Service environment variables (Go ``getServiceEnvVarMap`` + ``envvars.FromServices``): every container
gets the ``kubernetes`` Service's, and with ``enableServiceLinks`` those of its namespace's Services, from
the node's service informer; the upstream spec ``Pods should contain environment variables for
services`` checks the same names."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from kubelet_trio.api import Container, Pod
from kubelet_trio.clock import WallClock
from kubelet_trio.envvars import ServiceInfo, ServicePort, from_services, service_env_map
from kubelet_trio.kuberuntime.envvars import make_environment_variables
from kubelet_trio.testing.fakeapi import open_fake_api
from tests.apiserver.harness import open_api_node, pod_manifest
from tests.apiserver.pod_status import api_container, running

FOO = ServiceInfo(
    "ns", "fooservice", "10.0.0.7", (ServicePort("", 8765, "TCP"), ServicePort("metrics", 9090, "UDP"))
)
MASTER = ServiceInfo("default", "kubernetes", "10.0.0.1", (ServicePort("https", 443, "TCP"),))


def test_the_variables_of_a_service_as_go_names_them() -> None:
    assert from_services([FOO]) == [
        ("FOOSERVICE_SERVICE_HOST", "10.0.0.7"),
        ("FOOSERVICE_SERVICE_PORT", "8765"),
        ("FOOSERVICE_SERVICE_PORT_METRICS", "9090"),
        ("FOOSERVICE_PORT", "tcp://10.0.0.7:8765"),
        ("FOOSERVICE_PORT_8765_TCP", "tcp://10.0.0.7:8765"),
        ("FOOSERVICE_PORT_8765_TCP_PROTO", "tcp"),
        ("FOOSERVICE_PORT_8765_TCP_PORT", "8765"),
        ("FOOSERVICE_PORT_8765_TCP_ADDR", "10.0.0.7"),
        ("FOOSERVICE_PORT_9090_UDP", "udp://10.0.0.7:9090"),
        ("FOOSERVICE_PORT_9090_UDP_PROTO", "udp"),
        ("FOOSERVICE_PORT_9090_UDP_PORT", "9090"),
        ("FOOSERVICE_PORT_9090_UDP_ADDR", "10.0.0.7"),
    ]
    v6 = ServiceInfo("ns", "my-svc", "fd00::1", (ServicePort("", 80, "TCP"),))
    assert dict(from_services([v6]))["MY_SVC_PORT"] == "tcp://[fd00::1]:80"
    headless = ServiceInfo("ns", "headless", "None", (ServicePort("", 80, "TCP"),))
    assert from_services([headless]) == []


@pytest.mark.parametrize(
    ("links", "expected"), [(True, {"KUBERNETES", "FOOSERVICE"}), (False, {"KUBERNETES"})]
)
def test_which_services_a_pod_sees(links: bool, expected: set[str]) -> None:
    other = ServiceInfo("elsewhere", "bar", "10.0.0.9", (ServicePort("", 1, "TCP"),))
    env = service_env_map([MASTER, FOO, other], "ns", links)
    assert {name.removesuffix("_SERVICE_HOST") for name in env if name.endswith("_SERVICE_HOST")} == expected
    # a namespace's own "kubernetes" Service shadows the master one
    own = ServiceInfo("ns", "kubernetes", "10.0.0.99", (ServicePort("", 1, "TCP"),))
    for services in ([MASTER, own], [own, MASTER]):
        assert service_env_map(services, "ns", True)["KUBERNETES_SERVICE_HOST"] == "10.0.0.99"


def test_a_container_variable_wins_and_may_name_a_service_variable() -> None:
    pod = Pod.from_dict(
        {"metadata": {"name": "p", "namespace": "ns"}, "spec": {"containers": [{"name": "c"}]}}
    )
    container = Container.from_dict(
        {
            "name": "c",
            "env": [
                {"name": "FOOSERVICE_SERVICE_PORT", "value": "1"},
                {"name": "URL", "value": "http://$(FOOSERVICE_SERVICE_HOST):$(FOOSERVICE_SERVICE_PORT)"},
            ],
        }
    )
    env = make_environment_variables(pod, container, service_env=service_env_map([FOO], "ns", True))
    assert env[:2] == [("FOOSERVICE_SERVICE_PORT", "1"), ("URL", "http://10.0.0.7:1")]
    assert ("FOOSERVICE_SERVICE_HOST", "10.0.0.7") in env[2:]
    assert [name for name, _ in env].count("FOOSERVICE_SERVICE_PORT") == 1


def _service(name: str, namespace: str, ip: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"clusterIP": ip, "ports": [{"port": 8765, "protocol": "TCP"}]},
    }


async def test_containers_get_the_variables_of_the_services_they_see(
    autojump_clock: trio.testing.MockClock,
) -> None:
    clock = WallClock()
    async with open_fake_api(now=clock.now) as api, open_api_node(api, clock=clock) as node:
        api.store.create("services", "default", _service("fooservice", "default", "10.0.0.7"))
        api.store.create("services", "default", _service("headless", "default", "None"))
        api.store.create("services", "other", _service("elsewhere", "other", "10.0.0.8"))
        await trio.sleep(1)
        api.create_pod(pod_manifest("links", {"app": "run"}))
        api.create_pod(pod_manifest("nolinks", {"app": "run"}, enableServiceLinks=False))
        with trio.fail_after(30):
            await api.wait_for(lambda: running(api, "links") and running(api, "nolinks"))

        def env(pod: str) -> dict[str, str]:
            container_id = api_container(api, pod, "app")["containerID"].partition("://")[2]
            return {e.key: e.value for e in node.sim.container_config(container_id).envs}

        links, nolinks = env("links"), env("nolinks")
        assert links["KUBERNETES_SERVICE_HOST"] == "10.0.0.1" and links["KUBERNETES_SERVICE_PORT"] == "443"
        assert links["FOOSERVICE_SERVICE_HOST"] == "10.0.0.7"
        assert links["FOOSERVICE_PORT"] == "tcp://10.0.0.7:8765"
        assert not any(k.startswith(("HEADLESS_", "ELSEWHERE_")) for k in links)
        assert nolinks["KUBERNETES_SERVICE_HOST"] == "10.0.0.1"
        assert not any(k.startswith("FOOSERVICE_") for k in nolinks)
        # only non-headless services were asked for
        lists = api.app.requests_for("GET", r"^/api/v1/services$")
        assert lists and all(r.query.get("fieldSelector") == "spec.clusterIP!=None" for r in lists)
