"""treeclass trees on Ray: a local Ray (``ray.init(num_cpus=2)``, no cluster), one per module.

Ray serializes objects with its cloudpickle, which consults :data:`copyreg.dispatch_table`, so
instances of named classes are pickled by their treeclass name (:mod:`treeclass._pickle`), and
numpy arrays in their fields travel as pickle protocol 5 out-of-band buffers: they are read
from Ray's object store without a copy, as the arrays of a plain dict are.

Covered: ``ray.put`` / ``ray.get``, task arguments and returns, actor state, and objects
unpickled in a worker that defines the classes in a module of another name (found by name).
The classes live in ``tests/_ray_defs.py``, which the workers import when they first meet a
name (this folder is put on their ``PYTHONPATH``). Arrays are 256 KiB, above Ray's 100 KiB
limit for inlining small objects, so they go through the shared-memory object store. The cost
of ``ray.get`` against a plain dict is measured in ``benchmarks/bench_ray.py``, not here.

Without Ray the module is skipped, which fails the CI run (``TREECLASS_REQUIRE_BACKENDS=1``).
"""

from __future__ import annotations

import os
import pathlib
import sys
import textwrap
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

ray = pytest.importorskip("ray")
np = pytest.importorskip("numpy")

import _ray_defs as defs  # noqa: E402
from _ray_defs import Layer, Moments, State  # noqa: E402
from _subproc import SRC  # noqa: E402

import treeclass as tc  # noqa: E402

pytestmark = [pytest.mark.ray, pytest.mark.slow]

TESTS = str(pathlib.Path(__file__).resolve().parent)
SIZE = 2**15  # float64 elements per array: 256 KiB, stored in the object store, not inlined
TIMEOUT = 120  # seconds for any one ray.get


@pytest.fixture(scope="module")
def session() -> Iterator[None]:
    """One local Ray for the module (``ray.init`` takes seconds)."""
    path = [TESTS, os.environ.get("PYTHONPATH", ""), SRC]
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join(filter(None, path))}},
    )
    try:
        yield
    finally:
        ray.shutdown()


def arrays(tree: Any) -> list[Any]:
    return [x for x in tc.tree_leaves(tree) if isinstance(x, np.ndarray)]


def assert_same_state(got: Any, want: State) -> None:
    assert type(got) is State
    assert all(type(layer) is Layer for layer in got.layers)
    assert type(got.opt) is Moments
    assert (got.step, got.run) == (want.step, want.run)
    assert [layer.act for layer in got.layers] == [layer.act for layer in want.layers]
    assert tc.tree_structure(got) == tc.tree_structure(want)
    for a, b in zip(arrays(got), arrays(want), strict=True):
        np.testing.assert_array_equal(a, b)


def test_pickling_by_name_keeps_numpy_buffers_out_of_band() -> None:
    """What Ray relies on: cloudpickle at protocol 5 hands the arrays to ``buffer_callback``."""
    state = defs.make_state(size=SIZE)
    buffers: list[Any] = []
    data = ray.cloudpickle.dumps(state, protocol=5, buffer_callback=buffers.append)
    assert b"tests.ray.State" in data and b"rebuild_by_name" in data  # by name
    assert len(buffers) == len(arrays(state)) == 6
    assert len(data) < SIZE  # the 6 x 256 KiB of arrays are not in the pickle itself
    got = ray.cloudpickle.loads(data, buffers=buffers)
    assert_same_state(got, state)
    for a, b in zip(arrays(got), arrays(state), strict=True):
        assert np.shares_memory(a, b)  # rebuilt on the buffers: no copy


@pytest.mark.usefixtures("session")
def test_put_and_get_come_back_as_the_registered_classes_without_a_copy() -> None:
    state = defs.make_state(size=SIZE)
    ref = ray.put(state)
    first = ray.get(ref, timeout=TIMEOUT)
    assert_same_state(first, state)
    second = ray.get(ref, timeout=TIMEOUT)
    # Zero-copy: the arrays are read-only views of the object store's shared memory, so two
    # gets of one object share it -- exactly as the arrays of a plain dict do.
    plain = {"w": state.layers[0].w, "mu": state.opt.mu}
    plain_ref = ray.put(plain)
    plain_first, plain_second = ray.get([plain_ref, plain_ref], timeout=TIMEOUT)
    for got, again in ((first, second), (plain_first, plain_second)):
        for a, b in zip(arrays(got), arrays(again), strict=True):
            assert not a.flags.writeable
            assert np.shares_memory(a, b)


@pytest.mark.usefixtures("session")
def test_task_arguments_and_returns() -> None:
    state = defs.make_state(size=SIZE, seed=1)
    report = ray.get(defs.inspect_remote.remote(state), timeout=TIMEOUT)
    # The worker received the registered class (it imported _ray_defs to find the name), with
    # read-only arrays: the argument went through the object store without a copy.
    assert report == {
        "root": "_ray_defs.State",
        "name": "tests.ray.State",
        "writeable": [False] * 6,
    }

    def times(k: float) -> State:
        return tc.tree_map(lambda x: x * k if isinstance(x, np.ndarray) else x, state)

    doubled = ray.get(defs.scale.remote(state, 2.0), timeout=TIMEOUT)
    assert_same_state(doubled, times(2.0))
    # A returned object passed on to another task by reference.
    quadrupled = ray.get(defs.scale.remote(defs.scale.remote(state, 2.0), 2.0), timeout=TIMEOUT)
    assert_same_state(quadrupled, times(4.0))


@pytest.mark.usefixtures("session")
def test_actor_state() -> None:
    state = defs.make_state(size=SIZE, seed=2)
    grads = defs.make_state(size=SIZE, seed=3)
    trainer = defs.Trainer.remote(state)  # type: ignore[attr-defined]
    try:
        ray.get(trainer.step.remote(grads), timeout=TIMEOUT)
        stepped = ray.get(trainer.step.remote(grads), timeout=TIMEOUT)
        kept = ray.get(trainer.get.remote(), timeout=TIMEOUT)
    finally:
        ray.kill(trainer)
    want = tc.tree_map(lambda p, g: p - 0.5 * g - 0.5 * g, state, grads)
    want = tc.replace(want, step=state.step + 2)
    assert_same_state(stepped, want)
    assert_same_state(kept, want)


DEFS = """
from typing import Any
import treeclass as tc

@tc.pytree_dataclass(name={name!r}, frozen=True)
class Point:
    x: Any
    unit: str = tc.field(static=True, default="m")
"""


@pytest.mark.usefixtures("session")
def test_a_worker_finds_the_class_by_name_under_another_module_name() -> None:
    """The driver's class lives in a module no worker can import; a worker that defines the
    same name in a module of another name unpickles the object as its own class."""
    tag = uuid.uuid4().hex[:12]
    source = textwrap.dedent(DEFS.format(name=f"tests.ray.Point_{tag}"))
    here = f"tc_ray_a_{tag}"
    module = type(sys)(here)
    sys.modules[here] = module
    try:
        exec(compile(source, f"<{here}>", "exec"), vars(module))
        Point = module.Point
        point = Point(np.arange(SIZE, dtype=np.float64), unit="km")
        ref = ray.put(point)
        # No worker has defined the name yet, and none can import the driver's module: a clear
        # error naming both, raised in the worker (Ray reports it in a RayTaskError).
        message = (
            rf"UnregisteredNameError: this pickle uses the serialized name "
            rf"'tests\.ray\.Point_{tag}' \(pickled from {here}\.Point"
        )
        with pytest.raises(ray.exceptions.RayTaskError, match=message):
            ray.get(defs.inspect_remote.remote(ref), timeout=TIMEOUT)
        there = f"tc_ray_b_{tag}"
        [(kind, back)] = ray.get(defs.define_and_get.remote(source, there, [ref]), timeout=TIMEOUT)
        assert kind == f"{there}.Point"  # the worker's own class
        assert type(back) is Point and back.unit == "km"  # and the driver's on the way back
        np.testing.assert_array_equal(back.x, point.x)
    finally:
        del sys.modules[here]
