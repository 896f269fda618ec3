"""scripts/setup.sh --aarch64's decisions, with apt-get, dpkg, make, the compilers and Python
replaced by stubs that log their arguments: it adds arm64 as a dpkg architecture before it
installs libzstd-dev:arm64, takes the architecture back where the package lists have no arm64
packages, and installs nothing where the tools work. The real install is what CI runs."""
import os
import stat
import subprocess
from pathlib import Path

import pytest

from paths_util import ROOT

# The compilers' stubs read the probe piped into them: setup.sh runs under pipefail, and a stub
# that exited first would now and then fail the probe's echo (SIGPIPE) and so the probe.
# Each stub appends "NAME ARGS" to $STUB_LOG. apt-get "installs" a package by making the file
# its stub looks for; an update fails while arm64 is a dpkg architecture and NO_ARM64 is set.
APT_GET = """#!/bin/bash
echo "apt-get $*" >> "$STUB_LOG"
case " $* " in
  *" update "*)
    if [ -n "${NO_ARM64:-}" ] && grep -qx arm64 "$STUB_DIR/archs" 2>/dev/null; then
      echo "E: Failed to fetch .../binary-arm64/Packages 404 Not Found" >&2; exit 100
    fi ;;
  *" install "*)
    for package in $*; do
      case "$package" in
        gcc-aarch64-linux-gnu) printf '#!/bin/bash\\ncat > /dev/null\\n[ -e "$STUB_DIR/zstd-arm64" ]\\n' > "$STUB_DIR/cross-cc"; chmod +x "$STUB_DIR/cross-cc" ;;
        qemu-user) printf '#!/bin/bash\\n' > "$STUB_DIR/qemu"; chmod +x "$STUB_DIR/qemu" ;;
        libzstd-dev:arm64) touch "$STUB_DIR/zstd-arm64" ;;
      esac
    done ;;
esac
exit 0
"""
DPKG = """#!/bin/bash
echo "dpkg $*" >> "$STUB_LOG"
touch "$STUB_DIR/archs"
case "$1" in
  --print-foreign-architectures) cat "$STUB_DIR/archs" ;;
  --add-architecture) echo "$2" >> "$STUB_DIR/archs" ;;
  --remove-architecture) grep -vx "$2" "$STUB_DIR/archs" > "$STUB_DIR/archs.new"; mv "$STUB_DIR/archs.new" "$STUB_DIR/archs" ;;
esac
exit 0
"""
# A Python with a working venv (the venv's python logs too).
PYTHON = """#!/bin/bash
echo "python $*" >> "$STUB_LOG"
if [ "$1" = "-m" ] && [ "$2" = "venv" ]; then
  mkdir -p "$3/bin"
  printf '#!/bin/bash\\necho "venv-python $*" >> "$STUB_LOG"\\n' > "$3/bin/python"
  chmod +x "$3/bin/python"
fi
exit 0
"""
LOGGER = """#!/bin/bash
echo "{name} $*" >> "$STUB_LOG"
"""
WAIT = "-o DPkg::Lock::Timeout=600"


def _stub(directory: Path, name: str, text: str) -> None:
    path = directory / name
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def _setup(stubs: Path, **env: str) -> tuple[subprocess.CompletedProcess, list[str]]:
    """setup.sh --aarch64 over the stubs in `stubs` (made on the first call, kept after)."""
    if not (stubs / "apt-get").exists():
        stubs.mkdir(parents=True, exist_ok=True)
        _stub(stubs, "apt-get", APT_GET)
        _stub(stubs, "dpkg", DPKG)
        _stub(stubs, "make", LOGGER.format(name="make"))
        _stub(stubs, "cc", LOGGER.format(name="cc") + "cat > /dev/null\n")  # reads the probe of zstd.h
        _stub(stubs, "python3-stub", PYTHON)
    log = stubs / "log"
    log.write_text("")
    environ = {**os.environ, "PATH": f"{stubs}:{os.environ['PATH']}", "STUB_LOG": str(log), "STUB_DIR": str(stubs),
               "PYTHON": str(stubs / "python3-stub"), "AOT_VENV": str(stubs / "venv"), "CC": str(stubs / "cc"),
               "AARCH64_CC": str(stubs / "cross-cc"), "QEMU_AARCH64": str(stubs / "qemu"), **env}
    proc = subprocess.run(["bash", str(ROOT / "scripts/setup.sh"), "--aarch64"], env=environ, capture_output=True,
                          text=True, timeout=60)
    return proc, log.read_text().splitlines()


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="the script runs apt-get and dpkg through sudo when not root")


@needs_root
def test_adds_arm64_then_installs_the_cross_compiler_qemu_and_arm64_libzstd(tmp_path):
    proc, log = _setup(tmp_path)
    assert proc.returncode == 0, proc.stderr
    system = [line for line in log if line.startswith(("apt-get", "dpkg --add", "dpkg --remove"))]
    assert system == ["dpkg --add-architecture arm64", f"apt-get {WAIT} update -qq",
                      f"apt-get {WAIT} install -y -qq gcc-aarch64-linux-gnu qemu-user",
                      f"apt-get {WAIT} install -y -qq libzstd-dev:arm64"]
    assert "aarch64 tests will skip" not in proc.stderr


@needs_root
def test_takes_arm64_back_where_the_lists_have_no_arm64_packages(tmp_path):
    proc, log = _setup(tmp_path, NO_ARM64="1")
    assert proc.returncode == 0, proc.stderr
    assert "dpkg --remove-architecture arm64" in log
    assert (tmp_path / "archs").read_text() == ""
    assert f"apt-get {WAIT} install -y -qq gcc-aarch64-linux-gnu qemu-user" in log
    assert not any("libzstd-dev:arm64" in line for line in log)
    assert "the package lists have no arm64 packages here" in proc.stderr
    assert "the aarch64 tests will skip" in proc.stderr


@needs_root
def test_installs_nothing_where_the_tools_work(tmp_path):
    first, _ = _setup(tmp_path)
    assert first.returncode == 0, first.stderr
    again, log = _setup(tmp_path)
    assert again.returncode == 0, again.stderr
    assert not any(line.startswith(("apt-get", "dpkg --add")) for line in log)


def test_ci_asks_for_the_aarch64_tools():
    assert "setup.sh --bench --aarch64" in (ROOT / ".ci" / "run").read_text()
