"""scripts/setup.sh's decisions, with apt-get, make, the C compiler and Python replaced by
stubs that log their arguments (issue 11): it installs into a virtual environment only,
installs python3-venv where `python -m venv` fails, and waits for apt's locks. The real
install is what CI runs (.ci/run)."""
import os
import stat
import subprocess
from pathlib import Path

import pytest

from paths_util import ROOT


# Each stub appends "NAME ARGS" to $STUB_LOG.
APT_GET = """#!/bin/bash
echo "apt-get $*" >> "$STUB_LOG"
case " $* " in
  *" update "*)
    n=$(cat "$STUB_DIR/updates" 2>/dev/null || echo 0); echo $((n + 1)) > "$STUB_DIR/updates"
    if [ "$n" -lt "${LOCKED_UPDATES:-0}" ]; then
      echo "E: Could not get lock /var/lib/apt/lists/lock. It is held by process 99 (apt-get)" >&2; exit 100
    fi ;;
  *" install "*)
    [ -n "${APT_BROKEN:-}" ] && { echo "E: Unable to locate package python3-venv" >&2; exit 100; }
    case " $* " in *" python3-venv "*) touch "$STUB_DIR/venv-installed" ;; esac ;;
esac
exit 0
"""
# A Python whose `-m venv` works only once python3-venv is installed (Debian's system Python).
PYTHON = """#!/bin/bash
echo "python $*" >> "$STUB_LOG"
if [ "$1" = "-m" ] && [ "$2" = "venv" ]; then
  [ -e "$STUB_DIR/venv-installed" ] || { echo "The virtual environment was not created successfully because ensurepip is not available." >&2; exit 1; }
  mkdir -p "$3/bin"
  printf '#!/bin/bash\\necho "venv-python $*" >> "$STUB_LOG"\\n' > "$3/bin/python"
  chmod +x "$3/bin/python"
  exit 0
fi
case "$*" in *print*) echo 3.11 ;; esac
exit 0
"""
LOGGER = """#!/bin/bash
echo "{name} $*" >> "$STUB_LOG"
"""


def _stub(directory: Path, name: str, text: str) -> Path:
    path = directory / name
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def _setup(tmp_path: Path, **env: str) -> tuple[subprocess.CompletedProcess, list[str]]:
    stubs = tmp_path / "stubs"
    stubs.mkdir(exist_ok=True)
    _stub(stubs, "apt-get", APT_GET)
    for name in ("make", "sleep"):
        _stub(stubs, name, LOGGER.format(name=name))
    _stub(stubs, "cc", LOGGER.format(name="cc") + "cat > /dev/null\n")  # reads the probe of zstd.h
    python = _stub(stubs, "python3-stub", PYTHON)
    log = tmp_path / "log"
    log.write_text("")
    environ = {**os.environ, "PATH": f"{stubs}:{os.environ['PATH']}", "STUB_LOG": str(log), "STUB_DIR": str(stubs),
               "PYTHON": str(python), "AOT_VENV": str(tmp_path / "venv"), "CC": str(stubs / "cc"), **env}
    proc = subprocess.run(["bash", str(ROOT / "scripts/setup.sh")], env=environ, capture_output=True, text=True,
                          timeout=60)
    return proc, log.read_text().splitlines()


@pytest.mark.skipif(os.geteuid() != 0, reason="the script runs apt-get through sudo when not root")
def test_setup_installs_python3_venv_waits_for_apts_lock_and_installs_into_the_venv_only(tmp_path):
    proc, log = _setup(tmp_path, LOCKED_UPDATES="2")
    assert proc.returncode == 0, proc.stderr
    wait = "-o DPkg::Lock::Timeout=600"
    apt = [line for line in log if line.startswith("apt-get")]
    assert apt == [f"apt-get {wait} update -qq"] * 3 + [f"apt-get {wait} install -y -qq python3-venv python3.11-venv"]
    assert proc.stderr.count("apt is busy (another process holds its lock); waiting") == 2
    assert log.count("sleep 10") == 2
    assert "venv-python -m pip install -q -e .[test,ray]" in log
    assert not any(line.startswith("python -m pip") for line in log)  # never into the system Python
    assert "make -s -C runtime_c" in log
    assert f"source {tmp_path / 'venv'}/bin/activate" in proc.stdout


@pytest.mark.skipif(os.geteuid() != 0, reason="the script runs apt-get through sudo when not root")
def test_setup_says_clearly_when_no_venv_can_be_had(tmp_path):
    proc, log = _setup(tmp_path, APT_BROKEN="1")
    assert proc.returncode == 1
    assert proc.stderr.strip().endswith("setup: error: " + str(tmp_path / "stubs" / "python3-stub") +
                                        " cannot make a virtual environment and python3-venv could not be installed; "
                                        "install it and rerun")
    assert not any("pip" in line for line in log)


@pytest.mark.skipif(os.geteuid() != 0, reason="the script runs apt-get through sudo when not root")
def test_setup_reuses_a_working_venv(tmp_path):
    first, _ = _setup(tmp_path)
    assert first.returncode == 0, first.stderr
    again, log = _setup(tmp_path)
    assert again.returncode == 0, again.stderr
    assert not any(line.startswith(("apt-get", "python -m venv")) for line in log)
    assert "venv-python -m pip install -q -e .[test,ray]" in log
