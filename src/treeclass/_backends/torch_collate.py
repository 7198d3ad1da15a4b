"""``torch.utils.data``: batching treeclass instances, and pinning their tensors.

Activated with the torch adapter (the ``extras`` of the torch row of
:data:`treeclass._backends.activation.FRAMEWORKS`), for every class so far and every class
registered later.

**Collate.** ``default_collate`` turns a list of samples into a batch, dispatching on the type
of the first sample through ``default_collate_fn_map`` (exact type first, then
``isinstance``); a dataclass it does not know is refused. torch's ``collate`` docstring
documents extending ``default_collate`` by adding entries to that map, which lives in the
private module ``torch.utils.data._utils.collate`` (checked with torch 2.13.0;
:func:`_collate_map` is the one place that reads it). Each registered dataclass and attrs
class gets an entry: a list of instances becomes one instance whose data fields are each
collated as torch collates the list of their values (tensors stacked, numbers made tensors,
dicts and lists collated field by field), and whose static fields are the samples' own --
which must agree, else :class:`~treeclass.StructureMismatchError` names the class, the field
and the two values. A data field that is ``None`` in every sample stays ``None``; ``None`` in
some samples only is an error naming the field. Namedtuples are collated by torch itself.

**pin_memory.** The DataLoader's ``pin_memory=True`` runs
``torch.utils.data._utils.pin_memory.pin_memory`` on each batch: it recurses into tensors,
mappings, namedtuples and sequences, calls ``pin_memory()`` on any other object that has that
method, and returns other objects unchanged. torch has no registry there, so each such class
that has no ``pin_memory`` attribute (and no field of that name) gets a ``pin_memory()``
method while torch's backend is active: it returns a copy whose data fields went through
torch's ``pin_memory`` -- the treatment a dict of the same fields gets. The method is removed
again if the registration is undone. A method treeclass added to a registered parent does not
count as a subclass's own: a registered subclass gets its own (keeping its class and fields),
and an unregistered subclass, whose fields treeclass does not know, is refused by the
inherited one with :class:`~treeclass.TreeclassTypeError` (as ``default_collate`` refuses it).

**Workers.** Instances cross worker processes by pickle; named classes pickle by name (see
:mod:`treeclass._pickle`), so a ``spawn`` worker finds the class by name once the module that
defines it is imported there (by the dataset's own unpickling).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Final, cast

from torch.utils.data._utils import collate as _collate
from torch.utils.data._utils.pin_memory import pin_memory as _pin_memory

from .._core.nodes import NodeType
from .._core.registry import Change, Undo, registered_node
from .._errors import StructureMismatchError, TreeclassTypeError

__all__ = ["BACKEND", "CHECKED_TORCH_VERSION", "CollateBackend"]

#: The torch version whose private collate map :func:`_collate_map` was checked against.
CHECKED_TORCH_VERSION: Final = "2.13.0"

_OTHER_TYPE: Final = (
    "default_collate got a batch whose first sample is a {cls} and whose sample {i} is a "
    "{other}; a batch of treeclass instances must hold instances of one class."
)
_STATIC_DIFFERS: Final = (
    "default_collate cannot batch {cls} samples whose static field {field!r} differs "
    "({first!r} in sample 0, {value!r} in sample {i}): static fields are not batched, so "
    "every sample of a batch must have the same; group samples by {field!r} (a batch "
    "sampler), or make it a data field."
)
_SOME_NONE: Final = (
    "default_collate cannot batch {cls} samples whose data field {field!r} is None in some "
    "samples (sample {none}) and not in others (sample {value}); make it None in every sample "
    "of the batch or in none."
)


def _collate_map() -> dict[type | tuple[type, ...], Callable[..., Any]]:
    """The ``default_collate_fn_map`` of torch (private module; checked with torch 2.13.0)."""
    return _collate.default_collate_fn_map


def _collate_instances(node: NodeType, batch: Any, *, collate_fn_map: Any = None) -> Any:
    """Collate a batch of instances of ``node``'s class (its entry binds ``node``)."""
    cls = node.type
    label = node.name or node.qualname
    for i, sample in enumerate(batch):
        if type(sample) is not cls:
            raise StructureMismatchError(
                _OTHER_TYPE.format(cls=label, i=i, other=type(sample).__qualname__)
            )
    flatten = node.flatten
    flat = [flatten(sample) for sample in batch]
    first_aux = flat[0][1]
    for i, (_, aux) in enumerate(flat):
        if aux != first_aux:
            for field, a, b in zip(node.static_fields, first_aux, aux):
                if not (a is b or a == b):
                    raise StructureMismatchError(
                        _STATIC_DIFFERS.format(cls=label, field=field, first=a, value=b, i=i)
                    )
    collate = _collate.collate
    out: list[Any] = []
    for field, column in zip(node.data_fields, zip(*[children for children, _ in flat])):
        if any(v is None for v in column):  # (never ``in``: a tensor compares elementwise)
            nones = [j for j, v in enumerate(column) if v is None]
            if len(nones) == len(column):
                out.append(None)
                continue
            if nones:
                value = next(j for j, v in enumerate(column) if v is not None)
                raise StructureMismatchError(
                    _SOME_NONE.format(cls=label, field=field, none=nones[0], value=value)
                )
        out.append(collate(list(column), collate_fn_map=collate_fn_map))
    return node.unflatten(first_aux, out)


def _collate_function(node: NodeType) -> Callable[..., Any]:
    """The collate map's entry of ``node``'s class (one small object per class)."""
    return functools.partial(_collate_instances, node)


#: Set on the ``pin_memory`` method treeclass adds: one a class inherits from a registered
#: parent is not the class's own (it gets its own when registered).
_ADDED: Final = "__treeclass_pin_memory__"


def _pin_memory_method(self: Any) -> Any:
    """A copy whose data fields went through torch's ``pin_memory`` (added by treeclass)."""
    kind = cast("type[object]", type(self))
    owner = next(k for k in kind.__mro__ if vars(k).get("pin_memory") is _pin_memory_method)
    node = registered_node(owner)
    if node is None:  # pragma: no cover - the method is removed when the registration is
        raise TreeclassTypeError(f"{owner.__qualname__} is no longer registered with treeclass.")
    if kind is not owner:  # an unregistered subclass (a registered one has its own)
        label = node.name or node.qualname
        other = kind.__qualname__
        raise TreeclassTypeError(
            f"pin_memory() of {label} got a {kind.__module__}.{other}, a subclass "
            "that is not registered itself, so treeclass does not know its fields (pinning "
            f"it as a {owner.__qualname__} would drop its class); register {other} too (it "
            "then gets its own pin_memory), or give it a pin_memory method."
        )
    children, aux = node.flatten(self)
    return node.unflatten(aux, [_pin_memory(c) for c in children])


setattr(_pin_memory_method, _ADDED, True)
_pin_memory_method.__name__ = _pin_memory_method.__qualname__ = "pin_memory"


def _pin_method(node: NodeType) -> Callable[..., Any]:
    """The ``pin_memory`` method treeclass gives ``node``'s class (one function for all)."""
    del node
    return _pin_memory_method


def _can_take_pin_memory(node: NodeType) -> bool:
    """Whether treeclass may give the class a ``pin_memory()`` method.

    It may unless a field is named ``pin_memory`` or the class has such a method, other than
    one treeclass added to a registered parent.
    """
    if node.info is None or any(f.name == "pin_memory" for f in node.info.fields):
        return False
    for k in node.type.__mro__[:-1]:
        if "pin_memory" in vars(k):
            return getattr(vars(k)["pin_memory"], _ADDED, False) is True and k is not node.type
    return True


def _nothing() -> None:
    pass


class CollateBackend:
    """Mirrors the registry into ``default_collate`` and DataLoader pinning."""

    name: str = "torch.utils.data"
    can_unregister: bool = True

    def __init__(self) -> None:
        #: class -> (collate function, whether a pin_memory method was added).
        self._ours: dict[type, tuple[Callable[..., Any], bool]] = {}

    def check(self, change: Change) -> None:
        """Accept every class (an entry of torch's own is kept, see :meth:`add`)."""
        del change

    def add(self, change: Change) -> Undo:
        """Add the class to torch's collate map and give it ``pin_memory()``; return the undo.

        A collate entry torch or the user put there for the class is kept (and the undo
        leaves it alone); so is a ``pin_memory`` the class has.
        """
        node = change.node
        cls = node.type
        if node.kind == "namedtuple" or cls in self._ours:
            return _nothing
        table = _collate_map()
        if cls in table:
            return _nothing
        function = _collate_function(node)
        table[cls] = function
        pinned = _can_take_pin_memory(node)
        if pinned:
            cls.pin_memory = _pin_method(node)  # type: ignore[attr-defined]
        entry = (function, pinned)
        self._ours[cls] = entry

        def undo() -> None:
            if self._ours.get(cls) is not entry:
                return
            del self._ours[cls]
            if table.get(cls) is function:
                del table[cls]
            if pinned and "pin_memory" in vars(cls):
                delattr(cls, "pin_memory")

        return undo

    def __repr__(self) -> str:
        return "<treeclass torch.utils.data backend>"


#: The adapter object the registry holds.
BACKEND: Final = CollateBackend()
