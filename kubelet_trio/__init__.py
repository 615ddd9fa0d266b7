"""kubelet-trio: a Kubernetes node agent on Trio."""

from __future__ import annotations

__version__ = "0.1.0"
