"""``treeclass inspect`` on hostile files, and ``treeclass check`` on hostile modules (issue 16).

- zip bombs (bzip2 and deflate members, honest or lying sizes, a duplicated central directory)
  are refused with exit status 2 before they are decompressed;
- a ``jax.export`` blob whose flatbuffer tables, vectors or strings are shared is read in time
  linear in its size (each is reached once), and what is printed stays linear in it too;
- text output escapes everything that comes from the file (control characters, ANSI escapes,
  CR/LF, lone surrogates);
- ``--json`` leaf paths (and the keys of the text output) are ``tc.keystr`` of
  ``tc.tree_flatten_with_path``, for every kind of file inspect reads;
- ``treeclass check`` fails closed when a module exits or raises a ``BaseException`` at import.

The hostile inputs run in fresh processes with a timeout and a memory cap: the fixed reader
needs well under a second and a few MiB for each, the code this guards against needed minutes
or hundreds of MiB (figures in the issue's report).
"""

from __future__ import annotations

import bz2
import functools
import json
import re
import struct
import zlib
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from _subproc import run_script

import treeclass as tc

TIMEOUT = 60.0
MEMORY_CAP = 400 * 1024 * 1024

INSPECT = """
import sys
from treeclass._io.cli import main
sys.exit(main(sys.argv[1:]))
"""


def inspect(*args: str, cwd: Path | None = None) -> Any:
    return run_script(INSPECT, "inspect", *args, timeout=TIMEOUT, memory_cap=MEMORY_CAP, cwd=cwd)


# --- zip bombs --------------------------------------------------------------------------------

BOMB_SIZE = 250 * 1024 * 1024  # under the old per-member cap of 256 MiB

_LEAF_SPEC = json.dumps([1, {"type": None, "context": None, "children_spec": []}])
#: The least model JSON inspect reads (a leaf in, a leaf out): bombs are this, then whitespace,
#: so a reader without caps reads every member whole and goes on to the next.
MODEL = json.dumps(
    {
        "graph_module": {
            "module_call_graph": [{"signature": {"in_spec": _LEAF_SPEC, "out_spec": _LEAF_SPEC}}],
            "graph": {"tensor_values": {}},
            "signature": {"input_specs": [], "output_specs": []},
        }
    }
).encode()


@functools.cache  # compressing 250 MiB takes seconds: once per method and size
def _bomb(method: str, size: int = BOMB_SIZE) -> tuple[bytes, int]:
    """``(compressed, crc32)`` of MODEL padded with whitespace to ``size`` bytes."""
    chunk = b" " * (1 << 20)
    comp: Any = bz2.BZ2Compressor(9) if method == "bzip2" else zlib.compressobj(9, 8, -15)
    parts = [comp.compress(MODEL)]
    crc = zlib.crc32(MODEL)
    left = size - len(MODEL)
    while left:
        piece = chunk[: min(left, len(chunk))]
        parts.append(comp.compress(piece))
        crc = zlib.crc32(piece, crc)
        left -= len(piece)
    parts.append(comp.flush())
    return b"".join(parts), crc


def _zip(entries: list[tuple[str, int, bytes, int, int]], repeat: int = 1) -> bytes:
    """A zip of ``(name, method, data, crc, declared size)``; each central entry ``repeat``x."""
    out = bytearray()
    central = bytearray()
    count = 0
    for name, method, data, crc, size in entries:
        raw = name.encode()
        offset = len(out)
        out += struct.pack(
            "<4s5H3I2H", b"PK\x03\x04", 20, 0, method, 0, 0x21, crc, len(data), size, len(raw), 0
        )
        out += raw + data
        for _ in range(repeat):
            central += struct.pack(
                "<4s6H3I5H2I",
                b"PK\x01\x02", 20, 20, 0, method, 0, 0x21, crc, len(data), size,
                len(raw), 0, 0, 0, 0, 0, offset,
            )  # fmt: skip
            central += raw
            count += 1
    cd_offset = len(out)
    out += central
    out += struct.pack("<4s4H2IH", b"PK\x05\x06", 0, 0, count, count, len(central), cd_offset, 0)
    return bytes(out)


@pytest.mark.parametrize("method", [0, 8, 12])
def test_a_small_archive_reads_whatever_its_compression(tmp_path: Path, method: int) -> None:
    from treeclass._io.artifacts import read_artifact

    comp = zlib.compressobj(9, 8, -15)
    data = {0: MODEL, 8: comp.compress(MODEL) + comp.flush(), 12: bz2.compress(MODEL)}[method]
    entries = [("m/models/model.json", method, data, zlib.crc32(MODEL), len(MODEL))]
    (tmp_path / "ok.pt2").write_bytes(_zip(entries))
    art = read_artifact(str(tmp_path / "ok.pt2"))
    assert [t.label for t in art.trees] == ["model inputs", "model outputs"]


def zip_bomb(kind: str) -> bytes:
    if kind == "bzip2":  # four members, 1 GB in all, from under 2 KB
        data, crc = _bomb("bzip2")
        return _zip([(f"m/models/m{i}.json", 12, data, crc, BOMB_SIZE) for i in range(4)])
    if kind == "bzip2-lying":  # the sizes in the directories say 100 bytes
        data, crc = _bomb("bzip2")
        return _zip([(f"m/models/m{i}.json", 12, data, crc, 100) for i in range(4)])
    if kind == "deflate":
        data, crc = _bomb("deflate")
        return _zip([("m/models/model.json", 8, data, crc, BOMB_SIZE)])
    assert kind == "duplicate-directory"  # one 8 MiB member listed 3,000 times
    data, crc = _bomb("deflate", 8 << 20)
    return _zip([("m/models/model.json", 8, data, crc, 8 << 20)], 3000)


@pytest.mark.parametrize("kind", ["bzip2", "bzip2-lying", "deflate", "duplicate-directory"])
def test_zip_bombs_are_refused_before_they_are_decompressed(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "bomb.pt2"
    path.write_bytes(zip_bomb(kind))
    outcome = inspect(str(path))
    assert outcome.returncode == 2, outcome.describe()
    assert "is not a readable torch.export archive" in outcome.stderr, outcome.stderr
    assert "Traceback" not in outcome.stderr


def test_zip_refusals_say_why(tmp_path: Path) -> None:
    from treeclass._io.artifacts import read_artifact

    packed = len(_bomb("bzip2")[0])
    cases = {
        "bzip2": f"decompresses to {BOMB_SIZE} bytes from {packed} (more than 200 times",
        "bzip2-lying": "m/models/m0.json decompresses to more than the 100 bytes",
        "duplicate-directory": "overlap",
    }
    for kind, message in cases.items():
        path = tmp_path / f"{kind}.pt2"
        path.write_bytes(zip_bomb(kind))
        with pytest.raises(tc.FileLoadError, match=re.escape(message)):
            read_artifact(str(path))
    # Many members each under the ratio's floor (1 MiB): refused on their total.
    member = b" " * (900 << 10)
    comp = zlib.compressobj(9, 8, -15)
    small = comp.compress(member) + comp.flush()
    entries = [(f"m/models/m{i}.json", 8, small, zlib.crc32(member), len(member)) for i in range(8)]
    (tmp_path / "many.pt2").write_bytes(_zip(entries))
    with pytest.raises(tc.FileLoadError, match=r"its models/\*\.json members decompress to"):
        read_artifact(str(tmp_path / "many.pt2"))
    # Corrupt compressed data, and a member cut short.
    for method, data in ((8, b"\xff" * 64), (12, b"BZh9" + b"\0" * 60)):
        entries = [("m/models/model.json", method, data, 0, 1000)]
        (tmp_path / "corrupt.pt2").write_bytes(_zip(entries))
        with pytest.raises(tc.FileLoadError, match="cannot be decompressed"):
            read_artifact(str(tmp_path / "corrupt.pt2"))
    cut = zlib.compressobj(9, 8, -15).compress(MODEL)  # never flushed: the stream has no end
    entries = [("m/models/model.json", 8, cut, zlib.crc32(MODEL), len(MODEL))]
    (tmp_path / "cut.pt2").write_bytes(_zip(entries))
    with pytest.raises(tc.FileLoadError, match="does not hold the"):
        read_artifact(str(tmp_path / "cut.pt2"))
    # A member that is not what its CRC says.
    body = b'{"graph_module": 1}'
    (tmp_path / "crc.pt2").write_bytes(_zip([("m/models/model.json", 0, body, 1234, len(body))]))
    with pytest.raises(tc.FileLoadError, match="CRC"):
        read_artifact(str(tmp_path / "crc.pt2"))


# --- jax.export blobs with shared tables --------------------------------------------------------


class Builder:
    """A minimal flatbuffer builder (back to front, as flatbuffers builds), without alignment.

    Objects are named by their distance from the end of the buffer; a reference from position
    ``p`` to ``q`` (``q > p``) holds ``q - p``.
    """

    def __init__(self) -> None:
        self.buf = bytearray()

    def _prepend(self, data: bytes) -> int:
        self.buf[0:0] = data
        return len(self.buf)

    def string(self, text: str) -> int:
        raw = text.encode()
        return self._prepend(struct.pack("<I", len(raw)) + raw)

    def bytes_vector(self, data: bytes) -> int:
        return self._prepend(struct.pack("<I", len(data)) + data)

    def ref_vector(self, targets: list[int]) -> int:
        end = len(self.buf) + 4 + 4 * len(targets)
        items = [struct.pack("<I", (end - 4 - 4 * i) - t) for i, t in enumerate(targets)]
        return self._prepend(struct.pack("<I", len(targets)) + b"".join(items))

    def vtable(self, offsets: list[int], table_size: int) -> int:
        return self._prepend(struct.pack(f"<{2 + len(offsets)}H", 4 + 2 * len(offsets),
                                         table_size, *offsets))  # fmt: skip

    def table(self, fields: list[tuple[str, Any] | None], vtable: int | None = None) -> int:
        """``fields`` by slot: ``("u8", value)``, ``("u32", value)``, ``("ref", object)``."""
        body = bytearray()
        offsets: list[int] = []
        refs: list[tuple[int, int]] = []
        for f in fields:
            if f is None:
                offsets.append(0)
                continue
            kind, value = f
            offsets.append(4 + len(body))
            if kind == "u8":
                body += bytes([value])
            elif kind == "u32":
                body += struct.pack("<I", value)
            else:
                refs.append((len(body), value))
                body += b"\0\0\0\0"
        table = len(self.buf) + 4 + len(body)
        for at, target in refs:
            struct.pack_into("<I", body, at, (table - 4 - at) - target)
        if vtable is None:
            # the vtable just before the table: soffset = table - vtable position > 0
            self._prepend(bytes(body))
            self._prepend(b"\0\0\0\0")
            vt = self.vtable(offsets, 4 + len(body))
            struct.pack_into("<i", self.buf, len(self.buf) - table, vt - table)
            return table
        self._prepend(bytes(body))
        return self._prepend(struct.pack("<i", vtable - table))

    def finish(self, root: int) -> bytes:
        total = len(self.buf) + 4
        self._prepend(struct.pack("<I", total - root))
        return bytes(self.buf)


LEAF: list[tuple[str, Any] | None] = []


def exported(b: Builder, in_tree: int, out_tree: int, in_avals: int | None = None) -> bytes:
    fields: list[tuple[str, Any] | None] = [None, None, ("ref", in_tree)]
    fields += [("ref", in_avals) if in_avals is not None else None, ("ref", out_tree)]
    return b.finish(b.table(fields))


def shared_names_blob(tables: int = 6000, names: int = 16000) -> bytes:
    """``tables`` dicts (no children) that all list one vector of ``names`` keys."""
    b = Builder()
    key = b.string("k")
    vec = b.ref_vector([key] * names)
    vt = b.vtable([4, 0, 5], 9)
    dicts = [b.table([("u8", 4), None, ("ref", vec)], vtable=vt) for _ in range(tables)]
    root = b.table([("u8", 2), ("ref", b.ref_vector(dicts))])
    return exported(b, root, b.table(LEAF))


def shared_aux_blob(tables: int = 16000, size: int = 64000) -> bytes:
    """``tables`` custom nodes that all point to one auxdata vector of ``size`` bytes."""
    b = Builder()
    aux = b.bytes_vector(json.dumps({"data": [], "pad": "x" * (size - 22)}).encode())
    name = b.string("tests.hostile.C")
    customs = [b.table([("u8", 5), None, None, ("ref", name), ("ref", aux)]) for _ in range(tables)]
    root = b.table([("u8", 2), ("ref", b.ref_vector(customs))])
    return exported(b, root, b.table(LEAF))


def shared_dims_blob(leaves: int = 3000, dims: int = 8000) -> bytes:
    """``leaves`` leaves whose avals all point to one aval table of ``dims`` dimensions."""
    b = Builder()
    shape = [b.string("7") for _ in range(dims)]
    aval = b.table([("u8", 0), ("ref", b.ref_vector(shape)), ("u8", 10)])
    avals = b.ref_vector([aval] * leaves)
    root = b.table([("u8", 2), ("ref", b.ref_vector([b.table(LEAF) for _ in range(leaves)]))])
    return exported(b, root, b.table(LEAF), in_avals=avals)


def doubled_chain_blob(depth: int = 2000) -> bytes:
    """A chain of tuples, each listing the next table twice (2**depth paths)."""
    b = Builder()
    node = b.table(LEAF)
    for _ in range(depth):
        node = b.table([("u8", 2), ("ref", b.ref_vector([node, node]))])
    return exported(b, node, b.table(LEAF))


BLOBS = {
    "shared-names": shared_names_blob,
    "shared-aux": shared_aux_blob,
    "shared-dims": shared_dims_blob,
    "doubled-chain": doubled_chain_blob,
}


@pytest.mark.parametrize("kind", sorted(BLOBS))
def test_jax_blobs_with_shared_tables_are_read_in_linear_time(tmp_path: Path, kind: str) -> None:
    blob = BLOBS[kind]()
    path = tmp_path / "blob.bin"
    path.write_bytes(blob)
    for args in ((str(path),), (str(path), "--json", "--limit", "0")):
        outcome = inspect(*args)
        assert not outcome.timed_out and not outcome.crashed, outcome.describe()
        assert "Traceback" not in outcome.stderr, outcome.stderr
        if kind == "shared-dims":  # avals are shared by design: read once, shown elided
            assert outcome.returncode == 0, outcome.describe()
            assert len(outcome.stdout) < 20 * len(blob)
            assert "float32[7, 7, 7," in outcome.stdout and "...]" in outcome.stdout
        else:
            assert outcome.returncode == 2, outcome.describe()
            assert "is reached twice" in outcome.stderr, outcome.stderr


def test_a_blob_may_share_vtables_and_unique_avals(tmp_path: Path) -> None:
    """What jax writes: shared vtables, avals shared through the uniques' indices."""
    from treeclass._io.artifacts import read_artifact

    b = Builder()
    aval = b.table([("u8", 0), ("ref", b.ref_vector([b.string("2"), b.string("3")])), ("u8", 10)])
    uniques = b.ref_vector([aval])
    idx = b._prepend(struct.pack("<4I", 3, 0, 0, 0))
    vt = b.vtable([], 4)
    leaves = [b.table(LEAF, vtable=vt) for _ in range(3)]
    root = b.table([("u8", 3), ("ref", b.ref_vector(leaves))])
    out_tree = b.table(LEAF, vtable=vt)
    fields: list[tuple[str, Any] | None] = [None, None, ("ref", root), None, ("ref", out_tree)]
    fields += [None] * 14 + [("ref", uniques), None, None, ("ref", idx)]
    (tmp_path / "ok.bin").write_bytes(b.finish(b.table(fields)))
    art = read_artifact(str(tmp_path / "ok.bin"))
    assert [n.detail for n in art.trees[0].nodes] == ["", *["float32[2, 3]"] * 3]


# --- escaping ---------------------------------------------------------------------------------

SPOOF = "evil\x1b[2K\r  tests.x  \x1b[32mregistered\x1b[0m (x.Y)\n  \u202eoops\ud800"


def _doc_with_name(name: str) -> str:
    @tc.pytree_dataclass(name="tests.inspect_hostile.Placeholder")
    class Placeholder:
        x: Any

    doc = tc.treespec_dumps(tc.tree_structure({"k\x1b": Placeholder(1.0)}))
    return doc.replace("tests.inspect_hostile.Placeholder", json.dumps(name)[1:-1])


@pytest.mark.parametrize("name", [SPOOF, "lone\ud800surrogate"])
def test_text_output_escapes_what_comes_from_the_file(tmp_path: Path, name: str) -> None:
    (tmp_path / "doc.json").write_text(_doc_with_name(name))
    outcome = inspect(str(tmp_path / "doc.json"))
    assert outcome.returncode == 1, outcome.describe()  # 1: the name is missing
    assert "Traceback" not in outcome.stderr, outcome.stderr
    for text in (outcome.stdout, outcome.stderr):
        assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202e\ud800-\udfff]", text), text
    lines = outcome.stdout.splitlines()
    named = [line for line in lines if "evil" in line or "lone" in line]
    # the node, the names-needed line and why it does not load: one line each
    assert len(named) == 3, outcome.stdout
    assert named[1].endswith("MISSING (class: no registration in this process)"), named[1]
    assert named[2].startswith("does not load (treeclass.treespec_loads): this treespec uses")
    assert not any(line.lstrip().startswith("tests.x") for line in lines)
    expected = "\\x1b[2K\\r" if name == SPOOF else "lone\\ud800surrogate"
    assert expected in named[1] and expected in named[2]
    assert "['k\\x1b']" in outcome.stdout
    assert "not registered: " in outcome.stderr and ("\\ud800" in outcome.stderr)


# --- key paths --------------------------------------------------------------------------------


@tc.pytree_dataclass(name="tests.inspect_hostile.Box")
class Box:
    v: Any
    w: Any = None


def _json_paths(stdout: str, label: str) -> list[str]:
    doc = json.loads(stdout)
    (tree,) = [t for t in doc["trees"] if t["label"] == label]
    return [n["path"] for n in tree["nodes"] if n["leaf"]]


def _check_paths(path: Path, label: str, tree: Any, capsys: pytest.CaptureFixture[str]) -> None:
    from treeclass._io.cli import main

    expected = [tc.keystr(p) for p, _ in tc.tree_flatten_with_path(tree)[0]]
    main(["inspect", str(path), "--json"])
    assert _json_paths(capsys.readouterr().out, label) == expected
    main(["inspect", str(path)])
    out = capsys.readouterr().out
    # text: every leaf line's key path, rebuilt from the indentation (two spaces a level)
    block = out.split(f"\n{label}:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    parts: list[str] = []
    got: list[str] = []
    for line in block:
        depth = (len(line) - len(line.lstrip(" "))) // 2 - 1
        key, _, rest = line.strip().partition("  ")
        del parts[max(depth - 1, 0) :]
        if depth:
            parts.append(key)
        if _is_leaf_line(rest):
            got.append("".join(parts))
    assert got == expected


def _is_leaf_line(rest: str) -> bool:
    """A leaf's detail (empty in a document), never a node's type."""
    return rest == "" or bool(re.match(r"(float32|bfloat16)\[|float32 \[|ndarray", rest))


TREE: Any = {"a": 1.0, "b": 2.0, "c": {"d": 3.0, "e": [4.0, Box(5.0, (6.0,))]}}


def _as_arrays(tree: Any, xp: Any) -> Any:
    return tc.tree_map(lambda x: xp.full((2,), x, dtype=xp.float32), tree)


def test_paths_of_a_treeclass_file_and_a_document(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    np = pytest.importorskip("numpy")
    tc.save(tmp_path / "t.safetensors", _as_arrays(TREE, np))
    _check_paths(tmp_path / "t.safetensors", "structure", TREE, capsys)
    (tmp_path / "doc.json").write_text(tc.treespec_dumps(tc.tree_structure(TREE)))
    _check_paths(tmp_path / "doc.json", "structure", TREE, capsys)
    # paths= takes them as they are
    back = tc.load(tmp_path / "t.safetensors", paths=["['a']", "['c']['e'][1].v"])
    assert back["a"] is not None and back["b"] is None


def test_paths_of_a_plain_safetensors_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    np = pytest.importorskip("numpy")
    st = pytest.importorskip("safetensors.numpy")
    flat = {"b": np.ones(2, np.float32), "a": np.ones(3, np.float32)}
    st.save_file(flat, str(tmp_path / "plain.safetensors"))
    from treeclass._io.cli import main

    main(["inspect", str(tmp_path / "plain.safetensors"), "--json"])
    paths = _json_paths(capsys.readouterr().out, "structure")
    assert paths == [tc.keystr(p) for p, _ in tc.tree_flatten_with_path(flat)[0]]


def test_paths_of_a_jax_export_blob(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    tree = _as_arrays(TREE, jnp)
    exp = jax.export.export(jax.jit(lambda t: t))(tree)
    (tmp_path / "f.bin").write_bytes(exp.serialize())
    _check_paths(tmp_path / "f.bin", "inputs", ((TREE,), {}), capsys)
    _check_paths(tmp_path / "f.bin", "outputs", TREE, capsys)


class Moments(NamedTuple):
    count: Any
    mu: Any


tc.register_namedtuple(Moments, name="tests.inspect_hostile.Moments")


def test_namedtuple_fields_are_the_same_key_paths_in_a_blob_and_a_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """jax.export writes a namedtuple's fields in its auxdata: ``.count``, not ``[0]``; a .pt2
    archive's are the fields of the class registered under its name."""
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    np = pytest.importorskip("numpy")
    tree = {"opt": Moments(1.0, [2.0, 3.0])}
    exp = jax.export.export(jax.jit(lambda t: t))(_as_arrays(tree, jnp))
    (tmp_path / "f.bin").write_bytes(exp.serialize())
    tc.save(tmp_path / "t.safetensors", _as_arrays(tree, np))
    expected = ["['opt'].count", "['opt'].mu[0]", "['opt'].mu[1]"]
    assert [tc.keystr(p) for p, _ in tc.tree_flatten_with_path(tree)[0]] == expected
    _check_paths(tmp_path / "f.bin", "outputs", tree, capsys)
    _check_paths(tmp_path / "t.safetensors", "structure", tree, capsys)
    torch = pytest.importorskip("torch")

    class M(torch.nn.Module):
        def forward(self, t: Any) -> Any:
            return tc.tree_map(lambda x: x + 1, t)

    torch.export.save(torch.export.export(M(), (_as_arrays(tree, torch),)), tmp_path / "m.pt2")
    # torch's spec keeps no fields: the paths are those of the class registered here
    _check_paths(tmp_path / "m.pt2", "model outputs", tree, capsys)


def test_paths_of_a_pt2_archive(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    torch = pytest.importorskip("torch")

    class M(torch.nn.Module):
        def forward(self, t: Any) -> Any:
            return tc.tree_map(lambda x: x + 1, t)

    tree = _as_arrays(TREE, torch)
    ep = torch.export.export(M(), (tree,))
    torch.export.save(ep, tmp_path / "m.pt2")
    _check_paths(tmp_path / "m.pt2", "model inputs", ((TREE,), {}), capsys)
    _check_paths(tmp_path / "m.pt2", "model outputs", TREE, capsys)


# --- check fails closed -----------------------------------------------------------------------

EXITS = {
    "exit0": "import sys\nsys.exit(0)\n",
    "exit_none": "raise SystemExit\n",
    "base_exception": "class Boom(BaseException):\n    pass\nraise Boom('at import')\n",
}

CHECK = """
import sys
from treeclass._io.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("body", sorted(EXITS))
def test_check_fails_closed_when_a_module_exits_at_import(tmp_path: Path, body: str) -> None:
    (tmp_path / f"mod_{body}.py").write_text(EXITS[body])
    outcome = run_script(CHECK, "check", f"mod_{body}", timeout=TIMEOUT, cwd=tmp_path)
    assert outcome.returncode == 2, outcome.describe()
    assert f"cannot import 'mod_{body}'" in outcome.stderr, outcome.stderr
    assert outcome.stdout == ""
    # inspect --import too
    (tmp_path / "doc.json").write_text(tc.treespec_dumps(tc.tree_structure([1])))
    again = run_script(
        CHECK, "inspect", "doc.json", "--import", f"mod_{body}", timeout=TIMEOUT, cwd=tmp_path
    )
    assert again.returncode == 2 and f"cannot import 'mod_{body}'" in again.stderr


# --- one reader of torch's treespec JSON ------------------------------------------------------

_HOSTILE_SPECS = {
    "factory": [
        1,
        {
            "type": "collections.defaultdict",
            "context": {"default_factory_module": "os", "default_factory_name": "system",
                        "dict_context": ["a"]},
            "children_spec": [{"type": None, "context": None, "children_spec": []}],
        },
    ],
    "arity": [
        1,
        {"type": "builtins.dict", "context": '["a", "b"]',
         "children_spec": [{"type": None, "context": None, "children_spec": []}]},
    ],
    "deep": [1, functools.reduce(
        lambda inner, _: {"type": "builtins.list", "context": "null", "children_spec": [inner]},
        range(300),
        {"type": None, "context": None, "children_spec": []},
    )],
}  # fmt: skip


@pytest.mark.parametrize("kind", sorted(_HOSTILE_SPECS))
def test_inspect_and_treeclass_torch_refuse_a_torch_spec_alike(tmp_path: Path, kind: str) -> None:
    """``treeclass inspect`` reads a .pt2's treespecs with the reader treeclass.torch uses: a
    spec one refuses, the other refuses with the same words (and inspect imports no torch)."""
    from treeclass._io import torchspec
    from treeclass._io.artifacts import read_artifact

    text = json.dumps(_HOSTILE_SPECS[kind])
    with pytest.raises(tc.TreespecLoadError) as reader:
        torchspec.read(text)
    model = json.loads(MODEL)
    model["graph_module"]["module_call_graph"][0]["signature"]["in_spec"] = text
    data = json.dumps(model).encode()
    path = tmp_path / "m.pt2"
    path.write_bytes(_zip([("m/models/m.json", 0, data, zlib.crc32(data), len(data))]))
    with pytest.raises(tc.FileLoadError) as inspected:
        read_artifact(str(path))
    assert str(reader.value)[:100] in str(inspected.value)  # (inspect cuts it at 200)
    pytest.importorskip("torch")
    import treeclass.torch as tct

    with pytest.raises(tc.TreespecLoadError) as loaded:
        tct.treespec_loads(text)
    assert str(loaded.value) == str(reader.value)
