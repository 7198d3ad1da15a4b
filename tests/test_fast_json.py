"""The fast JSON path of loading (issue 18): C-speed parsing, duplicate keys found by count.

``treeclass._core.json.loads_checked`` parses without per-object hooks, so a duplicate key
collapses; each reader counts the members of the objects it checked and the ``:`` in their
strings and compares with the ``:`` of the text (``no_duplicates``). These tests pin that
every reader still refuses duplicate keys wherever they are -- also when strings hold ``:``
(which the count must not confuse with members), or an escape that may stand for one -- and
that the writers' hand-made canonical JSON is what ``dumps_canonical`` writes.
"""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path
from typing import Any

import pytest

import treeclass as tc
from treeclass._core.json import census, dumps_canonical, loads_checked, no_duplicates
from treeclass._io.safetensors import read_header

np = pytest.importorskip("numpy")


@tc.pytree_dataclass(name="tests.fast_json.Tagged")
class Tagged:
    x: Any
    tag: str = tc.field(static=True, default="cuda:0")


# --- the primitive ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "duplicated"),
    [
        ('{"a": 1, "b": {"c": [1, {"d": 2}]}}', False),
        ('{"a": 1, "a": 2}', True),
        ('{"a": "x:y", "a": 1}', True),  # a colon in a string does not hide the duplicate
        ('{"a:b": 1, "c": ["::"]}', False),
        ('[{"k": 1}, {"k": 1, "k": 1}]', True),
        ('{"a": {"b": 1, "b": {"c": ":"}}}', True),
    ],
)
def test_census_finds_exactly_the_dropped_keys(text: str, duplicated: bool) -> None:
    value = json.loads(text)  # (the last of duplicate keys wins, as in the C parser)
    assert no_duplicates(text.count(":"), *census(value)) is not duplicated
    if duplicated:
        with pytest.raises(ValueError, match="appears twice"):
            _parse(text)
    else:
        assert _parse(text) == value


def _parse(text: str) -> Any:
    def refuse(e: ValueError) -> Exception:
        return e

    return loads_checked(text, lambda v: (v, *census(v)), refuse)


def test_an_escape_that_may_be_a_colon_is_parsed_strictly() -> None:
    with pytest.raises(ValueError, match="twice"):
        _parse('{"a\\u003a": 1, "a\\u003a": 2}')
    assert _parse('{"a\\u003A": 1}') == {"a:": 1}


def test_without_pythons_digit_limit_long_ints_are_still_refused() -> None:
    old = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)
    try:
        with pytest.raises(ValueError, match="5000 digits is longer than 4300"):
            _parse("[" + "9" * 5000 + "]")
        assert _parse("[" + "9" * 4300 + "]") == [int("9" * 4300)]
    finally:
        sys.set_int_max_str_digits(old)
    with pytest.raises(ValueError, match="5000 digits is longer than 4300"):
        _parse("[" + "9" * 5000 + "]")  # Python's refusal, reworded


# --- treespec documents ---------------------------------------------------------------------------


def _doc() -> str:
    text = tc.treespec_dumps(tc.tree_structure([Tagged(1.0), Tagged(2.0, tag="a:b")]))
    assert '"tag":"cuda:0"' in text and '"tag":"a:b"' in text
    return text


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ('"tag":"cuda:0"', '"tag":"cuda:0","tag":"cuda:0"'),  # the same value twice
        ('"tag":"a:b"', '"tag":"a","tag":"b"'),
        ('{"data":["x"]', '{"data":["x"],"data":["x"]'),
        ('"leaves":2', '"leaves":2,"leaves":2'),
    ],
)
def test_treespec_loads_refuses_duplicate_keys_among_colons(old: str, new: str) -> None:
    text = _doc()
    tampered = text.replace(old, new, 1)
    assert tampered != text
    json.loads(tampered)  # valid JSON, which json.loads lets through
    with pytest.raises(tc.TreespecLoadError, match="twice"):
        tc.treespec_loads(tampered)
    with pytest.raises(tc.TreespecLoadError, match="twice"):
        tc.treespec_loads(tampered.encode())


def test_treespec_loads_of_documents_with_colons_and_escapes() -> None:
    spec = tc.tree_structure([Tagged(1.0), Tagged(2.0, tag="a:b"), {"k:\u00e9": 1}])
    text = tc.treespec_dumps(spec)
    assert tc.treespec_loads(text) == spec
    escaped = text.replace("a:b", "a\\u003ab")  # the same document, one colon escaped
    assert tc.treespec_loads(escaped) == spec


# --- files ----------------------------------------------------------------------------------------


def _file(path: Path, header_text: str, data: bytes) -> None:
    raw = header_text.encode()
    raw += b" " * (-len(raw) % 8)
    path.write_bytes(len(raw).to_bytes(8, "little") + raw + data)


def _saved(tmp_path: Path) -> tuple[Path, str, bytes]:
    path = tmp_path / "t.safetensors"
    tc.save(path, {"w": np.arange(3, dtype=np.float32), "t": Tagged(2, tag="a:b"), "s": "x:y"})
    blob = path.read_bytes()
    n = int.from_bytes(blob[:8], "little")
    return path, blob[8 : 8 + n].decode().rstrip(), blob[8 + n :]


def test_a_duplicate_tensor_entry_in_the_header_is_refused(tmp_path: Path) -> None:
    path, header, data = _saved(tmp_path)
    doc = json.loads(header)
    entry = json.dumps(doc["['w']"], separators=(",", ":"))
    key = json.dumps("['w']")
    assert f"{key}:{entry}" in header
    _file(path, header.replace(f"{key}:{entry}", f"{key}:{entry},{key}:{entry}"), data)
    with pytest.raises(tc.FileLoadError, match="twice"):
        tc.load(path)
    with pytest.raises(tc.FileLoadError, match="twice"):
        tc.load_metadata(path)


@pytest.mark.parametrize("entry", ["treeclass.file", "treeclass.treespec"])
def test_duplicate_keys_inside_treeclass_entries_are_refused(tmp_path: Path, entry: str) -> None:
    path, header, data = _saved(tmp_path)
    doc = json.loads(header)
    inner = doc["__metadata__"][entry]
    old = '"format":' if entry == "treeclass.file" else '"tag":"a:b"'
    tampered = inner.replace(old, '"format":"x",' + old if old == '"format":' else old + "," + old)
    assert tampered != inner
    json.loads(tampered)
    doc["__metadata__"][entry] = tampered
    _file(path, json.dumps(doc, separators=(",", ":")), data)
    with pytest.raises((tc.FileLoadError, tc.TreespecLoadError), match="twice"):
        tc.load(path)


def test_files_with_colons_everywhere_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "c.safetensors"
    tree = {"a:b": np.ones(2, np.float32), "c": Tagged("x:y", tag="p:q"), "d:": [1.5, "::"]}
    tc.save(path, tree, metadata={"note": "k:v", "k:": '{"a":1}'})
    back = tc.load(path)
    assert back["c"] == Tagged("x:y", tag="p:q") and back["d:"] == [1.5, "::"]
    assert back["a:b"].tolist() == [1.0, 1.0]
    assert tc.load_metadata(path) == {"note": "k:v", "k:": '{"a":1}'}


# --- the writers ----------------------------------------------------------------------------------


def test_the_leaf_list_is_canonical_json(tmp_path: Path) -> None:
    path = tmp_path / "leaves.safetensors"
    tree = {
        "f": [1.5, -0.0, math.inf, -math.inf, math.nan, 1e-7, 1e300],
        "i": [0, -7, 2**53 - 1, 2**53, -(2**60)],
        "b": [True, False],
        "s": ["", 'q"\\', "\u00e9\u2028", "\x01"],
        "z": [1 + 2j, complex(math.inf, -0.0)],
        "a": np.ones(2, np.float32),
        "\u00e9 key": np.float32(3),
    }
    tc.save(path, tree)
    with open(path, "rb") as f:
        text = read_header(f, "x").metadata["treeclass.file"]
    assert text == dumps_canonical(json.loads(text))
    back = tc.load(path)
    assert back["i"] == tree["i"] and back["b"] == tree["b"] and back["s"] == tree["s"]
    assert [repr(x) for x in back["f"]] == [repr(x) for x in tree["f"]]
    only_numbers = {f"m{i}": (i / 3 if i % 2 else i) for i in range(50)}
    tc.save(path, only_numbers)  # the all-numbers path of the scalar encoder
    with open(path, "rb") as f:
        text = read_header(f, "x").metadata["treeclass.file"]
    assert text == dumps_canonical(json.loads(text))
    assert tc.load(path) == only_numbers


def test_the_writer_resumes_partial_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = os.writev
    calls = [0]

    def stingy(fd: int, buffers: Any) -> int:  # at most 7 bytes of the first buffer a call
        calls[0] += 1
        first = bytes(memoryview(buffers[0]).cast("B"))[:7]
        return real(fd, [first])

    monkeypatch.setattr(os, "writev", stingy)
    path = tmp_path / "p.safetensors"
    tree = {f"a{i}": np.arange(i, dtype=np.float32) for i in range(20)}  # empty ones too
    tc.save(path, tree)
    monkeypatch.undo()
    assert calls[0] > 20
    back = tc.load(path)
    assert all(back[k].tolist() == v.tolist() for k, v in tree.items())
