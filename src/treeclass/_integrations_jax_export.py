"""jax.export errors that name the treeclass fix (phase-1 helper for the JAX backend, issue 10).

``Exported.serialize()`` writes every custom node of the function's input and output trees
under the name its class was registered with in ``jax.export``. A class with no such
registration makes JAX raise its generic ``ValueError: Cannot serialize PyTreeDef containing an
unregistered type ... Use export.register_pytree_node_serialization`` -- the wrong advice for a
treeclass user, who should give the class a ``name=`` instead (or, for an object of a class
whose definition was run again, rebuild the object from the current class).

The functions here give such a class a *refusing* ``jax.export`` registration, through the
public ``jax.export.register_pytree_node_serialization``: a placeholder serialized name that
treeclass never writes (it contains spaces, which a treeclass ``name=`` cannot),
and a ``serialize_auxdata`` that raises :class:`~treeclass.UnnamedClassError` saying what to
do. JAX calls ``serialize_auxdata`` directly (jax 0.10.2,
``jax/_src/export/serialization.py``: ``_serialize_pytreedef``), so the treeclass error reaches
the user unchanged. A document naming a placeholder (which only a forged file can) fails to
load with a :class:`~treeclass.TreespecLoadError`.

To be wired into the JAX backend (``JaxBackend.register``):

* an unnamed dataclass / attrs class: :func:`refuse_unnamed` after its ``jax.tree_util``
  registration;
* a re-run definition: after the old class's export entry is dropped,
  :func:`refuse_stale` for the old class, so its live objects fail with the right advice;
* before giving a class a real name (a retry with ``name=`` after a rolled-back
  registration), drop its placeholder: :func:`placeholder_of` tells which one it holds, and
  the backend's ``_drop_export_registration(cls, placeholder)`` removes it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final, NoReturn

import jax.export

from ._errors import TreespecLoadError, UnnamedClassError

__all__ = ["PLACEHOLDER_PREFIX", "forget", "placeholder_of", "refuse_stale", "refuse_unnamed"]

#: How the serialized names of refusing registrations start. They contain spaces, which a
#: treeclass ``name=`` cannot, and the class's ``id``, so they collide with no real name.
PLACEHOLDER_PREFIX: Final = "<treeclass refuses "

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

# Class -> placeholder name it holds in jax.export.
_PLACEHOLDERS: dict[type, str] = {}


def _label(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _refuse(cls: type[Any], kind: str, message: str) -> None:
    if cls in _PLACEHOLDERS:
        return
    placeholder = f"{PLACEHOLDER_PREFIX}{kind} {_label(cls)} at 0x{id(cls):x}>"

    def serialize_auxdata(aux: Any) -> NoReturn:
        del aux
        raise UnnamedClassError(message)

    def deserialize_auxdata(data: bytes) -> NoReturn:
        del data
        raise TreespecLoadError(_PLACEHOLDER_IN_FILE.format(name=placeholder))

    def refuse_children(aux: Any, children: Sequence[Any]) -> NoReturn:
        del aux, children
        raise TreespecLoadError(_PLACEHOLDER_IN_FILE.format(name=placeholder))

    # A namedtuple is a built-in JAX node, absent from jax.tree_util's registry, so jax.export
    # needs a from_children for it (never called: deserialization refuses first).
    from_children: Callable[[Any, Sequence[Any]], Any] | None = None
    if tuple in cls.__mro__:
        from_children = refuse_children

    jax.export.register_pytree_node_serialization(
        cls,
        serialized_name=placeholder,
        serialize_auxdata=serialize_auxdata,
        deserialize_auxdata=deserialize_auxdata,
        from_children=from_children,
    )
    _PLACEHOLDERS[cls] = placeholder


def refuse_unnamed(cls: type) -> None:
    """Make ``Exported.serialize()`` of a tree holding ``cls`` raise an error naming ``name=``.

    ``cls`` must already be a ``jax.tree_util`` node (or a namedtuple) and have no
    ``jax.export`` registration. Calling it again for the same class does nothing.

    Raises:
        ValueError: ``cls`` already has a ``jax.export`` registration (from JAX).
    """
    short = cls.__qualname__.rsplit(".", 1)[-1]
    _refuse(cls, "unnamed", _UNNAMED.format(cls=_label(cls), short=short))


def refuse_stale(cls: type, name: str) -> None:
    """Make ``Exported.serialize()`` of an object of a re-run class refuse with the fix.

    ``cls`` is a class whose definition was run again, so that ``name`` now belongs to the new
    class; the error says to rebuild the object from the current class. ``cls``'s own
    ``jax.export`` entry under ``name`` must have been dropped first.

    Raises:
        ValueError: ``cls`` still has a ``jax.export`` registration (from JAX).
    """
    _refuse(cls, "stale", _STALE.format(cls=_label(cls), name=name))


def placeholder_of(cls: type) -> str | None:
    """The placeholder name ``cls`` holds in ``jax.export``, or ``None``."""
    return _PLACEHOLDERS.get(cls)


def forget(cls: type) -> None:
    """Forget that ``cls`` holds a placeholder (after the backend dropped its entry)."""
    _PLACEHOLDERS.pop(cls, None)
