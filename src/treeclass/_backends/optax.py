"""The optax adapter: optax's optimizer-state namedtuples under stable names.

Activated by :mod:`treeclass._backends.activation` once ``optax`` is imported. optax's states are
namedtuples, so they are already nodes of every registry (JAX, torch, optree and treeclass's
own); what they lack is a *name*, without which ``tc.save``, ``treeclass.orbax`` and
``jax.export`` cannot write a structure holding them. :func:`activated` gives every optax
state class the name ``optax.<ClassName>``, with :func:`treeclass.register_namedtuple`, so a
fresh process that imports optax (and treeclass) loads what another one saved.

Which classes: every ``NamedTuple`` class *defined by optax* (its ``__module__`` is ``optax``
or under it) that is an attribute of a module of the optax package loaded by ``import optax``
-- the public modules (``optax``, ``optax.contrib``, ``optax.schedules``, ``optax.transforms``,
...) and the private ones behind them, since public optimizers build states optax does not
export (``optax.rmsprop(bias_correction=True)`` makes a ``ScaleByRmsWithCountState``). The
set depends only on the optax version: modules are walked in sorted order, and a class
name two classes share (none do in optax 0.2.8) is given to neither. A class already
registered with treeclass (by hand, before optax was imported) keeps its registration. A name
another class holds (a user class registered as ``"optax.EmptyState"``) stays with it: that
optax class is left unnamed, with one warning naming it, and the rest are named.

The names are registered with ``pickle_by_name=False``: optax's states pickle as optax
defines them, whether or not treeclass is imported.
"""

from __future__ import annotations

import sys
from typing import Final

from .._core.api import register_namedtuple
from .._core.fields import is_namedtuple_class
from .._core.registry import Change, Undo, class_for_name, is_registered
from .._errors import NameConflictError, qualname, report_failures

__all__ = [
    "BACKEND",
    "CHECKED_OPTAX_VERSION",
    "PREFIX",
    "OptaxBackend",
    "activated",
    "state_classes",
]

#: The optax version the enumeration was checked against.
CHECKED_OPTAX_VERSION: Final = "0.2.8"
#: The prefix of every name this adapter gives.
PREFIX: Final = "optax."


def _optax_modules() -> list[str]:
    return sorted(m for m in list(sys.modules) if m == "optax" or m.startswith("optax."))


def state_classes() -> dict[str, type]:
    """``{"optax.<ClassName>": class}`` for every namedtuple class optax defines, by name.

    See the module docstring for which classes; a name two classes share is left out.
    """
    found: dict[type, None] = {}
    for module_name in _optax_modules():
        module = sys.modules.get(module_name)
        if module is None:
            continue
        for value in list(vars(module).values()):
            if (
                isinstance(value, type)
                and is_namedtuple_class(value)
                and (value.__module__ == "optax" or value.__module__.startswith("optax."))
            ):
                found[value] = None
    by_name: dict[str, type] = {}
    shared: set[str] = set()
    for cls in found:
        name = PREFIX + cls.__name__
        if name in by_name and by_name[name] is not cls:
            shared.add(name)
        by_name[name] = cls
    return {name: by_name[name] for name in sorted(by_name) if name not in shared}


def activated() -> None:
    """Name optax's state classes (called by :mod:`treeclass._backends.activation` at activation).

    Idempotent: a class registered already (by an earlier call, or by hand) is skipped. So is
    a class whose name another class registered with treeclass holds: the others are named
    all the same, then one ``RuntimeWarning`` (and an ``ERROR`` log on the ``treeclass``
    logger) names each class left unnamed and the class holding its name.
    """
    taken: list[str] = []
    for name, cls in state_classes().items():
        if is_registered(cls):
            continue
        holder = class_for_name(name)
        if holder is not None and holder is not cls:
            taken.append(f"{qualname(cls)} ({name!r} is held by {qualname(holder)})")
            continue
        try:
            register_namedtuple(cls, name=name, pickle_by_name=False)
        except NameConflictError as e:  # (the class, by another name: checked, but be sure)
            taken.append(f"{qualname(cls)} ({e})")
    if taken:
        report_failures(
            [
                f"treeclass left {len(taken)} optax state class(es) without their name "
                f"{PREFIX}<ClassName>, which another class registered with treeclass holds: "
                f"{'; '.join(taken)}. tc.save, treeclass.orbax and jax.export cannot write a "
                "structure holding them; give the other class another name. The other optax "
                "state classes are named."
            ],
            stacklevel=2,
        )


def _nothing() -> None:
    pass


class OptaxBackend:
    """optax keeps no registry of its own: nothing to mirror (the names are :func:`activated`)."""

    name: str = "optax"
    can_unregister: bool = True

    def check(self, change: Change) -> None:
        """Accept every class (optax has nothing to refuse)."""
        del change

    def add(self, change: Change) -> Undo:
        """Nothing to do: optax works on any pytree; the undo does nothing either."""
        del change
        return _nothing

    def __repr__(self) -> str:
        return "<treeclass optax backend>"


#: The adapter object the registry holds.
BACKEND: Final = OptaxBackend()
