"""What the host's network looks like, for the tests that check a node leaves nothing behind in it."""

from __future__ import annotations

import subprocess


def host_routes() -> list[str]:
    """Every IPv4 route in every table (``ip route show table all``), one line each."""
    out = subprocess.run(
        ["ip", "-4", "route", "show", "table", "all"], capture_output=True, text=True, check=True
    )
    return sorted(line.strip() for line in out.stdout.splitlines() if line.strip())
