#!/usr/bin/env bash
# The main job: start a pod through the Runtime interface on the simulated runtime, and on a
# private containerd when this machine can run one.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
bash scripts/provision.sh
exec "$PYTHON" -m kubelet_trio demo "$@"
