"""``replace(obj, **changes)``: a copy with some fields changed, as ``flax.struct`` and ``chex``.

Classes made by ``@tc.pytree_dataclass`` get a ``.replace(**changes)`` method
(:func:`attach_replace`; not when the class defines ``replace`` itself or has a field of that
name); :func:`replace` (``tc.replace``) is the typed function form.

Semantics are those of :func:`dataclasses.replace` (what ``flax.struct`` and ``chex`` call)
and :func:`attrs.evolve`: the copy is made by the class's ``__init__``, so ``__post_init__``,
attrs validators and converters run on the new values and ``init=False`` fields are computed
again -- ``replace`` is the user building a new object. (Unflatten, which rebuilds an object
from leaves JAX or torch hand back, never runs ``__init__``.) Static fields can be replaced
like any other field. Mistakes are reported as :class:`~treeclass.TreeclassTypeError` naming
the class, the field and the fix.
"""

from __future__ import annotations

import importlib
import sys
from typing import TYPE_CHECKING, Any, Final, TypeVar, overload

from .._errors import TreeclassTypeError
from .fields import is_attrs_class, is_dataclass_class, is_namedtuple_class

if TYPE_CHECKING:
    from .replaceable import AttrsLike, DataclassLike, NamedTupleLike, P, SupportsReplace

__all__ = ["attach_replace", "replace", "replace_changes"]

_T = TypeVar("_T")
_R = TypeVar("_R")
_AT = TypeVar("_AT", bound="AttrsLike")
_O = TypeVar("_O", bound="DataclassLike | AttrsLike | NamedTupleLike")

_NOT_A_FIELD: Final = (
    "{cls}.replace() got {name!r}, which is not a field of {cls}; its fields are {fields}."
)
_NOT_IN_INIT: Final = (
    "{cls}.replace() got {name!r}, a field with init=False: __init__ computes it, so "
    "replace() cannot set it. Change the fields it is computed from instead."
)
_NOT_A_CLASS: Final = (
    "replace() takes an instance of a dataclass, attrs class or namedtuple, got a {type}."
)
_POSITIONAL: Final = (
    "{cls}.replace() takes the new values by keyword (replace(obj, field=value)), got {n} "
    "positional argument(s) after the object."
)


def _check(cls: type, changes: dict[str, Any], names: list[str], init_names: set[str]) -> None:
    for name in changes:
        if name not in init_names:
            template = _NOT_IN_INIT if name in names else _NOT_A_FIELD
            raise TreeclassTypeError(
                template.format(cls=cls.__qualname__, name=name, fields=", ".join(names))
            )


_DOC: Final = """Return a copy of ``obj`` with the fields named in ``changes`` set to new values.

    Args:
        obj: an instance of a dataclass, attrs class or namedtuple.
        *args: refused (the typing for Python 3.13 targets names them, as a ``ParamSpec``).
        **changes: field name -> new value (for attrs classes, the ``__init__`` argument
            names, as with :func:`attrs.evolve`).

    Returns:
        A new object of ``type(obj)``, made by its ``__init__``; ``obj`` is not changed.

    Raises:
        TreeclassTypeError: a name is not a field, or names an ``init=False`` field; ``obj``
            is not a dataclass / attrs / namedtuple instance; a value was given by position.

    Example:
        >>> import treeclass as tc
        >>> @tc.pytree_dataclass(frozen=True)
        ... class State:
        ...     step: int
        ...     lr: float = 0.1
        ...     run: str = tc.field(static=True, default="a")
        >>> tc.replace(State(1), step=2, run="b")
        State(step=2, lr=0.1, run='b')
        >>> State(1).replace(lr=0.2)  # the method (typed by the treeclass.mypy plugin)
        State(step=1, lr=0.2, run='a')
    """

# The signature type checkers see (docs/typing.md): on Python 3.13+ targets the object's typed
# ``__replace__`` (dataclasses; attrs classes under pyright) gives the keywords; before, and for
# attrs classes under mypy, only the kind of object is checked (plugin: ``treeclass.mypy``).
if sys.version_info >= (3, 13):

    @overload
    def replace(obj: SupportsReplace[P, _R], /, *args: P.args, **changes: P.kwargs) -> _R: ...
    @overload
    def replace(obj: _AT, /, **changes: Any) -> _AT: ...
    def replace(obj: Any, /, *args: Any, **changes: Any) -> Any:
        return replace_changes(obj, changes, args)

else:

    def replace(obj: _O, /, **changes: Any) -> _O:
        return replace_changes(obj, changes)


replace.__doc__ = _DOC


def replace_changes(obj: _T, changes: dict[str, Any], args: tuple[Any, ...] = ()) -> _T:
    """``replace(obj, *args, **changes)`` for callers inside treeclass; ``args`` are refused."""
    cls = type(obj)
    if args:
        raise TreeclassTypeError(_POSITIONAL.format(cls=cls.__qualname__, n=len(args)))
    if is_dataclass_class(cls):
        import dataclasses

        fields = dataclasses.fields(obj)  # type: ignore[arg-type]
        _check(cls, changes, [f.name for f in fields], {f.name for f in fields if f.init})
        return dataclasses.replace(obj, **changes)  # type: ignore[type-var]
    if is_attrs_class(cls):
        # attrs is installed (cls is an attrs class); imported by name so that treeclass
        # type-checks without it, as _fields reads attrs classes without importing attrs.
        attrs: Any = importlib.import_module("attrs")
        a_fields: tuple[Any, ...] = getattr(cls, "__attrs_attrs__")  # noqa: B009
        names = [str(f.alias) for f in a_fields]
        _check(cls, changes, names, {str(f.alias) for f in a_fields if f.init})
        evolved: _T = attrs.evolve(obj, **changes)
        return evolved
    if is_namedtuple_class(cls):
        nt: Any = obj  # checked above to be a namedtuple
        nt_fields: tuple[str, ...] = nt._fields
        _check(cls, changes, list(nt_fields), set(nt_fields))
        replaced: _T = nt._replace(**changes)
        return replaced
    raise TreeclassTypeError(_NOT_A_CLASS.format(type=f"{cls.__module__}.{cls.__qualname__}"))


_METHOD_DOC: Final = """Return a copy with the fields named in ``changes`` set to new values.

    The copy is made by ``__init__`` (so ``__post_init__`` and validators run), as with
    :func:`dataclasses.replace`; static fields can be changed too.

    Raises:
        TreeclassTypeError: a name is not a field of the class, or names an ``init=False``
            field.
    """


def attach_replace(cls: type) -> bool:
    """Give ``cls`` a ``replace(**changes)`` method, unless it has one or a field of that name.

    "Has one": ``cls`` or a base class other than ``object`` defines ``replace`` (a
    treeclass base class's inherited ``replace`` counts as having one, and is kept).

    Returns:
        Whether the method was added to ``cls``.
    """
    if is_dataclass_class(cls):
        import dataclasses

        if any(f.name == "replace" for f in dataclasses.fields(cls)):
            return False
    elif is_attrs_class(cls):
        a_fields: tuple[Any, ...] = getattr(cls, "__attrs_attrs__")  # noqa: B009
        if any(f.name == "replace" for f in a_fields):
            return False
    for klass in cls.__mro__[:-1]:
        if "replace" in vars(klass):
            return False

    def replace(self: Any, /, **changes: Any) -> Any:
        return replace_changes(self, changes)

    replace.__doc__ = _METHOD_DOC
    replace.__module__ = cls.__module__
    replace.__qualname__ = f"{cls.__qualname__}.replace"
    cls.replace = replace  # type: ignore[attr-defined]
    return True
