"""Schema evolution keywords: field and class ``aliases``, ``removed_fields``, ``migrate``.

Type-checked by tests/test_typing.py, never run. A line ending in
``# E: mypy[<code>,...] pyright[<rule>,...]`` must get exactly those errors from those checkers;
every other line must get none.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

from typing_extensions import assert_type

import treeclass as tc


def migrate(state: dict[str, Any]) -> dict[str, Any]:
    return state


@tc.pytree_dataclass(
    name="cases.evo.Output",
    aliases=("cases.evo.OldOutput",),
    removed_fields=("gone",),
    migrate=migrate,
    frozen=True,
)
class Output:
    logits: float
    hidden: float | None = tc.field(default=None, aliases=("hidden_states",))
    mode: str = tc.field(static=True, default="eval", aliases=["md"])


assert_type(Output(1.0), Output)
assert_type(Output(1.0, 2.0, "train").hidden, float | None)
assert_type(tc.field(default=1, aliases=("a",)), int)
assert_type(tc.field(default_factory=list[int], aliases=("a",)), list[int])
Output(1.0, hidden_states=2.0)  # E: mypy[call-arg] pyright[reportCallIssue]
Output(1.0).logits = 2.0  # E: mypy[misc] pyright[reportAttributeAccessIssue]


@dataclasses.dataclass
class Plain:
    x: int
    y: int = dataclasses.field(default=0, metadata={"treeclass.aliases": ("why",)})


assert_type(
    tc.register_dataclass(
        Plain,
        name="cases.evo.Plain",
        aliases=["cases.evo.OldPlain"],
        removed_fields=("z",),
        migrate=migrate,
    ),
    type[Plain],
)


class Pair(NamedTuple):
    a: int
    b: int


assert_type(
    tc.register_namedtuple(Pair, name="cases.evo.Pair", aliases=("cases.evo.OldPair",)), type[Pair]
)


class Node(
    tc.PytreeNode,
    name="cases.evo.Node",
    aliases=("cases.evo.OldNode",),
    removed_fields=("z",),
    migrate=migrate,
):
    w: float


assert_type(Node(1.0).replace(w=2.0), Node)


# --- misuse ------------------------------------------------------------------------------------


def int_hook(state: int) -> int:
    return state


tc.field(default=1, aliases=1)  # E: mypy[call-overload] pyright[reportArgumentType]
tc.register_dataclass(Plain, aliases=1)  # E: mypy[arg-type] pyright[reportArgumentType]
tc.register_dataclass(Plain, migrate=int_hook)  # E: mypy[arg-type] pyright[reportArgumentType]
tc.register_namedtuple(Pair, name="cases.evo.P2", aliases=1)  # E: mypy[call-overload] pyright[reportArgumentType]
tc.register_namedtuple(Pair, name="cases.evo.P3", removed_fields=("a",))  # E: mypy[call-overload] pyright[reportCallIssue]


@tc.pytree_dataclass(name="cases.evo.BadHook", migrate=int_hook)  # E: mypy[arg-type] pyright[reportArgumentType]
class BadHook:
    x: int


@tc.pytree_dataclass(name="cases.evo.BadRemoved", removed_fields=1)  # E: mypy[call-overload] pyright[reportArgumentType]
class BadRemoved:
    x: int
