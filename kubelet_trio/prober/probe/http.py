"""httpGet probes and lifecycle hooks (Go: ``pkg/probe/http/{http.go,request.go}``).

A GET to ``scheme://host:port/path`` (host defaults to the pod IP; a named port is looked up in the
container's ports) with ``User-Agent: kube-probe/<version>``, ``Accept: */*`` and the probe's headers
(``Host`` among them sets the request's host). Redirects to the same host name are followed (at most 10
requests); a redirect to another host is not followed and counts as success with a warning. Status
200-399 is success; no answer (refused, reset, malformed, a redirect loop) or any other status is
failure, the first 10 KiB of the body its output; a body that breaks off, or the timeout while reading
it, is an error (the result is not counted), as in Go. TLS certificates are not verified, and every
request has a connection of its own (``Connection: close``: Go's prober disables keep-alive), with no
``Accept-Encoding``.

The client is :class:`kubelet_trio.client.http1.Get` (h11), imported at the first request: a node whose
pods have no httpGet probe or hook never loads it. The caller bounds a probe with its timeout and asks
:meth:`HttpProbe.timed_out` for the outcome when it runs out.
"""

from __future__ import annotations

import functools
import logging
from typing import TYPE_CHECKING

import attrs

from kubelet_trio.api import Container, HTTPGetAction
from kubelet_trio.logs import kv
from kubelet_trio.prober.probe.result import MAX_OUTPUT_LENGTH, ProbeError, Result
from kubelet_trio.prober.probe.tcp import dial_error_output, join_host_port
from kubelet_trio.version import KUBERNETES_MINOR

if TYPE_CHECKING:
    import ssl

    from kubelet_trio.client.http1 import Connect, Get

__all__ = [
    "BODY_TIMEOUT",
    "KUBE_VERSION",
    "HttpProbe",
    "HttpRequest",
    "http_get",
    "http_timeout_output",
    "insecure_tls_context",
    "request_for_action",
    "resolve_container_port",
]

logger = logging.getLogger(__name__)

KUBE_VERSION = KUBERNETES_MINOR  # in the User-Agent, as Go: kube-probe/1.36

HttpRequest = tuple[str, list[tuple[str, str]]]
"""``(url, header fields)``; a name may come more than once (Go's ``http.Header``)."""

#: Go's message when the probe's timeout ends the wait for the body (``http.Client``'s body reader).
BODY_TIMEOUT = "context deadline exceeded (Client.Timeout or context cancellation while reading body)"


@functools.cache
def insecure_tls_context() -> ssl.SSLContext:
    """TLS without certificate or host name checks (Go's prober: ``InsecureSkipVerify``), made once."""
    import ssl

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def resolve_container_port(port: int | str | None, container: Container) -> int:
    """``ResolveContainerPort``: a number, or the name of one of the container's ports (or a number
    written as a string). Raises :class:`ProbeError`."""
    if isinstance(port, int):
        number = port
    else:
        name = port or ""
        found = next((p.container_port for p in container.ports or () if p.name == name), None)
        if found is not None:
            number = found
        else:
            try:
                number = int(name)
            except ValueError:
                raise ProbeError(f"port {name} not found") from None
    if 0 < number < 65536:
        return number
    raise ProbeError(f"invalid port number: {number}")


def _canonical(name: str) -> str:
    """Go's ``CanonicalMIMEHeaderKey``: ``x-probe`` → ``X-Probe``; a name with a character no field name
    has is left as it is."""
    if not name or any(not (c.isascii() and (c.isalnum() or c in "!#$%&'*+-.^_`|~")) for c in name):
        return name
    return "-".join(part[:1].upper() + part[1:].lower() for part in name.split("-"))


def request_for_action(
    action: HTTPGetAction, container: Container, pod_ip: str, purpose: str = "probe"
) -> HttpRequest:
    """``NewRequestForHTTPGetAction``: the URL and header fields of a probe or hook request. Each of the
    action's headers is added under its canonical name (a name given twice is sent twice);
    ``User-Agent`` and ``Accept: */*`` unless given, an empty ``Accept`` removing it."""
    scheme = (action.scheme or "http").lower()
    host = action.host or pod_ip
    port = resolve_container_port(action.port, container)
    path = action.path or ""
    if path and not path.startswith("/"):
        path = "/" + path
    url = f"{scheme}://{join_host_port(host, port)}{path}"
    headers = [(_canonical(header.name or ""), header.value or "") for header in action.http_headers or ()]
    names = [name for name, _ in headers]
    if "User-Agent" not in names:
        headers.append(("User-Agent", f"kube-{purpose}/{KUBE_VERSION}"))
    if "Accept" not in names:
        headers.append(("Accept", "*/*"))
    elif next(value for name, value in headers if name == "Accept") == "":
        headers = [(name, value) for name, value in headers if name != "Accept"]
    return url, headers


def http_timeout_output(url: str) -> str:
    """Go's message for a probe whose timeout ran out before the answer's head came."""
    return f'Get "{url}": context deadline exceeded (Client.Timeout exceeded while awaiting headers)'


def _get(url: str, headers: list[tuple[str, str]], *, compressed: bool, connect: Connect | None) -> Get:
    from kubelet_trio.client.http1 import Get  # h11: loaded at the first probe or hook

    tls = insecure_tls_context() if url.startswith("https:") else None
    return Get(url, headers, other_hosts=False, ssl_context=tls, compressed=compressed, connect=connect)


@attrs.define(eq=False)
class HttpProbe:
    """One httpGet probe (``DoHTTPProbe``). The caller bounds :meth:`run` with the probe's timeout and,
    when it runs out, takes :meth:`timed_out` instead: Go's failure while it waited for the answer's
    head, a :class:`ProbeError` while it read the body. ``connect``: tests' in-memory peers."""

    request: HttpRequest
    connect: Connect | None = None
    _get: Get | None = attrs.field(default=None, init=False)
    _reading: bool = attrs.field(default=False, init=False)

    async def run(self) -> tuple[Result, str]:
        from kubelet_trio.client.http1 import GetFailed, TransportError

        url, headers = self.request
        self._get = get = _get(url, headers, compressed=False, connect=self.connect)
        try:
            async with get.open() as answer:
                self._reading = True
                try:
                    body = await answer.read(MAX_OUTPUT_LENGTH)  # beyond it, not read: Go's output limit
                except TransportError as err:
                    raise ProbeError(str(err)) from err
        except GetFailed as err:
            if err.dial is not None:
                return Result.FAILURE, f'Get "{err.url}": {dial_error_output(err.host, err.port, err.dial)}'
            return Result.FAILURE, str(err)
        text = body.decode("utf-8", "replace")
        status = answer.status_code
        if 200 <= status < 400:
            if status >= 300:
                logger.debug("probe terminated redirects", extra=kv(url=answer.url, status=status))
                return Result.WARNING, f"Probe terminated redirects, Response body: {text}"
            return Result.SUCCESS, text
        # Go keeps the body out of this message (kubernetes#99425)
        return Result.FAILURE, f"HTTP probe failed with statuscode: {status}"

    def timed_out(self) -> tuple[Result, str]:
        """The outcome when the timeout ended :meth:`run`."""
        if self._reading:
            raise ProbeError(BODY_TIMEOUT)
        return Result.FAILURE, http_timeout_output(self._get.current if self._get else self.request[0])


async def http_get(url: str, headers: list[tuple[str, str]], *, connect: Connect | None = None) -> int:
    """A lifecycle hook's GET: the answer's status, which Go does not check; its body is not read.
    Unlike a probe it asks for gzip, as Go's hook client (a default transport) does. Raises
    :class:`~kubelet_trio.client.http1.GetFailed` when no answer came."""
    async with _get(url, headers, compressed=True, connect=connect).open() as answer:
        return answer.status_code
