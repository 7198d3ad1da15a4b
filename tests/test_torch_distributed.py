"""treeclass classes on a real distributed engine: ``torch.distributed`` with the gloo backend,
two processes on loopback.

One two-rank job (run once for the module, ~15 s on 2 cores) covers:

- ``DistributedDataParallel(static_graph=True)`` around a model returning a treeclass output
  whose optional fields are ``None``: forward, loss, backward and optimizer steps over several
  iterations, after which the parameters are equal on both ranks;
- ``broadcast_object_list`` / ``all_gather_object`` of treeclass objects and ``TreeSpec`` objects
  between ranks that define the classes in modules of *different names* (rank 0 in
  ``tc_dist_a_*``, rank 1 in ``tc_dist_b_*``): this needs pickling by name, installed by hand in
  the shared definitions until registration does it (issue 11);
- ``torch.distributed.checkpoint.save`` on both ranks of a training state made of treeclass
  classes (parameters, optimizer state, step counter, static configuration, and a ``DTensor``
  sharded across the ranks), through ``treeclass.torch._state.state_dict``.

The checkpoint is then loaded in this (single) process into the same classes.

The ranks rendezvous through a file (``file://`` init method, so no port is chosen by the
test; gloo picks its own on ``lo``), run with a bounded timeout (both are killed if it
passes), and destroy their process group in a ``finally``.
"""

from __future__ import annotations

import concurrent.futures
import sys
import uuid
import warnings
from typing import Any

import pytest
from _subproc import FRAMEWORKS, run_script, write_modules

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")
dcp = pytest.importorskip("torch.distributed.checkpoint")

import treeclass as tc  # noqa: E402
from treeclass.torch._state import load_state_dict, state_dict  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.slow]

TIMEOUT = 240  # seconds for the whole two-rank job

DEFS = """
import typing
from typing import Any, NamedTuple
import torch
import treeclass as tc
from treeclass import _pickle

P = {prefix!r}

@tc.pytree_dataclass(name=P + ".Batch", frozen=True)
class Batch:
    x: torch.Tensor
    labels: typing.Optional[torch.Tensor] = None

@tc.pytree_dataclass(name=P + ".Output", frozen=True)
class Output:
    logits: torch.Tensor
    loss: typing.Optional[torch.Tensor] = None
    hidden: typing.Optional[torch.Tensor] = None
    attentions: typing.Optional[tuple] = None
    mode: str = tc.field(static=True, default="train")

class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.lin = torch.nn.Linear(4, 3)

    def forward(self, batch: Batch) -> Output:
        logits = self.lin(batch.x)
        loss = None
        if batch.labels is not None:
            loss = torch.nn.functional.mse_loss(logits, batch.labels)
        return Output(logits, loss=loss)

@tc.pytree_dataclass(name=P + ".Point", frozen=True, slots=True)
class Point:
    x: Any
    y: Any = None
    unit: str = tc.field(static=True, default="m")

@tc.register_namedtuple(name=P + ".Pair")
class Pair(NamedTuple):
    first: Any
    second: Any

@tc.pytree_dataclass(name=P + ".Params", frozen=True)
class Params:
    weight: torch.Tensor
    bias: torch.Tensor

@tc.pytree_dataclass(name=P + ".Config", frozen=True)
class Config:
    lr: float = tc.field(static=True, default=0.1)
    momentum: float = tc.field(static=True, default=0.9)
    name: str = tc.field(static=True, default="ddp-run")

@tc.pytree_dataclass(name=P + ".TrainState", frozen=True)
class TrainState:
    params: Params
    momentum: Params
    step: int
    config: Config
    table: Any  # a DTensor sharded over the ranks when saved; a plain tensor when loaded

for cls in (Batch, Output, Point, Pair, Params, Config, TrainState):  # registration did it
    assert _pickle.is_installed(cls)
"""

RANK = """
import datetime, json, os, sys, traceback
rank, world = int(sys.argv[1]), int(sys.argv[2])
module, init_file, ckpt = sys.argv[3:6]  # the folder of the module is on the path
import torch
torch.set_num_threads(1)  # one thread a rank (2 cores)
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.nn.parallel import DistributedDataParallel as DDP
import treeclass as tc
from treeclass.torch._state import state_dict
defs = __import__(module)
report = {"rank": rank, "module": module}

dist.init_process_group(
    "gloo", init_method="file://" + init_file, rank=rank, world_size=world,
    timeout=datetime.timedelta(seconds=60),
)
try:
    # 1. DDP(static_graph=True), outputs with None fields.
    model = defs.Model()
    ddp = DDP(model, static_graph=True)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
    initial = torch.cat([p.detach().flatten() for p in model.parameters()]).clone()
    outputs = []
    for it in range(5):
        g = torch.Generator().manual_seed(1000 + 10 * rank + it)  # different data per rank
        batch = defs.Batch(torch.randn(8, 4, generator=g), labels=torch.randn(8, 3, generator=g))
        out = ddp(batch)
        outputs.append([type(out).__name__, type(out).__module__, out.hidden is None,
                        out.attentions is None, out.mode, out.loss is not None])
        opt.zero_grad()
        out.loss.backward()
        opt.step()
    flat = torch.cat([p.detach().flatten() for p in model.parameters()])
    every = [torch.zeros_like(flat) for _ in range(world)]
    dist.all_gather(every, flat)
    report["ddp"] = {
        "outputs": outputs,
        "equal_on_all_ranks": all(torch.equal(every[0], f) for f in every),
        "changed": not torch.equal(flat, initial),
        "params": flat.tolist(),
    }

    # 2. Object collectives between modules of different names.
    objs = [None, None, None]
    if rank == 0:
        tree = defs.Pair(defs.Point(1.5, None, "cm"), [defs.Point(2, 3)])
        objs = [tree, tc.tree_structure(tree), torch.arange(3)]
    dist.broadcast_object_list(objs, src=0)
    tree, spec, t = objs
    report["broadcast"] = {
        "pair": type(tree) is defs.Pair,
        "point": type(tree.first) is defs.Point and type(tree.second[0]) is defs.Point,
        "values": [tree.first.x, tree.first.y, tree.first.unit, tree.second[0].x],
        "spec_matches": spec == tc.tree_structure(tree),
        "spec_root": spec.node_type is defs.Pair,
        "tensor": t.tolist(),
    }
    gathered = [None] * world
    dist.all_gather_object(gathered, defs.Point(rank, unit="rank%d" % rank))
    report["all_gather"] = [[type(p) is defs.Point, p.x, p.unit] for p in gathered]
    specs = [None] * world
    dist.all_gather_object(specs, tc.tree_structure({"p": defs.Point(rank, [rank], "r%d" % rank)}))
    report["all_gather_specs"] = [
        [s == tc.tree_structure({"p": defs.Point(0, [0], "r%d" % i)}),
         type(s.unflatten([7, 8])["p"]) is defs.Point]
        for i, s in enumerate(specs)
    ]

    # 3. Distributed checkpoint of a training state made of treeclass classes.
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor
    mesh = init_device_mesh("cpu", (world,))
    table = distribute_tensor(torch.arange(8.0).reshape(4, 2), mesh, [Shard(0)])
    buf = [opt.state[p]["momentum_buffer"] for p in model.parameters()]
    state = defs.TrainState(
        params=defs.Params(model.lin.weight.detach(), model.lin.bias.detach()),
        momentum=defs.Params(*buf),
        step=5,
        config=defs.Config(),
        table=table,
    )
    report["local_table_rows"] = table.to_local().shape[0]
    dcp.save({"train": state_dict(state)}, checkpoint_id=ckpt)
    dist.barrier()
    report["momentum"] = torch.cat([b.flatten() for b in buf]).tolist()
except BaseException:
    report["error"] = traceback.format_exc()
finally:
    dist.destroy_process_group()
print(json.dumps(report))
"""


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Run the two ranks once; return their reports and where the checkpoint is."""
    root = tmp_path_factory.mktemp("dist")
    tag = uuid.uuid4().hex[:8]
    prefix = f"tests.dist_{tag}"
    modules = []
    for side in ("a", "b"):
        module = f"tc_dist_{side}_{tag}"
        modules.append((write_modules(root / side, {module: DEFS.format(prefix=prefix)}), module))
    init_file, ckpt = root / "rendezvous", root / "ckpt"
    env = {"GLOO_SOCKET_IFNAME": "lo"}  # read after the import: the ranks fork from the zygote
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        futures = [
            pool.submit(
                run_script,
                RANK,
                str(rank),
                "2",
                module,
                str(init_file),
                str(ckpt),
                cwd=root,
                path=[folder],
                env=env,
                timeout=TIMEOUT,
                preload=FRAMEWORKS,  # torch first, then treeclass
            )
            for rank, (folder, module) in enumerate(modules)
        ]
        outcomes = [f.result() for f in futures]
    # When one rank fails, the other waits for it until killed: show the failure first.
    reports = []
    for outcome in sorted(outcomes, key=lambda o: o.timed_out):
        report = outcome.report()
        assert "error" not in report, report["error"]
        reports.append(report)
    reports.sort(key=lambda r: r["rank"])
    return {"reports": reports, "modules": modules, "ckpt": ckpt, "prefix": prefix}


def test_ddp_static_graph_with_treeclass_outputs(job: dict[str, Any]) -> None:
    r0, r1 = (r["ddp"] for r in job["reports"])
    for report, (_, module) in zip((r0, r1), job["modules"]):
        # Every forward returned the rank's own Output class, None fields kept None.
        assert report["outputs"] == [["Output", module, True, True, "train", True]] * 5
        assert report["equal_on_all_ranks"]
        assert report["changed"]
    assert r0["params"] == r1["params"]


def test_broadcast_between_modules_of_different_names(job: dict[str, Any]) -> None:
    for report in job["reports"]:
        assert report["broadcast"] == {
            "pair": True,
            "point": True,
            "values": [1.5, None, "cm", 2],
            "spec_matches": True,
            "spec_root": True,
            "tensor": [0, 1, 2],
        }


def test_all_gather_object_between_modules_of_different_names(job: dict[str, Any]) -> None:
    for report in job["reports"]:
        assert report["all_gather"] == [[True, 0, "rank0"], [True, 1, "rank1"]]
        assert report["all_gather_specs"] == [[True, True], [True, True]]


def test_dcp_saved_on_two_ranks_loads_in_one_process(job: dict[str, Any]) -> None:
    folder, module = job["modules"][0]
    sys.path.insert(0, str(folder))
    try:
        defs = __import__(module)
    finally:
        sys.path.remove(str(folder))
    try:
        ckpt = job["ckpt"]
        md = dcp.FileSystemReader(str(ckpt)).read_metadata().state_dict_metadata
        kinds = {k: type(v).__name__ for k, v in md.items()}
        assert kinds == {
            "train.params.weight": "TensorStorageMetadata",
            "train.params.bias": "TensorStorageMetadata",
            "train.momentum.weight": "TensorStorageMetadata",
            "train.momentum.bias": "TensorStorageMetadata",
            "train.table": "TensorStorageMetadata",
            "train.step": "BytesStorageMetadata",
            "train.config.lr": "BytesStorageMetadata",
            "train.config.momentum": "BytesStorageMetadata",
            "train.config.name": "BytesStorageMetadata",
        }
        assert len(md["train.table"].chunks) == 2  # one shard written by each rank
        assert [r["local_table_rows"] for r in job["reports"]] == [2, 2]

        template = defs.TrainState(
            params=defs.Params(torch.zeros(3, 4), torch.zeros(3)),
            momentum=defs.Params(torch.zeros(3, 4), torch.zeros(3)),
            step=0,
            config=defs.Config(),
            table=torch.zeros(4, 2),
        )
        sd = {"train": state_dict(template)}
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*assuming the intent is to load")
            dcp.load(sd, checkpoint_id=str(ckpt))
        loaded = load_state_dict(template, sd["train"])
        assert type(loaded) is defs.TrainState and type(loaded.params) is defs.Params
        assert loaded.step == 5 and loaded.config == defs.Config()
        r0 = job["reports"][0]
        params = torch.cat([loaded.params.weight.flatten(), loaded.params.bias.flatten()])
        assert params.tolist() == r0["ddp"]["params"]
        momentum = torch.cat([loaded.momentum.weight.flatten(), loaded.momentum.bias.flatten()])
        assert momentum.tolist() == r0["momentum"]
        assert torch.equal(loaded.table, torch.arange(8.0).reshape(4, 2))
    finally:
        sys.modules.pop(module, None)
        assert tc.class_for_name(job["prefix"] + ".TrainState") is not None
