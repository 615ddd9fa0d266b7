"""The node's InternalIP as the Go kubelet picks it, against a stubbed name lookup and interface table (no
real network): ``--node-ip``; the hostname as an IP; non-loopback addresses of the node name; the
default-route interface; any interface without a route table; IPv4 first."""

from __future__ import annotations

import logging
from collections.abc import Sequence

import pytest
import trio

from kubelet_trio.cmd import kubelet as cmd
from kubelet_trio.nodestatus.addresses import (
    DefaultRoute,
    HostNetwork,
    Interface,
    NodeAddressError,
    choose_node_ip,
    parse_ipv4_default_routes,
    parse_ipv6_default_routes,
    read_interfaces,
    resolve_node_ips,
)
from kubelet_trio.options import component_configs, load_options

# A Debian host: the hostname resolves to loopback (/etc/hosts), eth0 carries the default route.
LO = Interface("lo", loopback=True, addresses=("127.0.0.1", "::1"))
ETH0 = Interface("eth0", addresses=("192.0.2.2", "fd00::2", "fe80::fc:ff:fe00:1"))
BRIDGE = Interface("ktrio0", addresses=("10.88.0.1", "fe80::5872:39ff:fea6:f2b7"))
HOST = HostNetwork((LO, ETH0, BRIDGE), (DefaultRoute("eth0", 4), DefaultRoute("eth0", 6)))

PROC_NET_ROUTE = """\
Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT
ktrio0\t0000580A\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0
eth1\t00000000\t010200C0\t0003\t0\t0\t100\t00000000\t0\t0\t0
eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0
eth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0
"""
Z = "0" * 32
PROC_NET_IPV6_ROUTE = f"""\
fd000000000000000000000000000000 40 {Z} 00 {Z} 00000100 00000001 00000000 00000001     eth0
{Z} 00 {Z} 00 fd000000000000000000000000000001 00000400 00000002 00000000 00000003     eth0
{Z} 00 {Z} 00 {Z} ffffffff 00000001 00000000 00200200       lo
"""


def choose(
    resolved: Sequence[str] = (),
    network: HostNetwork = HOST,
    *,
    node_ip: str = "",
    hostname: str = "vm",
) -> str:
    return choose_node_ip(
        node_ip=node_ip, node_name=hostname, hostname=hostname, resolved=resolved, network=network
    )


def test_default_routes_are_parsed_from_proc_net_route_and_ipv6_route() -> None:
    assert parse_ipv4_default_routes(PROC_NET_ROUTE) == [DefaultRoute("eth1", 4), DefaultRoute("eth0", 4)]
    # the loopback default (no gateway) is not a default route
    assert parse_ipv6_default_routes(PROC_NET_IPV6_ROUTE) == [DefaultRoute("eth0", 6)]


def test_node_ip_wins() -> None:
    assert choose(["198.51.100.7"], node_ip="203.0.113.9") == "203.0.113.9"


def test_a_hostname_that_is_an_ip_is_used() -> None:
    assert choose(["198.51.100.7"], hostname="203.0.113.5") == "203.0.113.5"


def test_a_hostname_on_loopback_gets_the_default_route_address() -> None:
    """Debian/Ubuntu put the hostname on 127.0.1.1 or 127.0.0.1: Go skips those answers."""
    assert choose(["127.0.1.1", "127.0.0.1", "::1"]) == "192.0.2.2"
    assert choose([]) == "192.0.2.2"  # the name does not resolve at all


def test_a_resolved_address_of_this_host_is_used_ipv4_first() -> None:
    assert choose(["10.88.0.1"]) == "10.88.0.1"
    assert choose(["fd00::2", "10.88.0.1"]) == "10.88.0.1"
    assert choose(["fd00::2"]) == "fd00::2"  # only IPv6 resolves: it is still valid


def test_resolved_addresses_not_on_this_host_or_not_unicast_are_skipped() -> None:
    assert choose(["198.51.100.7", "fe80::fc:ff:fe00:1", "224.0.0.1", "0.0.0.0"]) == "192.0.2.2"


def test_unspecified_ipv6_node_ip_prefers_ipv6() -> None:
    assert choose(["10.88.0.1", "fd00::2"], node_ip="::") == "fd00::2"
    assert choose([], node_ip="::") == "fd00::2"  # from the IPv6 default route
    assert choose(["10.88.0.1", "fd00::2"], node_ip="0.0.0.0") == "10.88.0.1"


def test_default_routes_are_tried_in_order_for_a_global_ipv4_first() -> None:
    down = Interface("eth1", up=False, addresses=("198.51.100.2",))
    link_local_only = Interface("eth2", addresses=("169.254.0.5", "fd00::9"))
    network = HostNetwork(
        (LO, down, link_local_only, ETH0),
        (DefaultRoute("eth1", 4), DefaultRoute("eth2", 6), DefaultRoute("eth2", 4), DefaultRoute("eth0", 4)),
    )
    assert choose(network=network) == "192.0.2.2"
    # no IPv4 route reaches a usable interface: the IPv6 routes are tried next
    v6 = HostNetwork((LO, down, link_local_only), (DefaultRoute("eth1", 4), DefaultRoute("eth2", 6)))
    assert choose(network=v6) == "fd00::9"


def test_without_a_route_table_any_up_interface_but_loopback_and_point_to_point() -> None:
    tunnel = Interface("tun0", point_to_point=True, addresses=("198.51.100.9",))
    network = HostNetwork((LO, tunnel, Interface("eth3", addresses=("fd00::3", "203.0.113.3"))), None)
    assert choose(network=network) == "203.0.113.3"


def test_no_address_at_all_is_an_error_naming_the_node() -> None:
    with pytest.raises(NodeAddressError, match=r"can't get an IP address for node vm: no default routes"):
        choose(["127.0.1.1"], HostNetwork((LO,), ()))
    with pytest.raises(NodeAddressError, match=r"unable to select an IP from the default routes"):
        choose([], HostNetwork((LO, Interface("eth0", addresses=("fe80::1",))), (DefaultRoute("eth0", 4),)))
    with pytest.raises(NodeAddressError, match=r"no acceptable interface"):
        choose([], HostNetwork((LO,), None))


async def test_resolve_looks_up_the_node_name_off_the_trio_thread() -> None:
    asked: list[str] = []
    trio_thread = trio.lowlevel.current_trio_token()

    async def lookup(name: str) -> list[str]:
        asked.append(name)
        return ["127.0.1.1"]

    def read_network() -> HostNetwork:
        with pytest.raises(RuntimeError):  # only a worker thread has no Trio token
            trio.lowlevel.current_trio_token()
        return HOST

    assert trio_thread is not None
    assert await resolve_node_ips("", "node-a", "node-a", lookup=lookup, read_network=read_network) == (
        "192.0.2.2",
    )
    assert asked == ["node-a"]


async def test_resolve_with_node_ip_or_ip_hostname_looks_nothing_up() -> None:
    async def lookup(name: str) -> list[str]:
        raise AssertionError("no lookup expected")

    def read_network() -> HostNetwork:
        raise AssertionError("no interface table expected")

    assert await resolve_node_ips("203.0.113.9", "n", "n", lookup=lookup, read_network=read_network) == (
        "203.0.113.9",
    )
    assert await resolve_node_ips("", "10.1.2.3", "10.1.2.3", lookup=lookup) == ("10.1.2.3",)


async def test_the_daemon_falls_back_to_loopback_when_no_address_exists(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async def no_address(node_ip: str, node_name: str, hostname: str) -> tuple[str, ...]:
        raise NodeAddressError(f"can't get an IP address for node {node_name}: no default routes")

    monkeypatch.setattr(cmd, "resolve_node_ips", no_address)
    options, _ = load_options(["--hostname-override", "lonely", "--node-ip", "0.0.0.0", "--runtime", "sim"])
    with caplog.at_level(logging.WARNING, "kubelet_trio.cmd.kubelet"):
        config = await cmd.node_config(component_configs(options))
    assert config.node_ips == ("127.0.0.1",)
    assert "no node IP; using the loopback address" in caplog.text
    explicit, _ = load_options(["--hostname-override", "n", "--node-ip", "203.0.113.9", "--runtime", "sim"])
    assert (await cmd.node_config(component_configs(explicit))).node_ips == ("203.0.113.9",)


def test_the_interface_table_is_read_from_getifaddrs() -> None:
    """The ctypes layout of ``struct ifaddrs``: every Linux host has ``lo`` up with 127.0.0.1."""
    lo = next(i for i in read_interfaces() if i.name == "lo")
    assert lo.up and lo.loopback and not lo.point_to_point
    assert "127.0.0.1" in lo.addresses
