"""Static values a class could have produced: what loading checks beyond the JSON form.

A document can hold any static value the JSON form allows, including ones the class could
never have made: a list for a field annotated ``str``, a list in a frozen (hashable) class,
a value its attrs validator refuses. :func:`static_check` makes, once per class, a check that
refuses those at load, from the fields' annotations where they are plain types (``str``,
``int``, ``float``, ``bool``, ``bytes``, ``tuple[...]``, ``list[...]``, ``dict[...]``,
``frozenset[...]``, a registered static type, an enum, ``Literal[...]``, and unions of these
with ``None``), from the class's hashability, and from attrs validators that do not need the
instance. Annotations it cannot resolve or does not know are not checked (``docs/format.md``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from .._errors import TreespecLoadError, UnserializableStaticError, brief
from .fields import MISSING, ClassInfo, describe

__all__ = ["field_checks", "static_check"]

#: A check of one field's value: the reason it is refused, or ``None``.
Check = Callable[[Any], "str | None"]

_PLAIN: Final[dict[type, tuple[type, ...]]] = {
    str: (str,),
    int: (int,),  # bool included: a bool is an int
    float: (float, int),  # an int is acceptable where a float is annotated (PEP 484)
    bool: (bool,),
    bytes: (bytes,),
    tuple: (tuple,),
    list: (list,),
    dict: (dict,),
    frozenset: (frozenset,),
}


def _kind_of(annotation: Any) -> tuple[tuple[type, ...], tuple[Any, ...] | None] | None:
    """``(accepted types, accepted literal values or None)``, or ``None`` (not checked)."""
    import types
    import typing

    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _kind_of(typing.get_args(annotation)[0])
    if origin is typing.Literal:
        values: tuple[Any, ...] = typing.get_args(annotation)
        types_: set[type] = {v.__class__ for v in values}
        return tuple(types_), values
    if origin is typing.Union or origin is types.UnionType:
        accepted: list[type] = []
        literals: list[Any] = []
        any_literal = False
        for arg in typing.get_args(annotation):
            if arg is type(None):
                accepted.append(type(None))
                literals.append(None)
                continue
            kind = _kind_of(arg)
            if kind is None:
                return None  # a member we cannot check: the whole union is unchecked
            accepted += kind[0]
            if kind[1] is not None:
                any_literal = True
                literals += kind[1]
            else:
                literals = []  # a plain type in the union accepts more than the literals
                any_literal = False
        return tuple(accepted), (tuple(literals) if any_literal else None)
    base = origin if origin is not None else annotation
    if base in _PLAIN:
        return _PLAIN[base], None
    if isinstance(base, type):
        from .statics import static_for_type

        if static_for_type(base) is not None:
            return (base,), None
        import enum

        if issubclass(base, enum.Enum):
            return (base,), None
    return None


_ALWAYS_HASHABLE: Final[frozenset[type]] = frozenset((str, int, float, bool, bytes, type(None)))


def _kind_check(
    name: str, annotation: Any, default: Any = MISSING
) -> tuple[Check, frozenset[type] | None] | None:
    """The check of a field's annotation, and the exact types that pass it outright.

    The field's own default passes whatever the annotation says (``n: int = None`` is common,
    and the class writes it).
    """
    kind = _kind_of(annotation)
    if kind is None:
        return None
    accepted, literals = kind
    # (type(...) is type: on Python 3.10 a generic alias such as tuple[int, ...] passes
    # isinstance(..., type).)
    label = annotation.__name__ if type(annotation) is type else brief(annotation, 80)
    has_default = default is not MISSING

    def check(value: Any) -> str | None:
        if has_default and (
            value is default or (value.__class__ is default.__class__ and value == default)
        ):
            return None
        if type(value) not in accepted and not isinstance(value, accepted):
            return f"the value is a {type(value).__name__}, but the field is {label}"
        if literals is not None and value not in literals:
            return f"{brief(value, 60)} is not one of the field's values {brief(literals, 80)}"
        return None

    return check, (frozenset(accepted) if literals is None else None)


def _hashable_check(value: Any) -> str | None:
    try:
        hash(value)
    except TypeError:
        return (
            f"the value is an unhashable {type(value).__name__}, but instances of the class "
            "are hashable (so the class cannot hold it)"
        )
    return None


def _validator_check(attribute: Any) -> Check:
    validator = attribute.validator

    def check(value: Any) -> str | None:
        try:
            validator(None, attribute, value)
        except (TypeError, ValueError) as e:
            return f"its attrs validator refuses {brief(value, 60)} ({type(e).__name__}: {e})"
        except Exception:  # a validator that needs the instance cannot be checked here
            return None
        return None

    return check


def _annotations(cls: type) -> dict[str, Any]:
    """The class's resolved annotations; ``{}`` where they cannot be resolved."""
    import typing

    try:
        return typing.get_type_hints(cls, include_extras=True)
    except Exception:  # forward references, names of other modules: not checked
        return {}


def field_checks(cls: type, names: tuple[str, ...]) -> tuple[tuple[str, Check], ...]:
    """The annotation checks of the named fields of ``cls`` (those treeclass can check).

    Used for the fields of a registered static type (a frozen dataclass, attrs class or
    namedtuple) that a document rebuilds by its fields.
    """
    annotations = _annotations(cls)
    defaults = {f.name: f.default for f in describe(cls).fields}
    out: list[tuple[str, Check]] = []
    for name in names:
        kind = (
            _kind_check(name, annotations[name], defaults.get(name, MISSING))
            if name in annotations
            else None
        )
        if kind is not None:
            out.append((name, kind[0]))
    return tuple(out)


def _refusal(label: str, name: str, problem: str, writing: bool) -> Exception:
    """The error of a refused static value: the same reason when writing and loading."""
    if writing:
        return UnserializableStaticError(
            f"cannot save static field {name!r} of {label}: {problem}; every loader refuses "
            "such a value, so the file could never be read back. Store a value the field's "
            "annotation (and the class) allows."
        )
    return TreespecLoadError(
        f"cannot load static field {name!r} of {label}: {problem}; the document was not "
        "written by this class, or was edited."
    )


def static_check(
    info: ClassInfo,
) -> Callable[[tuple[Any, ...], frozenset[str] | None, bool], None] | None:
    """The check of a class's static values (in field order), or ``None`` if none.

    The one rule of what a static value may be, beyond its JSON form: every loader runs it on
    the values it loads, and every writer on the values it writes (so that nothing is written
    that no loader reads back). ``check(values, saved, writing)`` checks the values of the
    fields in ``saved`` (``None``: every field; the others were filled in from the class's own
    defaults) and raises :class:`~treeclass.TreespecLoadError` naming the class and the field,
    or, when ``writing``, :class:`~treeclass.UnserializableStaticError` with the same reason.
    """
    statics = info.static_fields
    if not statics:
        return None
    cls = info.cls
    annotations = _annotations(cls)
    hashable = getattr(cls, "__hash__", None) is not None
    attrs_fields: dict[str, Any] = {}
    if info.kind == "attrs":
        attrs_fields = {a.name: a for a in getattr(cls, "__attrs_attrs__", ())}
    defaults = {f.name: f.default for f in info.fields}
    checks: list[tuple[int, str, list[Check], frozenset[type] | None]] = []
    for i, name in enumerate(statics):
        of_field: list[Check] = []
        # The exact types of values that pass every check outright (None: check each value;
        # ``everything``: no check restricts the type).
        everything = True
        quick: frozenset[type] | None = None
        kind = (
            _kind_check(name, annotations[name], defaults.get(name, MISSING))
            if name in annotations
            else None
        )
        if kind is not None:
            of_field.append(kind[0])
            everything, quick = False, kind[1]
        if hashable:
            of_field.append(_hashable_check)
            if everything:
                everything, quick = False, _ALWAYS_HASHABLE
            elif quick is not None:
                quick = quick & _ALWAYS_HASHABLE
        attribute = attrs_fields.get(name)
        if attribute is not None and getattr(attribute, "validator", None) is not None:
            of_field.append(_validator_check(attribute))
            quick = None
        if of_field:
            checks.append((i, name, of_field, quick))
    if not checks:
        return None
    label = info.qualname
    plan = tuple(checks)  # a tuple: the closure never sees a later change

    def check(values: tuple[Any, ...], saved: frozenset[str] | None, writing: bool) -> None:
        for i, name, of_field, quick in plan:
            if quick is not None and values[i].__class__ in quick:
                continue
            if saved is not None and name not in saved:
                continue
            for field_check in of_field:
                problem = field_check(values[i])
                if problem is not None:
                    raise _refusal(label, name, problem, writing)

    return check
