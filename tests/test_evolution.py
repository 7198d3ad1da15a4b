"""Schema evolution beyond added fields (issue 12, phase 2): written first, failing until then.

Every test here is ``xfail(strict=True)``: it fails today (the keywords do not exist yet) and
turns the suite red the day it passes, so the marker is removed with the implementation.

The API under test is the issue's:

- renamed fields: ``tc.field(..., aliases=("old_name",))``;
- renamed classes: ``aliases=("pkg.Old",)`` on ``pytree_dataclass``, ``register_dataclass``
  and ``register_namedtuple``; an alias that collides with another class's name (or alias)
  is refused at registration, as names are;
- both apply to every loader: ``treespec_loads``, ``tc.load``, ``jax.export`` deserialization
  and ``torch.export`` load.

Two parts of the issue name no keyword; the tests use these proposals (to confirm):

- ``removed_fields=("old",)`` on the class: a field the class no longer has, named in a saved
  document, is dropped on load instead of being an error;
- ``migrate=hook`` on the class: ``hook(state) -> state`` rewrites a node's saved state (the
  document's ``{"data": [...], "none": [...], "static": {...}}``, statics in their JSON form)
  before it is loaded -- the worked example converts ``lr_percent`` into ``lr``.

Old artifacts are made by dumping with today's class and replacing its name or field name by
the old one in the saved text (same length, so flatbuffers and zips stay valid).
"""

from __future__ import annotations

import json
import struct
import typing
import uuid
import zipfile
from pathlib import Path
from typing import Any

import pytest

import treeclass as tc

phase2 = pytest.mark.xfail(
    strict=True, reason="issue 12 phase 2: aliases, removed fields and migrations"
)


def names() -> tuple[str, str]:
    """A new name and an old one of the same length."""
    tag = uuid.uuid4().hex[:8]
    return f"evo.{tag}.NewName", f"evo.{tag}.OldName"


def make_output(new: str, old: str, **options: Any) -> type:
    @tc.pytree_dataclass(name=new, aliases=(old,), **options)
    class Output:
        logits: Any
        hidden: Any = tc.field(default=None, aliases=("hiddn",))
        mode: str = tc.field(static=True, default="eval", aliases=("mde",))

    return Output


def old_text(text: str, new: str, old: str) -> str:
    """The text an older release would have written: old class name, old field names."""
    return text.replace(new, old).replace('"hidden"', '"hiddn"').replace('"mode"', '"mde"')


def old_bytes(data: bytes, new: str, old: str) -> bytes:
    """As :func:`old_text`, keeping lengths (the ``hiddn`` / ``mde`` renames pad with spaces
    inside JSON, so the byte length of a flatbuffer string or zip member is unchanged)."""
    out = data.replace(new.encode(), old.encode())
    out = out.replace(b'"hidden"', b' "hiddn"').replace(b'"mode"', b' "mde"')
    assert len(out) == len(data)
    return out


# --- registration -----------------------------------------------------------------------------


@phase2
def test_aliases_on_every_registration_function() -> None:
    new, old = names()

    class Plain:
        x: Any

    import dataclasses

    D = dataclasses.dataclass(Plain)
    tc.register_dataclass(D, name=new + "D", aliases=(old + "D",))
    assert tc.class_for_name(old + "D") is D

    class Pair(typing.NamedTuple):
        a: Any
        b: Any

    tc.register_namedtuple(Pair, name=new + "P", aliases=(old + "P",))
    assert tc.class_for_name(old + "P") is Pair
    Output = make_output(new, old)
    assert tc.class_for_name(old) is Output
    assert tc.name_of(Output) == new  # written under its name, never an alias


@phase2
def test_an_alias_that_collides_with_a_name_is_refused() -> None:
    new, old = names()

    @tc.pytree_dataclass(name=old)
    class Taken:
        x: Any

    with pytest.raises(tc.NameConflictError, match=rf"{old}.*taken by .*Taken"):

        @tc.pytree_dataclass(name=new, aliases=(old,))
        class Clash:
            x: Any

    with pytest.raises(tc.NameConflictError, match=new):

        @tc.pytree_dataclass(name=new + "2", aliases=(new + "3",))
        class First:
            x: Any

        @tc.pytree_dataclass(name=new + "3")
        class Second:
            x: Any


@phase2
def test_a_field_alias_that_collides_with_a_field_is_refused() -> None:
    with pytest.raises(tc.RegistrationError, match="alias 'y' of field 'x'"):

        @tc.pytree_dataclass(name=names()[0])
        class Bad:
            x: Any = tc.field(default=None, aliases=("y",))
            y: Any = None


# --- every loader -----------------------------------------------------------------------------


@phase2
def test_treespec_loads_reads_old_names() -> None:
    new, old = names()
    Output = make_output(new, old)
    spec = tc.tree_structure([Output(1.0, hidden=2.0, mode="train")])
    loaded = tc.treespec_loads(old_text(tc.treespec_dumps(spec), new, old))
    assert loaded == spec
    got = loaded.unflatten([5.0, 6.0])[0]
    assert type(got) is Output and got.hidden == 6.0 and got.mode == "train"
    # Written back under the current names.
    assert tc.treespec_dumps(loaded) == tc.treespec_dumps(spec)


@phase2
def test_tc_load_reads_old_names(tmp_path: Path) -> None:
    np = pytest.importorskip("numpy")
    new, old = names()
    Output = make_output(new, old)
    path = tmp_path / "o.safetensors"
    tc.save(path, {"o": Output(np.ones(2), hidden=np.zeros(1), mode="train")})
    data = path.read_bytes()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8 : 8 + n])
    meta = header["__metadata__"]
    meta["treeclass.treespec"] = old_text(meta["treeclass.treespec"], new, old)
    # Key paths of old files name the old fields too.
    for key in list(header):
        if ".hidden" in key:
            header[key.replace(".hidden", ".hiddn")] = header.pop(key)
    meta["treeclass.file"] = meta["treeclass.file"].replace(".hidden", ".hiddn")
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + data[8 + n :])
    got = tc.load(path)["o"]
    assert type(got) is Output and got.mode == "train" and got.hidden.tolist() == [0.0]


@phase2
def test_jax_export_deserialize_reads_old_names() -> None:
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    new, old = names()
    Output = make_output(new, old)
    f = jax.jit(lambda o: Output(o.logits * 2, hidden=o.hidden, mode=o.mode))
    blob = jax.export.export(f)(Output(jnp.ones(2), hidden=jnp.zeros(1), mode="train")).serialize()
    loaded = jax.export.deserialize(bytearray(old_bytes(bytes(blob), new, old)))
    out = loaded.call(Output(jnp.ones(2), hidden=jnp.zeros(1), mode="train"))
    assert type(out) is Output and out.mode == "train"
    assert out.logits.tolist() == [2.0, 2.0]


@phase2
def test_torch_export_load_reads_old_names(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    new, old = names()
    Output = make_output(new, old)

    class M(torch.nn.Module):
        def forward(self, o: Any) -> Any:
            return Output(o.logits + 1, hidden=o.hidden, mode=o.mode)

    example = Output(torch.ones(2), hidden=torch.zeros(1), mode="train")
    ep = torch.export.export(M(), (example,))
    torch.export.save(ep, tmp_path / "m.pt2")
    with (
        zipfile.ZipFile(tmp_path / "m.pt2") as src,
        zipfile.ZipFile(tmp_path / "old.pt2", "w") as dst,
    ):
        for info in src.infolist():
            data = src.read(info)
            if info.filename.endswith(".json"):
                data = old_text(data.decode(), new, old).encode()
            dst.writestr(info, data)
    loaded = torch.export.load(tmp_path / "old.pt2")
    out = loaded.module()(example)
    assert type(out) is Output and out.mode == "train"
    assert out.logits.tolist() == [2.0, 2.0]


# --- removed fields and migrations ------------------------------------------------------------


def test_a_removed_field_is_an_error_naming_it_today() -> None:
    """Already true before phase 2 (docs/format.md, "Evolution"); kept here with the rest."""
    name = names()[0]

    @tc.pytree_dataclass(name=name)
    class Cfg:
        x: Any
        dropout: float = tc.field(static=True, default=0.1)

    text = tc.treespec_dumps(tc.tree_structure(Cfg(1.0)))
    text = text.replace('"dropout":0.1', '"dropout":0.1,"gone":3')
    with pytest.raises(tc.TreespecLoadError, match="gone"):
        tc.treespec_loads(text)


@phase2
def test_removed_fields_are_dropped_when_the_class_says_so() -> None:
    new, old = names()

    @tc.pytree_dataclass(name=new, removed_fields=("dropout", "cache"))
    class Cfg:
        x: Any
        width: int = tc.field(static=True, default=4)

    text = tc.treespec_dumps(tc.tree_structure(Cfg(1.0, width=8)))
    old = text.replace('"width":8', '"dropout":0.5,"width":8')  # a removed static field
    got = tc.treespec_loads(old).unflatten([3.0])
    assert got == Cfg(3.0, width=8)
    # A removed data field: its child is dropped with it.
    old_data = text.replace('"data":["x"]', '"data":["cache","x"]').replace(
        f'"{new}",', f'"{new}",'
    )
    doc = json.loads(old_data)
    doc["nodes"][0][2] = 2
    doc["nodes"].insert(1, None)
    doc["leaves"] = 2
    assert tc.treespec_loads(json.dumps(doc)).unflatten([9.0, 3.0]) == Cfg(3.0, width=8)


@phase2
def test_migration_hook_worked_example() -> None:
    """The example of docs/format.md: ``lr_percent`` (a percentage) became ``lr``."""
    name = names()[0]

    def migrate(state: dict[str, Any]) -> dict[str, Any]:
        static = dict(state["static"])
        if "lr_percent" in static:
            static["lr"] = static.pop("lr_percent") / 100
        return {**state, "static": static}

    @tc.pytree_dataclass(name=name, migrate=migrate)
    class Optim:
        params: Any
        lr: float = tc.field(static=True, default=1e-3)

    text = tc.treespec_dumps(tc.tree_structure(Optim(1.0, lr=0.02)))
    old = text.replace('"lr":0.02', '"lr_percent":2.0')
    got = tc.treespec_loads(old).unflatten([1.0])
    assert got == Optim(1.0, lr=0.02)
    assert tc.treespec_loads(text).unflatten([1.0]) == Optim(1.0, lr=0.02)  # new text too


@phase2
def test_a_failing_migration_is_a_load_error_naming_the_class() -> None:
    name = names()[0]

    def migrate(state: dict[str, Any]) -> dict[str, Any]:
        raise KeyError("nope")

    @tc.pytree_dataclass(name=name, migrate=migrate)
    class Broken:
        x: Any

    text = tc.treespec_dumps(tc.tree_structure(Broken(1.0)))
    with pytest.raises(tc.TreespecLoadError, match=rf"migrate.*{name}"):
        tc.treespec_loads(text)
