"""The JAX adapter: every treeclass class is a ``jax.tree_util`` node and a ``jax.export`` one.

Activated by :mod:`treeclass._hooks` once ``jax`` is imported. Classes are registered with
``register_pytree_with_keys`` (``GetAttrKey`` paths, the generated flatten as ``flatten_func``,
an unflatten that never runs ``__init__``); named classes and namedtuples also with
``jax.export``'s serialization, the auxdata as the canonical JSON of their state. JAX never
hashes auxdata itself, so the unflatten JAX calls starts with ``hash(aux)`` and names the
unhashable static field (``docs/jax.md``). Also converts ``PyTreeDef``s to and from the
treespec node list.

``jax.export`` has no public way to look up or drop a serialization registration, nor to give
one a second name (a class's ``aliases=``, loaded as the class): each access to ``jax._src`` is
one small function below, checked against :data:`CHECKED_JAX_VERSION` and covered by
``tests/test_jax_backend.py``.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from typing import Any, Final, NoReturn

import jax.export
import jax.tree_util

from .._convert import leaf_count_error, nodes_of, skeleton
from .._errors import (
    RegistrationError,
    TreespecLoadError,
    UnhashableStaticError,
)
from .._format import Node, aux_to_bytes, state_from_bytes
from .._nodes import NodeType
from .._state import Layout
from .._tree import TreeSpec, spec_depth

__all__ = ["BACKEND", "CHECKED_JAX_VERSION", "JaxBackend", "nodes_from_spec", "spec_from_spec"]

#: The jax version the private-module helpers of this module were checked against.
CHECKED_JAX_VERSION: Final = "0.10.2"
#: Deepest structure ``treespec_loads(..., to="jax")`` asks JAX to build. jax 0.10.2's C++
#: pytree recurses per level: near the interpreter's recursion limit (1000 levels) it fails with
#: a SystemError that leaves the interpreter unable to run Python code at exit.
MAX_DEPTH: Final = 500

_ALREADY_A_JAX_NODE: Final = (
    "{cls} is already a JAX pytree node, registered outside treeclass (by "
    "jax.tree_util.register_pytree_node / register_dataclass, flax.struct, equinox, ...). JAX "
    "cannot replace a registration (override= only applies to PyTorch), so treeclass cannot "
    "make it a treeclass node; remove the other registration, or register a subclass with "
    "treeclass instead."
)
_REGISTERED_BY_OLDER_TREECLASS: Final = (
    "{cls} was already registered with JAX by an earlier treeclass registration with other "
    "options, and JAX cannot replace a registration; restart the interpreter to register it "
    "with new options."
)
_TYPE_HAS_EXPORT_NAME: Final = (
    "{cls} already has a jax.export serialization registration (serialized_name={taken!r}) "
    "made outside treeclass, so treeclass cannot register it as {name!r}; remove the other "
    "registration, or register the class without name=."
)
_NAME_TAKEN_IN_EXPORT: Final = (
    "the name {name!r} of {cls} is already taken in jax.export by {owner} (registered outside "
    "treeclass); give {cls} another name=."
)
_ALIAS_TAKEN_IN_EXPORT: Final = (
    "the alias {name!r} of {cls} is already a name in jax.export, of {owner} (registered "
    "outside treeclass), so jax.export would not load it as {cls}; remove it from aliases=."
)
_UNHASHABLE_STATIC: Final = (
    "static field {field!r} of {cls} holds an unhashable {type} ({value}); JAX keeps static "
    "values in the treedefs it caches compiled code under, so they must be hashable. Use a "
    "tuple or frozenset instead of a list or set, a tuple of pairs instead of a dict, or make "
    "{field!r} a data field (a child) if it holds arrays."
)

# Classes this module registered with jax.tree_util, and names it registered with
# jax.export. JAX cannot unregister, so these outlive a treeclass registration that was
# rolled back; they tell our own earlier registrations apart from other libraries'.
_TREE_UTIL: dict[type, NodeType] = {}
_EXPORT_NAMES: dict[str, type] = {}
#: Aliases (earlier names) this module made jax.export load, -> their class.
_EXPORT_ALIASES: dict[str, type] = {}
#: Classes holding a refusing jax.export registration of ours -> its placeholder name.
_PLACEHOLDERS: dict[type, str] = {}

#: How the serialized names of refusing registrations start. They contain spaces, which a
#: treeclass ``name=`` cannot, and the class's ``id``, so they collide with no real name.
_PLACEHOLDER_PREFIX: Final = "<treeclass refuses "
_UNNAMED: Final = (
    "{cls} has no serialized name, so jax.export cannot write it into a serialized "
    "function (Exported.serialize()); register the class with a stable name, e.g. "
    '@tc.pytree_dataclass(name="mypkg.{short}") or tc.register_dataclass(cls, '
    'name="mypkg.{short}"), and import its module in the loading process too.'
)
_STALE: Final = (
    "{cls} is an earlier definition of the class registered as {name!r}: its definition was "
    "run again (a notebook cell, importlib.reload) and the name now belongs to the new class, "
    "so jax.export cannot write this object; rebuild the object from the current class "
    "(e.g. with its constructor, after the re-run) and export again."
)
_PLACEHOLDER_IN_FILE: Final = (
    "this serialized function names {name!r}, a placeholder treeclass never writes; the "
    "file was not written by jax.export with treeclass, or was edited."
)


# --- private JAX internals: one small function per access, each covered by a test -------


def _export_registries() -> tuple[dict[type, Any], dict[str, Any]]:
    """``jax.export``'s type -> (name, ...) and name -> (type, ...) registries.

    Private: ``jax._src.export._export.serialization_registry`` and
    ``deserialization_registry`` (checked with jax 0.10.2).
    """
    module = importlib.import_module("jax._src.export._export")
    by_type: dict[type, Any] = module.serialization_registry
    by_name: dict[str, Any] = module.deserialization_registry
    return by_type, by_name


def _drop_export_registration(cls: type, name: str) -> None:
    """Forget ``cls``'s jax.export registration under ``name`` (JAX has no public way).

    Used when a class definition is re-run (a notebook cell, ``importlib.reload``): the new
    class takes the name over, and jax.export's duplicate-name check must not trip.
    """
    by_type, by_name = _export_registries()
    entry = by_type.get(cls)
    if entry is not None and entry[0] == name:
        del by_type[cls]
    entry = by_name.get(name)
    if entry is not None and entry[0] is cls:
        del by_name[name]


def _add_export_alias(alias: str, name: str) -> None:
    """Make jax.export load ``alias`` as the class registered under ``name``.

    jax.export has no public way to give a registration a second name. Private:
    ``deserialization_registry`` maps a serialized name to ``(type, deserialize_auxdata,
    from_children)`` (checked with jax 0.10.2); an alias is a second key for the same entry.
    The type -> name registry is left alone, so the class is still written under ``name``.
    """
    _, by_name = _export_registries()
    by_name[alias] = by_name[name]


def _drop_export_alias(alias: str, cls: type) -> None:
    """Forget the alias ``alias`` of ``cls`` in jax.export (private, as above)."""
    _, by_name = _export_registries()
    entry = by_name.get(alias)
    if entry is not None and entry[0] is cls:
        del by_name[alias]


_Snapshot = tuple[dict[Any, Any], ...]


def _export_snapshot() -> _Snapshot:
    """Copies of jax.export's two registries and of ours (private; checked with jax 0.10.2)."""
    by_type, by_name = _export_registries()
    return (
        dict(by_type),
        dict(by_name),
        dict(_EXPORT_NAMES),
        dict(_PLACEHOLDERS),
        dict(_EXPORT_ALIASES),
    )


def _export_restore(saved: _Snapshot) -> None:
    """Put jax.export's registries and ours back exactly as :func:`_export_snapshot` saw them."""
    by_type, by_name = _export_registries()
    lives: _Snapshot = (by_type, by_name, _EXPORT_NAMES, _PLACEHOLDERS, _EXPORT_ALIASES)
    for live, copy in zip(lives, saved):
        live.clear()
        live.update(copy)


def _is_jax_tree_node(cls: type) -> bool:
    """Whether ``cls`` is registered with ``jax.tree_util`` (built-in types included).

    ``jax.tree_util.is_tree_node`` is public in jax 0.10.2; older versions only have the
    private Python-side registry ``jax._src.tree_util._registry``, which every public
    registration function fills too.
    """
    is_tree_node: Callable[[type], bool] | None = getattr(jax.tree_util, "is_tree_node", None)
    if is_tree_node is not None:
        return is_tree_node(cls)
    module = importlib.import_module("jax._src.tree_util")
    return cls in module._registry


# --- the backend --------------------------------------------------------------------------


def _unhashable_reporter(node: NodeType) -> Callable[[Any], None]:
    """Make ``check_aux(aux)``: raise :class:`UnhashableStaticError` naming the field."""
    statics = node.static_fields
    label = node.qualname

    def check_aux(aux: Any) -> None:
        for field, value in zip(statics, aux):
            try:
                hash(value)
            except TypeError:
                text = repr(value)
                if len(text) > 60:
                    text = text[:57] + "..."
                raise UnhashableStaticError(
                    _UNHASHABLE_STATIC.format(
                        field=field, cls=label, type=type(value).__qualname__, value=text
                    )
                ) from None

    return check_aux


def _tree_util_options(node: NodeType) -> tuple[Any, ...]:
    """The options the generated ``jax.tree_util`` callbacks of ``node`` depend on.

    (Not ``return_none_fields``: in JAX a ``None`` field is a child either way.)
    """
    rebuild = None if node.info is None else node.info.rebuild
    return (node.static_fields, rebuild)


def _serialize_aux(node: NodeType, aux: Any) -> bytes:
    return aux_to_bytes(node, aux)


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
        TreespecLoadError: the saved node holds a removed data field (the program takes its
            leaves as inputs), names the class, the field and why.
    """
    aux, plan = node.load_state(state_from_bytes(node, data))
    if isinstance(plan, Layout):
        dropped = [n for n, t in zip(plan.names, plan.targets) if t < 0]
        raise TreespecLoadError(
            f"the serialized function takes the removed field(s) {dropped!r} of "
            f"{node.qualname} as input (their leaves are arguments of the compiled program), "
            "so it cannot run with the class as it is now, which has no such field; export "
            "the function again with the class as it is now, or load it with the class as "
            "it was."
        )
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

    Attributes:
        name: ``"jax"``.
        can_unregister: ``False``: JAX has no way to undo a pytree registration, so the
            registry registers with JAX last, after every check has passed.
    """

    name: str = "jax"
    can_unregister: bool = False

    def check(self, node: NodeType, previous: NodeType | None, override: bool) -> None:
        """Refuse ``node`` if JAX already knows its class or name from elsewhere.

        Changes nothing. ``override`` does not apply: JAX cannot replace a registration.

        Raises:
            RegistrationError: the class is already a JAX pytree node or has a jax.export
                registration made outside treeclass, or its name is taken in jax.export by a
                class treeclass did not register.
        """
        del override
        cls = node.type
        if node.kind != "namedtuple":
            ours = _TREE_UTIL.get(cls)
            if ours is not None:
                # Only what the jax.tree_util callbacks depend on (not the name, which only
                # concerns jax.export and can change on a retry).
                if _tree_util_options(ours) != _tree_util_options(node):
                    raise RegistrationError(
                        _REGISTERED_BY_OLDER_TREECLASS.format(cls=node.qualname)
                    )
            elif _is_jax_tree_node(cls):
                raise RegistrationError(_ALREADY_A_JAX_NODE.format(cls=node.qualname))
        if node.name is None:
            return
        by_type, by_name = _export_registries()
        entry = by_type.get(cls)
        mine = entry is not None and (
            _EXPORT_NAMES.get(entry[0]) is cls or _PLACEHOLDERS.get(cls) == entry[0]
        )
        if entry is not None and not mine:
            raise RegistrationError(
                _TYPE_HAS_EXPORT_NAME.format(cls=node.qualname, taken=entry[0], name=node.name)
            )
        entry = by_name.get(node.name)
        if entry is not None and not _ours(node.name, entry[0]):
            owner: type = entry[0]
            raise RegistrationError(
                _NAME_TAKEN_IN_EXPORT.format(
                    name=node.name,
                    cls=node.qualname,
                    owner=f"{owner.__module__}.{owner.__qualname__}",
                )
            )
        for alias in node.aliases:
            entry = by_name.get(alias)
            if entry is not None and entry[0] is not cls and not _ours(alias, entry[0]):
                owner = entry[0]
                raise RegistrationError(
                    _ALIAS_TAKEN_IN_EXPORT.format(
                        name=alias,
                        cls=node.qualname,
                        owner=f"{owner.__module__}.{owner.__qualname__}",
                    )
                )
        # Otherwise the name is free, or held by a class treeclass registered: ``previous``
        # (a re-run of the same definition) or one whose registration was rolled back.

    def register(self, node: NodeType, previous: NodeType | None, override: bool) -> None:
        """Register ``node`` with ``jax.tree_util`` and, if it has a name, ``jax.export``.

        ``previous`` (the class a re-run definition replaces) stays a JAX pytree node, but
        loses its jax.export name to the new class.
        """
        del override
        cls = node.type
        if node.kind != "namedtuple" and cls not in _TREE_UTIL:
            functions = node.bind(
                "jax", jax.tree_util.GetAttrKey, _check_aux=_unhashable_reporter(node)
            )
            jax.tree_util.register_pytree_with_keys(
                cls,
                functions["flatten_with_keys"],
                functions["unflatten_hashed"],
                flatten_func=node.flatten,
            )
            _TREE_UTIL[cls] = node
        name = node.name
        if name is None:
            if node.kind != "namedtuple" and cls not in _PLACEHOLDERS:
                short = cls.__qualname__.rsplit(".", 1)[-1]
                _refuse(cls, "unnamed", _UNNAMED.format(cls=node.qualname, short=short))
            return
        holder = _EXPORT_NAMES.get(name)
        if holder is cls:  # registered by an earlier attempt that was rolled back
            _register_aliases(node, previous, name)
            return
        # All or nothing: a failure part-way (the earlier definition's name dropped, the new
        # one not registered) would leave saved artifacts that load nowhere.
        saved = _export_snapshot()
        try:
            self._register_name(node, previous, name)
        except BaseException:
            _export_restore(saved)
            raise

    def _register_name(self, node: NodeType, previous: NodeType | None, name: str) -> None:
        cls = node.type
        if name in _EXPORT_ALIASES:  # an alias of ours (of a re-run class) becomes the name
            _drop_export_alias(name, _EXPORT_ALIASES.pop(name))
        placeholder = _PLACEHOLDERS.pop(cls, None)
        if placeholder is not None:  # registered unnamed before (a rolled-back attempt)
            _drop_export_registration(cls, placeholder)
        for held_name, held_cls in list(_EXPORT_NAMES.items()):
            # The previous class of a re-run definition (holder), or this class under an
            # older name from a registration that was rolled back: the new one wins.
            if held_name == name or held_cls is cls:
                _drop_export_registration(held_cls, held_name)
                del _EXPORT_NAMES[held_name]
                if held_cls is not cls:  # the earlier definition's objects: say what to do
                    label = f"{held_cls.__module__}.{held_cls.__qualname__}"
                    _refuse(held_cls, "stale", _STALE.format(cls=label, name=name))
        if node.kind == "namedtuple":
            jax.export.register_namedtuple_serialization(cls, serialized_name=name)
        else:
            jax.export.register_pytree_node_serialization(
                cls,
                serialized_name=name,
                serialize_auxdata=functools.partial(_serialize_aux, node),
                deserialize_auxdata=functools.partial(_deserialize_aux, node),
                from_children=functools.partial(_from_children, node),
            )
        _EXPORT_NAMES[name] = cls
        _register_aliases(node, previous, name)

    def unregister(self, node: NodeType) -> None:
        """Do nothing: JAX cannot undo a pytree registration (:attr:`can_unregister`).

        The registry never calls this for JAX: it registers with JAX last, so there is
        nothing after it to fail. A later registration of the same class with the same
        options reuses what is left in JAX.
        """
        del node

    def __repr__(self) -> str:
        return "<treeclass JAX backend>"


def _ours(name: str, cls: type) -> bool:
    """Whether jax.export holds ``name`` for ``cls`` because treeclass registered it."""
    return _EXPORT_NAMES.get(name) is cls or _EXPORT_ALIASES.get(name) is cls


def _register_aliases(node: NodeType, previous: NodeType | None, name: str) -> None:
    """Make jax.export's aliases of ``node``'s class (and of ``previous``) what ``node`` says.

    ``name`` is the name ``node``'s class is registered under in jax.export.

    Aliases the class, or the earlier definition it replaces, held and no longer declares are
    dropped; an alias held by an earlier definition (the registry let the re-run take it)
    moves to the class.
    """
    if not node.aliases and not _EXPORT_ALIASES:
        return  # the usual case
    cls = node.type
    old = None if previous is None else previous.type
    for alias, held in list(_EXPORT_ALIASES.items()):
        if (held is cls or held is old) and alias not in node.aliases:
            _drop_export_alias(alias, held)
            del _EXPORT_ALIASES[alias]
    for alias in node.aliases:
        holder = _EXPORT_ALIASES.get(alias)
        if holder is not None and holder is not cls:
            _drop_export_alias(alias, holder)
        _add_export_alias(alias, name)
        _EXPORT_ALIASES[alias] = cls


def _refuse(cls: type, kind: str, message: str) -> None:
    """Give ``cls`` a jax.export registration whose serialization raises ``message``.

    JAX's own error for a class without one advises ``register_pytree_node_serialization``,
    the wrong fix for a treeclass user. The placeholder name is never written by treeclass;
    ``Exported.serialize()`` calls ``serialize_auxdata`` directly (jax 0.10.2,
    ``jax/_src/export/serialization.py``), so the treeclass error reaches the user unchanged.
    """
    placeholder = (
        f"{_PLACEHOLDER_PREFIX}{kind} {cls.__module__}.{cls.__qualname__} at {id(cls):#x}>"
    )

    def serialize_auxdata(aux: Any) -> NoReturn:
        from .jax_unnamed import all_unnamed  # every unnamed class of the function at once

        raise all_unnamed(message)

    def deserialize_auxdata(data: bytes) -> NoReturn:
        raise TreespecLoadError(_PLACEHOLDER_IN_FILE.format(name=placeholder))

    def from_children(aux: Any, children: Any) -> NoReturn:  # never called: loading refuses
        raise TreespecLoadError(_PLACEHOLDER_IN_FILE.format(name=placeholder))

    jax.export.register_pytree_node_serialization(
        cls,
        serialized_name=placeholder,
        serialize_auxdata=serialize_auxdata,
        deserialize_auxdata=deserialize_auxdata,
        # A namedtuple is JAX's own node, absent from jax.tree_util's registry, so jax.export
        # needs a from_children for it.
        from_children=from_children if issubclass(cls, tuple) else None,
    )
    _PLACEHOLDERS[cls] = placeholder


#: The adapter object the registry holds.
BACKEND: Final = JaxBackend()


# --- structures ---------------------------------------------------------------------------


def _read(t: Any) -> tuple[Any, Any, Any, bool] | None:
    nd = t.node_data()
    if nd is None:
        return None
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
