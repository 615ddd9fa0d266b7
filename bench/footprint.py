"""How big an idle kubelet-trio process is, and what it loads. Prints JSON.

- Idle RSS of ``python -m kubelet_trio`` as a daemon with no pods (an empty manifest directory), in the
  configurations that load different stacks: every HTTP server off (``--healthz-port 0 --port 0
  --read-only-port 0``), only ``/healthz``, and the default servers (``/healthz`` and the Kubelet API over
  TLS, on free ports); each on the simulated runtime (``--runtime sim``) and on containerd
  (``--container-runtime managed``: the daemon starts a containerd of its own, whose process is not
  counted; skipped without root or a ``containerd`` binary, or with ``--skip-containerd``); and in API
  mode (``--kubeconfig``: the envtest kube-apiserver when its binaries are here, else the fake API
  server; simulated runtime) with the servers off and with the default ones. RSS is sampled once a second
  over ``--seconds`` after the daemon has settled (``--settle`` seconds after start, or after its node is
  Ready); its peak is reported, with RssAnon/RssFile and the number of modules the daemon imported
  (``-X importtime``) by top-level package.
- The interpreter's floor for comparison: ``python -c pass`` and ``import kubelet_trio.cmd.kubelet``.
- Import time of ``kubelet_trio.cmd.kubelet``: the top modules by cumulative and by self time
  (``python -X importtime``, best of ``--import-runs``).

Usage: python bench/footprint.py [--settle 8] [--seconds 5] [--import-runs 3] [--api {auto,envtest,fake}]
       [--skip-containerd]
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
from _common import log_tail, stop_process, unmount_under

from kubelet_trio.testing.envtest import assets, start_envtest
from kubelet_trio.testing.registry import free_port

ENTRY = "kubelet_trio.cmd.kubelet"
READY_TIMEOUT = 90.0


def status_kb(pid: int) -> dict[str, int]:
    """VmRSS, RssAnon, RssFile (kB) of ``pid``."""
    out: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "RssAnon", "RssFile", "VmHWM"):
            out[key] = int(value.split()[0])
    return out


def sample_rss(pid: int, seconds: float) -> dict[str, float]:
    """Peak VmRSS (and its split) over ``seconds``, sampled once a second."""
    peak: dict[str, int] = {}
    deadline = time.monotonic() + seconds
    while True:
        now = status_kb(pid)
        if now.get("VmRSS", 0) >= peak.get("VmRSS", 0):
            peak = now
        if time.monotonic() >= deadline:
            break
        time.sleep(1.0)
    return {
        "rss_mb": round(peak.get("VmRSS", 0) / 1024, 1),
        "rss_anon_mb": round(peak.get("RssAnon", 0) / 1024, 1),
        "rss_file_mb": round(peak.get("RssFile", 0) / 1024, 1),
        "rss_high_water_mb": round(status_kb(pid).get("VmHWM", 0) / 1024, 1),
    }


def imported_packages(stderr: Path) -> dict[str, Any]:
    """Modules imported by a ``-X importtime`` process, counted by top-level package (the 15 biggest)."""
    modules = []
    for line in stderr.read_text(errors="replace").splitlines():
        if line.startswith("import time:") and "|" in line:
            name = line.rsplit("|", 1)[1].strip()
            if name != "imported package":
                modules.append(name)
    by_package = collections.Counter(m.split(".")[0] for m in modules)
    return {"modules": len(modules), "by_top_level_package": dict(by_package.most_common(15))}


def one_shot_rss(code: str) -> float:
    """Peak RSS (MB) of ``python -c code`` (VmHWM: ru_maxrss would carry this process's peak over exec)."""
    probe = f"{code}\nprint(open('/proc/self/status').read())"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    peak = next(line for line in out.splitlines() if line.startswith("VmHWM:"))
    return round(int(peak.split()[1]) / 1024, 1)


def import_times(runs: int) -> dict[str, Any]:
    """``-X importtime`` of the CLI's entry module: the run with the least total, top 15 both ways."""
    best: list[tuple[int, int, str]] = []
    best_total = None
    for _ in range(runs):
        err = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", f"import {ENTRY}"],
            capture_output=True,
            text=True,
            check=True,
        ).stderr
        rows = []
        for line in err.splitlines():
            if not line.startswith("import time:") or "|" not in line:
                continue
            self_us, cumulative_us, name = (part.strip() for part in line[len("import time:") :].split("|"))
            if self_us.isdigit():
                rows.append((int(self_us), int(cumulative_us), name.strip()))
        total = next((c for _, c, n in rows if n == ENTRY), sum(s for s, _, _ in rows))
        if best_total is None or total < best_total:
            best, best_total = rows, total

    def row(r: tuple[int, int, str]) -> dict[str, Any]:
        return {"module": r[2], "cumulative_ms": round(r[1] / 1000, 1), "self_ms": round(r[0] / 1000, 1)}

    return {
        "module": ENTRY,
        "total_ms": round((best_total or 0) / 1000, 1),
        "modules": len(best),
        "top_cumulative": [row(r) for r in sorted(best, key=lambda r: -r[1])[:15]],
        "top_self": [row(r) for r in sorted(best, key=lambda r: -r[0])[:15]],
    }


def third_party_imports(runs_stderr: str) -> dict[str, dict[str, Any]]:
    """Which kubelet_trio modules import which outside packages directly, and what each costs.

    ``-X importtime`` prints a module after its imports, indented by depth; read backwards, each line's
    parent is the nearest earlier (shallower) one. Per outside top-level package: the modules imported
    straight from kubelet_trio, by whom, and their summed cumulative import time.
    """
    rows = []
    for line in runs_stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        self_us, cumulative_us, raw = line[len("import time:") :].split("|")
        if not self_us.strip().isdigit():
            continue
        name = raw.strip()
        depth = (len(raw) - len(raw.lstrip(" ")) - 1) // 2
        rows.append((depth, name, int(cumulative_us)))
    packages: dict[str, dict[str, Any]] = {}
    stack: list[tuple[int, str]] = []
    for depth, name, cumulative in reversed(rows):
        while stack and stack[-1][0] >= depth:
            stack.pop()
        parent = stack[-1][1] if stack else ""
        stack.append((depth, name))
        top = name.split(".")[0]
        if parent.startswith("kubelet_trio") and top != "kubelet_trio" and top not in sys.stdlib_module_names:
            entry = packages.setdefault(top, {"cumulative_ms": 0.0, "modules": {}})
            entry["cumulative_ms"] = round(entry["cumulative_ms"] + cumulative / 1000, 1)
            entry["modules"].setdefault(name, []).append(parent)
    return dict(sorted(packages.items(), key=lambda kv: -kv[1]["cumulative_ms"]))


def package_rss(packages: dict[str, dict[str, Any]], baseline: float) -> dict[str, Any]:
    """RSS (MB) of importing every outside module kubelet_trio imports; then, adding the packages one at
    a time (the core every mode needs first: trio, attrs, trio_util), what each adds on top of those
    before it (shared dependencies such as ssl or asyncio count for the first package that pulls them in)."""

    def rss(names: list[str]) -> float:
        return one_shot_rss("\n".join(f"import {m}" for name in names for m in packages[name]["modules"]))

    everything = rss(list(packages))
    steps: dict[str, float] = {}
    done: list[str] = []
    previous = baseline
    core = [name for name in ("trio", "attrs", "trio_util") if name in packages]
    for name in [*core, *(n for n in packages if n not in core)]:
        done.append(name)
        now = rss(done)
        steps[name] = round(now - previous, 1)
        previous = now
    return {"all_outside_packages_mb": everything, "interpreter_mb": baseline, "adds_mb": steps}


@contextlib.contextmanager
def daemon(args: list[str], workdir: Path, name: str) -> Iterator[tuple[subprocess.Popen[bytes], Path]]:
    """``python -X importtime -m kubelet_trio ARGS`` with its output in ``workdir/name.log``."""
    log = workdir / f"{name}.log"
    command = [sys.executable, "-X", "importtime", "-m", "kubelet_trio", *args]
    with log.open("wb") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        yield proc, log
    finally:
        stop_process(proc)


def idle(args: list[str], workdir: Path, name: str, settle: float, seconds: float) -> dict[str, Any]:
    with daemon(args, workdir, name) as (proc, log):
        time.sleep(settle)
        if proc.poll() is not None:
            return {"error": f"exited {proc.returncode}: {log_tail(log)}"}
        out = sample_rss(proc.pid, seconds)
    return {"args": " ".join(args), **out, **imported_packages(log)}


def node_ready(client: httpx.Client, node: str) -> bool:
    response = client.get(f"/api/v1/nodes/{node}")
    if response.status_code != 200:
        return False
    conditions = response.json().get("status", {}).get("conditions") or ()
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


@contextlib.contextmanager
def api_server(kind: str, workdir: Path) -> Iterator[tuple[str, Path, httpx.Client]]:
    """(label, kubeconfig, admin client) of the envtest kube-apiserver, or the fake one."""
    directory = assets()
    if kind != "fake" and directory is not None:
        with start_envtest(directory) as api, api.http_client() as client:
            yield "kube-apiserver (envtest binaries)", api.kubeconfig, client
        return
    kubeconfig = workdir / "fake-kubeconfig"
    proc = subprocess.Popen(
        [sys.executable, "-m", "kubelet_trio", "fake-apiserver", "--kubeconfig-out", str(kubeconfig)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().decode().strip()
        with httpx.Client(base_url=url, timeout=10) as client:
            yield "fake API server (kubelet_trio.testing.fakeapi) over loopback", kubeconfig, client
    finally:
        stop_process(proc)


def api_idle(
    label: str,
    kubeconfig: Path,
    client: httpx.Client,
    servers: list[str],
    workdir: Path,
    name: str,
    settle: float,
    seconds: float,
) -> dict[str, Any]:
    node = "footprint-" + name.replace("_", "-")  # a DNS-1123 name
    args = [
        "--kubeconfig", str(kubeconfig),
        "--runtime", "sim",
        "--hostname-override", node,
        "--root-dir", str(workdir / f"{name}-root"),
        "--pod-logs-dir", str(workdir / f"{name}-logs"),
        "--fail-swap-on=false",
        *servers,
    ]  # fmt: skip
    with daemon(args, workdir, name) as (proc, log):
        t0 = time.monotonic()
        while not node_ready(client, node):
            if proc.poll() is not None or time.monotonic() - t0 > READY_TIMEOUT:
                return {"error": f"node not Ready (exit {proc.poll()}): {log_tail(log)}"}
            time.sleep(0.2)
        ready_s = round(time.monotonic() - t0, 2)
        time.sleep(settle)
        out = sample_rss(proc.pid, seconds)
    return {
        "api_server": label,
        "node_ready_s": ready_s,
        "args": " ".join(args),
        **out,
        **imported_packages(log),
    }


def containerd_skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "needs root (the managed containerd)"
    if shutil.which("containerd") is None:
        return "no containerd binary on PATH"
    return None


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--settle", type=float, default=8.0, help="seconds after start before sampling")
    parser.add_argument("--seconds", type=float, default=5.0, help="seconds of RSS sampling")
    parser.add_argument("--import-runs", type=int, default=3)
    parser.add_argument("--api", choices=("auto", "envtest", "fake"), default="auto")
    parser.add_argument("--skip-containerd", action="store_true", help="no managed-containerd runs")
    args = parser.parse_args()
    out: dict[str, Any] = {
        "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]},
        "interpreter": {
            "python_c_pass_rss_mb": one_shot_rss("pass"),
            "import_entry_rss_mb": one_shot_rss(f"import {ENTRY}"),
        },
        "import_time": import_times(args.import_runs),
    }
    stderr = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", f"import {ENTRY}"],
        capture_output=True,
        text=True,
        check=True,
    ).stderr
    outside = third_party_imports(stderr)
    out["outside_packages"] = {
        name: {
            "cumulative_ms": info["cumulative_ms"],
            "imported_by": sorted({p for ps in info["modules"].values() for p in ps})[:6],
            "modules": sorted(info["modules"])[:6],
        }
        for name, info in outside.items()
    }
    out["outside_package_rss_mb"] = package_rss(outside, out["interpreter"]["python_c_pass_rss_mb"])
    off = ["--healthz-port", "0", "--port", "0", "--read-only-port", "0"]

    def servers() -> dict[str, list[str]]:
        """The server configurations (fresh free ports for each run)."""
        return {
            "servers_off": off,
            "healthz_only": [*off, "--healthz-port", str(free_port())],
            # the defaults (read-only port off), on free ports: /healthz and the Kubelet API over TLS
            "default_servers": [
                "--healthz-port", str(free_port()), "--port", str(free_port()), "--read-only-port", "0",
            ],
        }  # fmt: skip

    with tempfile.TemporaryDirectory(prefix="kubelet-trio-footprint-") as tmp:
        workdir = Path(tmp)
        manifests = workdir / "manifests"
        manifests.mkdir()

        def base(name: str) -> list[str]:
            return [
                "--pod-manifest-path", str(manifests),
                "--root-dir", str(workdir / f"{name}-root"),
                "--pod-logs-dir", str(workdir / f"{name}-logs"),
                "--fail-swap-on=false",
            ]  # fmt: skip

        out["standalone_idle"] = {
            config: idle(
                [*base(f"sim-{config}"), "--runtime", "sim", *flags],
                workdir,
                f"sim-{config}",
                args.settle,
                args.seconds,
            )
            for config, flags in servers().items()
        }
        skip = "--skip-containerd" if args.skip_containerd else containerd_skip_reason()
        if skip:
            out["containerd_idle"] = {"skipped": skip}
        else:
            out["containerd_idle"] = {}
            for config in ("servers_off", "default_servers"):
                name = f"containerd-{config}"
                try:
                    out["containerd_idle"][config] = idle(
                        [*base(name), "--container-runtime", "managed", *servers()[config]],
                        workdir,
                        name,
                        args.settle,
                        args.seconds,
                    )
                finally:
                    unmount_under(workdir / f"{name}-root")
        with api_server(args.api, workdir) as (label, kubeconfig, client):
            out["api_mode_idle"] = {
                config: api_idle(
                    label, kubeconfig, client, servers()[config], workdir, f"api-{config}", args.settle,
                    args.seconds,
                )
                for config in ("servers_off", "default_servers")
            }  # fmt: skip
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
