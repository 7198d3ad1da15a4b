"""Which skips ``TREECLASS_REQUIRE_BACKENDS=1`` lets pass (see ``tests/conftest.py``)."""

from __future__ import annotations

import importlib.util
import os
import re
from collections.abc import Mapping

# pytest.importorskip's reason when the import fails.
_IMPORTORSKIP = re.compile(r"^(?:Skipped: )?could not import '(?P<module>[^']+)'")


def allowed_missing(environ: Mapping[str, str] = os.environ) -> frozenset[str]:
    """The top-level packages named by ``TREECLASS_ALLOW_MISSING`` (comma-separated)."""
    raw = environ.get("TREECLASS_ALLOW_MISSING", "")
    return frozenset(name.strip() for name in raw.split(",") if name.strip())


def allowed_skip(reason: str, allowed: frozenset[str]) -> bool:
    """Whether a skip is the absence of an allowed package: ``pytest.importorskip``'s skip of
    one of its modules, with the package really not installed. Any other skip is not."""
    match = _IMPORTORSKIP.match(reason)
    if match is None:
        return False
    package = match["module"].split(".", 1)[0]
    return package in allowed and importlib.util.find_spec(package) is None
