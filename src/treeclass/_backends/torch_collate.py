"""``torch.utils.data``: batching treeclass instances, and pinning their tensors.

Activated with the torch adapter (an ``extras`` of the torch row of
:data:`treeclass._backends.activation.FRAMEWORKS`). Behaviour: ``docs/torch.md``, "DataLoader".

**Collate.** ``default_collate`` dispatches on the first sample's type through
``default_collate_fn_map``, the extension point torch's ``collate`` docstring documents, in a
private module (:func:`_collate_map`). Each registered dataclass and attrs class gets an entry
collating each data field as torch collates the list of its values; static fields must agree.

**pin_memory.** torch's pinning calls ``pin_memory()`` on objects it does not know, so a class
without a ``pin_memory`` attribute gets one while the backend is active. One inherited from a
registered parent is not the class's own: a registered subclass gets its own, an unregistered
one is refused.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Final, cast

from torch.utils.data._utils import collate as _collate
from torch.utils.data._utils.pin_memory import pin_memory as _pin_memory

from .._core.nodes import NodeType
from .._core.registry import Change, Undo, nothing, registered_node
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


def _pin_memory_method(self: Any) -> Any:
    """A copy whose data fields went through torch's ``pin_memory`` (added by treeclass)."""
    kind = cast("type[object]", type(self))
    owner = next(k for k in kind.__mro__ if vars(k).get("pin_memory") is _pin_memory_method)
    node = registered_node(owner)
    assert node is not None  # the method goes with the registration
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


_pin_memory_method.__name__ = _pin_memory_method.__qualname__ = "pin_memory"


def _can_take_pin_memory(node: NodeType) -> bool:
    """Whether the class has no ``pin_memory`` field or method (but treeclass's, inherited)."""
    if node.info is None or any(f.name == "pin_memory" for f in node.info.fields):
        return False
    for k in node.type.__mro__[:-1]:
        if "pin_memory" in vars(k):
            return vars(k)["pin_memory"] is _pin_memory_method and k is not node.type
    return True


class CollateBackend:
    """Mirrors the registry into ``default_collate`` and DataLoader pinning."""

    name: str = "torch.utils.data"
    can_unregister: bool = True

    def check(self, change: Change) -> None:
        """Accept every class (an entry of torch's own is kept, see :meth:`add`)."""
        del change

    def add(self, change: Change) -> Undo:
        """Add the class to torch's collate map and give it ``pin_memory()``; return the undo.

        A collate entry torch or the user put there for the class is kept (and the undo
        leaves it alone); so is a ``pin_memory`` the class has. The undo removes only what is
        still this call's own.
        """
        node = change.node
        cls = node.type
        table = _collate_map()
        if node.kind == "namedtuple" or cls in table:
            return nothing
        function = table[cls] = functools.partial(_collate_instances, node)
        pinned = _can_take_pin_memory(node)
        if pinned:
            cls.pin_memory = _pin_memory_method  # type: ignore[attr-defined]

        def undo() -> None:
            if table.get(cls) is function:
                del table[cls]
            if pinned and vars(cls).get("pin_memory") is _pin_memory_method:
                delattr(cls, "pin_memory")

        return undo

    def __repr__(self) -> str:
        return "<treeclass torch.utils.data backend>"


#: The adapter object the registry holds.
BACKEND: Final = CollateBackend()
