"""The pod networks of the test environment, the demo and the managed runtime leave the host as they found
it: ``ip link``, ``ip route`` and ``iptables -t nat -S`` compared before and after — after a normal stop
and after a crash (the next start cleans up).

Other environments may be running on this host at the same time (parallel test runs); what they add
(their own ``kt-*`` bridges, the veths attached to those, their routes) is told apart from ours, so only a
leak of the environment under test fails.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import attrs
import pytest

from kubelet_trio.containerd.network import (
    LEGACY_BRIDGE,
    PodNetwork,
    bridge_name,
    claim_network,
    clean_stale_networks,
    nat_rules,
)
from kubelet_trio.testing.env import missing_prerequisites
from tests.host_network import host_routes

needs_root = pytest.mark.skipif(
    os.geteuid() != 0 or subprocess.run(["ip", "-V"], capture_output=True).returncode != 0,
    reason="needs root and iproute2 to create bridges",
)


@attrs.frozen
class HostNetwork:
    """Links (name, master), IPv4 routes of every table, NAT rules."""

    links: frozenset[tuple[str, str | None]]
    routes: frozenset[str]
    nat: frozenset[str]

    @classmethod
    def capture(cls) -> HostNetwork:
        out = subprocess.run(["ip", "-j", "link", "show"], capture_output=True, text=True, check=True).stdout
        links = frozenset((str(link["ifname"]), link.get("master")) for link in json.loads(out))
        return cls(links, frozenset(host_routes()), frozenset(nat_rules()))

    def leftovers(self, after: HostNetwork) -> list[str]:
        """What ``after`` has that this had not, except what other live environments made."""
        others = (
            {
                name
                for name, _ in after.links
                if name.startswith("kt-")
                and name not in {n for n, _ in self.links}
                and _claimed_by_live_owner(name)
            }
            | {name for name, _ in self.links if name.startswith("kt-")}
            | {LEGACY_BRIDGE}
        )
        new_links = [
            f"link {name}"
            for name, master in after.links - self.links
            if name not in others and master not in others
        ]
        new_routes = [
            f"route {r}"
            for r in after.routes - self.routes
            if not any(f" dev {o} " in f"{r} " for o in others)
        ]
        new_nat = [f"nat {r}" for r in after.nat - self.nat if not any(o in r for o in others)]
        return new_links + new_routes + new_nat


def _claimed_by_live_owner(bridge: str, claims_dir: Path | None = None) -> bool:
    from kubelet_trio.containerd.network import CLAIMS_DIR

    path = (claims_dir or CLAIMS_DIR) / f"{bridge}.json"
    try:
        return not PodNetwork.load(path).stale
    except (OSError, ValueError, KeyError):
        return False


def add_bridge(network: PodNetwork, *, with_port: bool = True) -> None:
    """What the CNI bridge plugin does for the first pod: the bridge with the gateway address, up, and a
    veth attached to it."""
    run = ["ip", "link", "add", network.bridge, "type", "bridge"]
    subprocess.run(run, check=True)
    subprocess.run(["ip", "addr", "add", f"{network.gateway}/24", "dev", network.bridge], check=True)
    subprocess.run(["ip", "link", "set", network.bridge, "up"], check=True)
    if with_port:
        veth = "ktv" + network.bridge[3:]
        subprocess.run(["ip", "link", "add", veth, "type", "veth", "peer", "name", veth + "p"], check=True)
        subprocess.run(["ip", "link", "set", veth, "master", network.bridge], check=True)


@needs_root
def test_a_released_network_leaves_no_link_route_or_rule(tmp_path: Path) -> None:
    before = HostNetwork.capture()
    network = claim_network(str(tmp_path), claims_dir=tmp_path / "claims")
    assert network.bridge == bridge_name(str(tmp_path)) and len(network.bridge) <= 15
    add_bridge(network)
    during = HostNetwork.capture()
    assert (network.bridge, None) in during.links
    assert any(r.startswith(f"{network.subnet} dev {network.bridge} ") for r in during.routes)
    network.release()
    assert before.leftovers(HostNetwork.capture()) == []
    assert not network.claim_file.exists()


@needs_root
def test_the_subnet_is_not_the_hosts_and_a_clash_is_an_error(tmp_path: Path) -> None:
    claims = tmp_path / "claims"
    network = claim_network("a", claims_dir=claims)
    try:
        assert network.subnet.startswith("198.1")  # the benchmarking range, not 10.88.0.0/16
        add_bridge(network, with_port=False)
        other = claim_network("b", claims_dir=claims)  # a second environment gets another subnet
        assert other.subnet != network.subnet and other.bridge != network.bridge
        other.release()
        with pytest.raises(RuntimeError, match=rf"pod subnet {network.subnet} overlaps {network.subnet}"):
            claim_network("c", subnet=network.subnet, claims_dir=claims)
    finally:
        network.release()


@needs_root
def test_a_claim_in_a_private_directory_leaves_networks_claimed_elsewhere_alone(tmp_path: Path) -> None:
    """A test's own claims directory does not list the host's live networks (the containerd of the test
    run, a parallel run's): claiming there must not take their bridges."""
    live = claim_network(str(tmp_path / "live"), claims_dir=tmp_path / "elsewhere")
    try:
        add_bridge(live)
        mine = claim_network(str(tmp_path / "mine"), claims_dir=tmp_path / "claims")
        mine.release()
        links = HostNetwork.capture().links
        assert (live.bridge, None) in links
        assert ("ktv" + live.bridge[3:], live.bridge) in links  # its pod's veth still attached
    finally:
        live.release()


@needs_root
def test_a_crashed_owners_network_is_removed_at_the_next_start(tmp_path: Path) -> None:
    claims = tmp_path / "claims"
    before = HostNetwork.capture()
    script = textwrap.dedent(
        f"""
        import os, sys
        sys.path.insert(0, {str(Path(__file__).resolve().parents[1])!r})
        from pathlib import Path
        from kubelet_trio.containerd.network import claim_network
        from tests.test_network_cleanup import add_bridge
        network = claim_network("crashed", claims_dir=Path({str(claims)!r}))
        add_bridge(network)
        print(network.bridge, flush=True)
        os._exit(9)  # a crash: nothing released
        """
    )
    crashed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert crashed.returncode == 9, crashed.stderr
    bridge = crashed.stdout.strip()
    assert (bridge, None) in HostNetwork.capture().links  # left behind
    assert clean_stale_networks(claims) == [bridge]  # what the next start does first
    assert before.leftovers(HostNetwork.capture()) == []
    assert list(claims.glob("kt-*")) == []


containerd = pytest.mark.skipif(bool(missing_prerequisites()), reason="containerd tier unavailable")


@pytest.mark.containerd
@containerd
def test_the_demo_leaves_links_routes_and_rules_as_they_were(tmp_path: Path) -> None:
    before = HostNetwork.capture()
    demo = subprocess.run(
        [sys.executable, "-m", "kubelet_trio", "demo", "--containerd", "yes"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=Path(__file__).resolve().parents[1],
    )
    assert demo.returncode == 0, demo.stdout[-3000:] + demo.stderr[-3000:]
    assert "containerd via CRI" in demo.stdout
    assert before.leftovers(HostNetwork.capture()) == []


@pytest.mark.containerd
@containerd
def test_a_crashed_test_environment_is_cleaned_up_by_the_next(tmp_path: Path) -> None:
    """A process starts the test environment, runs a pod sandbox and dies without closing anything; the
    next claim removes its bridge, its pod's veth and its orphaned containerd."""
    before = HostNetwork.capture()
    workdir = tmp_path / "crashed"
    script = textwrap.dedent(
        f"""
        import os, sys, uuid
        import trio
        from pathlib import Path
        from kubelet_trio.testing.env import LocalCriEnvironment
        from kubelet_trio.cri.gen.runtime import v1 as pb
        from kubelet_trio.cri.remote import open_cri_runtime

        async def sandbox(endpoint):
            async with open_cri_runtime(endpoint, request_timeout=60) as rt:
                meta = pb.PodSandboxMetadata(name="p", namespace="default", uid=str(uuid.uuid4()))
                await rt.run_pod_sandbox(pb.PodSandboxConfig(metadata=meta, linux=pb.LinuxPodSandboxConfig()))

        env = LocalCriEnvironment(Path({str(workdir)!r})).start()
        trio.run(sandbox, env.endpoint)
        env.registry.stop()
        print(env.containerd.network.bridge, env.containerd._proc.pid, flush=True)
        os._exit(9)
        """
    )
    crashed = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=Path(__file__).resolve().parents[1],
    )
    assert crashed.returncode == 9, crashed.stderr[-3000:]
    bridge, pid = crashed.stdout.split()
    try:
        left = HostNetwork.capture()
        assert (bridge, None) in left.links
        assert any(master == bridge for _, master in left.links)  # the pod's veth
        assert Path(f"/proc/{pid}").exists()  # containerd outlived its owner
        assert bridge in clean_stale_networks()
        assert before.leftovers(HostNetwork.capture()) == []
        assert (
            not Path(f"/proc/{pid}").exists() or b"zombie" in Path(f"/proc/{pid}/status").read_bytes().lower()
        )
    finally:
        from kubelet_trio.testing.containerd import PrivateContainerd

        leftover = PrivateContainerd(workdir / "containerd", sandbox_image="")
        leftover.kill_shims()
        leftover.unmount_all()
