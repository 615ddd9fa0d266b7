"""The generated bindings import betterproto2 without pydantic and without ``importlib.metadata``, and
betterproto2's compiler-version check keeps its rule."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from kubelet_trio.cri import protolib

PROBE = """
import json, sys
import kubelet_trio.cri.gen.runtime.v1
import betterproto2
loaded = {name: name in sys.modules for name in ("pydantic", "importlib.metadata", "email")}
from importlib import metadata
installed = metadata.version("betterproto2")
print(json.dumps({"loaded": loaded, "version": betterproto2.__version__, "installed": installed}))
"""


def test_the_bindings_load_no_pydantic_and_no_metadata_machinery() -> None:
    argv = [sys.executable, "-c", PROBE]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True)
    report = json.loads(proc.stdout)
    assert report["loaded"] == {"pydantic": False, "importlib.metadata": False, "email": False}
    assert report["version"] == report["installed"]


def test_the_compiler_version_must_match_major_and_minor() -> None:
    module = protolib._version_module("0.10.0")
    module.check_compiler_version("0.10.1")
    with pytest.raises(ImportError, match=r"betterproto2 0.10.0 cannot load bindings .* 0.9.3"):
        module.check_compiler_version("0.9.3")
    with pytest.raises(ImportError):
        module.check_compiler_version("1.10.0")
