"""Schema evolution beyond added fields (issue 12, phase 2).

The API under test is the issue's:

- renamed fields: ``tc.field(..., aliases=("old_name",))``;
- renamed classes: ``aliases=("pkg.Old",)`` on ``pytree_dataclass``, ``register_dataclass``
  and ``register_namedtuple``; an alias that collides with another class's name (or alias)
  is refused at registration, as names are;
- both apply to every loader: ``treespec_loads``, ``tc.load``, ``jax.export`` deserialization
  and ``torch.export`` load.

Two parts of the issue name no keyword; these are the keywords:

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


def rewrite_header(path: Path, new: str, old: str) -> None:
    """Make a tc.save file look written by the class under its old names (as the issue's
    test does): old class and field names in the structure and in the stored key paths."""
    data = path.read_bytes()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8 : 8 + n])
    meta = header["__metadata__"]
    meta["treeclass.treespec"] = old_text(meta["treeclass.treespec"], new, old)
    for key in list(header):
        if ".hidden" in key:
            header[key.replace(".hidden", ".hiddn")] = header.pop(key)
    meta["treeclass.file"] = meta["treeclass.file"].replace(".hidden", ".hiddn")
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + data[8 + n :])


def export_model(torch: Any, Output: type) -> tuple[Any, Any]:
    """``torch.export`` of a module returning an ``Output`` (from :func:`make_output`)."""

    class M(torch.nn.Module):
        def forward(self, o: Any) -> Any:
            return Output(o.logits + 1, hidden=o.hidden, mode=o.mode)

    example = Output(torch.ones(2), hidden=torch.zeros(1), mode="train")
    return torch.export.export(M(), (example,)), example


def rewrite_archive(src_path: Path, dst_path: Path, rewrite: Any) -> None:
    """Copy a ``.pt2`` archive, passing the text of every JSON member through ``rewrite``."""
    with zipfile.ZipFile(src_path) as src, zipfile.ZipFile(dst_path, "w") as dst:
        for info in src.infolist():
            data = src.read(info)
            if info.filename.endswith(".json"):
                data = rewrite(data.decode()).encode()
            dst.writestr(info, data)


# --- registration -----------------------------------------------------------------------------


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


def test_a_field_alias_that_collides_with_a_field_is_refused() -> None:
    with pytest.raises(tc.RegistrationError, match="alias 'y' of field 'x'"):

        @tc.pytree_dataclass(name=names()[0])
        class Bad:
            x: Any = tc.field(default=None, aliases=("y",))
            y: Any = None


# --- every loader -----------------------------------------------------------------------------


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


def test_tc_load_reads_old_names(tmp_path: Path) -> None:
    np = pytest.importorskip("numpy")
    new, old = names()
    Output = make_output(new, old)
    path = tmp_path / "o.safetensors"
    tc.save(path, {"o": Output(np.ones(2), hidden=np.zeros(1), mode="train")})
    rewrite_header(path, new, old)  # key paths of old files name the old fields too
    got = tc.load(path)["o"]
    assert type(got) is Output and got.mode == "train" and got.hidden.tolist() == [0.0]


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


def test_torch_export_load_reads_old_names(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    new, old = names()
    Output = make_output(new, old)
    ep, example = export_model(torch, Output)
    torch.export.save(ep, tmp_path / "m.pt2")
    rewrite_archive(tmp_path / "m.pt2", tmp_path / "old.pt2", lambda t: old_text(t, new, old))
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


# --- beyond the examples: every registration form -------------------------------------


def test_field_aliases_from_dataclasses_and_attrs_metadata() -> None:
    """``register_dataclass`` classes give aliases in their fields' metadata."""
    import dataclasses

    attrs = pytest.importorskip("attrs")
    new, _ = names()

    @dataclasses.dataclass
    class D:
        x: Any
        y: Any = dataclasses.field(default=None, metadata={"treeclass.aliases": ("why",)})
        s: str = dataclasses.field(
            default="a", metadata={"static": True, "treeclass.aliases": ["ess"]}
        )

    @attrs.define
    class A:
        x: Any
        y: Any = attrs.field(default=None, metadata={"treeclass.aliases": ("why",)})

    tc.register_dataclass(D, name=new + "D")
    tc.register_dataclass(A, name=new + "A")
    d_text = tc.treespec_dumps(tc.tree_structure(D(1, 2, "b")))
    d_old = d_text.replace('"y"', '"why"').replace('"s"', '"ess"')
    assert tc.treespec_loads(d_old).unflatten([3, 4]) == D(3, 4, "b")
    a_text = tc.treespec_dumps(tc.tree_structure(A(1, 2)))
    assert tc.treespec_loads(a_text.replace('"y"', '"why"')).unflatten([3, 4]) == A(3, 4)


def test_pytree_node_takes_the_evolution_keywords() -> None:
    new, old = names()

    def migrate(state: dict[str, Any]) -> dict[str, Any]:
        return {**state, "static": {k: v for k, v in state["static"].items() if k != "junk"}}

    class Cfg(tc.PytreeNode, name=new, aliases=(old,), removed_fields=("gone",), migrate=migrate):
        w: Any
        width: int = tc.field(static=True, default=1, aliases=("wdth",))

    assert tc.class_for_name(old) is Cfg
    text = tc.treespec_dumps(tc.tree_structure(Cfg(1.0, 3)))
    assert new in text and old not in text
    edited = text.replace(new, old).replace('"width":3', '"gone":1,"junk":2,"wdth":3')
    assert tc.treespec_loads(edited).unflatten([2.0]) == Cfg(2.0, 3)


def test_namedtuple_aliases_load_in_the_embedded_registry() -> None:
    new, old = names()

    class Pair(typing.NamedTuple):
        a: Any
        b: Any

    tc.register_namedtuple(Pair, name=new, aliases=[old])
    text = tc.treespec_dumps(tc.tree_structure(Pair(1, 2)))
    assert tc.treespec_loads(text.replace(new, old)).unflatten([3, 4]) == Pair(3, 4)
    # The decorator form takes them too.
    new2, old2 = names()

    @tc.register_namedtuple(name=new2, aliases=(old2,))
    class Triple(typing.NamedTuple):
        a: Any
        b: Any
        c: Any

    assert tc.class_for_name(old2) is Triple


@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        ({"aliases": "pkg.Old"}, tc.RegistrationTypeError, r"write aliases=\('pkg.Old',\)"),
        ({"aliases": ("dict",)}, tc.RegistrationError, r"'dict'.*reserved for a built-in"),
        ({"aliases": ("has space",)}, tc.RegistrationError, "not a usable serialized name"),
        ({"aliases": (1,)}, tc.RegistrationError, "aliases=.*must be a str"),
        ({"removed_fields": "gone"}, tc.RegistrationTypeError, r"write removed_fields=\('gone',\)"),
        ({"removed_fields": ("x",)}, tc.RegistrationError, r"names 'x', which is a field"),
        ({"removed_fields": ("old_x",)}, tc.RegistrationError, r"'old_x'.*alias of field 'x'"),
        ({"removed_fields": ("not a name",)}, tc.RegistrationError, "Python identifiers"),
        ({"migrate": 3}, tc.RegistrationTypeError, "migrate= of .* must be a function"),
    ],
)
def test_bad_evolution_options_are_clear_errors(
    options: dict[str, Any], error: type[Exception], match: str
) -> None:
    name = names()[0]
    with pytest.raises(error, match=match):

        @tc.pytree_dataclass(name=name, **options)
        class Bad:
            x: Any = tc.field(default=None, aliases=("old_x",))

    assert tc.class_for_name(name) is None  # nothing was registered


def test_bad_aliases_are_clear_errors() -> None:
    new, old = names()
    with pytest.raises(tc.RegistrationError, match=r"aliases= .* needs a name="):

        @tc.pytree_dataclass(aliases=(old,))
        class NoName:
            x: Any

    with pytest.raises(tc.RegistrationError, match=r"other than its name="):

        @tc.pytree_dataclass(name=new, aliases=(new,))
        class Self:
            x: Any

    with pytest.raises(
        tc.RegistrationError, match=r"alias 'b' of field 'c' .* also an alias of field 'a'"
    ):

        @tc.pytree_dataclass(name=new)
        class Twice:
            a: Any = tc.field(default=None, aliases=("b",))
            c: Any = tc.field(default=None, aliases=("b",))

    with pytest.raises(tc.RegistrationTypeError, match=r"write aliases=\('old',\)"):
        tc.field(default=None, aliases="old")
    with pytest.raises(tc.RegistrationError, match="Python identifiers"):
        tc.field(default=None, aliases=("a.b",))
    with pytest.raises(tc.RegistrationError, match="names a field twice"):
        tc.field(default=None, aliases=("a", "a"))
    assert tc.class_for_name(new) is None and tc.class_for_name(old) is None


def test_registering_again_with_other_aliases_is_refused() -> None:
    new, old = names()
    Output = make_output(new, old)
    assert tc.register_dataclass(Output, name=new, aliases=(old,)) is Output  # the same: no-op
    with pytest.raises(tc.NameConflictError, match="already registered"):
        tc.register_dataclass(Output, name=new, aliases=(old, old + "2"))
    assert tc.class_for_name(old + "2") is None


_CELL = """
import typing
import treeclass as tc

@tc.pytree_dataclass(name=NAME, aliases=ALIASES)
class Cell:
    x: typing.Any
"""


def test_a_rerun_class_statement_takes_its_aliases_over() -> None:
    from _cells import run_cell

    new, old = names()
    module = f"evo_cell_{uuid.uuid4().hex[:8]}"
    first = run_cell(_CELL, module, NAME=new, ALIASES=(old, old + "2"))["Cell"]
    second = run_cell(_CELL, module, NAME=new, ALIASES=(old,))["Cell"]
    assert first is not second
    assert tc.class_for_name(new) is second and tc.class_for_name(old) is second
    # The alias the re-run no longer declares loads as nothing (the old class is superseded).
    assert tc.class_for_name(old + "2") is None
    text = tc.treespec_dumps(tc.tree_structure(second(1)))
    assert type(tc.treespec_loads(text.replace(new, old)).unflatten([2])) is second
    # Someone else may now have the dropped alias.
    other = tc.pytree_dataclass(name=old + "2")(type("Other", (), {"__annotations__": {"x": Any}}))
    assert tc.class_for_name(old + "2") is other


# --- loaders: more forms ------------------------------------------------------------------------


def test_old_documents_load_into_framework_structures() -> None:
    new, old = names()
    Output = make_output(new, old)
    obj = Output(1.0, hidden=2.0, mode="train")
    text = old_text(tc.treespec_dumps(tc.tree_structure(obj)), new, old)
    for to in ("jax", "torch", "optree"):
        pytest.importorskip(to)
        spec = tc.treespec_loads(text, to=to)
        assert type(spec.unflatten([5.0, 6.0])) is Output
        assert tc.treespec_dumps(spec) == tc.treespec_dumps(tc.tree_structure(obj))


def test_a_none_field_saved_under_its_old_name_loads() -> None:
    """treeclass 0.1 (and torch's form) listed None fields under "none", by name."""
    new, old = names()
    Output = make_output(new, old)
    state = {"data": ["logits"], "none": ["hiddn"], "static": {"mde": "train"}}
    doc = {"format": "treeclass.treespec", "leaves": 1, "nodes": [[old, state, 1], None]}
    doc["version"] = 1
    got = tc.treespec_loads(json.dumps(doc)).unflatten([3.0])
    assert got == Output(3.0, hidden=None, mode="train")


def test_a_state_with_a_field_and_its_alias_is_an_error() -> None:
    new, old = names()
    make_output(new, old)
    state = {"data": ["logits", "hidden"], "none": [], "static": {"mde": "a", "mode": "b"}}
    doc = {"format": "treeclass.treespec", "leaves": 2, "nodes": [[new, state, 2], None, None]}
    doc["version"] = 1
    with pytest.raises(tc.TreespecLoadError, match=r"names both field\(s\) \['mode'\].*\['mde'\]"):
        tc.treespec_loads(json.dumps(doc))


def test_tc_load_selects_by_todays_field_names(tmp_path: Path) -> None:
    np = pytest.importorskip("numpy")
    new, old = names()
    Output = make_output(new, old)
    path = tmp_path / "o.safetensors"
    tc.save(path, {"o": Output(np.ones(2), hidden=np.zeros(1), mode="train")})
    rewrite_header(path, new, old)
    got = tc.load(path, paths=["['o'].hidden"])["o"]
    assert got.logits is None and got.hidden.tolist() == [0.0] and got.mode == "train"
    seen: list[str] = []
    tc.load(path, paths=lambda p: seen.append(p) or True)
    assert seen == ["['o'].logits", "['o'].hidden"]
    with pytest.raises(
        tc.FileLoadError, match=r'key paths look like "\[\'o\'\].logits", "\[\'o\'\].hidden"'
    ):
        tc.load(path, paths=["['o'].hiddn"])


def _escaped_old_text(text: str, new: str, old: str) -> str:
    """:func:`old_text` for text holding JSON inside JSON strings (torch's contexts), where the
    field names' quotes are escaped once or more."""
    import re

    text = text.replace(new, old)
    text = re.sub(r'(\\*")hidden(\\*")', r"\1hiddn\2", text)
    return re.sub(r'(\\*")mode(\\*")', r"\1mde\2", text)


def test_torch_treespec_loads_reads_old_names() -> None:
    torch = pytest.importorskip("torch")
    pt = pytest.importorskip("torch.utils._pytree")
    new, old = names()
    Output = make_output(new, old)
    live = pt.tree_structure(Output(torch.ones(1), hidden=torch.zeros(1), mode="train"))
    text = _escaped_old_text(pt.treespec_dumps(live), new, old)
    assert "hiddn" in text and new not in text
    assert pt.treespec_loads(text) == live
    assert pt.treespec_dumps(pt.treespec_loads(text)) == pt.treespec_dumps(live)
    # A None field, which torch keeps out of the children, listed by its old name.
    live_none = pt.tree_structure(Output(torch.ones(1), mode="train"))
    text_none = _escaped_old_text(pt.treespec_dumps(live_none), new, old)
    assert '\\"none\\":[\\"hiddn\\"]' in text_none
    assert pt.treespec_loads(text_none) == live_none


def test_torch_export_load_reads_old_names_without_example_inputs(tmp_path: Path) -> None:
    """As the issue's test, with ``example_inputs`` not saved (which pickles them by module
    path, and a local class cannot be), and the field names renamed inside torch's escaped
    contexts too."""
    torch = pytest.importorskip("torch")
    new, old = names()
    Output = make_output(new, old)
    ep, example = export_model(torch, Output)
    ep.example_inputs = None
    torch.export.save(ep, tmp_path / "m.pt2")
    texts: list[str] = []

    def rewrite(text: str) -> str:
        texts.append(_escaped_old_text(text, new, old))
        return texts[-1]

    rewrite_archive(tmp_path / "m.pt2", tmp_path / "old.pt2", rewrite)
    assert any("hiddn" in t and "mde" in t for t in texts)
    loaded = torch.export.load(tmp_path / "old.pt2")
    out = loaded.module()(example)
    assert type(out) is Output and out.mode == "train"
    assert out.logits.tolist() == [2.0, 2.0]


def test_namedtuple_aliases_through_jax_export_and_torch() -> None:
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    pt = pytest.importorskip("torch.utils._pytree")
    new, old = names()

    class Pair(typing.NamedTuple):
        a: Any
        b: Any

    tc.register_namedtuple(Pair, name=new, aliases=(old,))
    blob = jax.export.export(jax.jit(lambda p: Pair(p.b, p.a)))(Pair(jnp.ones(1), jnp.zeros(1)))
    loaded = jax.export.deserialize(
        bytearray(bytes(blob.serialize()).replace(new.encode(), old.encode()))
    )
    assert type(loaded.call(Pair(jnp.ones(1), jnp.zeros(1)))) is Pair
    text = pt.treespec_dumps(pt.tree_structure(Pair(1, 2)))
    assert pt.treespec_loads(text.replace(new, old)) == pt.tree_structure(Pair(1, 2))


# --- removed fields: every loader ----------------------------------------------------------------


def _with_removed_child(text: str, name: str) -> str:
    """The document of a ``Cfg`` (below) as written when it still had a data field "cache"
    (holding one leaf), before "x"."""
    doc = json.loads(text)
    assert doc["nodes"][0][0] == name
    doc["nodes"][0][1]["data"].insert(0, "cache")
    doc["nodes"][0][2] += 1
    doc["nodes"].insert(1, None)
    doc["leaves"] += 1
    return json.dumps(doc)


def make_cfg(name: str) -> type:
    @tc.pytree_dataclass(name=name, removed_fields=("cache", "dropout"))
    class Cfg:
        x: Any
        y: Any = None
        width: int = tc.field(static=True, default=4)

    return Cfg


def test_a_spec_with_a_removed_child_round_trips() -> None:
    import pickle

    name = names()[0]
    Cfg = make_cfg(name)
    text = _with_removed_child(tc.treespec_dumps(tc.tree_structure(Cfg(1.0, 2.0, width=8))), name)
    spec = tc.treespec_loads(text)
    assert spec.num_leaves == 3
    assert spec.unflatten(["gone", 1.0, 2.0]) == Cfg(1.0, 2.0, width=8)
    assert "removed: cache=*" in repr(spec)
    # Written back as read (so it loads the same again), equal to itself, hashable, pickles.
    assert tc.treespec_loads(tc.treespec_dumps(spec)) == spec
    assert hash(tc.treespec_loads(text)) == hash(spec)
    assert pickle.loads(pickle.dumps(spec)) == spec
    # Not the structure of a live object (which has no "cache" child).
    assert spec != tc.tree_structure(Cfg(1.0, 2.0, width=8))
    with pytest.raises(tc.StructureMismatchError):
        spec.flatten_up_to(Cfg(1.0, 2.0, width=8))


def test_a_removed_child_before_a_new_none_field() -> None:
    """A document from before "y" existed (a None child then) and while "cache" did."""
    name = names()[0]
    Cfg = make_cfg(name)
    state = {"data": ["cache", "x"], "none": [], "static": {"dropout": 0.5, "width": 2}}
    doc = {"format": "treeclass.treespec", "leaves": 2, "nodes": [[name, state, 2], None, None]}
    doc["version"] = 1
    spec = tc.treespec_loads(json.dumps(doc))
    assert spec.unflatten([0, 7]) == Cfg(7, None, width=2)
    assert tc.treespec_loads(tc.treespec_dumps(spec)) == spec


def test_removed_children_in_framework_structures_are_clear_errors() -> None:
    name = names()[0]
    Cfg = make_cfg(name)
    text = _with_removed_child(tc.treespec_dumps(tc.tree_structure(Cfg(1.0, 2.0))), name)
    for to in ("jax", "torch", "optree"):
        pytest.importorskip(to)
        with pytest.raises(
            tc.TreespecLoadError, match=r"removed field\(s\) \['cache'\] .* to=None"
        ):
            tc.treespec_loads(text, to=to)


def test_removed_fields_through_jax_export() -> None:
    """Blobs exported when the class still had a static "dropout" and a data field "cache"."""
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    new, old = names()  # ``old`` names the classes as they were

    @tc.pytree_dataclass(name=old)
    class Before:
        x: Any
        y: Any = None
        width: int = tc.field(static=True, default=4)
        dropout: float = tc.field(static=True, default=0.5)

    @tc.pytree_dataclass(name=old + "C")
    class BeforeWithCache:
        cache: Any
        x: Any
        y: Any = None
        width: int = tc.field(static=True, default=4)

    Cfg = make_cfg(new)
    blob = jax.export.export(jax.jit(lambda c: c))(Before(jnp.ones(1), jnp.ones(1), width=3))
    data = bytes(blob.serialize()).replace(old.encode(), new.encode())  # as if saved by Cfg's
    out = jax.export.deserialize(bytearray(data)).call(Cfg(jnp.ones(1), jnp.ones(1), width=3))
    assert type(out) is Cfg and out.width == 3

    blob = jax.export.export(jax.jit(lambda c: c))(BeforeWithCache(jnp.zeros(1), jnp.ones(1)))
    data = bytes(blob.serialize()).replace((old + "C").encode(), (new + "C").encode())
    make_cfg(new + "C")
    with pytest.raises(
        tc.TreespecLoadError,
        match=r"the serialized function holds .*Cfg with the removed field\(s\) \['cache'\] as "
        r"children: .* \(and a compiled program a fixed set of inputs\)",
    ):
        jax.export.deserialize(bytearray(data))


def test_removed_fields_through_torch() -> None:
    torch = pytest.importorskip("torch")
    pt = pytest.importorskip("torch.utils._pytree")
    name = names()[0]
    Cfg = make_cfg(name)
    live = pt.tree_structure(Cfg(torch.ones(1), torch.ones(1), width=3))
    text = pt.treespec_dumps(live)
    assert '\\"width\\":3' in text
    edited = text.replace('\\"width\\":3', '\\"dropout\\":0.5,\\"width\\":3')
    assert pt.treespec_loads(edited) == live
    child = text.replace('[\\"x\\",\\"y\\"]', '[\\"cache\\",\\"x\\",\\"y\\"]')
    assert child != text
    with pytest.raises(tc.TreespecLoadError, match=r"removed field\(s\) \['cache'\] .* torch"):
        pt.treespec_loads(child)


def test_tc_load_drops_a_removed_fields_leaf(tmp_path: Path) -> None:
    """A file written when the class still had "cache": its tensor is read past and dropped."""
    np = pytest.importorskip("numpy")
    new, old = names()  # ``old`` names the class as it was: with "cache"

    @tc.pytree_dataclass(name=old)
    class Before:
        cache: Any
        x: Any
        y: Any = None
        width: int = tc.field(static=True, default=4)

    Cfg = make_cfg(new)
    path = tmp_path / "c.safetensors"
    tc.save(path, Before(np.zeros(3), np.ones(2), width=5))
    data = path.read_bytes()
    path.write_bytes(data.replace(old.encode(), new.encode()))  # as if written by Cfg's class
    got = tc.load(path)
    assert type(got) is Cfg and got.x.tolist() == [1.0, 1.0] and got.y is None and got.width == 5
    part = tc.load(path, paths=[".x"])
    assert part.x.tolist() == [1.0, 1.0]


# --- a new data field with a default other than None ---------------------------------------------


def _without_extra(name: str) -> str:
    """A treespec written before the class gained its data fields "extra" and "more"."""
    state = {"data": ["x"], "none": [], "static": {"s": "b"}}
    doc = {"format": "treeclass.treespec", "leaves": 1, "nodes": [[name, state, 1], None]}
    return json.dumps({**doc, "version": 1})


def make_gained(name: str, **options: Any) -> type:
    @tc.pytree_dataclass(name=name, **options)
    class Gained:
        x: Any
        s: str = tc.field(static=True, default="a")
        extra: Any = 2.0
        more: Any = tc.field(default_factory=lambda: [3.0])
        y: Any = None

    return Gained


def make_before(name: str) -> type:
    """The class as it was before it gained "extra" and "more"."""

    @tc.pytree_dataclass(name=name)
    class Before:
        x: Any
        s: str = tc.field(static=True, default="a")

    return Before


def test_a_loaded_spec_gives_a_new_data_field_its_default() -> None:
    import pickle

    name = names()[0]
    Gained = make_gained(name)
    text = _without_extra(name)
    spec = tc.treespec_loads(text)
    assert spec.num_leaves == 1  # the document's leaves: the defaults have no place among them
    first, second = spec.unflatten([1.0]), spec.unflatten([7.0])
    assert first == Gained(1.0, "b", 2.0, [3.0], None) and second.x == 7.0
    assert first.more is not second.more  # the default factory runs for every object
    assert repr(spec) == "TreeSpec(Gained(x=*, s='b', extra=<default>, more=<default>, y=None))"
    # Written back as read (so it loads the same again), equal to itself, hashable, pickles.
    assert tc.treespec_loads(tc.treespec_dumps(spec)) == spec
    assert hash(tc.treespec_loads(text)) == hash(spec)
    assert pickle.loads(pickle.dumps(spec)) == spec
    # Not the structure of a live object, which has the fields as children.
    assert spec != tc.tree_structure(first)


def test_a_new_data_field_with_its_default_and_a_removed_child() -> None:
    name = names()[0]
    Gained = make_gained(name, removed_fields=("cache",))
    state = {"data": ["cache", "x"], "none": [], "static": {"s": "b"}}
    doc = {"format": "treeclass.treespec", "leaves": 2, "nodes": [[name, state, 2], None, None]}
    spec = tc.treespec_loads(json.dumps({**doc, "version": 1}))
    assert spec.unflatten(["gone", 4.0]) == Gained(4.0, "b")
    assert "removed: cache=*" in repr(spec) and "extra=<default>" in repr(spec)
    assert tc.treespec_loads(tc.treespec_dumps(spec)) == spec


def test_a_new_data_field_with_its_default_through_tc_load(tmp_path: Path) -> None:
    np = pytest.importorskip("numpy")
    new, old = names()

    Before = make_before(old)

    Gained = make_gained(new)
    path = tmp_path / "g.safetensors"
    tc.save(path, Before(np.ones(2), "b"))
    path.write_bytes(path.read_bytes().replace(old.encode(), new.encode()))  # as if Gained's
    got = tc.load(path)
    assert type(got) is Gained and got.x.tolist() == [1.0, 1.0]
    assert (got.s, got.extra, got.more, got.y) == ("b", 2.0, [3.0], None)
    assert tc.load(path, paths=[".x"]).extra == 2.0


def test_a_new_data_field_with_another_default_in_framework_structures() -> None:
    name = names()[0]
    make_gained(name)
    for to in ("jax", "torch", "optree"):
        pytest.importorskip(to)
        with pytest.raises(
            tc.TreespecLoadError,
            match=r"Gained without its data field\(s\) \['extra', 'more'\], added to the class "
            r"since with a default other than None: a JAX, torch or optree structure",
        ):
            tc.treespec_loads(_without_extra(name), to=to)


def test_a_new_data_field_whose_default_has_no_leaves_loads_into_jax() -> None:
    """The loaded spec unflattens to today's object; if its default has no leaves, JAX can
    describe that object with the document's leaves."""
    jax = pytest.importorskip("jax")
    name = names()[0]

    @tc.pytree_dataclass(name=name)
    class Gained:
        x: Any
        s: str = tc.field(static=True, default="a")
        extra: Any = ()

    treedef = tc.treespec_loads(_without_extra(name), to="jax")
    assert treedef == jax.tree_util.tree_structure(Gained(1.0, "b"))


def test_a_new_data_field_with_another_default_through_jax_export() -> None:
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    new, old = names()

    Before = make_before(old)

    make_gained(new)
    blob = jax.export.export(jax.jit(lambda b: b.x))(Before(jnp.ones(1), "b")).serialize()
    data = bytes(blob).replace(old.encode(), new.encode())  # as if exported with Gained's name
    with pytest.raises(
        tc.TreespecLoadError,
        match=r"the serialized function holds .*Gained without its data field\(s\) "
        r"\['extra', 'more'\].*treeclass.treespec_loads \(with to=None\), treeclass.load and "
        r"treeclass.orbax.restore give the field its default",
    ):
        jax.export.deserialize(bytearray(data))


def test_a_new_data_field_with_another_default_in_torch_structures() -> None:
    torch = pytest.importorskip("torch")
    pt = pytest.importorskip("torch.utils._pytree")
    new, old = names()

    Before = make_before(old)

    make_gained(new)
    text = pt.treespec_dumps(pt.tree_structure(Before(torch.ones(1), "b"))).replace(old, new)
    with pytest.raises(
        tc.TreespecLoadError,
        match=r"a torch structure holds .*Gained without its data field\(s\) "
        r"\['extra', 'more'\].*one child per data field",
    ):
        pt.treespec_loads(text)


# --- migration hooks: every loader ----------------------------------------------------------------


def _percent_migration(state: dict[str, Any]) -> dict[str, Any]:
    static = dict(state["static"])
    if "lp" in static:
        static["lr"] = static.pop("lp") / 100
    return {**state, "static": static}


def test_migration_hook_through_jax_export() -> None:
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    name = names()[0]

    @tc.pytree_dataclass(name=name, migrate=_percent_migration)
    class Optim:
        params: Any
        lr: float = tc.field(static=True, default=0.25)

    blob = bytes(jax.export.export(jax.jit(lambda o: o))(Optim(jnp.ones(1), 0.25)).serialize())
    assert b'"lr":0.25' in blob
    old = blob.replace(b'"lr":0.25', b'"lp":25.0')  # as saved before: a percentage (same length)
    loaded = jax.export.deserialize(bytearray(old))
    out = loaded.call(Optim(jnp.ones(1), 0.25))
    assert type(out) is Optim and out.lr == 0.25


def test_migration_hook_through_torch_and_its_errors() -> None:
    torch = pytest.importorskip("torch")
    pt = pytest.importorskip("torch.utils._pytree")
    name = names()[0]
    calls: list[Any] = []

    def migrate(state: dict[str, Any]) -> dict[str, Any]:
        calls.append(state)
        if state["static"].get("lp") == -1:
            raise ValueError("negative percentage")
        if state["static"].get("lp") == -2:
            return "not a state"  # type: ignore[return-value]
        return _percent_migration(state)

    @tc.pytree_dataclass(name=name, migrate=migrate)
    class Optim:
        params: Any
        lr: float = tc.field(static=True, default=0.25)

    live = pt.tree_structure(Optim(torch.ones(1), 0.25))
    text = pt.treespec_dumps(live)
    assert pt.treespec_loads(text.replace('\\"lr\\":0.25', '\\"lp\\":25.0')) == live
    assert calls
    with pytest.raises(
        tc.TreespecLoadError, match=rf"migrate hook of .*{name}.*ValueError: negative"
    ):
        pt.treespec_loads(text.replace('\\"lr\\":0.25', '\\"lp\\":-1'))
    with pytest.raises(tc.TreespecLoadError, match=r"must be an object with keys"):
        pt.treespec_loads(text.replace('\\"lr\\":0.25', '\\"lp\\":-2'))
    # The same in treespec_loads; the cause is chained for the traceback.
    doc = tc.treespec_dumps(tc.tree_structure(Optim(1.0, 0.25))).replace('"lr":0.25', '"lp":-1')
    with pytest.raises(tc.TreespecLoadError, match=r"migrate hook") as e:
        tc.treespec_loads(doc)
    assert isinstance(e.value.__cause__, ValueError)


# --- the command line -----------------------------------------------------------------------------


def test_check_lists_aliases_and_inspect_says_a_name_is_an_alias(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from treeclass._io.cli import main

    new, old = names()
    module = f"evo_models_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{module}.py").write_text(
        "import typing\nimport treeclass as tc\n\n"
        f"@tc.pytree_dataclass(name={new!r}, aliases=({old!r},))\n"
        "class Model:\n    x: typing.Any\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    # (The exit status also reflects classes other tests registered in this process.)
    main(["check", module])
    out = capsys.readouterr().out
    assert f"{new}  {module}.Model (dataclass)" in out
    assert f"aliases: {old}" in out
    main(["check", module, "--json"])
    rows = {r["class"]: r for r in json.loads(capsys.readouterr().out)["classes"]}
    assert rows[f"{module}.Model"]["aliases"] == [old]

    Model = tc.class_for_name(new)
    assert Model is not None
    doc = tmp_path / "old.json"
    doc.write_text(tc.treespec_dumps(tc.tree_structure(Model(1))).replace(new, old))
    assert main(["inspect", str(doc)]) == 0
    out = capsys.readouterr().out
    assert f"{old}  registered ({module}.Model, as an alias of {new!r})" in out
    assert main(["inspect", str(doc), "--json"]) == 0
    (entry,) = json.loads(capsys.readouterr().out)["names"]
    assert entry["registered"] and entry["alias_of"] == new


def test_aliases_registered_before_the_frameworks_are_imported(tmp_path: Path) -> None:
    """A fresh process: classes with aliases first, then jax and torch, in a module of another
    name than the one the documents were written from."""
    pytest.importorskip("jax")
    pytest.importorskip("torch")
    from _subproc import report_in

    models = """
        import typing
        import treeclass as tc

        @tc.pytree_dataclass(name='evo.fresh.New', aliases=('evo.fresh.Old',))
        class Output:
            logits: typing.Any
            hidden: typing.Any = tc.field(default=None, aliases=('hiddn',))
    """
    report = report_in(
        tmp_path,
        """
        import json
        import renamed_models
        import jax
        import torch.utils._pytree as pt
        import treeclass as tc

        old = ('{"format":"treeclass.treespec","leaves":2,"nodes":[["evo.fresh.Old",'
               '{"data":["logits","hiddn"],"none":[],"static":{}},2],null,null],"version":1}')
        Output = renamed_models.Output
        live = tc.tree_structure(Output(1, 2))
        torch_live = pt.tree_structure(Output(1, 2))
        torch_old = pt.treespec_dumps(torch_live).replace("evo.fresh.New", "evo.fresh.Old")
        # A jax.export file written when the class had the old name (the names are the
        # same length, so the serialized bytes stay well formed).
        exported = jax.export.export(jax.jit(lambda o: o))(Output(1.0, 2.0))
        jax_old = exported.serialize().replace(b"evo.fresh.New", b"evo.fresh.Old")
        assert jax_old != exported.serialize()
        print(json.dumps({
            "loads": tc.treespec_loads(old) == live,
            "jax": jax.export.deserialize(jax_old).in_tree == exported.in_tree,
            "to_jax": tc.treespec_loads(old, to="jax") == jax.tree_util.tree_structure(
                Output(1, 2)),
            "torch": pt.treespec_loads(torch_old) == torch_live,
        }))
        """,
        modules={"renamed_models": models},
    )
    assert report == {"loads": True, "jax": True, "to_jax": True, "torch": True}


def test_treeclass_orbax_restores_old_names_and_drops_removed_fields(tmp_path: Path) -> None:
    pytest.importorskip("orbax.checkpoint")
    np = pytest.importorskip("numpy")
    import treeclass.orbax as tco

    new, old = names()

    @tc.pytree_dataclass(name=new + ".before")
    class Before:  # the class as it was when the checkpoint was written
        cache: Any
        x: Any
        hiddn: Any = None
        width: int = tc.field(static=True, default=4)

    @tc.pytree_dataclass(name=new, aliases=(old,), removed_fields=("cache",))
    class After:
        x: Any
        hidden: Any = tc.field(default=None, aliases=("hiddn",))
        width: int = tc.field(static=True, default=4)

    ckpt = tmp_path / "ckpt"
    tco.save(ckpt, {"s": Before(np.zeros(3), np.ones(2), np.full(1, 2.0), width=5)})
    document = ckpt / tco.STRUCTURE_ITEM / "metadata"
    # Written under the name the class had then (now an alias of After's).
    document.write_text(document.read_text().replace(new + ".before", old))
    got = tco.restore(ckpt)["s"]
    assert type(got) is After and got.width == 5
    assert got.x.tolist() == [1.0, 1.0] and got.hidden.tolist() == [2.0]


# --- PytreeNode class keywords (issue 17) ------------------------------------------------------


def test_a_subclass_of_a_frozen_pytree_node_says_frozen() -> None:
    class Base(tc.PytreeNode, frozen=True):
        x: float

    # As with dataclasses (and as mypy and pyright read it): frozen is not inherited (issue 29).
    with pytest.raises(
        tc.RegistrationTypeError,
        match=r"Unsaid derives from the frozen dataclass .*Base, so it must be frozen too .*"
        r"write class Unsaid\(Base, frozen=True\)\.",
    ):

        class Unsaid(Base):
            y: float = 0.0

    class Child(Base, frozen=True):
        y: float = 0.0

    child = Child(1.0, 2.0)
    with pytest.raises(AttributeError):
        child.x = 3.0  # type: ignore[misc]
    assert tc.tree_leaves(child) == [1.0, 2.0]

    class Loose(tc.PytreeNode):
        x: float

    class LooseChild(Loose):
        pass

    loose = LooseChild(1.0)
    loose.x = 2.0
    assert loose.x == 2.0


def test_a_misspelled_pytree_node_keyword_is_named() -> None:
    with pytest.raises(
        tc.TreeclassTypeError,
        match=r"Typo got the class keyword\(s\) \['frozne'\], which PytreeNode does not take.*"
        r"the class keywords are \[.*'frozen'.*\]",
    ):

        class Typo(tc.PytreeNode, frozne=True):  # type: ignore[call-arg]
            x: float
