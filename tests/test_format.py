"""Treespec JSON: round trips, canonical output, deep trees, evolution, and every bad input."""

from __future__ import annotations

import collections
import enum
import json
import math
import sys
import textwrap
from pathlib import Path
from typing import Any, NamedTuple

import attrs
import pytest
from _budget import cases
from _subproc import run_script, write_modules
from _treespec_schema import validate_document
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import treeclass as tc
from treeclass._treespec.format import (
    FORMAT_ID,
    FORMAT_VERSION,
    READABLE_VERSIONS,
    dumps_nodes,
    loads_nodes,
    nodes_to_spec,
    spec_to_nodes,
)

# --- classes (module level: registered once, under names no other test file uses) ------------


class Mode(enum.Enum):
    TRAIN = "train"
    EVAL = "eval"


tc.register_static(Mode, name="tests.format.Mode")


@tc.pytree_dataclass(name="tests.format.Point")
class Point:
    x: Any
    y: Any = None
    tag: Any = tc.field(static=True, default="p")


@tc.pytree_dataclass(name="tests.format.Frozen", frozen=True, slots=True, return_none_fields=True)
class Frozen:
    a: Any
    b: Any = None
    mode: Mode = tc.field(static=True, default=Mode.TRAIN)


@attrs.define
class AttrsNode:
    w: Any
    n: int = attrs.field(default=3, metadata={"static": True})


tc.register_dataclass(AttrsNode, name="tests.format.AttrsNode")


class Pair(NamedTuple):
    first: Any
    second: Any


tc.register_namedtuple(Pair, name="tests.format.Pair")

Triple = collections.namedtuple("Triple", "a b c")
tc.register_namedtuple(Triple, name="tests.format.Triple")


def roundtrip(tree: Any) -> tuple[str, tc.TreeSpec]:
    """Dump the tree's spec, validate the document, load it back; return (text, loaded)."""
    leaves, spec = tc.tree_flatten(tree)
    text = tc.treespec_dumps(spec)
    validate_document(text)
    loaded = tc.treespec_loads(text)
    assert loaded == spec
    assert hash(loaded) == hash(spec) if _hashable(spec) else True
    assert tc.treespec_dumps(loaded) == text
    assert tc.treespec_loads(text.encode()) == spec
    rebuilt = loaded.unflatten(leaves)
    assert tc.tree_structure(rebuilt) == spec
    return text, loaded


def _hashable(spec: tc.TreeSpec) -> bool:
    try:
        hash(spec)
    except TypeError:
        return False
    return True


TREES = {
    "leaf": 1.0,
    "none": None,
    "empty-tuple": (),
    "empty-list": [],
    "empty-dict": {},
    "nested": {"b": [1, (2, None)], "a": ((), [[]])},
    "int-keys": {3: "c", 1: "a", 2: [4]},
    "tuple-keys": {(1, "a"): 1, (0, "b"): 2},
    "mixed-unsortable-keys": {"z": 1, 2: 2, (1,): 3},
    "ordered": collections.OrderedDict([("z", 1), ("a", [2, 3])]),
    "defaultdict": collections.defaultdict(list, {"k": 1, "j": (2,)}),
    "defaultdict-no-factory": collections.defaultdict(None, {1: 1}),
    "namedtuples": Pair(Triple(1, (2,), None), [Pair(3, 4)]),
    "point": Point(1.0, 2.0),
    "point-none": [Point(1.0), Point(None, None, tag=("t", 1))],
    "frozen-slots": (Frozen(1.0), Frozen(None, 2.0, Mode.EVAL)),
    "attrs": AttrsNode(w=[1, 2], n=7),
    "points-in-points": Point(Point(1, Point(2)), {"k": Point(3, tag=b"\x00")}),
    "statics": [
        Point(0, tag=v)
        for v in (
            None,
            True,
            2**64,
            -(2**100),
            1.5,
            -0.0,
            math.inf,
            math.nan,
            "s",
            b"b",
            (1, [2, (3,)]),
            {"k": (1,)},
            frozenset({1, 2}),
            Mode.EVAL,
            [Mode.TRAIN, (Mode.EVAL,)],
        )
    ],
}


@pytest.mark.parametrize("tree", TREES.values(), ids=TREES.keys())
def test_round_trip(tree: Any) -> None:
    roundtrip(tree)


def test_document_shape_and_example() -> None:
    text, _ = roundtrip({"pt": Point(1.0), "ok": (True, None)})
    doc = json.loads(text)
    assert list(doc) == ["format", "leaves", "nodes", "version"]
    assert doc["format"] == FORMAT_ID
    assert doc["version"] == FORMAT_VERSION == tc.FORMAT_VERSION == 1
    assert doc["leaves"] == 2
    assert doc["nodes"] == [
        ["dict", ["ok", "pt"], 2],
        ["tuple", None, 2],
        None,
        ["None", None, 0],
        ["tests.format.Point", {"data": ["x", "y"], "none": [], "static": {"tag": "p"}}, 2],
        None,
        ["None", None, 0],
    ]


def test_output_is_canonical_and_compact() -> None:
    a = {"x": 1, "y": {"b": Point(1, tag={"q": 1, "p": 2}), "a": 2}}
    b = {"y": {"a": 2, "b": Point(1, tag={"p": 2, "q": 1})}, "x": 1}
    ta = tc.treespec_dumps(tc.tree_structure(a))
    tb = tc.treespec_dumps(tc.tree_structure(b))
    assert ta == tb
    assert ta == tc.treespec_dumps(tc.tree_structure(a))
    assert ta.isascii()
    assert " " not in ta and "\n" not in ta
    assert ta == json.dumps(json.loads(ta), sort_keys=True, separators=(",", ":"))


def test_non_ascii_text_is_escaped() -> None:
    text, _ = roundtrip({"ключ": Point(1, tag="✓ \ud800")})
    assert text.isascii()


def test_one_thousand_levels_deep_round_trips() -> None:
    tree: Any = 1
    for i in range(1000):
        tree = [tree] if i % 2 else Point(tree)
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(5000)  # tree_flatten itself recurses; the format does not
    try:
        spec = tc.tree_structure(tree)
    finally:
        sys.setrecursionlimit(limit)
    text = tc.treespec_dumps(spec)
    doc = validate_document(text)
    shallow = json.loads(tc.treespec_dumps(tc.tree_structure([Point(1)])))
    assert _json_depth(doc) == _json_depth(shallow) == 6  # no deeper with the tree
    assert tc.treespec_loads(text) == spec


def test_one_hundred_thousand_levels_deep_round_trips() -> None:
    nodes: list[Any] = [
        ("list", None, 1),
        ("tests.format.Pair", {"fields": ["first", "second"]}, 2),
    ]
    nodes = nodes * 50_000 + [None] * 50_001
    spec = nodes_to_spec(nodes)
    text = tc.treespec_dumps(spec)
    assert json.loads(text)["leaves"] == 50_001
    loaded = tc.treespec_loads(text)
    assert loaded == spec
    assert loaded.num_leaves == 50_001


def _json_depth(value: Any) -> int:
    depth = 0
    stack = [(value, 1)]
    while stack:
        v, d = stack.pop()
        depth = max(depth, d)
        if isinstance(v, list):
            stack.extend((x, d + 1) for x in v)
        elif isinstance(v, dict):
            stack.extend((x, d + 1) for x in v.values())
    return depth


def test_none_fields_are_none_children_whatever_return_none_fields() -> None:
    # Point: return_none_fields=False (the default); Frozen: return_none_fields=True.
    for obj, back in ((Point(None, 1.0), Point(None, 2.0)), (Frozen(None), Frozen(None))):
        text, loaded = roundtrip(obj)
        nodes = json.loads(text)["nodes"]
        assert nodes[0][1]["none"] == []
        assert nodes[1] == ["None", None, 0]
        assert loaded.unflatten([2.0] * loaded.num_leaves) == back


def test_documents_with_none_fields_outside_the_children_still_load() -> None:
    """treeclass 0.1 wrote a None field's name under "none" and left it out of the children
    (as torch's form still does); such a document loads as the class flattens today."""
    old = json.dumps(
        {
            "format": FORMAT_ID,
            "leaves": 1,
            "nodes": [
                ["list", None, 2],
                ["tests.format.Point", {"data": ["y"], "none": ["x"], "static": {"tag": "p"}}, 1],
                None,
                ["tests.format.Point", {"data": ["x", "y"], "none": [], "static": {"tag": "p"}}, 2],
                ["None", None, 0],
                ["None", None, 0],
            ],
            "version": 1,
        }
    )
    spec = tc.treespec_loads(old)
    assert spec == tc.tree_structure([Point(None, 1.0), Point(None, None)])
    assert spec.unflatten([5.0]) == [Point(None, 5.0), Point(None, None)]


# --- the framework-neutral node list ----------------------------------------------------------


def test_node_list_round_trip() -> None:
    spec = tc.tree_structure({"a": Pair(1, [2, 3]), "b": Point(4)})
    nodes = spec_to_nodes(spec)
    assert nodes == [
        ("dict", ["a", "b"], 2),
        ("tests.format.Pair", {"fields": ["first", "second"]}, 2),
        None,
        ("list", None, 2),
        None,
        None,
        ("tests.format.Point", {"data": ["x", "y"], "none": [], "static": {"tag": "p"}}, 2),
        None,
        ("None", None, 0),
    ]
    text = dumps_nodes(nodes)
    assert text == tc.treespec_dumps(spec)
    assert loads_nodes(text) == [list(n) if n else None for n in nodes]
    assert nodes_to_spec(loads_nodes(text)) == spec
    assert nodes_to_spec(nodes) == spec


def test_loaded_spec_is_canonical_for_leafy_nodes() -> None:
    spec = tc.tree_structure([(1, 2), [3, [4]], ()])
    assert nodes_to_spec(spec_to_nodes(spec))._entries == spec._entries


# --- serialization errors ---------------------------------------------------------------------


def test_equal_states_of_different_value_classes_load_as_written() -> None:
    # Loading reuses the auxdata of a state equal to one read before; 1 == True == 1.0 and
    # 0.0 == -0.0 in Python, so each node must still get its own static value back.
    @tc.pytree_dataclass(name="test.format.AnyStatic")
    class AnyStatic:
        x: float
        s: Any = tc.field(static=True, default=None)

    values = [1, True, 1.0, 0.0, -0.0, False, 0, "1", 1, True]
    tree = [AnyStatic(x=0.0, s=v) for v in values]
    loaded = tc.treespec_loads(tc.treespec_dumps(tc.tree_structure(tree)))
    back = loaded.unflatten([0.0] * len(values))
    assert [(type(o.s), repr(o.s)) for o in back] == [(type(v), repr(v)) for v in values]


def test_unnamed_class_cannot_be_dumped() -> None:
    @tc.pytree_dataclass
    class Anonymous:
        x: int

    spec = tc.tree_structure([Anonymous(1)])
    with pytest.raises(
        tc.UnnamedClassError, match=r"Anonymous was registered without a name.*name="
    ) as info:
        tc.treespec_dumps(spec)
    assert isinstance(info.value, ValueError)


def test_unnamed_namedtuple_cannot_be_dumped() -> None:
    Loose = collections.namedtuple("Loose", "a")
    spec = tc.tree_structure(Loose(1))
    with pytest.raises(
        tc.UnnamedClassError,
        match=r"namedtuple .*Loose has no registered name.*register_namedtuple\(Loose, name=",
    ):
        tc.treespec_dumps(spec)


def test_unserializable_static_names_class_and_field() -> None:
    spec = tc.tree_structure([Point(1, tag=object())])
    with pytest.raises(
        tc.UnserializableStaticError,
        match=r"static field 'tag' of .*Point cannot be serialized: .*type object.*register_static",
    ):
        tc.treespec_dumps(spec)


def test_unserializable_dict_key_and_defaultdict_factory() -> None:
    with pytest.raises(tc.UnserializableStaticError, match=r"key .* of a dict.*type object"):
        tc.treespec_dumps(tc.tree_structure({object(): 1}))
    spec = tc.tree_structure(collections.defaultdict(lambda: 0, {"a": 1}))
    with pytest.raises(
        tc.UnserializableStaticError, match=r"default_factory=<function .*only None"
    ):
        tc.treespec_dumps(spec)


def test_dumps_needs_a_treespec() -> None:
    with pytest.raises(TypeError, match=r"treespec_dumps\(\) takes a treeclass TreeSpec, got list"):
        tc.treespec_dumps([1])  # type: ignore[arg-type]


# --- loading errors ---------------------------------------------------------------------------


def doc(nodes: Any, **over: Any) -> str:
    d: dict[str, Any] = {"format": FORMAT_ID, "version": 1, "leaves": 0, "nodes": nodes}
    if isinstance(nodes, list):
        d["leaves"] = nodes.count(None)
    d.update(over)
    return json.dumps(d)


def test_unregistered_name_says_what_is_missing() -> None:
    before = set(sys.modules)
    with pytest.raises(
        tc.UnregisteredNameError,
        match=r"name 'antigravity.Thing', which no class is registered under in this process; "
        r"import the module that defines the class .* loaders never import anything",
    ) as info:
        tc.treespec_loads(doc([["antigravity.Thing", {"data": [], "none": [], "static": {}}, 0]]))
    assert isinstance(info.value, ValueError)
    assert isinstance(info.value, tc.TreespecLoadError)
    assert "antigravity" not in sys.modules
    assert set(sys.modules) == before


def test_newer_version_lists_readable_versions() -> None:
    with pytest.raises(
        tc.TreespecLoadError,
        match=r"format version 2 by a newer treeclass; this release reads format version\(s\) 1\. "
        r"Upgrade treeclass",
    ):
        tc.treespec_loads(doc([None], version=2, extra="future field"))
    assert READABLE_VERSIONS == (1,)


LOAD_ERRORS: dict[str, tuple[Any, str]] = {
    # not JSON
    "empty": ("", r"not valid JSON"),
    "garbage": ("treespec", r"not valid JSON"),
    "truncated": (doc([["tuple", None, 1], None])[:-5], r"not valid JSON"),
    "trailing-text": (doc([None]) + "x", r"not valid JSON \(Extra data"),
    "not-utf8": (b'{"format":"\xff"}', r"not valid JSON \('utf-8' codec"),
    "utf16": ('{"a":1}'.encode("utf-16"), r"not valid JSON"),
    "nan-literal": ('{"version":NaN}', r"NaN is not valid JSON"),
    "infinity-literal": ("[-Infinity]", r"-Infinity is not valid JSON"),
    "overflow": ('{"x":1e999}', r"the number 1e999 does not fit in a float"),
    "huge-int-literal": ("[" + "9" * 5000 + "]", r"literal of 5000 digits is longer than 4300"),
    "deep-arrays": ("[" * 100_000 + "]" * 100_000, r"not valid JSON \(it nests too deeply\)"),
    "deep-objects": ('{"a":' * 100_000 + "1" + "}" * 100_000, r"nests too deeply"),
    "not-str": (42, r"takes the document as str, bytes or bytearray, got int"),
    "none-input": (None, r"got NoneType"),
    # wrong top-level shapes
    "list-top": ("[1, {}]", r"must be a JSON object, got list"),
    "torch-format": ('[1, {"type": null, "context": null, "children_spec": []}]', r"JSON object"),
    "no-format": (json.dumps({"version": 1, "leaves": 0, "nodes": [None]}), r'"format" must be'),
    "other-format": (doc([None], format="other"), r'"format" must be'),
    "version-str": (doc([None], version="1"), r'"version" must be an integer'),
    "version-bool": (doc([None], version=True), r'"version" must be an integer'),
    "version-float": (doc([None], version=1.0), r'"version" must be an integer'),
    "version-0": (doc([None], version=0), r"format version 0 does not exist"),
    "version-huge": (doc([None], version=10**100), r"format version 1000000000000000000\d*\.\.\."),
    "extra-key": (doc([None], extra=1), r"keys must be \['format', 'leaves', 'nodes', 'version'\]"),
    "missing-leaves": (json.dumps({"format": FORMAT_ID, "version": 1, "nodes": [None]}), r"keys"),
    "nodes-not-list": (doc({"a": None}), r'"nodes" must be a non-empty list'),
    "nodes-empty": (doc([]), r'"nodes" must be a non-empty list'),
    "leaves-str": (doc([None], leaves="1"), r'"leaves" must be an integer'),
    # wrong node shapes
    "node-number": (doc([3]), r"node 0 must be null \(a leaf\) or \[name, state, arity\]"),
    "node-short": (doc([["tuple", None]]), r"node 0 must be null"),
    "node-long": (doc([["tuple", None, 0, 0]]), r"node 0 must be null"),
    "node-object": (doc([{"name": "tuple"}]), r"node 0 must be null"),
    "name-not-str": (doc([[1, None, 0]]), r"node 0 has a name that is not a string"),
    "name-null": (doc([[None, None, 0]]), r"name that is not a string"),
    "arity-negative": (doc([["tuple", None, -1]]), r"arity that is not a count: -1"),
    "arity-float": (doc([["tuple", None, 1.0], None]), r"arity that is not a count: 1.0"),
    "arity-bool": (doc([["tuple", None, True], None]), r"arity that is not a count: True"),
    "arity-huge": (
        doc([["tuple", None, 10**18], None]),
        r"claims 1000000000000000000 children but only 1 nodes follow",
    ),
    # wrong tree
    "too-few-children": (
        doc([["tuple", None, 3], None, None]),
        r"claims 3 children but only 2 nodes follow",
    ),
    "too-many-nodes": (doc([["tuple", None, 1], None, None]), r"node 2 is past the end"),
    "two-roots": (doc([None, None]), r"node 1 is past the end"),
    "leaves-wrong": (doc([["tuple", None, 1], None], leaves=2), r'"leaves" says 2 but .* 1 leaves'),
    "leaves-absurd": (doc([None], leaves=10**4000), r'"leaves" says 1000000000\d+\.\.\.'),
    # wrong states for built-in nodes
    "tuple-state": (doc([["tuple", [], 0]]), r"node 0 \('tuple'\): a 'tuple' node has no state"),
    "none-arity": (
        doc([["None", None, 1], None]),
        r"node 0 \('None'\) has 1 children but its state gives it 0",
    ),
    "dict-state": (doc([["dict", {"a": 1}, 1], None]), r"must be the list of its keys"),
    "dict-arity": (
        doc([["dict", ["a", "b"], 1], None]),
        r"has 1 children but its state gives it 2",
    ),
    "dict-dup-keys": (doc([["dict", ["a", "a"], 2], None, None]), r"the same key twice"),
    "dict-dup-equal-keys": (doc([["dict", [1, True], 2], None, None]), r"the same key twice"),
    "dict-unsorted": (doc([["dict", ["b", "a"], 2], None, None]), r"must be in sorted order"),
    "dict-unhashable-key": (doc([["dict", [[1]], 1], None]), r"unhashable key"),
    "dict-bad-key": (
        doc([["dict", [{"set": 1}], 1], None]),
        r"key 0 of a 'dict' node.*'set' is not a known",
    ),
    "odict-state": (doc([["collections.OrderedDict", None, 0]]), r"list of its keys"),
    "ddict-state": (doc([["collections.defaultdict", [], 0]]), r'must be \{"factory"'),
    "ddict-factory": (
        doc([["collections.defaultdict", {"factory": "os.system", "keys": []}, 0]]),
        r"default_factory 'os.system' .* is not one of",
    ),
    "ddict-factory-type": (
        doc([["collections.defaultdict", {"factory": ["list"], "keys": []}, 0]]),
        r"is not one of",
    ),
    # wrong states for registered nodes
    "point-state": (
        doc([["tests.format.Point", None, 0]]),
        r"node 0 \('tests.format.Point'\): the auxdata of .*Point must be an object",
    ),
    "point-arity": (
        doc([["tests.format.Point", {"data": ["x"], "none": ["y"], "static": {}}, 2], None, None]),
        r"has 2 children but its state gives it 1",
    ),
    "point-lost-field": (
        doc(
            [
                ["tests.format.Point", {"data": ["x", "z"], "none": ["y"], "static": {}}, 2],
                None,
                None,
            ]
        ),
        r"names the field 'z', which the class no longer has",
    ),
    "point-static": (
        doc(
            [
                [
                    "tests.format.Point",
                    {"data": ["x", "y"], "none": [], "static": {"tag": {"bytes": 1}}},
                    2,
                ],
                None,
                None,
            ]
        ),
        r"static field 'tag' of .*Point: the value of a \{\"bytes\": \.\.\.\} object has "
        r"the wrong form",
    ),
    "unregistered-static": (
        doc(
            [
                [
                    "tests.format.Point",
                    {
                        "data": ["x", "y"],
                        "none": [],
                        "static": {"tag": {"registered": ["no.Such", 1]}},
                    },
                    2,
                ],
                None,
                None,
            ]
        ),
        r"static type 'no.Such', which is not registered",
    ),
    "namedtuple-renamed": (
        doc([["tests.format.Pair", {"fields": ["first", "last"]}, 2], None, None]),
        r"\['last'\] no longer exist.*\['second'\] are new",
    ),
    "namedtuple-arity": (
        doc([["tests.format.Pair", {"fields": ["first", "second"]}, 1], None]),
        r"has 1 children but its state gives it 2",
    ),
}


@pytest.mark.parametrize(("text", "message"), LOAD_ERRORS.values(), ids=LOAD_ERRORS.keys())
def test_bad_input_is_a_load_error(text: Any, message: str) -> None:
    with pytest.raises(tc.TreespecLoadError, match=message) as info:
        tc.treespec_loads(text)
    assert isinstance(info.value, ValueError)
    assert isinstance(info.value, tc.TreeclassError)


def test_error_families_are_all_covered() -> None:
    # Guard against the table above silently shrinking.
    assert len(LOAD_ERRORS) >= 60


# --- hypothesis: random trees -----------------------------------------------------------------

scalars = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5)
)
hashables = st.recursive(
    scalars, lambda inner: st.tuples(inner, inner) | st.frozensets(inner, max_size=3), max_leaves=5
)
statics = st.recursive(
    scalars | st.binary(max_size=4) | st.sampled_from(list(Mode)) | st.just(math.nan),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.tuples(inner, inner)
        | st.dictionaries(st.text(max_size=3), inner, max_size=3)
        | st.frozensets(hashables, max_size=3)
    ),
    max_leaves=8,
)
leaves = st.integers() | st.floats() | st.text(max_size=3)


def _extend(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return (
        st.lists(children, max_size=4)
        | st.lists(children, max_size=4).map(tuple)
        | st.dictionaries(st.text(max_size=3), children, max_size=4)
        | st.dictionaries(st.integers(), children, max_size=3)
        | st.dictionaries(hashables, children, max_size=3)
        | st.lists(st.tuples(st.text(max_size=3), children), max_size=3).map(
            collections.OrderedDict
        )
        | st.dictionaries(st.text(max_size=3), children, max_size=3).map(
            lambda d: collections.defaultdict(list, d)
        )
        | st.builds(Pair, children, children)
        | st.builds(Triple, children, children, children)
        | st.builds(Point, children | st.none(), children | st.none(), statics)
        | st.builds(Frozen, children, children | st.none())
        | st.builds(AttrsNode, children, st.integers())
    )


trees = st.recursive(leaves | st.none(), _extend, max_leaves=25)


@pytest.mark.fuzz
@settings(
    max_examples=cases(400),
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(trees)
def test_random_trees_round_trip(tree: Any) -> None:
    roundtrip(tree)


# --- other processes: a class that gained a field, a class whose module moved -----------------


def run(code: str, cwd: Path) -> str:
    env = {"PYTHONHASHSEED": "0"}
    return run_script(code, cwd=cwd, path=[cwd], env=env, timeout=120).checked().stdout


_MODEL_V1 = """
import treeclass as tc

@tc.pytree_dataclass(name="tests.evolve.Layer")
class Layer:
    w: float
    act: str = tc.field(static=True, default="relu")
"""

_MODEL_V2 = """
from typing import Any
import treeclass as tc

@tc.pytree_dataclass(name="tests.evolve.Layer")
class Layer:
    w: float
    b: Any = None                                          # new data field
    act: str = tc.field(static=True, default="relu")
    dims: tuple = tc.field(static=True, default=(1, 2))    # new static field
"""

_MODEL_V3 = """
import treeclass as tc

@tc.pytree_dataclass(name="tests.evolve.Layer")
class Layer:
    w: float
    scale: float = 1.0                                     # new, default not None
    act: str = tc.field(static=True, default="relu")
"""


@pytest.mark.slow
def test_class_that_gained_fields_loads_old_documents(tmp_path: Path) -> None:
    write_modules(tmp_path, {"model_v1": _MODEL_V1, "model_v2": _MODEL_V2, "model_v3": _MODEL_V3})
    run(
        """
        import treeclass as tc
        from model_v1 import Layer
        spec = tc.tree_structure([Layer(1.0, "gelu"), Layer(2.0)])
        open("old.json", "w").write(tc.treespec_dumps(spec))
        """,
        tmp_path,
    )
    out = run(
        """
        import treeclass as tc
        from model_v2 import Layer
        spec = tc.treespec_loads(open("old.json").read())
        live = tc.tree_structure([Layer(1.0, None, "gelu"), Layer(2.0, None)])
        assert spec == live, (spec, live)
        print(spec.unflatten([5.0, 6.0]))
        """,
        tmp_path,
    )
    assert "Layer(w=5.0, b=None, act='gelu', dims=(1, 2))" in out
    out = run(
        """
        import treeclass as tc
        from model_v3 import Layer
        spec = tc.treespec_loads(open("old.json").read())
        print(spec.num_leaves, spec.unflatten([5.0, 6.0]))
        """,
        tmp_path,
    )
    # The new field has no leaf in the old document: it takes its default on unflatten.
    assert "2 [Layer(w=5.0, scale=1.0, act='gelu'), Layer(w=6.0, scale=1.0, act='relu')]" in out


@pytest.mark.slow
def test_class_whose_module_moved_loads_by_name(tmp_path: Path) -> None:
    body = textwrap.dedent(
        """
        import treeclass as tc

        @tc.pytree_dataclass(name="tests.moved.Cfg", frozen=True)
        class Cfg:
            x: float
            label: str = tc.field(static=True, default="a")
        """
    )
    write_modules(tmp_path, {"old_location": body, "new_home": body})
    run(
        """
        import pickle
        import treeclass as tc
        from old_location import Cfg
        spec = tc.tree_structure({"c": Cfg(1.0, "b")})
        open("spec.json", "w").write(tc.treespec_dumps(spec))
        open("spec.pickle", "wb").write(pickle.dumps(spec))
        """,
        tmp_path,
    )
    assert b"old_location" not in (tmp_path / "spec.pickle").read_bytes()
    out = run(
        """
        import pickle, sys
        import treeclass as tc
        from new_home import Cfg
        spec = tc.treespec_loads(open("spec.json").read())
        assert spec == tc.tree_structure({"c": Cfg(0.0, "b")})
        assert pickle.loads(open("spec.pickle", "rb").read()) == spec
        tree = spec.unflatten([2.0])
        assert type(tree["c"]) is Cfg
        assert "old_location" not in sys.modules
        print(type(tree["c"]).__module__, tree)
        """,
        tmp_path,
    )
    assert "new_home {'c': Cfg(x=2.0, label='b')}" in out
