"""``kubelet-trio sim-cri``'s defaults are the CRI's answers (what critest checks), containerd 1.6's
departures from it behind ``--containerd-1.6``."""

from __future__ import annotations

import ipaddress

import pytest
import trio

from kubelet_trio.cmd.sim_cri import DEFAULT_PULL_DELAY, build_parser, simulator
from kubelet_trio.cri import errors
from kubelet_trio.cri.gen.runtime import v1 as pb
from kubelet_trio.sim.runtime import SimRuntime

LISTEN = ["--listen", "unix:///tmp/sim.sock"]
LOOPBACK = ipaddress.IPv4Network("127.0.0.0/8")


def sim_for(*flags: str) -> SimRuntime:
    return simulator(build_parser().parse_args([*LISTEN, *flags]))


async def test_stops_of_unknown_ids_succeed_by_default() -> None:
    """The CRI (api.proto): each stop and remove "is idempotent, and must not return an error if" what it
    names is already gone; critest's Idempotence specs stop and remove ids that never existed."""
    sim = sim_for()
    await sim.stop_container("f" * 64, 0)
    await sim.stop_pod_sandbox("f" * 64)
    await sim.remove_container("f" * 64)
    await sim.remove_pod_sandbox("f" * 64)


async def test_containerd_1_6_stops_of_unknown_ids_are_not_found() -> None:
    sim = sim_for("--containerd-1.6")
    with pytest.raises(errors.NotFoundError):
        await sim.stop_container("f" * 64, 0)
    with pytest.raises(errors.NotFoundError):
        await sim.stop_pod_sandbox("f" * 64)
    await sim.remove_pod_sandbox("f" * 64)  # removes succeed in 1.6 too


def test_the_old_flag_is_still_accepted() -> None:
    assert sim_for("--idempotent-stops").stop_missing_ok


def test_pods_get_loopback_addresses_and_pulls_take_a_moment() -> None:
    """Pod IPs the host owns (so that their ports answer), a different /16 for each sim-cri most of the
    time; an absent image is not pulled instantly (critest: a 1 ms deadline ends a pull)."""
    sim = sim_for()
    assert ipaddress.IPv4Network(sim.pod_cidr).subnet_of(LOOPBACK)
    assert ipaddress.IPv4Network(sim.pod_cidr).prefixlen == 16
    assert len({sim_for().pod_cidr for _ in range(20)}) > 1
    assert sim_for("--pod-cidr", "10.1.0.0/16").pod_cidr == "10.1.0.0/16"
    assert sim.pull_delay == DEFAULT_PULL_DELAY > 0


async def test_a_pull_takes_the_default_delay(autojump_clock: trio.abc.Clock) -> None:
    sim = sim_for()
    started = trio.current_time()
    await sim.pull_image(pb.ImageSpec(image="registry.sim/busybox:1"))
    assert trio.current_time() - started == pytest.approx(DEFAULT_PULL_DELAY)
