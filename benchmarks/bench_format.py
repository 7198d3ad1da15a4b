"""Format benchmark: ``treespec_dumps`` + ``treespec_loads`` of the workload's spec (a list of
100 dataclasses, 8 leaves + 2 static fields each), side by side (one process) with PyTorch's
``torch.utils._pytree.treespec_dumps`` / ``treespec_loads`` (its ``lru_cache`` bypassed through
``__wrapped__``).

The PyTorch class is registered by hand with ``register_pytree_node`` and a dumpable context
that, like treeclass's state, records the field names and the static values.

Also ``treespec_loads`` against ``pickle.loads`` of torch's ``TreeSpec`` of the same tree
(CPU time, alternating runs, median ratio with p10-p90), and ``treespec_loads(to="torch")``
(the same document loaded as torch's ``TreeSpec``) and ``treeclass.torch.treespec_loads`` of
torch's own ``treespec_dumps`` text of that spec against the same ``pickle.loads``.

Targets: at most 0.2x PyTorch (issue 3); at most 1.0x ``pickle.loads`` (issue 18).
Run: ``python benchmarks/bench_format.py``.
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Any

from _workload import LEAF_NAMES, make_class, make_tree, median_us, paired, row, show

import treeclass as tc


def main() -> None:
    Ours = make_class("FmtOurs", lambda c: tc.register_dataclass(c, name="bench.FmtOurs"))
    _, spec = tc.tree_flatten(make_tree(Ours))
    text = tc.treespec_dumps(spec)
    assert tc.treespec_loads(text) == spec

    def ours_dumps() -> None:
        tc.treespec_dumps(spec)

    def ours_loads() -> None:
        tc.treespec_loads(text)

    def ours_both() -> None:
        tc.treespec_loads(tc.treespec_dumps(spec))

    t_d = median_us(ours_dumps, number=50, repeat=15)
    t_l = median_us(ours_loads, number=50, repeat=15)
    t_b = median_us(ours_both, number=50, repeat=15)
    print(
        f"Python {sys.version.split()[0]}; workload: list of 100 dataclasses, 8 leaves + 2 static"
    )
    print(
        f"treeclass: treespec_dumps {t_d:.1f} us, treespec_loads {t_l:.1f} us, "
        f"dumps+loads {t_b:.1f} us; document {len(text)} bytes"
    )
    evolution(t_l)

    try:
        import torch.utils._pytree as pt
    except ImportError:
        print("torch not installed: skipping the PyTorch comparison")
        return

    Tx = make_class("FmtTx")
    names = tuple(f.name for f in dataclasses.fields(Tx))

    def flatten(obj: Any) -> tuple[list[Any], Any]:
        return [getattr(obj, n) for n in LEAF_NAMES], (obj.s0, obj.s1)

    def unflatten(values: Any, context: Any) -> Any:
        return Tx(*values, s0=context[0], s1=context[1])

    def to_ctx(context: Any) -> Any:
        return {"fields": list(names), "static": {"s0": context[0], "s1": context[1]}}

    def from_ctx(dumpable: Any) -> Any:
        return (dumpable["static"]["s0"], dumpable["static"]["s1"])

    pt.register_pytree_node(
        Tx,
        flatten,
        unflatten,
        serialized_type_name="bench.FmtTx",
        to_dumpable_context=to_ctx,
        from_dumpable_context=from_ctx,
    )
    _, tspec = pt.tree_flatten(make_tree(Tx))
    ttext = pt.treespec_dumps(tspec)
    loads_uncached = pt.treespec_loads.__wrapped__
    assert loads_uncached(ttext) == tspec

    def torch_dumps() -> None:
        pt.treespec_dumps(tspec)

    def torch_loads() -> None:
        loads_uncached(ttext)

    def torch_both() -> None:
        loads_uncached(pt.treespec_dumps(tspec))

    u_d = median_us(torch_dumps, number=20, repeat=15)
    u_l = median_us(torch_loads, number=20, repeat=15)
    u_b = median_us(torch_both, number=20, repeat=15)
    print(
        f"torch _pytree: treespec_dumps {u_d:.1f} us, treespec_loads (uncached) {u_l:.1f} us, "
        f"dumps+loads {u_b:.1f} us; document {len(ttext)} bytes"
    )
    print(row("treespec_dumps vs torch", t_d, u_d))
    print(row("treespec_loads vs torch (lru_cache bypassed)", t_l, u_l))
    print(row("treespec_dumps + treespec_loads vs torch", t_b, u_b, 0.2))
    against_pickle(text)


def against_pickle(text: str) -> None:
    """``treespec_loads`` of the workload's document against ``pickle.loads`` of torch's
    ``TreeSpec`` of the same tree (its class registered with torch's ``register_dataclass``;
    issue 18's target: at most 1.0x)."""
    import pickle

    import _workload
    import torch.utils._pytree as pt

    PickleTx = make_class("PickleTx", static_meta=False)
    _workload.PickleTx = PickleTx  # type: ignore[attr-defined]  # pickled by reference
    pt.register_dataclass(PickleTx)
    _, tspec = pt.tree_flatten(make_tree(PickleTx))
    data = pickle.dumps(tspec)
    assert pickle.loads(data).num_leaves == tspec.num_leaves
    timing = paired(lambda: tc.treespec_loads(text), lambda: pickle.loads(data), number=20)
    print(show(f"treespec_loads vs pickle.loads of torch's TreeSpec ({len(data)} B)", timing, 1.0))
    # The same document loaded as torch's TreeSpec itself (no target).
    to_torch = paired(
        lambda: tc.treespec_loads(text, to="torch"), lambda: pickle.loads(data), number=20
    )
    print(show('treespec_loads(to="torch") vs that pickle.loads', to_torch))
    # torch's own JSON of that spec, read by treeclass.torch.treespec_loads (no target).
    import treeclass.torch as tct

    torch_text = pt.treespec_dumps(tc.treespec_loads(text, to="torch"))
    reader = paired(lambda: tct.treespec_loads(torch_text), lambda: pickle.loads(data), number=20)
    print(show("treeclass.torch.treespec_loads vs that pickle.loads", reader))


def evolution(plain_loads: float) -> None:
    """Loading with a class that declares aliases (issue 12): documents written today take
    the same fast path; old ones (old class and field names) the checked path."""

    def evolved(cls: type) -> type:
        cls.__dataclass_fields__["a0"].metadata = {"treeclass.aliases": ("old_a0",)}  # type: ignore[attr-defined]
        return tc.register_dataclass(cls, name="bench.FmtEvolved", aliases=("bench.FmtOld",))

    Evolved = make_class("FmtEvolved", evolved)
    spec = tc.tree_structure(make_tree(Evolved))
    today = tc.treespec_dumps(spec)
    old = today.replace("bench.FmtEvolved", "bench.FmtOld").replace('"a0"', '"old_a0"')
    assert tc.treespec_loads(old) == spec

    t_today = median_us(lambda: tc.treespec_loads(today), number=50, repeat=15)
    t_old = median_us(lambda: tc.treespec_loads(old), number=50, repeat=15)
    print(row("treespec_loads, class with aliases, today's document", t_today, plain_loads))
    print(row("treespec_loads, class with aliases, old names", t_old, plain_loads))


if __name__ == "__main__":
    main()
