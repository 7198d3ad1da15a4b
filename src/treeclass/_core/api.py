"""The decorators and registration functions: ``pytree_dataclass``, ``field``, ``register_*``.

Each public signature is written once, with overloads and ``dataclass_transform`` for type
checkers. This module imports :mod:`dataclasses`, so ``treeclass`` loads it on first use of one
of its names (see ``treeclass/__init__.py``): the first decorated class needs it anyway.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Collection, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Final, Protocol, TypeVar, overload

from .._errors import (
    NotAPytreeClassError,
    RegistrationError,
    RegistrationTypeError,
    TreeclassTypeError,
)
from .fields import (
    ALIASES_KEY,
    MISSING,
    check_field_names,
    describe,
    is_attrs_class,
    is_dataclass_class,
    is_namedtuple_class,
    names_given,
)
from .frozen import guard_frozen
from .names import registration_origin
from .nodes import class_node
from .registry import node_type_for, register
from .replace import attach_replace, replace, replace_changes

if sys.version_info >= (3, 11):
    from typing import Never, Self, dataclass_transform
else:  # pragma: no cover - Python 3.10
    from typing_extensions import Never, Self, dataclass_transform

if TYPE_CHECKING:
    from .replaceable import P, SupportsReplace

__all__ = [
    "PytreeNode",
    "field",
    "pytree_dataclass",
    "register_dataclass",
    "register_namedtuple",
    "replace",
]

T = TypeVar("T")
_R = TypeVar("_R")
_C = TypeVar("_C", bound=type)
_NT = TypeVar("_NT", bound="type[tuple[Any, ...]]")

#: The registration options of a class node: the keywords every registration function takes
#: (those that apply: a namedtuple takes name, aliases and pickle_by_name; only
#: register_dataclass takes static) and hands on by these names, from its ``locals()``.
_NODE_OPTIONS: Final = (
    "name",
    "aliases",
    "removed_fields",
    "migrate",
    "return_none_fields",
    "unflatten_calls_init",
    "override",
    "pickle_by_name",
)
#: The stdlib dataclass options pytree_dataclass passes through, with dataclasses' defaults.
_DATACLASS_OPTIONS: Final[dict[str, Any]] = {
    "init": True,
    "repr": True,
    "eq": True,
    "order": False,
    "unsafe_hash": False,
    "frozen": False,
    "match_args": True,
    "kw_only": False,
    "slots": False,
}


class Names(Protocol):
    """A collection of names, not one ``str`` (whose ``__contains__`` takes only a str).

    The type of ``aliases=``, ``removed_fields=`` and ``static=``, so that type checkers refuse
    ``aliases="old"`` (a str is a collection of one-letter strs), as the run time does.
    """

    def __iter__(self) -> Iterator[str]: ...
    def __len__(self) -> int: ...
    def __contains__(self, value: object, /) -> bool: ...


@overload
def field(
    *,
    static: bool = False,
    default: T,
    init: bool = True,
    repr: bool = True,
    hash: bool | None = None,
    compare: bool = True,
    kw_only: bool = ...,
    metadata: Mapping[Any, Any] | None = None,
    aliases: Names = (),
) -> T: ...
@overload
def field(
    *,
    static: bool = False,
    default_factory: Callable[[], T],
    init: bool = True,
    repr: bool = True,
    hash: bool | None = None,
    compare: bool = True,
    kw_only: bool = ...,
    metadata: Mapping[Any, Any] | None = None,
    aliases: Names = (),
) -> T: ...
@overload
def field(
    *,
    static: bool = False,
    init: bool = True,
    repr: bool = True,
    hash: bool | None = None,
    compare: bool = True,
    kw_only: bool = ...,
    metadata: Mapping[Any, Any] | None = None,
    aliases: Names = (),
) -> Any: ...
def field(
    *,
    static: bool = False,
    default: Any = MISSING,
    default_factory: Any = MISSING,
    init: bool = True,
    repr: bool = True,
    hash: bool | None = None,
    compare: bool = True,
    kw_only: Any = MISSING,
    metadata: Mapping[Any, Any] | None = None,
    aliases: Names = (),
) -> Any:
    """A dataclass field specifier that can mark the field static, or give its earlier names.

    Takes the arguments of :func:`dataclasses.field`, plus ``static``: a static field's value
    is kept in the node's auxdata (part of the tree's structure, hashed and compared by jit
    caches, serialized to JSON) instead of being a child. ``static=True`` is stored as
    ``metadata={"static": True}``, JAX's own convention, so the class also works with
    ``jax.tree_util.register_dataclass``.

    ``aliases`` are the field's earlier names: a structure saved when the field had one of
    them loads into the field, through every loader (``treespec_loads``, ``treeclass.load``,
    ``jax.export`` and ``torch.export``). They are stored as
    ``metadata={"treeclass.aliases": (...)}``, which ``dataclasses.field`` and
    ``attrs.field`` can carry too (for classes registered with :func:`register_dataclass`).

    Args:
        static: keep the value in the auxdata instead of making it a child.
        default: the default value.
        default_factory: a zero-argument callable making the default.
        init: whether ``__init__`` takes the field.
        repr: whether ``__repr__`` shows it.
        hash: whether ``__hash__`` uses it (``None``: as ``compare``).
        compare: whether ``__eq__`` and ordering use it.
        kw_only: make the field keyword-only.
        metadata: extra metadata, merged with the static marker.
        aliases: earlier names of the field that saved structures may use.

    Returns:
        A :class:`dataclasses.Field`.

    Raises:
        RegistrationError: both ``default`` and ``default_factory`` were given; an alias is
            not a Python identifier.
        RegistrationTypeError: ``aliases`` is a str (write ``aliases=("old",)``).

    Example:
        >>> import treeclass as tc
        >>> @tc.pytree_dataclass
        ... class Layer:
        ...     weight: float
        ...     activation: str = tc.field(static=True, default="relu")
        >>> tc.tree_leaves(Layer(0.5))
        [0.5]
        >>> @tc.pytree_dataclass(name="docs.Renamed")
        ... class Renamed:
        ...     hidden: float = tc.field(default=0.0, aliases=("hidden_states",))
    """
    if default is not MISSING and default_factory is not MISSING:
        raise RegistrationError(
            "tc.field() got both default= and default_factory=; pass only one of them."
        )
    meta: dict[Any, Any] = dict(metadata) if metadata else {}
    if static:
        meta["static"] = True
    if aliases:
        meta[ALIASES_KEY] = check_field_names(aliases, "aliases=", "treeclass.field()")
    kwargs: dict[str, Any] = {
        "init": init,
        "repr": repr,
        "hash": hash,
        "compare": compare,
        "metadata": meta or None,
    }
    if default is not MISSING:
        kwargs["default"] = default
    if default_factory is not MISSING:
        kwargs["default_factory"] = default_factory
    if kw_only is not MISSING:
        kwargs["kw_only"] = kw_only
    return dataclasses.field(**kwargs)


#: A ``migrate=`` hook: a node's saved state -> the state to load.
Migrate = Callable[[dict[str, Any]], dict[str, Any]]


def _check_return_none_fields(value: object) -> None:
    if not isinstance(value, bool):
        raise RegistrationTypeError(f"return_none_fields= must be True or False, got {value!r}.")


def _register(
    cls: type,
    *,
    name: str | None,
    aliases: Collection[str] = (),
    removed_fields: Collection[str] = (),
    migrate: Migrate | None = None,
    static: Collection[str] = (),
    return_none_fields: bool = False,
    unflatten_calls_init: bool = False,
    override: bool = False,
    pickle_by_name: bool = True,
) -> None:
    """Register ``cls`` with the options of :data:`_NODE_OPTIONS` (and ``static``)."""
    names_given(aliases, "aliases=", cls.__qualname__)
    names_given(static, "static=", cls.__qualname__)
    _check_return_none_fields(return_none_fields)
    if is_attrs_class(cls):
        _check_attrs_defaults(cls)
    origin = registration_origin(cls)
    if is_namedtuple_class(cls):
        node = node_type_for(cls)
        assert node is not None  # every namedtuple class is a node
    else:
        info = describe(
            cls,
            static=static,
            rebuild="init" if unflatten_calls_init else None,
            removed_fields=removed_fields,
            migrate=migrate,
        )
        node = class_node(info, name, return_none_fields)
    if not pickle_by_name:
        node.pickle_by_name = False
    register(node, origin, name=name, aliases=tuple(aliases), override=override)


def _check_attrs_defaults(cls: type) -> None:
    """Refuse an attrs field whose default is a ``tc.field()`` / ``dataclasses.field()``.

    attrs does not read dataclasses' field specifiers: it takes the ``Field`` object for the
    default value, so ``x: int = tc.field(static=True)`` is neither static nor required.

    Raises:
        RegistrationError: naming the field and the attrs spelling.
    """
    for a in getattr(cls, "__attrs_attrs__"):  # noqa: B009
        if isinstance(a.default, dataclasses.Field):
            raise RegistrationError(
                f"{cls.__qualname__}.{a.name} has a dataclasses Field (tc.field() or "
                "dataclasses.field()) as its default, which attrs takes for the value; in an "
                'attrs class write attrs.field(metadata={"static": True}) (with default= if it '
                "has one)."
            )


class _SignatureDoc:
    """The ``__doc__`` dataclasses writes (``Name(a: float, b: int = 0)``), on first read.

    For a class ``@pytree_dataclass`` made a dataclass without a docstring; one instance
    serves every class.
    """

    __slots__ = ()

    def __get__(self, obj: object, owner: type | None = None) -> str:
        cls = owner if owner is not None else type(obj)
        import inspect

        try:
            text = str(inspect.signature(cls)).replace(" -> None", "")
        except (TypeError, ValueError):  # pragma: no cover - as dataclasses does (3.13)
            text = ""
        doc = cls.__name__ + text
        if cls.__dict__.get("__doc__") is self:
            type.__setattr__(cls, "__doc__", doc)
        return doc


def _check_frozen_bases(cls: type, frozen: bool) -> None:
    """Refuse what :func:`dataclasses.dataclass` refuses, naming the class and the fix.

    A dataclass deriving from a frozen dataclass must be frozen, and one deriving from a
    non-frozen dataclass must not be (the keyword is not inherited: type checkers read it from
    the class statement alone, so the class says it).

    Raises:
        RegistrationTypeError: ``frozen`` differs from the dataclass bases'.
    """
    bases = [b for b in cls.__mro__[-1:0:-1] if "__dataclass_fields__" in vars(b)]
    if not bases:
        return
    frozen_base: type | None = None
    for base in reversed(bases):
        params: Any = getattr(base, "__dataclass_params__")  # noqa: B009 (set by dataclasses)
        if params.frozen:
            frozen_base = base
            break
    name = cls.__qualname__
    if frozen_base is not None and not frozen:
        if issubclass(cls, PytreeNode):
            given = ", ".join(b.__name__ for b in cls.__bases__)
            fix = f"class {cls.__name__}({given}, frozen=True)"
        else:
            fix = "@pytree_dataclass(frozen=True)"
        raise RegistrationTypeError(
            f"{name} derives from the frozen dataclass {frozen_base.__qualname__}, so it must "
            f"be frozen too (frozen is not inherited, as with dataclasses); write {fix}."
        )
    if frozen_base is None and frozen:
        raise RegistrationTypeError(
            f"{name} is frozen but derives from the non-frozen dataclass "
            f"{bases[-1].__qualname__}; make both frozen, or neither."
        )


_SIGNATURE_DOC: Final = _SignatureDoc()
#: Stands for the docstring while dataclasses makes the class (so that it writes none).
_DOC_PENDING: Final = "(the signature, once read)"


@overload
@dataclass_transform(field_specifiers=(field, dataclasses.field, dataclasses.Field))
def pytree_dataclass(cls: _C, /) -> _C: ...
@overload
def pytree_dataclass(
    cls: None = None,
    /,
    *,
    name: str | None = None,
    aliases: Names = (),
    removed_fields: Names = (),
    migrate: Migrate | None = None,
    return_none_fields: bool = False,
    unflatten_calls_init: bool = False,
    override: bool = False,
    pickle_by_name: bool = True,
    init: bool = True,
    repr: bool = True,
    eq: bool = True,
    order: bool = False,
    unsafe_hash: bool = False,
    frozen: bool = False,
    match_args: bool = True,
    kw_only: bool = False,
    slots: bool = False,
) -> Callable[[_C], _C]: ...
def pytree_dataclass(
    cls: _C | None = None,
    /,
    *,
    name: str | None = None,
    aliases: Names = (),
    removed_fields: Names = (),
    migrate: Migrate | None = None,
    return_none_fields: bool = False,
    unflatten_calls_init: bool = False,
    override: bool = False,
    pickle_by_name: bool = True,
    init: bool = True,
    repr: bool = True,
    eq: bool = True,
    order: bool = False,
    unsafe_hash: bool = False,
    frozen: bool = False,
    match_args: bool = True,
    kw_only: bool = False,
    slots: bool = False,
    **unknown: Any,
) -> _C | Callable[[_C], _C]:
    """Make a class a dataclass and a pytree node in every registry that is installed.

    Use it bare (``@pytree_dataclass``) or with keywords. Data fields are the children, in
    field order; fields marked ``static`` (with :func:`field`, or
    ``dataclasses.field(metadata={"static": True})``) are kept in the auxdata. For a class
    that already is a dataclass or an attrs class, use :func:`register_dataclass`, which keeps
    its type exactly for type checkers (``@pytree_dataclass`` registers such a class as it is
    at run time, but pyright then applies the dataclass options again with their defaults).

    Args:
        cls: the class (when used bare).
        name: the stable serialized name, such as ``"mypkg.ModelOutput"``. Without it the
            class works in-process but cannot be serialized.
        aliases: earlier names of the class (``("mypkg.OldOutput",)``): structures saved
            under them load as this class, through every loader; it is always written
            under ``name``. An alias is refused if another class has it as name or alias.
        removed_fields: names of fields the class no longer has: saved structures naming
            them load, the fields' values (and a data field's child) dropped. Without it such
            a structure is a :class:`~treeclass.TreespecLoadError` naming the field.
        migrate: ``hook(state) -> state``, run on each node's saved state (``{"data": [...],
            "none": [...], "static": {...}}``, static values in their JSON form) before it
            is loaded, as written (earlier field names included); for changes aliases and
            removed fields cannot say (see ``docs/format.md``). What it raises becomes a
            :class:`~treeclass.TreespecLoadError` naming the class.
        return_none_fields: what a data field whose value is ``None`` is in torch's pytrees,
            where ``None`` is a leaf: with ``False`` (the default) it is not a child there (its
            name goes into torch's context, and it gives no leaf); with ``True`` it is a
            ``None`` leaf. In the embedded registry, JAX and optree a ``None`` field is always
            a child, a ``None`` node with no leaf, whatever this option (see
            ``docs/parity.md``).
        unflatten_calls_init: rebuild instances through ``__init__`` (running
            ``__post_init__`` and validators) instead of storing the fields directly. Slower,
            and frameworks then pass placeholders (tracers, ``object()``) to your
            ``__init__``; use it only when the class must rebuild derived state.
        override: replace a registration another library already made for this class in a
            framework that can replace one (PyTorch's pytrees and optree; JAX cannot), such as
            transformers' registration of its ``ModelOutput`` subclasses with torch.
        pickle_by_name: instances of a named class pickle by its name, so they unpickle
            where the class lives in another module (``torch.export.save``, ``spawn``,
            ``torch.distributed`` collectives; see ``docs/torch.md``); ``False`` keeps
            pickle's own behaviour (by module path).
        init: passed to :func:`dataclasses.dataclass`, as are the following options.
        repr: see :func:`dataclasses.dataclass`.
        eq: see :func:`dataclasses.dataclass`.
        order: see :func:`dataclasses.dataclass`.
        unsafe_hash: see :func:`dataclasses.dataclass`.
        frozen: see :func:`dataclasses.dataclass`.
        match_args: see :func:`dataclasses.dataclass`.
        kw_only: see :func:`dataclasses.dataclass`.
        slots: see :func:`dataclasses.dataclass`.
        **unknown: refused with a clear error (for callers without a type checker).

    Returns:
        The dataclass.

    Raises:
        NameConflictError: ``name`` is taken by another class.
        RegistrationError: bad options, or a framework refused the class (nothing is
            registered anywhere then).

    Example:
        >>> import treeclass as tc
        >>> @tc.pytree_dataclass(name="docs.Output", frozen=True)
        ... class Output:
        ...     logits: float
        ...     loss: float | None = None
        ...     mode: str = tc.field(static=True, default="eval")
        >>> leaves, spec = tc.tree_flatten(Output(1.5))
        >>> leaves
        [1.5]
        >>> spec.unflatten([2.5])
        Output(logits=2.5, loss=None, mode='eval')
    """
    _check_return_none_fields(return_none_fields)
    if unknown:
        raise RegistrationTypeError(
            f"pytree_dataclass() got unknown option(s) {sorted(unknown)!r}; it takes "
            f"{', '.join(_NODE_OPTIONS)} and the dataclass options {sorted(_DATACLASS_OPTIONS)!r}."
        )
    given = {k: v for k, v in locals().items() if k in _DATACLASS_OPTIONS}
    node_options = {k: v for k, v in locals().items() if k in _NODE_OPTIONS}
    options = {k: v for k, v in given.items() if v != _DATACLASS_OPTIONS[k]}

    def wrap(klass: _C) -> _C:
        if not isinstance(klass, type):
            raise RegistrationTypeError(
                f"@pytree_dataclass decorates classes, got {klass!r}; put it above a class "
                "statement."
            )
        made: type
        if is_dataclass_class(klass) or is_attrs_class(klass):
            if options:
                kind = "an attrs class" if is_attrs_class(klass) else "already a dataclass"
                raise RegistrationError(
                    f"{klass.__qualname__} is {kind}, so @pytree_dataclass registers it as it "
                    f"is and cannot apply {sorted(options)!r}; set those options on its own "
                    "decorator, and register it with treeclass.register_dataclass()."
                )
            made = klass
        else:
            attrs_base = next((b for b in klass.__mro__[1:] if is_attrs_class(b)), None)
            if attrs_base is not None:
                raise RegistrationError(
                    f"{klass.__qualname__} derives from the attrs class "
                    f"{attrs_base.__qualname__}, whose fields a stdlib dataclass would not see; "
                    f"make {klass.__qualname__} an attrs class too (@attrs.define) and register "
                    "it with treeclass.register_dataclass()."
                )
            # dataclasses writes a class without a docstring one from inspect.signature, a
            # third of what declaring a class costs: the same text is made when first read.
            doc = getattr(klass, "__doc__")  # noqa: B009 (what dataclasses reads)
            if not doc:
                klass.__doc__ = _DOC_PENDING
            _check_frozen_bases(klass, frozen)
            try:
                made = dataclasses.dataclass(klass, **given)  # pyright: ignore[reportUnknownVariableType]
            except BaseException:
                if not doc:
                    klass.__doc__ = doc
                raise
            if not doc:
                type.__setattr__(klass, "__doc__", _SIGNATURE_DOC)
                type.__setattr__(made, "__doc__", _SIGNATURE_DOC)  # pyright: ignore[reportUnknownArgumentType]
            if frozen:  # (treeclass made the class: its refusals name it, and replace)
                guard_frozen(made)  # pyright: ignore[reportUnknownArgumentType]
        _register(made, **node_options)  # pyright: ignore[reportUnknownArgumentType]
        attach_replace(made)  # pyright: ignore[reportUnknownArgumentType]
        return made  # type: ignore[return-value]

    if cls is None:
        return wrap
    return wrap(cls)


@overload
def register_namedtuple(
    cls: _NT, /, *, name: str, aliases: Names = (), pickle_by_name: bool = True
) -> _NT: ...
@overload
def register_namedtuple(
    *, name: str, aliases: Names = (), pickle_by_name: bool = True
) -> Callable[[_NT], _NT]: ...
def register_namedtuple(
    cls: _NT | None = None,
    /,
    *,
    name: str | None = None,
    aliases: Names = (),
    pickle_by_name: bool = True,
) -> _NT | Callable[[_NT], _NT]:
    """Give a namedtuple class a stable serialized name.

    Works for ``typing.NamedTuple`` and ``collections.namedtuple`` classes; every namedtuple
    is already a node of every registry, and the name is what lets trees holding it be
    serialized (and loaded in another process, by ``jax.export`` and ``torch.export`` too).
    Also usable as ``@register_namedtuple(name=...)``.

    Args:
        cls: the namedtuple class.
        name: the stable serialized name (required).
        aliases: earlier names of the class, which load as it (see :func:`pytree_dataclass`).
        pickle_by_name: instances pickle by the name (see :func:`pytree_dataclass`).

    Returns:
        The class, unchanged.

    Raises:
        RegistrationTypeError: ``cls`` is not a namedtuple class, or ``name`` is missing.
        NameConflictError: ``name`` is taken by another class.

    Example:
        >>> import typing
        >>> import treeclass as tc
        >>> @tc.register_namedtuple(name="docs.Pair")
        ... class Pair(typing.NamedTuple):
        ...     first: int
        ...     second: int
        >>> tc.name_of(Pair)
        'docs.Pair'
    """
    if name is None:
        raise RegistrationTypeError(
            "register_namedtuple() needs name=, the stable serialized name of the class; "
            'write register_namedtuple(cls, name="mypkg.MyTuple").'
        )

    def wrap(klass: _NT) -> _NT:
        if not is_namedtuple_class(klass):
            raise RegistrationTypeError(
                f"register_namedtuple() takes a namedtuple class, got {klass!r}; use "
                "register_dataclass() for dataclasses and attrs classes."
            )
        _register(klass, name=name, aliases=aliases, pickle_by_name=pickle_by_name)
        return klass

    if cls is None:
        return wrap
    return wrap(cls)


def register_dataclass(
    cls: _C,
    *,
    name: str | None = None,
    aliases: Names = (),
    removed_fields: Names = (),
    migrate: Migrate | None = None,
    static: Names = (),
    return_none_fields: bool = False,
    unflatten_calls_init: bool = False,
    override: bool = False,
    pickle_by_name: bool = True,
) -> _C:
    """Register an existing dataclass or attrs class as a pytree node.

    For classes you cannot decorate (a third-party model output), and for classes that are
    already dataclasses or attrs classes. Static fields are those marked in the class's field
    metadata (``{"static": True}``) plus the names in ``static``.

    The class is not rebuilt or wrapped, with one exception: once torch is imported (before
    or after the registration), a class that has no ``pin_memory`` attribute (method or
    field) gains a ``pin_memory()`` method, so that a DataLoader with ``pin_memory=True``
    pins its tensor fields; torch offers no other hook (see ``docs/torch.md``). The method
    is removed again only if the registration fails and is undone. The same holds for
    classes made by :func:`pytree_dataclass` and :class:`PytreeNode`.

    Args:
        cls: a class made by ``@dataclasses.dataclass`` or by attrs.
        name: the stable serialized name; without it the class cannot be serialized.
        aliases: earlier names of the class (see :func:`pytree_dataclass`).
        removed_fields: fields the class no longer has (see :func:`pytree_dataclass`).
        migrate: a hook rewriting saved states (see :func:`pytree_dataclass`).
        static: names of further fields to keep in the auxdata.
        return_none_fields: whether ``None``-valued data fields are ``None`` leaves in
            torch's pytrees (see :func:`pytree_dataclass`).
        unflatten_calls_init: rebuild through ``__init__`` instead of storing fields directly.
        override: replace a registration another library made (see :func:`pytree_dataclass`).
        pickle_by_name: instances pickle by the name (see :func:`pytree_dataclass`).

    Returns:
        ``cls`` itself (gaining ``pin_memory()`` once torch is imported, see above).

    Raises:
        NotAPytreeClassError: ``cls`` is not a dataclass or attrs class.
        NameConflictError: ``name`` is taken by another class.
        RegistrationError: a name in ``static`` is not a field, or a framework refused the
            class (nothing is registered anywhere then).

    Example:
        >>> import dataclasses
        >>> import treeclass as tc
        >>> @dataclasses.dataclass
        ... class ThirdParty:
        ...     hidden: float
        ...     kind: str
        >>> _ = tc.register_dataclass(ThirdParty, name="docs.ThirdParty", static=("kind",))
        >>> tc.tree_leaves(ThirdParty(1.0, "x"))
        [1.0]
    """
    if not isinstance(cls, type) or not (is_dataclass_class(cls) or is_attrs_class(cls)):
        what = cls.__qualname__ if isinstance(cls, type) else repr(cls)
        raise NotAPytreeClassError(
            f"register_dataclass() takes a dataclass or attrs class, got {what}; decorate it "
            "with @dataclasses.dataclass (or use @treeclass.pytree_dataclass), or use "
            "register_namedtuple() for namedtuples."
        )
    options = {k: v for k, v in locals().items() if k in _NODE_OPTIONS}
    _register(cls, static=static, **options)
    return cls


#: The class keywords of PytreeNode: pytree_dataclass's options but slots.
_NODE_KEYWORDS: Final = frozenset(_NODE_OPTIONS) | (_DATACLASS_OPTIONS.keys() - {"slots"})


@dataclass_transform(field_specifiers=(field, dataclasses.field, dataclasses.Field))
class PytreeNode:
    """A base class that makes every subclass a :func:`pytree_dataclass`, typed ``replace``.

    ``class Point(tc.PytreeNode, name="pkg.Point", frozen=True)`` is
    ``@tc.pytree_dataclass(name="pkg.Point", frozen=True) class Point``, with the class
    keywords of :func:`pytree_dataclass` (all but ``slots``), as ``flax.struct.PyTreeNode`` is
    to ``flax.struct.dataclass``. Type checkers then know :meth:`replace` too (they cannot see a
    method a decorator adds; for decorated classes, use :func:`treeclass.replace`). A subclass
    of a subclass is a pytree dataclass of its own (give it its own ``name=``). As with
    :func:`dataclasses.dataclass`, ``frozen`` is not inherited: a subclass of a frozen class
    says ``frozen=True`` too (without it, a :class:`~treeclass.RegistrationTypeError` says so),
    as mypy and pyright read it from the class statement alone.

    Example:
        >>> import treeclass as tc
        >>> class Params(tc.PytreeNode, name="docs.Params", frozen=True):
        ...     w: float
        ...     b: float = 0.0
        ...     act: str = tc.field(static=True, default="relu")
        >>> Params(1.0).replace(b=2.0)
        Params(w=1.0, b=2.0, act='relu')
        >>> tc.tree_leaves(Params(1.0))
        [1.0, 0.0]
    """

    def __init_subclass__(
        cls,
        *,
        name: str | None = None,
        aliases: Names = (),
        removed_fields: Names = (),
        migrate: Migrate | None = None,
        return_none_fields: bool = False,
        unflatten_calls_init: bool = False,
        override: bool = False,
        pickle_by_name: bool = True,
        init: bool = True,
        repr: bool = True,
        eq: bool = True,
        order: bool = False,
        unsafe_hash: bool = False,
        frozen: bool = False,
        match_args: bool = True,
        kw_only: bool = False,
        **kwargs: Never,  # another base's class keywords, at run time; checkers flag a typo
    ) -> None:
        if kwargs:
            try:
                super().__init_subclass__(**kwargs)
            except TypeError as e:
                raise TreeclassTypeError(
                    f"{cls.__qualname__} got the class keyword(s) {sorted(kwargs)!r}, which "
                    f"PytreeNode does not take (nor does another base class: {e}); the class "
                    f"keywords are {sorted(_NODE_KEYWORDS)!r}."
                ) from None
        else:
            super().__init_subclass__()
        options = {k: v for k, v in locals().items() if k in _NODE_KEYWORDS}
        pytree_dataclass(None, **options)(cls)

    # Typed as tc.replace is (docs/typing.md): by the class's __replace__ on 3.13+ targets.
    if sys.version_info >= (3, 13):

        def replace(self: SupportsReplace[P, _R], /, *args: P.args, **changes: P.kwargs) -> _R:
            """A copy with the fields named in ``changes`` set to new values (``tc.replace``).

            Raises:
                TreeclassTypeError: a name is not a field of the class, or names an
                    ``init=False`` field.
            """
            obj: Any = self
            new: _R = replace_changes(obj, changes, args)
            return new

    else:

        def replace(self, /, **changes: Any) -> Self:
            """A copy with the fields named in ``changes`` set to new values (``tc.replace``).

            Raises:
                TreeclassTypeError: a name is not a field of the class, or names an
                    ``init=False`` field.
            """
            return replace_changes(self, changes)
