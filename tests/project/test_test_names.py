"""Test modules have unique basenames: pytest (rootdir imports, no __init__.py in tests/) imports
each by its basename, so two test_x.py in different folders stop the whole run at collection."""
from __future__ import annotations

from collections import Counter

from paths_util import ROOT


def test_test_module_basenames_are_unique():
    names = Counter(p.name for p in (ROOT / "tests").rglob("test_*.py"))
    assert not [n for n, count in names.items() if count > 1]
