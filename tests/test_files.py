"""``tc.save`` / ``tc.load`` / ``tc.load_metadata``: portable pytree files (safetensors).

Round trips in every class kind, every dtype safetensors holds, every pair of frameworks,
selective loading (reading only the selected bytes), interoperability with the safetensors
library both ways, the error for each bad input, and a fresh-process load where the classes
live in a module of another name than at save time. Malformed and hostile files are fuzzed in
``tests/test_files_fuzz.py``.
"""

from __future__ import annotations

import collections
import dataclasses
import importlib.util
import itertools
import json
import math
import struct
import sys
import typing
from pathlib import Path
from typing import Any, NamedTuple

import _subproc
import pytest
from _subproc import report_in

np = pytest.importorskip("numpy")
ml_dtypes = pytest.importorskip("ml_dtypes")

import treeclass as tc  # noqa: E402
import treeclass._io.files as files_module  # noqa: E402
import treeclass._io.safetensors as safetensors_module  # noqa: E402
from treeclass._io.dtypes import max_dims  # noqa: E402
from treeclass._io.safetensors import read_header  # noqa: E402

# --- classes ----------------------------------------------------------------------------------


@tc.pytree_dataclass(name="tests.files.Output", frozen=True)
class Output:
    logits: Any
    loss: Any = None
    hidden: Any = None
    step: int = 0
    mode: str = tc.field(static=True, default="eval")
    dims: tuple[int, ...] = tc.field(static=True, default=(2, 3))


@tc.register_namedtuple(name="tests.files.Pair")
class Pair(NamedTuple):
    first: Any
    second: Any


@tc.pytree_dataclass(name="tests.files.State", return_none_fields=True)
class State:
    params: Any
    opt: Any = None


@tc.pytree_dataclass(name="tests.files.Checked", unflatten_calls_init=True)
class Checked:
    """Its ``__post_init__`` refuses anything but an array: key paths must never need it."""

    x: Any

    def __post_init__(self) -> None:
        if self.x is not None and not hasattr(self.x, "shape"):
            raise TypeError(f"Checked got a {type(self.x).__name__}")


def f32(*shape: int) -> Any:
    return np.arange(math.prod(shape), dtype=np.float32).reshape(shape)


def sample_tree() -> Any:
    return {
        "out": Output(f32(2, 3), hidden=Pair(f32(1), [f32(2), 7]), step=5, mode="train"),
        "state": State({"w": f32(3), "b": np.float64(0.5)}),
        "odict": collections.OrderedDict([("z", 1.5), ("a", "text")]),
        "keys": {1: True, (2, "x"): -(2**70), 2.5: math.inf},
        "none": None,
        "checked": Checked(np.ones(2, np.int64)),
    }


def assert_same(a: Any, b: Any) -> None:
    """Same structure (same classes, statics, None fields) and equal leaves of equal types."""
    la, sa = tc.tree_flatten(a)
    lb, sb = tc.tree_flatten(b)
    assert sa == sb
    assert len(la) == len(lb)
    for x, y in zip(la, lb):
        assert type(x) is type(y), (x, y)
        if isinstance(x, np.ndarray):
            assert x.dtype == y.dtype and x.shape == y.shape
            assert x.tobytes() == y.tobytes()
        elif isinstance(x, float) and math.isnan(x):
            assert math.isnan(y)
        else:
            assert x == y


# --- round trips ------------------------------------------------------------------------------


def test_round_trip_keeps_classes_statics_nones_and_scalars(tmp_path: Path) -> None:
    tree = sample_tree()
    tc.save(tmp_path / "t.safetensors", tree)
    got = tc.load(tmp_path / "t.safetensors")
    assert_same(tree, got)
    assert type(got["out"]) is Output and got["out"].mode == "train"
    assert got["out"].dims == (2, 3) and type(got["out"].dims) is tuple
    assert got["out"].loss is None
    assert type(got["out"].hidden) is Pair
    assert type(got["odict"]) is collections.OrderedDict and list(got["odict"]) == ["z", "a"]
    assert got["keys"][(2, "x")] == -(2**70)
    assert got["keys"][2.5] == math.inf
    assert type(got["state"]["b"] if False else got["state"].params["b"]) is np.float64


def test_python_scalar_leaves_round_trip_exactly(tmp_path: Path) -> None:
    values = [0, -1, 2**53 - 1, 2**53, -(2**53), 2**200, 1.0, -0.0, 1e308, 5e-324, math.nan]
    values += [math.inf, -math.inf, True, False, "", "é ✓ \x00", "x" * 1000]
    tc.save(tmp_path / "s.safetensors", values)
    got = tc.load(tmp_path / "s.safetensors")
    assert [type(v) for v in got] == [type(v) for v in values]
    for a, b in zip(values, got):
        assert (math.isnan(a) and math.isnan(b)) if isinstance(a, float) and a != a else a == b
    assert math.copysign(1, got[3 + 4]) == -1.0  # -0.0 kept


def test_a_single_leaf_tree_and_an_empty_tree(tmp_path: Path) -> None:
    tc.save(tmp_path / "one.safetensors", f32(4))
    assert tc.load(tmp_path / "one.safetensors").tolist() == [0.0, 1.0, 2.0, 3.0]
    tc.save(tmp_path / "empty.safetensors", {"a": [], "b": None})
    assert tc.load(tmp_path / "empty.safetensors") == {"a": [], "b": None}


def test_the_file_is_a_safetensors_file_with_our_metadata(tmp_path: Path) -> None:
    safetensors = pytest.importorskip("safetensors")
    tree = {"w": f32(2), "n": 3}
    tc.save(tmp_path / "t.safetensors", tree, metadata={"run": "r1", "format": "np"})
    with safetensors.safe_open(tmp_path / "t.safetensors", framework="np") as f:
        assert f.keys() == ["['w']"]
        assert f.get_tensor("['w']").tolist() == [0.0, 1.0]
        meta = f.metadata()
    assert meta["run"] == "r1" and meta["format"] == "np"
    spec = tc.treespec_loads(meta["treeclass.treespec"])
    assert spec == tc.tree_structure(tree)
    ours = json.loads(meta["treeclass.file"])
    assert ours == {"format": "treeclass.file", "kinds": "in", "values": [3], "version": 2}
    assert tc.load_metadata(tmp_path / "t.safetensors") == {"run": "r1", "format": "np"}


def test_files_written_by_safetensors_load_as_a_dict(tmp_path: Path) -> None:
    st_numpy = pytest.importorskip("safetensors.numpy")
    tensors = {"b.weight": f32(2, 2), "a": np.arange(3, dtype=np.int8)}
    st_numpy.save_file(tensors, tmp_path / "plain.safetensors", metadata={"k": "v"})
    got = tc.load(tmp_path / "plain.safetensors")
    assert list(got) == ["a", "b.weight"]
    assert got["a"].dtype == np.int8 and got["b.weight"].tolist() == [[0, 1], [2, 3]]
    assert tc.load_metadata(tmp_path / "plain.safetensors") == {"k": "v"}
    part = tc.load(tmp_path / "plain.safetensors", paths=["['a']"])
    assert part["b.weight"] is None and part["a"].tolist() == [0, 1, 2]


def test_a_plain_file_with_format_pt_loads_as_torch(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    st_torch = pytest.importorskip("safetensors.torch")
    st_torch.save_file({"x": torch.ones(2)}, tmp_path / "pt.safetensors", metadata={"format": "pt"})
    assert isinstance(tc.load(tmp_path / "pt.safetensors")["x"], torch.Tensor)
    assert isinstance(tc.load(tmp_path / "pt.safetensors", to="numpy")["x"], np.ndarray)


def test_empty_and_zero_sized_arrays(tmp_path: Path) -> None:
    tree = [np.zeros((0, 3), np.float32), np.zeros((2, 0, 1), np.int16), np.float32(1)]
    tc.save(tmp_path / "z.safetensors", tree)
    got = tc.load(tmp_path / "z.safetensors")
    assert got[0].shape == (0, 3) and got[1].shape == (2, 0, 1) and got[1].dtype == np.int16
    assert type(got[2]) is np.float32


def test_non_contiguous_and_big_endian_numpy_arrays(tmp_path: Path) -> None:
    a = f32(4, 4)[::2, 1::2]
    b = np.arange(5, dtype=">i4")
    tc.save(tmp_path / "nc.safetensors", [a, b])
    got = tc.load(tmp_path / "nc.safetensors")
    assert got[0].tolist() == a.tolist() and got[1].tolist() == [0, 1, 2, 3, 4]
    assert got[1].dtype == np.int32


# --- dtypes -----------------------------------------------------------------------------------

NUMPY_DTYPES = [
    "bool",
    "uint8",
    "int8",
    "uint16",
    "int16",
    "uint32",
    "int32",
    "uint64",
    "int64",
    "float16",
    "bfloat16",
    "float32",
    "float64",
    "complex64",
    "float8_e5m2",
    "float8_e4m3fn",
    "float8_e8m0fnu",
    "float8_e4m3fnuz",
    "float8_e5m2fnuz",
    "float4_e2m1fn",
]


def np_dtype(name: str) -> Any:
    return np.dtype(getattr(ml_dtypes, name, name))


def numpy_array(name: str) -> Any:
    dt = np_dtype(name)
    values = np.array([[1, 0, 2, 3], [0.5, 4, 1, 2]], dtype=np.float32)
    if name == "float8_e8m0fnu":
        values = np.array([[1, 2, 4, 8], [0.5, 16, 1, 2]], np.float32)
    return values.astype(dt)


@pytest.mark.parametrize("name", NUMPY_DTYPES)
def test_every_dtype_round_trips_in_numpy(tmp_path: Path, name: str) -> None:
    arr = numpy_array(name)
    tc.save(tmp_path / "d.safetensors", {"a": arr})
    got = tc.load(tmp_path / "d.safetensors")["a"]
    assert got.dtype == arr.dtype and got.shape == arr.shape
    assert got.tobytes() == arr.tobytes()


@pytest.mark.parametrize("name", NUMPY_DTYPES)
def test_every_dtype_round_trips_numpy_to_torch_and_back(tmp_path: Path, name: str) -> None:
    torch = pytest.importorskip("torch")
    arr = numpy_array(name)
    tc.save(tmp_path / "d.safetensors", {"a": arr})
    t = tc.load(tmp_path / "d.safetensors", to="torch")["a"]
    assert isinstance(t, torch.Tensor)
    if name == "float4_e2m1fn":
        assert t.dtype == torch.float4_e2m1fn_x2 and tuple(t.shape) == (2, 2)
    else:
        assert str(t.dtype) == f"torch.{name}" and tuple(t.shape) == arr.shape
        same = t.float() if name not in ("complex64",) else t
        assert np.array_equal(same.numpy(), arr.astype(same.numpy().dtype))
    tc.save(tmp_path / "back.safetensors", {"a": t})
    again = tc.load(tmp_path / "back.safetensors", to="numpy")["a"]
    assert again.dtype == arr.dtype and again.tobytes() == arr.tobytes()


def _x64(jax: Any, on: bool) -> Any:
    """``jax.enable_x64(on)``: a context manager from jax 0.8, jax.experimental's before."""
    if hasattr(jax, "enable_x64"):
        return jax.enable_x64(on)
    from jax import experimental

    return experimental.enable_x64() if on else experimental.disable_x64()


@pytest.mark.parametrize("name", NUMPY_DTYPES)
def test_every_dtype_loads_as_jax(tmp_path: Path, name: str) -> None:
    jnp = pytest.importorskip("jax.numpy")
    import jax

    arr = numpy_array(name)
    tc.save(tmp_path / "d.safetensors", {"a": arr})
    with _x64(jax, True):
        try:
            jnp.asarray(arr)
        except TypeError:  # a jax older than the dtype (float4, float8_e8m0: before 0.6)
            with pytest.raises(tc.FileLoadError, match=f"is {name}, which the installed jax "):
                tc.load(tmp_path / "d.safetensors", to="jax")
            return
        got = tc.load(tmp_path / "d.safetensors", to="jax")["a"]
        assert isinstance(got, jax.Array) and got.dtype == arr.dtype
        assert np.asarray(got).tobytes() == arr.tobytes()
        tc.save(tmp_path / "back.safetensors", {"a": jnp.asarray(arr)})
        back = tc.load(tmp_path / "back.safetensors")["a"]  # saved from JAX: loads as JAX
        assert isinstance(back, jax.Array) and back.dtype == arr.dtype


def test_jax_without_x64_narrows_64_bit_arrays_out_loud(tmp_path: Path) -> None:
    jax = pytest.importorskip("jax")
    with _x64(jax, False):
        tc.save(tmp_path / "f.safetensors", [np.full(2, 0.1), np.arange(3, dtype=np.int64)])
        with pytest.warns(UserWarning) as record:
            got = tc.load(tmp_path / "f.safetensors", to="jax")
        assert [str(w.message).split("; ")[1].split(" (")[0] for w in record] == [
            "JAX without jax_enable_x64 holds it as float32",
            "JAX without jax_enable_x64 holds it as int32",
        ]
        assert got[0].dtype == np.float32 and got[1].dtype == np.int32
        assert got[1].tolist() == [0, 1, 2]
        tc.save(tmp_path / "i.safetensors", [np.array([2**40], np.int64)])
        with pytest.raises(tc.FileLoadError, match="values outside int32"):
            tc.load(tmp_path / "i.safetensors", to="jax")


def test_bfloat16_values_agree_across_frameworks(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    t = torch.tensor([1.5, -2.25, 3.0e38, 1e-3], dtype=torch.bfloat16)
    tc.save(tmp_path / "bf.safetensors", [t])
    n = tc.load(tmp_path / "bf.safetensors", to="numpy")[0]
    assert n.dtype == ml_dtypes.bfloat16
    assert n.astype(np.float32).tolist() == t.float().tolist()


def test_float4_packs_two_values_a_byte_as_torch_does(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    values = np.array([[0.0, 1.0, 2.0, 3.0]], np.float32).astype(ml_dtypes.float4_e2m1fn)
    tc.save(tmp_path / "f4.safetensors", [values])
    t = tc.load(tmp_path / "f4.safetensors", to="torch")[0]
    # element 2i in the low nibble: (0.0, 1.0) -> 0x20, (2.0, 3.0) -> 0x54
    assert t.view(torch.uint8).tolist() == [[0x20, 0x54]]


def test_float4_on_a_torch_without_it_names_the_dtype_and_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # torch.float4_e2m1fn_x2 is new in torch 2.8: a torch without it (the attribute taken
    # away, as before 2.8) gives treeclass's error, not torch's bare AttributeError.
    torch = pytest.importorskip("torch")
    values = np.array([[0.0, 1.0, 2.0, 3.0]], np.float32).astype(ml_dtypes.float4_e2m1fn)
    tc.save(tmp_path / "f4.safetensors", {"w": values, "b": np.ones(2, np.float32)})
    monkeypatch.delattr(torch, "float4_e2m1fn_x2")
    with pytest.raises(
        tc.MissingDependencyError,
        match=r"tensor \"\['w'\]\" of '.*f4\.safetensors' has dtype F4, which needs a newer "
        r"torch \(torch \S+ has no dtype float4_e2m1fn_x2\); upgrade it with "
        r"pip install 'stable-pytrees\[torch\]'\.",
    ):
        tc.load(tmp_path / "f4.safetensors", to="torch")
    assert tc.load(tmp_path / "f4.safetensors", to="numpy")["w"].dtype == values.dtype


@pytest.mark.parametrize(
    ("value", "match"),
    [
        (np.zeros(2, np.complex128), "dtype complex128"),
        (np.array(["a"]), "dtype <U1"),
        (np.array([object()]), "dtype object"),
        (np.zeros(2, ml_dtypes.int4), "dtype int4"),
        (np.ma.masked_array([1, 2], mask=[0, 1]), "masked array"),
        (np.zeros(3, ml_dtypes.float4_e2m1fn), "last dimension must be even"),
        (b"bytes", "builtins.bytes"),
        (object(), "builtins.object"),
    ],
)
def test_leaves_a_file_cannot_hold_are_clear_errors(tmp_path: Path, value: Any, match: str) -> None:
    with pytest.raises(tc.TreeclassError, match=match):
        tc.save(tmp_path / "bad.safetensors", {"k": value})
    assert not list(tmp_path.iterdir())  # nothing written, no temporary file left


def test_torch_tensors_of_every_kind_are_saved_as_data(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    w = torch.nn.Parameter(torch.ones(2, 3))
    tree = {
        "param": w,
        "view": torch.arange(12.0).reshape(3, 4)[:, 1::2],
        "conj": torch.tensor([1 + 2j], dtype=torch.complex64).conj(),
        "scalar": torch.tensor(3, dtype=torch.int64),
    }
    tc.save(tmp_path / "t.safetensors", tree)
    got = tc.load(tmp_path / "t.safetensors")
    assert type(got["param"]) is torch.Tensor and not got["param"].requires_grad
    assert got["view"].tolist() == [[1.0, 3.0], [5.0, 7.0], [9.0, 11.0]]
    assert got["conj"].tolist() == [1 - 2j]
    assert got["scalar"].shape == () and got["scalar"].item() == 3
    with pytest.raises(tc.TreeclassTypeError, match="dense tensors only"):
        tc.save(tmp_path / "s.safetensors", [torch.eye(2).to_sparse()])
    with pytest.raises(tc.TreeclassTypeError, match="meta device"):
        tc.save(tmp_path / "m.safetensors", [torch.empty(2, device="meta")])
    with pytest.raises(tc.TreeclassTypeError, match=r"torch\.complex128"):
        tc.save(tmp_path / "c.safetensors", [torch.zeros(1, dtype=torch.complex128)])


# --- frameworks -------------------------------------------------------------------------------


def make_leaf(framework: str, arr: Any) -> Any:
    if framework == "numpy":
        return arr
    if framework == "torch":
        import torch

        return torch.from_numpy(arr.copy())
    import jax.numpy as jnp

    return jnp.asarray(arr)


def leaf_type(framework: str) -> type:
    if framework == "numpy":
        return np.ndarray
    if framework == "torch":
        import torch

        return torch.Tensor
    import jax

    return jax.Array


FRAMEWORKS = ["numpy", "torch", "jax"]


@pytest.mark.parametrize("src", FRAMEWORKS)
@pytest.mark.parametrize("dst", [*FRAMEWORKS, None])
def test_every_pair_of_frameworks(tmp_path: Path, src: str, dst: str | None) -> None:
    for fw in {src, dst} - {"numpy", None}:
        pytest.importorskip(typing.cast(str, fw))
    arr = f32(2, 3)
    tree = Output(make_leaf(src, arr), hidden=Pair(make_leaf(src, arr[0]), 4), mode="x")
    tc.save(tmp_path / "x.safetensors", tree)
    got = tc.load(tmp_path / "x.safetensors", to=typing.cast(Any, dst))
    want = src if dst is None else dst
    assert type(got) is Output and type(got.hidden) is Pair and got.mode == "x"
    assert isinstance(got.logits, leaf_type(want))
    assert np.asarray(got.logits).tolist() == arr.tolist()
    assert np.asarray(got.hidden.first).tolist() == arr[0].tolist()
    assert got.hidden.second == 4 and type(got.hidden.second) is int


def test_to_none_keeps_each_leafs_own_framework(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    jnp = pytest.importorskip("jax.numpy")
    import jax

    tree = [np.ones(1), torch.ones(1), jnp.ones(1), np.int8(3)]
    tc.save(tmp_path / "mix.safetensors", tree)
    got = tc.load(tmp_path / "mix.safetensors")
    assert type(got[0]) is np.ndarray and type(got[1]) is torch.Tensor
    assert isinstance(got[2], jax.Array) and type(got[3]) is np.int8
    as_numpy = tc.load(tmp_path / "mix.safetensors", to="numpy")
    assert [type(v) for v in as_numpy] == [np.ndarray] * 3 + [np.int8]


def test_to_none_falls_back_to_numpy_where_the_framework_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    torch = pytest.importorskip("torch")
    tc.save(tmp_path / "t.safetensors", [torch.ones(2)])
    monkeypatch.setitem(sys.modules, "torch", None)  # how Python marks a module missing
    assert type(tc.load(tmp_path / "t.safetensors")[0]) is np.ndarray


# --- selective loading ------------------------------------------------------------------------


class CountingFile:
    """Wraps the file ``tc.load`` opens, counting the bytes it reads."""

    def __init__(self, f: Any, counter: list[int]) -> None:
        self._f = f
        self._counter = counter

    def __enter__(self) -> CountingFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self._f.close()

    def read(self, n: int = -1) -> bytes:
        data: bytes = self._f.read(n)
        self._counter[0] += len(data)
        return data

    def readinto(self, buf: Any) -> int:
        n: int = self._f.readinto(buf)
        self._counter[0] += n
        return n

    def __getattr__(self, name: str) -> Any:
        return getattr(self._f, name)


def test_selected_leaves_load_and_only_their_bytes_are_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    big = np.zeros((256, 1024), np.float32)  # 1 MiB
    tree = {"enc": Output(big, hidden=Pair(big + 1, f32(2))), "dec": [big + 2, 3], "lr": 0.1}
    path = tmp_path / "big.safetensors"
    tc.save(path, tree)
    counter = [0]
    real_open = open
    monkeypatch.setattr(
        files_module, "open", lambda p, mode: CountingFile(real_open(p, mode), counter), False
    )
    got = tc.load(path, paths=["['enc'].hidden.second"])
    assert counter[0] < 64 * 1024  # the header and 8 bytes of data, not 3 MiB
    assert got["enc"].hidden.second.tolist() == [0.0, 1.0]
    assert got["enc"].logits is None and got["enc"].hidden.first is None
    assert got["dec"] == [None, None] and got["lr"] is None
    assert type(got["enc"]) is Output and type(got["enc"].hidden) is Pair
    # A node's key path selects its whole subtree; scalars can be selected too.
    sub = tc.load(path, paths=["['enc'].hidden", "['lr']"])
    assert sub["enc"].hidden.first.shape == (256, 1024) and sub["lr"] == 0.1
    assert sub["enc"].logits is None and sub["dec"] == [None, None]
    # A predicate gets each leaf's key path.
    seen: list[str] = []
    pred = tc.load(path, paths=lambda p: seen.append(p) or p.startswith("['dec']"))
    assert seen == [
        "['dec'][0]",
        "['dec'][1]",
        "['enc'].logits",
        "['enc'].hidden.first",
        "['enc'].hidden.second",
        "['enc'].step",
        "['lr']",
    ]
    assert pred["dec"][1] == 3 and pred["enc"].logits is None
    assert tc.load(path, paths=[""]).keys() == tree.keys()  # the root selects everything


def test_selection_never_builds_placeholders_for_classes_that_run_init(tmp_path: Path) -> None:
    tc.save(tmp_path / "c.safetensors", {"c": Checked(np.ones(1)), "d": np.zeros(1)})
    got = tc.load(tmp_path / "c.safetensors", paths=["['d']"])
    assert got["c"].x is None and got["d"].tolist() == [0.0]


def test_unknown_paths_and_bad_options_are_clear_errors(tmp_path: Path) -> None:
    tc.save(tmp_path / "t.safetensors", {"w": f32(1)})
    with pytest.raises(tc.FileLoadError, match=r"paths= names '\.w', which is not the key path"):
        tc.load(tmp_path / "t.safetensors", paths=[".w"])
    with pytest.raises(tc.TreeclassTypeError, match=r"write paths=\[\"\['w'\]\"\]"):
        tc.load(tmp_path / "t.safetensors", paths="['w']")
    with pytest.raises(tc.TreeclassTypeError, match="must hold key-path strings"):
        tc.load(tmp_path / "t.safetensors", paths=[1])
    with pytest.raises(tc.FileLoadError, match='to= must be "numpy", "jax", "torch" or None'):
        tc.load(tmp_path / "t.safetensors", to=typing.cast(Any, "tf"))


def test_partial_trees_are_jax_prefixes_for_classes_with_none_children(tmp_path: Path) -> None:
    jax = pytest.importorskip("jax")
    full = {"s": State({"w": np.ones(2), "b": np.zeros(1)}, opt=(np.ones(1),)), "x": np.ones(3)}
    tc.save(tmp_path / "p.safetensors", full)
    part = tc.load(tmp_path / "p.safetensors", paths=["['s'].params"])
    marks = jax.tree_util.tree_map(
        lambda a, b: a is not None, part, full, is_leaf=lambda v: v is None
    )
    assert jax.tree_util.tree_leaves(marks) == [True, True, False, False]


def test_partial_trees_are_jax_prefixes_for_default_classes(tmp_path: Path) -> None:
    jax = pytest.importorskip("jax")
    full = Output(np.ones(2), loss=np.zeros(1))
    tc.save(tmp_path / "p.safetensors", full)
    part = tc.load(tmp_path / "p.safetensors", paths=[".logits"])
    assert part.loss is None
    back = jax.tree_util.tree_map(lambda a, b: b, part, full, is_leaf=lambda v: v is None)
    assert back.loss is full.loss and back.logits is full.logits


# --- names, collisions, metadata --------------------------------------------------------------


@dataclasses.dataclass(frozen=True, order=True, repr=False)
class SameRepr:
    """Distinct keys that all print the same."""

    n: int

    def __repr__(self) -> str:
        return "K"


tc.register_static(SameRepr, name="tests.files.SameRepr")


def test_colliding_key_paths_get_distinct_tensor_names(tmp_path: Path) -> None:
    tree = {SameRepr(1): np.ones(1), SameRepr(2): np.zeros(1), SameRepr(3): np.full(1, 2.0)}
    tc.save(tmp_path / "c.safetensors", tree)
    with open(tmp_path / "c.safetensors", "rb") as f:
        assert list(read_header(f, "x").tensors) == ["[K]", "[K]#2", "[K]#3"]
    got = tc.load(tmp_path / "c.safetensors")
    assert [v.tolist() for v in got.values()] == [[1.0], [0.0], [2.0]]
    assert list(got) == [SameRepr(1), SameRepr(2), SameRepr(3)]


def test_metadata_must_be_str_to_str_and_not_reserved(tmp_path: Path) -> None:
    with pytest.raises(tc.TreeclassTypeError, match="must map str to str"):
        tc.save(tmp_path / "m.safetensors", [1], metadata={"epoch": 3})  # type: ignore[dict-item]
    with pytest.raises(tc.FileSaveError, match="reserves for its own entries"):
        tc.save(tmp_path / "m.safetensors", [1], metadata={"treeclass.file": "x"})
    with pytest.raises(tc.TreeclassTypeError, match="must be a dict of str to str"):
        tc.save(tmp_path / "m.safetensors", [1], metadata=[("a", "b")])  # type: ignore[arg-type]


def test_unnamed_classes_and_unserializable_statics_fail_before_writing(tmp_path: Path) -> None:
    @tc.pytree_dataclass
    class Unnamed:
        x: Any

    with pytest.raises(tc.UnnamedClassError, match="Unnamed"):
        tc.save(tmp_path / "u.safetensors", Unnamed(np.ones(1)))
    assert not list(tmp_path.iterdir())


def test_save_replaces_a_file_atomically(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "t.safetensors"
    tc.save(path, {"v": 1})

    class Boom(Exception):
        pass

    def failing(*args: Any, **kwargs: Any) -> Any:
        raise Boom

    monkeypatch.setattr(files_module, "_numpy_payload", failing)
    with pytest.raises(Boom):  # before writing (an unusual array: its own payload)
        tc.save(path, {"v": np.ones(4)[::2]})
    assert tc.load(path) == {"v": 1}
    monkeypatch.setattr(safetensors_module, "_write_all", failing)
    with pytest.raises(Boom):  # while writing the temporary file
        tc.save(path, {"v": np.ones(1)})
    assert tc.load(path) == {"v": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["t.safetensors"]


# --- loading errors (the fuzzer covers many more) ---------------------------------------------


def rewrite_header(path: Path, edit: Any) -> None:
    data = path.read_bytes()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8 : 8 + n])
    edit(header)
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + data[8 + n :])


def edit_ours(change: Any) -> Any:
    def edit(header: dict[str, Any]) -> None:
        ours = json.loads(header["__metadata__"]["treeclass.file"])
        change(ours)
        header["__metadata__"]["treeclass.file"] = json.dumps(ours)

    return edit


@pytest.mark.parametrize(
    ("edit", "match"),
    [
        (
            edit_ours(lambda d: d.update(kinds="nnn", values=[])),
            r"the leaf at \"\['a'\]\" has no tensor",
        ),
        (
            edit_ours(lambda d: d.update(kinds="in")),
            "structure has 3 leaves but its leaf list has 2",
        ),
        (edit_ours(lambda d: d.update(kinds="inx")), "leaf 2 has the unknown kind 'x'"),
        (edit_ours(lambda d: d.update(kinds="iin")), '"kinds" has 2 Python scalar leaves but'),
        (edit_ours(lambda d: d.update(kinds=["i", "n", "n"])), '"kinds" is not a string'),
        (edit_ours(lambda d: d.update(values={})), '"values" is not a list'),
        (edit_ours(lambda d: d.update(leaves=[])), "entry has the keys"),
        (edit_ours(lambda d: d.update(version=3)), "file version 3; this release reads"),
        (
            edit_ours(lambda d: d.update(values=["3"])),
            "leaf 0 is typed 'int', but '3' is not an int",
        ),
        (
            lambda h: h["__metadata__"].update({"treeclass.extra": "1"}),
            "has exactly 'treeclass.file' and 'treeclass.treespec'",
        ),
        (
            lambda h: h["__metadata__"].update({"treeclass.treespec": "{}"}),
            "its structure .* does not load",
        ),
        (
            lambda h: h["__metadata__"].update({"treeclass.file": "[1, 2]"}),
            'is not an object with "format"',
        ),
        (
            lambda h: h.update({"extra": {"dtype": "U8", "shape": [0], "data_offsets": [0, 0]}}),
            "holds 3 tensors but its structure has 2 array leaves",
        ),
        (
            lambda h: h["['b']"].update(dtype="F6_E2M3", shape=[1, 4]),
            "dtype F6_E2M3, which neither numpy",
        ),
    ],
)
def test_files_that_lie_are_clear_errors(tmp_path: Path, edit: Any, match: str) -> None:
    path = tmp_path / "t.safetensors"
    tc.save(path, {"a": 1, "b": np.zeros(3, np.uint8), "c": np.zeros(2, np.uint8)})
    rewrite_header(path, edit)
    with pytest.raises(tc.FileLoadError, match=match):
        tc.load(path)


def test_an_unregistered_class_name_says_what_to_import(tmp_path: Path) -> None:
    path = tmp_path / "t.safetensors"
    tc.save(path, Output(np.ones(1)))

    def rename(header: dict[str, Any]) -> None:
        meta = header["__metadata__"]
        meta["treeclass.treespec"] = meta["treeclass.treespec"].replace(
            "tests.files.Output", "nowhere.Output"
        )

    rewrite_header(path, rename)
    with pytest.raises(tc.UnregisteredNameError, match=r"'nowhere\.Output'.*import the module"):
        tc.load(path)


def test_missing_numpy_is_a_clear_import_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tc.save(tmp_path / "t.safetensors", [np.ones(1), 2])

    def no_module(name: str) -> Any:
        raise ImportError(f"No module named {name!r}")

    monkeypatch.setattr(files_module, "_module", no_module)
    with pytest.raises(
        tc.MissingDependencyError, match=r"pip install 'stable-pytrees\[files\]'"
    ) as e:
        tc.load(tmp_path / "t.safetensors")
    assert isinstance(e.value, ImportError)
    # Python scalars need no numpy at all.
    tc.save(tmp_path / "s.safetensors", {"a": 1, "b": "x"})
    assert tc.load(tmp_path / "s.safetensors") == {"a": 1, "b": "x"}


# --- a fresh process, classes in a module of another name -------------------------------------

MODELS = """
import typing
import treeclass as tc

@tc.register_namedtuple(name="tests.files.fresh.Hidden")
class Hidden(typing.NamedTuple):
    first: typing.Any
    second: typing.Any

@tc.pytree_dataclass(name="tests.files.fresh.Output", frozen=True)
class Output:
    logits: typing.Any
    loss: typing.Any = None
    hidden: typing.Any = None
    mode: str = tc.field(static=True, default="eval")
"""

SAVE = """
import sys, json
import numpy as np, torch
import treeclass as tc
from models_at_save_time import Output, Hidden
out = Output(torch.arange(6.0).reshape(2, 3).to(torch.bfloat16),
             hidden=Hidden(np.ones(2, np.int16), [3, "x"]), mode="train")
tc.save(sys.argv[1], {"out": out, "step": 7}, metadata={"run": "r"})
print(json.dumps({"saved": True}))
"""

LOAD = """
import sys, json
import treeclass as tc
report = {}
try:
    tc.load(sys.argv[1])
except tc.UnregisteredNameError as e:
    report["missing"] = str(e)
import renamed_models
got = tc.load(sys.argv[1], to="jax")
out = got["out"]
import jax
report.update(
    type=type(out) is renamed_models.Output,
    hidden=type(out.hidden) is renamed_models.Hidden,
    mode=out.mode,
    loss=out.loss,
    logits=[str(out.logits.dtype), isinstance(out.logits, jax.Array),
            [[float(v) for v in row] for row in out.logits]],
    first=str(out.hidden.first.dtype),
    second=out.hidden.second,
    step=got["step"],
    meta=tc.load_metadata(sys.argv[1]),
    torch_imported="torch" in sys.modules,
)
print(json.dumps(report))
"""


@pytest.mark.slow
def test_fresh_process_loads_classes_from_a_module_of_another_name(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("jax")
    modules = {"models_at_save_time": MODELS, "renamed_models": MODELS}
    file = str(tmp_path / "out.safetensors")
    assert report_in(tmp_path, SAVE, file, modules=modules, preload=_subproc.FRAMEWORKS) == {
        "saved": True
    }
    (tmp_path / "models_at_save_time.py").unlink()
    report = report_in(tmp_path, LOAD, file)
    assert "'tests.files.fresh.Output'" in report["missing"]
    assert report["type"] and report["hidden"] and report["mode"] == "train"
    assert report["loss"] is None
    assert report["logits"] == ["bfloat16", True, [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]]
    assert report["first"] == "int16" and report["second"] == [3, "x"]
    assert report["step"] == 7 and report["meta"] == {"run": "r"}
    # Saved from torch, loaded to JAX in a process that never imported torch.
    assert report["torch_imported"] is False


def test_load_never_imports_or_unpickles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins
    import pickle

    tc.save(tmp_path / "t.safetensors", sample_tree())
    tc.load(tmp_path / "t.safetensors")  # the first load imports treeclass's own modules
    imported: list[str] = []
    real_import = builtins.__import__

    def spy(
        name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0
    ) -> Any:
        full = name
        if level:
            full = importlib.util.resolve_name("." * level + name, globals["__package__"])
        if full not in sys.modules:
            imported.append(full)
        return real_import(name, globals, locals, fromlist, level)

    def no_pickle(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("unpickled")

    monkeypatch.setattr(builtins, "__import__", spy)
    monkeypatch.setattr(pickle, "loads", no_pickle)
    monkeypatch.setattr(pickle, "load", no_pickle)
    tc.load(tmp_path / "t.safetensors")
    assert imported == []


# --- small tensors in runs, mmap=True -----------------------------------------------------------


def _run_buffer(arr: Any) -> Any:
    while arr.base is not None:
        arr = arr.base
    return arr


def test_small_tensors_read_in_runs_share_only_their_run(tmp_path: Path) -> None:
    tree = {f"t{i:03d}": np.full(3 + i % 5, i, np.float32) for i in range(300)}
    tree["odd"] = np.arange(7, dtype=np.int8)  # 7 bytes (last in the file: written by dtype)
    tree["z"] = np.arange(3, dtype=np.float64)
    tree["big"] = np.zeros(20_000, np.float64)  # over 64 KiB: read into its own array
    path = tmp_path / "small.safetensors"
    tc.save(path, tree)
    got = tc.load(path)
    for k, v in tree.items():
        assert got[k].dtype == v.dtype and got[k].tolist() == v.tolist()
        assert got[k].flags.writeable and got[k].flags.aligned
        assert _run_buffer(got[k]).nbytes <= 1 << 20  # at most its run's buffer stays alive
    assert got["big"].base is None
    arrays = list(got.values())
    for a, b in itertools.pairwise(arrays):
        assert not np.shares_memory(a, b)  # views of one buffer, never of the same bytes
    got["t000"][:] = 99
    assert got["t005"].tolist() == tree["t005"].tolist()
    assert got["t001"].tolist() == tree["t001"].tolist()
    # Selected leaves: their runs hold only the selected tensors' bytes.
    some = tc.load(path, paths=["['t010']", "['t200']"])
    assert _run_buffer(some["t010"]).nbytes == tree["t010"].nbytes
    assert _run_buffer(some["t200"]).nbytes == tree["t200"].nbytes


def test_small_tensors_of_one_dtype_and_shape_are_the_rows_of_one_array(
    tmp_path: Path,
) -> None:
    # Runs of tensors of one dtype and shape are split as the rows of one array: each row
    # must be a writable, aligned array of its own bytes, of the right shape, in leaf order.
    tree: dict[str, Any] = {f"a{i:03d}": np.full((2, 3), i, np.float32) for i in range(40)}
    tree |= {f"b{i:03d}": np.full(5, i, np.int16) for i in range(30)}
    tree |= {"c0": np.float64(2.5), "c1": np.array(7.0), "c2": np.array(True), "n": 3}
    tree |= {f"d{i}": np.zeros((0, 4), np.float32) for i in range(3)}  # empty: no bytes
    path = tmp_path / "rows.safetensors"
    tc.save(path, tree)
    got = tc.load(path)
    assert sorted(got) == sorted(tree)
    for k, v in tree.items():
        if k == "n":
            assert got[k] == 3
            continue
        assert type(got[k]) is type(v), k
        assert got[k].dtype == v.dtype and got[k].shape == v.shape and got[k].tolist() == v.tolist()
        if isinstance(v, np.ndarray) and v.nbytes:
            assert got[k].flags.writeable and got[k].flags.aligned
            assert got[k].flags.c_contiguous and got[k].strides == v.strides
    for i in range(39):
        assert not np.shares_memory(got[f"a{i:03d}"], got[f"a{i + 1:03d}"])
    got["a000"][:] = 99
    assert got["a001"].tolist() == tree["a001"].tolist()
    some = tc.load(path, paths=["['a003']", "['b007']", "['c1']"])
    assert some["a003"].tolist() == tree["a003"].tolist() and some["b007"].tolist() == [7] * 5
    assert some["c1"].shape == () and some["a004"] is None and some["b008"] is None


def test_small_tensors_at_unaligned_offsets_are_copied_aligned(tmp_path: Path) -> None:
    # Another writer may put tensors at offsets not aligned to their item size.
    values = [np.array([i, -i], np.float32) for i in range(4)]
    header: dict[str, Any] = {"a": {"dtype": "I8", "shape": [3], "data_offsets": [0, 3]}}
    for i in range(4):
        header[f"b{i}"] = {"dtype": "F32", "shape": [2], "data_offsets": [3 + 8 * i, 11 + 8 * i]}
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    data = bytes([1, 2, 3]) + b"".join(v.tobytes() for v in values)
    path = tmp_path / "unaligned.safetensors"
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + data)
    got = tc.load(path)
    assert got["a"].tolist() == [1, 2, 3]
    for i, v in enumerate(values):
        assert got[f"b{i}"].tolist() == v.tolist()
        assert got[f"b{i}"].flags.aligned and got[f"b{i}"].flags.writeable
    got["b0"][:] = 7
    assert got["b1"].tolist() == values[1].tolist()
    pytest.importorskip("torch")
    ts = tc.load(path, to="torch")
    assert [ts[f"b{i}"].tolist() for i in range(4)] == [v.tolist() for v in values]


def test_small_tensors_loaded_to_torch_own_their_storage(tmp_path: Path) -> None:
    # Loaded to torch, rows of a run are tensors of their own storage (torch.save of one
    # would write a shared buffer whole).
    pytest.importorskip("torch")
    tree: dict[str, Any] = {f"a{i:03d}": np.full((2, 3), i, np.float32) for i in range(40)}
    tree |= {f"b{i:03d}": np.full(5, i, np.int16) for i in range(30)}
    tree |= {f"d{i}": np.zeros((0, 4), np.float32) for i in range(3)}
    path = tmp_path / "rows.safetensors"
    tc.save(path, tree)
    ts = tc.load(path, to="torch")
    assert [ts[f"a{i:03d}"][0, 0].item() for i in range(40)] == list(range(40))
    assert ts["a005"].untyped_storage().nbytes() == 24
    assert ts["b029"].tolist() == [29] * 5 and tuple(ts["d2"].shape) == (0, 4)


def _tensor_offset(path: Path, name: str) -> int:
    with open(path, "rb") as f:
        header = read_header(f, "x")
    return header.data_start + header.tensors[name].begin


def test_mmap_shares_the_files_pages_copy_on_write(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    path = tmp_path / "m.safetensors"
    tree = {"w": Output(torch.arange(6, dtype=torch.float32), step=3), "b": torch.ones(4)}
    tc.save(path, tree)
    got = tc.load(path, to="torch", mmap=True)
    assert got["w"].logits.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0] and got["w"].step == 3
    own = tc.load(path, to="torch")
    at = _tensor_offset(path, "['b']")
    with open(path, "r+b") as f:
        f.seek(at)
        f.write(struct.pack("<f", 7.0))
    assert own["b"].tolist() == [1.0, 1.0, 1.0, 1.0]  # without mmap: the process's own memory
    if sys.platform.startswith("linux"):
        # Pages this process has not written are the file's own: a change to the file shows.
        assert got["b"].tolist() == [7.0, 1.0, 1.0, 1.0]
    # Writing to a tensor changes this process's copy of the page, never the file.
    before = path.read_bytes()
    got["w"].logits[0] = 42.0
    assert got["w"].logits[0].item() == 42.0
    assert path.read_bytes() == before
    assert tc.load(path, to="torch")["w"].logits[0].item() == 0.0


def _raw_bytes(x: Any) -> bytes:
    if type(x).__module__.startswith("torch"):
        import torch

        return bytes(x.reshape(-1).view(torch.uint8).tolist())
    return np.ascontiguousarray(x).tobytes()


@pytest.mark.parametrize("to", ["numpy", "torch", None])
def test_mmap_loads_every_dtype_and_selection_as_a_copy_would(tmp_path: Path, to: Any) -> None:
    if to == "torch":
        pytest.importorskip("torch")
    tree = {
        "bf16": np.arange(6, dtype=np.float32).astype(ml_dtypes.bfloat16).reshape(2, 3),
        "f8": np.linspace(-2, 2, 8).astype(ml_dtypes.float8_e4m3fn),
        "f4": np.array([0.5, -1.0, 2.0, 0.0], dtype=ml_dtypes.float4_e2m1fn),
        "odd": np.arange(3, dtype=np.uint8),  # shifts what follows off its alignment
        "c64": np.array([1 + 2j], dtype=np.complex64),
        "i64": np.arange(3, dtype=np.int64),
        "scalar": np.float32(1.5),
        "empty": np.zeros((0, 4), np.float32),
        "n": 3,
    }
    path = tmp_path / "all.safetensors"
    tc.save(path, tree)
    copied = tc.load(path, to=to)
    mapped = tc.load(path, to=to, mmap=True)
    for k in tree:
        a, b = copied[k], mapped[k]
        assert type(a) is type(b), k
        if k == "n":
            assert b == 3
            continue
        assert a.dtype == b.dtype and tuple(a.shape) == tuple(b.shape), k
        assert _raw_bytes(a) == _raw_bytes(b), k
    if to != "torch":
        assert not mapped["i64"].flags.owndata and mapped["i64"].flags.writeable
        assert mapped["bf16"].astype(np.float32).tolist() == [[0, 1, 2], [3, 4, 5]]
    part = tc.load(path, to=to, mmap=True, paths=["['c64']"])
    assert part["bf16"] is None and complex(part["c64"][0]) == 1 + 2j


def test_mmap_of_a_plain_safetensors_file_and_bad_values(tmp_path: Path) -> None:
    st = pytest.importorskip("safetensors.numpy")
    path = tmp_path / "plain.safetensors"
    st.save_file({"a": np.arange(4, dtype=np.float32), "b": np.ones(2, np.int16)}, path)
    got = tc.load(path, mmap=True)
    assert got["a"].tolist() == [0, 1, 2, 3] and got["b"].tolist() == [1, 1]
    with pytest.raises(tc.TreeclassTypeError, match=r"mmap= must be True or False"):
        tc.load(path, mmap="yes")  # type: ignore[arg-type]
    data = path.read_bytes()
    (tmp_path / "cut.safetensors").write_bytes(data[:-3])
    with pytest.raises(tc.FileLoadError, match="data section"):
        tc.load(tmp_path / "cut.safetensors", mmap=True)


# --- shapes numpy cannot hold (issue 28, item 6) ------------------------------------------------


def _plain_file(path: Path, tensors: dict[str, tuple[list[int], bytes]]) -> None:
    """A safetensors file of uint8 tensors written by hand, in the order given."""
    header: dict[str, Any] = {}
    at = 0
    for name, (shape, data) in tensors.items():
        header[name] = {"dtype": "U8", "shape": shape, "data_offsets": [at, at + len(data)]}
        at += len(data)
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    body = b"".join(data for _, data in tensors.values())
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + body)


def _too_many_dims() -> list[int]:
    return [1] * (max_dims() + 1)  # 65 with numpy 2, 33 before


@pytest.mark.parametrize(
    ("tensors", "match"),
    [
        ({"z": ([0, 2**62, 4], b"")}, r"tensor 'z' cannot be allocated \(array is too big"),
        ({"d": "too many"}, r"tensor 'd' cannot be allocated \(.*(32|64)"),
        ({"a": "too many", "b": "too many"}, r"tensor 'a' cannot be allocated"),
    ],
    ids=["zero-size-too-big", "65-dims", "two-65-dims"],
)
@pytest.mark.parametrize("mmap", [False, True])
def test_shapes_numpy_cannot_hold_are_file_load_errors(
    tmp_path: Path, tensors: Any, match: str, mmap: bool
) -> None:
    byte = iter([b"\x07", b"\x08"])
    tensors = {
        k: (_too_many_dims(), next(byte)) if v == "too many" else v for k, v in tensors.items()
    }
    path = tmp_path / "shape.safetensors"
    _plain_file(path, tensors)
    with pytest.raises(tc.FileLoadError, match=match):
        tc.load(path, mmap=mmap)


def test_neighbouring_64_dimension_arrays_round_trip(tmp_path: Path) -> None:
    # Small neighbours of one dtype and shape are read as the rows of one array: never with
    # a 65th dimension.
    most = (1,) * max_dims()  # 64 with numpy 2, 32 before
    tree = {"a": np.full(most, 3, np.uint8), "b": np.full(most, 4, np.uint8)}
    tc.save(tmp_path / "t.safetensors", tree)
    back = tc.load(tmp_path / "t.safetensors")
    assert back["a"].shape == most and back["a"].item() == 3 and back["b"].item() == 4
    torch = pytest.importorskip("torch")
    got = tc.load(tmp_path / "t.safetensors", to="torch")
    assert got["b"].shape == torch.Size(most) and got["b"].item() == 4
