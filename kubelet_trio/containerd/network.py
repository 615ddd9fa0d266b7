"""The pod network of a private or managed containerd: its own bridge and subnet, claimed and released.

Every containerd that kubelet-trio starts gets a bridge named ``kt-<8 hex>`` (15 characters at most, as
Linux allows, and never the ``cni0``/``ktrio0``/``docker0`` names other tools use) and a /24 from
``198.18.0.0/15``, the range RFC 2544 reserves for benchmarking, which no pod network, cloud or home
router uses by default — so a host that already runs containerd (whose default is ``10.88.0.0/16``) keeps
its routes. A subnet is only taken when no route of the host overlaps it.

A claim is a small JSON file under ``/run/kubelet-trio/networks`` naming the bridge, the subnet, the
process that owns it and the containerd serving it. :meth:`PodNetwork.release` removes the bridge (its
routes go with it), the NAT rules the bridge plugin added for this network and the IPAM state, then the
claim. A claim whose owner has died (a crash, a killed test run) is stale: :func:`clean_stale_networks`,
called by every :func:`claim_network`, removes what it left behind, including the containerd it started.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import ipaddress
import json
import logging
import os
import re
import shlex
import shutil
import signal
import subprocess
from collections.abc import Iterable, Iterator
from pathlib import Path

import attrs

from kubelet_trio.logs import kv

__all__ = [
    "CLAIMS_DIR",
    "DEFAULT_POOL",
    "LEGACY_BRIDGE",
    "PodNetwork",
    "bridge_name",
    "claim_network",
    "clean_stale_networks",
    "host_links",
    "kill_shims",
    "nat_rules",
]

logger = logging.getLogger(__name__)

#: Claims live on tmpfs: a reboot clears them together with the links they describe.
CLAIMS_DIR = Path(os.environ.get("KUBELET_TRIO_NETWORK_DIR", "/run/kubelet-trio/networks"))
#: RFC 2544's benchmarking range (198.18.0.0/15), 512 subnets of /24.
DEFAULT_POOL = ipaddress.ip_network(os.environ.get("KUBELET_TRIO_POD_POOL", "198.18.0.0/15"))
SUBNET_PREFIX = 24
BRIDGE_PREFIX = "kt-"
_BRIDGE = re.compile(r"^kt-[0-9a-f]{8}$")
#: The bridge earlier versions shared (on containerd's own default subnet); removed when nothing uses it.
LEGACY_BRIDGE = "ktrio0"
IFNAMSIZ = 15


class NetworkError(RuntimeError):
    """No free subnet, or ``ip``/``iptables`` failed."""


def bridge_name(key: str, attempt: int = 0) -> str:
    """``kt-`` and 8 hex digits of ``key`` (a workdir): stable for one environment, distinct between
    them; ``attempt`` picks another name when that one is taken."""
    digest = hashlib.sha256(f"{key}\0{attempt}".encode()).hexdigest()[:8]
    name = f"{BRIDGE_PREFIX}{digest}"
    assert len(name) <= IFNAMSIZ
    return name


def network_name(bridge: str) -> str:
    """The CNI network name; it is in every NAT rule's comment, which is how stale rules are found."""
    return f"kubelet-trio-{bridge}"


@attrs.frozen
class PodNetwork:
    """One claimed bridge + subnet. ``cni_data_dir`` keeps host-local IPAM's leases next to the claim."""

    bridge: str
    subnet: str
    owner_pid: int
    claims_dir: Path = CLAIMS_DIR
    containerd_pid: int | None = None
    containerd_socket: str | None = None
    #: A managed runtime's state directory: while it exists the network outlives its owner (the pods
    #: keep running under their shims until the kubelet comes back and adopts them).
    keep_while: str | None = None

    @property
    def name(self) -> str:
        return network_name(self.bridge)

    @property
    def gateway(self) -> str:
        return str(next(ipaddress.ip_network(self.subnet).hosts()))

    @property
    def claim_file(self) -> Path:
        return self.claims_dir / f"{self.bridge}.json"

    @property
    def cni_data_dir(self) -> Path:
        return self.claims_dir / f"{self.bridge}.ipam"

    def with_containerd(self, pid: int, socket: str) -> PodNetwork:
        """Record the containerd serving this network (stale-claim cleanup stops it); rewrites the claim."""
        network = attrs.evolve(self, containerd_pid=pid, containerd_socket=socket)
        network._write()
        return network

    def _write(self) -> None:
        self.claims_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.claim_file.with_suffix(".tmp")
        tmp.write_text(
            json.dumps(
                {
                    "bridge": self.bridge,
                    "subnet": self.subnet,
                    "ownerPid": self.owner_pid,
                    "containerdPid": self.containerd_pid,
                    "containerdSocket": self.containerd_socket,
                    "keepWhile": self.keep_while,
                }
            )
        )
        tmp.replace(self.claim_file)

    def release(self) -> None:
        """Remove the bridge (and so its routes), this network's NAT rules and IPAM leases, and the claim.
        Call after the pods are gone (their veths leave with their sandboxes); veths still attached
        (pods of a crashed run) are deleted first, which deletes their pairs too."""
        for port in _bridge_ports(self.bridge):
            _delete_link(port)
        _delete_link(self.bridge)
        _delete_nat_rules(self.name)
        shutil.rmtree(self.cni_data_dir, ignore_errors=True)
        with contextlib.suppress(FileNotFoundError):
            self.claim_file.unlink()
        logger.info("pod network released", extra=kv(bridge=self.bridge, subnet=self.subnet))

    @classmethod
    def load(cls, path: Path) -> PodNetwork:
        doc = json.loads(path.read_text())
        return cls(
            bridge=str(doc["bridge"]),
            subnet=str(doc["subnet"]),
            owner_pid=int(doc["ownerPid"]),
            claims_dir=path.parent,
            containerd_pid=doc.get("containerdPid"),
            containerd_socket=doc.get("containerdSocket"),
            keep_while=doc.get("keepWhile"),
        )

    @property
    def stale(self) -> bool:
        """Its owner is gone and nothing asks to keep it."""
        if _alive(self.owner_pid):
            return False
        return self.keep_while is None or not Path(self.keep_while).exists()


# -- the host's state ---------------------------------------------------------------------------------


def _ip_json(*args: str) -> list[dict[str, object]]:
    out = subprocess.run(["ip", "-j", *args], capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise NetworkError(f"ip {' '.join(args)}: {out.stderr.strip()}")
    return list(json.loads(out.stdout or "[]"))


def host_links() -> list[str]:
    """Every link name (``ip link``)."""
    return sorted(str(link["ifname"]) for link in _ip_json("link", "show"))


def nat_rules() -> list[str]:
    """``iptables -t nat -S`` (empty when iptables is not installed)."""
    if shutil.which("iptables") is None:
        return []
    out = subprocess.run(["iptables", "-w", "-t", "nat", "-S"], capture_output=True, text=True, check=False)
    return out.stdout.splitlines() if out.returncode == 0 else []


def _routed_networks() -> list[ipaddress.IPv4Network]:
    nets = []
    for route in _ip_json("-4", "route", "show", "table", "all"):
        dst = str(route.get("dst", ""))
        if dst in ("", "default") or route.get("type") in ("broadcast", "local", "multicast"):
            continue
        with contextlib.suppress(ValueError):
            net = ipaddress.ip_network(dst, strict=False)
            if isinstance(net, ipaddress.IPv4Network):
                nets.append(net)
    return nets


def _link_exists(name: str) -> bool:
    return subprocess.run(["ip", "link", "show", name], capture_output=True, check=False).returncode == 0


def _delete_link(name: str) -> None:
    if _link_exists(name):
        out = subprocess.run(["ip", "link", "delete", name], capture_output=True, text=True, check=False)
        if out.returncode != 0 and _link_exists(name):
            raise NetworkError(f"cannot delete link {name}: {out.stderr.strip()}")


def _delete_nat_rules(network: str) -> None:
    """Remove the rules the bridge plugin's ``ipMasq`` added for ``network`` (their comment names it) and
    the per-container chains they jump to."""
    marker = f'name: \\"{network}\\"'
    alt_marker = f'name: "{network}"'
    chains: set[str] = set()
    for rule in nat_rules():
        if rule.startswith("-A ") and (marker in rule or alt_marker in rule):
            parts = rule.split()
            if "-j" in parts:
                chains.add(parts[parts.index("-j") + 1])
            # Re-issue the rule as a delete; shlex keeps the quoted comment one argument.
            args = shlex.split(rule)
            args[0] = "-D"
            subprocess.run(["iptables", "-w", "-t", "nat", *args], capture_output=True, check=False)
    for chain in chains:
        if chain.startswith("CNI-"):
            subprocess.run(["iptables", "-w", "-t", "nat", "-F", chain], capture_output=True, check=False)
            subprocess.run(["iptables", "-w", "-t", "nat", "-X", chain], capture_output=True, check=False)


def _alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _bridge_ports(bridge: str) -> list[str]:
    try:
        return [str(link["ifname"]) for link in _ip_json("link", "show", "master", bridge)]
    except NetworkError:
        return []


def _claims(claims_dir: Path) -> Iterator[PodNetwork]:
    if not claims_dir.is_dir():
        return
    for path in sorted(claims_dir.glob("kt-*.json")):
        try:
            yield PodNetwork.load(path)
        except (OSError, ValueError, KeyError, TypeError):
            logger.warning("unreadable network claim removed", extra=kv(path=str(path)))
            path.unlink(missing_ok=True)


def kill_shims(socket: str) -> list[int]:
    """SIGKILL the ``containerd-shim`` processes of the containerd at ``socket`` (their command line
    names it); the pods' processes die with them. Returns the pids."""
    killed = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        cmdline = _cmdline(int(entry.name))
        if b"containerd-shim" in cmdline and socket.encode() in cmdline:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(entry.name), signal.SIGKILL)
                killed.append(int(entry.name))
    return killed


def clean_stale_networks(claims_dir: Path = CLAIMS_DIR) -> list[str]:
    """Remove the networks whose owner process is gone (and their orphaned containerd), bridges named
    like ours without a claim, and the legacy shared bridge when no pod is attached. Returns the removed
    bridges.

    Only the host-wide claims directory knows every claim: with another one (a test's own) the bridges
    it does not list may be live networks claimed elsewhere, so they are left alone."""
    removed: list[str] = []
    claimed: set[str] = set()
    for network in _claims(claims_dir):
        if not network.stale:
            claimed.add(network.bridge)
            continue
        pid, socket = network.containerd_pid, network.containerd_socket
        if pid and socket and _alive(pid) and socket.encode() in _cmdline(pid):
            logger.warning("stopping an orphaned containerd", extra=kv(pid=pid, socket=socket))
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if socket:
            kill_shims(socket)
        network.release()
        removed.append(network.bridge)
    if claims_dir == CLAIMS_DIR:
        removed += _remove_unclaimed_bridges(claimed)
    if removed:
        logger.info("stale pod networks removed", extra=kv(bridges=removed))
    return removed


def _remove_unclaimed_bridges(claimed: set[str]) -> list[str]:
    try:
        links = host_links()
    except NetworkError:
        return []
    removed = []
    for link in links:
        unclaimed_ours = _BRIDGE.match(link) and link not in claimed
        legacy_idle = link == LEGACY_BRIDGE and not _bridge_ports(link)
        if unclaimed_ours or legacy_idle:
            _delete_link(link)
            removed.append(link)
    return removed


def _free_subnet(pool: ipaddress.IPv4Network, taken: Iterable[ipaddress.IPv4Network], start: int) -> str:
    subnets = list(pool.subnets(new_prefix=SUBNET_PREFIX)) if pool.prefixlen < SUBNET_PREFIX else [pool]
    busy = list(taken)
    for i in range(len(subnets)):
        candidate = subnets[(start + i) % len(subnets)]
        if not any(candidate.overlaps(other) for other in busy):
            return str(candidate)
    raise NetworkError(f"no free /{SUBNET_PREFIX} left in {pool} (every one overlaps a route or a claim)")


def claim_network(
    key: str,
    *,
    subnet: str | None = None,
    pool: ipaddress.IPv4Network | ipaddress.IPv6Network = DEFAULT_POOL,
    claims_dir: Path = CLAIMS_DIR,
    owner_pid: int | None = None,
    keep_while: Path | None = None,
    adopt: bool = False,
) -> PodNetwork:
    """Clean stale networks, then claim a bridge named for ``key`` and ``subnet`` (default: a free /24 of
    ``pool``). A given ``subnet`` that overlaps a route of the host is an error naming that route.

    ``adopt``: a claim for ``key`` whose owner has exited (a restarted kubelet's) is taken over with its
    bridge and subnet, so running pods keep their network. ``keep_while``: see :attr:`PodNetwork.keep_while`.
    """
    claims_dir.mkdir(parents=True, exist_ok=True)
    owner = owner_pid or os.getpid()
    with _locked(claims_dir):
        if adopt:
            previous = claims_dir / f"{bridge_name(key)}.json"
            if previous.exists():
                with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
                    old = PodNetwork.load(previous)
                    if not _alive(old.owner_pid) and (subnet is None or subnet == old.subnet):
                        network = attrs.evolve(old, owner_pid=owner, containerd_pid=None)
                        network._write()
                        logger.info("pod network adopted", extra=kv(bridge=old.bridge, subnet=old.subnet))
                        return network
        clean_stale_networks(claims_dir)
        network = _claim(key, subnet, pool, claims_dir, owner)
        if keep_while is not None:
            network = attrs.evolve(network, keep_while=str(keep_while))
            network._write()
        return network


@contextlib.contextmanager
def _locked(claims_dir: Path) -> Iterator[None]:
    """One claim at a time on this host (parallel test runs start environments concurrently)."""
    with (claims_dir / ".lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _claim(
    key: str,
    subnet: str | None,
    pool: ipaddress.IPv4Network | ipaddress.IPv6Network,
    claims_dir: Path,
    owner_pid: int,
) -> PodNetwork:
    claimed = {n.bridge: n for n in _claims(claims_dir)}
    attempt = 0
    while (bridge := bridge_name(key, attempt)) in claimed or _link_exists(bridge):
        attempt += 1
    taken = _routed_networks() + [ipaddress.IPv4Network(n.subnet) for n in claimed.values()]
    if subnet is not None:
        wanted = ipaddress.ip_network(subnet)
        clash = [str(net) for net in taken if wanted.overlaps(net)]
        if clash:
            raise NetworkError(f"pod subnet {subnet} overlaps {', '.join(clash)} already routed on this host")
        chosen = str(wanted)
    else:
        if not isinstance(pool, ipaddress.IPv4Network):
            raise NetworkError(f"pod subnet pool {pool} must be IPv4")
        chosen = _free_subnet(pool, taken, int(bridge[len(BRIDGE_PREFIX) :], 16))
    network = PodNetwork(bridge, chosen, owner_pid, claims_dir)
    network._write()
    logger.info("pod network claimed", extra=kv(bridge=bridge, subnet=chosen))
    return network
