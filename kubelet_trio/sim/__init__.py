"""The simulated container runtime: in memory, scripted, driven by Trio's clock.

``SimRuntime`` implements the :class:`~kubelet_trio.cri.runtime.Runtime` protocol; behaviour scripts are
documented in :mod:`kubelet_trio.sim.script`; :func:`kubelet_trio.sim.server.serve_sim_cri` serves a
SimRuntime as a CRI gRPC server (imported from there, since it pulls in asyncio and grpclib).
"""

from __future__ import annotations

from kubelet_trio.sim.runtime import SIM_ANNOTATION_PREFIX, SimRuntime
from kubelet_trio.sim.script import Behaviour, ScriptError, parse_script

__all__ = ["SIM_ANNOTATION_PREFIX", "Behaviour", "ScriptError", "SimRuntime", "parse_script"]
