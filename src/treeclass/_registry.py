"""The name <-> class registry, atomic registration, and the backends that mirror it.

A registered class is described once by a :class:`NodeDef` (fields, generated functions,
name). Registering one is atomic: every active backend (JAX, PyTorch, optree) is asked
whether it can take the class *before* anything is changed anywhere; then the embedded
registry and each backend register it, and a failure part-way undoes what was done.
"""

from __future__ import annotations

import warnings
from _thread import RLock

from . import _codegen, _tree
from ._errors import NameConflictError, RegistrationError, UnnamedClassError
from ._fields import ClassInfo
from ._keys import GetAttrKey

TYPE_CHECKING = False  # typing costs ~10 ms to import; checkers treat this as True
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from typing import Any, Final, Protocol

__all__ = [
    "Backend",
    "NodeDef",
    "activate_backend",
    "active_backends",
    "class_for_name",
    "describe_node",
    "is_registered",
    "name_of",
    "node_for_class",
    "node_for_name",
    "register",
    "registered_nodes",
]

# Names reserved for the built-in node types in serialized treespecs.
_RESERVED_NAMES: Final = frozenset(_tree.BUILTIN_NAMES.values())
_MAX_NAME_LENGTH: Final = 256


class NodeDef:
    """Everything treeclass knows about one registered class.

    Attributes:
        cls: the class.
        name: its stable serialized name, or ``None`` (in-process only).
        info: its fields, as read at registration.
        return_none_fields: whether ``None``-valued data fields are children.
        flatten: ``flatten(obj) -> (children, aux)`` (generated).
        unflatten: ``unflatten(aux, children) -> obj`` (generated).
        flatten_with_keys: ``obj -> (((GetAttrKey, child), ...), aux)`` (generated).
    """

    __slots__ = (
        "_getstate",
        "_setstate",
        "cls",
        "flatten",
        "flatten_with_keys",
        "info",
        "name",
        "node_type",
        "return_none_fields",
        "unflatten",
    )

    cls: type
    name: str | None
    info: ClassInfo
    return_none_fields: bool
    flatten: Callable[[Any], tuple[Any, Any]]
    unflatten: Callable[[Any, Any], Any]
    flatten_with_keys: Callable[[Any], tuple[Any, Any]]
    node_type: _tree.NodeType

    def __init__(self, info: ClassInfo, name: str | None, return_none_fields: bool) -> None:
        self.cls = info.cls
        self.name = name
        self.info = info
        self.return_none_fields = return_none_fields
        self._getstate: Callable[[Any], Any] | None = None
        self._setstate: Callable[[Any], Any] | None = None
        if info.kind == "namedtuple":
            # Every namedtuple is a node already; reuse the node type made on first sight, so
            # that specs made before the registration stay equal to those made after it.
            nt = _tree.node_type_for(info.cls) or _tree._namedtuple_node_type(info.cls, name)
            self.flatten = nt.flatten
            self.unflatten = nt.unflatten
            self.flatten_with_keys = nt.flatten_with_keys
        else:
            self.flatten = _codegen.make_flatten(info, return_none_fields)
            self.unflatten = _codegen.make_unflatten(info, return_none_fields)
            self.flatten_with_keys = _codegen.make_flatten_with_keys(
                info, return_none_fields, GetAttrKey
            )
            flatten_into = _codegen.make_flatten_into(info, return_none_fields, _tree._LEAF_TYPES)
            nt = _tree.NodeType(
                info.cls,
                self.flatten,
                self.unflatten,
                self.flatten_with_keys,
                name,
                flatten_into,
            )
            flatten_into.__globals__["_nt"] = nt
        self.node_type = nt

    @property
    def kind(self) -> str:
        """``"dataclass"``, ``"attrs"`` or ``"namedtuple"``."""
        return self.info.kind

    @property
    def qualname(self) -> str:
        """``module.QualName`` of the class, for messages."""
        return f"{self.cls.__module__}.{self.cls.__qualname__}"

    def require_name(self) -> str:
        """Return the name, or raise :class:`UnnamedClassError` saying how to give one."""
        if self.name is None:
            raise UnnamedClassError(
                f"{self.qualname} was registered without a name, so it cannot be serialized; "
                f'register it with name="pkg.{self.cls.__qualname__}" (a stable name that '
                "does not change when the module moves)."
            )
        return self.name

    @property
    def getstate(self) -> Callable[[Any], Any]:
        """``getstate(aux) -> JSON-safe value`` (generated on first use)."""
        if self._getstate is None:
            from ._auxdata import make_getstate

            self._getstate = make_getstate(self)
        return self._getstate

    @property
    def setstate(self) -> Callable[[Any], Any]:
        """``setstate(value) -> aux``, the exact inverse of :attr:`getstate`."""
        if self._setstate is None:
            from ._auxdata import make_setstate

            self._setstate = make_setstate(self)
        return self._setstate

    def same_definition(self, other: NodeDef) -> bool:
        """Whether ``other`` is a re-run of the same class definition (module and qualname)."""
        return (
            self.cls.__module__ == other.cls.__module__
            and self.cls.__qualname__ == other.cls.__qualname__
        )

    def options(self) -> tuple[Any, ...]:
        """What was asked at registration, to tell an idempotent re-registration apart."""
        return (
            self.name,
            self.return_none_fields,
            self.info.static_fields,
            self.info.rebuild,
        )

    def __repr__(self) -> str:
        return f"<treeclass node {self.qualname} name={self.name!r}>"


if TYPE_CHECKING:

    class Backend(Protocol):
        """What a framework adapter provides to mirror the registry."""

        name: str
        #: Whether :meth:`unregister` can undo :meth:`register` (JAX cannot).
        can_unregister: bool

        def check(self, node: NodeDef, previous: NodeDef | None, override: bool) -> None:
            """Raise :class:`RegistrationError` if ``node`` cannot be registered; change nothing."""

        def register(self, node: NodeDef, previous: NodeDef | None, override: bool) -> None:
            """Register ``node`` (``previous`` is the class it replaces under the same name)."""

        def unregister(self, node: NodeDef) -> None:
            """Undo :meth:`register` (only called when :attr:`can_unregister`)."""


_LOCK = RLock()
_BY_CLASS: dict[type, NodeDef] = {}
_BY_NAME: dict[str, NodeDef] = {}
_BACKENDS: list[Backend] = []


def _check_name(name: object, cls: type) -> str:
    if not isinstance(name, str):
        raise RegistrationError(
            f"name= for {cls.__qualname__} must be a str, got {type(name).__name__}; "
            f'use a stable dotted name such as "mypkg.{cls.__qualname__}".'
        )
    bad = (
        not name
        or len(name) > _MAX_NAME_LENGTH
        or not name.isprintable()
        or any(c.isspace() for c in name)
    )
    if bad:
        raise RegistrationError(
            f"name={name!r} for {cls.__qualname__} is not a usable serialized name; use 1 to "
            f"{_MAX_NAME_LENGTH} printable characters without spaces, such as "
            f'"mypkg.{cls.__qualname__}".'
        )
    if name in _RESERVED_NAMES:
        raise RegistrationError(
            f"name={name!r} for {cls.__qualname__} is reserved for a built-in container; "
            f'choose a name of your own, such as "mypkg.{cls.__qualname__}".'
        )
    return name


def register(node: NodeDef, *, override: bool = False) -> None:
    """Register ``node`` everywhere, atomically.

    Raises:
        NameConflictError: the name belongs to another class, or the class is already
            registered with other options.
        RegistrationError: a backend refused the class; nothing was changed anywhere.
    """
    cls = node.cls
    if node.name is not None:
        _check_name(node.name, cls)
    with _LOCK:
        existing = _BY_CLASS.get(cls)
        if existing is not None:
            if existing.options() == node.options():
                return  # the same registration again: nothing to do
            raise NameConflictError(
                f"{node.qualname} is already registered with treeclass (name="
                f"{existing.name!r}, static={list(existing.info.static_fields)!r}, "
                f"return_none_fields={existing.return_none_fields}); a class is registered "
                "once, so register it with one set of options."
            )
        previous: NodeDef | None = None
        if node.name is not None:
            holder = _BY_NAME.get(node.name)
            if holder is not None:
                if not holder.same_definition(node):
                    raise NameConflictError(
                        f"the name {node.name!r} is taken by {holder.qualname}, so "
                        f"{node.qualname} cannot have it; give one of them another name."
                    )
                previous = holder  # a re-run of the same definition: the newest class wins
        for backend in _BACKENDS:
            backend.check(node, previous, override)

        # Commit: embedded registry first (trivially undone), then backends, those that
        # cannot undo a registration (JAX) last.
        _BY_CLASS[cls] = node
        if node.name is not None:
            _BY_NAME[node.name] = node
        _tree.add_node_type(node.node_type)
        node.node_type.name = node.name
        done: list[Backend] = []
        try:
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
                        stacklevel=2,
                    )
            del _BY_CLASS[cls]
            if node.name is not None:
                if previous is not None:
                    _BY_NAME[node.name] = previous
                else:
                    del _BY_NAME[node.name]
            if node.kind == "namedtuple":
                node.node_type.name = None  # still a node, as every namedtuple is
            else:
                _tree.remove_node_type(cls)
            raise


def activate_backend(backend: Backend) -> None:
    """Start mirroring the registry into ``backend`` and register every class so far."""
    with _LOCK:
        if any(b.name == backend.name for b in _BACKENDS):
            return
        _BACKENDS.append(backend)
        for node in list(_BY_CLASS.values()):
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
    """The names of the frameworks treeclass is mirroring its registry into."""
    return tuple(b.name for b in _BACKENDS)


def node_for_class(cls: type) -> NodeDef | None:
    """The :class:`NodeDef` of a registered class, or ``None``."""
    return _BY_CLASS.get(cls)


def node_for_name(name: str) -> NodeDef | None:
    """The :class:`NodeDef` registered under ``name``, or ``None``."""
    return _BY_NAME.get(name)


def registered_nodes() -> Iterator[NodeDef]:
    """Every registered class's :class:`NodeDef`, in registration order."""
    return iter(list(_BY_CLASS.values()))


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
    node = _BY_CLASS.get(cls)
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
    node = _BY_NAME.get(name)
    return None if node is None else node.cls


def is_registered(cls: type) -> bool:
    """Whether ``cls`` is registered with treeclass."""
    return cls in _BY_CLASS


def describe_node(cls: type, aux: Any, parts: list[str]) -> str:
    """Readable form of one node of a :class:`TreeSpec`: ``Point(x=*, y=None, tag='a')``."""
    node = _BY_CLASS.get(cls)
    label = cls.__name__
    if node is None or node.kind == "namedtuple":
        fields: tuple[str, ...] = getattr(cls, "_fields", ())
        if len(fields) == len(parts):
            return f"{label}(" + ", ".join(f"{f}={p}" for f, p in zip(fields, parts)) + ")"
        return f"{label}(" + ", ".join(parts) + ")"
    nones: tuple[str, ...] = aux[0]
    it = iter(parts)
    shown: list[str] = []
    statics = dict(zip(node.info.static_fields, aux[1:]))
    for f in node.info.fields:
        if f.static:
            shown.append(f"{f.name}={statics[f.name]!r}")
        elif f.name in nones:
            shown.append(f"{f.name}=None")
        else:
            shown.append(f"{f.name}={next(it, '?')}")
    return f"{label}(" + ", ".join(shown) + ")"
