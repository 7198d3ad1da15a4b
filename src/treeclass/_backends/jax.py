"""The JAX adapter: every treeclass class is a ``jax.tree_util`` node and a ``jax.export`` one.

Classes are registered with ``register_pytree_with_keys`` (``GetAttrKey`` paths, an unflatten
that never runs ``__init__`` and starts with ``hash(aux)``, naming an unhashable static field:
``docs/jax.md``), or, where JAX's C++ node does the same (:func:`native_data_fields`), with
``register_dataclass``; named classes and namedtuples also with ``jax.export``, the auxdata as the
canonical JSON of their state. The registry decides every name; ``jax.export`` has no public
lookup, unregister or alias, hence the private accessors below (``docs/contributing.md``). An
unnamed class has no jax.export registration: JAX's ``Exported.serialize()`` raises its own
error, ``treeclass.treespec_dumps`` of the ``in_tree`` an :class:`~treeclass.UnnamedClassError`.
"""

from __future__ import annotations

import functools
import importlib
import sys
from collections.abc import Callable, Iterable
from typing import Any, Final

import jax.export
import jax.tree_util

from .._core.nodes import NodeType
from .._core.registry import Change, Held, Undo, nothing
from .._core.state import Layout, fixed_children_error
from .._core.tree import TreeSpec, spec_depth
from .._errors import (
    RegistrationError,
    TreespecLoadError,
    UnnamedClassError,
    qualname,
    unhashable_static,
)
from .._treespec.convert import leaf_count_error, nodes_of, skeleton
from .._treespec.format import Node, aux_to_bytes, state_from_bytes

__all__ = [
    "BACKEND",
    "CHECKED_JAX_VERSION",
    "NATIVE_MAX_FIELDS",
    "JaxBackend",
    "native_data_fields",
    "nodes_from_spec",
    "register_callbacks",
    "spec_from_spec",
]

#: The jax version the private-module helpers of this module were checked against.
CHECKED_JAX_VERSION: Final = "0.10.2"
#: Deepest structure ``treespec_loads(..., to="jax")`` asks JAX to build: near 1000 levels jax
#: 0.10.2's C++ pytree fails with a SystemError that breaks the interpreter.
MAX_DEPTH: Final = 500

_REGISTERED_BY_OLDER_TREECLASS: Final = (
    "{cls} was already registered with JAX by an earlier treeclass registration with other "
    "options, and JAX cannot replace a registration; restart the interpreter to register it "
    "with new options."
)
#: What hashes static values in JAX (for :func:`~treeclass._errors.unhashable_static`).
_JAX_HASHES: Final = "JAX keeps static values in the treedefs it caches compiled code under"

#: The most fields a class registered as JAX's C++ dataclass node has (see
#: :func:`native_data_fields`): with more, flatten + unflatten is slower that way than through
#: the generated callbacks (measured with jax 0.10.2, ``benchmarks/bench_jax_deep.py``).
NATIVE_MAX_FIELDS: Final = 3

#: Classes this module registered with jax.tree_util: JAX cannot unregister, so a later
#: attempt after a rollback reuses them (with the same options).
_TREE_UTIL: dict[type, NodeType] = {}
#: ``equinox.Module`` subclasses registered with treeclass: JAX keeps equinox's registration
#: (it cannot replace one), so treeclass adds them to neither ``jax.tree_util`` nor ``jax.export``.
_LEFT_TO_EQUINOX: set[type] = set()
_EQUINOX_STRUCTURE: Final = (
    "{cls} is an equinox.Module: JAX flattens it with equinox's own registration, whose node "
    "data treeclass cannot write, so a JAX structure holding it cannot be serialized (nor can "
    "jax.export serialize it). Use the tree itself (tc.tree_structure(tree), tc.save, "
    "treeclass.orbax), where the class is treeclass's node under its name."
)


# --- private JAX internals: one accessor per fact (docs/contributing.md) ----------------------


def _export_registries() -> tuple[dict[type, Any], dict[str, Any]]:
    """``jax.export``'s type -> (name, ...) and name -> (type, ...) registries (private)."""
    module = sys.modules.get("jax._src.export._export")
    if module is None:  # pragma: no cover - jax.export imports it
        module = importlib.import_module("jax._src.export._export")
    by_type: dict[type, Any] = module.serialization_registry
    by_name: dict[str, Any] = module.deserialization_registry
    return by_type, by_name


def class_for_serialized_name(name: str) -> type | None:
    """The class jax.export loads ``name`` as, or ``None``."""
    entry = _export_registries()[1].get(name)
    return None if entry is None else entry[0]


def _drop_export_name(name: str, cls: type) -> None:
    """Make jax.export neither write ``cls`` as ``name`` nor load ``name`` as ``cls``."""
    by_type, by_name = _export_registries()
    entry = by_type.get(cls)
    if entry is not None and entry[0] == name:
        del by_type[cls]
    entry = by_name.get(name)
    if entry is not None and entry[0] is cls:
        del by_name[name]


def _add_export_alias(alias: str, name: str) -> None:
    """Make jax.export load ``alias`` as the class registered under ``name`` (never write it)."""
    _, by_name = _export_registries()
    by_name[alias] = by_name[name]


_Snapshot = tuple[dict[Any, Any], dict[Any, Any]]
#: What a snapshot holds for a key the registry did not have.
_ABSENT: Final = object()


def _export_snapshot(types: Iterable[type], names: Iterable[str]) -> _Snapshot:
    """The entries of ``types`` and ``names`` in jax.export's registries (or their absence).

    Only those keys: a registration touches no others, and copying the whole registries
    would cost time that grows with every class registered.
    """
    by_type, by_name = _export_registries()
    return (
        {t: by_type.get(t, _ABSENT) for t in types},
        {n: by_name.get(n, _ABSENT) for n in names},
    )


def _export_restore(saved: _Snapshot) -> None:
    """Put the entries :func:`_export_snapshot` saw back exactly as they were."""
    registries: tuple[dict[Any, Any], dict[Any, Any]] = _export_registries()
    for registry, entries in zip(registries, saved):
        for key, value in entries.items():
            if value is _ABSENT:
                registry.pop(key, None)
            else:
                registry[key] = value


def _equinox_module(cls: type) -> bool:
    """Whether ``cls`` is an ``equinox.Module`` subclass (equinox is not imported for it)."""
    equinox = sys.modules.get("equinox")
    module = getattr(equinox, "Module", None)
    return isinstance(module, type) and isinstance(cls, type) and issubclass(cls, module)


def _is_jax_tree_node(cls: type) -> bool:
    """Whether ``cls`` is registered with ``jax.tree_util`` (built-in types included).

    ``is_tree_node`` is public in jax 0.10.2; older jax has the private ``_registry``.
    """
    is_tree_node: Callable[[type], bool] | None = getattr(jax.tree_util, "is_tree_node", None)
    if is_tree_node is not None:
        return is_tree_node(cls)
    module = importlib.import_module("jax._src.tree_util")
    return cls in module._registry


# --- the backend --------------------------------------------------------------------------


class _Callbacks:
    """A class's callbacks in JAX that are not generated (one small object per class)."""

    __slots__ = ("node",)

    def __init__(self, node: NodeType) -> None:
        self.node = node

    def check_aux(self, aux: Any) -> None:
        """Raise :class:`~treeclass.UnhashableStaticError` for the first unhashable static."""
        for field, value in zip(self.node.static_fields, aux):
            try:
                hash(value)
            except TypeError:
                raise unhashable_static(self.node.qualname, field, value, _JAX_HASHES) from None

    def serialize(self, aux: Any) -> bytes:
        return aux_to_bytes(self.node, aux)

    def deserialize(self, data: bytes) -> Any:
        return _deserialize_aux(self.node, data)

    def from_children(self, aux: Any, children: Any) -> Any:
        return _from_children(self.node, aux, children)


def native_data_fields(node: NodeType) -> tuple[str, ...] | None:
    """The data fields to register ``node``'s class with as JAX's C++ dataclass node, or ``None``.

    JAX's C++ node (``jax.tree_util.register_dataclass``) flattens by reading the fields in C++
    and unflattens with ``cls(**{field: child})``, calling no treeclass code. That is what
    treeclass's own JAX unflatten does, with the same result, only for a class that

    - rebuilds through ``__init__`` (``unflatten_calls_init=True``): any other class is rebuilt
      without running ``__init__``, ``__post_init__`` or validators;
    - has no static field: treeclass's unflatten checks that static values are hashable
      (:class:`UnhashableStaticError`), and the C++ node would check nothing;
    - has every field taken by ``__init__`` under its own name (no ``init=False`` field, no
      attrs alias): the C++ node passes each field by its name and sets nothing afterwards.

    Its key paths (``GetAttrKey``), leaves, ``None`` children and node data (the empty tuple
    of static values) are the same either way. It is taken only where it is faster: for at
    most :data:`NATIVE_MAX_FIELDS` fields (JAX's C++ ``cls(**kwargs)`` costs more per field
    than the generated unflatten's call; ``docs/jax.md`` has the measurements).
    """
    info = node.info
    if info is None or info.rebuild != "init" or info.static_fields:
        return None
    if len(info.fields) > NATIVE_MAX_FIELDS:
        return None
    if not all(f.init and f.alias == f.name for f in info.fields):
        return None
    return info.data_fields


def _tree_util_options(node: NodeType) -> tuple[Any, ...]:
    """What ``node``'s ``jax.tree_util`` callbacks depend on (a ``None`` field is a child)."""
    rebuild = None if node.info is None else node.info.rebuild
    return (node.static_fields, rebuild, native_data_fields(node))


class _Padded:
    """Auxdata of a saved node that lacks some of today's data fields (``None`` children).

    What :func:`_deserialize_aux` returns for a state written by a version of the class
    without them; :func:`_from_children` adds the ``None`` children. A ``None`` child has no
    leaves in JAX, so the compiled program's inputs are unchanged.
    """

    __slots__ = ("aux", "present")

    def __init__(self, aux: Any, present: tuple[bool, ...]) -> None:
        self.aux = aux
        self.present = present


def _deserialize_aux(node: NodeType, data: bytes) -> Any:
    """The auxdata of a node of a serialized function, evolved as the class says.

    Raises:
        TreespecLoadError: the saved node's children are not one per data field today (see
            :func:`~treeclass._core.state.fixed_children_error`).
    """
    aux, plan = node.load_state(state_from_bytes(node, data))
    if isinstance(plan, Layout):
        what = "the serialized function"
        raise fixed_children_error(node.qualname, plan.dropped, plan.filled, what)
    if plan is not None:
        return _Padded(aux, plan)
    return aux


def _from_children(node: NodeType, aux: Any, children: Any) -> Any:
    """Build a node of a deserialized function, adding the ``None`` children it lacks."""
    if aux.__class__ is _Padded:
        given = iter(children)
        full = [next(given) if present else None for present in aux.present]
        return node.unflatten(aux.aux, full)
    return node.unflatten(aux, list(children))


class JaxBackend:
    """Mirrors the treeclass registry into ``jax.tree_util`` and ``jax.export``.

    ``can_unregister`` is ``False``: JAX cannot undo a pytree registration, so the registry
    adds classes to JAX last.
    """

    name: str = "jax"
    can_unregister: bool = False

    def check(self, change: Change) -> list[Held]:
        """Report what JAX holds of the class and its names that treeclass did not register.

        An ``equinox.Module`` subclass is accepted: JAX keeps equinox's registration of it.

        Raises:
            RegistrationError: treeclass registered the class with ``jax.tree_util`` before,
                with other options (a registration that was rolled back).
        """
        node = change.node
        cls = node.type
        held: list[Held] = []
        if node.kind != "namedtuple":
            ours = _TREE_UTIL.get(cls)
            if ours is not None:
                if _tree_util_options(ours) != _tree_util_options(node):
                    raise RegistrationError(
                        _REGISTERED_BY_OLDER_TREECLASS.format(cls=node.qualname)
                    )
            elif _is_jax_tree_node(cls):
                if _equinox_module(cls):
                    return held  # JAX keeps equinox's registration; see _LEFT_TO_EQUINOX
                where = "JAX's pytree (jax.tree_util, flax.struct, equinox, ...)"
                held.append((None, cls, where))
        if change.name is None:
            return held
        by_type, by_name = _export_registries()
        entry = by_type.get(cls)
        if entry is not None and entry[0] != change.name:
            held.append((None, cls, f"jax.export (serialized_name={entry[0]!r})"))
        for name in change.names:
            entry = by_name.get(name)
            if entry is not None:
                held.append((name, entry[0], "jax.export"))
        return held

    def add(self, change: Change) -> Undo:
        """Add the class to ``jax.tree_util`` and, under its names, to ``jax.export``.

        All or nothing in jax.export; the undo puts jax.export back, but the class stays a
        ``jax.tree_util`` node.
        """
        node = change.node
        cls = node.type
        if cls in _LEFT_TO_EQUINOX or (
            node.kind != "namedtuple"
            and cls not in _TREE_UTIL
            and _equinox_module(cls)
            and _is_jax_tree_node(cls)
        ):
            _LEFT_TO_EQUINOX.add(cls)
            return nothing
        if node.kind != "namedtuple" and cls not in _TREE_UTIL:
            _register_tree_util(node)
        if change.name is None and not change.drops:
            return nothing
        # All or nothing: else saved artifacts could load nowhere.
        saved = _export_snapshot(
            (cls, *(holder for _, holder in change.drops)),
            (*change.names, *(name for name, _ in change.drops)),
        )
        try:
            for name, holder in change.drops:
                _drop_export_name(name, holder)
            if change.name is not None:
                _add_names(change, change.name)
        except BaseException:
            _export_restore(saved)
            raise
        return functools.partial(_export_restore, saved)

    def __repr__(self) -> str:
        return "<treeclass JAX backend>"


def _register_tree_util(node: NodeType) -> None:
    """Register ``node``'s class with ``jax.tree_util``.

    As JAX's C++ dataclass node where that does the same (:func:`native_data_fields`), else
    with treeclass's generated callbacks.
    """
    cls = node.type
    data_fields = native_data_fields(node)
    if data_fields is not None:
        jax.tree_util.register_dataclass(cls, data_fields=list(data_fields), meta_fields=[])
    else:
        register_callbacks(node)
    _TREE_UTIL[cls] = node


def register_callbacks(node: NodeType) -> None:
    """Register ``node``'s class with ``jax.tree_util`` by treeclass's generated callbacks."""
    functions = node.bind(
        "jax",
        jax.tree_util.GetAttrKey,
        functions=("flatten_with_keys", "unflatten_hashed"),
        _check_aux=_Callbacks(node).check_aux,
    )
    jax.tree_util.register_pytree_with_keys(
        node.type,
        functions["flatten_with_keys"],
        functions["unflatten_hashed"],
        flatten_func=node.flatten,
    )


def _add_names(change: Change, name: str) -> None:
    """Register the class under ``name`` in jax.export (unless it is already) and its aliases."""
    node = change.node
    cls = node.type
    by_type, _ = _export_registries()
    entry = by_type.get(cls)
    if entry is None or entry[0] != name:
        if node.kind == "namedtuple":
            jax.export.register_namedtuple_serialization(cls, serialized_name=name)
        else:
            callbacks = _Callbacks(node)
            jax.export.register_pytree_node_serialization(
                cls,
                serialized_name=name,
                serialize_auxdata=callbacks.serialize,
                deserialize_auxdata=callbacks.deserialize,
                from_children=callbacks.from_children,
            )
    for alias in change.aliases:
        _add_export_alias(alias, name)


#: The adapter object the registry holds.
BACKEND: Final = JaxBackend()


# --- structures ---------------------------------------------------------------------------


def _read(t: Any) -> tuple[Any, Any, Any, bool] | None:
    nd = t.node_data()
    if nd is None:
        return None
    if nd[0] in _LEFT_TO_EQUINOX:
        raise UnnamedClassError(_EQUINOX_STRUCTURE.format(cls=qualname(nd[0])))
    n_leaves: int = t.num_leaves
    if t.num_nodes - 1 == n_leaves:  # every child is a leaf: no need to split it up
        return (*nd, range(n_leaves), True)
    return (*nd, t.children(), False)


def nodes_from_spec(treedef: Any) -> list[Node]:
    """The treespec node list of a JAX ``PyTreeDef`` (read without unflattening anything).

    Raises:
        UnnamedClassError: a node type is not registered with treeclass, or has no name.
        UnserializableStaticError: a static value has no JSON form.
    """
    return nodes_of("JAX", treedef, _read)


def spec_from_spec(spec: TreeSpec) -> Any:
    """The JAX ``PyTreeDef`` of a treeclass ``TreeSpec``.

    Raises:
        TreespecLoadError: JAX does not see the same nodes (a class it does not know).
    """
    depth = spec_depth(spec)
    if depth > MAX_DEPTH:
        raise TreespecLoadError(
            f"the treespec nests {depth} levels deep; JAX builds structures of at most about "
            f"{MAX_DEPTH} levels reliably (deeper, jax 0.10's C++ pytree fails with a "
            "SystemError that leaves the interpreter broken), so treeclass does not ask it to. "
            "Load it with to=None."
        )
    treedef = jax.tree_util.tree_structure(skeleton(spec))
    if treedef.num_leaves != spec.num_leaves:
        raise leaf_count_error("JAX", spec, treedef.num_leaves, _is_jax_tree_node)
    return treedef
