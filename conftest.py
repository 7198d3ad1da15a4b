"""Repository-level pytest configuration: doctest collection of ``src/treeclass``.

The framework adapters import their framework at module level (they are only ever imported
once it is), so their doctests are collected only where that framework is installed. CI
installs every framework and turns any skip into a failure (see ``tests/conftest.py``).
"""

from __future__ import annotations

import importlib.util

from treeclass._hooks import FRAMEWORKS

# The public extras that import their framework, by framework module.
_EXTRAS = {"torch": ["torch.py"], "optree": ["optree.py"]}

collect_ignore = [
    f"src/treeclass/{path}"
    for framework in FRAMEWORKS
    if importlib.util.find_spec(framework.module) is None
    for path in [
        framework.adapter.removeprefix("treeclass.").replace(".", "/") + ".py",
        *_EXTRAS.get(framework.module, []),
    ]
]
