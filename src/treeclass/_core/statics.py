"""Static values as JSON: the exact codec, and :func:`register_static` for other types.

Encoded static values (every non-scalar is a one-key object naming its type, so a tuple comes
back a tuple and a list a list at every depth; see ``docs/format.md``)::

    None, true/false, a str, a finite float, an int in (-2**53, 2**53)  -> themselves
    [v, ...]                           a list
    {"tuple": [v, ...]}                a tuple
    {"dict": {"k": v, ...}}            a dict with str keys
    {"frozenset": [v, ...]}            a frozenset (items in canonical-JSON order)
    {"bytes": "base64"}                bytes
    {"int": "-0x1f..."}                an int outside (-2**53, 2**53), in hex
    {"float": "nan" | "inf" | "-inf"}  a non-finite float
    {"registered": [name, v]}          a value of a type registered with register_static()

Decoding is strict and never imports: a registered type is looked up by its name only.
"""

from __future__ import annotations

from _thread import RLock
from collections.abc import Callable, Iterable
from operator import attrgetter
from typing import Any, Final, NamedTuple, TypeVar, cast
from weakref import WeakKeyDictionary

from .._errors import (
    NameConflictError,
    RegistrationError,
    RegistrationTypeError,
    TreespecLoadError,
    UnserializableStaticError,
    brief,
    qualname,
)
from .fields import (
    MISSING,
    ClassInfo,
    describe,
    is_attrs_class,
    is_dataclass_class,
    is_namedtuple_class,
)
from .json import decode_float, decode_int, dumps_canonical, encode_float, encode_int
from .names import Origin, check_name, registration_origin

__all__ = [
    "MAX_STATIC_DEPTH",
    "BadStatic",
    "StaticCheck",
    "StaticType",
    "Unencodable",
    "check_hash_spread",
    "decode_static",
    "encode_static",
    "register_static",
    "static_check",
    "static_for_name",
    "static_for_type",
    "type_label",
]

#: How deeply static values may nest (containers inside containers).
MAX_STATIC_DEPTH: Final = 100
#: Distinct values allowed to share a hash in one frozenset or dict node before a document
#: counts as crafted to make hashing quadratic (real data has a handful at most).
_HASH_COLLISIONS: Final = 64

SUPPORTED: Final = "None, bool, int, float, str, bytes, tuple, list, dict with str keys, frozenset"

_T = TypeVar("_T", bound=type)


class Unencodable(Exception):
    """Internal: a static value (or a part of it) has no JSON form."""

    def __init__(self, value: Any, problem: str, fix: str = "", *, has_form: bool = False) -> None:
        super().__init__(problem)
        self.value = value
        self.problem = problem
        #: What the user can do (default: store a supported value).
        self.fix = fix or f"store a value made of {SUPPORTED}"
        #: The value has a JSON form in principle (the refusal is for another reason).
        self.has_form = has_form


class BadStatic(Exception):
    """Internal: encoded static data is malformed (or names an unregistered type)."""

    def __init__(self, problem: str, *, unregistered: bool = False) -> None:
        super().__init__(problem)
        self.problem = problem
        self.unregistered = unregistered


def type_label(t: type) -> str:
    """A type's name for messages: ``list``, ``mypkg.Config``."""
    if t.__module__ == "builtins":
        return t.__qualname__
    return f"{t.__module__}.{t.__qualname__}"


def check_hash_spread(items: Iterable[Any], what: str) -> None:
    """Refuse hashable items crafted to share hash values (which makes hashing quadratic).

    Raises:
        BadStatic: more than a few distinct items share a hash, or an item is unhashable.
    """
    items = list(items)
    try:
        hashes = {hash(item) for item in items}  # ints: hashing these is linear
    except TypeError:
        raise BadStatic(f"{what} include an unhashable item") from None
    if len(items) - len(hashes) > _HASH_COLLISIONS:
        raise BadStatic(
            f"{what} are {len(items)} values with only {len(hashes)} distinct hash values, "
            "which only a document crafted to make loading slow has"
        )


# --- registered static types ------------------------------------------------------------------


class StaticType(NamedTuple):
    """One registered static value type: its name and converters."""

    cls: type
    name: str
    to_json: Callable[[Any], Any]
    from_json: Callable[[Any], Any]
    origin: Origin


_LOCK = RLock()
_BY_TYPE: dict[type, StaticType] = {}
_BY_NAME: dict[str, StaticType] = {}
# Static types whose name a re-run of their class statement took over: their values are refused
# with an error saying to rebuild them from the new class (weak: old classes may go away).
_SUPERSEDED: WeakKeyDictionary[type, StaticType] = WeakKeyDictionary()
# Types that already have a JSON form of their own.
_NATIVE: Final = (type(None), bool, int, float, str, bytes, tuple, list, dict, frozenset)


def static_for_type(cls: type) -> StaticType | None:
    """The :class:`StaticType` of ``cls`` (exact type), or ``None``."""
    return _BY_TYPE.get(cls)


def static_for_name(name: str) -> StaticType | None:
    """The :class:`StaticType` registered under ``name``, or ``None``. Never imports."""
    return _BY_NAME.get(name)


# --- encoding ---------------------------------------------------------------------------------


def encode_static(value: Any, _depth: int = 0) -> Any:
    """Encode one static value as JSON-safe data (see the module docstring for the forms).

    Raises:
        Unencodable: the value, or a value inside it, has no JSON form.

    Example:
        >>> from treeclass._core.statics import encode_static
        >>> encode_static((1, [b"x", float("inf")]))
        {'tuple': [1, [{'bytes': 'eA=='}, {'float': 'inf'}]]}
    """
    t: Any = value.__class__  # type() of an Any is Unknown to pyright
    if t is str or t is bool or value is None:
        return value
    if t is int:
        try:
            n = encode_int(value)
        except ValueError as e:
            raise Unencodable(value, f"it is {e.args[0]}", e.args[1]) from None
        return n if n.__class__ is int else {"int": n}
    if t is float:
        x = encode_float(value)
        return x if x.__class__ is float else {"float": x}
    if _depth >= MAX_STATIC_DEPTH:
        raise Unencodable(
            value, f"it nests deeper than {MAX_STATIC_DEPTH} levels (or contains itself)"
        )
    d = _depth + 1
    if t is tuple:
        return {"tuple": [encode_static(v, d) for v in value]}
    if t is list:
        return [encode_static(v, d) for v in value]
    if t is dict:
        for k in value:
            kt: Any = k.__class__
            if kt is not str:
                raise Unencodable(
                    k, f"it is a dict with a {type_label(kt)} key {brief(k, 40)} (only str keys)"
                )
        return {"dict": {k: encode_static(value[k], d) for k in sorted(value)}}
    if t is bytes:
        import base64

        return {"bytes": base64.b64encode(value).decode("ascii")}
    if t is frozenset:
        items = [encode_static(v, d) for v in value]
        items.sort(key=dumps_canonical)
        return {"frozenset": items}
    st = _BY_TYPE.get(t)
    if st is not None:
        try:
            converted = st.to_json(value)
        except Unencodable:
            raise  # a refusal of register_static's own converters (already worded)
        except Exception as e:
            raise Unencodable(
                value,
                f"its to_json converter (registered as {st.name!r}) raised "
                f"{type(e).__name__}: {brief(str(e), 80)}",
            ) from e
        return {"registered": [st.name, encode_static(converted, d)]}
    old = _SUPERSEDED.get(t)
    if old is not None:
        raise Unencodable(
            value,
            f"it holds a value of type {type_label(t)}, which was defined again (its class "
            "statement ran a second time, as in a notebook or after importlib.reload), and the "
            f"static type name {old.name!r} now belongs to the new class",
            "rebuild the value from the current class before serializing it",
            has_form=True,
        )
    code = _code_in(value)
    if code is not None:
        raise Unencodable(value, f"it holds {code}", CALLABLE_FIX)
    raise Unencodable(
        value,
        f"it holds a value of type {type_label(t)}",
        f"register the type with treeclass.register_static({t.__qualname__}, "
        'name="mypkg.TypeName") (enums and frozen dataclasses need no converters, other '
        f"types to_json= and from_json=), or store a supported value ({SUPPORTED})",
    )


#: What a static value that is code (a function, a class, an optimizer) can do instead.
CALLABLE_FIX: Final = (
    "a callable cannot be saved: a file holds data, never code (registering its type with "
    "register_static would not help). Keep it out of the saved tree: hold it outside the "
    "class whose instances are saved, or save the config it is made from and rebuild it on "
    "load (for a training state such as flax's TrainState, save params, opt_state and step, "
    "and make tx= again from the config)"
)


def _is_code(value: Any) -> bool:
    """Whether ``value`` is code: a function, method, ``functools.partial`` or class.

    Also a callable wrapping a function (``functools.wraps``, ``jax.jit``: ``__wrapped__``).
    """
    import functools
    import types

    if callable(value) and not isinstance(value, type) and hasattr(value, "__wrapped__"):
        return True
    return isinstance(
        value,
        (
            type,
            types.FunctionType,
            types.BuiltinFunctionType,
            types.MethodType,
            types.MethodWrapperType,
            types.WrapperDescriptorType,
            types.MethodDescriptorType,
            functools.partial,
        ),
    )


def _code_in(value: Any) -> str | None:
    """How to name ``value`` if it is code: a callable, or a tuple of them, else ``None``.

    A function, method, ``functools.partial`` or class; or a namedtuple of functions, such
    as an optax ``GradientTransformation`` (``init`` and ``update``).
    """
    if _is_code(value):
        kind = "class" if isinstance(value, type) else type_label(value.__class__)
        name = getattr(value, "__qualname__", None)
        shown = name if isinstance(name, str) else brief(value, 60)
        return f"the {kind} {brief(shown, 60)}"
    label = type_label(value.__class__)
    if issubclass(value.__class__, tuple) and any(map(_is_code, cast("tuple[Any, ...]", value))):
        return f"a value of type {label}, a tuple of callables"
    return None


# --- decoding ---------------------------------------------------------------------------------


def _decode_bytes(v: str) -> bytes:
    import base64

    try:
        return base64.b64decode(v.encode("ascii"), validate=True)
    except ValueError:  # (binascii.Error and UnicodeEncodeError are ValueErrors)
        raise BadStatic(f"{v[:40]!r} is not base64 text") from None


def _decode_registered(v: list[Any], d: int) -> Any:
    name: str = v[0]
    st = _BY_NAME.get(name)
    if st is None:
        raise BadStatic(
            f"it names the static type {brief(name, 100)}, which is not registered in this "
            "process; import the module that calls "
            f'treeclass.register_static(..., name="{name[:100]}") before loading',
            unregistered=True,
        )
    inner = decode_static(v[1], d)
    try:
        return st.from_json(inner)
    except Exception as e:
        raise BadStatic(
            f"the from_json converter of static type {name!r} ({qualname(st.cls)}) rejected "
            f"{brief(inner, 80)}: {type(e).__name__}: {brief(str(e), 200)}"
        ) from None


def _decode_tagged(data: dict[str, Any], d: int) -> Any:
    if len(data) != 1:
        raise BadStatic(
            f"an object with keys {brief(sorted(data), 80)}; an encoded static value is an "
            'object with exactly one key naming its type ("tuple", "dict", ...)'
        )
    ((tag, v),) = data.items()
    vt: Any = v.__class__
    if tag == "tuple":
        if vt is list:
            return tuple([decode_static(x, d) for x in v])
    elif tag == "dict":
        if vt is dict:
            return {k: decode_static(x, d) for k, x in v.items()}
    elif tag in ("int", "float"):
        if vt is str:  # (the numbers that are not their own JSON number)
            try:
                return decode_int(v) if tag == "int" else decode_float(v)
            except ValueError as e:
                raise BadStatic(f'{{"{tag}": ...}}: {e}') from None
    elif tag == "bytes":
        if vt is str:
            return _decode_bytes(v)
    elif tag == "frozenset":
        if vt is list:
            items = [decode_static(x, d) for x in v]
            check_hash_spread(items, "the items of a frozenset")
            result = frozenset(items)
            if len(result) != len(items):
                raise BadStatic("a frozenset lists an item twice")
            return result
    elif tag == "registered":
        if vt is list and len(v) == 2 and v[0].__class__ is str:
            return _decode_registered(v, d)
    else:
        raise BadStatic(f"{tag[:60]!r} is not a known static value type")
    raise BadStatic(f'the value of a {{"{tag}": ...}} object has the wrong form: {brief(v, 60)}')


def decode_static(data: Any, _depth: int = 0) -> Any:
    """Inverse of :func:`encode_static`.

    Raises:
        BadStatic: ``data`` is not an encoded static value.

    Example:
        >>> from treeclass._core.statics import decode_static
        >>> decode_static({"tuple": [1, [{"bytes": "eA=="}]]})
        (1, [b'x'])
    """
    t: Any = data.__class__
    if t is str or t is bool or data is None:
        return data
    if t is int:
        try:
            return decode_int(data)  # the one number codec: bare only in (-2**53, 2**53)
        except ValueError as e:
            raise BadStatic(str(e)) from None
    if t is float:
        if data - data == 0.0:
            return data
        raise BadStatic('a non-finite number (written {"float": "nan"} and the like)')
    if _depth >= MAX_STATIC_DEPTH:
        raise BadStatic(f"the value nests deeper than {MAX_STATIC_DEPTH} levels")
    if t is list:
        return [decode_static(x, _depth + 1) for x in data]
    if t is dict:
        return _decode_tagged(data, _depth + 1)
    raise BadStatic(f"a value of type {type_label(t)} is not JSON data")


# --- register_static --------------------------------------------------------------------------


def _fields_converters(cls: type) -> tuple[Callable[[Any], Any], Callable[[Any], Any]]:
    params = vars(cls).get("__dataclass_params__")
    if is_dataclass_class(cls) and not getattr(params, "frozen", False):
        raise RegistrationError(
            f"register_static() needs {qualname(cls)} to be a frozen "
            "dataclass (a static value must be immutable and hashable); declare it with "
            "@dataclass(frozen=True), or pass to_json= and from_json=."
        )
    if getattr(cls, "__hash__", None) is None:
        raise RegistrationError(
            f"instances of {qualname(cls)} are unhashable, so they cannot "
            "be static values; make the class frozen, or pass to_json= and from_json=."
        )
    fields_info = describe(cls).fields
    names = tuple(f.name for f in fields_info if f.init)
    # The fields' annotation checks, made at first use (when every name the annotations use
    # is defined), run by writers and loaders alike.
    checks: list[dict[str, tuple[Check, Any]]] = []

    def problem(fields: dict[str, Any]) -> str | None:
        if not checks:
            checks.append(_field_kinds(cls, fields_info, names))
        for name, (check, _) in checks[0].items():
            if name in fields:
                found = check(fields[name])
                if found is not None:
                    return f"field {name!r}: {found}"
        return None

    def to_json(obj: Any) -> Any:
        fields = {n: getattr(obj, n) for n in names}
        found = problem(fields)
        if found is not None:
            raise Unencodable(
                obj,
                f"its {cls.__qualname__} value fails the check every loader makes ({found}), "
                "so it could never be read back",
                f"give {cls.__qualname__} field values its annotations allow",
                has_form=True,
            )
        return fields

    def from_json(value: Any) -> Any:
        if value.__class__ is not dict:
            raise ValueError(f"expected a dict of fields, got {value.__class__.__name__}")
        unknown = sorted(set(value) - set(names))
        if unknown:
            raise ValueError(
                f"the value names field(s) {unknown!r}, which {cls.__qualname__} does not "
                f"have (its fields are {list(names)!r})"
            )
        found = problem(value)
        if found is not None:
            raise ValueError(found)
        return cls(**value)

    return to_json, from_json


def _converters(cls: type) -> tuple[Callable[[Any], Any], Callable[[Any], Any]]:
    import enum

    if isinstance(cls, enum.EnumMeta):
        return attrgetter("value"), cls
    if is_dataclass_class(cls) or is_attrs_class(cls) or is_namedtuple_class(cls):
        return _fields_converters(cls)
    raise RegistrationTypeError(
        f"{qualname(cls)} is not an enum, dataclass, attrs class or "
        "namedtuple, so register_static() cannot convert it by itself; pass "
        "to_json=(value -> JSON-safe data) and from_json=(data -> value)."
    )


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
    the same class statement (a notebook cell, ``importlib.reload``) takes over its name.

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
    if not isinstance(cls, type):
        raise RegistrationTypeError(
            f"register_static() takes a class, got {brief(cls, 80)} of type "
            f"{type(cls).__name__}; pass the type of the static values."
        )
    check_name(name, cls)
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
        to_json, from_json = _converters(cls)
    elif not (callable(to_json) and callable(from_json)):
        raise RegistrationTypeError(
            f"to_json= and from_json= for {cls.__qualname__} must be callables."
        )
    st = StaticType(cls, name, to_json, from_json, registration_origin(cls))
    with _LOCK:
        existing = _BY_TYPE.get(cls)
        if existing is not None and existing.name != name:
            raise NameConflictError(
                f"{qualname(st.cls)} is already registered as a static type under the name "
                f"{existing.name!r}; a class has one name, so use {existing.name!r}."
            )
        holder = _BY_NAME.get(name)
        if holder is not None and holder.cls is not cls:
            if not st.origin.reruns(holder.origin):
                raise NameConflictError(
                    f"the static type name {name!r} is taken by {qualname(holder.cls)}, so "
                    f"{qualname(st.cls)} cannot have it; give one of them another name (a class "
                    "takes a name over only when its own class statement runs again, in the "
                    "module that registered it)."
                )
            del _BY_TYPE[holder.cls]  # a re-run of the same definition: the newest class wins
            _SUPERSEDED[holder.cls] = holder
        _SUPERSEDED.pop(cls, None)
        _BY_TYPE[cls] = st
        _BY_NAME[name] = st
    return cls


# --- what a static value may be: the class's own checks ----------------------------------------
# Beyond the JSON form, a static value must be one the class could hold (its annotations,
# hashability and attrs validators; what is checked is listed in docs/format.md).

#: A check of one field's value: the reason it is refused, or ``None``.
Check = Callable[[Any], "str | None"]

# (A bool passes as an int; an int where a float is annotated, as PEP 484 says.)
_PLAIN: Final[dict[type, tuple[type, ...]]] = {
    t: (t,) for t in (str, int, bool, bytes, tuple, list, dict, frozenset)
} | {float: (float, int)}


def _kind_of(annotation: Any) -> tuple[tuple[type, ...], tuple[Any, ...] | None] | None:
    """``(plain types, literal values or None)``, or ``None`` (not checked).

    A value passes if it is an instance of a plain type, or is one of the literal values (of
    the same type). ``int | Literal["scalar"]`` is ``((int,), ("scalar",))``.
    """
    import types
    import typing

    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _kind_of(typing.get_args(annotation)[0])
    if origin is typing.Literal:
        return (), typing.get_args(annotation)
    if origin is typing.Union or origin is types.UnionType:
        plain: list[type] = []
        literals: list[Any] = []
        any_literal = False
        for arg in typing.get_args(annotation):
            if arg is type(None):
                plain.append(type(None))
                continue
            kind = _kind_of(arg)
            if kind is None:
                return None  # a member we cannot check: the whole union is unchecked
            plain += kind[0]
            if kind[1] is not None:
                any_literal = True
                literals += kind[1]
        return tuple(plain), (tuple(literals) if any_literal else None)
    base = origin if origin is not None else annotation
    if base in _PLAIN:
        return _PLAIN[base], None
    if isinstance(base, type):
        if static_for_type(base) is not None:
            return (base,), None
        import enum

        if issubclass(base, enum.Enum):
            return (base,), None
    return None


_ALWAYS_HASHABLE: Final[frozenset[type]] = frozenset((str, int, float, bool, bytes, type(None)))


def _kind_check(annotation: Any, default: Any) -> tuple[Check, frozenset[type] | None] | None:
    """The check of a field's annotation, and the exact types that pass it outright.

    The field's own default passes whatever the annotation says (``n: int = None`` is common,
    and the class writes it).
    """
    kind = _kind_of(annotation)
    if kind is None:
        return None
    plain, literals = kind
    # (type(...) is type: on Python 3.10 a generic alias such as tuple[int, ...] passes
    # isinstance(..., type).)
    label = annotation.__name__ if type(annotation) is type else brief(annotation, 80)
    has_default = default is not MISSING

    def check(value: Any) -> str | None:
        if has_default and (
            value is default or (value.__class__ is default.__class__ and value == default)
        ):
            return None
        if type(value) in plain or isinstance(value, plain):
            return None
        if literals is None:
            return f"the value is a {type(value).__name__}, but the field is {label}"
        if not any(type(v) is type(value) and v == value for v in literals):
            return f"{brief(value, 60)} is not one of the field's values {brief(literals, 80)}"
        return None

    return check, (frozenset(plain) if literals is None else None)


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


def _field_kinds(
    cls: type, fields: Iterable[Any], names: Iterable[str]
) -> dict[str, tuple[Check, frozenset[type] | None]]:
    """The annotation checks (:func:`_kind_check`) of the named fields that have one."""
    annotations = _annotations(cls)
    defaults = {f.name: f.default for f in fields}
    out: dict[str, tuple[Check, frozenset[type] | None]] = {}
    for name in names:
        if name in annotations:
            kind = _kind_check(annotations[name], defaults.get(name, MISSING))
            if kind is not None:
                out[name] = kind
    return out


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


class StaticCheck(NamedTuple):
    """The check of a class's static values, and the values it lets through without a look.

    Attributes:
        check: ``check(values, saved, writing)`` (see :func:`static_check`).
        passes: per checked static field, ``(index, types)``: the exact types whose values
            pass outright (``None``: each value is checked). When every value's type is among
            its field's, ``check`` does nothing, so generated code skips the call.
    """

    check: Callable[[tuple[Any, ...], frozenset[str] | None, bool], None]
    passes: tuple[tuple[int, frozenset[type] | None], ...]


def static_check(info: ClassInfo) -> StaticCheck | None:
    """The check of a class's static values (in field order), or ``None`` if none.

    The one rule of what a static value may be, run by every loader and every writer (so
    nothing is written that no loader reads back). ``check(values, saved, writing)`` checks
    the fields in ``saved`` (``None``: all; the others hold the class's defaults) and raises
    :class:`~treeclass.TreespecLoadError`, or when ``writing``
    :class:`~treeclass.UnserializableStaticError`, with the same reason.
    """
    statics = info.static_fields
    if not statics:
        return None
    cls = info.cls
    kinds = _field_kinds(cls, info.fields, statics)
    hashable = getattr(cls, "__hash__", None) is not None
    attrs_fields: dict[str, Any] = {}
    if info.kind == "attrs":
        attrs_fields = {a.name: a for a in getattr(cls, "__attrs_attrs__", ())}
    checks: list[tuple[int, str, list[Check], frozenset[type] | None]] = []
    for i, name in enumerate(statics):
        of_field: list[Check] = []
        # The exact types of values that pass every check outright (None: check each value;
        # ``everything``: no check restricts the type).
        everything = True
        quick: frozenset[type] | None = None
        kind = kinds.get(name)
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

    return StaticCheck(check, tuple([(i, quick) for i, _, _, quick in plan]))
