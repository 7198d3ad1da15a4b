"""@tc.pytree_dataclass, bare and called: checked __init__s, frozen, options, generics, inheritance.

Type-checked by tests/test_typing.py, never run. A line ending in
``# E: mypy[<code>,...] pyright[<rule>,...]`` must get exactly those errors from those checkers;
every other line must get none.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar, Generic, TypeVar

import attrs
from typing_extensions import assert_type

import treeclass as tc

T = TypeVar("T")


# --- bare ------------------------------------------------------------------------------------


@tc.pytree_dataclass
class Point:
    x: float
    y: float
    label: str = tc.field(static=True, default="p")


assert_type(Point, type[Point])
p = Point(1.0, 2.0)
assert_type(p, Point)
assert_type(p.x, float)
assert_type(p.label, str)
assert_type(Point(1.0, 2.0, "q"), Point)
assert_type(Point(x=1.0, y=2.0, label="q"), Point)
p.x = 3.0  # not frozen: assignment is fine
assert_type(p == p, bool)

Point("1", 2.0)  # E: mypy[arg-type] pyright[reportArgumentType]
Point(1.0)  # E: mypy[call-arg] pyright[reportCallIssue]
Point(1.0, 2.0, "q", 4)  # E: mypy[call-arg] pyright[reportCallIssue]
Point(1.0, 2.0, colour="red")  # E: mypy[call-arg] pyright[reportCallIssue]
Point(1.0, 2.0, label=3)  # E: mypy[arg-type] pyright[reportArgumentType]
p.x = "s"  # E: mypy[assignment] pyright[reportAttributeAccessIssue]
p.z = 1.0  # E: mypy[attr-defined] pyright[reportAttributeAccessIssue]


# --- called, with keywords -------------------------------------------------------------------


@tc.pytree_dataclass(name="cases.Output", frozen=True)
class Output:
    logits: float
    loss: float | None = None
    mode: str = tc.field(static=True, default="eval")


out = Output(1.5)
assert_type(out, Output)
assert_type(out.loss, float | None)
assert_type(Output(1.5, 0.5, "train"), Output)
assert_type(hash(out), int)

Output("x")  # E: mypy[arg-type] pyright[reportArgumentType]
Output()  # E: mypy[call-arg] pyright[reportCallIssue]
Output(1.5, lost=0.5)  # E: mypy[call-arg] pyright[reportCallIssue]
out.logits = 2.0  # E: mypy[misc] pyright[reportAttributeAccessIssue]
out.mode = "train"  # E: mypy[misc] pyright[reportAttributeAccessIssue]


@tc.pytree_dataclass()
class EmptyCall:
    a: int


assert_type(EmptyCall(1), EmptyCall)
EmptyCall("1")  # E: mypy[arg-type] pyright[reportArgumentType]


@tc.pytree_dataclass(
    name="cases.AllOptions",
    return_none_fields=True,
    unflatten_calls_init=True,
    override=False,
    init=True,
    repr=True,
    eq=True,
    order=True,
    unsafe_hash=False,
    frozen=False,
    match_args=True,
    kw_only=False,
    slots=False,
)
class AllOptions:
    a: int


assert_type(AllOptions(1) < AllOptions(2), bool)


@tc.pytree_dataclass(name="cases.Unordered")
class Unordered:
    a: int


assert Unordered(1) < Unordered(2)  # E: mypy[operator] pyright[reportOperatorIssue]


# Misuse of the decorator itself.
@tc.pytree_dataclass(nmae="cases.Typo")  # E: mypy[call-overload] pyright[reportCallIssue,reportUntypedClassDecorator]
class Typo:
    a: int


@tc.pytree_dataclass(name=1)  # E: mypy[call-overload] pyright[reportArgumentType]
class BadName:
    a: int


@tc.pytree_dataclass(frozen="yes")  # E: mypy[call-overload,literal-required] pyright[reportArgumentType]
class BadFrozen:
    a: int


# --- kw_only and slots -----------------------------------------------------------------------


@tc.pytree_dataclass(kw_only=True)
class KwOnly:
    a: int
    b: str = "b"


assert_type(KwOnly(a=1), KwOnly)
assert_type(KwOnly(b="c", a=1), KwOnly)
KwOnly(1)  # E: mypy[call-arg] pyright[reportCallIssue]


@tc.pytree_dataclass
class KwOnlyField:
    a: int
    b: str = tc.field(default="b", kw_only=True)
    c: float = 0.0


assert_type(KwOnlyField(1, 2.0, b="x"), KwOnlyField)
KwOnlyField(1, 2.0, "x")  # E: mypy[call-arg] pyright[reportCallIssue]


@tc.pytree_dataclass(name="cases.Slotted", slots=True, frozen=True)
class Slotted:
    a: int
    b: tuple[int, ...] = ()


assert_type(Slotted(1, (2, 3)), Slotted)
Slotted(1).a = 2  # E: mypy[misc] pyright[reportAttributeAccessIssue]


# --- generics --------------------------------------------------------------------------------


@tc.pytree_dataclass
class Box(Generic[T]):
    item: T
    count: int = tc.field(static=True, default=1)


assert_type(Box(1), Box[int])
assert_type(Box("s").item, str)
assert_type(Box[float](1.0, count=2), Box[float])
Box[int]("s")  # E: mypy[arg-type] pyright[reportArgumentType]


@tc.pytree_dataclass(name="cases.FrozenPair", frozen=True)
class FrozenPair(Generic[T]):
    first: T
    second: T


assert_type(FrozenPair(1, 2), FrozenPair[int])
assert_type(FrozenPair(1, 2).second, int)
FrozenPair(1, 2).first = 3  # E: mypy[misc] pyright[reportAttributeAccessIssue]


# --- inheritance -----------------------------------------------------------------------------


@tc.pytree_dataclass
class Base:
    a: int
    tag: str = tc.field(static=True, default="base")


@tc.pytree_dataclass
class Child(Base):
    b: float = 0.0


c = Child(1, "child", 2.0)
assert_type(c, Child)
assert_type(c.a, int)
assert_type(c.b, float)
base: Base = c
Child(1, "child", "2")  # E: mypy[arg-type] pyright[reportArgumentType]


@tc.pytree_dataclass(frozen=True)
class FrozenBase:
    a: int


@tc.pytree_dataclass(frozen=True)
class FrozenChild(FrozenBase):
    b: int


assert_type(FrozenChild(1, 2), FrozenChild)
FrozenChild(1, 2).a = 3  # E: mypy[misc] pyright[reportAttributeAccessIssue]


# --- InitVar and ClassVar --------------------------------------------------------------------


@tc.pytree_dataclass
class WithVars:
    a: float
    scale: dataclasses.InitVar[float]
    instances: ClassVar[int] = 0

    def __post_init__(self, scale: float) -> None:
        self.a *= scale


assert_type(WithVars(1.0, 2.0), WithVars)
assert_type(WithVars.instances, int)
WithVars(1.0)  # E: mypy[call-arg] pyright[reportCallIssue]
WithVars(1.0, 2.0, instances=3)  # E: mypy[call-arg] pyright[reportCallIssue]


# --- a class that already is a dataclass or an attrs class is registered as it is -------------
# Known pyright limitation: pyright applies the outer dataclass_transform again with its default
# options, so it forgets frozen=True of the inner decorator (and types __hash__ as None); mypy keeps
# it. For such classes @tc.register_dataclass keeps the class's type exactly (registration.py).


@tc.pytree_dataclass(name="cases.AlreadyDataclass")
@dataclasses.dataclass(frozen=True)
class AlreadyDataclass:
    a: int
    b: str = dataclasses.field(default="b", metadata={"static": True})


assert_type(AlreadyDataclass(1), AlreadyDataclass)
AlreadyDataclass("1")  # E: mypy[arg-type] pyright[reportArgumentType]
AlreadyDataclass(1).a = 2  # E: mypy[misc]


@tc.pytree_dataclass(name="cases.AlreadyAttrs")
@attrs.frozen
class AlreadyAttrs:
    a: int
    b: str = attrs.field(default="b", metadata={"static": True})


assert_type(AlreadyAttrs(1), AlreadyAttrs)
AlreadyAttrs("1")  # E: mypy[arg-type] pyright[reportArgumentType]
AlreadyAttrs(1).a = 2  # E: mypy[misc]
