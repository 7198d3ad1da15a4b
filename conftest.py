"""Repository-level pytest configuration: doctest collection of ``src/treeclass``.

The framework adapters import their framework at module level (they are only ever imported
once it is), so their doctests are collected only where that framework is installed. CI
installs every framework and turns any skip into a failure (see ``tests/conftest.py``).
"""

from __future__ import annotations

import atexit
import gc
import logging
import os
import sys

import pytest

# XLA compiles the tests' computations without optimizing them, as a debug build would: the
# tests check what treeclass does with jax, not how fast XLA's code runs, and compiling is most
# of the CPU the jax tests take (a tenth less this way). Inherited by fresh processes too.
os.environ.setdefault("XLA_FLAGS", "--xla_backend_optimization_level=0")
# One Hypothesis folder for every process of the run, the processes the tests start included
# (the docs pages run in a temporary folder): the tables of Unicode characters Hypothesis makes
# at its first string strategy (a second of CPU) are made once, not once a process.
os.environ.setdefault(
    "HYPOTHESIS_STORAGE_DIRECTORY", os.path.join(os.path.dirname(__file__), ".hypothesis")
)
from _pytest.doctest import DoctestItem

from treeclass._backends.activation import FRAMEWORKS, module_installed


def _end_worker_without_teardown() -> None:
    """End an xdist worker once its exit handlers ran, without tearing its modules down.

    Registered when the worker is configured, before the tests import anything (so it runs
    after every exit handler they registered: ray's, jax's, torch's...), in the workers only,
    whose exit status nobody reads: by then the controller has every report. Freeing jax,
    torch, transformers and the rest object by object took each worker 2 to 3 s, which the
    whole run waited for.
    """
    logging.shutdown()  # the one exit handler registered before this one that does anything
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(0)


def pytest_configure(config: pytest.Config) -> None:
    """In an xdist worker (its config has ``workerinput``), end it without teardown.

    Not by ``PYTEST_XDIST_WORKER``: every process a test starts inherits that variable, a
    pytest run included, whose exit status would then always be 0.
    """
    if hasattr(config, "workerinput"):
        atexit.register(_end_worker_without_teardown)


# Modules that import something optional at the top, by the module they need: each
# framework's adapter (and the backends activated with it), the public extras, the mypy
# plugin, and the files layer (numpy).
_NEEDS: dict[str, list[str]] = {
    f.module: [
        m.removeprefix("treeclass.").replace(".", "/") + ".py" for m in (f.adapter, *f.extras)
    ]
    for f in FRAMEWORKS
}
_NEEDS["torch"] += ["torch/__init__.py", "torch/_state.py"]
_NEEDS["optree"].append("optree.py")
_NEEDS.setdefault("numpy", []).append("_io/files.py")
_NEEDS.setdefault("orbax.checkpoint", []).append("orbax.py")
_NEEDS.setdefault("mypy", []).append("mypy.py")

collect_ignore = [
    f"src/treeclass/{path}"
    for module, paths in _NEEDS.items()
    if not module_installed(module)
    for path in paths
]


# Doctests of the package namespace that need numpy (tc.save / tc.load with arrays).
_NUMPY_DOCTESTS = frozenset(
    ("treeclass.save", "treeclass.load", "treeclass._io.dtypes.numpy_dtype")
)


# The test files that take longest (seconds of CPU each, most of it in fresh processes), the
# longest first. ``-n 2 --dist loadfile --no-loadscope-reorder`` (pyproject.toml) hands the
# files to the two workers in collection order, so these go first and the many short files
# after them even out the end: started last, one of these kept a worker busy for many seconds
# while the other one had nothing left to do. (The order only changes how long the run takes.)
_LONG_FIRST = (
    "tests/test_docs.py",
    "tests/test_faults.py",
    "tests/test_races.py",
    "tests/test_torch_dynamo.py",
    "tests/test_ray.py",
    "tests/test_typing.py",
    "tests/test_hostile_loading.py",
    "tests/test_hostile_torch.py",
    "tests/test_orbax.py",
    "tests/test_jax_backend.py",
    "tests/test_optax_names.py",
    "tests/test_stubs.py",
    "tests/test_transformers.py",
    "tests/test_torch_collate.py",
    "tests/test_torch_export_rename.py",
    "tests/test_evolution_matrix.py",
    "tests/test_subproc.py",
    "tests/test_docs_site.py",
    "tests/test_inspect_hostile.py",
    "tests/test_jax_distributed.py",
    "tests/test_equinox.py",
    "tests/test_torch_backend.py",
    "tests/test_format.py",
    "tests/test_deep.py",
    "tests/test_format_fuzz.py",
)


def _long_first(items: list[pytest.Item]) -> None:
    """Put the items of the ``_LONG_FIRST`` files first, in that order (a stable sort)."""
    rank = {path: i for i, path in enumerate(_LONG_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Put the long test files first; leave out the doctests that need numpy if it is missing.

    The long files are ``_LONG_FIRST``'s. Numpy is missing in the core CI run; its doctests
    are deselected rather than skipped: a skip mark on a doctest of a module's namespace (which
    has no line number) makes pytest 9 fail while reporting it.
    """
    _long_first(items)
    if module_installed("numpy"):
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


@pytest.hookimpl(wrapper=True)
def pytest_collection(session: pytest.Session) -> object:
    """Keep the cyclic garbage collector off what collection imports.

    Collecting imports jax, torch, transformers and the rest: millions of objects that live
    until the end of the run. The collector ran about eight full passes over them during
    collection and one every few seconds of the tests after it (about 7 s of CPU a run,
    over both workers). So it is off while collecting, and what collection left is frozen
    (never walked again). The objects the tests make are collected as before, with a full pass
    every 100 passes over the middle generation instead of every 10: what the tests import
    lazily (``torch._dynamo``, transformers' models) made each still cost 0.1 to 0.2 s. In all,
    collecting garbage went from about 7 s to under 3 s of CPU a run.
    """
    gc.disable()
    try:
        return (yield)
    finally:
        gc.collect()
        gc.freeze()
        gc.set_threshold(700, 10, 100)
        gc.enable()
