"""A container's effective security context (Go: ``pkg/securitycontext``
``DetermineEffectiveSecurityContext``): the pod's settings are defaults the container overrides. Used by
the runtime manager and by projected service-account token volumes (file ownership).
"""

from __future__ import annotations

from typing import Any

import attrs

from kubelet_trio.api import Container, Pod, SecurityContext

__all__ = ["effective_security_context"]


def effective_security_context(pod: Pod, container: Container) -> SecurityContext:
    """The container's security context with the pod's runAsUser/runAsGroup/runAsNonRoot as defaults."""
    pod_sc = pod.spec.security_context if pod.spec else None
    effective = container.security_context or SecurityContext()
    if pod_sc is None:
        return effective
    changes: dict[str, Any] = {}
    for name in ("run_as_user", "run_as_group", "run_as_non_root"):
        if getattr(effective, name) is None and getattr(pod_sc, name) is not None:
            changes[name] = getattr(pod_sc, name)
    return attrs.evolve(effective, **changes) if changes else effective
