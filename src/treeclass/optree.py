"""optree integration: treeclass classes in optree's named namespaces.

Every class registered with treeclass is an optree pytree node in optree's **global
namespace** as soon as optree is imported (before or after the class is defined), which
optree also consults from every named namespace. Libraries that keep their own optree
namespace can have every treeclass class registered there explicitly as well, with
:func:`register_namespace`.

This module never imports optree by itself: ``import treeclass.optree`` (or ``tc.optree``)
works without optree installed; its functions import optree when they are called.

Example:
    >>> import optree
    >>> import treeclass as tc
    >>> @tc.pytree_dataclass
    ... class Pair:
    ...     first: float
    ...     second: float
    ...     tag: str = tc.field(static=True, default="p")
    >>> optree.tree_leaves(Pair(1.0, 2.0))
    [1.0, 2.0]
    >>> tc.optree.register_namespace("docs-mylib")
    >>> optree.tree_leaves(Pair(1.0, 2.0), namespace="docs-mylib")
    [1.0, 2.0]
"""

from __future__ import annotations

from types import ModuleType

from ._backends.activation import adapter, complete, framework_named
from ._errors import missing_framework

__all__ = ["namespaces", "register_namespace"]


def _backend() -> ModuleType:
    """Import optree (activating treeclass's optree backend) and return the adapter."""
    framework = framework_named("optree")
    assert framework is not None
    try:
        return adapter(framework)
    except ImportError as e:
        raise missing_framework("treeclass.optree", "optree", e) from e


def register_namespace(namespace: str) -> None:
    """Register every treeclass class in the optree namespace ``namespace`` too.

    Applies to every class registered so far and to every class registered from now on, for
    the rest of the process; calling it again with the same namespace does nothing. The
    classes stay in optree's global namespace as well.

    optree looks a type up in the named namespace first and falls back to the global one, so
    ``optree.tree_flatten(x, namespace=namespace)`` already sees treeclass classes without this
    call; it gives the namespace entries of its own, which is what a library that manages its
    namespace (lists it with ``optree.register_pytree_node.get(namespace=...)``, or unregisters
    types from it) expects to find, and it stops another library from registering a
    treeclass class differently in that namespace.

    Args:
        namespace: a non-empty optree namespace such as ``"mylib"``; not ``"torch"``, which
            belongs to PyTorch's C++ pytree.

    Raises:
        MissingDependencyError: optree is not installed.
        RegistrationTypeError: ``namespace`` is not a str.
        RegistrationError: ``namespace`` is empty or ``"torch"``, or another library already
            registered one of the classes in it (nothing is registered then).

    Example:
        >>> import optree
        >>> import treeclass as tc
        >>> tc.optree.register_namespace("docs-other")
        >>> @tc.pytree_dataclass
        ... class Later:
        ...     x: int
        >>> optree.register_pytree_node.get(Later, namespace="docs-other").namespace
        'docs-other'
    """
    _backend().BACKEND.add_namespace(namespace)


def namespaces() -> tuple[str, ...]:
    """The named optree namespaces every treeclass class is registered in, in order.

    The global namespace, where every class always is, is not listed. Returns ``()`` without
    importing optree when it has not been imported.

    Example:
        >>> import treeclass as tc
        >>> tc.optree.register_namespace("docs-listed")
        >>> "docs-listed" in tc.optree.namespaces()
        True
    """
    adapter = complete("treeclass._backends.optree")
    if adapter is None:
        return ()
    return tuple(adapter.BACKEND.namespaces)
