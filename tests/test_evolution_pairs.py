"""Every pair of class changes through every loader, in one process (issue 28, item 1).

``tests/test_evolution_matrix.py`` applies one change at a time in fresh processes (orbax,
``torch.load`` and ``torch.export`` included); this file crosses every pair of changes (and
each change alone) with the loaders that read a saved node's state in this process. Each
cell makes the class as it was (version 1) under one name and as it is (version 2) under
another name of the same length, writes with version 1 and replaces the name in the saved
bytes (same length: pickles, flatbuffers and file headers stay valid), so version 2 loads
what version 1 wrote.

A cell loads version 2's values, or raises ``TreespecLoadError`` where the loader's
structure has one child per data field (a JAX, torch or optree structure, a serialized
function): it cannot drop a removed field's leaves nor give a new field a default that has
leaves. The first bug this found: a removed field's leaf landed in a new field.
"""

from __future__ import annotations

import io
import itertools
import json
import pickle
import uuid
from pathlib import Path
from typing import Any

import pytest

import treeclass as tc

np = pytest.importorskip("numpy")

CHANGES = (
    "rename",  # data field "w" is "x" now, with aliases=("w",)
    "removed",  # data field "old" (the last one) is in removed_fields= now
    "new_none",  # new data field "n" with the default None
    "new_default",  # new data field "count" with the default 7 (a leaf everywhere)
    "new_static",  # new static field "mode" with the default "m"
    "class_alias",  # the class has another name now, the old one as its alias
    "migrate",  # a migrate hook turns the static "pct" into "frac"
)
#: Loaders whose structure has one child per data field.
FIXED = ("to=jax", "to=torch", "to=optree", "jax.export", "torch treespec", "tc.torch treespec")
LOADERS = ("treespec", *FIXED, "tc.load", "pickle", "torch.load")
CELLS = [(a, b) for a, b in itertools.combinations_with_replacement(CHANGES, 2)]


def _percent_to_fraction(state: Any) -> Any:
    static = dict(state["static"])
    static["frac"] = static.pop("pct") / 100
    return {**state, "static": static}


def make(version: int, changes: tuple[str, ...], name: str, alias: str | None) -> type:
    """Version 1 or 2 of the class of a cell (data fields first, then statics)."""
    later = version == 2
    annotations: dict[str, Any] = {"a": Any}
    namespace: dict[str, Any] = {"__module__": __name__}
    renamed = "rename" in changes
    annotations["x" if later or not renamed else "w"] = Any
    if later and renamed:
        namespace["x"] = tc.field(aliases=("w",))
    if "removed" in changes and not later:
        annotations["old"] = Any
    if "new_none" in changes and later:
        annotations["n"] = Any
        namespace["n"] = None
    if "new_default" in changes and later:
        annotations["count"] = Any
        namespace["count"] = 7.0
    annotations["s"] = str
    namespace["s"] = tc.field(static=True, default="a")
    if "new_static" in changes and later:
        annotations["mode"] = str
        namespace["mode"] = tc.field(static=True, default="m")
    if "migrate" in changes:
        annotations["frac" if later else "pct"] = float if later else int
        namespace["frac" if later else "pct"] = tc.field(static=True, default=0.5 if later else 50)
    namespace["__annotations__"] = annotations
    options: dict[str, Any] = {"name": name, "frozen": True}
    if later:
        options["aliases"] = () if alias is None else (alias,)
        if "removed" in changes:
            options["removed_fields"] = ("old",)
        if "migrate" in changes:
            options["migrate"] = _percent_to_fraction
    cls: type = tc.pytree_dataclass(**options)(type(f"V{version}", (), namespace))
    return cls


def expected(changes: tuple[str, ...]) -> dict[str, Any]:
    """Version 2's fields after loading version 1's object (a=1, x=2, old=5, s="b", pct=30)."""
    out: dict[str, Any] = {"a": 1.0, "x": 2.0}
    if "new_none" in changes:
        out["n"] = None
    if "new_default" in changes:
        out["count"] = 7.0
    out["s"] = "b"
    if "new_static" in changes:
        out["mode"] = "m"
    if "migrate" in changes:
        out["frac"] = 0.3
    return out


def refused(changes: tuple[str, ...], loader: str) -> bool:
    return loader in FIXED and ("removed" in changes or "new_default" in changes)


def fields_of(obj: Any) -> dict[str, Any]:
    out = {}
    for name in obj.__dataclass_fields__:
        v = getattr(obj, name)
        out[name] = float(np.asarray(v)) if hasattr(v, "shape") or type(v) is int else v
    return out


class Cell:
    """Version 1's object written by every writer, read back by version 2."""

    def __init__(self, changes: tuple[str, ...], tmp: Path) -> None:
        tag = uuid.uuid4().hex[:8]
        self.old, self.new = f"p1.{tag}.C", f"p2.{tag}.C"
        alias = None
        name = self.new
        if "class_alias" in changes:
            name, alias = f"p2.{tag}.Renamed", self.new
        v1 = make(1, changes, self.old, None)
        values: dict[str, Any] = {"a": 1.0, ("w" if "rename" in changes else "x"): 2.0}
        if "removed" in changes:
            values["old"] = 5.0
        values["s"] = "b"
        if "migrate" in changes:
            values["pct"] = 30
        self.leaves = [float(v) for k, v in values.items() if k not in ("s", "pct")]
        self.values = values
        self.obj = v1(**{k: np.asarray(v) if type(v) is float else v for k, v in values.items()})
        self.tmp = tmp
        self.written: dict[str, Any] = {}
        self.write(v1)
        self.v2 = make(2, changes, name, alias)

    def now(self, data: bytes) -> bytes:
        assert self.old.encode() in data
        return data.replace(self.old.encode(), self.new.encode())

    def write(self, v1: type) -> None:
        spec = tc.tree_structure(self.obj)
        self.written["treespec"] = self.now(tc.treespec_dumps(spec).encode())
        self.written["pickle"] = self.now(pickle.dumps(self.obj))
        path = self.tmp / "file.safetensors"
        tc.save(path, self.obj)
        path.write_bytes(self.now(path.read_bytes()))
        self.written["tc.load"] = path
        jax = pytest.importorskip("jax")
        jnp = pytest.importorskip("jax.numpy")
        as_jax = jax.tree_util.tree_map(jnp.asarray, self.obj)
        blob = jax.export.export(jax.jit(lambda o: o))(as_jax).serialize()
        self.written["jax.export"] = self.now(bytes(blob))
        torch = pytest.importorskip("torch")
        pt = pytest.importorskip("torch.utils._pytree")
        as_torch = pt.tree_map(lambda v: torch.tensor(float(v)), self.obj)
        buffer = io.BytesIO()
        torch.save(as_torch, buffer)
        self.written["torch.load"] = self.now(buffer.getvalue())
        text = pt.treespec_dumps(pt.tree_structure(as_torch))
        self.written["torch treespec"] = self.now(text.encode())

    def load(self, loader: str) -> Any:
        leaves = [np.asarray(v) for v in self.leaves]
        if loader == "treespec":
            return tc.treespec_loads(self.written["treespec"]).unflatten(leaves)
        if loader.startswith("to="):
            to = loader[3:]
            spec = tc.treespec_loads(self.written["treespec"], to=to)
            if to == "jax":
                return spec.unflatten(leaves)
            if to == "torch":
                return pytest.importorskip("torch.utils._pytree").tree_unflatten(leaves, spec)
            return pytest.importorskip("optree").tree_unflatten(spec, leaves)
        if loader == "tc.load":
            return tc.load(self.written["tc.load"])
        if loader == "pickle":
            return pickle.loads(self.written["pickle"])
        if loader == "jax.export":
            jax = pytest.importorskip("jax")
            exported = jax.export.deserialize(bytearray(self.written["jax.export"]))
            (obj,), _ = jax.tree_util.tree_unflatten(exported.in_tree, leaves)
            return obj
        if loader == "torch.load":
            torch = pytest.importorskip("torch")
            return torch.load(io.BytesIO(self.written["torch.load"]), weights_only=True)
        pt = pytest.importorskip("torch.utils._pytree")
        text = self.written["torch treespec"].decode()
        if loader == "tc.torch treespec":  # treeclass's safe reader of torch's JSON
            return pt.tree_unflatten(
                leaves, pytest.importorskip("treeclass.torch").treespec_loads(text)
            )
        assert loader == "torch treespec"
        return pt.tree_unflatten(leaves, pt.treespec_loads(text))


@pytest.mark.parametrize("changes", CELLS, ids=["+".join(sorted(set(c))) for c in CELLS])
def test_every_pair_of_changes_through_every_loader(
    changes: tuple[str, ...], tmp_path: Path
) -> None:
    cell = Cell(changes, tmp_path)
    want = expected(changes)
    for loader in LOADERS:
        if refused(changes, loader):
            gone = "'old'" if "removed" in changes else "'count'"
            with pytest.raises(tc.TreespecLoadError, match=rf"\.V2 .*\[{gone}") as info:
                cell.load(loader)
            if "removed" in changes and "new_default" in changes:
                assert "'count'" in str(info.value), (loader, str(info.value))
            continue
        got = cell.load(loader)
        assert type(got) is cell.v2, loader
        assert fields_of(got) == want, loader


def test_the_issue_example_is_refused() -> None:
    """Fields a, b, scratch saved; a, b, count: int = 0 today, scratch removed."""
    tag = uuid.uuid4().hex[:8]
    name = f"iso.{tag}.RemovedPlusCount"

    @tc.pytree_dataclass(name=name, removed_fields=("scratch",))
    class RemovedPlusCount:
        a: Any
        b: Any
        count: int = 0

    state = {"data": ["a", "b", "scratch"], "none": [], "static": {}}
    doc = {"format": "treeclass.treespec", "leaves": 3, "nodes": [[name, state, 3], *[None] * 3]}
    text = json.dumps({**doc, "version": 1})
    assert tc.treespec_loads(text).unflatten([0, 1, 2]) == RemovedPlusCount(0, 1)
    for to in ("jax", "torch", "optree"):
        pytest.importorskip(to)
        with pytest.raises(
            tc.TreespecLoadError,
            match=r"RemovedPlusCount with the removed field\(s\) \['scratch'\] as children and "
            r"without its data field\(s\) \['count'\]",
        ):
            tc.treespec_loads(text, to=to)
