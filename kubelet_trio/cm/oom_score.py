"""The kubelet's own OOM score (Go: ``pkg/util/oom`` ``ApplyOOMScoreAdj``, applied in
``cmd/kubelet/app/server.go`` with ``--oom-score-adj``, default -999): under memory pressure the kernel
should kill pods before the kubelet that would restart them.
"""

from __future__ import annotations

import logging
import os

from kubelet_trio import defaults
from kubelet_trio.logs import kv

__all__ = ["KUBELET_OOM_SCORE_ADJ", "apply_oom_score_adj"]

logger = logging.getLogger(__name__)

KUBELET_OOM_SCORE_ADJ = defaults.OOM_SCORE_ADJ
PROC = "/proc"


def apply_oom_score_adj(pid: int = 0, value: int = KUBELET_OOM_SCORE_ADJ, *, proc: str = PROC) -> bool:
    """Write ``value`` to ``pid``'s ``oom_score_adj`` (0: this process); False, logged, when not
    permitted (lowering it needs ``CAP_SYS_RESOURCE``) or the process is gone. Blocking, tiny."""
    if not -1000 <= value <= 1000:
        raise ValueError(f"invalid oom_score_adj {value} (want -1000..1000)")
    target = "self" if pid == 0 else str(pid)
    path = os.path.join(proc, target, "oom_score_adj")
    try:
        with open(path, "w", encoding="ascii") as f:
            f.write(str(value))
    except OSError as err:
        logger.warning("cannot set oom_score_adj", extra=kv(pid=pid, value=value, err=err))
        return False
    return True
