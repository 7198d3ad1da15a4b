"""The optax adapter: optax's optimizer-state namedtuples under stable names.

optax's states are namedtuples, already nodes of every registry; what they lack is a name,
without which ``tc.save``, ``treeclass.orbax`` and ``jax.export`` cannot write them.
:func:`activated` names every state class ``optax.<ClassName>`` (``pickle_by_name=False``: they
pickle as optax defines them). Which classes: every ``NamedTuple`` class defined under the
``optax`` package found in a loaded optax module, public or private (public optimizers build
states optax does not export). A name two classes share is given to neither; a class registered
by hand keeps its registration; a name another class holds stays with it (one warning). See
``docs/jax-ecosystem.md``.
"""

from __future__ import annotations

import sys
from typing import Final

from .._core.api import register_namedtuple
from .._core.fields import is_namedtuple_class
from .._core.registry import Change, Undo, class_for_name, is_registered, nothing
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


def state_classes() -> dict[str, type]:
    """``{"optax.<ClassName>": class}`` for every namedtuple class optax defines, by name.

    See the module docstring for which classes; a name two classes share is left out.
    """
    found: dict[type, None] = {}
    for module_name in sorted(m for m in list(sys.modules) if m.split(".")[0] == "optax"):
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
    """Name optax's state classes (the adapter's ``activated()`` hook; idempotent).

    A class registered already is skipped, and so is one whose name another class holds: one
    report (``report_failures``) names each such class and the holder.
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
        return nothing

    def __repr__(self) -> str:
        return "<treeclass optax backend>"


#: The adapter object the registry holds.
BACKEND: Final = OptaxBackend()
