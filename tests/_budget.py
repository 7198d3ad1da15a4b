"""How many cases a randomized test runs: one rule for every fuzz and property test.

Each such test is marked ``fuzz`` and states its *full* budget, the number CI's ``fuzz`` job
runs (``TREECLASS_FUZZ=full``, ``.ci/run fuzz``) and the docs quote. Any other run -- the fast
default, ``scripts/test.sh --all``, CI's whole suite -- runs a quarter of it: every test and
every bad-input family still runs on every change, and the suite stays quick.

    TREECLASS_FUZZ=full .venv/bin/python -m pytest -n 2 -m fuzz   # the full budgets
"""

from __future__ import annotations

import os

#: Whether this run takes the full budgets (``TREECLASS_FUZZ=full``).
FULL = os.environ.get("TREECLASS_FUZZ", "") == "full"

#: The share of the full budget an ordinary run takes.
SHARE = 4


def cases(full: int) -> int:
    """The number of cases to run of a test whose full budget is ``full``."""
    return full if FULL else max(1, full // SHARE)
