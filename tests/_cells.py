"""Run code the way a notebook runs a cell: in a real module's namespace, again and again."""

from __future__ import annotations

import sys
import types
from typing import Any


def run_cell(source: str, module: str = "notebook_cell", **names: Any) -> dict[str, Any]:
    """Execute ``source`` in module ``module``'s namespace (made on first use, kept in
    ``sys.modules`` like a notebook's ``__main__``); return that namespace."""
    mod = sys.modules.get(module)
    if mod is None:
        mod = sys.modules[module] = types.ModuleType(module)
    namespace: dict[str, Any] = vars(mod)
    namespace.update(names)
    exec(compile(source, f"<cell in {module}>", "exec", dont_inherit=True), namespace)
    return namespace
