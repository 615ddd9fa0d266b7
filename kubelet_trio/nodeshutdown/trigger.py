"""The documented shutdown trigger: a unix socket in the kubelet's root directory.

Go learns of a shutdown from systemd-logind (PrepareForShutdown over D-Bus). This kubelet listens on
``<root-dir>/nodeshutdown.sock`` (mode 0600: root only) while graceful shutdown is configured; a client
writes ``shutdown`` and reads ``shutting down``, then ``done`` once every pod is stopped (or the budgets
are spent). ``kubelet-trio shutdown-node`` is that client, so a systemd unit ordered before shutdown
(``ExecStop=kubelet-trio shutdown-node``) gives the pods their time the way the inhibitor lock does.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
from collections.abc import Iterator

import attrs
import trio

from kubelet_trio.logs import kv
from kubelet_trio.nodeshutdown.manager import NodeShutdownManager

__all__ = ["REQUEST", "SOCKET_NAME", "ShutdownSocket", "TriggerError", "request_shutdown", "socket_path"]

logger = logging.getLogger(__name__)

SOCKET_NAME = "nodeshutdown.sock"
REQUEST = b"shutdown\n"
REQUEST_TIMEOUT = 5.0  # a client has this long to say what it wants
_MAX_PATH = 107  # sun_path less its terminating NUL


class TriggerError(Exception):
    """The trigger socket cannot be served or reached; the message names the path."""


def socket_path(root_dir: str) -> str:
    return os.path.join(root_dir, SOCKET_NAME)


def _check_length(path: str) -> None:
    if len(os.fsencode(path)) > _MAX_PATH:
        raise TriggerError(f"shutdown trigger socket path {path!r} is longer than {_MAX_PATH} bytes")


@attrs.define(eq=False)
class ShutdownSocket:
    """Serves the trigger for ``manager`` at ``path`` until cancelled; the socket file goes with it."""

    path: str
    manager: NodeShutdownManager

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Serve until cancelled. A socket that cannot be served is logged, not fatal (Go goes on when
        D-Bus is unavailable): the node runs, without its shutdown trigger."""
        try:
            sock = await self._listen()
        except TriggerError as err:
            logger.error("node shutdown trigger unavailable", extra=kv(err=err))
            task_status.started()
            return
        logger.info("listening for node shutdown requests", extra=kv(socket=self.path))
        try:
            async with trio.open_nursery() as nursery:
                await nursery.start(trio.serve_listeners, self._handle, [trio.SocketListener(sock)])
                task_status.started()
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)

    async def _listen(self) -> trio.socket.SocketType:
        _check_length(self.path)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)  # left by a kubelet that did not exit cleanly
        sock = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            await sock.bind(self.path)
            os.chmod(self.path, 0o600)
            sock.listen()
        except OSError as err:
            sock.close()
            raise TriggerError(f"cannot listen on the shutdown trigger socket {self.path}: {err}") from err
        return sock

    async def _handle(self, stream: trio.abc.Stream) -> None:
        async with stream:
            try:
                with trio.fail_after(REQUEST_TIMEOUT):
                    request = await stream.receive_some(64)
                if request != REQUEST:
                    await stream.send_all(b"error: expected 'shutdown'\n")
                    return
                logger.info("node shutdown requested", extra=kv(socket=self.path))
                await stream.send_all(b"shutting down\n")
                self.manager.trigger()
                await self.manager.wait_done()
                await stream.send_all(b"done\n")
            except (trio.BrokenResourceError, trio.ClosedResourceError, trio.TooSlowError) as err:
                logger.debug("shutdown trigger client went away", extra=kv(err=err))


def request_shutdown(path: str, *, timeout: float | None = None) -> Iterator[str]:
    """Ask the kubelet at ``path`` to shut the node down; yields its answer lines until it hangs up
    (blocking: for the command line)."""
    _check_length(path)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        client.settimeout(timeout)
        try:
            client.connect(path)
        except OSError as err:
            raise TriggerError(
                f"no kubelet listens on {path} ({err.strerror or err}); graceful node shutdown needs"
                " shutdownGracePeriod in the kubelet's configuration"
            ) from err
        client.sendall(REQUEST)
        buffer = b""
        while True:
            try:
                chunk = client.recv(4096)
            except TimeoutError as err:
                raise TriggerError(f"no answer from {path} within {timeout}s") from err
            if not chunk:
                break
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                yield line.decode(errors="replace")
        if buffer:
            yield buffer.decode(errors="replace")
