"""Files of every treeclass file version still load (fixtures written by earlier releases)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

import treeclass as tc

np = pytest.importorskip("numpy")

DATA = Path(__file__).parent / "data"


def test_a_version_1_file_loads() -> None:
    # tests/data/v1_file.safetensors was written by tc.save before file version 2 (the leaf
    # list of {"path", "type", "tensor" | "value"} entries).
    path = DATA / "v1_file.safetensors"
    tree = tc.load(path)
    assert sorted(tree) == ["cfg", "ids", "pair", "scale", "w"]
    np.testing.assert_array_equal(tree["w"], np.arange(6, dtype=np.float32).reshape(2, 3))
    assert tree["w"].dtype == np.float32
    np.testing.assert_array_equal(tree["ids"], np.array([1, -2, 3], dtype=np.int64))
    assert tree["scale"] == 0.5 and isinstance(tree["scale"], np.float64)
    cfg = tree["cfg"]
    assert cfg["step"] == 7 and cfg["big"] == 2**70 and cfg["lr"] == 1e-3
    assert math.copysign(1.0, cfg["neg0"]) == -1.0 and cfg["inf"] == math.inf
    assert cfg["z"] == complex(1.5, -2.0) and cfg["name"] == "run:1" and cfg["done"] is True
    assert cfg["none"] is None
    ones, rest = tree["pair"]
    np.testing.assert_array_equal(ones, np.ones(2, np.uint8))
    assert rest == [3, 2.5]
    assert tc.load_metadata(path) == {"run": "a1"}
    part = tc.load(path, paths=["['pair']"])
    assert part["w"] is None and part["pair"][1] == [3, 2.5]
