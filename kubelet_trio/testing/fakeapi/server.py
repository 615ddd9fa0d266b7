"""Ways to run the fake API server: in-process (``open_fake_api``) or on a loopback port (``serve_fake_api``).

``open_fake_api`` is what MockClock tests use: a :class:`FakeApi` with the store, the ASGI app, the
in-process loopback (:mod:`~kubelet_trio.testing.fakeapi.transport`: the production API client and HTTP
server on a socket pair) and ``client()`` to open an ``ApiClient`` on it. ``serve_fake_api`` serves
the same app on 127.0.0.1 (optionally over TLS) with the kubelet's own HTTP server
(:mod:`kubelet_trio.httpserver.http11`, which also carries exec/attach/port-forward upgrades) for real-time
tests and for the daemon's ``--kubeconfig`` path; ``open_served_fake_api`` is both at once, with a
kubeconfig file for ``kubectl`` and other clients.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import ssl
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import attrs
import trio
import yaml

from kubelet_trio.client import ApiClient, RetryPolicy, open_api_client
from kubelet_trio.httpserver.http11 import HttpServer
from kubelet_trio.testing.fakeapi.app import FakeApiApp
from kubelet_trio.testing.fakeapi.store import FakeStore, Obj
from kubelet_trio.testing.fakeapi.tokens import seed_namespace
from kubelet_trio.testing.fakeapi.transport import Loopback, open_loopback

FAKE_URL = "http://fake-apiserver"


@attrs.define(eq=False)
class FakeApi:
    app: FakeApiApp
    loopback: Loopback

    @property
    def store(self) -> FakeStore:
        return self.app.store

    def client(self, **kwargs: Any) -> contextlib.AbstractAsyncContextManager[ApiClient]:
        kwargs.setdefault("retry", RetryPolicy(max_attempts=3, initial=0.1, max_delay=1.0))
        return open_api_client(server=FAKE_URL, connect=self.loopback.connect, **kwargs)

    def go_down(self) -> None:
        self.loopback.go_down()

    def come_back(self) -> None:
        self.loopback.come_back()

    async def wait_for(self, predicate: Callable[[], bool]) -> None:
        """Wait until ``predicate`` (over the store) holds; re-checked after every write. The caller
        bounds it with ``trio.fail_after``."""
        while not predicate():
            await self.store.changed.wait_transition()

    # -- shortcuts --------------------------------------------------------------------------------

    def pod(self, name: str, namespace: str = "default") -> Obj:
        return self.store.get("pods", namespace, name)

    def pods(self, namespace: str | None = None) -> list[Obj]:
        items: list[Obj] = self.store.list("pods", namespace)["items"]
        return items

    def has_pod(self, name: str, namespace: str = "default") -> bool:
        return any(p["metadata"]["name"] == name for p in self.pods(namespace))

    def create_pod(self, manifest: Obj, namespace: str = "default") -> Obj:
        return self.store.create("pods", namespace, manifest)

    def node(self, name: str) -> Obj:
        return self.store.get("nodes", None, name)

    def lease(self, name: str) -> Obj:
        return self.store.get("leases", "kube-node-lease", name)

    def seed_namespace(self, namespace: str = "default") -> None:
        """The ``default`` ServiceAccount and ``kube-root-ca.crt`` ConfigMap a real cluster has."""
        seed_namespace(self.store, namespace)

    def events(self, namespace: str | None = None) -> list[Obj]:
        items: list[Obj] = self.store.list("events", namespace)["items"]
        return items

    def create_runtime_class(self, name: str, handler: str, *, pod_fixed: Obj | None = None) -> Obj:
        """A ``node.k8s.io/v1`` RuntimeClass (``pod_fixed``: its ``overhead.podFixed``)."""
        body: Obj = {"metadata": {"name": name}, "handler": handler}
        if pod_fixed is not None:
            body["overhead"] = {"podFixed": pod_fixed}
        return self.store.create("runtimeclasses", None, body)


@contextlib.asynccontextmanager
async def open_fake_api(
    *, now: Callable[[], dt.datetime] | None = None, bookmark_interval: float = 5.0, history_limit: int = 1000
) -> AsyncIterator[FakeApi]:
    store = (
        FakeStore(history_limit=history_limit) if now is None else FakeStore(now, history_limit=history_limit)
    )
    app = FakeApiApp(store, bookmark_interval=bookmark_interval)
    async with open_loopback(app) as loopback:
        yield FakeApi(app, loopback)


@contextlib.asynccontextmanager
async def serve_fake_api(
    app: FakeApiApp,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    certfile: Path | None = None,
    keyfile: Path | None = None,
) -> AsyncIterator[str]:
    """Serve ``app`` on ``host``:``port`` (default: an ephemeral loopback port); yields its base URL
    (https when a cert is given)."""
    sock = trio.socket.socket(trio.socket.AF_INET6 if ":" in host else trio.socket.AF_INET)
    sock.setsockopt(trio.socket.SOL_SOCKET, trio.socket.SO_REUSEADDR, 1)
    try:
        await sock.bind((host, port))
    except OSError as err:
        sock.close()
        raise OSError(err.errno, f"fake API server: cannot listen on {host}:{port}: {err.strerror}") from None
    sock.listen(128)
    listener: Any = trio.SocketListener(sock)
    scheme = "http"
    if certfile is not None:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(str(certfile), str(keyfile))
        listener = trio.SSLListener(listener, context, https_compatible=True)
        scheme = "https"
    bound_port = sock.getsockname()[1]
    url = f"{scheme}://[{host}]:{bound_port}" if ":" in host else f"{scheme}://{host}:{bound_port}"
    async with trio.open_nursery() as nursery:
        await nursery.start(HttpServer(app, scheme=scheme).run, [listener])
        try:
            yield url
        finally:
            nursery.cancel_scope.cancel()


def write_kubeconfig(path: Path, url: str, token: str | None = None) -> Path:
    """A kubeconfig for ``url`` (a bearer ``token`` when given), as ``kubectl`` and the kubelet read it."""
    user: dict[str, Any] = {"token": token} if token else {}
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "fake",
                "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "kubelet"}}],
                "clusters": [{"name": "fake", "cluster": {"server": url}}],
                "users": [{"name": "kubelet", "user": user}],
            }
        )
    )
    return path


@attrs.define(eq=False)
class ServedFakeApi(FakeApi):
    """A :class:`FakeApi` also served on a port: ``url``, and a ``kubeconfig`` file for other clients."""

    url: str = ""
    kubeconfig: Path = Path()


@contextlib.asynccontextmanager
async def open_served_fake_api(
    kubeconfig: Path,
    *,
    now: Callable[[], dt.datetime] | None = None,
    host: str = "127.0.0.1",
    port: int = 0,
    token: str | None = None,
    **kwargs: Any,
) -> AsyncIterator[ServedFakeApi]:
    """:func:`open_fake_api` served on ``host``:``port`` with a kubeconfig written to ``kubeconfig``
    (requests must carry ``token`` when given); ``kwargs`` go to :func:`open_fake_api`."""
    async with open_fake_api(now=now, **kwargs) as api:
        api.app.token = token
        async with serve_fake_api(api.app, host=host, port=port) as url:
            write_kubeconfig(kubeconfig, url, token)
            yield ServedFakeApi(api.app, api.loopback, url=url, kubeconfig=kubeconfig)
