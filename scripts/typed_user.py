"""A user's module, type-checked with ``mypy --strict`` against an installed wheel (``.ci/run``).

The release job installs the wheel (no ``-e``) into a fresh venv and runs mypy on this file,
so it checks what users get: the wheel's ``py.typed`` and annotations. Every ``assert_type``
must hold, and mypy must not see ``Any`` where a type is promised (``--strict`` reports
untyped imports and decorators). The file also runs (``python scripts/typed_user.py``).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from typing_extensions import assert_type

import treeclass as tc


@tc.pytree_dataclass(name="typed_user.Params")
class Params:
    """A layer's parameters."""

    w: float
    b: float
    activation: str = tc.field(static=True, default="relu")


class State(tc.PytreeNode, name="typed_user.State"):
    """A training state."""

    params: Params
    step: int


class Pair(NamedTuple):
    """Two numbers."""

    left: float
    right: float


tc.register_namedtuple(Pair, name="typed_user.Pair")

params = Params(1.0, 0.5)
assert_type(params, Params)
assert_type(params.w, float)
assert_type(params.activation, str)

state = State(params=params, step=3)
assert_type(state.params, Params)
assert_type(state.replace(step=4), State)
assert_type(tc.replace(params, w=2.0), Params)

leaves, spec = tc.tree_flatten([state, Pair(1.0, 2.0)])
assert_type(leaves, list[Any])  # leaves are any objects
assert_type(spec, tc.TreeSpec)
assert_type(spec.num_leaves, int)
assert_type(tc.treespec_dumps(spec), str)
assert_type(tc.treespec_loads(tc.treespec_dumps(spec)), tc.TreeSpec)
assert_type(tc.name_of(Params), str | None)
assert_type(tc.class_for_name("typed_user.State"), type | None)
assert_type(tc.is_registered(Pair), bool)
assert_type(tc.__version__, str)

if __name__ == "__main__":
    assert tc.tree_leaves(state) == [1.0, 0.5, 3]
    assert tc.tree_unflatten(spec, leaves) == [state, Pair(1.0, 2.0)]
    assert tc.name_of(Params) == "typed_user.Params"
    print("typed_user: ok")
