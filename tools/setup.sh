#!/usr/bin/env bash
# Set kwsniff up on a fresh Debian/Ubuntu machine:
#   system packages (libpcap, tcpdump, tshark for comparisons, a JRE for Spark),
#   a virtualenv in .venv, and kwsniff with all extras installed into it (editable).
# Safe to run again. Set PYTHON to choose the interpreter (default: python3, >= 3.11).
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

if command -v apt-get >/dev/null 2>&1; then
  pkgs=(libpcap0.8 tcpdump tshark tcpreplay iproute2)
  # (tcpreplay and ip: the live replay test, tests/live/test_live_replay.py)
  # a C compiler and the interpreter's headers build the optional compiled parts
  # (the C kernels and Cython modules of kwsniff/_compiled.py); without them kwsniff
  # runs its pure-Python path, with identical output
  command -v cc >/dev/null 2>&1 || pkgs+=(gcc)
  "$PYTHON" -c 'import os, sysconfig, sys; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' \
    || pkgs+=(python3-dev)
  command -v java >/dev/null 2>&1 || pkgs+=(openjdk-17-jre-headless)
  "$PYTHON" -c 'import ensurepip, venv' >/dev/null 2>&1 || pkgs+=(python3-venv)
  missing=()
  for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "setup: installing system packages: ${missing[*]}" >&2
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -q >/dev/null
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
  fi
else
  echo "setup: apt-get not found; install libpcap, tcpdump, tshark, tcpreplay, iproute2 and a Java 17+ runtime yourself" >&2
fi

"$PYTHON" - <<'PY'
import sys
if sys.version_info < (3, 11):
    sys.exit(f"setup: kwsniff needs Python >= 3.11, {sys.executable} is {sys.version.split()[0]}")
PY

[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
# (setuptools and Cython in the venv too: `python setup.py build_ext --inplace` rebuilds
# what changed after an edit, as docs/architecture.md describes)
.venv/bin/python -m pip install -q --upgrade pip "setuptools>=77" "Cython>=3.1,<4" >/dev/null
.venv/bin/python -m pip install -q -e '.[all]'
# Precompile: the generated schema table imports ~100x faster from bytecode, and some
# environments set PYTHONDONTWRITEBYTECODE so it would never be cached otherwise.
.venv/bin/python -m compileall -q kwsniff plugins >/dev/null
echo "setup: $(.venv/bin/python -m kwsniff.accel)" >&2
echo "setup: done; kwsniff is .venv/bin/kwsniff" >&2
