"""Read the structure of a saved artifact without executing anything from it.

``treeclass inspect`` shows what a file holds and which class names it needs. Four kinds of
artifact are recognised by their content:

- a **safetensors file** (from :func:`treeclass.save`, or a plain one): its header only;
- a **torch.export archive** (``.pt2``, a zip): the JSON of ``*/models/*.json`` only --
  ``graph_module.module_call_graph[0].signature.in_spec`` / ``out_spec`` (torch's treespec
  JSON text) and the tensor metadata of the graph's inputs and outputs (checked with torch
  2.13.0); a namedtuple's key paths are the fields of the class registered under its name
  (torch's spec keeps none). The archive's pickles (example inputs, constants) are never
  opened. Those members are decompressed here, never by :mod:`zipfile` (which decompresses
  a bzip2 chunk whole): entries that overlap are refused, and a member is refused before it
  is decompressed when its size, the members' total or its compression ratio is past
  :data:`MAX_READ_BYTES`, :data:`MAX_ZIP_TOTAL` or :data:`MAX_ZIP_RATIO`; decompression
  stops one byte past the size the archive declares;
- a **jax.export blob** (``Exported.serialize()``, a flatbuffer): read by a small bounded
  reader of the few fields needed -- ``in_tree`` / ``out_tree`` (``PyTreeDef`` tables; a
  namedtuple's fields are in its auxdata) and ``in_avals`` / ``out_avals`` (shapes, dtypes)
  -- following jax 0.10.2's schema (``jax/_src/export/serialization.fbs``). jax's own
  generated reader (through the ``flatbuffers`` package) checks no offset, so a hostile blob
  sends it out of bounds or, with a shared or cyclic child, into exponential or endless
  recursion; and it imports jax. This reader checks every offset and walks iteratively; it
  reaches each table, vector and string of the trees once (one reached twice is refused:
  jax's serializer shares none; only vtables, and avals through the index of a unique one,
  are shared), so its time and what it prints are linear in the blob's size;
- a **treespec document** (:func:`treeclass.treespec_dumps`).

Nothing is imported or called by name; every problem is a :class:`~treeclass.FileLoadError`.
:func:`load_problem` then says whether the structure loads with the classes registered here,
through the loaders' own code.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

from .._backends.activation import adapter, framework_named
from .._core.json import loads_strict
from .._core.keys import attr_entry, index_entry
from .._core.names import BUILTIN_NAMES
from .._core.registry import node_for_name
from .._errors import FileLoadError, TreeclassError, TreespecLoadError, qualname
from .._treespec.format import loads_nodes, loads_spec
from .._treespec.treedoc import child_entries, leaf_paths, walk
from . import files, torchspec
from .dtypes import SAFETENSORS_NAMES
from .safetensors import read_header

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from types import ModuleType
    from typing import Any, Final

__all__ = ["Artifact", "Node", "Tree", "load_problem", "read_artifact"]

#: Largest JSON member read from a .pt2 archive, and largest JSON / blob file read whole.
MAX_READ_BYTES: Final = 256 * 1024 * 1024
#: What a .pt2 archive's ``models/*.json`` members may decompress to, all together.
MAX_ZIP_TOTAL: Final = MAX_READ_BYTES
#: Largest ratio of decompressed to compressed size of those members (each, and all together)
#: past :data:`ZIP_RATIO_FLOOR` decompressed bytes. torch stores them uncompressed (ratio 1);
#: re-zipped, the model JSON of a 300-layer MLP (750 KB, torch 2.13.0) shrinks 30 times with
#: deflate and 63 times with bzip2; a deflate bomb reaches 1,032, a bzip2 one millions. The
#: ratio bounds the work to 200 times the archive's size, the total to 256 MiB.
MAX_ZIP_RATIO: Final = 200
ZIP_RATIO_FLOOR: Final = 1024 * 1024
#: Most characters of an aval's shape shown (an aval is shared by every leaf pointing to it).
_SHAPE_SHOWN: Final = 100

# torch._export.serde.schema.ScalarType (torch 2.13.0).
_TORCH_DTYPES: Final = {
    1: "uint8", 2: "int8", 3: "int16", 4: "int32", 5: "int64", 6: "float16", 7: "float32",
    8: "float64", 9: "complex32", 10: "complex64", 11: "complex128", 12: "bool", 13: "bfloat16",
    28: "uint16", 29: "float8_e4m3fn", 30: "float8_e5m2", 31: "float8_e4m3fnuz",
    32: "float8_e5m2fnuz", 33: "float8_e8m0fnu", 34: "uint32", 35: "uint64",
}  # fmt: skip
# jax/_src/export/serialization.fbs: enum DType (jax 0.10.2).
_JAX_DTYPES: Final = (
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16",
    "float32", "float64", "complex64", "complex128", "bfloat16", "int4", "uint4",
    "float8_e4m3b11fnuz", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz",
    "float0", "float8_e4m3", "float8_e3m4", "float8_e8m0fnu", "float4_e2m1fn", "key<fry>",
    "key<rbg>", "key<unsafe_rbg>",
)  # fmt: skip
_JAX_KINDS: Final = ("leaf", "none", "tuple", "list", "dict", "custom")


@dataclass(slots=True)
class Node:
    """One node of a structure, as shown: depth, key entry, type and what is known."""

    depth: int
    key: str
    leaf: bool
    #: The node's type as shown (``"dict"``, ``"tuple"``, a class's registered name).
    type: str
    #: The serialized name this node needs registered, or ``None`` (a built-in).
    name: str | None
    #: Shape and dtype, a value, or a state summary.
    detail: str


class Tree(NamedTuple):
    """A labelled structure (``"structure"``, ``"inputs"``, ``"outputs"``): nodes in pre-order."""

    label: str
    nodes: list[Node]


class Artifact:
    """What ``treeclass inspect`` found in a file."""

    __slots__ = (
        "documents",
        "jax_nodes",
        "kind",
        "loader",
        "metadata",
        "names",
        "notes",
        "static_names",
        "torch_specs",
        "trees",
    )

    def __init__(self, kind: str, loader: str) -> None:
        self.kind = kind
        #: The function that loads such a file (named in what :func:`load_problem` says).
        self.loader = loader
        self.trees: list[Tree] = []
        #: Class names the artifact needs (node types).
        self.names: set[str] = set()
        #: Static type names (``tc.register_static``) its statics need.
        self.static_names: set[str] = set()
        self.metadata: dict[str, str] = {}
        self.notes: list[str] = []
        #: What :func:`load_problem` hands to the loaders' own code: the treespec documents
        #: (of a treeclass file or a document), the torch treespec texts of a .pt2 archive,
        #: and ``(tree label, name, auxdata, children)`` of a jax.export blob's custom nodes.
        self.documents: list[str | bytes] = []
        self.torch_specs: list[tuple[str, str]] = []
        self.jax_nodes: list[tuple[str, str, bytes, int]] = []


def _bad(source: str, what: str, message: str) -> FileLoadError:
    return FileLoadError(f"{source} is not a readable {what}: {message}")


def _short(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else f"{text[: limit - 3]}..."


def _registered_statics(value: Any, out: set[str]) -> None:
    """Collect the names of ``{"registered": [name, ...]}`` static values."""
    for v in torchspec.objects(value):
        reg = v.get("registered")
        if len(v) == 1 and reg.__class__ is list and reg and reg[0].__class__ is str:
            out.add(reg[0])


def _state_summary(state: Any) -> str:
    if state.__class__ is dict:
        static: Any = state.get("static")
        none: Any = state.get("none")
        parts: list[str] = []
        if static.__class__ is dict and static:
            parts.append(", ".join(f"{k}={json.dumps(v)}" for k, v in static.items()))
        if none.__class__ is list and none:
            parts.append("None: " + ", ".join(str(n) for n in none))
        return _short("; ".join(parts), 120)
    return ""


# --- treespec documents -----------------------------------------------------------------------


def _document_tree(
    text: str | bytes, label: str, art: Artifact, leaf_detail: list[str] | None
) -> Tree:
    """A treespec document as a tree (names need not be registered)."""
    nodes = loads_nodes(text)
    entries = child_entries(nodes, strict=False)
    out: list[Node] = []
    leaf = 0
    for i, parts, _ in walk(nodes, entries):
        key = parts[-1] if parts else ""
        item = nodes[i]
        if item is None:
            detail = (
                leaf_detail[leaf] if leaf_detail is not None and leaf < len(leaf_detail) else ""
            )
            out.append(Node(len(parts), key, True, "leaf", None, detail))
            leaf += 1
            continue
        name, state, _arity = item
        _registered_statics(state, art.static_names)
        needed = None if name in BUILTIN_NAMES else name
        if needed is not None:
            art.names.add(needed)
        out.append(Node(len(parts), key, False, name, needed, _state_summary(state)))
    return Tree(label, out)


# --- safetensors files ------------------------------------------------------------------------


def _leaf_details(meta_file: str, spec: str, describe: Callable[[str], str]) -> list[str] | None:
    """Each leaf's detail (its tensor, or its type and value), from the file's leaf list."""
    try:
        doc: Any = loads_strict(meta_file)
    except ValueError:
        return None
    if doc.__class__ is not dict:
        return None
    details: list[str] = []
    kinds: Any = doc.get("kinds")  # a letter per leaf, the scalars' values
    values: Any = doc.get("values")
    if kinds.__class__ is not str or values.__class__ is not list:
        return None
    try:
        nodes = loads_nodes(spec)
        paths = leaf_paths(nodes, child_entries(nodes, strict=False))
    except (TreespecLoadError, TreeclassError, ValueError):
        return None
    if len(paths) != len(kinds):
        return None
    names = iter(files.tensor_names([p for p, c in zip(paths, kinds) if c in files.ARRAY_LETTERS]))
    scalars = iter(values)
    for c in kinds:
        kind = files.LEAF_KINDS.get(c)
        if kind is None:
            details.append("?")
        elif c in files.ARRAY_LETTERS:
            details.append(f"{describe(next(names))} ({kind})")
        else:
            details.append(f"{kind} {_short(json.dumps(next(scalars, None)))}")
    return details


def _safetensors(path: str, source: str) -> Artifact:
    with open(path, "rb") as f:
        header = read_header(f, source)
    ours = files.is_ours(header.metadata)
    art = Artifact("treeclass file (safetensors)" if ours else "safetensors file", "treeclass.load")
    art.metadata = files.user_metadata(header.metadata)

    def describe(name: str) -> str:
        t = header.tensors.get(name)
        if t is None:
            return f"tensor {name!r} (missing from the file)"
        return f"{SAFETENSORS_NAMES.get(t.dtype, t.dtype)}{list(t.shape)}"

    total = sum(t.nbytes for t in header.tensors.values())
    art.notes.append(f"{len(header.tensors)} tensors, {total} bytes of data")
    spec = header.metadata.get(files.SPEC_KEY)
    if ours and spec is not None:
        details = _leaf_details(header.metadata.get(files.FILE_KEY, ""), spec, describe)
        try:
            art.trees.append(_document_tree(spec, "structure", art, details))
        except TreespecLoadError as e:
            raise _bad(source, "treeclass file", str(e)) from None
        art.documents.append(spec)
        return art
    nodes = [Node(0, "", False, "dict", None, "")]
    for n in sorted(header.tensors):
        nodes.append(Node(1, index_entry(n), True, "leaf", None, describe(n)))
    art.trees.append(Tree("structure", nodes))
    return art


# --- torch.export archives --------------------------------------------------------------------


def _torch_tree(text: Any, label: str, art: Artifact, leaf_detail: list[str]) -> Tree:
    """A torch treespec JSON text as a tree, read by the one reader (no name looked up)."""
    if text.__class__ is not str:
        raise ValueError(f"the {label} spec is not a string")
    out: list[Node] = []
    stack: list[tuple[list[str], int]] = []  # per open node: its keys left (reversed), depth
    for name, read, k, flat, _ in torchspec.read(text):
        key, depth = "", 0
        if stack:
            keys, depth = stack[-1]
            key = keys.pop()
            if not keys:
                stack.pop()
        if name is None:
            out.append(Node(depth, key, True, "leaf", None, ""))
            continue
        keys = [index_entry(j) for j in range(k)]
        context: Any = read
        needed: str | None = None
        shown = name
        if name == "collections.defaultdict":
            context = context[1]
        elif name == "collections.namedtuple":
            needed = context
            shown = f"namedtuple {needed}"
            # torch keeps no fields: its key paths are those of the class it loads (if any)
            nt = node_for_name(needed) if isinstance(needed, str) else None
            if nt is not None and nt.kind == "namedtuple" and len(nt.data_fields) == k:
                keys = [attr_entry(f) for f in nt.data_fields]
        elif name not in torchspec.CONTAINERS and context.__class__ is str:
            with contextlib.suppress(ValueError):
                context = loads_strict(context)
        summary = _state_summary(context)
        if name not in torchspec.TORCH_NAMES:
            needed = name
            if context.__class__ is dict:
                _registered_statics(context, art.static_names)
                context = context.get("data")
                context = [attr_entry(d) for d in context] if context.__class__ is list else None
        elif context.__class__ is list:
            context = [index_entry(c) for c in context]
        if context.__class__ is list and len(context) == k:
            keys = context
        if needed is not None:
            art.names.add(needed)
        out.append(Node(depth, key, False, shown, needed, summary))
        if flat:
            out.extend(Node(depth + 1, kk, True, "leaf", None, "") for kk in keys)
        elif k:
            stack.append((keys[::-1], depth + 1))
    leaves = [node for node in out if node.leaf]
    for node, detail in zip(leaves, leaf_detail):
        node.detail = detail
    return Tree(label, out)


def _arg_detail(arg: Any, tensors: Any) -> str:
    if arg.__class__ is not dict or len(arg) != 1:
        return ""
    ((kind, value),) = arg.items()
    if kind == "as_tensor" and value.__class__ is dict and tensors.__class__ is dict:
        meta: Any = tensors.get(value.get("name"))
        if meta.__class__ is dict:
            code: Any = meta.get("dtype")
            dtype = _TORCH_DTYPES.get(code, f"dtype {code}") if code.__class__ is int else "?"
            sizes: Any = meta.get("sizes")
            dims: list[str] = []
            for s in sizes if sizes.__class__ is list else ():
                if s.__class__ is dict and "as_int" in s:
                    dims.append(str(s["as_int"]))
                else:
                    dims.append("?")
            return f"{dtype}[{', '.join(dims)}]"
        return "tensor"
    shown: str = str(kind).removeprefix("as_")
    return shown + ("" if value is None else f" {_short(json.dumps(value), 40)}")


def _pt2(path: str, source: str) -> Artifact:
    import zipfile

    art = Artifact("torch.export archive (.pt2)", "torch.export.load")
    try:
        for name, raw in _pt2_members(path, source):
            _pt2_model(name, raw, art)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, EOFError) as e:
        raise _bad(source, "torch.export archive", f"the zip cannot be read ({e}).") from None
    except (ValueError, KeyError, TypeError, IndexError, AttributeError, RecursionError) as e:
        if isinstance(e, FileLoadError):
            raise
        raise _bad(
            source, "torch.export archive", f"{type(e).__name__}: {_short(str(e), 200)}"
        ) from None
    return art


_STORED, _DEFLATED, _BZIP2 = 0, 8, 12
_CHUNK: Final = 64 * 1024


def _pt2_members(path: str, source: str) -> Iterator[tuple[str, bytes]]:
    """``(name, content)`` of the archive's ``models/*.json`` members, read within the caps.

    :mod:`zipfile` reads the central directory only; the members are decompressed here with
    a bound on the output of every step.
    """
    import os
    import zipfile

    def bad(message: str) -> FileLoadError:
        return _bad(source, "torch.export archive", message)

    size = os.path.getsize(path)
    with zipfile.ZipFile(path) as z:
        infos = z.infolist()
    # Entries that overlap (the same member listed twice, or a member inside another) are
    # refused: each would be decompressed again. Where an entry ends is at least its local
    # header, name and compressed data (its local extra field may add to that).
    end = 0
    for info in sorted(infos, key=lambda i: i.header_offset):
        if info.header_offset < end:
            where = f"{_short(info.filename, 80)!r} at byte {info.header_offset}"
            raise bad(f"its entries overlap ({where}); each would be decompressed again.")
        end = info.header_offset + 30 + len(info.orig_filename) + info.compress_size
    members = [i for i in infos if "/models/" in i.filename and i.filename.endswith(".json")]
    if not members:
        raise bad("it has no models/*.json member.")
    total = packed = 0
    for info in members:
        name = _short(info.filename, 80)
        if info.flag_bits & 1:
            raise bad(f"{name} is encrypted.")
        if info.compress_type not in (_STORED, _DEFLATED, _BZIP2):
            raise bad(
                f"{name} uses compression method {info.compress_type} (torch stores members "
                "uncompressed; inspect reads stored, deflate and bzip2 members)."
            )
        if info.file_size > MAX_READ_BYTES:
            raise bad(f"{name} is too large ({info.file_size} bytes; the cap is {MAX_READ_BYTES}).")
        if info.file_size > max(ZIP_RATIO_FLOOR, MAX_ZIP_RATIO * info.compress_size):
            raise bad(
                f"{name} decompresses to {info.file_size} bytes from {info.compress_size} "
                f"(more than {MAX_ZIP_RATIO} times as many)."
            )
        total += info.file_size
        packed += info.compress_size
    if total > min(MAX_ZIP_TOTAL, max(ZIP_RATIO_FLOOR, MAX_ZIP_RATIO * packed)):
        raise bad(
            f"its models/*.json members decompress to {total} bytes from {packed} (the cap: "
            f"{MAX_ZIP_RATIO} times as many, at most {MAX_ZIP_TOTAL})."
        )
    with open(path, "rb") as f:
        for info in members:
            yield info.filename, _read_member(f, info, size, bad)


def _read_member(f: Any, info: Any, size: int, bad: Any) -> bytes:
    """A member's content, decompressed to at most one byte past its declared size."""
    import bz2
    import zlib

    name = _short(info.filename, 80)
    f.seek(info.header_offset)
    header = f.read(30)
    if len(header) < 30 or header[:4] != b"PK\x03\x04":
        raise bad(f"{name} has no local header.")
    start = info.header_offset + 30
    start += int.from_bytes(header[26:28], "little") + int.from_bytes(header[28:30], "little")
    if start + info.compress_size > size:
        raise bad(f"{name} runs past the end of the file.")
    f.seek(start)
    want = info.file_size
    out = bytearray()
    left = info.compress_size
    method = info.compress_type
    dec: Any = (
        zlib.decompressobj(-15)
        if method == _DEFLATED
        else bz2.BZ2Decompressor()
        if method == _BZIP2
        else None
    )
    done = method == _STORED and info.compress_size != want
    while left and not done:
        chunk = f.read(min(_CHUNK, left))
        if not chunk:
            break
        left -= len(chunk)
        if dec is None:
            out += chunk
            continue
        while True:
            room = want + 1 - len(out)
            try:
                out += dec.decompress(chunk, room)
            except (zlib.error, OSError, EOFError) as e:
                raise bad(f"{name} cannot be decompressed ({e}).") from None
            if method == _DEFLATED:
                chunk = dec.unconsumed_tail
                more = bool(chunk)
            else:
                chunk = b""
                more = not dec.needs_input and not dec.eof
            if len(out) > want:
                raise bad(
                    f"{name} decompresses to more than the {want} bytes the archive declares."
                )
            if not more or dec.eof:
                break
        done = dec.eof
    if len(out) != want or (dec is not None and not dec.eof):
        raise bad(f"{name} does not hold the {want} bytes the archive declares.")
    if zlib.crc32(out) != info.CRC:
        raise bad(f"{name} does not match its CRC.")
    return bytes(out)


def _pt2_model(member: str, raw: bytes, art: Artifact) -> None:
    model = loads_strict(raw.decode("utf-8"))
    gm = model["graph_module"]
    sig = gm["module_call_graph"][0]["signature"]
    graph = gm["graph"]
    tensors = graph.get("tensor_values", {})
    label = member.rsplit("/", 1)[-1].removesuffix(".json")
    for side, spec in (("input", sig["in_spec"]), ("output", sig["out_spec"])):
        args = [
            s[f"user_{side}"]["arg"]
            for s in gm["signature"][f"{side}_specs"]
            if s.__class__ is dict and f"user_{side}" in s
        ]
        details = [_arg_detail(a, tensors) for a in args]
        tree = _torch_tree(spec, f"{label} {side}s", art, details)
        art.trees.append(tree)
        if any(node.name is not None for node in tree.nodes):  # (only classes can fail)
            art.torch_specs.append((tree.label, spec))
    version = model.get("torch_version")
    if version.__class__ is str:
        art.notes.append(f"saved by torch {_short(version, 40)}")


# --- jax.export blobs -------------------------------------------------------------------------


class _Flat:
    """A bounds-checked reader of the few flatbuffer tables of a ``jax.export`` blob.

    :meth:`claim` records every table, vector and string reached, and refuses one reached
    twice: jax's serializer writes each anew (it shares only vtables), and a shared one would
    be read, and shown, once for every reference -- quadratic, or exponential along a chain.
    """

    def __init__(self, data: bytes, source: str) -> None:
        self.data = data
        self.n = len(data)
        self.source = source
        self.seen: set[int] = set()

    def fail(self, message: str) -> FileLoadError:
        return _bad(self.source, "jax.export blob", message)

    def claim(self, pos: int, what: str) -> None:
        if pos in self.seen:
            raise self.fail(
                f"the {what} at byte {pos} is reached twice (a cycle or a shared {what}; "
                "jax.export never writes one)."
            )
        self.seen.add(pos)

    def uint(self, pos: int, size: int) -> int:
        if pos < 0 or pos + size > self.n:
            raise self.fail(f"an offset points outside the blob (byte {pos}).")
        return int.from_bytes(self.data[pos : pos + size], "little")

    def table(self, pos: int) -> tuple[int, int, int]:
        """``(table position, vtable position, vtable size)``."""
        soffset = self.uint(pos, 4)
        if soffset >= 1 << 31:
            soffset -= 1 << 32
        vt = pos - soffset
        size = self.uint(vt, 2)
        if size < 4 or size % 2 or vt + size > self.n:
            raise self.fail(f"a table at byte {pos} has a malformed vtable.")
        return pos, vt, size

    def field(self, table: tuple[int, int, int], slot: int) -> int:
        """Position of a field of ``table``, or 0 when absent."""
        pos, vt, size = table
        at = 4 + 2 * slot
        if at + 2 > size:
            return 0
        off = self.uint(vt + at, 2)
        return pos + off if off else 0

    def ref(self, pos: int) -> int:
        return pos + self.uint(pos, 4)

    def scalar(self, table: tuple[int, int, int], slot: int, size: int, default: int = 0) -> int:
        at = self.field(table, slot)
        return self.uint(at, size) if at else default

    def string(self, pos: int) -> str:
        """The string the reference at ``pos`` points to (claimed)."""
        at = self.ref(pos)
        self.claim(at, "string")
        length = self.uint(at, 4)
        if at + 4 + length > self.n:
            raise self.fail(f"a string at byte {at} runs past the end.")
        try:
            return self.data[at + 4 : at + 4 + length].decode("utf-8")
        except UnicodeDecodeError:
            raise self.fail(f"a string at byte {at} is not UTF-8.") from None

    def vector(self, table: tuple[int, int, int], slot: int, item: int) -> range:
        """Positions of the items of a vector field (empty when absent; the vector claimed)."""
        at = self.field(table, slot)
        if not at:
            return range(0)
        start = self.ref(at)
        self.claim(start, "vector")
        length = self.uint(start, 4)
        if start + 4 + length * item > self.n:
            raise self.fail(f"a vector at byte {start} runs past the end.")
        return range(start + 4, start + 4 + length * item, item)


def _shape(dtype: str, dims: list[str]) -> str:
    """``dtype[d0, d1, ...]``, elided past :data:`_SHAPE_SHOWN` characters."""
    text = ", ".join(dims)
    if len(text) <= _SHAPE_SHOWN:
        return f"{dtype}[{text}]"
    cut = text.rfind(", ", 0, _SHAPE_SHOWN)
    head = text[:cut] if cut > 0 else _short(text, _SHAPE_SHOWN)
    return f"{dtype}[{head}, ...] ({len(dims)} dims)"


class _Avals:
    """The avals of a blob, each read once (leaves share a unique aval by its index)."""

    def __init__(self, fb: _Flat, root: tuple[int, int, int]) -> None:
        self.fb = fb
        self.root = root
        self.uniques = fb.vector(root, 19, 4)
        self.shown: dict[int, str] = {}

    def aval(self, pos: int) -> str:
        at = self.fb.ref(pos)
        shown = self.shown.get(at)
        if shown is None:
            fb = self.fb
            t = fb.table(at)
            if fb.scalar(t, 0, 1):
                shown = "token"
            else:
                dims = [_short(fb.string(p), 40) for p in fb.vector(t, 1, 4)]
                dtype = fb.scalar(t, 2, 1)
                name = _JAX_DTYPES[dtype] if dtype < len(_JAX_DTYPES) else f"dtype {dtype}"
                shown = _shape(name, dims)
            self.shown[at] = shown
        return shown

    def read(self, slot: int, idx_slot: int) -> list[str]:
        fb = self.fb
        direct = fb.vector(self.root, slot, 4)
        if direct:
            return [self.aval(p) for p in direct]
        out: list[str] = []
        for p in fb.vector(self.root, idx_slot, 4):
            i = fb.uint(p, 4)
            if i >= len(self.uniques):
                raise fb.fail(f"an aval index {i} is out of range.")
            out.append(self.aval(self.uniques[i]))
        return out


def _jax_tree(fb: _Flat, pos: int, label: str, art: Artifact, avals: list[str]) -> Tree:
    out: list[Node] = []
    stack: list[tuple[int, int, str]] = [(pos, 0, "")]
    leaf = 0
    while stack:
        at, depth, key = stack.pop()
        fb.claim(at, "table")
        t = fb.table(at)
        kind = fb.scalar(t, 0, 1)
        if kind >= len(_JAX_KINDS):
            raise fb.fail(f"a PyTreeDef has the unknown kind {kind}.")
        children = fb.vector(t, 1, 4)
        if _JAX_KINDS[kind] == "leaf":
            out.append(
                Node(depth, key, True, "leaf", None, avals[leaf] if leaf < len(avals) else "")
            )
            leaf += 1
            continue
        keys: Any = None
        shown = _JAX_KINDS[kind]
        needed: str | None = None
        detail = ""
        if shown == "none":
            shown = "None"
        elif shown == "dict":
            names = fb.vector(t, 2, 4)
            if len(names) == len(children):
                keys = list(map(index_entry, map(fb.string, names)))
        elif shown == "custom":
            name_at = fb.field(t, 3)
            needed = fb.string(name_at) if name_at else "?"
            shown = needed
            aux_items = fb.vector(t, 4, 1)
            aux = fb.data[aux_items.start : aux_items.stop] if aux_items else b""
            if aux:
                state: Any = None
                with contextlib.suppress(ValueError, RecursionError):
                    state = loads_strict(aux.decode("utf-8"))
                fields: Any = None
                if state.__class__ is dict:
                    _registered_statics(state, art.static_names)
                    fields = state.get("data", state.get("fields"))
                    detail = _state_summary(state)
                elif state.__class__ is list:  # a namedtuple: jax.export writes its fields
                    fields = state
                if (
                    fields.__class__ is list
                    and len(fields) == len(children)
                    and all(f.__class__ is str for f in fields)
                ):
                    keys = list(map(attr_entry, fields))
            art.names.add(needed)
            art.jax_nodes.append((label, needed, aux, len(children)))
        out.append(Node(depth, key, False, shown, needed, detail))
        for j in range(len(children) - 1, -1, -1):
            k = keys[j] if keys is not None else index_entry(j)
            stack.append((fb.ref(children[j]), depth + 1, k))
    return Tree(label, out)


def _jax_blob(data: bytes, source: str) -> Artifact:
    fb = _Flat(data, source)
    root = fb.table(fb.uint(0, 4))
    in_at, out_at = fb.field(root, 2), fb.field(root, 4)
    if not in_at or not out_at:
        raise fb.fail("it has no in_tree / out_tree.")
    art = Artifact("jax.export blob", "jax.export.deserialize")
    name_at = fb.field(root, 1)
    if name_at:
        art.notes.append(f"function {_short(fb.string(name_at), 80)}")
    avals = _Avals(fb, root)
    in_avals = avals.read(3, 22)
    out_avals = avals.read(5, 23)
    art.trees.append(_jax_tree(fb, fb.ref(in_at), "inputs", art, in_avals))
    art.trees.append(_jax_tree(fb, fb.ref(out_at), "outputs", art, out_avals))
    return art


# --- detection --------------------------------------------------------------------------------


def read_artifact(path: str) -> Artifact:
    """Recognise and read the artifact at ``path``.

    Raises:
        FileLoadError: it is none of the known kinds, or it is malformed.
        OSError: it cannot be opened.
    """
    import os

    source = repr(path)
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        head = f.read(16)
    if head.startswith(b"PK\x03\x04"):
        return _pt2(path, source)
    if head[8:9] == b"{" and 0 < int.from_bytes(head[:8], "little") <= size - 8:  # safetensors
        return _safetensors(path, source)
    if size > MAX_READ_BYTES:
        raise FileLoadError(f"{source} is larger than any treespec document or jax.export blob.")
    with open(path, "rb") as f:
        data = f.read()
    if data.lstrip()[:1] == b"{":
        art = Artifact("treespec document", "treeclass.treespec_loads")
        try:
            art.trees.append(_document_tree(data, "structure", art, None))
        except TreespecLoadError as e:
            raise FileLoadError(f"{source} is not a readable treespec document: {e}") from None
        art.documents.append(data)
        return art
    try:
        return _jax_blob(data, source)
    except FileLoadError as e:
        raise FileLoadError(
            f"{source} is not a treeclass file, a safetensors file, a torch.export archive, a "
            f"treespec document or a jax.export blob ({e})."
        ) from None


def needed_names(art: Artifact) -> Iterator[tuple[str, str]]:
    """``(kind, name)`` of everything the artifact needs registered, sorted."""
    for name in sorted(art.names):
        yield "class", name
    for name in sorted(art.static_names):
        yield "static", name


# --- whether it loads -------------------------------------------------------------------------


def load_problem(art: Artifact) -> str | None:
    """Why ``art`` does not load with the classes registered here, or ``None`` when it does.

    Not a second copy of any rule: the structure goes through the loaders' own code, which
    applies each class's evolution (``aliases``, ``removed_fields``, ``migrate``, defaults):

    - a treeclass file's structure and a treespec document: the reader of
      :func:`treeclass.load` and :func:`treeclass.treespec_loads`
      (:func:`~treeclass._treespec.format.loads_spec`);
    - a ``torch.export`` archive's input and output specs: :func:`treeclass.torch.treespec_loads`,
      which calls, node by node, what ``torch.export.load`` calls (the contexts'
      ``from_dumpable_context``, torch's namedtuple lookup);
    - a ``jax.export`` blob: each custom node goes through the ``deserialize_auxdata`` and
      ``from_children`` that ``jax.export.deserialize`` looks up by its name, and the node
      built must have the leaves the compiled program takes (a field added with a default
      that is not ``None`` is a new input). Only for names treeclass registered: a class
      another library registered with ``jax.export`` is not checked (its code might
      unpickle the auxdata; nothing from the artifact is run).

    A torch archive or a jax blob that holds registered classes needs its framework: it is
    imported here (which registers the classes with it, as in any process), and a missing
    one is the problem. The tensors of a treeclass file are not read.
    """
    for document in art.documents:
        try:
            loads_spec(document)
        except Exception as e:  # the user's classes' code runs too: report what it raised
            return _raised(e)
    if art.torch_specs:
        return _torch_problem(art.torch_specs, sorted(art.names))
    if art.jax_nodes:
        return _jax_problem(art.jax_nodes)
    return None


def _adapter(name: str, loader: str) -> ModuleType | str:
    """The framework's treeclass adapter, imported and active, or why ``loader`` cannot run.

    As in any process that imports the framework, every class registered so far is then
    registered with it.
    """
    framework = framework_named(name)
    assert framework is not None  # (one of FRAMEWORKS)
    try:
        return adapter(framework)
    except ImportError as e:
        return f"{loader} needs {name}, which cannot be imported here ({e})"
    except TreeclassError as e:
        return f"{loader} cannot run here: {e}"


def _raised(e: Exception) -> str:
    """What an exception of a loader's says (a treeclass error's message is a sentence)."""
    if isinstance(e, TreeclassError):
        return str(e)
    return f"{type(e).__name__}: {_short(str(e), 500)}"


def held_by_treeclass(adapter: ModuleType | None, name: str) -> bool:
    """Whether the framework (its ``adapter``) loads ``name`` as treeclass's class of the name.

    Only then do inspect and ``schema check`` run the framework's loading callbacks on data
    from a file: a class another library registered under the name has its own code, which
    they never run on data they read.
    """
    known = node_for_name(name)
    if adapter is None or known is None:
        return False
    lookup: Any = getattr(adapter, "class_for_serialized_name")  # noqa: B009 (every adapter's)
    return lookup(name) is known.type


def _torch_problem(specs: list[tuple[str, str]], names: list[str]) -> str | None:
    import importlib

    active = _adapter("torch", "torch.export.load")
    if isinstance(active, str):
        return active
    foreign = [n for n in names if not held_by_treeclass(active, n)]
    if foreign:
        return (
            f"not checked: torch loads {_short(', '.join(foreign), 300)} with code that "
            "treeclass did not register (or with nothing), which inspect never runs on a file"
        )
    # The public module (above this one): what torch.export.load does with a spec's nodes.
    treespec_loads = importlib.import_module("treeclass.torch").treespec_loads
    for label, text in specs:
        try:
            treespec_loads(text)
        except Exception as e:  # the user's classes' code runs too: report what it raised
            return f"the {label}: {_raised(e)}"
    return None


class _Input:
    """A placeholder leaf: one per child of a rebuilt jax.export node."""

    __slots__ = ()


def _jax_problem(nodes: list[tuple[str, str, bytes, int]]) -> str | None:
    active = _adapter("jax", "jax.export.deserialize")
    if isinstance(active, str):
        return active
    import jax.tree_util

    by_name: dict[str, Any] = active._export_registries()[1]
    for label, name, aux, k in nodes:
        entry = by_name.get(name)
        where = f"the {label}: the node {_short(name, 200)!r}"
        if entry is None:
            return (
                f"{where} names no class registered with jax.export in this process; import "
                "the module that registers it (--import MODULE)"
            )
        cls, deserialize_auxdata, from_children = entry
        if not held_by_treeclass(active, name):
            continue  # registered with jax.export by other code: inspect runs none of it
        inputs = [_Input() for _ in range(k)]
        try:
            built = from_children(deserialize_auxdata(aux), inputs)
            leaves = jax.tree_util.tree_leaves(built)
        except Exception as e:  # the user's classes' code runs too: report what it raised
            return f"{where}: {_raised(e)}"
        if len(leaves) != k or any(a is not b for a, b in zip(leaves, inputs)):
            return (
                f"{where} loads as {qualname(cls)} with {len(leaves)} "
                f"leaves below it where the serialized function takes {k} (a field added to "
                "the class since with a default other than None is a new input of the "
                "compiled program); export it again with the class as it is now, or load it "
                "with the class as it was"
            )
    return None
