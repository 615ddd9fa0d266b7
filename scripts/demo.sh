#!/usr/bin/env bash
# The main job: `kubelet-trio --runonce` over examples/ on the simulated runtime (any machine) and then,
# when this machine can run one, on a private containerd — each printing the command, progress and report.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
bash scripts/provision.sh
exec "$PYTHON" -m kubelet_trio demo "$@"
