#!/usr/bin/env bash
# Set up a virtual environment with everything the test suite needs (the package with its dev
# tools, jax, torch, optree, transformers, the JAX ecosystem: equinox, orbax-checkpoint,
# flax, optax, chex, and ray for the distributed tests) and run the whole test suite.
#
#   bash scripts/test.sh            # all tests; backend tests skip if a framework is missing
#   TREECLASS_REQUIRE_BACKENDS=1 bash scripts/test.sh   # as CI: any skipped test fails the run
#
# Extra arguments go to pytest. TREECLASS_VENV picks the venv folder (default .venv).
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${TREECLASS_VENV:-.venv}"
python="${PYTHON:-python3}"

if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv "$venv"
fi
pip=("$venv/bin/python" -m pip install --quiet --disable-pip-version-check -c scripts/constraints.txt)
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
# torch first and pinned: on these machines 2.13.0 is a local CPU wheel, while an unpinned torch
# would download a multi-GB CUDA build.
"${pip[@]}" "torch==2.13.0"
"${pip[@]}" -e ".[dev,jax,optree,files,orbax,flax]" transformers equinox optax chex ray

export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
exec "$venv/bin/python" -m pytest -n 2 "$@"
