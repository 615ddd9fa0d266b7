"""The API client against the in-process fake API server (MockClock) and over real TLS on loopback."""

from __future__ import annotations

import base64
import json
import random
from pathlib import Path

import pytest
import trio
import trio.testing
import trustme

from kubelet_trio.client import (
    AlreadyExists,
    ApiClientError,
    ApiUnavailable,
    Conflict,
    Gone,
    Invalid,
    KubeConfigError,
    NotFound,
    RetryPolicy,
    ServerError,
    TokenBucket,
    load_kubeconfig,
    merge_patch_diff,
    open_api_client,
)
from kubelet_trio.client.kubeconfig import KubeConfig
from kubelet_trio.client.merge import apply_merge_patch
from kubelet_trio.testing.fakeapi import FakeApiApp, open_fake_api, serve_fake_api
from tests.apiserver.scripted import Reply, Seen, scripted_api

POD = {
    "metadata": {"name": "web"},
    "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "busybox"}]},
}


async def test_typed_errors_carry_the_status_message(autojump_clock: trio.testing.MockClock) -> None:
    async with open_fake_api() as api, api.client() as client:
        created = await client.create("/api/v1/namespaces/default/pods", POD)
        assert created["metadata"]["uid"] and created["metadata"]["resourceVersion"] == "1"
        with pytest.raises(AlreadyExists, match='pods "web" already exists') as exc:
            await client.create("/api/v1/namespaces/default/pods", POD)
        assert exc.value.code == 409 and isinstance(exc.value, Conflict)
        with pytest.raises(NotFound, match='pods "nope" not found'):
            await client.get("/api/v1/namespaces/default/pods/nope")
        with pytest.raises(Conflict, match="Precondition failed: UID in precondition: wrong"):
            await client.delete("/api/v1/namespaces/default/pods/web", uid="wrong")
        with pytest.raises(Invalid, match=r"metadata\.name: Required value"):
            await client.create("/api/v1/namespaces/default/pods", {"metadata": {}})
        api.app.inject("GET", r"/pods$", 410, reason="Expired", message="too old")
        with pytest.raises(Gone, match="too old"):
            await client.get("/api/v1/pods")


async def test_retries_5xx_honouring_retry_after(autojump_clock: trio.testing.MockClock) -> None:
    async with open_fake_api() as api, api.client(retry=RetryPolicy(max_attempts=4)) as client:
        api.app.inject("GET", r"/nodes$", 503, times=2, headers={"Retry-After": "3"})
        start = trio.current_time()
        await client.get("/api/v1/nodes")
        assert trio.current_time() - start == pytest.approx(6.0)
        assert len(api.app.requests_for("GET", r"/nodes$")) == 3


async def test_retries_429_then_gives_up(autojump_clock: trio.testing.MockClock) -> None:
    policy = RetryPolicy(max_attempts=3, initial=1.0, factor=2.0, jitter=0.0)
    async with open_fake_api() as api, api.client(retry=policy) as client:
        api.app.inject("GET", r"/nodes$", 429, times=5)
        api.app.inject("GET", r"/namespaces$", 500, times=5)
        start = trio.current_time()
        with pytest.raises(Exception, match="429"):
            await client.get("/api/v1/nodes")
        assert trio.current_time() - start == pytest.approx(3.0)  # 1 + 2, no sleep after the last try
        with pytest.raises(ServerError):
            await client.get("/api/v1/namespaces")


async def test_connection_errors_are_retried_with_backoff(autojump_clock: trio.testing.MockClock) -> None:
    policy = RetryPolicy(max_attempts=6, initial=0.5, factor=2.0, max_delay=4.0, jitter=0.5)
    async with open_fake_api() as api, api.client(retry=policy, rng=random.Random(1)) as client:
        api.go_down()
        with pytest.raises(ApiUnavailable, match="connection refused"):
            await client.get("/api/v1/nodes")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(client.get, "/api/v1/nodes")
            await trio.sleep(1.0)
            api.come_back()  # a later attempt gets through


async def test_rate_limit_qps_and_burst(autojump_clock: trio.testing.MockClock) -> None:
    async with open_fake_api() as api, api.client(qps=50, burst=100) as client:
        start = trio.current_time()
        for _ in range(100):
            await client.get_text("/healthz")
        assert trio.current_time() == start  # the burst
        for _ in range(100):
            await client.get_text("/healthz")
        assert trio.current_time() - start == pytest.approx(2.0)  # then 50 per second


async def test_token_bucket_returns_a_cancelled_reservation(autojump_clock: trio.testing.MockClock) -> None:
    bucket = TokenBucket(qps=1, burst=1)
    await bucket.acquire()
    with trio.move_on_after(0.5):
        await bucket.acquire()
    start = trio.current_time()
    await bucket.acquire()
    assert trio.current_time() - start == pytest.approx(0.5)  # due at t=1, not t=2


async def test_watch_streams_events_bookmarks_and_ends(autojump_clock: trio.testing.MockClock) -> None:
    async with open_fake_api(bookmark_interval=2.0) as api, api.client() as client:
        api.create_pod(POD)
        listing = await client.get("/api/v1/pods", {"fieldSelector": "spec.nodeName=n1"})
        rv = listing["metadata"]["resourceVersion"]
        params = {"resourceVersion": rv, "allowWatchBookmarks": "true", "timeoutSeconds": "5"}
        seen: list[tuple[str, str | None]] = []
        async with client.open_watch("/api/v1/pods", params) as events:
            await client.merge_patch(
                "/api/v1/namespaces/default/pods/web", {"metadata": {"labels": {"a": "b"}}}
            )
            async for event in events:
                seen.append((event.type, event.resource_version))
        assert seen[0] == ("MODIFIED", "2")
        assert ("BOOKMARK", "2") in seen
        assert trio.current_time() == pytest.approx(5.0)


async def test_watch_from_a_compacted_version_is_gone(autojump_clock: trio.testing.MockClock) -> None:
    async with open_fake_api() as api, api.client() as client:
        api.create_pod(POD)
        api.create_pod({**POD, "metadata": {"name": "other"}})
        api.store.compact()  # history up to resourceVersion 2 is gone
        async with client.open_watch("/api/v1/pods", {"resourceVersion": "1"}) as events:
            event = await events.receive()
        assert event.type == "ERROR"
        assert isinstance(event.error(), Gone)


async def test_watch_breaks_when_the_server_goes_away(autojump_clock: trio.testing.MockClock) -> None:
    async with (
        open_fake_api() as api,
        api.client() as client,
        client.open_watch("/api/v1/pods", {"resourceVersion": "0"}) as events,
    ):
        api.go_down()
        event = await events.receive()
        assert event.type == "ERROR" and "broken" in event.object["message"]


async def test_exceptions_in_a_watch_block_are_not_wrapped(autojump_clock: trio.testing.MockClock) -> None:
    async with open_fake_api() as api, api.client() as client:
        with pytest.raises(KeyError):
            async with client.open_watch("/api/v1/pods", {"resourceVersion": "0"}):
                raise KeyError("mine")


def test_merge_patch_roundtrip() -> None:
    old = {"a": 1, "b": {"c": 2, "d": [1, 2]}, "e": "x"}
    new = {"a": 1, "b": {"c": 3, "d": [1, 2]}, "f": True}
    patch = merge_patch_diff(old, new)
    assert patch == {"b": {"c": 3}, "e": None, "f": True}
    assert apply_merge_patch(old, patch) == new
    assert merge_patch_diff(new, new) == {}


# -- kubeconfig and TLS ---------------------------------------------------------------------------


def _write_kubeconfig(
    path: Path, server: str, *, user: dict[str, object], cluster: dict[str, object]
) -> Path:
    import yaml

    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "main",
        "contexts": [{"name": "main", "context": {"cluster": "c", "user": "u"}}],
        "clusters": [{"name": "c", "cluster": {"server": server, **cluster}}],
        "users": [{"name": "u", "user": user}],
    }
    path.write_text(yaml.safe_dump(doc))
    return path


def test_kubeconfig_files_data_and_token(tmp_path: Path) -> None:
    ca = trustme.CA()
    (tmp_path / "ca.crt").write_bytes(ca.cert_pem.bytes())
    (tmp_path / "token").write_text("s3cret\n")
    cfg = load_kubeconfig(
        _write_kubeconfig(
            tmp_path / "kubeconfig",
            "https://127.0.0.1:6443/",
            cluster={"certificate-authority": "ca.crt", "tls-server-name": "kubernetes"},
            user={"tokenFile": "token"},
        )
    )
    assert cfg.server == "https://127.0.0.1:6443"
    assert cfg.ca_data == ca.cert_pem.bytes()
    assert cfg.token_file == str(tmp_path / "token")
    assert cfg.tls_server_name == "kubernetes"
    leaf = ca.issue_cert("node-1")
    cfg = load_kubeconfig(
        _write_kubeconfig(
            tmp_path / "kubeconfig2",
            "https://x",
            cluster={"certificate-authority-data": base64.b64encode(ca.cert_pem.bytes()).decode()},
            user={
                "client-certificate-data": base64.b64encode(leaf.cert_chain_pems[0].bytes()).decode(),
                "client-key-data": base64.b64encode(leaf.private_key_pem.bytes()).decode(),
            },
        )
    )
    assert cfg.client_cert_data and cfg.client_key_data
    with pytest.raises(KubeConfigError, match="no context named 'other'"):
        load_kubeconfig(tmp_path / "kubeconfig", context="other")
    with pytest.raises(KubeConfigError, match="cannot read"):
        load_kubeconfig(tmp_path / "missing")


async def test_tls_verification_token_and_client_certificate(tmp_path: Path) -> None:
    ca = trustme.CA()
    server_cert = ca.issue_cert("127.0.0.1")
    server_cert.private_key_and_cert_chain_pem.write_to_path(str(tmp_path / "server.pem"))
    client_cert = ca.issue_cert("node-n1.example")
    app = FakeApiApp(token="t0ken")
    with trio.fail_after(30):
        async with serve_fake_api(
            app, certfile=tmp_path / "server.pem", keyfile=tmp_path / "server.pem"
        ) as url:
            assert url.startswith("https://127.0.0.1:")
            good = load_kubeconfig(
                _write_kubeconfig(
                    tmp_path / "good",
                    url,
                    cluster={"certificate-authority-data": base64.b64encode(ca.cert_pem.bytes()).decode()},
                    user={
                        "token": "t0ken",
                        "client-certificate-data": base64.b64encode(
                            client_cert.cert_chain_pems[0].bytes()
                        ).decode(),
                        "client-key-data": base64.b64encode(client_cert.private_key_pem.bytes()).decode(),
                    },
                )
            )
            async with open_api_client(good) as client:
                assert (await client.get("/version"))["major"] == "1"
                await client.create("/api/v1/namespaces/default/pods", POD)
                async with client.open_watch("/api/v1/pods", {"resourceVersion": "0"}) as events:
                    event = await events.receive()
                    assert event.type == "ADDED" and event.object["metadata"]["name"] == "web"
            # No CA: verification is on by default and fails.
            untrusted = load_kubeconfig(
                _write_kubeconfig(tmp_path / "bad", url, cluster={}, user={"token": "t0ken"})
            )
            async with open_api_client(untrusted, retry=RetryPolicy(max_attempts=1)) as client:
                with pytest.raises(
                    ApiUnavailable, match=r"CERTIFICATE_VERIFY_FAILED|certificate verify failed"
                ):
                    await client.get("/version")
            insecure = load_kubeconfig(
                _write_kubeconfig(
                    tmp_path / "insecure",
                    url,
                    cluster={"insecure-skip-tls-verify": True},
                    user={"token": "nope"},
                )
            )
            async with open_api_client(insecure) as client:
                with pytest.raises(Exception, match="401"):
                    await client.get("/api/v1/pods")


async def test_a_served_watch_answers_before_its_first_event(tmp_path: Path) -> None:
    """As kube-apiserver does, the response head goes out when the watch starts: a client that opens
    a watch before making the change it waits for must not wait for an event (or a bookmark) first."""
    app = FakeApiApp(bookmark_interval=3600)
    with trio.fail_after(10):
        async with serve_fake_api(app) as url:
            config = load_kubeconfig(_write_kubeconfig(tmp_path / "kc", url, cluster={}, user={}))
            async with open_api_client(config) as client:
                listed = await client.get("/api/v1/namespaces/default/pods")
                params = {"resourceVersion": listed["metadata"]["resourceVersion"]}
                async with client.open_watch("/api/v1/namespaces/default/pods", params) as events:
                    await client.create("/api/v1/namespaces/default/pods", POD)
                    event = await events.receive()
                    assert event.type == "ADDED" and event.object["metadata"]["name"] == "web"


async def test_an_undecodable_answer_is_a_client_error() -> None:
    async with scripted_api(lambda _: Reply(200, b"<html>proxy login</html>")) as client:
        with pytest.raises(ApiClientError, match="GET /api/v1/nodes: the answer is not JSON"):
            await client.get("/api/v1/nodes")


async def test_requests_keep_the_servers_path_prefix_and_send_headers_and_query() -> None:
    """The request target, query, fields and body as the server receives them (a kubeconfig server behind
    a proxy has a path prefix)."""
    seen: list[Seen] = []

    def handler(request: Seen) -> Reply:
        seen.append(request)
        return Reply.json({"kind": "PodList", "items": []})

    config = KubeConfig(server="http://api.example:6443/k8s/clusters/c-1", token="t0k")
    async with scripted_api(handler, config=config) as client:
        listed = await client.get("/api/v1/pods", {"fieldSelector": "spec.nodeName=n-1", "limit": "500"})
        await client.merge_patch(
            "/api/v1/namespaces/default/pods/web/status", {"status": {"phase": "Running"}}
        )
    assert listed == {"kind": "PodList", "items": []}
    get, patch = seen
    assert (get.method, get.path) == ("GET", "/k8s/clusters/c-1/api/v1/pods")
    assert get.query == {"fieldSelector": "spec.nodeName=n-1", "limit": "500"}
    assert get.headers["authorization"] == "Bearer t0k" and get.headers["accept"] == "application/json"
    assert get.headers["host"] == "api.example:6443" and get.headers["accept-encoding"] == "gzip"
    assert get.headers["user-agent"].startswith("kubelet-trio/")
    assert patch.method == "PATCH" and patch.headers["content-type"] == "application/merge-patch+json"
    assert json.loads(patch.body) == {"status": {"phase": "Running"}}
    assert patch.path == "/k8s/clusters/c-1/api/v1/namespaces/default/pods/web/status"
    assert "accept-encoding" not in patch.headers
