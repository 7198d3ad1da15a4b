"""Classes and remote functions for tests/test_ray.py, in a module Ray's workers can import.

A Ray worker is a separate process: when it unpickles an instance whose name no class holds
yet, :func:`treeclass._pickle.rebuild_by_name` imports this module by its path (as pickle
would), which registers the names. test_ray.py puts this folder on the workers' path.
"""

from __future__ import annotations

import sys
import types
from typing import Any, NamedTuple

import numpy as np
import ray

import treeclass as tc


@tc.pytree_dataclass(name="tests.ray.Layer", frozen=True)
class Layer:
    w: Any
    b: Any = None
    act: str = tc.field(static=True, default="relu")


@tc.register_namedtuple(name="tests.ray.Moments")
class Moments(NamedTuple):
    mu: Any
    nu: Any


@tc.pytree_dataclass(name="tests.ray.State")
class State:
    layers: list[Layer]
    opt: Moments
    step: int = 0
    run: str = tc.field(static=True, default="r1")


def make_state(n: int = 2, size: int = 4, seed: int = 0) -> State:
    """A state of ``n`` layers whose arrays have ``size`` float64 elements each."""
    rng = np.random.default_rng(seed)
    layers = [
        Layer(rng.standard_normal(size), np.full(size, float(i)), act=("relu", "gelu")[i % 2])
        for i in range(n)
    ]
    return State(layers, Moments(np.zeros(size), np.ones(size)), step=3, run="ray")


def describe(tree: Any) -> dict[str, Any]:
    """What a worker reports about a tree it received: its class, name and leaves' flags."""
    return {
        "root": f"{type(tree).__module__}.{type(tree).__qualname__}",
        "name": tc.name_of(type(tree)),
        "writeable": [
            bool(x.flags.writeable) for x in tc.tree_leaves(tree) if isinstance(x, np.ndarray)
        ],
    }


@ray.remote
def scale(state: State, factor: float) -> State:
    """A task: takes a state as an argument and returns a new one."""
    assert type(state) is State, type(state)
    return tc.tree_map(lambda x: x * factor if isinstance(x, np.ndarray) else x, state)


@ray.remote
def inspect_remote(tree: Any) -> dict[str, Any]:
    """A task reporting what it received (the argument is resolved by Ray before the call)."""
    return describe(tree)


@ray.remote
def define_and_get(source: str, module_name: str, refs: list[Any]) -> Any:
    """Define classes from ``source`` in a module named ``module_name``, then ``ray.get(refs)``.

    The refs are nested in a list, so Ray does not resolve them before the body runs: the
    objects are unpickled after the classes are defined here, under another module name.
    """
    module = types.ModuleType(module_name)
    sys.modules[module_name] = module
    exec(compile(source, f"<{module_name}>", "exec"), vars(module))
    got = ray.get(refs)
    return [(f"{type(x).__module__}.{type(x).__qualname__}", x) for x in got]


@ray.remote
class Trainer:
    """An actor whose state is a treeclass tree."""

    def __init__(self, state: State) -> None:
        assert type(state) is State, type(state)
        self.state = state

    def step(self, grads: State) -> State:
        assert type(grads) is State, type(grads)
        self.state = tc.tree_map(
            lambda p, g: p - 0.5 * g if isinstance(p, np.ndarray) else p, self.state, grads
        )
        self.state = tc.replace(self.state, step=self.state.step + 1)
        return self.state

    def get(self) -> State:
        return self.state
