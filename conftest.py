"""Repository-level pytest configuration: doctest collection of ``src/treeclass``.

The framework adapters import their framework at module level (they are only ever imported
once it is), so their doctests are collected only where that framework is installed. CI
installs every framework and turns any skip into a failure (see ``tests/conftest.py``).
"""

from __future__ import annotations

import importlib.util
import os

import pytest

# Check that every class's generated source made from a shared template is its own source
# (treeclass._core.codegen); set before treeclass is imported, inherited by fresh processes.
os.environ.setdefault("TREECLASS_CHECK_TEMPLATES", "1")
from _pytest.doctest import DoctestItem

from treeclass._backends.activation import FRAMEWORKS


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a dotted name whose parent package is missing
        return False


# Modules that import something optional at the top, by the module they need: each
# framework's adapter (and the backends activated with it), the public extras, the mypy
# plugin, and the files layer (numpy).
_NEEDS: dict[str, list[str]] = {
    f.module: [
        m.removeprefix("treeclass.").replace(".", "/") + ".py" for m in (f.adapter, *f.extras)
    ]
    for f in FRAMEWORKS
}
_NEEDS["torch"] += ["torch/__init__.py", "torch/_state.py", "torch/_treespec.py"]
_NEEDS["optree"].append("optree.py")
_NEEDS.setdefault("numpy", []).append("_io/files.py")
_NEEDS.setdefault("orbax.checkpoint", []).append("orbax.py")
_NEEDS.setdefault("mypy", []).append("mypy.py")

collect_ignore = [
    f"src/treeclass/{path}"
    for module, paths in _NEEDS.items()
    if not _installed(module)
    for path in paths
]


# Doctests of the package namespace that need numpy (tc.save / tc.load with arrays).
_NUMPY_DOCTESTS = frozenset(
    ("treeclass.save", "treeclass.load", "treeclass._io.dtypes.numpy_dtype")
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Leave out the doctests that need numpy where it is not installed (the core CI run).

    They are deselected rather than skipped: a skip mark on a doctest of a module's namespace
    (which has no line number) makes pytest 9 fail while reporting it.
    """
    if importlib.util.find_spec("numpy") is not None:
        return
    keep: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        needs_numpy = isinstance(item, DoctestItem) and item.name in _NUMPY_DOCTESTS
        (dropped if needs_numpy else keep).append(item)
    if dropped:
        items[:] = keep
        config.hook.pytest_deselected(items=dropped)


@pytest.fixture(autouse=True)
def _doctest_tmp(request: pytest.FixtureRequest) -> None:
    """Doctests that write files (``tc.save``) get a temporary folder as ``tmp``."""
    if isinstance(request.node, DoctestItem):
        namespace = request.getfixturevalue("doctest_namespace")
        namespace["tmp"] = request.getfixturevalue("tmp_path")
