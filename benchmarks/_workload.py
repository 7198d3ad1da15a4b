"""The shared benchmark workload: a list of 100 instances of a dataclass with 8 leaves and 2
static fields (``s0: str``, ``s1: int``), as in ANCHORS.md."""

from __future__ import annotations

import dataclasses
import gc
import statistics
import time
from collections.abc import Callable
from typing import Any

N_INSTANCES = 100
LEAF_NAMES = tuple(f"a{i}" for i in range(8))


def make_class(
    name: str,
    decorator: Callable[[type], type] | None = None,
    static_meta: bool = True,
    **options: bool,
) -> type:
    """A fresh dataclass ``a0..a7`` (floats) plus ``s0: str``, ``s1: int`` (static metadata).

    ``options`` go to ``dataclasses.dataclass`` (``frozen=True``, ``slots=True``).
    """
    meta = {"static": True} if static_meta else {}
    ns: dict[str, Any] = {"__annotations__": {}}
    for n in LEAF_NAMES:
        ns["__annotations__"][n] = float
    ns["__annotations__"]["s0"] = str
    ns["__annotations__"]["s1"] = int
    ns["s0"] = dataclasses.field(default="s", metadata=meta)
    ns["s1"] = dataclasses.field(default=1, metadata=meta)
    cls = type(name, (), ns)
    cls.__module__ = __name__
    cls = dataclasses.dataclass(cls, **options)
    if decorator is not None:
        cls = decorator(cls) or cls
    return cls


def make_tree(cls: type) -> list[Any]:
    return [cls(*(float(i * 8 + j) for j in range(8)), s0="s", s1=1) for i in range(N_INSTANCES)]


def median_us(fn: Callable[[], Any], *, number: int = 200, repeat: int = 25) -> float:
    """Median over ``repeat`` runs of the mean time of ``number`` calls, in microseconds."""
    fn()
    times = []
    gc_was = gc.isenabled()
    gc.disable()
    try:
        for _ in range(repeat):
            t0 = time.perf_counter()
            for _ in range(number):
                fn()
            times.append((time.perf_counter() - t0) / number * 1e6)
    finally:
        if gc_was:
            gc.enable()
    return statistics.median(times)


def row(label: str, ours: float, theirs: float, target: float | None = None) -> str:
    ratio = ours / theirs
    verdict = "" if target is None else ("  ok" if ratio <= target else f"  ABOVE TARGET {target}x")
    return f"{label:<58} {ours:9.1f} us vs {theirs:9.1f} us  ratio {ratio:5.2f}x{verdict}"


def paired_times(
    ours: Callable[[], Any],
    theirs: Callable[[], Any],
    *,
    number: int = 100,
    repeat: int = 31,
    clock: Callable[[], float] = time.perf_counter,
) -> tuple[list[float], list[float]]:
    """Time both sides in alternating runs (``clock``, garbage collector off): us per call.

    Run ``i`` of one side is next to run ``i`` of the other, so a change in machine load hits
    both alike; take ratios run by run. ``clock=time.process_time`` measures CPU time.
    """
    ours()
    theirs()
    t_ours: list[float] = []
    t_theirs: list[float] = []
    gc_was = gc.isenabled()
    gc.disable()
    try:
        for _ in range(repeat):
            for fn, out in ((ours, t_ours), (theirs, t_theirs)):
                t0 = clock()
                for _ in range(number):
                    fn()
                out.append((clock() - t0) / number * 1e6)
    finally:
        if gc_was:
            gc.enable()
    return t_ours, t_theirs


def paired(
    ours: Callable[[], Any], theirs: Callable[[], Any], *, number: int = 100, repeat: int = 31
) -> tuple[float, float, float]:
    """Time both sides in alternating runs; return median times (us) and the median ratio.

    The ratio is taken run by run, so a change in machine load hits both sides of it alike
    (machines here are shared and noisy; sequential medians of the two sides drift apart).
    """
    t_ours, t_theirs = paired_times(ours, theirs, number=number, repeat=repeat)
    ratio = statistics.median(a / b for a, b in zip(t_ours, t_theirs))
    return statistics.median(t_ours), statistics.median(t_theirs), ratio


def show(label: str, timing: tuple[float, float, float], target: float | None = None) -> str:
    """One line: both medians, the median ratio, and the verdict against ``target``."""
    ours, theirs, ratio = timing
    verdict = "" if target is None else ("  ok" if ratio <= target else f"  ABOVE TARGET {target}x")
    return f"{label:<46} {ours:9.1f} us vs {theirs:9.1f} us   ratio {ratio:5.2f}x{verdict}"


def show_spread(label: str, times: tuple[list[float], list[float]]) -> str:
    """One line from :func:`paired_times`: both medians, the median of the run-by-run ratios
    and their 10th-90th percentiles (how much a loaded machine moved them)."""
    t_ours, t_theirs = times
    ratios = [a / b for a, b in zip(t_ours, t_theirs)]
    p10, *_, p90 = statistics.quantiles(ratios, n=10)
    ours, theirs, ratio = map(statistics.median, (t_ours, t_theirs, ratios))
    return (
        f"{label:<22} {ours:9.1f} us vs {theirs:9.1f} us"
        f"   ratio {ratio:5.2f}x (p10 {p10:.2f}x, p90 {p90:.2f}x)"
    )
