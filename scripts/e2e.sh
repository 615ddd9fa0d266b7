#!/usr/bin/env bash
# The upstream node conformance specs (e2e.test 1.36, `[NodeConformance]`) against kubelet-trio as the only
# node of a private Kubernetes 1.36 control plane (../shared/tools/k8s: etcd 3.6, kube-apiserver with
# Node+RBAC, kcm, scheduler, a containerd of its own).
#
#   bash scripts/e2e.sh            the full selection (about 40 minutes on two cores), OUT=$K136/results-trio
#   bash scripts/e2e.sh ci         the curated subset CI runs (scripts/e2e-ci-focus.txt, under 15 minutes)
#   bash scripts/e2e.sh dry-run    list the selected specs
#   bash scripts/e2e.sh resize     the in-place resize specs ('Pod InPlace Resize', GA: without [Beta] pod-level
#                                  resizing and [Serial]; scripts/e2e-resize-skips.txt), OUT=$K136/results-trio-resize
#   KUBELET=go bash scripts/e2e.sh the same run with the Go kubelet 1.36 on the node, for comparison
#
# The skip list (scripts/e2e-skips.txt) names each spec skipped beyond the upstream script's defaults and why
# it cannot pass on this machine for the Go kubelet either. Writes junit.xml, report.json, e2e.log and
# summary.md (a table of every selected spec's result) under $OUT. Without the 1.36 binaries it says how to
# build them and exits 0 (CI=true: exit 0 as well; the tier is optional until the binaries are there).
# Env: K136 (/tmp/k136), K8S_TOOLS (../shared/tools/k8s beside the checkout), OUT, PROCS (6; ci: 4),
# TIMEOUT (60m; ci: 15m), KUBELET (trio | go), KEEP (1: leave the control plane running afterwards),
# TRIO_KUBELET (the kubelet-trio command; default: the one on PATH), SKIPS_FILE (/dev/null: only the upstream
# script's default skips, as for proving the skip list with KUBELET=go).
set -euo pipefail
cd "$(dirname "$0")/.."
here=$PWD
K136=${K136:-/tmp/k136}
export K136
tools=${K8S_TOOLS:-$here/../shared/tools/k8s}
mode=${1:-full}
KUBELET=${KUBELET:-trio}

if [ ! -d "$tools" ]; then
  echo "e2e.sh: [NodeConformance] tier skipped: no $tools (the shared k8s tools; set K8S_TOOLS)" >&2
  exit 0
fi
for bin in etcd kube-apiserver kube-controller-manager kube-scheduler kubelet ginkgo e2e.test; do
  if [ ! -x "$K136/bin/$bin" ]; then
    echo "e2e.sh: [NodeConformance] tier skipped: no $K136/bin/$bin; build it with" \
      "\`bash ../shared/tools/k8s/build-k136.sh <git dir of github.com/openshift/microshift>\`" >&2
    exit 0
  fi
done

# the declared skips: one regex a line, then a tab and the reason (comments and blank lines ignored)
lines() { grep -v -e '^#' -e '^[[:space:]]*$' "$1" || true; }
skips=$(lines "${SKIPS_FILE:-scripts/e2e-skips.txt}" | cut -f1 | paste -sd'|' -)
default_skip='\[Flaky\]|\[Disruptive\]|\[Feature:[^]]+\]|\[Alpha\]|\[Beta\]|should be able to pull image|should be able to pull from private registry with secret'
export SKIP="$default_skip${skips:+|$skips}"
case "$mode" in
  ci)
    export FOCUS; FOCUS=$(lines scripts/e2e-ci-focus.txt | paste -sd'|' -)
    export PROCS=${PROCS:-4} TIMEOUT=${TIMEOUT:-15m}
    OUT=${OUT:-$K136/results-$KUBELET-ci} ;;
  full | dry-run)
    export PROCS=${PROCS:-6} TIMEOUT=${TIMEOUT:-60m}
    OUT=${OUT:-$K136/results-$KUBELET} ;;
  resize | resize-dry-run)
    export FOCUS='Pod InPlace Resize'
    skips=$(lines scripts/e2e-resize-skips.txt | cut -f1 | paste -sd'|' -)
    export SKIP="\[Serial\]|\[Beta\]|\[Alpha\]|\[Flaky\]${skips:+|$skips}"
    export PROCS=${PROCS:-6} TIMEOUT=${TIMEOUT:-40m}
    OUT=${OUT:-$K136/results-$KUBELET-resize}
    [ "$mode" = resize ] || mode=dry-run ;;
  *) sed -n 2,16p "$0"; exit 2 ;;
esac
export OUT
mkdir -p "$OUT"
selected() {  # the spec texts of a dry run, without ginkgo's trailing label list
  grep -E '^\s*\[sig-' "$1" | sed -E 's/^\s+//; s/ \[[^]]*\]$//' || true
}
if [ "$mode" = dry-run ]; then
  bash "$tools/k136-e2e.sh" dry-run
  selected "$OUT/dry-run.log" > "$OUT/selected.txt"
  echo "e2e.sh: $(wc -l < "$OUT/selected.txt") specs selected ($OUT/selected.txt)"
  exit 0
fi

# the node: kubelet-trio (or the Go kubelet) on a freshly started control plane
bash "$tools/k136-env.sh" start-cp
bash "$tools/k136-env.sh" stop-node
if [ "$KUBELET" = trio ]; then
  KUBELET=${TRIO_KUBELET:-$(command -v kubelet-trio)} KUBELET_ROOT="$K136/run/trio-root" KUBELET_LOG="$OUT/kubelet.log" \
    bash "$tools/k136-env.sh" start-node
else  # the Go kubelet 1.36 (k136-env.sh's default; KUBELET here names the choice, not a command)
  env -u KUBELET KUBELET_LOG="$OUT/kubelet.log" bash "$tools/k136-env.sh" start-node
fi
kubectl --kubeconfig="$K136/run/admin.kubeconfig" get node -o wide | tee "$OUT/node.txt"

# the selection (for the summary), then the run
(OUT="$OUT/selection" bash "$tools/k136-e2e.sh" dry-run >/dev/null)
selected "$OUT/selection/dry-run.log" > "$OUT/selected.txt"
status=0
bash "$tools/k136-e2e.sh" || status=$?
if [ "${KEEP:-0}" = 1 ]; then bash "$tools/k136-env.sh" stop-node || true; else bash "$tools/k136-env.sh" stop || true; fi
python3 "$tools/k136-e2e-summary.py" "$OUT/selected.txt" "$OUT/report.json" --md > "$OUT/summary.md" || true
cat "$OUT/summary.md"
# the verdict: every selected spec passed
if ! grep -qE '^(SUCCESS)! --' "$OUT/e2e.log"; then
  echo "e2e.sh: [NodeConformance] FAILED ($OUT/e2e.log, $OUT/summary.md)" >&2
  status=1
fi
exit "$status"
