"""``.replace(**changes)`` on classes made by @tc.pytree_dataclass (issue 10).

Type-checked by tests/test_typing.py, never run. A line ending in
``# E: mypy[<code>,...] pyright[<rule>,...]`` must get exactly those errors from those checkers;
every other line must get none.

What users expect (as with flax.struct.PyTreeNode): ``replace`` returns the class itself, takes
field names as keywords; a class's own ``replace`` and a field named ``replace`` keep their
types.
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
assert_type(s.replace(step=3), State)
assert_type(s.replace(step=3, run="r2", note=None), State)
assert_type(s.replace(), State)
assert_type(s.replace(params=2.0).replace(step=4), State)


@tc.pytree_dataclass
class Bare:
    x: int


assert_type(Bare(1).replace(x=2), Bare)


# A class that defines replace itself keeps its own signature.
@tc.pytree_dataclass
class OwnReplace:
    x: float

    def replace(self, x: float) -> OwnReplace:
        return OwnReplace(x)


assert_type(OwnReplace(1.0).replace(2.0), OwnReplace)
OwnReplace(1.0).replace(y=2.0)  # E: mypy[call-arg] pyright[reportCallIssue]


# A field called replace is a field.
@tc.pytree_dataclass
class FieldReplace:
    replace: int


assert_type(FieldReplace(1).replace, int)
