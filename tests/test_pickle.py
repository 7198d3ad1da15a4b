"""Pickling: treespecs pickle by registered name; registered instances pickle; spawn workers."""

from __future__ import annotations

import collections
import copy
import multiprocessing
import pickle
import sys
import textwrap
from pathlib import Path
from typing import Any, NamedTuple

import attrs
import pytest

import treeclass as tc


@tc.pytree_dataclass(name="tests.pickle.Plain")
class Plain:
    x: Any
    y: Any = None
    tag: str = tc.field(static=True, default="t")


@tc.pytree_dataclass(name="tests.pickle.Frozen", frozen=True)
class Frozen:
    x: Any
    cfg: tuple[int, ...] = tc.field(static=True, default=(1, 2))


@tc.pytree_dataclass(name="tests.pickle.Slots", slots=True)
class Slots:
    x: Any
    n: int = tc.field(static=True, default=0)


@tc.pytree_dataclass(name="tests.pickle.FrozenSlots", frozen=True, slots=True)
class FrozenSlots:
    x: Any
    y: Any = None
    label: str = tc.field(static=True, default="fs")


@attrs.frozen
class AttrsFrozen:
    a: Any
    b: int = attrs.field(default=1, metadata={"static": True})


tc.register_dataclass(AttrsFrozen, name="tests.pickle.AttrsFrozen")


class NT(NamedTuple):
    p: Any
    q: Any


tc.register_namedtuple(NT, name="tests.pickle.NT")

INSTANCES = {
    "plain": Plain(1.0, [2.0]),
    "plain-none": Plain(1.0),
    "frozen": Frozen(1.0, (3,)),
    "slots": Slots([1, 2], 5),
    "frozen-slots": FrozenSlots(1.0, None, "z"),
    "attrs-frozen": AttrsFrozen((1, 2), 7),
    "namedtuple": NT(Plain(1), FrozenSlots(2)),
    "nested": {"a": [Frozen(Slots(1)), NT(1, 2)], "b": collections.OrderedDict(k=Plain(3))},
}


@pytest.mark.parametrize("tree", INSTANCES.values(), ids=INSTANCES.keys())
@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_spec_pickles_by_name(tree: Any, protocol: int) -> None:
    leaves, spec = tc.tree_flatten(tree)
    data = pickle.dumps(spec, protocol=protocol)
    assert b"test_pickle" not in data  # the classes' module is not stored ...
    assert b"tests.pickle." in data or spec.node_type in (dict, list, tuple)  # ... their names are
    loaded = pickle.loads(data)
    assert loaded == spec
    assert loaded.unflatten(leaves) == tree


@pytest.mark.parametrize("tree", INSTANCES.values(), ids=INSTANCES.keys())
@pytest.mark.parametrize("protocol", [2, pickle.HIGHEST_PROTOCOL])
def test_registered_instances_pickle(tree: Any, protocol: int) -> None:
    back = pickle.loads(pickle.dumps(tree, protocol=protocol))
    assert back == tree
    assert tc.tree_structure(back) == tc.tree_structure(tree)
    assert tc.tree_leaves(back) == tc.tree_leaves(tree)


def test_copy_and_deepcopy_of_a_spec() -> None:
    spec = tc.tree_structure([Plain(1), FrozenSlots(2)])
    assert copy.copy(spec) == spec
    assert copy.deepcopy(spec) == spec


def test_spec_with_unnamed_class_does_not_pickle() -> None:
    @tc.pytree_dataclass
    class NoName:
        x: int

    spec = tc.tree_structure(NoName(1))
    with pytest.raises(tc.UnnamedClassError, match=r"NoName was registered without a name"):
        pickle.dumps(spec)


def test_pickled_spec_needs_the_name_registered_when_loading() -> None:
    data = pickle.dumps(tc.tree_structure(Plain(1)))
    tampered = data.replace(b"tests.pickle.Plain", b"tests.pickle.Gone!")
    with pytest.raises(tc.UnregisteredNameError, match=r"'tests.pickle.Gone!'"):
        pickle.loads(tampered)


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_spec_pickle_is_the_json_document(protocol: int) -> None:
    import pickletools

    spec = tc.tree_structure((Plain(1), None))
    data = pickle.dumps(spec, protocol=protocol)
    strings = [arg for _, arg, _ in pickletools.genops(data) if isinstance(arg, str)]
    # The only global is treeclass.treespec_loads; the class is named by its registered name.
    assert tc.treespec_dumps(spec) in strings
    assert not any(__name__ in s or "Plain" == s for s in strings)
    assert "treespec_loads" in " ".join(strings)
    assert pickle.loads(data) == spec


# --- real processes (spawn) -------------------------------------------------------------------

HELPER = """
from typing import Any
import treeclass as tc

NAME = {name!r}


@tc.pytree_dataclass(name=NAME + ".Point", frozen=True, slots=True)
class Point:
    x: Any
    y: Any = None
    unit: str = tc.field(static=True, default="m")


@tc.pytree_dataclass(name=NAME + ".Box")
class Box:
    items: Any
    shape: tuple = tc.field(static=True, default=(2, 3))


def work(spec, leaves, tree):
    import os
    rebuilt = spec.unflatten([v * 10 for v in leaves])
    doubled = tc.tree_map(lambda v: v * 2, tree)
    return os.getpid(), rebuilt, tc.tree_structure(doubled), doubled
"""


@pytest.mark.slow
@pytest.mark.processes
def test_spawn_workers_receive_and_return_specs_and_instances(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, uname: str
) -> None:
    module = f"mp_helper_{uname.rsplit('.', 1)[1]}"
    (tmp_path / f"{module}.py").write_text(textwrap.dedent(HELPER.format(name=uname)))
    monkeypatch.syspath_prepend(str(tmp_path))
    helper = __import__(module)
    try:
        tree = [helper.Point(1.0, None, "cm"), helper.Box([helper.Point(2.0, 3.0)], (4,))]
        leaves, spec = tc.tree_flatten(tree)
        ctx = multiprocessing.get_context("spawn")
        with ctx.Pool(2) as pool:
            results = pool.starmap(helper.work, [(spec, leaves, tree)] * 2)
        for pid, rebuilt, out_spec, doubled in results:
            assert pid != __import__("os").getpid()
            assert rebuilt == tc.tree_unflatten(spec, [v * 10 for v in leaves])
            assert type(rebuilt[0]) is helper.Point
            assert out_spec == spec
            assert doubled == tc.tree_map(lambda v: v * 2, tree)
    finally:
        sys.modules.pop(module, None)
