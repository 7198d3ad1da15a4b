"""Deep trees: flatten, flatten_with_path, unflatten, dumps and loads stay linear (issue 13).

Past the interpreter's recursion limit the walkers must neither go quadratic (slicing the entry
list per node) nor build one key path tuple per node (a chain with one leaf at the bottom would
then need memory quadratic in its depth). Each shape runs in a fresh process with a memory cap:
linear code does all five operations well under the cap, while one key path tuple per node runs
out of it (100,000 levels, a hundred times the recursion limit: 5 billion path entries, 40 GB,
against a 3 GiB cap). The test measures memory and output sizes, never time: the process's
timeout only guards against a hang and is far beyond what any machine needs (linear code takes
a few seconds).
How long the walkers take at each depth is measured by ``benchmarks/bench_hostile.py``.

A "comb" (a leaf at every level) is the one shape whose ``tree_flatten_with_path`` *output* is
quadratic: the leaf at depth ``d`` has a ``d``-long key path, and key paths are tuples, as in JAX,
PyTorch and optree. So the 50,000-deep comb runs the other four operations, and
``tree_flatten_with_path`` is checked on a 3,000-deep comb (past the recursion limit, 4.5 million
path entries): the cost is linear in the output, never worse.
"""

from __future__ import annotations

import pytest
from _subproc import run_script

TIMEOUT = 900.0  # a hang guard, not a speed check: linear code needs a few seconds
MEMORY_CAP = 3 * 1024**3  # bytes of address space; linear code needs a few hundred MB

_SCRIPT = """
import json, sys
from typing import Any
import treeclass as tc

@tc.pytree_dataclass(name="tests.deep.Link")
class Link:
    nxt: Any
    v: Any = None

kind, n, path_depth = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])

def comb(n):
    tree = "bottom"
    for i in range(n):
        tree = Link(tree, i)
    return tree

if kind == "chain":      # Link(Link(...Link(1)...)): one leaf, at the bottom
    tree = 1
    for _ in range(n):
        tree = Link(tree)
    leaves_expected = 1
elif kind == "list":     # [[...[1]...]]
    tree = 1
    for _ in range(n):
        tree = [tree]
    leaves_expected = 1
elif kind == "comb":     # Link(Link(..., v=1), v=0): a leaf at every level
    tree = comb(n)
    leaves_expected = n + 1
out = {}
def done(step):
    print(step, flush=True)

leaves, spec = tc.tree_flatten(tree)
assert len(leaves) == leaves_expected, len(leaves)
done("flatten")
if path_depth == n:
    pairs, spec2 = tc.tree_flatten_with_path(tree)
    assert spec2 == spec and len(pairs) == leaves_expected
else:
    pairs, spec2 = tc.tree_flatten_with_path(comb(path_depth))
    assert len(pairs) == path_depth + 1 and spec2.num_leaves == path_depth + 1
    assert [len(p) for p, _ in pairs] == [path_depth, *range(path_depth, 0, -1)]
    assert [leaf for _, leaf in pairs[1:]] == list(range(path_depth))
deepest = pairs[0][0] if kind == "comb" else pairs[-1][0]
out["deepest_path_len"] = len(deepest)
out["deepest_keystr_len"] = len(tc.keystr(deepest))
done("flatten_with_path")
rebuilt = spec.unflatten(leaves)
assert type(rebuilt) is type(tree)
done("unflatten")
text = tc.treespec_dumps(spec)
done("dumps")
loaded = tc.treespec_loads(text)
assert loaded == spec
done("loads")
print(json.dumps(out))
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    ("kind", "depth", "path_depth"),
    [("chain", 100_000, 100_000), ("list", 100_000, 100_000), ("comb", 50_000, 3_000)],
)
def test_deep_trees_are_walked_in_linear_memory(kind: str, depth: int, path_depth: int) -> None:
    outcome = run_script(
        _SCRIPT, kind, str(depth), str(path_depth), timeout=TIMEOUT, memory_cap=MEMORY_CAP
    )
    reached = outcome.stdout.strip().splitlines()
    last = reached[-1] if reached else "nothing"
    assert not outcome.timed_out, (
        f"a {depth:,}-deep {kind} hung: still running after {TIMEOUT:.0f} s "
        f"(last step done: {last})"
    )
    assert outcome.returncode == 0, (
        f"a {depth:,}-deep {kind} failed after step {last!r} under a "
        f"{MEMORY_CAP // 1024**3} GiB memory cap:\n{outcome.stderr[-2000:]}"
    )
    report = outcome.report()
    # The key path of the deepest leaf goes through every level.
    assert report["deepest_path_len"] in (path_depth, path_depth + 1)
    assert report["deepest_keystr_len"] >= path_depth * 3


def _mixed_chain(depth: int) -> object:
    """A chain through registered classes, lists, dicts and tuples, with leaves on the way."""
    import treeclass as tc

    tree: object = "bottom"
    for i in range(depth):
        kind = i % 4
        if kind == 0:
            tree = _DeepNode(tree, float(i))
        elif kind == 1:
            tree = [i, tree]
        elif kind == 2:
            tree = {"b": tree, "a": (i, None)}
        else:
            tree = (tree,)
    assert tc.tree_structure(tree).num_leaves > 0
    return tree


def _register_deep_node() -> type:
    from dataclasses import dataclass
    from typing import Any

    import treeclass as tc

    @dataclass
    class DeepNode:
        nxt: Any
        v: Any

    return tc.register_dataclass(DeepNode, name="tests.deep.DeepNode")


_DeepNode = _register_deep_node()


@pytest.mark.parametrize("depth", [10, 400, 1500, 6000])
def test_recursive_walk_that_goes_on_with_a_stack_gives_the_stack_walks_spec(depth: int) -> None:
    # tree_flatten recurses a bounded number of levels, then walks the rest of each subtree
    # with a stack, keeping what it did: the result must be exactly the pure stack walk's.
    import sys

    import treeclass as tc
    from treeclass._core import tree as tree_module

    tree = _mixed_chain(depth)
    leaves, spec = tc.tree_flatten(tree)
    stack_leaves: list[object] = []
    stack_entries: list[object] = []
    tree_module._flatten_stack(tree, None, stack_leaves, stack_entries)
    assert leaves == stack_leaves
    assert spec._entries == tuple(stack_entries)
    back_leaves, back_spec = tc.tree_flatten(spec.unflatten(leaves))  # (== would recurse)
    assert back_leaves == leaves
    assert back_spec == spec
    # With little stack left to use (a low recursion limit), the same again.
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(200)
    try:
        low_leaves, low_spec = tc.tree_flatten(tree)
    finally:
        sys.setrecursionlimit(limit)
    assert low_leaves == leaves
    assert low_spec._entries == spec._entries
