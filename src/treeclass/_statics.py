"""Static value types made serializable by name: :func:`register_static`.

Out of the box a static field may hold ``None``, ``bool``, ``int``, ``float``, ``str``,
``bytes``, ``tuple``, ``list``, a ``dict`` with ``str`` keys or a ``frozenset`` (see
:mod:`treeclass._auxdata`). Any other type is serialized by the name it was registered under
here, with a pair of converters: ``to_json(value)`` returns something made of the supported
types above, ``from_json(that) -> value`` rebuilds the value. Enums (by value) and frozen
dataclasses, attrs classes and namedtuples (by ``__init__`` fields) get their converters made
for them.

Loading looks a static type up by its registered name only: it never imports a module or
reads a module path, so a name that is not registered is an
:class:`~treeclass.UnregisteredNameError`.
"""

from __future__ import annotations

from _thread import RLock

from ._errors import NameConflictError, RegistrationError, RegistrationTypeError

TYPE_CHECKING = False  # typing costs ~10 ms to import; checkers treat this as True
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, TypeVar

    _T = TypeVar("_T", bound=type)

__all__ = ["StaticDef", "register_static", "static_for_name", "static_for_type"]

# Types that already have a JSON form of their own (see _auxdata.encode_static).
_NATIVE = (type(None), bool, int, float, str, bytes, tuple, list, dict, frozenset)


class StaticDef:
    """One registered static value type: its name and converters."""

    __slots__ = ("cls", "from_json", "name", "to_json")

    cls: type
    name: str
    to_json: Callable[[Any], Any]
    from_json: Callable[[Any], Any]

    def __init__(
        self,
        cls: type,
        name: str,
        to_json: Callable[[Any], Any],
        from_json: Callable[[Any], Any],
    ) -> None:
        self.cls = cls
        self.name = name
        self.to_json = to_json
        self.from_json = from_json

    @property
    def qualname(self) -> str:
        """``module.QualName`` of the class, for messages."""
        return f"{self.cls.__module__}.{self.cls.__qualname__}"

    def __repr__(self) -> str:
        return f"<treeclass static type {self.qualname} name={self.name!r}>"


_LOCK = RLock()
_BY_TYPE: dict[type, StaticDef] = {}
_BY_NAME: dict[str, StaticDef] = {}


def static_for_type(cls: type) -> StaticDef | None:
    """The :class:`StaticDef` of ``cls`` (exact type), or ``None``."""
    return _BY_TYPE.get(cls)


def static_for_name(name: str) -> StaticDef | None:
    """The :class:`StaticDef` registered under ``name``, or ``None``. Never imports anything."""
    return _BY_NAME.get(name)


def _enum_converters(cls: type) -> tuple[Callable[[Any], Any], Callable[[Any], Any]]:
    def to_json(member: Any) -> Any:
        return member.value

    def from_json(value: Any) -> Any:
        return cls(value)

    return to_json, from_json


def _fields_converters(cls: type) -> tuple[Callable[[Any], Any], Callable[[Any], Any]]:
    from ._fields import describe, is_dataclass_class

    if is_dataclass_class(cls) and not cls.__dataclass_params__.frozen:  # type: ignore[attr-defined]
        raise RegistrationError(
            f"register_static() needs {cls.__module__}.{cls.__qualname__} to be a frozen "
            "dataclass (a static value must be immutable and hashable); declare it with "
            "@dataclass(frozen=True), or pass to_json= and from_json=."
        )
    if getattr(cls, "__hash__", None) is None:
        raise RegistrationError(
            f"instances of {cls.__module__}.{cls.__qualname__} are unhashable, so they cannot "
            "be static values; make the class frozen, or pass to_json= and from_json=."
        )
    info = describe(cls)
    # A tuple, so that the closures below never see a later change to the list.
    names = tuple(f.name for f in info.fields if f.init)

    def to_json(obj: Any) -> Any:
        return {n: getattr(obj, n) for n in names}

    def from_json(value: Any) -> Any:
        if value.__class__ is not dict:
            raise ValueError(f"expected a dict of fields, got {value.__class__.__name__}")
        unknown = sorted(set(value) - set(names))
        if unknown:
            raise ValueError(
                f"the value names field(s) {unknown!r}, which {cls.__qualname__} does not "
                f"have (its fields are {list(names)!r})"
            )
        return cls(**value)

    return to_json, from_json


def register_static(
    cls: _T,
    *,
    name: str,
    to_json: Callable[[Any], Any] | None = None,
    from_json: Callable[[Any], Any] | None = None,
) -> _T:
    """Make instances of ``cls`` serializable as static field values, under ``name``.

    An :class:`enum.Enum` is stored by its members' values; a frozen dataclass, attrs class or
    namedtuple by its ``__init__`` fields (a config class that gains a field with a default
    still loads old documents). Any other type needs both converters: ``to_json(value)``
    returns ``None``, ``bool``, ``int``, ``float``, ``str``, ``bytes``, ``tuple``, ``list``,
    ``dict`` (``str`` keys), ``frozenset`` or another registered static type, nested freely,
    and ``from_json(that)`` rebuilds an equal value. Loading a document looks the type up by
    ``name`` only, so ``cls`` must be registered (imported) in the loading process too.

    Registering the same class under the same name again replaces its converters; a re-run of
    the same class definition (same module and qualified name) takes over its name.

    Args:
        cls: the type of the static values.
        name: its stable serialized name, such as ``"mypkg.Activation"``.
        to_json: converts a value to JSON-safe data (required unless ``cls`` is an enum or a
            frozen dataclass, attrs class or namedtuple).
        from_json: the inverse of ``to_json`` (given together with it).

    Returns:
        ``cls`` itself.

    Raises:
        RegistrationTypeError: ``cls`` is not a class, or needs converters and has none.
        RegistrationError: a bad name, only one converter given, a type that already has a
            JSON form, or a dataclass that is not frozen.
        NameConflictError: the name belongs to another class, or the class to another name.

    Example:
        >>> import enum
        >>> import treeclass as tc
        >>> class Act(enum.Enum):
        ...     RELU = "relu"
        ...     GELU = "gelu"
        >>> _ = tc.register_static(Act, name="docs.Act")
        >>> @tc.pytree_dataclass(name="docs.Layer")
        ... class Layer:
        ...     w: float
        ...     act: Act = tc.field(static=True, default=Act.RELU)
        >>> spec = tc.tree_structure(Layer(1.0, Act.GELU))
        >>> tc.treespec_loads(tc.treespec_dumps(spec)) == spec
        True

    .. versionadded:: 0.1.0
    """
    from ._registry import _check_name

    if not isinstance(cls, type):
        raise RegistrationTypeError(
            f"register_static() takes a class, got {cls!r} of type {type(cls).__name__}; "
            "pass the type of the static values."
        )
    _check_name(name, cls)
    if cls in _NATIVE:
        raise RegistrationError(
            f"{cls.__qualname__} values already serialize without registration; "
            "register_static() is for other types."
        )
    if (to_json is None) != (from_json is None):
        raise RegistrationError(
            f"register_static({cls.__qualname__}) got only "
            f"{'to_json=' if from_json is None else 'from_json='}; pass both converters, "
            "or neither for an enum or a frozen dataclass."
        )
    if to_json is None or from_json is None:
        import enum

        from ._fields import is_attrs_class, is_dataclass_class, is_namedtuple_class

        if isinstance(cls, enum.EnumMeta):
            to_json, from_json = _enum_converters(cls)
        elif is_dataclass_class(cls) or is_attrs_class(cls) or is_namedtuple_class(cls):
            to_json, from_json = _fields_converters(cls)
        else:
            raise RegistrationTypeError(
                f"{cls.__module__}.{cls.__qualname__} is not an enum, dataclass, attrs class or "
                "namedtuple, so register_static() cannot convert it by itself; pass "
                "to_json=(value -> JSON-safe data) and from_json=(data -> value)."
            )
    elif not (callable(to_json) and callable(from_json)):
        raise RegistrationTypeError(
            f"to_json= and from_json= for {cls.__qualname__} must be callables."
        )
    sd = StaticDef(cls, name, to_json, from_json)
    with _LOCK:
        existing = _BY_TYPE.get(cls)
        if existing is not None and existing.name != name:
            raise NameConflictError(
                f"{sd.qualname} is already registered as a static type under the name "
                f"{existing.name!r}; a class has one name, so use {existing.name!r}."
            )
        holder = _BY_NAME.get(name)
        if holder is not None and holder.cls is not cls:
            same_definition = (
                holder.cls.__module__ == cls.__module__
                and holder.cls.__qualname__ == cls.__qualname__
            )
            if not same_definition:
                raise NameConflictError(
                    f"the static type name {name!r} is taken by {holder.qualname}, so "
                    f"{sd.qualname} cannot have it; give one of them another name."
                )
            del _BY_TYPE[holder.cls]  # a re-run of the same definition: the newest class wins
        _BY_TYPE[cls] = sd
        _BY_NAME[name] = sd
    return cls
