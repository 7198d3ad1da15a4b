"""``schema check``'s verdict per loader family is what the loaders do (issue 30, item 3).

Backward (the default mode) and forward (the locked classes read what today's write).

Each change of the evolution matrix (``tests/test_evolution_matrix.py``,
``tests/test_evolution_pairs.py``) and a few more (renames and removals without a
declaration, statics that hold less, an enum member removed, namedtuple field changes): the
class as it was (version 1) and as it is (version 2) are made under names of the same length;
version 1 writes real artifacts through every writer, the names in the bytes are replaced
(pickles, flatbuffers and file headers stay valid), and version 2 loads them with every loader.
A family loads when each of its loaders does. The lock of version 1 (its names replaced the
same way) is then checked against version 2, and its verdict must be the same, family by family.
The forward test turns it round: version 2 writes, version 1 reads.

The families' loaders: ``treespec_loads``, ``tc.load`` and ``treeclass.orbax.restore``
(objects); ``pickle.loads`` and ``torch.load(weights_only=True)`` (pickle); a ``jax.export``
blob; torch's treespec text, which a ``torch.export`` archive holds as its input structure
(``tests/test_evolution_matrix.py`` loads whole ``.pt2`` archives in a fresh process).
"""

from __future__ import annotations

import enum
import io
import pickle
import sys
import types
import uuid
from collections import namedtuple
from pathlib import Path
from typing import Any, Literal

import pytest

import treeclass as tc
from treeclass._core.registry import registered_node
from treeclass._io import schema

np = pytest.importorskip("numpy")
jax = pytest.importorskip("jax")
torch = pytest.importorskip("torch")
pt = pytest.importorskip("torch.utils._pytree")

# change -> what the version 2 class is (see ``make``).
CHANGES = (
    "none",  # nothing changed
    "rename_alias",  # data field "w" is "x" now, aliases=("w",)
    "rename_bare",  # data field "w" is "x" now, no alias
    "removed_listed",  # data field "old" is gone, listed in removed_fields=
    "removed_bare",  # data field "old" is gone, not listed
    "new_none",  # new data field with the default None
    "new_default",  # new data field with the default 7.0
    "new_required",  # new data field without a default
    "new_static",  # new static field with a default
    "new_static_required",  # new static field without a default
    "static_narrowed",  # static Literal["a", "b"] is Literal["a"] now (the object holds "b")
    "static_removed_listed",  # static field "mode" is gone, listed in removed_fields=
    "static_to_data",  # static field "mode" is a data field now
    "enum_member_removed",  # the object holds Act.GELU; GELU is gone
    "class_alias",  # the class has another name now, the old one as its alias
    "class_renamed_bare",  # the class has another name now, no alias
    "migrate",  # a migrate hook turns the static "pct" into "frac"
    "reordered",  # data fields in another order
    "nt_renamed",  # namedtuple field "b" is "c" now
    "nt_added",  # namedtuple gains field "c"
)
FAMILIES = schema.FAMILIES
#: The loaders of each family.
LOADERS = {
    "objects": ("treespec_loads", "tc.load", "orbax"),
    "pickle": ("pickle", "torch.load"),
    "jax.export": ("jax.export",),
    "torch.export": ("torch treespec",),
}


def _percent_to_fraction(state: Any) -> Any:
    static = dict(state["static"])
    if "pct" in static:
        static["frac"] = static.pop("pct") / 100
    return {**state, "static": static}


class Cell:
    """Version 1 and 2 of one change: artifacts written by 1, loaded by 2, and the lock of 1."""

    def __init__(self, change: str, tmp: Path, forward: bool = False) -> None:
        self.change = change
        self.forward = forward
        self.tag = uuid.uuid4().hex[:8]
        self.old, self.new = f"p1.{self.tag}.", f"p2.{self.tag}."
        self.tmp = tmp
        # The enum lives at one module path in both versions (as a user's does).
        self.enum_module = types.ModuleType(f"schemacell_{self.tag}_enum")
        sys.modules[self.enum_module.__name__] = self.enum_module
        v1 = self.make(1)
        self.lock = schema.dumps_lock(schema.lock_of([self.module(1)]))
        self.written: dict[str, Any] = {}
        if not forward:
            self.write(v1(**self.values()))
        self.v2 = self.make(2)
        if forward:  # version 2 writes, version 1 reads (the enum as version 1 had it)
            self.write(self.v2(**self.values_now()))
            if change == "enum_member_removed":
                self.enum_module.Act = v1.__annotations__["act"]

    def module(self, version: int) -> str:
        return f"schemacell_{self.tag}_{version}"

    def values(self) -> dict[str, Any]:
        c = self.change
        if c.startswith("nt_"):
            return {"a": np.asarray(1.0), "b": np.asarray(2.0)}
        out: dict[str, Any] = {"a": np.asarray(1.0)}
        out["w" if c.startswith("rename") else "x"] = np.asarray(2.0)
        if c.startswith("removed"):
            out["old"] = np.asarray(5.0)
        if c == "reordered":
            out["y"] = np.asarray(3.0)
        out["s"] = "b"
        if c.startswith("static") or c == "static_narrowed":
            out["mode"] = "b"
        if c == "enum_member_removed":
            out["act"] = self.enum_module.Act.GELU
        if c == "migrate":
            out["pct"] = 30
        return out

    def values_now(self) -> dict[str, Any]:
        """Version 2's object: an array per data field, its static fields' defaults."""
        node = registered_node(self.v2)
        assert node is not None and node.info is not None
        out: dict[str, Any] = {}
        for i, f in enumerate(node.info.fields):
            if f.static and f.has_default:
                continue
            out[f.name] = "b" if f.static else np.asarray(float(i))
        return out

    def make(self, version: int) -> type:
        """The class of the cell, version 1 or 2 (registered under its prefix)."""
        c, later = self.change, version == 2
        prefix = self.new if later else self.old
        name = prefix + "C"
        module = self.module(version)
        if c.startswith("nt_"):
            fields = (
                ["a", "b"] if not later else (["a", "c"] if c == "nt_renamed" else ["a", "b", "c"])
            )
            nt = namedtuple("NT", fields, defaults=[None] * len(fields), module=module)
            return tc.register_namedtuple(nt, name=name)
        annotations: dict[str, Any] = {"a": Any}
        ns: dict[str, Any] = {"__module__": module}
        options: dict[str, Any] = {"name": name, "frozen": True}
        renamed = c.startswith("rename")
        data = ["x", "y"] if c == "reordered" else ["x"]
        if later and c == "reordered":
            data = ["y", "x"]
        for d in data:
            annotations["w" if renamed and not later else d] = Any
        if later and c == "rename_alias":
            ns["x"] = tc.field(aliases=("w",))
        if c.startswith("removed") and not later:
            annotations["old"] = Any
        if later and c == "removed_listed":
            options["removed_fields"] = ("old",)
        if later and c == "new_none":
            annotations["n"], ns["n"] = Any, None
        if later and c == "new_default":
            annotations["count"], ns["count"] = Any, 7.0
        if later and c == "new_required":
            annotations["req"] = Any
        if later and c == "static_to_data":
            annotations["mode"] = Any
        annotations["s"] = str
        ns["s"] = tc.field(static=True, default="a")
        if later and c == "new_static":
            annotations["flag"], ns["flag"] = str, tc.field(static=True, default="m")
        if later and c == "new_static_required":
            annotations["flag"], ns["flag"] = str, tc.field(static=True, kw_only=True)
        if c.startswith("static") and not (later and c != "static_narrowed"):
            held = Literal["a"] if later else Literal["a", "b"]
            annotations["mode"], ns["mode"] = held, tc.field(static=True, default="a")
        if later and c == "static_removed_listed":
            options["removed_fields"] = ("mode",)
        if c == "enum_member_removed":
            members = {"RELU": "relu"} if later else {"RELU": "relu", "GELU": "gelu"}
            act: Any = enum.Enum("Act", members, module=self.enum_module.__name__)
            act.__qualname__ = "Act"
            self.enum_module.Act = act
            tc.register_static(act, name=prefix + "Act")
            annotations["act"], ns["act"] = act, tc.field(static=True, default=act.RELU)
        if c == "migrate":
            if later:
                options["migrate"] = _percent_to_fraction
                annotations["frac"], ns["frac"] = float, tc.field(static=True, default=0.5)
            else:
                annotations["pct"], ns["pct"] = int, tc.field(static=True, default=50)
        if later and c == "class_alias":
            options["name"], options["aliases"] = prefix + "Renamed", (name,)
        if later and c == "class_renamed_bare":
            options["name"] = prefix + "Renamed"
        ns["__annotations__"] = annotations
        cls: type = tc.pytree_dataclass(**options)(type("C", (), ns))
        return cls

    def now(self, data: bytes) -> bytes:
        """The bytes as the reader's version names them."""
        if self.forward:
            return data.replace(self.new.encode(), self.old.encode())
        return data.replace(self.old.encode(), self.new.encode())

    def write(self, obj: Any) -> None:
        w = self.written
        w["treespec_loads"] = self.now(tc.treespec_dumps(tc.tree_structure(obj)).encode())
        w["pickle"] = self.now(pickle.dumps(obj))
        path = self.tmp / "file.safetensors"
        tc.save(path, obj)
        path.write_bytes(self.now(path.read_bytes()))
        w["tc.load"] = path
        orbax = pytest.importorskip("treeclass.orbax")
        folder = self.tmp / "orbax"
        orbax.save(folder, obj)
        for f in folder.rglob("*"):
            if f.is_file():
                f.write_bytes(self.now(f.read_bytes()))
        w["orbax"] = folder
        jnp = pytest.importorskip("jax.numpy")
        as_jax = jax.tree_util.tree_map(jnp.asarray, obj)
        w["jax.export"] = self.now(
            bytes(jax.export.export(jax.jit(lambda o: o))(as_jax).serialize())
        )
        as_torch = pt.tree_map(lambda v: torch.tensor(float(v)), obj)
        buffer = io.BytesIO()
        torch.save(as_torch, buffer)
        w["torch.load"] = self.now(buffer.getvalue())
        w["torch treespec"] = self.now(pt.treespec_dumps(pt.tree_structure(as_torch)).encode())
        self.leaves = [np.asarray(v) for v in tc.tree_leaves(obj)]

    def load(self, loader: str) -> Any:
        w = self.written
        if loader == "treespec_loads":
            spec = tc.treespec_loads(w[loader])
            return spec.unflatten([np.asarray(0.0)] * spec.num_leaves)
        if loader == "tc.load":
            return tc.load(w[loader])
        if loader == "orbax":
            return pytest.importorskip("treeclass.orbax").restore(w[loader])
        if loader == "pickle":
            return pickle.loads(w[loader])
        if loader == "torch.load":
            return torch.load(io.BytesIO(w[loader]), weights_only=True)
        if loader == "jax.export":
            exported = jax.export.deserialize(bytearray(w[loader]))
            return jax.tree_util.tree_unflatten(exported.in_tree, self.leaves)
        assert loader == "torch treespec"
        spec = pt.treespec_loads(w[loader].decode())
        return pt.tree_unflatten([torch.tensor(0.0)] * spec.num_leaves, spec)

    def loads(self) -> dict[str, bool]:
        """Per family, whether every loader of the family loads version 1's artifacts."""
        out: dict[str, bool] = {}
        for family, loaders in LOADERS.items():
            ok = True
            for loader in loaders:
                if loader == "torch.load" and self.change == "enum_member_removed":
                    # The object's enum member is pickled by module path, a global that
                    # torch.load(weights_only=True) refuses whatever the class's change.
                    continue
                try:
                    self.load(loader)
                except Exception:
                    ok = False
            out[family] = ok
        return out

    def verdicts(self) -> dict[str, bool | None]:
        lock = schema.read_lock(self.lock.replace(self.old, self.new))
        report = schema.check(lock, [self.module(2)], "forward" if self.forward else "backward")
        rows = [r for r in report.rows if r.name.startswith(self.new)]
        locked = [r for r in rows if r.changes != ["new class"]]
        if not locked:
            return dict.fromkeys(FAMILIES, True)
        (row,) = locked
        return {f: row.verdicts[f].loads for f in FAMILIES}


# What the loaders do, as the matrix tests pin it (the verdicts must also equal this).
EXPECTED_BREAKS: dict[str, tuple[str, ...]] = {
    "none": (),
    "rename_alias": (),
    "rename_bare": FAMILIES,
    "removed_listed": ("jax.export", "torch.export"),
    "removed_bare": FAMILIES,
    "new_none": (),
    "new_default": ("jax.export", "torch.export"),
    "new_required": FAMILIES,
    "new_static": (),
    "new_static_required": FAMILIES,
    "static_narrowed": FAMILIES,
    "static_removed_listed": (),
    "static_to_data": ("objects", "jax.export", "torch.export"),  # a pickle holds it by name
    "enum_member_removed": FAMILIES,
    "class_alias": (),
    "class_renamed_bare": FAMILIES,
    "migrate": (),
    "reordered": ("objects", "jax.export", "torch.export"),
    "nt_renamed": ("objects", "pickle", "jax.export"),  # torch rebuilds it by position
    "nt_added": ("objects", "pickle"),  # jax by keyword, torch by position: the default fills
}


@pytest.mark.parametrize("change", CHANGES)
def test_schema_check_says_what_each_loader_family_does(change: str, tmp_path: Path) -> None:
    cell = Cell(change, tmp_path)
    actual = cell.loads()
    said = cell.verdicts()
    assert said == actual, (change, said, actual)
    assert {f for f, ok in actual.items() if not ok} == set(EXPECTED_BREAKS[change]), actual


# What the locked classes' loaders do with what version 2 writes (``--mode forward``): a
# field version 1 does not know, or one it needs that version 2 no longer writes, breaks.
FORWARD_BREAKS: dict[str, tuple[str, ...]] = {
    "none": (),
    "rename_alias": FAMILIES,
    "rename_bare": FAMILIES,
    "removed_listed": FAMILIES,
    "removed_bare": FAMILIES,
    "new_none": FAMILIES,
    "new_default": FAMILIES,
    "new_required": FAMILIES,
    "new_static": FAMILIES,
    "new_static_required": FAMILIES,
    "static_narrowed": (),
    "static_removed_listed": (),
    "static_to_data": FAMILIES,
    "enum_member_removed": (),
    "class_alias": FAMILIES,
    "class_renamed_bare": FAMILIES,
    "migrate": FAMILIES,
    "reordered": ("objects", "jax.export", "torch.export"),
    "nt_renamed": ("objects", "pickle", "jax.export"),
    "nt_added": FAMILIES,
}


@pytest.mark.parametrize("change", CHANGES)
def test_forward_verdicts_are_what_the_locked_loaders_do(change: str, tmp_path: Path) -> None:
    cell = Cell(change, tmp_path, forward=True)
    actual = cell.loads()
    said = cell.verdicts()
    assert said == actual, (change, said, actual)
    assert {f for f, ok in actual.items() if not ok} == set(FORWARD_BREAKS[change]), actual
