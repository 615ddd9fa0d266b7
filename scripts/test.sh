#!/usr/bin/env bash
# The whole test suite: provisions what it needs, lints, then runs every tier (containerd included).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
bash scripts/provision.sh
"$PYTHON" -m ruff check .
"$PYTHON" -m ruff format --check .
exec "$PYTHON" -m pytest "$@"
