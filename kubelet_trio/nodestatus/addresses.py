"""The node's InternalIP, chosen as the Go kubelet chooses it (``nodestatus.NodeAddress`` without a cloud
provider, with ``validateNodeIP`` and k8s.io/utils/net ``ResolveBindAddress`` / ``ChooseHostInterface``).

In order: ``--node-ip`` when it is a concrete address; the hostname when it is itself an IP; the addresses
the node name resolves to that belong to this host and are not loopback, link-local, multicast or
unspecified; else the first global unicast address of an up interface carrying a default route (from
``/proc/net/route`` and ``/proc/net/ipv6_route``); without a route table, of any up interface that is not
loopback or point-to-point. IPv4 is preferred throughout, unless ``--node-ip`` is ``::``.

So a host whose hostname resolves to 127.0.1.1 (Debian, Ubuntu) registers its default-route address, which
other nodes and the API server can reach. :func:`choose_node_ip` is pure: tests pass a name lookup answer
and a :class:`HostNetwork`; :func:`resolve_node_ips` gathers both without blocking the Trio thread.
"""

from __future__ import annotations

import contextlib
import ctypes
import ipaddress
import logging
import os
import socket
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

import attrs
import trio

from kubelet_trio.logs import kv

__all__ = [
    "DefaultRoute",
    "HostNetwork",
    "Interface",
    "NodeAddressError",
    "choose_node_ip",
    "lookup_host",
    "parse_ipv4_default_routes",
    "parse_ipv6_default_routes",
    "read_host_network",
    "resolve_node_ips",
]

logger = logging.getLogger(__name__)

IPV4_ROUTES = "/proc/net/route"
IPV6_ROUTES = "/proc/net/ipv6_route"

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class NodeAddressError(RuntimeError):
    """No usable address for the node (the daemon reports it in one line and exits)."""


@attrs.frozen
class Interface:
    """One network interface as ``getifaddrs`` shows it."""

    name: str
    up: bool = True
    loopback: bool = False
    point_to_point: bool = False
    addresses: tuple[str, ...] = ()


@attrs.frozen
class DefaultRoute:
    interface: str
    family: int  # 4 or 6


@attrs.frozen
class HostNetwork:
    """The interface table and default routes; ``routes`` is None when the host has no route table."""

    interfaces: tuple[Interface, ...] = ()
    routes: tuple[DefaultRoute, ...] | None = ()

    def interface(self, name: str) -> Interface | None:
        return next((i for i in self.interfaces if i.name == name), None)

    def owns(self, ip: IPAddress) -> bool:
        return any(ip == _ip(a) for i in self.interfaces for a in i.addresses)


def _ip(text: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        return None


def _family(ip: IPAddress) -> int:
    return ip.version


def _global_unicast(ip: IPAddress) -> bool:
    """Go's ``IP.IsGlobalUnicast``: not unspecified, loopback, multicast, link-local or broadcast (private
    ranges count as global)."""
    if ip.is_unspecified or ip.is_loopback or ip.is_multicast or ip.is_link_local:
        return False
    return not (ip.version == 4 and ip == ipaddress.IPv4Address("255.255.255.255"))


# -- route tables ----------------------------------------------------------------------------------------


def parse_ipv4_default_routes(text: str) -> list[DefaultRoute]:
    """Default routes (destination 0.0.0.0) of ``/proc/net/route``, in file order."""
    routes = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 3 or fields[0] == "Iface":
            continue
        if int(fields[1], 16) == 0:
            routes.append(DefaultRoute(fields[0], 4))
    return routes


def parse_ipv6_default_routes(text: str) -> list[DefaultRoute]:
    """Default routes (destination ::) with a gateway of ``/proc/net/ipv6_route`` (no gateway: loopback)."""
    routes = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 10:
            continue
        if int(fields[0], 16) == 0 and int(fields[4], 16) != 0:
            routes.append(DefaultRoute(fields[9], 6))
    return routes


# -- the choice ------------------------------------------------------------------------------------------


def _valid_node_ip(ip: IPAddress, network: HostNetwork) -> bool:
    """Go's ``validateNodeIP``: a concrete unicast address assigned to one of this host's interfaces."""
    if ip.is_loopback or ip.is_multicast or ip.is_unspecified or ip.is_link_local:
        return False
    return network.owns(ip)


def _interface_ip(interface: Interface | None, family: int) -> IPAddress | None:
    if interface is None or not interface.up:
        return None
    for text in interface.addresses:
        ip = _ip(text)
        if ip is not None and _family(ip) == family and _global_unicast(ip):
            return ip
    return None


def _host_interface_ip(network: HostNetwork, families: Sequence[int]) -> IPAddress:
    """``ChooseHostInterface``: the default routes' interfaces, else (no route table) any interface."""
    if network.routes is None:
        for family in families:
            for interface in network.interfaces:
                if interface.loopback or interface.point_to_point:
                    continue
                ip = _interface_ip(interface, family)
                if ip is not None:
                    return ip
        raise NodeAddressError("no acceptable interface with a global unicast address found on the host")
    if not network.routes:
        raise NodeAddressError(f"no default routes found in {IPV4_ROUTES} or {IPV6_ROUTES}")
    for family in families:
        for route in network.routes:
            if route.family != family:
                continue
            ip = _interface_ip(network.interface(route.interface), family)
            if ip is not None:
                return ip
    raise NodeAddressError("unable to select an IP from the default routes' interfaces")


def choose_node_ip(
    *, node_ip: str, node_name: str, hostname: str, resolved: Sequence[str], network: HostNetwork
) -> str:
    """The node's InternalIP. ``resolved`` is what a lookup of ``node_name`` answered (any order)."""
    configured = _ip(node_ip) if node_ip else None
    if configured is not None and not configured.is_unspecified:
        return str(configured)
    literal = _ip(hostname)
    if literal is not None:
        return str(literal)
    prefer = 6 if configured is not None and configured.version == 6 else 4
    families = (prefer, 10 - prefer)
    chosen: IPAddress | None = None
    for text in resolved:
        ip = _ip(text)
        if ip is None or not _valid_node_ip(ip, network):
            continue
        if _family(ip) == prefer:
            chosen = ip
            break
        chosen = chosen or ip
    if chosen is not None:
        return str(chosen)
    try:
        return str(_host_interface_ip(network, families))
    except NodeAddressError as err:
        raise NodeAddressError(f"can't get an IP address for node {node_name}: {err}") from None


# -- the host --------------------------------------------------------------------------------------------


class _SockAddr(ctypes.Structure):
    _fields_ = [("family", ctypes.c_ushort), ("data", ctypes.c_ubyte * 14)]


class _IfAddrs(ctypes.Structure):
    pass


_IfAddrs._fields_ = [
    ("next", ctypes.POINTER(_IfAddrs)),
    ("name", ctypes.c_char_p),
    ("flags", ctypes.c_uint),
    ("addr", ctypes.POINTER(_SockAddr)),
    ("netmask", ctypes.POINTER(_SockAddr)),
    ("ifu", ctypes.POINTER(_SockAddr)),
    ("data", ctypes.c_void_p),
]

_IFF_UP, _IFF_LOOPBACK, _IFF_POINTOPOINT = 0x1, 0x8, 0x10


def _sockaddr_ip(pointer: ctypes._Pointer[_SockAddr]) -> str | None:
    if not pointer:
        return None
    family = pointer.contents.family
    if family == socket.AF_INET:
        raw = ctypes.string_at(ctypes.addressof(pointer.contents) + 4, 4)
        return socket.inet_ntop(socket.AF_INET, raw)
    if family == socket.AF_INET6:
        raw = ctypes.string_at(ctypes.addressof(pointer.contents) + 8, 16)
        return socket.inet_ntop(socket.AF_INET6, raw)
    return None


def read_interfaces() -> tuple[Interface, ...]:
    """Every interface with its flags and IP addresses (libc ``getifaddrs``), in the kernel's order."""
    libc = ctypes.CDLL(None, use_errno=True)  # the process's own libc
    libc.getifaddrs.argtypes = [ctypes.POINTER(ctypes.POINTER(_IfAddrs))]
    libc.getifaddrs.restype = ctypes.c_int
    libc.freeifaddrs.argtypes = [ctypes.POINTER(_IfAddrs)]
    libc.freeifaddrs.restype = None
    head = ctypes.POINTER(_IfAddrs)()
    if libc.getifaddrs(ctypes.byref(head)) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"getifaddrs: {os.strerror(errno)}")
    order: list[str] = []
    flags: dict[str, int] = {}
    addresses: dict[str, list[str]] = {}
    try:
        entry = head
        while entry:
            item = entry.contents
            name = (item.name or b"").decode(errors="replace")
            if name not in flags:
                order.append(name)
                flags[name] = item.flags
                addresses[name] = []
            ip = _sockaddr_ip(item.addr)
            if ip is not None:
                addresses[name].append(ip)
            entry = item.next
    finally:
        libc.freeifaddrs(head)
    return tuple(
        Interface(
            name,
            up=bool(flags[name] & _IFF_UP),
            loopback=bool(flags[name] & _IFF_LOOPBACK),
            point_to_point=bool(flags[name] & _IFF_POINTOPOINT),
            addresses=tuple(addresses[name]),
        )
        for name in order
    )


def read_host_network(route_file: str = IPV4_ROUTES, ipv6_route_file: str = IPV6_ROUTES) -> HostNetwork:
    """This host's interfaces and default routes (blocking: call it in a thread)."""
    routes: tuple[DefaultRoute, ...] | None
    try:
        routes = tuple(parse_ipv4_default_routes(Path(route_file).read_text()))
    except FileNotFoundError:
        routes = None
    if routes is not None:
        with contextlib.suppress(OSError):  # IPv6 routes are optional, as in Go
            routes += tuple(parse_ipv6_default_routes(Path(ipv6_route_file).read_text()))
    return HostNetwork(read_interfaces(), routes)


async def lookup_host(name: str) -> list[str]:
    """The addresses ``name`` resolves to (hosts file, then DNS), without blocking the Trio thread;
    an unknown name resolves to nothing."""
    try:
        answers = await trio.socket.getaddrinfo(name, None, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return []
    return list(dict.fromkeys(str(sockaddr[0]) for *_, sockaddr in answers))


async def resolve_node_ips(
    node_ip: str,
    node_name: str,
    hostname: str,
    *,
    lookup: Callable[[str], Awaitable[Sequence[str]]] = lookup_host,
    read_network: Callable[[], HostNetwork] = read_host_network,
) -> tuple[str, ...]:
    """The node's IPs for its status (one InternalIP); see :func:`choose_node_ip`."""
    configured = _ip(node_ip) if node_ip else None
    if configured is not None and not configured.is_unspecified:
        return (str(configured),)
    if _ip(hostname) is not None:
        resolved: Sequence[str] = ()
        network = HostNetwork()
    else:
        resolved = await lookup(node_name)
        network = await trio.to_thread.run_sync(read_network)
    ip = choose_node_ip(
        node_ip=node_ip, node_name=node_name, hostname=hostname, resolved=resolved, network=network
    )
    logger.info("node IP chosen", extra=kv(node=node_name, ip=ip, resolved=",".join(resolved) or "-"))
    return (ip,)
