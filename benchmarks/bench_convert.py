"""Conversion benchmark: a torch ``TreeSpec`` of the workload (a list of 100 dataclasses, 8
leaves + 2 static fields each) turned into a JAX treedef through treeclass's JSON
(``tc.treespec_dumps(torch_spec)`` then ``tc.treespec_loads(text, to="jax")``), side by side
(one process, alternating runs) with

- torch's own serialization round trip of the same spec
  (``torch.utils._pytree.treespec_dumps`` + ``treespec_loads``, its ``lru_cache`` bypassed);
- a plain ``jax.tree_util.tree_structure`` of the tree (what a JAX user pays to get a treedef
  when the tree itself is at hand).

Also prints the stages of the conversion: dumps of the torch spec, loads to JAX, loads to an
embedded ``TreeSpec`` (no framework), and the other targets.
Run: ``python benchmarks/bench_convert.py``.
"""

from __future__ import annotations

import sys

from _workload import make_class, make_tree, median_us, paired, show

import treeclass as tc


def main() -> None:
    try:
        import jax.tree_util as jtu
        import optree
        import torch.utils._pytree as pt
    except ImportError as e:
        print(f"needs jax, torch and optree: {e}")
        return

    Cls = make_class("ConvOurs", lambda c: tc.register_dataclass(c, name="bench.ConvOurs"))
    tree = make_tree(Cls)
    tspec = pt.tree_structure(tree)
    text = tc.treespec_dumps(tspec)
    assert tc.treespec_loads(text, to="jax") == jtu.tree_structure(tree)
    assert text == tc.treespec_dumps(tc.tree_structure(tree))
    loads_uncached = pt.treespec_loads.__wrapped__
    ttext = pt.treespec_dumps(tspec)
    assert loads_uncached(ttext) == tspec

    def convert() -> None:
        tc.treespec_loads(tc.treespec_dumps(tspec), to="jax")

    def torch_roundtrip() -> None:
        loads_uncached(pt.treespec_dumps(tspec))

    def jax_structure() -> None:
        jtu.tree_structure(tree)

    print(
        f"Python {sys.version.split()[0]}; workload: list of 100 dataclasses, 8 leaves + 2 static;"
        f" document {len(text)} bytes"
    )
    print(
        show("torch TreeSpec -> JSON -> JAX treedef", paired(convert, torch_roundtrip, number=20))
    )
    print("  (vs torch treespec_dumps + uncached treespec_loads of the same spec)")
    print(show("torch TreeSpec -> JSON -> JAX treedef", paired(convert, jax_structure, number=20)))
    print("  (vs jax.tree_util.tree_structure(tree))")

    jdef = jtu.tree_structure(tree)
    ospec = optree.tree_structure(tree)
    stages = {
        "treespec_dumps(torch TreeSpec)": lambda: tc.treespec_dumps(tspec),
        "treespec_dumps(JAX PyTreeDef)": lambda: tc.treespec_dumps(jdef),
        "treespec_dumps(optree PyTreeSpec)": lambda: tc.treespec_dumps(ospec),
        "treespec_dumps(treeclass TreeSpec)": lambda: tc.treespec_dumps(tc.tree_structure(tree)),
        "treespec_loads(text)  (treeclass TreeSpec)": lambda: tc.treespec_loads(text),
        'treespec_loads(text, to="jax")': lambda: tc.treespec_loads(text, to="jax"),
        'treespec_loads(text, to="torch")': lambda: tc.treespec_loads(text, to="torch"),
        'treespec_loads(text, to="optree")': lambda: tc.treespec_loads(text, to="optree"),
    }
    for label, fn in stages.items():
        print(f"  {label:<46} {median_us(fn, number=20, repeat=15):9.1f} us")


if __name__ == "__main__":
    main()
