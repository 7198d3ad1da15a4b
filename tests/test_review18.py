"""Review of issue 18's speed-ups: what the shared objects must not let users see.

Readers that make one object for many equal nodes (``treespec_loads(to="torch")``'s shared
subtrees) must not hand out one mutable object at two places of a tree: a change through
one node would show at the other, unlike the spec torch (or the general path) makes.
"""

from __future__ import annotations

from typing import Any

import pytest

import treeclass as tc

pt = pytest.importorskip("torch.utils._pytree")


def _contexts(spec: Any) -> list[Any]:
    out = []
    stack = [spec]
    while stack:
        s = stack.pop()
        if s.type is not None:
            out.append(s.context)
            stack.extend(s.children())
    return out


def test_to_torch_gives_each_dict_node_its_own_list_of_keys() -> None:
    tree = [{"a": 1, "b": 2}, {"a": 3, "b": 4}, {"a": 5, "b": 6}]
    spec = tc.treespec_loads(tc.treespec_dumps(tc.tree_structure(tree)), to="torch")
    assert spec == pt.tree_structure(tree)
    lists = [c for c in _contexts(spec) if isinstance(c, list)]
    assert len(lists) == 3  # the dicts' (a list's context is None)
    assert len({id(c) for c in lists}) == len(lists)
    spec.children()[0].context.append("z")
    assert spec.children()[1].context == ["a", "b"]


def test_to_torch_makes_a_mutable_context_again_for_each_node_of_one_entry() -> None:
    # A defaultdict's torch context is [factory, keys]: neither shared nor a list of keys.
    import collections

    from treeclass._backends.torch import spec_from_spec
    from treeclass._core.tree import TreeSpec

    tree = [collections.defaultdict(list, {"a": 1}) for _ in range(3)]
    entries = tc.tree_structure(tree)._entries
    one = entries[1]
    spec = spec_from_spec(TreeSpec._make((entries[0], one, one, one), 3))  # one entry, 3 nodes
    assert spec == pt.tree_structure(tree)
    contexts = [c.context for c in spec.children()]
    assert len({id(c) for c in contexts}) == 3
    assert len({id(c[1]) for c in contexts}) == 3


# --- generated code shared by classes of the same fields: its source stays readable ---------

_CLEARED = """
import json, linecache, traceback
from typing import Any
import treeclass as tc

@tc.pytree_dataclass(name="tests.review18.First")
class First:
    p: Any
    q: Any

linecache.clearcache()  # (as tools may: a class declared after gets its source again)

@tc.pytree_dataclass(name="tests.review18.Second")
class Second:
    p: Any
    q: Any

try:
    tc.tree_leaves(object.__new__(Second))
except AttributeError:
    lines = traceback.format_exc().splitlines()
    lines = [line for line in lines if line.strip(" ^~")]  # (no column carets)
print(json.dumps(lines[-3:]))
"""


def test_a_class_declared_after_linecache_is_cleared_shows_its_source_in_tracebacks() -> None:
    from _subproc import run_script

    last = run_script(_CLEARED, timeout=300.0).report()
    assert last[0].startswith('  File "<treeclass generated fields p, q>", line ')
    assert last[1].strip() == "v0 = obj.p"


# --- the canonical walk and a migrate hook that changes the state it is given ---------------


def _bump(state: Any) -> Any:
    state["static"]["n"] += 1  # in place (the hook may; the general path parses every node)
    return state


@tc.pytree_dataclass(name="tests.review18.Bumped", migrate=_bump)
class Bumped:
    x: Any
    n: int = tc.field(static=True, default=0)
    shape: tuple[int, ...] = tc.field(static=True, default=(1,))  # (a static that is no scalar)


def test_nodes_of_one_text_each_load_from_their_own_state_through_a_migrate_hook() -> None:
    from treeclass._treespec import format as fmt

    text = tc.treespec_dumps(tc.tree_structure([Bumped(i) for i in range(3)]))
    nodes = fmt.loads_nodes(text)
    general = fmt.nodes_to_spec(nodes)
    assert [b.n for b in general.unflatten(range(3))] == [1, 1, 1]
    loaded = tc.treespec_loads(text)
    assert [b.n for b in loaded.unflatten(range(3))] == [1, 1, 1]
    assert loaded == general


# --- threads declaring classes of one shape and fields at once ------------------------------


def test_classes_of_one_shape_declared_in_threads_share_code_and_show_their_source() -> None:
    import sys
    import threading
    import traceback

    made: list[type] = []

    def declare(t: int) -> None:
        for j in range(25):
            body = type(f"Race{t}_{j}", (), {"__annotations__": {"u": Any, "v": Any}})
            made.append(tc.pytree_dataclass(name=f"tests.review18.Race{t}_{j}")(body))

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible
    try:
        threads = [threading.Thread(target=declare, args=(t,)) for t in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    assert len(made) == 100
    lines = set()
    for cls in made:
        assert tc.tree_leaves(cls(1, 2)) == [1, 2]
        with pytest.raises(AttributeError) as info:
            tc.tree_leaves(object.__new__(cls))
        frame = traceback.format_exception(info.value)[-2]
        assert frame.splitlines()[1].strip() == "v0 = obj.u", frame
        lines.add(frame.splitlines()[0].split('", line')[0])
    # One shared source (" #2" if another source took the name).
    assert len(lines) == 1
    assert lines.pop().startswith('  File "<treeclass generated fields u, v')
