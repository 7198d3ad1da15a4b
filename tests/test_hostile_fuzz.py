"""Hostile-input fuzzing of both loaders, by attack family (issue 13).

Not random mutation alone (``test_format_fuzz.py`` does that): each family below builds the
inputs an attacker would try against one promise, systematically, from valid documents:

``tc.treespec_loads`` (the embedded loader), with ``to=None`` and, for what loads, every ``to=``:

- arity: impossible, negative, huge and off-by-one child counts, at every node;
- colliding keys: dict / OrderedDict / defaultdict keys and frozenset statics of ints that all
  hash alike (``k * (2**61 - 1)``), with and without duplicates;
- duplicate object keys, at every object of the document;
- static kinds: every JSON kind in every annotated static field;
- numbers: integer and float literals at and past every limit;
- names: module paths, builtins, reserved names, lookalikes, registered names of other kinds;
- nesting: statics and documents nested past every limit;
- tampered statics of a class that runs ``__post_init__`` on unflatten.

``treeclass.torch.treespec_loads``:

- module paths: ``defaultdict`` factories (``os.system``, ``builtins.eval``, an importable module
  whose import would create a marker file) and enum ``fqn``\\ s in contexts, at every node;
- structure: missing, extra and mistyped keys; leaves with contexts; children that do not match
  a context;
- contexts: not JSON, duplicate keys, non-finite and oversized numbers, keys of every JSON kind;
- names: unregistered, ``NO_SERIALIZED_TYPE_NAME_FOUND``, namedtuple names;
- structural mutation of what torch's ``treespec_dumps`` writes.

A case passes if the loader raises its treeclass error or returns a spec that round-trips (and,
for ``to=``, that the framework's structure comes back); for the torch loader also if nothing was
imported. The counts are printed and recorded (``record_property``).
"""

from __future__ import annotations

import collections
import copy
import enum
import json
import random
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from _mutate import Tally, nested, objects

import treeclass as tc

M61 = 2**61 - 1

# --- classes of the corpus ----------------------------------------------------------------------


class Mode(enum.Enum):
    A = "a"
    B = "b"


tc.register_static(Mode, name="tests.hfuzz.Mode")


@tc.pytree_dataclass(name="tests.hfuzz.Typed", frozen=True)
class Typed:
    x: Any
    y: Any = None
    tag: str = tc.field(static=True, default="a")
    n: int = tc.field(static=True, default=1)
    scale: float = tc.field(static=True, default=1.0)
    flag: bool = tc.field(static=True, default=False)
    dims: tuple[int, ...] = tc.field(static=True, default=(1, 2))
    names: frozenset[str] = tc.field(static=True, default=frozenset({"a"}))
    mode: Mode = tc.field(static=True, default=Mode.A)
    anything: Any = tc.field(static=True, default=None)


@tc.pytree_dataclass(name="tests.hfuzz.Checked", unflatten_calls_init=True)
class Checked:
    x: Any
    n: int = tc.field(static=True, default=1)

    def __post_init__(self) -> None:
        if not isinstance(self.n, int) or self.n < 0:
            raise ValueError("n must be a count")


class Pair(NamedTuple):
    a: Any
    b: Any


tc.register_namedtuple(Pair, name="tests.hfuzz.Pair")


def corpus() -> list[Any]:
    return [
        (1.0, [2.0, None]),
        {"b": 1.0, "a": (2.0,)},
        {1: 1.0, 2: 2.0, 3: 3.0},
        collections.OrderedDict([(5, 1.0), ("k", 2.0)]),
        collections.defaultdict(list, {1: 1.0, 2: 2.0}),
        Typed(1.0, Pair(2.0, [3.0]), anything=frozenset({1, 2})),
        [Checked(1.0, 2), Typed(Typed(1.0), mode=Mode.B)],
    ]


# --- bookkeeping --------------------------------------------------------------------------------


def make_tally(label: str) -> Tally:
    return Tally(
        "hostile fuzz",
        label,
        refusal="TreespecLoadError",
        accepted="and re-checked",
        record=f"hostile_fuzz_cases_{label}",
    )


# --- the embedded loader ------------------------------------------------------------------------


def _available(module: str) -> bool:
    try:
        __import__(module)
    except ImportError:
        return False
    return True


#: What a case must do: be refused, load, or either (the family's oracle decides).
REFUSE, ACCEPT, EITHER = "refuse", "accept", "either"


def check_embedded(tally: Tally, family: str, data: Any, expect: str) -> None:
    loaded, spec = tally.attempt(
        lambda: tc.treespec_loads(data), data, tc.TreespecLoadError, family
    )
    if not loaded:
        if spec is not None and expect == ACCEPT:
            tally.fail(data, f"refused a valid document: {spec}", family)
        return
    if expect == REFUSE:
        tally.fail(data, f"accepted: {spec!r:.300}", family)
        return
    try:
        assert tc.treespec_loads(tc.treespec_dumps(spec)) == spec
        repr(spec)
        hash(spec)
        spec.unflatten([0.0] * spec.num_leaves)
    except ValueError as e:
        if str(e) != "n must be a count":  # Checked's own __post_init__, run by unflatten
            tally.fail(data, e, family)
            return
    except Exception as e:
        tally.fail(data, e, family)
        return
    for to in TARGETS:
        try:
            tc.treespec_loads(data, to=to)  # type: ignore[call-overload]
        except tc.TreespecLoadError:
            pass
        except Exception as e:
            tally.fail(data, e, f"{family} to={to}")


#: The frameworks ``to=`` is tried with (those installed; filled in by the test).
TARGETS: list[str] = []


Case = tuple[Any, str]


def arity_family(docs: list[dict[str, Any]]) -> Iterator[Case]:
    # Changing one node's arity changes how many entries the tree needs: always refused.
    for doc in docs:
        for i, node in enumerate(doc["nodes"]):
            if node is None:
                continue
            for k in (-1, 0, node[2] - 1, node[2] + 1, node[2] + 2, 999_999, 2**63, 10**50):
                if k == node[2]:
                    continue
                d = copy.deepcopy(doc)
                d["nodes"][i][2] = k
                yield json.dumps(d), REFUSE
    # Long runs of impossible nodes (small: the linear-time test is in test_hostile_loading).
    for n in (1, 10, 1000):
        for node in (["", 0, 999_999], ["tuple", None, 2], ["list", None, -1], [None, None, 1]):
            yield (
                json.dumps(
                    {"format": "treeclass.treespec", "leaves": 0, "nodes": [node] * n, "version": 1}
                ),
                REFUSE,
            )


def _dict_doc(name: str, keys: list[Any], state: Any = None) -> str:
    n = len(keys)
    if state is None:
        state = keys
    return json.dumps(
        {
            "format": "treeclass.treespec",
            "leaves": n,
            "nodes": [[name, state, n], *([None] * n)],
            "version": 1,
        }
    )


def collision_family() -> Iterator[Case]:
    # Loading them or refusing them is the loader's choice (in linear time: see
    # test_hostile_loading); a duplicate among them must be refused.
    for n in (2, 3, 50, 500):
        colliding = [{"int": hex(k * M61)} for k in range(1, n + 1)]
        negative = [{"int": hex(-k * M61)} for k in range(1, n + 1)]
        for keys, expect in (
            (colliding, EITHER),
            (negative, EITHER),
            (colliding[:-1] + colliding[:1], REFUSE),
        ):
            yield _dict_doc("dict", keys), expect
            yield _dict_doc("collections.OrderedDict", keys), expect
            ddict = {"factory": "list", "keys": keys}
            yield _dict_doc("collections.defaultdict", keys, ddict), expect
        base = json.loads(tc.treespec_dumps(tc.tree_structure(Typed(1.0))))
        for items in (colliding, colliding + colliding[:1]):
            doc = copy.deepcopy(base)
            doc["nodes"][0][1]["static"]["anything"] = {"frozenset": items}
            yield json.dumps(doc), EITHER
            doc["nodes"][0][1]["static"]["names"] = {"frozenset": items}
            yield json.dumps(doc), EITHER  # ints in a frozenset[str]: refusing is fine


def duplicate_family(texts: list[str]) -> Iterator[Case]:
    for text in texts:
        # Every '{"key":' becomes '{"key":<value>,"key":' once (a duplicate of the first key).
        start = 0
        while True:
            i = text.find('{"', start)
            if i < 0:
                break
            j = text.find('":', i)
            key = text[i + 1 : j + 1]
            for value in ('"x"', "1", "null", "[]", "{}"):
                yield text[: i + 1] + f"{key}:{value}," + text[i + 1 :], REFUSE
            start = i + 1


STATIC_KINDS: list[Any] = [
    None,
    True,
    0,
    -1,
    1.5,
    "",
    "a",
    [],
    [1],
    ["a"],
    {"tuple": []},
    {"tuple": [1, 2]},
    {"tuple": ["a"]},
    {"frozenset": []},
    {"frozenset": ["a"]},
    {"frozenset": [1]},
    {"dict": {}},
    {"dict": {"k": 1}},
    {"bytes": "AA=="},
    {"int": "0x1f"},
    {"int": "-0x" + "f" * 100},
    {"float": "nan"},
    {"float": "-inf"},
    {"registered": ["tests.hfuzz.Mode", "a"]},
    {"registered": ["tests.hfuzz.Mode", "zz"]},
    {"registered": ["tests.hfuzz.Nope", "a"]},
    {"registered": ["tests.hfuzz.Pair", "a"]},
    {"tuple": [[1]]},
    {"frozenset": [[1]]},
]


def _tag(kind: Any) -> str:
    """The JSON kind of an encoded static: "str", "int", "list", "tuple", "registered"..."""
    if isinstance(kind, dict):
        return next(iter(kind))
    return {str: "str", bool: "bool", int: "int", float: "float", list: "list"}.get(
        type(kind), "null"
    )


# Kinds each annotated field may hold; anything else contradicts the annotation. ``None``:
# not a plain annotation, only hashability is required (Typed is frozen, so hashable).
_ALLOWED: dict[str, set[str] | None] = {
    "tag": {"str"},
    "n": {"int", "bool"},  # bool is an int to Python and type checkers
    "scale": {"float", "int", "bool"},
    "flag": {"bool"},
    "dims": {"tuple"},
    "names": {"frozenset"},
    "mode": {"registered"},
    "anything": None,
}
_UNHASHABLE = [[], [1], ["a"], {"dict": {}}, {"dict": {"k": 1}}, {"tuple": [[1]]}]


def _static_expectation(field: str, kind: Any) -> str:
    allowed = _ALLOWED[field]
    if allowed is None:
        return REFUSE if kind in _UNHASHABLE else EITHER
    return EITHER if _tag(kind) in allowed else REFUSE


def static_family() -> Iterator[Case]:
    base = json.loads(tc.treespec_dumps(tc.tree_structure(Typed(1.0))))
    for field in _ALLOWED:
        for kind in STATIC_KINDS:
            doc = copy.deepcopy(base)
            doc["nodes"][0][1]["static"][field] = kind
            yield json.dumps(doc), _static_expectation(field, kind)
    fields = list(_ALLOWED)
    for i, first in enumerate(fields):  # two fields tampered at once
        for second in fields[i + 1 :]:
            for kind in STATIC_KINDS:
                doc = copy.deepcopy(base)
                doc["nodes"][0][1]["static"][first] = kind
                doc["nodes"][0][1]["static"][second] = kind
                expectations = {_static_expectation(f, kind) for f in (first, second)}
                yield json.dumps(doc), REFUSE if REFUSE in expectations else EITHER
    checked = json.loads(tc.treespec_dumps(tc.tree_structure(Checked(1.0, 2))))
    for kind in STATIC_KINDS:
        doc = copy.deepcopy(checked)
        doc["nodes"][0][1]["static"]["n"] = kind
        yield json.dumps(doc), _static_expectation("n", kind)
    for n in (-1, -(2**70), 10**30):
        doc = copy.deepcopy(checked)
        doc["nodes"][0][1]["static"]["n"] = n if abs(n) < 2**53 else {"int": hex(n)}
        yield json.dumps(doc), EITHER  # every to= must then be a TreespecLoadError


def number_family() -> Iterator[Case]:
    base = tc.treespec_dumps(tc.tree_structure(Typed(1.0)))
    for literal in (
        "9" * 4299,
        "9" * 4300,
        "9" * 4301,
        "-" + "9" * 4301,
        "1e308",
        "1e309",
        "-1e999",
        "1" + "0" * 400 + ".5",
        "0." + "0" * 5000 + "1",
        "NaN",
        "Infinity",
    ):
        yield base.replace('"n":1', f'"n":{literal}'), EITHER
        yield base.replace('"leaves":1', f'"leaves":{literal}'), REFUSE
        yield base.replace('"version":1', f'"version":{literal}'), REFUSE
    for digits in (8598, 8599, 8600, 8601, 20000):
        yield base.replace('"n":1', '"n":{"int":"0x' + "f" * digits + '"}'), EITHER
        text = base.replace('"anything":null', '"anything":{"int":"-0x' + "1" * digits + '"}')
        yield text, EITHER


NAMES = [
    "os.system",
    "builtins.eval",
    "builtins.__import__",
    "subprocess.Popen",
    "__main__.Typed",
    "tests.hfuzz.Typed ",
    " tests.hfuzz.Typed",
    "tests.hfuzz.typed",
    "tests\u2024hfuzz.Typed",
    "tests.hfuzz.Mode",  # a static type's name, used as a node
    "tests.hfuzz.Pair",
    "tuple",
    "None",
    "builtins.tuple",
    "collections.namedtuple",
    "",
    "x" * 10_000,
]


def name_family() -> Iterator[Case]:
    for doc in (
        json.loads(tc.treespec_dumps(tc.tree_structure(Typed(1.0)))),
        json.loads(tc.treespec_dumps(tc.tree_structure(Pair(1.0, 2.0)))),
        json.loads(tc.treespec_dumps(tc.tree_structure((1.0, 2.0)))),
    ):
        for name in NAMES:
            d = copy.deepcopy(doc)
            d["nodes"][0][0] = name
            yield json.dumps(d), EITHER if name == doc["nodes"][0][0] else REFUSE


PAYLOADS: list[Any] = [
    "os.system",
    "builtins.eval",
    "__import__('os')",
    {"registered": ["os.system", "id"]},
    {"int": "0x" + "f" * 9000},
    -(2**63),
    1e308,
    {"tuple": [{"tuple": [{"tuple": []}]}]},
    {"__enum__": True, "fqn": "os:system", "name": "x"},
    [[[[[[[[[[[]]]]]]]]]]],
    {"": None},
]


def _positions(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every position in a JSON value (recursive: documents of the corpus are shallow)."""
    yield path
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _positions(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _positions(v, (*path, i))


def injection_family(docs: list[dict[str, Any]]) -> Iterator[Case]:
    """Every payload at every position of every document of the corpus."""
    for doc in docs:
        for path in _positions(doc):
            if not path:
                continue
            for payload in PAYLOADS:
                d = copy.deepcopy(doc)
                target = d
                for key in path[:-1]:
                    target = target[key]
                target[path[-1]] = copy.deepcopy(payload)
                yield json.dumps(d), EITHER


def nesting_family() -> Iterator[Case]:
    base = json.loads(tc.treespec_dumps(tc.tree_structure(Typed(1.0))))
    for depth in (50, 99, 100, 101, 500, 5000):
        value = nested(1, depth, lambda v: {"tuple": [v]})
        d = copy.deepcopy(base)
        d["nodes"][0][1]["static"]["anything"] = value
        try:
            text = json.dumps(d)
        except RecursionError:
            continue
        yield text, EITHER if depth <= 100 else REFUSE  # MAX_STATIC_DEPTH containers
    for depth in (10, 2000, 50_000):
        nodes: list[Any] = [["list", None, 1]] * depth + [None]
        doc = {"format": "treeclass.treespec", "leaves": 1, "nodes": nodes, "version": 1}
        yield json.dumps(doc), ACCEPT  # a deep tree is a valid document
    yield "[" * 100_000 + "]" * 100_000, REFUSE


@pytest.mark.slow
def test_the_embedded_loader_under_attack(record_property: Any, capsys: Any) -> None:
    TARGETS[:] = [t for t in ("jax", "torch", "optree") if _available(t)]
    tally = make_tally("embedded")
    texts = [tc.treespec_dumps(tc.tree_structure(t)) for t in corpus()]
    docs = [json.loads(t) for t in texts]
    families: list[tuple[str, Iterator[Case]]] = [
        ("arity", arity_family(docs)),
        ("collisions", collision_family()),
        ("duplicate keys", duplicate_family(texts)),
        ("static kinds", static_family()),
        ("numbers", number_family()),
        ("names", name_family()),
        ("nesting", nesting_family()),
        ("injection", injection_family(docs)),
    ]
    for family, cases in families:
        for data, expect in cases:
            check_embedded(tally, family, data, expect)
    assert tally.total > 3000
    tally.report(record_property, capsys)


# --- the torch loader ---------------------------------------------------------------------------


def _node(type_: Any, context: Any, children: list[Any] | None = None) -> dict[str, Any]:
    return {"type": type_, "context": context, "children_spec": children or []}


LEAF = _node(None, None)


def _torch_texts() -> list[str]:
    import torch
    import torch.utils._pytree as pt

    trees: list[Any] = [
        *corpus(),
        collections.deque([1.0, 2.0], maxlen=4),
        torch.Size([2, 3]),
        {"a": Pair(1.0, {"b": [2.0]})},
    ]
    texts = []
    for tree in trees:
        try:
            texts.append(pt.treespec_dumps(pt.tree_structure(tree)))
        except Exception:  # torch cannot write every tree (a None node, ...)
            continue
    return texts


def _torch_nodes(value: Any) -> Iterator[dict[str, Any]]:
    for obj in objects(value):
        if set(obj) == {"type", "context", "children_spec"}:
            yield obj


def module_path_family(texts: list[str], marker_module: str) -> Iterator[str]:
    factories = [
        ("os", "system"),
        ("builtins", "eval"),
        ("builtins", "__import__"),
        ("importlib", "import_module"),
        (marker_module, "factory"),
        ("builtins", "list.__class__"),
        ("builtins", ""),
        (None, "list"),
        ("builtins", None),
    ]
    fqns = [f"{marker_module}:E", "os:system", "builtins:eval", "nowhere_xyz:E", ":", "os", ""]
    for text in texts:
        doc = json.loads(text)
        for index, _ in enumerate(list(_torch_nodes(doc))):
            for module, name in factories:
                d = copy.deepcopy(doc)
                node = list(_torch_nodes(d))[index]
                node["type"] = "collections.defaultdict"
                node["context"] = {
                    "default_factory_module": module,
                    "default_factory_name": name,
                    "dict_context": [f"k{i}" for i in range(len(node["children_spec"]))],
                }
                yield json.dumps(d)
            for fqn in fqns:
                d = copy.deepcopy(doc)
                node = list(_torch_nodes(d))[index]
                keys = [{"__enum__": True, "fqn": fqn, "name": "A"}] + [
                    f"k{i}" for i in range(1, len(node["children_spec"]))
                ]
                node["type"] = "builtins.dict"
                node["context"] = json.dumps(keys[: max(1, len(node["children_spec"]))])
                yield json.dumps(d)
                # An enum nested inside a registered class's JSON context, too.
                node["type"] = "collections.OrderedDict"
                node["context"] = json.dumps([[{"__enum__": True, "fqn": fqn, "name": "A"}]])
                yield json.dumps(d)


def torch_structure_family(texts: list[str]) -> Iterator[Any]:
    mistyped: list[Any] = [None, 0, 1.5, "x", [], {}, [LEAF], True]
    for text in texts:
        doc = json.loads(text)
        nodes = list(_torch_nodes(doc))
        for index in range(len(nodes)):
            for key in ("type", "context", "children_spec"):
                d = copy.deepcopy(doc)
                del list(_torch_nodes(d))[index][key]
                yield json.dumps(d)
                for value in mistyped:
                    d = copy.deepcopy(doc)
                    list(_torch_nodes(d))[index][key] = value
                    yield json.dumps(d)
            d = copy.deepcopy(doc)
            list(_torch_nodes(d))[index]["extra"] = 1
            yield json.dumps(d)
            d = copy.deepcopy(doc)
            list(_torch_nodes(d))[index]["children_spec"].append(copy.deepcopy(LEAF))
            yield json.dumps(d)
        for protocol in (0, 2, -1, "1", 1.0, True, None):
            yield json.dumps([protocol, doc[1]])
        yield json.dumps([1, doc[1], doc[1]])
        yield json.dumps(doc[1])
    yield from (None, 1, b"\xff", bytearray(b"[1"), "", " ", "[", "[1,", "null", "[1, null]")
    opening = '{"type": "builtins.list", "context": "null", "children_spec": ['
    for depth in (100, 400, 2000, 20_000):
        yield "[1, " + opening * depth + json.dumps(LEAF) + "]}" * depth + "]"


def torch_context_family() -> Iterator[str]:
    contexts: list[Any] = [
        "[1,",
        '["a", "a"]',
        "[1, 1.0]",
        "[true, 1]",
        '[null, "null"]',
        "[NaN]",
        "[Infinity]",
        "[1e999]",
        "[" + "9" * 5000 + "]",
        '[{"a": 1, "a": 2}]',
        "[[1, 2]]",
        '[{"x": 1}]',
        "{}",
        '"str"',
        "null",
        "-1",
        "3",
        json.dumps([k * M61 for k in range(1, 200)]),
        json.dumps([k * M61 for k in range(1, 200)] + [M61]),
        1,
        None,
        ["a"],
    ]
    for name in (
        "builtins.dict",
        "collections.OrderedDict",
        "collections.deque",
        "builtins.tuple",
        "builtins.list",
        "torch.Size",
        "collections.namedtuple",
        "tests.hfuzz.Typed",
        "tests.hfuzz.Pair",
        "torch.fx.immutable_collections.immutable_dict",
    ):
        for context in contexts:
            for k in (0, 1, 2, 199):
                yield json.dumps([1, _node(name, context, [LEAF] * k)])


def torch_name_family() -> Iterator[str]:
    import torch.utils._pytree as pt

    for name in [*NAMES, pt.NO_SERIALIZED_TYPE_NAME_FOUND, "tests.hfuzz.Mode", None, 5, ["x"]]:
        yield json.dumps([1, _node(name, "null", [LEAF])])
        yield json.dumps([1, _node("collections.namedtuple", name, [LEAF, LEAF])])


def torch_mutation_family(texts: list[str], n: int) -> Iterator[str]:
    rng = random.Random(1313)
    values: list[Any] = [None, 0, -1, 2**70, "", "builtins.dict", "os.system", [], {}, [LEAF]]
    for _ in range(n):
        doc = json.loads(rng.choice(texts))
        objs = objects(doc)
        target = rng.choice(objs)
        key = rng.choice(list(target)) if target else "type"
        target[key] = copy.deepcopy(rng.choice(values))
        yield json.dumps(doc)


@pytest.fixture
def marker_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, Path]:
    name = f"tc_hfuzz_marker_{uuid.uuid4().hex[:8]}"
    marker = tmp_path / "imported"
    (tmp_path / f"{name}.py").write_text(
        f"open({str(marker)!r}, 'w').write('x')\nimport enum\n"
        "class E(enum.Enum):\n    A = 1\ndef factory():\n    return 0\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    return name, marker


@pytest.mark.slow
@pytest.mark.torch
def test_the_torch_loader_under_attack(
    record_property: Any, capsys: Any, marker_module: tuple[str, Path]
) -> None:
    pytest.importorskip("torch")
    import torch.utils._pytree as pt

    import treeclass.torch as tct

    name, marker = marker_module
    tally = make_tally("torch")
    texts = _torch_texts()
    before = set(sys.modules)

    def check(family: str, data: Any) -> None:
        loaded, spec = tally.attempt(
            lambda: tct.treespec_loads(data), data, tc.TreespecLoadError, family
        )
        if not loaded:
            return
        if family == "module paths":  # every case names a module or an enum by path
            tally.fail(data, f"accepted: {spec!r:.300}", family)
            return
        try:
            assert isinstance(spec, pt.TreeSpec)
            again = tct.treespec_loads(pt.treespec_dumps(spec))
            assert again == spec
        except Exception as e:
            tally.fail(data, e, family)

    families: list[tuple[str, Callable[[], Iterator[Any]]]] = [
        ("module paths", lambda: module_path_family(texts, name)),
        ("structure", lambda: torch_structure_family(texts)),
        ("contexts", torch_context_family),
        ("names", torch_name_family),
        ("mutations", lambda: torch_mutation_family(texts, 3000)),
    ]
    for family, make in families:
        for data in make():
            check(family, data)
    imported = set(sys.modules) - before
    foreign = sorted(m for m in imported if not m.startswith(("torch", "treeclass", "sympy")))
    if marker.exists() or name in sys.modules or foreign:
        tally.fail(foreign, "the loader imported these modules", "module paths")
    assert tally.total > 3000
    tally.report(record_property, capsys)
