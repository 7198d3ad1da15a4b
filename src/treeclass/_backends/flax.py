"""The flax adapter: treeclass classes in ``flax.serialization``'s state-dict registry.

flax's ``to_state_dict`` / ``from_state_dict`` / ``to_bytes`` / ``from_bytes`` know only the
classes in that registry. Each dataclass / attrs class gets the registration
``flax.struct.dataclass`` gives its classes (state: ``{data field: state}``; statics from the
target; rebuilt without ``__init__``), so a flax checkpoint keeps loading after a class moves
to ``@tc.pytree_dataclass``. Namedtuples are flax's own. See ``docs/jax-ecosystem.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

import flax.serialization as fs

from .._core.nodes import NodeType
from .._core.registry import Change, Held, Undo, nothing
from .._errors import StructureMismatchError

__all__ = ["BACKEND", "CHECKED_FLAX_VERSION", "FlaxBackend"]

#: The flax version the private access in :func:`_state_dict_registry` was checked against.
CHECKED_FLAX_VERSION: Final = "0.12.8"

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


def _state_dict_registry() -> dict[Any, Any]:
    """Flax's state-dict registry (private: flax has no public lookup or removal)."""
    return fs._STATE_DICT_REGISTRY


def _functions(node: NodeType) -> tuple[Callable[[Any], Any], Callable[[Any, Any], Any]]:
    """``(to_state_dict, from_state_dict)`` for ``node``'s class."""
    fields = node.data_fields  # a tuple: the closures below must not see later changes
    field_set = frozenset(fields)
    statics = frozenset(node.static_fields)
    label = node.name or node.qualname
    flatten, unflatten = node.flatten, node.unflatten

    def from_state_dict(target: Any, state: Any) -> Any:
        path = fs.current_path()
        if not isinstance(state, Mapping):
            raise StructureMismatchError(
                _NOT_A_DICT.format(
                    cls=label, path=path, type=type(state).__name__, fields=", ".join(fields)
                )
            )
        entries: Mapping[Any, Any] = state  # pyright: ignore[reportUnknownVariableType]
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
        children, aux = flatten(target)
        restored: list[Any] = []
        for name, child in zip(fields, children):
            if name not in entries:
                got = sorted(map(str, entries))
                raise StructureMismatchError(
                    _MISSING.format(cls=label, path=path, field=name, got=got)
                )
            restored.append(fs.from_state_dict(child, entries[name], name=name))
        return unflatten(aux, restored)  # statics from the target; no __init__

    return _ToState(fields), from_state_dict


class _ToState:
    """A class's ``to_state_dict`` (a class of its own, so that flax's entry shows it is ours)."""

    __slots__ = ("fields",)

    def __init__(self, fields: tuple[str, ...]) -> None:
        self.fields = fields

    def __call__(self, obj: Any) -> dict[str, Any]:
        return {name: fs.to_state_dict(getattr(obj, name)) for name in self.fields}


def _ours(entry: tuple[Any, Any]) -> bool:
    """Whether a flax state-dict registration is treeclass's."""
    return entry[0].__class__ is _ToState


class FlaxBackend:
    """Mirrors the treeclass registry into ``flax.serialization``."""

    name: str = "flax"
    can_unregister: bool = True

    def check(self, change: Change) -> list[Held]:
        """Report a registration of the class flax holds that treeclass did not make."""
        node = change.node
        entry = _state_dict_registry().get(node.type)
        if node.kind == "namedtuple" or entry is None or _ours(entry):
            return []
        where = "flax.serialization (flax.struct, register_serialization_state)"
        return [(None, node.type, where)]

    def add(self, change: Change) -> Undo:
        """Register the class with ``flax.serialization``; the undo puts back what it replaced."""
        node = change.node
        cls = node.type
        foreign = _state_dict_registry().get(cls)
        if node.kind == "namedtuple" or (foreign is not None and _ours(foreign)):
            return nothing
        functions = _functions(node)
        fs.register_serialization_state(cls, *functions, override=foreign is not None)

        def undo() -> None:
            registry = _state_dict_registry()
            if registry.get(cls) == functions:
                del registry[cls]
                if foreign is not None:
                    registry[cls] = foreign

        return undo

    def __repr__(self) -> str:
        return "<treeclass flax backend>"


#: The adapter object the registry holds.
BACKEND: Final = FlaxBackend()
