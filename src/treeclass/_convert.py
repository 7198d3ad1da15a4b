"""One structure across registries: framework specs <-> the framework-neutral node list.

:func:`treeclass.treespec_dumps` accepts, besides the embedded registry's
:class:`~treeclass.TreeSpec`, a JAX ``PyTreeDef``, a torch ``TreeSpec``
(``torch.utils._pytree``) and an optree ``PyTreeSpec`` (optree's own namespaces and the one
of ``torch.utils._cxx_pytree``); :func:`treeclass.treespec_loads` with ``to="jax"``,
``"torch"`` or ``"optree"`` returns that framework's structure object. Everything goes through
the node list of :mod:`treeclass._format`, so a structure flattened in one framework loads
in any other.

A framework is never imported here unless asked for: a spec is recognised by the module of
its type (a spec object only exists once its framework has been imported), and ``to=``
imports the framework it names.

Where the frameworks differ by design (see ``docs/parity.md``):

- **None.** torch (both pytrees) treats ``None`` as a leaf; JAX, optree and treeclass as a
  node with no children. A torch spec's ``None`` is a leaf like any other, so it is written as
  a leaf. A document with a ``"None"`` node cannot become a torch spec with the same leaves:
  loading it with ``to="torch"`` is an error naming the node.
- **dict key order.** JAX, optree and treeclass order a ``dict``'s children by sorted key; the
  document does too. torch keeps insertion order: a torch ``dict`` (or ``defaultdict``) whose
  keys are in sorted order (or cannot be sorted against each other) is written as the same
  ``"dict"`` node as in every other framework; one whose keys are in another order has no
  framework-neutral form with the same leaf order, and dumping it is an error that says how
  to fix it (build the dict in sorted key order, or use an ``OrderedDict``).

Example:
    >>> import torch.utils._pytree as tp  # doctest: +SKIP
    >>> import jax.tree_util as jtu  # doctest: +SKIP
    >>> import treeclass as tc
    >>> leaves, tspec = tp.tree_flatten({"a": [1.0, 2.0], "b": (3.0,)})  # doctest: +SKIP
    >>> treedef = tc.treespec_loads(tc.treespec_dumps(tspec), to="jax")  # doctest: +SKIP
    >>> jtu.tree_unflatten(treedef, leaves)  # doctest: +SKIP
    {'a': [1.0, 2.0], 'b': (3.0,)}
"""

from __future__ import annotations

import sys
from collections import OrderedDict, defaultdict

from ._auxdata import brief
from ._errors import (
    StructureMismatchError,
    TreeclassTypeError,
    TreespecLoadError,
    UnnamedClassError,
)
from ._fields import is_namedtuple_class
from ._format import _ddict_state, _dict_state, _odict_state
from ._registry import node_for_class
from ._tree import TreeSpec

TYPE_CHECKING = False  # typing costs ~10 ms to import; checkers treat this as True
if TYPE_CHECKING:
    from collections.abc import Callable
    from types import ModuleType
    from typing import Any, Final, Literal, TypeAlias

    from ._format import Node

    #: A position in a tree being walked: ``None`` (the root) or ``(parent, child_index)``.
    Where: TypeAlias = "tuple[Any, int] | None"
    Framework: TypeAlias = Literal["jax", "torch", "optree"]

__all__ = ["FRAMEWORKS", "framework_of", "nodes_from_framework", "spec_to_framework"]

#: The values ``treespec_loads(..., to=)`` accepts besides ``None``.
FRAMEWORKS: Final = ("jax", "torch", "optree")

_NONE_TYPE: Final = type(None)


class _Placeholder:
    """The leaf put into the skeleton tree a framework's ``tree_structure`` is taken of."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<treeclass leaf placeholder>"


_LEAF: Final = _Placeholder()


# --- recognising a framework's spec without importing the framework ---------------------------


def framework_of(spec: object) -> Framework | None:
    """``"jax"``, ``"torch"`` or ``"optree"`` for a structure of that framework, else ``None``.

    Decided from the type's module and name, so no framework is imported.
    """
    t = type(spec)
    module = t.__module__
    if module.startswith("jaxlib") and t.__name__ == "PyTreeDef":
        return "jax"
    if module == "optree" and t.__name__ == "PyTreeSpec":
        return "optree"
    if module == "torch.utils._pytree":
        pytree = sys.modules.get("torch.utils._pytree")
        if pytree is not None and isinstance(spec, pytree.TreeSpec):
            return "torch"
    return None


# --- messages -----------------------------------------------------------------------------------


def _where_text(where: Where) -> str:
    if where is None:
        return "at the root"
    path: list[int] = []
    while where is not None:
        where, i = where
        path.append(i)
    path.reverse()
    return "at child position " + "".join(f"[{i}]" for i in path) + " (counted from the root)"


def _qualname(cls: object) -> str:
    module = getattr(cls, "__module__", None) or "?"
    name = getattr(cls, "__qualname__", None) or repr(cls)
    return f"{module}.{name}"


def _not_registered(framework: str, cls: object, where: Where) -> UnnamedClassError:
    label = _qualname(cls)
    short = str(getattr(cls, "__qualname__", "Cls"))
    if isinstance(cls, type) and is_namedtuple_class(cls):
        fix = f'give it a name with treeclass.register_namedtuple({short}, name="pkg.{short}")'
    else:
        fix = (
            "if it is a dataclass or attrs class, register it with treeclass instead: "
            f'treeclass.register_dataclass({short}, name="pkg.{short}") (or decorate it with '
            "@treeclass.pytree_dataclass(name=...); add override=True if another library, such "
            "as transformers, already registered it with torch); other node types have no "
            "framework-neutral form: convert them to a tuple, list or dict first"
        )
    return UnnamedClassError(
        f"the {framework} structure has a node of type {label} {_where_text(where)}, which is "
        "not registered with treeclass (it is a node in that framework only), so the "
        f"structure has no framework-neutral form; {fix}."
    )


def _unsorted(framework: str, kind: str, keys: tuple[Any, ...], where: Where) -> Exception:
    return StructureMismatchError(
        f"the {framework} structure has a {kind} {_where_text(where)} whose children are in "
        f"insertion order {brief(list(keys), 120)}, not in sorted key order; JAX, optree, "
        "treeclass and the treespec format order a dict's children by sorted key, so this "
        "structure has no framework-neutral form with the same leaf order. Build the dict "
        "in sorted key order before flattening (dict(sorted(d.items()))), or use a "
        "collections.OrderedDict, which every framework keeps in order."
    )


# --- encoding one node --------------------------------------------------------------------------


def _check_sorted(framework: str, kind: str, keys: tuple[Any, ...], where: Where) -> None:
    try:
        in_order = sorted(keys)
    except TypeError:
        return  # keys that cannot be sorted keep their order, as in tree_flatten
    if list(keys) != in_order:
        raise _unsorted(framework, kind, keys, where)


def _encode(framework: str, cls: Any, data: Any, k: int, where: Where) -> Node:
    """The ``(name, state, arity)`` of one node; ``data`` is the framework's node data.

    ``data`` is what the framework keeps for the node: the auxdata of a treeclass class (the
    same tuple in every framework), the keys of a dict, ``(factory, keys)`` of a defaultdict.
    A namedtuple is given with ``cls`` its class.
    """
    if cls is tuple:
        return ("tuple", None, k)
    if cls is list:
        return ("list", None, k)
    if cls is _NONE_TYPE:
        return ("None", None, 0)
    if cls is dict:
        keys = tuple(data)
        _check_sorted(framework, "dict", keys, where)
        return ("dict", _dict_state(keys), k)
    if cls is OrderedDict:
        return ("collections.OrderedDict", _odict_state(tuple(data)), k)
    if cls is defaultdict:
        factory, keys = data
        keys = tuple(keys)
        _check_sorted(framework, "defaultdict", keys, where)
        return ("collections.defaultdict", _ddict_state((factory, keys)), k)
    node = node_for_class(cls) if isinstance(cls, type) else None
    if node is None:
        raise _not_registered(framework, cls, where)
    name = node.require_name()
    if node.kind == "namedtuple":
        return (name, node.getstate(None), k)
    return (name, node.getstate(data), k)


# --- walking each framework's spec --------------------------------------------------------------


def _jax_nodes(treedef: Any) -> list[Node]:
    out: list[Node] = []
    append = out.append
    stack: list[tuple[Any, Where]] = [(treedef, None)]
    pop = stack.pop
    while stack:
        t, where = pop()
        nd = t.node_data()
        if nd is None:
            append(None)
            continue
        cls, data = nd
        n_leaves: int = t.num_leaves
        if t.num_nodes - 1 == n_leaves:  # every child is a leaf: no need to split it up
            append(_encode("JAX", cls, data, n_leaves, where))
            out.extend([None] * n_leaves)
            continue
        children = t.children()
        append(_encode("JAX", cls, data, len(children), where))
        for i in range(len(children) - 1, -1, -1):
            stack.append((children[i], (where, i)))
    return out


def _torch_nodes(spec: Any) -> list[Node]:
    import collections

    namedtuple_marker = collections.namedtuple
    # torch 2.13 deprecates ``children_specs`` for ``children()``; older releases lack children().
    new_api = callable(getattr(spec, "children", None))
    out: list[Node] = []
    append = out.append
    stack: list[tuple[Any, Where]] = [(spec, None)]
    pop = stack.pop
    while stack:
        t, where = pop()
        cls = t.type
        if cls is None:
            append(None)
            continue
        context = t.context
        if cls is namedtuple_marker:  # torch's type for every namedtuple; the class is the context
            cls = context
        children = t.children() if new_api else t.children_specs
        k = len(children)
        if t.num_leaves == k and t.num_nodes == k + 1:
            append(_encode("torch", cls, context, k, where))
            out.extend([None] * k)
            continue
        append(_encode("torch", cls, context, k, where))
        for i in range(k - 1, -1, -1):
            stack.append((children[i], (where, i)))
    return out


def _optree_node(cls: Any, data: Any, children: Any) -> tuple[Any, Any, Any]:
    return (cls, data, children)


def _optree_leaf(_: Any) -> None:
    return None


def _optree_nodes(spec: Any) -> list[Node]:
    # ``walk`` visits the tree once in C++, calling f_node(type, node_data, children) bottom-up
    # without unflattening anything; the nested result is then read in pre-order here.
    framework = "optree" if spec.namespace != "torch" else "torch (C++ pytree)"
    try:
        # optree >= 0.20: walk(leaves, f_node(type, data, children), f_leaf). Before that,
        # walk took (f_node(children, data), f_leaf, leaves), which cannot name the node types.
        walked = spec.walk([None] * spec.num_leaves, _optree_node, _optree_leaf)
    except TypeError:
        import optree

        raise TreeclassTypeError(
            f"converting an optree PyTreeSpec needs optree 0.20 or newer (its PyTreeSpec.walk), "
            f"but optree {optree.__version__} is installed; upgrade optree."
        ) from None
    out: list[Node] = []
    append = out.append
    stack: list[tuple[Any, Where]] = [(walked, None)]
    pop = stack.pop
    while stack:
        item, where = pop()
        if item is None:
            append(None)
            continue
        cls, data, children = item
        k = len(children)
        append(_encode(framework, cls, data, k, where))
        if children.count(None) == k:
            out.extend(children)
            continue
        for i in range(k - 1, -1, -1):
            stack.append((children[i], (where, i)))
    return out


_WALKERS: Final[dict[str, Callable[[Any], list[Node]]]] = {
    "jax": _jax_nodes,
    "torch": _torch_nodes,
    "optree": _optree_nodes,
}


def nodes_from_framework(spec: object) -> list[Node] | None:
    """The node list of a JAX, torch or optree structure, or ``None`` for another object.

    Raises:
        UnnamedClassError: a node type is not registered with treeclass, or is registered
            without a name.
        StructureMismatchError: a torch dict's keys are not in sorted order.
        UnserializableStaticError: a static value has no JSON form.
    """
    framework = framework_of(spec)
    if framework is None:
        return None
    return _WALKERS[framework](spec)


# --- building each framework's spec -------------------------------------------------------------


def _import(module: str) -> ModuleType:
    import importlib

    return importlib.import_module(module)


def _missing_nodes(spec: TreeSpec, is_node: Callable[[type], bool]) -> list[str]:
    """Qualified names of the node types of ``spec`` that a framework does not know."""
    seen: dict[type, None] = {}
    for e in spec._entries:
        if e is not None:
            seen.setdefault(e[0].type)
    return [_qualname(t) for t in seen if not is_node(t)]


def _leaf_count_error(framework: str, spec: TreeSpec, got: int, missing: list[str]) -> Exception:
    why = (
        f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not a node there (its "
        "treeclass registration with that framework failed or was undone)"
        if missing
        else "it does not see the same nodes"
    )
    return TreespecLoadError(
        f"the treespec has {spec.num_leaves} leaves but the {framework} structure built from it "
        f"has {got}: {why}; import {framework} before registering the classes, or check the "
        "RuntimeWarning treeclass gave when it registered them."
    )


def _to_jax(spec: TreeSpec) -> Any:
    tree_util = _import("jax.tree_util")
    skeleton = spec.unflatten([_LEAF] * spec.num_leaves)
    treedef = tree_util.tree_structure(skeleton)
    if treedef.num_leaves != spec.num_leaves:
        raise _leaf_count_error(
            "JAX", spec, treedef.num_leaves, _missing_nodes(spec, tree_util.is_tree_node)
        )
    return treedef


def _to_optree(spec: TreeSpec) -> Any:
    optree = _import("optree")
    skeleton = spec.unflatten([_LEAF] * spec.num_leaves)
    treespec = optree.tree_structure(skeleton, none_is_leaf=False)
    if treespec.num_leaves != spec.num_leaves:

        def is_node(t: type) -> bool:
            return t is _NONE_TYPE or optree.register_pytree_node.get(t) is not None

        raise _leaf_count_error("optree", spec, treespec.num_leaves, _missing_nodes(spec, is_node))
    return treespec


def _to_torch(spec: TreeSpec) -> Any:
    pytree = _import("torch.utils._pytree")
    for e in spec._entries:
        if e is not None and e[0].type is _NONE_TYPE:
            raise TreespecLoadError(
                f"the treespec has a None node ({brief(spec, 200)}); torch's pytree treats "
                "None as a leaf, so a torch TreeSpec would have more leaves than the document "
                "and the leaves flattened from the original tree would not fit it. Load it "
                "with to='jax', 'optree' or None; or keep None out of the tree before "
                "flattening (a treeclass class's None fields are no children with "
                "return_none_fields=False, the default)."
            )
    skeleton = spec.unflatten([_LEAF] * spec.num_leaves)
    treespec = pytree.tree_structure(skeleton)
    if treespec.num_leaves != spec.num_leaves:

        def is_node(t: type) -> bool:
            return t in pytree.SUPPORTED_NODES or is_namedtuple_class(t)

        raise _leaf_count_error("torch", spec, treespec.num_leaves, _missing_nodes(spec, is_node))
    return treespec


_BUILDERS: Final[dict[str, Callable[[TreeSpec], Any]]] = {
    "jax": _to_jax,
    "torch": _to_torch,
    "optree": _to_optree,
}


def spec_to_framework(spec: TreeSpec, to: object) -> Any:
    """``spec`` as a structure object of framework ``to`` (``"jax"``, ``"torch"``, ``"optree"``).

    The framework's ``tree_structure`` is taken of a skeleton tree: ``spec`` unflattened
    with placeholder leaves (treeclass's own unflatten, so no ``__init__`` runs).

    Raises:
        TreespecLoadError: ``to`` is not a framework name; or torch was asked for a tree with a
            ``None`` node; or the framework does not see the same nodes.
    """
    builder = _BUILDERS.get(to) if isinstance(to, str) else None
    if builder is None:
        raise TreespecLoadError(
            f"treespec_loads(to={brief(to, 40)}) is not a framework treeclass converts to; "
            'use to="jax", to="torch", to="optree", or to=None for a treeclass TreeSpec.'
        )
    return builder(spec)
