"""The cost of the traceable unflatten path (issue 11) for classes whose direct stores go
through descriptors (frozen dataclasses with and without slots, attrs classes).

Compares, in one process with alternating runs, the torch variant of the generated unflatten
without a tracing check (descriptor ``__set__`` only, which Dynamo refuses; torch not active),
as it is with torch active outside tracing (one ``torch.compiler.is_dynamo_compiling()``
check first), and the traceable path Dynamo takes (``object.__setattr__`` per field), which
every call would pay if it were the only path. (Classes whose stores Dynamo traces, through
the instance ``__dict__``, have one path: their three rows are the same code.)
Run: ``python benchmarks/bench_unflatten_tracing.py``.
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable
from typing import Any

import attrs
from _workload import make_class

import treeclass as tc
from treeclass._core import registry as _registry


@attrs.frozen
class AttrsSlots:
    a0: float
    a1: float
    a2: float
    a3: float
    a4: float
    a5: float
    a6: float
    a7: float
    s0: str = attrs.field(default="s", metadata={"static": True})
    s1: int = attrs.field(default=1, metadata={"static": True})


@attrs.frozen(slots=False)
class AttrsDict:
    a0: float
    a1: float
    a2: float
    a3: float
    a4: float
    a5: float
    a6: float
    a7: float
    s0: str = attrs.field(default="s", metadata={"static": True})
    s1: int = attrs.field(default=1, metadata={"static": True})


def torch_family(node: Any) -> Any:
    """The generated functions' family the torch adapter binds for ``node``'s class."""
    from treeclass._backends import torch as torch_backend

    return torch_backend._family(node)


def variants(node: Any, check: Callable[[], bool]) -> dict[str, Callable[..., Any]]:
    def bound(tag: str, tracing: Callable[[], bool] | None) -> Callable[..., Any]:
        family = torch_family(node)
        fn: Callable[..., Any] = node.bind(tag, str, family=family, _tracing=tracing)["unflatten"]
        return fn

    return {
        "no check (descriptor __set__ only)": bound("before", None),
        "with the check, outside tracing": bound("now", check),
        "traced path (object.__setattr__)": bound("traced", lambda: True),
    }


def paired(
    fns: dict[str, Callable[..., Any]], args: tuple[Any, ...], number: int = 20000, repeat: int = 21
) -> dict[str, tuple[float, float]]:
    times: dict[str, list[float]] = {k: [] for k in fns}
    gc.disable()
    try:
        for _ in range(repeat):
            for k, f in fns.items():
                t0 = time.perf_counter()
                for _ in range(number):
                    f(*args)
                times[k].append((time.perf_counter() - t0) / number * 1e9)
    finally:
        gc.enable()
    base = times[next(iter(fns))]
    return {
        k: (statistics.median(v), statistics.median(a / b for a, b in zip(v, base)))
        for k, v in times.items()
    }


def main() -> None:
    import torch

    classes: dict[str, type] = {}
    for label, slots in (("frozen", False), ("frozen+slots", True)):
        tag = label.replace("+", "_")
        classes[f"dataclass {label}"] = make_class(
            f"C_{tag}",
            lambda c, tag=tag: tc.register_dataclass(c, name=f"bench.tracing.{tag}"),
            frozen=True,
            slots=slots,
        )
    tc.register_dataclass(AttrsSlots, name="bench.tracing.AttrsSlots")
    tc.register_dataclass(AttrsDict, name="bench.tracing.AttrsDict")
    classes["attrs frozen (slots)"] = AttrsSlots
    classes["attrs frozen (dict)"] = AttrsDict

    print(
        f"torch {torch.__version__}: one unflatten (torch variant) of a class with 8 data + 2 "
        "static fields; medians of 21 alternating runs"
    )
    for label, cls in classes.items():
        node = _registry.registered_node(cls)
        obj = cls(*[float(i) for i in range(8)], s0="s", s1=1)
        children, aux = node.bind("flatten", str, family=torch_family(node))["flatten"](obj)
        fns = variants(node, torch.compiler.is_dynamo_compiling)
        for f in fns.values():
            assert f(list(children), aux) == obj
        print(label)
        for k, (ns, ratio) in paired(fns, (list(children), aux)).items():
            print(f"   {k:34} {ns:7.0f} ns  {ratio:5.2f}x")


if __name__ == "__main__":
    main()
