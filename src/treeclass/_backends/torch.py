"""PyTorch adapter: treeclass nodes in ``torch.utils._pytree`` and its C++ twin.

Activated by :mod:`treeclass._backends.activation` once ``torch`` is imported. Every class is
registered with torch's Python pytree under its treeclass name as ``serialized_type_name``, with
exact dumpable contexts (tuples stay tuples) and ``GetAttrKey`` paths; torch mirrors it into its
C++ pytree. Beyond ``register_pytree_node``, it checks before changing anything, refuses a name
torch maps to another class, replaces another library's registration only with
``override=True``, moves a name to a re-run class definition, gives unnamed classes a
placeholder name whose use is a clear error (``docs/torch.md``), and makes torch load a class's
``aliases=`` (earlier names) as the class. Also converts torch ``TreeSpec``s to and from the
treespec node list.

torch offers no public way to inspect or undo a registration: each access to its private state
is one small function below, checked against :data:`CHECKED_TORCH_VERSION` and covered by
``tests/test_torch_backend.py``.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable
from typing import Any, Final, NamedTuple

import torch.utils._pytree as pytree

from .._core.codegen import set_tracing_check
from .._core.fields import is_namedtuple_class
from .._core.json import dumps_canonical
from .._core.nodes import NodeType
from .._core.registry import node_for_name, registered_node
from .._core.state import StateCodec
from .._core.tree import TreeSpec
from .._errors import (
    NameConflictError,
    RegistrationError,
    TreespecLoadError,
    UnnamedClassError,
    brief,
)
from .._pickle import rebuild_registered
from .._treespec.convert import from_torch_form, leaf_count_error, nodes_of, skeleton
from .._treespec.format import Node, state_from_bytes
from .activation import complete

__all__ = [
    "BACKEND",
    "CHECKED_TORCH_VERSION",
    "TorchBackend",
    "allow_pickled_instances",
    "nodes_from_spec",
    "spec_from_spec",
]

#: The torch release whose private pytree state this module was checked against.
CHECKED_TORCH_VERSION: Final = "2.13.0"

_NAMESPACE: Final = "torch"  # optree namespace of torch.utils._cxx_pytree
_NAMEDTUPLE: Final = collections.namedtuple  # torch's node type for every namedtuple
_UNNAMED_PREFIX: Final = "<treeclass unnamed "
_SUPERSEDED_PREFIX: Final = "<treeclass superseded "


# --------------------------------------------------------------------------------------------
# Private torch state. Checked against torch 2.13.0 (torch/utils/_pytree.py,
# torch/utils/_cxx_pytree.py): the Python registry is three module-level dicts guarded by
# ``_NODE_REGISTRY_LOCK`` plus ``CONSTANT_NODES``; the C++ one is optree's ``"torch"``
# namespace, filled from ``_cxx_pytree_pending_imports`` when ``torch.utils._cxx_pytree`` is
# first imported.
# --------------------------------------------------------------------------------------------


def _registry_lock() -> Any:
    """The lock around torch's Python registry (private; torch 2.13.0)."""
    return pytree._NODE_REGISTRY_LOCK


def _python_node(cls: type) -> Any:
    """The ``NodeDef`` of ``cls`` in torch's Python registry, or ``None`` (torch 2.13.0)."""
    return pytree.SUPPORTED_NODES.get(cls)


def _serialize_def(cls: type) -> Any:
    """The ``_SerializeNodeDef`` torch keeps for ``cls``, or ``None`` (torch 2.13.0)."""
    return pytree.SUPPORTED_SERIALIZED_TYPES.get(cls)


def _class_for_serialized_name(name: str) -> type | None:
    """The class torch maps ``name`` to when loading, or ``None`` (private; torch 2.13.0)."""
    return pytree.SERIALIZED_TYPE_TO_PYTHON_TYPE.get(name)


#: The aliases (earlier names) this module made torch load as each class.
_ALIASES: dict[type, tuple[str, ...]] = {}


def _aliases_of(cls: type) -> tuple[str, ...]:
    """The aliases of ``cls`` torch maps to it (private map; torch 2.13.0)."""
    held = _ALIASES.get(cls)
    if not held:
        return ()
    return tuple(a for a in held if pytree.SERIALIZED_TYPE_TO_PYTHON_TYPE.get(a) is cls)


def _add_aliases(cls: type, aliases: tuple[str, ...]) -> None:
    """Make torch load each of ``aliases`` as ``cls`` (private; torch 2.13.0).

    torch has no public way to give a class a second name. Its ``treespec_loads`` (which
    ``torch.export.load`` uses) looks a ``serialized_type_name`` up in
    ``SERIALIZED_TYPE_TO_PYTHON_TYPE`` and then uses the class's entry in
    ``SUPPORTED_SERIALIZED_TYPES`` (its ``from_dumpable_context``); a namedtuple's name is
    looked up in the same map. An alias is a second key of that map. Writing goes through
    ``SUPPORTED_SERIALIZED_TYPES`` only, so the class is still written under its name.
    """
    with _registry_lock():
        held = _aliases_of(cls)
        for alias in aliases:
            pytree.SERIALIZED_TYPE_TO_PYTHON_TYPE[alias] = cls
        _ALIASES[cls] = held + tuple(a for a in aliases if a not in held)


def _drop_aliases(cls: type) -> None:
    """Stop torch loading the aliases treeclass gave ``cls`` (private; torch 2.13.0)."""
    with _registry_lock():
        for alias in _ALIASES.pop(cls, ()):
            if pytree.SERIALIZED_TYPE_TO_PYTHON_TYPE.get(alias) is cls:
                del pytree.SERIALIZED_TYPE_TO_PYTHON_TYPE[alias]


def _is_constant(cls: type) -> bool:
    """Whether ``cls`` was registered with ``register_constant`` (private; torch 2.13.0)."""
    return cls in pytree.CONSTANT_NODES


def _pending_cxx(cls: type) -> list[Any]:
    """Registrations of ``cls`` torch holds until ``_cxx_pytree`` is imported (torch 2.13.0).

    Each is ``((cls, flatten_fn, unflatten_fn), kwargs)``.
    """
    return [p for p in pytree._cxx_pytree_pending_imports if p[0][0] is cls]


def _optree() -> Any:
    """The optree module once its import has completed (torch's C++ pytree is built on it).

    ``None`` before, and while another thread is still importing it: a half-imported optree
    lacks the functions used here, and nothing can have been registered with it yet (torch's
    C++ pytree imports optree first). Reached through :data:`sys.modules` so that the adapter
    neither imports optree nor needs its type information.
    """
    return complete("optree")


def _cxx_node(cls: type) -> Any:
    """The optree registry entry of ``cls`` in the ``"torch"`` namespace, or ``None``.

    Entries of optree's global namespace (which torch's lookups fall back to) are not torch's
    and are left alone.
    """
    optree = _optree()
    if optree is None:
        return None  # nothing can have been registered with it
    entry = optree.register_pytree_node.get(cls, namespace=_NAMESPACE)
    if entry is None or getattr(entry, "namespace", None) != _NAMESPACE:
        return None
    return entry


def _is_opaque(cls: type) -> bool:
    """Whether torch treats ``cls`` as an opaque leaf type (private; torch 2.13.0)."""
    try:
        from torch._library.opaque_object import is_opaque_type
    except ImportError:  # pragma: no cover - older or newer torch
        return False
    return bool(is_opaque_type(cls))


class _Snapshot(NamedTuple):
    """Everything torch's two registries hold about one class, to put it back later."""

    cls: type
    node: Any  # pytree.NodeDef | None
    serialize: Any  # pytree._SerializeNodeDef | None
    owns_name: bool  # whether SERIALIZED_TYPE_TO_PYTHON_TYPE maps serialize's name to cls
    constant: bool
    cxx: Any  # optree PyTreeNodeRegistryEntry | None
    pending: tuple[Any, ...]
    aliases: tuple[str, ...] = ()  # treeclass aliases torch maps to cls

    @property
    def empty(self) -> bool:
        return (
            self.node is None and self.serialize is None and self.cxx is None and not self.pending
        )


def _snapshot(cls: type) -> _Snapshot:
    """Read what torch knows about ``cls`` (private; torch 2.13.0)."""
    with _registry_lock():
        serialize = _serialize_def(cls)
        owns = serialize is not None and (
            _class_for_serialized_name(serialize.serialized_type_name) is cls
        )
        return _Snapshot(
            cls,
            _python_node(cls),
            serialize,
            owns,
            _is_constant(cls),
            _cxx_node(cls),
            tuple(_pending_cxx(cls)),
            _aliases_of(cls),
        )


def _remove(cls: type) -> None:
    """Remove ``cls`` from both torch registries, pending C++ ones included (torch 2.13.0)."""
    with _registry_lock():
        _drop_aliases(cls)
        pytree.SUPPORTED_NODES.pop(cls, None)
        serialize = pytree.SUPPORTED_SERIALIZED_TYPES.pop(cls, None)
        if serialize is not None:
            name = serialize.serialized_type_name
            if pytree.SERIALIZED_TYPE_TO_PYTHON_TYPE.get(name) is cls:
                del pytree.SERIALIZED_TYPE_TO_PYTHON_TYPE[name]
        pytree.CONSTANT_NODES.discard(cls)
        pending = pytree._cxx_pytree_pending_imports
        pending[:] = [p for p in pending if p[0][0] is not cls]
        if _cxx_node(cls) is not None:
            _optree().unregister_pytree_node(cls, namespace=_NAMESPACE)


def _restore(snap: _Snapshot) -> None:
    """Make torch's registries hold exactly ``snap`` for its class again (torch 2.13.0)."""
    cls = snap.cls
    _remove(cls)
    with _registry_lock():
        if snap.node is not None:
            pytree.SUPPORTED_NODES[cls] = snap.node
        if snap.serialize is not None:
            pytree.SUPPORTED_SERIALIZED_TYPES[cls] = snap.serialize
            if snap.owns_name:
                pytree.SERIALIZED_TYPE_TO_PYTHON_TYPE[snap.serialize.serialized_type_name] = cls
        if snap.constant:
            pytree.CONSTANT_NODES.add(cls)
        if snap.aliases:
            _add_aliases(cls, snap.aliases)
        pytree._cxx_pytree_pending_imports.extend(snap.pending)
        if snap.cxx is not None:
            entry = snap.cxx
            _optree().register_pytree_node(
                cls,
                entry.flatten_func,
                entry.unflatten_func,
                path_entry_type=entry.path_entry_type,
                namespace=_NAMESPACE,
            )


def _set_serialization(
    cls: type,
    serialized_type_name: str,
    to_dumpable: Callable[[Any], Any],
    from_dumpable: Callable[[Any], Any],
) -> None:
    """Replace only how torch serializes ``cls``, keeping its node (private; torch 2.13.0)."""
    with _registry_lock():
        old = pytree.SUPPORTED_SERIALIZED_TYPES.get(cls)
        if (
            old is not None
            and pytree.SERIALIZED_TYPE_TO_PYTHON_TYPE.get(old.serialized_type_name) is cls
        ):
            del pytree.SERIALIZED_TYPE_TO_PYTHON_TYPE[old.serialized_type_name]
        pytree.SUPPORTED_SERIALIZED_TYPES[cls] = pytree._SerializeNodeDef(
            cls, serialized_type_name, to_dumpable, from_dumpable
        )
        pytree.SERIALIZED_TYPE_TO_PYTHON_TYPE[serialized_type_name] = cls


def _forget_loaded_specs() -> None:
    """Empty the ``lru_cache`` of ``treespec_loads`` (torch 2.13.0).

    Otherwise it keeps returning specs holding a class whose name moved to another one.
    """
    pytree.treespec_loads.cache_clear()


def _dynamo_tracing_check() -> Callable[[], bool] | None:
    """The check that sends generated unflatten functions down their traceable path.

    ``torch.compiler.is_dynamo_compiling`` returns ``False`` when called, and Dynamo folds it
    to ``True`` (``tracing_state_functions`` in ``torch/_dynamo/variables/torch.py``, torch
    2.13.0). It costs ~12 ns per call outside tracing; ``is_compiling()`` costs ~50 ns.
    """
    import importlib

    compiler = importlib.import_module("torch.compiler")  # (not in stubs/: one function)
    check: Callable[[], bool] | None = getattr(compiler, "is_dynamo_compiling", None)
    return check


def _register_namedtuple(cls: type, name: str) -> None:
    """Register a namedtuple by name, privately (torch 2.13.0); Python registry only.

    optree (torch's C++ pytree) treats every namedtuple as a node already.
    """
    pytree._register_namedtuple(cls, serialized_type_name=name)


# --------------------------------------------------------------------------------------------
# The adapter.
# --------------------------------------------------------------------------------------------


def _describe_existing(snap: _Snapshot) -> str:
    if snap.serialize is not None:
        name = snap.serialize.serialized_type_name
        if name == pytree.NO_SERIALIZED_TYPE_NAME_FOUND:
            return "without a serialized_type_name"
        return f"with serialized_type_name={name!r}"
    if snap.cxx is not None or snap.pending:
        return "in its C++ pytree (torch.utils._cxx_pytree) only"
    return "as a pytree node"  # pragma: no cover - a NodeDef always has a _SerializeNodeDef


def _placeholder(prefix: str, cls: type) -> str:
    return f"{prefix}{cls.__module__}.{cls.__qualname__} at {id(cls):#x}>"


def _raise_unnamed(node: NodeType) -> Callable[[Any], Any]:
    def refuse(_context: Any) -> Any:
        node.require_name()
        raise UnnamedClassError(node.qualname)  # pragma: no cover - require_name raised

    return refuse


def _raise_superseded(previous: NodeType) -> Callable[[Any], Any]:
    message = (
        f"{previous.qualname} was defined again (its class statement ran a second time, as in "
        f"a notebook or after importlib.reload), and the name {previous.name!r} now belongs to "
        "the new class; this object is an instance of the old class, so rebuild it from the "
        "new class before serializing it."
    )

    def refuse(_context: Any) -> Any:
        raise UnnamedClassError(message)

    return refuse


def _codec(node: NodeType) -> StateCodec:
    assert node.codec is not None  # every registered class has one
    return node.codec


def _to_dumpable(node: NodeType) -> Callable[[Any], str]:
    torch_getstate = _codec(node).torch_getstate

    def to_dumpable_context(context: Any) -> str:
        return dumps_canonical(torch_getstate(context))

    return to_dumpable_context


def _from_dumpable(node: NodeType) -> Callable[[Any], Any]:
    torch_setstate = _codec(node).torch_setstate

    def from_dumpable_context(dumpable: Any) -> Any:
        if not isinstance(dumpable, str):
            raise TreespecLoadError(
                f"the context of {node.name!r} ({node.qualname}) in this treespec is a "
                f"{type(dumpable).__name__}, not the JSON string treeclass writes; the "
                "document was not written by treeclass or has been edited."
            )
        return torch_setstate(state_from_bytes(node, dumpable))

    return from_dumpable_context


def _holds_for_treeclass(alias: str, holder: type) -> bool:
    """Whether torch maps ``alias`` to ``holder`` because treeclass does too.

    The registry lets a re-run of a class definition take an alias over from the earlier
    definition; torch's map then still points at the earlier class.
    """
    held = node_for_name(alias)
    return held is not None and held.type is holder


def _put_back(moved: dict[str, type]) -> None:
    """Map each alias in ``moved`` to its earlier class again (undoing a takeover)."""
    for alias, holder in moved.items():
        _add_aliases(holder, (alias,))


def _superseded_holder(node: NodeType, previous: NodeType | None) -> NodeType | None:
    """The earlier definition of ``node``'s class that torch still maps its name to.

    ``previous`` as the registry passes it; when the backend is activated after both
    definitions ran (a notebook cell run twice before ``import torch``), the registry passes
    ``None``, and the earlier definition is found from torch's map instead.
    """
    if previous is not None or node.name is None:
        return previous
    holder = _class_for_serialized_name(node.name)
    if holder is None or holder is node.type:
        return None
    held = registered_node(holder)
    if (
        held is not None
        and held.name == node.name
        and held.origin is not None
        and node.origin is not None
        and node.origin.reruns(held.origin)
        and node_for_name(node.name) is node
    ):
        return held
    return None


class TorchBackend:
    """Mirrors the treeclass registry into ``torch.utils._pytree`` (and its C++ twin)."""

    name = "torch"
    can_unregister = True

    def __init__(self) -> None:
        # cls -> what torch held for it before treeclass registered it (a foreign
        # registration replaced with override=True), and the previous definition's
        # serialization whose name was moved to it; both are put back by unregister().
        self._undo: dict[type, tuple[_Snapshot | None, _Snapshot | None]] = {}
        # cls -> the classes torch mapped the aliases it took to before (a re-run class's
        # earlier definition that kept its name, the registry allowing it); put back too.
        self._moved: dict[type, dict[str, type]] = {}

    def check(self, node: NodeType, previous: NodeType | None, override: bool) -> None:
        """Raise a :class:`RegistrationError` if torch cannot take ``node``; change nothing.

        Raises:
            NameConflictError: torch already maps the name to another class.
            RegistrationError: torch already has a registration for the class (and
                ``override`` is false), or treats the class as an opaque leaf.
        """
        cls = node.type
        previous = _superseded_holder(node, previous)
        if node.name is not None:
            holder = _class_for_serialized_name(node.name)
            if (
                holder is not None
                and holder is not cls
                and not (previous is not None and holder is previous.type)
            ):
                raise NameConflictError(
                    f"PyTorch's pytree already maps serialized_type_name {node.name!r} to "
                    f"{holder.__module__}.{holder.__qualname__}, so {node.qualname} cannot be "
                    "registered under that name (torch would silently load one class as the "
                    "other); give it another name=."
                )
        for alias in node.aliases:
            holder = _class_for_serialized_name(alias)
            if (
                holder is not None
                and holder is not cls
                and not (previous is not None and holder is previous.type)
                and not _holds_for_treeclass(alias, holder)
            ):
                raise NameConflictError(
                    f"PyTorch's pytree already maps serialized_type_name {alias!r} to "
                    f"{holder.__module__}.{holder.__qualname__}, so {node.qualname} cannot have "
                    "it as an alias (torch would load one class as the other); remove it from "
                    "aliases=."
                )
        snap = _snapshot(cls)
        if not snap.empty and not override:
            raise RegistrationError(
                f"{node.qualname} is already registered with PyTorch's pytree "
                f"{_describe_existing(snap)}, by another library (transformers registers every "
                "ModelOutput subclass that way); pass override=True to register_dataclass() or "
                "pytree_dataclass() to replace that registration with treeclass's, in "
                "torch.utils._pytree and torch.utils._cxx_pytree."
            )
        if _is_opaque(cls):
            raise RegistrationError(
                f"{node.qualname} is registered with torch as an opaque object type, which "
                "torch requires to stay a pytree leaf; it cannot also be a treeclass node."
            )

    def register(self, node: NodeType, previous: NodeType | None, override: bool) -> None:
        """Register ``node`` with torch; on failure torch is left as it was.

        ``check`` has passed. A foreign registration of the class is replaced (``override``);
        ``previous``, an earlier definition of the same class, loses the name to ``node``.
        """
        cls = node.type
        previous = _superseded_holder(node, previous)
        foreign = _snapshot(cls)
        old_prev = _snapshot(previous.type) if previous is not None else None
        moved: dict[str, type] = {}
        for alias in node.aliases:
            holder = _class_for_serialized_name(alias)
            if holder is not None and holder is not cls:
                moved[alias] = holder
        try:
            if not foreign.empty:
                _remove(cls)
            if previous is not None and previous.kind == "namedtuple":
                # torch writes a namedtuple's name without asking its to_dumpable_context,
                # so the old class must lose its registration by name altogether.
                _remove(previous.type)
            elif previous is not None and _serialize_def(previous.type) is not None:
                _set_serialization(
                    previous.type,
                    _placeholder(_SUPERSEDED_PREFIX, previous.type),
                    _raise_superseded(previous),
                    _raise_superseded(previous),
                )
                _drop_aliases(previous.type)  # the re-run declares its own
            self._register(node)
            if node.aliases:
                _add_aliases(cls, node.aliases)
        except BaseException:
            _restore(foreign)
            if old_prev is not None:
                _restore(old_prev)
            _put_back(moved)
            raise
        if moved:
            self._moved[cls] = moved
        if previous is not None or not foreign.empty or moved:
            _forget_loaded_specs()
        if previous is not None or not foreign.empty:
            self._undo[cls] = (None if foreign.empty else foreign, old_prev)

    def _register(self, node: NodeType) -> None:
        cls = node.type
        if node.kind == "namedtuple":
            if node.name is not None:
                _register_namedtuple(cls, node.name)
            return
        if node.name is None:
            serialized_type_name = _placeholder(_UNNAMED_PREFIX, cls)
            to_dumpable: Callable[[Any], Any] = _raise_unnamed(node)
            from_dumpable: Callable[[Any], Any] = _raise_unnamed(node)
        else:
            serialized_type_name = node.name
            to_dumpable = _to_dumpable(node)
            from_dumpable = _from_dumpable(node)
        tracing = _dynamo_tracing_check()
        # The embedded registry's unflatten (which optree shares) is traced too when users
        # call treeclass.tree_map or optree.tree_map inside compiled code.
        set_tracing_check(node.unflatten, tracing)
        functions = node.bind("torch", pytree.GetAttrKey, family="torch", _tracing=tracing)
        pytree.register_pytree_node(
            cls,
            functions["flatten"],
            functions["unflatten"],
            serialized_type_name=serialized_type_name,
            to_dumpable_context=to_dumpable,
            from_dumpable_context=from_dumpable,
            flatten_with_keys_fn=functions["flatten_with_keys"],
        )

    def unregister(self, node: NodeType) -> None:
        """Undo :meth:`register`: put back what torch held before."""
        foreign, old_prev = self._undo.pop(node.type, (None, None))
        moved = self._moved.pop(node.type, {})
        _remove(node.type)
        if foreign is not None:
            _restore(foreign)
        if old_prev is not None:
            _restore(old_prev)
        _put_back(moved)
        if foreign is not None or old_prev is not None or moved:
            _forget_loaded_specs()


#: The weights-only allow-list entry for instances pickled by name: the global
#: ``treeclass._pickle.rebuild_by_name`` stands for ``rebuild_registered``, which only ever builds
#: a class registered in this process and never imports (torch 2.13.0:
#: ``torch.serialization.add_safe_globals`` takes ``(function, name)`` pairs).
_WEIGHTS_ONLY_ENTRY: Final = (rebuild_registered, "treeclass._pickle.rebuild_by_name")
_ALLOW_LOCK: Final = threading.Lock()


def _remove_safe_global(entry: tuple[Callable[..., Any], str]) -> None:
    """Take ``entry`` off torch's weights-only allow-list (private; torch 2.13.0).

    torch has no public way to remove one entry; ``_remove_safe_globals`` is what its own
    ``torch.serialization.safe_globals`` context manager calls on exit.
    """
    import importlib

    unpickler = importlib.import_module("torch._weights_only_unpickler")
    unpickler._remove_safe_globals([entry])


def allow_pickled_instances(allow: bool) -> bool:
    """Put on (or take off) torch's weights-only allow-list the global of by-name pickles.

    Instances of named classes pickle as calls of ``treeclass._pickle.rebuild_by_name``
    (:mod:`treeclass._pickle`). On the allow-list, ``torch.load(weights_only=True)`` (and so
    ``torch.export.load``'s first reading of example inputs) rebuilds them by their registered
    names. Returns whether the entry was on the list before. Public as
    :func:`treeclass.torch.allow_weights_only`.
    """
    from torch import serialization

    with _ALLOW_LOCK:
        was = _WEIGHTS_ONLY_ENTRY in serialization.get_safe_globals()
        if allow and not was:
            serialization.add_safe_globals([_WEIGHTS_ONLY_ENTRY])
        elif not allow and was:
            _remove_safe_global(_WEIGHTS_ONLY_ENTRY)
        return bool(was)


#: The one adapter instance the registry mirrors into.
BACKEND: Final = TorchBackend()
allow_pickled_instances(True)  # on by default: docs/torch.md, "torch.load(weights_only=True)"


# --- structures ---------------------------------------------------------------------------


def _read(t: Any) -> tuple[Any, Any, Any, bool] | None:
    cls = t.type
    if cls is None:
        return None
    context = t.context
    if cls is _NAMEDTUPLE:  # torch's type for every namedtuple; the context is the class
        cls = context
    # torch 2.13 deprecates ``children_specs`` for ``children()``; older releases lack it.
    children = t.children() if callable(getattr(t, "children", None)) else t.children_specs
    k = len(children)
    converted = from_torch_form(cls, context, children)
    if converted is not None:
        context, with_nones = converted
        if with_nones is not children:
            return (cls, context, with_nones, False)
    return (cls, context, children, t.num_leaves == k and t.num_nodes == k + 1)


def nodes_from_spec(spec: Any) -> list[Node]:
    """The treespec node list of a ``torch.utils._pytree.TreeSpec``.

    A torch ``None`` is a leaf, and so a leaf in the node list.

    Raises:
        UnnamedClassError: a node type is not registered with treeclass, or has no name.
        StructureMismatchError: a dict's keys are not in sorted order.
    """
    return nodes_of("torch", spec, _read)


def _is_node(t: type) -> bool:
    return t in pytree.SUPPORTED_NODES or is_namedtuple_class(t)


def _none_leaves(spec: TreeSpec) -> int:
    """How many ``None`` nodes of ``spec`` torch would see as leaves.

    All but the ``None`` fields of classes registered with ``return_none_fields=False``,
    which torch keeps out of its children.
    """
    count = 0
    stack: list[list[Any]] = []  # [parent node type, children left]
    for e in spec._entries:
        parent = stack[-1][0] if stack else None
        if e is not None and e[0].type is type(None):
            kept_out = (
                parent is not None
                and parent.kind in ("dataclass", "attrs")
                and not parent.return_none_fields
            )
            count += not kept_out
        if stack:
            stack[-1][1] -= 1
        if e is not None and not e[3] and e[2]:
            stack.append([e[0], e[2]])
        while stack and not stack[-1][1]:
            stack.pop()
    return count


def spec_from_spec(spec: TreeSpec) -> Any:
    """The ``torch.utils._pytree.TreeSpec`` of a treeclass ``TreeSpec``.

    Raises:
        TreespecLoadError: the tree has a ``None`` node where torch would see a leaf (only the
            ``None`` fields of a class registered with ``return_none_fields=False`` stay out
            of torch's leaves), or torch does not see the same nodes.
    """
    if _none_leaves(spec):
        raise TreespecLoadError(
            f"the treespec has a None node ({brief(spec, 200)}) where torch's pytree would "
            "see a leaf (torch treats None as a leaf), so a torch TreeSpec would have more "
            "leaves than the document and the leaves flattened from the original tree "
            "would not fit it. Load it with to='jax', 'optree' or None; or keep None out "
            "of the tree before flattening (None fields of a treeclass class registered "
            "with return_none_fields=False, the default, are no leaves in torch)."
        )
    treespec = pytree.tree_structure(skeleton(spec))
    if treespec.num_leaves != spec.num_leaves:
        raise leaf_count_error("torch", spec, treespec.num_leaves, _is_node)
    return treespec
