"""Per-class auxdata getstate / setstate: exact JSON round trips, register_static, old blobs."""

from __future__ import annotations

import collections
import dataclasses
import enum
import json
import math
from typing import Any, NamedTuple

import pytest
from _budget import cases
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import treeclass as tc
from treeclass._core.fields import describe
from treeclass._core.nodes import NodeType, class_node, namedtuple_node
from treeclass._core.statics import MAX_STATIC_DEPTH, decode_static, encode_static
from treeclass._treespec.format import aux_to_bytes, state_from_bytes


def same(a: Any, b: Any) -> bool:
    """Equal values of the same types at every depth (nan equals nan, -0.0 is not 0.0)."""
    if type(a) is not type(b):
        return False
    if type(a) is float:
        if math.isnan(a):
            return math.isnan(b)
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
    if type(a) in (tuple, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if type(a) is dict:
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return bool(a == b)


def through_json(state: Any) -> Any:
    return json.loads(json.dumps(state))


def node_of(cls: type, *, name: str | None = None, rnf: bool = False) -> NodeType:
    """An unregistered node type: the generated functions without touching any registry."""
    info = describe(cls)
    if info.kind == "namedtuple":
        return namedtuple_node(cls)
    return class_node(info, name, rnf)


@dataclasses.dataclass
class Holder:
    x: float
    value: Any = dataclasses.field(default=None, metadata={"static": True})


HOLDER = node_of(Holder)


# The auxdata in the form torch keeps it, ``(nones, *statics)``, maps one-to-one to the state
# a document holds (its "none" list); the core form (every field a child) is tested below.
# The unit under test here is the torch adapter's private ``_context_codec`` (the None form's
# state codec), applied to unregistered nodes so that many values need no registration; the
# public ``treespec_dumps`` / ``treespec_loads`` round trips are in test_torch_backend.py.
def _torch_backend() -> Any:
    pytest.importorskip("torch")
    from treeclass._backends import torch as torch_backend

    return torch_backend


def _torch_context_codec(node: NodeType) -> Any:
    return _torch_backend()._context_codec(node)


def tgetstate(node: NodeType, aux: Any) -> Any:
    return _torch_context_codec(node)[0](aux)


def tsetstate(node: NodeType, state: Any) -> Any:
    return _torch_context_codec(node)[1](state)


def roundtrip_static(value: Any) -> Any:
    aux = ((), value)
    state = tgetstate(HOLDER, aux)
    back = tsetstate(HOLDER, through_json(state))
    assert back[0] == ()
    return back[1]


STATIC_VALUES: list[Any] = [
    None,
    True,
    False,
    0,
    -1,
    2**53 - 1,
    -(2**53) + 1,
    2**53,
    -(2**53),
    2**200,
    -(2**14284 - 1),  # 4300 decimal digits
    -(10**4300 - 1),  # the largest int CPython prints and parses by default
    0.0,
    -0.0,
    1.5,
    1e308,
    5e-324,
    math.inf,
    -math.inf,
    math.nan,
    "",
    "héllo wörld ✓",
    "\ud800",  # a lone surrogate survives (ASCII-escaped)
    "null",
    b"",
    b"\x00\xff binary",
    (),
    (1,),
    [],
    [1, (2, [3, (4,)])],
    ([],),
    ((), [()], [[]]),
    {},
    {"a": (1,), "b": [2], "c": {"d": (b"x",)}},
    frozenset(),
    frozenset({1, "a", (2, 3), b"z", None}),
    (frozenset({(1, 2)}), {"k": frozenset({1.5})}),
    {"tuple": 1},  # a user dict that looks like an encoded tag
    ["tuple", {"float": "nan"}],
]


def ids(values: list[Any]) -> list[str]:
    """Stable test ids (reprs of sets and objects differ between processes, e.g. xdist workers)."""
    return [f"{i}-{type(v).__name__}" for i, v in enumerate(values)]


@pytest.mark.parametrize("value", STATIC_VALUES, ids=ids(STATIC_VALUES))
def test_every_static_type_round_trips_exactly(value: Any) -> None:
    assert same(roundtrip_static(value), value)


def test_state_is_plain_json_and_names_fields() -> None:
    @dataclasses.dataclass
    class C:
        a: float
        b: Any = None
        s: tuple[int, ...] = dataclasses.field(default=(1, 2), metadata={"static": True})
        t: str = dataclasses.field(default="x", metadata={"static": True})

    node = node_of(C)
    state = tgetstate(node, ((), (1, 2), "x"))
    assert state == {"data": ["a", "b"], "none": [], "static": {"s": {"tuple": [1, 2]}, "t": "x"}}
    assert json.loads(json.dumps(state, allow_nan=False)) == state
    state = tgetstate(node, (("b",), (1, 2), "x"))
    assert state["data"] == ["a"]
    assert state["none"] == ["b"]
    assert tsetstate(node, through_json(state)) == (("b",), (1, 2), "x")


def test_nan_static_compares_equal_after_loading() -> None:
    aux = ((), (math.nan, 1))
    back = tsetstate(HOLDER, through_json(tgetstate(HOLDER, aux)))
    assert back == aux  # math.nan comes back as math.nan itself, so tuples compare equal


def test_tuple_and_list_kept_apart_at_every_depth() -> None:
    value = [(1, [2, (3, [4])])]
    back = roundtrip_static(value)
    assert type(back) is list
    assert type(back[0]) is tuple
    assert type(back[0][1]) is list
    assert type(back[0][1][1]) is tuple
    assert type(back[0][1][1][1]) is list


json_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=8)
    | st.binary(max_size=8)
)
hashable = st.recursive(
    json_scalars.filter(lambda v: not (type(v) is float and math.isnan(v))),
    lambda inner: st.tuples(inner, inner) | st.frozensets(inner, max_size=3),
    max_leaves=6,
)
static_values = st.recursive(
    json_scalars | hashable,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.tuples(inner)
        | st.tuples(inner, inner)
        | st.dictionaries(st.text(max_size=4), inner, max_size=3)
        | st.frozensets(hashable, max_size=3)
    ),
    max_leaves=12,
)


@pytest.mark.fuzz
@settings(max_examples=cases(300), derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(static_values)
def test_static_values_round_trip_property(value: Any) -> None:
    encoded = encode_static(value)
    assert same(decode_static(json.loads(json.dumps(encoded, allow_nan=False))), value)
    assert same(roundtrip_static(value), value)


# --- unserializable values --------------------------------------------------------------------


class Opaque:
    pass


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (Opaque(), r"static field 'value' of .*Holder.*type .*Opaque.*register_static\(Opaque"),
        ({1, 2}, r"static field 'value' of .*Holder.*type set"),
        ((1, [Opaque()]), r"type .*Opaque.*inside its tuple value.*register_static"),
        ({1: "a"}, r"static field 'value' of .*Holder.*dict with a int key 1 \(only str keys\)"),
        (lambda: 0, r"holds the function '<lambda>'.*a callable cannot be saved.*Keep it out"),
    ],
)
def test_unserializable_static_names_class_field_type_and_fix(value: Any, message: str) -> None:
    with pytest.raises(tc.UnserializableStaticError, match=message) as info:
        tgetstate(HOLDER, ((), value))
    assert isinstance(info.value, TypeError)
    assert isinstance(info.value, tc.TreeclassError)
    with pytest.raises(tc.UnserializableStaticError, match=message):
        aux_to_bytes(HOLDER, (value,))


def test_self_referential_and_too_deep_statics_are_errors() -> None:
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(tc.UnserializableStaticError, match=r"nests deeper than 100 levels"):
        tgetstate(HOLDER, ((), loop))
    deep: Any = ()
    for _ in range(MAX_STATIC_DEPTH + 5):
        deep = (deep,)
    with pytest.raises(tc.UnserializableStaticError, match="nests deeper"):
        tgetstate(HOLDER, ((), deep))
    ok: Any = ()
    for _ in range(MAX_STATIC_DEPTH - 1):
        ok = (ok,)
    assert roundtrip_static(ok) == ok


# --- register_static --------------------------------------------------------------------------


class Color(enum.Enum):
    RED = "red"
    GREEN = (0, 1)


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


@dataclasses.dataclass(frozen=True)
class Config:
    width: int
    act: str = "relu"
    dims: tuple[int, ...] = (1, 2)


class Version(NamedTuple):
    major: int
    minor: int


class Money:
    """A user type with converters."""

    def __init__(self, cents: int) -> None:
        self.cents = cents

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Money) and other.cents == self.cents

    def __hash__(self) -> int:
        return hash(self.cents)


tc.register_static(Color, name="tests.auxdata.Color")
tc.register_static(Level, name="tests.auxdata.Level")
tc.register_static(Config, name="tests.auxdata.Config")
tc.register_static(Version, name="tests.auxdata.Version")
tc.register_static(
    Money, name="tests.auxdata.Money", to_json=lambda m: m.cents, from_json=lambda c: Money(c)
)


@pytest.mark.parametrize(
    "value",
    [
        Color.RED,
        Color.GREEN,
        Level.HIGH,
        Config(3),
        Config(4, "gelu", (5,)),
        Version(1, 2),
        Money(250),
        (Color.RED, [Config(1)], {"m": Money(1)}),
        frozenset({Color.RED, Level.LOW}),
    ],
    ids=lambda v: type(v).__name__,
)
def test_registered_statics_round_trip(value: Any) -> None:
    assert same(roundtrip_static(value), value)


def test_registered_static_state_names_the_type() -> None:
    assert encode_static(Color.RED) == {"registered": ["tests.auxdata.Color", "red"]}
    assert encode_static(Config(3)) == {
        "registered": [
            "tests.auxdata.Config",
            {"dict": {"act": "relu", "dims": {"tuple": [1, 2]}, "width": 3}},
        ]
    }


def test_unregistered_static_name_on_load() -> None:
    state = {"data": ["x"], "none": [], "static": {"value": {"registered": ["nope.Gone", 1]}}}
    with pytest.raises(tc.UnregisteredNameError, match=r"'nope.Gone'.*not registered") as info:
        tsetstate(HOLDER, state)
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize(
    ("encoded", "message"),
    [
        ({"registered": ["tests.auxdata.Color", "purple"]}, r"from_json converter.*'purple'"),
        ({"registered": ["tests.auxdata.Config", {"dict": {"nope": 1}}]}, r"field\(s\) \['nope'\]"),
        ({"registered": ["tests.auxdata.Config", [1]]}, r"expected a dict of fields"),
        ({"registered": ["tests.auxdata.Config", {"dict": {}}]}, r"missing 1 required"),
    ],
)
def test_converter_failures_on_load_are_load_errors(encoded: Any, message: str) -> None:
    with pytest.raises(tc.TreespecLoadError, match=message):
        tsetstate(HOLDER, {"data": ["x"], "none": [], "static": {"value": encoded}})


def test_config_that_gained_a_field_with_default_loads() -> None:
    old = {"registered": ["tests.auxdata.Config", {"dict": {"width": 7}}]}
    assert decode_static(old) == Config(7)


def test_register_static_errors(uname: str) -> None:
    class Plain:
        pass

    with pytest.raises(tc.RegistrationTypeError, match=r"Plain is not an enum.*to_json="):
        tc.register_static(Plain, name=uname)
    with pytest.raises(tc.RegistrationError, match=r"got only to_json=; pass both"):
        tc.register_static(Plain, name=uname, to_json=str)
    with pytest.raises(tc.RegistrationError, match=r"got only from_json="):
        tc.register_static(Plain, name=uname, from_json=str)
    with pytest.raises(tc.RegistrationError, match=r"tuple values already serialize"):
        tc.register_static(tuple, name=uname)
    with pytest.raises(tc.RegistrationTypeError, match=r"takes a class, got 3"):
        tc.register_static(3, name=uname)  # type: ignore[type-var]
    with pytest.raises(tc.RegistrationError, match=r"not a usable serialized name"):
        tc.register_static(Plain, name="has space", to_json=str, from_json=str)

    @dataclasses.dataclass
    class Mutable:
        x: int

    with pytest.raises(tc.RegistrationError, match=r"Mutable to be a frozen dataclass"):
        tc.register_static(Mutable, name=uname)


def test_register_static_names_are_unique(uname: str) -> None:
    class A(enum.Enum):
        X = 1

    class B(enum.Enum):
        X = 1

    assert tc.register_static(A, name=uname) is A
    assert tc.register_static(A, name=uname) is A  # the same registration again is fine
    with pytest.raises(tc.NameConflictError, match=r"is taken by .*A, so .*B cannot have it"):
        tc.register_static(B, name=uname)
    with pytest.raises(tc.NameConflictError, match=r"already registered .* under the name"):
        tc.register_static(A, name=uname + "x")


# --- old blobs: classes that changed ----------------------------------------------------------


@dataclasses.dataclass
class V1:
    a: float
    s: int = dataclasses.field(default=1, metadata={"static": True})


@dataclasses.dataclass
class V2GainedStatic:
    a: float
    s: int = dataclasses.field(default=1, metadata={"static": True})
    t: tuple[str, ...] = dataclasses.field(default=("new",), metadata={"static": True})


@dataclasses.dataclass
class V2GainedNoneData:
    a: float
    b: Any = None
    s: int = dataclasses.field(default=1, metadata={"static": True})


@dataclasses.dataclass
class V2GainedOtherData:
    a: float
    b: float = 0.0
    s: int = dataclasses.field(default=1, metadata={"static": True})


@dataclasses.dataclass
class V2GainedRequiredStatic:
    a: float
    s: int = dataclasses.field(default=1, metadata={"static": True})
    u: int = dataclasses.field(default_factory=int, metadata={"static": True})
    r: str = dataclasses.field(default=..., metadata={"static": True})  # type: ignore[assignment]


@dataclasses.dataclass
class V2LostStatic:
    a: float


@dataclasses.dataclass
class V2LostData:
    s: int = dataclasses.field(default=1, metadata={"static": True})


@dataclasses.dataclass
class V2StaticBecameData:
    a: float
    s: int = 1


OLD_STATE = through_json(tgetstate(node_of(V1), ((), 5)))


def test_gained_static_field_takes_its_default() -> None:
    assert tsetstate(node_of(V2GainedStatic), OLD_STATE) == ((), 5, ("new",))


def test_gained_data_field_with_none_default_comes_back_none() -> None:
    node = node_of(V2GainedNoneData)
    # torch's form: the new field is a None field left out of the children.
    aux = tsetstate(node, OLD_STATE)
    assert aux == (("b",), 5)
    torch_functions = node.bind("test", str, family=_torch_backend()._family(node))
    _, live_aux = torch_functions["flatten"](V2GainedNoneData(1.0, None, 5))
    assert live_aux == aux  # the loaded structure equals the live one
    assert torch_functions["unflatten"]([2.0], aux) == V2GainedNoneData(2.0, None, 5)
    # The core form: the new field becomes a None child.
    core_aux, plan = node.load_state(OLD_STATE)
    assert (core_aux, plan) == ((5,), (True, False))
    assert node.flatten(V2GainedNoneData(1.0, None, 5)) == ((1.0, None), core_aux)


def test_gained_data_field_with_none_default_in_torch_needs_none_fields_out_of_children() -> None:
    with pytest.raises(
        tc.TreespecLoadError, match=r"None-valued field\(s\) \['b'\].*return_none_fields=True"
    ):
        tsetstate(node_of(V2GainedNoneData, rnf=True), OLD_STATE)
    # Every other registry takes it: the field is a None child there whatever the option.
    assert node_of(V2GainedNoneData, rnf=True).load_state(OLD_STATE) == ((5,), (True, False))


def test_gained_data_field_with_other_default_is_an_error() -> None:
    with pytest.raises(
        tc.TreespecLoadError,
        match=r"a torch structure holds test_auxdata.V2GainedOtherData without its data "
        r"field\(s\) \['b'\], added to the class since with a default other than None",
    ):
        tsetstate(node_of(V2GainedOtherData), OLD_STATE)


def test_gained_static_field_without_usable_default() -> None:
    @dataclasses.dataclass
    class NoDefault:
        a: float
        s: int = dataclasses.field(default=1, metadata={"static": True})
        r: str = dataclasses.field(kw_only=True, metadata={"static": True})

    with pytest.raises(tc.TreespecLoadError, match=r"static field 'r'.*no default"):
        tsetstate(node_of(NoDefault), OLD_STATE)
    assert tsetstate(node_of(V2GainedRequiredStatic), OLD_STATE) == ((), 5, 0, ...)


@pytest.mark.parametrize(
    ("cls", "message"),
    [
        (V2LostStatic, r"names the field 's', which the class no longer has"),
        (V2LostData, r"names the field 'a', which the class no longer has"),
        (V2StaticBecameData, r"field 's' of .* was static when this was saved but is a data field"),
    ],
)
def test_blob_naming_a_field_the_class_lost(cls: type, message: str) -> None:
    with pytest.raises(tc.TreespecLoadError, match=message):
        tsetstate(node_of(cls), OLD_STATE)


def test_data_field_that_became_static() -> None:
    @dataclasses.dataclass
    class Was:
        a: float
        b: float

    @dataclasses.dataclass
    class Now:
        a: float
        b: float = dataclasses.field(default=0.0, metadata={"static": True})

    state = through_json(tgetstate(node_of(Was), ((),)))
    with pytest.raises(tc.TreespecLoadError, match=r"field 'b' .* was a data field .* static now"):
        tsetstate(node_of(Now), state)


def test_reordered_data_fields_are_an_error() -> None:
    @dataclasses.dataclass
    class AB:
        a: float
        b: float

    @dataclasses.dataclass
    class BA:
        b: float
        a: float

    state = through_json(tgetstate(node_of(AB), ((),)))
    with pytest.raises(tc.TreespecLoadError, match=r"saved in the order \['a', 'b'\]"):
        tsetstate(node_of(BA), state)


def test_none_fields_into_a_class_now_returning_none_fields() -> None:
    state = through_json(tgetstate(node_of(V2GainedNoneData), (("b",), 1)))
    with pytest.raises(tc.TreespecLoadError, match=r"None-valued field\(s\) \['b'\]"):
        tsetstate(node_of(V2GainedNoneData, rnf=True), state)


def test_namedtuple_state_records_field_names() -> None:
    P = collections.namedtuple("P", "x y")
    Q = collections.namedtuple("Q", "x z")
    R = collections.namedtuple("R", "y x")
    state = through_json(tgetstate(node_of(P), None))
    assert state == {"fields": ["x", "y"]}
    assert tsetstate(node_of(P), state) is None
    with pytest.raises(tc.TreespecLoadError, match=r"\['y'\] no longer exist.*\['z'\] are new"):
        tsetstate(node_of(Q), state)
    with pytest.raises(tc.TreespecLoadError, match=r"in another order"):
        tsetstate(node_of(R), state)
    with pytest.raises(tc.TreespecLoadError, match=r'must be \{"fields"'):
        tsetstate(node_of(P), ["x", "y"])


# --- malformed states -------------------------------------------------------------------------


GOOD = {"data": ["x"], "none": [], "static": {"value": 1}}


@pytest.mark.parametrize(
    ("state", "message"),
    [
        (None, r'must be an object with keys "data", "none" and "static"'),
        ([], r"must be an object with keys"),
        ({"data": ["x"], "none": []}, r"must be an object with keys"),
        ({**GOOD, "extra": 1}, r"must be an object with keys"),
        ({**GOOD, "data": "x"}, r'"data" in the auxdata of .* list of distinct field names'),
        ({**GOOD, "data": ["x", "x"]}, r"distinct field names"),
        ({**GOOD, "data": [1]}, r"distinct field names"),
        ({**GOOD, "none": None}, r'"none" in the auxdata'),
        ({**GOOD, "static": []}, r'"static" in the auxdata of .* must be an object'),
        ({**GOOD, "none": ["x"]}, r"both as children and as None"),
        ({**GOOD, "static": {"value": {"tuple": 1}}}, r"static field 'value'.*wrong form"),
        ({**GOOD, "static": {"value": {"set": []}}}, r"'set' is not a known static value type"),
        ({**GOOD, "static": {"value": {"a": 1, "b": 2}}}, r"exactly one key"),
        ({**GOOD, "static": {"value": {"int": "12"}}}, r"'12' is not an int: .* hex text"),
        ({**GOOD, "static": {"value": {"int": "0x_1"}}}, r"'0x_1' is not an int"),
        ({**GOOD, "static": {"value": {"int": "0x0001"}}}, r"'0x0001' is not an int"),
        ({**GOOD, "static": {"value": {"float": "1.5"}}}, r"'1.5' is not a float"),
        ({**GOOD, "static": {"value": {"float": 1.5}}}, r"wrong form"),
        ({**GOOD, "static": {"value": {"bytes": "%%%"}}}, r"not base64"),
        ({**GOOD, "static": {"value": {"bytes": "é"}}}, r"not base64"),
        ({**GOOD, "static": {"value": {"frozenset": [[1]]}}}, r"unhashable"),
        ({**GOOD, "static": {"value": {"registered": [1, 2]}}}, r"wrong form"),
        ({**GOOD, "static": {"value": math.inf}}, r"non-finite number"),
        ({**GOOD, "static": {"value": object()}}, r"not JSON data"),
    ],
)
def test_malformed_states_are_load_errors(state: Any, message: str) -> None:
    with pytest.raises(tc.TreespecLoadError, match=message) as info:
        tsetstate(HOLDER, state)
    assert isinstance(info.value, ValueError)


def test_deeply_nested_static_on_load() -> None:
    value: Any = 1
    for _ in range(MAX_STATIC_DEPTH + 2):
        value = [value]
    with pytest.raises(tc.TreespecLoadError, match=r"nests deeper than 100 levels"):
        tsetstate(HOLDER, {**GOOD, "static": {"value": value}})


# --- bytes ------------------------------------------------------------------------------------


def test_aux_bytes_round_trip_and_canonical() -> None:
    aux = ({"b": (1, math.inf), "a": [b"\x00"]},)  # the core form: the static values
    data = aux_to_bytes(HOLDER, aux)
    assert isinstance(data, bytes)
    assert data == aux_to_bytes(HOLDER, ({"a": [b"\x00"], "b": (1, math.inf)},))
    assert b" " not in data
    assert same(HOLDER.load_state(state_from_bytes(HOLDER, data)), (aux, None))


def test_core_state_writes_every_data_field_and_loads_older_states_with_a_plan() -> None:
    @dataclasses.dataclass
    class C:
        a: float
        b: Any = None
        c: Any = None
        s: str = dataclasses.field(default="x", metadata={"static": True})

    node = node_of(C)
    assert node.getstate(("y",)) == {"data": ["a", "b", "c"], "none": [], "static": {"s": "y"}}
    assert node.load_state(through_json(node.getstate(("y",)))) == (("y",), None)
    # A state written with None fields outside the children (treeclass 0.1, or torch's form)
    # loads with a plan that puts them back as None children.
    old = {"data": ["a", "c"], "none": ["b"], "static": {"s": "y"}}
    assert node.load_state(old) == (("y",), (True, False, True))
    # So does one written before the class had the data field c (whose default is None).
    assert node.load_state({"data": ["a"], "none": [], "static": {"s": "y"}}) == (
        ("y",),
        (True, False, False),
    )


@pytest.mark.parametrize(
    "data",
    [b"", b"{", b"\xff\xfe", b"[" * 100_000, b'{"data":1e999}', b"NaN", b"[" + b"1" * 5000 + b"]"],
    ids=["empty", "truncated", "not-utf8", "deep", "overflow", "nan", "huge-int"],
)
def test_aux_from_bad_bytes(data: bytes) -> None:
    with pytest.raises(tc.TreespecLoadError, match=r"auxdata of .*Holder is not valid JSON"):
        state_from_bytes(HOLDER, data)


def test_integers_too_big_to_print_are_refused_when_dumping_and_loading() -> None:
    biggest = 10**4300 - 1  # 4,300 digits: what str() prints and json parses by default
    assert roundtrip_static(biggest) == biggest
    assert roundtrip_static(-biggest) == -biggest
    repr(biggest)  # what a static in a TreeSpec's repr and messages must still allow
    with pytest.raises(
        tc.UnserializableStaticError,
        match=r"static field 'value' .*: it is an integer of more than 4,300 decimal digits "
        r"\(about 14,285 bits\), more than treeclass stores .*; store a smaller integer",
    ):
        tgetstate(HOLDER, ((), 10**4300))
    forged = {"data": ["x"], "none": [], "static": {"value": {"int": hex(10**4300)}}}
    with pytest.raises(
        tc.TreespecLoadError, match=r"static field 'value'.*at most 4,300 decimal digits"
    ):
        tsetstate(HOLDER, forged)
    forged["static"] = {"value": {"int": hex(2**34391)}}
    with pytest.raises(tc.TreespecLoadError, match=r"static field 'value'.*at most 4,300"):
        tsetstate(HOLDER, forged)


def test_a_failing_to_json_converter_is_an_unserializable_static_error(uname: str) -> None:
    class Touchy:
        pass

    tc.register_static(Touchy, name=uname, to_json=lambda v: 1 / 0, from_json=lambda d: Touchy())
    with pytest.raises(
        tc.UnserializableStaticError,
        match=r"static field 'value'.*to_json converter.*ZeroDivisionError",
    ):
        tgetstate(HOLDER, ((), Touchy()))


def test_documents_may_be_str_subclasses() -> None:
    class Text(str):
        pass

    spec = tc.tree_structure([1, (2,)])
    assert tc.treespec_loads(Text(tc.treespec_dumps(spec))) == spec
