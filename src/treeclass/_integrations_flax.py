"""flax.serialization support for treeclass classes (phase-1 adapter, issue 10).

flax keeps its own registry of how to turn an object into a *state dict* and back
(``flax.serialization.register_serialization_state``); ``to_state_dict`` / ``from_state_dict``
/ ``to_bytes`` / ``from_bytes`` (flax's msgpack checkpoints) only know the classes in it, and
``to_bytes`` of any other object fails with ``TypeError: can not serialize 'X' object``.
:func:`register` puts a treeclass dataclass / attrs class there, the way
``flax.struct.dataclass`` registers its classes, so that a flax checkpoint of a
``flax.struct.dataclass`` keeps loading after the class moves to ``@tc.pytree_dataclass``:

* the state dict is ``{field name: to_state_dict(value)}`` over the **data fields**, in field
  order; static fields are not state (as ``pytree_node=False`` fields in flax). A ``None``
  field's state is ``None`` (msgpack ``nil``), as in flax;
* ``from_state_dict(target, state)`` restores every data field from ``state`` (recursively,
  through flax's registry, so nested treeclass classes, dicts, lists... work) and keeps the
  target's static fields. A missing or unknown field raises a treeclass error naming the class,
  the field and flax's path. The new object is made without running ``__init__``, like
  unflatten (``rebuild=`` lets the backend pass its generated unflatten instead).

Namedtuples need nothing: flax handles every namedtuple already.

To be wired into the framework table (activated when ``flax`` is imported, before or after
the classes): call :func:`register` for every registered dataclass / attrs class, and
:func:`unregister` to roll one back. Checked with flax :data:`CHECKED_FLAX_VERSION`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, TypeGuard

import flax.serialization as fs

import treeclass as tc

from ._errors import RegistrationError, StructureMismatchError

__all__ = ["CHECKED_FLAX_VERSION", "is_registered", "register", "unregister"]

#: The flax version the private access in :func:`unregister` was checked against.
CHECKED_FLAX_VERSION: Final = "0.12.8"

Rebuild = Callable[[Any, Mapping[str, Any]], Any]

_ALREADY: Final = (
    "{cls} already has a flax.serialization state-dict registration made outside treeclass "
    "(flax.struct, register_serialization_state); treeclass cannot register it for flax "
    "serialization. Remove the other registration."
)
_NOT_A_DICT: Final = (
    "the flax state for {cls} at path {path!r} is a {type}, not a dict of its data fields "
    "({fields}); the checkpoint does not hold a {cls} there."
)
_MISSING: Final = (
    "the flax state for {cls} at path {path!r} has no entry for the data field {field!r} "
    "(it has {got}); the checkpoint was written by a class without that field. Restore into "
    "a target of the class that wrote it, or add the field to the state dict before "
    "from_state_dict."
)
_UNKNOWN: Final = (
    "the flax state for {cls} at path {path!r} has entries for {fields}, which are not data "
    "fields of {cls}{hint}; the checkpoint was written by another version of the class."
)
_STATIC_HINT: Final = " ({static} {verb} static in treeclass, so not part of the state)"

# Classes this module registered with flax, and the functions it registered.
_OURS: dict[type, tuple[Any, Any]] = {}


def _is_mapping(value: object) -> TypeGuard[Mapping[Any, Any]]:
    return isinstance(value, Mapping)


def _label(cls: type) -> str:
    name = tc.name_of(cls)
    return name if name is not None else f"{cls.__module__}.{cls.__qualname__}"


def _rebuild_without_init(obj: Any, updates: Mapping[str, Any]) -> Any:
    """``obj`` with its data fields replaced by ``updates``, rebuilt by treeclass's unflatten.

    Flattens ``obj`` one level (every child a leaf) with treeclass's embedded registry, swaps
    the children and unflattens: no ``__init__`` / ``__post_init__`` / validator runs, statics
    come from ``obj``. A field that is not a child of ``obj`` (a ``None`` field kept in the
    node data, before issue 10's ``None`` semantics) cannot take another value this way; it
    gets one through ``object.__setattr__`` on the rebuilt copy.
    """
    pairs, spec = tc.tree_flatten_with_path(obj, is_leaf=lambda node: node is not obj)
    children: list[Any] = []
    done: set[str] = set()
    for path, child in pairs:
        key = path[0]
        name = key.name if isinstance(key, tc.GetAttrKey) else None
        if name is not None and name in updates:
            children.append(updates[name])
            done.add(name)
        else:
            children.append(child)
    new = spec.unflatten(children)
    for name, value in updates.items():
        if name not in done and getattr(new, name) is not value:
            object.__setattr__(new, name, value)
    return new


def register(
    cls: type,
    data_fields: Sequence[str],
    static_fields: Sequence[str],
    *,
    rebuild: Rebuild | None = None,
) -> None:
    """Register ``cls`` with ``flax.serialization``: its state dict is its data fields.

    Registering a class this module already registered does nothing.

    Args:
        cls: a dataclass or attrs class registered with treeclass.
        data_fields: its data (child) fields, in field order: the state dict's keys.
        static_fields: its static fields (named in error messages only: not state).
        rebuild: ``rebuild(target, {field: value}) -> new object``; default: treeclass's
            unflatten on the target's structure (``__init__`` does not run).

    Raises:
        RegistrationError: flax already has a registration for ``cls`` made elsewhere.
    """
    if cls in _OURS:
        return
    if fs.is_serializable(cls):
        raise RegistrationError(_ALREADY.format(cls=_label(cls)))
    fields = tuple(data_fields)  # tuples: the closures below must not see later changes
    statics = frozenset(static_fields)
    field_set = frozenset(fields)
    make = _rebuild_without_init if rebuild is None else rebuild

    def to_state_dict(obj: Any) -> dict[str, Any]:
        return {name: fs.to_state_dict(getattr(obj, name)) for name in fields}

    def from_state_dict(target: Any, state: Any) -> Any:
        label = _label(cls)
        path = fs.current_path()
        if not _is_mapping(state):
            raise StructureMismatchError(
                _NOT_A_DICT.format(
                    cls=label, path=path, type=type(state).__name__, fields=", ".join(fields)
                )
            )
        entries = state
        extra = [str(k) for k in entries if k not in field_set]
        if extra:
            static = sorted(statics.intersection(extra))
            hint = ""
            if static:
                verb = "is" if len(static) == 1 else "are"
                hint = _STATIC_HINT.format(static=", ".join(map(repr, static)), verb=verb)
            raise StructureMismatchError(
                _UNKNOWN.format(cls=label, path=path, fields=sorted(extra), hint=hint)
            )
        updates: dict[str, Any] = {}
        for name in fields:
            if name not in entries:
                raise StructureMismatchError(
                    _MISSING.format(cls=label, path=path, field=name, got=sorted(map(str, entries)))
                )
            updates[name] = fs.from_state_dict(getattr(target, name), entries[name], name=name)
        return make(target, updates)

    fs.register_serialization_state(cls, to_state_dict, from_state_dict)
    _OURS[cls] = (to_state_dict, from_state_dict)


def is_registered(cls: type) -> bool:
    """Whether :func:`register` registered ``cls`` with flax (and it is still there)."""
    return cls in _OURS


def _state_dict_registry() -> dict[Any, Any]:
    """The state-dict registry of flax (private: ``flax.serialization._STATE_DICT_REGISTRY``).

    flax has no public way to remove a registration. Checked with flax 0.12.8.
    """
    registry: dict[Any, Any] = importlib.import_module("flax.serialization")._STATE_DICT_REGISTRY
    return registry


def unregister(cls: type) -> None:
    """Remove the registration :func:`register` made for ``cls`` (to roll one back).

    Leaves registrations made outside treeclass alone.
    """
    ours = _OURS.pop(cls, None)
    if ours is None:
        return
    registry = _state_dict_registry()
    if registry.get(cls) == ours:
        del registry[cls]
