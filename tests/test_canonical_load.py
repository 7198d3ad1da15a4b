"""Loading canonical documents by walking their text (issue 18).

``treeclass._treespec.format._loads_canonical`` reads a document in the form
``treespec_dumps`` writes without parsing it whole: a node whose text was read before in the
same document loads as that node did, a new one is parsed strictly. It must never accept a
text the general path (``loads_nodes`` + ``nodes_to_spec``) would refuse, nor load one
differently: these tests compare the two on canonical documents and on every small edit of
one, and pin that the walk hands anything unusual to the general path, which names it.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import re
from typing import Any

import pytest
from _subproc import run_script

import treeclass as tc
from treeclass._treespec import format as fmt


@tc.pytree_dataclass(name="tests.canonical.Cell")
class Cell:
    x: Any
    tag: str = tc.field(static=True, default="a")
    n: int = tc.field(static=True, default=1)
    f: float = tc.field(static=True, default=0.5)


@dataclasses.dataclass(frozen=True)
class Config:
    width: int
    names: tuple[str, ...] = ()


tc.register_static(Config, name="tests.canonical.Config")


@tc.pytree_dataclass(name="tests.canonical.Pair")
class Pair:
    a: Any
    b: Any


@tc.pytree_dataclass(name="tests.canonical.Layer")
class Layer:
    w: Any
    config: Config = tc.field(static=True, default=Config(1))


def _general(text: str) -> tuple[Any, Any]:
    """What the general path (without the walk) makes of ``text``: its result or its error."""
    try:
        nodes = fmt.loads_nodes(text)
        return nodes, fmt.nodes_to_spec(nodes)
    except (tc.TreespecLoadError, tc.UnregisteredNameError) as e:
        return type(e), str(e)


def _walked(text: str) -> Any:
    """The walk's result, or ``None`` where it leaves ``text`` to the general path (a node's
    state that does not load included)."""
    return fmt._loads_canonical(text)


def _same_as_general(text: str) -> bool:
    """Whether the walk accepted ``text``; if so, it must load it as the general path does."""
    walked = _walked(text)
    if walked is None:
        return False
    nodes, spec = _general(text)
    assert walked[0] == nodes, text
    assert walked[1]._entries == spec._entries and walked[1].num_leaves == spec.num_leaves, text
    assert walked[1] == spec and hash(walked[1]) == hash(spec)
    return True


TREES: list[Any] = [
    [Cell(i) for i in range(30)],
    [Cell(0), Cell(1, tag="b"), Cell(2, n=2), Cell(3, f=-0.0), Cell(4, f=0.0)] * 6,
    [Cell(0, n=1), Cell(1, n=True), Cell(2, n=1)],  # 1 and True: equal, not the same
    {"a": (1, 2), "b": None, "c": [3, {"d": ()}]},
    {f"layer{i}": {"w": i, "b": i, "sub": {"x": i}} for i in range(12)},
    [{f"k{i}": i} for i in range(40)] + [{"k0": 0}] * 40,  # distinct nodes, then repeats
    collections.OrderedDict(b=1, a=(2, 3)),
    collections.defaultdict(list, {"k": [1, 2]}),
    tuple(range(64)),
    tuple(range(65)),
    [tuple(range(200)), tuple(range(129)), (1,)],
    [[[[[1]]]]],
    [(), [], {}],
    7,
    None,
    [Layer(1, Config(2, ("p",))), Layer(2, Config(2, ("p",))), Layer(3)],
    # Documents that repeat their last node and the leaves after it (read by comparing the
    # repeated text): chains, nested lists, a chain in the first field (each repeat's node is
    # followed by another, but the last one by its leaves: it is a node of leaves), a chain
    # whose nodes' static values change, and one of mutable statics (not repeated).
    Pair(0, Pair(1, Pair(2, Pair(3, Pair(4, None))))),
    [[[[[[[[[[1]]]]]]]]]],
    Pair(Pair(Pair(Pair(Pair(0, 1), 2), 3), 4), 5),
    Pair(Pair(Pair(Pair(1, 2), 3), None), [Pair(Pair(Pair(4, 5), 6), 7)] * 3),
    [Cell(Cell(Cell(Cell(1)))), Cell(Cell(Cell(Cell(2, tag="b"), tag="b")))],
    [Cell(Cell(Cell(1, n=1), n=True), n=1), Cell(Cell(2, f=-0.0), f=0.0)],
    Layer(Layer(Layer(Layer(1, Config(2)), Config(2)), Config(2)), Config(3)),
    [[Pair(1, 2)] * 5] * 3,  # repeats that close their list, then open the next
    [(1, 2)] * 20 + [Pair(1, 2)],
    [Pair(1, [2])] * 10,
]


@pytest.mark.parametrize("tree", TREES, ids=range(len(TREES)))
def test_a_canonical_document_is_walked_and_loads_as_the_general_path_loads_it(tree: Any) -> None:
    spec = tc.tree_structure(tree)
    text = tc.treespec_dumps(spec)
    assert _same_as_general(text)
    loaded = tc.treespec_loads(text)
    assert loaded == spec
    assert loaded.unflatten(tc.tree_leaves(tree)) == tree


def test_static_values_keep_their_classes_across_nodes_of_equal_value() -> None:
    tree = [Cell(0, n=1), Cell(1, n=True), Cell(2, f=0.0), Cell(3, f=-0.0), Cell(4, f=0.0)]
    back = tc.treespec_loads(tc.treespec_dumps(tc.tree_structure(tree))).unflatten(range(5))
    assert [type(c.n) for c in back] == [int, bool, int, int, int]
    assert [str(c.f) for c in back] == ["0.5", "0.5", "0.0", "-0.0", "0.0"]


def test_nodes_of_one_text_with_decoded_statics_get_their_own_values() -> None:
    # A registered static type is decoded for each node, as by the general path (its values
    # are not shared between instances that were distinct when flattened).
    tree = [Layer(i, Config(2, ("p",))) for i in range(3)]
    back = tc.treespec_loads(tc.treespec_dumps(tc.tree_structure(tree))).unflatten(range(3))
    assert back == [Layer(i, Config(2, ("p",))) for i in range(3)]
    assert back[0].config is not back[1].config


def _edits(text: str) -> list[str]:
    """Every one-character deletion, and replacements and insertions of likely characters."""
    out: list[str] = []
    for i in range(len(text) + 1):
        out.append(text[:i] + text[i + 1 :])
        for c in ',]["n1 \\':
            out.append(text[:i] + c + text[i:])
            out.append(text[:i] + c + text[i + 1 :])
    return out


@pytest.mark.parametrize(
    "tree",
    [
        [Cell(0), Cell(1), Cell(2, tag="b")],
        [{"a": 1, "b": 2}, {"a": 3, "b": 4}, (5, [6])],
        [(1, 2), (3, 4), ()],
        Pair(0, Pair(1, Pair(2, Pair(3, None)))),
        Pair(Pair(Pair(Pair(0, 1), 2), 3), 4),
        [[Pair(1, 2)] * 2] * 2,
    ],
    ids=["classes", "dicts", "tuples", "chain", "chain-first", "lists"],
)
def test_no_edit_of_a_document_is_accepted_unless_the_general_path_loads_it_the_same(
    tree: Any,
) -> None:
    text = tc.treespec_dumps(tc.tree_structure(tree))
    walked = sum(_same_as_general(edited) for edited in _edits(text))
    assert walked > 0  # some edits (a static value, a key) still make a canonical document


@pytest.mark.parametrize(
    ("old", "new", "error"),
    [
        ('"tag":"b"', '"tag":"b","tag":"b"', "appears twice"),
        ('"leaves":3', '"leaves":4', '"leaves" says 4 but the node list has 3 leaves'),
        ('["tuple",null,2]', '["tuple",null,3]', "claims 3 children but only 2"),
        ("tests.canonical.Cell", "tests.canonical.Nowhere", "tests.canonical.Nowhere"),
        ('"version":1}', '"version":1}x', "valid JSON"),
        (',null,["t', ',null,null,["t', "past the end of the tree"),
        ('"n":1', '"n":"1"', "node 1 .*the value is a str, but the field is int"),
    ],
)
def test_what_the_walk_refuses_is_named_by_the_general_path(old: str, new: str, error: str) -> None:
    text = tc.treespec_dumps(tc.tree_structure([Cell(0, tag="b"), (1, 2)]))
    tampered = text.replace(old, new, 1)
    assert tampered != text
    assert _walked(tampered) is None
    with pytest.raises((tc.TreespecLoadError, tc.UnregisteredNameError), match=error):
        tc.treespec_loads(tampered)


def test_a_document_in_another_form_loads_by_the_general_path() -> None:
    spec = tc.tree_structure([Cell(0), {"a": 1}])
    text = tc.treespec_dumps(spec)
    spaced = json.dumps(json.loads(text), indent=1)
    doc = json.loads(text)
    reordered = json.dumps(dict(reversed(doc.items())), separators=(",", ":"))
    for other in (spaced, reordered, text + " ", "\n" + text):
        assert _walked(other) is None
        assert tc.treespec_loads(other) == spec


def test_a_state_that_does_not_load_is_read_by_the_walk_and_the_general_path_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The one-pass path between them would stop at the same state: it is not tried.
    from treeclass._core.nodes import BUILTIN_NODE_TYPES

    calls: list[Any] = []
    node = BUILTIN_NODE_TYPES[dict]
    real = node.load_state

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(node, "load_state", counted)
    text = tc.treespec_dumps(tc.tree_structure({"a": 1, "b": 2})).replace('"b"', '"a"')
    with pytest.raises(tc.TreespecLoadError, match=r"node 0 .*the same key twice"):
        tc.treespec_loads(text)
    assert len(calls) == 2


def test_a_node_name_with_an_escaped_quote_is_read_whole() -> None:
    nodes: list[Any] = [["tuple", None, 2], ['tests."q', None, 0], ['tests."q', None, 0]]
    text = json.dumps(
        {"format": "treeclass.treespec", "leaves": 0, "nodes": nodes, "version": 1},
        separators=(",", ":"),
    )
    assert _walked(text) is None
    with pytest.raises(tc.UnregisteredNameError, match=re.escape('tests."q')):
        tc.treespec_loads(text)


# --- hostile sizes: the walk stays linear ------------------------------------------------------

_SCRIPT = """
import json, sys
import treeclass as tc
from typing import Any

@tc.pytree_dataclass(name="tests.canonical.Flood")
class Flood:
    x: Any
    s: str = tc.field(static=True, default="")

kind, n = sys.argv[1], int(sys.argv[2])

def state(s):
    return {"data": ["x"], "none": [], "static": {"s": s}}

if kind == "near_misses":
    # Nodes of one class whose texts share a long prefix with the nodes kept before them.
    nodes = [["list", None, n]]
    for i in range(n):
        nodes += [["tests.canonical.Flood", state("a" * 2000 + str(i)), 1], None]
    leaves = n
else:  # "claimed_runs": every node claims a run of leaves far longer than the one that follows
    nodes = [["tuple", None, n]]
    for i in range(n):
        nodes += [["list", None, 10**7]] + [None] * 63
    leaves = 63 * n
doc = json.dumps({"format": "treeclass.treespec", "leaves": leaves, "nodes": nodes,
                  "version": 1}, separators=(",", ":"))
try:
    spec = tc.treespec_loads(doc)
except tc.TreespecLoadError as e:
    print(json.dumps({"bytes": len(doc), "refused": str(e)[:300]}))
else:
    print(json.dumps({"bytes": len(doc), "leaves": spec.num_leaves}))
"""


@pytest.mark.slow
@pytest.mark.parametrize(("kind", "n"), [("near_misses", 2_000), ("claimed_runs", 15_000)])
def test_documents_built_against_the_walk_load_or_are_refused(kind: str, n: int) -> None:
    outcome = run_script(_SCRIPT, kind, str(n), timeout=600.0)  # a hang guard, not a timing
    assert not outcome.timed_out, f"loading a {kind} document hung"
    out: dict[str, Any] = outcome.report()
    assert out["bytes"] > 4_000_000
    if kind == "near_misses":
        assert out["leaves"] == n
    else:
        assert "claims 10000000 children" in out["refused"]


# --- to="torch": repeated subtrees made once ----------------------------------------------------


def _torch_trees() -> list[Any]:
    from strategies import AttrsNode, FrozenSlots, KeepNone, Pair, Plain

    return [
        [Cell(i) for i in range(20)],
        [Plain(1.0, None, "t"), Plain(2.0, 3.0, "t"), Plain(4.0, 5.0, "t"), Plain(6.0)] * 3,
        [KeepNone(1.0, 0.5), KeepNone(2.0, 3.0), KeepNone(4.0, 5.0)],
        {"a": [Pair(1, 2), Pair(3, 4)], "b": (AttrsNode(1, 2), AttrsNode(3, 4, "x"))},
        [FrozenSlots(1.0), FrozenSlots(2.0)],
        [{"b": 1, "w": 2}, {"b": 3, "w": 4}, ({"b": 5, "w": 6}, [(), ()])],
        [collections.OrderedDict(z=1, y=2)] * 3 + [collections.defaultdict(list, {"k": 1})] * 2,
        [[Cell(1), Cell(2)], [Cell(3), [Cell(4), (Cell(5),)]]],
        [(1, 2)],
    ]


def test_to_torch_makes_each_repeated_subtree_once_and_equals_torchs_own_structure() -> None:
    tp = pytest.importorskip("torch.utils._pytree")
    for tree in _torch_trees():
        text = tc.treespec_dumps(tc.tree_structure(tree))
        loaded = tc.treespec_loads(text, to="torch")
        leaves, expected = tp.tree_flatten(tree)
        assert loaded == expected, tree
        assert loaded.num_leaves == expected.num_leaves and loaded.num_nodes == expected.num_nodes
        assert tp.tree_unflatten(leaves, loaded) == tree
    shared = tc.treespec_loads(tc.treespec_dumps(tc.tree_structure([Cell(1), Cell(2)])), to="torch")
    assert shared.child(0) is shared.child(1)  # one spec for the two subtrees of one text


def test_to_torch_of_a_document_that_needs_a_plan_or_is_not_canonical() -> None:
    tp = pytest.importorskip("torch.utils._pytree")
    tree = [Cell(i) for i in range(5)]
    text = json.dumps(json.loads(tc.treespec_dumps(tc.tree_structure(tree))), indent=1)
    loaded = tc.treespec_loads(text, to="torch")  # the general path: nothing shared
    assert loaded == tp.tree_structure(tree)
    assert loaded.child(0) is not loaded.child(1)


# --- treeclass.torch.treespec_loads: contexts read once per text ------------------------------


def test_torch_text_with_repeated_contexts_loads_as_torchs_own_loader_loads_it() -> None:
    tp = pytest.importorskip("torch.utils._pytree")
    tct = pytest.importorskip("treeclass.torch")
    tree = [Cell(0), Cell(1), Cell(2, tag="b"), {"b": 1, "w": 2}, {"b": 3, "w": 4}, (5, [6])]
    text = tp.treespec_dumps(tp.tree_structure(tree))
    loaded = tct.treespec_loads(text)
    assert loaded == tp.treespec_loads.__wrapped__(text) == tp.tree_structure(tree)
    dicts = [loaded.child(3).context, loaded.child(4).context]
    assert dicts == [["b", "w"], ["b", "w"]] and dicts[0] is not dicts[1]  # lists: not shared
    assert loaded.child(0) is loaded.child(1)  # one frozen spec for nodes of one context text
    assert loaded.child(3) is not loaded.child(4)
    text = tp.treespec_dumps(tp.tree_structure([Cell(0), [1, 2, 3, 4, {"b": 1, "w": 2}]]))
    tampered = text.replace('[\\"b\\", \\"w\\"]', '[\\"b\\", \\"w\\", \\"x\\"]')
    assert tampered != text
    with pytest.raises(tc.TreespecLoadError, match=r"child 4 of child 1 of the root .* 3"):
        tct.treespec_loads(tampered)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ('{"type": "builtins.dict"', '{"type": "builtins.dict", "type": "builtins.dict"'),
        ('"children_spec": []}', '"children_spec": [], "children_spec": []}'),
        ('"default_factory_name": "list"', '"default_factory_name": "list", "x:y": 1, "x:y": 2'),
        ('"context": "null"', '"context": "null", "context": "{\\"a:b\\": 1}"'),
        ('\\"n\\":1', '\\"n\\":1,\\"n\\":1'),  # inside a context's own JSON
    ],
)
def test_torch_text_with_a_duplicate_key_is_refused(old: str, new: str) -> None:
    tp = pytest.importorskip("torch.utils._pytree")
    tct = pytest.importorskip("treeclass.torch")
    tree = [{"b": 1}, collections.defaultdict(list, {"k": 1}), Cell(2, tag="a:b")]
    text = tp.treespec_dumps(tp.tree_structure(tree))
    tct.treespec_loads(text)
    tampered = text.replace(old, new, 1)
    assert tampered != text
    with pytest.raises(tc.TreespecLoadError, match="appears twice"):
        tct.treespec_loads(tampered)
    with pytest.raises(tc.TreespecLoadError, match="appears twice"):
        tct.treespec_loads(tampered.encode())


def test_a_repeated_node_keeps_its_own_static_values_where_they_are_mutable() -> None:
    # Each repeat of a node whose statics are decoded per node (a registered static type)
    # gets its own value, as in a document that does not repeat.
    tree = Layer(Layer(Layer(Layer(1, Config(2)), Config(2)), Config(2)), Config(2))
    back = tc.treespec_loads(tc.treespec_dumps(tc.tree_structure(tree))).unflatten([7])
    configs = [back.config, back.w.config, back.w.w.config, back.w.w.w.config]
    assert configs == [Config(2)] * 4
    assert len({id(c) for c in configs}) == 4


def test_a_node_text_kept_from_an_earlier_document_loads_as_its_name_does_now() -> None:
    # Node texts read before are kept for later documents; a name that another class took
    # since (a class statement run again) loads as that class.
    def define() -> type:
        @tc.pytree_dataclass(name="tests.canonical.Kept")
        class Kept:
            x: Any

        return Kept

    first = define()
    text = tc.treespec_dumps(tc.tree_structure([first(1), first(2)]))
    assert [type(x) for x in tc.treespec_loads(text).unflatten([1, 2])] == [first, first]
    second = define()
    assert second is not first
    assert _same_as_general(text)
    assert [type(x) for x in tc.treespec_loads(text).unflatten([1, 2])] == [second, second]
