"""The one registry: node types by type and by name, atomic registration, and backends.

Every node type lives here: the built-in containers, namedtuples (on first sight) and the
registered classes. Registering a class is atomic: every active backend (a framework adapter,
see ``docs/contributing.md``) is asked whether it can take the class *before* anything changes
anywhere; then the embedded registry and each backend register it, and a failure part-way
undoes what was done.
"""

from __future__ import annotations

import warnings
from _thread import RLock
from collections.abc import Iterator
from typing import Protocol

from ._codegen import release
from ._errors import NameConflictError
from ._fields import is_namedtuple_class
from ._names import BUILTIN_NAMES, Origin, check_name
from ._nodes import BUILTIN_NODE_TYPES, LEAF_TYPES, NodeType, namedtuple_node

__all__ = [
    "Backend",
    "activate_backend",
    "active_backends",
    "class_for_name",
    "is_registered",
    "name_of",
    "node_for_name",
    "node_type_for",
    "register",
    "registered_node",
    "registered_nodes",
]


class Backend(Protocol):
    """What a framework adapter provides to mirror the registry (see docs/contributing.md)."""

    #: The framework's name, as in :data:`treeclass._hooks.FRAMEWORKS`.
    name: str
    #: Whether :meth:`unregister` can undo :meth:`register` (JAX cannot).
    can_unregister: bool

    def check(self, node: NodeType, previous: NodeType | None, override: bool) -> None:
        """Raise :class:`~treeclass.RegistrationError` if ``node`` cannot be registered.

        Changes nothing.
        """

    def register(self, node: NodeType, previous: NodeType | None, override: bool) -> None:
        """Register ``node`` (``previous`` is the class it replaces under the same name)."""

    def unregister(self, node: NodeType) -> None:
        """Undo :meth:`register` (only called when :attr:`can_unregister`)."""


_LOCK = RLock()
#: Every node type: built-in containers, namedtuples seen so far, registered classes.
_BY_TYPE: dict[type, NodeType] = dict(BUILTIN_NODE_TYPES)
#: Built-in and registered names.
_BY_NAME: dict[str, NodeType] = {nt.name: nt for nt in BUILTIN_NODE_TYPES.values() if nt.name}
#: Classes registered through the API, in registration order.
_REGISTERED: dict[type, NodeType] = {}
_BACKENDS: list[Backend] = []
_INTERNAL: set[str] = set()

#: The fastest lookup of a node type by exact type (walkers use it directly).
get_node_type = _BY_TYPE.get


def node_type_for(cls: type) -> NodeType | None:
    """The node type of ``cls``, or ``None`` if ``cls`` is a leaf type.

    A namedtuple class seen for the first time becomes a node type here; any other type not
    registered is remembered as a leaf type.
    """
    nt = _BY_TYPE.get(cls)
    if nt is None and cls not in LEAF_TYPES:
        if is_namedtuple_class(cls):
            with _LOCK:
                nt = _BY_TYPE.get(cls)
                if nt is None:
                    nt = _BY_TYPE[cls] = namedtuple_node(cls)
        else:
            LEAF_TYPES.add(cls)
    return nt


def node_for_name(name: str) -> NodeType | None:
    """The node type registered (or built in) under ``name``, or ``None``. Never imports."""
    return _BY_NAME.get(name)


def registered_node(cls: type) -> NodeType | None:
    """The node type of a class registered through the API, or ``None``."""
    return _REGISTERED.get(cls)


def registered_nodes() -> Iterator[NodeType]:
    """Every registered class's node type, in registration order."""
    return iter(list(_REGISTERED.values()))


def _options(node: NodeType, name: str | None) -> tuple[object, ...]:
    """What was asked at registration, to tell an idempotent re-registration apart."""
    rebuild = None if node.info is None else node.info.rebuild
    return (name, node.return_none_fields, node.static_fields, rebuild, node.pickle_by_name)


def register(
    node: NodeType, origin: Origin, *, name: str | None, override: bool = False
) -> NodeType:
    """Register ``node`` under ``name`` everywhere, atomically; return the node type in force.

    ``node`` is a new class node (:func:`~treeclass._nodes.class_node`), or the node type a
    namedtuple class already has (from :func:`node_type_for`): a namedtuple keeps its node
    type, so that structures made before it was named stay equal to those made after.

    Raises:
        NameConflictError: the name belongs to another class (and this is not a re-run of its
            registration), or the class is already registered with other options.
        RegistrationError: a bad name, or a backend refused the class; nothing was changed
            anywhere.
    """
    cls = node.type
    if name is not None:
        check_name(name, cls)
    with _LOCK:
        existing = _REGISTERED.get(cls)
        if existing is not None:
            if _options(existing, existing.name) == _options(node, name):
                if existing is not node:
                    _discard(node)
                return existing  # the same registration again: nothing to do
            if existing is not node:
                _discard(node)
            raise NameConflictError(
                f"{node.qualname} is already registered with treeclass (name="
                f"{existing.name!r}, static={list(existing.static_fields)!r}, "
                f"return_none_fields={existing.return_none_fields}); a class is registered "
                "once, so register it with one set of options."
            )
        previous: NodeType | None = None
        if name is not None:
            holder = _BY_NAME.get(name)
            if holder is not None:
                if holder.origin is None or not origin.reruns(holder.origin):
                    _discard(node)
                    raise NameConflictError(
                        f"the name {name!r} is taken by {holder.qualname}, so "
                        f"{node.qualname} cannot have it; give one of them another name (a "
                        "class takes a name over only when its own class statement runs again, "
                        "in the module that registered it)."
                    )
                previous = holder  # a re-run of the same definition: the newest class wins
        unnamed = node.name
        node.name = name
        try:
            for backend in _BACKENDS:
                backend.check(node, previous, override)
        except BaseException:
            node.name = unnamed
            _discard(node)
            raise
        _commit(node, origin, previous, override, unnamed)
        return node


def _commit(
    node: NodeType,
    origin: Origin,
    previous: NodeType | None,
    override: bool,
    unnamed: str | None,
) -> None:
    """Register ``node`` in the embedded registry, then in every backend; undo on failure."""
    cls = node.type
    node.origin = origin
    _REGISTERED[cls] = node
    if node.name is not None:
        _BY_NAME[node.name] = node
    if previous is not None:
        previous.superseded = True  # its objects are refused by every serializer now
    _BY_TYPE[cls] = node
    LEAF_TYPES.discard(cls)
    done: list[Backend] = []
    try:
        # Backends that can undo a registration first, JAX (which cannot) last.
        for backend in sorted(_BACKENDS, key=lambda b: not b.can_unregister):
            backend.register(node, previous, override)
            done.append(backend)
    except BaseException:
        for backend in reversed(done):
            try:
                backend.unregister(node)
            except Exception as e:  # pragma: no cover - best effort
                warnings.warn(
                    f"treeclass could not undo the {backend.name} registration of "
                    f"{node.qualname}: {e}",
                    RuntimeWarning,
                    stacklevel=3,
                )
        del _REGISTERED[cls]
        node.origin = None
        if node.name is not None:
            if previous is not None:
                _BY_NAME[node.name] = previous
                previous.superseded = False
            else:
                del _BY_NAME[node.name]
        node.name = unnamed
        if node.kind != "namedtuple":  # a namedtuple stays a node, as every namedtuple is
            del _BY_TYPE[cls]
            _discard(node)
        raise


def _discard(node: NodeType) -> None:
    """Forget the generated source of a node type that was never registered."""
    if node.generated is not None and node.origin is None:
        release(node.generated)


def activate_backend(backend: Backend, *, framework: bool = True) -> None:
    """Start mirroring the registry into ``backend`` and register every class so far.

    ``framework=False`` marks a mirror of treeclass's own (pickling by name), which
    :func:`active_backends` does not list.
    """
    with _LOCK:
        if any(b.name == backend.name for b in _BACKENDS):
            return
        _BACKENDS.append(backend)
        if not framework:
            _INTERNAL.add(backend.name)
        for node in list(_REGISTERED.values()):
            try:
                backend.check(node, None, False)
                backend.register(node, None, False)
            except Exception as e:
                warnings.warn(
                    f"treeclass could not register {node.qualname} with {backend.name}: {e}",
                    RuntimeWarning,
                    stacklevel=2,
                )


def active_backends() -> tuple[str, ...]:
    """The names of the frameworks treeclass is mirroring its registry into.

    Example:
        >>> import treeclass as tc
        >>> isinstance(tc.active_backends(), tuple)
        True
    """
    return tuple(b.name for b in _BACKENDS if b.name not in _INTERNAL)


def name_of(cls: type) -> str | None:
    """The serialized name ``cls`` was registered under, or ``None``.

    Example:
        >>> import treeclass as tc
        >>> @tc.pytree_dataclass(name="docs.NameOf")
        ... class NameOf:
        ...     x: int
        >>> tc.name_of(NameOf)
        'docs.NameOf'
    """
    node = _REGISTERED.get(cls)
    return None if node is None else node.name


def class_for_name(name: str) -> type | None:
    """The class registered under ``name``, or ``None``. Never imports anything.

    Example:
        >>> import treeclass as tc
        >>> @tc.pytree_dataclass(name="docs.ClassFor")
        ... class ClassFor:
        ...     x: int
        >>> tc.class_for_name("docs.ClassFor") is ClassFor
        True
    """
    if name in BUILTIN_NAMES:
        return None
    node = _BY_NAME.get(name)
    return None if node is None else node.type


def is_registered(cls: type) -> bool:
    """Whether ``cls`` is registered with treeclass.

    Example:
        >>> import treeclass as tc
        >>> tc.is_registered(dict)
        False
    """
    return cls in _REGISTERED
