"""Read a class once: dataclass, attrs class or namedtuple -> :class:`ClassInfo`.

A :class:`ClassInfo` holds the fields in order (data and static), and the class's
:class:`RebuildPlan`: how an instance is made again without running ``__init__`` (see
``docs/how-it-works.md``). Everything that needs to look inside the class is here, so the code
generator works from the description alone. ``dataclasses`` and attrs are imported only when a
class of theirs is described.
"""

from __future__ import annotations

import keyword
from collections.abc import Callable, Collection, Iterable
from types import MemberDescriptorType
from typing import Any, Final, Literal, NamedTuple, cast

from .._errors import (
    NotAPytreeClassError,
    RegistrationError,
    RegistrationTypeError,
    brief,
    qualname,
)

__all__ = [
    "ALIASES_KEY",
    "MISSING",
    "ClassInfo",
    "Evolution",
    "FieldInfo",
    "Kind",
    "RebuildMode",
    "RebuildPlan",
    "Store",
    "check_field_name",
    "check_field_names",
    "describe",
    "is_attrs_class",
    "is_dataclass_class",
    "is_namedtuple_class",
    "names_given",
]

Kind = Literal["dataclass", "attrs", "namedtuple"]
#: How unflatten restores fields:
#: ``"direct"`` bypasses every ``__setattr__`` (frozen classes included);
#: ``"protocol"`` goes through the ``__setattr__`` the class's author wrote (HuggingFace
#: ``ModelOutput``), and, for mapping bases, stores items too; ``"init"`` calls ``__init__``.
RebuildMode = Literal["direct", "protocol", "init"]
#: How one field is stored in ``"direct"`` mode: ``"attr"`` a plain attribute store (no
#: ``__setattr__`` of the class's own, no descriptor in the way); ``"slot"`` through the slot's
#: member descriptor; ``"dict"`` into the instance ``__dict__``; ``"setattr"`` with
#: ``object.__setattr__`` (a descriptor of the class's own, without a ``__dict__``).
Store = Literal["attr", "slot", "dict", "setattr"]


class _Missing:
    """Sentinel for "no default"; a single instance, :data:`MISSING`."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"

    def __reduce__(self) -> str:
        return "MISSING"


MISSING: Final = _Missing()

# Metadata keys that mark a field static. ``"static"`` is JAX's convention
# (``dataclasses.field(metadata={"static": True})``); ``pytree_node=False`` is flax's.
_STATIC_KEY: Final = "static"
_FLAX_KEY: Final = "pytree_node"
#: The metadata key of a field's earlier names (``tc.field(aliases=...)`` stores them there, and
#: ``dataclasses.field`` / ``attrs.field`` take them the same way).
ALIASES_KEY: Final = "treeclass.aliases"
# attrs keeps a cached hash here when a class has cache_hash=True (attrs 20.1 to 26.1);
# ``__init__`` sets it to None, and so must a rebuild.
_ATTRS_HASH_CACHE: Final = "_attrs_cached_hash"


class FieldInfo(NamedTuple):
    """One field of a registered class, as treeclass sees it.

    Attributes:
        name: the field's name.
        static: whether it is a static field (in the auxdata) rather than a child.
        alias: the keyword ``__init__`` takes the field by (attrs strips a leading underscore).
        default: its default value, or :data:`MISSING`.
        default_factory: its default factory, or :data:`MISSING`.
        init: whether ``__init__`` takes it.
        kw_only: whether ``__init__`` takes it by keyword only.
        aliases: earlier names of the field, which saved states may use
            (``tc.field(aliases=...)``).
    """

    name: str
    static: bool
    alias: str
    default: Any = MISSING
    default_factory: Callable[[], Any] | _Missing = MISSING
    init: bool = True
    kw_only: bool = False
    aliases: tuple[str, ...] = ()

    @property
    def has_default(self) -> bool:
        """Whether the field has a default value or factory."""
        return self.default is not MISSING or self.default_factory is not MISSING

    def make_default(self) -> Any:
        """Return a fresh default value; the caller checks :attr:`has_default` first."""
        if not isinstance(self.default_factory, _Missing):
            return self.default_factory()
        return self.default


class RebuildPlan(NamedTuple):
    """How unflatten makes an instance again (decided by looking at the class once).

    Attributes:
        mode: the :data:`RebuildMode`.
        new: the ``__new__`` that makes an empty instance without running user code.
        stores: ``(field, how)`` for every field, in field order (``"direct"`` mode).
        slots: the member descriptor of every field stored as ``"slot"``.
        mapping: the class is a ``dict`` subclass (``"protocol"`` mode stores items too).
        reset: hidden attributes ``__init__`` would set, stored as ``None`` (attrs' hash cache),
            with how each is stored.
    """

    mode: RebuildMode
    new: Callable[..., Any]
    stores: tuple[tuple[str, Store], ...]
    slots: dict[str, Any]
    mapping: bool
    reset: tuple[tuple[str, Store], ...]


class Evolution(NamedTuple):
    """How states saved by earlier versions of a class load (only classes that say so have one).

    Attributes:
        renames: each earlier field name (a field's ``aliases``) -> the field's name now.
        removed: names of fields the class no longer has, dropped from saved states on load
            (``removed_fields=``); a removed data field's child is dropped with it.
        migrate: ``hook(state) -> state``, run on every saved state before it is loaded
            (``migrate=``), or ``None``.
    """

    renames: dict[str, str]
    removed: frozenset[str]
    migrate: Callable[[Any], Any] | None


class ClassInfo:
    """Everything treeclass needs to know about a class, read once at registration."""

    __slots__ = ("cls", "data_fields", "evolution", "fields", "kind", "plan", "static_fields")

    kind: Kind

    def __init__(
        self,
        cls: type,
        kind: Kind,
        fields: tuple[FieldInfo, ...],
        plan: RebuildPlan,
        evolution: Evolution | None = None,
    ) -> None:
        self.cls = cls
        self.kind = kind
        self.fields = fields
        self.data_fields: tuple[str, ...] = tuple(f.name for f in fields if not f.static)
        self.static_fields: tuple[str, ...] = tuple(f.name for f in fields if f.static)
        self.plan = plan
        #: Renamed and removed fields and the migration hook; ``None`` for most classes.
        self.evolution = evolution

    @property
    def rebuild(self) -> RebuildMode:
        """The rebuild mode."""
        return self.plan.mode

    @property
    def qualname(self) -> str:
        """``module.QualName`` of the class, for messages."""
        return qualname(self.cls)

    def field(self, name: str) -> FieldInfo:
        """Return the field called ``name``."""
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(name)


def is_dataclass_class(cls: type) -> bool:
    """Whether ``cls`` itself was made by ``@dataclasses.dataclass`` (not only inherits)."""
    return "__dataclass_fields__" in vars(cls)


def is_attrs_class(cls: type) -> bool:
    """Whether ``cls`` itself was made by attrs (not only inherits); attrs is not imported."""
    return "__attrs_attrs__" in vars(cls)


def is_namedtuple_class(cls: type) -> bool:
    """Whether ``cls`` is a namedtuple class (``collections.namedtuple`` or ``NamedTuple``)."""
    fields: object = getattr(cls, "_fields", None)
    return isinstance(cls, type) and issubclass(cls, tuple) and isinstance(fields, tuple)


def _is_static_metadata(metadata: Any) -> bool:
    if not metadata:
        return False
    if metadata.get(_STATIC_KEY, False):
        return True
    return metadata.get(_FLAX_KEY, True) is False


def describe(
    cls: type,
    *,
    static: Collection[str] = (),
    rebuild: RebuildMode | None = None,
    removed_fields: Collection[str] = (),
    migrate: Callable[[Any], Any] | None = None,
) -> ClassInfo:
    """Describe ``cls``: its kind, fields (in order), static fields and rebuild plan.

    Args:
        cls: a dataclass, attrs class or namedtuple class.
        static: names of extra fields to treat as static.
        rebuild: force a rebuild mode; ``None`` picks one from the class.
        removed_fields: names of fields the class no longer has, dropped from saved states.
        migrate: a hook rewriting saved states before they are loaded.

    Raises:
        NotAPytreeClassError: ``cls`` is none of the supported kinds.
        RegistrationError: a field name that generated code cannot hold (:func:`check_field_name`);
            a name in ``static`` is not a field of ``cls``; a field alias or removed field that
            is the name of a field, or given twice.
        RegistrationTypeError: ``removed_fields`` is not a collection of names, ``migrate``
            not callable.
    """
    if not isinstance(cls, type):
        raise NotAPytreeClassError(
            f"treeclass can only register classes, got {cls!r} of type {type(cls).__name__}; "
            "pass the class itself, not an instance."
        )
    kind: Kind
    if is_namedtuple_class(cls):
        kind = "namedtuple"
        fields = _namedtuple_fields(cls)
    elif is_attrs_class(cls):
        kind = "attrs"
        fields = _attrs_fields(cls)
    elif is_dataclass_class(cls):
        kind = "dataclass"
        fields = _dataclass_fields(cls)
    else:
        raise NotAPytreeClassError(
            f"{qualname(cls)} is not a dataclass, attrs class or namedtuple; "
            "decorate it with @treeclass.pytree_dataclass, or make it a dataclass first "
            "(a subclass of a dataclass must be decorated itself)."
        )
    names = {f.name for f in fields}
    for f in fields:  # (and attrs' __init__ keyword of each)
        fix = f"Rename the field {f.name!r:.80}"
        check_field_name(f.name, "field name", qualname(cls), fix, names)
        if f.alias != f.name:
            check_field_name(f.alias, f"__init__ keyword of field {f.name!r}", cls.__name__, fix)
    extra = set(static)
    if extra:
        if kind == "namedtuple":
            raise RegistrationError(
                f"namedtuple {cls.__qualname__} cannot have static fields "
                f"({', '.join(sorted(extra))}); every namedtuple field is a child."
            )
        unknown = sorted(extra - names)
        if unknown:
            raise RegistrationError(
                f"static={unknown!r} names no field of {cls.__qualname__}; "
                f"its fields are {sorted(names)!r}."
            )
        fields = tuple(f._replace(static=f.static or f.name in extra) for f in fields)
    evolution = _evolution(cls, fields, removed_fields, migrate)
    mode: RebuildMode = rebuild if rebuild is not None else _pick_rebuild(cls, kind)
    if mode == "init" and kind == "dataclass":
        _check_initvars_have_defaults(cls)
    return ClassInfo(cls, kind, fields, _plan(cls, kind, fields, mode), evolution)


def check_field_name(
    name: object, what: str, label: str, fix: str, others: Collection[str] = ()
) -> str:
    """``name`` if it can be a field name in generated source and saved states; else raise.

    The one rule for field names and their aliases: a ``str`` that is a Python identifier, not
    a keyword, and in NFKC normal form (Python reads identifiers in source NFKC-normalized, so
    ``ﬁ`` would be read as ``fi``; a name in normal form is NFKC-distinct from every other).
    ``what`` says which name (``"field name"``), ``label`` whose (the class), ``fix`` the way
    out; ``others``: the names it may not be read as (the class's other fields).

    Raises:
        RegistrationError: naming the name, the class and the fix.
    """
    if type(name) is not str or not name.isidentifier():
        problem = "is not a Python identifier"
    elif keyword.iskeyword(name):
        problem = "is a Python keyword"
    elif name.isascii():
        return name
    else:
        import unicodedata  # (only for names that are not ASCII)

        read = unicodedata.normalize("NFKC", name)
        if read == name:
            return name
        problem = f"is read as {read!r} in Python source (NFKC)"
        if read in others:
            problem += ", the name of another field of the class"
    raise RegistrationError(
        f"the {what} {name!r:.80} of {label} {problem}; field names must be Python "
        f"identifiers as written (no keyword, in NFKC normal form), since treeclass compiles "
        f"them into code and saves states by them. {fix}."
    )


def names_given(value: object, what: str, owner: str) -> Iterable[object]:
    """``value`` if it is a collection of names (not one str); else raise.

    Raises:
        RegistrationTypeError: naming the option ``what`` of ``owner`` and the fix.
    """
    if isinstance(value, str) or not isinstance(value, Iterable):
        one = isinstance(value, str)
        got = f"the str {value!r:.80}" if one else type(value).__name__
        example = f"{what}({value!r:.80},)" if one else f'{what}("old_name",)'
        raise RegistrationTypeError(
            f"{what} of {owner} must be a collection of names, got {got}; write {example}."
        )
    return cast("Iterable[object]", value)


def check_field_names(value: object, what: str, owner: str) -> tuple[str, ...]:
    """``value`` as a tuple of field names (see :func:`check_field_name`), or a clear error.

    ``what`` names the option (``"aliases="``), ``owner`` what it belongs to, for messages.

    Raises:
        RegistrationTypeError: ``value`` is a str, or not a collection of str.
        RegistrationError: a name is not a valid field name, or is given twice.
    """
    fix = f'Write {what}("old_name",)'
    items = names_given(value, what, owner)
    names = [check_field_name(n, f"{what} name", owner, fix) for n in items]
    if len(set(names)) != len(names):
        raise RegistrationError(f"{what} of {owner} names a field twice: {names!r}.")
    return tuple(names)


def _evolution(
    cls: type,
    fields: tuple[FieldInfo, ...],
    removed_fields: Collection[str],
    migrate: Callable[[Any], Any] | None,
) -> Evolution | None:
    """The class's :class:`Evolution`, or ``None`` when it declares none (the usual case)."""
    aliased = [f for f in fields if f.aliases]
    if not aliased and not removed_fields and migrate is None:
        return None
    label = cls.__qualname__
    names = {f.name for f in fields}
    renames: dict[str, str] = {}
    for f in aliased:
        for a in f.aliases:
            if a in names:
                raise RegistrationError(
                    f"alias {a!r} of field {f.name!r} of {label} is the name of a field of the "
                    f"class; an alias is an earlier name of the field that no field has now. "
                    f"Remove it from aliases=, or rename the field {a!r}."
                )
            if a in renames:
                raise RegistrationError(
                    f"alias {a!r} of field {f.name!r} of {label} is also an alias of field "
                    f"{renames[a]!r}; a saved field loads into one field only, so keep the alias "
                    "on one of them."
                )
            renames[a] = f.name
    removed = check_field_names(removed_fields, "removed_fields=", label)
    for r in removed:
        if r in names:
            raise RegistrationError(
                f"removed_fields= of {label} names {r!r}, which is a field of the class; list "
                "only fields the class no longer has."
            )
        if r in renames:
            raise RegistrationError(
                f"removed_fields= of {label} names {r!r}, which is an alias of field "
                f"{renames[r]!r}; a saved {r!r} cannot be both loaded and dropped, so remove it "
                "from one of them."
            )
    if migrate is not None and not callable(migrate):
        raise RegistrationTypeError(
            f"migrate= of {label} must be a function taking a saved state and returning the "
            f"state to load, got {brief(migrate, 80)}."
        )
    return Evolution(renames, frozenset(removed), migrate)


def _metadata_aliases(metadata: Any, cls: type, name: str) -> tuple[str, ...]:
    """A field's earlier names, from its metadata (:data:`ALIASES_KEY`)."""
    if not metadata or ALIASES_KEY not in metadata:
        return ()
    return check_field_names(
        metadata[ALIASES_KEY], "aliases=", f"field {name!r} of {cls.__qualname__}"
    )


def _namedtuple_fields(cls: type) -> tuple[FieldInfo, ...]:
    names: tuple[str, ...] = getattr(cls, "_fields")  # noqa: B009 (not declared on type)
    defaults: dict[str, Any] = getattr(cls, "_field_defaults", {})
    return tuple(FieldInfo(n, False, n, defaults.get(n, MISSING)) for n in names)


def _dataclass_fields(cls: type) -> tuple[FieldInfo, ...]:
    import dataclasses

    missing = dataclasses.MISSING
    out: list[FieldInfo] = []
    for f in dataclasses.fields(cls):
        metadata = f.metadata
        default: Any = MISSING if f.default is missing else f.default
        factory = f.default_factory
        kw_only = bool(f.kw_only) if f.kw_only is not missing else False
        static = _is_static_metadata(metadata) if metadata else False
        aliases = _metadata_aliases(metadata, cls, f.name) if metadata else ()
        key: tuple[Any, ...] | None = None
        if factory is missing and type(default) in _SHARED_DEFAULTS:
            # Classes share fields like ``loss: Optional[Any] = None`` (never changed).
            key = (f.name, static, f.init, kw_only, aliases, cast(object, type(default)), default)
            known = _SHARED_FIELDS.get(key)
            if known is not None:
                out.append(known)
                continue
        made = MISSING if factory is missing else factory
        info = FieldInfo(f.name, static, f.name, default, made, f.init, kw_only, aliases)
        if key is not None and len(_SHARED_FIELDS) < _SHARED_FIELDS_MAX:
            info = _SHARED_FIELDS.setdefault(key, info)
        out.append(info)
    return tuple(out)


#: Default values whose fields are kept once (immutable, equal only to themselves by type).
_SHARED_DEFAULTS: Final = frozenset([type(None), bool, int, str, _Missing])
#: ``(name, static, init, kw_only, aliases, type of default, default) -> field``.
_SHARED_FIELDS: dict[tuple[Any, ...], FieldInfo] = {}
_SHARED_FIELDS_MAX: Final = 4096


def _attrs_fields(cls: type) -> tuple[FieldInfo, ...]:
    import importlib

    # The class exists, so attrs is installed; ``attr`` is its long-standing module name.
    # (Through importlib: treeclass type-checks where attrs is not installed.)
    attr = importlib.import_module("attr")
    out: list[FieldInfo] = []
    for a in attr.fields(cls):
        default: Any = a.default
        factory: Callable[[], Any] | _Missing = MISSING
        if default is attr.NOTHING:
            default = MISSING
        elif isinstance(default, attr.Factory):
            factory = MISSING if default.takes_self else default.factory
            default = MISSING  # a factory that needs the instance gives no usable default
        static = _is_static_metadata(a.metadata)
        alias = str(getattr(a, "alias", None) or a.name.lstrip("_"))
        aliases = _metadata_aliases(a.metadata, cls, a.name)
        init, kw_only = bool(a.init), bool(a.kw_only)
        out.append(FieldInfo(a.name, static, alias, default, factory, init, kw_only, aliases))
    return tuple(out)


def _check_initvars_have_defaults(cls: type) -> None:
    """Rebuilding through ``__init__`` needs a value for every ``InitVar``: its default."""
    import dataclasses

    initvar_kind = getattr(dataclasses, "_FIELD_INITVAR", None)  # private; 3.10 to 3.14
    pseudo: dict[str, Any] = getattr(cls, "__dataclass_fields__", {})
    for f in pseudo.values():
        no_default = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        if getattr(f, "_field_type", None) is initvar_kind and no_default:
            raise RegistrationError(
                f"{cls.__qualname__} has the InitVar {f.name!r} without a default, so "
                "unflatten_calls_init=True cannot rebuild it (the leaves do not hold InitVars); "
                f"give {f.name!r} a default, or drop unflatten_calls_init."
            )


# --- the rebuild plan ---------------------------------------------------------------------------


def _generated_setattr(fn: Any, owner: type) -> bool:
    """Whether ``fn`` (``owner.__setattr__``) is a frozen guard: dataclasses', attrs', equinox's."""
    module = getattr(fn, "__module__", None)
    if module in ("attr._make", "attrs._make"):
        return True
    # equinox.Module's __setattr__ only guards frozenness after __init__; equinox's own
    # unflatten stores fields with object.__setattr__ too (checked with equinox 0.13.8).
    if module == "equinox._module._module" and owner.__qualname__ == "Module":
        return True
    code = getattr(fn, "__code__", None)
    if code is None:
        return False
    filename: str = code.co_filename.replace("\\", "/")
    # attrs' validating __setattr__ is a closure defined in attr/_make.py that takes the class's
    # __module__ (checked with attrs 23.1 to 26.1); older attrs exec'd it as "<attrs generated".
    if filename.startswith("<attrs generated") or filename.endswith(
        ("/attr/_make.py", "/attrs/_make.py")
    ):
        return True
    # dataclasses' frozen __setattr__ raises FrozenInstanceError and is made by exec.
    params = vars(owner).get("__dataclass_params__")
    names = (*code.co_names, *code.co_freevars)
    return bool(params is not None and params.frozen and "FrozenInstanceError" in names)


def _pick_rebuild(cls: type, kind: Kind) -> RebuildMode:
    if kind == "namedtuple":
        return "direct"
    for klass in cls.__mro__:
        if "__setattr__" in vars(klass):
            if klass is object:
                return "direct"
            if _generated_setattr(vars(klass)["__setattr__"], klass):
                continue
            return "protocol"
    return "direct"


def _solid_new(cls: type) -> Callable[..., Any]:
    """The ``__new__`` that makes an empty instance of ``cls`` without running user code.

    That is ``object.__new__`` for ordinary classes, and the ``__new__`` of the nearest
    built-in base for classes that also derive from one (``OrderedDict``, ``dict``).
    """
    for klass in cls.__mro__:
        new = vars(klass).get("__new__")
        # A Python-level __new__ is stored as a staticmethod; a built-in one is not.
        if new is not None and not isinstance(new, staticmethod):
            return new  # type: ignore[no-any-return]
    return object.__new__


def _class_attribute(cls: type, name: str) -> tuple[bool, object]:
    """``(found, value)`` of ``name`` in the class's MRO dicts (no descriptor protocol)."""
    for klass in cls.__mro__:
        if name in vars(klass):
            return True, vars(klass)[name]
    return False, None


def _has_instance_dict(cls: type) -> bool:
    found, descriptor = _class_attribute(cls, "__dict__")
    return found and hasattr(descriptor, "__set__")


def _store_of(
    cls: type,
    name: str,
    plain: bool,
    slots: dict[str, Any],
    attribute: tuple[bool, object] | None = None,
) -> Store:
    """How a rebuild stores field ``name`` (``attribute``: its :func:`_class_attribute`)."""
    found, value = _class_attribute(cls, name) if attribute is None else attribute
    if found and isinstance(value, MemberDescriptorType):
        slots[name] = value
        return "attr" if plain else "slot"
    if plain and not (found and hasattr(type(value), "__set__")):  # (a descriptor of its own)
        return "attr"
    return "dict" if _has_instance_dict(cls) else "setattr"


def _hash_cache(cls: type, kind: Kind) -> bool:
    """Whether ``cls`` is an attrs class that caches its hash (``cache_hash=True``)."""
    code = getattr(vars(cls).get("__hash__"), "__code__", None)
    return kind == "attrs" and code is not None and _ATTRS_HASH_CACHE in code.co_names


def _plan(cls: type, kind: Kind, fields: tuple[FieldInfo, ...], mode: RebuildMode) -> RebuildPlan:
    # Plain stores are the fastest (a specialized STORE_ATTR, and the instance keeps its
    # key-sharing dict, as with __init__), but only where no __setattr__ of the class's own
    # and no data descriptor of its own stands in the way.
    plain = mode == "direct" and getattr(cls, "__setattr__", None) is object.__setattr__
    attributes = [_class_attribute(cls, f.name) for f in fields]
    own = [v for found, v in attributes if found and type(v) is not MemberDescriptorType]
    plain = plain and not any(hasattr(type(v), "__set__") for v in own)
    slots: dict[str, Any] = {}
    stores: tuple[tuple[str, Store], ...] = tuple(
        [(f.name, _store_of(cls, f.name, plain, slots, a)) for f, a in zip(fields, attributes)]
    )
    reset: tuple[tuple[str, Store], ...] = ()
    if _hash_cache(cls, kind):
        reset = ((_ATTRS_HASH_CACHE, _store_of(cls, _ATTRS_HASH_CACHE, plain, slots)),)
    return RebuildPlan(mode, _solid_new(cls), stores, slots, issubclass(cls, dict), reset)
