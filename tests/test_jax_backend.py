"""The JAX backend: treeclass classes in jax.tree_util, jit / vmap / grad and jax.export."""

from __future__ import annotations

import dataclasses
import inspect
import pathlib
import subprocess
import sys
import textwrap
import types
import typing
from typing import Any

import pytest
from _budget import cases

jax = pytest.importorskip("jax")
pytest.importorskip("flatbuffers")  # Exported.serialize() needs it; jax does not declare it

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from _subproc import run_script, write_modules  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from strategies import trees  # noqa: E402

import treeclass as tc  # noqa: E402
from treeclass._backends import jax as backend  # noqa: E402

pytestmark = pytest.mark.jax

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _keystrs(tree: Any) -> list[str]:
    return [jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_flatten_with_path(tree)[0]]


def _make_output(name: str | None, **options: Any) -> type:
    """A model-output class whose ``__post_init__`` refuses anything but a float or ndarray."""

    @tc.pytree_dataclass(name=name, **options)
    class Output:
        logits: Any
        loss: Any = None
        shape: tuple[int, ...] = tc.field(static=True, default=(2,))
        mode: str = tc.field(static=True, default="eval")

        def __post_init__(self) -> None:
            if not isinstance(self.logits, (float, np.ndarray)):
                raise TypeError(f"__post_init__ ran on a {type(self.logits).__name__}")

    return Output


# --- registration -------------------------------------------------------------------------------


def test_backend_is_active_once_jax_is_imported() -> None:
    assert "jax" in tc.active_backends()


def test_classes_become_jax_nodes_with_generated_functions(uname: str) -> None:
    Output = _make_output(uname)
    assert backend._is_jax_tree_node(Output)
    treedef = jax.tree_util.tree_structure(((Output(np.ones(1, np.float32)),), {}))
    # jax.export writes the class under its name and loads the name as the class.
    blob = jax.export.export(jax.jit(lambda o: o))(Output(np.ones(1, np.float32))).serialize()
    assert uname.encode() in bytes(blob)
    assert jax.export.deserialize(blob).in_tree == treedef


# --- semantics as in the embedded registry ------------------------------------------------------


def test_leaves_statics_and_none_fields(uname: str) -> None:
    Output = _make_output(uname)
    out = Output(1.0, shape=(3, 4), mode="train")
    leaves, treedef = jax.tree_util.tree_flatten(out)
    assert leaves == tc.tree_leaves(out) == [1.0]
    back = jax.tree_util.tree_unflatten(treedef, [5.0])
    assert back == Output(5.0, shape=(3, 4), mode="train")
    assert back.loss is None
    # A None field is not a child (and not a JAX None node): the structure records it.
    assert jax.tree_util.tree_structure(out) != jax.tree_util.tree_structure(Output(1.0, 2.0))
    assert jax.tree_util.tree_leaves(Output(1.0, 2.0)) == [1.0, 2.0]


def test_return_none_fields_makes_none_a_child(uname: str) -> None:
    @tc.pytree_dataclass(name=uname, return_none_fields=True)
    class Keep:
        a: Any
        b: Any = None

    k = Keep(1.0)
    # JAX treats a None child as an empty node, as the embedded registry does.
    assert jax.tree_util.tree_leaves(k) == tc.tree_leaves(k) == [1.0]
    assert _keystrs(Keep(1.0, 2.0)) == [".a", ".b"]
    assert jax.tree_util.tree_structure(k) == jax.tree_util.tree_structure(Keep(3.0, None))
    assert jax.tree_util.tree_map(lambda x: x + 1, k) == Keep(2.0, None)


def test_key_paths_are_getattr_keys(uname: str) -> None:
    Output = _make_output(uname)

    class Pair(typing.NamedTuple):
        first: Any
        second: Any

    tree = {"batch": [Output(1.0, 2.0), Pair(Output(3.0), 4.0)]}
    paths, _ = jax.tree_util.tree_flatten_with_path(tree)
    assert isinstance(paths[0][0][-1], jax.tree_util.GetAttrKey)
    got = _keystrs(tree)
    assert got == [
        "['batch'][0].logits",
        "['batch'][0].loss",
        "['batch'][1].first.logits",
        "['batch'][1].second",
    ]
    assert got == [tc.keystr(p) for p, _ in tc.tree_flatten_with_path(tree)[0]]
    assert _keystrs(Output(1.0)) == [".logits"]


def test_frozen_slots_and_attrs_classes(uname: str) -> None:
    attrs = pytest.importorskip("attrs")

    @tc.pytree_dataclass(name=uname + ".fs", frozen=True, slots=True)
    class FrozenSlots:
        x: Any
        y: Any = None
        level: int = tc.field(static=True, default=0)

    @tc.pytree_dataclass(name=uname + ".at")
    @attrs.frozen
    class AttrsNode:
        u: Any
        mode: str = attrs.field(default="m", metadata={"static": True})

    tree = [FrozenSlots(1.0, level=2), AttrsNode(FrozenSlots(2.0, 3.0), mode="n")]
    doubled = jax.jit(lambda t: jax.tree_util.tree_map(lambda v: v * 2, t))(tree)
    assert type(doubled[0]) is FrozenSlots
    assert doubled[0].level == 2
    assert doubled[0].y is None
    assert doubled[1].mode == "n"
    assert [float(v) for v in jax.tree_util.tree_leaves(doubled)] == [2.0, 4.0, 6.0]
    assert _keystrs(tree) == ["[0].x", "[1].u.x", "[1].u.y"]


@pytest.mark.fuzz
@settings(max_examples=cases(60), deadline=None)
@given(trees)
def test_random_trees_match_the_embedded_registry(tree: Any) -> None:
    leaves, treedef = jax.tree_util.tree_flatten(tree)
    assert leaves == tc.tree_leaves(tree)
    assert jax.tree_util.tree_unflatten(treedef, leaves) == tree
    assert _keystrs(tree) == [tc.keystr(p) for p, _ in tc.tree_flatten_with_path(tree)[0]]


# --- transformations ----------------------------------------------------------------------------


def test_jit_vmap_grad_over_inputs_and_outputs(uname: str) -> None:
    @tc.pytree_dataclass(name=uname + ".p", frozen=True)
    class Params:
        w: Any
        b: Any
        act: str = tc.field(static=True, default="relu")

    @tc.pytree_dataclass(name=uname + ".o")
    class Out:
        y: Any
        aux: Any = None
        act: str = tc.field(static=True, default="")

    traces = 0

    def apply(p: Params, x: Any) -> Out:
        nonlocal traces
        traces += 1
        return Out(p.w * x + p.b, None, p.act)

    p = Params(jnp.float32(2.0), jnp.float32(1.0), act="tanh")
    out = jax.jit(apply)(p, jnp.arange(3.0))
    assert type(out) is Out
    assert out.act == "tanh"
    assert out.aux is None
    np.testing.assert_allclose(out.y, [1.0, 3.0, 5.0])

    # A different static value is a different structure: jit retraces.
    f = jax.jit(apply)
    f(p, 1.0)
    f(Params(p.w, p.b, act="tanh"), 1.0)
    n = traces
    f(Params(p.w, p.b, act="sigmoid"), 1.0)
    assert traces == n + 1

    batched = Params(jnp.arange(3.0), jnp.ones(3), act="relu")
    vout = jax.vmap(apply, in_axes=(0, None))(batched, 2.0)
    assert type(vout) is Out
    assert vout.act == "relu"
    np.testing.assert_allclose(vout.y, [1.0, 3.0, 5.0])

    grads = jax.grad(lambda p: apply(p, 3.0).y)(Params(jnp.float32(2.0), jnp.float32(1.0)))
    assert type(grads) is Params
    assert grads.act == "relu"
    assert (float(grads.w), float(grads.b)) == (3.0, 1.0)


def test_placeholders_never_reach_post_init(uname: str) -> None:
    """jit, vmap, grad, eval_shape and export pass tracers / ShapedArrays / object()s through
    unflatten; treeclass's unflatten never calls ``__post_init__`` on them."""
    Output = _make_output(uname)
    out = Output(np.ones(3, np.float32), np.full(3, 0.5, np.float32), mode="train")

    def f(o: Any) -> Any:
        return jax.tree_util.tree_map(lambda v: v * 2, o)

    assert type(jax.jit(f)(out)) is Output
    assert type(jax.vmap(f)(out)) is Output
    assert type(jax.grad(lambda o: f(o).logits.sum())(out)) is Output
    assert type(jax.eval_shape(f, out)) is Output
    exported = jax.export.export(jax.jit(f))(out)
    loaded = jax.export.deserialize(exported.serialize())
    res = loaded.call(out)
    assert type(res) is Output
    assert res.mode == "train"

    # The control: JAX's own register_dataclass rebuilds through __init__, and fails.
    @dataclasses.dataclass
    class Control:
        logits: Any

        def __post_init__(self) -> None:
            if not isinstance(self.logits, (float, np.ndarray)):
                raise TypeError(f"__post_init__ ran on a {type(self.logits).__name__}")

    jax.tree_util.register_dataclass(Control, data_fields=["logits"], meta_fields=[])
    with pytest.raises(TypeError, match="__post_init__ ran on a"):
        jax.jit(f)(Control(np.ones(3, np.float32)))


def test_unflatten_stores_fields_without_running_descriptors(uname: str) -> None:
    """Plain classes get plain attribute stores (the fast path that meets the benchmark
    targets); a field shadowed by a data descriptor of a base class falls back to storing
    into the instance dict, so the descriptor's ``__set__`` does not run either."""
    calls: list[Any] = []

    class Loud:
        def __set_name__(self, owner: type, name: str) -> None:
            self.name = name

        def __get__(self, obj: Any, objtype: Any = None) -> Any:
            return self if obj is None else obj.__dict__[self.name]

        def __set__(self, obj: Any, value: Any) -> None:
            calls.append(value)
            obj.__dict__[self.name] = value

    class Base:
        x = Loud()

    @tc.pytree_dataclass(name=uname + ".d")
    class Described(Base):
        x: Any
        y: Any = 0.0

    @tc.pytree_dataclass(name=uname + ".p")
    class Plain:
        a: Any
        b: Any = None
        tag: str = tc.field(static=True, default="t")

    d = Described(1.0)
    assert calls == [1.0]
    back = jax.tree_util.tree_map(lambda v: v + 1, d)
    assert (back.x, back.y) == (2.0, 1.0)
    assert calls == [1.0]
    p = jax.tree_util.tree_map(lambda v: v + 1, Plain(1.0, 2.0))
    assert list(vars(p)) == ["a", "b", "tag"]  # field order, as __init__ stores them
    from_iter = jax._src.tree_util._registry[Plain].from_iter
    assert "obj.a = v0" in inspect.getsource(from_iter)


# --- static values must be hashable -------------------------------------------------------------


def test_unhashable_static_input_is_a_clear_error(uname: str) -> None:
    @tc.pytree_dataclass(name=uname)
    class Cfg:
        x: Any
        layers: Any = tc.field(static=True, default=(1, 2))

    f = jax.jit(lambda c: c.x * len(c.layers))
    assert float(f(Cfg(1.0))) == 2.0  # a tuple is fine
    with pytest.raises(
        tc.UnhashableStaticError,
        match=r"static field 'layers' of .*Cfg holds an unhashable list \(\[1, 2, 3\]\); .*"
        r"Use a tuple",
    ):
        f(Cfg(1.0, [1, 2, 3]))
    with pytest.raises(tc.UnhashableStaticError, match="unhashable ndarray"):
        jax.vmap(lambda c: c.x)(Cfg(jnp.ones(2), np.arange(3)))
    with pytest.raises(tc.UnhashableStaticError, match="static field 'layers'"):
        jax.grad(lambda c: c.x)(Cfg(1.0, {"a": 1}))
    # It is a TypeError, as an unhashable value is in Python.
    assert issubclass(tc.UnhashableStaticError, TypeError)


def test_unhashable_static_output_is_a_clear_error(uname: str) -> None:
    @tc.pytree_dataclass(name=uname)
    class Cfg:
        x: Any
        layers: Any = tc.field(static=True, default=(1, 2))

    def make(x: Any) -> Cfg:
        c = Cfg.__new__(Cfg)
        c.x, c.layers = x, [4]
        return c

    with pytest.raises(tc.UnhashableStaticError, match=r"'layers' of .*Cfg holds .* list"):
        jax.jit(make)(1.0)


def test_flatten_has_no_hash_check(uname: str) -> None:
    """Only unflatten checks: flatten (jit's dispatch path) stays as it was."""

    @tc.pytree_dataclass(name=uname)
    class Cfg:
        x: Any
        layers: Any = tc.field(static=True, default=(1, 2))

    leaves, treedef = jax.tree_util.tree_flatten(Cfg(1.0, [1]))
    assert leaves == [1.0]
    with pytest.raises(tc.UnhashableStaticError):
        jax.tree_util.tree_unflatten(treedef, leaves)
    # The embedded registry's own unflatten is a different function, without the check.
    assert tc.tree_unflatten(tc.tree_structure(Cfg(1.0, [1])), [2.0]) == Cfg(2.0, [1])


# --- jax.export ---------------------------------------------------------------------------------


def test_export_round_trip_in_process(uname: str) -> None:
    Output = _make_output(uname + ".out")

    @tc.register_namedtuple(name=uname + ".pair")
    class Pair(typing.NamedTuple):
        first: Any
        second: Any

    @tc.pytree_dataclass(name=uname + ".batch")
    class Batch:
        out: Any
        pair: Pair
        tag: str = tc.field(static=True, default="b")

    batch = Batch(Output(np.ones(2, np.float32), shape=(5, 6)), Pair(np.float32(1), None), "x")
    f = jax.jit(lambda b: (b, jax.tree_util.tree_map(lambda v: v + 1, b.out)))
    loaded = jax.export.deserialize(jax.export.export(f)(batch).serialize())
    assert loaded.in_tree == jax.tree_util.tree_structure(((batch,), {}))
    got_batch, got_out = loaded.call(batch)
    assert type(got_batch) is Batch
    assert type(got_batch.pair) is Pair
    assert got_batch.pair.second is None
    assert got_batch.tag == "x"
    assert got_out.shape == (5, 6)
    assert type(got_out.shape) is tuple


def test_unnamed_classes_work_in_jit_but_cannot_be_exported() -> None:
    Output = _make_output(None)
    out = Output(np.ones(2, np.float32))
    assert type(jax.jit(lambda o: o)(out)) is Output
    exported = jax.export.export(jax.jit(lambda o: o))(out)
    # No jax.export registration for an unnamed class: JAX's own error at its call site...
    with pytest.raises(ValueError, match="Cannot serialize PyTreeDef containing an unregistered"):
        exported.serialize()
    # ...and treeclass's, saying how to name it, at treeclass's.
    with pytest.raises(tc.UnnamedClassError, match=r"registered without a name.*name="):
        tc.treespec_dumps(exported.in_tree)


# The classes' module for the fresh processes. It imports treeclass and numpy, never jax:
# whether jax is imported before or after it is what the test varies. Output.__post_init__
# refuses anything but a float or a numpy array, so a placeholder (tracer, ShapedArray,
# object()) reaching it fails the test.
_FRESH_MODELS = """
from __future__ import annotations

import typing
from typing import Any

import numpy as np

import treeclass as tc


@tc.pytree_dataclass(name="tests.jax_fresh.Output", frozen=True)
class Output:
    logits: Any
    loss: Any = None
    hidden: Any = None
    shape: tuple[int, ...] = tc.field(static=True, default=(2, 3))
    mode: str = tc.field(static=True, default="eval")

    def __post_init__(self) -> None:
        if not isinstance(self.logits, (float, np.ndarray)):
            raise TypeError(f"Output.__post_init__ ran on a {type(self.logits).__name__}")


@tc.register_namedtuple(name="tests.jax_fresh.Pair")
class Pair(typing.NamedTuple):
    first: Any
    second: Any


@tc.pytree_dataclass(name="tests.jax_fresh.Stats", return_none_fields=True, slots=True)
class Stats:
    count: Any
    extra: Any = None


@tc.pytree_dataclass(name="tests.jax_fresh.Batch")
class Batch:
    out: Output
    pair: Pair
    stats: Stats
    extras: dict[str, Any]
    tag: str = tc.field(static=True, default="batch")


def make_batch() -> Batch:  # the example input, the same in every process
    logits = np.arange(6, dtype=np.float32).reshape(2, 3)
    return Batch(
        out=Output(logits, loss=None, hidden=None, shape=(2, 3), mode="train"),
        pair=Pair(np.float32(1.5), [np.float32(2.0), np.float32(3.0)]),
        stats=Stats(np.int32(7)),
        extras={"b": np.ones(2, np.float32), "a": np.zeros(1, np.float32)},
        tag="t1",
    )


def compute(batch: Batch, tree_map: Any) -> tuple[Output, Pair, Stats]:
    # The exported function: outputs built from the inputs, never through __init__.
    # tree_map is jax.tree_util.tree_map (passed in, so this module never imports jax).
    out = tree_map(lambda x: x * 2.0 + batch.pair.first, batch.out)
    pair = Pair(batch.extras["a"].sum() + batch.pair.second[0], batch.out)
    return out, pair, batch.stats
"""

# ``ORDER [--load FILE] [--save FILE]``: ORDER is ``classes-first`` (import the classes, hence
# treeclass, then jax) or ``jax-first``. With --load, deserializes an exported function saved
# by another process and calls it; with --save, exports ``models.compute`` and writes
# ``Exported.serialize()``. Prints one JSON line of findings.
_FRESH_ROUNDTRIP = """
from __future__ import annotations

import json
import sys
from typing import Any

ORDER = sys.argv[1]
if ORDER == "classes-first":
    import models

    JAX_IMPORTED_AFTER_CLASSES = "jax" not in sys.modules
    import jax
elif ORDER == "jax-first":
    import jax
    import models

    JAX_IMPORTED_AFTER_CLASSES = False
else:
    raise SystemExit(f"unknown order {ORDER!r}")

import numpy as np  # after the import order under test
import treeclass


def _arg(flag: str) -> str | None:
    return sys.argv[sys.argv.index(flag) + 1] if flag in sys.argv else None


def _f(batch: Any) -> Any:
    return models.compute(batch, jax.tree_util.tree_map)


findings: dict[str, Any] = {
    "order": ORDER,
    "jax_imported_after_classes": JAX_IMPORTED_AFTER_CLASSES,
    "backends": list(treeclass.active_backends()),
}
batch = models.make_batch()
load, save = _arg("--load"), _arg("--save")
if load is not None:
    with open(load, "rb") as fh:
        exported = jax.export.deserialize(bytearray(fh.read()))
    findings["in_tree_matches"] = exported.in_tree == jax.tree_util.tree_structure(((batch,), {}))
    out, pair, stats = exported.call(batch)
    want = _f(batch)  # eager: the same function without jit or export
    findings["types"] = [
        type(out) is models.Output,
        type(pair) is models.Pair,
        type(pair.second) is models.Output,
        type(stats) is models.Stats,
    ]
    findings["statics"] = [out.shape, type(out.shape).__name__, out.mode, pair.second.mode]
    findings["nones"] = [out.loss is None, out.hidden is None, stats.extra is None]
    got_leaves = jax.tree_util.tree_leaves((out, pair, stats))
    want_leaves = jax.tree_util.tree_leaves(want)
    findings["values_match"] = len(got_leaves) == len(want_leaves) and all(
        np.allclose(np.asarray(g), np.asarray(w)) for g, w in zip(got_leaves, want_leaves)
    )
    findings["out_tree_matches"] = exported.out_tree == jax.tree_util.tree_structure(want)
if save is not None:
    exported = jax.export.export(jax.jit(_f))(batch)
    with open(save, "wb") as fh:
        fh.write(exported.serialize())
    findings["saved"] = True
print(json.dumps(findings))
"""


@pytest.mark.slow
def test_export_in_a_fresh_process_in_both_import_orders(tmp_path: pathlib.Path) -> None:
    """Export in one process, load and call in fresh ones that only import the classes'
    module: classes before jax, and jax before the classes."""

    write_modules(tmp_path, {"models": _FRESH_MODELS})

    def run(order: str, *args: str) -> dict[str, Any]:
        outcome = run_script(
            _FRESH_ROUNDTRIP,
            order,
            *args,
            cwd=tmp_path,
            path=[tmp_path],
            env={"PYTHONWARNINGS": "default"},
            timeout=600,
        )
        findings: dict[str, Any] = outcome.report()
        assert "RuntimeWarning" not in outcome.stderr, outcome.stderr
        return findings

    a, b = str(tmp_path / "a.bin"), str(tmp_path / "b.bin")
    first = run("classes-first", "--save", a)
    second = run("jax-first", "--load", a, "--save", b)
    third = run("classes-first", "--load", b)
    assert first == {
        "order": "classes-first",
        "jax_imported_after_classes": True,
        "backends": ["jax"],
        "saved": True,
    }
    for loaded in (second, third):
        assert loaded["backends"] == ["jax"]
        assert loaded["in_tree_matches"] is True
        assert loaded["out_tree_matches"] is True
        assert loaded["types"] == [True, True, True, True]
        assert loaded["statics"] == [[2, 3], "tuple", "train", "train"]
        assert loaded["nones"] == [True, True, True]
        assert loaded["values_match"] is True
    assert third["jax_imported_after_classes"] is True
    assert second["order"] == "jax-first"


# --- conflicts, atomicity, notebook re-runs -----------------------------------------------------


def test_class_registered_with_jax_elsewhere_is_refused(uname: str) -> None:
    @dataclasses.dataclass
    class Foreign:
        x: Any

    jax.tree_util.register_dataclass(Foreign, data_fields=["x"], meta_fields=[])
    for override in (False, True):
        with pytest.raises(
            tc.RegistrationError,
            match=r"Foreign is already registered with JAX's pytree \(jax.tree_util, .*by another "
            r"library.*\(jax cannot replace a registration, so override=True does not apply\)",
        ):
            tc.register_dataclass(Foreign, name=uname, override=override)
        assert not tc.is_registered(Foreign)
        assert tc.class_for_name(uname) is None
    # The name is still free for another class.
    Output = _make_output(uname)
    assert tc.class_for_name(uname) is Output


def test_name_taken_in_jax_export_elsewhere_is_refused(uname: str) -> None:
    @dataclasses.dataclass
    class Theirs:
        x: Any

    jax.tree_util.register_pytree_node(Theirs, lambda t: ((t.x,), None), lambda a, c: Theirs(*c))
    jax.export.register_pytree_node_serialization(
        Theirs,
        serialized_name=uname,
        serialize_auxdata=lambda aux: b"",
        deserialize_auxdata=lambda data: None,
    )

    @dataclasses.dataclass
    class Mine:
        x: Any

    with pytest.raises(
        tc.RegistrationError,
        match=rf"the name '{uname}' is taken by .*Theirs in jax.export \(outside treeclass\), "
        r"so .*Mine cannot have it as its name; give one of them another name",
    ):
        tc.register_dataclass(Mine, name=uname)
    assert not tc.is_registered(Mine)
    assert tc.class_for_name(uname) is None
    assert not backend._is_jax_tree_node(Mine)  # refused before anything was changed


def test_class_with_a_foreign_export_registration_is_refused(uname: str) -> None:
    class NT(typing.NamedTuple):
        a: Any

    jax.export.register_namedtuple_serialization(NT, serialized_name=uname + ".theirs")
    with pytest.raises(
        tc.RegistrationError,
        match=r"NT is already registered with jax.export "
        rf"\(serialized_name='{uname}.theirs'\), by another library",
    ):
        tc.register_namedtuple(NT, name=uname)
    assert tc.class_for_name(uname) is None


def test_failed_export_registration_rolls_back_and_can_be_retried(
    uname: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    @dataclasses.dataclass
    class Late:
        x: Any
        tag: str = dataclasses.field(default="t", metadata={"static": True})

    def boom(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("simulated jax.export failure")

    with monkeypatch.context() as m:
        m.setattr(jax.export, "register_pytree_node_serialization", boom)
        with pytest.raises(RuntimeError, match="simulated"):
            tc.register_dataclass(Late, name=uname)
    assert not tc.is_registered(Late)
    assert tc.class_for_name(uname) is None
    # JAX cannot unregister: the class stayed a JAX node, and a retry reuses it.
    assert backend._is_jax_tree_node(Late)
    tc.register_dataclass(Late, name=uname)
    assert tc.class_for_name(uname) is Late
    loaded = jax.export.deserialize(jax.export.export(jax.jit(lambda v: v))(Late(1.0)).serialize())
    assert type(loaded.call(Late(1.0))) is Late


def test_retry_with_other_options_is_refused(uname: str, monkeypatch: pytest.MonkeyPatch) -> None:
    @dataclasses.dataclass
    class Late:
        x: Any

    with monkeypatch.context() as m:
        m.setattr(jax.export, "register_pytree_node_serialization", _raise)
        with pytest.raises(RuntimeError):
            tc.register_dataclass(Late, name=uname)
    with pytest.raises(
        tc.RegistrationError,
        match=r"Late was already registered with JAX by an earlier treeclass registration "
        r"with other options.*restart the interpreter",
    ):
        tc.register_dataclass(Late, name=uname, static=("x",))
    assert not tc.is_registered(Late)
    # return_none_fields does not change JAX's functions (a None field is a child there), so
    # a retry with another value is accepted.
    tc.register_dataclass(Late, name=uname, return_none_fields=True)
    assert tc.is_registered(Late)


def _raise(*args: Any, **kwargs: Any) -> Any:
    raise RuntimeError("simulated jax.export failure")


_CELL = textwrap.dedent(
    """
    import treeclass as tc

    @tc.pytree_dataclass(name=NAME)
    class Cell:
        x: object
        note: str = tc.field(static=True, default="n")
    """
)


def test_rerun_class_definition_takes_the_export_name_over(
    uname: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A notebook cell run twice (same module and qualname): the newest class wins the name
    without tripping jax.export's duplicate-name check."""
    module = types.ModuleType("notebook_" + uname.replace(".", "_"))
    monkeypatch.setitem(sys.modules, module.__name__, module)
    module.NAME = uname  # type: ignore[attr-defined]
    classes = []
    for _ in range(2):
        exec(_CELL, vars(module))
        classes.append(module.Cell)  # type: ignore[attr-defined]
    old, new = classes
    assert old is not new
    assert tc.class_for_name(uname) is new
    # The old class lost its jax.export name: its objects cannot be exported.
    stale = jax.export.export(jax.jit(lambda c: c))(old(1.0, "z"))
    with pytest.raises(ValueError, match="Cannot serialize PyTreeDef containing an unregistered"):
        stale.serialize()
    loaded = jax.export.deserialize(
        jax.export.export(jax.jit(lambda c: c))(new(1.0, "z")).serialize()
    )
    got = loaded.call(new(2.0, "z"))
    assert type(got) is new
    assert got.note == "z"
    # The old class is still a JAX node: its live instances keep working.
    assert jax.tree_util.tree_leaves(old(3.0)) == [3.0]


def test_registering_the_same_class_twice_is_a_no_op(uname: str) -> None:
    Output = _make_output(uname)
    tc.register_dataclass(Output, name=uname)
    assert jax.tree_util.tree_leaves(Output(1.0)) == [1.0]


# --- private JAX internals (one test per access) ------------------------------------------------


@pytest.mark.checked_release
def test_jax_under_test_is_the_release_the_private_helpers_were_checked_against() -> None:
    assert jax.__version__ == backend.CHECKED_JAX_VERSION


def _registered_outside_treeclass(name: str) -> type:
    """A dataclass registered with jax.tree_util and jax.export (under ``name``) directly."""

    @dataclasses.dataclass
    class Probe:
        x: Any

    jax.tree_util.register_pytree_node(Probe, lambda p: ((p.x,), None), lambda a, c: Probe(*c))
    jax.export.register_pytree_node_serialization(
        Probe,
        serialized_name=name,
        serialize_auxdata=lambda aux: b"",
        deserialize_auxdata=lambda data: None,
    )
    return Probe


def test_private_export_state_the_adapter_relies_on_exists(uname: str) -> None:
    """A canary for jax upgrades: jax.export's two private registries (the one accessor in
    the adapter) hold a public registration as the adapter expects."""
    import importlib

    Probe = _registered_outside_treeclass(uname)
    module = importlib.import_module("jax._src.export._export")
    assert module.serialization_registry[Probe][0] == uname
    assert module.deserialization_registry[uname][0] is Probe


def test_aliases_reach_jax_export_and_move_with_a_rerun(uname: str) -> None:
    import _cells as cells

    old = uname[:-1] + ("x" if uname[-1] != "x" else "y")  # same length, for blob edits
    cell = """
import typing
import treeclass as tc

@tc.pytree_dataclass(name=NAME, aliases=(OLD,))
class Cell:
    x: typing.Any
"""
    module = "jax_alias_cell_" + uname.rsplit(".", 1)[-1]
    first = cells.run_cell(cell, module, NAME=uname, OLD=old)["Cell"]
    blob = bytes(jax.export.export(jax.jit(lambda c: c))(first(jnp.ones(1))).serialize())
    loaded = jax.export.deserialize(bytearray(blob.replace(uname.encode(), old.encode())))
    assert type(loaded.call(first(jnp.ones(1)))) is first
    second = cells.run_cell(cell, module, NAME=uname, OLD=old)["Cell"]
    blob = bytes(jax.export.export(jax.jit(lambda c: c))(second(jnp.ones(1))).serialize())
    loaded = jax.export.deserialize(bytearray(blob.replace(uname.encode(), old.encode())))
    assert type(loaded.call(second(jnp.ones(1)))) is second


def test_an_alias_taken_in_jax_export_is_refused_before_anything_changes(uname: str) -> None:
    Foreign = _registered_outside_treeclass(uname + ".old")
    blob = jax.export.export(jax.jit(lambda p: p))(Foreign(np.float32(1.0))).serialize()
    with pytest.raises(
        tc.RegistrationError, match=r"name .*\.old' is taken by .* in jax.export .* as an alias"
    ):

        @tc.pytree_dataclass(name=uname, aliases=(uname + ".old",))
        class Mine:
            x: Any

    assert tc.class_for_name(uname) is None and tc.class_for_name(uname + ".old") is None
    # jax.export still loads the alias's name as the other library's class...
    in_tree = jax.export.deserialize(blob).in_tree
    assert in_tree == jax.tree_util.tree_structure(((Foreign(0.0),), {}))
    # ...and the class's own name was never registered: another class can take it.
    _registered_outside_treeclass(uname)
    if "torch" in tc.active_backends():  # torch (which registers first) was never touched
        import torch.utils._pytree as pt

        assert uname not in pt.SERIALIZED_TYPE_TO_PYTHON_TYPE


def test_private_tree_node_check_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    """The unit under test is the adapter's private ``_is_jax_tree_node``: it answers through
    jax's public ``is_tree_node`` and, on older jax without it, jax's private registry."""

    @dataclasses.dataclass
    class Probe:
        x: Any

    assert backend._is_jax_tree_node(Probe) is False
    jax.tree_util.register_dataclass(Probe, data_fields=["x"], meta_fields=[])
    assert backend._is_jax_tree_node(Probe) is True
    # Older jax without the public is_tree_node: the private Python-side registry.
    monkeypatch.delattr(jax.tree_util, "is_tree_node", raising=False)
    assert backend._is_jax_tree_node(Probe) is True
    assert backend._is_jax_tree_node(type("Other", (), {})) is False


# --- stubs --------------------------------------------------------------------------------------


@pytest.mark.slow
def test_adapter_type_checks_without_jax(tmp_path: pathlib.Path) -> None:
    """``mypy --strict`` checks the adapter against stubs/jax with a Python that has no jax."""
    pytest.importorskip("mypy")
    import venv  # (here: CPython on WebAssembly has no venv, and collects this module)

    bare = tmp_path / "bare"
    venv.create(bare, with_pip=False)
    python = bare / ("Scripts" if sys.platform == "win32" else "bin") / "python"
    no_jax = subprocess.run([str(python), "-c", "import jax"], capture_output=True, check=False)
    assert no_jax.returncode != 0
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--python-executable",
            str(python),
            "--cache-dir",
            str(tmp_path / "cache"),
            str(ROOT / "src" / "treeclass" / "_backends" / "jax.py"),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=_env(),
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if k != "MYPYPATH"}


def test_a_fault_in_export_registration_during_a_rerun_leaves_the_previous_state(
    uname: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After any fault the state is the previous one everywhere: the old class keeps its name
    in treeclass, torch and jax.export, and its saved artifacts still load (issue 13)."""
    torch_pytree = pytest.importorskip("torch.utils._pytree")
    module = types.ModuleType("notebook_" + uname.replace(".", "_"))
    monkeypatch.setitem(sys.modules, module.__name__, module)
    module.NAME = uname  # type: ignore[attr-defined]
    exec(_CELL, vars(module))
    old = module.Cell  # type: ignore[attr-defined]
    blob = jax.export.export(jax.jit(lambda c: c))(old(1.0, "z")).serialize()
    refused: list[type] = []

    def broken(nodetype: type, *args: Any, **kwargs: Any) -> None:
        refused.append(nodetype)
        raise RuntimeError("fault injected into jax.export")

    with monkeypatch.context() as m:
        m.setattr(jax.export, "register_pytree_node_serialization", broken)
        with pytest.raises(RuntimeError, match="fault injected"):
            exec(_CELL, vars(module))
    [failed] = refused
    assert failed is not old and module.Cell is old  # type: ignore[attr-defined]
    assert tc.class_for_name(uname) is old
    assert torch_pytree.SERIALIZED_TYPE_TO_PYTHON_TYPE[uname] is old
    # jax.export still writes and reads the name as the old class: the saved artifact and a
    # fresh one both load it...
    assert type(jax.export.deserialize(blob).call(old(2.0, "z"))) is old
    fresh = jax.export.export(jax.jit(lambda c: c))(old(1.0, "y")).serialize()
    got = jax.export.deserialize(fresh).call(old(2.0, "y"))
    assert type(got) is old and got.note == "y"
    # ...and the class whose registration failed has no jax.export name (JAX's own error).
    stale = jax.export.export(jax.jit(lambda c: c))(failed(1.0, "z"))
    with pytest.raises(ValueError, match="Cannot serialize PyTreeDef containing an unregistered"):
        stale.serialize()
    # And the re-run can simply be tried again.
    exec(_CELL, vars(module))
    assert tc.class_for_name(uname) is module.Cell is not old  # type: ignore[attr-defined]
