# Partial stubs for jax: only what treeclass.backends.jax uses, so that
# `mypy --strict src/` checks the adapter without jax installed. Everything else is Any.
# tests/test_jax_backend.py::test_stubs_agree_with_jax runs mypy's stubtest against the real
# jax to keep these honest.
from _typeshed import Incomplete

from . import export as export
from . import tree_util as tree_util

__version__: str

def __getattr__(name: str) -> Incomplete: ...
