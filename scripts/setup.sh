#!/usr/bin/env bash
# Set aot up on a fresh Debian/Ubuntu machine, in a virtual environment (.venv):
# a C compiler, make and libzstd headers for the C runtime and python3-venv, each
# with apt-get where missing; then the package with its test extras in .venv, and
# the C runtime built. System Pythons (Debian 12, Ubuntu 23.04+) refuse a pip
# install outside a virtual environment, and a venv leaves the system alone.
# --bench also installs torch (CPU build) to generate the benchmark models, and
# clang with libFuzzer for the fuzz test; --aarch64 the aarch64 cross compiler
# (gcc-aarch64-linux-gnu), libzstd for arm64 (Debian multiarch) and qemu-user, to
# build the runtime for aarch64 and run aarch64 artifacts under emulation
# (tests/end_to_end/test_aarch64.py). Where they cannot be had, the tests that need
# them skip.
#   AOT_VENV=DIR   the environment (default .venv in the checkout)
#   PYTHON=CMD     the Python that makes it (default python3; 3.11 or newer)
# Afterwards: .venv/bin/aot-compile ..., .venv/bin/python -m pytest -q, or
# `source .venv/bin/activate` once for plain `aot-compile`, `python`, `pytest`.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${AOT_VENV:-.venv}
case "$VENV" in /*) VENV_PATH=$VENV ;; *) VENV_PATH=$PWD/$VENV ;; esac
PYTHON=${PYTHON:-python3}
BENCH=0
AARCH64=0
for arg in "$@"; do
  case "$arg" in
    --bench) BENCH=1 ;;
    --aarch64) AARCH64=1 ;;
    -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "setup: error: unknown option '$arg' (--bench, --aarch64)" >&2; exit 2 ;;
  esac
done

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
APT_UPDATED=0
# A fresh machine may be running its own apt (unattended upgrades, cloud-init):
# wait up to 10 minutes for its locks instead of failing.
APT_WAIT=(-o DPkg::Lock::Timeout=600)

apt_update() {
  [ "$APT_UPDATED" = 1 ] && return 0
  local try output
  # apt-get update takes the lists lock, which DPkg::Lock::Timeout may not cover: retry on it
  for try in $(seq 60); do
    if output=$($SUDO apt-get "${APT_WAIT[@]}" update -qq 2>&1); then
      APT_UPDATED=1
      return 0
    fi
    case "$output" in
      *lock*) echo "setup: apt is busy (another process holds its lock); waiting" >&2; sleep 10 ;;
      *) echo "$output" >&2; return 1 ;;
    esac
  done
  echo "$output" >&2
  return 1
}

# apt_install PACKAGE...: 1 where there is no apt-get or the install fails.
apt_install() {
  command -v apt-get >/dev/null || return 1
  apt_update || return 1
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get "${APT_WAIT[@]}" install -y -qq "$@" >/dev/null
}

have_zstd_header() {
  echo '#include <zstd.h>' | ${CC:-cc} -E -x c - >/dev/null 2>&1
}

if ! command -v ${CC:-cc} >/dev/null || ! command -v make >/dev/null || ! have_zstd_header; then
  echo "setup: installing build-essential and libzstd-dev (needed to build the C runtime)"
  if ! command -v apt-get >/dev/null; then
    echo "setup: error: no apt-get here; install a C compiler, make and the zstd development headers (zstd.h, libzstd) yourself" >&2
    exit 1
  fi
  if ! apt_install build-essential libzstd-dev; then
    echo "setup: error: could not install build-essential libzstd-dev with apt-get; install them and rerun" >&2
    exit 1
  fi
fi

if ! command -v "$PYTHON" >/dev/null; then
  echo "setup: error: no $PYTHON here; install Python 3.11 or newer (or set PYTHON=/path/to/python3.11)" >&2
  exit 1
fi
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  echo "setup: error: aot needs Python 3.11 or newer; $PYTHON is $("$PYTHON" -V 2>&1). Set PYTHON=/path/to/python3.11 and rerun" >&2
  exit 1
fi

venv_works() {
  "$VENV/bin/python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null \
    && "$VENV/bin/python" -m pip --version >/dev/null 2>&1
}

make_venv() {
  rm -rf "$VENV"
  "$PYTHON" -m venv "$VENV" >/dev/null 2>&1
}

if ! venv_works; then
  echo "setup: creating the virtual environment $VENV"
  if ! make_venv; then
    # Debian and Ubuntu ship venv's pip bootstrap (ensurepip) in python3-venv / python3.X-venv
    minor=$("$PYTHON" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
    echo "setup: $PYTHON -m venv failed; installing python3-venv (python$minor-venv)"
    # python3-venv alone can be for another minor version than $PYTHON's
    if ! apt_install python3-venv "python$minor-venv" && ! apt_install python3-venv; then
      echo "setup: error: $PYTHON cannot make a virtual environment and python3-venv could not be installed; install it and rerun" >&2
      exit 1
    fi
    if ! make_venv; then
      echo "setup: error: $PYTHON -m venv $VENV still fails:" >&2
      "$PYTHON" -m venv "$VENV" >&2 || true
      exit 1
    fi
  fi
fi

# The package (editable) with its test extras, and Ray Serve for tests/integrations, into the venv only.
"$VENV/bin/python" -m pip install -q -e ".[test,ray]"
# Build the C runtime now (Python builds it on first use otherwise).
make -s -C runtime_c

if [ "$BENCH" = 1 ]; then
  # install_torch_cpu.sh installs with whatever `python3` is first on PATH: the venv's
  PATH="$VENV_PATH/bin:$PATH" ./scripts/install_torch_cpu.sh
  # clang with libFuzzer (compiler-rt) for the fuzz test; optional: without it the test skips
  fuzzer_works() {
    local probe
    probe=$(mktemp -d)
    echo 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { (void)d; (void)n; return 0; }' > "$probe/f.c"
    clang -fsanitize=fuzzer "$probe/f.c" -o "$probe/f" >/dev/null 2>&1
    local status=$?
    rm -rf "$probe"
    return $status
  }
  if ! command -v clang >/dev/null || ! fuzzer_works; then
    echo "setup: installing clang with libFuzzer (for the fuzz test)"
    if apt_install clang && ! fuzzer_works; then
      apt_install "libclang-rt-$(clang -dumpversion | cut -d. -f1)-dev" || true
    fi
    command -v clang >/dev/null && fuzzer_works \
      || echo "setup: clang with libFuzzer is not available; the fuzz test will skip" >&2
  fi
fi

if [ "$AARCH64" = 1 ]; then
  # the tools' names, as runtime_c/Makefile's AARCH64_CC and QEMU_AARCH64
  AARCH64_CC=${AARCH64_CC:-aarch64-linux-gnu-gcc}
  QEMU_AARCH64=${QEMU_AARCH64:-qemu-aarch64}
  # the cross compiler's own libc comes with it; libzstd for arm64 only through multiarch
  aarch64_zstd_works() {
    echo '#include <zstd.h>
int main(void) { return ZSTD_versionNumber() == 0; }' | "$AARCH64_CC" -x c - -o /dev/null -lzstd >/dev/null 2>&1
  }
  if ! command -v "$AARCH64_CC" >/dev/null || ! command -v "$QEMU_AARCH64" >/dev/null || ! aarch64_zstd_works; then
    echo "setup: installing gcc-aarch64-linux-gnu, qemu-user and libzstd-dev:arm64 (for the aarch64 tests)"
    if command -v dpkg >/dev/null && ! dpkg --print-foreign-architectures | grep -qx arm64; then
      $SUDO dpkg --add-architecture arm64 || true
      APT_UPDATED=0
      if ! apt_update; then
        # a mirror without arm64 lists would break every later apt-get update: take it back
        echo "setup: the package lists have no arm64 packages here; leaving multiarch off" >&2
        $SUDO dpkg --remove-architecture arm64 || true
        APT_UPDATED=0
      fi
    fi
    apt_install gcc-aarch64-linux-gnu qemu-user || true
    dpkg --print-foreign-architectures 2>/dev/null | grep -qx arm64 && { apt_install libzstd-dev:arm64 || true; }
  fi
  command -v "$AARCH64_CC" >/dev/null && command -v "$QEMU_AARCH64" >/dev/null && aarch64_zstd_works \
    || echo "setup: the aarch64 cross compiler, arm64 libzstd or qemu-aarch64 is not available; the aarch64 tests will skip" >&2
fi

echo "setup: ok. Everything is in the virtual environment $VENV: run $VENV/bin/aot-compile, $VENV/bin/aot,"
echo "       $VENV/bin/python -m pytest -q; or activate it once with: source $VENV/bin/activate"
