"""The embedded registry's walkers (flatten, unflatten, key paths, map) and :class:`TreeSpec`.

Works with no framework installed; node types come from :mod:`treeclass._core.registry` (exact type
match: a subclass of a registered class is a leaf until it is registered itself). A ``dict`` is
flattened in sorted key order, as JAX and optree do; an ``OrderedDict`` keeps its order.

A :class:`TreeSpec` stores the tree as a flat, pre-order tuple of entries, so comparing and
hashing specs is done by the tuple machinery in C, and unflatten is one loop with no recursion.
An entry is ``None`` for a leaf or ``(node_type, aux, arity, leafy)``; ``leafy`` says that all
``arity`` children are leaves, which then have no entries of their own. ``tree_flatten``
recurses a bounded number of levels and walks deeper subtrees with an explicit stack, keeping
its work (no cliff in time at the recursion limit); the other walkers start over with a stack
when they hit the limit. Either way, time is linear in the tree's size.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from sys import getrecursionlimit
from typing import Any, Final, overload

from .._errors import (
    StructureMismatchError,
    TreeclassError,
    TreeclassTypeError,
    UnhashableStaticError,
    brief,
)
from .codegen import INDENT, compile_function, tuple_display
from .keys import KeyPath
from .nodes import LEAF_TYPES, NodeType, set_mixed_loop
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


def _flatten(node: object, leaves: list[Any], entries: list[Any], depth: int) -> None:
    """Flatten ``node`` into the lists, recursing at most ``depth`` levels (then a stack)."""
    nt = get_node_type(type(node))
    if nt is None:
        nt = node_type_for(type(node))
        if nt is None:
            leaves.append(node)
            entries.append(None)
            return
    fast = nt.flatten_into
    if fast is None:
        _flatten_node(nt, node, leaves, entries, depth)
    else:
        fast(node, leaves, entries, depth)


def _flatten_node(
    nt: NodeType, node: object, leaves: list[Any], entries: list[Any], depth: int
) -> None:
    """Flatten a node of type ``nt`` that has no fast path."""
    children, aux = nt.flatten(node)
    if LEAF_TYPES.issuperset(map(type, children)):
        leaves.extend(children)
        entries.append((nt, aux, len(children), True))
        return
    _flatten_mixed(nt, children, aux, leaves, entries, depth, 0)


#: Runs of leaf entries, by length (the leaves a fast path found before a node child).
_NONES: Final = tuple((None,) * n for n in range(33))


def _flatten_mixed(
    nt: NodeType,
    children: Sequence[Any],
    aux: Any,
    leaves: list[Any],
    entries: list[Any],
    depth: int,
    j: int,
) -> None:
    """Flatten a node of type ``nt`` from its ``children`` and ``aux``: the walker's loop.

    ``children[:j]`` are known to be leaves (a fast path checked them) and are added at once.
    A later child of a type known to be a leaf costs two appends; a known node type's fast
    path is called with the depth left, and walks its own node children. Children ``depth``
    levels down are walked with an explicit stack (:func:`_flatten_stack`), so a deep tree
    keeps what was done so far instead of starting over at the recursion limit. After
    ``_SHAPE_AFTER`` mixed nodes of a class, its fast path is shaped to them
    (:func:`_shape_fast_path`).
    """
    child: object = children[j]  # not of a type known to be a leaf: most often a node
    cnt = get_node_type(type(child))
    if cnt is None or not depth:
        _flatten_general(nt, children, aux, leaves, entries, depth, j)
        return
    # A node child: this node is not leafy, its entry is known now.
    k = len(children)
    entries.append((nt, aux, k, False))
    if j:
        leaves += children[:j]
        entries += _NONES[j] if j < 33 else (None,) * j
    depth -= 1
    fast = cnt.flatten_into
    if fast is None:
        _flatten_node(cnt, child, leaves, entries, depth)
    else:
        fast(child, leaves, entries, depth)
    if j + 1 < k:
        get = get_node_type
        leaf_types = LEAF_TYPES
        # The fast path of the last node type seen: siblings are often of one type.
        last: type | None = None if fast is None else type(child)
        last_fast = _no_fast if fast is None else fast
        for child in children[j + 1 :]:
            t = type(child)
            if t is last:
                last_fast(child, leaves, entries, depth)
                continue
            cnt = get(t)
            if cnt is not None:
                fast = cnt.flatten_into
                if fast is None:
                    _flatten_node(cnt, child, leaves, entries, depth)
                else:
                    fast(child, leaves, entries, depth)
                    last = t
                    last_fast = fast
            elif t in leaf_types:
                leaves.append(child)
                entries.append(None)
            else:
                _flatten(child, leaves, entries, depth)  # a type seen for the first time
    seen = nt.mixed_seen
    if seen >= 0:
        if seen + 1 < _SHAPE_AFTER:
            nt.mixed_seen = seen + 1
        else:
            _shape_fast_path(nt, children)


set_mixed_loop(_flatten_mixed)

#: How many mixed nodes of a class the walker sees before shaping its fast path to them.
_SHAPE_AFTER: Final = 8


def _shape_fast_path(nt: NodeType, children: Sequence[Any]) -> None:
    """Give ``nt`` a fast path shaped to a mixed node whose ``children`` were just walked.

    A class's nodes mostly hold the same kinds of values in the same fields (arrays here,
    a nested module there): for those, the shaped fast path checks the leaf fields' types,
    looks up the node fields' fast paths, and adds everything in field order -- the entries
    and leaves the walker's loop would add, without the loop. Any other node (a leaf where
    a node was, a node type without a fast path, the depth limit) goes to the class's own
    fast path. Compiled once per class, the first time ``_SHAPE_AFTER`` mixed nodes of it
    were walked (never at declaration); not done for built-in containers and namedtuples,
    or when a child is a node without a fast path.
    """
    nt.mixed_seen = -1
    info = nt.info
    generic = nt.flatten_into
    if info is None or nt.generated is None or generic is None:
        return
    if "_generic" in generic.__globals__:  # another thread shaped it meanwhile: not twice
        return
    fields = info.data_fields
    if len(children) != len(fields):  # pragma: no cover - a class's fast path gives them all
        return
    leafy: list[bool] = []
    child: object
    for child in children:
        t = type(child)
        if t in LEAF_TYPES:
            leafy.append(True)
            continue
        cnt = get_node_type(t)
        if cnt is None or cnt.flatten_into is None:
            return
        leafy.append(False)
    source = _shaped_source(fields, info.static_fields, leafy)
    namespace: dict[str, Any] = {
        "_cls": nt.type,
        "_nt": nt,
        "_type": type,
        "_leaf_types": LEAF_TYPES,
        "_get": get_node_type,
        "_generic": generic,
    }
    nt.flatten_into = compile_function(
        nt.type, "flatten_into shaped", source, namespace, "flatten_into"
    )


def _shaped_source(fields: Sequence[str], statics: Sequence[str], leafy: list[bool]) -> str:
    """The source of a fast path shaped to nodes whose field ``i`` is a leaf iff ``leafy[i]``."""
    i1, i2, i4 = INDENT, INDENT * 2, INDENT * 4
    nodes = [i for i, is_leaf in enumerate(leafy) if not is_leaf]
    lines = ["def flatten_into(obj, leaves, entries, depth):"]
    lines += [f"{i1}v{i} = obj.{name}" for i, name in enumerate(fields)]
    checks = [f"_type(v{i}) in _leaf_types" for i, is_leaf in enumerate(leafy) if is_leaf]
    lines.append(f"{i1}if {' and '.join(['depth > 0', *checks])}:")
    lines += [f"{i2}n{i} = _get(_type(v{i}))" for i in nodes]
    lines.append(f"{i2}if {' and '.join(f'n{i} is not None' for i in nodes)}:")
    lines += [f"{i2}{INDENT}f{i} = n{i}.flatten_into" for i in nodes]
    lines.append(f"{i2}{INDENT}if {' and '.join(f'f{i} is not None' for i in nodes)}:")
    aux = tuple_display([f"obj.{name}" for name in statics])
    lines.append(f"{i4}entries.append((_nt, {aux}, {len(leafy)}, False))")
    lines.append(f"{i4}depth -= 1")
    run: list[str] = []
    for i, is_leaf in enumerate([*leafy, False]):
        if is_leaf:
            run.append(f"v{i}")
            continue
        if run:
            lines.append(f"{i4}leaves += {tuple_display(run)}")
            lines.append(f"{i4}entries += {tuple_display(['None'] * len(run))}")
            run = []
        if i < len(leafy):
            lines.append(f"{i4}f{i}(v{i}, leaves, entries, depth)")
    lines.append(f"{i4}return None")
    lines.append(f"{i1}return _generic(obj, leaves, entries, depth)")
    return "\n".join(lines) + "\n"


def _no_fast(
    obj: object, leaves: list[Any], entries: list[Any], depth: int
) -> None:  # pragma: no cover - never called
    raise AssertionError("no fast path")


def _flatten_general(
    nt: NodeType,
    children: Sequence[Any],
    aux: Any,
    leaves: list[Any],
    entries: list[Any],
    depth: int,
    j: int,
) -> None:
    """:func:`_flatten_mixed` when ``children[j]`` is of a type not seen yet or at the depth limit.

    Such a child may turn out to be a leaf, and so the node leafy.
    """
    at = len(entries)
    entries.append(None)
    if j:
        leaves += children[:j]
        entries += _NONES[j] if j < 33 else (None,) * j
    all_leaves = True
    deeper = depth - 1
    get = get_node_type
    leaf_types = LEAF_TYPES
    child: object
    for child in children[j:]:
        t = type(child)
        if t in leaf_types:
            leaves.append(child)
            entries.append(None)
            continue
        cnt = get(t)
        if cnt is not None and deeper >= 0:
            all_leaves = False
            fast = cnt.flatten_into
            if fast is None:
                _flatten_node(cnt, child, leaves, entries, deeper)
            else:
                fast(child, leaves, entries, deeper)
            continue
        if not _flatten_new(child, leaves, entries, deeper):
            all_leaves = False
    if all_leaves:
        del entries[at + 1 :]
    entries[at] = (nt, aux, len(children), all_leaves)


def _flatten_new(child: object, leaves: list[Any], entries: list[Any], depth: int) -> bool:
    """Flatten a child of a type not known to be a leaf (or a node at the depth limit).

    Returns whether it was a leaf.
    """
    before = len(entries)
    if depth >= 0:
        _flatten(child, leaves, entries, depth)  # a type seen for the first time
    else:
        _flatten_stack(child, None, leaves, entries)
    return len(entries) == before + 1 and entries[before] is None


def _flatten_is_leaf(
    node: object, is_leaf: Callable[[Any], bool], leaves: list[Any], entries: list[Any]
) -> None:
    nt = None if is_leaf(node) else node_type_for(type(node))
    if nt is None:
        leaves.append(node)
        entries.append(None)
        return
    children, aux = nt.flatten(node)
    at = len(entries)
    entries.append(None)
    n = 0
    all_leaves = True
    for child in children:
        n += 1
        before = len(entries)
        _flatten_is_leaf(child, is_leaf, leaves, entries)
        if all_leaves and (len(entries) != before + 1 or entries[before] is not None):
            all_leaves = False
    if all_leaves:
        del entries[at + 1 :]
    entries[at] = (nt, aux, n, all_leaves)


def _flatten_stack(
    tree: Any, is_leaf: Callable[[Any], bool] | None, leaves: list[Any], entries: list[Any]
) -> None:
    """Flatten ``tree`` into the lists with an explicit stack: for trees of any depth.

    Gives exactly the entries of the recursive walk (a node whose children all turned out to
    be leaves is stored leafy), in time and memory linear in the tree's size.
    """
    # Items: a subtree to visit, or _MARK over a finished node's (entry index, node type, aux,
    # arity).
    stack: list[Any] = [tree]
    mark = _MARK
    leaf_types = LEAF_TYPES
    get = get_node_type
    while stack:
        item = stack.pop()
        if item is mark:
            _finish(entries, stack.pop())
            continue
        cls: type = item.__class__
        if is_leaf is None:
            if cls in leaf_types:
                leaves.append(item)
                entries.append(None)
                continue
            nt = get(cls)
            if nt is None:
                nt = node_type_for(cls)
        else:
            nt = None if is_leaf(item) else node_type_for(cls)
        if nt is None:
            leaves.append(item)
            entries.append(None)
            continue
        children, aux = nt.flatten(item)
        if is_leaf is None and leaf_types.issuperset(map(type, children)):
            leaves.extend(children)
            entries.append((nt, aux, len(children), True))
            continue
        entries.append(None)
        stack.append((len(entries) - 1, nt, aux, len(children)))
        stack.append(mark)
        stack.extend(reversed(children))


def _flatten_iterative(
    tree: Any, is_leaf: Callable[[Any], bool] | None
) -> tuple[list[Any], TreeSpec]:
    """Flatten with an explicit stack only (the recursive walk ran out of stack)."""
    leaves: list[Any] = []
    entries: list[Any] = []
    _flatten_stack(tree, is_leaf, leaves, entries)
    return leaves, TreeSpec._make(tuple(entries), len(leaves))


#: On the explicit stack: the item below it is a node whose children have all been walked.
_MARK: Final = object()


def _finish(entries: list[Any], item: tuple[int, NodeType, Any, int]) -> None:
    """Fill in the entry of a node whose children have all been walked (``_MARK``)."""
    at, nt, aux, k = item
    # Every child added at least one entry; exactly k means each added one, so they are all
    # leaves if those entries are None (scanning k entries per node: linear overall).
    leafy = len(entries) - at - 1 == k and all(e is None for e in entries[at + 1 :])
    if leafy:
        del entries[at + 1 :]
    entries[at] = (nt, aux, k, leafy)


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
    try:
        if is_leaf is None:
            # Recurse at most about half the recursion limit's levels (a level takes one or
            # two frames), then go on with a stack: no cliff in time at the limit.
            _flatten(tree, leaves, entries, getrecursionlimit() // 2 - 50)
        else:
            _flatten_is_leaf(tree, is_leaf, leaves, entries)
    except RecursionError:
        # Deeper than the interpreter's recursion limit: walk it again without recursion.
        return _flatten_iterative(tree, is_leaf)
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


def _unflatten(entries: tuple[Any, ...], leaves: list[Any]) -> Any:
    stack: list[Any] = []
    push = stack.append
    li = len(leaves)
    for entry in reversed(entries):
        if entry is None:
            li -= 1
            push(leaves[li])
            continue
        nt, aux, k, leafy = entry
        if leafy:
            start = li - k
            push(nt.unflatten(aux, leaves[start:li]))
            li = start
        elif k:
            children = stack[-k:]
            del stack[-k:]
            children.reverse()
            push(nt.unflatten(aux, children))
        else:
            push(nt.unflatten(aux, []))
    return stack[0]


# --- paths -----------------------------------------------------------------------------------


def _flatten_with_path(
    node: object,
    path: KeyPath,
    is_leaf: Callable[[Any], bool] | None,
    out: list[tuple[KeyPath, Any]],
    entries: list[Any],
) -> None:
    nt = None if is_leaf is not None and is_leaf(node) else node_type_for(type(node))
    if nt is None:
        out.append((path, node))
        entries.append(None)
        return
    keyed, aux = nt.flatten_with_keys(node)
    at = len(entries)
    entries.append(None)
    n = 0
    all_leaves = True
    for key, child in keyed:
        n += 1
        before = len(entries)
        _flatten_with_path(child, (*path, key), is_leaf, out, entries)
        if all_leaves and (len(entries) != before + 1 or entries[before] is not None):
            all_leaves = False
    if all_leaves:
        del entries[at + 1 :]
    entries[at] = (nt, aux, n, all_leaves)


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
    out: list[tuple[KeyPath, Any]] = []
    entries: list[Any] = []
    try:
        _flatten_with_path(tree, (), is_leaf, out, entries)
    except RecursionError:
        return _flatten_with_path_iterative(tree, is_leaf)
    return out, TreeSpec._make(tuple(entries), len(out))


class _Path:
    """A node's key path, kept as a link to its parent's until a child leaf needs it whole."""

    __slots__ = ("key", "parent", "path")

    def __init__(self, parent: _Path | None, key: Any) -> None:
        self.parent = parent
        self.key = key
        self.path: KeyPath | None = None if parent is not None else ()

    def tuple(self) -> KeyPath:
        """The path as a tuple, built once (from the nearest ancestor that has its own)."""
        path = self.path
        if path is None:
            keys: list[Any] = []
            p: _Path | None = self
            while p is not None and p.path is None:
                keys.append(p.key)
                p = p.parent
            keys.reverse()
            base: KeyPath = () if p is None or p.path is None else p.path
            path = self.path = (*base, *keys)
        return path


def _flatten_with_path_iterative(
    tree: Any, is_leaf: Callable[[Any], bool] | None
) -> tuple[list[tuple[KeyPath, Any]], TreeSpec]:
    """:func:`tree_flatten_with_path` with an explicit stack (deeper than the recursion limit).

    A node's path becomes a tuple only when one of its children is a leaf, so the time is
    linear in the size of the tree plus the size of the paths returned.
    """
    out: list[tuple[KeyPath, Any]] = []
    entries: list[Any] = []
    root = _Path(None, None)
    stack: list[Any] = [(tree, None, None)]
    mark = _MARK
    while stack:
        item = stack.pop()
        if item is mark:
            _finish(entries, stack.pop())
            continue
        node, parent, key = item
        nt = None if is_leaf is not None and is_leaf(node) else node_type_for(node.__class__)
        if nt is None:
            path: KeyPath = () if parent is None else (*parent.tuple(), key)
            out.append((path, node))
            entries.append(None)
            continue
        where = root if parent is None else _Path(parent, key)
        keyed, aux = nt.flatten_with_keys(node)
        keyed = list(keyed)
        entries.append(None)
        stack.append((len(entries) - 1, nt, aux, len(keyed)))
        stack.append(mark)
        for child_key, child in reversed(keyed):
            stack.append((child, where, child_key))
    return out, TreeSpec._make(tuple(entries), len(out))


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


# --- map -------------------------------------------------------------------------------------


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
    if not rest:
        return spec.unflatten(map(f, leaves))
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
    paths = [p for p, _ in pairs]
    leaves = [x for _, x in pairs]
    others = [_leaves_like(spec, r) for r in rest]
    return spec.unflatten(map(f, paths, leaves, *others))


# --- TreeSpec --------------------------------------------------------------------------------


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
        n = 0
        for e in self._entries:
            n += 1
            if e is not None and e[3]:
                n += e[2]
        return n

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
        if not self._entries:
            raise TreeclassError("empty TreeSpec")  # pragma: no cover - never built
        return _unflatten(self._entries, leaf_list)

    def flatten_up_to(self, tree: Any) -> list[Any]:
        """Flatten ``tree`` down to this spec's leaves (a leaf here may be a subtree there).

        Raises:
            StructureMismatchError: ``tree`` does not have this spec as a prefix.
        """
        out: list[Any] = []
        _flatten_up_to(self._entries, tree, out)
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
        pos = 1
        for _ in range(k):
            end = _skip(self._entries, pos)
            sub = self._entries[pos:end]
            out.append(TreeSpec._make(sub, _count_leaves(sub)))
            pos = end
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
                raise UnhashableStaticError(
                    f"this TreeSpec holds an unhashable static value ({e}); static fields must "
                    f"hold hashable values (a tuple, not a list): {self!r}"
                ) from None
            object.__setattr__(self, "_hash", h)
        return h

    def __repr__(self) -> str:
        return f"TreeSpec({_repr_entries(self._entries)})"

    def __copy__(self) -> TreeSpec:
        return self  # immutable

    def __deepcopy__(self, memo: dict[int, Any]) -> TreeSpec:
        return self  # immutable


_LEAF_SPEC = TreeSpec._make((None,), 1)


def _skip(entries: tuple[Any, ...], pos: int) -> int:
    """The position just past the subtree that starts at ``pos`` (no recursion)."""
    todo = 1  # entries still to pass over, counting the subtrees not yet entered
    while todo:
        e = entries[pos]
        pos += 1
        todo -= 1
        if e is not None and not e[3]:
            todo += e[2]
    return pos


def _count_leaves(entries: tuple[Any, ...]) -> int:
    n = 0
    for e in entries:
        if e is None:
            n += 1
        elif e[3]:
            n += e[2]
    return n


def _flatten_up_to(entries: tuple[Any, ...], tree: Any, out: list[Any]) -> None:
    """Append to ``out`` the subtrees of ``tree`` at the leaves of ``entries`` (no recursion)."""
    pos = 0
    stack = [tree]
    while stack:
        node = stack.pop()
        e = entries[pos]
        pos += 1
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
        children = list(children)
        if other_aux != aux or len(children) != k:
            raise StructureMismatchError(
                f"{nt.type.__qualname__} node does not match: expected auxdata {brief(aux, 200)} "
                f"with {k} children, got {brief(other_aux, 200)} with {len(children)}."
            )
        if leafy:
            out.extend(children)
        else:
            children.reverse()
            stack.extend(children)
    assert pos == len(entries)


def spec_depth(spec: TreeSpec) -> int:
    """The number of levels of ``spec``, in linear time at any depth.

    That is the number of nodes on its longest root-to-leaf path, leaves included (a leaf
    alone: 1; ``[1]``: 2).
    """
    depths: list[int] = []
    for e in reversed(spec._entries):  # reverse pre-order: children come before their node
        if e is None:
            depths.append(1)
            continue
        _, _, k, leafy = e
        if leafy or not k:
            depths.append(2 if leafy and k else 1)
            continue
        deepest = max(depths[len(depths) - k :])
        del depths[len(depths) - k :]
        depths.append(deepest + 1)
    return depths[0]


#: Longest readable form of a spec; a longer one is summarized (repr would be quadratic in a
#: spec's depth, as every node's text holds its children's).
_MAX_REPR = 50_000


def _repr_entries(entries: tuple[Any, ...]) -> str:
    """The readable form of a spec's entries (iterative: any depth)."""
    # Walk in reverse pre-order: every node's children are done (on the stack) before it.
    done: list[str] = []
    for e in reversed(entries):
        if e is None:
            done.append("*")
            continue
        nt, aux, k, leafy = e
        if leafy:
            parts = ["*"] * k
        else:
            parts = done[len(done) - k :] if k else []
            del done[len(done) - k :]
            parts.reverse()
        text = nt.show(aux, parts)
        if len(text) > _MAX_REPR:
            nodes = sum(1 + (e[2] if e is not None and e[3] else 0) for e in entries)
            leaves = _count_leaves(entries)
            return f"<{nodes} nodes, {leaves} leaves: too large to show>"
        done.append(text)
    return done[0]
