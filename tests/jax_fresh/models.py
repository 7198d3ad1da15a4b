"""Classes for the fresh-process ``jax.export`` tests in ``tests/test_jax_backend.py``.

This module imports treeclass and numpy, never jax: whether jax is imported before or after
it is what the tests vary. ``Output.__post_init__`` refuses anything but a float or a numpy
array, so a placeholder (tracer, ``ShapedArray``, ``object()``) reaching it fails the test.
"""

from __future__ import annotations

import typing
from typing import Any

import numpy as np

import treeclass as tc


@tc.pytree_dataclass(name="tests.jax_fresh.Output", frozen=True)
class Output:
    logits: Any
    loss: Any = None
    hidden: Any = None
    shape: tuple[int, ...] = tc.field(static=True, default=(2, 3))
    mode: str = tc.field(static=True, default="eval")

    def __post_init__(self) -> None:
        if not isinstance(self.logits, (float, np.ndarray)):
            raise TypeError(f"Output.__post_init__ ran on a {type(self.logits).__name__}")


@tc.register_namedtuple(name="tests.jax_fresh.Pair")
class Pair(typing.NamedTuple):
    first: Any
    second: Any


@tc.pytree_dataclass(name="tests.jax_fresh.Stats", return_none_fields=True, slots=True)
class Stats:
    count: Any
    extra: Any = None


@tc.pytree_dataclass(name="tests.jax_fresh.Batch")
class Batch:
    out: Output
    pair: Pair
    stats: Stats
    extras: dict[str, Any]
    tag: str = tc.field(static=True, default="batch")


def make_batch() -> Batch:
    """The example input, the same in every process."""
    logits = np.arange(6, dtype=np.float32).reshape(2, 3)
    return Batch(
        out=Output(logits, loss=None, hidden=None, shape=(2, 3), mode="train"),
        pair=Pair(np.float32(1.5), [np.float32(2.0), np.float32(3.0)]),
        stats=Stats(np.int32(7)),
        extras={"b": np.ones(2, np.float32), "a": np.zeros(1, np.float32)},
        tag="t1",
    )


def compute(batch: Batch, tree_map: Any) -> tuple[Output, Pair, Stats]:
    """The exported function: outputs built from the inputs, never through ``__init__``.

    ``tree_map`` is ``jax.tree_util.tree_map`` (passed in, so this module never imports jax).
    """
    out = tree_map(lambda x: x * 2.0 + batch.pair.first, batch.out)
    pair = Pair(batch.extras["a"].sum() + batch.pair.second[0], batch.out)
    return out, pair, batch.stats
