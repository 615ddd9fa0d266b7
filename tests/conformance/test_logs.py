"""Container logs through the API server's ``pods/log`` (which the kubelet serves), as ``kubectl logs``
reads them (upstream: test/e2e/kubectl/logs.go "should be able to retrieve and filter logs",
test/e2e/common/node/pods.go): tailLines, limitBytes, timestamps, sinceTime/sinceSeconds, previous,
follow until the container exits, lines without a trailing newline (kubectl makes the same request)."""

from __future__ import annotations

import pytest

from tests.conformance._helpers_f import TIMESTAMPED, gather, output_of, wait_log
from tests.conformance.conftest import Namespace, after, both, container_running, phase_is, restarted

LINES = "".join(f"line-{i}\n" for i in range(1, 6))
#: the first run prints run-1 and fails; the restarted one prints run-2 and stays
RUN_COUNTER = (
    "n=$(( $(cat /data/n 2>/dev/null || echo 0) + 1 )); echo $n > /data/n; echo run-$n;"
    ' if [ "$n" = 1 ]; then exit 1; fi; sleep 600'
)


async def follow(ns: Namespace, name: str, container: str) -> str:
    """``GET pods/<name>/log?follow=true`` read to its end (the container exiting ends it)."""
    query = {"container": container, "follow": "true"}
    async with ns.client.open_stream(ns.path("pods", name, "log"), query) as response:
        assert response.status_code == 200, await response.read()
        return b"".join([piece async for piece in response.pieces()]).decode()


async def test_log_options(ns: Namespace) -> None:
    deadline = after(90)
    await ns.create_pod(ns.pod("lines", containers=[ns.container("c", "printf '" + LINES + "'; sleep 600")]))
    await ns.create_pod(
        ns.pod("since", containers=[ns.container("c", "echo before; sleep 3; echo after; sleep 600")])
    )
    # The last line has no newline: the runtime writes it (as a partial record) when the stream closes.
    partial = ns.pod(
        "partial", containers=[ns.container("c", "echo out; sleep 1; echo err >&2; sleep 1; printf value-1")]
    )
    await gather(
        lambda: wait_log(ns, "lines", "c", lambda log: log == LINES, deadline=deadline),
        lambda: wait_log(ns, "since", "c", lambda log: log.endswith("after\n"), deadline=deadline),
        lambda: output_of(ns, partial, deadline=deadline),
    )
    assert await ns.logs("lines", "c", tailLines=2) == "line-4\nline-5\n"
    assert await ns.logs("lines", "c", tailLines=0) == ""
    assert await ns.logs("lines", "c", limitBytes=8) == "line-1\nl"
    stamped = (await ns.logs("lines", "c", timestamps=True)).splitlines()
    matches = [TIMESTAMPED.match(line) for line in stamped]
    assert all(matches), stamped
    assert [m.group(2) for m in matches if m] == LINES.splitlines()

    # sinceTime (whole seconds on the wire) at the second of "after": "before" is 3 s older.
    timed = (await ns.logs("since", "c", timestamps=True)).splitlines()
    after_line = next(line for line in timed if line.endswith(" after"))
    since_time = after_line[:19] + "Z"
    assert await ns.logs("since", "c", sinceTime=since_time) == "after\n"
    assert await ns.logs("since", "c", sinceSeconds=3600) == "before\nafter\n"

    # Both streams, in order; a last line without a newline is served as written.
    assert await ns.logs("partial", "c") == "out\nerr\nvalue-1"


async def test_previous_and_follow(ns: Namespace) -> None:
    deadline = after(90)
    await ns.create_pod(
        ns.pod(
            "restarts",
            containers=[
                ns.container("c", RUN_COUNTER, volumeMounts=[{"name": "data", "mountPath": "/data"}])
            ],
            volumes=[{"name": "data", "emptyDir": {}}],
        )
    )
    await ns.create_pod(ns.pod("once", containers=[ns.container("c", "sleep 600")]))
    ticker = ns.pod(
        "ticker", containers=[ns.container("c", "for i in 1 2 3; do echo tick-$i; sleep 1; done")]
    )
    await ns.create_pod({**ticker, "spec": {**ticker["spec"], "restartPolicy": "Never"}})
    await ns.wait_pod("ticker", container_running("c"), deadline=deadline)
    followed, *_ = await gather(
        lambda: follow(ns, "ticker", "c"),
        lambda: ns.wait_pod("restarts", both(restarted("c", 1), container_running("c")), deadline=deadline),
        lambda: ns.wait_pod("once", container_running("c"), deadline=deadline),
    )
    assert followed == "tick-1\ntick-2\ntick-3\n"
    await ns.wait_pod("ticker", phase_is("Succeeded"), deadline=deadline)  # the stream ended with it

    await wait_log(ns, "restarts", "c", lambda log: log == "run-2\n", deadline=deadline)
    assert await ns.logs("restarts", "c", previous=True) == "run-1\n"
    with pytest.raises(AssertionError) as missing:
        await ns.logs("once", "c", previous=True)
    assert ": 400 " in str(missing.value)
    assert 'previous terminated container "c" in pod "once" not found' in str(missing.value)
