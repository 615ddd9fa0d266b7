"""A credential provider plugin's output is bounded: one that prints 100 MB on stdout is killed once it
passes the cap and its run fails with an error naming it, and the kubelet's memory does not grow with
what the plugin printed (Go's kubelet reads all of it). Its stderr is kept to the tail the error shows."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from kubelet_trio.credentialprovider.plugin import STDERR_LIMIT, STDOUT_LIMIT
from tests.credentialprovider.plugins import V1, write_plugin

IMAGE = "eu.reg.example/team/app"

FLOOD = """\
open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "pid"), "w").write(str(os.getpid()))
sys.stderr.write("e" * (1 << 20) + "last words")  # more stderr than is kept
sys.stderr.flush()
chunk = b"x" * (1 << 20)
for _ in range({megabytes}):
    sys.stdout.buffer.write(chunk)
    sys.stdout.flush()
time.sleep(60)
"""

# Runs one lookup in a fresh interpreter, so its peak RSS (VmHWM) measures this run alone.
PROBE = """
import json, os, sys, time
import trio
from kubelet_trio.credentialprovider.plugin import ExecPlugin, PluginError

def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024

async def main():
    plugin = ExecPlugin(name="flood", api_version=sys.argv[2], bin_dir=sys.argv[1], timeout=30.0)
    before, began = status("VmRSS"), time.monotonic()
    try:
        await plugin.exec(sys.argv[3])
        error = None
    except PluginError as err:
        error = str(err)
    return {"error": error, "took": time.monotonic() - began, "grew": status("VmHWM") - before}

print(json.dumps(trio.run(main)))
"""


def run_probe(bin_dir: Path) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(PROBE), str(bin_dir), V1, IMAGE],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    result: dict[str, object] = json.loads(done.stdout)
    return result


def test_a_plugin_printing_100_mb_is_killed_and_reported_with_bounded_memory(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    write_plugin(bin_dir, "flood", FLOOD.format(megabytes=100))
    result = run_probe(bin_dir)
    error = result["error"]
    assert isinstance(error, str)
    assert error.startswith(
        f"error execing credential provider plugin flood for image {IMAGE}:"
        f" killed: its stdout exceeded {STDOUT_LIMIT} bytes: "
    )
    assert error.endswith("last words") and len(error) < STDERR_LIMIT + 200  # the stderr tail only
    assert isinstance(result["took"], float) and result["took"] < 20  # killed, not timed out (30 s)
    assert isinstance(result["grew"], int) and result["grew"] < 32 << 20  # 100 MB printed
    pid = int((bin_dir / "pid").read_text())
    assert not Path(f"/proc/{pid}").exists()  # killed and reaped
