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

from ._api import field, pytree_dataclass, register_dataclass, register_namedtuple
from ._errors import (
    NameConflictError,
    NotAPytreeClassError,
    RebuildError,
    RegistrationError,
    RegistrationTypeError,
    StructureMismatchError,
    TreeclassError,
    TreeclassTypeError,
    TreespecLoadError,
    UnhashableStaticError,
    UnnamedClassError,
    UnregisteredNameError,
    UnserializableStaticError,
)
from ._format import FORMAT_VERSION, treespec_dumps, treespec_loads
from ._keys import DictKey, GetAttrKey, KeyEntry, KeyPath, SequenceKey, keystr
from ._registry import active_backends, class_for_name, is_registered, name_of
from ._statics import register_static
from ._tree import (
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

__version__ = "0.1.0"

__all__ = [
    "FORMAT_VERSION",
    "DictKey",
    "GetAttrKey",
    "KeyEntry",
    "KeyPath",
    "NameConflictError",
    "NotAPytreeClassError",
    "RebuildError",
    "RegistrationError",
    "RegistrationTypeError",
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
    "active_backends",
    "class_for_name",
    "field",
    "is_registered",
    "keystr",
    "name_of",
    "pytree_dataclass",
    "register_dataclass",
    "register_namedtuple",
    "register_static",
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

TYPE_CHECKING = False  # typing costs ~10 ms to import; checkers treat this as True
if TYPE_CHECKING:
    from . import optree as optree
    from . import torch as torch
else:
    # Public submodules imported on first attribute access (``tc.optree``), so that
    # ``import treeclass`` stays cheap and never imports a framework. Hidden from type
    # checkers, which would otherwise accept any misspelt ``tc.<name>``.
    _LAZY_SUBMODULES = frozenset({"optree", "torch"})

    def __getattr__(name: str) -> object:
        if name in _LAZY_SUBMODULES:
            import importlib

            return importlib.import_module(f"{__name__}.{name}")
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


from ._hooks import install as _install_hooks  # noqa: E402

_install_hooks()
del _install_hooks
