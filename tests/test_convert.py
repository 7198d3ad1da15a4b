"""Conversion: one portable treespec JSON for the structures of every framework.

``tc.treespec_dumps`` takes a JAX ``PyTreeDef``, a torch ``TreeSpec`` and an optree
``PyTreeSpec`` as well as treeclass's own ``TreeSpec``; ``tc.treespec_loads(text, to=...)``
gives the structure object of the framework asked for. (The same document for the same
structure, whichever framework made it, is stated in ``test_parity.py``.)
"""

from __future__ import annotations

import collections
from typing import Any

import pytest
from _subproc import run_script
from _treespec_schema import validate_document
from hypothesis import HealthCheck, given, settings
from strategies import AttrsNode, FrozenSlots, KeepNone, Pair, Plain, ThirdParty
from test_parity import Anon, named_trees

import treeclass as tc

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
torch = pytest.importorskip("torch")
optree = pytest.importorskip("optree")
jtu = pytest.importorskip("jax.tree_util")
tp = pytest.importorskip("torch.utils._pytree")
cp = pytest.importorskip("torch.utils._cxx_pytree")

FRAMEWORKS = ("treeclass", "jax", "torch", "optree")


def rich_tree() -> Any:
    """One node of each kind, as every framework agrees (dicts in sorted key order, no None)."""
    return {
        "a": Plain(1.0, None, "t"),
        "b": [FrozenSlots(2.0, (3,)), (KeepNone(3.0, 4.0), Pair(5.0, 6.0))],
        "c": AttrsNode(7.0, 8.0, "n"),
        "d": collections.defaultdict(list, {"p": 9.0, "q": 10.0}),
        "e": ((), [], {}),
        "o": collections.OrderedDict([("z", 11.0), ("y", ThirdParty(12.0, "j"))]),
    }


# --- flatten / unflatten / structure per framework ------------------------------------------


def flatten(framework: str, tree: Any) -> tuple[list[Any], Any]:
    if framework == "treeclass":
        return tc.tree_flatten(tree)
    if framework == "jax":
        return jtu.tree_flatten(tree)
    if framework == "torch":
        return tp.tree_flatten(tree)
    return optree.tree_flatten(tree)  # type: ignore[no-any-return]


def unflatten(framework: str, spec: Any, leaves: list[Any]) -> Any:
    if framework == "treeclass":
        return tc.tree_unflatten(spec, leaves)
    if framework == "jax":
        return jtu.tree_unflatten(spec, leaves)
    if framework == "torch":
        return tp.tree_unflatten(leaves, spec)
    return optree.tree_unflatten(spec, leaves)


def structure(framework: str, tree: Any) -> Any:
    return flatten(framework, tree)[1]


def as_leaves_of(framework: str, leaves: list[Any]) -> list[Any]:
    """The leaves as that framework's users hold them: JAX arrays, torch tensors, floats."""
    if framework == "jax":
        return [jnp.asarray(x) for x in leaves]
    if framework == "torch":
        return [torch.tensor(x) for x in leaves]
    return list(leaves)


def load(text: str, framework: str) -> Any:
    if framework == "treeclass":
        return tc.treespec_loads(text)
    return tc.treespec_loads(text, to=framework)  # type: ignore[call-overload]


# --- every ordered pair ---------------------------------------------------------------------


@pytest.mark.parametrize("dst", FRAMEWORKS)
@pytest.mark.parametrize("src", FRAMEWORKS)
def test_flattened_in_one_framework_unflattens_in_another(src: str, dst: str) -> None:
    tree = rich_tree()
    leaves, spec = flatten(src, tree)
    text = tc.treespec_dumps(spec)
    validate_document(text)
    assert text == tc.treespec_dumps(tc.tree_structure(tree))
    loaded = load(text, dst)
    assert loaded == structure(dst, tree)
    rebuilt = unflatten(dst, loaded, as_leaves_of(dst, leaves))
    # The same nodes (types and static values) with the leaves converted to dst's type.
    assert tc.tree_structure(rebuilt) == tc.tree_structure(tree)
    assert [float(x) for x in tc.tree_leaves(rebuilt)] == tc.tree_leaves(tree)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(named_trees)
def test_every_pair_on_generated_trees(tree: Any) -> None:
    expected = tc.tree_structure(tree)
    text = tc.treespec_dumps(expected)
    for src in FRAMEWORKS:
        leaves, spec = flatten(src, tree)
        assert tc.treespec_dumps(spec) == text
        for dst in FRAMEWORKS:
            loaded = load(text, dst)
            assert loaded == structure(dst, tree)
            rebuilt = unflatten(dst, loaded, leaves)
            assert rebuilt == tree
            assert tc.tree_structure(rebuilt) == expected


def test_jax_arrays_from_torch_under_jit() -> None:
    """A torch structure, saved, loads as a JAX treedef that jit traces through."""
    tree = rich_tree()
    leaves, tspec = tp.tree_flatten(tree)
    treedef = tc.treespec_loads(tc.treespec_dumps(tspec), to="jax")
    jleaves = [jnp.asarray(x) for x in leaves]

    @jax.jit
    def double(t: Any) -> Any:
        return jtu.tree_map(lambda x: 2 * x, t)

    out = double(jtu.tree_unflatten(treedef, jleaves))
    assert type(out["a"]) is Plain and out["a"].tag == "t" and out["a"].b is None
    assert [float(x) for x in jtu.tree_leaves(out)] == [2 * x for x in tc.tree_leaves(tree)]


def test_torch_cxx_pytree_spec_dumps_like_the_others() -> None:
    tree = rich_tree()
    assert tc.treespec_dumps(cp.tree_structure(tree)) == tc.treespec_dumps(tc.tree_structure(tree))


def test_loads_default_is_unchanged() -> None:
    spec = tc.tree_structure(rich_tree())
    text = tc.treespec_dumps(spec)
    assert tc.treespec_loads(text) == spec
    assert tc.treespec_loads(text, to=None) == spec


def test_deep_structure_converts() -> None:
    tree: Any = 1.0
    for _ in range(300):
        tree = [tree]
    text = tc.treespec_dumps(jtu.tree_structure(tree))
    assert text == tc.treespec_dumps(tc.tree_structure(tree))
    assert tc.treespec_dumps(tp.tree_structure(tree)) == text
    assert tc.treespec_dumps(optree.tree_structure(tree)) == text
    assert tc.treespec_loads(text, to="jax") == jtu.tree_structure(tree)
    assert tc.treespec_loads(text, to="optree") == optree.tree_structure(tree)
    assert tc.treespec_loads(text, to="torch") == tp.tree_structure(tree)


# --- where frameworks differ: the mapping ---------------------------------------------------


def test_torch_none_leaf_is_written_as_a_leaf() -> None:
    """torch's None is a leaf: the document has a leaf there, and JAX unflattens None into it."""
    tree = {"a": 1.0, "b": (None, 2.0), "c": KeepNone(None, 3.0)}
    leaves, tspec = tp.tree_flatten(tree)
    assert leaves == [1.0, None, 2.0, None, 3.0]
    text = tc.treespec_dumps(tspec)
    doc = validate_document(text)
    assert doc["leaves"] == 5
    assert text != tc.treespec_dumps(tc.tree_structure(tree))  # there, None is a node
    assert text == tc.treespec_dumps(tc.tree_structure(tree, is_leaf=lambda x: x is None))
    treedef = tc.treespec_loads(text, to="jax")
    assert treedef.num_leaves == 5
    assert jtu.tree_unflatten(treedef, leaves) == tree
    assert optree.tree_unflatten(tc.treespec_loads(text, to="optree"), leaves) == tree
    assert tp.tree_unflatten(leaves, tc.treespec_loads(text, to="torch")) == tree


def test_none_node_cannot_become_a_torch_spec() -> None:
    tree = {"a": 1.0, "b": None}
    text = tc.treespec_dumps(jtu.tree_structure(tree))
    with pytest.raises(
        tc.TreespecLoadError, match=r"has a None node .*where torch's pytree would see a leaf"
    ):
        tc.treespec_loads(text, to="torch")
    # The other frameworks take it as it is.
    assert tc.treespec_loads(text, to="jax") == jtu.tree_structure(tree)
    assert tc.treespec_loads(text, to="optree") == optree.tree_structure(tree)


@pytest.mark.parametrize("module", ["torch", "cxx"])
def test_torch_dict_in_insertion_order_is_refused(module: str) -> None:
    flat = tp if module == "torch" else cp
    with pytest.raises(
        tc.StructureMismatchError,
        match=r"has a dict at child position \[1\] .* insertion order \['b', 'a'\]"
        r".*dict\(sorted\(d\.items\(\)\)\)",
    ):
        tc.treespec_dumps(flat.tree_structure([1, {"b": 1, "a": 2}]))
    with pytest.raises(tc.StructureMismatchError, match=r"has a defaultdict at the root"):
        tc.treespec_dumps(flat.tree_structure(collections.defaultdict(list, {"b": 1, "a": 2})))
    # In sorted order (whatever the framework) it is the ordinary dict node.
    tree = [1, {"a": 2, "b": 1}]
    assert tc.treespec_dumps(flat.tree_structure(tree)) == tc.treespec_dumps(
        tc.tree_structure(tree)
    )


def test_torch_dict_with_unsortable_keys_keeps_its_order() -> None:
    tree = {1: 1.0, "a": 2.0}
    assert tc.treespec_dumps(tp.tree_structure(tree)) == tc.treespec_dumps(tc.tree_structure(tree))


# --- what cannot be represented -------------------------------------------------------------


def test_jax_only_node_is_refused() -> None:
    class JaxOnly:
        def __init__(self, x: Any) -> None:
            self.x = x

    jtu.register_pytree_node(JaxOnly, lambda o: ((o.x,), None), lambda _, c: JaxOnly(*c))
    with pytest.raises(
        tc.UnnamedClassError,
        match=r"JAX structure has a node of type .*JaxOnly at child position \[0\].*not "
        r"registered with treeclass.*treeclass\.register_dataclass",
    ):
        tc.treespec_dumps(jtu.tree_structure([JaxOnly(1)]))


def test_torch_only_node_is_refused() -> None:
    with pytest.raises(
        tc.UnnamedClassError, match=r"torch structure has a node of type torch\.Size at the root"
    ):
        tc.treespec_dumps(tp.tree_structure(torch.Size([2, 3])))


def test_optree_only_node_is_refused() -> None:
    with pytest.raises(
        tc.UnnamedClassError,
        match=r"optree structure has a node of type collections\.deque at child position \[1\]",
    ):
        tc.treespec_dumps(optree.tree_structure((1, collections.deque([1, 2]))))


@pytest.mark.parametrize("framework", ["jax", "torch", "optree"])
def test_unnamed_namedtuple_is_refused(framework: str) -> None:
    spec = structure(framework, [Anon(1, 2)])
    with pytest.raises(
        tc.UnnamedClassError,
        match=r"type test_parity\.Anon .*treeclass\.register_namedtuple\(Anon, "
        r'name="pkg\.Anon"\)',
    ):
        tc.treespec_dumps(spec)


@pytest.mark.parametrize("framework", ["jax", "torch", "optree"])
def test_unnamed_treeclass_class_is_refused(framework: str) -> None:
    @tc.pytree_dataclass
    class NoName:
        x: float

    with pytest.raises(tc.UnnamedClassError, match=r"NoName was registered without a name"):
        tc.treespec_dumps(structure(framework, {"k": NoName(1.0)}))


def test_unknown_target_is_refused() -> None:
    text = tc.treespec_dumps(tc.tree_structure([1]))
    with pytest.raises(tc.TreespecLoadError, match=r"to='tensorflow'\) is not a framework"):
        tc.treespec_loads(text, to="tensorflow")  # type: ignore[call-overload]


def test_other_objects_are_still_a_type_error() -> None:
    with pytest.raises(TypeError, match=r"takes a treeclass TreeSpec, got dict.*optree PyTreeSpec"):
        tc.treespec_dumps({})  # type: ignore[arg-type]


# --- imports ----------------------------------------------------------------------------------


def _imported_after(code: str) -> set[str]:
    script = "\n".join(
        [
            "import sys",
            "import treeclass as tc",
            code,
            'print(sorted(m for m in ("jax", "torch", "optree") if m in sys.modules))',
        ]
    )
    out = run_script(script, timeout=300).checked().stdout
    return set(out.strip().splitlines()[-1].strip("[]").replace("'", "").split(", ")) - {""}


@pytest.mark.slow
def test_no_framework_is_imported_unless_asked_for() -> None:
    base = "text = tc.treespec_dumps(tc.tree_structure({'a': [1, (2, None)]}))\n"
    assert _imported_after(base + "tc.treespec_loads(text)") == set()
    assert _imported_after(base + "tc.treespec_loads(text, to='optree')") == {"optree"}
    assert _imported_after(base + "tc.treespec_loads(text, to='jax')") == {"jax"}
    # A bad document fails before any framework is imported.
    code = "\n".join(
        [
            "try:",
            "    tc.treespec_loads('{}', to='torch')",
            "except tc.TreespecLoadError:",
            "    pass",
        ]
    )
    assert _imported_after(code) == set()
    # Asking whether an object is some framework's spec imports nothing either.
    code = "\n".join(
        [
            "try:",
            "    tc.treespec_dumps(object())",
            "except TypeError:",
            "    pass",
        ]
    )
    assert _imported_after(code) == set()
