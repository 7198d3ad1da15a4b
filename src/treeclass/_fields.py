"""Read a class's fields once: dataclass, attrs class or namedtuple -> one frozen description.

Nothing here imports ``dataclasses`` or ``attrs`` at module level: attrs classes are
recognised by their ``__attrs_attrs__`` attribute, so attrs support costs nothing for users
who do not have attrs installed.
"""

from __future__ import annotations

from ._errors import NotAPytreeClassError, RegistrationError

TYPE_CHECKING = False  # typing costs ~10 ms to import; checkers treat this as True
if TYPE_CHECKING:
    from collections.abc import Callable, Collection
    from typing import Any, Final, Literal

__all__ = [
    "MISSING",
    "ClassInfo",
    "FieldInfo",
    "Kind",
    "RebuildMode",
    "describe",
    "is_attrs_class",
    "is_dataclass_class",
    "is_namedtuple_class",
]

if TYPE_CHECKING:
    Kind = Literal["dataclass", "attrs", "namedtuple"]

# How unflatten restores fields (see docs/how-it-works.md):
# - "direct": bypass every __setattr__ (frozen classes included); stores go straight into the
#   instance ``__dict__`` or through the slot descriptors.
# - "protocol": the class's author wrote a ``__setattr__`` (HuggingFace ``ModelOutput``), so
#   fields are restored through ``setattr`` in field order, and, for mapping bases, as items.
# - "init": the user opted in to rebuilding through ``__init__``.
if TYPE_CHECKING:
    RebuildMode = Literal["direct", "protocol", "init"]


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


class FieldInfo:
    """One field of a registered class, as treeclass sees it."""

    __slots__ = ("alias", "default", "default_factory", "init", "kw_only", "name", "static")

    name: str
    #: The keyword ``__init__`` takes the field by (attrs strips a leading underscore).
    alias: str
    static: bool
    default: Any
    default_factory: Callable[[], Any] | _Missing
    init: bool
    kw_only: bool

    def __init__(
        self,
        name: str,
        *,
        static: bool,
        default: Any = MISSING,
        default_factory: Callable[[], Any] | _Missing = MISSING,
        init: bool = True,
        kw_only: bool = False,
        alias: str | None = None,
    ) -> None:
        self.name = name
        self.alias = name if alias is None else alias
        self.static = static
        self.default = default
        self.default_factory = default_factory
        self.init = init
        self.kw_only = kw_only

    @property
    def has_default(self) -> bool:
        """Whether the field has a default value or factory."""
        return self.default is not MISSING or self.default_factory is not MISSING

    def make_default(self) -> Any:
        """Return a fresh default value; the caller checks :attr:`has_default` first."""
        if not isinstance(self.default_factory, _Missing):
            return self.default_factory()
        return self.default

    def __repr__(self) -> str:
        kind = "static" if self.static else "data"
        return f"FieldInfo({self.name!r}, {kind})"


class ClassInfo:
    """Everything treeclass needs to know about a class, read once at registration."""

    __slots__ = ("cls", "data_fields", "fields", "kind", "rebuild", "static_fields")

    cls: type
    kind: Kind
    fields: tuple[FieldInfo, ...]
    data_fields: tuple[str, ...]
    static_fields: tuple[str, ...]
    rebuild: RebuildMode

    def __init__(
        self, cls: type, kind: Kind, fields: tuple[FieldInfo, ...], rebuild: RebuildMode
    ) -> None:
        self.cls = cls
        self.kind = kind
        self.fields = fields
        self.data_fields = tuple(f.name for f in fields if not f.static)
        self.static_fields = tuple(f.name for f in fields if f.static)
        self.rebuild = rebuild

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
    cls: type, *, static: Collection[str] = (), rebuild: RebuildMode | None = None
) -> ClassInfo:
    """Describe ``cls``: its kind, fields (in order), static fields and rebuild mode.

    Args:
        cls: a dataclass, attrs class or namedtuple class.
        static: names of extra fields to treat as static.
        rebuild: force a rebuild mode; ``None`` picks one from the class.

    Raises:
        NotAPytreeClassError: ``cls`` is none of the supported kinds.
        RegistrationError: a name in ``static`` is not a field of ``cls``.
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
            f"{cls.__module__}.{cls.__qualname__} is not a dataclass, attrs class or namedtuple; "
            "decorate it with @treeclass.pytree_dataclass, or make it a dataclass first "
            "(a subclass of a dataclass must be decorated itself)."
        )
    extra = set(static)
    if extra:
        if kind == "namedtuple":
            raise RegistrationError(
                f"namedtuple {cls.__qualname__} cannot have static fields "
                f"({', '.join(sorted(extra))}); every namedtuple field is a child."
            )
        known = {f.name for f in fields}
        unknown = sorted(extra - known)
        if unknown:
            raise RegistrationError(
                f"static={unknown!r} names no field of {cls.__qualname__}; "
                f"its fields are {sorted(known)!r}."
            )
        fields = tuple(
            FieldInfo(
                f.name,
                static=f.static or f.name in extra,
                default=f.default,
                default_factory=f.default_factory,
                init=f.init,
                kw_only=f.kw_only,
                alias=f.alias,
            )
            for f in fields
        )
    mode: RebuildMode = rebuild if rebuild is not None else _pick_rebuild(cls, kind)
    if mode == "init" and kind == "dataclass":
        _check_initvars_have_defaults(cls)
    return ClassInfo(cls, kind, fields, mode)


def _namedtuple_fields(cls: type) -> tuple[FieldInfo, ...]:
    names: tuple[str, ...] = getattr(cls, "_fields")  # noqa: B009 (not declared on type)
    defaults: dict[str, Any] = getattr(cls, "_field_defaults", {})
    return tuple(FieldInfo(n, static=False, default=defaults.get(n, MISSING)) for n in names)


def _dataclass_fields(cls: type) -> tuple[FieldInfo, ...]:
    import dataclasses

    out: list[FieldInfo] = []
    for f in dataclasses.fields(cls):
        out.append(
            FieldInfo(
                f.name,
                static=_is_static_metadata(f.metadata),
                default=MISSING if f.default is dataclasses.MISSING else f.default,
                default_factory=(
                    MISSING if f.default_factory is dataclasses.MISSING else f.default_factory
                ),
                init=f.init,
                kw_only=bool(f.kw_only) if f.kw_only is not dataclasses.MISSING else False,
            )
        )
    return tuple(out)


def _attrs_fields(cls: type) -> tuple[FieldInfo, ...]:
    out: list[FieldInfo] = []
    attributes: tuple[Any, ...] = getattr(cls, "__attrs_attrs__")  # noqa: B009
    for a in attributes:
        default: Any = a.default
        factory: Callable[[], Any] | _Missing = MISSING
        # attrs' NOTHING and Factory, recognised without importing attrs.
        if type(default).__name__ == "_Nothing" or repr(default) == "NOTHING":
            default = MISSING
        elif type(default).__name__ == "Factory":
            if getattr(default, "takes_self", False):
                default = MISSING  # needs the instance; no usable default for loading
            else:
                factory = getattr(default, "factory")  # noqa: B009
                default = MISSING
        out.append(
            FieldInfo(
                str(a.name),
                static=_is_static_metadata(a.metadata),
                default=default,
                default_factory=factory,
                init=bool(a.init),
                kw_only=bool(a.kw_only),
                alias=str(getattr(a, "alias", None) or str(a.name).lstrip("_")),
            )
        )
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


def _generated_setattr(fn: Any, owner: type) -> bool:
    """Whether ``fn`` (``owner.__setattr__``) was generated by dataclasses or attrs."""
    module = getattr(fn, "__module__", None)
    if module in ("attr._make", "attrs._make"):
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
            fn = vars(klass)["__setattr__"]
            if _generated_setattr(fn, klass):
                continue
            return "protocol"
    return "direct"


def solid_new(cls: type) -> Callable[..., Any]:
    """Return the ``__new__`` to make an empty instance of ``cls`` without running user code.

    That is ``object.__new__`` for ordinary classes, and the ``__new__`` of the nearest
    built-in base for classes that also derive from one (``OrderedDict``, ``dict``).
    """
    for klass in cls.__mro__:
        new = vars(klass).get("__new__")
        # A Python-level __new__ is stored as a staticmethod; a built-in one is not.
        if new is not None and not isinstance(new, staticmethod):
            return new  # type: ignore[no-any-return]
    return object.__new__
