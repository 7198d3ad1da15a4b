"""The registration API: pytree_dataclass, field, register_dataclass, register_namedtuple."""

from __future__ import annotations

import collections
import dataclasses
import typing

import attrs
import pytest

import treeclass as tc
from treeclass._core.registry import registered_node as node_for_class


def test_bare_decorator_makes_a_dataclass_and_a_node() -> None:
    @tc.pytree_dataclass
    class Bare:
        x: float
        y: float = 2.0

    assert dataclasses.is_dataclass(Bare)
    assert tc.is_registered(Bare)
    assert tc.name_of(Bare) is None
    leaves, spec = tc.tree_flatten(Bare(1.0))
    assert leaves == [1.0, 2.0]
    assert spec.unflatten([3.0, 4.0]) == Bare(3.0, 4.0)


def test_called_decorator_passes_dataclass_options(uname: str) -> None:
    @tc.pytree_dataclass(name=uname, frozen=True, order=True, kw_only=True, repr=False)
    class Opts:
        x: int
        y: int = 0

    params = Opts.__dataclass_params__  # type: ignore[attr-defined]
    assert params.frozen and params.order and not params.repr
    with pytest.raises(TypeError):
        Opts(1)  # type: ignore[misc]  # kw_only
    a = Opts(x=1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.x = 2  # type: ignore[misc]
    assert Opts(x=1) < Opts(x=2)
    assert tc.name_of(Opts) == uname
    assert tc.class_for_name(uname) is Opts


def test_slots_option_gives_a_slots_class(uname: str) -> None:
    @tc.pytree_dataclass(name=uname, slots=True, frozen=True)
    class Slotted:
        a: float
        b: float | None = None

    assert "__slots__" in vars(Slotted)
    _, spec = tc.tree_flatten(Slotted(1.0, 2.0))
    out = spec.unflatten([5.0, 6.0])
    assert out == Slotted(5.0, 6.0)
    assert not hasattr(out, "__dict__")


def test_unknown_option_is_a_clear_error() -> None:
    with pytest.raises(tc.RegistrationTypeError, match=r"unknown option\(s\) \['frozn'\]"):
        tc.pytree_dataclass(frozn=True)  # type: ignore[call-overload]


def test_existing_dataclass_is_registered_as_it_is(uname: str) -> None:
    @tc.pytree_dataclass(name=uname)
    @dataclasses.dataclass(frozen=True)
    class Already:
        x: int

    assert Already.__dataclass_params__.frozen  # type: ignore[attr-defined]
    assert tc.tree_leaves(Already(3)) == [3]


def test_existing_dataclass_with_options_is_refused() -> None:
    @dataclasses.dataclass
    class Plain:
        x: int

    with pytest.raises(tc.RegistrationError, match=r"Plain is already a dataclass.*\['frozen'\]"):
        tc.pytree_dataclass(frozen=True)(Plain)
    assert not tc.is_registered(Plain)


def test_subclass_of_dataclass_is_rewrapped_with_base_fields_first(uname: str) -> None:
    @dataclasses.dataclass
    class Base:
        a: int

    @tc.pytree_dataclass(name=uname)
    class Child(Base):
        b: int

    assert [f.name for f in dataclasses.fields(Child)] == ["a", "b"]
    assert tc.tree_leaves(Child(1, 2)) == [1, 2]


def test_attrs_class_is_registered_as_it_is(uname: str) -> None:
    @tc.pytree_dataclass(name=uname)
    @attrs.define
    class A:
        x: float
        tag: str = attrs.field(default="t", metadata={"static": True})

    leaves, spec = tc.tree_flatten(A(1.0))
    assert leaves == [1.0]
    assert spec.unflatten([2.0]) == A(2.0)
    assert repr(spec) == "TreeSpec(A(x=*, tag='t'))"


def test_field_static_and_metadata_conventions(uname: str) -> None:
    @tc.pytree_dataclass(name=uname)
    class Mixed:
        a: float
        s1: str = tc.field(static=True, default="x")
        s2: int = dataclasses.field(default=3, metadata={"static": True})
        s3: int = dataclasses.field(default=4, metadata={"pytree_node": False})
        d: float = tc.field(default=5.0, metadata={"doc": "kept"})

    node = node_for_class(Mixed)
    assert node is not None
    assert node.info.static_fields == ("s1", "s2", "s3")
    assert node.info.data_fields == ("a", "d")
    f = {x.name: x for x in dataclasses.fields(Mixed)}
    assert f["s1"].metadata["static"] is True
    assert f["d"].metadata["doc"] == "kept"
    assert tc.tree_leaves(Mixed(1.0)) == [1.0, 5.0]


def test_field_passes_stdlib_options() -> None:
    @tc.pytree_dataclass
    class Opt:
        a: list[int] = tc.field(default_factory=list, repr=False, compare=False)
        b: int = tc.field(default=1, init=False, hash=True, kw_only=True)

    o = Opt()
    assert o.a == [] and o.b == 1
    assert "a=" not in repr(o)
    with pytest.raises(TypeError):
        Opt(b=2)  # type: ignore[call-arg]


def test_field_default_and_factory_together_is_an_error() -> None:
    with pytest.raises(tc.RegistrationError, match="both default= and default_factory="):
        tc.field(default=1, default_factory=list)  # type: ignore[call-overload]


def test_register_dataclass_with_extra_static(uname: str) -> None:
    @dataclasses.dataclass
    class ThirdParty:
        hidden: float
        kind: str
        extra: int = 0

    assert tc.register_dataclass(ThirdParty, name=uname, static=("kind",)) is ThirdParty
    assert tc.tree_leaves(ThirdParty(1.0, "k", 2)) == [1.0, 2]


def test_register_dataclass_unknown_static_is_an_error(uname: str) -> None:
    @dataclasses.dataclass
    class T:
        a: int

    with pytest.raises(tc.RegistrationError, match=r"static=\['nope'\] names no field of .*T"):
        tc.register_dataclass(T, name=uname, static=("nope",))
    with pytest.raises(tc.RegistrationTypeError, match=r"write static=\('a',\)"):
        tc.register_dataclass(T, name=uname, static="a")
    assert not tc.is_registered(T)


def test_register_dataclass_rejects_non_dataclasses() -> None:
    class NotDC:
        pass

    with pytest.raises(
        tc.NotAPytreeClassError, match=r"takes a dataclass or attrs class, got .*NotDC"
    ):
        tc.register_dataclass(NotDC)
    with pytest.raises(TypeError, match="got 3"):
        tc.register_dataclass(3)  # type: ignore[type-var]


def test_register_namedtuple_call_and_decorator(uname: str) -> None:
    class NT(typing.NamedTuple):
        a: int
        b: int = 2

    assert tc.register_namedtuple(NT, name=uname) is NT
    assert tc.name_of(NT) == uname

    @tc.register_namedtuple(name=uname + "2")
    class NT2(typing.NamedTuple):
        x: int

    assert tc.class_for_name(uname + "2") is NT2
    CN = collections.namedtuple("CN", "p q")
    tc.register_namedtuple(CN, name=uname + "3")
    leaves, spec = tc.tree_flatten(CN(1, NT(2)))
    assert leaves == [1, 2, 2]
    assert spec.unflatten([7, 8, 9]) == CN(7, NT(8, 9))


def test_register_namedtuple_errors() -> None:
    class NT(typing.NamedTuple):
        a: int

    with pytest.raises(tc.RegistrationTypeError, match="needs name="):
        tc.register_namedtuple(NT)  # type: ignore[call-overload]
    with pytest.raises(tc.RegistrationTypeError, match="takes a namedtuple class, got"):
        tc.register_namedtuple(tuple, name="x.y")


@pytest.mark.parametrize(
    "bad, match",
    [
        ("", "not a usable serialized name"),
        ("has space", "not a usable serialized name"),
        ("tuple", "reserved for a built-in container"),
        ("collections.OrderedDict", "reserved for a built-in container"),
        (3, "must be a str"),
    ],
)
def test_bad_names(bad: object, match: str) -> None:
    @dataclasses.dataclass
    class N:
        a: int

    with pytest.raises(tc.RegistrationError, match=match):
        tc.register_dataclass(N, name=bad)  # type: ignore[arg-type]
    assert not tc.is_registered(N)


def test_decorating_a_non_class_is_an_error() -> None:
    with pytest.raises(tc.RegistrationTypeError, match="decorates classes"):
        tc.pytree_dataclass(lambda: None)  # type: ignore[type-var]


@pytest.mark.parametrize("options", [{}, {"slots": True}, {"kw_only": True}, {"frozen": True}])
def test_docstring_is_the_one_dataclasses_writes(options: dict[str, bool]) -> None:
    """Without a docstring, a class gets dataclasses' ``Name(signature)`` (made on first read)."""

    def namespace() -> dict[str, object]:
        return {
            "__annotations__": {"a": float, "b": "int | None", "c": list},
            "b": None,
            "c": dataclasses.field(default_factory=list),
            "__module__": __name__,
        }

    plain = dataclasses.dataclass(**options)(type("Doc", (), namespace()))
    ours = tc.pytree_dataclass(**options)(type("Doc", (), namespace()))
    assert ours.__doc__ == plain.__doc__
    assert vars(ours)["__doc__"] == plain.__doc__  # kept once read
    assert ours(a=1.0).__doc__ == plain.__doc__


def test_docstring_of_a_subclass_and_an_own_docstring() -> None:
    @tc.pytree_dataclass
    class Base:
        x: int = 1

    @tc.pytree_dataclass
    class Sub(Base):
        y: int = 2

    @tc.pytree_dataclass
    class Own:
        """Mine."""

        x: int = 1

    # (string annotations: this module has ``from __future__ import annotations``)
    assert Sub(1, 2).__doc__ == "Sub(x: 'int' = 1, y: 'int' = 2)"
    assert Base.__doc__ == "Base(x: 'int' = 1)"
    assert Own.__doc__ == "Mine."
