"""The embedded registry: tree_* functions, TreeSpec and key paths.

Type-checked by tests/test_typing.py, never run. A line ending in
``# E: mypy[<code>,...] pyright[<rule>,...]`` must get exactly those errors from those checkers;
every other line must get none.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from typing_extensions import assert_type

import treeclass as tc


@tc.pytree_dataclass(name="cases.Params")
class Params:
    w: float
    b: float
    act: str = tc.field(static=True, default="relu")


tree = {"params": [Params(1.0, 2.0)], "step": (3, None)}


def is_leaf(x: Any) -> bool:
    return isinstance(x, Params)


def double(x: Any) -> Any:
    return x * 2


def add(x: float, y: float) -> float:
    return x + y


def describe(path: tc.KeyPath, x: object) -> str:
    return f"{tc.keystr(path)}={x!r}"


# --- flatten / unflatten / map ---------------------------------------------------------------

leaves, spec = tc.tree_flatten(tree)
assert_type(leaves, list[Any])
assert_type(spec, tc.TreeSpec)
assert_type(tc.tree_flatten(tree, is_leaf=is_leaf), tuple[list[Any], tc.TreeSpec])
assert_type(tc.tree_flatten(tree, lambda x: x is None), tuple[list[Any], tc.TreeSpec])
assert_type(tc.tree_unflatten(spec, leaves), Any)
assert_type(tc.tree_unflatten(spec, iter(leaves)), Any)
assert_type(tc.tree_leaves(tree), list[Any])
assert_type(tc.tree_leaves(tree, is_leaf), list[Any])
assert_type(tc.tree_structure(tree), tc.TreeSpec)
assert_type(tc.tree_map(double, tree), Any)
assert_type(tc.tree_map(add, tree, tree, is_leaf=is_leaf), Any)

restored: dict[str, Any] = tc.tree_unflatten(spec, [0.0] * spec.num_leaves)

tc.tree_unflatten(leaves, spec)  # E: mypy[arg-type] pyright[reportArgumentType]
tc.tree_unflatten(spec, 3)  # E: mypy[arg-type] pyright[reportArgumentType]
tc.tree_unflatten(spec)  # E: mypy[call-arg] pyright[reportCallIssue]
tc.tree_flatten(tree, is_leaf=1)  # E: mypy[arg-type] pyright[reportArgumentType]
tc.tree_flatten(tree, leaf=is_leaf)  # E: mypy[call-arg] pyright[reportCallIssue]
tc.tree_map(tree)  # E: mypy[call-overload] pyright[reportCallIssue]
tc.tree_map(1, tree)  # E: mypy[call-overload] pyright[reportArgumentType,reportCallIssue]

# --- TreeSpec --------------------------------------------------------------------------------

assert_type(spec.num_leaves, int)
assert_type(spec.num_nodes, int)
assert_type(spec.unflatten(leaves), Any)
assert_type(spec.children(), list[tc.TreeSpec])
assert_type(spec.flatten_up_to(tree), list[Any])
assert_type(spec.node_type, type | None)
assert_type(spec == spec, bool)
assert_type(hash(spec), int)
assert_type(repr(spec), str)
specs: set[tc.TreeSpec] = {spec}
by_spec: dict[tc.TreeSpec, int] = {spec: 1}

spec.num_leaves = 3  # E: mypy[misc] pyright[reportAttributeAccessIssue]
spec.unflatten()  # E: mypy[call-arg] pyright[reportCallIssue]
spec.leaves  # E: mypy[attr-defined] pyright[reportAttributeAccessIssue,reportUnknownMemberType]

# --- key paths -------------------------------------------------------------------------------

pairs, spec2 = tc.tree_flatten_with_path(tree)
assert_type(pairs, list[tuple[tc.KeyPath, Any]])
assert_type(spec2, tc.TreeSpec)
assert_type(tc.tree_leaves_with_path(tree, is_leaf), list[tuple[tc.KeyPath, Any]])
assert_type(tc.tree_map_with_path(describe, tree), Any)
assert_type(tc.tree_map_with_path(describe, tree, tree, is_leaf=is_leaf), Any)

path, leaf = pairs[0]
assert_type(path, tuple[tc.KeyEntry, ...])
assert_type(tc.keystr(path), str)
assert_type(tc.keystr(path, simple=True, separator="/"), str)
assert_type(tc.keystr((tc.DictKey("k"), tc.SequenceKey(0), tc.GetAttrKey("x"))), str)
assert_type(tc.keystr([]), str)

entry = path[0]
if isinstance(entry, tc.SequenceKey):
    assert_type(entry.idx, int)
elif isinstance(entry, tc.DictKey):
    assert_type(entry.key, Hashable)
else:
    assert_type(entry, tc.GetAttrKey)
    assert_type(entry.name, str)

tc.keystr(path, "/")  # E: mypy[call-arg,arg-type] pyright[reportCallIssue]
tc.keystr(path, simple="yes")  # E: mypy[arg-type] pyright[reportArgumentType]
tc.keystr(1)  # E: mypy[arg-type] pyright[reportArgumentType]
tc.SequenceKey("0")  # E: mypy[arg-type] pyright[reportArgumentType]
tc.GetAttrKey(0)  # E: mypy[arg-type] pyright[reportArgumentType]
tc.DictKey([1])  # E: mypy[arg-type] pyright[reportArgumentType]

# --- lookups ---------------------------------------------------------------------------------

assert_type(tc.name_of(Params), str | None)
assert_type(tc.class_for_name("cases.Params"), type | None)
assert_type(tc.is_registered(Params), bool)
assert_type(tc.active_backends(), tuple[str, ...])
assert_type(tc.activate_backends(), tuple[str, ...])
tc.activate_backends("jax")  # E: mypy[call-arg] pyright[reportCallIssue]
tc.name_of(Params(1.0, 2.0))  # E: mypy[arg-type] pyright[reportArgumentType]


# --- keyword arguments and byte strings ------------------------------------------------------

assert_type(tc.tree_map(f=double, tree=tree), Any)
assert_type(tc.tree_map(lambda x: x, tree=tree), Any)
assert_type(tc.treespec_loads(bytearray(b"{}")), tc.TreeSpec)
assert_type(tc.treespec_loads(b"{}"), tc.TreeSpec)
