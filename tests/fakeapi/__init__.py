"""An in-repo fake Kubernetes API server with real semantics (resourceVersion, watch, 409, 410), for tests.

Not shipped with the package. See :mod:`tests.fakeapi.store` for what it implements.
"""

from tests.fakeapi.app import FakeApiApp, RecordedRequest
from tests.fakeapi.server import FAKE_URL, FakeApi, open_fake_api, serve_fake_api
from tests.fakeapi.store import FakeApiError, FakeStore
from tests.fakeapi.transport import AsgiTransport, open_asgi_transport

__all__ = [
    "FAKE_URL",
    "AsgiTransport",
    "FakeApi",
    "FakeApiApp",
    "FakeApiError",
    "FakeStore",
    "RecordedRequest",
    "open_asgi_transport",
    "open_fake_api",
    "serve_fake_api",
]
