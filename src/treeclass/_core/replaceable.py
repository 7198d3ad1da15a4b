"""The static types ``replace`` takes: protocols of dataclasses, attrs classes and namedtuples.

Only type checkers read these (``_replace`` and ``_api`` import them under ``TYPE_CHECKING``).
What each checker then checks is in ``docs/typing.md``:

* :class:`SupportsReplace` is ``copy.replace``'s protocol, with the keyword arguments kept as a
  ``ParamSpec``: mypy and pyright give every dataclass (and pyright every attrs class) a typed
  ``__replace__(self, *, field: type = ...)`` when the target is Python 3.13 or later, so a
  ``replace`` typed with it checks field names and value types with no plugin.
* :class:`DataclassLike`, :class:`AttrsLike` and :class:`NamedTupleLike` say "an instance of
  a dataclass / attrs class / namedtuple", for targets before 3.13 (and, for attrs classes,
  mypy, which gives them no ``__replace__``): ``replace(3)`` is an error there, the fields are
  not checked (the ``treeclass.mypy`` plugin checks them).
"""

from __future__ import annotations

from dataclasses import Field
from typing import Any, ClassVar, ParamSpec, Protocol, TypeVar

__all__ = ["AttrsLike", "DataclassLike", "NamedTupleLike", "SupportsReplace"]

P = ParamSpec("P")
R_co = TypeVar("R_co", covariant=True)


class SupportsReplace(Protocol[P, R_co]):
    """An object with ``copy.replace``'s ``__replace__`` (Python 3.13), its keywords kept."""

    def __replace__(self, /, *args: P.args, **changes: P.kwargs) -> R_co: ...


class DataclassLike(Protocol):
    """An instance of a dataclass (or of a ``dataclass_transform`` class)."""

    __dataclass_fields__: ClassVar[dict[str, Field[Any]]]


class AttrsLike(Protocol):
    """An instance of an attrs class."""

    __attrs_attrs__: ClassVar[Any]


class NamedTupleLike(Protocol):
    """An instance of a namedtuple."""

    def _asdict(self) -> dict[str, Any]: ...
