"""httpGet probes and lifecycle hooks (Go: ``pkg/probe/http/{http.go,request.go}``).

A GET to ``scheme://host:port/path`` (host defaults to the pod IP; a named port is looked up in the
container's ports) with ``User-Agent: kube-probe/<version>``, ``Accept: */*`` and the probe's headers.
Redirects to the same host are followed (at most 10); a redirect to another host is not followed and
counts as success with a warning. Status 200-399 is success; a connection error, a timeout or any
other status is failure. TLS certificates are not verified, and connections are not kept alive.
The caller bounds the probe with its timeout and reports :func:`http_timeout_output` when it runs out.
httpx is imported when the first request is made: a node whose pods have no httpGet probe or hook never
loads it.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING

import attrs

from kubelet_trio.api import Container, HTTPGetAction
from kubelet_trio.logs import kv
from kubelet_trio.prober.probe.result import MAX_OUTPUT_LENGTH, ProbeError, Result
from kubelet_trio.prober.probe.tcp import dial_error_output, join_host_port
from kubelet_trio.version import KUBERNETES_MINOR

if TYPE_CHECKING:
    import httpx

__all__ = [
    "KUBE_VERSION",
    "MAX_REDIRECTS",
    "HttpRequest",
    "SharedClient",
    "http_get",
    "http_probe",
    "http_timeout_output",
    "new_client",
    "open_shared_client",
    "request_for_action",
    "resolve_container_port",
]

logger = logging.getLogger(__name__)

KUBE_VERSION = KUBERNETES_MINOR  # in the User-Agent, as Go: kube-probe/1.36
MAX_REDIRECTS = 10

HttpRequest = tuple[str, dict[str, str]]
"""``(url, headers)``."""


def new_client() -> httpx.AsyncClient:
    """The prober's client: no certificate checks, no keep-alive, no proxies from the environment."""
    import httpx

    return httpx.AsyncClient(
        verify=False,
        trust_env=False,
        follow_redirects=False,
        timeout=None,  # the caller's Trio deadline is the timeout
        limits=httpx.Limits(max_keepalive_connections=0),
    )


@attrs.define(eq=False)
class SharedClient:
    """One :func:`new_client` for many probes, made at the first one (:func:`open_shared_client`)."""

    _client: httpx.AsyncClient | None = None

    def get(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = new_client()
        return self._client

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()


@contextlib.asynccontextmanager
async def open_shared_client() -> AsyncIterator[SharedClient]:
    """A :class:`SharedClient`, closed when the block exits."""
    shared = SharedClient()
    try:
        yield shared
    finally:
        await shared.aclose()


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


def request_for_action(
    action: HTTPGetAction, container: Container, pod_ip: str, purpose: str = "probe"
) -> HttpRequest:
    """``NewRequestForHTTPGetAction``: the URL and headers of a probe or hook request."""
    scheme = (action.scheme or "http").lower()
    host = action.host or pod_ip
    port = resolve_container_port(action.port, container)
    path = action.path or ""
    if path and not path.startswith("/"):
        path = "/" + path
    url = f"{scheme}://{join_host_port(host, port)}{path}"
    headers: dict[str, str] = {}
    for header in action.http_headers or ():
        headers[header.name or ""] = header.value or ""
    lowered = {k.lower(): k for k in headers}
    if "user-agent" not in lowered:
        headers["User-Agent"] = f"kube-{purpose}/{KUBE_VERSION}"
    if "accept" not in lowered:
        headers["Accept"] = "*/*"
    elif headers[lowered["accept"]] == "":
        del headers[lowered["accept"]]
    return url, headers


async def _get_once(
    client: httpx.AsyncClient, url: str, headers: Mapping[str, str]
) -> tuple[httpx.Response, bytes]:
    async with client.stream("GET", url, headers=dict(headers)) as response:
        body = b""
        async for chunk in response.aiter_bytes():
            body += chunk
            if len(body) >= MAX_OUTPUT_LENGTH:
                body = body[:MAX_OUTPUT_LENGTH]
                break
    return response, body


async def http_get(
    client: httpx.AsyncClient, url: str, headers: Mapping[str, str]
) -> tuple[httpx.Response, bytes]:
    """GET, following redirects to the same host only (Go's ``RedirectChecker(false)``). Raises
    httpx.HTTPError, or ValueError after 10 redirects."""
    import httpx

    first_host = httpx.URL(url).host
    current = url
    for hop in range(MAX_REDIRECTS + 1):
        response, body = await _get_once(client, current, headers)
        if not response.has_redirect_location or response.next_request is None:
            return response, body
        target = response.next_request.url
        if target.host != first_host:
            return response, body  # not followed: the 3xx answer is the result
        if hop == MAX_REDIRECTS:
            break
        current = str(target)
    raise ValueError(f'Get "{current}": stopped after {MAX_REDIRECTS} redirects')


def http_timeout_output(request: HttpRequest) -> str:
    return f'Get "{request[0]}": context deadline exceeded (Client.Timeout exceeded while awaiting headers)'


async def http_probe(client: httpx.AsyncClient, request: HttpRequest) -> tuple[Result, str]:
    """``DoHTTPProbe``."""
    import httpx

    url, headers = request
    try:
        response, body = await http_get(client, url, headers)
    except httpx.ConnectError as err:
        target = httpx.URL(url)
        port = target.port or (443 if target.scheme == "https" else 80)
        return Result.FAILURE, f'Get "{url}": {dial_error_output(target.host, port, err)}'
    except (httpx.HTTPError, ValueError) as err:
        return Result.FAILURE, str(err) if str(err).startswith("Get ") else f'Get "{url}": {err}'
    text = body.decode("utf-8", "replace")
    if 200 <= response.status_code < 400:
        if response.status_code >= 300:
            logger.debug("probe terminated redirects", extra=kv(url=url, status=response.status_code))
            return Result.WARNING, f"Probe terminated redirects, Response body: {text}"
        return Result.SUCCESS, text
    return Result.FAILURE, f"HTTP probe failed with statuscode: {response.status_code}"
