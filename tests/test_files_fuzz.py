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
import json
import math
import random
import struct
import traceback
import tracemalloc
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

np = pytest.importorskip("numpy")
ml_dtypes = pytest.importorskip("ml_dtypes")
safetensors = pytest.importorskip("safetensors")
st_numpy = pytest.importorskip("safetensors.numpy")

import treeclass as tc  # noqa: E402
from treeclass._io.dtypes import SAFETENSORS_BITS  # noqa: E402

MUTATION_CASES = 8_000
HYPOTHESIS_EXAMPLES = 1_200
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


class Failures:
    def __init__(self, tmp: Path) -> None:
        self.path = tmp / "case.safetensors"
        self.cases = 0
        self.rejected = 0
        self.accepted = 0
        self.failures: list[str] = []

    def check(self, data: bytes, *, paths: Any = None, memory: bool = False) -> None:
        self.cases += 1
        self.path.write_bytes(data)
        if memory:
            tracemalloc.start()
        try:
            tree = tc.load(self.path, paths=paths)
        except tc.TreeclassError as e:
            self.rejected += 1
            if not isinstance(e, ValueError) or not str(e):
                self.failures.append(f"{data[:300]!r}: bad error {e!r}")
            self._metadata(data)
            return
        except BaseException as e:
            if isinstance(e, KeyboardInterrupt):
                raise
            self.failures.append(
                f"{data[:300]!r}\n{''.join(traceback.format_exception(e))[-1500:]}"
            )
            return
        finally:
            if memory:
                peak = tracemalloc.get_traced_memory()[1]
                tracemalloc.stop()
                if peak > 32 * len(data) + MEMORY_SLACK:
                    self.failures.append(f"{data[:300]!r}: peak memory {peak}, {len(data)} bytes")
        self.accepted += 1
        self._metadata(data)
        self._agrees_with_safetensors(data, tree, paths)

    def _metadata(self, data: bytes) -> None:
        try:
            tc.load_metadata(self.path)
        except tc.TreeclassError as e:
            if not isinstance(e, ValueError):
                self.failures.append(f"load_metadata: {e!r}")
        except BaseException as e:
            if isinstance(e, KeyboardInterrupt):
                raise
            self.failures.append(
                f"load_metadata {data[:300]!r}\n{''.join(traceback.format_exception(e))[-1500:]}"
            )

    def _agrees_with_safetensors(self, data: bytes, tree: Any, paths: Any) -> None:
        """What treeclass accepts, safetensors accepts, with the same bytes."""
        try:
            with safetensors.safe_open(self.path, framework="pt") as f:
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
            self.failures.append(
                f"accepted by treeclass, not by safetensors: {data[:300]!r}\n"
                f"{''.join(traceback.format_exception(e))[-1500:]}"
            )

    def report(self, label: str, record_property: Any, capsys: Any) -> None:
        with capsys.disabled():
            print(
                f"\n[fuzz] files {label}: {self.cases} cases, {self.rejected} rejected with a "
                f"TreeclassError, {self.accepted} accepted (and checked against safetensors)"
            )
        record_property(f"fuzz_cases_files_{label}", self.cases)
        assert not self.failures, (
            f"{len(self.failures)} of {self.cases} cases broke the loader's promise:\n\n"
            + "\n\n".join(self.failures[:5])
        )


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


def _containers(value: Any) -> list[Any]:
    out: list[Any] = []
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, list):
            out.append(v)
            stack.extend(v)
        elif isinstance(v, dict):
            out.append(v)
            stack.extend(v.values())
    return out


def _random_value(rng: random.Random) -> Any:
    return json.loads(json.dumps(rng.choice(_VALUES)))


def mutate_json(doc: Any, rng: random.Random) -> Any:
    """Edit a JSON value in place (and return it): one to three random edits anywhere."""
    for _ in range(rng.choice((1, 1, 2, 3))):
        conts = _containers(doc)
        if not conts:
            return _random_value(rng)
        c = rng.choice(conts)
        op = rng.randrange(6)
        if isinstance(c, list):
            if not c or op == 0:
                c.insert(rng.randrange(len(c) + 1), _random_value(rng))
            elif op == 1:
                del c[rng.randrange(len(c))]
            elif op == 2 and len(c) > 1:
                i, j = rng.randrange(len(c)), rng.randrange(len(c))
                c[i], c[j] = c[j], c[i]
            elif op == 3:
                i = rng.randrange(len(c))
                if type(c[i]) is int:
                    c[i] += rng.choice((-1, 1, 8, -8, 2**40))
                else:
                    c[i] = _random_value(rng)
            else:
                c[rng.randrange(len(c))] = _random_value(rng)
        else:
            keys = list(c)
            if not keys or op == 0:
                key = rng.choice(("dtype", "shape", "data_offsets", "path", "type", "x", "tensor"))
                c[key] = _random_value(rng)
            elif op == 1:
                del c[rng.choice(keys)]
            elif op == 2:
                k = rng.choice(keys)
                c[k + rng.choice(("x", "_", "#2"))] = c.pop(k)
            elif op == 3:
                k = rng.choice(keys)
                if type(c[k]) is int:
                    c[k] += rng.choice((-1, 1, 8, 2**40))
                else:
                    c[k] = _random_value(rng)
            else:
                c[rng.choice(keys)] = _random_value(rng)
    return doc


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
            header["__metadata__"] = _random_value(rng)
        else:
            header.pop("__metadata__", None)
    else:
        mutate_json(header, rng)
    if rng.random() < 0.1:
        body = body[: rng.randrange(len(body) + 1)] if rng.random() < 0.5 else body + b"\0" * 8
    return join(header, body, pad=rng.random() < 0.9)


def mutate_bytes(data: bytes, rng: random.Random) -> bytes:
    b = bytearray(data)
    op = rng.randrange(7)
    n = len(b)
    i = rng.randrange(n + 1)
    if op == 0:
        return bytes(b[:i])  # truncated
    if op == 1:
        for _ in range(rng.randrange(1, 4)):
            b[rng.randrange(n)] = rng.randrange(256)
        return bytes(b)
    if op == 2:
        return bytes(b[:i] + bytes(rng.randrange(256) for _ in range(rng.randrange(1, 9))) + b[i:])
    if op == 3:
        return bytes(b[:i] + b[i + rng.randrange(1, 16) :])
    if op == 4:  # the header length field lies
        size = struct.unpack("<Q", data[:8])[0]
        lie = rng.choice(
            (0, 1, 7, size - 1, size + 1, size + 8, n - 8, n, 2**63, 2**64 - 1, 100_000_001)
        )
        return struct.pack("<Q", max(0, min(lie, 2**64 - 1))) + data[8:]
    if op == 5:
        return data + bytes(rng.randrange(256) for _ in range(rng.randrange(1, 9)))
    # one byte of the header JSON replaced by a JSON-significant character
    size = struct.unpack("<Q", data[:8])[0]
    j = 8 + rng.randrange(max(size, 1))
    if j < n:
        b[j] = ord(rng.choice('{}[]",:0-9e\\ "\x00\xff'))
    return bytes(b)


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
def test_mutation_fuzz(tmp_path: Path, record_property: Any, capsys: Any) -> None:
    rng = random.Random(20260601)
    docs = corpus(tmp_path)
    f = Failures(tmp_path)
    for d in docs:
        f.check(d)  # the originals load
    assert f.accepted == len(docs), f.failures
    for d in hostile_cases():
        f.check(d, memory=True)
    while f.cases < MUTATION_CASES:
        d = rng.choice(docs)
        r = rng.random()
        case = mutate_header(d, rng) if r < 0.6 else mutate_bytes(d, rng)
        paths = None
        if rng.random() < 0.15:
            paths = rng.choice((lambda p: len(p) % 2 == 0, ["['w']"], ["[0]"], [""]))
        f.check(case, paths=paths, memory=f.cases % MEMORY_EVERY == 0)
    assert f.cases >= 5_000
    f.report("mutations", record_property, capsys)


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
def test_hypothesis_fuzz(tmp_path: Path, record_property: Any, capsys: Any) -> None:
    f = Failures(tmp_path)

    @settings(
        max_examples=HYPOTHESIS_EXAMPLES,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(
        st.binary(max_size=64)
        | st.tuples(headers, st.integers(0, 48), st.booleans()).map(
            lambda t: join(t[0], b"\x01" * t[1], pad=t[2])
        )
        | consistent_files()
    )
    def case(data: bytes) -> None:
        f.check(data)

    case()
    assert f.cases >= HYPOTHESIS_EXAMPLES
    f.report("hypothesis", record_property, capsys)
