"""Repository-level pytest configuration: doctest collection of ``src/treeclass``.

The framework adapters import their framework at module level (they are only ever imported
once it is), so their doctests are collected only where that framework is installed. CI
installs every framework and turns any skip into a failure (see ``tests/conftest.py``).
"""

from __future__ import annotations

import importlib.util


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a dotted name whose parent package is missing
        return False


collect_ignore = [
    f"src/treeclass/{path}"
    for framework, paths in {
        "jax": ["backends/jax.py", "_integrations_jax_export.py"],
        "orbax.checkpoint": ["orbax.py"],
        "flax": ["_integrations_flax.py"],
        "torch": ["backends/torch.py", "torch.py"],
        "optree": ["backends/optree.py", "optree.py"],
    }.items()
    if not _installed(framework)
    for path in paths
]
