"""``/metrics/cadvisor``: cAdvisor's names and label set on the simulated runtime, and the cgroup and
``/proc`` readers behind the values CRI lacks (fake v1 and v2 trees)."""

from __future__ import annotations

from pathlib import Path

import trio
import trio.testing
from prometheus_client.parser import text_string_to_metric_families

from kubelet_trio.sim.usage import USAGE_ANNOTATION_PREFIX
from kubelet_trio.stats.cgroups import (
    BlockIo,
    process_cgroups,
    read_cgroup_usage,
    read_net_dev,
    read_process_usage,
)
from tests.server.harness import IMAGE, open_test_node, pod_manifest

Labels = tuple[tuple[str, str], ...]


def samples(text: str) -> dict[tuple[str, Labels], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def series(values: dict[tuple[str, Labels], float], name: str) -> list[dict[str, str]]:
    return [dict(labels) for n, labels in values if n == name]


async def test_cadvisor_endpoint_on_the_simulated_runtime(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    async with open_test_node(tmp_path) as node, node.client() as client:
        manifest = pod_manifest("web", {"app": "run"})
        manifest["metadata"]["annotations"][USAGE_ANNOTATION_PREFIX + "app"] = (
            "cpu=500m memory=32Mi rootfs=1Mi"
        )
        (web,) = await node.apply(manifest)
        await node.wait_running(web)
        await trio.sleep(4)
        response = await client.get("/metrics/cadvisor")
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
        values = samples(response.text)
        (container,) = [s for s in series(values, "container_memory_working_set_bytes") if s["container"]]
        assert container["container"] == "app"
        assert container["pod"] == "web"
        assert container["namespace"] == "default"
        assert container["image"] == IMAGE
        assert container["name"]  # the runtime's container id
        assert set(container) == {"container", "pod", "namespace", "image", "name", "id"}
        key = tuple(sorted(container.items()))
        assert values[("container_memory_working_set_bytes", key)] == 32 * 1024**2
        cpu = values[
            ("container_cpu_usage_seconds_total", tuple(sorted({**container, "cpu": "total"}.items())))
        ]
        assert cpu >= 2.0  # 500m for >= 4 s
        assert (
            values[("container_fs_usage_bytes", tuple(sorted({**container, "device": ""}.items())))]
            == 1024**2
        )
        (pod,) = [
            s
            for s in series(values, "container_memory_working_set_bytes")
            if not s["container"] and not s["name"]
        ]
        assert pod["id"] == f"/kubepods/pod{web.uid}"
        assert pod["image"] == ""
        assert values[("container_memory_working_set_bytes", tuple(sorted(pod.items())))] == 32 * 1024**2
        # the sandbox carries the pod's network (the simulated runtime reports eth0 through CRI)
        (net,) = series(values, "container_network_receive_bytes_total")
        assert net["interface"] == "eth0" and net["container"] == "" and net["pod"] == "web"
        assert values[("container_scrape_error", ())] == 0
        assert series(values, "machine_cpu_cores")

        await node.remove(web)
        await node.kubelet.wait_pod_finished(web.uid)
        await trio.sleep(1)
        gone = samples((await client.get("/metrics/cadvisor")).text)
        assert not series(gone, "container_memory_working_set_bytes")


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_cgroup_v1_readings(tmp_path: Path) -> None:
    proc, root, sys = tmp_path / "proc", tmp_path / "cgroup", tmp_path / "sys"
    _write(proc / "42" / "cgroup", "4:memory:/k8s.io/abc\n3:cpu,cpuacct:/k8s.io/abc\n2:blkio:/k8s.io/abc\n")
    _write(
        proc / "42" / "net" / "dev",
        "Inter-|   Receive |  Transmit\n face |bytes packets errs drop fifo frame compressed multicast|...\n"
        "    lo: 5 1 0 0 0 0 0 0 5 1 0 0 0 0 0 0\n"
        "  eth0: 1000 10 1 2 0 0 0 0 2000 20 3 4 0 0 0 0\n",
    )
    cpu = root / "cpu" / "k8s.io" / "abc"
    _write(root / "cpuacct" / "k8s.io" / "abc" / "cpuacct.usage", "5000000000\n")
    _write(root / "cpuacct" / "k8s.io" / "abc" / "cpuacct.stat", "user 300\nsystem 100\n")
    _write(cpu / "cpu.stat", "nr_periods 50\nnr_throttled 5\nthrottled_time 700000000\n")
    _write(cpu / "cpu.cfs_quota_us", "50000\n")
    _write(cpu / "cpu.cfs_period_us", "100000\n")
    _write(cpu / "cpu.shares", "512\n")
    memory = root / "memory" / "k8s.io" / "abc"
    _write(memory / "memory.usage_in_bytes", "10000\n")
    _write(memory / "memory.limit_in_bytes", "9223372036854771712\n")
    _write(
        memory / "memory.stat",
        "cache 1\nrss 2\ntotal_cache 3000\ntotal_rss 6000\ntotal_swap 0\ntotal_mapped_file 100\n"
        "total_inactive_file 2500\n",
    )
    _write(
        root / "blkio" / "k8s.io" / "abc" / "blkio.throttle.io_service_bytes",
        "254:0 Read 4096\n254:0 Write 8192\nTotal 12288\n",
    )
    _write(
        root / "blkio" / "k8s.io" / "abc" / "blkio.throttle.io_serviced",
        "254:0 Read 1\n254:0 Write 2\nTotal 3\n",
    )
    _write(sys / "dev" / "block" / "254:0" / "uevent", "MAJOR=254\nMINOR=0\nDEVNAME=vda\n")

    paths = process_cgroups(42, proc=str(proc))
    assert paths["memory"] == paths["cpu"] == paths["cpuacct"] == "/k8s.io/abc"
    usage = read_cgroup_usage(paths, root=str(root), sys=str(sys))
    assert usage is not None
    assert usage.path == "/k8s.io/abc"
    assert usage.cpu_usage_ns == 5 * 10**9
    assert usage.cfs_periods == 50 and usage.cfs_throttled_periods == 5
    assert usage.cfs_throttled_ns == 700_000_000
    assert usage.cpu_quota_us == 50000 and usage.cpu_period_us == 100000 and usage.cpu_shares == 512
    assert usage.memory_usage == 10000
    assert usage.memory_working_set == 7500
    assert usage.memory_rss == 6000 and usage.memory_cache == 3000 and usage.memory_mapped_file == 100
    assert usage.memory_limit is None  # v1's "unlimited"
    (io,) = usage.block_io
    assert io == BlockIo("/dev/vda", read_bytes=4096, write_bytes=8192, reads=1, writes=2)
    (eth0,) = read_net_dev(42, proc=str(proc))
    assert (eth0.name, eth0.rx_bytes, eth0.rx_packets, eth0.rx_errors, eth0.rx_dropped) == (
        "eth0",
        1000,
        10,
        1,
        2,
    )
    assert (eth0.tx_bytes, eth0.tx_packets, eth0.tx_errors, eth0.tx_dropped) == (2000, 20, 3, 4)
    assert read_process_usage(0) == (None, ())  # no process (the simulated runtime)


def test_cgroup_v2_readings(tmp_path: Path) -> None:
    root = tmp_path / "cgroup"
    _write(root / "cgroup.controllers", "cpu memory io\n")
    d = root / "k8s.io" / "abc"
    _write(
        d / "cpu.stat",
        "usage_usec 2000\nuser_usec 1500\nsystem_usec 500\nnr_periods 4\nnr_throttled 1\nthrottled_usec 30\n",
    )
    _write(d / "cpu.max", "max 100000\n")
    _write(d / "memory.current", "8192\n")
    _write(d / "memory.stat", "anon 4096\nfile 2048\ninactive_file 1024\nfile_mapped 512\n")
    _write(d / "memory.max", "1048576\n")
    _write(d / "io.stat", "8:0 rbytes=10 wbytes=20 rios=1 wios=2 dbytes=0 dios=0\n")
    usage = read_cgroup_usage({"": "/k8s.io/abc"}, root=str(root), sys=str(tmp_path / "sys"))
    assert usage is not None
    assert usage.cpu_usage_ns == 2_000_000 and usage.cpu_user_ns == 1_500_000
    assert usage.cpu_quota_us is None and usage.cpu_period_us == 100000
    assert usage.cfs_throttled_ns == 30_000
    assert usage.memory_working_set == 7168 and usage.memory_rss == 4096 and usage.memory_cache == 2048
    assert usage.memory_limit == 1048576
    (io,) = usage.block_io  # no /sys entry: the device number stands in for the name
    assert io.device == "8:0"
    assert (io.read_bytes, io.write_bytes, io.reads, io.writes) == (10, 20, 1, 2)
