"""Pickling by name (issue 11) against pickle's own by-module-path pickling, on the workload
(a list of 100 instances with 8 leaves and 2 static fields), plain and frozen+slots classes:
``pickle.dumps``, ``pickle.loads``, ``copy.deepcopy`` and the size of the pickle. Each line:
the median times, the median of the run-by-run ratios and their 10th-90th percentiles.

Both sides are the same class, timed in alternating runs in one process: the by-name reducer
is installed in ``copyreg.dispatch_table`` for one side's class only.
Run: ``python benchmarks/bench_pickle.py``.
"""

from __future__ import annotations

import copy
import pickle
import sys

from _workload import make_class, make_tree, paired, show

import treeclass as tc
from treeclass import _pickle


def compare(label: str, **options: bool) -> None:
    tag = label.replace("+", "_")
    ByName = make_class(
        f"ByName_{tag}",
        lambda c: tc.register_dataclass(c, name=f"bench.pickle.ByName_{tag}"),
        **options,
    )
    ByPath = make_class(
        f"ByPath_{tag}",
        lambda c: tc.register_dataclass(c, name=f"bench.pickle.ByPath_{tag}", pickle_by_name=False),
        **options,
    )
    assert _pickle.is_installed(ByName) and not _pickle.is_installed(ByPath)
    for cls in (ByName, ByPath):  # importable by module path, as pickle needs
        setattr(sys.modules[cls.__module__], cls.__qualname__, cls)
    ours, theirs = make_tree(ByName), make_tree(ByPath)
    ours_data, theirs_data = pickle.dumps(ours), pickle.dumps(theirs)
    assert pickle.loads(ours_data) == ours and b"rebuild_by_name" in ours_data
    assert b"rebuild_by_name" not in theirs_data
    print(label)
    dumps = paired(lambda: pickle.dumps(ours), lambda: pickle.dumps(theirs))
    print(show("  pickle.dumps", dumps))
    loads = paired(lambda: pickle.loads(ours_data), lambda: pickle.loads(theirs_data))
    print(show("  pickle.loads", loads))
    deepcopy = paired(lambda: copy.deepcopy(ours), lambda: copy.deepcopy(theirs), number=20)
    print(show("  copy.deepcopy", deepcopy))
    print(f"  {'pickle size (bytes)':<20} {len(ours_data):9d}    vs {len(theirs_data):9d}")


def main() -> None:
    print(
        f"Python {sys.version.split()[0]}; workload: list of 100 instances, 8 leaves + 2 static; "
        "by name (ours) vs by module path (pickle's default), the same kind of class"
    )
    compare("plain")
    compare("frozen+slots", frozen=True, slots=True)


if __name__ == "__main__":
    main()
