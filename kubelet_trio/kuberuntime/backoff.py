"""The kubelet's two backoffs (Go: client-go ``util/flowcontrol/backoff.go``, here
:class:`kubelet_trio.flowcontrol.Backoff`): crash-loop backoff keyed
``<podName>_<ns>_<podUID>_<container>_<hash>`` and image pull backoff keyed ``<podUID>_<image>``, both 10 s
doubling to 300 s, no jitter, an entry expiring 600 s after its last update.
"""

from __future__ import annotations

from kubelet_trio.flowcontrol import Backoff

__all__ = ["CONTAINER_BACKOFF_INITIAL", "CONTAINER_BACKOFF_MAX", "Backoff"]

CONTAINER_BACKOFF_INITIAL = 10.0
CONTAINER_BACKOFF_MAX = 300.0
