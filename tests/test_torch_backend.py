"""treeclass classes in torch's Python pytree (``torch.utils._pytree``) and its C++ twin.

Covers registration, key paths, ``treespec_dumps`` / ``treespec_loads`` round trips, parity of
the two registries, ``return_none_fields``, static fields in the context, conflicts, override,
atomicity, notebook re-runs, unnamed classes, and each private-torch access of the adapter.
"""

from __future__ import annotations

import dataclasses
import json
import textwrap
import typing
from typing import Any

import _cells as cells
import pytest
from _subproc import FRAMEWORKS, run_script

torch = pytest.importorskip("torch")
pt = pytest.importorskip("torch.utils._pytree")

import treeclass as tc  # noqa: E402
from treeclass._backends import torch as backend  # noqa: E402
from treeclass._core import registry as _registry  # noqa: E402

pytestmark = pytest.mark.torch


def cxx() -> Any:
    return pytest.importorskip("torch.utils._cxx_pytree")


def cxx_entry(cls: type) -> Any:
    """torch's C++ pytree entry of ``cls`` (optree's ``"torch"`` namespace; public optree API),
    or ``None`` (an entry of optree's global namespace, which lookups fall back to, is not)."""
    import optree

    entry = optree.register_pytree_node.get(cls, namespace="torch")
    return entry if getattr(entry, "namespace", None) == "torch" else None


def torch_state(cls: type) -> tuple[Any, ...]:
    """Everything torch's two registries hold about ``cls`` (for before/after comparisons)."""
    names = {n for n, c in pt.SERIALIZED_TYPE_TO_PYTHON_TYPE.items() if c is cls}
    cx = cxx_entry(cls)
    cxx_key = None if cx is None else (cx.flatten_func, cx.unflatten_func)
    pending = tuple(p for p in pt._cxx_pytree_pending_imports if p[0][0] is cls)
    return (
        pt.SUPPORTED_NODES.get(cls),
        pt.SUPPORTED_SERIALIZED_TYPES.get(cls),
        cxx_key,
        pending,
        frozenset(names),
    )


def make_output(name: str | None, **kw: Any) -> type:
    @tc.pytree_dataclass(name=name, **kw)
    class Output:
        logits: Any
        loss: Any = None
        hidden: Any = None
        mode: str = tc.field(static=True, default="eval")
        shape: tuple[int, ...] = tc.field(static=True, default=(1, 2))

    return Output


def foreign_dataclass() -> type:
    @dataclasses.dataclass
    class Foreign:
        a: Any
        b: Any = None

    return Foreign


def register_foreign(cls: type, name: str) -> None:
    """Register ``cls`` with torch the way transformers registers a ModelOutput."""
    pt.register_pytree_node(
        cls,
        lambda o: ([o.a, o.b], ["a", "b"]),
        lambda values, ctx: cls(*values),
        serialized_type_name=name,
        flatten_with_keys_fn=lambda o: (
            [(pt.GetAttrKey("a"), o.a), (pt.GetAttrKey("b"), o.b)],
            ["a", "b"],
        ),
    )


# ------------------------------------------------------------------------------------------
# Registration, flattening, keys
# ------------------------------------------------------------------------------------------


def test_backend_is_active() -> None:
    assert "torch" in tc.active_backends()


def test_registered_under_its_name_in_python_registry(uname: str) -> None:
    Output = make_output(uname)
    assert Output in pt.SUPPORTED_NODES
    sd = pt.SUPPORTED_SERIALIZED_TYPES[Output]
    assert sd.serialized_type_name == uname
    assert pt.SERIALIZED_TYPE_TO_PYTHON_TYPE[uname] is Output
    assert sd.to_dumpable_context is not None and sd.from_dumpable_context is not None
    assert pt.SUPPORTED_NODES[Output].flatten_with_keys_fn is not None


def test_flatten_keeps_statics_and_nones_in_context(uname: str) -> None:
    Output = make_output(uname)
    x, y = torch.ones(2), torch.zeros(3)
    out = Output(x, hidden=y, mode="train", shape=(3, 4))
    leaves, spec = pt.tree_flatten(out)
    assert leaves[0] is x and leaves[1] is y and len(leaves) == 2
    assert spec.context == (("loss",), "train", (3, 4))
    back = pt.tree_unflatten(leaves, spec)
    assert type(back) is Output
    assert back.logits is x and back.hidden is y and back.loss is None
    assert back.mode == "train" and back.shape == (3, 4)


def test_return_none_fields_makes_none_a_leaf(uname: str) -> None:
    Output = make_output(uname, return_none_fields=True)
    leaves, spec = pt.tree_flatten(Output(1.0))
    assert leaves == [1.0, None, None]
    assert spec.context == ("eval", (1, 2))  # only the static values
    assert pt.tree_unflatten([2.0, 3.0, None], spec) == Output(2.0, 3.0, None)


def test_key_paths_are_getattr_keys(uname: str) -> None:
    Output = make_output(uname)
    tree = {"out": Output(torch.ones(1), loss=torch.zeros(1))}
    paths = [pt.keystr(p) for p, _ in pt.tree_flatten_with_path(tree)[0]]
    assert paths == ["['out'].logits", "['out'].loss"]
    (path, leaf), _ = pt.tree_flatten_with_path(Output(5))[0][0], None
    assert isinstance(path[0], pt.GetAttrKey) and path[0].name == "logits" and leaf == 5


def test_nested_namedtuple_is_registered_by_name(uname: str) -> None:
    @tc.register_namedtuple(name=uname + ".Pair")
    class Pair(typing.NamedTuple):
        a: Any
        b: Any

    assert pt.SUPPORTED_SERIALIZED_TYPES[Pair].serialized_type_name == uname + ".Pair"
    Output = make_output(uname)
    spec = pt.tree_structure(Output(1, hidden=Pair(2, 3)))
    text = pt.treespec_dumps(spec)
    assert f'"context": "{uname}.Pair"' in text
    loaded = pt.treespec_loads(text)
    assert loaded == spec
    assert pt.tree_unflatten([4, 5, 6], loaded) == Output(4, hidden=Pair(5, 6))


# ------------------------------------------------------------------------------------------
# treespec_dumps / treespec_loads
# ------------------------------------------------------------------------------------------


def test_treespec_roundtrip_equals_original_with_tuple_statics(uname: str) -> None:
    Output = make_output(uname)
    tree = [Output(torch.ones(1), shape=(5, (6, 7))), {"k": Output(1, loss=2, mode="m")}]
    leaves, spec = pt.tree_flatten(tree)
    text = pt.treespec_dumps(spec)
    document = json.loads(text)
    assert document[0] == 1
    assert document[1]["children_spec"][0]["type"] == uname
    loaded = pt.treespec_loads(text)
    assert loaded == spec
    first = loaded.child(0)
    assert first.context == ((("loss", "hidden")), "eval", (5, (6, 7)))
    assert type(first.context[2][1]) is tuple
    rebuilt = pt.tree_unflatten(leaves, loaded)
    assert rebuilt[0].shape == (5, (6, 7)) and rebuilt[1]["k"].mode == "m"
    # A live tree has exactly the loaded structure (what torch.export checks on inputs).
    assert pt.tree_structure(rebuilt) == loaded


def test_unnamed_class_works_in_process_but_refuses_serialization() -> None:
    Output = make_output(None)
    leaves, spec = pt.tree_flatten(Output(1.0, loss=2.0))
    assert leaves == [1.0, 2.0]
    assert pt.tree_unflatten(leaves, spec) == Output(1.0, loss=2.0)
    # torch's own call site: the class has no serialized_type_name in torch...
    with pytest.raises(NotImplementedError, match="No registered serialization name"):
        pt.treespec_dumps(spec)
    # ...treeclass's says how to give it one.
    with pytest.raises(tc.UnnamedClassError, match=r"registered without a name.*name="):
        tc.treespec_dumps(spec)


def test_bad_context_on_load_is_a_treespec_load_error(uname: str) -> None:
    Output = make_output(uname)
    text = pt.treespec_dumps(pt.tree_structure(Output(1)))
    bad = text.replace('\\"static\\"', '\\"statik\\"')
    assert bad != text
    with pytest.raises(tc.TreespecLoadError, match=r"auxdata of .*Output"):
        pt.treespec_loads(bad)
    document = json.loads(text)
    document[1]["context"] = {"not": "a string"}
    with pytest.raises(tc.TreespecLoadError, match=rf"context of '{uname}'.*not the JSON string"):
        pt.treespec_loads(json.dumps(document))


# ------------------------------------------------------------------------------------------
# Parity with the C++ pytree
# ------------------------------------------------------------------------------------------


def test_cxx_pytree_gives_the_same_leaves(uname: str) -> None:
    cx = cxx()
    Output = make_output(uname)

    @tc.register_namedtuple(name=uname + ".NT")
    class NT(typing.NamedTuple):
        p: Any
        q: Any

    tree = [Output(1, hidden=NT(2, 3)), {"b": Output(4, loss=None)}, (None, 5)]
    py_leaves, py_spec = pt.tree_flatten(tree)
    cx_leaves, cx_spec = cx.tree_flatten(tree)
    assert cx_leaves == py_leaves == [1, 2, 3, 4, None, 5]
    assert cx.tree_unflatten(cx_leaves, cx_spec) == pt.tree_unflatten(py_leaves, py_spec) == tree
    entry = cxx_entry(Output)
    assert entry is not None and entry.namespace == "torch"


def test_pending_cxx_registrations_in_fresh_process(tmp_path: Any) -> None:
    """Classes registered before ``torch.utils._cxx_pytree`` is imported (torch keeps them
    pending), import order treeclass -> class -> torch and torch -> treeclass, override of a
    pending foreign registration, and ``import treeclass`` not importing torch."""
    code = textwrap.dedent(
        """
        import dataclasses, json, sys, typing
        import treeclass as tc
        report = {"torch_after_import_treeclass": "torch" in sys.modules}

        @tc.pytree_dataclass(name="fresh.Early")
        class Early:
            a: typing.Any
            s: str = tc.field(static=True, default="x")

        cell = (
            "import typing, treeclass as tc\\n"
            "@tc.pytree_dataclass(name='fresh.Cell')\\n"
            "class Cell:\\n"
            "    a: typing.Any\\n"
        )
        cells = []
        import sys, types
        sys.modules["cell"] = types.ModuleType("cell")
        for _ in range(2):  # a notebook cell run twice before torch is imported
            ns = vars(sys.modules["cell"])
            exec(cell, ns)
            cells.append(ns["Cell"])

        import warnings
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            import torch
        report["torch_warnings"] = [str(w.message) for w in caught if "torch" in str(w.message)]
        import torch.utils._pytree as pt
        from treeclass._backends import torch as backend
        def pending(c):
            return sum(p[0][0] is c for p in pt._cxx_pytree_pending_imports)
        report["cxx_imported_early"] = "torch.utils._cxx_pytree" in sys.modules
        report["early_python"] = pt.SUPPORTED_SERIALIZED_TYPES[Early].serialized_type_name
        report["cell_owner_is_new"] = pt.SERIALIZED_TYPE_TO_PYTHON_TYPE["fresh.Cell"] is cells[1]
        try:
            pt.treespec_dumps(pt.tree_structure(cells[0](1)))
        except NotImplementedError as e:
            report["old_cell"] = str(e)
        try:
            tc.treespec_dumps(pt.tree_structure(cells[0](1)))
        except tc.UnnamedClassError as e:
            report["old_cell_treeclass"] = str(e)

        @dataclasses.dataclass
        class Foreign:
            a: typing.Any
            b: typing.Any = None

        pt.register_pytree_node(Foreign, lambda o: ([o.a, o.b], None),
                                lambda v, c: Foreign(*v), serialized_type_name="lib.Foreign")
        report["foreign_pending"] = pending(Foreign)
        try:
            tc.register_dataclass(Foreign, name="fresh.Foreign")
        except tc.RegistrationError as e:
            report["refused"] = str(e)
        report["still_pending"] = pending(Foreign)
        tc.register_dataclass(Foreign, name="fresh.Foreign", override=True)
        report["pending_after_override"] = pending(Foreign)

        @tc.pytree_dataclass(name="fresh.Late")
        class Late:
            a: typing.Any
            b: typing.Any = None

        report["late_pending"] = pending(Late)
        import torch.utils._cxx_pytree as cx
        tree = [Early(1), Late(2), Foreign(3)]
        report["cxx_leaves"] = cx.tree_leaves(tree)
        report["py_leaves"] = pt.tree_leaves(tree)
        report["cxx_roundtrip"] = cx.tree_unflatten(*cx.tree_flatten(tree)) == tree
        import optree
        report["cxx_entries"] = [
            getattr(optree.register_pytree_node.get(c, namespace="torch"), "namespace", None)
            == "torch"
            for c in (Early, Late, Foreign)
        ]
        report["pending_left"] = sum(pending(c) for c in (Early, Late, Foreign))
        print(json.dumps(report))
        """
    )
    report = run_script(code, cwd=tmp_path, timeout=300).report()
    assert report["torch_after_import_treeclass"] is False
    assert report["cxx_imported_early"] is False
    assert report["early_python"] == "fresh.Early"
    assert report["cell_owner_is_new"] is True
    assert report["torch_warnings"] == []
    assert "No registered serialization name" in report["old_cell"]
    assert "was defined again" in report["old_cell_treeclass"]
    assert report["foreign_pending"] == 1
    assert "serialized_type_name='lib.Foreign'" in report["refused"]
    assert "override=True" in report["refused"]
    assert report["still_pending"] == 1
    assert report["pending_after_override"] == 1  # ours replaced the foreign one
    assert report["late_pending"] == 1
    # Foreign's None field is dropped from the children by treeclass (return_none_fields=False).
    assert report["cxx_leaves"] == report["py_leaves"] == [1, 2, 3]
    assert report["cxx_roundtrip"] is True
    assert report["cxx_entries"] == [True, True, True]
    assert report["pending_left"] == 0


def test_torch_first_then_treeclass_in_fresh_process(tmp_path: Any) -> None:
    code = textwrap.dedent(
        """
        import json, typing
        import torch
        import torch.utils._pytree as pt
        import treeclass as tc

        @tc.pytree_dataclass(name="fresh.After")
        class After:
            a: typing.Any

        print(json.dumps({
            "active": list(tc.active_backends()),
            "name": pt.SUPPORTED_SERIALIZED_TYPES[After].serialized_type_name,
            "leaves": pt.tree_leaves([After(1)]),
        }))
        """
    )
    # torch is imported before treeclass: a process that has it already runs this as a fresh one.
    report = run_script(code, cwd=tmp_path, timeout=300, preload=FRAMEWORKS).report()
    assert "torch" in report["active"]
    assert report["name"] == "fresh.After"
    assert report["leaves"] == [1]


def test_adapter_module_imported_before_torch_in_fresh_process(tmp_path: Any) -> None:
    """Importing the adapter first imports torch, whose hook runs while the adapter is still
    executing; the adapter then activates itself, without a warning."""
    code = textwrap.dedent(
        """
        import json, typing, warnings
        import treeclass as tc

        @tc.pytree_dataclass(name="fresh.Before")
        class Before:
            a: typing.Any

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            import treeclass._backends.torch
        import torch.utils._pytree as pt
        print(json.dumps({
            "warnings": [str(w.message) for w in caught if "treeclass" in str(w.message)],
            "active": list(tc.active_backends()),
            "name": pt.SUPPORTED_SERIALIZED_TYPES[Before].serialized_type_name,
        }))
        """
    )
    report = run_script(code, cwd=tmp_path, timeout=300).report()
    assert report["warnings"] == []
    assert "torch" in report["active"]
    assert report["name"] == "fresh.Before"


# ------------------------------------------------------------------------------------------
# Conflicts, override, atomicity
# ------------------------------------------------------------------------------------------


def test_name_taken_in_torch_by_another_class_is_refused(uname: str) -> None:
    Foreign = foreign_dataclass()
    register_foreign(Foreign, uname)

    @dataclasses.dataclass
    class Mine:
        x: Any

    before = torch_state(Mine), torch_state(Foreign)
    with pytest.raises(
        tc.NameConflictError,
        match=rf"the name '{uname}' is taken by .*Foreign in PyTorch's pytree \(outside "
        r"treeclass\), so .*Mine cannot have it as its name",
    ):
        tc.register_dataclass(Mine, name=uname)
    assert (torch_state(Mine), torch_state(Foreign)) == before
    assert not tc.is_registered(Mine)
    assert tc.class_for_name(uname) is None
    assert pt.tree_leaves(Mine(1)) == [Mine(1)]  # still a leaf for torch


def test_foreign_registration_needs_override(uname: str) -> None:
    Foreign = foreign_dataclass()
    register_foreign(Foreign, "lib." + uname)
    before = torch_state(Foreign)
    with pytest.raises(
        tc.RegistrationError,
        match=rf"already registered with PyTorch's pytree with serialized_type_name="
        rf"'lib\.{uname}'.*override=True",
    ):
        tc.register_dataclass(Foreign, name=uname)
    assert torch_state(Foreign) == before
    assert not tc.is_registered(Foreign)
    assert tc.class_for_name(uname) is None


def test_override_replaces_foreign_registration_in_both_registries(uname: str) -> None:
    cx = cxx()
    Foreign = foreign_dataclass()
    register_foreign(Foreign, "lib." + uname)
    assert cx.tree_leaves(Foreign(1)) == [1, None]
    tc.register_dataclass(Foreign, name=uname, override=True)
    assert pt.SUPPORTED_SERIALIZED_TYPES[Foreign].serialized_type_name == uname
    assert "lib." + uname not in pt.SERIALIZED_TYPE_TO_PYTHON_TYPE
    assert pt.tree_leaves(Foreign(1)) == cx.tree_leaves(Foreign(1)) == [1]
    spec = pt.tree_structure(Foreign(1))
    assert pt.treespec_loads(pt.treespec_dumps(spec)) == spec


class _FailingBackend:
    """A backend that refuses in ``check`` or fails in ``register`` (for atomicity tests)."""

    can_unregister = False

    def __init__(self, where: str) -> None:
        self.name = f"failing-{where}"
        self.where = where

    def check(self, change: Any) -> None:
        if self.where == "check":
            raise tc.RegistrationError(f"{change.node.qualname} refused by the test backend.")

    def add(self, change: Any) -> Any:
        if self.where == "register":
            raise tc.RegistrationError(f"{change.node.qualname} failed in the test backend.")
        return lambda: None


@pytest.mark.parametrize("where", ["check", "register"])
def test_refusal_elsewhere_leaves_torch_untouched(
    uname: str, where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    cx = cxx()
    Foreign = foreign_dataclass()
    register_foreign(Foreign, "lib." + uname)
    cx_before = cx.tree_leaves(Foreign(1))
    before = torch_state(Foreign)
    monkeypatch.setattr(_registry, "_BACKENDS", [*_registry._BACKENDS, _FailingBackend(where)])
    with pytest.raises(tc.RegistrationError, match="test backend"):
        tc.register_dataclass(Foreign, name=uname, override=True)
    assert torch_state(Foreign) == before
    assert cx.tree_leaves(Foreign(1)) == cx_before == [1, None]
    assert pt.SERIALIZED_TYPE_TO_PYTHON_TYPE["lib." + uname] is Foreign
    assert uname not in pt.SERIALIZED_TYPE_TO_PYTHON_TYPE
    assert not tc.is_registered(Foreign)


def test_aliases_are_rolled_back_when_another_backend_fails(
    uname: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """torch registers before the failing backend; its aliases go with the rest."""
    monkeypatch.setattr(_registry, "_BACKENDS", [*_registry._BACKENDS, _FailingBackend("register")])
    with pytest.raises(tc.RegistrationError, match="test backend"):

        @tc.pytree_dataclass(name=uname, aliases=(uname + ".old", uname + ".older"))
        class Temp:
            x: Any

    assert uname + ".old" not in pt.SERIALIZED_TYPE_TO_PYTHON_TYPE
    assert uname + ".older" not in pt.SERIALIZED_TYPE_TO_PYTHON_TYPE
    assert tc.class_for_name(uname + ".old") is None
    monkeypatch.undo()

    @tc.pytree_dataclass(name=uname, aliases=(uname + ".old",))
    class Again:
        x: Any

    assert pt.SERIALIZED_TYPE_TO_PYTHON_TYPE[uname + ".old"] is Again
    spec = pt.tree_structure(Again(1))
    assert pt.treespec_loads(pt.treespec_dumps(spec).replace(uname, uname + ".old")) == spec


def test_an_alias_torch_maps_to_another_class_is_refused(uname: str) -> None:
    Foreign = foreign_dataclass()
    register_foreign(Foreign, uname + ".old")
    before = torch_state(Foreign)
    with pytest.raises(
        tc.NameConflictError,
        match=r"name .*\.old' is taken by .*Foreign in PyTorch's pytree .* as an alias",
    ):

        @tc.pytree_dataclass(name=uname, aliases=(uname + ".old",))
        class Mine:
            x: Any

    assert torch_state(Foreign) == before
    assert uname not in pt.SERIALIZED_TYPE_TO_PYTHON_TYPE
    assert tc.class_for_name(uname) is None


def test_a_rerun_moves_torch_aliases(uname: str) -> None:
    source = f"""
import typing
import treeclass as tc

@tc.pytree_dataclass(name={uname!r}, aliases=ALIASES)
class Cell:
    x: typing.Any
"""
    module = "torch_alias_cell_" + uname.rsplit(".", 1)[-1]
    first = cells.run_cell(source, module, ALIASES=(uname + ".a", uname + ".b"))["Cell"]
    assert pt.SERIALIZED_TYPE_TO_PYTHON_TYPE[uname + ".b"] is first
    second = cells.run_cell(source, module, ALIASES=(uname + ".a",))["Cell"]
    assert pt.SERIALIZED_TYPE_TO_PYTHON_TYPE[uname + ".a"] is second
    assert uname + ".b" not in pt.SERIALIZED_TYPE_TO_PYTHON_TYPE  # dropped with the old class
    spec = pt.tree_structure(second(1))
    assert pt.treespec_loads(pt.treespec_dumps(spec).replace(uname, uname + ".a")) == spec


def test_refusal_elsewhere_leaves_no_half_registered_new_class(
    uname: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_registry, "_BACKENDS", [*_registry._BACKENDS, _FailingBackend("register")])
    with pytest.raises(tc.RegistrationError, match="test backend"):
        make_output(uname)
    assert uname not in pt.SERIALIZED_TYPE_TO_PYTHON_TYPE
    assert not any(
        getattr(c, "__qualname__", "").endswith("make_output.<locals>.Output")
        and pt.SUPPORTED_SERIALIZED_TYPES[c].serialized_type_name == uname
        for c in pt.SUPPORTED_NODES
    )


def test_opaque_types_are_refused(uname: str) -> None:
    from torch._library.opaque_object import register_opaque_type
    from torch._opaque_base import OpaqueBase

    @dataclasses.dataclass
    class Handle(OpaqueBase):
        x: Any

    register_opaque_type(Handle, typ="reference")
    from torch._library.opaque_object import is_opaque_type

    assert is_opaque_type(Handle)  # torch requires it to stay a leaf
    with pytest.raises(tc.RegistrationError, match=r"opaque object type.*stay a pytree leaf"):
        tc.register_dataclass(Handle, name=uname)
    assert not tc.is_registered(Handle)
    assert Handle not in pt.SUPPORTED_NODES


# ------------------------------------------------------------------------------------------
# Notebook re-runs
# ------------------------------------------------------------------------------------------

_CELL = """
import typing
from pathlib import Path
import treeclass as tc

@tc.pytree_dataclass(name=NAME)
class Cell:
    a: typing.Any
    tag: str = tc.field(static=True, default="t")
"""


def run_cell(name: str) -> type:
    return cells.run_cell(_CELL, NAME=name)["Cell"]  # type: ignore[no-any-return]


def test_notebook_rerun_moves_the_name_to_the_new_class(uname: str) -> None:
    cx = cxx()
    Old = run_cell(uname)
    old_text = pt.treespec_dumps(pt.tree_structure(Old(1)))
    assert pt.treespec_loads(old_text).type is Old  # now cached by torch
    New = run_cell(uname)
    assert New is not Old
    assert pt.SERIALIZED_TYPE_TO_PYTHON_TYPE[uname] is New
    assert pt.SUPPORTED_SERIALIZED_TYPES[New].serialized_type_name == uname
    # The cache of treespec_loads no longer hands out the old class.
    assert pt.treespec_loads(old_text).type is New
    # Old instances still flatten everywhere...
    assert pt.tree_leaves(Old(1)) == cx.tree_leaves(Old(1)) == [1]
    assert pt.tree_unflatten([2], pt.tree_structure(Old(1))) == Old(2)
    # ...but cannot be serialized under a name that now means the new class.
    with pytest.raises(NotImplementedError, match="No registered serialization name"):
        pt.treespec_dumps(pt.tree_structure(Old(1)))
    with pytest.raises(tc.UnnamedClassError, match=r"defined again.*rebuild the object"):
        tc.treespec_dumps(pt.tree_structure(Old(1)))
    assert pt.treespec_dumps(pt.tree_structure(New(1))) == old_text


def test_notebook_rerun_of_a_namedtuple(uname: str) -> None:
    cell = (
        "import typing, treeclass as tc\n"
        "@tc.register_namedtuple(name=NAME)\n"
        "class Pair(typing.NamedTuple):\n"
        "    a: typing.Any\n"
        "    b: typing.Any\n"
    )

    def run() -> type:
        return cells.run_cell(cell, NAME=uname)["Pair"]  # type: ignore[no-any-return]

    Old = run()
    New = run()
    assert pt.SERIALIZED_TYPE_TO_PYTHON_TYPE[uname] is New
    assert Old not in pt.SUPPORTED_SERIALIZED_TYPES
    text = pt.treespec_dumps(pt.tree_structure(New(1, 2)))
    assert pt.treespec_loads(text).context is New
    assert pt.tree_leaves(Old(1, 2)) == [1, 2]
    with pytest.raises(NotImplementedError, match="Can't serialize TreeSpec of namedtuple class"):
        pt.treespec_dumps(pt.tree_structure(Old(1, 2)))


# ------------------------------------------------------------------------------------------
# What the private-torch accessors do, seen from torch
# ------------------------------------------------------------------------------------------


def test_override_then_rollback_restores_torch_exactly(uname: str) -> None:
    """A foreign registration replaced with override=True, then the treeclass registration
    rolled back (another backend failed): torch holds exactly what it held before, in both
    registries."""
    cx = cxx()
    Foreign = foreign_dataclass()
    register_foreign(Foreign, uname)
    before = torch_state(Foreign)
    assert cx.tree_leaves(Foreign(1)) == [1, None]
    with pytest.MonkeyPatch.context() as m:
        m.setattr(_registry, "_BACKENDS", [*_registry._BACKENDS, _FailingBackend("register")])
        with pytest.raises(tc.RegistrationError, match="failed in the test backend"):
            tc.register_dataclass(Foreign, name=uname + ".mine", override=True)
    assert torch_state(Foreign) == before
    assert cx.tree_leaves(Foreign(1)) == [1, None]
    assert pt.SERIALIZED_TYPE_TO_PYTHON_TYPE.get(uname + ".mine") is None


def test_a_rerun_class_keeps_its_node_but_loses_its_name(uname: str) -> None:
    Old = run_cell(uname)
    node = pt.SUPPORTED_NODES[Old]
    New = run_cell(uname)
    assert pt.SUPPORTED_NODES[Old] is node  # its live objects still flatten
    assert pt.SUPPORTED_SERIALIZED_TYPES[Old].serialized_type_name == (
        pt.NO_SERIALIZED_TYPE_NAME_FOUND
    )
    assert pt.SERIALIZED_TYPE_TO_PYTHON_TYPE[uname] is New


def test_aliases_load_as_the_class_and_are_never_written(uname: str) -> None:
    Output = make_output(uname, aliases=(uname + ".a", uname + ".b"))
    assert pt.SERIALIZED_TYPE_TO_PYTHON_TYPE[uname + ".a"] is Output
    assert pt.SERIALIZED_TYPE_TO_PYTHON_TYPE[uname + ".b"] is Output
    text = pt.treespec_dumps(pt.tree_structure(Output(1)))
    assert uname + ".a" not in text
    assert pt.treespec_loads(text.replace(uname, uname + ".b")).type is Output


def test_registering_while_holding_torchs_registry_lock(tmp_path: Any) -> None:
    """torch's registry lock is the one treeclass takes around torch's own registration
    calls (which take it again): a thread that holds it can still register a class. In a
    fresh process, so that a deadlock fails this test at its timeout, not the session."""
    code = """
        import json, typing
        import torch.utils._pytree as pt
        import treeclass as tc

        with pt._NODE_REGISTRY_LOCK:
            @tc.pytree_dataclass(name="fresh.Locked")
            class Locked:
                a: typing.Any

            leaves = pt.tree_leaves([Locked(1)])
        print(json.dumps(leaves))
    """
    assert run_script(code, cwd=tmp_path, timeout=300, preload=FRAMEWORKS).report() == [1]


def test_named_namedtuples_are_written_under_their_name(uname: str) -> None:
    @tc.register_namedtuple(name=uname)
    class Pair(typing.NamedTuple):
        a: Any
        b: Any

    assert pt.SERIALIZED_TYPE_TO_PYTHON_TYPE[uname] is Pair
    text = pt.treespec_dumps(pt.tree_structure(Pair(1, 2)))
    assert uname in text and pt.treespec_loads(text).context is Pair


def test_a_spec_loaded_before_a_rerun_loads_the_new_class_after_it(uname: str) -> None:
    """torch memoizes ``treespec_loads`` (an ``lru_cache``): a spec text loaded before a
    notebook re-run must not come back from that cache holding the old class."""
    Old = run_cell(uname)
    text = pt.treespec_dumps(pt.tree_structure([Old(1), {"k": Old(2)}]))
    first = pt.treespec_loads(text)
    assert pt.treespec_loads(text) is first  # torch's cache does hand back the same spec
    assert first.child(0).type is Old
    New = run_cell(uname)
    assert New is not Old
    spec = pt.treespec_loads(text)
    assert spec.child(0).type is New
    assert spec.child(1).child(0).type is New
    assert pt.tree_unflatten([3, 4], spec) == [New(3), {"k": New(4)}]


@pytest.mark.checked_release
def test_torch_under_test_is_the_release_the_private_state_was_checked_against() -> None:
    """A canary for torch upgrades: the checked version must be brought up to date after
    checking a new release."""
    assert torch.__version__.split("+")[0] == backend.CHECKED_TORCH_VERSION


def test_private_torch_state_the_adapter_relies_on_exists() -> None:
    """A canary for torch upgrades: the private state the adapter reaches exists."""
    for name in (
        "_NODE_REGISTRY_LOCK",
        "SUPPORTED_NODES",
        "SUPPORTED_SERIALIZED_TYPES",
        "SERIALIZED_TYPE_TO_PYTHON_TYPE",
        "CONSTANT_NODES",
        "_cxx_pytree_pending_imports",
        "_SerializeNodeDef",
        "_register_namedtuple",
        "NO_SERIALIZED_TYPE_NAME_FOUND",
    ):
        assert hasattr(pt, name), f"torch.utils._pytree.{name} is gone (torch {torch.__version__})"
    assert pt._SerializeNodeDef._fields == (
        "typ",
        "serialized_type_name",
        "to_dumpable_context",
        "from_dumpable_context",
    )
    assert hasattr(pt.treespec_loads, "cache_clear")
    # _remove_safe_global: torch's weights-only allow-list has no public way to drop one entry.
    import torch._weights_only_unpickler as unpickler

    assert callable(unpickler._remove_safe_globals)


def test_accessors_of_names_are_the_ones_inspect_and_the_reader_use(uname: str) -> None:
    """The public accessors of torch's name map: the registered class, never the "no name"
    marker, and the serialization entry of a class."""

    @tc.pytree_dataclass(name=uname)
    class Named:
        x: Any

    assert backend.class_for_serialized_name(uname) is Named
    assert backend.class_for_serialized_name(pt.NO_SERIALIZED_TYPE_NAME_FOUND) is None
    assert backend.serialization_of(Named).serialized_type_name == uname
    assert backend.child_count(Named, ((),)) == 1
    assert backend.child_count(Named, (("x",),)) == 0
