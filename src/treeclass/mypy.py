"""A mypy plugin: ``replace`` checked field by field, on every Python target.

Enable it in the mypy configuration::

    [tool.mypy]
    plugins = ["treeclass.mypy"]

With it, mypy checks ``tc.replace(obj, ...)``, ``obj.replace(...)`` on a
``@tc.pytree_dataclass`` class and ``node.replace(...)`` on a ``tc.PytreeNode`` subclass as it
checks :func:`dataclasses.replace`: a name that is not a field is an error, as is a value of the
wrong type; ``tc.replace`` on an attrs instance is checked as :func:`attrs.evolve` is, on a
namedtuple as its ``_replace``. Without the plugin, mypy knows the ``.replace`` method only on
``PytreeNode`` subclasses, and checks the fields only for a Python 3.13+ target
(``docs/typing.md`` has the table).

Each call is typed by the fields of the receiver's class and returns the receiver's type
(``Self`` and TypeVar receivers too); the method is declared once per class hierarchy, so a
subclass that narrows a field's type gets no ``[override]`` error. The plugin also makes
``tc.field`` a field specifier of plain ``@dataclasses.dataclass`` classes, as it is at run time.

It reuses mypy's own dataclasses and attrs plugins. Only mypy imports this module.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from mypy.nodes import (
    ARG_POS,
    ARG_STAR2,
    MDEF,
    Argument,
    SymbolTableNode,
    TypeInfo,
    TypeVarExpr,
    Var,
)
from mypy.plugin import (
    ClassDefContext,
    FunctionSigContext,
    MethodSigContext,
    Plugin,
)
from mypy.plugins import attrs as attrs_plugin
from mypy.plugins import dataclasses as dataclasses_plugin
from mypy.plugins.common import add_method_to_class
from mypy.typeops import bind_self
from mypy.types import (
    AnyType,
    CallableType,
    FunctionLike,
    Instance,
    ProperType,
    TupleType,
    TypeOfAny,
    TypeVarId,
    TypeVarType,
    UnionType,
    get_proper_type,
)
from mypy.typevars import fill_typevars

__all__ = ["TreeclassPlugin", "plugin"]

#: The full names mypy gives treeclass's ``replace`` function, ``pytree_dataclass`` decorator and
#: ``PytreeNode`` class (where they are defined; tests/test_mypy_plugin.py checks them).
REPLACE_FUNCTION: Final = "treeclass._core.replace.replace"
DECORATOR: Final = "treeclass._core.api.pytree_dataclass"
NODE: Final = "treeclass._core.api.PytreeNode"
#: ``tc.field``'s full name: the plugin makes it a field specifier of ``@dataclasses.dataclass``
#: too, as it is at run time (it returns a ``dataclasses.Field``), so that a field it gives no
#: default is a required ``__init__`` argument there as well.
FIELD: Final = "treeclass._core.api.field"
#: The self type variable of the ``replace`` the plugin adds (as mypy's ``_DT`` of ``__lt__``).
_SELF_TVAR: Final = "_TreeclassReplaceSelf"


def _info(typ: ProperType) -> TypeInfo | None:
    if isinstance(typ, TypeVarType):
        typ = get_proper_type(typ.upper_bound)
    if isinstance(typ, TupleType):  # a namedtuple's instances
        return typ.partial_fallback.type
    if isinstance(typ, Instance):
        return typ.type
    if isinstance(typ, UnionType):
        infos = [_info(get_proper_type(t)) for t in typ.relevant_items()]
        return infos[0] if infos and all(i is not None for i in infos) else None
    return None


def _namedtuple_signature(ctx: FunctionSigContext, obj: ProperType, info: TypeInfo) -> CallableType:
    method = info.get_method("_replace")
    sig = get_proper_type(method.type) if method is not None else None
    if not isinstance(sig, CallableType):
        return ctx.default_signature
    bound = bind_self(sig, obj)
    return bound.copy_modified(
        arg_names=[None, *bound.arg_names],
        arg_kinds=[ARG_POS, *bound.arg_kinds],
        arg_types=[obj, *bound.arg_types],
        ret_type=obj,
        fallback=ctx.default_signature.fallback,
        name=ctx.default_signature.name,
    )


def _replace_function(ctx: FunctionSigContext) -> FunctionLike:
    """``tc.replace(obj, ...)``: as ``attrs.evolve``, ``_replace``, ``dataclasses.replace``."""
    if len(ctx.args) < 1 or len(ctx.args[0]) != 1:
        return ctx.default_signature  # mypy reports the call itself
    obj = get_proper_type(ctx.api.get_expression_type(ctx.args[0][0]))
    info = _info(obj)
    if info is None:
        return ctx.default_signature  # Any, or not a class instance: the overloads decide
    # The dataclasses and attrs callbacks read ctx.args[0] and want exactly two formals.
    two = ctx._replace(args=[ctx.args[0], [a for group in ctx.args[1:] for a in group]])
    if "attrs" in info.metadata:
        return attrs_plugin.evolve_function_sig_callback(two)
    if info.is_named_tuple:
        return _namedtuple_signature(ctx, obj, info)
    return dataclasses_plugin.replace_function_sig_callback(two)


def _replace_owner(info: TypeInfo) -> TypeInfo | None:
    """The class whose ``replace`` ``info`` has: itself or a base (not ``object``), or ``None``."""
    return next((base for base in info.mro[:-1] if "replace" in base.names), None)


def _is_treeclass_replace(owner: TypeInfo) -> bool:
    """Whether ``owner``'s ``replace`` is treeclass's: ``PytreeNode``'s, or one the plugin added."""
    return owner.fullname == NODE or bool(owner.metadata.get("treeclass", {}).get("replace"))


def _method_replace(ctx: MethodSigContext) -> FunctionLike:
    """``obj.replace(**changes)``: typed by the fields of ``type(obj)``, returning ``obj``'s type.

    For ``PytreeNode`` subclasses and ``@tc.pytree_dataclass`` classes; a class's own
    ``replace`` keeps its own signature. The fields are those of the receiver's class (a
    subclass's, not the class that has the method), so a subclass that narrows a field's type
    needs no ``replace`` of its own, which mypy would check as an override of its base's.
    """
    info = _info(ctx.type)
    if info is None:
        return ctx.default_signature
    owner = _replace_owner(info)
    if owner is None or not _is_treeclass_replace(owner):
        return ctx.default_signature
    sigs = dataclasses_plugin._get_expanded_dataclasses_fields(
        ctx,  # type: ignore[arg-type]  # reads only .api, as FunctionSigContext's
        ctx.type,
        ctx.type,
        ctx.type,
    )
    if not sigs:
        return ctx.default_signature
    sig = dataclasses_plugin._meet_replace_sigs(sigs)
    return sig.copy_modified(
        ret_type=ctx.type,
        fallback=ctx.default_signature.fallback,
        name=f"replace of {info.name}",
    )


def _pytree_dataclass(ctx: ClassDefContext) -> bool:
    """``@tc.pytree_dataclass``: a dataclass (mypy's plugin), plus the ``replace`` it adds.

    As ``attach_replace`` at run time, the method is added unless the class or a base has a
    ``replace``: a user's own is kept; one treeclass gave a base (``PytreeNode``'s, or one
    added here) is inherited, and :func:`_method_replace` types each call by the receiver's
    fields. So ``replace`` is declared once per hierarchy, with ``**changes: Any``, and a
    subclass that narrows a field declares no ``replace`` for mypy to check as an override.
    """
    complete = dataclasses_plugin.dataclass_class_maker_callback(ctx)
    info = ctx.cls.info
    if not complete or "dataclass" not in info.metadata:
        return complete
    owner = _replace_owner(info)
    if owner is not None and owner is not info:
        return complete  # inherited (typed per call) or the class's own base's (kept)
    if owner is info and not _is_treeclass_replace(info):
        return complete  # the class defines replace itself
    _add_replace(ctx)
    return complete


def _node_subclass(ctx: ClassDefContext) -> None:
    """A direct subclass of ``PytreeNode``: the ``replace`` of :func:`_add_replace`.

    ``PytreeNode.replace`` is typed, for a Python 3.13+ target, by the class's
    ``__replace__``, which mypy declares to return the class, not ``Self``; this one returns
    the receiver's type for a ``Self`` or TypeVar receiver too (other calls are typed by
    :func:`_method_replace` either way).
    """
    if "replace" not in ctx.cls.info.names:
        _add_replace(ctx)


def _add_replace(ctx: ClassDefContext) -> None:
    """Declare ``replace(self: _S, /, **changes: Any) -> _S`` (``_S`` bound to the class).

    A call on a ``Self`` or TypeVar receiver, which mypy gives no method hook, returns the
    receiver's type; :func:`_method_replace` types every other call by the fields.
    """
    info = ctx.cls.info
    bound = fill_typevars(info)
    any_type = AnyType(TypeOfAny.from_omitted_generics)
    fullname = f"{info.fullname}.{_SELF_TVAR}"
    info.names[_SELF_TVAR] = SymbolTableNode(
        MDEF, TypeVarExpr(_SELF_TVAR, fullname, [], bound, any_type)
    )
    self_type = TypeVarType(
        _SELF_TVAR,
        fullname,
        id=TypeVarId(-1, namespace=f"{info.fullname}.replace"),
        values=[],
        upper_bound=bound,
        default=any_type,
    )
    changes = Var("changes", AnyType(TypeOfAny.explicit))
    add_method_to_class(
        ctx.api,
        ctx.cls,
        "replace",
        args=[Argument(changes, changes.type, None, ARG_STAR2)],
        return_type=self_type,
        self_type=self_type,
        tvar_def=self_type,
    )
    info.metadata.setdefault("treeclass", {})["replace"] = True


class TreeclassPlugin(Plugin):
    """Types ``replace`` by the fields of the object's class (see the module docstring)."""

    def get_function_signature_hook(
        self, fullname: str
    ) -> Callable[[FunctionSigContext], FunctionLike] | None:
        """``tc.replace``."""
        return _replace_function if fullname == REPLACE_FUNCTION else None

    def get_method_signature_hook(
        self, fullname: str
    ) -> Callable[[MethodSigContext], FunctionLike] | None:
        """``replace`` of ``PytreeNode`` and ``@tc.pytree_dataclass`` classes, and of subclasses.

        mypy names the method by the receiver's class (``pkg.Sub.replace``), so every
        ``replace`` gets the hook, which leaves alone those treeclass does not define.
        """
        return _method_replace if fullname.endswith(".replace") else None

    def get_base_class_hook(self, fullname: str) -> Callable[[ClassDefContext], None] | None:
        """Direct subclasses of ``PytreeNode``."""
        return _node_subclass if fullname == NODE else None

    def get_class_decorator_hook_2(self, fullname: str) -> Callable[[ClassDefContext], bool] | None:
        """``@tc.pytree_dataclass``, bare or with options."""
        return _pytree_dataclass if fullname == DECORATOR else None


def _field_specifier_of_dataclasses() -> None:
    """Make ``tc.field`` a field specifier of ``@dataclasses.dataclass`` classes.

    mypy's dataclasses plugin knows ``dataclasses.field`` by name, from one spec object that it
    also tells stdlib dataclasses by (identity); the name is added to that object, so that
    ``x: int = tc.field(static=True)`` is a field without a default in a plain dataclass, as
    at run time, and nothing else changes. (pyright has no plugins: docs/typing.md.)
    """
    spec = getattr(dataclasses_plugin, "_TRANSFORM_SPEC_FOR_DATACLASSES", None)
    names = getattr(spec, "field_specifiers", None)
    if isinstance(names, tuple) and FIELD not in names:
        spec.field_specifiers = (*names, FIELD)  # type: ignore[union-attr]


def plugin(version: str) -> type[Plugin]:
    """Mypy's entry point: the plugin class (``version`` is mypy's; any 1.x or later)."""
    del version
    _field_specifier_of_dataclasses()
    return TreeclassPlugin
