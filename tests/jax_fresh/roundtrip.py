"""Fresh-process half of the ``jax.export`` tests in ``tests/test_jax_backend.py``.

Usage: ``python roundtrip.py ORDER [--load FILE] [--save FILE]`` where ORDER is
``classes-first`` (import the classes, hence treeclass, then jax) or ``jax-first``. With
``--load``, deserializes an exported function saved by another process and calls it; with
``--save``, exports ``models.compute`` and writes ``Exported.serialize()``. Prints one JSON
line of findings for the test to check.
"""

from __future__ import annotations

import json
import sys
from typing import Any

ORDER = sys.argv[1]
if ORDER == "classes-first":
    import models

    JAX_IMPORTED_AFTER_CLASSES = "jax" not in sys.modules
    import jax
elif ORDER == "jax-first":
    import jax
    import models

    JAX_IMPORTED_AFTER_CLASSES = False
else:
    raise SystemExit(f"unknown order {ORDER!r}")

import numpy as np  # noqa: E402 (after the import order under test)

import treeclass  # noqa: E402


def _arg(flag: str) -> str | None:
    return sys.argv[sys.argv.index(flag) + 1] if flag in sys.argv else None


def _f(batch: Any) -> Any:
    return models.compute(batch, jax.tree_util.tree_map)


def main() -> None:
    findings: dict[str, Any] = {
        "order": ORDER,
        "jax_imported_after_classes": JAX_IMPORTED_AFTER_CLASSES,
        "backends": list(treeclass.active_backends()),
    }
    batch = models.make_batch()
    load, save = _arg("--load"), _arg("--save")
    if load is not None:
        with open(load, "rb") as fh:
            exported = jax.export.deserialize(bytearray(fh.read()))
        findings["in_tree_matches"] = exported.in_tree == jax.tree_util.tree_structure(
            ((batch,), {})
        )
        out, pair, stats = exported.call(batch)
        want = _f(batch)  # eager: the same function without jit or export
        findings["types"] = [
            type(out) is models.Output,
            type(pair) is models.Pair,
            type(pair.second) is models.Output,
            type(stats) is models.Stats,
        ]
        findings["statics"] = [out.shape, type(out.shape).__name__, out.mode, pair.second.mode]
        findings["nones"] = [out.loss is None, out.hidden is None, stats.extra is None]
        got_leaves = jax.tree_util.tree_leaves((out, pair, stats))
        want_leaves = jax.tree_util.tree_leaves(want)
        findings["values_match"] = len(got_leaves) == len(want_leaves) and all(
            np.allclose(np.asarray(g), np.asarray(w)) for g, w in zip(got_leaves, want_leaves)
        )
        findings["out_tree_matches"] = exported.out_tree == jax.tree_util.tree_structure(want)
    if save is not None:
        exported = jax.export.export(jax.jit(_f))(batch)
        with open(save, "wb") as fh:
            fh.write(exported.serialize())
        findings["saved"] = True
    print(json.dumps(findings))


if __name__ == "__main__":
    main()
