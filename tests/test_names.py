"""What the name guard refuses, what it cannot, and superseded classes (issue 13, "Names").

A re-run of a class statement (a notebook cell, ``importlib.reload``) moves the class's name to
the new class. An impostor -- a class defined elsewhere that sets ``__module__`` and
``__qualname__`` to the victim's -- must not be taken for a re-run: the name stays with the real
class in treeclass, torch's pytree and ``jax.export``, and the same holds for
``register_static``. The guard is not a security boundary within a process (issue 16): code that
runs a class statement in the victim module's own namespace, or swaps the victim in
``sys.modules``, looks like a re-run and takes the name; the docs say so, and the tests in
"the guard's limits" pin that the docs describe what the code does. After a genuine re-run,
instances (and specs) of the old class are refused by every serializer with one error that says
to rebuild the object from the current class.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import pickle
import sys
import types
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

import treeclass as tc

VICTIM_SOURCE = """
import enum
import treeclass as tc

class Mode(enum.Enum):
    A = "a"
    B = "b"

tc.register_static(Mode, name=PREFIX + ".Mode")

@tc.pytree_dataclass(name=PREFIX + ".Config")
class Config:
    x: float
    mode: object = tc.field(static=True, default=None)
"""

# One error everywhere: the class was defined (run) again; rebuild the object from the new class.
SUPERSEDED = r"(?s)again.*rebuild|rebuild.*again"


class Victim:
    """A module whose source can be run again, as a notebook cell or a reload does."""

    def __init__(self) -> None:
        self.name = f"victim_{uuid.uuid4().hex[:10]}"
        self.module = types.ModuleType(self.name)
        self.module.PREFIX = self.name  # type: ignore[attr-defined]
        sys.modules[self.name] = self.module
        self.run()

    def run(self) -> None:
        code = compile(VICTIM_SOURCE, f"<{self.name}>", "exec")
        exec(code, self.module.__dict__)

    @property
    def Config(self) -> Any:
        return self.module.Config

    @property
    def Mode(self) -> Any:
        return self.module.Mode


@pytest.fixture
def victim() -> Iterator[Victim]:
    v = Victim()
    yield v
    sys.modules.pop(v.name, None)


def _impostor_config(victim: Victim) -> type:
    """A class defined here, dressed up as the victim's Config."""

    class Config:
        x: float
        mode: Any = tc.field(static=True, default="a")

    Config.__module__ = victim.name
    Config.__qualname__ = "Config"
    return Config


def _impostor_mode(victim: Victim) -> type:
    class Mode(enum.Enum):
        A = "a"
        B = "b"

    Mode.__module__ = victim.name
    Mode.__qualname__ = "Mode"
    return Mode


# --- theft --------------------------------------------------------------------------------------


def test_an_impostor_cannot_take_a_name_in_treeclass(victim: Victim) -> None:
    real = victim.Config
    doc = tc.treespec_dumps(tc.tree_structure(real(1.0)))
    impostor = _impostor_config(victim)
    with pytest.raises(tc.NameConflictError, match=f"{victim.name}.Config"):
        tc.pytree_dataclass(name=f"{victim.name}.Config")(impostor)
    assert tc.class_for_name(f"{victim.name}.Config") is real
    assert type(tc.treespec_loads(doc).unflatten([1.0])) is real


def test_an_impostor_cannot_take_a_static_type_name(victim: Victim) -> None:
    real = victim.Mode
    impostor = _impostor_mode(victim)
    with pytest.raises(tc.NameConflictError, match=f"{victim.name}.Mode"):
        tc.register_static(impostor, name=f"{victim.name}.Mode")
    doc = tc.treespec_dumps(tc.tree_structure(victim.Config(1.0, real.B)))
    assert type(tc.treespec_loads(doc).unflatten([1.0]).mode) is real


def test_an_impostor_cannot_take_a_name_in_torch(victim: Victim) -> None:
    pytest.importorskip("torch")
    import torch.utils._pytree as pt

    real = victim.Config
    text = pt.treespec_dumps(pt.tree_structure(real(1.0)))
    with pytest.raises(tc.NameConflictError):
        tc.pytree_dataclass(name=f"{victim.name}.Config")(_impostor_config(victim))
    pt.treespec_loads.cache_clear()
    assert pt.treespec_loads(text).type is real


def test_an_impostor_cannot_take_a_name_in_jax_export(victim: Victim) -> None:
    jax = pytest.importorskip("jax")
    pytest.importorskip("flatbuffers")
    import jax.numpy as jnp

    real = victim.Config
    blob = jax.export.export(jax.jit(lambda c: c.x * 2))(real(jnp.float32(1.0))).serialize()
    with pytest.raises(tc.NameConflictError):
        tc.pytree_dataclass(name=f"{victim.name}.Config")(_impostor_config(victim))
    loaded = jax.export.deserialize(blob)
    (arg,), _ = jax.tree_util.tree_unflatten(loaded.in_tree, [1.0])
    assert type(arg) is real


def test_a_genuine_rerun_still_takes_the_name(victim: Victim) -> None:
    old = victim.Config
    victim.run()
    new = victim.Config
    assert new is not old
    assert tc.class_for_name(f"{victim.name}.Config") is new
    doc = tc.treespec_dumps(tc.tree_structure(new(1.0, victim.Mode.B)))
    loaded = tc.treespec_loads(doc).unflatten([2.0])
    assert type(loaded) is new and loaded.mode is victim.Mode.B


def test_a_rerun_from_another_module_is_not_recognised(victim: Victim) -> None:
    # The same class statement, with __module__ set in its body, run by code whose globals
    # are not the victim module's: not a re-run, whatever the class says about itself.
    namespace: dict[str, Any] = {"__name__": __name__, "PREFIX": victim.name, "tc": tc}
    code = (
        "@tc.pytree_dataclass(name=PREFIX + '.Config')\n"
        "class Config:\n"
        "    __module__ = PREFIX\n"
        "    x: float\n"
    )
    with pytest.raises(tc.NameConflictError):
        exec(compile(code, "<elsewhere>", "exec"), namespace)
    assert tc.class_for_name(f"{victim.name}.Config") is victim.Config


# --- the guard's limits (docs/format.md: "not a security boundary within a process") ----------

_TAKEOVER = "@tc.pytree_dataclass(name=PREFIX + '.Config')\nclass Config:\n    y: str\n"


def test_code_run_in_the_victims_namespace_takes_the_name(victim: Victim) -> None:
    real = victim.Config
    exec(compile(_TAKEOVER, "<injected>", "exec"), victim.module.__dict__)
    taker = tc.class_for_name(f"{victim.name}.Config")
    assert taker is not real and taker is victim.Config
    assert [f.name for f in dataclasses.fields(taker)] == ["y"]


def test_a_module_swapped_into_sys_modules_takes_the_name(victim: Victim) -> None:
    real = victim.Config
    swapped = types.ModuleType(victim.name)
    swapped.PREFIX = victim.name  # type: ignore[attr-defined]
    swapped.tc = tc  # type: ignore[attr-defined]
    sys.modules[victim.name] = swapped
    exec(compile(_TAKEOVER, "<swapped>", "exec"), swapped.__dict__)
    taker = tc.class_for_name(f"{victim.name}.Config")
    assert taker is not real and taker is swapped.Config  # type: ignore[attr-defined]


def test_the_docs_do_not_claim_the_guard_stops_same_process_code() -> None:
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    texts = [root / "README.md", root / "CHANGELOG.md", *sorted((root / "docs").glob("*.md"))]
    texts.append(root / "src" / "treeclass" / "_core" / "names.py")
    for path in texts:
        text = " ".join(path.read_text().split()).lower()
        assert "impostor elsewhere that sets" not in text, path
        assert "so it cannot take the name" not in text, path
    format_md = " ".join((root / "docs" / "format.md").read_text().split())
    assert "not a security boundary within a process" in format_md


# --- superseded classes -------------------------------------------------------------------------


@pytest.fixture
def rerun(victim: Victim) -> tuple[Victim, Any]:
    """The victim after a re-run, and an instance of its first Config."""
    old_obj = victim.Config(1.0)
    victim.run()
    assert type(old_obj) is not victim.Config
    return victim, old_obj


def test_a_superseded_instance_is_refused_by_treespec_dumps(rerun: tuple[Victim, Any]) -> None:
    _, old_obj = rerun
    with pytest.raises(tc.UnnamedClassError, match=SUPERSEDED):
        tc.treespec_dumps(tc.tree_structure(old_obj))


def test_a_superseded_spec_is_refused_by_pickle(rerun: tuple[Victim, Any]) -> None:
    _, old_obj = rerun
    with pytest.raises(tc.UnnamedClassError, match=SUPERSEDED):
        pickle.dumps(tc.tree_structure(old_obj))


def test_a_superseded_instance_is_refused_by_pickle(rerun: tuple[Victim, Any]) -> None:
    _, old_obj = rerun
    # pickle itself refuses an instance whose class is no longer the module's attribute;
    # a by-name reducer must refuse it as well (issue 11 pickles instances by name).
    with pytest.raises(
        (pickle.PicklingError, tc.TreeclassError), match=SUPERSEDED + "|not the same object"
    ):
        pickle.dumps(old_obj)


def test_a_superseded_instance_is_refused_by_torch(rerun: tuple[Victim, Any]) -> None:
    pytest.importorskip("torch")
    import torch.utils._pytree as pt

    _, old_obj = rerun
    spec = pt.tree_structure(old_obj)
    # torch's own call site: the old class has no serialized_type_name there any more.
    with pytest.raises(NotImplementedError, match="No registered serialization name"):
        pt.treespec_dumps(spec)
    # treeclass's call site says what happened and what to do.
    with pytest.raises(tc.UnnamedClassError, match=SUPERSEDED):
        tc.treespec_dumps(spec)


def test_a_superseded_instance_is_refused_by_jax_export(rerun: tuple[Victim, Any]) -> None:
    jax = pytest.importorskip("jax")
    pytest.importorskip("flatbuffers")
    import jax.numpy as jnp

    victim, old_obj = rerun
    old_cls = type(old_obj)
    exported = jax.export.export(jax.jit(lambda c: c.x * 2))(old_cls(jnp.float32(1.0)))
    # JAX's own call site: the old class has no jax.export registration any more.
    with pytest.raises(ValueError, match="Cannot serialize PyTreeDef containing an unregistered"):
        exported.serialize()
    # treeclass's call site says what happened and what to do.
    with pytest.raises(tc.UnnamedClassError, match=SUPERSEDED):
        tc.treespec_dumps(exported.in_tree)
    # The current class serializes under the name.
    new = jax.export.export(jax.jit(lambda c: c.x * 2))(victim.Config(jnp.float32(1.0)))
    assert jax.export.deserialize(new.serialize()).in_tree == new.in_tree


def test_a_superseded_static_type_is_refused_with_the_same_error(victim: Victim) -> None:
    old_member = victim.Mode.B
    victim.run()
    assert type(old_member) is not victim.Mode
    with pytest.raises(tc.TreeclassError, match=SUPERSEDED):
        tc.treespec_dumps(tc.tree_structure(victim.Config(1.0, old_member)))


def test_documents_of_the_old_class_load_as_the_current_one(rerun: tuple[Victim, Any]) -> None:
    victim, _ = rerun
    doc = json.dumps(
        {
            "format": "treeclass.treespec",
            "leaves": 1,
            "nodes": [
                [f"{victim.name}.Config", {"data": ["x"], "none": [], "static": {}}, 1],
                None,
            ],
            "version": 1,
        }
    )
    assert type(tc.treespec_loads(doc).unflatten([1.0])) is victim.Config
