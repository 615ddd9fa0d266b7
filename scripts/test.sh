#!/usr/bin/env bash
# The whole test suite: provisions what it needs, lints, then runs every tier (containerd included; envtest and
# conformance when kube-apiserver is built, see kubelet_trio/testing/envtest.py).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
bash scripts/provision.sh
"$PYTHON" -m ruff check .
"$PYTHON" -m ruff format --check .
"$PYTHON" -m mypy  # strict, on kubelet_trio ([tool.mypy] in pyproject.toml)
# The tiers on a real kube-apiserver (tests/envtest, tests/conformance) run when its binaries are found.
"$PYTHON" -c '
import sys
from kubelet_trio.testing.envtest import assets, skip_reason
found = assets()
print(f"test.sh: envtest + conformance tiers on {found}" if found else "test.sh: " + skip_reason("envtest + conformance"), file=sys.stderr)
'
exec "$PYTHON" -m pytest "$@"
