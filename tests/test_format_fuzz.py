"""Fuzzing the loader: every bad input is a TreespecLoadError, never anything else.

Two sources of inputs, both deterministic (the same cases on every run):

- a seeded mutation loop over valid documents written by treespec_dumps (text edits --
  truncation, deletion, insertion, duplication, byte flips -- and structural edits -- a value
  replaced by another JSON value anywhere, list items and object keys added, removed, swapped
  or renamed, numbers nudged, overflowing and non-finite literals, deep nesting);
- Hypothesis (``derandomize=True``) drawing raw text, raw bytes and JSON documents of the
  right overall shape with random nodes and states.

A case passes if loading raises :class:`treeclass.TreespecLoadError`, or succeeds with a
spec that dumps and loads back to itself (and, for the first 300 distinct accepted documents
of each run -- jsonschema is slow -- a document the JSON Schema accepts). The number of
cases run is printed and recorded (``record_property("fuzz_cases", n)``).
"""

from __future__ import annotations

import collections
import dataclasses
import enum
import json
import math
import random
from typing import Any, NamedTuple

import pytest
from _budget import cases
from _mutate import (
    JsonMutator,
    Splicer,
    Tally,
    append,
    delete,
    duplicate,
    flip,
    insert,
    one_of,
    overwrite,
    random_chars,
    replace_span,
    rotate,
    run_hypothesis,
    truncate,
)
from _treespec_schema import is_valid_document
from hypothesis import strategies as st

import treeclass as tc
from treeclass._treespec.format import FORMAT_ID

MUTATION_CASES = cases(24_000)
HYPOTHESIS_EXAMPLES = cases(1_500)
SCHEMA_CHECKS = 300

# --- registered classes of the corpus ---------------------------------------------------------


class Kind(enum.Enum):
    A = "a"
    B = (1, 2)


@dataclasses.dataclass(frozen=True)
class Opts:
    depth: int
    names: tuple[str, ...] = ()


tc.register_static(Kind, name="tests.fuzz.Kind")
tc.register_static(Opts, name="tests.fuzz.Opts")


@tc.pytree_dataclass(name="tests.fuzz.Node")
class Node:
    left: Any
    right: Any = None
    kind: Any = tc.field(static=True, default=Kind.A)
    opts: Any = tc.field(static=True, default=Opts(1))


@tc.pytree_dataclass(name="tests.fuzz.Leafy", return_none_fields=True)
class Leafy:
    v: Any
    w: Any = None


class Pt(NamedTuple):
    x: Any
    y: Any


tc.register_namedtuple(Pt, name="tests.fuzz.Pt")


def corpus() -> list[str]:
    """Valid documents covering every node kind and static form."""
    trees: list[Any] = [
        1,
        None,
        (),
        [1, (2, None), {"a": 3, "b": [4, 5]}],
        {1: "x", 2: ("y",), (3, "z"): None},
        collections.OrderedDict([("q", 1), ("p", [2])]),
        collections.defaultdict(list, {"k": (1, 2)}),
        Pt(Node(1, None), Leafy(None)),
        Node(Node(1, 2, Kind.B, Opts(2, ("a", "b"))), [Leafy(3, 4)]),
        [
            Node(i, kind=v)
            for i, v in enumerate(
                (
                    None,
                    True,
                    -(2**70),
                    1.25,
                    -math.inf,
                    math.nan,
                    "s",
                    b"\x00b",
                    (1, [2, (3,)]),
                    {"d": frozenset({1, "x"})},
                    Kind.B,
                    Opts(3),
                )
            )
        ],
        {"deep": [[[[[[[[1]]]]]]]], "pts": [Pt(i, [i]) for i in range(5)]},
    ]
    return [tc.treespec_dumps(tc.tree_structure(t)) for t in trees]


# --- the check every case goes through --------------------------------------------------------


class Checker:
    """Loads each case; a loaded spec must match the JSON Schema and dump and load back."""

    def __init__(self, label: str) -> None:
        self.tally = Tally(
            "fuzz",
            label,
            refusal="TreespecLoadError",
            accepted="and re-checked",
            record=f"fuzz_cases_{label}",
        )
        self.schema_checked: set[Any] = set()

    def check(self, data: Any) -> None:
        loaded, spec = self.tally.attempt(
            lambda: tc.treespec_loads(data), data, tc.TreespecLoadError
        )
        if not loaded:
            return
        try:
            assert isinstance(spec, tc.TreeSpec)
            # jsonschema takes ~10 ms a document: check the first distinct accepted ones.
            if len(self.schema_checked) < SCHEMA_CHECKS and data not in self.schema_checked:
                self.schema_checked.add(data)
                doc = json.loads(data)
                assert is_valid_document(doc), "accepted, but the JSON Schema rejects it"
            text = tc.treespec_dumps(spec)
            assert tc.treespec_loads(text) == spec
        except Exception as e:
            self.tally.fail(data, e, "accepted")


# --- mutations --------------------------------------------------------------------------------

#: The names of the corpus's nodes.
NODE_NAMES = (
    "tuple",
    "list",
    "dict",
    "None",
    "collections.OrderedDict",
    "collections.defaultdict",
    "tests.fuzz.Node",
    "tests.fuzz.Leafy",
    "tests.fuzz.Pt",
)
_CHARS = '[]{}",:0123456789-+.eE nulltruefalse\\\x00é\ud800 NaNInfinity'
_TOKENS = [
    "1e999",
    "-1e999",
    "NaN",
    "Infinity",
    "null",
    "true",
    "[]",
    "{}",
    '""',
    "-0",
    "1e308",
    "9" * 4400,
    "[" * 2000,
    '"\\ud800"',
    '"tuple"',
    '"tests.fuzz.Node"',
    '{"float":"nan"}',
    '{"int":"0x1f"}',
    '{"registered":["tests.fuzz.Kind","a"]}',
]
_VALUES: list[Any] = [
    None,
    True,
    False,
    0,
    1,
    -1,
    2,
    3,
    2**70,
    10**400,
    -(10**30),
    1.5,
    -0.0,
    1e300,
    "",
    "x",
    "a",
    *NODE_NAMES,
    "tests.fuzz.Unknown",
    "os.system",
    FORMAT_ID,
    [],
    [None],
    [None, None],
    ["tuple", None, 0],
    ["list", None, 1],
    {},
    {"tuple": []},
    {"tuple": [1, [2]]},
    {"dict": {"a": 1}},
    {"frozenset": [1, 1]},
    {"frozenset": [[1]]},
    {"bytes": "AA=="},
    {"bytes": "A"},
    {"int": "-0x10"},
    {"int": "0x"},
    {"float": "nan"},
    {"float": "-inf"},
    {"registered": ["tests.fuzz.Kind", "a"]},
    {"registered": ["tests.fuzz.Kind", "zz"]},
    {"registered": ["tests.fuzz.Opts", {"dict": {"depth": 1}}]},
    {"registered": ["tests.fuzz.Opts", {"dict": {"depth": [1]}}]},
    {"registered": ["tests.fuzz.Opts", 5]},
    {"registered": ["tests.fuzz.Nope", 5]},
    {"data": [], "none": [], "static": {}},
    {"data": ["left"], "none": ["right"], "static": {}},
    {"fields": ["x", "y"]},
    {"factory": "list", "keys": []},
    {"factory": "eval", "keys": []},
]


MUTATOR = JsonMutator(
    _VALUES,
    new_keys=("data", "none", "static", "fields", "x", "tuple", "version"),
    suffixes=("", "x", "_"),
    list_nudges=(-1, 1, 2**64, -(2**64)),
    dict_nudges=(-1, 1, 10**30),
    edits=(1, 1, 1, 2, 3),
    deep=True,
)
mutate_text = Splicer(
    (
        truncate,
        delete(),
        insert(random_chars(_CHARS, 1, 4)),
        overwrite(one_of(_CHARS)),
        duplicate,
        replace_span(one_of(_TOKENS)),  # a number or a string replaced with a token
        rotate,
        append(lambda rng, text: rng.choice(("", " ", "x", "]", "}", "null", text))),
    ),
    span=40,
)


def mutate_structure(text: str, rng: random.Random) -> str:
    doc = MUTATOR.mutate(json.loads(text), rng)
    return json.dumps(doc, separators=(",", ":"), sort_keys=rng.random() < 0.5)


def mutate_bytes(text: str, rng: random.Random) -> bytes:
    return flip(text.encode(), rng)


@pytest.mark.slow
@pytest.mark.fuzz
def test_mutation_fuzz(record_property: Any, capsys: Any) -> None:
    rng = random.Random(20240611)
    docs = corpus()
    f = Checker("mutations")
    for d in docs:
        f.check(d)  # the originals load
    assert f.tally.accepted == len(docs)
    # Fixed bad-input families, once each, so that they are in every run.
    for special in (
        "",
        "[" * 100_000,
        '{"a":' * 100_000,
        '{"format":"treeclass.treespec","version":1,"leaves":1e999,"nodes":[null]}',
        '{"format":"treeclass.treespec","version":1,"leaves":1,"nodes":[null],"version":99}',
        b"\xef\xbb\xbf" + docs[0].encode(),  # a UTF-8 byte order mark
        docs[0].encode("utf-16"),
    ):
        f.check(special)
    while f.tally.total < MUTATION_CASES:
        d = rng.choice(docs)
        r = rng.random()
        if r < 0.5:
            f.check(mutate_structure(d, rng))
        elif r < 0.9:
            f.check(mutate_text(d, rng))
        else:
            f.check(mutate_bytes(d, rng))
    f.tally.report(record_property, capsys)


# --- hypothesis -------------------------------------------------------------------------------

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=6)
    | st.sampled_from(["tuple", "dict", "float", "int", "bytes", "registered", "nan", "inf"]),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=10,
)
names = st.sampled_from(NODE_NAMES) | st.text(max_size=8)
states = (
    json_values
    | st.fixed_dictionaries(
        {
            "data": st.lists(st.sampled_from(["left", "right", "v", "w", "zz"]), max_size=3),
            "none": st.lists(st.sampled_from(["left", "right", "v", "w"]), max_size=2),
            "static": st.dictionaries(
                st.sampled_from(["kind", "opts", "q"]), json_values, max_size=2
            ),
        }
    )
    | st.fixed_dictionaries({"fields": st.lists(st.sampled_from(["x", "y", "z"]), max_size=3)})
    | st.lists(json_values, max_size=3)
)
entries = st.none() | st.tuples(names, states, st.integers(-1, 4)).map(list)
documents = st.fixed_dictionaries(
    {
        "format": st.just(FORMAT_ID) | st.text(max_size=3),
        "version": st.just(1) | st.integers(-2, 3),
        "leaves": st.integers(0, 6),
        "nodes": st.lists(entries, max_size=8),
    }
)


@pytest.mark.slow
@pytest.mark.fuzz
def test_hypothesis_fuzz(record_property: Any, capsys: Any) -> None:
    f = Checker("hypothesis")
    run_hypothesis(
        st.text() | st.binary() | documents.map(json.dumps), HYPOTHESIS_EXAMPLES, f.check
    )
    assert f.tally.total >= HYPOTHESIS_EXAMPLES
    f.tally.report(record_property, capsys)
