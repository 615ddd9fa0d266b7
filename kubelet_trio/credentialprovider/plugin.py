"""Exec credential provider plugins (Go: ``pkg/credentialprovider/plugin/plugin.go``, ``plugins.go``).

For an image repository one of its ``matchImages`` globs matches (the keyring's URL rules:
:func:`~kubelet_trio.credentialprovider.urls.urls_match_str`), a provider answers from its cache or runs
``<bin-dir>/<name> <args...>`` with the kubelet's environment plus the configured ``env``, writes
``{"kind":"CredentialProviderRequest","apiVersion":<provider apiVersion>,"image":<repository>}`` to its
stdin and reads a ``CredentialProviderResponse`` from its stdout:

- ``apiVersion`` must be the provider's, ``kind`` ``CredentialProviderResponse``;
- ``auth``: key (a keyring key, ``*`` globs allowed) → ``{"username", "password"}``;
- ``cacheKeyType``: ``Image`` (cached for this repository), ``Registry`` (for its host, port included)
  or ``Global`` (for every image of the provider); any other value caches nothing and gives nothing;
- ``cacheDuration``: a Go duration; absent means the provider's ``defaultCacheDuration``, ``0`` (or an
  absent one with a zero default) means not cached. An entry expires once Trio time passes
  ``now + duration``; the cache is consulted image key first, then registry, then global.

A run is bounded by :data:`PLUGIN_EXEC_TIMEOUT` (Go's catch-all minute) and killed at once when it
expires or the caller is cancelled. Its output is bounded too, where Go reads all of it: a plugin that
prints more than :data:`STDOUT_LIMIT` on stdout (1 MiB, a thousand times a response naming a few
registries) is killed there, and only the last :data:`STDERR_LIMIT` bytes of its stderr are kept (what
the error message shows), so a runaway plugin costs the node no more than that in memory. Concurrent
lookups of one repository share one run. A plugin that cannot start, exits non-zero, hangs, prints too
much, prints something that is not a response, or answers another apiVersion gives one error log line
naming the plugin and the image (and the plugin's stderr, as Go's does; never its stdout, which may hold
credentials), and the lookup goes on as if it had answered nothing.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import signal
import stat
import subprocess
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import attrs
import trio

from kubelet_trio.credentialprovider.auth import AuthConfig
from kubelet_trio.credentialprovider.dockerconfig import DockerConfig
from kubelet_trio.credentialprovider.keyring import BasicDockerKeyring
from kubelet_trio.credentialprovider.pluginconfig import (
    CredentialProvider,
    CredentialProviderConfigError,
    aggregate,
    parse_go_duration,
    read_credential_provider_config,
    validate_credential_provider_config,
)
from kubelet_trio.credentialprovider.urls import urls_match_str
from kubelet_trio.logs import kv, vlevel

__all__ = [
    "CACHE_KEY_TYPES",
    "PLUGIN_EXEC_TIMEOUT",
    "STDERR_LIMIT",
    "STDOUT_LIMIT",
    "CredentialProviderResponse",
    "ExecPlugin",
    "ExternalCredentialProviderKeyring",
    "Plugin",
    "PluginError",
    "PluginProvider",
    "decode_response",
    "encode_request",
    "register_credential_provider_plugins",
]

logger = logging.getLogger(__name__)

PLUGIN_EXEC_TIMEOUT = 60.0
GLOBAL_CACHE_KEY = "global"
IMAGE_CACHE_KEY_TYPE, REGISTRY_CACHE_KEY_TYPE, GLOBAL_CACHE_KEY_TYPE = "Image", "Registry", "Global"
CACHE_KEY_TYPES = (IMAGE_CACHE_KEY_TYPE, REGISTRY_CACHE_KEY_TYPE, GLOBAL_CACHE_KEY_TYPE)
STDERR_LIMIT = 4096  # bytes of the plugin's stderr kept (its tail) for the error message
STDOUT_LIMIT = 1 << 20  # bytes of stdout a response may take; more and the plugin is killed
KILL_GRACE = 5.0  # how long a killed plugin gets to be reaped

_RESPONSE_KIND = "CredentialProviderResponse"
# what an apiVersion looks like (``group/v1beta1``): only such a value of the response is ever repeated
_API_VERSION_LIKE = re.compile(
    r"(?:[a-z0-9](?:[a-z0-9.\-]{0,251}[a-z0-9])?/)?v[0-9]+(?:(?:alpha|beta)[0-9]+)?"
)


class PluginError(Exception):
    """A plugin run gave no usable response; the message never holds the plugin's stdout."""


@attrs.frozen
class CredentialProviderResponse:
    cache_key_type: str
    cache_duration: float | None  # seconds; None when the response has none
    auth: Mapping[str, AuthConfig]


def encode_request(api_version: str, image: str) -> bytes:
    """The ``CredentialProviderRequest`` written to the plugin's stdin."""
    request = {"kind": "CredentialProviderRequest", "apiVersion": api_version, "image": image}
    return (json.dumps(request, separators=(",", ":")) + "\n").encode()


def _shown_api_version(value: Any) -> str:
    """A response's apiVersion fit for a message: repeated only when it looks like one."""
    return value if isinstance(value, str) and _API_VERSION_LIKE.fullmatch(value) else "<invalid>"


def _shown_cache_key_type(value: str) -> str:
    """A response's cacheKeyType fit for a message: repeated only when it is a known one in the wrong case."""
    return value if value.capitalize() in CACHE_KEY_TYPES else "<invalid>"


def decode_response(data: bytes, api_version: str) -> CredentialProviderResponse:
    """Decode the plugin's stdout. Raises :class:`PluginError` with a message free of its content.

    Unknown fields are ignored; a field of the wrong type fails the whole response."""
    try:
        document = json.loads(data.decode("utf-8", errors="replace"))
    except json.JSONDecodeError:
        raise PluginError("error reading GVK from response: the response is not JSON") from None
    if not isinstance(document, dict):
        raise PluginError("error reading GVK from response: the response is not a JSON object")
    actual = document.get("apiVersion")
    if actual != api_version:
        raise PluginError(
            "apiVersion from credential plugin response did not match expected apiVersion:"
            f"{api_version}, actual apiVersion:{_shown_api_version(actual)}"
        )
    try:
        return _response(document)
    except (TypeError, ValueError):
        # as in Go, not wrapped: the reason could quote the response
        raise PluginError("error decoding credential provider plugin response from stdout") from None


def _response(document: dict[str, Any]) -> CredentialProviderResponse:
    if document.get("kind") != _RESPONSE_KIND:
        raise ValueError("unexpected kind")
    key_type = document.get("cacheKeyType") or ""
    duration_text = document.get("cacheDuration")
    auth = document.get("auth") or {}
    if not isinstance(key_type, str) or not isinstance(auth, dict):
        raise TypeError("wrong type")
    duration = None
    if duration_text is not None:
        if not isinstance(duration_text, str):
            raise TypeError("wrong type")
        duration = parse_go_duration(duration_text)
    creds: dict[str, AuthConfig] = {}
    for key, entry in auth.items():
        entry = entry or {}
        if not isinstance(entry, dict):
            raise TypeError("wrong type")
        username, password = entry.get("username") or "", entry.get("password") or ""
        if not isinstance(username, str) or not isinstance(password, str):
            raise TypeError("wrong type")
        creds[key] = AuthConfig(username=username, password=password)
    return CredentialProviderResponse(key_type, duration, creds)


def _exit_text(returncode: int) -> str:
    if returncode >= 0:
        return f"exit status {returncode}"
    try:
        name = signal.strsignal(-returncode) or f"signal {-returncode}"
    except ValueError:
        name = f"signal {-returncode}"
    return f"signal: {name[:1].lower()}{name[1:]}"


async def _send(stream: trio.abc.SendStream, data: bytes) -> None:
    async with stream:
        # a plugin that does not read its request: its exit status or output says the rest
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            await stream.send_all(data)


async def _read_stdout(stream: trio.abc.ReceiveStream, into: bytearray, process: trio.Process) -> None:
    """Read up to :data:`STDOUT_LIMIT`; past it, kill the plugin (Go's SIGKILL, no grace) and stop."""
    async with stream:
        while chunk := await stream.receive_some():
            into += chunk
            if len(into) > STDOUT_LIMIT:
                process.kill()
                return


async def _read_stderr_tail(stream: trio.abc.ReceiveStream, into: bytearray) -> None:
    """Read to the end, keeping the last :data:`STDERR_LIMIT` bytes."""
    async with stream:
        while chunk := await stream.receive_some():
            into += chunk
            del into[:-STDERR_LIMIT]


class Plugin(Protocol):
    """What a provider runs (Go: ``Plugin``); :class:`ExecPlugin` is the real one."""

    name: str

    async def exec(self, image: str) -> CredentialProviderResponse: ...


@attrs.define(eq=False)
class ExecPlugin:
    """Runs ``<bin_dir>/<name>`` once per call (Go: ``execPlugin``)."""

    name: str
    api_version: str
    bin_dir: str
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = attrs.field(factory=dict, repr=False)
    environ: Callable[[], Mapping[str, str]] = attrs.field(default=lambda: dict(os.environ), repr=False)
    timeout: float = PLUGIN_EXEC_TIMEOUT

    @property
    def path(self) -> str:
        return os.path.join(self.bin_dir, self.name)

    def _failed(self, image: str, reason: str, stderr: bytes | bytearray = b"") -> PluginError:
        tail = stderr[-STDERR_LIMIT:].decode("utf-8", errors="replace").strip()
        return PluginError(
            f"error execing credential provider plugin {self.name} for image {image}: {reason}: {tail}"
        )

    async def exec(self, image: str) -> CredentialProviderResponse:
        logger.log(
            vlevel(5), "getting image credentials from exec plugin", extra=kv(plugin=self.name, image=image)
        )
        env = {**self.environ(), **self.env}  # the configured variables win
        stdout, stderr = bytearray(), bytearray()
        returncode = None
        with trio.move_on_after(self.timeout) as scope:
            returncode = await self._run(encode_request(self.api_version, image), env, image, stdout, stderr)
        if returncode is None or scope.cancelled_caught:
            raise self._failed(image, "context deadline exceeded", stderr)
        if len(stdout) > STDOUT_LIMIT:
            raise self._failed(image, f"killed: its stdout exceeded {STDOUT_LIMIT} bytes", stderr)
        if returncode != 0:
            raise self._failed(image, _exit_text(returncode), stderr)
        return decode_response(bytes(stdout), self.api_version)

    async def _run(
        self, request: bytes, env: Mapping[str, str], image: str, stdout: bytearray, stderr: bytearray
    ) -> int:
        """Run the plugin once, its output read into ``stdout`` and ``stderr`` (bounded); its exit
        status. A cancelled run kills it at once."""
        try:
            process = await trio.lowlevel.open_process(
                [self.path, *self.args],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
            )
        except OSError as err:
            raise self._failed(image, err.strerror or type(err).__name__) from None
        assert process.stdin is not None and process.stdout is not None and process.stderr is not None
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_send, process.stdin, request)
                nursery.start_soon(_read_stdout, process.stdout, stdout, process)
                nursery.start_soon(_read_stderr_tail, process.stderr, stderr)
                return await process.wait()
        finally:
            if process.returncode is None:
                process.kill()  # Go's exec.CommandContext: SIGKILL, no grace
            with trio.move_on_after(KILL_GRACE, shield=True):
                await process.wait()


@attrs.define(eq=False)
class _CacheEntry:
    credentials: DockerConfig = attrs.field(repr=False)
    expires_at: float


@attrs.define(eq=False)
class _Flight:
    done: trio.Event = attrs.Factory(trio.Event)
    response: CredentialProviderResponse | None = None
    error: PluginError | None = None


def _registry(image: str) -> str:
    return image.split("/", 1)[0]


@attrs.define(eq=False)
class PluginProvider:
    """One configured plugin with its cache (Go: ``pluginProvider``)."""

    plugin: Plugin
    match_images: tuple[str, ...]
    default_cache_duration: float = 0.0
    _cache: dict[str, _CacheEntry] = attrs.field(factory=dict, init=False, repr=False)
    _flights: dict[str, _Flight] = attrs.field(factory=dict, init=False, repr=False)

    @property
    def name(self) -> str:
        return self.plugin.name

    def is_image_allowed(self, image: str) -> bool:
        return any(urls_match_str(glob, image) for glob in self.match_images)

    def _cached(self, image: str) -> DockerConfig | None:
        now = trio.current_time()
        for key in [key for key, entry in self._cache.items() if now > entry.expires_at]:
            del self._cache[key]
        for key in (image, _registry(image), GLOBAL_CACHE_KEY):
            entry = self._cache.get(key)
            if entry is not None:
                return entry.credentials
        return None

    async def _run_once(self, image: str) -> CredentialProviderResponse:
        """Run the plugin, or wait for the run already under way for this image (Go's singleflight)."""
        while (flight := self._flights.get(image)) is not None:
            await flight.done.wait()
            if flight.error is not None:
                raise flight.error
            if flight.response is not None:
                return flight.response
            # the task that ran it was cancelled: run it ourselves
        flight = self._flights[image] = _Flight()
        try:
            flight.response = await self.plugin.exec(image)
            return flight.response
        except PluginError as err:
            flight.error = err
            raise
        finally:
            del self._flights[image]
            flight.done.set()

    async def provide(self, image: str) -> DockerConfig:
        """The plugin's credentials for ``image`` (a repository), or none."""
        if not self.is_image_allowed(image):
            return {}
        cached = self._cached(image)
        if cached is not None:
            return cached
        try:
            response = await self._run_once(image)
        except PluginError as err:
            logger.error(
                "failed getting credential from external registry credential provider",
                extra=kv(plugin=self.name, image=image, err=str(err)),
            )
            return {}
        if response.cache_key_type == IMAGE_CACHE_KEY_TYPE:
            key = image
        elif response.cache_key_type == REGISTRY_CACHE_KEY_TYPE:
            key = _registry(image)
        elif response.cache_key_type == GLOBAL_CACHE_KEY_TYPE:
            key = GLOBAL_CACHE_KEY
        else:
            logger.error(
                "credential provider plugin did not return a valid cacheKeyType",
                extra=kv(
                    plugin=self.name, image=image, cacheKeyType=_shown_cache_key_type(response.cache_key_type)
                ),
            )
            return {}
        duration = self.default_cache_duration if response.cache_duration is None else response.cache_duration
        if duration != 0:
            self._cache[key] = _CacheEntry(response.auth, trio.current_time() + duration)
        return response.auth


@attrs.frozen
class ExternalCredentialProviderKeyring:
    """Every plugin's answer for the image in one keyring (Go: ``externalCredentialProviderKeyring``)."""

    providers: Sequence[PluginProvider]

    async def lookup(self, image: str) -> list[AuthConfig]:
        keyring = BasicDockerKeyring()
        for provider in self.providers:
            keyring.add(await provider.provide(image))
        return keyring.find(image)


def _check_executable(path: str) -> None:
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise CredentialProviderConfigError(f"plugin binary executable {path} did not exist") from None
    except OSError as err:
        message = f"error inspecting binary executable {path}: {err.strerror}"
        raise CredentialProviderConfigError(message) from None
    if stat.S_ISDIR(mode) or not mode & 0o111:
        raise CredentialProviderConfigError(f"error inspecting binary executable {path}: permission denied")


def register_credential_provider_plugins(
    config_path: str,
    bin_dir: str,
    *,
    environ: Callable[[], Mapping[str, str]] | None = None,
) -> tuple[PluginProvider, ...]:
    """The providers of ``--image-credential-provider-config`` with binaries in
    ``--image-credential-provider-bin-dir`` (Go: ``RegisterCredentialProviderPlugins``). Raises
    :class:`~kubelet_trio.credentialprovider.pluginconfig.CredentialProviderConfigError`; Go's kubelet
    does not start then. Blocking (reads files)."""
    try:
        os.stat(bin_dir)
    except FileNotFoundError:
        raise CredentialProviderConfigError(f"plugin binary directory {bin_dir} did not exist") from None
    except OSError as err:
        message = f"error inspecting binary directory {bin_dir}: {err.strerror}"
        raise CredentialProviderConfigError(message) from None
    config = read_credential_provider_config(config_path)
    errors = validate_credential_provider_config(config)
    if errors:
        raise CredentialProviderConfigError(
            f"failed to validate credential provider config: {aggregate(errors)}"
        )
    providers = []
    for provider in config.providers:
        _check_executable(os.path.join(bin_dir, provider.name))
        providers.append(_provider(provider, bin_dir, environ))
    return tuple(providers)


def _provider(
    config: CredentialProvider, bin_dir: str, environ: Callable[[], Mapping[str, str]] | None
) -> PluginProvider:
    plugin = ExecPlugin(
        name=config.name,
        api_version=config.api_version,
        bin_dir=bin_dir,
        args=config.args,
        env={var.name: var.value for var in config.env},
    )
    if environ is not None:
        plugin.environ = environ
    return PluginProvider(plugin, config.match_images, config.default_cache_duration or 0.0)
