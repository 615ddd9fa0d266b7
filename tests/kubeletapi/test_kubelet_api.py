"""The Kubelet API (``--port``): real TLS on 127.0.0.1 with trustme certificates, client-certificate and
TokenReview authentication, SubjectAccessReview authorization against the fake API server, and the
self-signed serving certificate made when none is configured."""

from __future__ import annotations

import contextlib
import ipaddress
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
import trustme
from cryptography import x509

from kubelet_trio.apimode import ApiModeOptions
from kubelet_trio.client.errors import BadRequest, Unauthorized
from kubelet_trio.options import component_configs, load_options
from kubelet_trio.server.auth import request_attributes
from kubelet_trio.testing.fakeapi.server import open_fake_api
from kubelet_trio.testing.node import SimNode, open_sim_node
from kubelet_trio.testing.registry import free_port
from tests.apiserver.harness import MACHINE, node_ready, open_api_node, pod_manifest
from tests.apiserver.pod_status import running

NODE = "node-a"
TALKER = {
    "metadata": {"name": "talk", "annotations": {"sim.kubelet-trio.io/app": 'print "hello"; run'}},
    "spec": {"containers": [{"name": "app", "image": "registry.sim/busybox:1.36"}]},
}
LOGS = "/containerLogs/default/talk/app"


def server_files(ca: trustme.CA, tmp_path: Path) -> dict[str, str]:
    leaf = ca.issue_cert("127.0.0.1", NODE)
    leaf.cert_chain_pems[0].write_to_path(str(tmp_path / "kubelet.crt"))
    leaf.private_key_pem.write_to_path(str(tmp_path / "kubelet.key"))
    ca.cert_pem.write_to_path(str(tmp_path / "client-ca.crt"))
    return {
        "tls_cert_file": str(tmp_path / "kubelet.crt"),
        "tls_private_key_file": str(tmp_path / "kubelet.key"),
        "client_ca_file": str(tmp_path / "client-ca.crt"),
    }


def tls_client(ca: trustme.CA, cert: trustme.LeafCert | None = None, **kwargs: Any) -> httpx.AsyncClient:
    context = ssl.create_default_context()
    ca.configure_trust(context)
    if cert is not None:
        cert.configure_cert(context)
    return httpx.AsyncClient(verify=context, timeout=10, **kwargs)


@contextlib.asynccontextmanager
async def api_node(tmp_path: Path, **config: Any) -> AsyncIterator[tuple[SimNode, str]]:
    async with open_sim_node(
        NODE, port=free_port(), address="127.0.0.1", root_dir=str(tmp_path / "root"), **config
    ) as node:
        yield node, node.kubelet.http_urls["api"]


async def test_client_certificate_reads_logs_and_no_credentials_is_401(tmp_path: Path) -> None:
    ca = trustme.CA()
    alice = ca.issue_cert("alice@example", common_name="alice", organization_name="ops")
    with trio.fail_after(30):
        async with api_node(tmp_path, **server_files(ca, tmp_path)) as (node, url):
            assert url.startswith("https://127.0.0.1:")
            (pod,) = await node.apply(TALKER)
            await node.wait_for_phase(pod, "Running")
            async with tls_client(ca, alice, base_url=url) as client:
                while (response := await client.get(LOGS)).text != "hello\n":
                    assert response.status_code in (200, 404), response.text
                    await trio.sleep(0.05)
                assert response.status_code == 200
                pods = await client.get("/pods")
                assert pods.status_code == 200 and pods.json()["items"][0]["metadata"]["name"] == "talk"
            async with tls_client(ca, base_url=url) as anonymous:
                response = await anonymous.get(LOGS)
                assert (response.status_code, response.text) == (401, "Unauthorized\n")
                assert (await anonymous.get("/healthz")).status_code == 401
            stranger = trustme.CA().issue_cert("mallory", common_name="mallory")
            async with tls_client(ca, stranger, base_url=url) as client:
                try:
                    response = await client.get("/pods")
                except httpx.TransportError:
                    pass  # the handshake refuses a certificate of another CA
                else:
                    raise AssertionError(f"untrusted client certificate got {response.status_code}")


async def test_bearer_tokens_through_token_review_and_access_reviews(tmp_path: Path) -> None:
    ca = trustme.CA()
    with trio.fail_after(30):
        async with open_fake_api() as api, api.client() as api_client:
            api.app.tokens["good"] = {"username": "bob", "groups": ["devs"]}
            api.app.tokens["weak"] = {"username": "eve", "groups": []}
            api.app.allowed.add(("bob", "get", "nodes/proxy"))
            async with (
                api_node(
                    tmp_path,
                    authentication_token_webhook=True,
                    authorization_mode="Webhook",
                    unauthorized_cache_ttl=0,  # the denial below is followed by a grant
                    webhook_client=api_client,
                    **server_files(ca, tmp_path),
                ) as (_node, url),
                tls_client(ca, base_url=url) as client,
            ):

                async def get(path: str, token: str) -> httpx.Response:
                    return await client.get(path, headers={"Authorization": f"Bearer {token}"})

                response = await get("/pods", "good")
                assert response.status_code == 200, response.text
                review = api.app.requests_for("POST", "/apis/authorization.k8s.io/v1/")[-1].body
                assert review["spec"]["user"] == "bob" and review["spec"]["groups"] == ["devs"]
                assert review["spec"]["resourceAttributes"] == {
                    "verb": "get",
                    "group": "",
                    "version": "v1",
                    "resource": "nodes",
                    "subresource": "proxy",
                    "name": NODE,
                    "namespace": "",
                }
                assert (await get("/pods", "unknown")).status_code == 401
                denied = await get("/pods", "weak")
                assert denied.status_code == 403
                assert (
                    denied.text == "Forbidden (user=eve, verb=get, resource=nodes, subresource(s)=[proxy])\n"
                )
                assert (await get("/metrics", "good")).status_code == 403  # nodes/metrics not granted
                api.app.allowed.add(("bob", "get", "nodes/metrics"))
                assert (await get("/metrics", "good")).status_code == 200


def test_request_attributes_follow_the_go_kubelet() -> None:
    def sub(method: str, path: str) -> tuple[str, str]:
        attributes = request_attributes(NODE, method, path)
        return attributes["verb"], attributes["subresource"]

    assert sub("GET", "/stats/summary") == ("get", "stats")
    assert sub("GET", "/metrics/cadvisor") == ("get", "metrics")
    assert sub("GET", "/logs/syslog") == ("get", "log")
    assert sub("GET", "/containerLogs/default/p/c") == ("get", "proxy")
    assert sub("POST", "/exec/default/p/c") == ("create", "proxy")
    assert sub("GET", "/statsfoo") == ("get", "proxy")


async def test_self_signed_certificate_when_none_is_configured(tmp_path: Path) -> None:
    with trio.fail_after(30):
        async with api_node(tmp_path, node_ips=("192.0.2.10",), anonymous_auth=True) as (_, url):
            cert_path = tmp_path / "root" / "pki" / "kubelet.crt"
            assert (tmp_path / "root" / "pki" / "kubelet.key").stat().st_mode & 0o777 == 0o600
            cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
            sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
            assert NODE in sans.get_values_for_type(x509.DNSName)
            ips = sans.get_values_for_type(x509.IPAddress)
            assert ipaddress.ip_address("127.0.0.1") in ips and ipaddress.ip_address("192.0.2.10") in ips
            context = ssl.create_default_context(cafile=str(cert_path))
            async with httpx.AsyncClient(verify=context, base_url=url, timeout=10) as client:
                response = await client.get("/healthz")  # anonymous on, AlwaysAllow
                assert (response.status_code, response.text) == (200, "ok")
    before = cert_path.read_bytes()
    with trio.fail_after(30):
        async with api_node(tmp_path, node_ips=("192.0.2.10",)):
            assert cert_path.read_bytes() == before  # kept across restarts


def test_the_configured_port_is_published_in_daemon_endpoints() -> None:
    options, _ = load_options(["--port", "10251", "--anonymous-auth=true", "--authorization-mode", "Webhook"])
    assert component_configs(options).api_mode.kubelet_port == 10251
    assert (options.anonymous_auth, options.authorization_mode) == (True, "Webhook")
    assert component_configs(load_options([])[0]).api_mode.kubelet_port == 10250


async def test_kubectl_logs_through_the_api_server(tmp_path: Path) -> None:
    """``kubectl logs``: the API server proxies pods/log to the node's daemonEndpoints port, presenting
    its kubelet client certificate; without one the kubelet refuses it."""
    ca = trustme.CA()
    apiserver = ca.issue_cert(
        "kube-apiserver-kubelet-client",
        common_name="kube-apiserver-kubelet-client",
        organization_name="system:masters",
    )
    port = free_port()
    with trio.fail_after(30):
        async with (
            open_fake_api() as api,
            open_api_node(
                api,
                NODE,
                port=port,
                address="127.0.0.1",
                node_ips=("127.0.0.1",),
                options=ApiModeOptions(machine=MACHINE, kubelet_port=port),
                **server_files(ca, tmp_path),
            ),
            api.client() as kubectl,
        ):
            await api.wait_for(lambda: node_ready(api, NODE))
            api.create_pod(pod_manifest("talk", {"app": 'print "hello"; print "world"; run'}, node=NODE))
            await api.wait_for(lambda: running(api, "talk"))
            context = ssl.create_default_context()
            ca.configure_trust(context)
            apiserver.configure_cert(context)
            api.app.kubelet_tls = context
            path = "/api/v1/namespaces/default/pods/talk/log"
            while True:  # the log is complete once the container printed both lines
                if await kubectl.get_text(path) == "hello\nworld\n":
                    break
                await trio.sleep(0.05)
            assert await kubectl.get_text(path, {"container": "app", "tailLines": "1"}) == "world\n"
            with pytest.raises(BadRequest) as missing:
                await kubectl.get_text(path, {"container": "nope"})
            assert missing.value.message == "container nope is not valid for pod talk"

            api.app.kubelet_tls = None  # an API server without a kubelet client certificate
            with pytest.raises(Unauthorized) as refused:
                await kubectl.get_text(path)
            assert refused.value.message == "Unauthorized"
