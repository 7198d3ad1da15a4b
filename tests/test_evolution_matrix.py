"""Every loader applies a class's evolution the same way (issue 17, item 1).

One change at a time: version 1 of a module is written to a temporary folder and its objects
saved through every writer in a fresh process; then, in another fresh process where only
version 2 of the module exists (under another module name, so nothing is found by module
path), every loader reads them back. Each cell loads the values version 2 describes (a new
data field takes its default: a plain default, a default factory, attrs' ``default=`` and
``factory=``), except where a compiled program cannot take the change: a removed data field
that a jax.export or torch.export program takes as input, and a new data field with a
non-``None`` default, which the program does not take as input (its inputs are fixed). Those
cells raise a treeclass error naming the class and the field.

The whole matrix costs two fresh processes (one that saves, one that loads).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from _subproc import FRAMEWORKS, report_in

pytest.importorskip("jax")
pytest.importorskip("torch")
pytest.importorskip("orbax.checkpoint")

# The matrix is one module-scoped fixture (two fresh processes importing jax, torch and orbax),
# built once: xdist runs a file's tests on one worker (--dist loadfile).
pytestmark = pytest.mark.slow

V1 = """
from typing import Any
import attrs
import treeclass as tc

@tc.pytree_dataclass(name="evo.CROld", frozen=True)
class ClassRenamed:
    x: Any
    s: str = tc.field(static=True, default="a")

@tc.pytree_dataclass(name="evo.FieldRenamed", frozen=True)
class FieldRenamed:
    w: Any
    s: str = tc.field(static=True, default="a")

@tc.pytree_dataclass(name="evo.NewStatic", frozen=True)
class NewStatic:
    x: Any
    s: str = tc.field(static=True, default="a")

@tc.pytree_dataclass(name="evo.NewNoneData", frozen=True)
class NewNoneData:
    x: Any
    s: str = tc.field(static=True, default="a")

@tc.pytree_dataclass(name="evo.NewData", frozen=True)
class NewData:
    x: Any
    s: str = tc.field(static=True, default="a")

@tc.pytree_dataclass(name="evo.NewFactoryData", frozen=True)
class NewFactoryData:
    x: Any
    s: str = tc.field(static=True, default="a")

@attrs.frozen
class NewAttrsData:
    x: Any
    s: str = attrs.field(default="a", metadata={"static": True})

tc.register_dataclass(NewAttrsData, name="evo.NewAttrsData")

@tc.pytree_dataclass(name="evo.Removed", frozen=True)
class Removed:
    x: Any
    old: Any
    s: str = tc.field(static=True, default="a")

@tc.pytree_dataclass(name="evo.Migrated", frozen=True)
class Migrated:
    x: Any
    pct: int = tc.field(static=True, default=50)

def examples(array):
    return {
        "class_renamed": ClassRenamed(array([1.0, 2.0]), "b"),
        "field_renamed": FieldRenamed(array([1.0, 2.0]), "b"),
        "new_static": NewStatic(array([1.0, 2.0]), "b"),
        "new_none_data": NewNoneData(array([1.0, 2.0]), "b"),
        "new_data": NewData(array([1.0, 2.0]), "b"),
        "new_factory_data": NewFactoryData(array([1.0, 2.0]), "b"),
        "new_attrs_data": NewAttrsData(array([1.0, 2.0]), "b"),
        "removed": Removed(array([1.0, 2.0]), array([5.0]), "b"),
        "migrate": Migrated(array([1.0, 2.0]), 30),
    }
"""

V2 = """
from typing import Any
import attrs
import treeclass as tc

@tc.pytree_dataclass(name="evo.CR", aliases=("evo.CROld",), frozen=True)
class ClassRenamed:
    x: Any
    s: str = tc.field(static=True, default="a")

@tc.pytree_dataclass(name="evo.FieldRenamed", frozen=True)
class FieldRenamed:
    x: Any = tc.field(aliases=("w",))
    s: str = tc.field(static=True, default="a")

@tc.pytree_dataclass(name="evo.NewStatic", frozen=True)
class NewStatic:
    x: Any
    s: str = tc.field(static=True, default="a")
    mode: str = tc.field(static=True, default="m")

@tc.pytree_dataclass(name="evo.NewNoneData", frozen=True)
class NewNoneData:
    x: Any
    s: str = tc.field(static=True, default="a")
    extra: Any = None

@tc.pytree_dataclass(name="evo.NewData", frozen=True)
class NewData:
    x: Any
    s: str = tc.field(static=True, default="a")
    extra: Any = 2.0

@tc.pytree_dataclass(name="evo.NewFactoryData", frozen=True)
class NewFactoryData:
    x: Any
    s: str = tc.field(static=True, default="a")
    extra: Any = tc.field(default_factory=lambda: [3.0, {"k": 4.0}])

@attrs.frozen
class NewAttrsData:
    x: Any
    s: str = attrs.field(default="a", metadata={"static": True})
    extra: Any = attrs.field(default=5.0)
    more: Any = attrs.field(factory=lambda: (6.0,))

tc.register_dataclass(NewAttrsData, name="evo.NewAttrsData")

@tc.pytree_dataclass(name="evo.Removed", removed_fields=("old",), frozen=True)
class Removed:
    x: Any
    s: str = tc.field(static=True, default="a")

def _percent_to_fraction(state):
    static = dict(state["static"])
    if "pct" in static:
        static["frac"] = static.pop("pct") / 100
    return {**state, "static": static}

@tc.pytree_dataclass(name="evo.Migrated", migrate=_percent_to_fraction, frozen=True)
class Migrated:
    x: Any
    frac: float = tc.field(static=True, default=0.5)
"""

SAVE = """
import json, pickle, sys
from pathlib import Path
import numpy as np
import jax, jax.numpy as jnp, torch
import treeclass as tc, treeclass.orbax
import evo_v1 as m

out = Path(sys.argv[1])

def total(tree):
    return sum(jnp.sum(leaf) for leaf in jax.tree_util.tree_leaves(tree)) * 2

class Total(torch.nn.Module):
    def forward(self, tree):
        return sum(leaf.sum() for leaf in torch.utils._pytree.tree_leaves(tree)) * 2

for change, obj in m.examples(np.array).items():
    d = out / change
    d.mkdir()
    (d / "pickle").write_bytes(pickle.dumps(obj))
    tc.save(d / "file.safetensors", obj)
    (d / "treespec.json").write_text(tc.treespec_dumps(tc.tree_structure(obj)))
    (d / "leaves.json").write_text(json.dumps([l.tolist() for l in tc.tree_leaves(obj)]))
    treeclass.orbax.save(d / "orbax", obj)
for change, obj in m.examples(lambda v: torch.tensor(v)).items():
    torch.save(obj, out / change / "torch.pt")
    ep = torch.export.export(Total(), (obj,))
    torch.export.save(ep, out / change / "program.pt2")
for change, obj in m.examples(jnp.array).items():
    exported = jax.export.export(jax.jit(total))(obj)
    (out / change / "jax.bin").write_bytes(exported.serialize())
print(json.dumps("saved"))
"""

LOAD = """
import json, pickle, sys, traceback
from pathlib import Path
import numpy as np
import jax, jax.numpy as jnp, torch
import treeclass as tc, treeclass.orbax
import evo_v2 as m

base = Path(sys.argv[1])

def describe(obj):
    fields = {}
    names = getattr(obj, "__dataclass_fields__", None) or [a.name for a in obj.__attrs_attrs__]
    for name in names:
        v = getattr(obj, name)
        fields[name] = np.asarray(v).tolist() if hasattr(v, "shape") else v
    return {"name": tc.name_of(type(obj)), "fields": fields}

def pickled(d):
    return pickle.loads((d / "pickle").read_bytes())

def torch_load(d):
    return torch.load(d / "torch.pt", weights_only=True)

def tc_load(d):
    return tc.load(d / "file.safetensors")

def treespec(d):
    spec = tc.treespec_loads((d / "treespec.json").read_text())
    leaves = [np.array(l) for l in json.loads((d / "leaves.json").read_text())]
    return tc.tree_unflatten(spec, leaves)

def orbax(d):
    return treeclass.orbax.restore(d / "orbax")

def jax_export(d):
    exported = jax.export.deserialize(bytearray((d / "jax.bin").read_bytes()))
    leaves = [jnp.array(a.shape and [1.0, 2.0] or 0.0) for a in exported.in_avals]
    (obj,), _ = jax.tree_util.tree_unflatten(exported.in_tree, leaves)
    result = float(exported.call(obj))
    assert result == float(sum(jnp.sum(l) for l in leaves)) * 2, result
    return obj

def torch_export(d):
    ep = torch.export.load(d / "program.pt2")
    (obj,), _ = ep.example_inputs
    result = float(ep.module()(obj))
    assert result == 6.0, result
    return obj

LOADERS = {
    "pickle": pickled, "torch.load": torch_load, "tc.load": tc_load,
    "treespec_loads": treespec, "orbax": orbax, "jax.export": jax_export,
    "torch.export.load": torch_export,
}
report = {}
for change in sorted(p.name for p in base.iterdir()):
    for loader, load in LOADERS.items():
        try:
            report[f"{change}|{loader}"] = {"ok": describe(load(base / change))}
        except Exception as e:
            report[f"{change}|{loader}"] = {
                "error": type(e).__name__,
                "treeclass": isinstance(e, tc.TreeclassError),
                "message": str(e),
                "trace": traceback.format_exc()[-1500:],
            }
print(json.dumps(report))
"""

LOADERS = (
    "pickle",
    "torch.load",
    "tc.load",
    "treespec_loads",
    "orbax",
    "jax.export",
    "torch.export.load",
)
# What version 2 holds after loading each change (the array x is [1.0, 2.0] everywhere).
EXPECTED: dict[str, dict[str, Any]] = {
    "class_renamed": {"name": "evo.CR", "fields": {"x": [1.0, 2.0], "s": "b"}},
    "field_renamed": {"name": "evo.FieldRenamed", "fields": {"x": [1.0, 2.0], "s": "b"}},
    "new_static": {"name": "evo.NewStatic", "fields": {"x": [1.0, 2.0], "s": "b", "mode": "m"}},
    "new_none_data": {
        "name": "evo.NewNoneData",
        "fields": {"x": [1.0, 2.0], "s": "b", "extra": None},
    },
    "new_data": {"name": "evo.NewData", "fields": {"x": [1.0, 2.0], "s": "b", "extra": 2.0}},
    "new_factory_data": {
        "name": "evo.NewFactoryData",
        "fields": {"x": [1.0, 2.0], "s": "b", "extra": [3.0, {"k": 4.0}]},
    },
    "new_attrs_data": {
        "name": "evo.NewAttrsData",
        "fields": {"x": [1.0, 2.0], "s": "b", "extra": 5.0, "more": [6.0]},
    },
    "removed": {"name": "evo.Removed", "fields": {"x": [1.0, 2.0], "s": "b"}},
    "migrate": {"name": "evo.Migrated", "fields": {"x": [1.0, 2.0], "frac": 0.3}},
}
# Cells where a compiled program's inputs are fixed and cannot take the change: the error
# must name the class and the field. Every other cell loads EXPECTED.
PROGRAMS = ("jax.export", "torch.export.load")
REFUSED: dict[tuple[str, str], tuple[str, str]] = {
    **{("removed", loader): ("Removed", "old") for loader in PROGRAMS},
    **{("new_data", loader): ("NewData", "extra") for loader in PROGRAMS},
    **{("new_factory_data", loader): ("NewFactoryData", "extra") for loader in PROGRAMS},
    **{("new_attrs_data", loader): ("NewAttrsData", "extra") for loader in PROGRAMS},
}


@pytest.fixture(scope="module")
def matrix(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("evolution")
    (root / "saved").mkdir()
    saved = str(root / "saved")
    assert (
        report_in(root / "v1", SAVE, saved, modules={"evo_v1": V1}, timeout=900, preload=FRAMEWORKS)
        == "saved"
    )
    (root / "v1" / "evo_v1.py").unlink()  # version 1 is gone
    report: dict[str, Any] = report_in(
        root / "v2", LOAD, saved, modules={"evo_v2": V2}, timeout=900, preload=FRAMEWORKS
    )
    return report


@pytest.mark.parametrize("loader", LOADERS)
@pytest.mark.parametrize("change", sorted(EXPECTED))
def test_every_loader_applies_the_evolution(
    matrix: dict[str, Any], change: str, loader: str
) -> None:
    cell = matrix[f"{change}|{loader}"]
    refused = REFUSED.get((change, loader))
    if refused is None:
        assert "ok" in cell, json.dumps(cell, indent=1)
        assert cell["ok"] == EXPECTED[change]
        return
    cls, field = refused
    assert "error" in cell, json.dumps(cell, indent=1)
    assert cell["treeclass"], json.dumps(cell, indent=1)
    assert cls in cell["message"] and repr(field) in cell["message"], cell["message"]
