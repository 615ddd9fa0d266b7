"""Serving certificate files loaded again when they change (Go: the kubelet's ``--tls-cert-file``
reloading, ``dynamiccertificates``): a pair written by an operator or by the serving certificate manager
(:mod:`kubelet_trio.certificate.serving`) is served on new connections without a restart. Only the
standard library's ``ssl`` is needed here: a node serving given files loads no certificate machinery.
"""

from __future__ import annotations

import logging
import os
import ssl

import trio

from kubelet_trio.fsio import RunSync, run_in_thread
from kubelet_trio.logs import kv

__all__ = ["RELOAD_PERIOD", "load_pair", "reload_certificate_files"]

logger = logging.getLogger(__name__)

#: How often the files are checked for a new pair (by inode, modification time and size).
RELOAD_PERIOD = 5.0


def load_pair(context: ssl.SSLContext, cert_file: str, key_file: str) -> None:
    """Load a serving pair into ``context``. OpenSSL opens the file once for the certificate and again for
    the key; one file holding both (the certificate store's ``-current.pem``) is opened once here and both
    are read through that descriptor, so a rotation replacing the file between the two reads cannot pair
    one issue's certificate with the next one's key (OpenSSL: KEY_VALUES_MISMATCH)."""
    if cert_file != key_file:
        context.load_cert_chain(cert_file, key_file)
        return
    fd = os.open(cert_file, os.O_RDONLY | os.O_CLOEXEC)
    try:
        held = f"/proc/self/fd/{fd}"  # the inode opened above, whatever the path names meanwhile
        context.load_cert_chain(held, held)
    finally:
        os.close(fd)


def _signature(cert_file: str, key_file: str) -> tuple[tuple[int, int, int], ...]:
    out = []
    for path in (cert_file, key_file):
        st = os.stat(path)  # follows the current link to the pair it names
        out.append((st.st_ino, st.st_mtime_ns, st.st_size))
    return tuple(out)


async def reload_certificate_files(
    context: ssl.SSLContext,
    cert_file: str,
    key_file: str,
    *,
    period: float = RELOAD_PERIOD,
    run_sync: RunSync = run_in_thread,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Load the pair into ``context`` again whenever the files change (new connections get it; open ones
    keep theirs), as the Go kubelet reloads ``--tls-cert-file``. A pair that does not load is logged and
    the old one kept."""
    seen = await run_sync(_signature, cert_file, key_file)
    task_status.started()
    while True:
        await trio.sleep(period)
        try:
            now = await run_sync(_signature, cert_file, key_file)
        except OSError as err:
            logger.warning("serving certificate unreadable", extra=kv(path=cert_file, error=err))
            continue
        if now == seen:
            continue
        try:
            await run_sync(load_pair, context, cert_file, key_file)
        except (ssl.SSLError, OSError) as err:
            logger.error("new serving certificate does not load; keeping the old", extra=kv(error=err))
            continue
        seen = now
        logger.info("serving certificate reloaded", extra=kv(path=cert_file))
