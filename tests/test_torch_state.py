"""Training states of treeclass classes in ``torch.distributed.checkpoint`` (one process).

The state dict made by ``treeclass.torch._state.state_dict`` (to be exposed as
``treeclass.torch.state_dict``) lets DCP store every tensor as a tensor; the DCP metadata is
checked for it (``TensorStorageMetadata``, never ``BytesStorageMetadata``). The two-rank save
is in ``test_torch_distributed.py``.
"""

from __future__ import annotations

import collections
import typing
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest

torch = pytest.importorskip("torch")
dcp = pytest.importorskip("torch.distributed.checkpoint")

import treeclass as tc  # noqa: E402
from treeclass.torch._state import StatefulTree, load_state_dict, state_dict  # noqa: E402

pytestmark = pytest.mark.torch

Tensor = typing.Any
meta = pytest.importorskip("torch.distributed.checkpoint.metadata")


@tc.pytree_dataclass(name="tests.state.Params", frozen=True, slots=True)
class Params:
    w: Tensor
    b: Tensor
    extra: Tensor = None  # an optional field left None


class Moments(NamedTuple):
    mu: Any
    nu: Any


tc.register_namedtuple(Moments, name="tests.state.Moments")


@tc.pytree_dataclass(name="tests.state.AdamState", frozen=True)
class AdamState:
    moments: Moments
    count: Tensor
    betas: tuple[float, float] = tc.field(static=True, default=(0.9, 0.999))


@tc.pytree_dataclass(name="tests.state.Config", frozen=True)
class Config:
    lr: float = tc.field(static=True, default=1e-3)
    name: str = tc.field(static=True, default="run")


@tc.pytree_dataclass(name="tests.state.TrainState", frozen=True)
class TrainState:
    params: Params
    opt: AdamState
    step: int  # a Python int leaf: pickled by DCP, which is fine
    config: Config
    history: Any = None  # tuples, lists and dicts with non-str keys inside


def make_state(fill: float, step: int = 7, lr: float = 1e-3) -> TrainState:
    def full(*shape: int) -> Any:
        return torch.full(shape, fill)

    params = Params(full(4, 3), full(3))
    return TrainState(
        params=params,
        opt=AdamState(Moments(Params(full(4, 3), full(3)), Params(full(4, 3), full(3))), full()),
        step=step,
        config=Config(lr=lr),
        history=(
            [full(2), full(2)],
            collections.OrderedDict([(1, full(1)), (2, None)]),
            {"losses": (full(5),)},
        ),
    )


TENSOR_KEYS = {
    "train.params.w",
    "train.params.b",
    "train.opt.moments.mu.w",
    "train.opt.moments.mu.b",
    "train.opt.moments.nu.w",
    "train.opt.moments.nu.b",
    "train.opt.count",
    "train.history.0.0",
    "train.history.0.1",
    "train.history.1.1",
    "train.history.2.losses.0",
}


def storage(folder: Path) -> dict[str, str]:
    md = dcp.FileSystemReader(str(folder)).read_metadata()
    return {k: type(v).__name__ for k, v in md.state_dict_metadata.items()}


def assert_equal_states(a: TrainState, b: TrainState) -> None:
    la, sa = tc.tree_flatten(a)
    lb, sb = tc.tree_flatten(b)
    assert sa == sb  # same classes, statics, None fields
    assert len(la) == len(lb)
    for x, y in zip(la, lb):
        if isinstance(x, torch.Tensor):
            assert torch.equal(x, y)
        else:
            assert x == y


@pytest.fixture(autouse=True)
def _quiet() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*assuming the intent is to")
        yield


def test_state_dict_is_nested_dicts_and_lists_of_the_trees_own_tensors() -> None:
    state = make_state(1.0)
    sd = state_dict(state)
    assert set(sd) == {"params", "opt", "step", "config", "history"}
    assert sd["params"] == {"w": state.params.w, "b": state.params.b, "extra": None}
    assert sd["params"]["w"] is state.params.w
    assert sd["opt"]["moments"]["nu"]["b"] is state.opt.moments.nu.b
    assert sd["opt"]["betas"] == (0.9, 0.999)
    assert sd["config"] == {"lr": 1e-3, "name": "run"}
    assert sd["step"] == 7
    assert isinstance(sd["history"], list) and isinstance(sd["history"][0], list)
    assert list(sd["history"][1]) == ["1", "2"]  # DCP keys are strings


def test_dcp_stores_every_tensor_as_a_tensor(tmp_path: Path) -> None:
    dcp.save({"train": state_dict(make_state(1.0))}, checkpoint_id=str(tmp_path))
    kinds = storage(tmp_path)
    tensors = {k for k, v in kinds.items() if v == "TensorStorageMetadata"}
    assert tensors == TENSOR_KEYS
    others = {k for k, v in kinds.items() if v != "TensorStorageMetadata"}
    assert {kinds[k] for k in others} == {"BytesStorageMetadata"}
    assert others == {
        "train.params.extra",
        "train.opt.moments.mu.extra",
        "train.opt.moments.nu.extra",
        "train.opt.betas",
        "train.step",
        "train.config.lr",
        "train.config.name",
        "train.history.1.2",
    }


def test_without_it_dcp_pickles_the_whole_tree(tmp_path: Path) -> None:
    """Why state_dict() is needed: a treeclass instance is an opaque object to DCP."""
    dcp.save({"train": make_state(1.0)}, checkpoint_id=str(tmp_path))
    assert storage(tmp_path) == {"train": "BytesStorageMetadata"}


def test_save_then_load_into_the_same_classes(tmp_path: Path) -> None:
    saved = make_state(1.5, step=11)
    dcp.save({"train": state_dict(saved)}, checkpoint_id=str(tmp_path))
    template = make_state(0.0, step=0)
    sd = {"train": state_dict(template)}
    dcp.load(sd, checkpoint_id=str(tmp_path))
    loaded = load_state_dict(template, sd["train"])
    assert type(loaded) is TrainState and type(loaded.opt.moments) is Moments
    assert_equal_states(loaded, saved)
    assert loaded.step == 11
    assert loaded.params.w is template.params.w  # DCP loaded in place into the template
    assert type(loaded.history[1]) is collections.OrderedDict
    assert list(loaded.history[1]) == [1, 2]


def test_stateful_wrapper(tmp_path: Path) -> None:
    saved = make_state(2.0, step=3)
    dcp.save({"train": StatefulTree(saved), "epoch": 4}, checkpoint_id=str(tmp_path))
    assert TENSOR_KEYS <= set(storage(tmp_path))
    holder = StatefulTree(make_state(0.0, step=0))
    target: dict[str, Any] = {"train": holder, "epoch": 0}
    dcp.load(target, checkpoint_id=str(tmp_path))
    assert target["epoch"] == 4
    assert_equal_states(holder.tree, saved)
    assert repr(holder).startswith("StatefulTree(TrainState(")


def test_a_checkpoint_with_another_static_value_is_an_error(tmp_path: Path) -> None:
    dcp.save({"train": state_dict(make_state(1.0, lr=0.1))}, checkpoint_id=str(tmp_path))
    template = make_state(0.0, lr=0.2)
    sd = {"train": state_dict(template)}
    dcp.load(sd, checkpoint_id=str(tmp_path))
    with pytest.raises(
        tc.StructureMismatchError,
        match=r"does not match the tree at \.config\.lr: the static field 'lr' of Config is "
        r"0\.1 in the checkpoint but 0\.2 in the tree given",
    ):
        load_state_dict(template, sd["train"])


def test_structure_mismatches_name_where() -> None:
    state = make_state(1.0)
    sd = state_dict(state)
    del sd["opt"]["count"]
    with pytest.raises(
        tc.StructureMismatchError, match=r"at \.opt: missing \['count'\], unexpected \[\]"
    ):
        load_state_dict(state, sd)
    sd = state_dict(state)
    sd["history"][0].append(torch.ones(2))
    with pytest.raises(tc.StructureMismatchError, match=r"at \.history\[0\]: expected a list of 2"):
        load_state_dict(state, sd)
    sd = state_dict(state)
    sd["params"] = torch.ones(1)
    with pytest.raises(tc.StructureMismatchError, match=r"at \.params: expected a mapping with"):
        load_state_dict(state, sd)


def test_root_must_be_a_mapping_and_keys_distinct() -> None:
    with pytest.raises(tc.TreeclassTypeError, match=r"got a list; wrap it"):
        state_dict([torch.ones(1)])
    with pytest.raises(tc.TreeclassTypeError, match=r"two keys whose str\(\) is '1'"):
        state_dict({"a": {1: torch.ones(1), "1": torch.ones(1)}})


def test_none_fields_and_rebuild_without_init() -> None:
    calls: list[int] = []

    @tc.pytree_dataclass(name="tests.state.Counted")
    class Counted:
        x: Tensor
        y: Tensor = None

        def __post_init__(self) -> None:
            calls.append(1)

    tree = {"c": Counted(torch.ones(1))}
    calls.clear()
    back = load_state_dict(tree, state_dict(tree))
    assert back["c"].y is None and torch.equal(back["c"].x, torch.ones(1))
    assert calls == []
