"""The ``treeclass`` command line: ``inspect`` (tc.save files, safetensors, .pt2, jax.export,
treespec documents) and ``check``; nothing from an artifact is ever executed or imported."""

from __future__ import annotations

import io
import json
import os
import pickle
import random
import struct
import sys
import typing
import zipfile
from pathlib import Path
from typing import Any

import pytest
from _mutate import write_case
from _subproc import Outcome, report_in, run_module, write_modules

import treeclass as tc
from treeclass._io.artifacts import read_artifact
from treeclass._io.cli import main

np = pytest.importorskip("numpy")


@tc.pytree_dataclass(name="tests.cli.Batch")
class Batch:
    x: Any
    mask: Any = None
    scale: float = tc.field(static=True, default=2.0)


@tc.pytree_dataclass(name="tests.cli.Out")
class Out:
    y: Any
    extra: Any = None


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


MODELS = """
import typing
import treeclass as tc

@tc.pytree_dataclass(name="tests.cli.fresh.Batch")
class Batch:
    x: typing.Any
    mask: typing.Any = None
    scale: float = tc.field(static=True, default=2.0)
"""


def cli(*args: str, cwd: Path, env: dict[str, str] | None = None) -> Outcome:
    return run_module("treeclass", *args, cwd=cwd, env=env, timeout=300)


# --- inspect: treeclass files and safetensors -------------------------------------------------


def test_inspect_a_treeclass_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "f.safetensors"
    tree = {"b": Batch(np.ones((2, 4), np.float32)), "step": 3, "tags": ["a", np.int8(1)]}
    tc.save(path, tree, metadata={"run": "r1"})
    code, out, err = run(["inspect", str(path)], capsys)
    assert code == 0, err
    assert "treeclass file (safetensors)" in out
    assert "['b']  tests.cli.Batch  scale=2.0" in out
    assert ".mask  None" in out
    assert ".x  float32[2, 4] (numpy)" in out
    assert "['step']  int 3" in out
    assert "[1]  int8[] (numpy-scalar)" in out
    assert "tests.cli.Batch  registered (test_cli.Batch)" in out
    assert "run = r1" in out
    assert "\x1b[" not in out  # not a terminal: no colour


def test_inspect_names_what_is_missing_and_import_fixes_it(tmp_path: Path) -> None:
    script = """
        import json, numpy as np, treeclass as tc
        from fresh_models import Batch
        tc.save("f.safetensors", [Batch(np.zeros(3))])
        print(json.dumps("saved"))
    """
    assert report_in(tmp_path, script, modules={"fresh_models": MODELS}) == "saved"
    missing = cli("inspect", "f.safetensors", cwd=tmp_path)
    assert missing.returncode == 1
    assert "tests.cli.fresh.Batch  MISSING" in missing.stdout
    assert "1 name(s) not registered: tests.cli.fresh.Batch" in missing.stderr
    found = cli("inspect", "f.safetensors", "--import", "fresh_models", cwd=tmp_path)
    assert found.returncode == 0, found.stderr
    assert "tests.cli.fresh.Batch  registered (fresh_models.Batch)" in found.stdout
    broken = cli("inspect", "f.safetensors", "--import", "no_such_module", cwd=tmp_path)
    assert broken.returncode == 2 and "cannot import 'no_such_module'" in broken.stderr


def test_inspect_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "f.safetensors"
    tc.save(path, {"b": Batch(np.ones(2, np.float16))})
    code, out, _ = run(["inspect", str(path), "--json"], capsys)
    assert code == 0
    doc = json.loads(out)
    assert doc["kind"] == "treeclass file (safetensors)" and doc["missing"] == []
    assert doc["names"] == [
        {
            "name": "tests.cli.Batch",
            "kind": "class",
            "registered": True,
            "where": "test_cli.Batch",
            "alias_of": None,
        }
    ]
    leaves = [n for n in doc["trees"][0]["nodes"] if n["leaf"]]
    assert leaves == [
        {"depth": 2, "key": ".x", "leaf": True, "path": "['b'].x", "detail": "float16[2] (numpy)"}
    ]


def test_inspect_several_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tc.save(tmp_path / "a.safetensors", {"b": Batch(np.ones(2, np.float32))})
    doc = tc.treespec_dumps(tc.tree_structure(Batch(1.0)))
    (tmp_path / "gone.json").write_text(doc.replace("tests.cli.Batch", "tests.cli.Gone"))
    paths = [str(tmp_path / "a.safetensors"), str(tmp_path / "gone.json")]
    code, out, err = run(["inspect", *paths, "--json"], capsys)
    assert code == 1
    first, second = json.loads(out)
    assert (first["loads"], first["load_error"], first["loader"]) == (True, None, "treeclass.load")
    assert second["loads"] is False and second["loader"] == "treeclass.treespec_loads"
    assert second["load_error"].startswith(
        "this treespec uses the serialized name 'tests.cli.Gone'"
    )
    assert err.endswith(f"treeclass: does not load: {paths[1]}\n")
    code, out, _ = run(["inspect", paths[0]], capsys)
    assert code == 0 and out.endswith(
        "\nloads (treeclass.load, with the classes registered here)\n"
    )
    (tmp_path / "junk.bin").write_bytes(b"\x07" * 40)
    code, out, err = run(["inspect", paths[0], str(tmp_path / "junk.bin"), "--json"], capsys)
    assert code == 2 and "is not a treeclass file" in err
    assert [d["path"] for d in json.loads(out)] == [paths[0]]  # (the readable one)


def test_inspect_a_plain_safetensors_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    st_numpy = pytest.importorskip("safetensors.numpy")
    st_numpy.save_file(
        {"w": np.zeros((3, 2), np.int32)}, tmp_path / "p.safetensors", {"format": "np"}
    )
    code, out, _ = run(["inspect", str(tmp_path / "p.safetensors")], capsys)
    assert code == 0
    assert "safetensors file (1 tensors, 24 bytes of data)" in out
    assert "['w']  int32[3, 2]" in out and "format = np" in out


def test_inspect_a_treespec_document_with_registered_statics(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    class Mode(typing.NamedTuple):
        n: int

    import enum

    class Kind(enum.Enum):
        A = "a"

    tc.register_static(Kind, name="tests.cli.Kind")

    @tc.pytree_dataclass(name="tests.cli.Tagged")
    class Tagged:
        x: Any
        kind: Kind = tc.field(static=True, default=Kind.A)

    doc = tc.treespec_dumps(tc.tree_structure({"b": Tagged(1.0), 1: (2, 3)}))
    (tmp_path / "doc.json").write_text(doc)
    code, out, _ = run(["inspect", str(tmp_path / "doc.json")], capsys)
    assert code == 0
    assert "treespec document" in out
    assert "['b']  tests.cli.Tagged" in out and "[1]  tuple" in out
    assert "tests.cli.Kind  registered (static type)" in out
    (tmp_path / "doc2.json").write_text(doc.replace("tests.cli.Kind", "tests.cli.Gone"))
    code, out, _ = run(["inspect", str(tmp_path / "doc2.json")], capsys)
    assert code == 1 and "tests.cli.Gone  MISSING (static type" in out


def test_limit_and_deep_trees(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    deep: Any = 1
    for _ in range(3000):
        deep = [deep]
    (tmp_path / "deep.json").write_text(tc.treespec_dumps(tc.tree_structure(deep)))
    code, out, _ = run(["inspect", str(tmp_path / "deep.json"), "--limit", "10"], capsys)
    assert code == 0 and "... 2991 more nodes (--limit 0 shows all)" in out
    code, out, _ = run(["inspect", str(tmp_path / "deep.json"), "--json"], capsys)
    leaf = next(n for n in json.loads(out)["trees"][0]["nodes"] if n["leaf"])
    assert leaf["depth"] == 3000 and leaf["path"] is None  # 9,000 characters: past the cap


# --- inspect: torch.export and jax.export -----------------------------------------------------


def test_inspect_a_pt2_archive(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    torch = pytest.importorskip("torch")

    class M(torch.nn.Module):
        def forward(self, b: Batch) -> Out:
            return Out(b.x * b.scale)

    ep = torch.export.export(M(), (Batch(torch.ones(2, 4, dtype=torch.bfloat16)),))
    torch.export.save(ep, tmp_path / "m.pt2")
    code, out, err = run(["inspect", str(tmp_path / "m.pt2")], capsys)
    assert code == 0, err
    assert "torch.export archive (.pt2) (saved by torch 2.13" in out
    assert "model inputs:" in out and "model outputs:" in out
    # torch's own form: the None field is in the context, not a child
    assert "[0]  tests.cli.Batch  scale=2.0; None: mask" in out
    assert ".x  bfloat16[2, 4]" in out and ".y  bfloat16[2, 4]" in out
    assert "tests.cli.Out  registered (test_cli.Out)" in out


def test_inspect_never_unpickles_a_pt2_archive(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")

    class M(torch.nn.Module):
        def forward(self, b: Batch) -> Out:
            return Out(b.x + 1)

    ep = torch.export.export(M(), (Batch(torch.ones(2)),))
    torch.export.save(ep, tmp_path / "m.pt2")
    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self) -> Any:
            return (os.system, (f"touch {marker}",))

    # Replace every pickle in the archive with one that would run a command when unpickled.
    src = zipfile.ZipFile(tmp_path / "m.pt2")
    with zipfile.ZipFile(tmp_path / "evil.pt2", "w") as dst:
        for info in src.infolist():
            data = src.read(info)
            if info.filename.endswith((".pt", ".pkl")) or "sample_inputs" in info.filename:
                data = pickle.dumps(Evil())
            dst.writestr(info, data)
    proc = cli("inspect", str(tmp_path / "evil.pt2"), cwd=tmp_path)
    assert proc.returncode == 1  # the classes are not registered in that process
    assert "tests.cli.Batch  MISSING" in proc.stdout
    assert not marker.exists()


def test_inspect_a_jax_export_blob_agrees_with_jax(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")

    @tc.register_namedtuple(name="tests.cli.Pair")
    class Pair(typing.NamedTuple):
        a: Any
        b: Any

    f = jax.jit(lambda b, p: (Out(b.x * b.scale, extra=p.a), {"k": p.b}))
    exported = jax.export.export(f)(
        Batch(jnp.ones((2, 3), jnp.bfloat16)), Pair(jnp.zeros(4, jnp.int32), jnp.ones(()))
    )
    blob = exported.serialize()
    (tmp_path / "f.bin").write_bytes(blob)
    art = read_artifact(str(tmp_path / "f.bin"))
    assert art.kind == "jax.export blob"
    assert art.names == {"tests.cli.Batch", "tests.cli.Out", "tests.cli.Pair"}
    back = jax.export.deserialize(blob)
    for tree, avals in zip(art.trees, (back.in_avals, back.out_avals)):
        leaves = [n.detail for n in tree.nodes if n.leaf]
        assert leaves == [f"{a.dtype}[{', '.join(map(str, a.shape))}]" for a in avals]
    code, out, _ = run(["inspect", str(tmp_path / "f.bin")], capsys)
    assert code == 0
    assert "[0]  tests.cli.Batch  scale=2.0" in out
    assert ".mask  None" in out
    assert ".x  bfloat16[2, 3]" in out and "['k']  float32[]" in out


def test_inspect_runs_no_jax_export_callback_another_library_registered(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Only the callbacks of names treeclass registered run: another library's
    ``deserialize_auxdata`` might unpickle what the blob holds."""
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    called: list[bytes] = []

    class Foreign:
        def __init__(self, v: Any) -> None:
            self.v = v

    jax.tree_util.register_pytree_node(Foreign, lambda f: ((f.v,), None), lambda _, c: Foreign(*c))
    jax.export.register_pytree_node_serialization(
        Foreign,
        serialized_name="tests.cli.other.Foreign",
        serialize_auxdata=lambda _: b"\x80pickle",
        deserialize_auxdata=lambda b: called.append(b),
    )
    exp = jax.export.export(jax.jit(lambda f, b: (f.v + 1, b)))(
        Foreign(jnp.ones(2)), Batch(jnp.ones(2))
    )
    (tmp_path / "f.bin").write_bytes(exp.serialize())
    code, out, _ = run(["inspect", str(tmp_path / "f.bin"), "--json"], capsys)
    doc = json.loads(out)
    assert code == 0 and doc["loads"] and called == []
    assert jax.export.deserialize(exp.serialize()) and called == [b"\x80pickle"]  # (jax does)


def test_hostile_jax_blobs_are_errors(tmp_path: Path) -> None:
    (tmp_path / "shared.bin").write_bytes(shared_child_blob())
    with pytest.raises(tc.FileLoadError, match="reached twice"):
        read_artifact(str(tmp_path / "shared.bin"))
    (tmp_path / "junk.bin").write_bytes(b"\x07" * 40)
    with pytest.raises(tc.FileLoadError, match="is not a treeclass file, a safetensors file"):
        read_artifact(str(tmp_path / "junk.bin"))
    (tmp_path / "cut.bin").write_bytes(shared_child_blob()[:50])
    with pytest.raises(tc.FileLoadError, match="table at byte 36 has a malformed vtable"):
        read_artifact(str(tmp_path / "cut.bin"))


def shared_child_blob() -> bytes:
    """An Exported whose in_tree is a tuple listing the same child table twice.

    A chain of such nodes makes a reader that follows every reference do 2**depth work (jax's
    own deserializer would); the bounded reader visits each table once and refuses this.
    """
    buf = bytearray(76)
    struct.pack_into("<I", buf, 0, 8)  # root -> Exported table at 8
    struct.pack_into("<i", buf, 8, 8 - 20)  # its vtable at 20
    struct.pack_into("<I", buf, 12, 36 - 12)  # in_tree -> A at 36
    struct.pack_into("<I", buf, 16, 36 - 16)  # out_tree -> A
    struct.pack_into("<8H", buf, 20, 16, 12, 0, 0, 4, 0, 8, 0)  # in_tree +4, out_tree +8
    struct.pack_into("<i", buf, 36, 36 - 48)  # A's vtable at 48
    buf[40] = 2  # A.kind = tuple
    struct.pack_into("<I", buf, 44, 56 - 44)  # A.children -> vector at 56
    struct.pack_into("<4H", buf, 48, 8, 12, 4, 8)  # kind +4, children +8
    struct.pack_into("<3I", buf, 56, 2, 68 - 60, 68 - 64)  # two children, both B at 68
    struct.pack_into("<i", buf, 68, 68 - 72)  # B's vtable at 72: no fields (a leaf)
    struct.pack_into("<2H", buf, 72, 4, 4)
    return bytes(buf)


# --- nothing is ever imported from an artifact ------------------------------------------------


def test_inspect_never_imports_a_module_a_name_points_to(tmp_path: Path) -> None:
    (tmp_path / "evil_module.py").write_text(f"open({str(tmp_path / 'imported')!r}, 'w').close()\n")
    doc = tc.treespec_dumps(tc.tree_structure(Batch(1.0)))
    (tmp_path / "doc.json").write_text(doc.replace("tests.cli.Batch", "evil_module.Batch"))
    proc = cli("inspect", "doc.json", cwd=tmp_path)
    assert proc.returncode == 1 and "evil_module.Batch  MISSING" in proc.stdout
    assert not (tmp_path / "imported").exists()


# --- terminal behaviour ---------------------------------------------------------------------


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_colour_and_progress_only_on_a_terminal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "doc.json").write_text(tc.treespec_dumps(tc.tree_structure(Batch(1.0))))
    out, err = Tty(), Tty()
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", err)
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    assert main(["inspect", str(tmp_path / "doc.json")]) == 0
    assert "\x1b[32mregistered\x1b[0m" in out.getvalue()
    assert err.getvalue().startswith("reading ") and err.getvalue().endswith("\r\x1b[K")
    out2 = Tty()
    monkeypatch.setattr(sys, "stdout", out2)
    monkeypatch.setenv("NO_COLOR", "1")
    assert main(["inspect", str(tmp_path / "doc.json")]) == 0
    assert "\x1b[" not in out2.getvalue()
    plain = cli("inspect", "doc.json", "--import", "test_cli", cwd=tmp_path)
    assert "\x1b[" not in plain.stdout + plain.stderr


# --- check ------------------------------------------------------------------------------------

CHECKED = """
import typing
import treeclass as tc

@tc.pytree_dataclass(name="tests.cli.check.Good")
class Good:
    x: typing.Any
    mode: str = tc.field(static=True, default="eval")

@tc.pytree_dataclass
class NoName:
    x: typing.Any

@tc.pytree_dataclass(name="tests.cli.check.BadDefaults")
class BadDefaults:
    x: typing.Any
    fn: typing.Any = tc.field(static=True, default=print)
    lst: list = tc.field(static=True, default_factory=lambda: [1])
    ok: tuple = tc.field(static=True, default=(1, 2))

@tc.pytree_dataclass(name="tests.cli.check.Unfrozen")
class Unfrozen:  # instances are unhashable: a list static value saves, loads and pickles
    x: typing.Any
    shape: list = tc.field(static=True, default_factory=lambda: [4, 4])

@tc.pytree_dataclass(name="tests.cli.check.Frozen", frozen=True)
class Frozen:  # instances are hashable: a list static value cannot be saved
    x: typing.Any
    shape: list = tc.field(static=True, default_factory=lambda: [4, 4])
    n: int = tc.field(static=True, default=4)
"""


def test_check_lists_classes_and_flags_problems(tmp_path: Path) -> None:
    (tmp_path / "good_models.py").write_text(CHECKED.split("@tc.pytree_dataclass\n", 1)[0])
    (tmp_path / "all_models.py").write_text(CHECKED)
    good = cli("check", "good_models", cwd=tmp_path)
    assert good.returncode == 0, good.stderr
    assert "tests.cli.check.Good  good_models.Good (dataclass)" in good.stdout
    assert "data:    x" in good.stdout and "static:  mode='eval'" in good.stdout
    assert "aliases: -" in good.stdout
    bad = cli("check", "all_models", "--json", cwd=tmp_path)
    assert bad.returncode == 1 and "problem(s) found" in bad.stderr
    rows = {r["class"]: r for r in json.loads(bad.stdout)["classes"]}
    assert rows["all_models.NoName"]["name"] is None
    assert "has no name=" in rows["all_models.NoName"]["problems"][0]
    problems = rows["all_models.BadDefaults"]["problems"]
    assert problems == [
        "the default of static field 'fn' cannot be used: static field 'fn' of "
        "all_models.BadDefaults cannot be serialized: it holds the builtin_function_or_method "
        "'print', which has no JSON form; a callable cannot be saved: a file holds data, never "
        "code (registering its type with register_static would not help). Keep it out of the "
        "saved tree: hold it outside the class whose instances are saved, or save the config it "
        "is made from and rebuild it on load (for a training state such as flax's TrainState, "
        "save params, opt_state and step, and make tx= again from the config)."
    ]
    # What check says is what saving says (issue 28, item 3): the list default of a class
    # whose instances are unhashable saves, so it is no problem; a frozen class's is one.
    assert rows["all_models.Unfrozen"]["problems"] == []
    obj = bad_models_module(tmp_path).Unfrozen(1.0)
    assert tc.treespec_loads(tc.treespec_dumps(tc.tree_structure(obj))).unflatten([1.0]) == obj
    assert rows["all_models.Frozen"]["problems"] == [
        "the default of static field 'shape' cannot be used: cannot save static field 'shape' "
        "of all_models.Frozen: the value is an unhashable list, but instances of the class are "
        "hashable (so the class cannot hold it); every loader refuses such a value, so the file "
        "could never be read back. Store a value the field's annotation (and the class) allows."
    ]
    assert rows["all_models.BadDefaults"]["data"] == ["x"]
    assert cli("check", "no_such_module", cwd=tmp_path).returncode == 2


LIBRARY = """
import dataclasses, typing
import treeclass as tc

@dataclasses.dataclass
class Output:  # a library's class, registered by the user's module
    logits: typing.Any

@tc.pytree_dataclass(name="tests.cli.lib.Own")
class Own:  # registered by the library itself
    x: typing.Any
"""

USER = """
import typing
import optax  # its state classes get names from treeclass's optax adapter
import treeclass as tc
import cli_library

tc.register_dataclass(cli_library.Output, name="tests.cli.user.Output")

@tc.pytree_dataclass(name="tests.cli.user.Model")
class Model:
    w: typing.Any
"""


def test_check_lists_the_classes_the_modules_register(tmp_path: Path) -> None:
    pytest.importorskip("optax")
    (tmp_path / "cli_library.py").write_text(LIBRARY)
    (tmp_path / "cli_user").mkdir()
    (tmp_path / "cli_user" / "__init__.py").write_text("from . import models\n")
    (tmp_path / "cli_user" / "models.py").write_text(USER)
    mine = cli("check", "cli_user", "--json", cwd=tmp_path)
    assert mine.returncode == 0, mine.stderr
    listed = [(r["name"], r["class"]) for r in json.loads(mine.stdout)["classes"]]
    assert listed == [
        ("tests.cli.user.Output", "cli_library.Output"),  # registered by the module's code
        ("tests.cli.user.Model", "cli_user.models.Model"),
    ]
    text = cli("check", "cli_user.models", cwd=tmp_path)
    assert text.stdout.startswith("2 class(es) registered by cli_user.models\n"), text.stdout
    assert "treeclass.demo" not in text.stdout and "optax." not in text.stdout
    everything = cli("check", "cli_user", "--all", "--json", cwd=tmp_path)
    names = {r["name"] for r in json.loads(everything.stdout)["classes"]}
    assert {"tests.cli.lib.Own", "tests.cli.user.Model", "optax.ScaleByAdamState"} <= names
    assert any(n.startswith("treeclass.demo.") for n in names)
    library = cli("check", "cli_library", "--json", cwd=tmp_path)
    rows = json.loads(library.stdout)["classes"]
    assert [r["name"] for r in rows] == ["tests.cli.lib.Own"]  # (Output: by cli_user only)
    (tmp_path / "empty_module.py").write_text("import treeclass\n")
    empty = cli("check", "empty_module", cwd=tmp_path)
    assert empty.returncode == 0 and empty.stdout == "0 class(es) registered by empty_module\n"
    assert "empty_module register(s) no class (--all lists every registered class)" in (
        empty.stderr
    )


def bad_models_module(tmp_path: Path) -> Any:
    """``all_models`` (the classes ``check`` was run on) imported here."""
    import importlib
    import sys

    sys.path.insert(0, str(tmp_path))
    try:
        return importlib.import_module("all_models")
    finally:
        sys.path.remove(str(tmp_path))


def test_usage_and_version_still_work(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["version"]) == 0
    assert capsys.readouterr().out.startswith("treeclass 0.1.0; frameworks installed:")
    with pytest.raises(SystemExit) as e:
        main(["nope"])
    assert e.value.code == 2


# --- fuzzing the readers ----------------------------------------------------------------------

READER_CASES = 3000


def reader_corpus(tmp: Path) -> list[bytes]:
    out: list[bytes] = []
    tc.save(tmp / "a.safetensors", {"b": Batch(np.ones(3, np.float32)), "n": 1})
    out.append((tmp / "a.safetensors").read_bytes())
    out.append(tc.treespec_dumps(tc.tree_structure({"b": Batch(1.0), 2: (3, [4])})).encode())
    leaf = json.dumps([1, {"type": None, "context": None, "children_spec": []}])
    model = {
        "graph_module": {
            "module_call_graph": [{"signature": {"in_spec": leaf, "out_spec": leaf}}],
            "graph": {"tensor_values": {}},
            "signature": {"input_specs": [], "output_specs": []},
        }
    }
    for method in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2):
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", method) as z:  # a .pt2 archive's one member inspect reads
            z.writestr("m/models/model.json", json.dumps(model))
        out.append(buf.getvalue())
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        pass
    else:
        f = jax.jit(lambda b: Out(b.x + 1))
        out.append(bytes(jax.export.export(f)(Batch(jnp.ones(2))).serialize()))
    return out


@pytest.mark.slow
def test_fuzz_the_artifact_readers(
    tmp_path: Path, record_property: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    rng = random.Random(1212)
    corpus = reader_corpus(tmp_path)
    path = tmp_path / "case"
    failures: list[str] = []
    cases = rejected = 0
    while cases < READER_CASES:
        data = bytearray(rng.choice(corpus))
        for _ in range(rng.randrange(1, 4)):
            op = rng.randrange(4)
            i = rng.randrange(len(data) + 1)
            if op == 0:
                del data[i:]
            elif op == 1 and data:
                data[rng.randrange(len(data))] = rng.randrange(256)
            elif op == 2:
                data[i:i] = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 5)))
            elif data:
                j = rng.randrange(len(data))
                data[j : j + 4] = struct.pack("<I", rng.choice((0, 4, 8, 12, 2**31, 2**32 - 4)))
        if not data:
            continue
        write_case(path, bytes(data))
        cases += 1
        try:
            read_artifact(str(path))
        except tc.TreeclassError as e:
            rejected += 1
            if not isinstance(e, ValueError):
                failures.append(repr(e))
        except Exception as e:
            failures.append(f"{bytes(data[:200])!r}: {type(e).__name__}: {e}")
    with capsys.disabled():
        print(
            f"\n[fuzz] artifact readers: {cases} cases, {rejected} rejected with a TreeclassError"
        )
    record_property("fuzz_cases_artifacts", cases)
    assert not failures, "\n".join(failures[:5])


# --- inspect: whether it loads, as each loader says -------------------------------------------

#: The classes an artifact was written with; each change below is today's version.
EVOLVING = """
import typing
import treeclass as tc

@tc.pytree_dataclass(name="tests.cli.evolve.Batch"{removed})
class Batch:
    {first}
    x: typing.Any
    {mask}
    {added}

@tc.register_namedtuple(name="tests.cli.evolve.Pair")
class Pair(typing.NamedTuple):
    a: typing.Any
    {b}
    {pair}
"""

ALIASED = 'tc.field(default=None, aliases=("mask",))'
KEEP = {
    "removed": "",
    "first": "",
    "mask": "mask: typing.Any = None",
    "added": "",
    "b": "b: typing.Any",
    "pair": "",
}
CHANGES = {
    "unchanged": {},
    "renamed": {"mask": "valid: typing.Any = None"},
    "renamed with aliases": {"mask": f"valid: typing.Any = {ALIASED}"},
    "removed": {"mask": "", "removed": ', removed_fields=("mask",)'},
    "removed, not listed": {"mask": ""},
    "added with None": {"added": "extra: typing.Any = None"},
    "added with 1.0": {"added": "extra: typing.Any = 1.0"},
    "added without default": {"first": "extra: typing.Any"},
    "namedtuple field added with None": {"pair": "c: typing.Any = None"},
    "namedtuple field added with 0.0": {"pair": "c: typing.Any = 0.0"},
    "namedtuple field renamed": {"b": "c: typing.Any"},
}  # fmt: skip

WRITE = """
import json, numpy as np, jax, jax.numpy as jnp, torch, treeclass as tc
from evolving import Batch, Pair

tc.save("f.safetensors", {"b": Batch(np.ones(2), mask=np.zeros(2)), "p": Pair(np.ones(1), 2.0)})
f = jax.jit(lambda b, p: Batch(b.x + p.a, mask=b.mask))
ex = jax.export.export(f)(Batch(jnp.ones(2), mask=jnp.zeros(2)), Pair(jnp.ones(2), jnp.ones(())))
open("f.bin", "wb").write(ex.serialize())

class M(torch.nn.Module):
    def forward(self, b, p):
        return Batch(b.x + p.a, mask=b.mask)

inputs = (Batch(torch.ones(2), mask=torch.zeros(2)), Pair(torch.ones(2), torch.ones(())))
ep = torch.export.export(M(), inputs)
torch.export.save(ep, "m.pt2")
print(json.dumps("written"))
"""

#: What inspect says of the artifacts (first), then what each loader does with them, with
#: the classes as they are now.
LOAD = """
import contextlib, io, json, sys
from treeclass._io.cli import main

shown = io.StringIO()
with contextlib.redirect_stdout(shown):
    code = main(["inspect", *sys.argv[1:], "--import", "evolving", "--json"])

import jax, torch, treeclass as tc
out = {"inspect": json.loads(shown.getvalue()), "code": code}
def attempt(key, fn):
    try:
        fn()
    except Exception as e:
        out[key] = f"{type(e).__name__}: {e}"
    else:
        out[key] = None

attempt("f.safetensors", lambda: tc.load("f.safetensors"))

def jax_load():
    ex = jax.export.deserialize(bytearray(open("f.bin", "rb").read()))
    assert ex.in_tree.num_leaves == len(ex.in_avals), "the inputs do not line up"
    assert ex.out_tree.num_leaves == len(ex.out_avals), "the outputs do not line up"

attempt("f.bin", jax_load)
attempt("m.pt2", lambda: torch.export.load("m.pt2"))
print(json.dumps(out))
"""


def _evolving(change: str) -> str:
    return EVOLVING.format(**{**KEEP, **CHANGES[change]})


@pytest.mark.slow
def test_inspect_says_what_each_loader_does_after_a_change(tmp_path: Path) -> None:
    """Every change: inspect's verdict for each artifact kind is what the loader does."""
    for kind in ("jax", "torch", "safetensors"):
        pytest.importorskip(kind)
    written = report_in(tmp_path, WRITE, modules={"evolving": _evolving("unchanged")})
    assert written == "written"
    artifacts = ["f.safetensors", "f.bin", "m.pt2"]
    verdicts: dict[str, dict[str, bool]] = {}
    for change in CHANGES:
        truth = report_in(tmp_path, LOAD, *artifacts, modules={"evolving": _evolving(change)})
        docs = truth["inspect"]
        assert [d["path"] for d in docs] == artifacts
        for doc in docs:
            error = truth[doc["path"]]
            if (change, doc["path"]) == ("namedtuple field renamed", "m.pt2"):
                # The one cell inspect cannot see: torch's spec holds no namedtuple fields (it
                # loads), the archive's pickled example inputs do, and inspect never unpickles.
                assert doc["loads"] and "the pickled object registered as" in error, error
                continue
            assert doc["loads"] == (error is None), (change, doc["path"], error, doc["load_error"])
        loads = all(d["loads"] for d in docs)
        assert truth["code"] == (0 if loads else 1), change
        verdicts[change] = {d["path"]: d["loads"] for d in docs}
    # The matrix as the loaders have it (checked above against them, pinned here).
    assert verdicts["unchanged"] == {"f.safetensors": True, "f.bin": True, "m.pt2": True}
    assert verdicts["renamed"] == {"f.safetensors": False, "f.bin": False, "m.pt2": False}
    assert verdicts["renamed with aliases"] == verdicts["unchanged"]
    assert verdicts["removed"] == {"f.safetensors": True, "f.bin": False, "m.pt2": False}
    assert verdicts["added with 1.0"] == {"f.safetensors": True, "f.bin": False, "m.pt2": False}
    assert verdicts["added with None"] == verdicts["unchanged"]
    assert verdicts["added without default"] == verdicts["renamed"]
    assert verdicts["namedtuple field added with 0.0"]["f.bin"] is False
    assert verdicts["namedtuple field renamed"]["f.safetensors"] is False


def test_inspect_names_a_missing_alias(tmp_path: Path) -> None:
    """The trial's case: a file tc.load refuses is "does not load", with tc.load's reason."""
    script = """
        import json, numpy as np, treeclass as tc
        from evolving import Batch
        tc.save("f.safetensors", [Batch(np.zeros(3), mask=np.ones(3))])
        print(json.dumps("saved"))
    """
    assert report_in(tmp_path, script, modules={"evolving": _evolving("unchanged")}) == "saved"
    write_modules(tmp_path, {"evolving": _evolving("renamed")})
    text = cli("inspect", "f.safetensors", "--import", "evolving", cwd=tmp_path)
    assert text.returncode == 1, text.stderr
    assert "tests.cli.evolve.Batch  registered (evolving.Batch)" in text.stdout
    assert (
        "does not load (treeclass.load): node 1 ('tests.cli.evolve.Batch'): the saved auxdata of "
        "evolving.Batch names the field 'mask', which the class no longer has"
    ) in text.stdout
    assert "give the field aliases=(<old name>,)" in text.stdout
    assert "treeclass: does not load: f.safetensors" in text.stderr
    loader = report_in(
        tmp_path,
        """
        import json, treeclass as tc, evolving
        try:
            tc.load("f.safetensors")
        except tc.FileLoadError as e:
            print(json.dumps(str(e)))
        """,
    )
    reason = json.loads(cli("inspect", "f.safetensors", "--import", "evolving", "--json",
                            cwd=tmp_path).stdout)["load_error"]  # fmt: skip
    assert loader.endswith(f"its structure ('treeclass.treespec') does not load: {reason}")
    write_modules(tmp_path, {"evolving": _evolving("renamed with aliases")})
    fixed = cli("inspect", "f.safetensors", "--import", "evolving", cwd=tmp_path)
    assert fixed.returncode == 0, fixed.stderr
    assert fixed.stdout.endswith("\nloads (treeclass.load, with the classes registered here)\n")
