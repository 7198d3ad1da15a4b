"""The optree adapter: every treeclass dataclass and attrs class is an optree pytree node.

Classes go into optree's global namespace (the one every named namespace falls back to) through
optree's own sentinel for it, as ``optree.dataclasses`` does, with ``GetAttrEntry`` paths and an
unflatten that never runs ``__init__``; :func:`treeclass.optree.register_namespace` adds named
namespaces. Namedtuples are optree's own. Also converts ``PyTreeSpec``s (torch's C++ pytree's
included) to the treespec node list and back. See ``docs/optree.md``.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Final

import optree
from optree.registry import __GLOBAL_NAMESPACE as _GLOBAL_NAMESPACE

from .._core.registry import Change, Held, Undo, held_elsewhere, nothing
from .._core.tree import TreeSpec
from .._errors import RegistrationError, RegistrationTypeError, TreeclassTypeError, qualname
from .._treespec.convert import leaf_count_error, nodes_of, skeleton
from .._treespec.format import Node

if TYPE_CHECKING:
    from optree.registry import PyTreeNodeRegistryEntry

__all__ = ["BACKEND", "GLOBAL_NAMESPACE", "OptreeBackend", "nodes_from_spec", "spec_from_spec"]

FlattenEntriesFn = Callable[[Any], tuple[tuple[Any, ...], Any, tuple[str, ...]]]

#: optree's own marker for its global namespace (``optree.registry.__GLOBAL_NAMESPACE``).
GLOBAL_NAMESPACE: Final[str] = _GLOBAL_NAMESPACE

#: The namespace PyTorch's C++ pytree (``torch.utils._cxx_pytree``) keeps in optree; treeclass's
#: torch backend registers there, so users cannot claim it through :meth:`add_namespace`.
_TORCH_NAMESPACE: Final = "torch"


def _label(namespace: str) -> str:
    if namespace is GLOBAL_NAMESPACE:
        return "optree's global namespace"
    return f"optree namespace {namespace!r}"


def _entry(cls: type, namespace: str) -> PyTreeNodeRegistryEntry | None:
    """The registration of exactly ``cls`` in exactly ``namespace`` (no global fallback)."""
    name = "" if namespace is GLOBAL_NAMESPACE else namespace
    entry = optree.register_pytree_node.get(cls, namespace=name)
    if entry is None or entry.type is not cls or entry.namespace != name:
        return None  # a leaf there, a namedtuple's generic entry, or the global fallback
    return entry


def _foreign(cls: type, namespace: str) -> str | None:
    """Where and how ``cls`` is registered in ``namespace`` by another library, or ``None``."""
    entry = _entry(cls, namespace)
    if entry is None:
        return None
    fn = entry.flatten_func
    module = getattr(fn, "__module__", None) or "?"
    qualname = getattr(fn, "__qualname__", None) or repr(fn)
    return f"optree ({_label(namespace)}, flatten function {module}.{qualname})"


class OptreeBackend:
    """Mirrors treeclass's registry into optree's global namespace and any named ones."""

    name: str = "optree"
    can_unregister: bool = True

    def __init__(self) -> None:
        self._lock = threading.RLock()
        #: Where every class goes: the global namespace first, then named ones, in order.
        self._namespaces: list[str] = [GLOBAL_NAMESPACE]
        #: class -> (generated flatten, unflatten) as given to optree, in every namespace.
        self._functions: dict[type, tuple[FlattenEntriesFn, Any]] = {}

    # -- the Backend protocol ------------------------------------------------------------------

    def check(self, change: Change) -> list[Held]:
        """Report another library's registration of the class in the namespaces treeclass fills."""
        node = change.node
        if node.kind == "namedtuple":
            return []
        with self._lock:
            return [
                (None, node.type, where)
                for where in map(lambda ns: _foreign(node.type, ns), self._namespaces)
                if where is not None
            ]

    def add(self, change: Change) -> Undo:
        """Register the class in every namespace, all or none; the undo puts back what was there.

        Raises:
            RegistrationError: optree refused the class in one namespace; the namespaces done
                before it are undone.
        """
        node = change.node
        if node.kind == "namedtuple":
            return nothing
        cls = node.type
        replaced: list[tuple[str, PyTreeNodeRegistryEntry]] = []

        def undo(namespaces: Iterable[str] | None = None) -> None:
            with self._lock:
                if namespaces is None:
                    namespaces = self._namespaces if self._functions.pop(cls, None) else ()
                for namespace in reversed(tuple(namespaces)):
                    try:
                        optree.unregister_pytree_node(cls, namespace=namespace)
                    except ValueError:  # already removed behind treeclass's back
                        continue
                for namespace, entry in replaced:
                    _register(cls, (entry.flatten_func, entry.unflatten_func), namespace, entry)

        with self._lock:
            functions = (
                node.bind("optree", str, functions=("flatten_entries",))["flatten_entries"],
                node.unflatten,
            )
            done: list[str] = []
            for namespace in self._namespaces:
                try:
                    entry = _entry(cls, namespace) if change.override else None
                    if entry is not None:
                        optree.unregister_pytree_node(cls, namespace=namespace)
                        replaced.append((namespace, entry))
                    _register(cls, functions, namespace)
                except Exception as e:
                    undo(done)
                    raise RegistrationError(
                        f"optree refused {node.qualname} in {_label(namespace)} ({e}); nothing "
                        "was registered."
                    ) from e
                done.append(namespace)
            self._functions[cls] = functions
        return undo

    # -- named namespaces ----------------------------------------------------------------------

    @property
    def namespaces(self) -> tuple[str, ...]:
        """The named namespaces classes are registered in besides the global one."""
        with self._lock:
            return tuple(self._namespaces[1:])

    def add_namespace(self, namespace: str) -> None:
        """:func:`treeclass.optree.register_namespace` (all or none; its errors)."""
        if not isinstance(namespace, str):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise RegistrationTypeError(
                f"an optree namespace is a str, got {type(namespace).__name__}; write "
                'register_namespace("mylib").'
            )
        if not namespace:
            raise RegistrationError(
                "the optree namespace must be a non-empty str; every treeclass class is "
                "already in optree's global namespace, so there is nothing to add for ''."
            )
        if namespace == _TORCH_NAMESPACE:
            raise RegistrationError(
                "the optree namespace 'torch' belongs to PyTorch's C++ pytree "
                "(torch.utils._cxx_pytree), which treeclass's torch backend fills; choose a "
                'namespace of your own, such as "mylib".'
            )
        with self._lock:
            if namespace in self._namespaces:
                return
            classes = list(self._functions)
            for cls in classes:
                where = _foreign(cls, namespace)
                if where is not None:
                    raise held_elsewhere(
                        qualname(cls),
                        where,
                        "unregister it with optree.unregister_pytree_node(cls, "
                        f"namespace={namespace!r}) first, or choose another namespace",
                    )
            done: list[type] = []
            for cls in classes:
                try:
                    _register(cls, self._functions[cls], namespace)
                except Exception as e:
                    for other in reversed(done):
                        optree.unregister_pytree_node(other, namespace=namespace)
                    raise RegistrationError(
                        f"optree refused {cls.__module__}.{cls.__qualname__} in "
                        f"{_label(namespace)} ({e}); nothing was registered."
                    ) from e
                done.append(cls)
            self._namespaces.append(namespace)


def _register(cls: type, functions: tuple[Any, Any], namespace: str, entry: Any = None) -> None:
    """Register ``cls`` in ``namespace`` (as ``entry`` was, to put another library's back)."""
    path_entry_type = optree.GetAttrEntry if entry is None else entry.path_entry_type
    optree.register_pytree_node(
        cls, *functions, path_entry_type=path_entry_type, namespace=namespace
    )


#: The adapter instance the registry mirrors into.
BACKEND: Final = OptreeBackend()


# --- structures ---------------------------------------------------------------------------


def _walked_node(cls: Any, data: Any, children: Any) -> tuple[Any, Any, Any]:
    return (cls, data, children)


def _walked_leaf(_: Any) -> None:
    pass


def nodes_from_spec(spec: Any) -> list[Node]:
    """The treespec node list of an optree ``PyTreeSpec`` (torch's C++ pytree's included).

    Raises:
        UnnamedClassError: a node type is not registered with treeclass, or has no name.
        StructureMismatchError: a dict's keys are not in sorted order (torch's C++ pytree).
        TreeclassTypeError: optree is older than 0.20 (no ``PyTreeSpec.walk`` with types).
    """
    framework = "optree" if spec.namespace != "torch" else "torch (C++ pytree)"
    try:
        # optree >= 0.20: walk(leaves, f_node(type, data, children), f_leaf), bottom-up in C++;
        # before, walk could not name the node types.
        walked = spec.walk([None] * spec.num_leaves, _walked_node, _walked_leaf)
    except TypeError:
        raise TreeclassTypeError(
            "converting an optree PyTreeSpec needs optree 0.20 or newer (its PyTreeSpec.walk), "
            f"but optree {optree.__version__} is installed; upgrade optree."
        ) from None
    read = _read
    if spec.namespace == "torch":  # torch's own nodes: the torch adapter reads them
        read = importlib.import_module("treeclass._backends.torch").read_cxx
    return nodes_of(framework, walked, read)


def _read(item: Any) -> tuple[Any, Any, Any, bool] | None:
    if item is None:
        return None
    cls, data, children = item
    return (cls, data, children, children.count(None) == len(children))


def _is_node(t: type) -> bool:
    return t is type(None) or optree.register_pytree_node.get(t) is not None


def spec_from_spec(spec: TreeSpec) -> Any:
    """The optree ``PyTreeSpec`` (global namespace, ``none_is_leaf=False``) of a ``TreeSpec``.

    Raises:
        TreespecLoadError: optree does not see the same nodes.
    """
    treespec = optree.tree_structure(skeleton(spec), none_is_leaf=False)
    if treespec.num_leaves != spec.num_leaves:
        raise leaf_count_error("optree", spec, treespec.num_leaves, _is_node)
    return treespec
