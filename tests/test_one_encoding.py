"""One contract for ``tc.save`` and ``treeclass.orbax``: the same scalar leaves, the same dtypes.

Scalar leaves: both accept exactly the same leaf types and write the same JSON value for each
(``treeclass._io.scalars``), exactly (``-0.0``, ``inf``, big ints), and refuse the same others.
Dtypes: every dtype of the one table (``treeclass._io.dtypes``) round-trips byte for byte through
``tc.save`` / ``tc.load`` where safetensors holds it, and through ``treeclass.orbax`` where
orbax stores it; the others are refused with a clear error.
"""

from __future__ import annotations

import enum
import json
import math
import re
import struct
from pathlib import Path
from typing import Any

import pytest

np = pytest.importorskip("numpy")
pytest.importorskip("ml_dtypes")

import treeclass as tc  # noqa: E402
from treeclass._io.dtypes import (  # noqa: E402
    DTYPES,
    FILE_DTYPES,
    ORBAX_DTYPES,
    SAFETENSORS_BITS,
    numpy_dtype,
)
from treeclass._io.files import ARRAY_LETTERS, LEAF_KINDS  # noqa: E402
from treeclass._io.scalars import SCALAR_TAGS, decode_scalar, encode_scalar  # noqa: E402


class Color(enum.IntEnum):
    RED = 1


SCALARS: list[Any] = [
    True,
    False,
    0,
    -7,
    2**53 - 1,
    2**53,
    -(2**53),
    -(2**200) + 3,
    10**4299,
    0.0,
    -0.0,
    1.5,
    1e-310,
    1.7976931348623157e308,
    float("inf"),
    float("-inf"),
    float("nan"),
    complex(-0.0, float("inf")),
    1 + 2j,
    "",
    "text é \u2603",
]
REFUSED: list[Any] = [b"bytes", Color.RED, object(), bytearray(b"x")]


def _bits(x: float) -> bytes:
    return struct.pack("<d", x)


def _same_value(a: Any, b: Any) -> bool:
    """Equal, and of the same type, to the bit for floats (``-0.0``; nan as nan)."""
    if type(a) is not type(b):
        return False
    if type(a) is float:
        return (math.isnan(a) and math.isnan(b)) or _bits(a) == _bits(b)
    if type(a) is complex:
        return _same_value(a.real, b.real) and _same_value(a.imag, b.imag)
    return bool(a == b)


def _file_values(path: Path) -> list[tuple[str, Any]]:
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
    ours = json.loads(header["__metadata__"]["treeclass.file"])
    tags = [LEAF_KINDS[c] for c in ours["kinds"] if c not in ARRAY_LETTERS]
    return list(zip(tags, ours["values"], strict=True))


# --- the encoding itself ----------------------------------------------------------------------


@pytest.mark.parametrize("value", SCALARS, ids=lambda v: f"{type(v).__name__}-{repr(v)[:16]}")
def test_every_scalar_round_trips_exactly_through_json(value: Any) -> None:
    encoded = encode_scalar(value, "x")
    assert encoded is not None
    tag, data = encoded
    assert tag == type(value).__name__ and tag in SCALAR_TAGS
    text = json.dumps(data, allow_nan=False)  # plain JSON: no NaN / Infinity literals
    assert _same_value(decode_scalar(tag, json.loads(text)), value)


def test_ints_are_bounded_like_the_rest_of_the_project() -> None:
    with pytest.raises(tc.TreeclassTypeError, match=r"the leaf at \['n'\].*4,300 decimal digits"):
        encode_scalar(10**4300, "['n']")
    assert encode_scalar(-(10**4300) + 1, "x") is not None
    with pytest.raises(ValueError, match="not an int"):
        decode_scalar("int", hex(10**4300))
    with pytest.raises(ValueError, match="not an int"):
        decode_scalar("int", "0X1F")  # not the canonical hex text
    with pytest.raises(ValueError, match="not an int"):
        decode_scalar("int", 2**53)  # a JSON number beyond what every reader holds exactly


@pytest.mark.parametrize(
    "text", ["0x0001", "0X1F", "12", "0x_1", "-0x", "--0x1", " 0x1", "0x1f", "-0x1"]
)
def test_statics_and_scalar_leaves_read_ints_alike(text: str) -> None:
    """One number codec (issue 28, item 2): non-canonical hex text is refused by both."""
    from treeclass._core.statics import BadStatic, decode_static

    wording = re.escape(repr(text)) + r" is not an int: a number in \(-2\*\*53, 2\*\*53\), or "
    with pytest.raises(ValueError, match=wording):
        decode_scalar("int", text)
    with pytest.raises(BadStatic, match=r'\{"int": \.\.\.\}: ' + wording):
        decode_static({"int": text})
    for n in (2**53, -(2**200) + 3, 10**4299):
        assert decode_static({"int": hex(n)}) == decode_scalar("int", hex(n)) == n
    for word in ("nan", "inf", "-inf"):
        assert _same_value(decode_static({"float": word}), decode_scalar("float", word))
    # An int beyond 2**53 is never written bare (hex() text instead): both refuse it bare.
    with pytest.raises(ValueError, match=r"is not an int"):
        decode_scalar("int", 2**60)
    with pytest.raises(BadStatic, match=r"is not an int"):
        decode_static(2**60)


@pytest.mark.parametrize(
    ("tag", "value", "match"),
    [
        ("float", 1, "not a float"),
        ("float", "0x1.8p+0", "not a float"),
        ("complex", [1.0], "not a complex"),
        ("bool", 1, "not a bool"),
        ("str", None, "not a str"),
        ("bytes", "eA==", "not a scalar type"),
    ],
)
def test_bad_encodings_are_refused(tag: str, value: Any, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        decode_scalar(tag, value)


# --- tc.save and treeclass.orbax agree --------------------------------------------------------


def test_tc_save_and_orbax_write_the_same_values(tmp_path: Path) -> None:
    pytest.importorskip("orbax.checkpoint")  # treeclass.orbax raises its own ImportError
    tco = pytest.importorskip("treeclass.orbax")
    tc.save(tmp_path / "f.safetensors", SCALARS)
    tco.save(tmp_path / "ckpt", SCALARS)
    from_file = _file_values(tmp_path / "f.safetensors")
    doc = json.loads((tmp_path / "ckpt" / tco.STRUCTURE_ITEM / "metadata").read_text())
    from_orbax = [next(iter(d.items())) for d in doc["leaves"]]
    # The same tags and the same JSON values, leaf for leaf (compared as JSON text: exact).
    assert json.dumps(from_file) == json.dumps(from_orbax)
    for loaded in (tc.load(tmp_path / "f.safetensors"), tco.restore(tmp_path / "ckpt")):
        assert len(loaded) == len(SCALARS)
        assert all(_same_value(a, b) for a, b in zip(loaded, SCALARS)), loaded


@pytest.mark.parametrize("value", REFUSED, ids=lambda v: type(v).__name__)
def test_tc_save_and_orbax_refuse_the_same_leaves(tmp_path: Path, value: Any) -> None:
    pytest.importorskip("orbax.checkpoint")  # treeclass.orbax raises its own ImportError
    tco = pytest.importorskip("treeclass.orbax")
    match = r"the leaf at \[0\] is a " + re.escape(f"{type(value).__module__}.")
    match += re.escape(type(value).__qualname__)
    with pytest.raises(tc.TreeclassTypeError, match=match):
        tc.save(tmp_path / "f.safetensors", [value])
    with pytest.raises(tc.TreeclassTypeError, match=match):
        tco.save(tmp_path / "ckpt", [value])


def test_tc_save_and_orbax_refuse_the_same_huge_int(tmp_path: Path) -> None:
    pytest.importorskip("orbax.checkpoint")  # treeclass.orbax raises its own ImportError
    tco = pytest.importorskip("treeclass.orbax")
    for save in (lambda t: tc.save(tmp_path / "f.safetensors", t), tco.save_args):
        with pytest.raises(tc.TreeclassTypeError, match=r"leaf at \[0\].*4,300 decimal digits"):
            save([10**4300])


# --- the one dtype table ----------------------------------------------------------------------


def _array(name: str) -> Any:
    """A (2, 4) array of ``name`` whose bytes are not all alike."""
    dtype = numpy_dtype(name)
    if name == "bool":
        return np.array([[True, False, True, True], [False, False, True, False]])
    values = np.array([[1, 0, 1, 1], [0, 1, 1, 0]], np.float32)
    if dtype.kind in "fcV" and "e8m0" not in name:  # floats (ml_dtypes' too: kind V)
        values = np.array([[1, 0, 2, -1.5], [0.5, 3, -2, 1]], np.float32)
    if "e8m0" in name:  # powers of two only
        values = np.array([[1, 2, 4, 8], [0.5, 16, 1, 2]], np.float32)
    if dtype.kind == "u" or (dtype.kind != "b" and name.startswith("uint")):
        values = np.abs(values)
    return values.astype(dtype)


def test_the_table_covers_every_safetensors_dtype() -> None:
    names = [row[0] for row in DTYPES]
    assert len(set(names)) == len(names)
    assert {row[2] for row in DTYPES if row[2] is not None} == set(SAFETENSORS_BITS)
    # What safetensors holds that numpy, JAX and torch cannot all hold: the float6 types.
    assert set(SAFETENSORS_BITS) - set(FILE_DTYPES) == {"F6_E2M3", "F6_E3M2"}


@pytest.mark.parametrize("row", DTYPES, ids=lambda row: row[0])
def test_every_dtype_of_the_table_round_trips_through_tc_save(tmp_path: Path, row: Any) -> None:
    name, _, code, _, _, _ = row
    arr = _array(name)
    assert arr.dtype == numpy_dtype(name) and arr.dtype.name == name
    path = tmp_path / "d.safetensors"
    if code not in FILE_DTYPES:
        with pytest.raises(tc.TreeclassTypeError, match=f"dtype {name}, which safetensors cannot"):
            tc.save(path, {"a": arr})
        return
    tc.save(path, {"a": arr})
    got = tc.load(path)["a"]
    assert got.dtype == arr.dtype and got.shape == arr.shape
    assert got.tobytes() == arr.tobytes()


@pytest.mark.parametrize("row", DTYPES, ids=lambda row: row[0])
def test_every_dtype_of_the_table_round_trips_through_orbax(tmp_path: Path, row: Any) -> None:
    pytest.importorskip("orbax.checkpoint")  # treeclass.orbax raises its own ImportError
    tco = pytest.importorskip("treeclass.orbax")
    name = row[0]
    arr = _array(name)
    if name not in ORBAX_DTYPES:
        with pytest.raises(tc.TreeclassTypeError, match=f"dtype {name}, which treeclass.orbax"):
            tco.save_args({"a": arr})
        return
    ts = pytest.importorskip("tensorstore")
    try:
        ts.dtype(name)
    except ValueError:  # a tensorstore older than the dtype (brought by an older orbax)
        with pytest.raises(tc.TreeclassTypeError, match=f"dtype {name}, which the installed"):
            tco.save(tmp_path / "ckpt", {"a": arr})
        assert not (tmp_path / "ckpt").exists()
        return
    tco.save(tmp_path / "ckpt", {"a": arr, "s": arr[0, 0]})
    got = tco.restore(tmp_path / "ckpt")
    assert type(got["a"]) is np.ndarray
    assert got["a"].dtype == arr.dtype and got["a"].shape == arr.shape
    assert got["a"].tobytes() == arr.tobytes()
    assert type(got["s"]) is type(arr[0, 0]) and got["s"].tobytes() == arr[0, 0].tobytes()
