import sys
from pathlib import Path

# Pass tests share small helpers in tests/passes_util.py.
sys.path.insert(0, str(Path(__file__).parent))
