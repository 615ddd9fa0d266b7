"""A fake Kubernetes API server with real semantics (resourceVersion, watch, 409, 410), for test harnesses.

In-process under Trio's clock (:func:`open_fake_api`), on a loopback port (:func:`serve_fake_api`), or as
``kubelet-trio fake-apiserver``. See :mod:`kubelet_trio.testing.fakeapi.store` for what it implements
and the README for what a real API server does that it does not.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kubelet_trio.lazy import lazy_exports

if TYPE_CHECKING:
    from kubelet_trio.testing.fakeapi.app import FakeApiApp, RecordedRequest
    from kubelet_trio.testing.fakeapi.server import (
        FAKE_URL,
        FakeApi,
        ServedFakeApi,
        open_fake_api,
        open_served_fake_api,
        serve_fake_api,
        write_kubeconfig,
    )
    from kubelet_trio.testing.fakeapi.store import FakeApiError, FakeStore
    from kubelet_trio.testing.fakeapi.transport import Loopback, open_loopback

#: public name -> the module that defines it
_EXPORTS: dict[str, str] = {
    "FakeApiApp": "kubelet_trio.testing.fakeapi.app",
    "RecordedRequest": "kubelet_trio.testing.fakeapi.app",
    "FAKE_URL": "kubelet_trio.testing.fakeapi.server",
    "FakeApi": "kubelet_trio.testing.fakeapi.server",
    "ServedFakeApi": "kubelet_trio.testing.fakeapi.server",
    "open_fake_api": "kubelet_trio.testing.fakeapi.server",
    "open_served_fake_api": "kubelet_trio.testing.fakeapi.server",
    "serve_fake_api": "kubelet_trio.testing.fakeapi.server",
    "write_kubeconfig": "kubelet_trio.testing.fakeapi.server",
    "FakeApiError": "kubelet_trio.testing.fakeapi.store",
    "FakeStore": "kubelet_trio.testing.fakeapi.store",
    "Loopback": "kubelet_trio.testing.fakeapi.transport",
    "open_loopback": "kubelet_trio.testing.fakeapi.transport",
}

__all__ = [
    "FAKE_URL",
    "FakeApi",
    "FakeApiApp",
    "FakeApiError",
    "FakeStore",
    "Loopback",
    "RecordedRequest",
    "ServedFakeApi",
    "open_fake_api",
    "open_loopback",
    "open_served_fake_api",
    "serve_fake_api",
    "write_kubeconfig",
]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
