"""The embedded registry's walkers (flatten, unflatten, key paths, map) and :class:`TreeSpec`.

Works with no framework installed; node types come from :mod:`treeclass._core.registry` (exact type
match: a subclass of a registered class is a leaf until it is registered itself). A ``dict`` is
flattened in sorted key order, as JAX and optree do; an ``OrderedDict`` keeps its order.

A :class:`TreeSpec` stores the tree as a flat, pre-order tuple of entries, so comparing and
hashing specs is done by the tuple machinery in C, and unflatten is one loop with no recursion.
An entry is ``None`` for a leaf or ``(node_type, aux, arity, leafy)``; ``leafy`` says that all
``arity`` children are leaves, which then have no entries of their own. Two walkers make them,
deciding each child once: ``tree_flatten``'s recursive loop (:func:`_walk`, with the classes'
generated fast paths), which goes on with the iterative one (:func:`_flatten_stack`) past a
bounded depth, keeping its work; ``is_leaf=`` uses the iterative one. Either way, time is
linear in the tree's size. Key paths are read off a spec's entries afterwards, all at once,
and kept for a structure used again (:func:`_key_paths`).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import repeat
from operator import is_, itemgetter
from sys import getrecursionlimit
from typing import Any, Final, overload

from .._errors import (
    StructureMismatchError,
    TreeclassTypeError,
    UnhashableStaticError,
    brief,
    unhashable_static,
)
from .codegen import _flatten_into, compile_function, flatten_into_entries
from .fields import ClassInfo
from .keys import KeyPath
from .nodes import BUILTIN_NODE_TYPES, LEAF_TYPES, NodeType, set_mixed_loop
from .registry import get_node_type, node_type_for

__all__ = [
    "TreeSpec",
    "tree_flatten",
    "tree_flatten_with_path",
    "tree_leaves",
    "tree_leaves_with_path",
    "tree_map",
    "tree_map_with_path",
    "tree_structure",
    "tree_unflatten",
]


# --- flatten ---------------------------------------------------------------------------------


def _walk(
    nt: NodeType,
    children: Sequence[Any],
    aux: Any,
    leaves: list[Any],
    entries: list[Any],
    depth: int,
) -> None:
    """Flatten a node of type ``nt`` from its ``children`` and ``aux``: the recursive walker.

    Decides each child once, by type; the entry is added when the first node child shows the
    node is not leafy. A node child goes to its type's fast path with ``depth - 1`` levels left,
    or past that to the stack walker, keeping what was done. The generated fast paths call this
    as ``_mixed``; after ``_SHAPE_AFTER`` mixed nodes, a class's fast path is shaped to them.
    """
    leaf_types = LEAF_TYPES
    get = get_node_type
    deeper = depth - 1
    mixed = False  # a node child was seen: the entry and the leaves before it were added
    j = 0  # the leaf children before the first node child
    last: type | None = None  # the type of the last node child (siblings often share it)
    into = nt.flatten_into  # (how to flatten a child of that type)
    child: object
    for child in children:
        t = type(child)
        if t is last:
            into(child, leaves, entries, deeper)
            continue
        if t not in leaf_types:
            cnt = get(t) or node_type_for(t)
            if cnt is not None:
                if not mixed:
                    mixed = True
                    entries.append((nt, aux, len(children), False))
                    if j:
                        leaves += children[:j]
                        entries += (None,) * j
                last = t
                into = cnt.flatten_into if deeper >= 0 else _stack_into
                into(child, leaves, entries, deeper)
                continue
        if mixed:
            leaves.append(child)
            entries.append(None)
        else:
            j += 1
    if not mixed:
        entries.append((nt, aux, j, True))
        leaves += children
        return
    nt.mixed_seen += 1
    if nt.mixed_seen == _SHAPE_AFTER:
        _shape_fast_path(nt, children)


def _stack_into(node: object, leaves: list[Any], entries: list[Any], depth: int) -> None:
    """A node child's fast path past the depth the walker recurses: the stack walker."""
    _flatten_stack(node, None, leaves, entries)


#: How many mixed nodes of a class the walker sees before shaping its fast path to them.
_SHAPE_AFTER: Final = 8


def _shape_fast_path(nt: NodeType, children: Sequence[Any]) -> None:
    """Give ``nt`` a fast path shaped to a mixed node whose ``children`` were just walked.

    A class's nodes mostly hold the same kinds of values in the same fields: the shaped path
    adds such a node without the walker's loop. Once per class; not for containers and
    namedtuples.
    """
    info = nt.info
    if info is None or nt.generated is None:  # a built-in container or a namedtuple
        return
    nodes = tuple(i for i, child in enumerate(children) if type(child) not in LEAF_TYPES)
    names: dict[str, Any] = {"_nt": nt, "_type": type, "_leaf_types": LEAF_TYPES}
    names.update(_get=get_node_type, _mixed=_walk)
    names.update(_entries=flatten_into_entries(nt, len(children), nodes))
    # A node child of another registered class whose children were all leaves is added in
    # place (a layer's norm), saving a call per node.
    inline: dict[int, ClassInfo] = {}
    for i in nodes:
        child: object = children[i]
        cnt = get_node_type(type(child))
        if cnt is None or cnt is nt or cnt.generated is None or (sub := cnt.info) is None:
            continue
        if all(type(getattr(child, name)) in LEAF_TYPES for name in sub.data_fields):
            inline[i] = sub
            names[f"_c{i}"] = cnt
            names[f"_ce{i}"] = flatten_into_entries(cnt, len(sub.data_fields))[0]
    source = "\n".join(_flatten_into(info, nodes, inline)) + "\n"
    nt.flatten_into = compile_function(
        nt.type, "flatten_into shaped", source, names, "flatten_into"
    )


set_mixed_loop(_walk)

#: The entry of a ``None`` node (no children): what every walker adds for it.
NONE_ENTRY: Final = (BUILTIN_NODE_TYPES[type(None)], None, 0, True)


def _none_into(node: None, leaves: list[Any], entries: list[Any], depth: int) -> None:
    """``None``'s fast path (an optional field's usual value): its entry, nothing else."""
    entries.append(NONE_ENTRY)


BUILTIN_NODE_TYPES[type(None)].flatten_into = _none_into


def _node_type(x: object, is_leaf: Callable[[Any], bool] | None) -> NodeType | None:
    """The per-child decision: the node type of ``x``, or ``None`` if it is a leaf."""
    return None if is_leaf is not None and is_leaf(x) else node_type_for(type(x))


def _flatten_stack(
    tree: Any,
    is_leaf: Callable[[Any], bool] | None,
    leaves: list[Any],
    entries: list[Any],
) -> None:
    """Flatten ``tree`` into the lists with an explicit stack: the iterative walker.

    For ``is_leaf`` and subtrees deeper than :func:`_walk` recurses. Gives exactly its
    entries, deciding each child once (:func:`_node_type`), in time and memory linear in the
    tree's size.
    """
    leaf_types = LEAF_TYPES
    get = get_node_type
    # Items: (subtree, its node type -- None: a leaf, or without is_leaf a type not seen yet).
    stack: list[tuple[Any, NodeType | None]] = [(tree, _node_type(tree, is_leaf))]
    node: object
    while stack:
        node, nt = stack.pop()
        if nt is None and (
            is_leaf is not None
            or type(node) in leaf_types
            or (nt := node_type_for(type(node))) is None
        ):
            leaves.append(node)
            entries.append(None)
            continue
        children, aux = nt.flatten(node)
        if is_leaf is not None:
            kinds = [_node_type(c, is_leaf) for c in children]
            mixed = any(kinds)
        else:
            kinds = list(map(get, map(type, children)))
            mixed = any(kinds)
            if not mixed and not leaf_types.issuperset(map(type, children)):
                kinds = list(map(node_type_for, map(type, children)))  # a type not seen yet
                mixed = any(kinds)
        if not mixed:
            entries.append((nt, aux, len(kinds), True))
            leaves += children
            continue
        entries.append((nt, aux, len(kinds), False))
        stack += zip(reversed(children), reversed(kinds))


def _key_paths(entries: tuple[Any, ...]) -> list[KeyPath]:
    """The key path of every leaf of a spec's ``entries``, in order (a list not to change).

    Read off the entries (:func:`_read_key_paths`), or, for a structure seen before, the paths
    read then: the entries' pattern (:func:`_paths_pattern`) is made at every
    :data:`_PATHS_EVERY`-th miss of their slot (their root node type and size), so a structure
    used again gets one, and entries equal to it have the same paths; structures that are
    always new pay for a pattern every few calls. Kept for :data:`_PATHS_PER_SLOT` structures
    in each of :data:`_PATHS_MAX` slots.
    """
    root = entries[0]
    slot = (None if root is None else root[0], len(entries))
    kept = _PATHS_KEPT.get(slot)
    paths: list[KeyPath]
    if kept is not None:
        for pattern, paths in kept[0]:
            if pattern == entries:
                return paths
    paths = _read_key_paths(entries)
    if kept is None:
        if len(_PATHS_KEPT) >= _PATHS_MAX:
            _PATHS_KEPT.clear()
        _PATHS_KEPT[slot] = [(), 1]
        return paths
    misses = kept[1] + 1
    if misses < _PATHS_EVERY:
        kept[1] = misses
        return paths
    small = len(entries) + sum(map(len, paths)) <= _PATHS_SIZE
    pattern = _paths_pattern(entries) if small else None
    if pattern is None:  # (a node of another type, or too long: not tried again soon)
        kept[1] = -_PATHS_BACKOFF
    else:
        kept[:] = [(*kept[0][1 - _PATHS_PER_SLOT :], (pattern, paths)), 0]
    return paths


#: ``(root node type, number of entries) -> [((pattern, key paths), ...), misses]``: the
#: structures whose key paths are kept (see :func:`_key_paths`), and the misses since the
#: last pattern was made.
_PATHS_KEPT: dict[tuple[Any, int], list[Any]] = {}
_PATHS_MAX: Final = 64  # slots kept (forgotten all at once past that)
_PATHS_PER_SLOT: Final = 4  # structures kept in a slot (the oldest goes)
_PATHS_EVERY: Final = 4  # misses in a slot for each pattern made
_PATHS_SIZE: Final = 1 << 16  # entries and key entries in its paths at most, for one kept
_PATHS_BACKOFF: Final = 16  # misses after a structure with no pattern before trying again


class _AnyAux:
    """Equal to anything: a pattern's auxdata where a node's keys do not depend on it."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return True

    def __ne__(self, other: object) -> bool:
        return False

    __hash__ = None  # type: ignore[assignment]


_ANY_AUX: Final = _AnyAux()


class _SameKeys:
    """Equal to a mapping's auxdata holding the very same keys (``1`` and ``True`` differ)."""

    __slots__ = ("keys",)

    def __init__(self, keys: tuple[Any, ...]) -> None:
        self.keys = keys

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, tuple):
            return False
        keys: tuple[Any, ...] = other  # pyright: ignore[reportUnknownVariableType]
        return len(keys) == len(self.keys) and all(map(is_, self.keys, keys))

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = None  # type: ignore[assignment]


#: The node types whose children's keys depend on their number only (auxdata ``None``).
_POSITIONAL: Final = frozenset(BUILTIN_NODE_TYPES[t] for t in (tuple, list, type(None)))
#: The node types whose auxdata is their keys, in order (see :func:`mapping_keys`).
_KEYED: Final = frozenset(BUILTIN_NODE_TYPES[t] for t in (dict, OrderedDict))


def _paths_pattern(entries: tuple[Any, ...]) -> tuple[Any, ...] | None:
    """What entries equal to have the key paths of ``entries``, or ``None``.

    Each entry as it is, but with :data:`_ANY_AUX` for a class's static values (its keys are
    its fields') and :class:`_SameKeys` for a mapping's keys: comparing it to entries runs no
    user code, and it keeps no static value alive. ``None`` if a node is of another type.
    """
    pattern: list[Any] = []
    for e in entries:
        if e is None:
            pattern.append(None)
            continue
        nt, aux, k, leafy = e
        if nt.field_keys is not None:  # a class or namedtuple
            plain = aux is None or (aux.__class__ is tuple and not aux)
            pattern.append(e if plain else (nt, _ANY_AUX, k, leafy))
        elif nt in _POSITIONAL and aux is None:
            pattern.append(e)
        elif nt in _KEYED and aux.__class__ is tuple:
            pattern.append((nt, _SameKeys(aux), k, leafy))
        else:
            return None
    return tuple(pattern)


def _read_key_paths(entries: Sequence[Any]) -> list[KeyPath]:
    """The key path of every leaf of a spec's ``entries``, in order: all at once.

    One pass over the entries, a node's path extended by each child's key (its node type's
    :attr:`~treeclass._core.nodes.NodeType.child_keys`), so each path is one tuple made from
    its parent's; a node whose children are all leaves gives theirs in one step. Past
    ``_EAGER_DEPTH`` open nodes, where every open node's path would cost memory quadratic in
    the depth, it starts again with :func:`_linked_key_paths`.
    """
    out: list[KeyPath] = []
    stack: list[Iterator[KeyPath]] = []  # the paths of open nodes' children still to come
    top: Iterator[KeyPath] = iter(((),))
    path: KeyPath | None
    for e in entries:
        path = next(top, None)
        while path is None:  # (that node's children are done)
            top = stack.pop()
            path = next(top, None)
        if e is None:
            out.append(path)
            continue
        nt, aux, k, leafy = e
        keys = nt.field_keys
        if keys is None:
            keys = nt.child_keys(aux, k)
        if leafy:
            out += map(path.__add__, keys)
        elif k:
            if len(stack) == _EAGER_DEPTH:
                return _linked_key_paths(entries)
            stack.append(top)
            top = map(path.__add__, keys)
    return out


#: How many nodes deep :func:`_read_key_paths` keeps every open node's path as a tuple.
_EAGER_DEPTH: Final = 256


def _linked_key_paths(entries: Sequence[Any]) -> list[KeyPath]:
    """:func:`_read_key_paths` in memory linear in the depth.

    A node's path is a link to its parent's (:class:`_Path`), made a tuple only when a leaf
    child needs it.
    """
    out: list[KeyPath] = []
    first = itemgetter(0)
    stack: list[Iterator[tuple[_Path | None, Any]]] = []
    top: Iterator[tuple[_Path | None, Any]] = iter(((None, None),))  # (parent, key)
    item: tuple[_Path | None, Any] | None
    for e in entries:
        item = next(top, None)
        while item is None:
            top = stack.pop()
            item = next(top, None)
        parent, key = item
        if e is None:
            out.append(_path_of(parent, key))
            continue
        nt, aux, k, leafy = e
        if leafy:
            if k:
                own = _path_of(parent, key)
                out += map(own.__add__, nt.child_keys(aux, k))
        elif k:
            stack.append(top)
            top = zip(repeat(_Path(parent, key)), map(first, nt.child_keys(aux, k)))
    return out


class _Path:
    """A node's key path, kept as a link to its parent's until a leaf child needs it whole."""

    __slots__ = ("key", "parent", "path")

    def __init__(self, parent: _Path | None, key: Any) -> None:
        self.parent: Any = parent
        self.key = key
        self.path: KeyPath | None = None if parent is not None else ()


def _path_of(parent: _Path | None, key: Any) -> KeyPath:
    """The key path of the child ``key`` of the node at ``parent`` (``None``: the root's)."""
    if parent is None:
        return ()
    path = parent.path
    if path is None:  # built once, from the nearest ancestor that has its own (the root has)
        keys: list[Any] = []
        p = parent
        while (base := p.path) is None:
            keys.append(p.key)
            p = p.parent
        path = parent.path = (*base, *reversed(keys))
    return (*path, key)


def tree_flatten(
    tree: Any, is_leaf: Callable[[Any], bool] | None = None
) -> tuple[list[Any], TreeSpec]:
    """Flatten a tree into its leaves and its structure.

    Args:
        tree: any mix of built-in containers, namedtuples and registered classes.
        is_leaf: if given, called on every subtree; ``True`` makes the subtree a leaf.

    Returns:
        ``(leaves, spec)``: the leaves in order, and the :class:`TreeSpec` to rebuild the tree.

    Example:
        >>> import treeclass as tc
        >>> leaves, spec = tc.tree_flatten({"b": [1, 2], "a": (3, None)})
        >>> leaves
        [3, 1, 2]
        >>> spec.unflatten([30, 10, 20])
        {'a': (30, None), 'b': [10, 20]}
    """
    leaves: list[Any] = []
    entries: list[Any] = []
    root: object = tree
    nt = None if is_leaf is not None else node_type_for(type(root))
    if nt is None:  # a leaf, or is_leaf given
        _flatten_stack(tree, is_leaf, leaves, entries)
    else:
        try:  # recurse about half the recursion limit's levels, then go on with a stack
            nt.flatten_into(tree, leaves, entries, getrecursionlimit() // 2 - 50)
        except RecursionError:  # called deep in the stack already: again without recursion
            leaves.clear()
            entries.clear()
            _flatten_stack(tree, None, leaves, entries)
    return leaves, TreeSpec._make(tuple(entries), len(leaves))


def tree_leaves(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> list[Any]:
    """Return the leaves of ``tree`` in order.

    Example:
        >>> import treeclass as tc
        >>> tc.tree_leaves([1, (2, {"x": 3})])
        [1, 2, 3]
    """
    return tree_flatten(tree, is_leaf)[0]


def tree_structure(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> TreeSpec:
    """Return the :class:`TreeSpec` of ``tree``.

    Example:
        >>> import treeclass as tc
        >>> tc.tree_structure((1, [2, 3])).num_leaves
        3
    """
    return tree_flatten(tree, is_leaf)[1]


def tree_unflatten(spec: TreeSpec, leaves: Iterable[Any]) -> Any:
    """Rebuild a tree of structure ``spec`` from ``leaves``.

    Raises:
        StructureMismatchError: the number of leaves is not ``spec.num_leaves``.

    Example:
        >>> import treeclass as tc
        >>> spec = tc.tree_structure([1, (2, 3)])
        >>> tc.tree_unflatten(spec, "abc")
        ['a', ('b', 'c')]
    """
    if not isinstance(spec, TreeSpec):
        raise TreeclassTypeError(
            f"tree_unflatten() takes a treeclass TreeSpec first, got {type(spec).__name__}; "
            "call it as tree_unflatten(spec, leaves)."
        )
    return spec.unflatten(leaves)


def tree_flatten_with_path(
    tree: Any, is_leaf: Callable[[Any], bool] | None = None
) -> tuple[list[tuple[KeyPath, Any]], TreeSpec]:
    """Flatten ``tree`` into ``(key_path, leaf)`` pairs and its :class:`TreeSpec`.

    Key paths are tuples of :class:`SequenceKey`, :class:`DictKey` and :class:`GetAttrKey`;
    format them with :func:`keystr`.

    Example:
        >>> import treeclass as tc
        >>> pairs, _ = tc.tree_flatten_with_path({"k": [1, 2]})
        >>> [tc.keystr(p) for p, _ in pairs]
        ["['k'][0]", "['k'][1]"]
    """
    leaves, spec = tree_flatten(tree, is_leaf)
    return list(zip(_key_paths(spec._entries), leaves)), spec


def tree_leaves_with_path(
    tree: Any, is_leaf: Callable[[Any], bool] | None = None
) -> list[tuple[KeyPath, Any]]:
    """Return the ``(key_path, leaf)`` pairs of ``tree``.

    Example:
        >>> import treeclass as tc
        >>> [(tc.keystr(p), v) for p, v in tc.tree_leaves_with_path((1, {"a": 2}))]
        [('[0]', 1), ("[1]['a']", 2)]
    """
    return tree_flatten_with_path(tree, is_leaf)[0]


def _leaves_like(spec: TreeSpec, other: Any) -> list[Any]:
    """The subtrees of ``other`` at the leaves of ``spec``.

    As in JAX, the first tree's structure must be a prefix of every other tree's.
    """
    try:
        return spec.flatten_up_to(other)
    except StructureMismatchError as e:
        raise StructureMismatchError(
            f"tree_map() needs the first tree's structure to be a prefix of every other tree's; "
            f"the first is {spec!r}, and another does not fit it: {e}"
        ) from None


# Overloads for one and two trees let checkers infer a lambda's parameter types
# (``Callable[..., Any]`` alone leaves them unknown under strict pyright).
@overload
def tree_map(
    f: Callable[[Any], Any], tree: Any, *, is_leaf: Callable[[Any], bool] | None = None
) -> Any: ...
@overload
def tree_map(
    f: Callable[[Any, Any], Any],
    tree: Any,
    other: Any,
    /,
    *,
    is_leaf: Callable[[Any], bool] | None = None,
) -> Any: ...
@overload
def tree_map(
    f: Callable[..., Any], tree: Any, *rest: Any, is_leaf: Callable[[Any], bool] | None = None
) -> Any: ...
def tree_map(
    f: Callable[..., Any], tree: Any, *rest: Any, is_leaf: Callable[[Any], bool] | None = None
) -> Any:
    """Apply ``f`` to the leaves of ``tree`` (and the matching parts of ``rest``).

    As in ``jax.tree_util.tree_map``, the structure of ``tree`` must be a prefix of every tree
    in ``rest``: where ``tree`` has a leaf, ``f`` gets the whole matching subtree of the others.

    Raises:
        StructureMismatchError: a tree in ``rest`` does not have ``tree``'s structure as a
            prefix.

    Example:
        >>> import treeclass as tc
        >>> tc.tree_map(lambda x, y: x + y, [1, (2, 3)], [10, (20, 30)])
        [11, (22, 33)]
    """
    leaves, spec = tree_flatten(tree, is_leaf)
    others = [_leaves_like(spec, r) for r in rest]
    return spec.unflatten(map(f, leaves, *others))


@overload
def tree_map_with_path(
    f: Callable[[KeyPath, Any], Any],
    tree: Any,
    *,
    is_leaf: Callable[[Any], bool] | None = None,
) -> Any: ...
@overload
def tree_map_with_path(
    f: Callable[[KeyPath, Any, Any], Any],
    tree: Any,
    other: Any,
    /,
    *,
    is_leaf: Callable[[Any], bool] | None = None,
) -> Any: ...
@overload
def tree_map_with_path(
    f: Callable[..., Any], tree: Any, *rest: Any, is_leaf: Callable[[Any], bool] | None = None
) -> Any: ...
def tree_map_with_path(
    f: Callable[..., Any], tree: Any, *rest: Any, is_leaf: Callable[[Any], bool] | None = None
) -> Any:
    """Like :func:`tree_map`, but ``f`` gets each leaf's key path first.

    Example:
        >>> import treeclass as tc
        >>> tc.tree_map_with_path(lambda p, x: tc.keystr(p), {"a": 1, "b": (2,)})
        {'a': "['a']", 'b': ("['b'][0]",)}
    """
    pairs, spec = tree_flatten_with_path(tree, is_leaf)
    others = [_leaves_like(spec, r) for r in rest]
    return spec.unflatten(map(f, [p for p, _ in pairs], [x for _, x in pairs], *others))


# --- TreeSpec --------------------------------------------------------------------------------


#: What hashes a TreeSpec's static values (for :func:`~treeclass._errors.unhashable_static`).
_SPEC_HASHES: Final = "a TreeSpec's hash (as a cache key, in a set) covers its static values"


def _unhashable(entries: Sequence[Any], e: TypeError) -> UnhashableStaticError:
    """The error of a spec whose entries do not hash: naming the class and static field."""
    for entry in entries:
        if entry is None:
            continue
        node, aux = entry[0], entry[1]
        fields = node.static_fields
        if aux.__class__ is tuple and len(aux) == len(fields):
            for field, value in zip(fields, aux):
                try:
                    hash(value)
                except TypeError:
                    return unhashable_static(node.qualname, field, value, _SPEC_HASHES)
    return UnhashableStaticError(
        f"this TreeSpec holds an unhashable static value ({e}); static values must be "
        "hashable (a tuple, not a list)."
    )


class TreeSpec:
    """The structure of a tree: what :func:`tree_flatten` returns besides the leaves.

    Immutable, hashable and comparable (two specs are equal when their trees have the same
    node types, auxdata and shape). Pickles by registered name, and serializes to JSON with
    :func:`treeclass.treespec_dumps`.

    Example:
        >>> import treeclass as tc
        >>> spec = tc.tree_structure({"a": [1, 2], "b": None})
        >>> spec
        TreeSpec({'a': [*, *], 'b': None})
        >>> spec.num_leaves, spec.num_nodes
        (2, 5)
        >>> spec.unflatten([3, 4])
        {'a': [3, 4], 'b': None}
    """

    __slots__ = ("_entries", "_hash", "_num_leaves")
    __module__ = "treeclass"

    _entries: tuple[Any, ...]
    _num_leaves: int
    _hash: int | None

    def __init__(self) -> None:
        raise TreeclassTypeError(
            "TreeSpec cannot be built directly; get one from tree_flatten(), "
            "tree_structure() or treespec_loads()."
        )

    @classmethod
    def _make(cls, entries: tuple[Any, ...], num_leaves: int) -> TreeSpec:
        self = object.__new__(cls)
        object.__setattr__(self, "_entries", entries)
        object.__setattr__(self, "_num_leaves", num_leaves)
        object.__setattr__(self, "_hash", None)
        return self

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("TreeSpec is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("TreeSpec is immutable")

    @property
    def num_leaves(self) -> int:
        """The number of leaves."""
        return self._num_leaves

    @property
    def num_nodes(self) -> int:
        """The number of nodes, leaves included (as in JAX)."""
        return sum(1 + e[2] if e is not None and e[3] else 1 for e in self._entries)

    def unflatten(self, leaves: Iterable[Any]) -> Any:
        """Rebuild the tree from ``leaves``.

        Raises:
            StructureMismatchError: the number of leaves is not :attr:`num_leaves`.
        """
        leaf_list: list[Any] = leaves if isinstance(leaves, list) else list(leaves)
        if len(leaf_list) != self._num_leaves:
            raise StructureMismatchError(
                f"this TreeSpec has {self._num_leaves} leaves but {len(leaf_list)} were given: "
                f"{self!r}; pass exactly one value per leaf."
            )
        stack: list[Any] = []
        push = stack.append
        li = len(leaf_list)
        for entry in reversed(self._entries):
            if entry is None:
                li -= 1
                push(leaf_list[li])
                continue
            nt, aux, k, leafy = entry
            if leafy:
                start = li - k
                push(nt.unflatten(aux, leaf_list[start:li]))
                li = start
            elif k:
                children = stack[-k:]
                del stack[-k:]
                children.reverse()
                push(nt.unflatten(aux, children))
            else:
                push(nt.unflatten(aux, []))
        return stack[0]

    def flatten_up_to(self, tree: Any) -> list[Any]:
        """Flatten ``tree`` down to this spec's leaves (a leaf here may be a subtree there).

        Raises:
            StructureMismatchError: ``tree`` does not have this spec as a prefix.
        """
        out: list[Any] = []
        stack = [tree]  # in pre-order, each entry takes one subtree off the stack
        for e in self._entries:
            node = stack.pop()
            if e is None:
                out.append(node)
                continue
            nt, aux, k, leafy = e
            if type(node) is not nt.type:
                raise StructureMismatchError(
                    f"expected a {nt.type.__qualname__} node here but got "
                    f"{type(node).__qualname__}: {brief(node, 200)}"
                )
            children, other_aux = nt.flatten(node)
            if other_aux != aux or len(children) != k:
                raise StructureMismatchError(
                    f"{nt.type.__qualname__} node does not match: expected auxdata "
                    f"{brief(aux, 200)} with {k} children, got {brief(other_aux, 200)} with "
                    f"{len(children)}."
                )
            if leafy:
                out += children
            else:
                stack += reversed(children)
        return out

    def children(self) -> list[TreeSpec]:
        """The specs of the root's children."""
        root = self._entries[0]
        if root is None:
            return []
        _, _, k, leafy = root
        if leafy:
            return [_LEAF_SPEC] * k
        out: list[TreeSpec] = []
        start = end = 1
        for _ in range(k):
            todo = 1  # entries still to pass over to the end of this child's subtree
            while todo:
                e = self._entries[end]
                end += 1
                todo += e[2] - 1 if e is not None and not e[3] else -1
            sub = self._entries[start:end]
            leaves = sum(1 if e is None else e[2] if e[3] else 0 for e in sub)
            out.append(TreeSpec._make(sub, leaves))
            start = end
        return out

    @property
    def node_type(self) -> type | None:
        """The type of the root node, or ``None`` if the tree is a single leaf."""
        root = self._entries[0]
        return None if root is None else root[0].type

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TreeSpec):
            return NotImplemented
        return self is other or self._entries == other._entries

    def __hash__(self) -> int:
        h = self._hash
        if h is None:
            try:
                h = hash(self._entries)
            except TypeError as e:
                raise _unhashable(self._entries, e) from None
            object.__setattr__(self, "_hash", h)
        return h

    def __repr__(self) -> str:
        def show(e: tuple[NodeType, Any, int, bool], parts: list[str]) -> str:
            text = e[0].show(e[1], parts)
            if len(text) > _MAX_REPR:
                raise _TooLarge
            return text

        try:  # (iterative: any depth)
            return f"TreeSpec({_fold(self._entries, '*', show)})"
        except _TooLarge:
            return (
                f"TreeSpec(<{self.num_nodes} nodes, {self.num_leaves} leaves: too large to show>)"
            )

    def __copy__(self) -> TreeSpec:
        return self  # immutable

    def __deepcopy__(self, memo: dict[int, Any]) -> TreeSpec:
        return self  # immutable


_LEAF_SPEC = TreeSpec._make((None,), 1)


def _fold(entries: tuple[Any, ...], leaf: Any, node: Callable[[Any, list[Any]], Any]) -> Any:
    """Fold entries leaves-up, iteratively: a leaf gives ``leaf``, a node ``node(entry, parts)``."""
    done: list[Any] = []  # in reverse pre-order, every node's children are done before it
    for e in reversed(entries):
        if e is None:
            done.append(leaf)
            continue
        k = e[2]
        if e[3]:
            parts = [leaf] * k
        else:
            parts = done[len(done) - k :]
            del done[len(done) - k :]
            parts.reverse()
        done.append(node(e, parts))
    return done[0]


def spec_depth(spec: TreeSpec) -> int:
    """The nodes on the longest root-to-leaf path of ``spec`` (a leaf: 1, ``[1]``: 2).

    :func:`_fold` specialised: it runs on every ``treespec_loads(to="jax")``, where a callback
    per node cost a third of the load.
    """
    depths: list[int] = []
    for e in reversed(spec._entries):  # reverse pre-order: children come before their node
        if e is None:
            depths.append(1)
            continue
        k = e[2]
        if e[3] or not k:
            depths.append(2 if k else 1)
            continue
        deepest = max(depths[len(depths) - k :])
        del depths[len(depths) - k :]
        depths.append(deepest + 1)
    return depths[0]


#: Longest readable form of a spec; a longer one is summarized (repr would be quadratic in a
#: spec's depth, as every node's text holds its children's).
_MAX_REPR = 50_000


class _TooLarge(Exception):
    """A spec's readable form is longer than ``_MAX_REPR``."""
