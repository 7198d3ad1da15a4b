"""Serialized names: what a usable name is, which are reserved, and who may take one over.

A name is taken over only by what looks like a *re-run* of the registration that holds it:
the same class statement executed again (a notebook cell, ``importlib.reload``). A re-run is
recognised by the class's module and qualified name **and** by where the registration was
made: the module whose code called the decorator or registration function, verified to be
that module's own namespace (``sys.modules[name].__dict__``).

What this guards against: a second, accidental registration of a taken name (two classes, or
two libraries, choosing the same ``name=``), and a class defined elsewhere that copies another's
``__module__`` and ``__qualname__`` -- both are refused with ``NameConflictError``. What it does
not: code in the same process that runs a class statement *in the owning module's namespace*
(``exec(source, victim.__dict__)``) or that replaces ``sys.modules[name]`` with a module of its
own is indistinguishable from a re-run, and takes the name. Code in the same process can do
anything the owning module can; the guard is not a security boundary between the modules of one
process (see ``docs/format.md``).
"""

from __future__ import annotations

import sys
from typing import Final

from .._errors import RegistrationError

__all__ = [
    "BUILTIN_NAMES",
    "DEFAULT_DICT",
    "DICT",
    "LIST",
    "MAX_NAME_LENGTH",
    "NONE",
    "ORDERED_DICT",
    "TUPLE",
    "Origin",
    "check_name",
    "registration_origin",
]

# The fixed names of the built-in node types in serialized treespecs (``docs/format.md``):
# every writer and reader of treespec documents takes them from here.
TUPLE: Final = "tuple"
LIST: Final = "list"
DICT: Final = "dict"
ORDERED_DICT: Final = "collections.OrderedDict"
DEFAULT_DICT: Final = "collections.defaultdict"
NONE: Final = "None"
#: All of them.
BUILTIN_NAMES: Final = frozenset((TUPLE, LIST, DICT, ORDERED_DICT, DEFAULT_DICT, NONE))
MAX_NAME_LENGTH: Final = 256

#: Modules of treeclass whose frames sit between a user's call and the registry.
_INTERNAL: Final = frozenset(
    (
        "treeclass._core.api",
        "treeclass._core.names",
        "treeclass._core.nodes",
        "treeclass._core.statics",
    )
)


class Origin:
    """Where a registration was made: a class's module, qualified name and calling module.

    ``caller`` is ``None`` when the registering code did not run in a module's own namespace
    (``exec`` with a made-up globals dict, a doctest); such a registration can never be
    taken over, nor take another over.
    """

    __slots__ = ("caller", "module", "qualname")

    def __init__(self, cls: type, caller: str | None) -> None:
        self.module = str(getattr(cls, "__module__", ""))
        self.qualname = str(getattr(cls, "__qualname__", ""))
        self.caller = caller

    def reruns(self, earlier: Origin) -> bool:
        """Whether this registration is a re-run of ``earlier`` (and so may take its name)."""
        return (
            self.caller is not None
            and self.caller == earlier.caller
            and self.module == earlier.module
            and self.qualname == earlier.qualname
        )


def registration_origin(cls: type) -> Origin:
    """The :class:`Origin` of a registration of ``cls`` being made by the current call."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_globals.get("__name__") in _INTERNAL:
        frame = frame.f_back  # type: ignore[assignment]
    caller: str | None = None
    if frame is not None:
        namespace = frame.f_globals
        name = namespace.get("__name__")
        module = sys.modules.get(name) if isinstance(name, str) else None
        if module is not None and getattr(module, "__dict__", None) is namespace:
            caller = name
    return Origin(cls, caller)


def check_name(name: object, cls: type, *, what: str = "name=") -> str:
    """Return ``name`` if it is a usable serialized name for ``cls``; raise otherwise.

    Raises:
        RegistrationError: not a str, empty, too long, with spaces or unprintable characters,
            or the name of a built-in container.
    """
    if not isinstance(name, str):
        raise RegistrationError(
            f"{what} for {cls.__qualname__} must be a str, got {type(name).__name__}; "
            f'use a stable dotted name such as "mypkg.{cls.__qualname__}".'
        )
    bad = (
        not name
        or len(name) > MAX_NAME_LENGTH
        or not name.isprintable()
        or any(c.isspace() for c in name)
    )
    if bad:
        raise RegistrationError(
            f"{what}{name[:300]!r} for {cls.__qualname__} is not a usable serialized name; use "
            f"1 to {MAX_NAME_LENGTH} printable characters without spaces, such as "
            f'"mypkg.{cls.__qualname__}".'
        )
    if name in BUILTIN_NAMES:
        raise RegistrationError(
            f"{what}{name!r} for {cls.__qualname__} is reserved for a built-in container; "
            f'choose a name of your own, such as "mypkg.{cls.__qualname__}".'
        )
    return name
