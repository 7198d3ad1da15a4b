# Partial stubs for flax: only what treeclass uses (treeclass._integrations_flax), so that
# `mypy --strict src/` and pyright check it with or without flax installed. Everything else is
# Any. tests/test_stubs.py runs mypy's stubtest against the installed flax (checked: 0.12.8).
from _typeshed import Incomplete

from . import serialization as serialization

def __getattr__(name: str) -> Incomplete: ...
