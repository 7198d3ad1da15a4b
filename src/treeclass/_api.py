"""The decorators and registration functions: ``pytree_dataclass``, ``field``, ``register_*``.

The typed signatures live in the ``TYPE_CHECKING`` branch (overloads plus
``dataclass_transform``, whose ``field_specifiers`` name ``dataclasses.field`` too); the runtime
versions delegate to fully typed helpers. This keeps ``import treeclass`` from importing
``dataclasses`` (with ``inspect``) or ``typing_extensions`` until a class is decorated.
"""

from __future__ import annotations

import sys

from . import _registry
from ._errors import RegistrationError, RegistrationTypeError
from ._fields import MISSING, describe, is_attrs_class, is_dataclass_class, is_namedtuple_class

TYPE_CHECKING = False  # typing costs ~10 ms to import; checkers treat this as True
if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Mapping
    from typing import Any, Final, TypeVar, overload

__all__ = ["field", "pytree_dataclass", "register_dataclass", "register_namedtuple"]


# The stdlib dataclass options pytree_dataclass passes through, with dataclasses' defaults.
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


def _field_impl(
    static: bool,
    default: Any,
    default_factory: Any,
    init: bool,
    repr: bool,
    hash: bool | None,
    compare: bool,
    kw_only: Any,
    metadata: Mapping[Any, Any] | None,
) -> Any:
    import dataclasses

    meta: dict[Any, Any] = dict(metadata) if metadata else {}
    if static:
        meta["static"] = True
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
    if default is not MISSING and default_factory is not MISSING:
        raise RegistrationError(
            "tc.field() got both default= and default_factory=; pass only one of them."
        )
    return dataclasses.field(**kwargs)


def _register_class(
    cls: type,
    *,
    name: str | None,
    static: Collection[str],
    return_none_fields: bool,
    unflatten_calls_init: bool,
    override: bool,
) -> None:
    if isinstance(static, str):
        raise RegistrationTypeError(
            f"static= for {cls.__qualname__} must be a collection of field names, got the str "
            f"{static!r}; write static=({static!r},)."
        )
    info = describe(cls, static=static, rebuild="init" if unflatten_calls_init else None)
    node = _registry.NodeDef(info, name, return_none_fields)
    _registry.register(node, override=override)


def _pytree_dataclass_impl(
    cls: type | None,
    *,
    name: str | None,
    return_none_fields: bool,
    unflatten_calls_init: bool,
    override: bool,
    options: dict[str, Any],
) -> Any:
    if not isinstance(return_none_fields, bool):
        raise RegistrationTypeError(
            f"return_none_fields= must be True or False, got {return_none_fields!r}."
        )

    def wrap(klass: type) -> type:
        if not isinstance(klass, type):
            raise RegistrationTypeError(
                f"@pytree_dataclass decorates classes, got {klass!r}; put it above a class "
                "statement."
            )
        if is_dataclass_class(klass) or is_attrs_class(klass):
            if options:
                kind = "an attrs class" if is_attrs_class(klass) else "already a dataclass"
                raise RegistrationError(
                    f"{klass.__qualname__} is {kind}, so @pytree_dataclass registers it as it "
                    f"is and cannot apply {sorted(options)!r}; set those options on its own "
                    "decorator."
                )
            made = klass
        else:
            import dataclasses

            attrs_base = next((b for b in klass.__mro__[1:] if is_attrs_class(b)), None)
            if attrs_base is not None:
                raise RegistrationError(
                    f"{klass.__qualname__} derives from the attrs class "
                    f"{attrs_base.__qualname__}, whose fields a stdlib dataclass would not see; "
                    f"make {klass.__qualname__} an attrs class too (@attrs.define) and put "
                    "@treeclass.pytree_dataclass above it, or use treeclass.register_dataclass."
                )
            if options.get("slots") and sys.version_info < (3, 10):  # pragma: no cover
                raise RegistrationError("slots=True needs Python 3.10 or newer.")
            make: Callable[..., type] = dataclasses.dataclass
            made = make(klass, **{**_DATACLASS_OPTIONS, **options})
        _register_class(
            made,
            name=name,
            static=(),
            return_none_fields=return_none_fields,
            unflatten_calls_init=unflatten_calls_init,
            override=override,
        )
        return made

    if cls is None:
        return wrap
    return wrap(cls)


if TYPE_CHECKING:
    import dataclasses

    T = TypeVar("T")
    _C = TypeVar("_C", bound=type)

    from typing_extensions import dataclass_transform

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
    ) -> Any:
        """Typed signature; see the runtime definition."""
        raise NotImplementedError

    @overload
    @dataclass_transform(field_specifiers=(field, dataclasses.field, dataclasses.Field))
    def pytree_dataclass(cls: _C, /) -> _C: ...

    @overload
    def pytree_dataclass(
        cls: None = None,
        /,
        *,
        name: str | None = None,
        return_none_fields: bool = False,
        unflatten_calls_init: bool = False,
        override: bool = False,
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
        return_none_fields: bool = False,
        unflatten_calls_init: bool = False,
        override: bool = False,
        init: bool = True,
        repr: bool = True,
        eq: bool = True,
        order: bool = False,
        unsafe_hash: bool = False,
        frozen: bool = False,
        match_args: bool = True,
        kw_only: bool = False,
        slots: bool = False,
    ) -> _C | Callable[[_C], _C]:
        """Typed signature; see the runtime definition."""
        raise NotImplementedError

    @overload
    def register_namedtuple(cls: _C, /, *, name: str) -> _C: ...

    @overload
    def register_namedtuple(*, name: str) -> Callable[[_C], _C]: ...

    def register_namedtuple(cls: _C | None = None, /, *, name: str) -> _C | Callable[[_C], _C]:
        """Typed signature; see the runtime definition."""
        raise NotImplementedError

else:

    def field(
        *,
        static=False,
        default=MISSING,
        default_factory=MISSING,
        init=True,
        repr=True,
        hash=None,
        compare=True,
        kw_only=MISSING,
        metadata=None,
    ):
        """A dataclass field specifier that can mark the field static.

        Takes the arguments of :func:`dataclasses.field`, plus ``static``: a static field's
        value is kept in the node's auxdata (part of the tree's structure, hashed and compared
        by jit caches, serialized to JSON) instead of being a child. ``static=True`` is stored as
        ``metadata={"static": True}``, JAX's own convention, so the class also works with
        ``jax.tree_util.register_dataclass``.

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

        Returns:
            A :class:`dataclasses.Field`.

        Raises:
            RegistrationError: both ``default`` and ``default_factory`` were given.

        Example:
            >>> import treeclass as tc
            >>> @tc.pytree_dataclass
            ... class Layer:
            ...     weight: float
            ...     activation: str = tc.field(static=True, default="relu")
            >>> tc.tree_leaves(Layer(0.5))
            [0.5]
        """
        return _field_impl(
            static, default, default_factory, init, repr, hash, compare, kw_only, metadata
        )

    def pytree_dataclass(
        cls=None,
        /,
        *,
        name=None,
        return_none_fields=False,
        unflatten_calls_init=False,
        override=False,
        **options,
    ):
        """Make a class a dataclass and a pytree node in every registry that is installed.

        Use it bare (``@pytree_dataclass``) or with keywords. Data fields are the children, in
        field order; fields marked ``static`` (with :func:`field`, or
        ``dataclasses.field(metadata={"static": True})``) are kept in the auxdata. A class that
        is already a dataclass or an attrs class is registered as it is, not re-wrapped.

        Args:
            cls: the class (when used bare).
            name: the stable serialized name, such as ``"mypkg.ModelOutput"``. Without it the
                class works in-process but cannot be serialized.
            return_none_fields: if ``False`` (the default), a data field whose value is
                ``None`` is not a child: its name goes into the auxdata and it comes back as
                ``None``. If ``True``, ``None`` values are children like any other.
            unflatten_calls_init: rebuild instances through ``__init__`` (running
                ``__post_init__`` and validators) instead of storing the fields directly.
                Slower, and frameworks then pass placeholders (tracers, ``object()``) to your
                ``__init__``; use it only when the class must rebuild derived state.
            override: replace a registration another library made with PyTorch's pytree
                (HuggingFace ``ModelOutput`` subclasses).
            **options: ``init``, ``repr``, ``eq``, ``order``, ``unsafe_hash``, ``frozen``,
                ``match_args``, ``kw_only``, ``slots``, passed to :func:`dataclasses.dataclass`.

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
        unknown = set(options) - set(_DATACLASS_OPTIONS)
        if unknown:
            raise RegistrationTypeError(
                f"pytree_dataclass() got unknown option(s) {sorted(unknown)!r}; it takes name, "
                "return_none_fields, unflatten_calls_init, override and the dataclass options "
                f"{sorted(_DATACLASS_OPTIONS)!r}."
            )
        return _pytree_dataclass_impl(
            cls,
            name=name,
            return_none_fields=return_none_fields,
            unflatten_calls_init=unflatten_calls_init,
            override=override,
            options=options,
        )

    def register_namedtuple(cls=None, /, *, name=None):
        """Give a namedtuple class a stable serialized name.

        Works for ``typing.NamedTuple`` and ``collections.namedtuple`` classes; every
        namedtuple is already a node of every registry, and the name is what lets trees holding
        it be serialized (and loaded in another process, by ``jax.export`` and
        ``torch.export`` too). Also usable as ``@register_namedtuple(name=...)``.

        Args:
            cls: the namedtuple class.
            name: the stable serialized name (required).

        Returns:
            The class, unchanged.

        Raises:
            RegistrationTypeError: ``cls`` is not a namedtuple class.
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

        def wrap(klass):
            if not is_namedtuple_class(klass):
                raise RegistrationTypeError(
                    f"register_namedtuple() takes a namedtuple class, got {klass!r}; use "
                    "register_dataclass() for dataclasses and attrs classes."
                )
            _register_class(
                klass,
                name=name,
                static=(),
                return_none_fields=False,
                unflatten_calls_init=False,
                override=False,
            )
            return klass

        if cls is None:
            return wrap
        return wrap(cls)


def register_dataclass(
    cls: _C,
    *,
    name: str | None = None,
    static: Collection[str] = (),
    return_none_fields: bool = False,
    unflatten_calls_init: bool = False,
    override: bool = False,
) -> _C:
    """Register an existing dataclass or attrs class as a pytree node, unchanged.

    For classes you cannot decorate (a third-party model output). Static fields are those
    marked in the class's field metadata (``{"static": True}``) plus the names in ``static``.

    Args:
        cls: a class made by ``@dataclasses.dataclass`` or by attrs.
        name: the stable serialized name; without it the class cannot be serialized.
        static: names of further fields to keep in the auxdata.
        return_none_fields: whether ``None``-valued data fields are children (see
            :func:`pytree_dataclass`).
        unflatten_calls_init: rebuild through ``__init__`` instead of storing fields directly.
        override: replace a registration another library made with PyTorch's pytree.

    Returns:
        ``cls``, unchanged.

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
        from ._errors import NotAPytreeClassError

        what = cls.__qualname__ if isinstance(cls, type) else repr(cls)
        raise NotAPytreeClassError(
            f"register_dataclass() takes a dataclass or attrs class, got {what}; decorate it "
            "with @dataclasses.dataclass (or use @treeclass.pytree_dataclass), or use "
            "register_namedtuple() for namedtuples."
        )
    _register_class(
        cls,
        name=name,
        static=static,
        return_none_fields=return_none_fields,
        unflatten_calls_init=unflatten_calls_init,
        override=override,
    )
    return cls
