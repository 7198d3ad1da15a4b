"""What the framework adapters share to convert structures through the neutral node list.

An adapter reads its framework's structure object node by node and hands each node to
:func:`encode_node`, which gives the ``(name, state, arity)`` entry of the node list
(:mod:`treeclass._treespec.format`); to build a framework's structure it takes the framework's
``tree_structure`` of a :func:`skeleton` tree. Where the frameworks differ by design (``None``,
dict key order) is in ``docs/parity.md``.
"""

from __future__ import annotations

from collections import OrderedDict, defaultdict
from collections.abc import Callable, Sequence
from operator import itemgetter
from typing import Any, Final, TypeAlias

from .._core.fields import is_namedtuple_class
from .._core.keys import index_entry
from .._core.names import DEFAULT_DICT
from .._core.nodes import BUILTIN_NODE_TYPES, NodeType, any_dropping_node
from .._core.registry import registered_node
from .._core.state import fixed_children_error
from .._core.tree import TreeSpec
from .._core.unnamed import several, unnamed_message
from .._errors import StructureMismatchError, TreespecLoadError, UnnamedClassError, brief, qualname
from .format import Node

__all__ = [
    "LEAF",
    "Read",
    "Where",
    "encode_node",
    "leaf_count_error",
    "nodes_of",
    "refuse_dropping",
    "skeleton",
]

#: A position in a tree being walked: ``None`` (the root) or ``(parent, child_index)``.
Where: TypeAlias = "tuple[Any, int] | None"

_NONE_TYPE: Final = type(None)
#: The node types :func:`encode_node` writes without a registration.
_NEUTRAL: Final = frozenset((tuple, list, _NONE_TYPE, dict, OrderedDict, defaultdict))


class _Placeholder:
    """The leaf put into the skeleton tree a framework's ``tree_structure`` is taken of."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<treeclass leaf placeholder>"


#: The placeholder leaf of :func:`skeleton` trees.
LEAF: Final = _Placeholder()


def skeleton(spec: TreeSpec) -> Any:
    """``spec`` unflattened with placeholder leaves (treeclass's unflatten: no ``__init__``)."""
    return spec.unflatten([LEAF] * spec.num_leaves)


def _where_text(where: Where) -> str:
    if where is None:
        return "at the root"
    path: list[int] = []
    while where is not None:
        where, i = where
        path.append(i)
    path.reverse()
    return "at child position " + "".join(map(index_entry, path)) + " (counted from the root)"


def _not_registered(framework: str, cls: object, where: Where) -> UnnamedClassError:
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
        f"the {framework} structure has a node of type {qualname(cls)} {_where_text(where)}, "
        "which is not registered with treeclass (it is a node in that framework only), so the "
        f"structure has no framework-neutral form; {fix}."
    )


def _check_sorted(framework: str, kind: str, keys: tuple[Any, ...], where: Where) -> None:
    try:
        in_order = sorted(keys)
    except TypeError:
        return  # keys that cannot be sorted keep their order, as in tree_flatten
    if list(keys) != in_order:
        raise StructureMismatchError(
            f"the {framework} structure has a {kind} {_where_text(where)} whose children are "
            f"in insertion order {brief(list(keys), 120)}, not in sorted key order; JAX, "
            "optree, treeclass and the treespec format order a dict's children by sorted key, "
            "so this structure has no framework-neutral form with the same leaf order. Build "
            "the dict in sorted key order before flattening (dict(sorted(d.items()))), or use a "
            "collections.OrderedDict, which every framework keeps in order."
        )


def encode_node(framework: str, cls: Any, data: Any, k: int, where: Where) -> Node:
    """The ``(name, state, arity)`` of one node of a framework's structure.

    ``data`` is what the framework keeps for the node: the auxdata of a treeclass class (the
    same tuple in every framework), the keys of a dict, ``(factory, keys)`` of a defaultdict.

    Raises:
        UnnamedClassError: the node's type is not registered with treeclass, or unnamed.
        StructureMismatchError: a dict's keys are not in sorted order.
        UnserializableStaticError: a static value has no JSON form.
    """
    if cls is tuple or cls is list or cls is _NONE_TYPE:
        nt = BUILTIN_NODE_TYPES[cls]
        return (nt.name, None, 0 if cls is _NONE_TYPE else k)
    if cls is dict or cls is OrderedDict:
        keys = tuple(data)
        if cls is dict:
            _check_sorted(framework, "dict", keys, where)
        nt = BUILTIN_NODE_TYPES[cls]
        return (nt.name, nt.getstate(keys), k)
    if cls is defaultdict:
        factory, keys = data
        keys = tuple(keys)
        _check_sorted(framework, "defaultdict", keys, where)
        return (DEFAULT_DICT, BUILTIN_NODE_TYPES[cls].getstate((factory, keys)), k)
    node = registered_node(cls) if isinstance(cls, type) else None
    if node is None:
        raise _not_registered(framework, cls, where)
    return (node.require_name(), node.getstate(data), k)


#: How an adapter reads one node of its framework's structure: ``None`` for a leaf, else
#: ``(type, node data, children, leafy)`` where ``leafy`` says every child is a leaf (the
#: children are then only counted).
Read: TypeAlias = "Callable[[Any], tuple[Any, Any, Sequence[Any], bool] | None]"


def nodes_of(framework: str, root: Any, read: Read) -> list[Node]:
    """The treespec node list of a framework's structure ``root``, read node by node.

    Raises:
        UnnamedClassError: a node type is not registered with treeclass, or has no name.
        StructureMismatchError: a dict's keys are not in sorted order.
        UnserializableStaticError: a static value has no JSON form.
    """
    out: list[Node] = []
    append = out.append
    stack: list[tuple[Any, Where]] = [(root, None)]
    pop = stack.pop
    while stack:
        t, where = pop()
        node = read(t)
        if node is None:
            append(None)
            continue
        cls, data, children, leafy = node
        k = len(children)
        try:
            append(encode_node(framework, cls, data, k, where))
        except UnnamedClassError:  # say at once what every class of the structure needs
            raise _every_unnamed(framework, root, read) from None
        if leafy:
            out.extend([None] * k)
            continue
        for i in range(k - 1, -1, -1):
            stack.append((children[i], (where, i)))
    return out


def _every_unnamed(framework: str, root: Any, read: Read) -> UnnamedClassError:
    """The error for a structure with a class that cannot be written: every such class."""
    messages: dict[type, str] = {}
    stack: list[tuple[Any, Where]] = [(root, None)]
    while stack:
        t, where = stack.pop()
        node = read(t)
        if node is None:
            continue
        cls, _, children, leafy = node
        if cls not in messages and cls not in _NEUTRAL:
            nt = registered_node(cls) if isinstance(cls, type) else None
            message = (
                str(_not_registered(framework, cls, where)) if nt is None else unnamed_message(nt)
            )
            if message is not None:
                messages[cls] = message
        if not leafy:
            for i in range(len(children) - 1, -1, -1):
                stack.append((children[i], (where, i)))
    return several(messages.values())


def refuse_dropping(spec: TreeSpec, framework: str) -> None:
    """Refuse a spec that holds removed fields' children (a framework's leaves would shift).

    Raises:
        TreespecLoadError: from :func:`~treeclass._core.state.fixed_children_error`.
    """
    if not any_dropping_node():  # (the common case: no document ever lost a field here)
        return
    entries: tuple[tuple[NodeType, Any, int, bool] | None, ...] = spec._entries
    for nt in dict.fromkeys(map(itemgetter(0), filter(None, entries))):
        if nt.dropped:
            what = f"the treespec (to {framework})"
            raise fixed_children_error(nt.qualname, nt.dropped, nt.filled, what)


def leaf_count_error(
    framework: str, spec: TreeSpec, got: int, is_node: Callable[[type], bool]
) -> TreespecLoadError:
    """The error for a framework structure built from ``spec`` with another leaf count."""
    seen: dict[type, None] = {}
    for e in spec._entries:
        if e is not None:
            if e[0].filled:  # the new fields' defaults have leaves: only a TreeSpec fills them in
                what = f"the treespec (to {framework})"
                return fixed_children_error(e[0].qualname, (), e[0].filled, what)
            seen.setdefault(e[0].type)
    missing = [qualname(t) for t in seen if not is_node(t)]
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
