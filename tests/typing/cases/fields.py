"""tc.field and dataclasses.field(metadata={"static": True}) as field specifiers.

Type-checked by tests/test_typing.py, never run. A line ending in
``# E: mypy[<code>,...] pyright[<rule>,...]`` must get exactly those errors from those checkers;
every other line must get none.
"""

from __future__ import annotations

import dataclasses

from typing_extensions import assert_type

import treeclass as tc


def make_tags() -> list[str]:
    return ["a"]


# --- tc.field is typed like dataclasses.field ------------------------------------------------

assert_type(tc.field(default=1), int)
assert_type(tc.field(static=True, default="relu"), str)
assert_type(tc.field(default_factory=make_tags), list[str])
assert_type(tc.field(static=True, default_factory=dict[str, int]), dict[str, int])


@tc.pytree_dataclass(name="cases.Layer")
class Layer:
    weight: float
    activation: str = tc.field(static=True, default="relu")
    tags: list[str] = tc.field(default_factory=make_tags)
    sizes: tuple[int, ...] = tc.field(static=True, default=(), repr=False, compare=False)
    notes: str = tc.field(default="", init=False)
    extra: dict[str, int] = tc.field(
        default_factory=dict[str, int], hash=None, metadata={"doc": "anything"}
    )


layer = Layer(0.5)
assert_type(layer, Layer)
assert_type(layer.activation, str)
assert_type(layer.tags, list[str])
assert_type(Layer(0.5, "gelu", ["x"], (1, 2), {"k": 1}), Layer)
Layer(0.5, notes="n")  # E: mypy[call-arg] pyright[reportCallIssue]
Layer(0.5, activation=1)  # E: mypy[arg-type] pyright[reportArgumentType]
Layer(0.5, tags=[1])  # E: mypy[list-item] pyright[reportArgumentType]


# A static field without a default is a required argument, so a non-default field may follow it;
# the same for JAX's dataclasses.field(metadata={"static": True}).
@tc.pytree_dataclass
class StaticFirst:
    mode: str = tc.field(static=True)
    meta: int = dataclasses.field(metadata={"static": True})
    value: float
    scale: float = dataclasses.field(default=1.0, metadata={"static": True})


s = StaticFirst("train", 3, 1.5)
assert_type(s, StaticFirst)
assert_type(s.meta, int)
assert_type(StaticFirst(mode="m", meta=1, value=2.0, scale=3.0), StaticFirst)
StaticFirst("train", 3)  # E: mypy[call-arg] pyright[reportCallIssue]
StaticFirst(1, 3, 1.5)  # E: mypy[arg-type] pyright[reportArgumentType]


@tc.pytree_dataclass(frozen=True)
class FrozenStatic:
    value: float
    mode: str = tc.field(static=True, default="eval")


FrozenStatic(1.0).mode = "train"  # E: mypy[misc] pyright[reportAttributeAccessIssue]


# kw_only fields.
@tc.pytree_dataclass
class KwField:
    value: float
    mode: str = tc.field(static=True, kw_only=True)


assert_type(KwField(1.0, mode="m"), KwField)
KwField(1.0, "m")  # E: mypy[call-arg] pyright[reportCallIssue]


# --- misuse ----------------------------------------------------------------------------------


@tc.pytree_dataclass
class WrongDefaults:
    a: int = tc.field(default="one")  # E: mypy[assignment] pyright[reportAssignmentType]
    b: str = tc.field(static=True, default=2)  # E: mypy[assignment] pyright[reportAssignmentType]
    c: list[str] = tc.field(default_factory=set[str])  # E: mypy[arg-type] pyright[reportAssignmentType]
    d: int = tc.field(default_factory=make_tags)  # E: mypy[assignment] pyright[reportAssignmentType]


@tc.pytree_dataclass
class Ordering:
    a: int = tc.field(static=True, default=0)
    b: int  # E: mypy[misc] pyright[reportGeneralTypeIssues]


@tc.pytree_dataclass
class MetaOrdering:
    a: int = dataclasses.field(default=0, metadata={"static": True})
    b: int  # E: mypy[misc] pyright[reportGeneralTypeIssues]


tc.field(statik=True, default=1)  # E: mypy[call-overload] pyright[reportCallIssue]
tc.field(static="yes", default=1)  # E: mypy[call-overload] pyright[reportArgumentType]
tc.field(default=1, metadata=[1])  # E: mypy[call-overload] pyright[reportArgumentType]
tc.field(1)  # E: mypy[call-overload] pyright[reportCallIssue]
