"""treeclass: dataclasses, attrs classes and namedtuples as pytree nodes everywhere.

Decorate a class once and it is a pytree node of every registry that is installed -- JAX,
PyTorch (Python and C++ pytrees), optree -- and of treeclass's own embedded registry, which
needs no framework. A class registered with ``name=`` serializes under that stable name.

Example:
    >>> import treeclass as tc
    >>> @tc.pytree_dataclass(name="docs.Point")
    ... class Point:
    ...     x: float
    ...     y: float
    ...     label: str = tc.field(static=True, default="p")
    >>> leaves, spec = tc.tree_flatten([Point(1.0, 2.0), Point(3.0, 4.0)])
    >>> leaves
    [1.0, 2.0, 3.0, 4.0]
    >>> tc.tree_unflatten(spec, [0.0] * 4)[1]
    Point(x=0.0, y=0.0, label='p')
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import _pickle  # noqa: F401  # pyright: ignore[reportUnusedImport] (pickles by name from now on)
from ._backends.activation import activate_backends
from ._backends.serialize import treespec_dumps, treespec_loads
from ._core.keys import DictKey, GetAttrKey, KeyEntry, KeyPath, SequenceKey, keystr
from ._core.registry import active_backends, class_for_name, is_registered, name_of
from ._core.statics import register_static
from ._core.tree import (
    TreeSpec,
    tree_flatten,
    tree_flatten_with_path,
    tree_leaves,
    tree_leaves_with_path,
    tree_map,
    tree_map_with_path,
    tree_structure,
    tree_unflatten,
)
from ._errors import (
    FileLoadError,
    FileSaveError,
    MissingDependencyError,
    NameConflictError,
    NotAPytreeClassError,
    RebuildError,
    RegistrationError,
    RegistrationTypeError,
    SchemaLockError,
    StructureMismatchError,
    TreeclassError,
    TreeclassTypeError,
    TreespecLoadError,
    UnhashableStaticError,
    UnnamedClassError,
    UnregisteredNameError,
    UnserializableStaticError,
)
from ._io.files import load, load_metadata, save
from ._treespec.format import FORMAT_VERSION
from ._version import __version__

if TYPE_CHECKING:
    from ._core.api import (
        PytreeNode,
        field,
        pytree_dataclass,
        register_dataclass,
        register_namedtuple,
        replace,
    )


__all__ = [
    "FORMAT_VERSION",
    "DictKey",
    "FileLoadError",
    "FileSaveError",
    "GetAttrKey",
    "KeyEntry",
    "KeyPath",
    "MissingDependencyError",
    "NameConflictError",
    "NotAPytreeClassError",
    "PytreeNode",
    "RebuildError",
    "RegistrationError",
    "RegistrationTypeError",
    "SchemaLockError",
    "SequenceKey",
    "StructureMismatchError",
    "TreeSpec",
    "TreeclassError",
    "TreeclassTypeError",
    "TreespecLoadError",
    "UnhashableStaticError",
    "UnnamedClassError",
    "UnregisteredNameError",
    "UnserializableStaticError",
    "__version__",
    "activate_backends",
    "active_backends",
    "class_for_name",
    "field",
    "is_registered",
    "keystr",
    "load",
    "load_metadata",
    "name_of",
    "pytree_dataclass",
    "register_dataclass",
    "register_namedtuple",
    "register_static",
    "replace",
    "save",
    "tree_flatten",
    "tree_flatten_with_path",
    "tree_leaves",
    "tree_leaves_with_path",
    "tree_map",
    "tree_map_with_path",
    "tree_structure",
    "tree_unflatten",
    "treespec_dumps",
    "treespec_loads",
]

# Loaded on first use: ``_api`` imports dataclasses (with inspect, ~5 ms), which the first
# decorated class needs anyway; ``torch`` and ``optree`` are the public extras (``tc.optree``;
# type checkers see them only where a user imports ``treeclass.torch`` itself, so that
# checking ``import treeclass`` never reads a framework).
_LAZY_API = frozenset(
    (
        "PytreeNode",
        "field",
        "pytree_dataclass",
        "register_dataclass",
        "register_namedtuple",
        "replace",
    )
)
_LAZY_SUBMODULES = frozenset(("optree", "torch"))


if not TYPE_CHECKING:  # hidden from checkers, which would otherwise accept any tc.<name>

    def __getattr__(name: str) -> Any:
        import importlib

        if name in _LAZY_API:
            value = getattr(importlib.import_module("treeclass._core.api"), name)
            globals()[name] = value
            return value
        if name in _LAZY_SUBMODULES:
            return importlib.import_module(f"{__name__}.{name}")
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted({*globals(), *_LAZY_API})


from ._backends.activation import install as _install_hooks  # noqa: E402 (once everything above is defined)

_install_hooks()
del _install_hooks
