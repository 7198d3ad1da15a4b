"""Repository-level pytest configuration: doctest collection of ``src/treeclass``.

The framework adapters import their framework at module level (they are only ever imported
once it is), so their doctests are collected only where that framework is installed. CI
installs every framework and turns any skip into a failure (see ``tests/conftest.py``).
"""

from __future__ import annotations

import importlib.util

collect_ignore = [
    f"src/treeclass/{path}"
    for framework, paths in {
        "jax": ["backends/jax.py"],
        "torch": ["backends/torch.py", "torch.py", "_torch_state.py"],
        "optree": ["backends/optree.py", "optree.py"],
    }.items()
    if importlib.util.find_spec(framework) is None
    for path in paths
]
