"""The manifest-URL source (``--manifest-url``; ``pkg/kubelet/config/http.go``).

Every ``check_period`` (20 s) the URL is fetched (10 s timeout, ``--manifest-url-header`` headers
sent). The body may be a Pod, a PodList or a List of pods, in YAML or JSON. A body identical to the
previous one is a no-op. An unreachable URL, a non-200 status, a body over 10 MiB (upstream
``maxConfigLength``; read in chunks and dropped as soon as it is over, or refused by its Content-Length
before any of it is read) or a body with any error keeps the last good set and logs why; an empty body
means "no pods" (an empty set, as upstream). A poll that fails in a way none of these describes (a corner
of the parser only that body reaches) also keeps the last good set: it is contained at the ``manifest``
boundary (logged once with the URL, counted), and that body is not parsed again until it changes.

The client is the node's HTTP/1.1 client (:class:`kubelet_trio.client.http1.Get`, h11), configured as
Go's ``http.Client`` with its default transport: redirects followed to any host (at most 10 requests),
gzip asked for and decoded (the 10 MiB bound counts decompressed bytes, so a small gzip bomb stops
there), certificates verified against the system's trust store. Unlike Go, no proxy from the
environment (``HTTP_PROXY``...) is used, and each poll has a connection of its own. It is imported when
the source runs: a node without ``--manifest-url`` never loads it. Tests pass ``connect`` (an in-memory
peer) to run under a MockClock.
"""

from __future__ import annotations

import contextlib
import logging
import ssl
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import attrs
import trio
import trio_util

from kubelet_trio import defaults
from kubelet_trio.api import ManifestError, Pod, parse_manifest
from kubelet_trio.api.manifest import MAX_MANIFEST_BYTES, manifest_too_large
from kubelet_trio.boundary import BoundaryErrors, contain
from kubelet_trio.config.static import make_static_pod
from kubelet_trio.config.types import HTTP_SOURCE, SourceSet
from kubelet_trio.logs import kv
from kubelet_trio.version import __version__

if TYPE_CHECKING:
    from kubelet_trio.client.http1 import Connect

__all__ = [
    "HTTP_CHECK_FREQUENCY",
    "HTTP_TIMEOUT",
    "HttpSource",
    "ManifestFetchError",
    "fetch_manifest_body",
    "parse_manifest_url_headers",
]

logger = logging.getLogger(__name__)

#: Upstream ``httpCheckFrequency``.
HTTP_CHECK_FREQUENCY = defaults.HTTP_CHECK_FREQUENCY
#: Upstream's HTTP client timeout, applied as a Trio deadline around each fetch.
HTTP_TIMEOUT = 10.0
#: Repeats of one failure reason logged at WARNING before dropping to DEBUG (upstream: the first 3).
LOUD_FAILURES = 3
#: Sent unless ``--manifest-url-header`` gives one (Go sends its library's, ``Go-http-client/1.1``).
USER_AGENT = f"kubelet-trio/{__version__}"


def parse_manifest_url_headers(values: Sequence[str]) -> dict[str, list[str]]:
    """Parse ``--manifest-url-header`` values: comma-separated ``key:value`` pairs, repeatable; a key
    given several times gets several values (``'a:hello,b:again' 'b:beautiful'``)."""
    headers: dict[str, list[str]] = {}
    for value in values:
        for pair in value.split(","):
            if not pair:
                continue
            key, sep, item = pair.partition(":")
            if not sep:
                raise ValueError(f"malformed header pair {pair!r}, expected key:value")
            headers.setdefault(key.strip(), []).append(item.strip())
    return headers


class ManifestFetchError(Exception):
    """The manifest URL answered, but not with a body to parse; ``str()`` says why."""


async def fetch_manifest_body(
    url: str,
    headers: Sequence[tuple[str, str]] = (),
    *,
    ssl_context: ssl.SSLContext | None = None,
    connect: Connect | None = None,
) -> bytes:
    """The body of a 200 answer to ``GET url``, never more than :data:`MAX_MANIFEST_BYTES` of it in memory.

    Raises :class:`ManifestFetchError` when no answer came or with another status, :class:`ManifestError`
    (naming the URL and the limit) for a body over the limit. ``ssl_context`` verifies ``https`` URLs
    (None: the system's trust store, loaded for this call). The caller bounds it in time.
    """
    from kubelet_trio.client.http1 import Get, TransportError

    # Go sends the URL's host whatever a Host header says (http.Request.Write skips the field)
    fields = [(key, value) for key, value in headers if key.lower() != "host"]
    if not any(key.lower() == "user-agent" for key, _ in fields):
        fields.append(("User-Agent", USER_AGENT))
    get = Get(url, fields, ssl_context=ssl_context, compressed=True, connect=connect)
    try:
        async with get.open() as answer:
            if answer.status_code != 200:
                raise ManifestFetchError(f"HTTP status {answer.status_code}")
            declared = answer.headers.get("content-length", "") or ""
            identity = (answer.headers.get("content-encoding") or "identity").lower() == "identity"
            if identity and declared.isdigit() and int(declared) > MAX_MANIFEST_BYTES:
                raise manifest_too_large(url)
            body = await answer.read(MAX_MANIFEST_BYTES + 1)
    except TransportError as err:
        raise ManifestFetchError(str(err)) from err
    if len(body) > MAX_MANIFEST_BYTES:
        raise manifest_too_large(url)
    return body


@attrs.define(eq=False)
class HttpSource:
    """Sends :class:`SourceSet` s for the pods served at ``url`` on ``updates`` (which it closes)."""

    url: str
    node_name: str
    updates: trio.MemorySendChannel[SourceSet]
    headers: Mapping[str, Sequence[str]] = attrs.field(factory=dict)
    check_period: float = HTTP_CHECK_FREQUENCY
    #: Opens the connections (None: TCP); tests pass in-memory peers.
    connect: Connect | None = None
    #: Where contained failures are counted (None: only logged).
    boundary_errors: BoundaryErrors | None = None
    _last_body: bytes | None = attrs.field(default=None, init=False)
    _failures: int = attrs.field(default=0, init=False)
    _last_reason: str | None = attrs.field(default=None, init=False)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Fetch once, report started (whether or not that worked), then poll until cancelled."""
        async with self.updates:
            # the trust store is read once, not at every poll (an https:// redirect target needs it too)
            context = ssl.create_default_context()
            started = False
            async with contextlib.aclosing(trio_util.periodic(self.check_period)) as ticks:
                async for _ in ticks:
                    await self._poll(context)
                    if not started:
                        started = True
                        task_status.started()

    def _fail(self, reason: str) -> None:
        if reason != self._last_reason:
            self._failures, self._last_reason = 0, reason
        self._failures += 1
        level = logging.WARNING if self._failures <= LOUD_FAILURES else logging.DEBUG
        logger.log(
            level,
            "failed to read pods from URL, keeping the last good set",
            extra=kv(url=self.url, reason=reason),
        )

    async def _poll(self, context: ssl.SSLContext) -> None:
        with contain("manifest", self.boundary_errors, url=self.url) as polling:
            pods = await self._read(context)
        if polling.error is None and pods is not None:
            await self.updates.send(SourceSet(HTTP_SOURCE, pods))

    async def _read(self, context: ssl.SSLContext) -> tuple[Pod, ...] | None:
        """The pods to send, or None: nothing new (failures are logged and keep the last good set)."""
        header_pairs = [(key, value) for key, values in self.headers.items() for value in values]
        try:
            with trio.fail_after(HTTP_TIMEOUT):
                body = await fetch_manifest_body(
                    self.url, header_pairs, ssl_context=context, connect=self.connect
                )
        except trio.TooSlowError:
            self._fail(f"no response within {HTTP_TIMEOUT:g}s")
            return None
        except ManifestFetchError as err:
            self._fail(str(err))
            return None
        except ManifestError as err:
            self._fail(err.message)
            return None
        if body == self._last_body:
            return None
        self._last_body = body
        if not body:
            self._fail("zero-length data received")
            return ()

        def prepare(pod: Pod) -> Pod:
            return make_static_pod(
                pod, node_name=self.node_name, source=HTTP_SOURCE, origin=f"url:{self.url}"
            )

        result = parse_manifest(body, file=self.url, allow_lists=True, prepare=prepare)
        for warning in result.warnings:  # Go ignores unknown fields silently; the pods still run
            logger.warning(
                "unknown field in pod manifest, ignored",
                extra=kv(source="http", url=self.url, line=warning.line, field=warning.field),
            )
        if result.errors:
            for error in result.errors:
                logger.error("invalid pod manifest", extra=kv(source="http", error=error))
            self._fail(f"{len(result.errors)} error(s) in the body")
            return None
        self._failures, self._last_reason = 0, None
        return result.pods
