# pyright: reportIncompleteStub=false
# Partial stubs for optree: exactly the entry points treeclass's optree backend uses, so that
# `mypy --strict src/` and pyright check the adapter with or without optree installed.
# Checked against optree 0.13.0 and 0.20.0. Everything else is typed as incomplete (Any).
import builtins
from collections.abc import Callable
from typing import Any, ClassVar, Protocol

from _typeshed import Incomplete

from . import registry as registry
from .registry import PyTreeNodeRegistryEntry

class PyTreeEntry:
    entry: Any
    type: builtins.type
    def __init__(self, entry: Any, type: builtins.type, kind: Any) -> None: ...
    def __call__(self, obj: Any, /) -> Any: ...
    def codify(self, /, node: str = "") -> str: ...

class GetAttrEntry(PyTreeEntry):
    __slots__: ClassVar[tuple[()]]
    entry: str
    @property
    def name(self, /) -> str: ...

class _RegisterPytreeNode(Protocol):
    def __call__(
        self,
        cls: type,
        /,
        flatten_func: Callable[[Any], tuple[Any, ...]],
        unflatten_func: Callable[[Any, Any], Any],
        *,
        path_entry_type: type[PyTreeEntry] = ...,
        namespace: str,
    ) -> type: ...
    def get(self, cls: type, /, *, namespace: str = "") -> PyTreeNodeRegistryEntry | None: ...

register_pytree_node: _RegisterPytreeNode

def unregister_pytree_node(cls: type, /, *, namespace: str) -> PyTreeNodeRegistryEntry: ...
def __getattr__(name: str) -> Incomplete: ...
