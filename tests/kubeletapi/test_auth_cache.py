"""Webhook answers of the Kubelet API's authentication and authorization are cached for Go's TTLs
(MockClock): TokenReview 2 min (valid or not), SubjectAccessReview 5 min allowed / 30 s denied; failed
reviews are not cached; tokens are kept hashed."""

from __future__ import annotations

import trio
import trio.testing

from kubelet_trio.server.auth import WEBHOOK, AuthConfig, KubeletAuth, TtlCache, User
from kubelet_trio.testing.fakeapi import open_fake_api

TOKEN_REVIEWS = r"/tokenreviews$"
ACCESS_REVIEWS = r"/subjectaccessreviews$"


def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


async def test_token_reviews_are_cached(autojump_clock: trio.testing.MockClock) -> None:
    async with open_fake_api() as api, api.client() as client:
        api.app.tokens["good"] = {"username": "bob", "groups": ["devs"]}
        auth = KubeletAuth(AuthConfig("node-a", webhook=True), client=lambda: client)
        bob = User("bob", ("devs",))
        assert await auth.authenticate(None, bearer("good")) == bob
        assert await auth.authenticate(None, bearer("bad")) is None
        await trio.sleep(119)
        del api.app.tokens["good"]  # revoked: still accepted until the cached answer expires
        api.app.tokens["bad"] = {"username": "eve"}
        assert await auth.authenticate(None, bearer("good")) == bob
        assert await auth.authenticate(None, bearer("bad")) is None
        assert len(api.app.requests_for("POST", TOKEN_REVIEWS)) == 2
        await trio.sleep(1)
        assert await auth.authenticate(None, bearer("good")) is None
        assert await auth.authenticate(None, bearer("bad")) == User("eve")
        assert len(api.app.requests_for("POST", TOKEN_REVIEWS)) == 4
        assert "good" not in repr(auth.tokens)  # hashed

        api.go_down()  # a failed review is not cached
        assert await auth.authenticate(None, bearer("other")) is None
        api.come_back()
        api.app.tokens["other"] = {"username": "carol"}
        assert await auth.authenticate(None, bearer("other")) == User("carol")


async def test_access_reviews_are_cached_by_answer(autojump_clock: trio.testing.MockClock) -> None:
    async with open_fake_api() as api, api.client() as client:
        auth = KubeletAuth(AuthConfig("node-a", authorization_mode=WEBHOOK), client=lambda: client)
        bob = User("bob", ("devs",))
        assert not await auth.authorize(bob, "GET", "/pods")
        api.app.allowed.add(("bob", "get", "nodes/proxy"))
        await trio.sleep(29)
        assert not await auth.authorize(bob, "GET", "/pods")  # the denial is cached for 30 s
        await trio.sleep(1)
        assert await auth.authorize(bob, "GET", "/pods")
        assert await auth.authorize(bob, "GET", "/containerLogs/ns/p/c")  # same attributes: cached
        assert not await auth.authorize(bob, "GET", "/metrics")  # other attributes: asked
        assert len(api.app.requests_for("POST", ACCESS_REVIEWS)) == 3
        api.app.allowed.clear()
        await trio.sleep(299)
        assert await auth.authorize(bob, "GET", "/pods")  # allowed for 5 min after it was asked
        await trio.sleep(1)
        assert not await auth.authorize(bob, "GET", "/pods")
        assert not await auth.authorize(User("bob", ("other",)), "GET", "/pods")  # groups are part of it
        assert len(api.app.requests_for("POST", ACCESS_REVIEWS)) == 5


async def test_cache_bound_and_zero_ttl(autojump_clock: trio.testing.MockClock) -> None:
    cache: TtlCache[str, int] = TtlCache(max_entries=2)
    cache.put("a", 1, 10)
    cache.put("b", 2, 10)
    cache.put("c", 3, 10)  # full: the oldest goes
    assert (cache.get("a"), cache.get("b"), cache.get("c")) == ((False, None), (True, 2), (True, 3))
    cache.put("d", 4, 0)  # 0: not kept
    assert cache.get("d") == (False, None) and len(cache) == 2
    await trio.sleep(10)
    assert cache.get("b") == (False, None)
