"""Hostile sizes (issue 13): how long the loader takes on the attack documents, and the walkers
on deep trees. The figures for the closing note of issue 13; tests only check behaviour.

    python benchmarks/bench_hostile.py [--timeout 120] [--depths 5000,10000,20000,40000,100000]

Every measurement runs in a fresh process with a timeout (the code before the fix needs minutes
on some of them), and prints seconds (median of ``--repeat`` runs inside that process), or
``> timeout``. Documents are about 1 MiB, the size the issue sets ("every document of at most
1 MiB must load or be refused in well under a second").
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import textwrap

DOCUMENTS = textwrap.dedent(
    """
    import json, statistics, sys, time
    from typing import Any
    import treeclass as tc

    kind, target, repeat = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    M61 = 2**61 - 1

    @tc.pytree_dataclass(name="bench.hostile.Flood")
    class Flood:
        x: Any
        s: Any = tc.field(static=True, default=None)

    def doc_of(n):
        if kind == "arity":
            return ('{"format":"treeclass.treespec","leaves":0,"nodes":['
                    + ",".join(['["",0,999999]'] * n) + '],"version":1}')
        if kind in ("dict_keys", "dict_control"):
            step = M61 if kind == "dict_keys" else 1
            keys = [{"int": hex(k * step + (2**60 if step == 1 else 0))} for k in range(1, n + 1)]
            nodes = [["dict", keys, n]] + [None] * n
            return json.dumps({"format": "treeclass.treespec", "leaves": n, "nodes": nodes,
                               "version": 1}, separators=(",", ":"))
        if kind in ("frozenset_static", "frozenset_control"):
            step = M61 if kind == "frozenset_static" else 1
            items = [{"int": hex(k * step + (2**60 if step == 1 else 0))} for k in range(1, n + 1)]
            state = {"data": ["x"], "none": [], "static": {"s": {"frozenset": items}}}
            return json.dumps({"format": "treeclass.treespec", "leaves": 1,
                               "nodes": [["bench.hostile.Flood", state, 1], None], "version": 1},
                              separators=(",", ":"))
        if kind == "deep_list":
            nodes = [["list", None, 1]] * n + [None]
            return json.dumps({"format": "treeclass.treespec", "leaves": 1, "nodes": nodes,
                               "version": 1}, separators=(",", ":"))
        raise SystemExit(kind)

    # The largest document of this kind within ``target`` bytes.
    lo, hi = 1, 1
    while len(doc_of(hi)) <= target:
        lo, hi = hi, hi * 2
    while lo < hi - 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if len(doc_of(mid)) <= target else (lo, mid)
    doc = doc_of(lo)

    def timed(f):
        times = []
        for _ in range(repeat):
            t = time.perf_counter()
            out = f()
            times.append(time.perf_counter() - t)
        return statistics.median(times), out

    report = {"bytes": len(doc), "entries": lo}
    try:
        report["load"], spec = timed(lambda: tc.treespec_loads(doc))
    except tc.TreespecLoadError as e:
        t = time.perf_counter()
        try:
            tc.treespec_loads(doc)
        except tc.TreespecLoadError:
            pass
        report["refuse"] = time.perf_counter() - t
        report["why"] = str(e)[:100]
    else:
        other = tc.treespec_loads(doc)
        report["hash"], _ = timed(lambda: hash(tc.treespec_loads(doc)))
        report["eq"], _ = timed(lambda: spec == other)
        report["dumps"], _ = timed(lambda: tc.treespec_dumps(spec))
        report["unflatten"], _ = timed(lambda: spec.unflatten([0] * spec.num_leaves))
    print(json.dumps(report))
    """
)

DEEP = textwrap.dedent(
    """
    import json, sys, time
    from typing import Any
    import treeclass as tc

    @tc.pytree_dataclass(name="bench.hostile.Link")
    class Link:
        nxt: Any
        v: Any = None

    kind, n, paths = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "paths"
    tree = "bottom" if kind == "comb" else 1
    for i in range(n):
        tree = Link(tree) if kind == "chain" else [tree] if kind == "list" else Link(tree, i)
    report = {}
    t = time.perf_counter(); leaves, spec = tc.tree_flatten(tree)
    report["flatten"] = time.perf_counter() - t
    print(json.dumps(report), flush=True)
    if paths:
        t = time.perf_counter(); tc.tree_flatten_with_path(tree)
        report["flatten_with_path"] = time.perf_counter() - t
        print(json.dumps(report), flush=True)
    t = time.perf_counter(); spec.unflatten(leaves)
    report["unflatten"] = time.perf_counter() - t
    t = time.perf_counter(); text = tc.treespec_dumps(spec)
    report["dumps"] = time.perf_counter() - t
    t = time.perf_counter(); tc.treespec_loads(text)
    report["loads"] = time.perf_counter() - t
    print(json.dumps(report), flush=True)
    """
)


def run(script: str, args: list[str], timeout: float) -> dict[str, object]:
    try:
        proc = subprocess.run(
            [sys.executable, "-c", script, *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        out, err, code = proc.stdout, proc.stderr, proc.returncode
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        err, code = "", None
    lines = out.strip().splitlines()
    report: dict[str, object] = json.loads(lines[-1]) if lines else {}
    if code is None:
        report["status"] = f"> {timeout:.0f} s timeout"
    elif code < 0:
        report["status"] = f"killed by signal {-code} (the OOM killer sends 9)"
    elif code != 0:
        report["status"] = (err.strip().splitlines() or ["failed"])[-1][:80]
    return report


def fmt(value: object) -> str:
    return f"{value:8.3f}" if isinstance(value, float) else f"{'-':>8}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--bytes", type=int, default=1 << 20)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--depths", default="5000,10000,20000,40000,100000")
    parser.add_argument("--skip-deep", action="store_true")
    args = parser.parse_args()
    print(f"Python {sys.version.split()[0]}; documents of at most {args.bytes:,} bytes")
    columns = ("load", "refuse", "ld+hash", "eq", "dumps", "unflat")
    print(f"{'document':18} {'bytes':>9} " + " ".join(f"{c:>8}" for c in columns) + "  status")
    for kind in (
        "arity",
        "dict_keys",
        "dict_control",
        "frozenset_static",
        "frozenset_control",
        "deep_list",
    ):
        r = run(DOCUMENTS, [kind, str(args.bytes), str(args.repeat)], args.timeout)
        cells = " ".join(fmt(r.get(k)) for k in ("load", "refuse", "hash", "eq", "dumps"))
        print(
            f"{kind:18} {r.get('bytes', '-'):>9} {cells} {fmt(r.get('unflatten'))}  "
            f"{r.get('status', r.get('why', 'ok'))}",
            flush=True,
        )
    if args.skip_deep:
        return
    print()
    ops = ("flatten", "flatten_with_path", "unflatten", "dumps", "loads")
    print(f"{'deep tree':18} {'depth':>9} " + " ".join(f"{o[:8]:>8}" for o in ops) + "  status")
    for kind in ("chain", "list", "comb"):
        for depth in (int(d) for d in args.depths.split(",")):
            # A comb's key paths are tuples of length 1..depth (as in JAX, torch and optree):
            # depth**2 / 2 entries in the output, 800 million at 40,000. Past 20,000 levels,
            # flatten_with_path is bound by its output, so it is left out.
            paths = kind != "comb" or depth <= 20_000
            r = run(DEEP, [kind, str(depth), "paths" if paths else "-"], args.timeout)
            cells = " ".join(fmt(r.get(o)) for o in ops)
            status = r.get("status", "ok" if paths else "ok (flatten_with_path: output-bound)")
            print(f"{kind:18} {depth:>9} {cells}  {status}", flush=True)


if __name__ == "__main__":
    main()
