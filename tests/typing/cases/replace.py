"""``replace(**changes)``: ``tc.replace(obj, ...)``, and the method of ``tc.PytreeNode`` classes.

Type-checked by tests/test_typing.py, never run. A line ending in
``# E: mypy[<code>,...] pyright[<rule>,...]`` must get exactly those errors from those checkers;
every other line must get none.

A decorator cannot add a method type checkers see, so the ``.replace`` method that
``@tc.pytree_dataclass`` adds at run time is typed only on ``tc.PytreeNode`` subclasses (as
``flax.struct.PyTreeNode``); ``tc.replace`` is typed for every class.
"""

from __future__ import annotations

from typing_extensions import assert_type

import treeclass as tc


@tc.pytree_dataclass(name="cases.replace.State", frozen=True)
class State:
    params: float
    step: int
    note: str | None = None
    run: str = tc.field(static=True, default="r")


s = State(1.0, 2)
assert_type(tc.replace(s, step=3), State)
assert_type(tc.replace(s, step=3, run="r2", note=None), State)
assert_type(tc.replace(tc.replace(s, params=2.0), step=4), State)
s.replace(step=3)  # E: mypy[attr-defined] pyright[reportAttributeAccessIssue,reportUnknownMemberType]


class Node(tc.PytreeNode, name="cases.replace.Node", frozen=True):
    w: float
    b: float = 0.0
    act: str = tc.field(static=True, default="relu")


n = Node(1.0)
assert_type(n, Node)
assert_type(n.replace(b=2.0), Node)
assert_type(n.replace(), Node)
assert_type(n.replace(w=2.0).replace(act="gelu").w, float)
assert_type(tc.tree_leaves(n), list[object])  # E: mypy[assert-type] pyright[reportAssertTypeFailure]
Node("1")  # E: mypy[arg-type] pyright[reportArgumentType]
n.w = 2.0  # E: mypy[misc] pyright[reportAttributeAccessIssue]


class Mutable(tc.PytreeNode):
    x: int


m = Mutable(1)
m.x = 2
assert_type(m.replace(x=3), Mutable)
Mutable(x="a")  # E: mypy[arg-type] pyright[reportArgumentType]


# A class that defines replace itself keeps its own signature.
class OwnReplace(tc.PytreeNode):
    x: float

    def replace(self, x: float) -> OwnReplace:  # type: ignore[override]  # pyright: ignore[reportIncompatibleMethodOverride]
        return OwnReplace(x)


assert_type(OwnReplace(1.0).replace(2.0), OwnReplace)
