"""``/containerLogs`` on a big log file: time and memory of limited reads. Prints JSON.

A 300 MB CRI log (``--size-mb``) is written once; each query then runs in a fresh process holding a node
on the simulated runtime whose container's log file is that file (a hard link), and asks the node's
read-only app for ``/containerLogs`` in-process. Reported per query: the seconds the request took, what it
returned, and how much the process's peak RSS grew during it (a fresh process per query, so one query's
peak does not hide another's). Baselines measured in the same run on the same file: ``tail -n N`` and
``head -c N`` (coreutils), and a raw Python seek to the end + read of 64 KiB. A control shows that the
memory measure sees a whole-file read: the peak RSS growth of reading the file into memory, which is
where the handler used to start.

Usage: python bench/log_read.py [--size-mb 300]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import trio

from kubelet_trio.clock import WallClock
from kubelet_trio.server import read_only_app
from kubelet_trio.sim.runtime import SimRuntime
from kubelet_trio.testing.node import open_node

IMAGE = "registry.sim/bench/app:1"
QUERIES: list[dict[str, str]] = [
    {"tailLines": "10"},
    {"tailLines": "1000"},
    {"limitBytes": "1000"},
    {"limitBytes": str(1 << 20)},
    {"tailLines": "10", "timestamps": "true"},
]


def write_log(path: Path, size: int) -> int:
    """CRI records of ~120 bytes, numbered, until ``size`` bytes; returns the record count."""
    pad = "x" * 80
    count = 0
    with path.open("w") as f:
        written = 0
        while written < size:
            block = "".join(
                f"2024-05-01T10:00:00.{(count + i) % 10**9:09d}Z stdout F line {count + i} {pad}\n"
                for i in range(10_000)
            )
            f.write(block)
            written += len(block)
            count += 10_000
    return count


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def rss_mb() -> float:
    """The current resident set (the peak may be higher: growth up to the difference would not show)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def timed_command(argv: list[str]) -> dict[str, Any]:
    started = time.perf_counter()
    out = subprocess.run(argv, check=True, capture_output=True).stdout
    return {
        "command": " ".join(argv[:-1]),
        "seconds": round(time.perf_counter() - started, 4),
        "bytes": len(out),
    }


def raw_seek_read(path: Path) -> dict[str, Any]:
    started = time.perf_counter()
    with path.open("rb") as f:
        f.seek(-65536, os.SEEK_END)
        data = f.read()
    return {
        "command": "python seek(-64KiB, SEEK_END) + read",
        "seconds": round(time.perf_counter() - started, 6),
        "bytes": len(data),
    }


async def one_query(big: Path, query: dict[str, str]) -> dict[str, Any]:
    """In this (fresh) process: a node, its container's log = ``big``, one request."""
    clock = WallClock()
    sim = SimRuntime(clock=clock, preloaded_images=[IMAGE])
    with tempfile.TemporaryDirectory(prefix="log-read-") as tmp:
        async with open_node(
            sim, "bench", clock=clock, pod_logs_dir=f"{tmp}/logs", memory_backed_volumes=False
        ) as node:
            (pod,) = await node.apply(
                {"metadata": {"name": "big"}, "spec": {"containers": [{"name": "app", "image": IMAGE}]}}
            )
            await node.wait_for(pod, lambda s: s.phase == "Running")
            (log,) = (Path(tmp) / "logs" / f"default_big_{pod.uid}" / "app").iterdir()
            os.link(big, f"{log}.bench")
            os.replace(f"{log}.bench", log)
            transport = httpx.ASGITransport(app=read_only_app(node.kubelet))
            async with httpx.AsyncClient(
                transport=transport, base_url="http://kubelet", timeout=600
            ) as client:
                url = "/containerLogs/default/big/app"
                await client.get(url, params={"tailLines": "1"})  # warm up the code paths
                gc.collect()
                before, current = peak_rss_mb(), rss_mb()
                started = time.perf_counter()
                response = await client.get(url, params=query)
                seconds = time.perf_counter() - started
                growth = peak_rss_mb() - before
            response.raise_for_status()
    return {
        "query": "&".join(f"{k}={v}" for k, v in query.items()),
        "seconds": round(seconds, 4),
        "returned_bytes": len(response.content),
        "peak_rss_growth_mb": round(growth, 2),
        "peak_rss_before_mb": round(before, 1),
        "rss_before_mb": round(current, 1),
    }


def whole_file_control(big: Path) -> dict[str, Any]:
    """In this (fresh) process: read the whole file into memory."""
    gc.collect()
    before = peak_rss_mb()
    started = time.perf_counter()
    data = big.read_bytes()
    seconds = time.perf_counter() - started
    return {
        "query": "control: read the whole file into memory",
        "seconds": round(seconds, 4),
        "returned_bytes": len(data),
        "peak_rss_growth_mb": round(peak_rss_mb() - before, 2),
    }


def run_case(big: Path, query: dict[str, str]) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, "--one", str(big), json.dumps(query)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return json.loads(out)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size-mb", type=int, default=300)
    parser.add_argument("--one", nargs=2, metavar=("FILE", "QUERY"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        big, query = Path(args.one[0]), json.loads(args.one[1])
        print(json.dumps(whole_file_control(big) if query == {} else trio.run(one_query, big, query)))
        return 0
    with tempfile.TemporaryDirectory(prefix="log-read-") as tmp:
        big = Path(tmp) / "big.log"
        records = write_log(big, args.size_mb * 1_000_000)
        subprocess.run(["cat", str(big)], check=True, stdout=subprocess.DEVNULL)  # into the page cache
        baselines = {
            "tailLines": lambda n: timed_command(["tail", "-n", n, str(big)]),
            "limitBytes": lambda n: timed_command(["head", "-c", n, str(big)]),
        }
        cases = []
        for query in QUERIES:
            result = run_case(big, query)
            key, value = next(iter(query.items()))
            result["baseline"] = baselines[key](value)
            cases.append(result)
        report = {
            "file_mb": round(big.stat().st_size / 1e6, 1),
            "records": records,
            "raw_seek_read": raw_seek_read(big),
            "cases": cases,
            "control": run_case(big, {}),
        }
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
