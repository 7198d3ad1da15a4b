"""The one rule of key-path text (``_core/keys.py``): ``[0]``, ``['k']``, ``.name``.

``tc.keystr``, the key classes' ``str`` and the tensor names of ``tc.save`` files all follow it.
"""

from __future__ import annotations

import collections
import copy
import json
import pickle
import struct
from pathlib import Path
from typing import Any

import pytest

import treeclass as tc


@tc.pytree_dataclass(name="tests.key_paths.Pair")
class Pair:
    a: Any
    b: Any = None


KEYS = [tc.SequenceKey(3), tc.DictKey("k"), tc.DictKey((1, "x")), tc.GetAttrKey("a")]


@pytest.mark.parametrize("key", KEYS, ids=repr)
def test_key_classes_share_one_behaviour(key: Any) -> None:
    (field,) = key.__match_args__
    value = getattr(key, field)
    assert type(key).__module__ == "treeclass"
    assert repr(key) == f"{type(key).__name__}({field}={value!r})"
    assert pickle.loads(pickle.dumps(key)) == key and copy.deepcopy(key) == key
    assert hash(key) == hash(type(key)(value)) and key == type(key)(value)
    with pytest.raises(AttributeError, match="is immutable"):
        setattr(key, field, value)
    match key:
        case tc.SequenceKey(i):
            assert str(key) == f"[{i}]"
        case tc.DictKey(k):
            assert str(key) == f"[{k!r}]"
        case tc.GetAttrKey(name):
            assert str(key) == f".{name}"


def test_keystr_simple_writes_bare_keys() -> None:
    path = (tc.DictKey("k"), tc.SequenceKey(0), tc.GetAttrKey("x"), "raw")
    assert tc.keystr(path) == "['k'][0].xraw"
    assert tc.keystr(path, simple=True, separator="/") == "k/0/x/raw"


def _tensor_names(path: Path) -> list[str]:
    data = path.read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    return sorted(k for k in json.loads(data[8 : 8 + n]) if k != "__metadata__")


def test_tensor_names_are_the_leaves_keystrs(tmp_path: Path) -> None:
    np = pytest.importorskip("numpy")
    tree = {
        "it's": [np.zeros(1), Pair(np.ones(1))],
        7: (np.zeros(2),),
        (1, "x"): np.zeros(3),
        float("nan"): np.zeros(1),
        None: {True: np.ones(1)},
    }
    tc.save(tmp_path / "t.safetensors", tree)
    pairs, _ = tc.tree_flatten_with_path(tree)
    paths = [tc.keystr(p) for p, _ in pairs]
    assert "[None][True]" in paths and '["it\'s"][1].a' in paths
    assert _tensor_names(tmp_path / "t.safetensors") == sorted(paths)
    got = tc.load(tmp_path / "t.safetensors", paths=["[(1, 'x')]"])
    assert got[(1, "x")].shape == (3,) and got[7] == (None,)


@pytest.mark.threads
def test_positions_keys_are_right_past_the_kept_ones_and_across_threads() -> None:
    # The keys of the first positions are made once and shared; threads that need more of
    # them at once each get (and keep) the right ones.
    import threading

    from treeclass._core import keys

    keys._sequence_keys = ()
    wrong: list[int] = []

    def walk(n: int) -> None:
        for size in (n, 3 * n, 2000, 5):
            paths = [p for p, _ in tc.tree_leaves_with_path(list(range(size)))]
            if paths != [(tc.SequenceKey(i),) for i in range(size)]:
                wrong.append(size)

    threads = [threading.Thread(target=walk, args=(n,)) for n in (10, 100, 300, 700)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert wrong == []
    assert keys._sequence_keys == tuple((tc.SequenceKey(i),) for i in range(1024))


def test_dict_keys_in_paths_are_the_mappings_own_key_objects() -> None:
    # Keys of mappings seen before are made once; equal keys of another type (1, True, 1.0)
    # or other objects with the same value get their own.
    for d in ({1: "a", "b": 2}, {True: "a", "b": 2}, {1.0: "a", "b": 2}, {1: "a", "b": 2}):
        [(first, _), (second, _)] = tc.tree_leaves_with_path(collections.OrderedDict(d))
        assert [type(first[0].key), second[0].key] == [type(next(iter(d))), "b"]
    big = {i: i for i in range(300)}  # (more keys than are kept)
    assert [p[0].key for p, _ in tc.tree_leaves_with_path(big)] == list(range(300))


def test_mapping_keys_never_run_a_key_s_own_eq() -> None:
    # Key paths of dicts whose keys are equal but not the same objects: no key's __eq__ runs.
    class Key:
        def __init__(self, n: int) -> None:
            self.n = n

        def __hash__(self) -> int:
            return hash(self.n)

        def __lt__(self, other: Key) -> bool:
            return self.n < other.n

        def __eq__(self, other: object) -> bool:
            if self is other:
                return True
            raise AssertionError("a key's __eq__ ran")

    for _ in range(3):
        key = Key(1)
        assert tc.tree_flatten_with_path({key: 1.0})[0] == [((tc.DictKey(key),), 1.0)]
