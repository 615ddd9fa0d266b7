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
# Python 3.14 (the oldest supported, 3.11, runs everything above): the tiers that need neither containerd
# nor kube-apiserver, in a venv of their own, alongside the main run. An interpreter that cannot be
# obtained (scripts/python314.sh fetches Debian sid's) is reported, not fatal; a failing test is.
# test_network_cleanup compares the host's links and routes, which the main run's containerd tier changes
# meanwhile, so it runs in the main run only.
py314=${TMPDIR:-/tmp}/kubelet-trio-py314
rm -rf "$py314" && mkdir -p "$py314"
(
  set +e
  if py=$(bash scripts/python314.sh 2>"$py314/setup.log") \
    && "$PYTHON" -m uv venv -q --python "$py" "$py314/venv" >>"$py314/setup.log" 2>&1 \
    && "$PYTHON" -m uv pip install -q --python "$py314/venv/bin/python" -e ".[test]" --group dev \
      >>"$py314/setup.log" 2>&1; then
    "$py314/venv/bin/python" -m pytest -q -p no:cacheprovider --basetemp="$py314/tmp" -m "not containerd" \
      --ignore=tests/conformance --ignore=tests/envtest --ignore=tests/test_network_cleanup.py \
      >"$py314/pytest.log" 2>&1
    echo $? >"$py314/rc"
  else
    echo unavailable >"$py314/rc"
  fi
) &
py314_pid=$!
# critest (cri-tools' CRI validation suite) against sim-cri takes minutes: alongside too, out of the main run.
critest_log=${TMPDIR:-/tmp}/kubelet-trio-critest.log
"$PYTHON" -m pytest -q -p no:cacheprovider -m critest tests/critest >"$critest_log" 2>&1 &
critest_pid=$!
set +e
"$PYTHON" -m pytest --ignore=tests/critest "$@"
status=$?
wait "$critest_pid"
critest_status=$?
wait "$py314_pid"
# The upstream [NodeConformance] specs (e2e.test 1.36) on kubelet-trio, the curated CI subset: after the main
# run, alone on the machine (its control plane schedules onto the only node; its timeouts are upstream's).
# Without the 1.36 binaries scripts/e2e.sh says how to build them and exits 0.
e2e_log=${TMPDIR:-/tmp}/kubelet-trio-e2e.log
bash scripts/e2e.sh ci >"$e2e_log" 2>&1
e2e_status=$?
set -e
echo "test.sh: critest: $(tail -n 1 "$critest_log")"
echo "test.sh: e2e [NodeConformance] CI subset: $(grep -E '^(Ran [0-9]+ of|SUCCESS!|FAIL!|e2e.sh: \[NodeConformance\] tier skipped)' "$e2e_log" | tr '\n' ' ')"
if [ "$e2e_status" -ne 0 ]; then
  echo "test.sh: e2e [NodeConformance] tier FAILED ($e2e_log):" >&2
  tail -n 60 "$e2e_log" >&2
  status=1
fi
if [ "$critest_status" -ne 0 ]; then
  echo "test.sh: critest tier FAILED ($critest_log):" >&2
  tail -n 40 "$critest_log" >&2
  status=1
fi
case "$(cat "$py314/rc")" in
  0) echo "test.sh: Python 3.14: $(tail -n 1 "$py314/pytest.log")" ;;
  unavailable)
    echo "test.sh: Python 3.14 run not done: no interpreter ($py314/setup.log):" >&2
    tail -n 5 "$py314/setup.log" >&2 ;;
  *)
    echo "test.sh: Python 3.14 run FAILED:" >&2
    tail -n 40 "$py314/pytest.log" >&2
    status=1 ;;
esac
exit "$status"
