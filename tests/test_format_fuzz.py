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
import traceback
from typing import Any, NamedTuple

import pytest
from _treespec_schema import is_valid_document
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import treeclass as tc
from treeclass._treespec.format import FORMAT_ID

MUTATION_CASES = 24_000
HYPOTHESIS_EXAMPLES = 1_500
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


class Failures:
    def __init__(self) -> None:
        self.cases = 0
        self.rejected = 0
        self.accepted = 0
        self.failures: list[str] = []
        self.schema_checked: set[Any] = set()

    def check(self, data: Any) -> None:
        self.cases += 1
        try:
            spec = tc.treespec_loads(data)
        except tc.TreespecLoadError as e:
            self.rejected += 1
            if not isinstance(e, ValueError) or not str(e):
                self.failures.append(f"{data!r:.300}: bad error {e!r}")
            return
        except BaseException as e:  # anything else breaks the promise
            if isinstance(e, KeyboardInterrupt):
                raise
            self.failures.append(f"{data!r:.300}\n{''.join(traceback.format_exception(e))[-1500:]}")
            return
        self.accepted += 1
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
            self.failures.append(
                f"accepted {data!r:.300}\n{''.join(traceback.format_exception(e))[-1500:]}"
            )

    def report(self, label: str, record_property: Any, capsys: Any) -> None:
        with capsys.disabled():
            print(
                f"\n[fuzz] {label}: {self.cases} cases, {self.rejected} rejected with "
                f"TreespecLoadError, {self.accepted} accepted (and re-checked)"
            )
        record_property(f"fuzz_cases_{label}", self.cases)
        assert not self.failures, (
            f"{len(self.failures)} of {self.cases} cases broke the loader's promise:\n\n"
            + "\n\n".join(self.failures[:5])
        )


# --- mutations --------------------------------------------------------------------------------

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
    "tuple",
    "list",
    "dict",
    "None",
    "collections.OrderedDict",
    "collections.defaultdict",
    "tests.fuzz.Node",
    "tests.fuzz.Leafy",
    "tests.fuzz.Pt",
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


def _deep(n: int) -> Any:
    v: Any = 1
    for _ in range(n):
        v = [v]
    return v


def _containers(value: Any) -> list[Any]:
    """Every list and dict inside ``value`` (iteratively)."""
    out: list[Any] = []
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, list):
            out.append(v)
            stack.extend(v)
        elif isinstance(v, dict):
            out.append(v)
            stack.extend(v.values())
    return out


def _random_value(rng: random.Random) -> Any:
    r = rng.random()
    if r < 0.02:
        return _deep(rng.choice((50, 150, 600)))  # deeper ones come as text tokens
    if r < 0.1:
        return [_random_value(rng) for _ in range(rng.randrange(3))]
    return json.loads(json.dumps(rng.choice(_VALUES)))


def mutate_structure(text: str, rng: random.Random) -> str:
    doc = json.loads(text)
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        conts = _containers(doc)
        c = rng.choice(conts)
        op = rng.randrange(6)
        if isinstance(c, list):
            if not c or op == 0:
                c.insert(rng.randrange(len(c) + 1), _random_value(rng))
            elif op == 1:
                del c[rng.randrange(len(c))]
            elif op == 2 and len(c) > 1:
                i, j = rng.randrange(len(c)), rng.randrange(len(c))
                c[i], c[j] = c[j], c[i]
            elif op == 3:
                i = rng.randrange(len(c))
                if type(c[i]) is int:
                    c[i] += rng.choice((-1, 1, 2**64, -(2**64)))
                else:
                    c[i] = _random_value(rng)
            else:
                c[rng.randrange(len(c))] = _random_value(rng)
        else:
            keys = list(c)
            if not keys or op == 0:
                c[rng.choice(("data", "none", "static", "fields", "x", "tuple", "version"))] = (
                    _random_value(rng)
                )
            elif op == 1:
                del c[rng.choice(keys)]
            elif op == 2:
                k = rng.choice(keys)
                c[k + rng.choice(("", "x", "_"))[:1] or k.upper()] = c.pop(k)
            elif op == 3:
                k = rng.choice(keys)
                if type(c[k]) is int:
                    c[k] += rng.choice((-1, 1, 10**30))
                else:
                    c[k] = _random_value(rng)
            else:
                c[rng.choice(keys)] = _random_value(rng)
    return json.dumps(doc, separators=(",", ":"), sort_keys=rng.random() < 0.5)


def mutate_text(text: str, rng: random.Random) -> str:
    n = len(text)
    op = rng.randrange(8)
    i = rng.randrange(n + 1)
    j = min(n, i + rng.randrange(1, 40))
    if op == 0:
        return text[:i]  # truncated
    if op == 1:
        return text[:i] + text[j:]
    if op == 2:
        return text[:i] + "".join(rng.choice(_CHARS) for _ in range(rng.randrange(1, 4))) + text[i:]
    if op == 3:
        return text[:i] + rng.choice(_CHARS) + text[i + 1 :]
    if op == 4:
        return text[:i] + text[i:j] + text[i:]
    if op == 5:  # replace a number or a string with a token
        return text[:i] + rng.choice(_TOKENS) + text[j:]
    if op == 6:
        k = rng.randrange(n + 1)
        a, b = sorted((i, k))
        return text[b:] + text[a:b] + text[:a]
    return text + rng.choice(("", " ", "x", "]", "}", "null", text))


def mutate_bytes(text: str, rng: random.Random) -> bytes:
    data = bytearray(text.encode())
    for _ in range(rng.randrange(1, 4)):
        data[rng.randrange(len(data))] = rng.randrange(256)
    return bytes(data)


@pytest.mark.slow
def test_mutation_fuzz(record_property: Any, capsys: Any) -> None:
    rng = random.Random(20240611)
    docs = corpus()
    f = Failures()
    for d in docs:
        f.check(d)  # the originals load
    assert f.accepted == len(docs)
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
    while f.cases < MUTATION_CASES:
        d = rng.choice(docs)
        r = rng.random()
        if r < 0.5:
            f.check(mutate_structure(d, rng))
        elif r < 0.9:
            f.check(mutate_text(d, rng))
        else:
            f.check(mutate_bytes(d, rng))
    assert f.cases >= 10_000
    f.report("mutations", record_property, capsys)


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
names = st.sampled_from(
    [
        "tuple",
        "list",
        "dict",
        "None",
        "collections.OrderedDict",
        "collections.defaultdict",
        "tests.fuzz.Node",
        "tests.fuzz.Leafy",
        "tests.fuzz.Pt",
    ]
) | st.text(max_size=8)
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
def test_hypothesis_fuzz(record_property: Any, capsys: Any) -> None:
    f = Failures()

    @settings(
        max_examples=HYPOTHESIS_EXAMPLES,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(st.text() | st.binary() | documents.map(json.dumps))
    def case(data: Any) -> None:
        f.check(data)

    case()
    assert f.cases >= HYPOTHESIS_EXAMPLES
    f.report("hypothesis", record_property, capsys)
