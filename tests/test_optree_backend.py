"""The optree backend: treeclass classes as optree pytree nodes (global and named namespaces)."""

from __future__ import annotations

import dataclasses
import inspect
import sys
import textwrap
import typing
import uuid
from typing import Any

import pytest
from _cells import run_cell
from _subproc import run_script

optree = pytest.importorskip("optree")
attrs = pytest.importorskip("attrs")

import treeclass as tc  # noqa: E402
from treeclass._backends import optree as backend  # noqa: E402
from treeclass._core import registry as _registry  # noqa: E402

pytestmark = pytest.mark.optree


def _namespace() -> str:
    return f"tests-{uuid.uuid4().hex[:12]}"


def _entry(cls: type, namespace: str = "") -> Any:
    """optree's registration of exactly ``cls`` in exactly ``namespace`` (or None)."""
    entry = optree.register_pytree_node.get(cls, namespace=namespace)
    if entry is None or entry.type is not cls or entry.namespace != namespace:
        return None
    return entry


def _paths(tree: Any, **kwargs: Any) -> list[str]:
    return [a.codify("") for a in optree.tree_accessors(tree, **kwargs)]


# --- flatten, unflatten, paths -------------------------------------------------------------


def test_backend_is_active_once_optree_is_imported() -> None:
    assert "optree" in tc.active_backends()


def test_flatten_unflatten_and_static_metadata(uname: str) -> None:
    @tc.pytree_dataclass(name=uname)
    class Layer:
        w: float
        b: float
        act: str = tc.field(static=True, default="relu")
        width: int = tc.field(static=True, default=4)

    tree = {"layers": [Layer(1.0, 2.0), Layer(3.0, 4.0, act="tanh", width=8)]}
    leaves, spec = optree.tree_flatten(tree)
    assert leaves == [1.0, 2.0, 3.0, 4.0]
    assert spec.num_leaves == 4
    rebuilt = optree.tree_unflatten(spec, [10.0, 20.0, 30.0, 40.0])
    assert rebuilt == {"layers": [Layer(10.0, 20.0), Layer(30.0, 40.0, act="tanh", width=8)]}
    assert type(rebuilt["layers"][1]) is Layer
    # Static values live in the spec: they take part in equality and hashing.
    _, same = optree.tree_flatten({"layers": [Layer(5.0, 6.0), Layer(7.0, 8.0, "tanh", 8)]})
    _, other = optree.tree_flatten({"layers": [Layer(5.0, 6.0), Layer(7.0, 8.0, "gelu", 8)]})
    assert spec == same and hash(spec) == hash(same)
    assert spec != other
    assert "'tanh', 8" in repr(spec)


def test_metadata_is_treeclass_auxdata(uname: str) -> None:
    @tc.pytree_dataclass(name=uname)
    class Aux:
        x: float
        y: float | None = None
        tag: str = tc.field(static=True, default="t")

    obj = Aux(1.0)
    ours_children, ours_aux = _registry.registered_node(Aux).flatten(obj)  # type: ignore[union-attr]
    entry = _entry(Aux)
    children, metadata, entries = entry.flatten_func(obj)
    assert (tuple(children), metadata) == (tuple(ours_children), ours_aux)
    assert tuple(children) == (1.0, None)  # the None field is a child (an empty node)
    assert metadata == ("t",)  # the static values, whichever fields are None
    assert tuple(entries) == ("x", "y")


def test_class_with_only_static_fields_has_no_leaves(uname: str) -> None:
    @tc.pytree_dataclass(name=uname)
    class Config:
        lr: float = tc.field(static=True, default=0.1)
        name: str = tc.field(static=True, default="adam")

    leaves, spec = optree.tree_flatten([Config(), Config(0.2)])
    assert leaves == []
    assert optree.tree_unflatten(spec, []) == [Config(), Config(0.2)]


def test_paths_render_as_fields(uname: str) -> None:
    @tc.pytree_dataclass(name=uname)
    class Point:
        x: float
        y: float
        label: str = tc.field(static=True, default="p")

    tree = {"pts": [Point(1.0, 2.0)], "n": (Point(3.0, 4.0),)}
    paths, leaves, _ = optree.tree_flatten_with_path(tree)
    assert leaves == [3.0, 4.0, 1.0, 2.0]
    assert paths == [("n", 0, "x"), ("n", 0, "y"), ("pts", 0, "x"), ("pts", 0, "y")]
    assert _paths(tree) == ["['n'][0].x", "['n'][0].y", "['pts'][0].x", "['pts'][0].y"]
    accessors = optree.tree_accessors(tree)
    assert all(isinstance(a[-1], optree.GetAttrEntry) for a in accessors)
    assert [a(tree) for a in accessors] == leaves
    # The same key strings as treeclass's embedded registry.
    ours = [tc.keystr(p) for p, _ in tc.tree_flatten_with_path(tree)[0]]
    assert ours == _paths(tree)


def test_generated_flatten_is_inspectable(uname: str) -> None:
    @tc.pytree_dataclass(name=uname)
    class Shown:
        a: float
        b: float | None = None

    flatten = _entry(Shown).flatten_func
    assert inspect.getsource(flatten).startswith("def flatten_entries(obj):")
    assert flatten.__qualname__.endswith("Shown.<treeclass flatten_entries[optree]>")


# --- None fields ---------------------------------------------------------------------------


def test_none_fields_are_empty_nodes_as_in_optree_dataclasses(uname: str) -> None:
    @tc.pytree_dataclass(name=uname)
    class Out:
        logits: float
        loss: float | None = None
        hidden: float | None = None

    obj = Out(1.0, hidden=3.0)
    leaves, spec = optree.tree_flatten(obj)
    assert leaves == [1.0, 3.0]
    assert _paths(obj) == [".logits", ".hidden"]
    assert optree.tree_unflatten(spec, [5.0, 6.0]) == Out(5.0, None, 6.0)
    # Where leaves become None, the node data stay: a prefix tree, as optree's own
    # dataclasses give.
    nones = optree.tree_map(lambda x: None, obj)
    assert optree.tree_map(lambda p, x: x, nones, obj, none_is_leaf=True) == obj
    # A spec without None fields rebuilds from its leaves alone.
    spec = optree.tree_structure(Out(1.0, 2.0, 3.0))
    assert optree.tree_unflatten(spec, [7.0, 8.0, 9.0]) == Out(7.0, 8.0, 9.0)


@pytest.mark.parametrize("return_none_fields", [False, True])
def test_none_fields_follow_optrees_none_is_leaf(uname: str, return_none_fields: bool) -> None:
    @tc.pytree_dataclass(name=uname, return_none_fields=return_none_fields)
    class Keep:
        a: float
        b: float | None = None

    obj = Keep(1.0)
    leaves, spec = optree.tree_flatten(obj)
    assert leaves == [1.0]  # None is an empty node in optree by default
    assert _paths(obj) == [".a"]
    assert optree.tree_unflatten(spec, [2.0]) == Keep(2.0, None)
    leaves, spec = optree.tree_flatten(obj, none_is_leaf=True)
    assert leaves == [1.0, None]
    assert _paths(obj, none_is_leaf=True) == [".a", ".b"]
    assert optree.tree_unflatten(spec, [2.0, 3.0]) == Keep(2.0, 3.0)


# --- class kinds ---------------------------------------------------------------------------


def test_frozen_and_slots_dataclasses(uname: str) -> None:
    @tc.pytree_dataclass(name=uname, frozen=True, slots=True)
    class Frozen:
        a: float
        b: float

    _, spec = optree.tree_flatten([Frozen(1.0, 2.0)])
    out = optree.tree_unflatten(spec, [3.0, 4.0])[0]
    assert out == Frozen(3.0, 4.0)
    assert not hasattr(out, "__dict__")
    with pytest.raises(dataclasses.FrozenInstanceError):
        out.a = 5.0  # type: ignore[misc]


def test_attrs_classes(uname: str) -> None:
    @attrs.frozen
    class Frozen:
        w: float
        mode: str = attrs.field(default="m", metadata={"static": True})

    @attrs.define(slots=True)
    class Mutable:
        inner: Frozen
        v: float

        def __attrs_post_init__(self) -> None:
            raise AssertionError("unflatten ran __attrs_post_init__")

    tc.register_dataclass(Frozen, name=uname + ".Frozen")
    tc.register_dataclass(Mutable, name=uname + ".Mutable")
    tree = object.__new__(Mutable)
    object.__setattr__(tree, "inner", Frozen(1.0, "k"))
    object.__setattr__(tree, "v", 2.0)
    leaves, spec = optree.tree_flatten(tree)
    assert leaves == [1.0, 2.0]
    assert _paths(tree) == [".inner.w", ".v"]
    out = optree.tree_unflatten(spec, ["x", "y"])
    assert type(out) is Mutable and type(out.inner) is Frozen
    assert (out.inner.w, out.inner.mode, out.v) == ("x", "k", "y")


def test_attrs_validators_do_not_run_in_unflatten(uname: str) -> None:
    @attrs.define
    class Validated:
        v: float = attrs.field(validator=attrs.validators.instance_of(float))

    tc.register_dataclass(Validated, name=uname)
    _, spec = optree.tree_flatten(Validated(1.0))
    out = optree.tree_unflatten(spec, ["not a float"])
    assert out.v == "not a float"


def test_namedtuples_stay_native_optree_nodes(uname: str) -> None:
    class Pair(typing.NamedTuple):
        first: float
        second: float

    tc.register_namedtuple(Pair, name=uname)
    assert _entry(Pair) is None  # optree handles every namedtuple itself
    tree = Pair(1.0, Pair(2.0, 3.0))
    leaves, spec = optree.tree_flatten(tree)
    assert leaves == [1.0, 2.0, 3.0]
    assert optree.tree_unflatten(spec, [4.0, 5.0, 6.0]) == Pair(4.0, Pair(5.0, 6.0))
    assert _paths(tree) == [".first", ".second.first", ".second.second"]


def test_nested_mixed_tree(uname: str) -> None:
    class NT(typing.NamedTuple):
        p: Any
        q: Any

    @tc.pytree_dataclass(name=uname + ".Leaf")
    class LeafNode:
        v: float
        k: str = tc.field(static=True, default="k")

    @tc.pytree_dataclass(name=uname + ".Root")
    class Root:
        items: list[Any]
        table: dict[str, Any]
        pair: NT
        maybe: LeafNode | None = None

    tree = Root([LeafNode(1.0), LeafNode(2.0, "z")], {"b": 3.0, "a": LeafNode(4.0)}, NT(5.0, None))
    leaves, spec = optree.tree_flatten(tree)
    assert leaves == [1.0, 2.0, 4.0, 3.0, 5.0]
    assert _paths(tree) == [".items[0].v", ".items[1].v", ".table['a'].v", ".table['b']", ".pair.p"]
    assert [tc.keystr(p) for p, _ in tc.tree_flatten_with_path(tree)[0]] == _paths(tree)
    assert leaves == tc.tree_leaves(tree)
    doubled = optree.tree_map(lambda x: x * 2, tree)
    assert doubled == tc.tree_map(lambda x: x * 2, tree)
    assert optree.tree_unflatten(spec, leaves) == tree


def test_unflatten_never_runs_init(uname: str) -> None:
    calls: list[str] = []

    @tc.pytree_dataclass(name=uname)
    class Guarded:
        x: float
        y: float | None = None
        tag: str = tc.field(static=True, default="g")

        def __post_init__(self) -> None:
            calls.append("post_init")
            if not isinstance(self.x, float):
                raise TypeError("x must be a float")

    obj = Guarded(1.0)
    calls.clear()
    _, spec = optree.tree_flatten(obj)
    placeholder = object()
    out = optree.tree_unflatten(spec, [placeholder])
    assert calls == []
    assert out.x is placeholder and out.y is None and out.tag == "g"


def test_unflatten_calls_init_opt_in_is_honoured(uname: str) -> None:
    calls: list[float] = []

    @tc.pytree_dataclass(name=uname, unflatten_calls_init=True)
    class Checked:
        x: float

        def __post_init__(self) -> None:
            calls.append(self.x)

    _, spec = optree.tree_flatten(Checked(1.0))
    calls.clear()
    assert optree.tree_unflatten(spec, [2.0]) == Checked(2.0)
    assert calls == [2.0, 2.0]  # once in unflatten, once for the comparison's right side


def test_subclass_is_a_leaf_until_registered(uname: str) -> None:
    @tc.pytree_dataclass(name=uname)
    class Base:
        x: float

    @dataclasses.dataclass
    class Sub(Base):
        y: float = 0.0

    assert optree.tree_leaves(Sub(1.0, 2.0)) == tc.tree_leaves(Sub(1.0, 2.0)) == [Sub(1.0, 2.0)]


# --- conflicts, atomicity, re-runs -----------------------------------------------------------


def _foreign_global_dataclass() -> type:
    """A dataclass another library registered in optree's global namespace.

    Through ``optree.dataclasses`` where it takes ``namespace=""`` (newer optree), else the
    way ``optree.dataclasses`` itself does it (optree 0.13 refuses ``""`` there).
    """

    class Foreign:
        a: float
        b: float

    try:
        return optree.dataclasses.dataclass(Foreign, namespace="")  # type: ignore[no-any-return]
    except ValueError:
        made = dataclasses.dataclass(Foreign)
        optree.register_pytree_node(
            made,
            lambda o: ((o.a, o.b), None),
            lambda _, children: made(*children),
            namespace=backend.GLOBAL_NAMESPACE,
        )
        return made


def test_class_registered_globally_by_another_library_is_refused(uname: str) -> None:
    Foreign = _foreign_global_dataclass()
    before = _entry(Foreign)
    assert before is not None
    with pytest.raises(
        tc.RegistrationError,
        match=r"Foreign is already registered with optree \(optree's global namespace, flatten "
        r"function \S+\), by another library, so treeclass cannot register it there; "
        r"nothing was registered\. To fix it, register it with override=True",
    ):
        tc.register_dataclass(Foreign, name=uname)
    # Nothing changed anywhere.
    assert not tc.is_registered(Foreign)
    assert tc.class_for_name(uname) is None
    assert tc.tree_leaves(Foreign(1.0, 2.0)) == [Foreign(1.0, 2.0)]
    assert _entry(Foreign) == before
    if "jax" in sys.modules:
        import jax

        assert jax.tree_util.tree_leaves(Foreign(1.0, 2.0)) == [Foreign(1.0, 2.0)]
    # The name is still free.
    tc.register_dataclass(_plain_dataclass(), name=uname)


def _plain_dataclass() -> type:
    @dataclasses.dataclass
    class Plain:
        a: float

    return Plain


def test_override_replaces_and_rollback_restores_a_foreign_registration(
    uname: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    Foreign = _foreign_global_dataclass()
    foreign = _entry(Foreign)

    class Refuses:
        name = "refuses"
        can_unregister = True

        def check(self, change: Any) -> None:
            return None

        def add(self, change: Any) -> Any:
            raise RuntimeError("refused on purpose")

    # A framework registered after optree fails: optree's registration is undone and the
    # other library's registration is put back.
    monkeypatch.setattr(_registry, "_BACKENDS", [*_registry._BACKENDS, Refuses()])
    with pytest.raises(RuntimeError, match="refused on purpose"):
        tc.register_dataclass(Foreign, name=uname, override=True)
    monkeypatch.undo()
    assert not tc.is_registered(Foreign)
    assert _entry(Foreign) == foreign

    tc.register_dataclass(Foreign, name=uname, override=True, static=("b",))
    assert _entry(Foreign).flatten_func is not foreign.flatten_func
    leaves, spec = optree.tree_flatten(Foreign(1.0, 2.0))
    assert leaves == [1.0]
    assert optree.tree_unflatten(spec, [3.0]) == Foreign(3.0, 2.0)


def test_failure_in_optree_rolls_back_every_namespace(
    uname: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ns = _namespace()
    tc.optree.register_namespace(ns)
    real = optree.register_pytree_node

    def fail_in_named(cls: type, *args: Any, namespace: str, **kwargs: Any) -> Any:
        if namespace == ns:
            raise ValueError("simulated optree failure")
        return real(cls, *args, namespace=namespace, **kwargs)

    fail_in_named.get = real.get  # type: ignore[attr-defined]  # lookups stay real
    monkeypatch.setattr(optree, "register_pytree_node", fail_in_named)
    Plain = _plain_dataclass()
    with pytest.raises(
        tc.RegistrationError,
        match=rf"optree refused .*Plain in optree namespace '{ns}' \(simulated optree failure\); "
        "nothing was registered",
    ):
        tc.register_dataclass(Plain, name=uname)
    assert _entry(Plain) is None and _entry(Plain, ns) is None
    assert not tc.is_registered(Plain)
    assert tc.tree_leaves(Plain(1.0)) == [Plain(1.0)]


def _define_point(name: str) -> type:
    """The same class definition each call, as a re-run notebook cell makes it."""
    source = textwrap.dedent(
        """
        @tc.pytree_dataclass(name=NAME)
        class Point:
            x: float
            y: float
            tag: str = tc.field(static=True, default="v")
        """
    )
    return run_cell(source, tc=tc, NAME=name)["Point"]  # type: ignore[no-any-return]


def test_rerun_of_a_class_definition(uname: str) -> None:
    Old = _define_point(uname)
    old_obj = Old(1.0, 2.0)
    New = _define_point(uname)
    assert New is not Old
    assert tc.class_for_name(uname) is New
    assert _entry(New) is not None
    new_obj = New(3.0, 4.0)
    _, spec = optree.tree_flatten(new_obj)
    assert type(optree.tree_unflatten(spec, [5.0, 6.0])) is New
    # Objects made before the re-run flatten as they do in the embedded registry.
    assert optree.tree_leaves(old_obj) == tc.tree_leaves(old_obj) == [1.0, 2.0]


def test_registering_the_same_class_again_is_a_no_op(uname: str) -> None:
    Plain = _plain_dataclass()
    tc.register_dataclass(Plain, name=uname)
    entry = _entry(Plain)
    tc.register_dataclass(Plain, name=uname)
    assert _entry(Plain) is entry


# --- named namespaces ----------------------------------------------------------------------


def test_register_namespace_covers_current_and_future_classes(uname: str) -> None:
    @tc.pytree_dataclass(name=uname + ".Before")
    class Before:
        x: float
        s: str = tc.field(static=True, default="b")

    ns = _namespace()
    tc.optree.register_namespace(ns)
    tc.optree.register_namespace(ns)  # idempotent
    assert tc.optree.namespaces().count(ns) == 1

    @tc.pytree_dataclass(name=uname + ".After")
    class After:
        y: float
        z: float | None = None

    for cls in (Before, After):
        entry = _entry(cls, ns)
        assert entry is not None and entry.path_entry_type is optree.GetAttrEntry
        assert _entry(cls) is not None  # still in the global namespace
    tree = [Before(1.0), After(2.0)]
    leaves, spec = optree.tree_flatten(tree, namespace=ns)
    assert leaves == [1.0, 2.0]
    assert spec.namespace == ns
    assert optree.tree_unflatten(spec, [3.0, 4.0]) == [Before(3.0), After(4.0)]
    assert _paths(tree, namespace=ns) == ["[0].x", "[1].y"]


@pytest.mark.parametrize(
    ("namespace", "error", "match"),
    [
        ("", tc.RegistrationError, r"must be a non-empty str; every treeclass class is already"),
        ("torch", tc.RegistrationError, r"'torch' belongs to PyTorch's C\+\+ pytree"),
        (3, tc.RegistrationTypeError, r"an optree namespace is a str, got int"),
    ],
)
def test_register_namespace_rejects_bad_namespaces(
    namespace: Any, error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        tc.optree.register_namespace(namespace)
    assert namespace not in tc.optree.namespaces()


def test_register_namespace_is_all_or_nothing(uname: str) -> None:
    @tc.pytree_dataclass(name=uname + ".A")
    class A:
        x: float

    @tc.pytree_dataclass(name=uname + ".B")
    class B:
        x: float

    ns = _namespace()
    optree.register_pytree_node(B, lambda b: ((), None), lambda m, c: B(0.0), namespace=ns)
    with pytest.raises(
        tc.RegistrationError,
        match=rf"B is already registered with optree \(optree namespace '{ns}', .*treeclass "
        rf"cannot register it there; nothing was registered\. To fix it, unregister it",
    ):
        tc.optree.register_namespace(ns)
    assert ns not in tc.optree.namespaces()
    assert _entry(A, ns) is None


def test_future_class_conflicting_in_a_named_namespace_is_refused(uname: str) -> None:
    ns = _namespace()
    tc.optree.register_namespace(ns)
    Plain = _plain_dataclass()
    optree.register_pytree_node(Plain, lambda p: ((), None), lambda m, c: None, namespace=ns)
    with pytest.raises(
        tc.RegistrationError,
        match=rf"Plain is already registered with optree \(optree namespace '{ns}', flatten",
    ):
        tc.register_dataclass(Plain, name=uname)
    assert not tc.is_registered(Plain)
    assert _entry(Plain) is None  # not half-registered in the global namespace


# --- import order ----------------------------------------------------------------------------

_CLASSES = """
import treeclass as tc
@tc.pytree_dataclass(name="fresh.P")
class P:
    x: float
    y: float | None = None
    s: str = tc.field(static=True, default="s")
"""

_CHECK = """
import optree
leaves, spec = optree.tree_flatten([P(1.0), P(2.0, 3.0)])
back = optree.tree_unflatten(spec, leaves)
print(leaves, [a.codify("") for a in optree.tree_accessors([P(1.0), P(2.0, 3.0)])],
      back == [P(1.0), P(2.0, 3.0)], tc.active_backends())
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    "program",
    [
        pytest.param(_CLASSES + _CHECK, id="classes-then-optree"),
        pytest.param("import optree\n" + _CLASSES + _CHECK, id="optree-then-treeclass"),
        pytest.param(
            "import treeclass\nimport optree\n" + _CLASSES + _CHECK, id="treeclass-optree-classes"
        ),
    ],
)
def test_import_order_does_not_matter(program: str) -> None:
    out = run_script(program, timeout=300, env={"PYTHONWARNINGS": "default"}).checked()
    assert out.stdout.strip() == ("[1.0, 2.0, 3.0] ['[0].x', '[1].x', '[1].y'] True ('optree',)")
    assert "RuntimeWarning" not in out.stderr


@pytest.mark.slow
def test_register_namespace_before_optree_is_imported() -> None:
    program = _CLASSES + textwrap.dedent(
        """
        import sys
        import treeclass.optree
        assert "optree" not in sys.modules
        assert treeclass.optree.namespaces() == ()
        treeclass.optree.register_namespace("mine")
        import optree
        print(optree.register_pytree_node.get(P, namespace="mine").namespace,
              optree.tree_leaves(P(1.0, 2.0), namespace="mine"))
        """
    )
    out = run_script(program, timeout=300).checked()
    assert out.stdout.strip() == "mine [1.0, 2.0]"
