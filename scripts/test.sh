#!/usr/bin/env bash
# Set up a virtual environment and run the test suite.
#
#   bash scripts/test.sh          # fast default: the core suite and the tests of whatever
#                                 # frameworks the venv has, without the tests marked `slow`
#   bash scripts/test.sh --all    # the whole suite, as CI runs it: installs every framework
#                                 # (jax, torch 2.13.0 CPU, optree, transformers, equinox,
#                                 # orbax-checkpoint, flax, optax, chex, ray, mkdocs) and runs every test
#   TREECLASS_REQUIRE_BACKENDS=1 bash scripts/test.sh --all   # as CI: any skipped test fails
#   TREECLASS_FUZZ=full bash scripts/test.sh --all -m fuzz     # the randomized tests at their
#                                 # full case counts, as CI's fuzz job (other runs: a quarter)
#
# The fast default creates the venv with the package and its dev tools only (pytest,
# pytest-xdist, hypothesis, attrs, jsonschema, mypy, pyright, ruff, safetensors) if there is
# none, and uses an existing one as it is (after `--all` it has every framework, so their tests
# run too). Backend tests skip where their framework is missing.
#
# Other arguments go to pytest (a `-m` given there replaces the default `-m "not slow"`).
# TREECLASS_VENV picks the venv folder (default .venv), PYTHON the interpreter that makes it.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${TREECLASS_VENV:-.venv}"
python="${PYTHON:-python3}"

all=0
args=()
for arg in "$@"; do
  if [ "$arg" = "--all" ]; then all=1; else args+=("$arg"); fi
done

pip=("$venv/bin/python" -m pip install --quiet --disable-pip-version-check -c scripts/constraints.txt)
if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
fi

export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
# Python's default bytecode cache, even where the machine turns it off: the suite starts a few
# hundred processes that import treeclass (fresh ones, and children forked from a preloaded
# zygote), each of which would otherwise compile it again; and pytest keeps its rewritten test
# modules there for the next run.
unset PYTHONDONTWRITEBYTECODE
if [ "$all" = 1 ]; then
  # torch first and pinned: on these machines 2.13.0 is a local CPU wheel, while an unpinned
  # torch would download a multi-GB CUDA build.
  "${pip[@]}" "torch==2.13.0"
  "${pip[@]}" -e ".[dev,jax,optree,files,orbax,flax,docs]" transformers equinox optax chex ray
  exec "$venv/bin/python" -m pytest -n 2 ${args[@]+"${args[@]}"}
fi

if ! "$venv/bin/python" -c "import treeclass, pytest, xdist, hypothesis, attrs, jsonschema" \
    2>/dev/null; then
  "${pip[@]}" -e ".[dev]"
fi
exec "$venv/bin/python" -m pytest -n 2 -m "not slow" ${args[@]+"${args[@]}"}
