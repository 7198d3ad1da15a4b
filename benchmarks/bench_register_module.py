"""Importing a module of 300 ModelOutput-like classes: treeclass-decorated vs by hand (issue 18).

Writes the module twice into a temporary directory -- every class decorated with
``@treeclass.pytree_dataclass(name=...)``, and every class a ``@dataclasses.dataclass``
registered by hand in jax (+ ``jax.export``), torch and optree (``benchmarks/_by_hand.py``) --
and imports each in fresh subprocesses, interleaved round by round, with jax, torch and optree
imported first (treeclass too on its side). The classes are HuggingFace-style outputs: data
fields from a pool of output names, all optional and defaulting to ``None``, and two static
fields.

Reported, each as the median of round-by-round ratios with p10-p90:

- the CPU time (``time.process_time``) of ``import zoo`` in the child;
- the CPU time of the whole child (``resource.getrusage(RUSAGE_CHILDREN)`` deltas), which adds
  the same interpreter start and framework imports to both sides;
- memory per class: ``tracemalloc``'s traced memory after the import, in separate children
  (tracing slows the import), divided by the class count.

Run: ``python benchmarks/bench_register_module.py [--rounds N] [--classes N]``. The targets are
at most 1.5x for the import and at most 2x for the memory.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src"
POOL = (
    "logits", "hidden_states", "attentions", "cross_attentions", "past_key_values",
    "last_hidden_state", "pooler_output", "start_logits", "end_logits", "encoder_last_hidden_state",
    "encoder_hidden_states", "encoder_attentions", "decoder_hidden_states", "decoder_attentions",
    "image_embeds", "text_embeds", "prediction_logits", "seq_relationship_logits", "mems",
    "rope_deltas", "aux_loss", "router_logits", "z_loss", "spectrogram", "waveform",
)  # fmt: skip


def _fields(i: int) -> list[str]:
    """``loss`` and three to nine other output fields, varying from class to class."""
    k = 3 + i % 7
    return ["loss", *(POOL[(i * 7 + j * 3) % len(POOL)] for j in range(k))]


def _unique(names: list[str]) -> list[str]:
    return list(dict.fromkeys(names))


def write_modules(directory: Path, n: int) -> None:
    """Write ``tc_zoo.py`` and ``hand_zoo.py`` with ``n`` classes each."""
    tc = [
        "from __future__ import annotations",
        "from typing import Any, Optional",
        "import treeclass as tc",
        "",
    ]
    hand = [
        "from __future__ import annotations",
        "import dataclasses",
        "from typing import Any, Optional",
        "from _by_hand import register_by_hand",
        "",
    ]
    for i in range(n):
        data = _unique(_fields(i))
        tc += [f'@tc.pytree_dataclass(name="zoo.Output{i}")', f"class Output{i}:"]
        hand += ["@dataclasses.dataclass", f"class Output{i}:"]
        for f in data:
            tc.append(f"    {f}: Optional[Any] = None")
            hand.append(f"    {f}: Optional[Any] = None")
        tc.append('    model_type: str = tc.field(static=True, default="bert")')
        tc.append("    return_dict: bool = tc.field(static=True, default=True)")
        hand.append(
            '    model_type: str = dataclasses.field(default="bert", metadata={"static": True})'
        )
        hand.append(
            "    return_dict: bool = dataclasses.field(default=True, metadata={'static': True})"
        )
        hand.append(
            f'register_by_hand(Output{i}, "zoo.Output{i}", {tuple(data)!r}, '
            "('model_type', 'return_dict'))"
        )
        tc.append("")
        hand.append("")
    (directory / "tc_zoo.py").write_text("\n".join(tc))
    (directory / "hand_zoo.py").write_text("\n".join(hand))


_CHILD = """
import sys, time
import jax, jax.export, torch, optree
{pre}
if {trace}:
    import tracemalloc
    tracemalloc.start()
t0 = time.process_time()
import {module}
t1 = time.process_time()
mem = tracemalloc.get_traced_memory()[0] if {trace} else 0
print(t1 - t0, mem)
"""


def run_child(directory: Path, module: str, trace: bool) -> tuple[float, float, int]:
    """(child CPU seconds by rusage, CPU seconds of the import, traced bytes)."""
    pre = "import treeclass" if module == "tc_zoo" else ""
    code = _CHILD.format(pre=pre, trace=trace, module=module)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), str(HERE), str(directory)])
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout.split()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    child = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return child, float(out[0]), int(out[1])


def spread(ratios: list[float]) -> str:
    if len(ratios) < 2:
        return f"{ratios[0]:.2f}x"
    q = statistics.quantiles(ratios, n=10, method="inclusive")
    return f"{statistics.median(ratios):.2f}x (p10-p90 {q[0]:.2f}-{q[-1]:.2f}x)"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--classes", type=int, default=300)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        write_modules(directory, args.classes)
        imports: dict[str, list[float]] = {"tc_zoo": [], "hand_zoo": []}
        children: dict[str, list[float]] = {"tc_zoo": [], "hand_zoo": []}
        for _ in range(args.rounds):
            for module in ("tc_zoo", "hand_zoo"):
                child, took, _ = run_child(directory, module, trace=False)
                imports[module].append(took)
                children[module].append(child)
        memory = {m: run_child(directory, m, trace=True)[2] for m in ("tc_zoo", "hand_zoo")}
    n = args.classes
    print(f"{n} ModelOutput-like classes, jax + torch + optree imported; {args.rounds} rounds")
    for label, runs in (("import of the module (CPU)", imports), ("whole child (CPU)", children)):
        ours, theirs = runs["tc_zoo"], runs["hand_zoo"]
        ratios = [a / b for a, b in zip(ours, theirs)]
        print(
            f"  {label:<28} treeclass {statistics.median(ours) * 1e3:8.1f} ms, by hand "
            f"{statistics.median(theirs) * 1e3:8.1f} ms: {spread(ratios)}"
        )
    ours_b, theirs_b = memory["tc_zoo"] / n, memory["hand_zoo"] / n
    print(
        f"  memory per class (tracemalloc)  treeclass {ours_b / 1024:6.1f} KiB, by hand "
        f"{theirs_b / 1024:6.1f} KiB: {ours_b / theirs_b:.2f}x (target <= 2x)"
    )


if __name__ == "__main__":
    main()
