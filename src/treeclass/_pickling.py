"""Pickling support: a :class:`~treeclass.TreeSpec` pickles as its JSON document.

``TreeSpec.__reduce__`` calls :func:`reduce_treespec`, so a pickled spec holds the registered
names of its classes, never the classes or their module paths: it unpickles in any process
where the same names are registered (a spawned ``multiprocessing`` worker, a later run after
the classes moved to other modules), and unpickling goes through the safe loader.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing costs ~10 ms to import; checkers treat this as True
if TYPE_CHECKING:
    from typing import Any

    from ._tree import TreeSpec

__all__ = ["reduce_treespec"]


def reduce_treespec(spec: TreeSpec) -> tuple[Any, tuple[str]]:
    """The ``__reduce__`` value of ``spec``: ``(treeclass.treespec_loads, (document,))``.

    Raises:
        UnnamedClassError: a class (or namedtuple) in the spec has no registered name.
        UnserializableStaticError: a static value has no JSON form.
    """
    from ._format import treespec_dumps, treespec_loads

    return treespec_loads, (treespec_dumps(spec),)
