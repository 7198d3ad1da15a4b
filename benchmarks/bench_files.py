"""Files benchmark: ``tc.save`` + ``tc.load`` side by side with safetensors and ``torch.save``.

Every comparison is CPU time (``time.process_time``), the two sides in alternating rounds in
one process (``_workload.paired_times``, garbage collector off), printed as both medians and
the median of the per-round ratios with its p10-p90, against the target of issue 18:

1. Save + load round trips of a dict of model outputs (a registered dataclass with a static
   field, a ``None`` field and an ``int`` leaf), 1,000 tensors of 1 KiB (target <= 1.5x) and
   64 tensors of 256 KiB (target <= 1.0x): ``tc.save`` / ``tc.load`` vs
   ``safetensors.numpy.save_file`` / ``load_file`` of the same tensors (a flat dict keyed by
   the same key paths); with torch tensors, vs ``safetensors.torch`` and vs ``torch.save`` /
   ``torch.load`` of the whole tree (no target).
2. Saving 10,000 Python scalars (a dict of floats and ints; 1,000 records of 10 fields):
   ``tc.save`` vs ``torch.save``. Target <= 2x.
3. 256 MiB of torch tensors from a warm page cache, every tensor summed after loading on both
   sides: ``tc.load(to="torch", mmap=True)`` vs ``safetensors.torch.load_file``. Target
   <= 1.2x.
4. Selective loading: one 64 MiB leaf out of a file of 1 GiB (16 such leaves), against loading
   every leaf, each in a fresh subprocess that reports its wall time and its peak resident
   memory (``VmHWM`` in ``/proc/self/status``: tracemalloc would not see memory-mapped pages),
   with ``safetensors.safe_open(...).get_tensor`` / ``load_file`` beside it. Target: memory
   proportional to what is selected. The 1 GiB file is deleted at the end.

Run: ``python benchmarks/bench_files.py`` (``--quick``: fewer rounds, and no 1 GiB part;
``--first``: the first line only, 1,000 x 1 KiB numpy round trips, 7 rounds with ``--quick``).
"""

from __future__ import annotations

import inspect
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _workload import paired_times

import treeclass as tc

try:
    import numpy as np
    import safetensors.numpy as st_numpy
except ImportError:  # pragma: no cover
    sys.exit("bench_files needs numpy and safetensors: pip install 'treeclass[files]' safetensors")


@tc.pytree_dataclass(name="bench.files.Output")
class Output:
    logits: Any
    hidden: Any
    loss: Any = None
    step: int = 0
    mode: str = tc.field(static=True, default="train")


def make_tree(n_outputs: int, elems: int, *, torch_tensors: bool = False) -> dict[str, Any]:
    rng = np.random.default_rng(0)
    tree = {}
    for i in range(n_outputs):
        a = rng.standard_normal(elems, dtype=np.float32)
        b = rng.standard_normal(elems, dtype=np.float32)
        if torch_tensors:
            import torch

            a, b = torch.from_numpy(a), torch.from_numpy(b)
        tree[f"layer{i:04d}"] = Output(a, b, step=i)
    return tree


def flat(tree: Any) -> dict[str, Any]:
    pairs, _ = tc.tree_flatten_with_path(tree)
    return {tc.keystr(p): v for p, v in pairs if not isinstance(v, int)}


def ratios(t_ours: list[float], t_theirs: list[float]) -> tuple[float, float, float]:
    """Median, p10 and p90 of the per-round ratios ``ours / theirs``."""
    r = sorted(a / b for a, b in zip(t_ours, t_theirs))
    q = statistics.quantiles(r, n=10, method="inclusive")
    return statistics.median(r), q[0], q[-1]


def line(label: str, times: tuple[list[float], list[float]], target: float | None) -> str:
    """Both median CPU times, the median per-round ratio and its p10-p90, the verdict."""
    t_ours, t_theirs = times
    med, p10, p90 = ratios(t_ours, t_theirs)
    verdict = "" if target is None else ("  ok" if med <= target else f"  ABOVE TARGET {target}x")
    return (
        f"  {label:<44} {statistics.median(t_ours) / 1e3:8.2f} ms vs "
        f"{statistics.median(t_theirs) / 1e3:8.2f} ms  ratio {med:5.2f}x "
        f"(p10-p90 {p10:4.2f}-{p90:4.2f}){verdict}"
    )


def cpu(ours: Callable[[], Any], theirs: Callable[[], Any], number: int, repeat: int) -> Any:
    return paired_times(ours, theirs, number=number, repeat=repeat, clock=time.process_time)


def round_trips(folder: Path, quick: bool, first: bool = False) -> None:
    workloads = [
        ("1000 x 1 KiB", 500, 256, 10, 21, 1.5),
        ("64 x 256 KiB (16 MiB)", 32, 65536, 2, 15, 1.0),
    ]
    for label, n, elems, number, repeat, target in workloads[:1] if first else workloads:
        compare(folder, label, n, elems, number, 7 if quick else repeat, target, first)


def compare(
    folder: Path,
    label: str,
    n: int,
    elems: int,
    number: int,
    repeat: int,
    target: float,
    numpy_only: bool = False,
) -> None:
    tree = make_tree(n, elems)
    tensors = flat(tree)
    ours_path, theirs_path = folder / "ours.safetensors", folder / "theirs.safetensors"

    def ours() -> None:
        tc.save(ours_path, tree)
        tc.load(ours_path)

    def theirs() -> None:
        st_numpy.save_file(tensors, theirs_path)
        st_numpy.load_file(theirs_path)

    print(f"\nworkload {label}: {len(tensors)} tensors, {2 * n} python leaves")
    print(line("numpy: tc.save+load vs safetensors.numpy", cpu(ours, theirs, number, repeat),
               target))  # fmt: skip
    if numpy_only:
        return
    try:
        import safetensors.torch as st_torch
        import torch
    except ImportError:
        print("torch not installed: skipping the torch comparisons")
        return
    ttree = make_tree(n, elems, torch_tensors=True)
    ttensors = flat(ttree)
    pt_path = folder / "tree.pt"

    def ours_t() -> None:
        tc.save(ours_path, ttree)
        tc.load(ours_path)

    def st_t() -> None:
        st_torch.save_file(ttensors, theirs_path)
        st_torch.load_file(theirs_path)

    def torch_t() -> None:
        torch.save(ttree, pt_path)
        torch.load(pt_path, weights_only=False)

    print(line("torch: tc.save+load vs safetensors.torch", cpu(ours_t, st_t, number, repeat),
               None))  # fmt: skip
    print(line("torch: tc.save+load vs torch.save+load", cpu(ours_t, torch_t, number, repeat),
               None))  # fmt: skip


def mmap_load(folder: Path, quick: bool) -> None:
    """256 MiB of torch tensors from a warm page cache, every byte touched (summed)."""
    try:
        import safetensors.torch as st_torch
        import torch
    except ImportError:
        print("torch not installed: skipping the mmap comparison")
        return
    n, elems = 32, (4 << 20) // 4  # 32 outputs x 2 tensors of 4 MiB = 256 MiB
    tree = {
        f"layer{i:04d}": Output(torch.full((elems,), float(i)), torch.full((elems,), -1.0))
        for i in range(n)
    }
    tensors = flat(tree)
    ours_path, theirs_path = folder / "big_ours.safetensors", folder / "big_theirs.safetensors"
    tc.save(ours_path, tree)
    st_torch.save_file(tensors, theirs_path)
    del tree, tensors
    mmap = "mmap" in inspect.signature(tc.load).parameters
    opts: dict[str, Any] = {"mmap": True} if mmap else {}

    def touch(ts: Any) -> float:
        return sum(float(t.sum()) for t in ts)

    def ours() -> None:
        out = tc.load(ours_path, to="torch", **opts)
        touch(x for o in out.values() for x in (o.logits, o.hidden))

    def theirs() -> None:
        touch(st_torch.load_file(theirs_path).values())

    how = "mmap=True" if mmap else "(no mmap= in this version)"
    print("\n256 MiB of torch tensors (64 x 4 MiB), warm page cache, every tensor summed")
    try:
        print(line(f'tc.load(to="torch", {how}) vs st.torch.load_file',
                   cpu(ours, theirs, 1, 5 if quick else 11), 1.2))  # fmt: skip
    finally:
        ours_path.unlink(missing_ok=True)
        theirs_path.unlink(missing_ok=True)


@tc.pytree_dataclass(name="bench.files.Record")
class Record:
    step: int
    loss: float
    accuracy: float
    lr: float
    grad_norm: float
    tokens: int
    epoch: int
    phase: str
    done: bool
    seconds: float


def scalars(folder: Path, quick: bool) -> None:
    """10,000 Python scalars: tc.save vs torch.save (which pickles them)."""
    try:
        import torch
    except ImportError:
        print("torch not installed: skipping the scalar comparison")
        return
    trees = {
        "a dict of 10,000 floats and ints": {
            f"m{i:05d}": float(i) / 3 if i % 2 else i for i in range(10000)
        },
        "1,000 records of 10 fields": [
            Record(i, i / 7, i / 11, 1e-3, i / 13, 512 * i, i // 100, "train", i % 2 == 0, i / 3)
            for i in range(1000)
        ],
    }
    ours_path, pt_path = folder / "scalars.safetensors", folder / "scalars.pt"
    print("\n10,000 Python scalars: tc.save vs torch.save")
    for label, tree in trees.items():
        times = cpu(
            lambda t=tree: tc.save(ours_path, t),
            lambda t=tree: torch.save(t, pt_path),
            5,
            7 if quick else 21,
        )
        print(line(label, times, 2.0))


PROBE = """
import json, sys, time
def hwm():
    for line in open("/proc/self/status"):
        if line.startswith(("VmHWM", "VmRSS")):
            yield line.split(":")[0], int(line.split()[1]) * 1024
import numpy as np, treeclass as tc, safetensors
from safetensors import safe_open
from safetensors.numpy import load_file
sys.path.insert(0, sys.argv[3])
import bench_files  # registers bench.files.Output
before = dict(hwm())
mode, path = sys.argv[1], sys.argv[2]
t0 = time.perf_counter()
if mode == "tc-one":
    out = tc.load(path, paths=["['layer0003'].logits"])
    got = out["layer0003"].logits.sum()
elif mode == "tc-all":
    out = tc.load(path)
    got = sum(float(o.logits.sum()) for o in out.values())
elif mode == "st-one":
    with safe_open(path, framework="np") as f:
        got = f.get_tensor("['layer0003'].logits").sum()
else:
    out = load_file(path)
    got = sum(float(v.sum()) for v in out.values())
dt = time.perf_counter() - t0
after = dict(hwm())
print(json.dumps({"time_s": dt, "hwm_before": before["VmHWM"], "hwm_after": after["VmHWM"]}))
"""


def selective(folder: Path) -> None:
    path = folder / "one_gib.safetensors"
    n_bytes = 64 * 1024 * 1024
    tree = {}
    for i in range(8):
        tree[f"layer{i:04d}"] = Output(
            np.full(n_bytes // 4, i, np.float32), np.full(n_bytes // 4, -i, np.float32), step=i
        )
    try:
        tc.save(path, tree)
        del tree
        size = path.stat().st_size
        print(f"\nselective loading: a file of {size / 2**30:.2f} GiB, 16 leaves of 64 MiB")
        os.sync()  # the write is on disk: no write-back running during the first probes
        modes = ("tc-one", "tc-all", "st-one", "st-all")
        runs: dict[str, list[dict[str, Any]]] = {m: [] for m in modes}
        for _ in range(5):  # alternate the modes, so that machine load hits them alike
            for mode in modes:
                proc = subprocess.run(
                    [sys.executable, "-c", textwrap.dedent(PROBE), mode, str(path),
                     str(Path(__file__).parent)],
                    capture_output=True, text=True, check=True,
                )  # fmt: skip
                runs[mode].append(json.loads(proc.stdout.strip().splitlines()[-1]))
        results = {}
        for mode in modes:
            med = sorted(runs[mode], key=lambda r: r["time_s"])[2]
            results[mode] = med
            grown = (med["hwm_after"] - med["hwm_before"]) / 2**20
            print(
                f"  {mode:7} {med['time_s'] * 1e3:9.1f} ms (median of 5)   peak RSS grew by "
                f"{grown:8.1f} MiB (from {med['hwm_before'] / 2**20:.0f} MiB after imports)"
            )
        one = results["tc-one"]["hwm_after"] - results["tc-one"]["hwm_before"]
        every = results["tc-all"]["hwm_after"] - results["tc-all"]["hwm_before"]
        ratio = results["tc-one"]["time_s"] / results["tc-all"]["time_s"]
        print(
            f"  tc.load of one leaf: {ratio:.3f}x the time and {one / every:.3f}x the memory "
            "of loading all 16 (1/16 = 0.0625)"
        )
    finally:
        path.unlink(missing_ok=True)


def main() -> None:
    print(f"Python {sys.version.split()[0]}; numpy {np.__version__}")
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as tmp:
        quick = "--quick" in sys.argv
        if "--first" in sys.argv:
            round_trips(Path(tmp), quick, first=True)
            return
        round_trips(Path(tmp), quick)
        scalars(Path(tmp), quick)
        mmap_load(Path(tmp), quick)
        if not quick:
            selective(Path(tmp))


if __name__ == "__main__":
    main()
