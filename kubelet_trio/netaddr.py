"""Host-and-port text as Go's ``net.JoinHostPort`` writes it (IPv6 addresses in brackets): probe targets
and their messages, and the service link variables."""

from __future__ import annotations

__all__ = ["join_host_port"]


def join_host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
