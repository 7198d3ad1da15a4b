# Partial stub of jax.tree_util (see __init__.pyi).
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from _typeshed import Incomplete
from typing_extensions import disjoint_base

_T = TypeVar("_T")

@disjoint_base
class GetAttrKey:
    @property
    def name(self) -> str: ...
    def __init__(self, name: str) -> None: ...

def register_pytree_with_keys(
    nodetype: type[_T],
    flatten_with_keys: Callable[[_T], tuple[Iterable[tuple[Any, Any]], Any]],
    unflatten_func: Callable[[Any, Iterable[Any]], _T],
    flatten_func: Callable[[_T], tuple[Iterable[Any], Any]] | None = None,
) -> None: ...
def register_dataclass(
    nodetype: type[_T],
    data_fields: Sequence[str] | None = None,
    meta_fields: Sequence[str] | None = None,
    drop_fields: Sequence[str] = (),
) -> type[_T]: ...
def is_tree_node(typ: type) -> bool: ...
def __getattr__(name: str) -> Incomplete: ...
