#!/usr/bin/env bash
# Serve the documentation site locally (mkdocs.yml), rebuilding it when a page or a docstring
# changes:
#
#   bash scripts/docs.sh                  # http://127.0.0.1:8000
#   bash scripts/docs.sh -a 0.0.0.0:8080  # other arguments go to `mkdocs serve`
#   bash scripts/docs.sh build            # or any mkdocs command: `mkdocs build --strict` as CI
#                                         (not with -q: mkdocs then ignores warnings in strict mode)
#
# Uses the same venv as scripts/test.sh (TREECLASS_VENV, default .venv; PYTHON is the
# interpreter that makes it, Python 3.11+ for the docs tools): creates it if there is none,
# and installs the package with its `docs` extra (mkdocs, mkdocs-material, mkdocstrings-python,
# pinned by scripts/constraints.txt) if the venv does not have them.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${TREECLASS_VENV:-.venv}"
python="${PYTHON:-python3}"

if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
fi
if ! "$venv/bin/python" -c "import treeclass, mkdocs, material, mkdocstrings_handlers.python" \
    2>/dev/null; then
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    -c scripts/constraints.txt -e ".[docs]"
fi

export NO_MKDOCS_2_WARNING=1
if [ "$#" -gt 0 ] && [[ "$1" != -* ]]; then
  command="$1"
  shift
  if [ "$command" = build ]; then
    exec "$venv/bin/python" -m mkdocs build --strict "$@"
  fi
  exec "$venv/bin/python" -m mkdocs "$command" "$@"
fi
exec "$venv/bin/python" -m mkdocs serve "$@"
