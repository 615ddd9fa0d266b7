"""Keeps a certificate fresh by CSR (Go: client-go ``util/certificate.Manager``).

The current pair lives in a :class:`~kubelet_trio.certificate.store.FileStore`. The rotation deadline is
a jittered 70-90 % of the certificate's lifetime after its ``notBefore`` (so nodes that joined together
do not all renew together), or now when there is no certificate, it no longer names what the template
asks for (a new node address on a serving certificate) or it is a self-signed placeholder. Rotating makes
a new ECDSA key, sends a CSR with the manager's client, waits for it to be issued (at most
:data:`CERTIFICATE_WAIT_TIMEOUT`), stores the pair and tells the listeners (the API client's transport).
A failed rotation is retried after 2, 4, 8, 16 and 32 s (10 % jitter), then every 32 s, as Go does.
"""

from __future__ import annotations

import datetime as dt
import logging
import random
from collections.abc import Awaitable, Callable
from typing import Protocol

import attrs
import trio
import trio_util

from kubelet_trio.certificate.csr import (
    CertificateRequestError,
    CertificateTemplate,
    generate_key,
    key_pem,
    make_csr,
    request_certificate,
    wait_for_certificate,
)
from kubelet_trio.certificate.store import CertificatePair, FileStore, StoreError
from kubelet_trio.client import ApiClient, ApiClientError
from kubelet_trio.clock import WallClock
from kubelet_trio.fsio import RunSync, run_in_thread
from kubelet_trio.logs import kv

__all__ = [
    "CERTIFICATE_WAIT_TIMEOUT",
    "CertificateManager",
    "CertificateMetrics",
    "RotationBackoff",
    "rotation_deadline",
]

logger = logging.getLogger(__name__)

#: How long one CSR may wait for approval and signing before it is given up and retried (Go: 15 min).
CERTIFICATE_WAIT_TIMEOUT = 15 * 60.0
ROTATE_AT = 0.7  # of the lifetime, plus up to JITTER of it
JITTER = 0.2

Listener = Callable[[CertificatePair], Awaitable[None]]


def rotation_deadline(pair: CertificatePair, rng: random.Random) -> dt.datetime:
    """``notBefore + lifetime * U[0.7, 0.9)`` (Go: ``nextRotationDeadline``)."""
    lifetime = pair.not_after - pair.not_before
    return pair.not_before + lifetime * (ROTATE_AT + JITTER * rng.random())


def _self_signed(pair: CertificatePair) -> bool:
    """A placeholder served until the first certificate is issued (no signer issues these)."""
    return pair.leaf.issuer == pair.leaf.subject


@attrs.frozen
class RotationBackoff:
    """Delays after failed attempts: ``initial * factor**n`` (n < steps) stretched by up to ``jitter``,
    then ``steady`` for ever."""

    initial: float = 2.0
    factor: float = 2.0
    jitter: float = 0.1
    steps: int = 5
    steady: float = 32.0

    def delay(self, failures: int, rng: random.Random) -> float:
        if failures >= self.steps:
            return self.steady
        base: float = self.initial * self.factor**failures
        return base * (1 + self.jitter * rng.random())


class CertificateMetrics(Protocol):
    """Where a rotating pair's lifetime and renewal errors are reported (the node's metrics; declared
    here so that certificates need not know the metrics module above them)."""

    def track_certificates(
        self, *, client: CertificateManager | None = None, server: CertificateManager | None = None
    ) -> None: ...


@attrs.define(eq=False)
class CertificateManager:
    """Run with ``await nursery.start(manager.run)``; :attr:`current` holds the pair in use.

    ``client`` gives the API client to request with, asked anew for every rotation (a client certificate
    is renewed with the identity it replaces). ``template`` is asked anew too, so a serving certificate
    follows the node's addresses.
    """

    name: str  # for logs: "kubelet-client", "kubelet-serving"
    store: FileStore
    template: Callable[[], CertificateTemplate]
    signer_name: str
    usages: tuple[str, ...]
    client: Callable[[], ApiClient]
    clock: WallClock = attrs.Factory(WallClock)
    rng: random.Random = attrs.Factory(random.Random)
    backoff: RotationBackoff = attrs.Factory(RotationBackoff)
    requested_lifetime: int | None = None  # spec.expirationSeconds; None: the signer's default
    listeners: list[Listener] = attrs.Factory(list)
    run_sync: RunSync = run_in_thread  # file reads and writes (see kubelet_trio.fsio)
    current: trio_util.AsyncValue[CertificatePair | None] = attrs.Factory(lambda: trio_util.AsyncValue(None))
    #: Successful rotations since start (metrics, tests).
    rotations: int = 0
    #: Failed rotations since start (``*_expiration_renew_errors``).
    renew_errors: int = 0

    def expiration(self) -> dt.datetime | None:
        """``notAfter`` of the pair in use (the TTL metrics)."""
        pair = self.current.value
        return pair.not_after if pair is not None else None

    def load(self) -> CertificatePair | None:
        """Read the stored pair (a broken one counts as none). Blocking."""
        try:
            pair = self.store.current()
        except StoreError as err:
            logger.warning(
                "stored certificate unusable; requesting a new one", extra=kv(name=self.name, error=err)
            )
            pair = None
        self.current.value = pair
        return pair

    def next_deadline(self) -> dt.datetime:
        pair = self.current.value
        now = self.clock.now()
        if pair is None or not self.template().satisfied_by(pair.leaf) or _self_signed(pair):
            return now
        deadline = rotation_deadline(pair, self.rng)
        logger.info(
            "certificate rotation deadline",
            extra=kv(name=self.name, expiration=pair.not_after.isoformat(), deadline=deadline.isoformat()),
        )
        return deadline

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        if self.current.value is None:
            await self.run_sync(self.load)
        task_status.started()
        while True:
            deadline = self.next_deadline()
            wait = (deadline - self.clock.now()).total_seconds()
            if wait > 0:
                logger.info("waiting for the next certificate rotation", extra=kv(name=self.name, wait=wait))
                await trio.sleep(wait)
            failures = 0
            while not await self.rotate():
                delay = self.backoff.delay(failures, self.rng)
                failures += 1
                await trio.sleep(delay)

    async def rotate(self) -> bool:
        """One attempt: a new key, a CSR, the issued certificate stored and announced. False on failure
        (logged); the caller backs off."""
        logger.info("rotating certificate", extra=kv(name=self.name, signer=self.signer_name))
        key = generate_key()
        private_pem = key_pem(key)
        try:
            client = self.client()
            csr_name, uid = await request_certificate(
                client,
                make_csr(key, self.template()),
                signer_name=self.signer_name,
                usages=self.usages,
                expiration_seconds=self.requested_lifetime,
            )
            with trio.fail_after(CERTIFICATE_WAIT_TIMEOUT):
                cert_pem = await wait_for_certificate(client, csr_name, uid)
            now = self.clock.now()
            pair = await self.run_sync(lambda: self.store.update(cert_pem, private_pem, now=now))
        except (CertificateRequestError, ApiClientError, StoreError, trio.TooSlowError) as err:
            reason = "not issued in time" if isinstance(err, trio.TooSlowError) else str(err)
            logger.error("certificate rotation failed", extra=kv(name=self.name, error=reason))
            self.renew_errors += 1
            return False
        self.current.value = pair
        self.rotations += 1
        logger.info(
            "certificate rotated",
            extra=kv(name=self.name, csr=csr_name, expiration=pair.not_after.isoformat()),
        )
        for listener in self.listeners:
            await listener(pair)
        return True
