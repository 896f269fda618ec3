#!/usr/bin/env bash
# Install what aot needs on a fresh Debian/Ubuntu machine: a C compiler, make and
# libzstd (headers) for the C runtime, then the Python package with test extras.
# --bench also installs torch (CPU build) to generate the benchmark models.
set -euo pipefail
cd "$(dirname "$0")/.."

have_zstd_header() {
  echo '#include <zstd.h>' | ${CC:-cc} -E -x c - >/dev/null 2>&1
}

if ! command -v ${CC:-cc} >/dev/null || ! command -v make >/dev/null || ! have_zstd_header; then
  echo "setup: installing build-essential and libzstd-dev (needed to build the C runtime)"
  SUDO=""
  if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
  if ! command -v apt-get >/dev/null; then
    echo "setup: error: no apt-get here; install a C compiler, make and the zstd development headers (zstd.h, libzstd) yourself" >&2
    exit 1
  fi
  if ! ($SUDO apt-get update -qq && $SUDO apt-get install -y -qq build-essential libzstd-dev >/dev/null); then
    echo "setup: error: could not install build-essential libzstd-dev with apt-get; install them and rerun" >&2
    exit 1
  fi
fi

python3 -m pip install -q -e ".[test]"
# Build the C runtime now (Python builds it on first use otherwise).
make -s -C runtime_c
if [ "${1:-}" = "--bench" ]; then
  ./scripts/install_torch_cpu.sh
fi
echo "setup: ok"
