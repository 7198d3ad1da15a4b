"""The embedded registry: built-in nodes, key paths, tree_map and TreeSpec."""

from __future__ import annotations

import collections
import typing
from collections.abc import Iterator
from typing import Any

import pytest

import treeclass as tc


class Pt(typing.NamedTuple):
    x: Any
    y: Any


def test_builtin_containers_round_trip() -> None:
    tree = (
        [1, 2],
        {"b": 3, "a": (4,)},
        collections.OrderedDict([("z", 5), ("y", 6)]),
        collections.defaultdict(list, {"k": 7}),
        None,
        Pt(8, [9]),
        (),
        [],
        {},
    )
    leaves, spec = tc.tree_flatten(tree)
    assert leaves == [1, 2, 4, 3, 5, 6, 7, 8, 9]
    back = spec.unflatten(leaves)
    assert back == tree
    assert type(back[3]) is collections.defaultdict and back[3].default_factory is list
    assert type(back[2]) is collections.OrderedDict and list(back[2]) == ["z", "y"]
    assert type(back[5]) is Pt
    assert spec.num_leaves == 9


def test_dict_keys_are_sorted_and_rebuilt_in_sorted_order() -> None:
    d1 = {"b": 1, "a": 2}
    d2 = {"a": 2, "b": 1}
    l1, s1 = tc.tree_flatten(d1)
    l2, s2 = tc.tree_flatten(d2)
    assert l1 == l2 == [2, 1]
    assert s1 == s2 and hash(s1) == hash(s2)
    assert list(s1.unflatten(l1)) == ["a", "b"]


def test_unsortable_dict_keys_keep_insertion_order() -> None:
    d = {1: "int", "a": "str"}
    leaves, spec = tc.tree_flatten(d)
    assert leaves == ["int", "str"]
    assert spec.unflatten(leaves) == d


def test_ordered_dict_keeps_insertion_order() -> None:
    a = collections.OrderedDict([("b", 1), ("a", 2)])
    b = collections.OrderedDict([("a", 2), ("b", 1)])
    assert tc.tree_leaves(a) == [1, 2]
    assert tc.tree_structure(a) != tc.tree_structure(b)


def test_none_is_a_node_without_children() -> None:
    leaves, spec = tc.tree_flatten([None, 1])
    assert leaves == [1]
    assert spec.unflatten([2]) == [None, 2]
    assert tc.tree_leaves(None) == []
    assert tc.tree_leaves([None], is_leaf=lambda v: v is None) == [None]


def test_single_leaf_tree() -> None:
    leaves, spec = tc.tree_flatten(3)
    assert leaves == [3]
    assert spec.unflatten([4]) == 4
    assert repr(spec) == "TreeSpec(*)"
    assert spec.num_nodes == 1
    assert spec.node_type is None


def test_is_leaf_stops_descent() -> None:
    tree = {"a": (1, 2), "b": [3, (4, 5)]}
    leaves, spec = tc.tree_flatten(tree, is_leaf=lambda v: isinstance(v, tuple))
    assert leaves == [(1, 2), 3, (4, 5)]
    assert spec.unflatten(["A", "B", "C"]) == {"a": "A", "b": ["B", "C"]}


def test_structure_equality_does_not_depend_on_what_was_seen_before() -> None:
    class Fresh:
        pass

    a = [Fresh(), Fresh()]
    s1 = tc.tree_structure(a)  # first sight of Fresh
    s2 = tc.tree_structure(a)  # Fresh now known to be a leaf type
    assert s1 == s2 and hash(s1) == hash(s2)
    assert s1 == tc.tree_structure([0, 0])


def test_paths_and_keystr() -> None:
    tree = {"k": [Pt(1, 2)], "o": collections.OrderedDict(z=3)}
    pairs, spec = tc.tree_flatten_with_path(tree)
    assert [(tc.keystr(p), v) for p, v in pairs] == [
        ("['k'][0].x", 1),
        ("['k'][0].y", 2),
        ("['o']['z']", 3),
    ]
    assert spec == tc.tree_structure(tree)
    assert pairs[0][0] == (tc.DictKey("k"), tc.SequenceKey(0), tc.GetAttrKey("x"))
    assert tc.keystr(pairs[0][0], simple=True, separator="/") == "k/0/x"
    assert [tc.keystr(p) for p, _ in tc.tree_leaves_with_path((1, (2,)))] == ["[0]", "[1][0]"]


def test_keys_are_immutable_hashable_and_repr() -> None:
    k = tc.GetAttrKey("x")
    with pytest.raises(AttributeError):
        k.name = "y"  # type: ignore[misc]
    assert {k: 1}[tc.GetAttrKey("x")] == 1
    assert repr(tc.DictKey("a")) == "DictKey(key='a')"
    assert tc.SequenceKey(1) != tc.DictKey(1)


def test_tree_map_single_and_multiple() -> None:
    assert tc.tree_map(lambda v: v * 2, {"a": [1, 2]}) == {"a": [2, 4]}
    assert tc.tree_map(lambda a, b: a + b, (1, [2]), (10, [20])) == (11, [22])
    out = tc.tree_map_with_path(lambda p, v: (tc.keystr(p), v), {"a": 1})
    assert out == {"a": ("['a']", 1)}


def test_tree_map_structure_mismatch_is_a_clear_error() -> None:
    with pytest.raises(
        tc.StructureMismatchError, match=r"prefix of every other tree.s.*\[\*, \*\]"
    ):
        tc.tree_map(lambda a, b: a, [1, 2], [1, 2, 3])
    with pytest.raises(ValueError):
        tc.tree_map(lambda a, b: a, {"a": 1}, {"b": 1})


def test_treespec_api() -> None:
    spec = tc.tree_structure({"a": [1, 2], "b": None})
    assert repr(spec) == "TreeSpec({'a': [*, *], 'b': None})"
    assert spec.num_leaves == 2
    assert spec.num_nodes == 5
    assert spec.node_type is dict
    assert [repr(c) for c in spec.children()] == ["TreeSpec([*, *])", "TreeSpec(None)"]
    assert spec.flatten_up_to({"a": [1, 2], "b": None}) == [1, 2]
    assert tc.tree_structure([0, 3]).flatten_up_to([{"x": 1}, 3]) == [{"x": 1}, 3]
    with pytest.raises(tc.StructureMismatchError, match="expected a list node"):
        tc.tree_structure([1]).flatten_up_to((1,))
    with pytest.raises(AttributeError, match="immutable"):
        spec._entries = ()  # type: ignore[misc]
    with pytest.raises(TypeError, match="cannot be built directly"):
        tc.TreeSpec()
    assert spec != 3
    assert len({spec, tc.tree_structure({"b": None, "a": [5, 6]})}) == 1


def test_unflatten_wrong_leaf_count_is_a_clear_error() -> None:
    spec = tc.tree_structure([1, 2])
    with pytest.raises(tc.StructureMismatchError, match="has 2 leaves but 3 were given"):
        spec.unflatten([1, 2, 3])
    with pytest.raises(TypeError, match="takes a treeclass TreeSpec first"):
        tc.tree_unflatten([1, 2], spec)  # type: ignore[arg-type]
    assert tc.tree_unflatten(spec, iter("ab")) == ["a", "b"]


def test_unhashable_static_in_spec_hash_is_a_clear_error(uname: str) -> None:
    @tc.pytree_dataclass(name=uname)
    class WithList:
        x: float
        opts: Any = tc.field(static=True, default=None)

    spec = tc.tree_structure(WithList(1.0, opts=[1, 2]))
    with pytest.raises(
        tc.UnhashableStaticError,
        match=r"static field 'opts' of .*WithList holds an unhashable list \(\[1, 2\]\).*"
        r"Use a tuple",
    ):
        hash(spec)
    assert spec == tc.tree_structure(WithList(2.0, opts=[1, 2]))


def test_deep_tree() -> None:
    tree: Any = 0
    for _ in range(500):
        tree = [tree]
    leaves, spec = tc.tree_flatten(tree)
    assert leaves == [0]
    assert spec.unflatten([1]) == tc.tree_map(lambda v: 1, tree)


@pytest.fixture
def default_recursion_limit() -> Iterator[int]:
    """CPython's default recursion limit, whatever a library in this process set it to."""
    import sys

    before = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    try:
        yield 1000
    finally:
        sys.setrecursionlimit(before)


def test_trees_deeper_than_the_recursion_limit(default_recursion_limit: int) -> None:
    # (At the default limit: a library may have raised it, past what repr shows whole.)
    depth = default_recursion_limit + 500
    tree: Any = 1.0
    for i in range(depth):
        tree = [tree] if i % 2 else {"k": tree}
    leaves, spec = tc.tree_flatten(tree)
    assert leaves == [1.0]
    assert spec.num_leaves == 1 and spec.num_nodes == depth + 1
    pairs, spec2 = tc.tree_flatten_with_path(tree)
    assert spec2 == spec and len(pairs[0][0]) == depth
    assert tc.tree_flatten(spec.unflatten([2.0]))[0] == [2.0]
    assert repr(spec).count("'k'") == (depth + 1) // 2  # shown whole, without recursion
    for _ in range(30_000):
        tree = {"key": tree}
    assert "nodes, 1 leaves: too large to show>" in repr(tc.tree_structure(tree))


def _stack_walk(tree: Any) -> tuple[list[Any], tuple[Any, ...]]:
    """The leaves and the spec's entries of the iterative walker alone (no recursion)."""
    from treeclass._core.tree import _flatten_stack

    leaves: list[Any] = []
    entries: list[Any] = []
    _flatten_stack(tree, None, leaves, entries)
    return leaves, tuple(entries)


def test_iterative_flatten_matches_the_recursive_one() -> None:
    from strategies import Plain

    tree = {"a": [Plain(1, None), (2, None)], "b": Plain([3], 4)}
    leaves, spec = tc.tree_flatten(tree)
    assert _stack_walk(tree) == (leaves, spec._entries)
    pairs, path_spec = tc.tree_flatten_with_path(tree)
    assert path_spec == spec and [v for _, v in pairs] == leaves
    assert [tc.keystr(p) for p, _ in pairs] == [
        "['a'][0].a",
        "['a'][1][0]",
        "['b'].a[0]",
        "['b'].b",
    ]


def test_the_stack_walker_decides_types_it_sees_for_the_first_time() -> None:
    # Its kinds come from the node types known so far: a namedtuple class or a leaf type
    # never seen before must still be decided (a node, a leaf), alone or beside a node.
    class NewLeaf:
        pass

    One = collections.namedtuple("One", "a b")
    Two = collections.namedtuple("Two", "a")
    leaf = NewLeaf()
    tree = [(leaf,), (Two(1),), One(leaf, [2])]
    leaves, entries = _stack_walk(tree)  # the first walk that sees these types
    assert leaves == [leaf, 1, leaf, 2]
    spec = tc.tree_structure(tree)
    assert entries == spec._entries and spec.unflatten(leaves) == tree
    assert repr(spec) == "TreeSpec([(*,), (Two(a=*),), One(a=*, b=[*])])"


def test_treespec_copy_is_itself() -> None:
    import copy

    spec = tc.tree_structure([1, (2,)])
    assert copy.copy(spec) is spec and copy.deepcopy(spec) is spec


def test_namedtuple_spec_is_the_same_before_and_after_registration(uname: str) -> None:
    class Later(typing.NamedTuple):
        a: Any
        b: Any

    before = tc.tree_structure(Later(1, 2))
    tc.register_namedtuple(Later, name=uname)
    after = tc.tree_structure(Later(1, 2))
    assert before == after and hash(before) == hash(after)


def test_tree_map_other_trees_may_be_deeper_as_in_jax() -> None:
    out = tc.tree_map(lambda x, y: (x, y), [1, 2], [(1, 2), {"k": 3}])
    assert out == [(1, (1, 2)), (2, {"k": 3})]
    with pytest.raises(tc.StructureMismatchError, match=r"prefix of every other tree's.*list"):
        tc.tree_map(lambda x, y: x, [1, 2], (1, 2))


def test_wrong_argument_types_are_treeclass_errors() -> None:
    with pytest.raises(tc.TreeclassTypeError, match="takes a treeclass TreeSpec first"):
        tc.tree_unflatten([1], [1])  # type: ignore[arg-type]
    with pytest.raises(tc.TreeclassTypeError, match="cannot be built directly"):
        tc.TreeSpec()
    assert issubclass(tc.TreeclassTypeError, TypeError)


def test_children_and_flatten_up_to_on_deep_specs() -> None:
    tree: Any = 1
    for _ in range(5000):
        tree = [tree, 0]
    spec = tc.tree_structure(tree)
    kids = spec.children()
    assert len(kids) == 2 and kids[1] == tc.tree_structure(0)
    assert kids[0].num_leaves == 5000
    assert spec.flatten_up_to(tree) == tc.tree_leaves(tree)


def test_mixed_nodes_give_the_generic_walks_spec_whatever_the_children() -> None:
    # The generated fast path hands a node to the walker's loop at its first value not known
    # to be a leaf: a node, a namedtuple, None, or a type never seen before (a leaf after
    # all). Every order must give the spec of the walk that uses no fast path (is_leaf=) and
    # of the stack walk, and round trip.
    import dataclasses
    import itertools

    @tc.register_dataclass
    @dataclasses.dataclass
    class Inner:
        x: Any
        y: Any

    @tc.register_dataclass
    @dataclasses.dataclass
    class Outer:
        a: Any
        b: Any
        c: Any
        d: Any

    Pair = collections.namedtuple("Pair", "p q")

    def kinds() -> list[Any]:
        class Fresh:  # a leaf type no walk has seen yet, new for every tree
            def __eq__(self, other: object) -> bool:
                return type(other) is type(self)

            __hash__ = object.__hash__

        return [1.5, Inner(2, [3]), Pair(4, None), None, Fresh(), "s", 2.5]

    for picks in itertools.permutations(range(7), 4):
        values = kinds()
        tree = [Outer(*(values[i] for i in picks)), 7]
        generic = tc.tree_structure(tree, is_leaf=lambda _: False)
        values = kinds()
        tree = [Outer(*(values[i] for i in picks)), 7]
        leaves, spec = tc.tree_flatten(tree)
        assert spec == generic, picks
        assert (leaves, spec._entries) == _stack_walk(tree), picks
        assert spec.unflatten(leaves) == tree
        assert tc.tree_flatten(tree)[1] == spec  # the types are known now


def test_a_fast_path_shaped_to_a_class_gives_the_generic_walks_spec_for_any_node() -> None:
    # After a few mixed nodes of a class, its fast path is compiled for their shape (which
    # fields held leaves, which nodes); nodes of another shape must go the general way and
    # every spec must be the one of the walk that uses no fast path (is_leaf=).
    import dataclasses

    from treeclass._core import tree as tree_module
    from treeclass._core.registry import registered_node

    @tc.register_dataclass
    @dataclasses.dataclass
    class Leafy:
        x: Any
        y: Any
        tag: str = dataclasses.field(default="t", metadata={"static": True})

    @tc.register_dataclass
    @dataclasses.dataclass
    class Block:
        w: Any
        sub: Any
        b: Any
        k: int = dataclasses.field(default=3, metadata={"static": True})

    Pair = collections.namedtuple("Pair", "p q")
    node = registered_node(Block)
    assert node is not None
    general = node.flatten_into
    shaped_tree = [Block(1.0, Leafy(2.0, 3.0), 4.0, k=i) for i in range(tree_module._SHAPE_AFTER)]
    tc.tree_flatten(shaped_tree)  # (the first node only makes float a known leaf type)
    tc.tree_flatten(shaped_tree)
    assert node.flatten_into is not general  # shaped now
    assert "shaped" in node.flatten_into.__qualname__

    class Fresh:
        pass

    others = [
        Block(1.0, Leafy(2.0, Leafy(3.0, 4.0)), 5.0),  # the node child is mixed itself
        Block(1.0, 2.0, 3.0),  # a leaf where the node was: leafy
        Block(Leafy(1.0, 2.0), Leafy(3.0, 4.0), 5.0),  # a node where a leaf was
        Block(1.0, None, 2.0),  # a node without a fast path
        Block(1.0, Pair(2.0, 3.0), [4.0]),
        Block(Fresh(), Leafy(1.0, 2.0), Fresh()),  # leaves of a type not seen yet
        Block(1.0, Block(2.0, Leafy(3.0, 4.0), 5.0), 6.0),  # the shaped path recursing
        *shaped_tree,
    ]
    for tree in [*others, others, {"a": others, "b": (others, 7)}]:
        leaves, spec = tc.tree_flatten(tree)
        assert spec == tc.tree_structure(tree, is_leaf=lambda _: False), tree
        assert (leaves, spec._entries) == _stack_walk(tree)
        assert spec.unflatten(leaves) == tree


@pytest.mark.threads
def test_a_class_registered_while_a_walk_decides_its_type_is_a_node_for_good() -> None:
    # Issue 28, item 4: node_type_for looked a class up, then recorded it as a leaf type; a
    # registration in another thread in between left the class registered *and* a leaf for
    # the embedded registry forever. The walking thread is paused right after its lookup
    # found nothing (a trace function on its node_type_for frame), and the class is
    # registered meanwhile: the lookup and the leaf cache must be one decision.
    import dataclasses
    import sys
    import threading
    from types import FrameType

    from treeclass._core import registry
    from treeclass._core.nodes import LEAF_TYPES

    @dataclasses.dataclass
    class Late:
        x: Any
        y: Any

    code = registry.node_type_for.__code__
    looked_up = threading.Event()
    registered = threading.Event()
    walked: list[Any] = []

    def in_lookup(frame: FrameType, event: str, arg: object) -> Any:
        seen = frame.f_locals
        if event == "line" and seen.get("cls") is Late and "nt" in seen and seen["nt"] is None:
            if not looked_up.is_set():
                looked_up.set()
                registered.wait(30)
        return in_lookup

    def trace(frame: FrameType, event: str, arg: object) -> Any:
        return in_lookup if frame.f_code is code else None

    def walk() -> None:
        sys.settrace(trace)
        try:
            walked.append(tc.tree_leaves([Late(1, 2)]))
        finally:
            sys.settrace(None)

    thread = threading.Thread(target=walk)
    thread.start()
    try:
        assert looked_up.wait(30), "the walk never looked the class up"
        tc.register_dataclass(Late)
    finally:
        registered.set()
        thread.join(30)
    assert walked == [[1, 2]]
    assert Late not in LEAF_TYPES
    assert tc.tree_leaves([Late(3, 4)]) == [3, 4]


def test_spec_depth_counts_the_nodes_on_the_longest_path() -> None:
    from treeclass._core.tree import spec_depth

    def depth(tree: Any) -> int:
        return spec_depth(tc.tree_structure(tree))

    assert depth(1.0) == 1
    assert depth([]) == 1
    assert depth([1]) == 2
    assert depth([1, [2, [3]], {"a": ()}]) == 4
    assert depth([[[]], 1]) == 3
    chain: Any = 0
    for _ in range(3000):  # deeper than the recursion limit: still linear, still exact
        chain = [chain, 1]
    assert depth(chain) == 3001


@pytest.mark.parametrize("static", [False, True], ids=["no-statics", "statics"])
@pytest.mark.parametrize(
    "order", [("v", "w", "nxt"), ("nxt", "v", "w"), ("v", "nxt", "w")], ids="-".join
)
def test_a_shaped_fast_path_walking_its_last_field_by_a_loop_gives_the_generic_walks_spec(
    static: bool, order: tuple[str, ...]
) -> None:
    # A class whose last node field held a node when its fast path was shaped walks a node
    # of its own class there by a loop (a chain), keeping the leaves after that field until
    # the loop ends; anything else there goes the general way. The entries of a class
    # without static values are made once per shape: specs must still be the walk's that
    # uses no fast path, and every node its own.
    import dataclasses

    from treeclass._core import tree as tree_module
    from treeclass._core.registry import registered_node

    fields: list[Any] = [(name, Any) for name in order]
    if static:
        fields.append(("s", int, dataclasses.field(default=0, metadata={"static": True})))
    Link = tc.register_dataclass(dataclasses.make_dataclass("Link", fields))
    Other = tc.register_dataclass(dataclasses.make_dataclass("Other", [("a", Any), ("b", Any)]))
    node = registered_node(Link)
    assert node is not None

    def chain(n: int, end: Any = None, **kw: Any) -> Any:
        tree = end
        for i in range(n):
            tree = Link(v=float(i), w=1.0, nxt=tree, **kw)
        return tree

    for _ in range(2):
        tc.tree_flatten(chain(tree_module._SHAPE_AFTER + 2))
    assert "shaped" in node.flatten_into.__qualname__

    others = [
        chain(30),
        chain(5, Other(1.0, chain(4))),  # another class in the last field, and back again
        chain(5, 2.0),  # a leaf where the node was
        chain(5, Link(v=Other(1.0, 2.0), w=1.0, nxt=chain(3))),  # a node where a leaf was
        chain(5, [chain(2), (chain(3),)]),
        chain(4, chain(3, **({"s": 7} if static else {}))),  # other static values
        chain(2000),  # past the depth the walker recurses (the loop does not recurse)
    ]
    for tree in [*others, others, {"a": others, "b": (others, 7)}]:
        leaves, spec = tc.tree_flatten(tree)
        generic = tc.tree_structure(tree, is_leaf=lambda _: False)
        assert spec._entries == generic._entries
        assert (leaves, spec._entries) == _stack_walk(tree)
        back = spec.unflatten(leaves)
        assert tc.tree_flatten(back)[0] == leaves and tc.tree_structure(back) == spec


def test_key_paths_are_read_off_the_spec_as_the_linked_walk_reads_them() -> None:
    # tree_flatten_with_path reads every path off the spec's entries at once; past 256 open
    # nodes it starts again with paths linked to their parents' (linear memory): both give
    # the same paths, whose dict keys are the mapping's own key objects.
    import dataclasses

    from treeclass._core import tree as tree_module

    Cell = tc.register_dataclass(dataclasses.make_dataclass("Cell", [("a", Any), ("b", Any)]))

    def comb(n: int) -> Any:
        tree: Any = "end"
        for i in range(n):
            tree = Cell(tree, {"k": [i, (i,)], 1: None, "e": {}})
        return tree

    trees = [comb(3), comb(300), [1, {"x": (2, 3)}, None, [], ()], 5, {True: 1}, {1: 1}]
    for tree in trees:
        pairs, spec = tc.tree_flatten_with_path(tree)
        entries = spec._entries
        assert [p for p, _ in pairs] == tree_module._linked_key_paths(entries)
        assert [p for p, _ in pairs] == tree_module._key_paths(entries)
        assert [x for _, x in pairs] == tc.tree_leaves(tree)
    assert tc.tree_flatten_with_path(comb(2))[0][0][0] == (tc.GetAttrKey("a"),) * 2
    [(path, _)] = tc.tree_leaves_with_path({True: 1})
    assert path[0].key is True
    [(path, _)] = tc.tree_leaves_with_path({1: 1})
    assert path[0].key == 1 and path[0].key is not True
    [(path, _)] = tc.tree_leaves_with_path({1.0: 1})
    assert type(path[0].key) is float


def test_a_node_added_in_place_by_a_shaped_fast_path_is_walked_as_registered_now() -> None:
    # A shaped fast path adds a node child of another class whose children were leaves in
    # place; a node of any other class there (or of that class, not of leaves) must be
    # walked by its own node type.
    import dataclasses

    from treeclass._core import tree as tree_module
    from treeclass._core.registry import registered_node

    Inner = tc.register_dataclass(dataclasses.make_dataclass("Inner", [("x", Any), ("y", Any)]))
    Outer = tc.register_dataclass(dataclasses.make_dataclass("Outer", [("a", Any), ("b", Any)]))
    tree = [Outer(1.0, Inner(2.0, 3.0)) for _ in range(tree_module._SHAPE_AFTER + 1)]
    for _ in range(2):
        tc.tree_flatten(tree)
    outer = registered_node(Outer)
    assert outer is not None and "shaped" in outer.flatten_into.__qualname__
    for variant in (tree, [Outer(1.0, Inner(2.0, [3.0])), Outer(1.0, Inner("s", None))]):
        leaves, spec = tc.tree_flatten(variant)
        assert spec == tc.tree_structure(variant, is_leaf=lambda _: False)
        assert (leaves, spec._entries) == _stack_walk(variant)
    # Another class of the same name and fields, with a static field, in that place.
    Inner2 = dataclasses.make_dataclass(
        "Inner", [("x", Any), ("y", Any, dataclasses.field(metadata={"static": True}))]
    )
    tc.register_dataclass(Inner2)
    tree = [Outer(1.0, Inner2(2.0, 3.0)) for _ in range(3)]
    leaves, spec = tc.tree_flatten(tree)
    assert leaves == [1.0, 2.0] * len(tree)
    assert spec == tc.tree_structure(tree, is_leaf=lambda _: False)
    assert spec._entries[3] == (registered_node(Inner2), (3.0,), 1, True)
    assert spec.unflatten(leaves) == tree


def test_key_paths_kept_for_a_structure_seen_before_are_its_own() -> None:
    # A structure used again has its key paths kept, found again by a pattern of its entries
    # (same root node type and size): keys equal but not the same (1, True, 1.0) are told
    # apart, another class of the same size or other dict keys get their own paths, and the
    # kept paths are the ones read off the entries.
    import dataclasses

    from treeclass._core import tree as tree_module

    A = tc.register_dataclass(dataclasses.make_dataclass("KeptA", [("x", Any), ("y", Any)]))
    B = tc.register_dataclass(dataclasses.make_dataclass("KeptB", [("p", Any), ("q", Any)]))
    trees = [
        {1: A(1, [2, 3]), "s": None},
        {True: A(1, [2, 3]), "s": None},
        {1.0: A(1, [2, 3]), "s": None},
        {1: B(1, [2, 3]), "s": None},
        {1: A(1, (2, 3)), "s": None},
        {2: A(1, [2, 3]), "t": None},
        collections.OrderedDict([("s", None), (1, A(1, [2, 3]))]),
    ]
    for _ in range(3):  # read, then patterns made and kept paths found
        for tree in trees * 3 + trees[::-1]:
            pairs, spec = tc.tree_flatten_with_path(tree)
            assert [p for p, _ in pairs] == tree_module._read_key_paths(spec._entries)
            # (DictKey(1) == DictKey(True): their keys' types tell them apart)
            keyed = {type(k) for k in tree if tree[k] is not None}
            assert {type(p[0].key) for p, _ in pairs} == keyed
    for tree in trees:
        for _ in range(6):  # (a pattern is made at every fourth miss)
            pairs, spec = tc.tree_flatten_with_path(tree)
            assert [p for p, _ in pairs] == tree_module._read_key_paths(spec._entries)
            keyed = {type(k) for k in tree if tree[k] is not None}
            assert {type(p[0].key) for p, _ in pairs} == keyed
        entries = spec._entries
        assert tree_module._key_paths(entries) is tree_module._key_paths(entries)  # kept
    [(path, _), *_] = tc.tree_leaves_with_path(trees[1])
    assert path[0].key is True
    assert [tc.keystr(p) for p, _ in tc.tree_leaves_with_path(trees[3])] == [
        "[1].p",
        "[1].q[0]",
        "[1].q[1]",
    ]


def test_kept_key_paths_keep_no_static_value_alive() -> None:
    # The pattern a structure's key paths are found by holds node types and keys, never a
    # class's static values (a class's keys do not depend on them).
    import dataclasses
    import gc
    import weakref

    class Config:  # hashable by identity, as a static value may be
        pass

    Model = tc.register_dataclass(
        dataclasses.make_dataclass(
            "KeptModel",
            [("w", Any), ("cfg", Any, dataclasses.field(metadata={"static": True}))],
        )
    )
    cfg = Config()
    gone = weakref.ref(cfg)
    tree = {"m": Model([1.0, 2.0], cfg)}
    for _ in range(4):
        paths = [tc.keystr(p) for p, _ in tc.tree_leaves_with_path(tree)]
        assert paths == ["['m'].w[0]", "['m'].w[1]"]
    del tree, cfg
    gc.collect()
    assert gone() is None
    other = {"m": Model([3.0, 4.0], Config())}  # another static value: the paths kept
    assert [tc.keystr(p) for p, _ in tc.tree_leaves_with_path(other)] == paths
