# pyright: reportIncompleteStub=false
# Partial stub of optree.registry (see __init__.pyi).
import builtins
from collections.abc import Callable
from typing import Any

from _typeshed import Incomplete

from . import PyTreeEntry

# optree's marker for its global namespace; `register_pytree_node` refuses "" but accepts this
# (it is what optree.dataclasses and optree.integrations.attrs pass for namespace="").
__GLOBAL_NAMESPACE: str

class PyTreeNodeRegistryEntry:
    type: builtins.type
    flatten_func: Callable[[Any], tuple[Any, ...]]
    unflatten_func: Callable[[Any, Any], Any]
    path_entry_type: builtins.type[PyTreeEntry]
    namespace: str
    def __init__(
        self,
        type: builtins.type,
        flatten_func: Callable[[Any], tuple[Any, ...]],
        unflatten_func: Callable[[Any, Any], Any],
        *,
        path_entry_type: builtins.type[PyTreeEntry] = ...,
        kind: Any = ...,
        namespace: str = "",
    ) -> None: ...

def __getattr__(name: str) -> Incomplete: ...
