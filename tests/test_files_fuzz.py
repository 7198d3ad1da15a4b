"""Fuzzing ``tc.load``: every malformed or hostile file is a TreeclassError, never anything else.

Two sources of inputs, both deterministic (the same cases on every run):

- a seeded mutation loop over valid files written by ``tc.save`` and by the safetensors
  library: byte edits (truncation, flips, insertions, deletions, appended data), header length
  fields that lie, and structural edits of the parsed header re-serialized with a correct
  length -- dtypes, shapes and offsets that lie, overlapping and missing tensors, renamed and
  duplicated keys, non-string metadata, and edits of treeclass's own metadata (the leaf list,
  the embedded treespec document, key paths that disagree with the structure);
- Hypothesis (``derandomize=True``) drawing raw bytes and headers of the right overall shape.

A case passes if ``tc.load`` (and ``tc.load_metadata``) raise a :class:`treeclass.TreeclassError`
that is a ``ValueError``, or succeed -- and then the safetensors library must accept the file
too, with the same tensor bytes (treeclass is never more lenient than safetensors). A sample of
cases runs under ``tracemalloc``: memory stays proportional to the file. The number of cases is
printed and recorded (``record_property``).
"""

from __future__ import annotations

import collections
import importlib.util
import json
import math
import random
import struct
import tracemalloc
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from _budget import cases
from _mutate import (
    JsonMutator,
    Splicer,
    Tally,
    append,
    delete,
    flip,
    insert,
    random_bytes,
    run_hypothesis,
    truncate,
    write_case,
)
from hypothesis import strategies as st

np = pytest.importorskip("numpy")
ml_dtypes = pytest.importorskip("ml_dtypes")
safetensors = pytest.importorskip("safetensors")
st_numpy = pytest.importorskip("safetensors.numpy")
# safetensors reads the shapes of every dtype (bf16, float8 too) with either; "pt" imports torch
# here, before any measured load, where torch is installed (CI's Python matrix has none).
_SAFETENSORS_FRAMEWORK = "pt" if importlib.util.find_spec("torch") else "numpy"

import treeclass as tc  # noqa: E402
from treeclass._io.dtypes import SAFETENSORS_BITS  # noqa: E402

MUTATION_CASES = cases(8_000)
HYPOTHESIS_EXAMPLES = cases(1_200)
MEMORY_EVERY = 40  # one case in this many runs under tracemalloc
MEMORY_SLACK = 2_000_000  # bytes allowed beyond 32x the file size (interpreter noise)


@tc.pytree_dataclass(name="tests.files_fuzz.Out")
class Out:
    logits: Any
    loss: Any = None
    step: int = 0
    mode: str = tc.field(static=True, default="eval")


class Pt(NamedTuple):
    x: Any
    y: Any


tc.register_namedtuple(Pt, name="tests.files_fuzz.Pt")


def corpus(tmp: Path) -> list[bytes]:
    """Valid files: from tc.save (every leaf kind) and from safetensors itself."""
    trees: list[Any] = [
        {"w": np.arange(6, dtype=np.float32).reshape(2, 3), "n": 3},
        Out(np.ones((2, 2), ml_dtypes.bfloat16), step=-(2**60), mode="x"),
        [Pt(np.int8(3), "s"), (1.5, math.nan, True), None, np.zeros(0, np.int16)],
        collections.OrderedDict([("b", np.array([1, 2], np.uint64)), ("a", [np.float16(1)])]),
        {1: np.zeros(4, ml_dtypes.float4_e2m1fn), (2, "t"): np.ones(3, ml_dtypes.float8_e4m3fn)},
        np.array(7.0),
        {"only": "scalars", "x": [1, 2.5, False]},
    ]
    out: list[bytes] = []
    for i, tree in enumerate(trees):
        path = tmp / f"c{i}.safetensors"
        tc.save(path, tree, metadata={"user": "meta"} if i % 2 else None)
        out.append(path.read_bytes())
    plain = tmp / "plain.safetensors"
    st_numpy.save_file(
        {"a": np.ones(3, np.float32), "b.c": np.arange(4, dtype=np.int64)}, plain, {"format": "np"}
    )
    out.append(plain.read_bytes())
    return out


def split(data: bytes) -> tuple[dict[str, Any], bytes]:
    n = struct.unpack("<Q", data[:8])[0]
    return json.loads(data[8 : 8 + n]), data[8 + n :]


def join(header: Any, body: bytes, *, pad: bool = True) -> bytes:
    raw = json.dumps(header, separators=(",", ":")).encode("utf-8", "surrogatepass")
    if pad:
        raw += b" " * (-len(raw) % 8)
    return struct.pack("<Q", len(raw)) + raw + body


# --- the check every case goes through --------------------------------------------------------


class Checker:
    """Loads each file; a loaded file must load in safetensors too, with the same bytes."""

    def __init__(self, tmp: Path, label: str) -> None:
        self.path = tmp / "case.safetensors"
        self.tally = Tally(
            "fuzz",
            f"files {label}",
            refusal="a TreeclassError",
            accepted="and checked against safetensors",
            record=f"fuzz_cases_files_{label}",
        )

    def check(self, data: bytes, *, paths: Any = None, memory: bool = False) -> None:
        write_case(self.path, data)
        if memory:
            tracemalloc.start()
        loaded, tree = self.tally.attempt(
            lambda: tc.load(self.path, paths=paths), data, tc.TreeclassError
        )
        if memory:
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            if peak > 32 * len(data) + MEMORY_SLACK:
                self.tally.fail(data, f"peak memory {peak}, {len(data)} bytes")
        if loaded or tree is not None:  # refused or accepted, not broken
            self._metadata(data)
        if loaded:
            self._agrees_with_safetensors(data, tree, paths)

    def _metadata(self, data: bytes) -> None:
        try:
            tc.load_metadata(self.path)
        except tc.TreeclassError as e:
            if not isinstance(e, ValueError):
                self.tally.fail(data, f"load_metadata: {e!r}", "load_metadata")
        except BaseException as e:
            if isinstance(e, KeyboardInterrupt):
                raise
            self.tally.fail(data, e, "load_metadata")

    def _agrees_with_safetensors(self, data: bytes, tree: Any, paths: Any) -> None:
        """What treeclass accepts, safetensors accepts, with the same bytes."""
        try:
            with safetensors.safe_open(self.path, framework=_SAFETENSORS_FRAMEWORK) as f:
                names = f.keys()
                raw = {n: f.get_slice(n) for n in names}
                shapes = {n: list(raw[n].get_shape()) for n in names}
            header, body = split(data)
            for name, info in header.items():
                if name == "__metadata__":
                    continue
                assert shapes[name] == info["shape"], (name, shapes[name], info["shape"])
            if not any(k.startswith("treeclass.") for k in header.get("__metadata__") or {}):
                as_numpy = tc.load(self.path, to="numpy")
                for name, info in header.items():
                    if name == "__metadata__" or info["dtype"] == "F4":
                        continue  # numpy holds float4 unpacked, one value a byte
                    b, e = info["data_offsets"]
                    assert as_numpy[name].tobytes() == body[b:e], name
        except Exception as e:
            self.tally.fail(data, e, "accepted by treeclass, not by safetensors")


# --- mutations --------------------------------------------------------------------------------

_VALUES: list[Any] = [
    None,
    True,
    0,
    1,
    -1,
    7,
    2**31,
    2**63,
    2**64,
    10**30,
    1.5,
    "",
    "x",
    "F32",
    "BF16",
    "F4",
    "F6_E2M3",
    "C128",
    "numpy",
    "torch",
    "jax",
    "numpy-scalar",
    "int",
    "float",
    "str",
    "bool",
    "nan",
    "0x10",
    "['w']",
    "['a']",
    ".logits",
    "treeclass.file",
    [],
    [0],
    [0, 0],
    [0, 4],
    [4, 0],
    [1, 2, 3],
    [2**62, 2**62],
    [0, 2**63],
    {},
    {"dtype": "U8", "shape": [0], "data_offsets": [0, 0]},
    {"path": "['w']", "type": "numpy", "tensor": "['w']"},
    {"path": "['n']", "type": "int", "value": 3},
]


MUTATOR = JsonMutator(
    _VALUES,
    new_keys=("dtype", "shape", "data_offsets", "path", "type", "x", "tensor"),
    suffixes=("x", "_", "#2"),
    list_nudges=(-1, 1, 8, -8, 2**40),
    dict_nudges=(-1, 1, 8, 2**40),
)
mutate_json = MUTATOR.mutate


def mutate_header(data: bytes, rng: random.Random) -> bytes:
    """Edit the parsed header (tensors, metadata, our embedded JSON) and write it back."""
    header, body = split(data)
    meta = header.get("__metadata__") or {}
    r = rng.random()
    if r < 0.3 and "treeclass.file" in meta:
        ours = json.loads(meta["treeclass.file"])
        meta["treeclass.file"] = json.dumps(mutate_json(ours, rng))
    elif r < 0.45 and "treeclass.treespec" in meta:
        spec = json.loads(meta["treeclass.treespec"])
        meta["treeclass.treespec"] = json.dumps(mutate_json(spec, rng))
    elif r < 0.55:
        choice = rng.randrange(4)
        if choice == 0:
            meta.pop(rng.choice(sorted(meta)) if meta else "x", None)
        elif choice == 1:
            meta[rng.choice(("treeclass.x", "treeclass.file", "format", "k"))] = rng.choice(
                ("", "{}", "[]", "pt", '{"format":"treeclass.file"}')
            )
        elif choice == 2:
            header["__metadata__"] = MUTATOR.value(rng)
        else:
            header.pop("__metadata__", None)
    else:
        mutate_json(header, rng)
    if rng.random() < 0.1:
        body = body[: rng.randrange(len(body) + 1)] if rng.random() < 0.5 else body + b"\0" * 8
    return join(header, body, pad=rng.random() < 0.9)


def _lying_length(data: bytes, rng: random.Random, i: int, j: int | None) -> bytes:
    """The header length field lies."""
    size, n = struct.unpack("<Q", data[:8])[0], len(data)
    lie = rng.choice(
        (0, 1, 7, size - 1, size + 1, size + 8, n - 8, n, 2**63, 2**64 - 1, 100_000_001)
    )
    return struct.pack("<Q", max(0, min(lie, 2**64 - 1))) + data[8:]


def _header_char(data: bytes, rng: random.Random, i: int, j: int | None) -> bytes:
    """One byte of the header JSON replaced by a JSON-significant character."""
    size = struct.unpack("<Q", data[:8])[0]
    k = 8 + rng.randrange(max(size, 1))
    if k >= len(data):
        return data
    return data[:k] + rng.choice('{}[]",:0-9e\\ "\x00\xff').encode("latin-1") + data[k + 1 :]


mutate_bytes = Splicer(
    (
        truncate,
        flip,
        insert(random_bytes(1, 9)),
        delete(16),
        _lying_length,
        append(lambda rng, data: random_bytes(1, 9)(rng)),
        _header_char,
    )
)


def hostile_cases() -> list[bytes]:
    """Fixed families, once each in every run."""

    def header_bytes(text: bytes, body: bytes = b"") -> bytes:
        return struct.pack("<Q", len(text)) + text + body

    t = {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}
    empty = {"dtype": "F32", "shape": [0, 2**63], "data_offsets": [0, 0]}
    cases = [
        b"",
        b"\x00" * 7,
        b"\x00" * 8,
        struct.pack("<Q", 2**63) + b"{}",
        struct.pack("<Q", 100_000_001) + b"{}" + b" " * 100,
        header_bytes(b"[" * 200_000),
        header_bytes(b'{"a":' * 100_000),
        header_bytes(b"\xff\xfe{}"),
        header_bytes(b" {}"),
        header_bytes(b'{"a":' + json.dumps(t).encode() + b',"a":' + json.dumps(t).encode() + b"}"),
        header_bytes(json.dumps({"a": t, "b": t}).encode(), b"\0" * 8),  # overlap
        header_bytes(json.dumps({"a": {**t, "shape": [2**62, 2**62]}}).encode(), b"\0" * 8),
        header_bytes(json.dumps({"a": {**t, "shape": [0, 2**63]}}).encode()[:-1] + b"}"),
        header_bytes(json.dumps({"a": empty}).encode()),
        header_bytes(json.dumps({"a": {**t, "dtype": "F4", "shape": [3]}}).encode(), b"\0" * 8),
        header_bytes(json.dumps({"a": {**t, "shape": [1.0, 2]}}).encode(), b"\0" * 8),
        header_bytes(json.dumps({"a": {**t, "data_offsets": [8, 16]}}).encode(), b"\0" * 16),
        header_bytes(json.dumps({"__metadata__": {"treeclass.file": "{}"}}).encode()),
        header_bytes(json.dumps({"__metadata__": {"k": 1}}).encode()),
        header_bytes(b'{"a":{"dtype":"F32","shape":[NaN],"data_offsets":[0,8]}}', b"\0" * 8),
        header_bytes(b'{"a":{"dtype":"F32","shape":[' + b"9" * 5000 + b'],"data_offsets":[0,8]}}'),
    ]
    return cases


@pytest.mark.slow
@pytest.mark.fuzz
def test_mutation_fuzz(tmp_path: Path, record_property: Any, capsys: Any) -> None:
    rng = random.Random(20260601)
    docs = corpus(tmp_path)
    f = Checker(tmp_path, "mutations")
    for d in docs:
        f.check(d)  # the originals load
    assert f.tally.accepted == len(docs), f.tally.failures
    for d in hostile_cases():
        f.check(d, memory=True)
    while f.tally.total < MUTATION_CASES:
        d = rng.choice(docs)
        r = rng.random()
        case = mutate_header(d, rng) if r < 0.6 else mutate_bytes(d, rng)
        paths = None
        if rng.random() < 0.15:
            paths = rng.choice((lambda p: len(p) % 2 == 0, ["['w']"], ["[0]"], [""]))
        f.check(case, paths=paths, memory=f.tally.total % MEMORY_EVERY == 0)
    f.tally.report(record_property, capsys)


# --- hypothesis -------------------------------------------------------------------------------

dtypes = st.sampled_from(sorted(SAFETENSORS_BITS)) | st.text(max_size=4)
tensor_infos = st.fixed_dictionaries(
    {
        "dtype": dtypes,
        "shape": st.lists(st.integers(-1, 5), max_size=3),
        "data_offsets": st.lists(st.integers(-1, 40), min_size=0, max_size=3),
    }
)
leaf_entries = st.fixed_dictionaries(
    {
        "path": st.sampled_from(["['a']", "['b']", "[0]", ""]),
        "type": st.sampled_from(["numpy", "torch", "jax", "numpy-scalar", "int", "str", "x"]),
    },
    optional={
        "tensor": st.sampled_from(["['a']", "['b']", "a"]),
        "value": st.none() | st.integers() | st.text(max_size=3) | st.booleans(),
    },
)
metadata = st.fixed_dictionaries(
    {},
    optional={
        "treeclass.file": st.fixed_dictionaries(
            {
                "format": st.just("treeclass.file"),
                "version": st.integers(0, 2),
                "leaves": st.lists(leaf_entries, max_size=3),
            }
        ).map(json.dumps)
        | st.text(max_size=5),
        "treeclass.treespec": st.sampled_from(
            [
                tc.treespec_dumps(tc.tree_structure({"a": 1, "b": 2})),
                tc.treespec_dumps(tc.tree_structure([1])),
                tc.treespec_dumps(tc.tree_structure(Out(1))),
                "{}",
            ]
        ),
        "format": st.sampled_from(["pt", "np", "flax", "x"]),
    },
)
headers = st.fixed_dictionaries(
    {},
    optional={
        "__metadata__": metadata,
        "a": tensor_infos,
        "['a']": tensor_infos,
        "['b']": tensor_infos,
    },
)


@st.composite
def consistent_files(draw: Any) -> bytes:
    """Headers whose tensors tile the data (then sometimes nudged), with matching data."""
    names = draw(st.lists(st.sampled_from(["['a']", "['b']", "a", "[0]", ""]), unique=True))
    header: dict[str, Any] = {}
    meta = draw(metadata)
    if meta:
        header["__metadata__"] = meta
    at = 0
    for name in names:
        dtype = draw(st.sampled_from(sorted(SAFETENSORS_BITS)))
        shape = draw(st.lists(st.integers(0, 4), max_size=3))
        n = math.prod(shape) * SAFETENSORS_BITS[dtype]
        size = n // 8 + draw(st.sampled_from([0, 0, 0, 0, 1, -1]))
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [at, at + size]}
        at += size
    extra = draw(st.sampled_from([0, 0, 0, 1, -1]))
    return join(header, b"\x3c" * max(0, at + extra), pad=draw(st.booleans()))


@pytest.mark.slow
@pytest.mark.fuzz
def test_hypothesis_fuzz(tmp_path: Path, record_property: Any, capsys: Any) -> None:
    f = Checker(tmp_path, "hypothesis")
    files = (
        st.binary(max_size=64)
        | st.tuples(headers, st.integers(0, 48), st.booleans()).map(
            lambda t: join(t[0], b"\x01" * t[1], pad=t[2])
        )
        | consistent_files()
    )
    run_hypothesis(files, HYPOTHESIS_EXAMPLES, f.check)
    assert f.tally.total >= HYPOTHESIS_EXAMPLES
    f.tally.report(record_property, capsys)
