#!/usr/bin/env bash
# A CPython 3.14 interpreter for testing kubelet-trio on 3.14, on a Debian 12 machine that reaches only the
# package registries (uv's and pyenv's interpreter downloads need hosts that are not reachable here).
# Debian unstable's python3.14 packages and the C library they were built against are unpacked under
# $PREFIX (nothing is installed system-wide), and the interpreter is pointed at that C library with patchelf.
# Prints the interpreter's path. Idempotent. Needs root (apt-get), patchelf and uv (for the venv).
#
#   py=$(bash scripts/python314.sh) && uv venv --python "$py" /tmp/v314 && \
#     uv pip install --python /tmp/v314/bin/python -e ".[test]" --group dev
set -euo pipefail
PREFIX=${PREFIX:-/opt/py314}
PY="$PREFIX/usr/bin/python3.14"
if [ -x "$PY" ] && "$PY" -c 'import ssl, sqlite3, ctypes' 2>/dev/null; then echo "$PY"; exit 0; fi
command -v patchelf >/dev/null || apt-get install -y -qq patchelf >/dev/null
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/lists/partial" "$work/debs"
echo "deb [trusted=yes] http://deb.debian.org/debian sid main" > "$work/sources.list"
apt_opts=(-o "Dir::Etc::sourcelist=$work/sources.list" -o Dir::Etc::sourceparts=- -o "Dir::State::lists=$work/lists"
  -o "Dir::Cache=$work/cache")
apt-get "${apt_opts[@]}" update -qq >&2
(cd "$work/debs" && apt-get "${apt_opts[@]}" download -qq libc6 python3.14-minimal libpython3.14-minimal \
  libpython3.14-stdlib python3.14 libssl3t64 libffi8 libexpat1 zlib1g libbz2-1.0 liblzma5 libsqlite3-0 \
  libzstd1 libncursesw6 libtinfo6 libreadline8t64 libuuid1 libdb5.3t64 libgcc-s1 libstdc++6 >&2)
rm -rf "$PREFIX" && mkdir -p "$PREFIX"
for deb in "$work"/debs/*.deb; do dpkg -x "$deb" "$PREFIX"; done
patchelf --set-interpreter "$PREFIX/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2" --force-rpath \
  --set-rpath "$PREFIX/usr/lib/x86_64-linux-gnu" "$PY"
"$PY" -c 'import ssl, sqlite3, ctypes' >&2
echo "$PY"
