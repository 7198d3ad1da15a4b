"""treeclass trees in a multi-process JAX program: ``jax.distributed`` on CPU, two processes on
127.0.0.1 with gloo collectives.

One two-process job (run once for the module, ~1.5 s on 2 cores once forked) covers, on trees
of treeclass dataclasses and named tuples (with static fields and ``None`` fields):

- ``jax.experimental.multihost_utils.process_allgather`` (every leaf gathered along a new
  leading axis, the classes and statics kept), ``broadcast_one_to_all`` (process 0's tree
  everywhere) and ``sync_global_devices`` (a barrier: a file process 1 writes before it is
  seen by process 0 after it);
- an orbax checkpoint of a tree holding global ``jax.Array``\\ s (one replicated over both
  processes, one sharded across them), numpy arrays and Python scalars, saved by both
  processes, then restored by both: with a target by orbax's ``StandardCheckpointer`` (the
  sharding of the target is kept), and without a target by ``treeclass.orbax.restore``, with
  a ``NamedSharding`` over both processes and with its default (this process's first device).

Each process reports what it got as JSON; the assertions are made here. The JAX program of
docs/distributed.md runs as two processes too (~1.5 s). The coordinator listens on a free port
of 127.0.0.1; both processes are killed at a bounded timeout.
"""

from __future__ import annotations

import concurrent.futures
import socket
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("jax")
pytest.importorskip("orbax.checkpoint")

from _subproc import FRAMEWORKS, Outcome, run_script
from test_docs import DOCS, blocks

pytestmark = [pytest.mark.jax, pytest.mark.slow]

TIMEOUT = 180  # seconds for each process (the job takes ~1.5 s on an idle machine)

SCRIPT = r"""
import json, os, sys, time
from typing import Any, NamedTuple

coordinator, pid, folder = sys.argv[1], int(sys.argv[2]), sys.argv[3]
import jax
jax.config.update("jax_platforms", "cpu")
jax.config.update("jax_cpu_collectives_implementation", "gloo")
jax.distributed.initialize(
    coordinator_address=coordinator, num_processes=2, process_id=pid,
    initialization_timeout=120,
)
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
from jax.experimental import multihost_utils as mh
from jax.sharding import NamedSharding, PartitionSpec as P

import treeclass as tc
import treeclass.orbax as tco

@tc.pytree_dataclass(name="tests.jaxdist.Layer", frozen=True)
class Layer:
    w: Any
    b: Any = None
    act: str = tc.field(static=True, default="relu")

@tc.register_namedtuple(name="tests.jaxdist.Moments")
class Moments(NamedTuple):
    mu: Any
    count: Any

def describe(tree):
    # Every node's class and statics, every leaf's type, shape and (gathered) values.
    nodes = []
    def visit(x):
        if isinstance(x, Layer):
            nodes.append(["Layer", x.act, x.b is None])
        elif isinstance(x, Moments):
            nodes.append(["Moments"])
        return x
    jax.tree.map(visit, tree, is_leaf=lambda x: isinstance(x, (Layer, Moments)))
    leaves = []
    for x in jax.tree.leaves(tree):
        if isinstance(x, jax.Array):
            if x.is_fully_addressable:  # this process's own array
                kind, value = "jax", np.asarray(x)
            else:  # a global array: its whole value (a collective, in both processes alike)
                kind, value = "jax-global", np.asarray(mh.process_allgather(x, tiled=True))
        elif isinstance(x, (np.ndarray, np.generic)):
            kind, value = "numpy", np.asarray(x)
        else:
            kind, value = type(x).__name__, np.asarray(x)
        leaves.append([kind, list(value.shape), value.tolist()])
    return {"nodes": nodes, "leaves": leaves}

def local_tree(p):
    return {
        "layers": [
            Layer(np.full((2,), p, np.float32), jnp.arange(3.0) + p),
            Layer(np.ones(1, np.float32) * p, act="gelu"),
        ],
        "opt": Moments(jnp.full((2,), 10.0 * p), np.int32(p)),
    }

report = {"process_count": jax.process_count()}
tree = local_tree(pid)
report["allgather"] = describe(mh.process_allgather(tree))
report["broadcast"] = describe(mh.broadcast_one_to_all(tree))

marker = os.path.join(folder, "marker")
if pid == 1:  # (without the barrier, process 0 would look long before this)
    time.sleep(0.5)
    with open(marker, "w") as f:
        f.write("written by process 1")
mh.sync_global_devices("tests.jaxdist")
report["barrier_saw_marker"] = os.path.exists(marker)

mesh = jax.sharding.Mesh(np.array(jax.devices()), ("p",))
replicated = NamedSharding(mesh, P())
split = NamedSharding(mesh, P("p"))
state = {
    "model": Layer(
        jax.make_array_from_process_local_data(replicated, np.arange(4, dtype=np.float32)),
        jax.make_array_from_process_local_data(split, np.full((2,), pid, np.float32)),
        act="gelu",
    ),
    "opt": Moments(np.arange(3, dtype=np.int64), np.array(5, np.int32)),
    "step": 7,
}
report["saved"] = describe(state)

checkpointer = ocp.StandardCheckpointer()
checkpointer.save(os.path.join(folder, "orbax"), state)
checkpointer.wait_until_finished()
# An abstract target for the jax arrays (their shardings), the saved values for the rest.
target = jax.tree.map(
    lambda x: ocp.utils.to_shape_dtype_struct(x) if isinstance(x, jax.Array) else x, state
)
restored = checkpointer.restore(os.path.join(folder, "orbax"), target)
checkpointer.close()
report["orbax_with_target"] = describe(restored)
report["orbax_with_target_b_spec"] = list(restored["model"].b.sharding.spec)

path = os.path.join(folder, "treeclass")
tco.save(path, state)
report["tco_replicated"] = describe(tco.restore(path, sharding=replicated))
report["tco_default"] = describe(tco.restore(path))
mh.sync_global_devices("tests.jaxdist.done")
print(json.dumps(report))
"""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def run_two(script: str, folder: Path, **env: str) -> list[Outcome]:
    """Run ``script 127.0.0.1:PORT PROCESS_ID FOLDER`` as processes 0 and 1, side by side,
    with ``env`` (then, with a variable jax reads when imported, as real fresh processes; else
    forked from the zygote, jax imported first).

    Process 1 starts once the coordinator (process 0) listens: a client that finds no
    coordinator tries again only a second later, which the job then waited for nearly every run.
    """
    host, port = "127.0.0.1", free_port()
    env = {"XLA_FLAGS": "", "TF_CPP_MIN_LOG_LEVEL": "2", **env}

    def start(pool: concurrent.futures.Executor, i: int) -> concurrent.futures.Future[Outcome]:
        args = (script, f"{host}:{port}", str(i), str(folder))
        return pool.submit(run_script, *args, timeout=TIMEOUT, env=env, preload=FRAMEWORKS)

    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        first = start(pool, 0)
        deadline = time.monotonic() + TIMEOUT
        while not first.done() and time.monotonic() < deadline:
            try:
                socket.create_connection((host, port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.01)
        if first.done():  # process 0 ended without listening: its failure, without process 1
            assert first.result().returncode == 0, first.result().describe()
        futures = [first, start(pool, 1)]
        outcomes = [f.result() for f in futures]
    # When one process fails, the other waits for it until killed: show the failure first.
    for outcome in sorted(outcomes, key=lambda o: o.timed_out):
        assert outcome.returncode == 0, outcome.describe()
    return outcomes


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """The two processes' reports, in process order."""
    outcomes = run_two(SCRIPT, tmp_path_factory.mktemp("jaxdist"))
    return [outcome.report() for outcome in outcomes]


LAYER_NODES = [["Layer", "relu", False], ["Layer", "gelu", True], ["Moments"]]


def tree_description(p: int | None) -> list[list[Any]]:
    """The leaves ``describe`` reports for ``local_tree(p)``, or both gathered (``None``)."""

    def leaf(kind: str, one: Any) -> list[Any]:
        if p is not None:
            return [kind, [len(one(p))] if isinstance(one(p), list) else [], one(p)]
        both = [one(0), one(1)]
        shape = [2, len(both[0])] if isinstance(both[0], list) else [2]
        return ["numpy", shape, both]

    return [
        leaf("numpy", lambda q: [float(q)] * 2),
        leaf("jax", lambda q: [0.0 + q, 1.0 + q, 2.0 + q]),
        leaf("numpy", lambda q: [float(q)]),
        leaf("jax", lambda q: [10.0 * q] * 2),
        leaf("numpy", lambda q: q),
    ]


def test_both_processes_joined(reports: list[dict[str, Any]]) -> None:
    assert [r["process_count"] for r in reports] == [2, 2]


def test_process_allgather_keeps_classes_and_statics(reports: list[dict[str, Any]]) -> None:
    for r in reports:
        assert r["allgather"] == {"nodes": LAYER_NODES, "leaves": tree_description(None)}


def test_broadcast_one_to_all_gives_process_0s_tree(reports: list[dict[str, Any]]) -> None:
    want = tree_description(0)
    for leaf in want:
        leaf[0] = "numpy"  # broadcast_one_to_all returns numpy arrays
    for r in reports:
        assert r["broadcast"] == {"nodes": LAYER_NODES, "leaves": want}


def test_sync_global_devices_is_a_barrier(reports: list[dict[str, Any]]) -> None:
    assert [r["barrier_saw_marker"] for r in reports] == [True, True]


SAVED_NODES = [["Layer", "gelu", False], ["Moments"]]
SAVED_LEAVES = [
    ["jax-global", [4], [0.0, 1.0, 2.0, 3.0]],  # replicated
    ["jax-global", [4], [0.0, 0.0, 1.0, 1.0]],  # sharded: process 0's half, then process 1's
    ["numpy", [3], [0, 1, 2]],
    ["numpy", [], 5],
    ["int", [], 7],
]


def test_the_saved_state_is_global(reports: list[dict[str, Any]]) -> None:
    for r in reports:
        assert r["saved"] == {"nodes": SAVED_NODES, "leaves": SAVED_LEAVES}


def test_orbax_restores_with_a_target_in_both_processes(reports: list[dict[str, Any]]) -> None:
    for r in reports:
        assert r["orbax_with_target"] == {"nodes": SAVED_NODES, "leaves": SAVED_LEAVES}
        assert r["orbax_with_target_b_spec"] == ["p"]  # the target's sharding


def test_treeclass_orbax_restores_without_a_target_in_both_processes(
    reports: list[dict[str, Any]],
) -> None:
    for r in reports:
        # Onto a sharding over both processes: global arrays, in their own classes.
        assert r["tco_replicated"] == {"nodes": SAVED_NODES, "leaves": SAVED_LEAVES}
        # By default onto this process's first device: every process gets the whole arrays.
        local = [["jax" if k == "jax-global" else k, s, v] for k, s, v in SAVED_LEAVES]
        assert r["tco_default"] == {"nodes": SAVED_NODES, "leaves": local}


def test_the_docs_example_runs_in_two_processes(tmp_path: Path) -> None:
    """The JAX program of docs/distributed.md (its own asserts check what the page says)."""
    [block] = [
        b
        for b in blocks(DOCS / "distributed.md")
        if b.lang == "python" and b.skip_reason and "test_jax_distributed.py" in b.skip_reason
    ]
    outcomes = run_two(block.code, tmp_path, JAX_PLATFORMS="cpu")  # as the page says
    assert [o.stdout.strip().splitlines()[-1] for o in outcomes] == ["ok 0", "ok 1"]
