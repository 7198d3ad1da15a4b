"""The refusal of an assignment to a frozen class treeclass made: naming the class and the way out.

dataclasses' frozen ``__setattr__`` says ``cannot assign to field 'x'``, naming neither the
class nor what to do. :func:`guard_frozen` wraps it (and ``__delattr__``) so that the same
:class:`dataclasses.FrozenInstanceError` names both, and ``replace``. The original runs first
and decides, so the semantics are dataclasses' own; the wrappers mention
``FrozenInstanceError`` in their code, which is how the rebuild plan
(:func:`treeclass._core.fields._generated_setattr`) recognises a frozen guard, so unflatten
still stores fields directly.

Example:
    >>> import treeclass as tc
    >>> @tc.pytree_dataclass(frozen=True)
    ... class Point:
    ...     x: float
    >>> try:
    ...     Point(1.0).x = 2.0
    ... except AttributeError as e:
    ...     print(str(e).split(": ", 1)[1])
    Point is frozen; make a changed copy with obj.replace(x=...) (or treeclass.replace(obj, x=...)).
"""

from __future__ import annotations

from dataclasses import FrozenInstanceError, fields
from typing import Any

from .._errors import qualname

__all__ = ["frozen_message", "guard_frozen"]


def frozen_message(cls: type, name: str, deleting: bool, field_names: frozenset[str]) -> str:
    """The message of an assignment to (or deletion of) ``name`` on an instance of ``cls``."""
    doing = "delete" if deleting else "assign to"
    if name not in field_names:
        return (
            f"cannot {doing} attribute {name!r} of {qualname(cls)}: {cls.__name__} is frozen, "
            "and its instances hold only their fields."
        )
    return (
        f"cannot {doing} field {name!r} of {qualname(cls)}: {cls.__name__} is frozen; make a "
        f"changed copy with obj.replace({name}=...) (or treeclass.replace(obj, {name}=...))."
    )


def guard_frozen(cls: type) -> None:
    """Wrap the frozen dataclass ``cls``'s ``__setattr__`` and ``__delattr__`` (see module)."""
    own = vars(cls)
    setattr_: Any = own.get("__setattr__")
    delattr_: Any = own.get("__delattr__")
    if setattr_ is None or delattr_ is None:  # pragma: no cover - a frozen dataclass has both
        return
    names = frozenset(f.name for f in fields(cls))

    def __setattr__(self: Any, name: str, value: Any) -> None:
        try:
            setattr_(self, name, value)
        except FrozenInstanceError:
            raise FrozenInstanceError(frozen_message(self.__class__, name, False, names)) from None

    def __delattr__(self: Any, name: str) -> None:
        try:
            delattr_(self, name)
        except FrozenInstanceError:
            raise FrozenInstanceError(frozen_message(self.__class__, name, True, names)) from None

    for fn in (__setattr__, __delattr__):
        fn.__qualname__ = f"{cls.__qualname__}.{fn.__name__}"
        fn.__module__ = cls.__module__
        type.__setattr__(cls, fn.__name__, fn)
