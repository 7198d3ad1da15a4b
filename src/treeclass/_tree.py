"""The embedded pytree registry: flatten, unflatten, key paths and :class:`TreeSpec`.

Works with no framework installed. Node types:

- built-in containers: ``tuple``, ``list``, ``dict``, ``collections.OrderedDict``,
  ``collections.defaultdict``, every namedtuple class, and ``None`` (a node with no children);
- every class registered with treeclass (exact type match: a subclass of a registered class is
  a leaf until it is registered itself).

Dict key order: a ``dict`` (and ``defaultdict``) is flattened in **sorted key order**, as JAX
and optree do, so two dicts with the same items give the same spec whatever order they were
built in; keys that cannot be sorted against each other keep their insertion order. An
``OrderedDict`` keeps its insertion order (as in every framework). Unflatten builds dicts in the
spec's key order.

A :class:`TreeSpec` stores the tree as a flat, pre-order tuple of entries, so comparing and
hashing specs is done by the tuple machinery in C, and unflatten is one loop with no recursion.
An entry is ``None`` for a leaf or ``(node_type, aux, arity, leafy)``; ``leafy`` says that all
``arity`` children are leaves, which then have no entries of their own.
"""

from __future__ import annotations

from collections import OrderedDict, defaultdict

from ._errors import (
    StructureMismatchError,
    TreeclassError,
    TreeclassTypeError,
    UnhashableStaticError,
)
from ._fields import is_namedtuple_class
from ._keys import DictKey, GetAttrKey, KeyEntry, KeyPath, SequenceKey

TYPE_CHECKING = False  # typing costs ~10 ms to import; checkers treat this as True
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence
    from typing import Any, Final

__all__ = [
    "NodeType",
    "TreeSpec",
    "add_node_type",
    "node_type_for",
    "remove_node_type",
    "tree_flatten",
    "tree_flatten_with_path",
    "tree_leaves",
    "tree_leaves_with_path",
    "tree_map",
    "tree_map_with_path",
    "tree_structure",
    "tree_unflatten",
]

if TYPE_CHECKING:
    Aux = Any


class NodeType:
    """How the embedded registry takes one type of node apart and puts it back together."""

    __slots__ = ("flatten", "flatten_into", "flatten_with_keys", "name", "type", "unflatten")

    def __init__(
        self,
        type_: type,
        flatten: Callable[[Any], tuple[Sequence[Any], Aux]],
        unflatten: Callable[[Aux, list[Any]], Any],
        flatten_with_keys: Callable[[Any], tuple[Iterable[tuple[KeyEntry, Any]], Aux]],
        name: str | None,
        flatten_into: Callable[[Any, list[Any], list[Any]], bool] | None = None,
    ) -> None:
        self.type = type_
        #: Optional fast path (generated for registered classes): flatten straight into the
        #: leaf and entry lists when every child is a known leaf; ``False`` if it did not.
        self.flatten_into = flatten_into
        self.flatten = flatten
        self.unflatten = unflatten
        self.flatten_with_keys = flatten_with_keys
        self.name = name

    def __repr__(self) -> str:
        return f"<treeclass node type {self.type.__qualname__}>"

    def __reduce__(self) -> Any:
        # Specs pickle by name (see treeclass._pickling); a NodeType is never pickled alone.
        raise TreeclassTypeError(
            f"a treeclass NodeType ({self.type.__qualname__}) cannot be pickled by itself; "
            "pickle the TreeSpec that holds it."
        )


# --- built-in node types -------------------------------------------------------------------


def _tuple_flatten(t: tuple[Any, ...]) -> tuple[tuple[Any, ...], None]:
    return t, None


def _tuple_unflatten(aux: None, children: list[Any]) -> tuple[Any, ...]:
    return tuple(children)


def _tuple_flatten_keys(t: tuple[Any, ...]) -> tuple[list[tuple[KeyEntry, Any]], None]:
    return [(SequenceKey(i), c) for i, c in enumerate(t)], None


def _list_flatten(t: list[Any]) -> tuple[list[Any], None]:
    return t, None


def _list_unflatten(aux: None, children: list[Any]) -> list[Any]:
    return list(children)


def _sorted_keys(d: dict[Any, Any]) -> tuple[Any, ...]:
    try:
        return tuple(sorted(d))
    except TypeError:
        return tuple(d)


def _dict_flatten(d: dict[Any, Any]) -> tuple[list[Any], tuple[Any, ...]]:
    keys = _sorted_keys(d)
    return [d[k] for k in keys], keys


def _dict_unflatten(aux: tuple[Any, ...], children: list[Any]) -> dict[Any, Any]:
    return dict(zip(aux, children))


def _dict_flatten_keys(d: dict[Any, Any]) -> tuple[list[tuple[KeyEntry, Any]], tuple[Any, ...]]:
    keys = _sorted_keys(d)
    return [(DictKey(k), d[k]) for k in keys], keys


def _odict_flatten(d: OrderedDict[Any, Any]) -> tuple[list[Any], tuple[Any, ...]]:
    return list(d.values()), tuple(d)


def _odict_unflatten(aux: tuple[Any, ...], children: list[Any]) -> OrderedDict[Any, Any]:
    return OrderedDict(zip(aux, children))


def _odict_flatten_keys(
    d: OrderedDict[Any, Any],
) -> tuple[list[tuple[KeyEntry, Any]], tuple[Any, ...]]:
    return [(DictKey(k), v) for k, v in d.items()], tuple(d)


def _ddict_flatten(d: defaultdict[Any, Any]) -> tuple[list[Any], tuple[Any, tuple[Any, ...]]]:
    keys = _sorted_keys(d)
    return [d[k] for k in keys], (d.default_factory, keys)


def _ddict_unflatten(
    aux: tuple[Any, tuple[Any, ...]], children: list[Any]
) -> defaultdict[Any, Any]:
    return defaultdict(aux[0], zip(aux[1], children))


def _ddict_flatten_keys(
    d: defaultdict[Any, Any],
) -> tuple[list[tuple[KeyEntry, Any]], tuple[Any, tuple[Any, ...]]]:
    keys = _sorted_keys(d)
    return [(DictKey(k), d[k]) for k in keys], (d.default_factory, keys)


def _none_flatten(_: None) -> tuple[tuple[()], None]:
    return (), None


def _none_unflatten(aux: None, children: list[Any]) -> None:
    return None


def _namedtuple_node_type(cls: type, name: str | None) -> NodeType:
    new: Callable[[type, Iterable[Any]], Any] = getattr(tuple, "__new__")  # noqa: B009
    fields: tuple[str, ...] = getattr(cls, "_fields")  # noqa: B009 (not declared on type)
    keys = tuple(GetAttrKey(f) for f in fields)

    def unflatten(aux: None, children: list[Any]) -> Any:
        return new(cls, children)

    def flatten_with_keys(t: tuple[Any, ...]) -> tuple[tuple[tuple[KeyEntry, Any], ...], None]:
        return tuple(zip(keys, t)), None

    unflatten.__qualname__ = f"{cls.__qualname__}.<treeclass unflatten>"
    return NodeType(cls, _tuple_flatten, unflatten, flatten_with_keys, name)


# Fixed names of the built-in node types in serialized treespecs.
BUILTIN_NAMES: Final[dict[type, str]] = {
    tuple: "tuple",
    list: "list",
    dict: "dict",
    OrderedDict: "collections.OrderedDict",
    defaultdict: "collections.defaultdict",
    type(None): "None",
}

_NODE_TYPES: dict[type, NodeType] = {
    tuple: NodeType(tuple, _tuple_flatten, _tuple_unflatten, _tuple_flatten_keys, "tuple"),
    list: NodeType(list, _list_flatten, _list_unflatten, _tuple_flatten_keys, "list"),
    dict: NodeType(dict, _dict_flatten, _dict_unflatten, _dict_flatten_keys, "dict"),
    OrderedDict: NodeType(
        OrderedDict,
        _odict_flatten,
        _odict_unflatten,
        _odict_flatten_keys,
        "collections.OrderedDict",
    ),
    defaultdict: NodeType(
        defaultdict,
        _ddict_flatten,
        _ddict_unflatten,
        _ddict_flatten_keys,
        "collections.defaultdict",
    ),
    type(None): NodeType(type(None), _none_flatten, _none_unflatten, _none_flatten, "None"),
}
BUILTIN_NODE_TYPES: Final[dict[str, NodeType]] = {nt.name: nt for nt in _NODE_TYPES.values()}  # type: ignore[misc]

# Types seen to be leaves. Filled as trees are flattened, emptied of a type when it becomes a
# node. Lets the common case (a node whose children are all leaves) be checked in C.
_LEAF_TYPES: set[type] = set()

_get_node_type = _NODE_TYPES.get


def add_node_type(node_type: NodeType) -> None:
    """Make ``node_type.type`` a node of the embedded registry (replacing any earlier one)."""
    _NODE_TYPES[node_type.type] = node_type
    _LEAF_TYPES.discard(node_type.type)


def remove_node_type(cls: type) -> None:
    """Forget the node type of ``cls`` (used to roll back a failed registration)."""
    if cls not in BUILTIN_NAMES:
        _NODE_TYPES.pop(cls, None)
    _LEAF_TYPES.discard(cls)


def node_type_for(cls: type) -> NodeType | None:
    """The node type of ``cls``, or ``None`` if ``cls`` is a leaf type."""
    nt = _get_node_type(cls)
    if nt is None and cls not in _LEAF_TYPES:
        nt = _classify(cls)
    return nt


def _classify(cls: type) -> NodeType | None:
    """First sight of ``cls``: a namedtuple becomes a node type, anything else a leaf type."""
    if is_namedtuple_class(cls):
        from ._registry import name_of

        nt = _namedtuple_node_type(cls, name_of(cls))
        _NODE_TYPES[cls] = nt
        return nt
    _LEAF_TYPES.add(cls)
    return None


# --- flatten ---------------------------------------------------------------------------------


def _flatten(node: object, leaves: list[Any], entries: list[Any]) -> None:
    nt = _get_node_type(type(node))
    if nt is None:
        nt = node_type_for(type(node))
        if nt is None:
            leaves.append(node)
            entries.append(None)
            return
    fast = nt.flatten_into
    if fast is None or not fast(node, leaves, entries):
        _flatten_node(nt, node, leaves, entries)


def _flatten_node(nt: NodeType, node: object, leaves: list[Any], entries: list[Any]) -> None:
    """Flatten a node of type ``nt`` the general way (its fast path, if any, said no)."""
    children, aux = nt.flatten(node)
    k = len(children)
    if _LEAF_TYPES.issuperset(map(type, children)):
        leaves.extend(children)
        entries.append((nt, aux, k, True))
        return
    at = len(entries)
    entries.append(None)
    all_leaves = True
    leaf_types = _LEAF_TYPES
    get = _get_node_type
    child: object
    for child in children:
        t = type(child)
        if t in leaf_types:
            leaves.append(child)
            entries.append(None)
            continue
        cnt = get(t)
        if cnt is not None:
            # A known node type: try its fast path inline (the common case, a dataclass of
            # arrays in a list, then costs no call of ours) and recurse only if it says no.
            fast = cnt.flatten_into
            if fast is None or not fast(child, leaves, entries):
                _flatten_node(cnt, child, leaves, entries)
            all_leaves = False
            continue
        before = len(entries)
        _flatten(child, leaves, entries)  # a type seen for the first time
        if all_leaves and (len(entries) != before + 1 or entries[before] is not None):
            all_leaves = False
    if all_leaves:
        del entries[at + 1 :]
    entries[at] = (nt, aux, k, all_leaves)


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
            _flatten(tree, leaves, entries)
        else:
            _flatten_is_leaf(tree, is_leaf, leaves, entries)
    except RecursionError:
        # Deeper than the interpreter's recursion limit: walk it again without recursion.
        pairs, spec = _flatten_iteratively(tree, is_leaf)
        return [leaf for _, leaf in pairs], spec
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
        return _flatten_iteratively(tree, is_leaf)
    return out, TreeSpec._make(tuple(entries), len(out))


def _flatten_iteratively(
    tree: Any, is_leaf: Callable[[Any], bool] | None
) -> tuple[list[tuple[KeyPath, Any]], TreeSpec]:
    """Flatten with paths and an explicit stack: for trees deeper than the recursion limit.

    Gives exactly the entries of the recursive walk (a node whose children all turned out to
    be leaves is stored leafy).
    """
    out: list[tuple[KeyPath, Any]] = []
    entries: list[Any] = []
    # Items: ("visit", node, path) or ("done", entry index, node type, aux, arity).
    stack: list[tuple[Any, ...]] = [("visit", tree, ())]
    while stack:
        item = stack.pop()
        if item[0] == "done":
            _, at, nt, aux, k = item
            below = entries[at + 1 :]
            leafy = len(below) == k and all(e is None for e in below)
            if leafy:
                del entries[at + 1 :]
            entries[at] = (nt, aux, k, leafy)
            continue
        node: object = item[1]
        path: KeyPath = item[2]
        nt = None if is_leaf is not None and is_leaf(node) else node_type_for(type(node))
        if nt is None:
            out.append((path, node))
            entries.append(None)
            continue
        keyed, aux = nt.flatten_with_keys(node)
        keyed = list(keyed)
        entries.append(None)
        stack.append(("done", len(entries) - 1, nt, aux, len(keyed)))
        for key, child in reversed(keyed):
            stack.append(("visit", child, (*path, key)))
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


def _tree_map(
    f: Callable[..., Any],
    tree: Any,
    *rest: Any,
    is_leaf: Callable[[Any], bool] | None = None,
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


def _tree_map_with_path(
    f: Callable[..., Any],
    tree: Any,
    *rest: Any,
    is_leaf: Callable[[Any], bool] | None = None,
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


if TYPE_CHECKING:
    from typing import overload

    # Overloads for one and two trees let checkers infer a lambda's parameter types
    # (``Callable[..., Any]`` alone leaves them unknown under strict pyright).
    @overload
    def tree_map(
        f: Callable[[Any], Any], tree: Any, /, *, is_leaf: Callable[[Any], bool] | None = None
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
        f: Callable[..., Any],
        tree: Any,
        *rest: Any,
        is_leaf: Callable[[Any], bool] | None = None,
    ) -> Any: ...
    def tree_map(
        f: Callable[..., Any],
        tree: Any,
        *rest: Any,
        is_leaf: Callable[[Any], bool] | None = None,
    ) -> Any:
        """Typed signature of :func:`_tree_map`."""
        raise NotImplementedError

    @overload
    def tree_map_with_path(
        f: Callable[[KeyPath, Any], Any],
        tree: Any,
        /,
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
        f: Callable[..., Any],
        tree: Any,
        *rest: Any,
        is_leaf: Callable[[Any], bool] | None = None,
    ) -> Any: ...
    def tree_map_with_path(
        f: Callable[..., Any],
        tree: Any,
        *rest: Any,
        is_leaf: Callable[[Any], bool] | None = None,
    ) -> Any:
        """Typed signature of :func:`_tree_map_with_path`."""
        raise NotImplementedError

else:
    tree_map = _tree_map
    tree_map.__name__ = tree_map.__qualname__ = "tree_map"
    tree_map_with_path = _tree_map_with_path
    tree_map_with_path.__name__ = tree_map_with_path.__qualname__ = "tree_map_with_path"


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
        try:
            return f"TreeSpec({_repr_entries(self._entries)})"
        except RecursionError:
            return (
                f"TreeSpec(<{self.num_nodes} nodes, {self._num_leaves} leaves: too deep to show>)"
            )

    def __copy__(self) -> TreeSpec:
        return self  # immutable

    def __deepcopy__(self, memo: dict[int, Any]) -> TreeSpec:
        return self  # immutable

    def __reduce__(self) -> Any:
        from ._pickling import reduce_treespec

        return reduce_treespec(self)


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
                f"{type(node).__qualname__}: {node!r}"
            )
        children, other_aux = nt.flatten(node)
        children = list(children)
        if other_aux != aux or len(children) != k:
            raise StructureMismatchError(
                f"{nt.type.__qualname__} node does not match: expected auxdata {aux!r} with "
                f"{k} children, got {other_aux!r} with {len(children)}."
            )
        if leafy:
            out.extend(children)
        else:
            children.reverse()
            stack.extend(children)
    assert pos == len(entries)


def _repr_entries(entries: tuple[Any, ...]) -> str:
    text, _ = _repr_at(entries, 0)
    return text


def _repr_node(nt: NodeType, aux: Any, parts: list[str]) -> str:
    t = nt.type
    if t is tuple:
        return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"
    if t is list:
        return "[" + ", ".join(parts) + "]"
    if t is type(None):
        return "None"
    if t in (dict, OrderedDict):
        inner = ", ".join(f"{k!r}: {p}" for k, p in zip(aux, parts))
        return "{" + inner + "}" if t is dict else f"OrderedDict({{{inner}}})"
    if t is defaultdict:
        inner = ", ".join(f"{k!r}: {p}" for k, p in zip(aux[1], parts))
        return f"defaultdict({aux[0]!r}, {{{inner}}})"
    from ._registry import describe_node

    return describe_node(t, aux, parts)


def _repr_at(entries: tuple[Any, ...], pos: int) -> tuple[str, int]:
    e = entries[pos]
    pos += 1
    if e is None:
        return "*", pos
    nt, aux, k, leafy = e
    parts: list[str]
    if leafy:
        parts = ["*"] * k
    else:
        parts = []
        for _ in range(k):
            text, pos = _repr_at(entries, pos)
            parts.append(text)
    return _repr_node(nt, aux, parts), pos
