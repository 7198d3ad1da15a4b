"""``python -m treeclass demo``: the embedded registry end to end, no framework needed.

It decorates HuggingFace-style model-output classes, flattens an output, writes the treespec
as JSON, then starts a fresh Python interpreter that imports only the module defining the
classes (this one), loads the JSON and rebuilds the output from new leaves.
"""

from __future__ import annotations

import typing
from collections.abc import Callable

from .._backends.serialize import treespec_dumps, treespec_loads
from .._core.api import field, pytree_dataclass, register_namedtuple
from .._core.keys import keystr
from .._core.registry import active_backends
from .._core.tree import tree_flatten, tree_flatten_with_path


@register_namedtuple(name="treeclass.demo.KVCache")
class KVCache(typing.NamedTuple):
    """Per-layer key/value cache."""

    keys: typing.Any
    values: typing.Any


@pytree_dataclass(name="treeclass.demo.CausalLMOutput", frozen=True)
class CausalLMOutput:
    """A HuggingFace-style model output: optional fields stay ``None``."""

    logits: typing.Any
    loss: typing.Any = None
    hidden_states: typing.Any = None
    past_key_values: tuple[KVCache, ...] | None = None
    model_name: str = field(static=True, default="tiny-lm")
    layer_sizes: tuple[int, ...] = field(static=True, default=(4, 4))


def _example() -> CausalLMOutput:
    return CausalLMOutput(
        logits=[[0.1, 0.7, 0.2]],
        past_key_values=(KVCache([1.0, 2.0], [3.0, 4.0]), KVCache([5.0], [6.0])),
    )


def load_in_this_process(document: str, scale: float) -> str:
    """What the fresh interpreter runs: load the spec, rebuild from new leaves, describe it."""
    spec = treespec_loads(document)
    rebuilt = spec.unflatten([float(i) * scale for i in range(spec.num_leaves)])
    cache = rebuilt.past_key_values if type(rebuilt) is CausalLMOutput else None
    ok = cache is not None and type(cache[0]) is KVCache
    return (
        f"loaded spec: {spec!r}\n"
        f"rebuilt: {rebuilt!r}\n"
        f"classes are the registered ones: {ok}; static fields: "
        f"model_name={rebuilt.model_name!r}, layer_sizes={rebuilt.layer_sizes!r}"
    )


def run(echo: Callable[[str], None] = print) -> int:
    """Run the demo, printing as it goes; return a process exit code."""
    import subprocess
    import sys

    out = _example()
    echo("1. A model output (frozen dataclass; loss and hidden_states left None):")
    echo(f"   {out!r}")
    leaves, spec = tree_flatten(out)
    echo(f"2. tree_flatten: {len(leaves)} leaves; the None fields are not leaves.")
    for path, leaf in tree_flatten_with_path(out)[0]:
        echo(f"   {keystr(path):<32} {leaf!r}")
    echo(f"   spec: {spec!r}")
    document = treespec_dumps(spec)
    echo(
        f"3. treespec_dumps -> {len(document)} bytes of JSON (classes named by their stable name):"
    )
    echo(f"   {document}")
    echo("4. A fresh interpreter imports only treeclass._io.demo, loads the JSON and rebuilds:")
    code = (
        "import sys, treeclass._io.demo as d; print(d.load_in_this_process(sys.stdin.read(), 10.0))"
    )
    argv = [sys.executable, "-c", code]
    child = subprocess.run(argv, input=document, capture_output=True, text=True, check=False)
    for line in (child.stdout + child.stderr).splitlines():
        echo(f"   {line}")
    if child.returncode != 0 or "classes are the registered ones: True" not in child.stdout:
        echo("demo FAILED: the fresh interpreter could not rebuild the output.")
        return 1
    backends = ", ".join(active_backends())
    mirrored = f"also mirrored into: {backends}" if backends else "no framework imported"
    echo(f"5. Done on the embedded registry ({mirrored}).")
    return 0
