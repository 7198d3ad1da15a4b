# Partial stub of torch/utils/_pytree.py (torch 2.13.0): the entry points and the private
# registry state treeclass's torch adapter uses.
import threading
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

Context = Any
DumpableContext = Any
FlattenFn = Callable[[Any], tuple[Iterable[Any], Context]]
UnflattenFn = Callable[[Iterable[Any], Context], Any]
FlattenWithKeysFn = Callable[[Any], tuple[Iterable[tuple[Any, Any]], Context]]
ToDumpableContextFn = Callable[[Context], DumpableContext]
FromDumpableContextFn = Callable[[DumpableContext], Context]

NO_SERIALIZED_TYPE_NAME_FOUND: str

class NodeDef(NamedTuple):
    type: type[Any]
    flatten_fn: FlattenFn
    unflatten_fn: UnflattenFn
    flatten_with_keys_fn: FlattenWithKeysFn | None

class _SerializeNodeDef(NamedTuple):
    typ: type[Any]
    serialized_type_name: str
    to_dumpable_context: ToDumpableContextFn | None
    from_dumpable_context: FromDumpableContextFn | None

_NODE_REGISTRY_LOCK: threading.RLock
SUPPORTED_NODES: dict[type[Any], NodeDef]
SUPPORTED_SERIALIZED_TYPES: dict[type[Any], _SerializeNodeDef]
SERIALIZED_TYPE_TO_PYTHON_TYPE: dict[str, type[Any]]
CONSTANT_NODES: set[type]
_cxx_pytree_imported: bool
_cxx_pytree_pending_imports: list[Any]

class GetAttrKey:
    name: str
    def __init__(self, name: str) -> None: ...
    def get(self, obj: Any) -> Any: ...

class TreeSpec:
    type: Any
    def __init__(self, type: Any, context: Context, children_specs: list[TreeSpec]) -> None: ...
    def __repr__(self, indent: int = 0) -> str: ...
    num_leaves: int
    num_nodes: int
    num_children: int
    def unflatten(self, leaves: Iterable[Any]) -> Any: ...
    def is_leaf(self) -> bool: ...

def register_pytree_node(
    cls: type[Any],
    flatten_fn: FlattenFn,
    unflatten_fn: UnflattenFn,
    *,
    serialized_type_name: str | None = None,
    to_dumpable_context: ToDumpableContextFn | None = None,
    from_dumpable_context: FromDumpableContextFn | None = None,
    flatten_with_keys_fn: FlattenWithKeysFn | None = None,
) -> None: ...
def tree_structure(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> TreeSpec: ...
def tree_flatten(
    tree: Any, is_leaf: Callable[[Any], bool] | None = None
) -> tuple[list[Any], TreeSpec]: ...
def _register_namedtuple(cls: type[Any], *, serialized_type_name: str) -> None: ...
def treespec_dumps(treespec: TreeSpec, protocol: int | None = None) -> str: ...
def treespec_leaf() -> TreeSpec: ...

class _LruCached:
    def __call__(self, serialized: str) -> TreeSpec: ...
    def cache_clear(self) -> None: ...

treespec_loads: _LruCached
