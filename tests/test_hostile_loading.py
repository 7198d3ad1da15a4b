"""The embedded loader under hostile documents (issue 13, "Loading: safe, and linear").

Every failure of ``tc.treespec_loads`` -- with or without ``to=`` -- is a ``TreespecLoadError``;
documents that a class could not have produced are refused; a document loads or is refused in
time linear in its size. The size tests load documents of a few MiB in a fresh process and check
what comes out; they measure no time: the process's timeout only guards against a hang (a linear
loader needs about a second). How long loading takes, against the quadratic code this guards
against, is measured by ``benchmarks/bench_hostile.py``.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import pickle
from typing import Any

import attrs
import pytest
from _subproc import run_script

import treeclass as tc

DOC_HEAD = '{"format":"treeclass.treespec","leaves":%d,"nodes":['
DOC_TAIL = '],"version":1}'

# A hang guard, not a speed check (a linear loader needs 1-2 s here): timings are in
# benchmarks/bench_hostile.py.
TIMEOUT = 600.0
M61 = 2**61 - 1  # every k * M61 hashes to 0: ints that all collide in a set or dict


def _doc(leaves: int, nodes: list[Any]) -> str:
    return json.dumps(
        {"format": "treeclass.treespec", "leaves": leaves, "nodes": nodes, "version": 1},
        separators=(",", ":"),
    )


# --- huge documents -----------------------------------------------------------------------------

# Each script builds its document, loads it and, if it loads, uses it; prints what happened.
_SIZE_SCRIPT = """
import json, sys
import treeclass as tc
kind, n = sys.argv[1], int(sys.argv[2])
M61 = 2**61 - 1
if kind == "arity":
    doc = '{"format":"treeclass.treespec","leaves":0,"nodes":[' + ",".join(
        ['["",0,999999]'] * n) + '],"version":1}'
    static = None
elif kind == "dict_keys":
    keys = [{"int": hex(k * M61)} for k in range(1, n + 1)]
    nodes = [["dict", keys, n]] + [None] * n
    doc = json.dumps({"format": "treeclass.treespec", "leaves": n, "nodes": nodes,
                      "version": 1}, separators=(",", ":"))
elif kind == "frozenset_static":
    from typing import Any
    @tc.pytree_dataclass(name="tests.hostile.Flood")
    class Flood:
        x: Any
        s: Any = tc.field(static=True, default=None)
    items = [{"int": hex(k * M61)} for k in range(1, n + 1)]
    state = {"data": ["x"], "none": [], "static": {"s": {"frozenset": items}}}
    doc = json.dumps({"format": "treeclass.treespec", "leaves": 1,
                      "nodes": [["tests.hostile.Flood", state, 1], None], "version": 1},
                     separators=(",", ":"))
out = {"bytes": len(doc)}
try:
    spec = tc.treespec_loads(doc)
except tc.TreespecLoadError as e:
    out["refused"] = str(e)[:300]
else:
    # Accepted: everything one does with a spec must stay linear too.
    other = tc.treespec_loads(doc)
    out["eq"] = spec == other
    out["hash"] = hash(spec) == hash(other)
    out["dumps"] = tc.treespec_loads(tc.treespec_dumps(spec)) == spec
    tree = spec.unflatten(list(range(spec.num_leaves)))
    out["flatten"] = tc.tree_structure(tree) == spec
print(json.dumps(out))
"""


def _run_size(kind: str, n: int) -> dict[str, Any]:
    outcome = run_script(_SIZE_SCRIPT, kind, str(n), timeout=TIMEOUT)
    assert not outcome.timed_out, (
        f"loading (and using) a {kind} document of {n} entries hung: still running after "
        f"{TIMEOUT:.0f} s"
    )
    result: dict[str, Any] = outcome.report()
    return result


@pytest.mark.slow
def test_a_huge_document_of_impossible_arities_is_refused() -> None:
    # 300,000 nodes of ["",0,999999] (4.2 MB): the arity check slices nodes[i:i+k] for every
    # node, ~n^2/2 list items.
    out = _run_size("arity", 300_000)
    assert "refused" in out, out


@pytest.mark.slow
def test_dict_keys_that_all_hash_alike_load_or_are_refused() -> None:
    # 200,000 int keys k * (2**61 - 1), all with hash 0 (7.4 MB).
    out = _run_size("dict_keys", 200_000)
    assert "refused" in out or all(out[k] for k in ("eq", "hash", "dumps", "flatten")), out


@pytest.mark.slow
def test_a_frozenset_static_of_colliding_ints_loads_or_is_refused() -> None:
    out = _run_size("frozenset_static", 150_000)
    assert "refused" in out or all(out[k] for k in ("eq", "hash", "dumps", "flatten")), out


# --- errors that leak through to= -------------------------------------------------------------

MIXED_KEYS = {(1, 2): 1, 3: 2, "s": 3}


@pytest.mark.parametrize("to", ["jax", "torch", "optree"])
def test_a_document_treeclass_wrote_never_leaks_a_framework_error(to: str) -> None:
    pytest.importorskip({"jax": "jax", "torch": "torch", "optree": "optree"}[to])
    doc = tc.treespec_dumps(tc.tree_structure(MIXED_KEYS))
    try:
        tc.treespec_loads(doc, to=to)  # type: ignore[call-overload]
    except tc.TreespecLoadError as e:
        assert "dict" in str(e)
    # Any other exception fails the test (JAX raises its sorting ValueError / TypeError).


def _nested_list_doc(depth: int) -> str:
    tree: Any = 1
    for _ in range(depth):
        tree = [tree]
    return tc.treespec_dumps(tc.tree_structure(tree))


def test_a_structure_too_deep_for_jax_is_refused_before_jax_sees_it() -> None:
    # jax 0.10's C++ pytree fails near the recursion limit with a SystemError that leaves the
    # interpreter broken; a document may nest that deep, so treeclass refuses first.
    pytest.importorskip("jax")
    assert tc.treespec_loads(_nested_list_doc(400), to="jax").num_leaves == 1
    with pytest.raises(tc.TreespecLoadError, match=r"nests 1201 levels deep; JAX .*to=None"):
        tc.treespec_loads(_nested_list_doc(1200), to="jax")


def test_a_structure_too_deep_for_torch_is_a_load_error_saying_so() -> None:
    pytest.importorskip("torch")
    with pytest.raises(tc.TreespecLoadError, match=r"nests too deeply for torch.*to=None"):
        tc.treespec_loads(_nested_list_doc(1200), to="torch")


@tc.pytree_dataclass(name="tests.hostile.InitChecked", unflatten_calls_init=True)
class InitChecked:
    x: float
    n: int = tc.field(static=True, default=1)

    def __post_init__(self) -> None:
        if self.n < 0:
            raise ValueError("n must be >= 0")


@pytest.mark.parametrize("to", [None, "jax", "torch", "optree"])
def test_a_tampered_static_of_an_init_checked_class_is_a_load_error(to: str | None) -> None:
    if to is not None:
        pytest.importorskip({"jax": "jax", "torch": "torch", "optree": "optree"}[to])
    doc = tc.treespec_dumps(tc.tree_structure(InitChecked(1.0, 2)))
    tampered = doc.replace('"n":2', '"n":-5')
    assert tampered != doc
    try:
        spec = tc.treespec_loads(tampered, to=to)  # type: ignore[call-overload]
    except tc.TreespecLoadError as e:
        assert "InitChecked" in str(e)
        return
    # Loading without a framework may keep the value (no __init__ runs); building the
    # framework's structure runs __post_init__, and its failure must be a load error.
    assert to is None, f"to={to!r} accepted a state the class's __post_init__ refuses"
    assert isinstance(spec, tc.TreeSpec)


# --- statics a class could not have produced --------------------------------------------------


class Act(enum.Enum):
    RELU = "relu"
    GELU = "gelu"


tc.register_static(Act, name="tests.hostile.Act")


@tc.pytree_dataclass(name="tests.hostile.Typed", frozen=True)
class Typed:
    x: Any
    tag: str = tc.field(static=True, default="a")
    n: int = tc.field(static=True, default=1)
    scale: float = tc.field(static=True, default=1.0)
    flag: bool = tc.field(static=True, default=False)
    dims: tuple[int, ...] = tc.field(static=True, default=(1, 2))
    names: frozenset[str] = tc.field(static=True, default=frozenset({"a"}))
    act: Act = tc.field(static=True, default=Act.RELU)
    anything: Any = tc.field(static=True, default=None)


def _typed_doc() -> str:
    return tc.treespec_dumps(tc.tree_structure(Typed(1.0)))


def _with_static(field: str, encoded: Any) -> str:
    doc = json.loads(_typed_doc())
    doc["nodes"][0][1]["static"][field] = encoded
    return json.dumps(doc)


def test_the_untampered_typed_document_loads() -> None:
    spec = tc.treespec_loads(_typed_doc())
    obj = spec.unflatten([1.0])
    assert obj == Typed(1.0)
    assert hash(obj) == hash(Typed(1.0))
    # An int where a float is declared is what Python (and type checkers) allow.
    loaded = tc.treespec_loads(_with_static("scale", 2)).unflatten([1.0])
    assert loaded.scale == 2


@pytest.mark.parametrize(
    ("field", "encoded"),
    [
        ("tag", [1, 2]),  # a list for a str field
        ("tag", 5),
        ("n", "five"),
        ("n", {"tuple": [1]}),
        ("scale", "1.0"),
        ("flag", "yes"),
        ("dims", [1, 2]),  # a list for tuple[int, ...] (and unhashable in a frozen class)
        ("names", ["a"]),  # a list for frozenset[str]
        ("names", {"tuple": ["a"]}),
        ("act", "relu"),  # the raw value, not the registered static type
    ],
)
def test_a_static_contradicting_a_plain_annotation_is_refused(field: str, encoded: Any) -> None:
    with pytest.raises(tc.TreespecLoadError, match=rf"Typed.*{field}|{field}.*Typed"):
        tc.treespec_loads(_with_static(field, encoded))


def test_an_unhashable_static_of_a_hashable_class_is_refused() -> None:
    # ``anything: Any`` is not checked against its annotation, but the class is frozen and
    # hashable, so a list there would make hash(obj) raise.
    assert hash(Typed(1.0, anything=(1, 2)))  # a hashable value is fine
    with pytest.raises(tc.TreespecLoadError, match=r"anything.*hashable|hashable.*anything"):
        tc.treespec_loads(_with_static("anything", [1, 2]))


@attrs.frozen
class Validated:
    x: Any
    label: str = attrs.field(
        default="ok", validator=attrs.validators.instance_of(str), metadata={"static": True}
    )


tc.register_dataclass(Validated, name="tests.hostile.Validated")


def test_a_static_that_bypasses_an_attrs_type_validator_is_refused() -> None:
    doc = json.loads(tc.treespec_dumps(tc.tree_structure(Validated(1.0))))
    doc["nodes"][0][1]["static"]["label"] = ["not", "a", "str"]
    with pytest.raises(tc.TreespecLoadError, match="label"):
        tc.treespec_loads(json.dumps(doc))


@dataclasses.dataclass(frozen=True)
class Opts:
    depth: int
    names: tuple[str, ...] = ()


tc.register_static(Opts, name="tests.hostile.Opts")


@pytest.mark.parametrize(
    "depth",
    [{"float": "nan"}, "3", [3], {"tuple": [3]}],
    ids=["nan", "str", "list", "tuple"],
)
def test_a_field_of_a_registered_static_type_is_checked_against_its_annotation(
    depth: Any,
) -> None:
    # A frozen dataclass registered with register_static is rebuilt from its fields; a field
    # annotated int cannot hold a nan (which would not even equal itself on Python 3.13, where
    # dataclass __eq__ compares field by field).
    doc = json.loads(_typed_doc())
    good = {"registered": ["tests.hostile.Opts", {"dict": {"depth": 3, "names": {"tuple": []}}}]}
    doc["nodes"][0][1]["static"]["anything"] = good
    assert tc.treespec_loads(json.dumps(doc)).unflatten([1.0]).anything == Opts(3)
    good["registered"][1]["dict"]["depth"] = depth
    with pytest.raises(tc.TreespecLoadError, match=r"Opts.*field 'depth'.*int"):
        tc.treespec_loads(json.dumps(doc))


@dataclasses.dataclass(frozen=True)
class LooseOpts:
    depth: int = None  # type: ignore[assignment]  # a default the annotation does not admit


tc.register_static(LooseOpts, name="tests.hostile.LooseOpts")


@tc.pytree_dataclass(name="tests.hostile.Loose")
class Loose:
    x: Any
    n: int = tc.field(static=True, default=None)  # type: ignore[assignment]
    opts: LooseOpts = tc.field(static=True, default=LooseOpts())


def test_a_default_the_annotation_does_not_admit_still_round_trips() -> None:
    # ``n: int = None`` is common (HuggingFace-style configs): what the class writes loads.
    spec = tc.tree_structure(Loose(1.0))
    assert tc.treespec_loads(tc.treespec_dumps(spec)) == spec
    # Anything else must still fit the annotation.
    doc = json.loads(tc.treespec_dumps(spec))
    doc["nodes"][0][1]["static"]["n"] = "five"
    with pytest.raises(tc.TreespecLoadError, match=r"static field 'n' of .*Loose"):
        tc.treespec_loads(json.dumps(doc))
    doc = json.loads(tc.treespec_dumps(spec))
    doc["nodes"][0][1]["static"]["opts"]["registered"][1]["dict"]["depth"] = "five"
    with pytest.raises(tc.TreespecLoadError, match=r"LooseOpts.*field 'depth'"):
        tc.treespec_loads(json.dumps(doc))


# --- huge ints ----------------------------------------------------------------------------------


@tc.pytree_dataclass(name="tests.hostile.Big")
class Big:
    x: Any
    s: Any = tc.field(static=True, default=0)


BIG_HEX = "0x" + "f" * 8598  # 34,392 bits: more than int.__str__ shows (4,300 digits)


def test_a_huge_static_int_never_breaks_repr_or_errors() -> None:
    doc = tc.treespec_dumps(tc.tree_structure(Big(1.0)))
    tampered = doc.replace('"s":0', '"s":{"int":"' + BIG_HEX + '"}')
    assert tampered != doc
    try:
        spec = tc.treespec_loads(tampered)
    except tc.TreespecLoadError:
        return  # refusing it is fine
    assert "Big" in repr(spec)
    with pytest.raises(tc.StructureMismatchError, match="leaves"):
        spec.unflatten([1, 2])
    obj = spec.unflatten([1.0])
    with pytest.raises(tc.StructureMismatchError):
        tc.tree_map(lambda a, b: a, obj, [1])


def test_a_huge_static_int_made_in_process_has_a_repr() -> None:
    spec = tc.tree_structure(Big(1.0, 2**34_000))
    assert "Big" in repr(spec)
    with pytest.raises(tc.StructureMismatchError, match="leaves"):
        spec.unflatten([1, 2])


# --- duplicate object keys ----------------------------------------------------------------------


def _dup_cases() -> list[str]:
    good = tc.treespec_dumps(tc.tree_structure(Typed(1.0)))
    assert good.startswith('{"format":"treeclass.treespec",')
    head = '{"format":"treeclass.treespec",'
    top = good.replace(head, head + '"format":"treeclass.treespec",', 1)
    state = good.replace('{"data":["x"]', '{"data":["x"],"data":["x"]', 1)
    static = good.replace('"tag":"a"', '"tag":"a","tag":"b"', 1)
    tagged = good.replace('{"tuple":[1,2]}', '{"tuple":[1,2],"tuple":[3]}', 1)
    dict_static = json.loads(good)
    dict_static["nodes"][0][1]["static"]["anything"] = {"dict": {"k": 1}}
    dict_text = json.dumps(dict_static, separators=(",", ":")).replace('{"k":1}', '{"k":1,"k":2}')
    cases = [top, state, static, tagged, dict_text]
    for c in cases:
        assert c != good
        json.loads(c)  # valid JSON (with a duplicate key, which json.loads lets through)
    return cases


@pytest.mark.parametrize("index", range(5))
def test_duplicate_object_keys_are_refused(index: int) -> None:
    text = _dup_cases()[index]
    with pytest.raises(tc.TreespecLoadError, match=r"(?i)twice|duplicate"):
        tc.treespec_loads(text)


# --- pickle goes through the same loader ------------------------------------------------------


def test_a_pickled_spec_with_a_tampered_static_is_refused() -> None:
    blob = pickle.dumps(tc.tree_structure(Typed(1.0)))
    tampered = blob.replace(b'"tag":"a"', b'"tag":[1]')
    assert tampered != blob
    with pytest.raises(tc.TreespecLoadError, match="tag"):
        pickle.loads(tampered)


@pytest.mark.parametrize("sign", ["", "-"])
def test_plain_json_ints_of_4300_digits_load_and_dump_again(sign: str) -> None:
    doc = json.loads(tc.treespec_dumps(tc.tree_structure(Big(1.0))))
    doc["nodes"][0][1]["static"]["s"] = 0
    text = json.dumps(doc).replace('"s": 0', f'"s": {sign}{"9" * 4300}')
    spec = tc.treespec_loads(text)
    assert spec.unflatten([1.0]).s == int(f"{sign}{'9' * 4300}")
    assert tc.treespec_loads(tc.treespec_dumps(spec)) == spec
    too_long = text.replace(f"{sign}{'9' * 4300}", f"{sign}{'9' * 4301}")
    with pytest.raises(tc.TreespecLoadError, match="4301 digits is longer than 4300 digits"):
        tc.treespec_loads(too_long)
