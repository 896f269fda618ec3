"""Where the repository's files are, for tests that read them (runtime_c, tests/data, scripts).

Test modules sit at different depths under tests/; this one does not move, so the paths
are computed once here rather than by counting parents in each test.
"""
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUNTIME_C = ROOT / "runtime_c"
TEST_DATA = ROOT / "tests" / "data"
