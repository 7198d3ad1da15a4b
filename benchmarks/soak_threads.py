"""Soak: registrations and cross-framework round trips from many threads at once (issue 13).

Not a timed test: it prints what it did and how many errors it saw, for the closing note of
issue 13 ("4,235 registrations and 84,000 cross-framework round trips from 16 threads, 0
errors" is the figure to keep).

Every thread, interleaved:

- registers fresh classes (dataclasses with data and static fields, attrs classes when attrs is
  installed, namedtuples) under unique names -- the registry and every active backend
  (JAX, torch, optree) take each one;
- makes round trips of a tree holding classes registered by *any* thread: flatten in one
  registry (treeclass, JAX, torch's Python pytree, optree), ``tc.treespec_dumps`` that
  structure, ``tc.treespec_loads(..., to=<another registry>)``, unflatten the leaves there,
  and compare with the original; and ``tc.treespec_loads`` + ``pickle`` of the spec.

    python benchmarks/soak_threads.py [--threads 16] [--registrations 265] [--round-trips 5250]
"""

from __future__ import annotations

import argparse
import collections
import pickle
import random
import sys
import threading
import time
import traceback
from collections import Counter
from typing import Any

import treeclass as tc

FRAMEWORKS = ["treeclass"]
try:
    import jax

    FRAMEWORKS.append("jax")
except ImportError:  # pragma: no cover
    jax = None  # type: ignore[assignment]
try:
    import torch.utils._pytree as pt

    FRAMEWORKS.append("torch")
except ImportError:  # pragma: no cover
    pt = None  # type: ignore[assignment]
try:
    import optree

    FRAMEWORKS.append("optree")
except ImportError:  # pragma: no cover
    optree = None  # type: ignore[assignment]
try:
    import attrs
except ImportError:  # pragma: no cover
    attrs = None  # type: ignore[assignment]


class Registered:
    """Classes registered so far (by any thread), with a way to make an instance of each."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.makers: list[Any] = []

    def add(self, maker: Any) -> None:
        with self.lock:
            self.makers.append(maker)

    def sample(self, rng: random.Random, k: int) -> list[Any]:
        with self.lock:
            return [rng.choice(self.makers) for _ in range(k)] if self.makers else []


def register_one(thread: int, i: int, registered: Registered) -> None:
    prefix = f"soak.t{thread}.c{i}"
    kind = i % 3
    if kind == 0 or (kind == 1 and attrs is None):
        ns: dict[str, Any] = {
            "__annotations__": {"a": float, "b": Any, "tag": str, "n": int},
            "b": None,
            "tag": tc.field(static=True, default="t"),
            "n": tc.field(static=True, default=i),
        }
        cls = tc.pytree_dataclass(name=prefix)(type(f"C{thread}_{i}", (), ns))

        def make(v: float, cls: Any = cls) -> Any:
            return cls(v, b=(v, [v]), tag=f"x{int(v) % 3}")

    elif kind == 1:
        cls = attrs.define(
            type(
                f"A{thread}_{i}",
                (),
                {
                    "__annotations__": {"a": float, "s": int},
                    "s": attrs.field(default=i, metadata={"static": True}),
                },
            )
        )
        tc.register_dataclass(cls, name=prefix)

        def make(v: float, cls: Any = cls) -> Any:
            return cls(v)

    else:
        nt = collections.namedtuple(f"N{thread}_{i}", "p q")
        tc.register_namedtuple(nt, name=prefix)

        def make(v: float, cls: Any = nt) -> Any:
            return cls(v, {"k": v})

    registered.add(make)


def make_tree(rng: random.Random, registered: Registered) -> Any:
    makers = registered.sample(rng, 4)
    values = [float(rng.randrange(100)) for _ in makers]
    return {"objs": [m(v) for m, v in zip(makers, values)], "x": (1.0, [2.0])}


def flatten_in(framework: str, tree: Any) -> tuple[list[Any], Any]:
    if framework == "treeclass":
        return tc.tree_flatten(tree)
    if framework == "jax":
        return jax.tree_util.tree_flatten(tree)
    if framework == "torch":
        return pt.tree_flatten(tree)
    leaves, spec = optree.tree_flatten(tree, none_is_leaf=False)
    return leaves, spec


def unflatten_in(framework: str, spec: Any, leaves: list[Any]) -> Any:
    if framework == "treeclass":
        return spec.unflatten(leaves)
    if framework == "jax":
        return jax.tree_util.tree_unflatten(spec, leaves)
    if framework == "torch":
        return pt.tree_unflatten(leaves, spec)
    return optree.tree_unflatten(spec, leaves)


def round_trip(rng: random.Random, registered: Registered) -> None:
    tree = make_tree(rng, registered)
    src = rng.choice(FRAMEWORKS)
    dst = rng.choice(FRAMEWORKS)
    leaves, spec = flatten_in(src, tree)
    text = tc.treespec_dumps(spec)
    loaded = tc.treespec_loads(text, to=None if dst == "treeclass" else dst)  # type: ignore[call-overload]
    back = unflatten_in(dst, loaded, leaves)
    if back != tree:
        raise AssertionError(f"{src} -> {dst}: {back!r} != {tree!r}")
    if src == "treeclass" and rng.random() < 0.1:
        again = pickle.loads(pickle.dumps(spec))
        if again != spec:
            raise AssertionError("a pickled TreeSpec came back different")


def worker(
    thread: int,
    registrations: int,
    round_trips: int,
    registered: Registered,
    counts: Counter[str],  # this thread's own
    errors: list[str],
    start: threading.Barrier,
) -> None:
    rng = random.Random(thread)
    # Interleave: spread the registrations over the round trips.
    every = max(1, round_trips // max(1, registrations))
    done_reg = 0
    start.wait()
    for i in range(round_trips + registrations):
        try:
            if done_reg < registrations and (i % (every + 1) == 0 or i >= round_trips):
                register_one(thread, done_reg, registered)
                done_reg += 1
                counts["registrations"] += 1
            else:
                round_trip(rng, registered)
                counts["round_trips"] += 1
        except Exception as e:
            counts["errors"] += 1
            if len(errors) < 5:
                errors.append("".join(traceback.format_exception(e))[-1500:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--registrations", type=int, default=265, help="per thread")
    parser.add_argument("--round-trips", type=int, default=5250, help="per thread")
    args = parser.parse_args()
    registered = Registered()
    for i in range(8):  # something to round-trip from the start
        register_one(999, i, registered)
    per_thread: list[Counter[str]] = [Counter() for _ in range(args.threads)]
    errors: list[str] = []
    barrier = threading.Barrier(args.threads)
    threads = [
        threading.Thread(
            target=worker,
            args=(
                t,
                args.registrations,
                args.round_trips,
                registered,
                per_thread[t],
                errors,
                barrier,
            ),
        )
        for t in range(args.threads)
    ]
    began = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    took = time.perf_counter() - began
    counts: Counter[str] = sum(per_thread, Counter())  # one counter per thread: no lost updates
    print(f"Python {sys.version.split()[0]}; backends active: {', '.join(tc.active_backends())}")
    print(f"threads:           {args.threads}")
    print(f"registrations:     {counts['registrations']:,} (+8 before the threads started)")
    print(f"round trips:       {counts['round_trips']:,} across {', '.join(FRAMEWORKS)}")
    print(f"errors:            {counts['errors']}")
    print(f"wall time:         {took:.1f} s")
    for e in errors:
        print("---", e, sep="\n")
    sys.exit(1 if counts["errors"] else 0)


if __name__ == "__main__":
    main()
