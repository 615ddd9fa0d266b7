#!/usr/bin/env bash
# Idempotent set-up shared by scripts/test.sh and scripts/demo.sh:
#  - the Python package with its test extra;
#  - when root with apt: containerd, runc, CNI plugins, a registry, static busybox and zstd (.tar.zst image
#    archives, --image-import-dir) for the real-runtime tier;
#  - when root: the pod networks (bridge, routes, NAT rules) a crashed earlier run left behind are removed.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}

need_apt=()
for bin in containerd runc ctr docker-registry ip zstd; do
  command -v "$bin" >/dev/null 2>&1 || need_apt+=("$bin")
done
[ -x /bin/busybox ] || need_apt+=(busybox)
[ -x /usr/lib/cni/bridge ] || [ -x /opt/cni/bin/bridge ] || need_apt+=(cni)

if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "provision: installing the containerd tier (missing: ${need_apt[*]})" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq containerd runc containernetworking-plugins docker-registry busybox-static \
      iproute2 zstd >/dev/null
  else
    echo "provision: containerd tier not installable here (need root and apt; missing: ${need_apt[*]})" >&2
  fi
fi

# Debian's Prometheus (and promtool) for the Prometheus tier (tests/prometheus)
if ! command -v prometheus >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "provision: installing prometheus for the Prometheus tier" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus >/dev/null \
    || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus >/dev/null; }
fi

# pip 25.1+ reads [dependency-groups] (the dev tools: ruff, mypy)
"$PYTHON" -m pip install -q --disable-pip-version-check "pip>=25.1" 2>&1 | grep -v -E "^WARNING: (Running pip as|Location)" || true
"$PYTHON" -m pip install -q --disable-pip-version-check -e ".[test]" --group dev 2>&1 | grep -v -E "^WARNING: (Running pip as|Location)" || true
"$PYTHON" -c "import kubelet_trio" # fail here, loudly, if the install did not work
if [ "$(id -u)" = 0 ] && command -v ip >/dev/null 2>&1; then
  "$PYTHON" -c "from kubelet_trio.containerd.network import clean_stale_networks as c; c()"
fi
