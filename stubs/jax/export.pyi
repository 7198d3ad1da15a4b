# Partial stub of jax.export (see __init__.pyi).
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from _typeshed import Incomplete

_T = TypeVar("_T")

def register_pytree_node_serialization(
    nodetype: type[_T],
    *,
    serialized_name: str,
    serialize_auxdata: Callable[[Any], bytes],
    deserialize_auxdata: Callable[[bytes], Any],
    from_children: Callable[[Any, Sequence[Any]], Any] | None = None,
) -> type[_T]: ...
def register_namedtuple_serialization(nodetype: type[_T], *, serialized_name: str) -> type[_T]: ...
def __getattr__(name: str) -> Incomplete: ...
