"""The service account token manager: Go's cache and refresh schedule, exactly, under MockClock."""

from __future__ import annotations

import logging

import attrs
import pytest
import trio
import trio.testing

from kubelet_trio.client import ApiUnavailable
from kubelet_trio.clock import WallClock
from kubelet_trio.logs import format_fields
from kubelet_trio.token import STANDALONE_ERROR, IssuedToken, TokenError, TokenManager, TokenRequest

NS = 10**9
REQUEST = TokenRequest("ns", "default", ("vault",), 600, "web", "uid-1")


@attrs.define
class FixedRandom:
    """``random()`` always answers ``value``: jitter = int(value * 10) seconds."""

    value: float

    def random(self) -> float:
        return self.value


@attrs.define
class Server:
    """A TokenRequest API: counts requests, grants ``granted`` seconds (None: what was asked), can fail."""

    clock: WallClock
    granted: int | None = None
    fail: bool = False
    calls: list[float] = attrs.Factory(list)

    async def fetch(self, request: TokenRequest) -> IssuedToken:
        self.calls.append(trio.current_time())
        if self.fail:
            raise ApiUnavailable("POST token: connection refused")
        seconds = self.granted or request.expiration_seconds or 3600
        return IssuedToken(f"token-{len(self.calls)}", self.clock.wall_ns() + seconds * NS, seconds)


def manager(server: Server, jitter: float = 0.55) -> TokenManager:
    return TokenManager(client=None, clock=server.clock, rng=FixedRandom(jitter), fetch=server.fetch)  # type: ignore[arg-type]


async def test_refresh_at_80_percent_less_jitter(autojump_clock: trio.testing.MockClock) -> None:
    server = Server(WallClock())
    tokens = manager(server)  # jitter 5 s: refresh once now > exp - 120 s - 5 s = issued + 475 s
    start = trio.current_time()
    assert await tokens.get_service_account_token(REQUEST) == "token-1"
    await trio.sleep(475)
    assert await tokens.get_service_account_token(REQUEST) == "token-1"  # not yet (strictly after)
    await trio.sleep(0.001)
    assert await tokens.get_service_account_token(REQUEST) == "token-2"
    assert [t - start for t in server.calls] == [0, pytest.approx(475.001)]
    other = attrs.evolve(REQUEST, audiences=())  # a different request: its own token
    assert await tokens.get_service_account_token(other) == "token-3"
    assert list(tokens._cache) == [REQUEST, other]


async def test_server_granted_lifetime_and_24h_cap(autojump_clock: trio.testing.MockClock) -> None:
    server = Server(WallClock(), granted=10)  # a server maximum shorter than asked
    tokens = manager(server, jitter=0.0)
    await tokens.get_service_account_token(REQUEST)
    await trio.sleep(8.001)  # 80 % of the 10 s granted, not of the 600 s asked
    assert await tokens.get_service_account_token(REQUEST) == "token-2"

    server = Server(WallClock(), granted=7 * 24 * 3600)  # a week: refreshed after 24 h less jitter
    tokens = manager(server, jitter=0.99)  # 9 s
    await tokens.get_service_account_token(REQUEST)
    await trio.sleep(24 * 3600 - 9)
    assert await tokens.get_service_account_token(REQUEST) == "token-1"
    await trio.sleep(0.001)
    assert await tokens.get_service_account_token(REQUEST) == "token-2"


async def test_token_issued_in_the_future_is_refreshed(autojump_clock: trio.testing.MockClock) -> None:
    clock = WallClock()
    tokens = TokenManager(client=None, clock=clock, rng=FixedRandom(0.0))
    future = IssuedToken("t", clock.wall_ns() + 700 * NS, 600)  # issued 100 s from now: the clock went back
    assert tokens.requires_refresh(future)
    assert not tokens.requires_refresh(IssuedToken("t", clock.wall_ns() + 600 * NS, 600))
    assert not tokens.requires_refresh(IssuedToken("t", clock.wall_ns(), None))  # no lifetime: never


async def test_failed_refresh_keeps_a_valid_token_then_fails(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    server = Server(WallClock())
    tokens = manager(server, jitter=0.0)
    await tokens.get_service_account_token(REQUEST)
    server.fail = True
    await trio.sleep(500)  # due for a refresh, still valid
    with caplog.at_level(logging.ERROR, logger="kubelet_trio.token.manager"):
        assert await tokens.get_service_account_token(REQUEST) == "token-1"
    text = "\n".join(f"{r.getMessage()} {format_fields(r)}" for r in caplog.records)
    assert "couldn't update token serviceaccount=ns/default" in text
    assert "token-1" not in text  # tokens are never logged
    await trio.sleep(100.001)  # expired
    with pytest.raises(TokenError, match="expired and refresh failed: POST token: connection refused"):
        await tokens.get_service_account_token(REQUEST)
    server.fail = False
    assert await tokens.get_service_account_token(REQUEST) == "token-4"


async def test_first_fetch_failure_and_standalone(autojump_clock: trio.testing.MockClock) -> None:
    server = Server(WallClock(), fail=True)
    with pytest.raises(TokenError, match=r"^failed to fetch token: POST token: connection refused$"):
        await manager(server).get_service_account_token(REQUEST)
    standalone = TokenManager(client=None, clock=WallClock())
    with pytest.raises(TokenError, match=f"^failed to fetch token: {STANDALONE_ERROR}$"):
        await standalone.get_service_account_token(REQUEST)


async def test_pod_removal_and_garbage_collection(autojump_clock: trio.testing.MockClock) -> None:
    server = Server(WallClock())
    tokens = manager(server)
    other_pod = attrs.evolve(REQUEST, pod_name="db", pod_uid="uid-2", expiration_seconds=3600)
    await tokens.get_service_account_token(REQUEST)
    await tokens.get_service_account_token(other_pod)
    tokens.delete_service_account_token("uid-1")
    assert list(tokens._cache) == [other_pod]
    await tokens.get_service_account_token(REQUEST)
    async with trio.open_nursery() as nursery:
        await nursery.start(tokens.run)
        await trio.sleep(659)  # expired at 600 s, but the sweeps run every 60 s
        assert len(tokens._cache) == 2
        await trio.sleep(2)  # the sweep at 660 s drops it
        assert list(tokens._cache) == [other_pod]
        nursery.cancel_scope.cancel()


def test_request_body_and_answer_parsing() -> None:
    assert REQUEST.path == "/api/v1/namespaces/ns/serviceaccounts/default/token"
    assert REQUEST.body()["spec"] == {
        "audiences": ["vault"],
        "expirationSeconds": 600,
        "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": "web", "uid": "uid-1"},
    }
    assert attrs.evolve(REQUEST, audiences=()).body()["spec"]["audiences"] is None
    answer = {
        "spec": {"expirationSeconds": 3600},
        "status": {"token": "abc", "expirationTimestamp": "2026-11-22T10:00:00Z"},
    }
    issued = IssuedToken.from_response(answer, REQUEST)
    assert issued == IssuedToken("abc", 1795341600 * NS, 3600)
    assert "abc" not in repr(issued)
    with pytest.raises(TokenError, match="no token or expirationTimestamp"):
        IssuedToken.from_response({"status": {}}, REQUEST)
    with pytest.raises(TokenError, match="bad expirationTimestamp"):
        IssuedToken.from_response({"status": {"token": "a", "expirationTimestamp": "soon"}}, REQUEST)
