"""orbax-checkpoint on treeclass trees, and ``treeclass.orbax`` (restore without a target).

Part 1, orbax's own API with default arguments: ``StandardCheckpointer`` and
``CheckpointManager`` save a training state and restore it with a target (concrete or abstract).
``StandardCheckpointer.save`` builds ``save_args = jax.tree.map(lambda x: None, item)`` and maps
it against the item, so it needs a node's data to stay the same when leaves become ``None``
(issue 10): a ``step`` field holding one array is exactly such a leaf.

Part 2, ``treeclass.orbax.save`` / ``restore``: the tree comes back in its own classes without a
target, in this process and in a fresh one whose classes live in a module of another name;
unregistered names are reported before any array is read; an edited directory is refused.
"""

from __future__ import annotations

import collections
import json
import os
import pathlib
import re
import shutil
import textwrap
import typing
from typing import Any

import pytest

jax = pytest.importorskip("jax")
ocp = pytest.importorskip("orbax.checkpoint")

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from _subproc import FRAMEWORKS, report_in, run_script  # noqa: E402

import treeclass as tc  # noqa: E402
import treeclass.orbax as tco  # noqa: E402

pytestmark = pytest.mark.jax


@tc.pytree_dataclass(name="tests.orbax.Params", frozen=True)
class Params:
    w: Any
    b: Any
    norm: Any = None  # optional: None here
    act: str = tc.field(static=True, default="relu")


@tc.register_namedtuple(name="tests.orbax.Moments")
class Moments(typing.NamedTuple):
    mu: Any
    nu: Any


@tc.pytree_dataclass(name="tests.orbax.TrainState")
class TrainState:
    params: Params
    opt: Moments
    step: Any  # one array: jax.tree.map(lambda x: None, state) makes it None
    ema: Any = None  # optional: None here
    run: str = tc.field(static=True, default="run-1")
    dims: tuple[int, ...] = tc.field(static=True, default=(3, 2))


def _state(step: int = 7) -> TrainState:
    params = Params(jnp.arange(6.0).reshape(3, 2), jnp.ones(2))
    zeros = jax.tree.map(jnp.zeros_like, params)
    return TrainState(params, Moments(zeros, zeros), jnp.int32(step), run="run-2")


def _assert_same(got: Any, want: Any) -> None:
    assert jax.tree_util.tree_structure(got) == jax.tree_util.tree_structure(want)
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        assert type(g) is type(w) or (isinstance(g, jax.Array) and isinstance(w, jax.Array))
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
        assert np.asarray(g).dtype == np.asarray(w).dtype


# --- part 1: orbax's own API --------------------------------------------------------------------


def test_standard_checkpointer_default_save_and_restore_with_target(tmp_path: pathlib.Path) -> None:
    state = _state()
    ckptr = ocp.StandardCheckpointer()
    ckptr.save(tmp_path / "ckpt", state)
    ckptr.wait_until_finished()
    got = ckptr.restore(tmp_path / "ckpt", state)
    assert type(got) is TrainState and type(got.opt) is Moments
    assert (got.run, got.dims, got.params.act) == ("run-2", (3, 2), "relu")
    assert got.ema is None and got.params.norm is None
    _assert_same(got, state)
    # The usual abstract target: shapes and dtypes only.
    abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, state)
    got2 = ckptr.restore(tmp_path / "ckpt", abstract)
    _assert_same(got2, state)
    ckptr.close()


def test_standard_checkpointer_with_a_set_optional_field(tmp_path: pathlib.Path) -> None:
    state = _state()
    state = TrainState(state.params, state.opt, state.step, ema=jnp.float32(0.5), run="r")
    ckptr = ocp.StandardCheckpointer()
    ckptr.save(tmp_path / "ckpt", state)
    ckptr.wait_until_finished()
    got = ckptr.restore(tmp_path / "ckpt", state)
    assert float(got.ema) == 0.5
    ckptr.close()


def test_checkpoint_manager_default_save_and_restore_with_target(tmp_path: pathlib.Path) -> None:
    mngr = ocp.CheckpointManager(tmp_path / "run")
    for step in (1, 2):
        mngr.save(step, args=ocp.args.StandardSave(_state(step)))
    mngr.wait_until_finished()
    assert mngr.latest_step() == 2
    target = jax.tree.map(ocp.utils.to_shape_dtype_struct, _state())
    got = mngr.restore(2, args=ocp.args.StandardRestore(target))
    assert type(got) is TrainState and int(got.step) == 2
    _assert_same(got, _state(2))
    mngr.close()


def test_pytree_checkpointer_save_and_restore_with_target(tmp_path: pathlib.Path) -> None:
    state = _state()
    ckptr = ocp.PyTreeCheckpointer()
    ckptr.save(tmp_path / "ckpt", state)
    restore_args = ocp.checkpoint_utils.construct_restore_args(state)
    got = ckptr.restore(tmp_path / "ckpt", item=state, restore_args=restore_args)
    assert type(got) is TrainState
    _assert_same(got, state)


# --- part 2: treeclass.orbax --------------------------------------------------------------------


def _mixed() -> dict[str, Any]:
    """Every kind of leaf treeclass.orbax saves, in tuples, lists and classes."""
    return {
        "state": _state(),
        "np": np.arange(6, dtype=np.int16).reshape(2, 3),
        "np_scalar": np.float64(2.5),
        "bf16": jnp.ones(3, jnp.bfloat16),
        "empty": np.zeros((0, 4), np.float32),
        "empty_jax": jnp.zeros((2, 0), jnp.int32),
        "py": (1, 2.5, True, "text", 1 + 2j, float("inf")),
        "lst": [np.float32(1.0), [3, None]],
        "od": collections.OrderedDict([("z", 1), ("a", 2)]),
    }


def test_save_restore_without_a_target(tmp_path: pathlib.Path) -> None:
    tree = _mixed()
    tco.save(tmp_path / "ckpt", tree)
    got = tco.restore(tmp_path / "ckpt")
    assert tc.tree_structure(got) == tc.tree_structure(tree)
    state = got["state"]
    assert type(state) is TrainState and type(state.params) is Params
    assert type(state.opt) is Moments
    assert (state.run, state.dims, state.params.act) == ("run-2", (3, 2), "relu")
    assert type(state.dims) is tuple
    assert state.ema is None and state.params.norm is None
    assert isinstance(state.step, jax.Array) and state.step.dtype == jnp.int32
    assert int(state.step) == 7
    np.testing.assert_array_equal(state.params.w, np.arange(6.0).reshape(3, 2))
    assert type(got["np"]) is np.ndarray and got["np"].dtype == np.int16
    np.testing.assert_array_equal(got["np"], tree["np"])
    assert type(got["np_scalar"]) is np.float64 and got["np_scalar"] == 2.5
    assert isinstance(got["bf16"], jax.Array) and got["bf16"].dtype == jnp.bfloat16
    assert type(got["empty"]) is np.ndarray and got["empty"].shape == (0, 4)
    assert got["empty"].dtype == np.float32
    assert isinstance(got["empty_jax"], jax.Array) and got["empty_jax"].shape == (2, 0)
    py = got["py"]
    assert type(py) is tuple
    assert [type(v) for v in py] == [int, float, bool, str, complex, float]
    assert py == (1, 2.5, True, "text", 1 + 2j, float("inf"))
    assert type(got["lst"]) is list and type(got["lst"][1]) is list
    assert got["lst"][1] == [3, None]
    assert type(got["lst"][0]) is np.float32
    assert list(got["od"]) == ["z", "a"]


def test_nan_and_negative_zero_round_trip(tmp_path: pathlib.Path) -> None:
    tco.save(tmp_path / "ckpt", [float("nan"), -0.0, complex(float("-inf"), 1e-310)])
    nan, zero, c = tco.restore(tmp_path / "ckpt")
    assert nan != nan
    assert str(zero) == "-0.0"
    assert c == complex(float("-inf"), 1e-310)


def test_only_version_2_documents_restore(tmp_path: pathlib.Path) -> None:
    # No release wrote another version: a version-1 document is refused, and float.hex text
    # (what a version 1 might have held) is no float.
    tco.save(tmp_path / "ckpt", [1.5, 2])
    _edit(tmp_path / "ckpt", lambda doc: doc.update(version=1))
    with pytest.raises(tc.TreespecLoadError, match="does not have the fields of version 1"):
        tco.restore(tmp_path / "ckpt")
    _edit(tmp_path / "ckpt", lambda doc: doc.update(version=2))
    assert tco.restore(tmp_path / "ckpt") == [1.5, 2]
    _edit(tmp_path / "ckpt", lambda doc: doc["leaves"].__setitem__(0, {"float": "0x1.8p+0"}))
    with pytest.raises(tc.TreespecLoadError, match="invalid 'float' description"):
        tco.restore(tmp_path / "ckpt")


def test_tree_of_scalars_only_has_no_arrays_item(tmp_path: pathlib.Path) -> None:
    tco.save(tmp_path / "ckpt", {"lr": 0.1, "name": "x"})
    assert not (tmp_path / "ckpt" / tco.ARRAYS_ITEM).exists()
    assert tco.restore(tmp_path / "ckpt") == {"lr": 0.1, "name": "x"}


def test_sharding_argument_places_jax_arrays(tmp_path: pathlib.Path) -> None:
    tco.save(tmp_path / "ckpt", {"a": jnp.ones(2)})
    device = jax.devices()[-1]
    got = tco.restore(tmp_path / "ckpt", sharding=jax.sharding.SingleDeviceSharding(device))
    assert got["a"].devices() == {device}


def test_unnamed_class_is_refused_before_anything_is_written(tmp_path: pathlib.Path) -> None:
    @tc.pytree_dataclass
    class Unnamed:
        x: Any

    with pytest.raises(tc.UnnamedClassError, match="Unnamed"):
        tco.save(tmp_path / "ckpt", {"u": Unnamed(np.ones(2))})
    assert not (tmp_path / "ckpt").exists()


def test_unsupported_leaves_are_refused_with_their_path(tmp_path: pathlib.Path) -> None:
    with pytest.raises(
        tc.TreeclassTypeError, match=r"the leaf at \['b'\]\[1\] is a builtins.object"
    ):
        tco.save(tmp_path / "a", {"a": 1, "b": [2, object()]})
    with pytest.raises(tc.TreeclassTypeError, match=r"array at \['s'\] has dtype <U1"):
        tco.save(tmp_path / "b", {"s": np.array(["x"])})
    with pytest.raises(tc.TreeclassTypeError, match=r"dtype object"):
        tco.save(tmp_path / "c", {"o": np.array([None, 1], dtype=object)})
    with pytest.raises(tc.TreeclassTypeError, match=r"key_data"):
        tco.save(tmp_path / "d", {"k": jax.random.key(0)})
    assert not any((tmp_path / n).exists() for n in "abcd")
    assert issubclass(tc.TreeclassTypeError, TypeError)


@pytest.mark.parametrize(
    "dtype", ["float6_e2m3fn", "float6_e3m2fn", "float8_e4m3", "uint2", "uint4"]
)
def test_dtypes_orbax_cannot_write_are_refused_naming_each(
    dtype: str, tmp_path: pathlib.Path
) -> None:
    # The message lists exactly the dtypes the table (treeclass._io.dtypes) marks as not
    # stored by treeclass.orbax.
    ml_dtypes = pytest.importorskip("ml_dtypes")
    array = np.zeros(2, dtype=getattr(ml_dtypes, dtype))
    with pytest.raises(
        tc.TreeclassTypeError,
        match=rf"array at \['a'\] has dtype {dtype}, which treeclass.orbax cannot save.* "
        r"except float6_e2m3fn, float6_e3m2fn, float8_e4m3, uint2 and uint4 ",
    ):
        tco.save(tmp_path / "a", {"a": array})
    assert not (tmp_path / "a").exists()


def test_existing_directory_needs_force(tmp_path: pathlib.Path) -> None:
    tco.save(tmp_path / "ckpt", {"a": np.ones(2)})
    with pytest.raises(ValueError):
        tco.save(tmp_path / "ckpt", {"a": np.zeros(2)})
    tco.save(tmp_path / "ckpt", {"a": np.zeros(2)}, force=True)
    np.testing.assert_array_equal(tco.restore(tmp_path / "ckpt")["a"], np.zeros(2))


def test_checkpoint_manager_with_save_args_restores_without_a_target(
    tmp_path: pathlib.Path,
) -> None:
    options = ocp.CheckpointManagerOptions(max_to_keep=2)
    mngr = ocp.CheckpointManager(tmp_path / "run", options=options)
    for step in (1, 2, 3):
        mngr.save(step, args=tco.save_args({"state": _state(step), "lr": 0.1 * step}))
    mngr.wait_until_finished()
    assert mngr.all_steps() == [2, 3]
    got = tco.restore(mngr.directory / str(mngr.latest_step()))
    assert type(got["state"]) is TrainState and int(got["state"].step) == 3
    assert got["state"].run == "run-2" and got["lr"] == pytest.approx(0.3)
    mngr.close()


def test_save_args_checks_before_anything_is_written(tmp_path: pathlib.Path) -> None:
    mngr = ocp.CheckpointManager(tmp_path / "run")
    with pytest.raises(tc.TreeclassTypeError, match=r"the leaf at \['x'\]"):
        mngr.save(1, args=tco.save_args({"x": object()}))
    assert mngr.all_steps() == []
    mngr.close()


def test_a_single_leaf_tree(tmp_path: pathlib.Path) -> None:
    tco.save(tmp_path / "a", np.arange(3))
    np.testing.assert_array_equal(tco.restore(tmp_path / "a"), np.arange(3))
    tco.save(tmp_path / "b", 2.5)
    assert tco.restore(tmp_path / "b") == 2.5
    with pytest.raises(tc.TreeclassTypeError, match=r"the leaf at the root is a builtins\.object"):
        tco.save(tmp_path / "c", object())


# --- part 2: hostile or foreign directories -----------------------------------------------------


def _document_path(ckpt: pathlib.Path) -> pathlib.Path:
    return ckpt / tco.STRUCTURE_ITEM / "metadata"


def _edit(ckpt: pathlib.Path, change: Any) -> None:
    path = _document_path(ckpt)
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))


@pytest.fixture
def saved(tmp_path: pathlib.Path) -> pathlib.Path:
    ckpt = tmp_path / "ckpt"
    tco.save(ckpt, {"state": _state(), "x": np.ones((2, 2), np.float32), "n": 3})
    assert _document_path(ckpt).exists()
    return ckpt


def test_a_plain_orbax_checkpoint_is_not_a_treeclass_one(tmp_path: pathlib.Path) -> None:
    ckptr = ocp.StandardCheckpointer()
    ckptr.save(tmp_path / "plain", {"a": np.ones(2)})
    ckptr.wait_until_finished()
    ckptr.close()
    with pytest.raises(tc.TreespecLoadError, match="not a checkpoint written by treeclass"):
        tco.restore(tmp_path / "plain")
    with pytest.raises(tc.TreespecLoadError, match="not a checkpoint written by treeclass"):
        tco.restore(tmp_path / "nowhere")


def _set_leaf(index: int, **fields: Any) -> Any:
    def change(doc: dict[str, Any]) -> None:
        doc["leaves"][index].update(fields)

    return change


def _x_index(ckpt: pathlib.Path) -> int:
    doc = json.loads(_document_path(ckpt).read_text())
    return next(i for i, d in enumerate(doc["leaves"]) if d.get("shape") == [2, 2])


@pytest.mark.parametrize(
    ("edit", "match"),
    [
        (lambda doc: doc.update(version=tco.VERSION + 1), "written by a newer treeclass"),
        (lambda doc: doc.update(format="other"), "format is not"),
        (lambda doc: doc["leaves"].pop(), "describes 8 leaves for a structure of 9"),
        (lambda doc: doc.update(treespec="{}"), "TreespecLoadError|not valid|treespec"),
        (lambda doc: doc.update(extra=1), f"fields of version {tco.VERSION}"),
        (lambda doc: doc["leaves"].__setitem__(-1, {"int": "3"}), "invalid 'int'"),
        (lambda doc: doc["leaves"].__setitem__(-1, {"float": "nonsense"}), "invalid 'float'"),
        (lambda doc: doc["leaves"].__setitem__(-1, {"pickle": "x"}), "invalid 'pickle'"),
    ],
)
def test_edited_documents_are_refused(saved: pathlib.Path, edit: Any, match: str) -> None:
    _edit(saved, edit)
    with pytest.raises(tc.TreespecLoadError, match=match):
        tco.restore(saved)


@pytest.mark.parametrize(
    ("fields", "match"),
    [
        ({"dtype": "float16"}, r"described as float16\[2, 2\] but stored as float32"),
        ({"dtype": "object"}, "not a numeric dtype"),
        ({"dtype": "O"}, "not a numeric dtype"),
        ({"shape": [4]}, r"described as float32\[4\]"),
        ({"shape": [-1, 2]}, "invalid shape"),
        ({"shape": [2] * 65}, "invalid shape"),
        ({"shape": [2**40, 2**40]}, "more than 2\\*\\*62 elements"),
        ({"key": "0"}, "has the key '0' instead of"),
        ({"array": "pickle"}, "unknown kind"),
    ],
)
def test_edited_array_descriptions_are_refused(
    saved: pathlib.Path, fields: dict[str, Any], match: str
) -> None:
    _edit(saved, _set_leaf(_x_index(saved), **fields))
    with pytest.raises(tc.TreespecLoadError, match=match) as info:
        tco.restore(saved)
    assert "the leaf at ['x']" in str(info.value) or "leaf" not in match


def test_missing_arrays_item_is_reported(saved: pathlib.Path) -> None:
    shutil.rmtree(saved / tco.ARRAYS_ITEM)
    with pytest.raises(tc.TreespecLoadError, match="'arrays' item is missing"):
        tco.restore(saved)


def test_damaged_structure_item_is_reported(saved: pathlib.Path) -> None:
    _document_path(saved).write_text("{not json")
    with pytest.raises(tc.TreespecLoadError, match="orbax could not read it"):
        tco.restore(saved)


# --- part 2: fresh processes --------------------------------------------------------------------

_MODELS = textwrap.dedent(
    """
    import typing
    from typing import Any

    import treeclass as tc


    @tc.pytree_dataclass(name="tests.orbax_fresh.Params", frozen=True)
    class Params:
        w: Any
        b: Any
        norm: Any = None
        act: str = tc.field(static=True, default="relu")


    @tc.register_namedtuple(name="tests.orbax_fresh.Pair")
    class Pair(typing.NamedTuple):
        first: Any
        second: Any


    @tc.pytree_dataclass(name="tests.orbax_fresh.State")
    class State:
        params: Params
        pair: Pair
        step: Any
        ema: Any = None
        run: str = tc.field(static=True, default="run")
        dims: tuple[int, ...] = tc.field(static=True, default=(1,))
    """
)

# The fresh-process scripts import jax first (what they check is not import order): a process
# that has the frameworks already runs them as a fresh one does (_subproc's preload).
_SAVE = """
import json, sys
import jax.numpy as jnp
import numpy as np
import models_v1 as m
import treeclass.orbax as tco

state = m.State(
    m.Params(jnp.arange(6.0).reshape(3, 2), np.ones(2, np.float32)),
    m.Pair(np.int64(4), [1.5, (2, "two")]),
    jnp.int32(11),
    run="fresh",
    dims=(3, 2),
)
tco.save(sys.argv[1], state)
print(json.dumps({"saved": True}))
"""

_RESTORE = """
import json, sys
import jax
import numpy as np
import renamed_models as m   # the same classes, under another module name
import treeclass.orbax as tco

s = tco.restore(sys.argv[1])
print(json.dumps({
    "types": [type(s).__name__, type(s.params).__name__, type(s.pair).__name__],
    "module": type(s).__module__,
    "same_classes": [type(s) is m.State, type(s.params) is m.Params, type(s.pair) is m.Pair],
    "statics": [s.run, list(s.dims), type(s.dims).__name__, s.params.act],
    "nones": [s.ema is None, s.params.norm is None],
    "w": [type(s.params.w).__module__.split(".")[0], str(s.params.w.dtype),
          list(s.params.w.shape), np.asarray(s.params.w).tolist()],
    "b": [type(s.params.b).__name__, str(s.params.b.dtype)],
    "step": [str(s.step.dtype), int(s.step)],
    "pair": [type(s.pair.first).__name__, int(s.pair.first), type(s.pair.second).__name__,
             s.pair.second[0], type(s.pair.second[1]).__name__, list(s.pair.second[1])],
    "imported_v1": "models_v1" in sys.modules,
}))
"""

_RESTORE_UNREGISTERED = """
import json, sys
import jax
import treeclass as tc
import treeclass.orbax as tco
try:
    tco.restore(sys.argv[1])
except tc.UnregisteredNameError as e:
    print(json.dumps({"error": str(e), "imported_v1": "models_v1" in sys.modules}))
"""


@pytest.mark.slow
def test_restore_in_a_fresh_process_with_renamed_module(tmp_path: pathlib.Path) -> None:
    ckpt = str(tmp_path / "ckpt")
    saved = report_in(tmp_path, _SAVE, ckpt, modules={"models_v1": _MODELS}, preload=FRAMEWORKS)
    assert saved == {"saved": True}
    (tmp_path / "models_v1.py").rename(tmp_path / "renamed_models.py")
    got = report_in(tmp_path, _RESTORE, ckpt, preload=FRAMEWORKS)
    assert got == {
        "types": ["State", "Params", "Pair"],
        "module": "renamed_models",
        "same_classes": [True, True, True],
        "statics": ["fresh", [3, 2], "tuple", "relu"],
        "nones": [True, True],
        "w": ["jaxlib", "float32", [3, 2], [[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]]],
        "b": ["ndarray", "float32"],
        "step": ["int32", 11],
        "pair": ["int64", 4, "list", 1.5, "tuple", [2, "two"]],
        "imported_v1": False,
    }


@pytest.mark.slow
def test_unregistered_names_are_reported_before_any_array_is_read(
    tmp_path: pathlib.Path,
) -> None:
    ckpt = tmp_path / "ckpt"
    report_in(tmp_path, _SAVE, str(ckpt), modules={"models_v1": _MODELS}, preload=FRAMEWORKS)
    os.remove(tmp_path / "models_v1.py")
    # No array can be read any more: the error must come from the structure alone.
    shutil.rmtree(ckpt / tco.ARRAYS_ITEM)
    got = report_in(tmp_path, _RESTORE_UNREGISTERED, str(ckpt), preload=FRAMEWORKS)
    assert got["imported_v1"] is False
    message = got["error"]
    for name in ("tests.orbax_fresh.State", "tests.orbax_fresh.Params", "tests.orbax_fresh.Pair"):
        assert repr(name) in message
    assert "(only the structure was read), which no class is registered under" in message
    assert "import the modules that define the classes" in message


# --- part 3: hostile directories, restored in a fresh process ----------------------------------
# Each checkpoint is written by tco.save, then one of the files restore reads is edited. One
# fresh process (with a timeout and a memory cap) restores them all and reports, per
# checkpoint, what was raised: only treeclass errors may come out, and each must finish fast.

_HOSTILE_TIMEOUT = 240.0  # one process restores every case; each takes well under a second
_HOSTILE_MEMORY_CAP = 3 * 1024**3  # restoring a valid checkpoint runs under a 2 GiB cap here

_RESTORE_EACH = """
import json, sys
import treeclass as tc
import treeclass.orbax as tco

for path in sys.argv[1:]:
    try:
        tco.restore(path)
        got = {"raised": None}
    except BaseException as e:
        got = {"raised": type(e).__name__, "treeclass": isinstance(e, tc.TreeclassError),
               "message": str(e)}
    print(json.dumps({"path": path, **got}), flush=True)
print(json.dumps({"done": True}))
"""


def _deep_json(depth: int = 100_000) -> str:
    return "[" * depth + "]" * depth


def _edit_leaf_of(ckpt: pathlib.Path, name: str, value: Any) -> None:
    def change(doc: dict[str, Any]) -> None:
        spec = json.loads(doc["treespec"])
        keys = spec["nodes"][0][1]  # the root dict's keys, in leaf order (one leaf each)
        doc["leaves"][keys.index(name)] = value

    _edit(ckpt, change)


def _data_file(ckpt: pathlib.Path) -> pathlib.Path:
    files = [p for p in (ckpt / tco.ARRAYS_ITEM).rglob("*") if p.is_file() and p.parent.name == "d"]
    return max(files, key=lambda p: p.stat().st_size)


def _truncate(path: pathlib.Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _arrays_metadata(ckpt: pathlib.Path, change: Any) -> None:
    path = ckpt / tco.ARRAYS_ITEM / "_METADATA"
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))


def _long_key_path(doc: dict[str, Any]) -> None:
    entry = next(iter(doc["tree_metadata"].values()))
    entry["key_metadata"] = [{"key": str(i), "key_type": 2} for i in range(50_000)]
    doc["tree_metadata"] = {"k": entry}


# (name, edit of the checkpoint directory, pattern the TreespecLoadError must match)
_HOSTILE: list[tuple[str, Any, str]] = [
    (
        "zero-size array with a 2**62 dimension",
        lambda c: _edit_leaf_of(
            c, "e", {"array": "numpy", "dtype": "float32", "shape": [0, 2**62], "key": None}
        ),
        r"the leaf at \['e'\] has dimensions no numpy array can have",
    ),
    (
        "float beyond float range",
        lambda c: _edit_leaf_of(c, "f", {"float": "0x1p99999"}),
        r"the leaf at \['f'\] has an invalid 'float' description",
    ),
    (
        "complex beyond float range",
        lambda c: _edit_leaf_of(c, "f", {"complex": ["0x0p+0", "-0x1p99999"]}),
        r"the leaf at \['f'\] has an invalid 'complex' description",
    ),
    (
        "deep JSON structure item",
        lambda c: _document_path(c).write_text(_deep_json()),
        r"orbax could not read it \(RecursionError",
    ),
    (
        "deep JSON arrays _METADATA",
        lambda c: (c / tco.ARRAYS_ITEM / "_METADATA").write_text(_deep_json()),
        r"orbax could not read the array metadata \(RecursionError",
    ),
    (
        "deep JSON _CHECKPOINT_METADATA",
        lambda c: (c / "_CHECKPOINT_METADATA").write_text(_deep_json()),
        r"orbax could not read the array metadata \(RecursionError",
    ),
    (
        "arrays _METADATA of the wrong shape",
        lambda c: _arrays_metadata(c, lambda d: d.update(tree_metadata=5)),
        r"orbax could not read the array metadata \(AttributeError",
    ),
    (
        "arrays _METADATA with a 50,000-entry key path",
        lambda c: _arrays_metadata(c, _long_key_path),
        r"orbax could not read the array metadata",
    ),
    (
        "truncated array chunk file",
        lambda c: _truncate(_data_file(c)),
        r"orbax could not read the arrays \(ValueError",
    ),
]


@pytest.fixture(scope="module")
def hostile_outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    base = tmp_path_factory.mktemp("hostile_orbax")
    rng = np.random.default_rng(0)
    paths: dict[str, str] = {}
    for i, (name, edit, _) in enumerate(_HOSTILE):
        ckpt = base / f"case{i}"
        tree = {
            "w": rng.random(50_000).astype(np.float32),  # chunks big enough to truncate
            "e": np.zeros((0, 2), np.float32),
            "f": 1.5,
        }
        tco.save(ckpt, tree)
        edit(ckpt)
        paths[name] = str(ckpt)
    out = run_script(
        _RESTORE_EACH,
        *paths.values(),
        timeout=_HOSTILE_TIMEOUT,
        memory_cap=_HOSTILE_MEMORY_CAP,
    )
    lines = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    by_path = {line["path"]: line for line in lines if "path" in line}
    results = {
        name: by_path.get(path, {"unfinished": out.describe()}) for name, path in paths.items()
    }
    return results


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "match"), [(n, m) for n, _, m in _HOSTILE], ids=[n for n, *_ in _HOSTILE]
)
def test_hostile_checkpoint_raises_only_a_treeclass_error(
    hostile_outcomes: dict[str, dict[str, Any]], name: str, match: str
) -> None:
    got = hostile_outcomes[name]
    assert "unfinished" not in got, got.get("unfinished")
    assert got["raised"] == "TreespecLoadError", got
    assert got["treeclass"] is True
    assert re.search(match, got["message"]), got["message"]


@tc.pytree_dataclass(name="tests.orbax.Checked", unflatten_calls_init=True)
class Checked:
    """A class whose ``__init__`` refuses what is not an array (or a float ``scale``)."""

    w: Any
    scale: float = 1.0

    def __post_init__(self) -> None:
        if not isinstance(self.w, (np.ndarray, jax.Array)):
            raise TypeError(f"w must be an array, not {type(self.w).__name__}")
        if self.scale.__class__ is not float:
            raise TypeError("scale must be a float")


def test_unflatten_calls_init_class_restores(tmp_path: pathlib.Path) -> None:
    # restore once read key paths by unflattening placeholder ints, which ran __init__ on them.
    tco.save(tmp_path / "c", {"m": Checked(np.ones(2, np.float32), scale=0.5)})
    got = tco.restore(tmp_path / "c")["m"]
    assert type(got) is Checked and got.scale == 0.5
    np.testing.assert_array_equal(got.w, np.ones(2, np.float32))


def test_unflatten_calls_init_refusal_is_a_load_error(tmp_path: pathlib.Path) -> None:
    tco.save(tmp_path / "c", {"m": Checked(np.ones(2, np.float32), scale=0.5)})
    _edit(tmp_path / "c", lambda doc: doc["leaves"].__setitem__(1, {"str": "big"}))
    with pytest.raises(
        tc.TreespecLoadError,
        match=r"rebuilding a (tests\.)?test_orbax\.Checked node .* raised TypeError: 'scale must",
    ):
        tco.restore(tmp_path / "c")
